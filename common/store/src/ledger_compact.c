/*
 * Compaction of the ledger (ledger_compact.h). The store owns the file's
 * whole schema (ledger_schema.c), so the one condition under which a record
 * of the link may go, which names the apply stage's tables, is spelled here
 * and nowhere else.
 */
#include "drasync/ledger_compact.h"

#include "drasync/clock.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct ds_ledger_compactor {
	ds_store *st;
	int64_t next; /* the sweep of the records: the last id looked at (0: from the start) */
	ds_store_stmt *cursor, *span, *del, *ends, *del_man;
};

/*
 * op 4: a snapshot's end (enum ds_record_op), whose manifest the prune reads.
 * The newest record always stays: SQLite gives a new row the largest id + 1,
 * so with the newest gone the next record committed would get an id at or
 * below the apply cursor, and the ingest would never see it (a relocation
 * record, all of whose predecessors were ingested and compacted, was lost so).
 */
static const char del_sql[] =
    "DELETE FROM records WHERE id > ?1 AND id <= ?2"
    " AND id < (SELECT max(id) FROM records)"
    " AND NOT EXISTS (SELECT 1 FROM object_state o WHERE o.record_id = records.id)"
    " AND NOT EXISTS (SELECT 1 FROM object_state o WHERE o.applied_record_id = records.id)"
    " AND NOT EXISTS (SELECT 1 FROM apply_results a WHERE a.source = records.source"
    "   AND a.epoch = records.epoch AND a.seq = records.seq)"
    " AND NOT (op = 4 AND EXISTS (SELECT 1 FROM manifests m WHERE m.source = records.source"
    "   AND m.epoch = records.epoch AND m.seq = records.seq))";

int ds_ledger_compactor_new(ds_store *st, ds_ledger_compactor **out, ds_err *err)
{
	ds_ledger_compactor *c = calloc(1, sizeof(*c));

	if (!c)
		return ds_err_fallback(err, -ENOMEM);
	c->st = st;
	*out = c;
	return 0;
}

void ds_ledger_compactor_free(ds_ledger_compactor *c)
{
	free(c); /* the statements are the store's */
}

/* The apply cursor: every record up to it has been folded into object_state. */
static int read_cursor(ds_ledger_compactor *c, int64_t *out, ds_err *err)
{
	sqlite3_stmt *q;
	int rc = ds_store_stmt_lazy(c->st, &c->cursor,
				    "SELECT record_id FROM apply_cursor WHERE id = 1", &q, err);

	if (rc < 0)
		return rc;
	rc = sqlite3_step(q);
	*out = rc == SQLITE_ROW ? sqlite3_column_int64(q, 0) : 0;
	rc = rc == SQLITE_ROW || rc == SQLITE_DONE ? 0
						   : ds_store_fail(c->st, rc, "apply cursor", err);
	ds_store_stmt_done(c->cursor);
	return rc;
}

static int finish(ds_ledger_compactor *c, int rc, ds_err *err)
{
	if (rc >= 0) {
		int crc = ds_store_commit(c->st, err);

		if (crc < 0)
			rc = crc;
	}
	if (rc < 0)
		ds_store_rollback(c->st);
	return rc;
}

/*
 * The next DS_LEDGER_COMPACT_BATCH records up to the cursor, in one
 * transaction: those no one needs are deleted.
 * @return 1 when the sweep goes on, 0 when it reached the cursor, or < 0
 */
