/*
 * The ledger's `relocations` table (relocation.h): noted at ingest, read by
 * the relocator, finished with the apply result the source hears.
 */
#include "object_state_internal.h"

#include "drasync/clock.h"
#include "drasync/log.h"
#include "drasync/relocation.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

static const char *const state_names[DS_RELOCATION_STATE_MAX] = {
    [DS_RELOCATION_PENDING] = "pending",   [DS_RELOCATION_ACTIVE] = "active",
    [DS_RELOCATION_FAILED] = "failed",	   [DS_RELOCATION_REFUSED] = "refused",
    [DS_RELOCATION_RETURNED] = "returned",
};

/* Committed returns of this process (relocation.h). */
static _Atomic uint64_t returned_total;

uint64_t ds_relocation_returned_total(void)
{
	return atomic_load(&returned_total);
}

void ds_object_state_returned_committed(ds_object_state *st)
{
	if (st->returned_pending)
		atomic_fetch_add(&returned_total, st->returned_pending);
	st->returned_pending = 0;
}

const char *ds_relocation_state_name(enum ds_relocation_state s)
{
	return (unsigned)s < DS_RELOCATION_STATE_MAX ? state_names[s] : "unknown";
}

int ds_object_state_note_relocation(ds_object_state *st, const ds_ledger_record *rec, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	int rc;

	if (!rec->ns || !rec->ns[0])
		return 0; /* the wire checks it; a ledger written otherwise has nothing to do */
	rc = ds_store_prepare(
	    st->store,
	    "INSERT OR IGNORE INTO relocations(source, epoch, seq, namespace, state,"
	    " requested_at) VALUES(?, ?, ?, ?, 'pending', ?)",
	    &q, err);
	if (rc < 0)
		return rc;
	sqlite3_bind_text(q, 1, rec->source, -1, SQLITE_STATIC);
	sqlite3_bind_int64(q, 2, rec->epoch);
	sqlite3_bind_int64(q, 3, rec->seq);
	sqlite3_bind_text(q, 4, rec->ns, -1, SQLITE_STATIC);
	sqlite3_bind_int64(q, 5, ds_clock_wall_ms() / 1000);
	rc = sqlite3_step(q);
	rc = rc == SQLITE_DONE ? 0 : ds_store_fail(st->store, rc, "relocation", err);
	sqlite3_finalize(q);
	return rc;
}

/* One relocation of rec's source and namespace came home: its row returned, its target
 * namespace standby. */
static int came_home(ds_object_state *st, const ds_ledger_record *rec, int64_t id,
		     const char *target_ns, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	int64_t now = ds_clock_wall_ms() / 1000;
	int rc = ds_store_prepare(
	    st->store, "UPDATE relocations SET state = 'returned', message = ?2 WHERE id = ?1", &q,
	    err);

	if (rc < 0)
		return rc;
	sqlite3_bind_int64(q, 1, id);
	sqlite3_bind_text(q, 2,
			  "came home: the source runs the namespace again (its records "
			  "follow the relocation); the target namespace is standby here again",
			  -1, SQLITE_STATIC);
	rc = sqlite3_step(q);
	rc = rc == SQLITE_DONE ? 0 : ds_store_fail(st->store, rc, "relocation", err);
	sqlite3_finalize(q);
	q = NULL;
	if (rc < 0 || !target_ns || !target_ns[0])
		return rc;
	st->returned_pending++;
	rc = ds_store_prepare(st->store,
			      "INSERT INTO namespace_modes(namespace, mode, since, changed_by)"
			      " VALUES(?1, 'standby', ?2, 'relocation-home') ON CONFLICT(namespace)"
			      " DO UPDATE SET mode = 'standby', since = ?2,"
			      " changed_by = 'relocation-home' WHERE mode != 'standby'",
			      &q, err);
	if (rc < 0)
		return rc;
	sqlite3_bind_text(q, 1, target_ns, -1, SQLITE_STATIC);
	sqlite3_bind_int64(q, 2, now);
	rc = sqlite3_step(q);
	rc = rc == SQLITE_DONE ? 0 : ds_store_fail(st->store, rc, "namespace mode", err);
	sqlite3_finalize(q);
	if (rc == 0)
		ds_log(DS_LOG_INFO, "relocation_returned",
		       "source=%s namespace=%s target_namespace=%s seq=%lld", rec->source, rec->ns,
		       target_ns, (long long)rec->seq);
	return rc;
}

