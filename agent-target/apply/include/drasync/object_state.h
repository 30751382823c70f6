#ifndef DRASYNC_OBJECT_STATE_H
#define DRASYNC_OBJECT_STATE_H

/*
 * The importer's per-object apply state, kept in the inbox's SQLite file on
 * the applier's own connection (the receiver never writes it).
 *
 * The inbox's `records` table is the log of what arrived; this table is what
 * the applier makes of it: per source and object key the newest committed
 * record (the desired state), the hash of the object last applied on the
 * target, the state and its reason. ds_object_state_ingest() folds the records
 * committed since the last call into it (a cursor on records.id, stored in the
 * same transaction), so a burst of updates to one object leaves one pending
 * row, and a re-commit of an unchanged object leaves its row as it was.
 *
 * Tables:
 *   object_state(id, source, key, api_version, kind, namespace, name,
 *                record_id, seq, op, content_hash, applied_hash,
 *                applied_record_id, target_api_version, target_namespace,
 *                target_name, state, reason, attempts, next_try_at, updated_at)
 *   apply_cursor(id = 1, record_id)   -- the last records.id ingested
 *   apply_results(id, source, epoch, seq, status, message)
 *                -- decisions the source has not heard of yet (SPEC §6: apply
 *                   results travel back in later Acks); queued when a record's
 *                   state is decided or changes, deleted once sent
 *
 * The key is "group/Kind/namespace/name" in the source's terms ("core" for the
 * core group, "" namespace for cluster-scoped objects), so the version of an
 * object may change without making it another object.
 */

#include "drasync/err.h"
#include "drasync/record.h"
#include "drasync/wire.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ds_object_state ds_object_state;

enum ds_apply_state {
	DS_APPLY_PENDING = 1, /* a new desired state waits for the applier */
	DS_APPLY_APPLIED,     /* the desired state is on the target */
	DS_APPLY_WAITING,     /* a workload waits for objects it needs */
	DS_APPLY_FAILED,      /* refused (reason says why); tried again on a new version */
	DS_APPLY_HELD,	      /* standby: kept in the ledger until failover */
	DS_APPLY_SKIPPED,     /* not replicated (reason says why) */
	DS_APPLY_DELETED,     /* tombstone: deleted on the target, or already gone */
	DS_APPLY_KEPT,	      /* tombstone: the target object is not drasync's; left */
	DS_APPLY_REFUSED, /* outside the source's grant (SPEC §5 trust boundary): nothing written */
	DS_APPLY_STATE_MAX
};

/* One row, as the applier picks it (strings owned; ds_object_state_row_dispose). */
typedef struct ds_object_state_row {
	int64_t id;
	char *source, *key;
	char *api_version, *kind, *ns,
	    *name;	   /* of the desired record; ns NULL when cluster-scoped */
	int64_t record_id; /* records.id of the desired state */
	uint64_t seq;
	enum ds_record_op op;
	uint8_t content_hash[DS_HASH_LEN];
	bool has_applied_hash;
	uint8_t applied_hash[DS_HASH_LEN]; /* of the transformed object last applied */
	int64_t applied_record_id;	   /* 0: none */
	char *target_api_version, *target_ns, *target_name; /* where it was applied, or NULL */
	enum ds_apply_state state;
	char *reason;
	int attempts;
	int64_t next_try_at; /* ms since the epoch */
	/* Filled by ds_object_state_pick() only: */
	uint8_t *payload; /* the record's payload as stored (compressed when zstd) */
	size_t payload_len;
	int zstd;
	char *source_uid;
	char *source_cluster; /* sources.cluster_name, or NULL */
} ds_object_state_row;

