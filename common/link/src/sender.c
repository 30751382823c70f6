#include "drasync/sender.h"

#include "drasync/bandwidth.h"
#include "drasync/clock.h"
#include "drasync/outbox.h"
#include "drasync/version.h"
#include "transport_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <zmq.h>

/* Draft in the libzmq 4.3 headers, honoured by the library (4.3.3 and later). */
#ifndef ZMQ_SOCKS_USERNAME
#define ZMQ_SOCKS_USERNAME 99
#define ZMQ_SOCKS_PASSWORD 100
#endif

enum state {
	S_IDLE,	    /* no socket; a new one after the backoff */
	S_HELLO,    /* socket open, Hello not sent yet (no connection yet) */
	S_WELCOME,  /* Hello sent, waiting for Welcome */
	S_STREAM,   /* sending records */
	S_SNAPSHOT, /* the target needs a snapshot the outbox does not hold yet */
};

struct ds_sender {
	ds_sender_config cfg;
	char endpoint[512];
	char server_key[DS_KEY_Z85_LEN + 1];
	char cluster[256];
	ds_keypair keys;
	void *zctx;
	void *sock;
	struct ds_monitor mon;
	ds_outbox *outbox;
	ds_wire_decoder *dec;
	int wakefd;
	atomic_int stop;
	_Atomic uint64_t acked;
	_Atomic uint64_t unapplied; /* the target's backlog, as its last Ack said */
	atomic_int apply_results;   /* 0 no session yet, 1 the target sends them, 2 it does not */

	enum state state;
	int64_t next_attempt;
	int backoff;
	int64_t hello_sent;
	int64_t last_progress;
	int64_t snapshot_check;
	uint64_t target_committed;
	uint64_t next_seq; /* next record to send */
	uint64_t granted;  /* may send up to this seq */
	uint8_t *pending;  /* a frame that met a full queue */
	size_t pending_len;

	/* The bandwidth cap: a frame the bucket holds back until it may go. */
	char proxy[256], proxy_user[256], proxy_pass[256];
	ds_bandwidth bw;
	uint8_t *held;
	size_t held_len;
	uint64_t held_first; /* the first seq the held frame carries */
	bool cap_reported;   /* bandwidth_capped was emitted in this session */
	_Atomic uint64_t bw_bytes;
	_Atomic uint64_t bw_wait_ns;
	_Atomic int64_t bw_blocked_since; /* 0: not held */

	ds_wire_zbatcher *zb; /* NULL with no_zbatch */
	bool zbatch;	      /* this session's batches go as ZBatch frames */
	bool manifest_parts;  /* this session's target takes SNAPSHOT_PART records */
};

