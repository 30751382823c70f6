#ifndef DRASYNC_TRANSPORT_H
#define DRASYNC_TRANSPORT_H

/*
 * What the sender (source, CURVE client DEALER) and the receiver (target,
 * CURVE server ROUTER) share: socket tuning and the events they report.
 *
 * The transport does not log by itself: it reports events (connected,
 * disconnected, handshake failed and why, key refused, peer dropped...) with
 * the peer's address to an on_event callback; ds_transport_event_log() is the
 * callback that writes them as logfmt lines.
 */

#include "drasync/log.h"
#include "drasync/wire.h"

#include <stdarg.h>

typedef struct ds_transport_event {
	enum ds_log_level level;
	const char *name;   /* e.g. "connected", "handshake_failed", "peer_dropped" */
	const char *peer;   /* the peer's address, "" when unknown */
	const char *detail; /* human detail, "" when none */
} ds_transport_event;

/* Called from the thread running the sender/receiver and, on the target, from
 * the ZAP handler's thread: it must be thread-safe (ds_transport_event_log is). */
typedef void (*ds_transport_event_fn)(void *ud, const ds_transport_event *ev);

/**
 * Format an event and hand it to `fn` (nothing when fn is NULL): the one place
 * the sender and the receiver build their events.
 */
void ds_transport_event_emitv(ds_transport_event_fn fn, void *ud, enum ds_log_level level,
			      const char *name, const char *peer, const char *fmt, va_list ap)
    __attribute__((format(printf, 6, 0)));

/** An on_event callback writing each event with ds_log(); ud: a prefix or NULL. */
void ds_transport_event_log(void *ud, const ds_transport_event *ev);

typedef struct ds_transport_tuning {
	int heartbeat_ivl_ms;	  /* ZMTP PING interval; default 1000 */
	int heartbeat_timeout_ms; /* no traffic for this long: peer dead; default 5000 */
	int linger_ms;		  /* ZMQ_LINGER on close; default 500 */
	int reconnect_ivl_ms;	  /* first reconnect delay; default 100 */
	int reconnect_ivl_max_ms; /* backoff ceiling; default 5000 */
	/* The target's ZMQ_HANDSHAKE_IVL: a connection not through its CURVE
	 * handshake by then is closed; default 5000 (libzmq's own: 30000). */
	int handshake_timeout_ms;
	ds_wire_limits limits; /* max_frame is also ZMQ_MAXMSGSIZE */
} ds_transport_tuning;

void ds_transport_tuning_default(ds_transport_tuning *t);

/** Default ZAP domain of drasync's CURVE server. */
#define DS_ZAP_DOMAIN "drasync"

#endif
