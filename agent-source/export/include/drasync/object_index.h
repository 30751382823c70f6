#ifndef DRASYNC_OBJECT_INDEX_H
#define DRASYNC_OBJECT_INDEX_H

/*
 * The exporter's durable memory of what it pushed (SQLite), kept in the
 * outbox's database file so the index and the outbox are committed in one
 * transaction (ds_object_index_push()): a crash never leaves them
 * disagreeing. Per object key it holds the content hash and source uid of
 * the last record pushed, that record's seq, the pass generation that last
 * saw the object (mark and sweep), and the target's latest result for it.
 *
 * The key does not depend on the apiVersion served: "group/Kind/namespace/name"
 * ("" for the core group and for cluster-scoped objects), e.g.
 * "apps/Deployment/ml/trainer", "/ConfigMap/ml/settings", "/Namespace//ml".
 * It is also the key of the snapshot manifest.
 *
 * Tables (readable by `status` and by operators with sqlite3):
 *   export_objects(key, api_version, grp, kind, namespace, name, uid, hash,
 *                  seq, seen, deleted, result_status, result_message, result_seq)
 *   export_meta(key, value)
 *
 * One handle per thread, as for the outbox.
 */

#include "drasync/err.h"
#include "drasync/outbox.h"
#include "drasync/record.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ds_object_index ds_object_index;

#define DS_OBJECT_KEY_MAX 600

/**
 * The index key of an object into buf (at least DS_OBJECT_KEY_MAX bytes is
 * always enough for valid names). ns NULL or "" for cluster-scoped objects.
 * @return 0, -EINVAL (no kind or name), -ENAMETOOLONG
 */
int ds_object_key(char *buf, size_t size, const char *api_version, const char *kind, const char *ns,
		  const char *name);

/**
 * Open the index in the database file at `path` (the outbox's file; created
 * when missing) and create its tables.
 */
int ds_object_index_open(ds_object_index **out, const char *path, ds_err *err);
void ds_object_index_free(ds_object_index *idx);

/* One object as the index holds it; strings borrowed for the call. */
typedef struct ds_index_row {
	const char *key;
	const char *api_version;
	const char *kind;
	const char *ns; /* "" for cluster-scoped */
	const char *name;
	const char *uid;
	uint8_t hash[DS_HASH_LEN]; /* zero for a tombstone */
	uint64_t seq;		   /* of the last record pushed for it */
	uint64_t seen;		   /* the pass generation that last saw it */
	bool deleted;		   /* the last record was a tombstone */
	/* The target's latest result for this object: of the record result_seq,
	 * which is `seq` when it is about the current version, 0 while that one
	 * awaits its result (status and message then are the previous version's). */
	int result_status; /* enum ds_result_status; 0 = never any */
	const char *result_message;
	uint64_t result_seq;
} ds_index_row;

/* Called per row; return nonzero to stop (that value is returned). */
typedef int (*ds_index_row_fn)(void *ud, const ds_index_row *row);

/**
 * Look one object up. The row's strings live until the next call on idx.
 * @return 0, -ENOENT when the index has never held it
 */
int ds_object_index_get(ds_object_index *idx, const char *key, ds_index_row *out, ds_err *err);

/**
 * Push records to the outbox and record them in the index in the same
 * transaction: an upsert stores its hash, uid and seq and marks the object
 * seen in the current generation; a tombstone marks it deleted; snapshot
 * markers note the snapshot's progress. Nothing of either is kept when any
 * part fails.
 */
int ds_object_index_push(ds_object_index *idx, ds_outbox *ob, const ds_record *recs, size_t n,
			 uint64_t *last_seq, ds_err *err);
/** ds_object_index_push() of records a chunk at a time (ds_outbox_push_each()). */
int ds_object_index_push_each(ds_object_index *idx, ds_outbox *ob, ds_outbox_next next,
			      void *next_ud, uint64_t *last_seq, ds_err *err);

/**
 * A check run first in every push's transaction, before the index is
 * written (after the records are in the outbox: they are rolled back with
 * it): a negative return refuses the push. The exporter's: no record of a
 * namespace being relocated (source_relocation.h), decided on what is
 * committed at that moment. NULL: none.
 */
void ds_object_index_set_guard(ds_object_index *idx, ds_outbox_hook guard, void *ud);

/* ---- mark and sweep ---- */

/** Start a pass: a new durable generation into *gen (also the current one for pushes). */
int ds_object_index_begin_pass(ds_object_index *idx, uint64_t *gen, ds_err *err);

/** The current generation (0 before the first pass). */
uint64_t ds_object_index_generation(const ds_object_index *idx);

/** Mark unchanged objects seen in the current generation, in one transaction. */
int ds_object_index_mark(ds_object_index *idx, const char *const *keys, size_t n, ds_err *err);