/* What ds_object_state_set() records. */
typedef struct ds_object_state_result {
	enum ds_apply_state state;
	const char *reason; /* NULL: none */
	/* When the object was applied: its hash and where (else all NULL). */
	const uint8_t *applied_hash;
	const char *target_api_version, *target_ns, *target_name;
	int attempts;
	int64_t next_try_at; /* ms; 0: at once */
	/* The object was taken off the target (a held object deleted at failback): the
	 * applied hash and target identity are forgotten, so it is created again when due. */
	bool forget_applied;
	/* Without an applied hash: the object is on the target at target_*, but not
	 * as desired (the server dropped fields); recorded so that a tombstone finds it. */
	bool on_target;
} ds_object_state_result;

/*
 * Rows by the namespace they go to on the target: where they were applied,
 * else their source namespace mapped by map_ns. Cluster-scoped rows are in no
 * scope. A NULL scope is every row.
 */
typedef struct ds_object_state_scope {
	const char *const *ns; /* target namespaces */
	size_t n;
	/* The target namespace of a source namespace, for rows never applied; NULL: the same. */
	const char *(*map_ns)(void *ud, const char *source_ns);
	void *map_ud;
	/* Held for the scope's own applier (failover, failback): reconsider_in makes the
	 * rows due at exactly this wall time (ms), so that a running importer's applier
	 * leaves them to it until then; pick_in and due_in take them as due now. 0: none. */
	int64_t held_at;
} ds_object_state_scope;

/**
 * Open the state tables in the ledger file at path (created when missing).
 * The inbox may be open on the same file in another connection.
 */
int ds_object_state_open(ds_object_state **out, const char *path, ds_err *err);
void ds_object_state_free(ds_object_state *st);

/** "pending", "applied", ... or "unknown". */
const char *ds_apply_state_name(enum ds_apply_state s);

/** The object key of (apiVersion, kind, namespace, name) into buf. @return buf */
const char *ds_object_state_key(const char *api_version, const char *kind, const char *ns,
				const char *name, char *buf, size_t size);

/**
 * Fold every upsert and tombstone committed in the inbox since the last call
 * into the table: the newest record of a key becomes its desired state; the
 * row becomes pending unless the record has the same op and content hash as
 * the desired state it replaces. A snapshot's end turns every live object of
 * its source that the manifest does not hold into a pending tombstone (of its
 * last upsert, whose uid the delete guard checks); a snapshot's begin only
 * moves the cursor.
 * @return the number of records read (>= 0), or a negative errno
 */
int ds_object_state_ingest(ds_object_state *st, ds_err *err);

/*
 * A pick stops once its payloads' JSON (decompressed: what the pass parses)
 * adds up to this, one row at least: a pass's memory is bounded by bytes, not
 * by its count of objects (issue 23). Each record is at most DS_JSON_MAX_BYTES.
 */
#define DS_OBJECT_STATE_PICK_BYTES (8u << 20)

/**
 * Rows due for the applier (pending or waiting, next_try_at <= now_ms), oldest
 * first, at most max and DS_OBJECT_STATE_PICK_BYTES, with their record's payload. *rows is a new
 * array of *n rows; free with ds_object_state_rows_free().
 */
int ds_object_state_pick(ds_object_state *st, int64_t now_ms, size_t max,
			 ds_object_state_row **rows, size_t *n, ds_err *err);

/** As ds_object_state_pick(), the rows in scope only (NULL: all). */
int ds_object_state_pick_in(ds_object_state *st, int64_t now_ms, size_t max,
			    const ds_object_state_scope *scope, ds_object_state_row **rows,
			    size_t *n, ds_err *err);

/**
 * Record the outcome of applying row id's record record_id. The applied hash
 * and target identity are kept in any case; the state, reason and retry time
 * only when record_id is still the desired state (a newer record that arrived
 * meanwhile stays pending). @return 0, or a negative errno
 */
int ds_object_state_set(ds_object_state *st, int64_t id, int64_t record_id,
			const ds_object_state_result *res, ds_err *err);

/**
 * Every upsert decided so far becomes pending again (the mapping rules
 * changed); an object whose transformed form hashes as applied costs no call.
 */
int ds_object_state_reconsider(ds_object_state *st, ds_err *err);

