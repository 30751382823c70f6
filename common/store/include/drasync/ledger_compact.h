#ifndef DRASYNC_LEDGER_COMPACT_H
#define DRASYNC_LEDGER_COMPACT_H

/*
 * Compaction of the target's ledger: what the ledger no longer needs is
 * deleted, so that its size follows the live objects, not their history.
 *
 * - a record, once the apply cursor has passed it, unless an object_state row
 *   still names it (the desired or the applied state of an object), its
 *   apply result still waits in apply_results for its source's next Ack, or
 *   it is the snapshot end of a manifest still kept;
 * - a manifest, once a later snapshot end of the same source has been
 *   ingested (its prune has run): the last one of each source is kept;
 * - then the free pages, given back to the filesystem with
 *   PRAGMA incremental_vacuum (a file created with auto_vacuum=INCREMENTAL).
 *
 * Each step is a transaction of a few hundred rows (or pages), so that the
 * receiver, which commits on the same file, never waits more than a few ms.
 * The link's tables are written here, in the store, on behalf of the apply
 * stage, which calls it between passes.
 */

#include "drasync/store.h"

#include <stdbool.h>
#include <stdint.h>

/* Rows examined (records) or deleted (manifests) per transaction, pages per vacuum step. */
#define DS_LEDGER_COMPACT_BATCH 256
#define DS_LEDGER_COMPACT_PAGES 64

/* What one ds_ledger_compact() did. */
typedef struct ds_ledger_compact_stats {
	uint64_t records, manifests; /* rows deleted */
	uint64_t bytes_freed;	     /* the file shrank by, in bytes */
	int64_t ms;		     /* time spent */
} ds_ledger_compact_stats;

typedef struct ds_ledger_compactor ds_ledger_compactor;

/** A compactor on st (a ledger open read-write); st must outlive it. */
int ds_ledger_compactor_new(ds_store *st, ds_ledger_compactor **out, ds_err *err);
void ds_ledger_compactor_free(ds_ledger_compactor *c);

/**
 * Compact for at most about budget_ms (at least one step of each kind):
 * where a sweep of the records stopped, it goes on at the next call.
 * *out (may be NULL) is what this call did.
 * @return 1 when work is left for another call, 0 when all is done, or a
 *         negative errno
 */
int ds_ledger_compact(ds_ledger_compactor *c, int budget_ms, ds_ledger_compact_stats *out,
		      ds_err *err);

/** The bytes of the ledger at path on disk: the file and its write-ahead log. */
uint64_t ds_ledger_file_bytes(const char *path);

#endif
