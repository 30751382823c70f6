/* `relocate`'s state in STATE_DIR/outbox.db (source_relocation.h). */
#include "drasync/source_relocation.h"

#include "drasync/exporter.h"
#include "drasync/outbox.h"
#include "drasync/record.h"
#include "drasync/schemas.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const names[DS_SRC_RELOCATION_STATE_MAX] = {
    [DS_SRC_RELOCATION_NONE] = "none",	       [DS_SRC_RELOCATION_SYNCING] = "syncing",
    [DS_SRC_RELOCATION_PARKING] = "parking",   [DS_SRC_RELOCATION_SENT] = "sent",
    [DS_SRC_RELOCATION_ACTIVE] = "active",     [DS_SRC_RELOCATION_FAILED] = "failed",
    [DS_SRC_RELOCATION_RETURNED] = "returned",
};

const char *ds_source_relocation_state_name(enum ds_source_relocation_state s)
{
	return (unsigned)s < DS_SRC_RELOCATION_STATE_MAX ? names[s] : "unknown";
}

static enum ds_source_relocation_state state_of(const char *s)
{
	for (int i = 1; s && i < DS_SRC_RELOCATION_STATE_MAX; i++)
		if (strcmp(s, names[i]) == 0)
			return (enum ds_source_relocation_state)i;
	return DS_SRC_RELOCATION_NONE;
}

int ds_source_relocation_open(ds_store **out, const char *state_dir, ds_err *err)
{
	char path[4096];

	if (ds_export_db_path(state_dir, path, sizeof(path)) < 0) {
		ds_err_set(err, "state directory path too long: %s", state_dir);
		return -ENAMETOOLONG;
	}
	return ds_outbox_file_open(out, path, 0, err);
}

#define COLS "namespace, state, seq, target, requested_at, finished_at, status, message"

static void read_row(sqlite3_stmt *q, ds_source_relocation *r)
{
	const char *s;

	memset(r, 0, sizeof(*r));
	s = (const char *)sqlite3_column_text(q, 0);
	snprintf(r->ns, sizeof(r->ns), "%s", s ? s : "");
	r->state = state_of((const char *)sqlite3_column_text(q, 1));
	r->seq = (uint64_t)sqlite3_column_int64(q, 2);
	s = (const char *)sqlite3_column_text(q, 3);
	snprintf(r->target, sizeof(r->target), "%s", s ? s : "");
	r->requested_at = sqlite3_column_int64(q, 4);
	r->finished_at = sqlite3_column_int64(q, 5);
	r->status = sqlite3_column_int(q, 6);
	s = (const char *)sqlite3_column_text(q, 7);
	snprintf(r->message, sizeof(r->message), "%s", s ? s : "");
}

int ds_source_relocation_get(ds_store *db, const char *ns, ds_source_relocation *out, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	int rc =
	    ds_store_prepare(db, "SELECT " COLS " FROM relocations WHERE namespace = ?", &q, err);

	if (rc < 0)
		return rc;
	sqlite3_bind_text(q, 1, ns, -1, SQLITE_STATIC);
	rc = sqlite3_step(q);
	if (rc == SQLITE_ROW) {
		read_row(q, out);
		rc = 1;
	} else {
		rc = rc == SQLITE_DONE ? 0 : ds_store_fail(db, rc, "relocations", err);
	}
	sqlite3_finalize(q);
	return rc;
}

int ds_source_relocation_list(ds_store *db, ds_source_relocation *out, size_t max, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	int rc =
	    ds_store_prepare(db, "SELECT " COLS " FROM relocations ORDER BY namespace", &q, err);
	size_t n = 0;

	if (rc < 0)
		return rc;
	while (n < max && (rc = sqlite3_step(q)) == SQLITE_ROW)
		read_row(q, &out[n++]);
	rc = rc == SQLITE_DONE || rc == SQLITE_ROW ? (int)n
						   : ds_store_fail(db, rc, "relocations", err);
	sqlite3_finalize(q);
	return rc;
}

enum ds_source_relocation_step ds_source_relocation_next(const ds_source_relocation *row,
							 bool found)
{
	if (!found)
		return DS_SRC_STEP_BEGIN;
	switch (row->state) {
	case DS_SRC_RELOCATION_SYNCING:
		return DS_SRC_STEP_SYNC;
	case DS_SRC_RELOCATION_PARKING:
		return DS_SRC_STEP_PARK;
	case DS_SRC_RELOCATION_SENT:
		return DS_SRC_STEP_WAIT;
	case DS_SRC_RELOCATION_ACTIVE:
		return DS_SRC_STEP_DONE;
	default:
		return DS_SRC_STEP_BEGIN;
	}
}