static int records_step(ds_ledger_compactor *c, ds_ledger_compact_stats *s, ds_err *err)
{
	sqlite3_stmt *q;
	int64_t cursor = 0, hi = 0;
	int rc = ds_store_begin(c->st, true, err);

	if (rc < 0)
		return rc;
	rc = read_cursor(c, &cursor, err);
	if (rc == 0)
		rc = ds_store_stmt_lazy(c->st, &c->span,
					"SELECT max(id) FROM (SELECT id FROM records"
					" WHERE id > ?1 AND id <= ?2 ORDER BY id LIMIT ?3)",
					&q, err);
	if (rc < 0)
		return finish(c, rc, err);
	sqlite3_bind_int64(q, 1, c->next);
	sqlite3_bind_int64(q, 2, cursor);
	sqlite3_bind_int(q, 3, DS_LEDGER_COMPACT_BATCH);
	rc = sqlite3_step(q);
	if (rc == SQLITE_ROW && sqlite3_column_type(q, 0) != SQLITE_NULL)
		hi = sqlite3_column_int64(q, 0);
	rc = rc == SQLITE_ROW ? 0 : ds_store_fail(c->st, rc, "records to compact", err);
	ds_store_stmt_done(c->span);
	if (rc < 0 || hi == 0) {
		if (rc == 0)
			c->next = 0; /* the next sweep starts again from the oldest */
		return finish(c, rc, err);
	}
	rc = ds_store_stmt_lazy(c->st, &c->del, del_sql, &q, err);
	if (rc < 0)
		return finish(c, rc, err);
	sqlite3_bind_int64(q, 1, c->next);
	sqlite3_bind_int64(q, 2, hi);
	rc = sqlite3_step(q);
	rc = rc == SQLITE_DONE ? 0 : ds_store_fail(c->st, rc, "records compaction", err);
	ds_store_stmt_done(c->del);
	if (rc == 0)
		s->records += (uint64_t)sqlite3_changes(ds_store_db(c->st));
	rc = finish(c, rc, err);
	if (rc < 0)
		return rc;
	c->next = hi;
	return 1;
}

/* The newest manifest of a source whose snapshot end the apply stage has ingested. */
struct kept {
	char source[256];
	int64_t epoch, seq;
};

#define MAX_SOURCES 64 /* per step; more are done by the next steps */

/*
 * Manifests older than the newest one whose prune has run, of each source,
 * at most DS_LEDGER_COMPACT_BATCH rows in one transaction.
 * @return 1 when rows are left, 0 when none, or < 0
 */
static int manifests_step(ds_ledger_compactor *c, ds_ledger_compact_stats *s, ds_err *err)
{
	struct kept kept[MAX_SOURCES];
	size_t n = 0;
	sqlite3_stmt *q;
	int64_t cursor = 0;
	int left = DS_LEDGER_COMPACT_BATCH, rc = ds_store_begin(c->st, true, err);

	if (rc < 0)
		return rc;
	rc = read_cursor(c, &cursor, err);
	if (rc == 0)
		rc = ds_store_stmt_lazy(
		    c->st, &c->ends,
		    "SELECT m.source, m.epoch, m.seq FROM"
		    " (SELECT DISTINCT source, epoch, seq FROM manifests) m"
		    " JOIN records r ON r.source = m.source AND r.epoch = m.epoch AND r.seq = m.seq"
		    " WHERE r.op = 4 AND r.id <= ?1 ORDER BY m.source, r.id DESC",
		    &q, err);
	if (rc < 0)
		return finish(c, rc, err);
	sqlite3_bind_int64(q, 1, cursor);
	while ((rc = sqlite3_step(q)) == SQLITE_ROW && n < MAX_SOURCES) {
		const char *src = (const char *)sqlite3_column_text(q, 0);

		if (!src || (n > 0 && strcmp(kept[n - 1].source, src) == 0))
			continue; /* an older one of the same source */
		snprintf(kept[n].source, sizeof(kept[n].source), "%s", src);
		kept[n].epoch = sqlite3_column_int64(q, 1);
		kept[n].seq = sqlite3_column_int64(q, 2);
		n++;
	}
	rc = rc == SQLITE_ROW || rc == SQLITE_DONE
		 ? 0
		 : ds_store_fail(c->st, rc, "manifests kept", err);
	ds_store_stmt_done(c->ends);
	for (size_t i = 0; rc == 0 && i < n && left > 0; i++) {
		int changed;

		rc = ds_store_stmt_lazy(c->st, &c->del_man,
					"DELETE FROM manifests WHERE rowid IN (SELECT rowid FROM"
					" manifests WHERE source = ?1 AND (epoch < ?2 OR"
					" (epoch = ?2 AND seq < ?3)) LIMIT ?4)",
					&q, err);
		if (rc < 0)
			break;
		sqlite3_bind_text(q, 1, kept[i].source, -1, SQLITE_STATIC);
		sqlite3_bind_int64(q, 2, kept[i].epoch);
		sqlite3_bind_int64(q, 3, kept[i].seq);
		sqlite3_bind_int(q, 4, left);
		rc = sqlite3_step(q);
		rc = rc == SQLITE_DONE ? 0 : ds_store_fail(c->st, rc, "manifests compaction", err);
		ds_store_stmt_done(c->del_man);
		changed = rc == 0 ? sqlite3_changes(ds_store_db(c->st)) : 0;
		s->manifests += (uint64_t)changed;
		left -= changed;
	}
	rc = finish(c, rc, err);
	if (rc < 0)
		return rc;
	return left <= 0 || n == MAX_SOURCES ? 1 : 0;
}