/**
 * As ds_object_state_reconsider(), the upsert of (source, key) only, when decided
 * (a PodGroup whose members changed: its claims follow them).
 * @return 1 made due, 0 not (absent, a tombstone, or due already), or a negative errno
 */
int ds_object_state_reconsider_key(ds_object_state *st, const char *source, const char *key,
				   ds_err *err);

/**
 * As ds_object_state_reconsider(), the upserts in scope only (their namespace
 * changed mode: failover, failback). @return the number of rows made due, or a negative errno
 */
int ds_object_state_reconsider_in(ds_object_state *st, const ds_object_state_scope *scope,
				  ds_err *err);

/**
 * Rows in scope the applier still has to look at: pending (due now or in
 * backoff, *next_at (may be NULL) the earliest retry, ms) and waiting.
 * @return 0, or a negative errno
 */
int ds_object_state_due_in(ds_object_state *st, const ds_object_state_scope *scope, size_t *pending,
			   size_t *waiting, int64_t *next_at, ds_err *err);

/**
 * The target namespaces of the live objects (upserts) in the ledger, sorted,
 * each once; namespaces never applied are mapped by map_ns (NULL: the same).
 * *out is a new array of new strings (ds_object_state_strings_free).
 */
int ds_object_state_namespaces(ds_object_state *st, const char *(*map_ns)(void *, const char *),
			       void *map_ud, char ***out, size_t *n, ds_err *err);

/** The sources with live objects in scope, sorted, each once (ds_object_state_strings_free). */
int ds_object_state_sources_in(ds_object_state *st, const ds_object_state_scope *scope, char ***out,
			       size_t *n, ds_err *err);

void ds_object_state_strings_free(char **v, size_t n);

/**
 * The rows of live objects (upserts) in scope, without payload, oldest first:
 * what failover and failback report once they are done. *rows is new
 * (ds_object_state_rows_free).
 */
int ds_object_state_list_in(ds_object_state *st, const ds_object_state_scope *scope,
			    ds_object_state_row **rows, size_t *n, ds_err *err);

/**
 * Record several outcomes in one transaction: ds_object_state_set() calls
 * between begin and commit share it (one fsync for a group instead of one per
 * object). On an error, rollback.
 */
int ds_object_state_begin(ds_object_state *st, ds_err *err);
int ds_object_state_commit(ds_object_state *st, ds_err *err);
void ds_object_state_rollback(ds_object_state *st);

/** Make every waiting row due now (something it may need was just applied). */
int ds_object_state_wake_waiting(ds_object_state *st, ds_err *err);

/**
 * Whether kind/ns/name (target names) was applied by drasync and no tombstone
 * has come for it since (a newer version may be pending or refused).
 * @return 1, 0, or a negative errno
 */
int ds_object_state_target_applied(ds_object_state *st, const char *kind, const char *ns,
				   const char *name, ds_err *err);

/**
 * The newest record any row desires (records.id; 0 when none): what was
 * folded in, and so could have been applied, before now.
 * @return 0, or a negative errno
 */
int ds_object_state_last_record_id(ds_object_state *st, int64_t *out, ds_err *err);

/**
 * SPEC §6, several sources: the other source (not `source`; NULL: any)
 * whose object drasync applied as kind ns/name (target names) and has not
 * deleted, into owner (may be NULL). @return 1 found, 0 none, or a negative errno
 */
int ds_object_state_target_owner(ds_object_state *st, const char *source, const char *kind,
				 const char *ns, const char *name, char *owner, size_t size,
				 ds_err *err);

/* Which rows ds_object_state_retry() marks, by where they go on the target. */
typedef struct ds_object_state_match {
	const char *kind; /* NULL: any; compared without regard to case */
	const char *name; /* NULL: any; the target name, else the source name */
	const char *ns;	  /* target namespace; NULL: any (or none); "": cluster-scoped only */
	/* The target namespace of a source namespace, for rows never applied; NULL: the same. */
	const char *(*map_ns)(void *ud, const char *source_ns);
	void *map_ud;
	bool dry_run; /* report the matches, change nothing */
} ds_object_state_match;

