#include "drasync/zap.h"

#include "drasync/buf.h"
#include "drasync/keys.h"
#include "refusals.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zmq.h>

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define AUTH_FILE_MAX (1u << 20)

struct entry {
	char key[DS_KEY_Z85_LEN + 1];
	char name[128];
};

struct ds_authorized {
	struct entry *entries;
	size_t n;
};

struct ds_zap {
	void *sock;
	pthread_t thread;
	int started;
	atomic_int stop;
	char path[1024];
	char domain[128];
	pthread_mutex_t mu; /* auth and seen: the ZAP thread and ds_zap_admits() */
	ds_authorized *auth;
	struct stat seen; /* of the file the current list came from */
	ds_transport_event_fn on_event;
	void *event_ud;
	ds_refusals *refusals; /* under mu; NULL: each refusal logged at WARN */
};

static void emit(ds_transport_event_fn fn, void *ud, enum ds_log_level level, const char *name,
		 const char *peer, const char *detail)
{
	ds_transport_event ev = {level, name, peer ? peer : "", detail ? detail : ""};

	if (fn)
		fn(ud, &ev);
}

void ds_authorized_free(ds_authorized *a)
{
	if (!a)
		return;
	explicit_bzero(a->entries, a->n * sizeof(*a->entries));
	free(a->entries);
	free(a);
}

const char *ds_authorized_lookup(const ds_authorized *a, const char *public_z85)
{
	if (!a || !public_z85)
		return NULL;
	for (size_t i = 0; i < a->n; i++)
		if (strcmp(a->entries[i].key, public_z85) == 0)
			return a->entries[i].name;
	return NULL;
}

size_t ds_authorized_count(const ds_authorized *a)
{
	return a ? a->n : 0;
}

const char *ds_authorized_name_at(const ds_authorized *a, size_t i)
{
	return a && i < a->n ? a->entries[i].name : NULL;
}

static void bad_line(ds_transport_event_fn fn, void *ud, const char *path, int lineno,
		     const char *why)
{
	char detail[1200];

	snprintf(detail, sizeof(detail), "%s:%d: %s; line skipped", path, lineno, why);
	emit(fn, ud, DS_LOG_WARN, "authorized_sources_bad_line", "", detail);
}

int ds_authorized_load(ds_authorized **out, const char *path, ds_transport_event_fn on_event,
		       void *event_ud, ds_err *err)
{
	ds_authorized *a = NULL;
	char *text = NULL, *line, *save = NULL;
	size_t cap = 0;
	int rc = 0, lineno = 0;

	rc = ds_read_file(path, AUTH_FILE_MAX, &text, NULL);
	if (rc == -E2BIG) {
		rc = -EFBIG;
		ds_err_set(err, "authorized-sources file %s is larger than %u bytes", path,
			   AUTH_FILE_MAX);
		goto out;
	} else if (rc == -EIO) {
		ds_err_set(err, "cannot read authorized-sources file %s", path);
		goto out;
	} else if (rc < 0 && rc != -ENOMEM) {
		ds_err_set(err, "cannot open authorized-sources file %s: %s", path, strerror(-rc));
		goto out;
	} else if (rc < 0) {
		goto out;
	}
	a = calloc(1, sizeof(*a));
	if (!a) {
		rc = -ENOMEM;
		goto out;
	}
	/* strtok_r would skip empty lines and so miscount: split by hand. */
	for (line = text; line && *line; line = save) {
		char name[256], key[256], extra[8];
		int fields;

		lineno++;
		save = strchr(line, '\n');
		if (save)
			*save++ = '\0';
		while (*line == ' ' || *line == '\t')
			line++;
		if (!*line || *line == '#' || *line == '\r')
			continue;
		fields = sscanf(line, "%255s %255s %7s", name, key, extra);
		if (fields != 2) {
			bad_line(on_event, event_ud, path, lineno,
				 "expected \"name Z85-public-key\"");
			continue;
		}
		if (strlen(name) >= sizeof(a->entries[0].name)) {
			bad_line(on_event, event_ud, path, lineno, "name longer than 127 bytes");
			continue;
		}
		if (!ds_keys_z85_valid(key)) {
			bad_line(on_event, event_ud, path, lineno,
				 "not a 40-character Z85 public key");
			continue;
		}
		if (ds_authorized_lookup(a, key)) {
			bad_line(on_event, event_ud, path, lineno, "key listed twice");
			continue;
		}
		if (ds_grow((void **)&a->entries, &cap, a->n + 1, sizeof(*a->entries)) < 0) {
			rc = -ENOMEM;
			goto out;
		}
		memcpy(a->entries[a->n].name, name, strlen(name) + 1);
		memcpy(a->entries[a->n].key, key, DS_KEY_Z85_LEN + 1);
		a->n++;
	}
out:
	free(text);
	if (rc < 0) {
		ds_authorized_free(a);
		return ds_err_fallback(err, rc);
	}
	*out = a;
	return 0;
}

