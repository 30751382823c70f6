#include "drasync/object_state.h"

#include "drasync/buf.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Records read per ingest transaction: bounds the time the write lock is held. */
#define INGEST_CHUNK 2000

#define KEPT_MAX 16

struct ds_object_state {
	sqlite3 *db;
	char *messages; /* the arena of the last ds_object_state_results() */
	size_t messages_cap;
	/* The statements of the per-object calls, prepared once (kept()) */
	struct {
		const char *sql;
		sqlite3_stmt *q;
	} kept[KEPT_MAX];
};

static const char *const state_names[DS_APPLY_STATE_MAX] = {
    [DS_APPLY_PENDING] = "pending", [DS_APPLY_APPLIED] = "applied", [DS_APPLY_WAITING] = "waiting",
    [DS_APPLY_FAILED] = "failed",   [DS_APPLY_HELD] = "held",	    [DS_APPLY_SKIPPED] = "skipped",
    [DS_APPLY_DELETED] = "deleted", [DS_APPLY_KEPT] = "kept",
};

/* The state is stored by name so that operators can read the table with sqlite3. */
static const char schema[] =
    "CREATE TABLE IF NOT EXISTS object_state(id INTEGER PRIMARY KEY, source TEXT NOT NULL,"
    " key TEXT NOT NULL, api_version TEXT, kind TEXT, namespace TEXT, name TEXT,"
    " record_id INTEGER NOT NULL, seq INTEGER NOT NULL, op INTEGER NOT NULL,"
    " content_hash BLOB, applied_hash BLOB, applied_record_id INTEGER,"
    " target_api_version TEXT, target_namespace TEXT, target_name TEXT,"
    " state TEXT NOT NULL, reason TEXT, attempts INTEGER NOT NULL DEFAULT 0,"
    " next_try_at INTEGER NOT NULL DEFAULT 0, updated_at INTEGER, UNIQUE(source, key));"
    "CREATE INDEX IF NOT EXISTS object_state_due ON object_state(state, next_try_at);"
    "CREATE INDEX IF NOT EXISTS object_state_target ON object_state(kind, target_name);"
    "CREATE TABLE IF NOT EXISTS apply_cursor(id INTEGER PRIMARY KEY CHECK(id = 1),"
    " record_id INTEGER NOT NULL);"
    "INSERT OR IGNORE INTO apply_cursor(id, record_id) VALUES(1, 0);"
    "CREATE TABLE IF NOT EXISTS apply_results(id INTEGER PRIMARY KEY, source TEXT NOT NULL,"
    " epoch INTEGER NOT NULL, seq INTEGER NOT NULL, status INTEGER NOT NULL, message TEXT);"
    "CREATE INDEX IF NOT EXISTS apply_results_source ON apply_results(source, epoch, id);";

static int fail(sqlite3 *db, int rc, const char *what, ds_err *err)
{
	ds_err_set(err, "%s: %s", what, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
	switch (rc & 0xff) {
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_CANTOPEN:
		return -ENOENT;
	case SQLITE_READONLY:
	case SQLITE_PERM:
		return -EACCES;
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB:
		return -EBADMSG;
	default:
		return -EIO;
	}
}

static int exec(sqlite3 *db, const char *sql, ds_err *err)
{
	int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);

	return rc == SQLITE_OK ? 0 : fail(db, rc, sql, err);
}

static int prepare(sqlite3 *db, const char *sql, sqlite3_stmt **st, ds_err *err)
{
	int rc = sqlite3_prepare_v2(db, sql, -1, st, NULL);

	return rc == SQLITE_OK ? 0 : fail(db, rc, "object_state statement", err);
}

/*
 * The statement of sql (a string literal: its address is the key) kept for
 * st's life: prepared at the first call, reset and unbound at the next ones.
 * The caller resets it when done (sqlite3_reset), never finalizes it; the
 * SQL parser took a sixth of the applier's CPU when every object prepared
 * its statements anew.
 */
static int kept(ds_object_state *st, const char *sql, sqlite3_stmt **q, ds_err *err)
{
	size_t i;
	int rc;

	for (i = 0; i < KEPT_MAX && st->kept[i].sql; i++) {
		if (st->kept[i].sql == sql) {
			*q = st->kept[i].q;
			sqlite3_reset(*q);
			sqlite3_clear_bindings(*q);
			return 0;
		}
	}
	if (i == KEPT_MAX) {
		rc = prepare(st->db, sql, q, err);
		return rc < 0 ? rc : 1; /* 1: not kept, the caller finalizes */
	}
	rc = sqlite3_prepare_v3(st->db, sql, -1, SQLITE_PREPARE_PERSISTENT, q, NULL);
	if (rc != SQLITE_OK)
		return fail(st->db, rc, "object_state statement", err);
	st->kept[i].sql = sql;
	st->kept[i].q = *q;
	return 0;
}

/* Done with a statement of kept(): reset (its locks let go), or finalized when not kept. */
static void unkeep(int kept_rc, sqlite3_stmt *q)
{
	if (kept_rc == 1)
		sqlite3_finalize(q);
	else
		sqlite3_reset(q);
}

static void bind_text(sqlite3_stmt *st, int i, const char *s)
{
	if (s)
		sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(st, i);
}

static int64_t now_s(void)
{
	return (int64_t)time(NULL);
}

const char *ds_apply_state_name(enum ds_apply_state s)
{
	if ((int)s <= 0 || s >= DS_APPLY_STATE_MAX)
		return "unknown";
	return state_names[s];
}

static enum ds_apply_state state_parse(const char *s)
{
	for (int i = 1; s && i < DS_APPLY_STATE_MAX; i++)
		if (strcmp(s, state_names[i]) == 0)
			return (enum ds_apply_state)i;
	return DS_APPLY_PENDING;
}

const char *ds_object_state_key(const char *api_version, const char *kind, const char *ns,
				const char *name, char *buf, size_t size)
{
	const char *slash = api_version ? strchr(api_version, '/') : NULL;
	int glen = slash ? (int)(slash - api_version) : 4;

	snprintf(buf, size, "%.*s/%s/%s/%s", glen, slash ? api_version : "core", kind ? kind : "",
		 ns ? ns : "", name ? name : "");
	return buf;
}

