/*
 * Ingest: the records committed after the apply cursor folded into their
 * keys' rows (upsert), and the prune at a snapshot's end.
 */

#include "object_state_internal.h"

#include "drasync/clock.h"

#include <sqlite3.h>
#include <stdlib.h>

/* Records read per ingest transaction: bounds the time the write lock is held. */
#define INGEST_CHUNK 2000

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
	int rc = ds_object_state_prepare(
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
	ds_object_state_bind_text(q, 1, source);
	sqlite3_bind_int64(q, 2, epoch);
	sqlite3_bind_int64(q, 3, seq);
	sqlite3_bind_int64(q, 4, (ds_clock_wall_ms() / 1000));
	rc = sqlite3_step(q);
	rc = rc == SQLITE_DONE ? 0 : ds_object_state_fail(st->db, rc, "snapshot prune", err);
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
	rc = ds_object_state_exec(st->db, "BEGIN IMMEDIATE", err);
	if (rc < 0)
		return rc;
	rc = ds_object_state_prepare(st->db, "SELECT record_id FROM apply_cursor WHERE id = 1",
				     &cur, err);
	if (rc < 0)
		goto out;
	if (sqlite3_step(cur) == SQLITE_ROW)
		last = sqlite3_column_int64(cur, 0);
	sqlite3_finalize(cur);
	cur = NULL;
	rc = ds_object_state_prepare(
	    st->db,
	    "SELECT id, source, seq, op, api_version, kind, namespace, name, content_hash,"
	    " epoch FROM records WHERE id > ? ORDER BY id LIMIT ?",
	    &sel, err);
	if (rc == 0)
		rc = ds_object_state_prepare(st->db, upsert_sql, &ups, err);
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
		ds_object_state_bind_text(ups, 1, (const char *)sqlite3_column_text(sel, 1));
		ds_object_state_bind_text(ups, 2, key);
		ds_object_state_bind_text(ups, 3, av);
		ds_object_state_bind_text(ups, 4, kind);
		ds_object_state_bind_text(ups, 5, ns);
		ds_object_state_bind_text(ups, 6, name);
		sqlite3_bind_int64(ups, 7, last);
		sqlite3_bind_int64(ups, 8, sqlite3_column_int64(sel, 2));
		sqlite3_bind_int(ups, 9, op);
		if (sqlite3_column_type(sel, 8) == SQLITE_BLOB)
			sqlite3_bind_blob(ups, 10, sqlite3_column_blob(sel, 8),
					  sqlite3_column_bytes(sel, 8), SQLITE_TRANSIENT);
		else
			sqlite3_bind_null(ups, 10);
		sqlite3_bind_int64(ups, 11, (ds_clock_wall_ms() / 1000));
		rc = sqlite3_step(ups);
		if (rc != SQLITE_ROW) {
			rc = ds_object_state_fail(st->db, rc, "object_state upsert", err);
			goto out;
		}
		/* Unchanged and already decided: this record's result is that decision. */
		state = ds_apply_state_parse((const char *)sqlite3_column_text(ups, 0));
		if (state != DS_APPLY_PENDING) {
			char *reason = ds_object_state_col_dup(ups, 1);
			rc = ds_object_state_queue_result(st, last, state, reason, err);
			free(reason);
			if (rc < 0)
				goto out;
		}
		while ((rc = sqlite3_step(ups)) == SQLITE_ROW)
			;
	}
	if (rc != SQLITE_DONE) {
		rc = ds_object_state_fail(st->db, rc, "records scan", err);
		goto out;
	}
	rc = ds_object_state_prepare(st->db, "UPDATE apply_cursor SET record_id = ? WHERE id = 1",
				     &cur, err);
	if (rc < 0)
		goto out;
	sqlite3_bind_int64(cur, 1, last);
	rc = sqlite3_step(cur);
	rc = rc == SQLITE_DONE ? 0 : ds_object_state_fail(st->db, rc, "apply cursor", err);
out:
	sqlite3_finalize(sel);
	sqlite3_finalize(ups);
	sqlite3_finalize(cur);
	if (rc < 0) {
		ds_object_state_exec(st->db, "ROLLBACK", NULL);
		return rc;
	}
	rc = ds_object_state_exec(st->db, "COMMIT", err);
	if (rc < 0) {
		ds_object_state_exec(st->db, "ROLLBACK", NULL);
		return rc;
	}
	return n;
}

int ds_object_state_ingest(ds_object_state *st, ds_err *err)
{
	int total = 0, rc;

	rc = ds_object_state_have_records(st, err);
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