/* Re-read the file when it is not the one the list came from. */
static void refresh(ds_zap *zap)
{
	struct stat st;
	ds_authorized *a = NULL;
	ds_err err = {0};
	int rc;

	if (stat(zap->path, &st) != 0) {
		if (zap->auth) {
			emit(zap->on_event, zap->event_ud, DS_LOG_ERROR,
			     "authorized_sources_unreadable", "",
			     "authorized-sources file is gone: admitting nobody");
			ds_authorized_free(zap->auth);
			zap->auth = NULL;
		}
		memset(&zap->seen, 0, sizeof(zap->seen));
		return;
	}
	if (zap->auth && st.st_ino == zap->seen.st_ino && st.st_size == zap->seen.st_size &&
	    st.st_mtim.tv_sec == zap->seen.st_mtim.tv_sec &&
	    st.st_mtim.tv_nsec == zap->seen.st_mtim.tv_nsec &&
	    st.st_ctim.tv_sec == zap->seen.st_ctim.tv_sec &&
	    st.st_ctim.tv_nsec == zap->seen.st_ctim.tv_nsec)
		return;
	rc = ds_authorized_load(&a, zap->path, zap->on_event, zap->event_ud, &err);
	if (rc < 0) {
		emit(zap->on_event, zap->event_ud, DS_LOG_ERROR, "authorized_sources_unreadable",
		     "", err.msg);
		ds_authorized_free(zap->auth);
		zap->auth = NULL;
		return;
	}
	ds_authorized_free(zap->auth);
	zap->auth = a;
	zap->seen = st;
	{
		char detail[1200];
		snprintf(detail, sizeof(detail), "%s: %zu authorized source key(s)", zap->path,
			 a->n);
		emit(zap->on_event, zap->event_ud, DS_LOG_INFO, "authorized_sources_loaded", "",
		     detail);
	}
}

static int send_str(void *sock, const char *s, int more)
{
	return zmq_send(sock, s, strlen(s), more ? ZMQ_SNDMORE : 0);
}

/* One request: version, request id, domain, address, identity, mechanism, credentials... */
static void serve(ds_zap *zap)
{
	zmq_msg_t parts[8];
	size_t n = 0;
	int more = 1;
	char version[8] = "", domain[128] = "", address[128] = "", mechanism[16] = "";
	char key[DS_KEY_Z85_LEN + 1] = "";
	const char *status = "400", *text = "refused";
	char user[128] = "", detail[300];
	uint8_t meta[1 + sizeof(DS_ZAP_KEY_PROPERTY) + 4 + DS_KEY_Z85_LEN];
	size_t meta_len = 0;

	while (more) {
		zmq_msg_t tmp;
		zmq_msg_t *m = n < 8 ? &parts[n] : &tmp;
		zmq_msg_init(m);
		if (zmq_msg_recv(m, zap->sock, 0) < 0) {
			zmq_msg_close(m);
			break;
		}
		more = zmq_msg_more(m);
		if (n < 8)
			n++;
		else
			zmq_msg_close(m);
	}
	if (n < 6) {
		for (size_t i = 0; i < n; i++)
			zmq_msg_close(&parts[i]);
		return; /* not a ZAP request; libzmq never sends one */
	}
#define COPY(dst, i)                                                                               \
	do {                                                                                       \
		size_t l = zmq_msg_size(&parts[i]);                                                \
		if (l >= sizeof(dst))                                                              \
			l = sizeof(dst) - 1;                                                       \
		memcpy(dst, zmq_msg_data(&parts[i]), l);                                           \
		dst[l] = '\0';                                                                     \
	} while (0)
	COPY(version, 0);
	COPY(domain, 2);
	COPY(address, 3);
	COPY(mechanism, 5);
#undef COPY
	pthread_mutex_lock(&zap->mu);
	refresh(zap);
	if (strcmp(domain, zap->domain) != 0) {
		text = "wrong ZAP domain";
	} else if (strcmp(mechanism, "CURVE") != 0 || n < 7 || zmq_msg_size(&parts[6]) != 32) {
		text = "CURVE required";
	} else {
		const char *name;
		zmq_z85_encode(key, zmq_msg_data(&parts[6]), 32);
		name = ds_authorized_lookup(zap->auth, key);
		if (name) {
			status = "200";
			text = "OK";
			snprintf(user, sizeof(user), "%s", name);
		} else {
			text = "unknown key";
		}
	}
	pthread_mutex_unlock(&zap->mu);
	if (strcmp(status, "200") == 0) {
		/* ZMTP metadata: the key travels with every message of the
		 * connection, so the receiver can tell when it is revoked. */
		size_t nl = sizeof(DS_ZAP_KEY_PROPERTY) - 1;
		meta[meta_len++] = (uint8_t)nl;
		memcpy(meta + meta_len, DS_ZAP_KEY_PROPERTY, nl);
		meta_len += nl;
		meta[meta_len++] = 0;
		meta[meta_len++] = 0;
		meta[meta_len++] = 0;
		meta[meta_len++] = DS_KEY_Z85_LEN;
		memcpy(meta + meta_len, key, DS_KEY_Z85_LEN);
		meta_len += DS_KEY_Z85_LEN;
	}
	if (strcmp(status, "200") == 0) {
		char qu[300];
		snprintf(detail, sizeof(detail), "source %s admitted (key %s)",
			 ds_log_quote(user, qu, sizeof(qu)), key);
		emit(zap->on_event, zap->event_ud, DS_LOG_INFO, "zap_admitted", address, detail);
	} else {
		snprintf(detail, sizeof(detail), "%s (mechanism %s, key %s)", text, mechanism,
			 key[0] ? key : "none");
		ds_refusals *g;
		pthread_mutex_lock(&zap->mu);
		g = zap->refusals;
		pthread_mutex_unlock(&zap->mu);
		if (g)
			ds_refusals_report(g, DS_LOG_WARN, "zap_refused", address, address, detail);
		else
			emit(zap->on_event, zap->event_ud, DS_LOG_WARN, "zap_refused", address,
			     detail);
	}
	send_str(zap->sock, "1.0", 1);
	zmq_send(zap->sock, zmq_msg_data(&parts[1]), zmq_msg_size(&parts[1]), ZMQ_SNDMORE);
	send_str(zap->sock, status, 1);
	send_str(zap->sock, text, 1);
	send_str(zap->sock, user, 1);
	zmq_send(zap->sock, meta, meta_len, 0);
	(void)version;
	for (size_t i = 0; i < n; i++)
		zmq_msg_close(&parts[i]);
}