int ds_object_state_open(ds_object_state **out, const char *path, ds_err *err)
{
	ds_object_state *st = calloc(1, sizeof(*st));
	int rc;

	if (!st)
		return ds_err_fallback(err, -ENOMEM);
	rc = sqlite3_open_v2(
	    path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		ds_err_set(err, "cannot open %s: %s", path,
			   st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc));
		rc = -EIO;
		goto out;
	}
	/* The receiver holds the write lock while it commits a batch; wait for it. */
	sqlite3_busy_timeout(st->db, 10000);
	rc = exec(st->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;", err);
	if (rc == 0)
		rc = exec(st->db, schema, err);
out:
	if (rc < 0) {
		ds_object_state_free(st);
		return ds_err_fallback(err, rc);
	}
	*out = st;
	return 0;
}

void ds_object_state_free(ds_object_state *st)
{
	if (!st)
		return;
	for (size_t i = 0; i < KEPT_MAX && st->kept[i].sql; i++)
		sqlite3_finalize(st->kept[i].q);
	sqlite3_close(st->db);
	free(st->messages);
	free(st);
}

static char *col_dup(sqlite3_stmt *q, int i)
{
	const char *s = (const char *)sqlite3_column_text(q, i);

	return s ? strdup(s) : NULL;
}

/* @return 1 when the inbox has created its records table, 0 before, or a negative errno */
static int have_records(ds_object_state *st, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	int rc =
	    prepare(st->db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'records'",
		    &q, err);

	if (rc == 0) {
		rc = sqlite3_step(q);
		rc = rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : fail(st->db, rc, "schema", err);
	}
	sqlite3_finalize(q);
	return rc;
}

/*
 * The upsert of one record into its key's row. An unchanged record (same op,
 * same content hash) keeps the row's state: re-committing what is applied
 * costs nothing, and re-committing what failed is not a new version.
 */
static const char upsert_sql[] =
    "INSERT INTO object_state(source, key, api_version, kind, namespace, name, record_id,"
    " seq, op, content_hash, state, attempts, next_try_at, updated_at)"
    " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 'pending', 0, 0, ?11)"
    " ON CONFLICT(source, key) DO UPDATE SET"
    " state = CASE WHEN op = excluded.op AND content_hash IS excluded.content_hash"
    "   THEN state ELSE 'pending' END,"
    " attempts = CASE WHEN op = excluded.op AND content_hash IS excluded.content_hash"
    "   THEN attempts ELSE 0 END,"
    " next_try_at = CASE WHEN op = excluded.op AND content_hash IS excluded.content_hash"
    "   THEN next_try_at ELSE 0 END,"
    " api_version = excluded.api_version, record_id = excluded.record_id,"
    " seq = excluded.seq, op = excluded.op, content_hash = excluded.content_hash,"
    " updated_at = excluded.updated_at"
    " RETURNING state, reason";

/* What the source hears of a state (SPEC §6: apply results in later Acks); 0: nothing. */
static int result_status(enum ds_apply_state s)
{
	switch (s) {
	case DS_APPLY_APPLIED:
	case DS_APPLY_DELETED:
		return DS_RESULT_APPLIED;
	case DS_APPLY_WAITING:
		return DS_RESULT_WAITING;
	case DS_APPLY_HELD:
		return DS_RESULT_HELD;
	case DS_APPLY_FAILED:
		return DS_RESULT_FAILED;
	case DS_APPLY_SKIPPED:
	case DS_APPLY_KEPT:
		return DS_RESULT_SKIPPED;
	default:
		return 0; /* pending: the source hears when it is decided */
	}
}

/* Queue the apply result of records.id record_id for its source's next Ack. */
static int queue_result(ds_object_state *st, int64_t record_id, enum ds_apply_state s,
			const char *reason, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	int status = result_status(s);
	int rc, k;

	if (!status)
		return 0;
	k = kept(st,
		 "INSERT INTO apply_results(source, epoch, seq, status, message)"
		 " SELECT source, epoch, seq, ?, ? FROM records WHERE id = ?",
		 &q, err);
	if (k < 0)
		return k;
	sqlite3_bind_int(q, 1, status);
	bind_text(q, 2, reason);
	sqlite3_bind_int64(q, 3, record_id);
	rc = sqlite3_step(q);
	rc = rc == SQLITE_DONE ? 0 : fail(st->db, rc, "apply result", err);
	unkeep(k, q);
	return rc;
}

/*
 * SPEC §6: a snapshot's end prunes what the source no longer holds. Every
 * live object of that source whose key is not in the snapshot's manifest
 * becomes a tombstone of its last upsert (so the guard of the apply stage
 * sees the uid drasync applied it with). Manifest keys name the core group
 * "" where ours say "core".
 */
static int prune(ds_object_state *st, const char *source, int64_t epoch, int64_t seq, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	int rc = prepare(
	    st->db,
	    "UPDATE object_state SET op = 2, state = 'pending', attempts = 0, next_try_at = 0,"
	    " reason = 'pruned: not in the snapshot that ended at seq ' || ?3, seq = ?3,"
	    " updated_at = ?4"
	    " WHERE source = ?1 AND op = 1 AND (CASE WHEN key LIKE 'core/%' THEN substr(key, 5)"
	    " ELSE key END) NOT IN (SELECT key FROM manifests WHERE source = ?1 AND epoch = ?2"
	    " AND seq = ?3)",
	    &q, err);

	if (rc < 0)
		return rc;
	bind_text(q, 1, source);
	sqlite3_bind_int64(q, 2, epoch);
	sqlite3_bind_int64(q, 3, seq);
	sqlite3_bind_int64(q, 4, now_s());
	rc = sqlite3_step(q);
	rc = rc == SQLITE_DONE ? 0 : fail(st->db, rc, "snapshot prune", err);
	sqlite3_finalize(q);
	return rc;
}

