#include "drasync/inbox.h"

#include "drasync/clock.h"
#include "drasync/buf.h"
#include "drasync/schemas.h"
#include "drasync/store_sum.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct ds_inbox {
	ds_store *store;
	sqlite3 *db; /* the store's connection */
	sqlite3_stmt *ins;
	sqlite3_stmt *get;
	sqlite3_stmt *upd;
	sqlite3_stmt *man;
	ds_record_result *res; /* one per record of the last batch */
	size_t res_cap;
	uint64_t bytes; /* payload bytes the last commit stored */
	sqlite3_stmt *sizes;
};

int ds_inbox_open(ds_inbox **out, const char *path, ds_err *err)
{
	ds_inbox *ib = calloc(1, sizeof(*ib));
	int rc;

	if (!ib)
		return ds_err_fallback(err, -ENOMEM);
	rc = ds_ledger_open(&ib->store, path, 0, err);
	if (rc == 0)
		ib->db = ds_store_db(ib->store);
	if (rc < 0)
		goto out;
	rc = sqlite3_prepare_v2(
	    ib->db,
	    "INSERT INTO records(source, epoch, seq, op, api_version, kind, namespace, name,"
	    " source_uid, source_resource_version, content_hash, compression, payload,"
	    " snapshot_id, status, message, committed_at)"
	    " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
	    -1, &ib->ins, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(ib->db,
					"SELECT epoch, committed_seq FROM sources WHERE name = ?",
					-1, &ib->get, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(
		    ib->db,
		    "INSERT INTO sources(name, cluster_name, epoch, committed_seq, updated_at)"
		    " VALUES(?1, ?2, ?3, ?4, ?5) ON CONFLICT(name) DO UPDATE SET"
		    " cluster_name = coalesce(?2, cluster_name), epoch = ?3,"
		    " committed_seq = ?4, updated_at = ?5",
		    -1, &ib->upd, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(
		    ib->db,
		    "INSERT INTO manifests(source, epoch, seq, key, content_hash)"
		    " VALUES(?,?,?,?,?)",
		    -1, &ib->man, NULL);
	rc = rc == SQLITE_OK ? 0 : ds_store_fail_db(ib->db, rc, "inbox statements", err);
out:
	if (rc < 0) {
		ds_inbox_free(ib);
		return ds_err_fallback(err, rc);
	}
	*out = ib;
	return 0;
}

void ds_inbox_free(ds_inbox *ib)
{
	if (!ib)
		return;
	sqlite3_finalize(ib->ins);
	sqlite3_finalize(ib->get);
	sqlite3_finalize(ib->upd);
	sqlite3_finalize(ib->man);
	sqlite3_finalize(ib->sizes);
	ds_store_free(ib->store);
	free(ib->res);
	free(ib);
}

static int get_state(ds_inbox *ib, const char *source, uint64_t *epoch, uint64_t *seq, ds_err *err)
{
	int rc;

	sqlite3_reset(ib->get);
	sqlite3_bind_text(ib->get, 1, source, -1, SQLITE_STATIC);
	rc = sqlite3_step(ib->get);
	if (rc == SQLITE_ROW) {
		*epoch = (uint64_t)sqlite3_column_int64(ib->get, 0);
		*seq = (uint64_t)sqlite3_column_int64(ib->get, 1);
		rc = 0;
	} else if (rc == SQLITE_DONE) {
		*epoch = 0;
		*seq = 0;
		rc = 0;
	} else {
		rc = ds_store_fail_db(ib->db, rc, "inbox source state", err);
	}
	sqlite3_reset(ib->get);
	return rc;
}

static int set_state(ds_inbox *ib, const char *source, const char *cluster, uint64_t epoch,
		     uint64_t seq, ds_err *err)
{
	int rc;

	sqlite3_reset(ib->upd);
	sqlite3_bind_text(ib->upd, 1, source, -1, SQLITE_STATIC);
	if (cluster)
		sqlite3_bind_text(ib->upd, 2, cluster, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(ib->upd, 2);
	sqlite3_bind_int64(ib->upd, 3, (sqlite3_int64)epoch);
	sqlite3_bind_int64(ib->upd, 4, (sqlite3_int64)seq);
	sqlite3_bind_int64(ib->upd, 5, (sqlite3_int64)time(NULL));
	rc = sqlite3_step(ib->upd);
	rc = rc == SQLITE_DONE ? 0 : ds_store_fail_db(ib->db, rc, "inbox source update", err);
	sqlite3_reset(ib->upd);
	sqlite3_clear_bindings(ib->upd);
	return rc;
}

int ds_inbox_committed(ds_inbox *ib, const char *source, uint64_t *epoch, uint64_t *seq,
		       ds_err *err)
{
	return ds_err_fallback(err, get_state(ib, source, epoch, seq, err));
}

int ds_inbox_session(ds_inbox *ib, const char *source, const char *cluster_name, uint64_t epoch,
		     uint64_t *committed, ds_err *err)
{
	uint64_t e = 0, s = 0;
	int rc;

	rc = ds_store_exec(ib->store, "BEGIN IMMEDIATE", err);
	if (rc < 0)
		return ds_err_fallback(err, rc);
	rc = get_state(ib, source, &e, &s, err);
	if (rc < 0)
		goto out;
	if (e != epoch)
		s = 0; /* a new outbox on the source: its numbering starts again */
	rc = set_state(ib, source, cluster_name, epoch, s, err);
out:
	if (rc < 0) {
		ds_store_exec(ib->store, "ROLLBACK", NULL);
		return ds_err_fallback(err, rc);
	}
	rc = ds_store_exec(ib->store, "COMMIT", err);
	if (rc == 0)
		*committed = s;
	return ds_err_fallback(err, rc);
}

static void bind_text(sqlite3_stmt *st, int i, const char *s)
{
	if (s)
		sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, i);
}

static int insert(ds_inbox *ib, const char *source, const ds_wire_msg *batch, size_t i,
		  const ds_record_result *res, uint64_t *bytes, ds_err *err)
{
	const ds_record *r = ds_wire_msg_record(batch, i);
	sqlite3_stmt *st = ib->ins;
	ds_wire_blob payload;
	int zstd = 0, rc;

	payload = ds_wire_msg_record_wire_payload(batch, i, &zstd);
	*bytes += payload.len;
	sqlite3_reset(st);
	sqlite3_bind_text(st, 1, source, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)r->epoch);
	sqlite3_bind_int64(st, 3, (sqlite3_int64)r->seq);
	sqlite3_bind_int(st, 4, (int)r->op);
	bind_text(st, 5, r->api_version);
	bind_text(st, 6, r->kind);
	bind_text(st, 7, r->ns);
	bind_text(st, 8, r->name);
	bind_text(st, 9, r->source_uid);
	bind_text(st, 10, r->source_resource_version);
	sqlite3_bind_blob(st, 11, r->content_hash, DS_HASH_LEN, SQLITE_STATIC);
	sqlite3_bind_int(st, 12, zstd);
	if (payload.len)
		sqlite3_bind_blob(st, 13, payload.data, (int)payload.len, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, 13);
	bind_text(st, 14, r->snapshot_id);
	sqlite3_bind_int(st, 15, (int)res->status);
	bind_text(st, 16, res->message[0] ? res->message : NULL);
	sqlite3_bind_int64(st, 17, (sqlite3_int64)time(NULL));
	rc = sqlite3_step(st);
	rc = rc == SQLITE_DONE ? 0 : ds_store_fail_db(ib->db, rc, "inbox insert", err);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	/* A part's entries are filed under its snapshot's end (seq + parts_left):
	 * the prune and the compaction read one seq's rows, the whole manifest. */
	for (size_t k = 0; rc == 0 && k < r->manifest_len; k++) {
		st = ib->man;
		sqlite3_bind_text(st, 1, source, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 2, (sqlite3_int64)r->epoch);
		sqlite3_bind_int64(st, 3, (sqlite3_int64)(r->seq + r->parts_left));
		bind_text(st, 4, r->manifest[k].key);
		sqlite3_bind_blob(st, 5, r->manifest[k].content_hash, DS_HASH_LEN, SQLITE_STATIC);
		rc = sqlite3_step(st);
		rc = rc == SQLITE_DONE ? 0 : ds_store_fail_db(ib->db, rc, "inbox manifest", err);
		sqlite3_reset(st);
		sqlite3_clear_bindings(st);
	}
	return rc;
}

int ds_inbox_commit(ds_inbox *ib, const char *source, uint64_t epoch, const ds_wire_msg *batch,
		    ds_record_handler handler, void *ud, ds_wire_result *results,
		    uint64_t *committed, ds_err *err)
{
	size_t n = ds_wire_msg_record_count(batch);
	uint64_t e = 0, seq = 0, bytes = 0;
	int rc;

	if (ds_grow((void **)&ib->res, &ib->res_cap, n, sizeof(*ib->res)) < 0)
		return ds_err_fallback(err, -ENOMEM);
	rc = ds_store_exec(ib->store, "BEGIN IMMEDIATE", err);
	if (rc < 0)
		return ds_err_fallback(err, rc);
	rc = get_state(ib, source, &e, &seq, err);
	if (rc < 0)
		goto out;
	if (e != epoch) {
		ds_err_set(err, "batch for epoch %llu but the session is at epoch %llu",
			   (unsigned long long)epoch, (unsigned long long)e);
		rc = -EPROTO;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const ds_record *r = ds_wire_msg_record(batch, i);
		ds_record_result *res = &ib->res[i];

		memset(res, 0, sizeof(*res));
		res->status = DS_RESULT_OK;
		if (r->epoch != epoch) {
			ds_err_set(err, "record seq %llu of epoch %llu in a session at epoch %llu",
				   (unsigned long long)r->seq, (unsigned long long)r->epoch,
				   (unsigned long long)epoch);
			rc = -EPROTO;
			goto out;
		}
		if (r->seq <= seq) {
			res->status = DS_RESULT_DUPLICATE;
		} else {
			/* Only a snapshot may start after a gap: the source lost the records
			 * in between and resends the whole state instead. */
			if (r->seq != seq + 1 && r->op != DS_RECORD_SNAPSHOT_BEGIN) {
				ds_err_set(err,
					   "record seq %llu after committed seq %llu leaves a "
					   "gap",
					   (unsigned long long)r->seq, (unsigned long long)seq);
				rc = -EPROTO;
				goto out;
			}
			if (handler)
				handler(ud, source, r, res);
			if ((int)res->status <= 0 || res->status >= DS_RESULT_STATUS_MAX ||
			    res->status == DS_RESULT_DUPLICATE)
				res->status = DS_RESULT_FAILED;
			res->message[sizeof(res->message) - 1] = '\0';
			rc = insert(ib, source, batch, i, res, &bytes, err);
			if (rc < 0)
				goto out;
			seq = r->seq;
		}
		results[i].seq = r->seq;
		results[i].status = res->status;
		results[i].message = res->message;
	}
	rc = set_state(ib, source, NULL, epoch, seq, err);
out:
	if (rc < 0) {
		ds_store_exec(ib->store, "ROLLBACK", NULL);
		return ds_err_fallback(err, rc);
	}
	rc = ds_store_exec(ib->store, "COMMIT", err);
	if (rc < 0) {
		ds_store_exec(ib->store, "ROLLBACK", NULL);
		return ds_err_fallback(err, rc);
	}
	*committed = seq;
	ib->bytes = bytes;
	return 0;
}

uint64_t ds_inbox_committed_bytes(const ds_inbox *ib)
{
	return ib->bytes;
}

int ds_inbox_ledger_bytes_each(ds_inbox *ib, int (*fn)(void *ud, const char *source, uint64_t n),
			       void *ud, ds_err *err)
{
	int rc = SQLITE_OK;

	/* length() of a blob reads its size from the record header, not its pages;
	 * summed per source as the rows stream (no sorter holding them all). */
	if (!ib->sizes)
		rc = sqlite3_prepare_v2(ib->db,
					"SELECT source, coalesce(length(payload), 0) FROM records",
					-1, &ib->sizes, NULL);
	if (rc != SQLITE_OK)
		return ds_store_fail_db(ib->db, rc, "ledger bytes", err);
	rc = ds_store_sum_by_source(ib->sizes, fn, ud);
	if (rc == SQLITE_DONE)
		rc = 0;
	else if (rc > 0)
		rc = ds_store_fail_db(ib->db, rc, "ledger bytes", err);
	sqlite3_reset(ib->sizes);
	return rc;
}

/* ---- presence ------------------------------------------------------------ */

static int presence_write(ds_inbox *ib, const char *sql, const char *source, const char *text,
			  int64_t now, int64_t valid_until, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	int rc = sqlite3_prepare_v2(ib->db, sql, -1, &q, NULL);

	if (rc != SQLITE_OK) {
		rc = ds_store_fail_db(ib->db, rc, "presence", err);
		goto out;
	}
	sqlite3_bind_text(q, 1, source, -1, SQLITE_STATIC);
	sqlite3_bind_text(q, 2, text, -1, SQLITE_STATIC);
	sqlite3_bind_int64(q, 3, now);
	sqlite3_bind_int64(q, 4, valid_until);
	rc = sqlite3_step(q);
	rc = rc == SQLITE_DONE ? 0 : ds_store_fail_db(ib->db, rc, "presence", err);
out:
	sqlite3_finalize(q);
	return ds_err_fallback(err, rc);
}

int ds_inbox_presence_seen(ds_inbox *ib, const char *source, const char *peer, bool open,
			   int64_t valid_ms, ds_err *err)
{
	int64_t now = ds_clock_wall_ms();

	if (open)
		return presence_write(
		    ib,
		    "INSERT INTO presence(source, peer, since, seen_at, valid_until, ended_at,"
		    " end_reason) VALUES(?1, ?2, ?3, ?3, ?4, NULL, NULL) ON CONFLICT(source) DO"
		    " UPDATE SET peer = ?2, since = ?3, seen_at = ?3, valid_until = ?4,"
		    " ended_at = NULL, end_reason = NULL",
		    source, peer, now, now + valid_ms, err);
	return presence_write(ib,
			      "UPDATE presence SET peer = coalesce(?2, peer), seen_at = ?3,"
			      " valid_until = ?4 WHERE source = ?1 AND ended_at IS NULL",
			      source, peer, now, now + valid_ms, err);
}

int ds_inbox_presence_end(ds_inbox *ib, const char *source, const char *why, ds_err *err)
{
	return presence_write(ib,
			      "UPDATE presence SET ended_at = ?3, end_reason = ?2, valid_until = ?4"
			      " WHERE source = ?1 AND ended_at IS NULL",
			      source, why, ds_clock_wall_ms(), ds_clock_wall_ms(), err);
}

int ds_inbox_presence_get(ds_inbox *ib, const char *source, int64_t now_ms, ds_inbox_presence *out,
			  ds_err *err)
{
	sqlite3_stmt *q = NULL;
	int rc = sqlite3_prepare_v2(ib->db,
				    "SELECT coalesce(peer, ''), since, seen_at, valid_until,"
				    " coalesce(ended_at, 0), coalesce(end_reason, '')"
				    " FROM presence WHERE source = ?",
				    -1, &q, NULL);

	if (rc != SQLITE_OK) {
		rc = ds_store_fail_db(ib->db, rc, "presence", err);
		goto out;
	}
	sqlite3_bind_text(q, 1, source, -1, SQLITE_STATIC);
	rc = sqlite3_step(q);
	if (rc == SQLITE_ROW) {
		memset(out, 0, sizeof(*out));
		snprintf(out->peer, sizeof(out->peer), "%s", sqlite3_column_text(q, 0));
		out->since = sqlite3_column_int64(q, 1);
		out->seen_at = sqlite3_column_int64(q, 2);
		out->valid_until = sqlite3_column_int64(q, 3);
		out->ended_at = sqlite3_column_int64(q, 4);
		snprintf(out->end_reason, sizeof(out->end_reason), "%s", sqlite3_column_text(q, 5));
		out->connected = !out->ended_at && out->valid_until > now_ms;
		rc = 1;
	} else {
		rc = rc == SQLITE_DONE ? 0 : ds_store_fail_db(ib->db, rc, "presence", err);
	}
out:
	sqlite3_finalize(q);
	return ds_err_fallback(err, rc);
}