static void emit(ds_sender *s, enum ds_log_level level, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void emit(ds_sender *s, enum ds_log_level level, const char *name, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ds_transport_event_emitv(s->cfg.on_event, s->cfg.event_ud, level, name, s->endpoint, fmt,
				 ap);
	va_end(ap);
}

void ds_sender_config_default(ds_sender_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->batch_records = 256;
	cfg->batch_bytes = DS_SENDER_BATCH_BYTES;
	cfg->hello_timeout_ms = 10000;
	cfg->ack_timeout_ms = 30000;
	ds_transport_tuning_default(&cfg->tuning);
}

int ds_sender_new(ds_sender **out, const ds_sender_config *cfg, ds_err *err)
{
	ds_sender *s = calloc(1, sizeof(*s));
	int rc = 0;

	if (!s)
		return ds_err_fallback(err, -ENOMEM);
	s->wakefd = -1;
	s->cfg = *cfg;
	/* A config not started from the defaults: ZMQ_MAXMSGSIZE 0 would refuse every frame. */
	if (s->cfg.tuning.limits.max_frame == 0 || s->cfg.tuning.heartbeat_ivl_ms <= 0)
		ds_transport_tuning_default(&s->cfg.tuning);
	if (!cfg->endpoint || !cfg->server_public_key || !cfg->keys || !cfg->outbox_path ||
	    !cfg->cluster_name || !cfg->cluster_name[0]) {
		ds_err_set(err, "sender: endpoint, server key, keys, outbox and cluster name are "
				"required");
		rc = -EINVAL;
		goto out;
	}
	if (!ds_keys_z85_valid(cfg->server_public_key)) {
		ds_err_set(err, "the target's public key is not a 40-character Z85 key");
		rc = -EINVAL;
		goto out;
	}
	if (!s->cfg.batch_records)
		s->cfg.batch_records = 256;
	if (!s->cfg.batch_bytes)
		s->cfg.batch_bytes = DS_SENDER_BATCH_BYTES;
	if (s->cfg.batch_bytes > s->cfg.tuning.limits.max_frame / 2)
		s->cfg.batch_bytes = s->cfg.tuning.limits.max_frame / 2;
	s->cfg.batch_bytes = ds_bandwidth_batch_bytes(cfg->bandwidth, s->cfg.batch_bytes);
	ds_bandwidth_init(&s->bw, cfg->bandwidth, s->cfg.batch_bytes, ds_clock_mono_ns());
	if (cfg->socks_proxy &&
	    (strlen(cfg->socks_proxy) >= sizeof(s->proxy) ||
	     (cfg->socks_username && strlen(cfg->socks_username) >= sizeof(s->proxy_user)) ||
	     (cfg->socks_password && strlen(cfg->socks_password) >= sizeof(s->proxy_pass)))) {
		ds_err_set(err, "sender: the SOCKS5 proxy's address or credentials are too long "
				"(255 bytes each at most)");
		rc = -EINVAL;
		goto out;
	}
	snprintf(s->proxy, sizeof(s->proxy), "%s", cfg->socks_proxy ? cfg->socks_proxy : "");
	snprintf(s->proxy_user, sizeof(s->proxy_user), "%s",
		 cfg->socks_username ? cfg->socks_username : "");
	snprintf(s->proxy_pass, sizeof(s->proxy_pass), "%s",
		 cfg->socks_password ? cfg->socks_password : "");
	s->cfg.socks_proxy = s->cfg.socks_username = s->cfg.socks_password = NULL;
	snprintf(s->endpoint, sizeof(s->endpoint), "%s", cfg->endpoint);
	snprintf(s->server_key, sizeof(s->server_key), "%s", cfg->server_public_key);
	snprintf(s->cluster, sizeof(s->cluster), "%s", cfg->cluster_name);
	s->keys = *cfg->keys;
	s->cfg.endpoint = s->endpoint;
	s->cfg.server_public_key = s->server_key;
	s->cfg.cluster_name = s->cluster;
	s->cfg.keys = &s->keys;
	rc = ds_outbox_open(&s->outbox, cfg->outbox_path, NULL, err);
	if (rc < 0)
		goto out;
	rc = ds_wire_decoder_new(&s->dec, &s->cfg.tuning.limits);
	if (rc == 0 && !s->cfg.no_zbatch)
		rc = ds_wire_zbatcher_new(&s->zb, s->cfg.zbatch_level ? s->cfg.zbatch_level : 3,
					  s->cfg.tuning.limits.max_zbatch);
	if (rc < 0)
		goto out;
	s->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (s->wakefd < 0) {
		rc = -errno;
		goto out;
	}
	s->zctx = zmq_ctx_new();
	if (!s->zctx) {
		rc = -ENOMEM;
		goto out;
	}
	{
		ds_outbox_state st;
		rc = ds_outbox_state_get(s->outbox, &st, err);
		if (rc < 0)
			goto out;
		atomic_store(&s->acked, st.acked_seq);
	}
	s->backoff = s->cfg.tuning.reconnect_ivl_ms;
out:
	if (rc < 0) {
		ds_sender_free(s);
		return ds_err_fallback(err, rc);
	}
	*out = s;
	return 0;
}

static void drop_held(ds_sender *s);

static void close_socket(ds_sender *s)
{
	drop_held(s);
	ds_monitor_stop(&s->mon, s->sock);
	if (s->sock)
		zmq_close(s->sock);
	s->sock = NULL;
	free(s->pending);
	s->pending = NULL;
	s->pending_len = 0;
}

void ds_sender_free(ds_sender *s)
{
	if (!s)
		return;
	close_socket(s);
	if (s->zctx)
		zmq_ctx_term(s->zctx);
	ds_outbox_free(s->outbox);
	ds_wire_decoder_free(s->dec);
	ds_wire_zbatcher_free(s->zb);
	if (s->wakefd >= 0)
		close(s->wakefd);
	explicit_bzero(&s->keys, sizeof(s->keys));
	explicit_bzero(s->proxy_pass, sizeof(s->proxy_pass));
	free(s);
}

void ds_sender_stop(ds_sender *s)
{
	uint64_t one = 1;

	atomic_store(&s->stop, 1);
	if (write(s->wakefd, &one, sizeof(one)) < 0) {
		/* the counter is full: a wake-up is pending anyway */
	}
}

void ds_sender_wake(ds_sender *s)
{
	uint64_t one = 1;

	if (write(s->wakefd, &one, sizeof(one)) < 0) {
		/* as above */
	}
}

uint64_t ds_sender_acked(const ds_sender *s)
{
	return atomic_load(&((ds_sender *)(uintptr_t)s)->acked);
}

int ds_sender_target_sends_apply_results(const ds_sender *s)
{
	int v = atomic_load(&((ds_sender *)(uintptr_t)s)->apply_results);

	return v == 0 ? -1 : v == 1;
}

void ds_sender_bandwidth_stats_get(const ds_sender *s, ds_sender_bandwidth_stats *out)
{
	ds_sender *m = (ds_sender *)(uintptr_t)s;
	int64_t since = atomic_load(&m->bw_blocked_since);
	uint64_t ns = atomic_load(&m->bw_wait_ns);

	if (since > 0) {
		int64_t now = ds_clock_mono_ns();
		ns += now > since ? (uint64_t)(now - since) : 0;
	}
	out->rate = s->cfg.bandwidth;
	out->bytes = atomic_load(&m->bw_bytes);
	out->wait_seconds = (double)ns / 1e9;
}

uint64_t ds_sender_target_unapplied(const ds_sender *s)
{
	return atomic_load(&((ds_sender *)(uintptr_t)s)->unapplied);
}

const ds_link_stats *ds_sender_link_stats(const ds_sender *s)
{
	return s->cfg.stats;
}

/* Leave the session: a fresh socket after the backoff, so nothing of the old
 * connection (queued frames, late acks) can leak into the next session. */
static void reset(ds_sender *s, bool backoff)
{
	close_socket(s);
	s->state = S_IDLE;
	s->next_attempt = ds_clock_mono_ms() + (backoff ? s->backoff : 0);
	if (backoff) {
		s->backoff *= 2;
		if (s->backoff > s->cfg.tuning.reconnect_ivl_max_ms)
			s->backoff = s->cfg.tuning.reconnect_ivl_max_ms;
	}
}

static int open_socket(ds_sender *s, ds_err *err)
{
	int one = 1, hwm = 1000, rc;

	s->sock = zmq_socket(s->zctx, ZMQ_DEALER);
	if (!s->sock)
		return -zmq_errno();
	if (zmq_setsockopt(s->sock, ZMQ_CURVE_SERVERKEY, s->server_key, DS_KEY_Z85_LEN) ||
	    zmq_setsockopt(s->sock, ZMQ_CURVE_PUBLICKEY, s->keys.public_z85, DS_KEY_Z85_LEN) ||
	    zmq_setsockopt(s->sock, ZMQ_CURVE_SECRETKEY, s->keys.secret_z85, DS_KEY_Z85_LEN) ||
	    zmq_setsockopt(s->sock, ZMQ_IMMEDIATE, &one, sizeof(one)) ||
	    zmq_setsockopt(s->sock, ZMQ_SNDHWM, &hwm, sizeof(hwm)) ||
	    zmq_setsockopt(s->sock, ZMQ_RCVHWM, &hwm, sizeof(hwm))) {
		rc = -zmq_errno();
		ds_err_set(err, "cannot configure the CURVE client socket: %s", zmq_strerror(-rc));
		goto fail;
	}
	if (s->proxy[0] &&
	    (zmq_setsockopt(s->sock, ZMQ_SOCKS_PROXY, s->proxy, strlen(s->proxy)) ||
	     (s->proxy_user[0] &&
	      (zmq_setsockopt(s->sock, ZMQ_SOCKS_USERNAME, s->proxy_user, strlen(s->proxy_user)) ||
	       zmq_setsockopt(s->sock, ZMQ_SOCKS_PASSWORD, s->proxy_pass,
			      strlen(s->proxy_pass)))))) {
		rc = -zmq_errno();
		ds_err_set(err, "cannot set the SOCKS5 proxy on the client socket: %s",
			   zmq_strerror(-rc));
		goto fail;
	}
	rc = ds_sock_tune(s->sock, &s->cfg.tuning);
	if (rc == 0)
		rc = ds_monitor_start(&s->mon, s->zctx, s->sock);
	if (rc < 0) {
		ds_err_set(err, "cannot set up the client socket: %s", zmq_strerror(-rc));
		goto fail;
	}
	if (zmq_connect(s->sock, s->endpoint) != 0) {
		rc = -zmq_errno();
		ds_err_set(err, "cannot connect to %s: %s", s->endpoint, zmq_strerror(-rc));
		goto fail;
	}
	s->state = S_HELLO;
	return 0;
fail:
	close_socket(s);
	return rc;
}

static void monitor_events(ds_sender *s)
{
	uint16_t ev;
	uint32_t value;
	char addr[256], why[200];

	while (ds_monitor_read(&s->mon, &ev, &value, addr, sizeof(addr))) {
		switch (ev) {
		case ZMQ_EVENT_CONNECTED:
			emit(s, DS_LOG_INFO, "connected", "TCP connection to %s", addr);
			break;
		case ZMQ_EVENT_CONNECT_RETRIED:
			emit(s, DS_LOG_DEBUG, "connect_retry", "next attempt in %u ms", value);
			break;
		case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
			emit(s, DS_LOG_DEBUG, "handshake_ok", "CURVE handshake with %s", addr);
			break;
		case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
		case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
		case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
			emit(s, DS_LOG_WARN, "handshake_failed", "%s",
			     ds_handshake_reason(ev, value, why, sizeof(why)));
			break;
		case ZMQ_EVENT_DISCONNECTED:
			emit(s, DS_LOG_WARN, "disconnected",
			     "connection to %s lost; resuming from "
			     "the target's committed seq",
			     addr);
			if (s->state != S_IDLE) {
				reset(s, true);
				return;
			}
			break;
		default:
			break;
		}
	}
}

/*
 * Send one frame without blocking. Takes ownership of *buf in every case and
 * sets it to NULL: sent (freed), queued as s->pending when the queue is full,
 * or freed on failure.
 */
static int try_send(ds_sender *s, uint8_t **buf, size_t len)
{
	uint8_t *b = *buf;
	int e;

	*buf = NULL;
	if (zmq_send(s->sock, b, len, ZMQ_DONTWAIT) >= 0) {
		free(b);
		ds_link_stats_add(s->cfg.stats, len, 0, 0);
		return 0;
	}
	e = zmq_errno(); /* before free(), which may change errno */
	if (e == EAGAIN) {
		s->pending = b;
		s->pending_len = len;
		return 0;
	}
	free(b);
	return -e;
}

/* ---- the bandwidth cap: Batch frames go through the bucket, nothing else does ---- */

/* The frame held back is dropped with its session; its wait is counted. */
static void drop_held(ds_sender *s)
{
	int64_t since = atomic_exchange(&s->bw_blocked_since, 0);

	if (since > 0)
		atomic_fetch_add(&s->bw_wait_ns, (uint64_t)(ds_clock_mono_ns() - since));
	free(s->held);
	s->held = NULL;
	s->held_len = 0;
}

/* Send a Batch frame now if the bucket allows, else hold it. Takes *frame. */
static int send_metered(ds_sender *s, uint8_t **frame, size_t len, uint64_t first_seq)
{
	int64_t now = ds_clock_mono_ns();

	if (ds_bandwidth_delay_ns(&s->bw, now) > 0) {
		if (!s->cap_reported)
			emit(s, DS_LOG_INFO, "bandwidth_capped",
			     "target.bandwidth (%llu bytes/s) holds batches back; the time held is "
			     "drasync_source_link_bandwidth_wait_seconds_total",
			     (unsigned long long)s->cfg.bandwidth);
		s->cap_reported = true;
		s->held = *frame;
		*frame = NULL;
		s->held_len = len;
		s->held_first = first_seq;
		atomic_store(&s->bw_blocked_since, now);
		return 0;
	}
	ds_bandwidth_take(&s->bw, len, now);
	atomic_store(&s->bw_bytes, s->bw.bytes);
	return try_send(s, frame, len);
}

/* The held frame goes once its time has come. */
static int release_held(ds_sender *s)
{
	int64_t now = ds_clock_mono_ns(), since;
	uint8_t *f = s->held;

	if (!f || s->pending || ds_bandwidth_delay_ns(&s->bw, now) > 0)
		return 0;
	since = atomic_exchange(&s->bw_blocked_since, 0);
	if (since > 0)
		atomic_fetch_add(&s->bw_wait_ns, (uint64_t)(now - since));
	/* Nothing was in flight while it waited: the Ack timeout counts from now. */
	if (s->target_committed + 1 == s->held_first)
		s->last_progress = ds_clock_mono_ms();
	s->held = NULL;
	ds_bandwidth_take(&s->bw, s->held_len, now);
	atomic_store(&s->bw_bytes, s->bw.bytes);
	return try_send(s, &f, s->held_len);
}

/* Milliseconds the poll may sleep before the held frame may go (at most cap). */
static int held_wait_ms(const ds_sender *s, int cap)
{
	int64_t ns;

	if (!s->held)
		return cap;
	ns = ds_bandwidth_delay_ns(&s->bw, ds_clock_mono_ns());
	return ns / 1000000 + 1 < cap ? (int)(ns / 1000000 + 1) : cap;
}

static void send_hello(ds_sender *s)
{
	ds_wire_hello h = {DS_PROTOCOL_VERSION, s->cluster, DS_VERSION, ds_outbox_epoch(s->outbox),
			   s->zb != NULL};
	uint8_t *buf;
	size_t len;

	if (ds_wire_hello_encode(&h, &buf, &len) < 0)
		return;
	/* ZMQ_IMMEDIATE: this only succeeds once a connection is up. */
	if (zmq_send(s->sock, buf, len, ZMQ_DONTWAIT) >= 0) {
		ds_link_stats_session(s->cfg.stats, false); /* a session's figures from its Hello */
		ds_link_stats_add(s->cfg.stats, len, 0, 0);
		s->state = S_WELCOME;
		s->hello_sent = ds_clock_mono_ms();
	}
	free(buf);
}

/*
 * Where to go on from what the target committed; false when a snapshot is
 * needed. Not fatal to the run: what went wrong goes to the events, never to
 * the caller's (optional) err.
 */
static bool resume(ds_sender *s)
{
	ds_err err = {0};
	uint64_t from = 0;
	int rc = ds_outbox_resume_point(s->outbox, s->target_committed, &from, &err);

	if (rc == 0) {
		s->next_seq = from;
		s->state = S_STREAM;
		s->last_progress = ds_clock_mono_ms();
		return true;
	}
	ds_err_fallback(&err, rc);
	if (rc == -ENOENT) {
		if (s->state != S_SNAPSHOT) {
			emit(s, DS_LOG_WARN, "snapshot_required", "%s", err.msg);
			s->state = S_SNAPSHOT;
			if (s->cfg.on_snapshot_required)
				s->cfg.on_snapshot_required(s->cfg.ud, s->target_committed);
		}
		s->snapshot_check = ds_clock_mono_ms() + 200;
		return false;
	}
	emit(s, DS_LOG_ERROR, "resume_failed", "%s", err.msg);
	reset(s, true);
	return false;
}

static void on_welcome(ds_sender *s, const ds_wire_welcome *w)
{
	ds_err err = {0};

	if (s->state != S_WELCOME || w->epoch != ds_outbox_epoch(s->outbox) ||
	    w->protocol_version != DS_PROTOCOL_VERSION) {
		emit(s, DS_LOG_WARN, "protocol_error", "unexpected Welcome (epoch %llu)",
		     (unsigned long long)w->epoch);
		reset(s, true);
		return;
	}
	s->backoff = s->cfg.tuning.reconnect_ivl_ms;
	s->cap_reported = false;
	atomic_store(&s->apply_results, w->apply_results ? 1 : 2);
	s->zbatch = w->zbatch && s->zb;
	s->manifest_parts = w->manifest_parts;
	if (s->cfg.stats)
		atomic_store(&s->cfg.stats->zbatch, s->zbatch ? 1 : 0);
	s->target_committed = w->committed_seq;
	s->granted = w->committed_seq + w->credit;
	emit(s, DS_LOG_INFO, "session_open",
	     "target %s accepted source %s; committed_seq %llu credit %u; batches %s",
	     w->agent_version, w->source_name, (unsigned long long)w->committed_seq, w->credit,
	     s->zbatch ? "zbatch (one zstd frame a batch)" : "per-record zstd");
	if (w->committed_seq > atomic_load(&s->acked) &&
	    ds_outbox_ack(s->outbox, w->committed_seq, &err) == 0)
		atomic_store(&s->acked, w->committed_seq);
	resume(s);
}

static void on_ack(ds_sender *s, const ds_wire_ack *a)
{
	ds_err err = {0};

	if ((s->state != S_STREAM && s->state != S_SNAPSHOT) ||
	    a->epoch != ds_outbox_epoch(s->outbox) || a->committed_seq >= s->next_seq) {
		emit(s, DS_LOG_WARN, "protocol_error", "unexpected Ack for seq %llu",
		     (unsigned long long)a->committed_seq);
		reset(s, true);
		return;
	}
	bool advance = a->committed_seq > atomic_load(&s->acked);

	if (advance) {
		int rc = ds_outbox_ack(s->outbox, a->committed_seq, &err);

		if (rc < 0) {
			ds_err_fallback(&err, rc);
			emit(s, DS_LOG_ERROR, "outbox_error", "%s", err.msg);
			return;
		}
	}
	s->target_committed = a->committed_seq;
	s->granted = a->committed_seq + a->credit;
	s->last_progress = ds_clock_mono_ms();
	atomic_store(&s->unapplied, a->unapplied);
	if (s->cfg.on_results) {
		if (a->n_results)
			s->cfg.on_results(s->cfg.ud, a->results, a->n_results);
		if (a->n_applied)
			s->cfg.on_results(s->cfg.ud, a->applied, a->n_applied);
	}
	/* Published last: whoever sees a seq acknowledged (a `once` run waiting
	 * for it) also finds its results handed to on_results. */
	if (advance)
		atomic_store(&s->acked, a->committed_seq);
}

static void read_incoming(ds_sender *s)
{
	for (int i = 0; i < 256 && s->sock; i++) {
		zmq_msg_t m;
		ds_wire_msg *msg = NULL;
		ds_err err = {0};

		zmq_msg_init(&m);
		if (zmq_msg_recv(&m, s->sock, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&m);
			return;
		}
		if (ds_wire_decode(s->dec, zmq_msg_data(&m), zmq_msg_size(&m), &msg, &err) < 0) {
			zmq_msg_close(&m);
			emit(s, DS_LOG_WARN, "protocol_error", "bad frame from the target: %s",
			     err.msg);
			reset(s, true);
			return;
		}
		ds_link_stats_add(s->cfg.stats, 0, zmq_msg_size(&m), 0);
		zmq_msg_close(&m);
		switch (ds_wire_msg_kind(msg)) {
		case DS_WIRE_WELCOME:
			on_welcome(s, ds_wire_msg_welcome(msg));
			break;
		case DS_WIRE_ACK:
			on_ack(s, ds_wire_msg_ack(msg));
			break;
		case DS_WIRE_GOODBYE:
			emit(s, DS_LOG_WARN, "goodbye", "the target closed the session: %s",
			     ds_wire_msg_goodbye(msg));
			reset(s, true);
			break;
		default:
			emit(s, DS_LOG_WARN, "protocol_error",
			     "unexpected message from the target");
			reset(s, true);
			break;
		}
		ds_wire_msg_free(msg);
	}
}

static int fill_window(ds_sender *s, ds_err *err)
{
	while (s->state == S_STREAM && !s->pending && !s->held && s->next_seq <= s->granted) {
		ds_outbox_batch b;
		uint8_t *frame = NULL;
		uint64_t json = 0;
		size_t len, room = (size_t)(s->granted - s->next_seq + 1);
		int rc;

		if (room > s->cfg.batch_records)
			room = s->cfg.batch_records;
		rc = ds_outbox_read(s->outbox, s->next_seq, room, s->cfg.batch_bytes, &b, err);
		if (rc < 0)
			return rc;
		if (b.n == 0) {
			ds_outbox_batch_dispose(&b);
			return 0;
		}
		if (b.manifest_parts && !s->manifest_parts) {
			/* An older target would take the end's part for the whole
			 * manifest and prune the rest: nothing goes; the session is
			 * retried (the target may be upgraded meanwhile). */
			emit(s, DS_LOG_ERROR, "target_too_old",
			     "the records from seq %llu hold a snapshot manifest in parts, which "
			     "this target does not take (its Welcome lacks \"%s\"): upgrade "
			     "drasync-target to this version",
			     (unsigned long long)s->next_seq, DS_CAP_MANIFEST_PARTS);
			ds_outbox_batch_dispose(&b);
			reset(s, true);
			return 0;
		}
		rc = s->zbatch ? ds_wire_zbatch_encode(s->zb, b.records, b.n, &frame, &len, &json)
			       : -E2BIG;
		if (rc == -E2BIG || rc == -EBADMSG) {
			/* Over the ZBatch bound, not paying, or not for this target: a Batch. */
			rc = ds_wire_batch_encode(b.records, b.n, &frame, &len);
			if (s->cfg.stats)
				json = ds_wire_records_plain_bytes(b.records, b.n);
		}
		if (rc == 0) {
			uint64_t first = s->next_seq;

			ds_link_stats_add(s->cfg.stats, 0, 0, json);
			if (s->next_seq == s->target_committed + 1)
				s->last_progress = ds_clock_mono_ms(); /* in flight from now */
			s->next_seq = b.last_seq + 1;
			rc = send_metered(s, &frame, len, first);
		}
		ds_outbox_batch_dispose(&b);
		if (rc < 0) {
			emit(s, DS_LOG_WARN, "send_failed", "%s", zmq_strerror(-rc));
			reset(s, true);
			return 0;
		}
	}
	return 0;
}

int ds_sender_run(ds_sender *s, uint64_t until_seq, int timeout_ms, ds_err *err)
{
	int64_t deadline = timeout_ms > 0 ? ds_clock_mono_ms() + timeout_ms : 0;
	int rc = 0;

	while (!atomic_load(&s->stop)) {
		zmq_pollitem_t items[3];
		int n = 0, wait = 50;
		int64_t now = ds_clock_mono_ms();
		uint64_t drain;

		if (until_seq && atomic_load(&s->acked) >= until_seq)
			break;
		if (deadline && now >= deadline) {
			ds_err_set(err, "timed out: acknowledged up to %llu of %llu",
				   (unsigned long long)atomic_load(&s->acked),
				   (unsigned long long)until_seq);
			rc = -ETIMEDOUT;
			break;
		}
		if (s->state == S_IDLE && now >= s->next_attempt) {
			rc = open_socket(s, err);
			if (rc < 0)
				break;
		}
		if (s->state == S_WELCOME && now - s->hello_sent > s->cfg.hello_timeout_ms) {
			emit(s, DS_LOG_WARN, "hello_timeout", "no Welcome within %d ms",
			     s->cfg.hello_timeout_ms);
			reset(s, true);
		}
		if (s->state == S_STREAM && s->next_seq - 1 > s->target_committed &&
		    !(s->held && s->held_first == s->target_committed + 1) &&
		    now - s->last_progress > s->cfg.ack_timeout_ms) {
			emit(s, DS_LOG_WARN, "ack_timeout", "no Ack within %d ms",
			     s->cfg.ack_timeout_ms);
			reset(s, true);
		}
		if (s->state == S_SNAPSHOT && now >= s->snapshot_check)
			resume(s);
		if (s->state == S_STREAM && (rc = release_held(s)) < 0) {
			emit(s, DS_LOG_WARN, "send_failed", "%s", zmq_strerror(-rc));
			reset(s, true);
		}
		rc = 0;
		if (s->state == S_STREAM) {
			rc = fill_window(s, err);
			if (rc < 0)
				break;
		}
		wait = held_wait_ms(s, wait);
		if (s->sock) {
			items[n].socket = s->sock;
			items[n].fd = 0;
			items[n].events = ZMQ_POLLIN;
			if (s->state == S_HELLO || s->pending)
				items[n].events |= ZMQ_POLLOUT;
			items[n].revents = 0;
			n++;
			items[n].socket = s->mon.pair;
			items[n].fd = 0;
			items[n].events = ZMQ_POLLIN;
			items[n].revents = 0;
			n++;
		} else if (s->next_attempt - now < wait) {
			wait = s->next_attempt > now ? (int)(s->next_attempt - now) : 0;
		}
		items[n].socket = NULL;
		items[n].fd = s->wakefd;
		items[n].events = ZMQ_POLLIN;
		items[n].revents = 0;
		n++;
		if (zmq_poll(items, n, wait) < 0 && zmq_errno() != EINTR) {
			rc = -zmq_errno();
			ds_err_set(err, "poll: %s", zmq_strerror(-rc));
			break;
		}
		if (read(s->wakefd, &drain, sizeof(drain)) < 0) {
			/* nothing to drain */
		}
		if (!s->sock)
			continue;
		monitor_events(s);
		if (!s->sock)
			continue;
		if (s->state == S_HELLO)
			send_hello(s);
		if (s->pending) {
			uint8_t *p = s->pending;
			s->pending = NULL;
			rc = try_send(s, &p, s->pending_len);
			if (rc < 0) {
				reset(s, true);
				rc = 0;
				continue;
			}
		}
		read_incoming(s);
	}
	return ds_err_fallback(err, rc);
}