static int exec_row(ds_store *db, const char *sql, const char *ns, const char *text,
		    const char *what, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	int rc = ds_store_prepare(db, sql, &q, err);

	if (rc < 0)
		return rc;
	sqlite3_bind_text(q, 1, ns, -1, SQLITE_STATIC);
	sqlite3_bind_text(q, 2, text, -1, SQLITE_STATIC);
	sqlite3_bind_int64(q, 3, (sqlite3_int64)time(NULL));
	rc = sqlite3_step(q);
	rc = rc == SQLITE_DONE ? 0 : ds_store_fail(db, rc, what, err);
	sqlite3_finalize(q);
	return rc;
}

int ds_source_relocation_begin(ds_store *db, const char *ns, const char *target, ds_err *err)
{
	return exec_row(db,
			"INSERT INTO relocations(namespace, state, target, requested_at)"
			" VALUES(?1, 'syncing', ?2, ?3) ON CONFLICT(namespace) DO UPDATE SET"
			" state = 'syncing', seq = NULL, target = ?2, requested_at = ?3,"
			" finished_at = NULL, status = NULL, message = NULL"
			" WHERE relocations.state IN ('failed', 'returned')",
			ns, target, "relocation intent", err);
}

int ds_source_relocation_synced(ds_store *db, const char *ns, ds_err *err)
{
	return exec_row(db,
			"UPDATE relocations SET state = 'parking' WHERE namespace = ?1"
			" AND state = 'syncing'",
			ns, "", "relocation", err);
}

int ds_source_relocation_returned(ds_store *db, const char *ns, ds_err *err)
{
	return exec_row(
	    db,
	    "UPDATE relocations SET state = 'returned', message = ?2 WHERE namespace = ?1"
	    " AND state = 'active'",
	    ns, "came back: drasync-target made it active on this cluster again", "relocation",
	    err);
}

bool ds_source_relocation_came_back(const ds_source_relocation *row, const char *mode,
				    int64_t mode_since)
{
	return row->state == DS_SRC_RELOCATION_ACTIVE && mode && strcmp(mode, "active") == 0 &&
	       mode_since > row->finished_at;
}

int ds_source_relocation_parked_by_operator(ds_store *db, const char *ns, const char *target,
					    ds_err *err)
{
	return exec_row(
	    db,
	    "INSERT INTO relocations(namespace, state, target, requested_at, finished_at,"
	    " message) VALUES(?1, 'active', ?2, ?3, ?3, 'parked by the operator (drasync-source"
	    " park): it runs at the other site') ON CONFLICT(namespace) DO UPDATE SET"
	    " state = 'active', seq = NULL, target = ?2, requested_at = ?3, finished_at = ?3,"
	    " status = NULL, message = excluded.message WHERE relocations.state != 'active'",
	    ns, target, "park", err);
}

int ds_source_relocation_fail(ds_store *db, const char *ns, const char *message, ds_err *err)
{
	return exec_row(db,
			"UPDATE relocations SET state = 'failed', message = ?2, finished_at = ?3,"
			" status = coalesce(status, 3) WHERE namespace = ?1 AND state != 'active'",
			ns, message, "relocation", err);
}

struct push_ctx {
	const char *ns;
};

/* In the push's transaction: the row is sent at the record's seq. */
static int mark_sent(void *ud, sqlite3 *db, const ds_record *pushed, size_t n, ds_err *err)
{
	struct push_ctx *c = ud;
	sqlite3_stmt *q = NULL;
	int rc;

	if (n != 1)
		return -EINVAL;
	rc = sqlite3_prepare_v2(db,
				"UPDATE relocations SET state = 'sent', seq = ? WHERE namespace = ?"
				" AND state = 'parking'",
				-1, &q, NULL);
	if (rc != SQLITE_OK)
		return ds_store_fail_db(db, rc, "relocation", err);
	sqlite3_bind_int64(q, 1, (sqlite3_int64)pushed[0].seq);
	sqlite3_bind_text(q, 2, c->ns, -1, SQLITE_STATIC);
	rc = sqlite3_step(q);
	rc = rc == SQLITE_DONE ? 0 : ds_store_fail_db(db, rc, "relocation", err);
	if (rc == 0 && sqlite3_changes(db) != 1) {
		ds_err_set(err, "relocation of %s: not waiting to be sent (sent already?)", c->ns);
		rc = -EALREADY;
	}
	sqlite3_finalize(q);
	return rc;
}

int ds_source_relocation_push(const char *outbox_path, const char *ns, uint64_t *seq, ds_err *err)
{
	ds_record rec = {.op = DS_RECORD_RELOCATE, .ns = ns};
	struct push_ctx c = {ns};
	ds_outbox *ob = NULL;
	int rc = ds_outbox_open(&ob, outbox_path, NULL, err);

	if (rc < 0)
		return rc;
	rc = ds_outbox_push_with(ob, &rec, 1, mark_sent, &c, seq, err);
	ds_outbox_free(ob);
	return rc;
}

