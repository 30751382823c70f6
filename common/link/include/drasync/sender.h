#ifndef DRASYNC_SENDER_H
#define DRASYNC_SENDER_H

/*
 * The source's end of the link: drains the outbox to the target over a DEALER
 * socket connecting as CURVE client (ZMQ_IMMEDIATE, heartbeats, bounded
 * linger, reconnect backoff). Each session starts with Hello; the target's
 * Welcome says what it committed, and sending resumes right after it. Never
 * more records are in flight than the target's credit allows; each Ack
 * advances the outbox and reports per-record results. When the outbox no
 * longer holds what the target needs, on_snapshot_required is called and the
 * sender waits for the exporter to push a snapshot.
 *
 * The exporter pushes with its own ds_outbox handle on the same file and may
 * call ds_sender_wake() so the records go out without waiting for the poll.
 */

#include "drasync/err.h"
#include "drasync/keys.h"
#include "drasync/link_stats.h"
#include "drasync/record.h"
#include "drasync/transport.h"
#include "drasync/wire.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct ds_sender ds_sender;

/* A batch's records, encoded: at most this many bytes beyond its first record.
 * 256 ordinary records are about 256 KB; what reaches it are the snapshot's
 * manifest parts (0.5 MB of hashes each, incompressible): at 4 MiB a batch of
 * eight, compressed and then decoded, stood 12 MB above both agents' working
 * sets at 100,000 objects. */
#define DS_SENDER_BATCH_BYTES (1u << 20)

typedef struct ds_sender_config {
	const char *endpoint;	       /* the target, e.g. "tcp://dr.example.net:7450" */
	const char *server_public_key; /* Z85 */
	const ds_keypair *keys;	       /* this source's key pair */
	const char *outbox_path;
	const char *cluster_name;
	size_t batch_records; /* records per batch; default 256 */
	size_t batch_bytes;   /* encoded bytes per batch; default DS_SENDER_BATCH_BYTES */
	int hello_timeout_ms; /* no Welcome within: reconnect; default 10000 */
	int ack_timeout_ms;   /* records in flight and no Ack within: reconnect; default 30000 */
	ds_transport_tuning tuning;
	/* target.bandwidth: bytes per second of Batch frames (drasync/bandwidth.h);
	 * 0: no cap. Batches shrink to ds_bandwidth_batch_bytes() under a cap. */
	uint64_t bandwidth;
	/* target.proxy: "host:port" of a SOCKS5 proxy to reach the target through
	 * (ZMQ_SOCKS_PROXY); NULL: connect directly. With a username, the proxy's
	 * username/password authentication (RFC 1929); both are copied, never logged. */
	const char *socks_proxy;
	const char *socks_username;
	const char *socks_password;
	ds_transport_event_fn on_event; /* may be NULL */
	void *event_ud;
	/* Per-record results from the target, an Ack's at a time (may be NULL): the
	 * commit results (ok, duplicate, failed, skipped) of the records the Ack
	 * commits, then the apply results (applied, waiting, held, failed,
	 * skipped) of records committed earlier, for the newest record of each
	 * object. */
	void (*on_results)(void *ud, const ds_wire_result *v, size_t n);
	/* The target needs a snapshot: push SNAPSHOT_BEGIN, every object, SNAPSHOT_END. */
	void (*on_snapshot_required)(void *ud, uint64_t target_committed_seq);
	void *ud;
	/* The link's figures (bytes each way, JSON carried) go here; may be NULL. */
	ds_link_stats *stats;
	/* Never offer nor send ZBatch frames (what an agent before them does). */
	bool no_zbatch;
	int zbatch_level; /* zstd level of ZBatch frames; 0: 3 */
} ds_sender_config;

/** Fill the defaults (tuning included); endpoint, keys and paths stay NULL. */
void ds_sender_config_default(ds_sender_config *cfg);

int ds_sender_new(ds_sender **out, const ds_sender_config *cfg, ds_err *err);
void ds_sender_free(ds_sender *s);

/**
 * Run sessions until ds_sender_stop(), or, when until_seq > 0, until the
 * target has acknowledged every record up to until_seq (a `once` pass).
 * timeout_ms > 0 bounds the wait (-ETIMEDOUT).
 * @return 0, -ETIMEDOUT, or a negative errno on a fatal local error
 */
int ds_sender_run(ds_sender *s, uint64_t until_seq, int timeout_ms, ds_err *err);

/** Make ds_sender_run() return soon. Safe from another thread or a signal handler. */
void ds_sender_stop(ds_sender *s);

/** Records were pushed: send them now. Safe from another thread. */
void ds_sender_wake(ds_sender *s);

/**
 * The highest seq the target acknowledged so far. The results its Ack carried
 * have been handed to on_results by the time the seq shows here.
 */
uint64_t ds_sender_acked(const ds_sender *s);

/**
 * Whether the target's Welcome offered apply results in later Acks:
 * 1 yes, 0 no, -1 no session opened yet.
 */
int ds_sender_target_sends_apply_results(const ds_sender *s);

/* What the bandwidth cap did (ds_sender_bandwidth_stats()). */
typedef struct ds_sender_bandwidth_stats {
	uint64_t rate;	     /* the cap, bytes per second; 0: none */
	uint64_t bytes;	     /* bytes of the Batch frames sent so far */
	double wait_seconds; /* time a frame was held back by the cap, the current hold included */
} ds_sender_bandwidth_stats;

/** The cap and what it metered so far. Safe from another thread. */
void ds_sender_bandwidth_stats_get(const ds_sender *s, ds_sender_bandwidth_stats *out);

/** Records the target has committed and not yet applied, as its last Ack said. */
uint64_t ds_sender_target_unapplied(const ds_sender *s);

/** The config's stats (NULL when it gave none). */
const ds_link_stats *ds_sender_link_stats(const ds_sender *s);

#endif