/* One row ds_object_state_retry() marked, as it was (borrowed for the call); target_ns is
 * where it goes on the target (NULL: cluster-scoped). */
typedef void (*ds_object_state_retry_fn)(void *ud, const ds_object_state_row *row,
					 const char *target_ns);

/**
 * Make the matching rows due now, for an operator who fixed the cause: a
 * failed row becomes pending again, a pending row in backoff and a waiting
 * row are due at once; their attempts start from 0. Rows already due,
 * applied or otherwise decided are left. The target namespace of a row is
 * where it was applied, else its source namespace mapped by m->map_ns.
 * fn (may be NULL) is called for each, in one transaction with the change.
 * @return the number of rows marked (>= 0), or a negative errno
 */
int ds_object_state_retry(ds_object_state *st, const ds_object_state_match *m,
			  ds_object_state_retry_fn fn, void *ud, ds_err *err);

/** The row of (source, key), without payload. @return 0, -ENOENT, or a negative errno */
int ds_object_state_get(ds_object_state *st, const char *source, const char *key,
			ds_object_state_row *out, ds_err *err);

/** Rows a pick at now_ms would take, in any scope. @return >= 0, or a negative errno */
int ds_object_state_count_due(ds_object_state *st, int64_t now_ms, ds_err *err);

/**
 * The payload of the desired record of (source, key) as stored (zstd when
 * *zstd), not a tombstone; *payload is the caller's (free()).
 * @return 0, -ENOENT, or a negative errno
 */
int ds_object_state_payload(ds_object_state *st, const char *source, const char *key,
			    uint8_t **payload, size_t *len, int *zstd, ds_err *err);

/** One desired record's payload as stored (borrowed for the call); return < 0 to stop. */
typedef int (*ds_object_state_payload_fn)(void *ud, const char *kind, const void *payload,
					  size_t len, int zstd);

/**
 * Call fn for the desired record of every live object (not a tombstone) of
 * source in source namespace ns, in ledger order.
 * @return 0, fn's negative value, or a negative errno
 */
int ds_object_state_each_in(ds_object_state *st, const char *source, const char *ns,
			    ds_object_state_payload_fn fn, void *ud, ds_err *err);

/** Number of rows in state s. @return >= 0, or a negative errno */
int ds_object_state_count(ds_object_state *st, enum ds_apply_state s, ds_err *err);

/*
 * Apply results for the link, read on the receiver's own handle. Up to max
 * results queued for (source, epoch), oldest first, into out; the messages
 * live in st until the next call. *token names the last one read, for
 * ds_object_state_results_sent() once they are on their way.
 */
int ds_object_state_results(ds_object_state *st, const char *source, uint64_t epoch,
			    ds_wire_result *out, size_t max, size_t *n, int64_t *token,
			    ds_err *err);

/** Forget source's results up to token, and those of its other epochs. */
int ds_object_state_results_sent(ds_object_state *st, const char *source, uint64_t epoch,
				 int64_t token, ds_err *err);

/**
 * The unapplied backlog: records committed and not yet folded in, plus objects
 * whose newest state waits for the applier (pending). A workload waiting for
 * what it needs is not backlog: it is applied as soon as that exists.
 */
int ds_object_state_unapplied(ds_object_state *st, uint64_t *n, ds_err *err);

/**
 * The same backlog per source, in two aggregates: fn(ud, source, n) for the
 * records of each source, then again for its pending objects, so fn adds.
 */
int ds_object_state_unapplied_each(ds_object_state *st,
				   int (*fn)(void *ud, const char *source, uint64_t n), void *ud,
				   ds_err *err);

void ds_object_state_row_dispose(ds_object_state_row *row);
void ds_object_state_rows_free(ds_object_state_row *rows, size_t n);

#endif