static int finish(ds_store *db, uint64_t seq, const char *state, int status, const char *message,
		  ds_err *err)
{
	sqlite3_stmt *q = NULL;
	int rc = ds_store_prepare(db,
				  "UPDATE relocations SET state = ?, status = ?, message = ?,"
				  " finished_at = ? WHERE state = 'sent' AND seq = ?",
				  &q, err);

	if (rc < 0)
		return rc;
	sqlite3_bind_text(q, 1, state, -1, SQLITE_STATIC);
	sqlite3_bind_int(q, 2, status);
	sqlite3_bind_text(q, 3, message ? message : "", -1, SQLITE_STATIC);
	sqlite3_bind_int64(q, 4, (sqlite3_int64)time(NULL));
	sqlite3_bind_int64(q, 5, (sqlite3_int64)seq);
	rc = sqlite3_step(q);
	rc = rc == SQLITE_DONE ? sqlite3_changes(ds_store_db(db))
			       : ds_store_fail(db, rc, "relocation", err);
	sqlite3_finalize(q);
	return rc;
}

int ds_source_relocation_on_results(ds_store *db, const ds_wire_result *v, size_t n, ds_err *err)
{
	int done = 0, rc;

	for (size_t i = 0; i < n; i++) {
		const char *state;

		switch (v[i].status) {
		case DS_RESULT_APPLIED:
			state = "active";
			break;
		case DS_RESULT_FAILED:
		case DS_RESULT_REFUSED:
		case DS_RESULT_SKIPPED:
			state = "failed";
			break;
		default:
			continue;
		}
		rc = finish(db, v[i].seq, state, (int)v[i].status, v[i].message, err);
		if (rc < 0)
			return rc;
		done += rc;
	}
	return done;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

bool ds_source_relocation_exports(const char *const *v, size_t n, const char *ns)
{
	if (!ns || !ns[0] || n == 0)
		return true;
	return bsearch(&ns, v, n, sizeof(*v), cmp_str) == NULL;
}

/* The states in which a namespace's records are not exported (SQL). */
#define EXCLUDING "('syncing', 'parking', 'sent', 'active')"

int ds_source_relocation_excluded(ds_store *db, char ***out, size_t *n, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	char **v = NULL;
	size_t k = 0, cap = 0;
	int rc = ds_store_prepare(
	    db, "SELECT namespace FROM relocations WHERE state IN " EXCLUDING " ORDER BY namespace",
	    &q, err);

	*out = NULL;
	*n = 0;
	if (rc < 0)
		return rc;
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		const char *s = (const char *)sqlite3_column_text(q, 0);
		if (k == cap) {
			char **nv = realloc(v, (cap = cap ? cap * 2 : 8) * sizeof(*v));
			if (!nv) {
				rc = -ENOMEM;
				break;
			}
			v = nv;
		}
		if (!(v[k] = strdup(s ? s : ""))) {
			rc = -ENOMEM;
			break;
		}
		k++;
	}
	sqlite3_finalize(q);
	if (rc != SQLITE_DONE) {
		for (size_t i = 0; i < k; i++)
			free(v[i]);
		free(v);
		if (rc == -ENOMEM) {
			ds_err_set(err, "out of memory");
			return rc;
		}
		return ds_store_fail(db, rc, "relocations", err);
	}
	*out = v;
	*n = k;
	return 0;
}

int ds_source_relocation_check_push(struct sqlite3 *db, const ds_record *recs, size_t n,
				    const char *relocating_ns, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	int rc;

	rc = sqlite3_prepare_v2(
	    db, "SELECT state FROM relocations WHERE namespace = ? AND state IN " EXCLUDING, -1, &q,
	    NULL);
	if (rc != SQLITE_OK)
		return ds_store_fail_db(db, rc, "relocations", err);
	rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		const char *ns = recs[i].ns;
		int src;

		if (!ns || !ns[0] || (i > 0 && recs[i - 1].ns && strcmp(recs[i - 1].ns, ns) == 0))
			continue;
		sqlite3_reset(q);
		sqlite3_bind_text(q, 1, ns, -1, SQLITE_STATIC);
		src = sqlite3_step(q);
		if (src == SQLITE_ROW) {
			const char *state = (const char *)sqlite3_column_text(q, 0);
			bool final_pass = relocating_ns && strcmp(relocating_ns, ns) == 0 &&
					  state && strcmp(state, "syncing") == 0;

			if (!final_pass) {
				ds_err_set(err,
					   "a relocation of %s began (%s): its records are not "
					   "exported",
					   ns, state ? state : "?");
				rc = -ESTALE;
			}
		} else if (src != SQLITE_DONE) {
			rc = ds_store_fail_db(db, src, "relocations", err);
		} else if (relocating_ns && strcmp(relocating_ns, ns) == 0) {
			ds_err_set(err, "the relocation of %s is not syncing any more", ns);
			rc = -ESTALE;
		}
	}
	sqlite3_finalize(q);
	return rc;
}
