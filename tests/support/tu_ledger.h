#ifndef DRASYNC_TU_LEDGER_H
#define DRASYNC_TU_LEDGER_H

/*
 * Committing records into a real inbox as the receiver does (encoded, decoded
 * and committed through ds_inbox_commit), for tests of what works from the
 * ledger. Include after cmocka.h.
 */

#include "drasync/inbox.h"
#include "drasync/record.h"

#include <jansson.h>
#include <stdint.h>

/* A source session on the inbox and the next seq to use. */
typedef struct tu_ledger {
	ds_inbox *ib;
	const char *source;
	uint64_t epoch, next_seq;
} tu_ledger;

/** Open the inbox at path and start a session for source (cluster name = source). */
void tu_ledger_open(tu_ledger *l, const char *path, const char *source);
void tu_ledger_close(tu_ledger *l);

/**
 * Commit n records (seq assigned from next_seq, epoch set, content hash
 * computed from the payload) in one batch; handler may be NULL. Fails the test
 * when the commit fails.
 */
void tu_ledger_commit(tu_ledger *l, ds_record *recs, size_t n, ds_record_handler handler, void *ud);

/**
 * An upsert of obj (its apiVersion, kind, namespace, name) with payload the
 * compact JSON of obj, kept in *payload (caller frees) so the record can point
 * at it.
 */
ds_record tu_record_upsert(const json_t *obj, const char *source_uid, char **payload);

/** A tombstone of apiVersion/kind ns/name. */
ds_record tu_record_tombstone(const char *api_version, const char *kind, const char *ns,
			      const char *name, const char *source_uid);

/** One integer from the ledger at path (read-only); -1 when the query has no row. */
long long tu_ledger_int(const char *path, const char *sql);

#endif
