#ifndef DRASYNC_INBOX_H
#define DRASYNC_INBOX_H

/*
 * The target's ledger of received records (SQLite, WAL, synchronous=FULL).
 * Per authenticated source it keeps the epoch and the last committed seq;
 * every record is committed together with the handler's result before the
 * receiver acknowledges it. A record at or below the committed seq is a
 * duplicate: acknowledged, not handed on again.
 *
 * Tables (readable by `status` and by operators with sqlite3):
 *   sources(name, cluster_name, epoch, committed_seq, updated_at)
 *   records(id, source, epoch, seq, op, api_version, kind, namespace, name,
 *           source_uid, source_resource_version, content_hash, compression,
 *           payload, snapshot_id, status, message, committed_at)
 *   manifests(source, epoch, seq, key, content_hash)   -- of each snapshot-end
 *   presence(source, peer, since, seen_at, valid_until, ended_at, end_reason)
 *       -- the link's sessions as the receiver sees them (milliseconds since the
 *          epoch): opened at Hello, seen again while the connection lives
 *          (heartbeats keep it up), ended at Goodbye, drop or disconnect. A
 *          row still open past valid_until belongs to a receiver that died.
 */

#include "drasync/err.h"
#include "drasync/record.h"
#include "drasync/wire.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct ds_inbox ds_inbox;

/*
 * Called for each new record inside the commit transaction; fills res
 * (preset to DS_RESULT_OK). A crash before the commit hands the record on
 * again after the restart, so the handler must be idempotent (apply is).
 */
typedef void (*ds_record_handler)(void *ud, const char *source, const ds_record *rec,
				  ds_record_result *res);

int ds_inbox_open(ds_inbox **out, const char *path, ds_err *err);
void ds_inbox_free(ds_inbox *ib);

/**
 * Start a session for `source` (the name the authorized-sources file gives
 * its key) at `epoch`. A new epoch restarts the numbering at 0.
 * @param committed  set to the last committed seq in that epoch
 */
int ds_inbox_session(ds_inbox *ib, const char *source, const char *cluster_name, uint64_t epoch,
		     uint64_t *committed, ds_err *err);

/**
 * Commit the records of a decoded batch in one transaction, calling the
 * handler for each new one. results[i] receives record i's result (the
 * message points into the inbox, valid until the next call).
 * @return 0 with *committed updated; -EPROTO when the batch leaves a gap
 *         after the committed seq or carries another epoch (nothing committed)
 */
int ds_inbox_commit(ds_inbox *ib, const char *source, uint64_t epoch, const ds_wire_msg *batch,
		    ds_record_handler handler, void *ud, ds_wire_result *results,
		    uint64_t *committed, ds_err *err);

/* A source's link presence, as ds_inbox_presence_get() reads it. */
typedef struct ds_inbox_presence {
	char peer[64];			     /* "ip:port" of the session's connection */
	int64_t since, seen_at, valid_until; /* ms since the epoch */
	int64_t ended_at;		     /* 0: not ended */
	char end_reason[200];
	bool connected; /* not ended and seen within valid_until */
} ds_inbox_presence;

/**
 * Record that source's session is up: opened (open, since = now) or seen
 * again; valid_ms is how long the row holds without being seen again.
 */
int ds_inbox_presence_seen(ds_inbox *ib, const char *source, const char *peer, bool open,
			   int64_t valid_ms, ds_err *err);

/** Record that source has no session any more, and why. */
int ds_inbox_presence_end(ds_inbox *ib, const char *source, const char *why, ds_err *err);

/** source's presence at now_ms. @return 1, 0 when never connected, or a negative errno */
int ds_inbox_presence_get(ds_inbox *ib, const char *source, int64_t now_ms, ds_inbox_presence *out,
			  ds_err *err);

/** The payload bytes the last successful ds_inbox_commit() stored (what the ledger holds). */
uint64_t ds_inbox_committed_bytes(const ds_inbox *ib);

/**
 * The payload bytes each source's records hold in the ledger, per source
 * (ds_store_sum_by_source: fn may be told a source more than once, and adds);
 * fn < 0 stops with that value. @return 0, or a negative errno
 */
int ds_inbox_ledger_bytes_each(ds_inbox *ib, int (*fn)(void *ud, const char *source, uint64_t n),
			       void *ud, ds_err *err);

/** Last committed (epoch, seq) of a source; both 0 when unknown. */
int ds_inbox_committed(ds_inbox *ib, const char *source, uint64_t *epoch, uint64_t *seq,
		       ds_err *err);

#endif