/**
 * Every live (not deleted) object of `kind` that the current generation has
 * not seen, in key order; ns NULL: any namespace, else only that one.
 */
int ds_object_index_unseen(ds_object_index *idx, const char *kind, const char *ns,
			   ds_index_row_fn fn, void *ud, ds_err *err);

/** Every row (live and deleted), in key order, or only those of namespace ns (not NULL). */
int ds_object_index_each(ds_object_index *idx, const char *ns, ds_index_row_fn fn, void *ud,
			 ds_err *err);

/** Every namespace the index holds objects of (or the Namespace object of), sorted. */
int ds_object_index_namespaces(ds_object_index *idx, int (*fn)(void *ud, const char *ns), void *ud,
			       ds_err *err);

/**
 * Forget a namespace without tombstones: its objects and its Namespace
 * object leave the index (they stay on the target).
 * @param n  set to the number of rows removed (may be NULL)
 */
int ds_object_index_forget_namespace(ds_object_index *idx, const char *ns, size_t *n, ds_err *err);

/** Drop tombstoned rows at or below `seq` (the target has them); keeps failed and refused ones. */
int ds_object_index_prune_deleted(ds_object_index *idx, uint64_t seq, ds_err *err);

/* ---- snapshot ---- */

/* The key and hash of every live object; owned, ds_index_manifest_dispose(). */
typedef struct ds_index_manifest {
	ds_manifest_entry *entries;
	size_t n;
	char *keys; /* the arena the entries' keys point into */
} ds_index_manifest;

/** The manifest of a SNAPSHOT_END, read from the index (not from the objects). */
int ds_object_index_manifest(ds_object_index *idx, ds_index_manifest *out, ds_err *err);
/** How many entries the manifest has. */
int ds_object_index_manifest_count(ds_object_index *idx, size_t *n, ds_err *err);
/** The manifest's entries after key `after` (NULL: from the first), at most limit (0: all). */
int ds_object_index_manifest_page(ds_object_index *idx, const char *after, size_t limit,
				  ds_index_manifest *out, ds_err *err);
void ds_index_manifest_dispose(ds_index_manifest *m);

/**
 * Whether a snapshot was ever completed (its SNAPSHOT_END pushed) and none
 * was left open: false on the first run against a target and after a crash
 * between SNAPSHOT_BEGIN and SNAPSHOT_END.
 */
int ds_object_index_snapshot_done(ds_object_index *idx, bool *done, ds_err *err);

/* ---- results ---- */

/**
 * Record the target's result for the record `seq`. When seq is still the
 * object's latest record its result is stored; *row (may be NULL) then
 * describes the object, valid until the next call, and *changed (may be
 * NULL) says whether status or message differ from the object's previous
 * result (of this or an earlier version): a reason is news once per object.
 * @return 0, -ENOENT when seq is no object's latest record (a snapshot
 *         marker, or a version pushed over since)
 */
int ds_object_index_result(ds_object_index *idx, uint64_t seq, enum ds_result_status status,
			   const char *message, ds_index_row *row, bool *changed, ds_err *err);

/**
 * A batch of results in one transaction (one commit, one fsync, for an Ack's
 * worth): ds_object_index_result() calls between begin and commit are part of
 * it. A failed commit rolls back; rollback is a no-op outside a transaction.
 */
int ds_object_index_begin(ds_object_index *idx, ds_err *err);
int ds_object_index_commit(ds_object_index *idx, ds_err *err);
void ds_object_index_rollback(ds_object_index *idx);

/* ---- small durable values (pass times and counts) ---- */

int ds_object_index_meta_get(ds_object_index *idx, const char *key, int64_t *value, ds_err *err);
int ds_object_index_meta_set(ds_object_index *idx, const char *key, int64_t value, ds_err *err);

/* Per kind: live objects and the target's latest result over them. */
typedef struct ds_index_kind_count {
	char kind[64];
	uint64_t objects;  /* live objects */
	uint64_t ok;	   /* committed by the target (ok or duplicate), not yet applied */
	uint64_t applied;  /* applied on the target (or deleted there) */
	uint64_t waiting;  /* a workload waiting on the target for objects it needs */
	uint64_t held;	   /* held in the target's ledger (standby) */
	uint64_t failed;   /* result failed */
	uint64_t refused;  /* result refused: outside what the target grants this source */
	uint64_t skipped;  /* result skipped (the target chose not to act) */
	uint64_t awaiting; /* not acknowledged yet */
} ds_index_kind_count;

/**
 * Counts per kind, sorted by kind; *out owned (free()).
 */
int ds_object_index_kind_counts(ds_object_index *idx, ds_index_kind_count **out, size_t *n,
				ds_err *err);

/** Rows whose current version's result is `status` (failed, refused, skipped), in key order. */
int ds_object_index_with_result(ds_object_index *idx, enum ds_result_status status,
				ds_index_row_fn fn, void *ud, ds_err *err);

#endif