/* One chunk of records after the cursor, in one transaction. @return records read, or < 0 */
static int ingest_chunk(ds_object_state *st, ds_err *err)
{
	sqlite3_stmt *sel = NULL, *ups = NULL, *cur = NULL;
	enum ds_apply_state state;
	int64_t last = 0;
	int rc, n = 0;

	/* IMMEDIATE: waits for a receiver commit in progress, so that its records,
	 * whose handler may have woken us, are visible. */
	rc = exec(st->db, "BEGIN IMMEDIATE", err);
	if (rc < 0)
		return rc;
	rc = prepare(st->db, "SELECT record_id FROM apply_cursor WHERE id = 1", &cur, err);
	if (rc < 0)
		goto out;
	if (sqlite3_step(cur) == SQLITE_ROW)
		last = sqlite3_column_int64(cur, 0);
	sqlite3_finalize(cur);
	cur = NULL;
	rc = prepare(st->db,
		     "SELECT id, source, seq, op, api_version, kind, namespace, name, content_hash,"
		     " epoch FROM records WHERE id > ? ORDER BY id LIMIT ?",
		     &sel, err);
	if (rc == 0)
		rc = prepare(st->db, upsert_sql, &ups, err);
	if (rc < 0)
		goto out;
	sqlite3_bind_int64(sel, 1, last);
	sqlite3_bind_int(sel, 2, INGEST_CHUNK);
	while ((rc = sqlite3_step(sel)) == SQLITE_ROW) {
		int op = sqlite3_column_int(sel, 3);
		const char *av = (const char *)sqlite3_column_text(sel, 4);
		const char *kind = (const char *)sqlite3_column_text(sel, 5);
		const char *ns = (const char *)sqlite3_column_text(sel, 6);
		const char *name = (const char *)sqlite3_column_text(sel, 7);
		char key[1024];

		n++;
		last = sqlite3_column_int64(sel, 0);
		if (op == DS_RECORD_SNAPSHOT_END) {
			rc = prune(st, (const char *)sqlite3_column_text(sel, 1),
				   sqlite3_column_int64(sel, 9), sqlite3_column_int64(sel, 2), err);
			if (rc < 0)
				goto out;
			continue;
		}
		if (op != DS_RECORD_UPSERT && op != DS_RECORD_DELETE)
			continue;
		if (!kind || !name)
			continue; /* not about an object: nothing to apply */
		if (ns && !*ns)
			ns = NULL;
		ds_object_state_key(av, kind, ns, name, key, sizeof(key));
		sqlite3_reset(ups);
		sqlite3_clear_bindings(ups);
		bind_text(ups, 1, (const char *)sqlite3_column_text(sel, 1));
		bind_text(ups, 2, key);
		bind_text(ups, 3, av);
		bind_text(ups, 4, kind);
		bind_text(ups, 5, ns);
		bind_text(ups, 6, name);
		sqlite3_bind_int64(ups, 7, last);
		sqlite3_bind_int64(ups, 8, sqlite3_column_int64(sel, 2));
		sqlite3_bind_int(ups, 9, op);
		if (sqlite3_column_type(sel, 8) == SQLITE_BLOB)
			sqlite3_bind_blob(ups, 10, sqlite3_column_blob(sel, 8),
					  sqlite3_column_bytes(sel, 8), SQLITE_TRANSIENT);
		else
			sqlite3_bind_null(ups, 10);
		sqlite3_bind_int64(ups, 11, now_s());
		rc = sqlite3_step(ups);
		if (rc != SQLITE_ROW) {
			rc = fail(st->db, rc, "object_state upsert", err);
			goto out;
		}
		/* Unchanged and already decided: this record's result is that decision. */
		state = state_parse((const char *)sqlite3_column_text(ups, 0));
		if (state != DS_APPLY_PENDING) {
			char *reason = col_dup(ups, 1);
			rc = queue_result(st, last, state, reason, err);
			free(reason);
			if (rc < 0)
				goto out;
		}
		while ((rc = sqlite3_step(ups)) == SQLITE_ROW)
			;
	}
	if (rc != SQLITE_DONE) {
		rc = fail(st->db, rc, "records scan", err);
		goto out;
	}
	rc = prepare(st->db, "UPDATE apply_cursor SET record_id = ? WHERE id = 1", &cur, err);
	if (rc < 0)
		goto out;
	sqlite3_bind_int64(cur, 1, last);
	rc = sqlite3_step(cur);
	rc = rc == SQLITE_DONE ? 0 : fail(st->db, rc, "apply cursor", err);
out:
	sqlite3_finalize(sel);
	sqlite3_finalize(ups);
	sqlite3_finalize(cur);
	if (rc < 0) {
		exec(st->db, "ROLLBACK", NULL);
		return rc;
	}
	rc = exec(st->db, "COMMIT", err);
	if (rc < 0) {
		exec(st->db, "ROLLBACK", NULL);
		return rc;
	}
	return n;
}

int ds_object_state_ingest(ds_object_state *st, ds_err *err)
{
	int total = 0, rc;

	rc = have_records(st, err);
	if (rc <= 0)
		return ds_err_fallback(err, rc);
	do {
		rc = ingest_chunk(st, err);
		if (rc < 0)
			return ds_err_fallback(err, rc);
		total += rc;
	} while (rc == INGEST_CHUNK && total < 1000000000);
	return total;
}

/* The columns every row query selects, in this order. */
#define ROW_COLUMNS                                                                                \
	"o.id, o.source, o.key, o.api_version, o.kind, o.namespace, o.name, o.record_id, o.seq,"   \
	" o.op, o.content_hash, o.applied_hash, o.applied_record_id, o.target_api_version,"        \
	" o.target_namespace, o.target_name, o.state, o.reason, o.attempts, o.next_try_at"
#define ROW_NCOL 20

static int read_row(sqlite3_stmt *q, ds_object_state_row *r)
{
	memset(r, 0, sizeof(*r));
	r->id = sqlite3_column_int64(q, 0);
	r->source = col_dup(q, 1);
	r->key = col_dup(q, 2);
	r->api_version = col_dup(q, 3);
	r->kind = col_dup(q, 4);
	r->ns = col_dup(q, 5);
	r->name = col_dup(q, 6);
	r->record_id = sqlite3_column_int64(q, 7);
	r->seq = (uint64_t)sqlite3_column_int64(q, 8);
	r->op = (enum ds_record_op)sqlite3_column_int(q, 9);
	if (sqlite3_column_bytes(q, 10) == DS_HASH_LEN)
		memcpy(r->content_hash, sqlite3_column_blob(q, 10), DS_HASH_LEN);
	if (sqlite3_column_bytes(q, 11) == DS_HASH_LEN) {
		memcpy(r->applied_hash, sqlite3_column_blob(q, 11), DS_HASH_LEN);
		r->has_applied_hash = true;
	}
	r->applied_record_id = sqlite3_column_int64(q, 12);
	r->target_api_version = col_dup(q, 13);
	r->target_ns = col_dup(q, 14);
	r->target_name = col_dup(q, 15);
	r->state = state_parse((const char *)sqlite3_column_text(q, 16));
	r->reason = col_dup(q, 17);
	r->attempts = sqlite3_column_int(q, 18);
	r->next_try_at = sqlite3_column_int64(q, 19);
	if (!r->source || !r->key) {
		ds_object_state_row_dispose(r);
		return -ENOMEM;
	}
	return 0;
}

