#include "drasync/receiver.h"

#include "drasync/buf.h"
#include "drasync/clock.h"
#include "drasync/version.h"
#include "drasync/zap.h"
#include "receiver_conns.h"
#include "refusals.h"
#include "transport_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <zmq.h>

#ifndef ZMQ_ZAP_ENFORCE_DOMAIN
#define ZMQ_ZAP_ENFORCE_DOMAIN 93 /* draft in libzmq 4.3 headers, honoured by the library */
#endif

#define MAX_SESSIONS 64
#define RID_MAX 256
#define FEEDBACK_MAX 1024 /* apply results per Ack */
/* Open sessions are written to the ledger's presence table this often (the
 * split-brain guard of failover reads it). */
#define PRESENCE_MS 2000
/* Ledger bytes are summed from the ledger once at start and added up on
 * commit; while a source has a bytes quota they are summed again at least
 * this often, so records deleted by compaction free their quota. The sum
 * reads the whole records table (about 0.8 s for 500,000 records, 340 MB):
 * it waits LEDGER_BYTES_PACE times as long as the last one took, so it never
 * holds the receiver more than 2% of the time. */
#define LEDGER_BYTES_MS 10000
#define LEDGER_BYTES_PACE 50

struct session {
	bool used;
	uint8_t rid[RID_MAX];
	size_t rid_len;
	char source[128];
	char key[DS_KEY_Z85_LEN + 1]; /* its CURVE key, checked against revocation */
	char peer[64];		      /* "ip:port" of its connection at Hello */
	int fd;			      /* that connection's descriptor */
	uint64_t epoch;
	uint64_t committed;
	uint64_t granted; /* the source may send up to this seq */
	int64_t last_seen;
};

struct ds_receiver {
	ds_receiver_config cfg;
	char endpoint[256];
	void *zctx;
	void *router;
	ds_zap *zap;
	ds_inbox *inbox;
	ds_wire_decoder *dec;
	struct ds_monitor mon;
	struct session sessions[MAX_SESSIONS];
	ds_conns *conns; /* the monitor's view of the TCP connections */
	unsigned unauth; /* unauthenticated connections as last told to on_unauth */
	ds_wire_result *results;
	size_t results_cap;
	ds_wire_result applied[FEEDBACK_MAX];
	ds_quota *quota;    /* backlog and ledger bytes per source, as last counted plus commits */
	bool throttled;	    /* the total backlog is at max_unapplied */
	bool bytes_counted; /* the ledger bytes were summed once */
	int64_t next_bytes; /* the next recount, while a source has a bytes quota */
	/* Handshake failures carry no descriptor; libzmq reports the disconnect of
	 * the same connection right after, from the same I/O thread (one per context). */
	char pending_failure[200];
	bool pending_auth; /* that failure is a ZAP refusal, already logged by the ZAP handler */
	ds_refusals *refusals;
	atomic_int stop;
	/* The monitor has its own thread: a connection that fails its handshake
	 * is gone within milliseconds, and its address can only be read while it
	 * lives, not after a long commit in the main loop. */
	pthread_t mon_thread;
	int mon_started;
	atomic_int mon_stop;
};

