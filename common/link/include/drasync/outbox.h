#ifndef DRASYNC_OUTBOX_H
#define DRASYNC_OUTBOX_H

/*
 * The source's durable queue (SQLite, WAL, synchronous=FULL). The exporter
 * pushes records; each gets the next seq of the outbox's epoch and is stored
 * encoded (and compressed) for the wire. The sender reads from the seq the
 * target last committed and acknowledges what the target committed; acked
 * records are pruned, keeping the last `retain_acked` of them.
 *
 * One ds_outbox per thread: the exporter and the sender each open their own
 * handle on the same file.
 */

#include "drasync/err.h"
#include "drasync/record.h"
#include "drasync/wire.h"

#include <stdint.h>

typedef struct ds_outbox ds_outbox;

typedef struct ds_outbox_options {
	int zstd_level;		   /* default 3 */
	size_t compress_threshold; /* payloads at least this big are compressed; default 512 */
	uint64_t retain_acked;	   /* acked records kept for a target restored from backup; 0 */
} ds_outbox_options;

void ds_outbox_options_default(ds_outbox_options *opt);

/** Open or create the outbox at path; a new outbox draws a new random epoch. opt NULL: defaults. */
int ds_outbox_open(ds_outbox **out, const char *path, const ds_outbox_options *opt, ds_err *err);
void ds_outbox_free(ds_outbox *ob);

uint64_t ds_outbox_epoch(const ds_outbox *ob);

/**
 * Append records in one transaction. Each record's epoch, seq and content
 * hash are assigned here (the caller's values are ignored).
 * @param last_seq  set to the seq of the last record pushed (may be NULL)
 * @return 0, -EINVAL for an invalid record (nothing pushed), or a negative errno
 */
int ds_outbox_push(ds_outbox *ob, const ds_record *recs, size_t n, uint64_t *last_seq, ds_err *err);

struct sqlite3;

/**
 * Runs inside ds_outbox_push_with()'s transaction once the records are
 * stored. `pushed` are the records as stored: epoch, seq and content hash
 * assigned. The hook may write tables of its own through `db` (the outbox's
 * connection, already in the transaction: no BEGIN or COMMIT). A negative
 * return rolls back the records and everything the hook wrote, and is what
 * the push returns.
 */
typedef int (*ds_outbox_hook)(void *ud, struct sqlite3 *db, const ds_record *pushed, size_t n,
			      ds_err *err);

/**
 * ds_outbox_push() that also runs `hook` (may be NULL) in the same
 * transaction, so what the caller keeps beside the outbox (the exporter's
 * index) and the records are committed together or not at all.
 */
int ds_outbox_push_with(ds_outbox *ob, const ds_record *recs, size_t n, ds_outbox_hook hook,
			void *ud, uint64_t *last_seq, ds_err *err);

/**
 * The next records of a ds_outbox_push_each(): *recs (valid until the next
 * call) and *n, 0 at the end. A negative return rolls the whole push back.
 */
typedef int (*ds_outbox_next)(void *ud, const ds_record **recs, size_t *n, ds_err *err);

/**
 * ds_outbox_push_with() of records a chunk at a time, all in one transaction:
 * what no caller should hold in memory at once (a large snapshot's manifest
 * parts) is committed together or not at all. `hook` runs on each chunk.
 */
int ds_outbox_push_each(ds_outbox *ob, ds_outbox_next next, void *next_ud, ds_outbox_hook hook,
			void *ud, uint64_t *last_seq, ds_err *err);

typedef struct ds_outbox_state {
	uint64_t first_seq; /* lowest seq still held; last_seq + 1 when empty */
	uint64_t last_seq;  /* highest seq ever pushed; 0 when none */
	uint64_t acked_seq; /* highest seq the target acknowledged */
} ds_outbox_state;

int ds_outbox_state_get(ds_outbox *ob, ds_outbox_state *out, ds_err *err);

/* Encoded records read for one batch; owned by the batch. */
typedef struct ds_outbox_batch {
	ds_wire_blob *records;
	size_t n;
	uint64_t first_seq;
	uint64_t last_seq;
	size_t bytes;
	uint8_t *arena;
	bool manifest_parts; /* a SNAPSHOT_PART among them (DS_CAP_MANIFEST_PARTS) */
} ds_outbox_batch;

/**
 * Read consecutive records from `from_seq`: at most max_records and (beyond
 * the first) max_bytes of encoded records. n == 0 when none is there yet.
 */
int ds_outbox_read(ds_outbox *ob, uint64_t from_seq, size_t max_records, size_t max_bytes,
		   ds_outbox_batch *out, ds_err *err);
void ds_outbox_batch_dispose(ds_outbox_batch *b);

/**
 * Where to resume for a target that committed `committed`: committed + 1 when
 * the outbox still holds it, else the first snapshot-begin after it.
 * @return 0 with *from set, -ENOENT when a snapshot is required (none held),
 *         -ERANGE when the target claims more than was ever pushed
 */
int ds_outbox_resume_point(ds_outbox *ob, uint64_t committed, uint64_t *from, ds_err *err);

/** Record that the target committed everything up to seq (durable), pruning. */
int ds_outbox_ack(ds_outbox *ob, uint64_t seq, ds_err *err);

#endif