int ds_object_state_note_home(ds_object_state *st, const ds_ledger_record *rec, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	int64_t id = 0;
	char tns[256] = "";
	int rc =
	    ds_object_state_keep(st, OS_STMT_HOME,
				 "SELECT id, target_namespace FROM relocations WHERE source = ?1"
				 " AND namespace = ?2 AND state = 'active'"
				 " AND (epoch != ?3 OR seq < ?4) LIMIT 1",
				 &q, err);

	if (rc < 0)
		return rc;
	ds_object_state_bind_text(q, 1, rec->source);
	ds_object_state_bind_text(q, 2, rec->ns);
	sqlite3_bind_int64(q, 3, rec->epoch);
	sqlite3_bind_int64(q, 4, rec->seq);
	rc = sqlite3_step(q);
	if (rc == SQLITE_ROW) {
		const char *t = (const char *)sqlite3_column_text(q, 1);

		id = sqlite3_column_int64(q, 0);
		snprintf(tns, sizeof(tns), "%s", t ? t : "");
		rc = 0;
	} else {
		rc = rc == SQLITE_DONE ? 0 : ds_store_fail(st->store, rc, "relocations", err);
	}
	ds_object_state_unkeep(rc, q);
	return rc == 0 && id ? came_home(st, rec, id, tns, err) : rc;
}

int ds_relocation_pending(ds_object_state *st, ds_relocation_row *out, size_t max, size_t *n,
			  ds_err *err)
{
	sqlite3_stmt *q = NULL;
	int rc;

	*n = 0;
	rc = ds_store_prepare(st->store,
			      "SELECT id, source, epoch, seq, namespace FROM relocations"
			      " WHERE state = 'pending' ORDER BY id LIMIT ?",
			      &q, err);
	if (rc < 0)
		return rc;
	sqlite3_bind_int64(q, 1, (sqlite3_int64)max);
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		ds_relocation_row *r = &out[(*n)++];
		const char *s = (const char *)sqlite3_column_text(q, 1);
		const char *ns = (const char *)sqlite3_column_text(q, 4);

		r->id = sqlite3_column_int64(q, 0);
		snprintf(r->source, sizeof(r->source), "%s", s ? s : "");
		r->epoch = sqlite3_column_int64(q, 2);
		r->seq = sqlite3_column_int64(q, 3);
		snprintf(r->ns, sizeof(r->ns), "%s", ns ? ns : "");
	}
	rc = rc == SQLITE_DONE ? 0 : ds_store_fail(st->store, rc, "relocations", err);
	sqlite3_finalize(q);
	return rc;
}

static int result_of(enum ds_relocation_state s)
{
	return s == DS_RELOCATION_ACTIVE    ? DS_RESULT_APPLIED
	       : s == DS_RELOCATION_REFUSED ? DS_RESULT_REFUSED
					    : DS_RESULT_FAILED;
}

int ds_relocation_finish(ds_object_state *st, const ds_relocation_row *r, const char *target_ns,
			 enum ds_relocation_state state, const char *message, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	int rc = ds_store_begin(st->store, true, err);

	if (rc < 0)
		return rc;
	rc = ds_store_prepare(st->store,
			      "UPDATE relocations SET state = ?, target_namespace = ?, message = ?,"
			      " finished_at = ? WHERE id = ?",
			      &q, err);
	if (rc < 0)
		goto out;
	sqlite3_bind_text(q, 1, ds_relocation_state_name(state), -1, SQLITE_STATIC);
	ds_object_state_bind_text(q, 2, target_ns);
	ds_object_state_bind_text(q, 3, message);
	sqlite3_bind_int64(q, 4, ds_clock_wall_ms() / 1000);
	sqlite3_bind_int64(q, 5, r->id);
	rc = sqlite3_step(q);
	rc = rc == SQLITE_DONE ? 0 : ds_store_fail(st->store, rc, "relocation", err);
	sqlite3_finalize(q);
	q = NULL;
	if (rc < 0)
		goto out;
	rc = ds_store_prepare(st->store,
			      "INSERT INTO apply_results(source, epoch, seq, status, message)"
			      " VALUES(?, ?, ?, ?, ?)",
			      &q, err);
	if (rc < 0)
		goto out;
	sqlite3_bind_text(q, 1, r->source, -1, SQLITE_STATIC);
	sqlite3_bind_int64(q, 2, r->epoch);
	sqlite3_bind_int64(q, 3, r->seq);
	sqlite3_bind_int(q, 4, result_of(state));
	ds_object_state_bind_text(q, 5, message);
	rc = sqlite3_step(q);
	rc = rc == SQLITE_DONE ? 0 : ds_store_fail(st->store, rc, "relocation result", err);
	sqlite3_finalize(q);
out:
	if (rc < 0) {
		ds_store_rollback(st->store);
		return rc;
	}
	rc = ds_store_commit(st->store, err);
	if (rc < 0)
		ds_store_rollback(st->store);
	return rc;
}