/* Where a row goes on the target: where it was applied, else its source namespace mapped. */
static const char *row_target_ns(const char *target_name, const char *target_ns, const char *ns,
				 const char *(*map_ns)(void *, const char *), void *ud)
{
	if (target_name)
		return target_ns && target_ns[0] ? target_ns : NULL;
	if (!ns || !ns[0])
		return NULL;
	return map_ns ? map_ns(ud, ns) : ns;
}

/* Whether the row q is on (ROW_COLUMNS first) is in scope (NULL: every row). */
static bool in_scope(const ds_object_state_scope *scope, sqlite3_stmt *q)
{
	const char *tns;

	if (!scope)
		return true;
	tns = row_target_ns((const char *)sqlite3_column_text(q, 15),
			    (const char *)sqlite3_column_text(q, 14),
			    (const char *)sqlite3_column_text(q, 5), scope->map_ns, scope->map_ud);
	for (size_t i = 0; tns && i < scope->n; i++)
		if (strcmp(scope->ns[i], tns) == 0)
			return true;
	return false;
}

int ds_object_state_pick(ds_object_state *st, int64_t now_ms, size_t max,
			 ds_object_state_row **rows, size_t *n, ds_err *err)
{
	return ds_object_state_pick_in(st, now_ms, max, NULL, rows, n, err);
}

int ds_object_state_pick_in(ds_object_state *st, int64_t now_ms, size_t max,
			    const ds_object_state_scope *scope, ds_object_state_row **rows,
			    size_t *n, ds_err *err)
{
	ds_object_state_row *v = NULL;
	size_t cap = 0, len = 0, bytes = 0;
	sqlite3_stmt *q = NULL;
	int rc = SQLITE_DONE;

	rc = prepare(st->db,
		     "SELECT " ROW_COLUMNS ", r.payload, r.compression, r.source_uid,"
		     " s.cluster_name FROM object_state o JOIN records r ON r.id = o.record_id"
		     " LEFT JOIN sources s ON s.name = o.source"
		     " WHERE o.state IN ('pending', 'waiting') AND o.next_try_at <= ?"
		     " ORDER BY o.id LIMIT ?",
		     &q, err);
	if (rc < 0)
		goto out;
	sqlite3_bind_int64(q, 1, now_ms);
	/* A scope is filtered here, by the mapping: every due row is looked at. */
	sqlite3_bind_int64(q, 2, scope ? -1 : (sqlite3_int64)max);
	while (len < max && bytes < DS_OBJECT_STATE_PICK_BYTES &&
	       (rc = sqlite3_step(q)) == SQLITE_ROW) {
		ds_object_state_row *r;
		int plen = sqlite3_column_bytes(q, ROW_NCOL);

		if (!in_scope(scope, q))
			continue;
		if (ds_grow((void **)&v, &cap, len + 1, sizeof(*v)) < 0) {
			rc = -ENOMEM;
			goto out;
		}
		r = &v[len];
		rc = read_row(q, r);
		if (rc < 0)
			goto out;
		len++;
		if (plen > 0) {
			r->payload = malloc((size_t)plen);
			if (!r->payload) {
				rc = -ENOMEM;
				goto out;
			}
			memcpy(r->payload, sqlite3_column_blob(q, ROW_NCOL), (size_t)plen);
			r->payload_len = (size_t)plen;
			bytes += (size_t)plen;
		}
		r->zstd = sqlite3_column_int(q, ROW_NCOL + 1);
		r->source_uid = col_dup(q, ROW_NCOL + 2);
		r->source_cluster = col_dup(q, ROW_NCOL + 3);
	}
	/* Stopped at the byte bound or at max, the rest is for the next pick. */
	rc = rc == SQLITE_DONE || rc == SQLITE_ROW || len == max
		 ? 0
		 : fail(st->db, rc, "object_state pick", err);
out:
	sqlite3_finalize(q);
	if (rc < 0) {
		ds_object_state_rows_free(v, len);
		return ds_err_fallback(err, rc);
	}
	*rows = v;
	*n = len;
	return 0;
}

