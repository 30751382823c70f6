#include "drasync/ledger_records.h"
#include "drasync/store_sum.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* op 1 upsert, 2 delete: what the apply stage applies (enum ds_record_op). */
#define APPLIED_OPS "op IN (1, 2)"
#define LIGHT_COLS                                                                                 \
	"r.id, r.source, r.epoch, r.seq, r.op, r.api_version, r.kind, r.namespace, r.name,"        \
	" r.content_hash"
#define FULL_COLS                                                                                  \
	LIGHT_COLS ", r.payload, r.compression, r.source_uid, s.cluster_name, r.committed_at"

struct ds_ledger_records {
	ds_store *st;
	ds_store_stmt *after, *pending, *get, *origin, *backlog, *backlog_all, *backlog_each,
	    *manifest, *sources, *count;
};

int ds_ledger_records_new(ds_store *st, ds_ledger_records **out, ds_err *err)
{
	ds_ledger_records *r = calloc(1, sizeof(*r));

	if (!r)
		return ds_err_fallback(err, -ENOMEM);
	r->st = st;
	*out = r;
	return 0;
}

void ds_ledger_records_free(ds_ledger_records *r)
{
	free(r); /* the statements are the store's */
}

static const char *text(sqlite3_stmt *q, int i)
{
	return (const char *)sqlite3_column_text(q, i);
}

static void row_of(sqlite3_stmt *q, bool full, ds_ledger_record *rec)
{
	memset(rec, 0, sizeof(*rec));
	rec->id = sqlite3_column_int64(q, 0);
	rec->source = text(q, 1);
	rec->epoch = sqlite3_column_int64(q, 2);
	rec->seq = sqlite3_column_int64(q, 3);
	rec->op = sqlite3_column_int(q, 4);
	rec->api_version = text(q, 5);
	rec->kind = text(q, 6);
	rec->ns = text(q, 7);
	rec->name = text(q, 8);
	if (sqlite3_column_type(q, 9) == SQLITE_BLOB) {
		rec->hash = sqlite3_column_blob(q, 9);
		rec->hash_len = (size_t)sqlite3_column_bytes(q, 9);
	}
	if (!full)
		return;
	if (sqlite3_column_type(q, 10) == SQLITE_BLOB) {
		rec->payload = sqlite3_column_blob(q, 10);
		rec->payload_len = (size_t)sqlite3_column_bytes(q, 10);
	}
	rec->compression = sqlite3_column_int(q, 11);
	rec->source_uid = text(q, 12);
	rec->cluster = text(q, 13);
	rec->committed_at = sqlite3_column_int64(q, 14);
}

/* Step q to its end, each row to fn. @return rows handed on, or < 0 */
static int walk(ds_ledger_records *r, ds_store_stmt *h, sqlite3_stmt *q, bool full,
		ds_ledger_record_fn fn, void *ud, const char *what, ds_err *err)
{
	ds_ledger_record rec;
	int rc, n = 0;

	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		row_of(q, full, &rec);
		n++;
		rc = fn(ud, &rec);
		if (rc < 0) {
			ds_store_stmt_done(h);
			return rc;
		}
	}
	rc = rc == SQLITE_DONE ? n : ds_store_fail(r->st, rc, what, err);
	ds_store_stmt_done(h);
	return rc;
}

int ds_ledger_records_after(ds_ledger_records *r, int64_t after, int limit, ds_ledger_record_fn fn,
			    void *ud, ds_err *err)
{
	sqlite3_stmt *q;
	int rc = ds_store_stmt_lazy(
	    r->st, &r->after,
	    "SELECT " LIGHT_COLS " FROM records r WHERE r.id > ? ORDER BY r.id LIMIT ?", &q, err);

	if (rc < 0)
		return rc;
	sqlite3_bind_int64(q, 1, after);
	sqlite3_bind_int(q, 2, limit);
	return walk(r, r->after, q, false, fn, ud, "records after the cursor", err);
}

int ds_ledger_records_pending(ds_ledger_records *r, int64_t after, ds_ledger_record_fn fn, void *ud,
			      ds_err *err)
{
	sqlite3_stmt *q;
	int rc = ds_store_stmt_lazy(r->st, &r->pending,
				    "SELECT " FULL_COLS
				    " FROM records r LEFT JOIN sources s ON s.name = r.source"
				    " WHERE r.id > ? AND r." APPLIED_OPS " ORDER BY r.id",
				    &q, err);

	if (rc < 0)
		return rc;
	sqlite3_bind_int64(q, 1, after);
	return walk(r, r->pending, q, true, fn, ud, "records not applied yet", err);
}

int ds_ledger_record_get(ds_ledger_records *r, int64_t id, ds_ledger_record_fn fn, void *ud,
			 ds_err *err)
{
	sqlite3_stmt *q;
	int rc = ds_store_stmt_lazy(r->st, &r->get,
				    "SELECT " FULL_COLS
				    " FROM records r LEFT JOIN sources s ON s.name = r.source"
				    " WHERE r.id = ?",
				    &q, err);

	if (rc < 0)
		return rc;
	sqlite3_bind_int64(q, 1, id);
	return walk(r, r->get, q, true, fn, ud, "record", err);
}

