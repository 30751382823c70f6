/*
 * Ingest: the records committed after the apply cursor folded into their
 * keys' rows (upsert), and the prune at a snapshot's end.
 */

#include "object_state_internal.h"

#include "drasync/clock.h"

#include <errno.h>
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
static int keep_key(void *ud, const char *key)
{
	sqlite3_stmt *q = ud;
	int rc;

	sqlite3_reset(q);
	sqlite3_bind_text(q, 1, key, -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(q);
	return rc == SQLITE_DONE ? 0 : -EIO;
}

static int prune(ds_object_state *st, const char *source, int64_t epoch, int64_t seq, ds_err *err)
{
	sqlite3_stmt *ins = NULL, *q = NULL;
	int rc;

	/* The manifest's keys, read through the store, into a table of this
	 * connection's own (TEMP: never in the file). */
	rc = ds_store_exec(st->store,
			   "CREATE TEMP TABLE IF NOT EXISTS prune_keep(key TEXT PRIMARY KEY);"
			   " DELETE FROM temp.prune_keep;",
			   err);
	if (rc == 0)
		rc = ds_store_prepare(
		    st->store, "INSERT OR IGNORE INTO temp.prune_keep(key) VALUES(?)", &ins, err);
	if (rc == 0) {
		rc = ds_ledger_manifest_each(st->records, source, epoch, seq, keep_key, ins, err);
		if (rc == -EIO)
			rc = ds_store_fail(st->store, sqlite3_errcode(st->db),
					   "snapshot prune keys", err);
	}
	sqlite3_finalize(ins);
	if (rc < 0)
		return rc;
	rc = ds_store_prepare(
	    st->store,
	    "UPDATE object_state SET op = 2, state = 'pending', attempts = 0, next_try_at = 0,"
	    " reason = 'pruned: not in the snapshot that ended at seq ' || ?2, seq = ?2,"
	    " updated_at = ?3"
	    " WHERE source = ?1 AND op = 1 AND (CASE WHEN key LIKE 'core/%' THEN substr(key, 5)"
	    " ELSE key END) NOT IN (SELECT key FROM temp.prune_keep)",
	    &q, err);
	if (rc < 0)
		return rc;
	ds_object_state_bind_text(q, 1, source);
	sqlite3_bind_int64(q, 2, seq);
	sqlite3_bind_int64(q, 3, (ds_clock_wall_ms() / 1000));
	rc = sqlite3_step(q);
	rc = rc == SQLITE_DONE ? 0 : ds_store_fail(st->store, rc, "snapshot prune", err);
	sqlite3_finalize(q);
	return rc;
}

struct ingest {
	ds_object_state *st;
	int64_t last;
	ds_err *err;
};

/* One record after the cursor into its key's row (or, at a snapshot's end, the prune). */
static int ingest_one(void *ud, const ds_ledger_record *rec)
{
	struct ingest *in = ud;
	ds_object_state *st = in->st;
	const char *ns = rec->ns;
	sqlite3_stmt *ups = NULL;
	char key[1024];
	int rc, state;

	in->last = rec->id;
	if (rec->op == DS_RECORD_SNAPSHOT_END)
		return prune(st, rec->source, rec->epoch, rec->seq, in->err);
	if (rec->op == DS_RECORD_RELOCATE)
		return ds_object_state_note_relocation(st, rec, in->err);
	if (rec->op != DS_RECORD_UPSERT && rec->op != DS_RECORD_DELETE)
		return 0;
	if (!rec->kind || !rec->name)
		return 0; /* not about an object: nothing to apply */
	if (ns && !*ns)
		ns = NULL;
	if (ns && (rc = ds_object_state_note_home(st, rec, in->err)) < 0)
		return rc;
	ds_object_state_key(rec->api_version, rec->kind, ns, rec->name, key, sizeof(key));
	rc = ds_object_state_keep(st, OS_STMT_UPSERT, upsert_sql, &ups, in->err);
	if (rc < 0)
		return rc;
	ds_object_state_bind_text(ups, 1, rec->source);
	ds_object_state_bind_text(ups, 2, key);
	ds_object_state_bind_text(ups, 3, rec->api_version);
	ds_object_state_bind_text(ups, 4, rec->kind);
	ds_object_state_bind_text(ups, 5, ns);
	ds_object_state_bind_text(ups, 6, rec->name);
	sqlite3_bind_int64(ups, 7, rec->id);
	sqlite3_bind_int64(ups, 8, rec->seq);
	sqlite3_bind_int(ups, 9, rec->op);
	if (rec->hash)
		sqlite3_bind_blob(ups, 10, rec->hash, (int)rec->hash_len, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(ups, 10);
	sqlite3_bind_int64(ups, 11, (ds_clock_wall_ms() / 1000));
	rc = sqlite3_step(ups);
	if (rc != SQLITE_ROW) {
		rc = ds_store_fail(st->store, rc, "object_state upsert", in->err);
		ds_object_state_unkeep(0, ups);
		return rc;
	}
	/* Unchanged and already decided: this record's result is that decision. A
	 * state this version does not know is left for read_row() to refuse. */
	state = ds_apply_state_from_string((const char *)sqlite3_column_text(ups, 0));
	rc = 0;
	if (state > 0 && state != DS_APPLY_PENDING) {
		char *reason = ds_object_state_col_dup(ups, 1);

		rc = ds_object_state_queue_result(st, rec->id, (enum ds_apply_state)state, reason,
						  in->err);
		free(reason);
	}
	ds_object_state_unkeep(0, ups);
	return rc;
}

/* One chunk of records after the cursor, in one transaction. @return records read, or < 0 */
static int ingest_chunk(ds_object_state *st, ds_err *err)
{
	struct ingest in = {.st = st, .err = err};
	sqlite3_stmt *cur = NULL;
	int rc, n = 0;

	/* IMMEDIATE: waits for a receiver commit in progress, so that its records,
	 * whose handler may have woken us, are visible. */
	rc = ds_store_exec(st->store, "BEGIN IMMEDIATE", err);
	if (rc < 0)
		return rc;
	st->returned_pending = 0;
	rc = ds_store_prepare(st->store, "SELECT record_id FROM apply_cursor WHERE id = 1", &cur,
			      err);
	if (rc < 0)
		goto out;
	if (sqlite3_step(cur) == SQLITE_ROW)
		in.last = sqlite3_column_int64(cur, 0);
	sqlite3_finalize(cur);
	cur = NULL;
	rc = n = ds_ledger_records_after(st->records, in.last, INGEST_CHUNK, ingest_one, &in, err);
	if (rc < 0)
		goto out;
	rc = ds_store_prepare(st->store, "UPDATE apply_cursor SET record_id = ? WHERE id = 1", &cur,
			      err);
	if (rc < 0)
		goto out;
	sqlite3_bind_int64(cur, 1, in.last);
	rc = sqlite3_step(cur);
	rc = rc == SQLITE_DONE ? 0 : ds_store_fail(st->store, rc, "apply cursor", err);
out:
	sqlite3_finalize(cur);
	if (rc < 0) {
		ds_store_rollback(st->store);
		return rc;
	}
	rc = ds_store_commit(st->store, err);
	if (rc < 0) {
		ds_store_rollback(st->store);
		return rc;
	}
	ds_object_state_returned_committed(st);
	return n;
}

int ds_object_state_ingest(ds_object_state *st, ds_err *err)
{
	int total = 0, rc;

	do {
		rc = ingest_chunk(st, err);
		if (rc < 0)
			return ds_err_fallback(err, rc);
		total += rc;
	} while (rc == INGEST_CHUNK && total < 1000000000);
	return total;
}