int ds_object_state_set(ds_object_state *st, int64_t id, int64_t record_id,
			const ds_object_state_result *res, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	bool news = false, own_txn = sqlite3_get_autocommit(st->db) != 0;
	int rc, k = 0;

	/* Inside ds_object_state_begin()'s transaction when the caller records a group. */
	rc = own_txn ? exec(st->db, "BEGIN IMMEDIATE", err) : 0;
	if (rc < 0)
		return ds_err_fallback(err, rc);
	if (res->applied_hash) {
		/* What is on the target is a fact whatever arrived meanwhile. */
		rc = k = kept(st,
			      "UPDATE object_state SET applied_hash = ?, applied_record_id = ?,"
			      " target_api_version = ?, target_namespace = ?, target_name = ?"
			      " WHERE id = ?",
			      &q, err);
		if (rc < 0)
			goto out;
		sqlite3_bind_blob(q, 1, res->applied_hash, DS_HASH_LEN, SQLITE_TRANSIENT);
		sqlite3_bind_int64(q, 2, record_id);
		bind_text(q, 3, res->target_api_version);
		bind_text(q, 4, res->target_ns);
		bind_text(q, 5, res->target_name);
		sqlite3_bind_int64(q, 6, id);
		rc = sqlite3_step(q);
		rc = rc == SQLITE_DONE ? 0 : fail(st->db, rc, "object_state applied", err);
		unkeep(k, q);
		q = NULL;
		if (rc < 0)
			goto out;
	} else if (res->on_target && res->target_name) {
		/* On the target but not as desired (it dropped fields): where, without a hash. */
		rc = k =
		    kept(st,
			 "UPDATE object_state SET target_api_version = ?, target_namespace = ?,"
			 " target_name = ? WHERE id = ?",
			 &q, err);
		if (rc < 0)
			goto out;
		bind_text(q, 1, res->target_api_version);
		bind_text(q, 2, res->target_ns);
		bind_text(q, 3, res->target_name);
		sqlite3_bind_int64(q, 4, id);
		rc = sqlite3_step(q);
		rc = rc == SQLITE_DONE ? 0 : fail(st->db, rc, "object_state target", err);
		unkeep(k, q);
		q = NULL;
		if (rc < 0)
			goto out;
	} else if (res->forget_applied) {
		rc = k = kept(st,
			      "UPDATE object_state SET applied_hash = NULL,"
			      " applied_record_id = NULL, target_api_version = NULL,"
			      " target_namespace = NULL, target_name = NULL WHERE id = ?",
			      &q, err);
		if (rc < 0)
			goto out;
		sqlite3_bind_int64(q, 1, id);
		rc = sqlite3_step(q);
		rc = rc == SQLITE_DONE ? 0 : fail(st->db, rc, "object_state forget", err);
		unkeep(k, q);
		q = NULL;
		if (rc < 0)
			goto out;
	}
	/* The source hears of a decision once: a workload that goes on waiting for
	 * the same objects is not news. */
	rc = k = kept(st, "SELECT state, reason FROM object_state WHERE id = ? AND record_id = ?",
		      &q, err);
	if (rc < 0)
		goto out;
	sqlite3_bind_int64(q, 1, id);
	sqlite3_bind_int64(q, 2, record_id);
	rc = sqlite3_step(q);
	if (rc == SQLITE_ROW) {
		const char *was = (const char *)sqlite3_column_text(q, 0);
		const char *why = (const char *)sqlite3_column_text(q, 1);
		news = state_parse(was) != res->state ||
		       strcmp(why ? why : "", res->reason ? res->reason : "") != 0;
		rc = 0;
	} else {
		rc = rc == SQLITE_DONE ? 0 : fail(st->db, rc, "object_state read", err);
	}
	unkeep(k, q);
	q = NULL;
	if (rc == 0 && news)
		rc = queue_result(st, record_id, res->state, res->reason, err);
	if (rc < 0)
		goto out;
	rc = k =
	    kept(st,
		 "UPDATE object_state SET state = ?, reason = ?, attempts = ?, next_try_at = ?,"
		 " updated_at = ? WHERE id = ? AND record_id = ?",
		 &q, err);
	if (rc < 0)
		goto out;
	bind_text(q, 1, ds_apply_state_name(res->state));
	bind_text(q, 2, res->reason);
	sqlite3_bind_int(q, 3, res->attempts);
	sqlite3_bind_int64(q, 4, res->next_try_at);
	sqlite3_bind_int64(q, 5, now_s());
	sqlite3_bind_int64(q, 6, id);
	sqlite3_bind_int64(q, 7, record_id);
	rc = sqlite3_step(q);
	rc = rc == SQLITE_DONE ? 0 : fail(st->db, rc, "object_state result", err);
out:
	if (q)
		unkeep(k, q);
	if (!own_txn)
		return ds_err_fallback(err, rc); /* the group's commit or rollback decides */
	if (rc < 0) {
		exec(st->db, "ROLLBACK", NULL);
		return ds_err_fallback(err, rc);
	}
	rc = exec(st->db, "COMMIT", err);
	if (rc < 0)
		exec(st->db, "ROLLBACK", NULL);
	return ds_err_fallback(err, rc);
}

int ds_object_state_begin(ds_object_state *st, ds_err *err)
{
	return ds_err_fallback(err, exec(st->db, "BEGIN IMMEDIATE", err));
}

int ds_object_state_commit(ds_object_state *st, ds_err *err)
{
	int rc = exec(st->db, "COMMIT", err);

	if (rc < 0)
		exec(st->db, "ROLLBACK", NULL);
	return ds_err_fallback(err, rc);
}

void ds_object_state_rollback(ds_object_state *st)
{
	if (sqlite3_get_autocommit(st->db) == 0)
		exec(st->db, "ROLLBACK", NULL);
}

int ds_object_state_reconsider(ds_object_state *st, ds_err *err)
{
	return ds_err_fallback(
	    err,
	    exec(st->db,
		 "UPDATE object_state SET state = 'pending', attempts = 0, next_try_at = 0"
		 " WHERE op = 1 AND state IN ('applied', 'waiting', 'failed', 'held', 'skipped')",
		 err));
}

/* The rows of upserts (ROW_COLUMNS) in scope, one call of fn each; fn may stop with < 0. */
static int each_in(ds_object_state *st, const char *where, const ds_object_state_scope *scope,
		   int (*fn)(void *ud, sqlite3_stmt *q), void *ud, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	char sql[1024];
	int rc;

	snprintf(sql, sizeof(sql),
		 "SELECT " ROW_COLUMNS " FROM object_state o WHERE %s ORDER BY o.id", where);
	rc = prepare(st->db, sql, &q, err);
	if (rc < 0)
		return rc;
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		if (!in_scope(scope, q))
			continue;
		rc = fn(ud, q);
		if (rc < 0)
			break;
	}
	if (rc == SQLITE_DONE)
		rc = 0;
	else if (rc > 0)
		rc = fail(st->db, rc, "object_state scan", err);
	sqlite3_finalize(q);
	return rc;
}

struct id_list {
	int64_t *v;
	size_t n, cap;
};

static int collect_id(void *ud, sqlite3_stmt *q)
{
	struct id_list *l = ud;

	if (ds_grow((void **)&l->v, &l->cap, l->n + 1, sizeof(*l->v)) < 0)
		return -ENOMEM;
	l->v[l->n++] = sqlite3_column_int64(q, 0);
	return 0;
}

int ds_object_state_reconsider_in(ds_object_state *st, const ds_object_state_scope *scope,
				  ds_err *err)
{
	struct id_list ids = {0};
	sqlite3_stmt *up = NULL;
	int rc;

	/* IMMEDIATE: an applier cannot record a pass's outcome between our read and write. */
	rc = exec(st->db, "BEGIN IMMEDIATE", err);
	if (rc < 0)
		return ds_err_fallback(err, rc);
	rc = each_in(st,
		     "o.op = 1 AND o.state IN ('applied', 'waiting', 'failed', 'held', 'skipped',"
		     " 'pending')",
		     scope, collect_id, &ids, err);
	if (rc == 0)
		rc = prepare(
		    st->db,
		    "UPDATE object_state SET state = 'pending', attempts = 0, next_try_at = 0"
		    " WHERE id = ?",
		    &up, err);
	for (size_t i = 0; rc == 0 && i < ids.n; i++) {
		sqlite3_reset(up);
		sqlite3_bind_int64(up, 1, ids.v[i]);
		rc = sqlite3_step(up);
		rc = rc == SQLITE_DONE ? 0 : fail(st->db, rc, "object_state reconsider", err);
	}
	sqlite3_finalize(up);
	free(ids.v);
	if (rc < 0) {
		exec(st->db, "ROLLBACK", NULL);
		return ds_err_fallback(err, rc);
	}
	rc = exec(st->db, "COMMIT", err);
	if (rc < 0) {
		exec(st->db, "ROLLBACK", NULL);
		return ds_err_fallback(err, rc);
	}
	return (int)ids.n;
}