int ds_ledger_record_origin(ds_ledger_records *r, int64_t id, char *source, size_t size,
			    int64_t *epoch, int64_t *seq, ds_err *err)
{
	sqlite3_stmt *q;
	int rc = ds_store_stmt_lazy(r->st, &r->origin,
				    "SELECT source, epoch, seq FROM records WHERE id = ?", &q, err);

	if (rc < 0)
		return rc;
	sqlite3_bind_int64(q, 1, id);
	rc = sqlite3_step(q);
	if (rc == SQLITE_ROW) {
		snprintf(source, size, "%s", text(q, 0) ? text(q, 0) : "");
		*epoch = sqlite3_column_int64(q, 1);
		*seq = sqlite3_column_int64(q, 2);
		rc = 1;
	} else {
		rc = rc == SQLITE_DONE ? 0 : ds_store_fail(r->st, rc, "record origin", err);
	}
	ds_store_stmt_done(r->origin);
	return rc;
}

int ds_ledger_records_backlog(ds_ledger_records *r, int64_t after, const char *source, uint64_t *n,
			      int64_t *oldest_s, ds_err *err)
{
	ds_store_stmt **slot = source ? &r->backlog : &r->backlog_all;
	sqlite3_stmt *q;
	int rc = ds_store_stmt_lazy(
	    r->st, slot,
	    source ? "SELECT count(*), coalesce(min(committed_at), 0) FROM records"
		     " WHERE id > ?1 AND " APPLIED_OPS " AND source = ?2"
		   : "SELECT count(*), coalesce(min(committed_at), 0) FROM records"
		     " WHERE id > ?1 AND " APPLIED_OPS,
	    &q, err);

	if (rc < 0)
		return rc;
	sqlite3_bind_int64(q, 1, after);
	if (source)
		sqlite3_bind_text(q, 2, source, -1, SQLITE_STATIC);
	rc = sqlite3_step(q);
	if (rc == SQLITE_ROW) {
		*n = (uint64_t)sqlite3_column_int64(q, 0);
		if (oldest_s)
			*oldest_s = sqlite3_column_int64(q, 1);
		rc = 0;
	} else {
		rc = ds_store_fail(r->st, rc, "records backlog", err);
	}
	ds_store_stmt_done(*slot);
	return rc;
}

int ds_ledger_records_backlog_each(ds_ledger_records *r, int64_t after,
				   int (*fn)(void *ud, const char *source, uint64_t n), void *ud,
				   ds_err *err)
{
	sqlite3_stmt *q;
	/* A range of the rowid, counted per source as it streams (no sorter). */
	int rc = ds_store_stmt_lazy(r->st, &r->backlog_each,
				    "SELECT source FROM records WHERE id > ?1 AND " APPLIED_OPS, &q,
				    err);

	if (rc < 0)
		return rc;
	sqlite3_bind_int64(q, 1, after);
	rc = ds_store_sum_by_source(q, fn, ud);
	if (rc == SQLITE_DONE)
		rc = 0;
	else if (rc > 0)
		rc = ds_store_fail(r->st, rc, "records backlog per source", err);
	ds_store_stmt_done(r->backlog_each);
	return rc;
}

int ds_ledger_records_count(ds_ledger_records *r, uint64_t *n, ds_err *err)
{
	sqlite3_stmt *q;
	int rc = ds_store_stmt_lazy(r->st, &r->count, "SELECT count(*) FROM records", &q, err);

	if (rc < 0)
		return rc;
	rc = sqlite3_step(q);
	if (rc == SQLITE_ROW) {
		*n = (uint64_t)sqlite3_column_int64(q, 0);
		rc = 0;
	} else {
		rc = ds_store_fail(r->st, rc, "records count", err);
	}
	ds_store_stmt_done(r->count);
	return rc;
}

int ds_ledger_manifest_each(ds_ledger_records *r, const char *source, int64_t epoch, int64_t seq,
			    int (*fn)(void *ud, const char *key), void *ud, ds_err *err)
{
	sqlite3_stmt *q;
	int rc = ds_store_stmt_lazy(
	    r->st, &r->manifest,
	    "SELECT key FROM manifests WHERE source = ? AND epoch = ? AND seq = ?", &q, err);
	int n = 0;

	if (rc < 0)
		return rc;
	sqlite3_bind_text(q, 1, source, -1, SQLITE_STATIC);
	sqlite3_bind_int64(q, 2, epoch);
	sqlite3_bind_int64(q, 3, seq);
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		n++;
		rc = fn(ud, text(q, 0) ? text(q, 0) : "");
		if (rc < 0) {
			ds_store_stmt_done(r->manifest);
			return rc;
		}
	}
	rc = rc == SQLITE_DONE ? n : ds_store_fail(r->st, rc, "snapshot manifest", err);
	ds_store_stmt_done(r->manifest);
	return rc;
}

int ds_ledger_sources_each(ds_ledger_records *r,
			   int (*fn)(void *ud, const ds_ledger_source_row *row), void *ud,
			   ds_err *err)
{
	sqlite3_stmt *q;
	int rc = ds_store_stmt_lazy(
	    r->st, &r->sources,
	    "SELECT name, cluster_name, epoch, committed_seq, coalesce(updated_at, 0)"
	    " FROM sources ORDER BY name",
	    &q, err);
	int n = 0;

	if (rc < 0)
		return rc;
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		ds_ledger_source_row row = {
		    .name = text(q, 0),
		    .cluster = text(q, 1),
		    .epoch = sqlite3_column_int64(q, 2),
		    .committed_seq = sqlite3_column_int64(q, 3),
		    .updated_at = sqlite3_column_int64(q, 4),
		};

		n++;
		rc = fn(ud, &row);
		if (rc < 0) {
			ds_store_stmt_done(r->sources);
			return rc;
		}
	}
	rc = rc == SQLITE_DONE ? n : ds_store_fail(r->st, rc, "sources", err);
	ds_store_stmt_done(r->sources);
	return rc;
}