static void emit(ds_receiver *r, enum ds_log_level level, const char *name, const char *peer,
		 const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void emit(ds_receiver *r, enum ds_log_level level, const char *name, const char *peer,
		 const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ds_transport_event_emitv(r->cfg.on_event, r->cfg.event_ud, level, name, peer, fmt, ap);
	va_end(ap);
}

static void *monitor_main(void *arg);

void ds_receiver_config_default(ds_receiver_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->credit = 2048;
	ds_transport_tuning_default(&cfg->tuning);
}

const char *ds_receiver_endpoint(const ds_receiver *r)
{
	return r->endpoint;
}

ds_quota *ds_receiver_quota(ds_receiver *r)
{
	return r->quota;
}

void ds_receiver_stop(ds_receiver *r)
{
	atomic_store(&r->stop, 1);
}

int ds_receiver_new(ds_receiver **out, const ds_receiver_config *cfg, ds_err *err)
{
	ds_receiver *r = calloc(1, sizeof(*r));
	int one = 1, rc = 0;
	size_t len;

	if (!r)
		return ds_err_fallback(err, -ENOMEM);
	r->cfg = *cfg;
	/* A config not started from the defaults: ZMQ_MAXMSGSIZE 0 would refuse every frame. */
	if (r->cfg.tuning.limits.max_frame == 0 || r->cfg.tuning.heartbeat_ivl_ms <= 0)
		ds_transport_tuning_default(&r->cfg.tuning);
	if (!r->cfg.credit)
		r->cfg.credit = 2048;
	if (!r->cfg.max_unapplied)
		r->cfg.max_unapplied = 100000;
	if (r->cfg.feedback_ms <= 0)
		r->cfg.feedback_ms = 200;
	if (r->cfg.tuning.handshake_timeout_ms <= 0)
		r->cfg.tuning.handshake_timeout_ms = 5000;
	if (!r->cfg.max_unauth)
		r->cfg.max_unauth = 64;
	if (!r->cfg.max_unauth_per_address)
		r->cfg.max_unauth_per_address = 8;
	if (r->cfg.max_unauth > DS_CONNS_MAX || r->cfg.max_unauth_per_address > r->cfg.max_unauth) {
		ds_err_set(err,
			   "receiver: max_unauth %u must be at most %d and at least "
			   "max_unauth_per_address %u",
			   r->cfg.max_unauth, DS_CONNS_MAX, r->cfg.max_unauth_per_address);
		rc = -EINVAL;
		goto out;
	}
	if (!cfg->endpoint || !cfg->keys || !cfg->authorized_sources || !cfg->inbox_path) {
		ds_err_set(err,
			   "receiver: endpoint, keys, authorized sources and inbox are required");
		rc = -EINVAL;
		goto out;
	}
	{
		/* A connection open past the handshake timeout has passed it: libzmq
		 * closes the others then; the second more covers the monitor's lag. */
		ds_conns_limits lim = {r->cfg.max_unauth, r->cfg.max_unauth_per_address,
				       r->cfg.tuning.handshake_timeout_ms + 1000};
		rc = ds_conns_new(&r->conns, &lim);
		if (rc < 0)
			goto out;
	}
	rc = ds_inbox_open(&r->inbox, cfg->inbox_path, err);
	if (rc < 0)
		goto out;
	rc = ds_quota_new(&r->quota, r->cfg.max_unapplied, cfg->source_limits, cfg->limits_ud,
			  cfg->on_event, cfg->event_ud);
	if (rc < 0)
		goto out;
	rc = ds_wire_decoder_new(&r->dec, &r->cfg.tuning.limits);
	if (rc < 0)
		goto out;
	r->zctx = zmq_ctx_new();
	if (!r->zctx) {
		rc = -ENOMEM;
		goto out;
	}
	rc = ds_refusals_new(&r->refusals, cfg->refusal_window_ms, cfg->on_event, cfg->event_ud);
	if (rc < 0)
		goto out;
	/* ZAP first: a handshake arriving before it would be refused. */
	rc = ds_zap_new(&r->zap, r->zctx, cfg->authorized_sources,
			cfg->zap_domain ? cfg->zap_domain : DS_ZAP_DOMAIN, cfg->on_event,
			cfg->event_ud, err);
	if (rc < 0)
		goto out;
	ds_zap_set_refusals(r->zap, r->refusals);
	r->router = zmq_socket(r->zctx, ZMQ_ROUTER);
	if (!r->router) {
		rc = -zmq_errno();
		goto out;
	}
	{
		const char *domain = cfg->zap_domain ? cfg->zap_domain : DS_ZAP_DOMAIN;
		if (zmq_setsockopt(r->router, ZMQ_CURVE_SERVER, &one, sizeof(one)) ||
		    zmq_setsockopt(r->router, ZMQ_CURVE_SECRETKEY, cfg->keys->secret_z85,
				   DS_KEY_Z85_LEN) ||
		    zmq_setsockopt(r->router, ZMQ_ZAP_DOMAIN, domain, strlen(domain)) ||
		    zmq_setsockopt(r->router, ZMQ_ZAP_ENFORCE_DOMAIN, &one, sizeof(one)) ||
		    zmq_setsockopt(r->router, ZMQ_HANDSHAKE_IVL,
				   &r->cfg.tuning.handshake_timeout_ms, sizeof(int)) ||
		    zmq_setsockopt(r->router, ZMQ_ROUTER_MANDATORY, &one, sizeof(one))) {
			rc = -zmq_errno();
			ds_err_set(err, "cannot configure the CURVE server socket: %s",
				   zmq_strerror(-rc));
			goto out;
		}
	}
	rc = ds_sock_tune(r->router, &r->cfg.tuning);
	if (rc < 0) {
		ds_err_set(err, "cannot tune the server socket: %s", zmq_strerror(-rc));
		goto out;
	}
	rc = ds_monitor_start(&r->mon, r->zctx, r->router);
	if (rc < 0) {
		ds_err_set(err, "cannot monitor the server socket: %s", zmq_strerror(-rc));
		goto out;
	}
	if (pthread_create(&r->mon_thread, NULL, monitor_main, r) != 0) {
		rc = -EAGAIN;
		ds_err_set(err, "cannot start the monitor thread");
		goto out;
	}
	r->mon_started = 1;
	if (zmq_bind(r->router, cfg->endpoint) != 0) {
		rc = -zmq_errno();
		ds_err_set(err, "cannot listen on %s: %s", cfg->endpoint, zmq_strerror(-rc));
		goto out;
	}
	len = sizeof(r->endpoint);
	zmq_getsockopt(r->router, ZMQ_LAST_ENDPOINT, r->endpoint, &len);
	{
		const char *colon = strrchr(r->endpoint, ':');
		ds_conns_set_port(r->conns, colon ? (unsigned)strtoul(colon + 1, NULL, 10) : 0);
	}
	emit(r, DS_LOG_INFO, "listening", r->endpoint, "CURVE server, ZAP domain %s",
	     cfg->zap_domain ? cfg->zap_domain : DS_ZAP_DOMAIN);
out:
	if (rc < 0) {
		ds_receiver_free(r);
		return ds_err_fallback(err, rc);
	}
	*out = r;
	return 0;
}

void ds_receiver_free(ds_receiver *r)
{
	if (!r)
		return;
	if (r->mon_started) {
		atomic_store(&r->mon_stop, 1);
		pthread_join(r->mon_thread, NULL);
	}
	ds_monitor_stop(&r->mon, r->router);
	if (r->router)
		zmq_close(r->router);
	ds_zap_free(r->zap);
	ds_refusals_free(r->refusals);
	ds_conns_free(r->conns);
	if (r->zctx)
		zmq_ctx_term(r->zctx);
	ds_inbox_free(r->inbox);
	ds_quota_free(r->quota);
	ds_wire_decoder_free(r->dec);
	free(r->results);
	free(r);
}

/* ---- connections (monitor) --------------------------------------------- */

static void on_accepted(ds_receiver *r, int fd, const char *addr)
{
	char peer[64], ip[64], detail[200];
	enum ds_conns_verdict v =
	    ds_conns_accepted(r->conns, fd, ds_clock_mono_ms(), peer, sizeof(peer), ip, sizeof(ip));

	if (v == DS_CONNS_ADMITTED) {
		emit(r, DS_LOG_DEBUG, "accepted", peer, "TCP connection on %s", addr);
		return;
	}
	if (v == DS_CONNS_OVER_TOTAL)
		snprintf(detail, sizeof(detail),
			 "closed at once: %u connections are unauthenticated already "
			 "(link.maxUnauthenticated)",
			 r->cfg.max_unauth);
	else
		snprintf(detail, sizeof(detail),
			 "closed at once: %u connections from %s are unauthenticated already "
			 "(link.maxUnauthenticatedPerAddress)",
			 r->cfg.max_unauth_per_address, ip);
	ds_refusals_report(r->refusals, DS_LOG_WARN,
			   v == DS_CONNS_OVER_TOTAL ? "conn_refused_unauth_total"
						    : "conn_refused_unauth_per_address",
			   ip, peer, detail);
}

static void on_disconnected(ds_receiver *r, int fd)
{
	char peer[64], ip[64];
	bool capped = false, unauth = false, known;

	known = ds_conns_closed(r->conns, fd, peer, sizeof(peer), &capped, &unauth);
	ds_peer_ip(peer, ip, sizeof(ip));
	if (capped) {
		/* Its refusal was said at its accept; the failure its shutdown
		 * caused is that refusal, not another one. */
		r->pending_failure[0] = '\0';
	} else if (r->pending_failure[0] && r->pending_auth) {
		/* zap_refused said it, with the key: one line per refusal. */
		emit(r, DS_LOG_DEBUG, "handshake_failed", peer, "%s", r->pending_failure);
		r->pending_failure[0] = '\0';
	} else if (r->pending_failure[0]) {
		ds_refusals_report(r->refusals, DS_LOG_WARN, "handshake_failed", ip, peer,
				   r->pending_failure);
		r->pending_failure[0] = '\0';
	} else if (unauth || !known) {
		/* No failure event (libzmq has none for a frame over ZMQ_MAXMSGSIZE,
		 * in the handshake or as the first message): a connection that never
		 * brought a message is aggregated per address like the refusals, not
		 * one line each, so a flood of them cannot flood the log. */
		char why[200];
		snprintf(why, sizeof(why),
			 "connection closed before its first message (peer gone, handshake "
			 "not completed, or a frame over ZMQ_MAXMSGSIZE=%zu)",
			 r->cfg.tuning.limits.max_frame);
		ds_refusals_report(r->refusals, DS_LOG_INFO, "disconnected", ip, peer, why);
	} else {
		emit(r, DS_LOG_INFO, "disconnected", peer,
		     "connection closed (peer gone, heartbeat timeout, or a frame "
		     "over ZMQ_MAXMSGSIZE=%zu)",
		     r->cfg.tuning.limits.max_frame);
	}
}

static void monitor_events(ds_receiver *r)
{
	uint16_t ev;
	uint32_t value;
	char addr[256], why[200];

	while (ds_monitor_read(&r->mon, &ev, &value, addr, sizeof(addr))) {
		switch (ev) {
		case ZMQ_EVENT_ACCEPTED:
			on_accepted(r, (int)value, addr);
			break;
		case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
		case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
		case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
			/* A refused client that goes away while the refusal is
			 * sent adds a protocol failure: it is the same refusal,
			 * which zap_refused reported and counted once. */
			if (r->pending_failure[0] && r->pending_auth)
				break;
			snprintf(r->pending_failure, sizeof(r->pending_failure), "%s",
				 ds_handshake_reason(ev, value, why, sizeof(why)));
			r->pending_auth = ev == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;
			break;
		case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
			/* Its value is 0 in libzmq 4.3, not the descriptor: the
			 * connection counts as authenticated at its first message. */
			r->pending_failure[0] = '\0';
			break;
		case ZMQ_EVENT_DISCONNECTED:
			on_disconnected(r, (int)value);
			break;
		default:
			break;
		}
	}
}

/* Tell the gauge of unauthenticated connections when it changed. */
static void unauth_update(ds_receiver *r)
{
	unsigned n = ds_conns_unauthenticated(r->conns, ds_clock_mono_ms());

	if (n != r->unauth && r->cfg.on_unauth)
		r->cfg.on_unauth(r->cfg.event_ud, n);
	r->unauth = n;
}

static void *monitor_main(void *arg)
{
	ds_receiver *r = arg;

	if (r->cfg.on_unauth)
		r->cfg.on_unauth(r->cfg.event_ud, 0);
	while (!atomic_load(&r->mon_stop)) {
		zmq_pollitem_t item = {r->mon.pair, 0, ZMQ_POLLIN, 0};
		int rc = zmq_poll(&item, 1, 100);
		if (rc < 0 && zmq_errno() == ETERM)
			break;
		if (rc > 0)
			monitor_events(r);
		unauth_update(r);
		ds_refusals_flush(r->refusals);
	}
	monitor_events(r);
	return NULL;
}

/* ---- sessions ------------------------------------------------------------ */

static struct session *session_find(ds_receiver *r, const uint8_t *rid, size_t len)
{
	for (int i = 0; i < MAX_SESSIONS; i++) {
		struct session *s = &r->sessions[i];
		if (s->used && s->rid_len == len && memcmp(s->rid, rid, len) == 0)
			return s;
	}
	return NULL;
}

static struct session *session_new(ds_receiver *r, const uint8_t *rid, size_t len)
{
	struct session *s = session_find(r, rid, len), *oldest = &r->sessions[0];

	if (!s) {
		for (int i = 0; i < MAX_SESSIONS; i++) {
			if (!r->sessions[i].used) {
				s = &r->sessions[i];
				break;
			}
			if (r->sessions[i].last_seen < oldest->last_seen)
				oldest = &r->sessions[i];
		}
		if (!s)
			s = oldest;
	}
	memset(s, 0, sizeof(*s));
	s->used = true;
	memcpy(s->rid, rid, len);
	s->rid_len = len;
	return s;
}

static int send_to(ds_receiver *r, const uint8_t *rid, size_t rid_len, uint8_t *buf, size_t len)
{
	int rc = 0;

	if (zmq_send(r->router, rid, rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
	    zmq_send(r->router, buf, len, ZMQ_DONTWAIT) < 0)
		rc = -zmq_errno();
	else
		ds_link_stats_add(r->cfg.stats, len, 0, 0);
	free(buf);
	return rc;
}

/* How long a presence row holds unless seen again: a connection that died
 * silently is closed by the heartbeat timeout, then noticed within a sweep. */
static int64_t presence_valid_ms(const ds_receiver *r)
{
	return (int64_t)r->cfg.tuning.heartbeat_timeout_ms + 2 * PRESENCE_MS;
}

/* source has no session left but s (which is ending): its presence ends. */
static void presence_end(ds_receiver *r, const struct session *s, const char *why)
{
	for (int i = 0; i < MAX_SESSIONS; i++) {
		const struct session *o = &r->sessions[i];
		if (o != s && o->used && strcmp(o->source, s->source) == 0)
			return;
	}
	ds_inbox_presence_end(r->inbox, s->source, why, NULL);
}

/* Whether the connection the session was opened on is still up. */
static bool session_alive(const struct session *s)
{
	char addr[64];

	ds_fd_peer(s->fd, addr, sizeof(addr));
	return s->fd >= 0 && addr[0] && strcmp(addr, s->peer) == 0;
}

/*
 * Every open session whose connection lives is seen again; one whose
 * connection is gone (closed, or by the heartbeat timeout) ends. Called every
 * PRESENCE_MS.
 */
static void presence_sweep(ds_receiver *r)
{
	for (int i = 0; i < MAX_SESSIONS; i++) {
		struct session *s = &r->sessions[i];
		if (!s->used)
			continue;
		if (session_alive(s)) {
			ds_inbox_presence_seen(r->inbox, s->source, s->peer, false,
					       presence_valid_ms(r), NULL);
			continue;
		}
		presence_end(r, s, "connection closed");
		s->used = false;
	}
}

/*
 * Close one peer's TCP connection. ROUTER has no API to drop a peer, so shut
 * the descriptor the frame came from down: libzmq sees the end of the stream
 * and tears the connection down itself. The descriptor is checked against the
 * peer's address first so a reused number is never touched.
 */
static void drop_peer(ds_receiver *r, int fd, const char *peer_ip, const uint8_t *rid,
		      size_t rid_len, const char *why)
{
	struct session *s = session_find(r, rid, rid_len);
	char addr[64];
	uint8_t *buf;
	size_t len;

	if (ds_wire_goodbye_encode(why, &buf, &len) == 0)
		send_to(r, rid, rid_len, buf, len);
	if (s) {
		presence_end(r, s, why);
		s->used = false;
	}
	ds_fd_peer(fd, addr, sizeof(addr));
	if (fd >= 0 && peer_ip && peer_ip[0] && strncmp(addr, peer_ip, strlen(peer_ip)) == 0 &&
	    addr[strlen(peer_ip)] == ':')
		shutdown(fd, SHUT_RDWR);
	emit(r, DS_LOG_WARN, "peer_dropped", addr[0] ? addr : peer_ip, "%s", why);
}

/*
 * A source whose key was removed from the authorized-sources file (or whose
 * name now has another key) loses its open session too, not only its next
 * handshake: Goodbye, then its connection is shut down, if the descriptor
 * still belongs to the address the session was opened from.
 */
static void revoke_session(ds_receiver *r, struct session *s)
{
	char addr[64], qs[300], qk[120];
	uint8_t *buf;
	size_t len;

	if (ds_wire_goodbye_encode("the key of this source is no longer authorized by the target",
				   &buf, &len) == 0)
		send_to(r, s->rid, s->rid_len, buf, len);
	ds_fd_peer(s->fd, addr, sizeof(addr));
	if (s->fd >= 0 && addr[0] && strcmp(addr, s->peer) == 0)
		shutdown(s->fd, SHUT_RDWR);
	emit(r, DS_LOG_WARN, "source_revoked", s->peer,
	     "source %s (key %s) is no longer in %s: session closed",
	     ds_log_quote(s->source, qs, sizeof(qs)), ds_log_quote(s->key, qk, sizeof(qk)),
	     ds_zap_path(r->zap));
	presence_end(r, s, "key no longer authorized");
	s->used = false;
}

/* Close the sessions of revoked sources; called about once a second, so a
 * revocation takes effect within a second without a check on every message. */
static void sweep_revoked(ds_receiver *r)
{
	for (int i = 0; i < MAX_SESSIONS; i++) {
		struct session *s = &r->sessions[i];
		if (s->used && !ds_zap_admits(r->zap, s->source, s->key))
			revoke_session(r, s);
	}
}

/*
 * Let s send up to credit records past its committed seq; a grant is never
 * taken back (batches under it may be on their way), so a throttled source
 * stops at what it was granted before.
 */
static void grant(struct session *s, uint32_t credit)
{
	if (s->committed + credit > s->granted)
		s->granted = s->committed + credit;
}

/* The credit source gets now: by its quotas and the ceiling (quota.h). */
static uint32_t credit_now(const ds_receiver *r, const char *source)
{
	return ds_quota_credit_for(r->quota, source, r->cfg.credit);
}

static int set_backlog(void *ud, const char *source, uint64_t n)
{
	ds_quota_count_backlog(ud, source, n);
	return 0;
}

static int set_bytes(void *ud, const char *source, uint64_t bytes)
{
	ds_quota_set_bytes(ud, source, bytes);
	return 0;
}

/* The distinct sources with a session: the ceiling is shared among them. */
static size_t session_sources(const ds_receiver *r)
{
	size_t n = 0;

	for (int i = 0; i < MAX_SESSIONS; i++) {
		bool dup = false;
		if (!r->sessions[i].used)
			continue;
		for (int k = 0; k < i && !dup; k++)
			dup = r->sessions[k].used &&
			      strcmp(r->sessions[k].source, r->sessions[i].source) == 0;
		n += !dup;
	}
	return n;
}

/*
 * Count each source's backlog again (and, now and then, its ledger bytes:
 * LEDGER_BYTES_MS), judge the quotas, and say when the total stops or lets the
 * sources send.
 */
static void refresh_unapplied(ds_receiver *r)
{
	uint64_t n;
	bool throttled;
	ds_err err = {0};

	if (!r->bytes_counted ||
	    (ds_clock_mono_ms() >= r->next_bytes && ds_quota_bytes_limited(r->quota))) {
		int64_t t0 = ds_clock_mono_ms(), took;

		ds_quota_bytes_begin(r->quota);
		if (ds_inbox_ledger_bytes_each(r->inbox, set_bytes, r->quota, &err) < 0)
			emit(r, DS_LOG_WARN, "ledger_error", "", "ledger bytes per source: %s",
			     err.msg);
		took = ds_clock_mono_ms() - t0;
		r->bytes_counted = true;
		r->next_bytes = ds_clock_mono_ms() + (took * LEDGER_BYTES_PACE > LEDGER_BYTES_MS
							  ? took * LEDGER_BYTES_PACE
							  : LEDGER_BYTES_MS);
	}
	if (r->cfg.feedback.unapplied_each) {
		ds_quota_backlog_begin(r->quota);
		if (r->cfg.feedback.unapplied_each(r->cfg.feedback.ud, set_backlog, r->quota) < 0)
			return;
	}
	ds_quota_judge(r->quota, session_sources(r));
	n = ds_quota_total_backlog(r->quota);
	throttled = n >= r->cfg.max_unapplied;
	if (throttled != r->throttled)
		emit(r, throttled ? DS_LOG_WARN : DS_LOG_INFO,
		     throttled ? "backlog_full" : "backlog_eased", "",
		     throttled ? "%llu committed records wait to be applied (max_unapplied %llu): "
				 "sources holding their share get no credit until the apply stage "
				 "catches up"
			       : "%llu committed records wait to be applied (max_unapplied %llu): "
				 "credit again",
		     (unsigned long long)n, (unsigned long long)r->cfg.max_unapplied);
	r->throttled = throttled;
}

/*
 * Apply results and fresh credit to every session: an Ack of its own for a
 * source that has results waiting, or that had no credit and may send again.
 */
static void send_feedback(ds_receiver *r)
{
	bool any = false;

	/* Nobody to tell: no ledger reads (a Hello counts the backlog afresh). */
	for (int i = 0; i < MAX_SESSIONS && !any; i++)
		any = r->sessions[i].used;
	if (!any)
		return;
	refresh_unapplied(r);
	for (int i = 0; i < MAX_SESSIONS; i++) {
		struct session *s = &r->sessions[i];
		uint32_t credit = s->used ? credit_now(r, s->source) : 0;
		bool starved = s->granted <= s->committed && credit > 0;
		size_t n = 0;
		int64_t token = 0;
		ds_wire_ack ack;
		uint8_t *buf;
		size_t len;

		if (!s->used)
			continue;
		if (r->cfg.feedback.results &&
		    r->cfg.feedback.results(r->cfg.feedback.ud, s->source, s->epoch, r->applied,
					    FEEDBACK_MAX, &n, &token) < 0)
			n = 0;
		if (!n && !starved)
			continue;
		memset(&ack, 0, sizeof(ack));
		ack.epoch = s->epoch;
		ack.committed_seq = s->committed;
		ack.credit = credit;
		ack.applied = r->applied;
		ack.n_applied = n;
		ack.unapplied = ds_quota_total_backlog(r->quota);
		if (ds_wire_ack_encode(&ack, &buf, &len) < 0)
			continue;
		if (send_to(r, s->rid, s->rid_len, buf, len) < 0)
			continue; /* kept: sent with a later Ack */
		grant(s, credit);
		if (n && r->cfg.feedback.sent)
			r->cfg.feedback.sent(r->cfg.feedback.ud, s->source, s->epoch, token);
	}
}

static void on_hello(ds_receiver *r, int fd, const uint8_t *rid, size_t rid_len, const char *source,
		     const char *key, const char *peer, const ds_wire_hello *h)
{
	struct session *s;
	ds_wire_welcome w;
	uint64_t committed = 0;
	uint8_t *buf;
	size_t len;
	ds_err err = {0};
	/* Names in a detail are quoted: the cluster and agent come from the wire. */
	char qs[300], qc[300], qa[200];
	int rc;

	ds_log_quote(source, qs, sizeof(qs));
	if (h->protocol_version != DS_PROTOCOL_VERSION) {
		char why[128];
		snprintf(why, sizeof(why),
			 "protocol version %u not supported (this target speaks %u)",
			 h->protocol_version, DS_PROTOCOL_VERSION);
		if (ds_wire_goodbye_encode(why, &buf, &len) == 0)
			send_to(r, rid, rid_len, buf, len);
		emit(r, DS_LOG_WARN, "session_refused", peer, "source %s: %s", qs, why);
		return;
	}
	rc = ds_inbox_session(r->inbox, source, h->cluster_name, h->epoch, &committed, &err);
	if (rc < 0) {
		emit(r, DS_LOG_ERROR, "ledger_error", peer, "%s", err.msg);
		if (ds_wire_goodbye_encode("target ledger unavailable", &buf, &len) == 0)
			send_to(r, rid, rid_len, buf, len);
		return;
	}
	s = session_new(r, rid, rid_len);
	snprintf(s->source, sizeof(s->source), "%s", source);
	snprintf(s->key, sizeof(s->key), "%s", key);
	snprintf(s->peer, sizeof(s->peer), "%s", peer);
	s->fd = fd;
	s->epoch = h->epoch;
	s->committed = committed;
	s->last_seen = ds_clock_mono_ms();
	refresh_unapplied(r); /* with this session among the ceiling's sharers */
	s->granted = committed + credit_now(r, source);
	memset(&w, 0, sizeof(w));
	w.protocol_version = DS_PROTOCOL_VERSION;
	w.agent_version = DS_VERSION;
	w.epoch = h->epoch;
	w.committed_seq = committed;
	w.credit = (uint32_t)(s->granted - committed);
	w.source_name = source;
	w.apply_results = r->cfg.feedback.results != NULL;
	w.zbatch = !r->cfg.no_zbatch;
	w.manifest_parts = true;
	ds_inbox_presence_seen(r->inbox, source, peer, true, presence_valid_ms(r), NULL);
	if (ds_wire_welcome_encode(&w, &buf, &len) == 0)
		send_to(r, rid, rid_len, buf, len);
	emit(r, DS_LOG_INFO, "session_open", peer,
	     "source %s cluster %s agent %s epoch %llu committed_seq %llu", qs,
	     ds_log_quote(h->cluster_name, qc, sizeof(qc)),
	     ds_log_quote(h->agent_version, qa, sizeof(qa)), (unsigned long long)h->epoch,
	     (unsigned long long)committed);
}

static void on_batch(ds_receiver *r, int fd, const char *peer_ip, const uint8_t *rid,
		     size_t rid_len, const char *peer, const char *source, const ds_wire_msg *msg)
{
	struct session *s = session_find(r, rid, rid_len);
	size_t n = ds_wire_msg_record_count(msg);
	const ds_record *first = ds_wire_msg_record(msg, 0), *last = ds_wire_msg_record(msg, n - 1);
	uint64_t committed = 0;
	ds_wire_ack ack;
	uint8_t *buf;
	size_t len;
	ds_err err = {0};
	int rc;

	if (!s) {
		drop_peer(r, fd, peer_ip, rid, rid_len, "batch before hello");
		return;
	}
	/* The frame's authenticated identity (ZAP User-Id) must be the session's: a
	 * routing id is only a name the peer chose. */
	if (strcmp(source, s->source) != 0) {
		char why[400];
		snprintf(why, sizeof(why),
			 "batch authenticated as source %s on the session of source %s", source,
			 s->source);
		drop_peer(r, fd, peer_ip, rid, rid_len, why);
		return;
	}
	s->last_seen = ds_clock_mono_ms();
	if (first->epoch != s->epoch) {
		drop_peer(r, fd, peer_ip, rid, rid_len, "batch of another epoch than the session");
		return;
	}
	if (last->seq > s->granted) {
		char why[160];
		snprintf(why, sizeof(why), "seq %llu beyond the credit granted (up to %llu)",
			 (unsigned long long)last->seq, (unsigned long long)s->granted);
		drop_peer(r, fd, peer_ip, rid, rid_len, why);
		return;
	}
	ds_link_stats_add(r->cfg.stats, 0, 0, ds_wire_msg_json_bytes(msg));
	if (ds_grow((void **)&r->results, &r->results_cap, n, sizeof(*r->results)) < 0)
		return; /* no ack: the source resends after its timeout */
	rc = ds_inbox_commit(r->inbox, s->source, s->epoch, msg, r->cfg.handler, r->cfg.handler_ud,
			     r->results, &committed, &err);
	if (rc == -EPROTO) {
		drop_peer(r, fd, peer_ip, rid, rid_len, err.msg);
		return;
	}
	if (rc < 0) {
		char qs[300];
		/* Storage trouble: acknowledge nothing; the source will resend. */
		emit(r, DS_LOG_ERROR, "ledger_error", peer,
		     "source %s: %s; seq %llu-%llu not committed nor acknowledged, the source "
		     "resends them%s",
		     ds_log_quote(s->source, qs, sizeof(qs)), err.msg,
		     (unsigned long long)first->seq, (unsigned long long)last->seq,
		     rc == -ENOSPC ? "; free space on the ledger's filesystem"
		     : rc == -EBADMSG
			 ? "; the ledger is damaged: stop the agent, move it aside and start again"
			 : "");
		return;
	}
	/* Counted again at the next feedback; until then what was committed adds up. */
	ds_quota_add(r->quota, s->source, committed - s->committed,
		     ds_inbox_committed_bytes(r->inbox));
	s->committed = committed;
	grant(s, credit_now(r, s->source));
	memset(&ack, 0, sizeof(ack));
	ack.epoch = s->epoch;
	ack.committed_seq = committed;
	ack.credit = (uint32_t)(s->granted - committed);
	ack.unapplied = ds_quota_total_backlog(r->quota);
	ack.results = r->results;
	ack.n_results = n;
	if (ds_wire_ack_encode(&ack, &buf, &len) == 0)
		send_to(r, rid, rid_len, buf, len);
}

static void on_message(ds_receiver *r)
{
	zmq_msg_t rid, body;
	const char *source, *peer_ip, *key;
	char peer[64];
	int fd, more;
	ds_wire_msg *msg = NULL;
	ds_err err = {0};
	int rc;

	zmq_msg_init(&rid);
	zmq_msg_init(&body);
	if (zmq_msg_recv(&rid, r->router, ZMQ_DONTWAIT) < 0)
		goto out;
	if (!zmq_msg_more(&rid) || zmq_msg_recv(&body, r->router, 0) < 0)
		goto out;
	ds_link_stats_add(r->cfg.stats, 0, zmq_msg_size(&body), 0);
	fd = zmq_msg_get(&body, ZMQ_SRCFD);
	peer_ip = zmq_msg_gets(&body, "Peer-Address");
	source = zmq_msg_gets(&body, "User-Id");
	ds_fd_peer(fd, peer, sizeof(peer));
	/* Only a completed handshake delivers a message: the connection no
	 * longer counts against the caps on unauthenticated ones. */
	if (peer[0])
		ds_conns_authenticated(r->conns, fd, peer);
	if (!peer[0])
		snprintf(peer, sizeof(peer), "%s", peer_ip ? peer_ip : "");
	more = zmq_msg_more(&body);
	if (more) {
		/* Our protocol is one frame per message: drain the rest, then drop. */
		while (more) {
			zmq_msg_t extra;
			zmq_msg_init(&extra);
			if (zmq_msg_recv(&extra, r->router, 0) < 0) {
				zmq_msg_close(&extra);
				break;
			}
			more = zmq_msg_more(&extra);
			zmq_msg_close(&extra);
		}
		drop_peer(r, fd, peer_ip, zmq_msg_data(&rid), zmq_msg_size(&rid),
			  "multi-frame message");
		goto out;
	}
	if (!source || !source[0]) {
		drop_peer(r, fd, peer_ip, zmq_msg_data(&rid), zmq_msg_size(&rid),
			  "no authenticated source identity");
		goto out;
	}
	if (zmq_msg_size(&rid) > RID_MAX)
		goto out;
	ds_err_clear(&err);
	rc = ds_wire_decode(r->dec, zmq_msg_data(&body), zmq_msg_size(&body), &msg, &err);
	if (rc < 0) {
		char why[300], qs[200];
		snprintf(why, sizeof(why), "source %s sent a bad frame: %s",
			 ds_log_quote(source, qs, sizeof(qs)), err.msg);
		drop_peer(r, fd, peer_ip, zmq_msg_data(&rid), zmq_msg_size(&rid), why);
		goto out;
	}
	switch (ds_wire_msg_kind(msg)) {
	case DS_WIRE_HELLO:
		key = zmq_msg_gets(&body, DS_ZAP_KEY_PROPERTY);
		on_hello(r, fd, zmq_msg_data(&rid), zmq_msg_size(&rid), source, key ? key : "",
			 peer, ds_wire_msg_hello(msg));
		break;
	case DS_WIRE_BATCH:
		on_batch(r, fd, peer_ip, zmq_msg_data(&rid), zmq_msg_size(&rid), peer, source, msg);
		break;
	case DS_WIRE_GOODBYE: {
		struct session *s = session_find(r, zmq_msg_data(&rid), zmq_msg_size(&rid));
		char qs[300];
		emit(r, DS_LOG_INFO, "goodbye", peer, "source %s: %s",
		     ds_log_quote(source, qs, sizeof(qs)), ds_wire_msg_goodbye(msg));
		/* only the session's own source ends it */
		if (s && strcmp(s->source, source) == 0) {
			char why[300];
			snprintf(why, sizeof(why), "goodbye: %s", ds_wire_msg_goodbye(msg));
			presence_end(r, s, why);
			s->used = false;
		}
		break;
	}
	default:
		drop_peer(r, fd, peer_ip, zmq_msg_data(&rid), zmq_msg_size(&rid),
			  "unexpected message kind from a source");
		break;
	}
out:
	ds_wire_msg_free(msg);
	zmq_msg_close(&rid);
	zmq_msg_close(&body);
}

int ds_receiver_run(ds_receiver *r, ds_err *err)
{
	int64_t next_sweep = ds_clock_mono_ms() + 1000, next_feedback = 0;
	int64_t next_presence = ds_clock_mono_ms() + PRESENCE_MS;

	(void)err;
	while (!atomic_load(&r->stop)) {
		zmq_pollitem_t items[1] = {
		    {r->router, 0, ZMQ_POLLIN, 0},
		};
		int rc = zmq_poll(items, 1, 100);
		if (rc < 0) {
			if (zmq_errno() == EINTR)
				continue;
			ds_err_set(err, "poll: %s", zmq_strerror(zmq_errno()));
			return -zmq_errno();
		}
		/* Bounded burst, so a stop is seen under load. */
		for (int i = 0; i < 64 && !atomic_load(&r->stop); i++) {
			int ev = 0;
			size_t evl = sizeof(ev);
			zmq_getsockopt(r->router, ZMQ_EVENTS, &ev, &evl);
			if (!(ev & ZMQ_POLLIN))
				break;
			on_message(r);
		}
		if (ds_clock_mono_ms() >= next_feedback) {
			send_feedback(r);
			next_feedback = ds_clock_mono_ms() + r->cfg.feedback_ms;
		}
		if (ds_clock_mono_ms() >= next_sweep) {
			sweep_revoked(r);
			next_sweep = ds_clock_mono_ms() + 1000;
		}
		if (ds_clock_mono_ms() >= next_presence) {
			presence_sweep(r);
			next_presence = ds_clock_mono_ms() + PRESENCE_MS;
		}
	}
	/* Stopping: the sessions end with the receiver. */
	for (int i = 0; i < MAX_SESSIONS; i++) {
		struct session *s = &r->sessions[i];
		if (s->used) {
			presence_end(r, s, "the target agent stopped");
			s->used = false;
		}
	}
	return 0;
}