struct due {
	size_t pending, waiting;
	int64_t next_at;
};

static int count_due(void *ud, sqlite3_stmt *q)
{
	struct due *d = ud;
	int64_t at = sqlite3_column_int64(q, 19);

	if (state_parse((const char *)sqlite3_column_text(q, 16)) == DS_APPLY_WAITING) {
		d->waiting++;
		return 0;
	}
	d->pending++;
	if (!d->next_at || at < d->next_at)
		d->next_at = at ? at : 1;
	return 0;
}

int ds_object_state_due_in(ds_object_state *st, const ds_object_state_scope *scope, size_t *pending,
			   size_t *waiting, int64_t *next_at, ds_err *err)
{
	struct due d = {0};
	int rc = each_in(st, "o.state IN ('pending', 'waiting')", scope, count_due, &d, err);

	if (rc < 0)
		return ds_err_fallback(err, rc);
	if (pending)
		*pending = d.pending;
	if (waiting)
		*waiting = d.waiting;
	if (next_at)
		*next_at = d.next_at;
	return 0;
}

struct strings {
	char **v;
	size_t n, cap;
};

/* Add s to the sorted set l. @return 0, -ENOMEM */
static int strings_add(struct strings *l, const char *s)
{
	size_t at = 0;
	char *dup;

	while (at < l->n && strcmp(l->v[at], s) < 0)
		at++;
	if (at < l->n && strcmp(l->v[at], s) == 0)
		return 0;
	if (ds_grow((void **)&l->v, &l->cap, l->n + 1, sizeof(*l->v)) < 0 || !(dup = strdup(s)))
		return -ENOMEM;
	memmove(l->v + at + 1, l->v + at, (l->n - at) * sizeof(*l->v));
	l->v[at] = dup;
	l->n++;
	return 0;
}

void ds_object_state_strings_free(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

struct ns_walk {
	struct strings out;
	const char *(*map_ns)(void *, const char *);
	void *map_ud;
};

static int add_namespace(void *ud, sqlite3_stmt *q)
{
	struct ns_walk *w = ud;
	const char *tns = row_target_ns(
	    (const char *)sqlite3_column_text(q, 15), (const char *)sqlite3_column_text(q, 14),
	    (const char *)sqlite3_column_text(q, 5), w->map_ns, w->map_ud);

	return tns ? strings_add(&w->out, tns) : 0;
}

int ds_object_state_namespaces(ds_object_state *st, const char *(*map_ns)(void *, const char *),
			       void *map_ud, char ***out, size_t *n, ds_err *err)
{
	struct ns_walk w = {.map_ns = map_ns, .map_ud = map_ud};
	int rc = each_in(st, "o.op = 1", NULL, add_namespace, &w, err);

	if (rc < 0) {
		ds_object_state_strings_free(w.out.v, w.out.n);
		return ds_err_fallback(err, rc);
	}
	*out = w.out.v;
	*n = w.out.n;
	return 0;
}

static int add_source(void *ud, sqlite3_stmt *q)
{
	return strings_add(ud, (const char *)sqlite3_column_text(q, 1));
}

int ds_object_state_sources_in(ds_object_state *st, const ds_object_state_scope *scope, char ***out,
			       size_t *n, ds_err *err)
{
	struct strings l = {0};
	int rc = each_in(st, "o.op = 1", scope, add_source, &l, err);

	if (rc < 0) {
		ds_object_state_strings_free(l.v, l.n);
		return ds_err_fallback(err, rc);
	}
	*out = l.v;
	*n = l.n;
	return 0;
}

struct row_list {
	ds_object_state_row *v;
	size_t n, cap;
};

static int collect_row(void *ud, sqlite3_stmt *q)
{
	struct row_list *l = ud;
	int rc;

	if (ds_grow((void **)&l->v, &l->cap, l->n + 1, sizeof(*l->v)) < 0)
		return -ENOMEM;
	rc = read_row(q, &l->v[l->n]);
	if (rc == 0)
		l->n++;
	return rc;
}

int ds_object_state_list_in(ds_object_state *st, const ds_object_state_scope *scope,
			    ds_object_state_row **rows, size_t *n, ds_err *err)
{
	struct row_list l = {0};
	int rc = each_in(st, "o.op = 1", scope, collect_row, &l, err);

	if (rc < 0) {
		ds_object_state_rows_free(l.v, l.n);
		return ds_err_fallback(err, rc);
	}
	*rows = l.v;
	*n = l.n;
	return 0;
}

int ds_object_state_wake_waiting(ds_object_state *st, ds_err *err)
{
	return ds_err_fallback(
	    err,
	    exec(st->db, "UPDATE object_state SET next_try_at = 0 WHERE state = 'waiting'", err));
}

int ds_object_state_target_owner(ds_object_state *st, const char *source, const char *kind,
				 const char *ns, const char *name, char *owner, size_t size,
				 ds_err *err)
{
	sqlite3_stmt *q = NULL;
	int k = kept(st,
		     "SELECT source FROM object_state WHERE kind = ? AND target_name = ?"
		     " AND target_namespace IS ? AND (?4 IS NULL OR source != ?4)"
		     " AND applied_hash IS NOT NULL"
		     " AND op = 1 ORDER BY id LIMIT 1",
		     &q, err),
	    rc = k < 0 ? k : 0;

	if (rc == 0) {
		bind_text(q, 1, kind);
		bind_text(q, 2, name);
		bind_text(q, 3, ns);
		bind_text(q, 4, source);
		rc = sqlite3_step(q);
		if (rc == SQLITE_ROW) {
			if (owner && size)
				snprintf(owner, size, "%s",
					 (const char *)sqlite3_column_text(q, 0));
			rc = 1;
		} else {
			rc = rc == SQLITE_DONE ? 0 : fail(st->db, rc, "object_state owner", err);
		}
	}
	if (q)
		unkeep(k, q);
	return ds_err_fallback(err, rc);
}

int ds_object_state_last_record_id(ds_object_state *st, int64_t *out, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	int rc = prepare(st->db, "SELECT coalesce(max(record_id), 0) FROM object_state", &q, err);

	if (rc == 0) {
		rc = sqlite3_step(q);
		if (rc == SQLITE_ROW) {
			*out = sqlite3_column_int64(q, 0);
			rc = 0;
		} else {
			rc = fail(st->db, rc, "object_state last record", err);
		}
	}
	sqlite3_finalize(q);
	return ds_err_fallback(err, rc);
}

/* The namespace a row goes to on the target: where it was applied, else its source's mapped. */
static const char *target_ns_of(const ds_object_state_row *r, const ds_object_state_match *m)
{
	if (r->target_name)
		return r->target_ns;
	if (!r->ns)
		return NULL;
	return m->map_ns ? m->map_ns(m->map_ud, r->ns) : r->ns;
}

static bool ns_matches(const char *want, const char *have)
{
	if (!want)
		return true;
	if (!want[0])
		return !have;
	return have && strcmp(want, have) == 0;
}

int ds_object_state_retry(ds_object_state *st, const ds_object_state_match *m,
			  ds_object_state_retry_fn fn, void *ud, ds_err *err)
{
	sqlite3_stmt *q = NULL, *up = NULL;
	int rc, marked = 0;

	/* IMMEDIATE: the applier cannot pick or set a row between our read and write. */
	rc = exec(st->db, "BEGIN IMMEDIATE", err);
	if (rc < 0)
		return ds_err_fallback(err, rc);
	rc = prepare(st->db,
		     "SELECT " ROW_COLUMNS " FROM object_state o WHERE (o.state = 'failed'"
		     " OR (o.state IN ('pending', 'waiting') AND o.next_try_at > 0))"
		     " AND (?1 IS NULL OR o.kind = ?1 COLLATE NOCASE)"
		     " AND (?2 IS NULL OR coalesce(o.target_name, o.name) = ?2) ORDER BY o.id",
		     &q, err);
	if (rc == 0)
		rc = prepare(st->db,
			     "UPDATE object_state SET state = CASE WHEN state = 'failed'"
			     " THEN 'pending' ELSE state END, attempts = 0, next_try_at = 0,"
			     " updated_at = ? WHERE id = ?",
			     &up, err);
	if (rc < 0)
		goto out;
	bind_text(q, 1, m->kind);
	bind_text(q, 2, m->name);
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		ds_object_state_row r;
		const char *tns;

		rc = read_row(q, &r);
		if (rc < 0)
			goto out;
		tns = target_ns_of(&r, m);
		if (!ns_matches(m->ns, tns)) {
			ds_object_state_row_dispose(&r);
			continue;
		}
		if (fn)
			fn(ud, &r, tns);
		ds_object_state_row_dispose(&r);
		marked++;
		if (m->dry_run)
			continue;
		sqlite3_reset(up);
		sqlite3_bind_int64(up, 1, now_s());
		sqlite3_bind_int64(up, 2, sqlite3_column_int64(q, 0));
		rc = sqlite3_step(up);
		if (rc != SQLITE_DONE) {
			rc = fail(st->db, rc, "object_state retry", err);
			goto out;
		}
	}
	rc = rc == SQLITE_DONE ? 0 : fail(st->db, rc, "object_state retry", err);
out:
	sqlite3_finalize(q);
	sqlite3_finalize(up);
	if (rc < 0) {
		exec(st->db, "ROLLBACK", NULL);
		return ds_err_fallback(err, rc);
	}
	rc = exec(st->db, "COMMIT", err);
	if (rc < 0) {
		exec(st->db, "ROLLBACK", NULL);
		return ds_err_fallback(err, rc);
	}
	return marked;
}

