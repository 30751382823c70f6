#ifndef DRASYNC_RECEIVER_H
#define DRASYNC_RECEIVER_H

/*
 * The target's end of the link: a ROUTER bound as CURVE server, with a ZAP
 * handler admitting the keys of the authorized-sources file. For each source
 * session it answers Hello with Welcome (last committed seq, credit), commits
 * each batch in the inbox (the handler runs inside the commit) and only then
 * acknowledges it with per-record results and fresh credit. Apply results
 * (from the feedback functions) follow in later Acks, sent on their own when
 * no batch is coming; each source's credit shrinks only as its own unapplied
 * backlog nears its bound (quota.h), so an API outage on the target costs apply
 * lag, not a stalled source, until that bound, and a noisy source does not
 * throttle the others. A peer that sends
 * anything malformed, oversized or beyond its credit is dropped and logged;
 * the others are served on.
 */

#include "drasync/err.h"
#include "drasync/inbox.h"
#include "drasync/keys.h"
#include "drasync/link_stats.h"
#include "drasync/quota.h"
#include "drasync/transport.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct ds_receiver ds_receiver;

/*
 * What the apply stage tells the sources (SPEC §6), asked for on the
 * receiver's thread; every function may be NULL.
 */
typedef struct ds_receiver_feedback {
	/* Up to max apply results queued for (source, epoch) into out (*n); the
	 * messages stay valid until the next call; *token names the last one. */
	int (*results)(void *ud, const char *source, uint64_t epoch, ds_wire_result *out,
		       size_t max, size_t *n, int64_t *token);
	/* Those results are on their way to the source: forget them. */
	void (*sent)(void *ud, const char *source, uint64_t epoch, int64_t token);
	/* Committed records not yet applied: fn once per source that has some. */
	int (*unapplied_each)(void *ud, int (*fn)(void *fnud, const char *source, uint64_t n),
			      void *fnud);
	void *ud;
} ds_receiver_feedback;

typedef struct ds_receiver_config {
	const char *endpoint;		/* e.g. "tcp://0.0.0.0:7450"; port "*": any free port */
	const ds_keypair *keys;		/* the server's key pair */
	const char *authorized_sources; /* file of "name Z85-public-key" lines */
	const char *inbox_path;		/* SQLite ledger */
	const char *zap_domain;		/* NULL: DS_ZAP_DOMAIN */
	uint32_t credit;		/* records a source may have unacknowledged; 0: 2048 */
	ds_transport_tuning tuning;	/* fill with ds_transport_tuning_default() first */
	ds_record_handler handler;	/* may be NULL: records are only committed */
	void *handler_ud;
	ds_transport_event_fn on_event; /* may be NULL */
	void *event_ud;
	ds_receiver_feedback feedback;
	/* The ceiling of all sources' unapplied backlog; 0: 100000. Each source's
	 * credit shrinks as its own backlog nears its bound (source_limits, by
	 * default this value) and is 0 at it, or over its ledger bytes, or when
	 * the total is at the ceiling and it holds its share (quota.h). */
	uint64_t max_unapplied;
	ds_quota_limits_fn source_limits; /* may be NULL; asked at each backlog recount */
	void *limits_ud;
	int feedback_ms; /* results and backlog are looked at this often; 0: 200 */
	/* Refused handshakes are logged once per peer address and window, then
	 * counted in one "refusals_repeated" line at its end; 0: 60000. */
	int refusal_window_ms;
	/* Connections not through their CURVE handshake yet, in all and from one
	 * IP address: one more is shut down at its accept, logged per address
	 * and window; 0: 64 and 8. max_unauth is at most 1024. */
	unsigned max_unauth;
	unsigned max_unauth_per_address;
	/* Called (event_ud, n) from the monitor's thread when the count of
	 * unauthenticated connections changes; may be NULL. */
	void (*on_unauth)(void *ud, unsigned n);
	/* The link's figures (bytes each way, JSON received) go here; may be NULL. */
	ds_link_stats *stats;
	/* Welcome without the capability "zbatch" (what a target before it sends). */
	bool no_zbatch;
} ds_receiver_config;

/** Fill the defaults (tuning included); endpoint, keys and paths stay NULL. */
void ds_receiver_config_default(ds_receiver_config *cfg);

/** Open the inbox, start the ZAP handler and bind. */
int ds_receiver_new(ds_receiver **out, const ds_receiver_config *cfg, ds_err *err);
void ds_receiver_free(ds_receiver *r);

/** The endpoint actually bound (the port resolved when "*" was asked). */
const char *ds_receiver_endpoint(const ds_receiver *r);

/** The per-source quotas (borrowed; ds_quota_each() may be called from any thread). */
ds_quota *ds_receiver_quota(ds_receiver *r);

/** Serve until ds_receiver_stop(). @return 0, or a negative errno on a fatal error */
int ds_receiver_run(ds_receiver *r, ds_err *err);

/** Make ds_receiver_run() return soon. Safe from another thread or a signal handler. */
void ds_receiver_stop(ds_receiver *r);

#endif