static int pragma_int(ds_ledger_compactor *c, const char *sql, int64_t *out, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	int rc = ds_store_prepare(c->st, sql, &q, err);

	if (rc == 0) {
		rc = sqlite3_step(q);
		*out = rc == SQLITE_ROW ? sqlite3_column_int64(q, 0) : 0;
		rc = rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : ds_store_fail(c->st, rc, sql, err);
	}
	sqlite3_finalize(q);
	return rc;
}

/*
 * DS_LEDGER_COMPACT_PAGES free pages given back (a transaction of its own).
 * A file created without auto_vacuum=INCREMENTAL reuses its free pages but
 * never shrinks: nothing to do.
 * @return 1 when free pages are left, 0 when none, or < 0
 */
static int vacuum_step(ds_ledger_compactor *c, ds_ledger_compact_stats *s, ds_err *err)
{
	int64_t mode = 0, free_pages = 0, before = 0, after = 0, page = 0;
	char sql[64];
	int rc = pragma_int(c, "PRAGMA auto_vacuum", &mode, err);

	if (rc == 0 && mode == 2)
		rc = pragma_int(c, "PRAGMA freelist_count", &free_pages, err);
	if (rc < 0 || mode != 2 || free_pages == 0)
		return rc;
	rc = pragma_int(c, "PRAGMA page_count", &before, err);
	if (rc == 0)
		rc = pragma_int(c, "PRAGMA page_size", &page, err);
	snprintf(sql, sizeof(sql), "PRAGMA incremental_vacuum(%d)", DS_LEDGER_COMPACT_PAGES);
	if (rc == 0)
		rc = ds_store_exec(c->st, sql, err);
	if (rc == 0)
		rc = pragma_int(c, "PRAGMA page_count", &after, err);
	if (rc < 0)
		return rc;
	if (after < before)
		s->bytes_freed += (uint64_t)((before - after) * page);
	return free_pages > DS_LEDGER_COMPACT_PAGES ? 1 : 0;
}

int ds_ledger_compact(ds_ledger_compactor *c, int budget_ms, ds_ledger_compact_stats *out,
		      ds_err *err)
{
	ds_ledger_compact_stats s = {0};
	int64_t start = ds_clock_mono_ms(), deadline = ds_deadline_in(budget_ms);
	int rc, more = 0;

	do
		rc = records_step(c, &s, err);
	while (rc == 1 && !ds_deadline_passed(deadline));
	if (rc < 0)
		goto out;
	more |= rc;
	do
		rc = manifests_step(c, &s, err);
	while (rc == 1 && !ds_deadline_passed(deadline));
	if (rc < 0)
		goto out;
	more |= rc;
	do
		rc = vacuum_step(c, &s, err);
	while (rc == 1 && !ds_deadline_passed(deadline));
	if (rc < 0)
		goto out;
	more |= rc;
	/* The file itself shrinks when the log is copied back into it: without
	 * waiting for anyone (a reader or the receiver in a commit keeps it for later). */
	if (s.bytes_freed)
		sqlite3_wal_checkpoint_v2(ds_store_db(c->st), NULL, SQLITE_CHECKPOINT_PASSIVE, NULL,
					  NULL);
out:
	s.ms = ds_clock_mono_ms() - start;
	if (out)
		*out = s;
	return rc < 0 ? ds_err_fallback(err, rc) : more;
}

uint64_t ds_ledger_file_bytes(const char *path)
{
	char wal[4096];
	struct stat sb;
	uint64_t n = 0;

	if (stat(path, &sb) == 0)
		n += (uint64_t)sb.st_size;
	snprintf(wal, sizeof(wal), "%s-wal", path);
	if (stat(wal, &sb) == 0)
		n += (uint64_t)sb.st_size;
	return n;
}