/* Applied once and not deleted since: a newer version pending or refused does
 * not take the applied one off the target. */
int ds_object_state_target_applied(ds_object_state *st, const char *kind, const char *ns,
				   const char *name, ds_err *err)
{
	return ds_object_state_target_owner(st, NULL, kind, ns, name, NULL, 0, err);
}

int ds_object_state_get(ds_object_state *st, const char *source, const char *key,
			ds_object_state_row *out, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	ds_object_state_row r;
	int rc = prepare(
	    st->db, "SELECT " ROW_COLUMNS " FROM object_state o WHERE o.source = ? AND o.key = ?",
	    &q, err);

	if (rc < 0)
		goto out;
	bind_text(q, 1, source);
	bind_text(q, 2, key);
	rc = sqlite3_step(q);
	if (rc == SQLITE_ROW) {
		rc = read_row(q, &r);
		if (rc == 0)
			*out = r;
	} else if (rc == SQLITE_DONE) {
		ds_err_set(err, "no state for %s of source %s", key, source);
		rc = -ENOENT;
	} else {
		rc = fail(st->db, rc, "object_state get", err);
	}
out:
	sqlite3_finalize(q);
	return ds_err_fallback(err, rc);
}

int ds_object_state_payload(ds_object_state *st, const char *source, const char *key,
			    uint8_t **payload, size_t *len, int *zstd, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	int rc = prepare(st->db,
			 "SELECT r.payload, r.compression FROM object_state o JOIN records r ON "
			 "r.id = o.record_id WHERE o.source = ? AND o.key = ? AND r.op != ?",
			 &q, err);

	if (rc < 0)
		goto out;
	bind_text(q, 1, source);
	bind_text(q, 2, key);
	sqlite3_bind_int(q, 3, DS_RECORD_DELETE);
	rc = sqlite3_step(q);
	if (rc == SQLITE_ROW) {
		int plen = sqlite3_column_bytes(q, 0);
		uint8_t *p = malloc(plen > 0 ? (size_t)plen : 1);

		if (!p) {
			rc = -ENOMEM;
			goto out;
		}
		if (plen > 0)
			memcpy(p, sqlite3_column_blob(q, 0), (size_t)plen);
		*payload = p;
		*len = (size_t)(plen > 0 ? plen : 0);
		*zstd = sqlite3_column_int(q, 1);
		rc = 0;
	} else if (rc == SQLITE_DONE) {
		ds_err_set(err, "no live record for %s of source %s", key, source);
		rc = -ENOENT;
	} else {
		rc = fail(st->db, rc, "object_state payload", err);
	}
out:
	sqlite3_finalize(q);
	return ds_err_fallback(err, rc);
}