static void *zap_thread(void *arg)
{
	ds_zap *zap = arg;

	while (!atomic_load(&zap->stop)) {
		zmq_pollitem_t item = {zap->sock, 0, ZMQ_POLLIN, 0};
		int rc = zmq_poll(&item, 1, 100);
		if (rc < 0 && zmq_errno() == ETERM)
			break;
		if (rc > 0 && (item.revents & ZMQ_POLLIN))
			serve(zap);
	}
	return NULL;
}

int ds_zap_new(ds_zap **out, void *zctx, const char *authorized_path, const char *domain,
	       ds_transport_event_fn on_event, void *event_ud, ds_err *err)
{
	ds_zap *zap = calloc(1, sizeof(*zap));
	int linger = 0, rc = 0;

	if (!zap)
		return ds_err_fallback(err, -ENOMEM);
	snprintf(zap->path, sizeof(zap->path), "%s", authorized_path);
	snprintf(zap->domain, sizeof(zap->domain), "%s", domain ? domain : DS_ZAP_DOMAIN);
	zap->on_event = on_event;
	zap->event_ud = event_ud;
	pthread_mutex_init(&zap->mu, NULL);
	rc = ds_authorized_load(&zap->auth, zap->path, on_event, event_ud, err);
	if (rc < 0)
		goto out;
	stat(zap->path, &zap->seen);
	zap->sock = zmq_socket(zctx, ZMQ_REP);
	if (!zap->sock) {
		rc = -zmq_errno();
		ds_err_set(err, "cannot create the ZAP socket: %s", zmq_strerror(-rc));
		goto out;
	}
	zmq_setsockopt(zap->sock, ZMQ_LINGER, &linger, sizeof(linger));
	if (zmq_bind(zap->sock, ZAP_ENDPOINT) != 0) {
		rc = -zmq_errno();
		ds_err_set(err, "cannot bind the ZAP handler: %s", zmq_strerror(-rc));
		goto out;
	}
	if (pthread_create(&zap->thread, NULL, zap_thread, zap) != 0) {
		rc = -EAGAIN;
		ds_err_set(err, "cannot start the ZAP thread");
		goto out;
	}
	zap->started = 1;
out:
	if (rc < 0) {
		ds_zap_free(zap);
		return ds_err_fallback(err, rc);
	}
	*out = zap;
	return 0;
}

void ds_zap_free(ds_zap *zap)
{
	if (!zap)
		return;
	if (zap->started) {
		atomic_store(&zap->stop, 1);
		pthread_join(zap->thread, NULL);
	}
	if (zap->sock)
		zmq_close(zap->sock);
	ds_authorized_free(zap->auth);
	pthread_mutex_destroy(&zap->mu);
	free(zap);
}

bool ds_zap_admits(ds_zap *zap, const char *name, const char *public_z85)
{
	const char *now;
	bool ok;

	if (!zap || !name || !public_z85)
		return false;
	pthread_mutex_lock(&zap->mu);
	refresh(zap);
	now = ds_authorized_lookup(zap->auth, public_z85);
	ok = now && strcmp(now, name) == 0;
	pthread_mutex_unlock(&zap->mu);
	return ok;
}

void ds_zap_set_refusals(ds_zap *zap, ds_refusals *g)
{
	pthread_mutex_lock(&zap->mu);
	zap->refusals = g;
	pthread_mutex_unlock(&zap->mu);
}

const char *ds_zap_path(const ds_zap *zap)
{
	return zap->path;
}