int ds_object_state_each_in(ds_object_state *st, const char *source, const char *ns,
			    ds_object_state_payload_fn fn, void *ud, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	int rc =
	    prepare(st->db,
		    "SELECT o.kind, r.payload, r.compression FROM object_state o JOIN records r"
		    " ON r.id = o.record_id WHERE o.source = ? AND o.namespace = ? AND r.op != ?"
		    " ORDER BY o.id",
		    &q, err);

	if (rc < 0)
		goto out;
	bind_text(q, 1, source);
	bind_text(q, 2, ns);
	sqlite3_bind_int(q, 3, DS_RECORD_DELETE);
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		int plen = sqlite3_column_bytes(q, 1);
		int r = fn(ud, (const char *)sqlite3_column_text(q, 0), sqlite3_column_blob(q, 1),
			   plen > 0 ? (size_t)plen : 0, sqlite3_column_int(q, 2));

		if (r < 0) {
			rc = r;
			goto out;
		}
	}
	rc = rc == SQLITE_DONE ? 0 : fail(st->db, rc, "object_state each", err);
out:
	sqlite3_finalize(q);
	return ds_err_fallback(err, rc);
}

int ds_object_state_count(ds_object_state *st, enum ds_apply_state s, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	int rc = prepare(st->db, "SELECT count(*) FROM object_state WHERE state = ?", &q, err);

	if (rc == 0) {
		bind_text(q, 1, ds_apply_state_name(s));
		rc = sqlite3_step(q);
		rc = rc == SQLITE_ROW ? sqlite3_column_int(q, 0)
				      : fail(st->db, rc, "object_state count", err);
	}
	sqlite3_finalize(q);
	return ds_err_fallback(err, rc);
}

int ds_object_state_count_due(ds_object_state *st, int64_t now_ms, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	int rc = prepare(st->db,
			 "SELECT count(*) FROM object_state"
			 " WHERE state IN ('pending', 'waiting') AND next_try_at <= ?",
			 &q, err);

	if (rc == 0) {
		sqlite3_bind_int64(q, 1, now_ms);
		rc = sqlite3_step(q);
		rc = rc == SQLITE_ROW ? sqlite3_column_int(q, 0)
				      : fail(st->db, rc, "object_state count due", err);
	}
	sqlite3_finalize(q);
	return ds_err_fallback(err, rc);
}

void ds_object_state_row_dispose(ds_object_state_row *r)
{
	if (!r)
		return;
	free(r->source);
	free(r->key);
	free(r->api_version);
	free(r->kind);
	free(r->ns);
	free(r->name);
	free(r->target_api_version);
	free(r->target_ns);
	free(r->target_name);
	free(r->reason);
	free(r->payload);
	free(r->source_uid);
	free(r->source_cluster);
	memset(r, 0, sizeof(*r));
}

void ds_object_state_rows_free(ds_object_state_row *rows, size_t n)
{
	for (size_t i = 0; rows && i < n; i++)
		ds_object_state_row_dispose(&rows[i]);
	free(rows);
}

/* ---- apply results for the link ------------------------------------------------- */

int ds_object_state_results(ds_object_state *st, const char *source, uint64_t epoch,
			    ds_wire_result *out, size_t max, size_t *n, int64_t *token, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	size_t len = 0, used = 0, *offs = NULL;
	int rc;

	*n = 0;
	*token = 0;
	offs = calloc(max ? max : 1, sizeof(*offs));
	if (!offs)
		return ds_err_fallback(err, -ENOMEM);
	rc = prepare(st->db,
		     "SELECT id, seq, status, coalesce(message, '') FROM apply_results"
		     " WHERE source = ? AND epoch = ? ORDER BY id LIMIT ?",
		     &q, err);
	if (rc < 0)
		goto out;
	bind_text(q, 1, source);
	sqlite3_bind_int64(q, 2, (sqlite3_int64)epoch);
	sqlite3_bind_int64(q, 3, (sqlite3_int64)max);
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		const char *m = (const char *)sqlite3_column_text(q, 3);
		size_t mlen = strlen(m ? m : "") + 1;
		int status = sqlite3_column_int(q, 2);

		*token = sqlite3_column_int64(q, 0);
		if (status <= 0 || status >= DS_RESULT_STATUS_MAX)
			continue;
		if (ds_grow((void **)&st->messages, &st->messages_cap, used + mlen, 1) < 0) {
			rc = -ENOMEM;
			goto out;
		}
		memcpy(st->messages + used, m ? m : "", mlen);
		offs[len] = used;
		used += mlen;
		out[len].seq = (uint64_t)sqlite3_column_int64(q, 1);
		out[len].status = (enum ds_result_status)status;
		len++;
	}
	rc = rc == SQLITE_DONE ? 0 : fail(st->db, rc, "apply results", err);
	/* The arena may have moved while it grew: point into it only now. */
	for (size_t i = 0; rc == 0 && i < len; i++)
		out[i].message = st->messages + offs[i];
	if (rc == 0)
		*n = len;
out:
	sqlite3_finalize(q);
	free(offs);
	return ds_err_fallback(err, rc);
}

int ds_object_state_results_sent(ds_object_state *st, const char *source, uint64_t epoch,
				 int64_t token, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	int rc = prepare(st->db,
			 "DELETE FROM apply_results WHERE source = ? AND (id <= ? OR epoch != ?)",
			 &q, err);

	if (rc == 0) {
		bind_text(q, 1, source);
		sqlite3_bind_int64(q, 2, token);
		sqlite3_bind_int64(q, 3, (sqlite3_int64)epoch);
		rc = sqlite3_step(q);
		rc = rc == SQLITE_DONE ? 0 : fail(st->db, rc, "apply results sent", err);
	}
	sqlite3_finalize(q);
	return ds_err_fallback(err, rc);
}

int ds_object_state_unapplied(ds_object_state *st, uint64_t *n, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	int rc;

	*n = 0;
	rc = have_records(st, err);
	if (rc <= 0)
		return ds_err_fallback(err, rc);
	rc = prepare(st->db,
		     "SELECT (SELECT count(*) FROM object_state WHERE state = 'pending')"
		     " + (SELECT count(*) FROM records WHERE id > (SELECT record_id FROM"
		     " apply_cursor WHERE id = 1) AND op IN (1, 2))",
		     &q, err);
	if (rc == 0) {
		rc = sqlite3_step(q);
		if (rc == SQLITE_ROW) {
			*n = (uint64_t)sqlite3_column_int64(q, 0);
			rc = 0;
		} else {
			rc = fail(st->db, rc, "unapplied count", err);
		}
	}
	sqlite3_finalize(q);
	return ds_err_fallback(err, rc);
}
