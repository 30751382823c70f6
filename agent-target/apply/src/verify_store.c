#include "verify_internal.h"

#include "drasync/clock.h"
#include "drasync/schemas.h"

#include <errno.h>
#include <sqlite3.h>
#include <string.h>

/* ---- in the ledger -------------------------------------------------------------------- */

/* Rows of workloads the ledger no longer has (deleted, or never there). */
static const char verify_prune[] =
    "DELETE FROM verifications WHERE NOT EXISTS (SELECT 1 FROM object_state o"
    " WHERE o.kind = verifications.kind AND coalesce(o.target_name, o.name) ="
    " verifications.name AND o.op = 1"
    " AND o.state IN ('applied', 'held', 'pending', 'waiting', 'failed'))";

int ds_verify_store(const char *path, const ds_verify_item *items, size_t n, ds_err *err)
{
	ds_store *store = NULL;
	sqlite3_stmt *q = NULL;
	int rc;

	/* The ledger's schema has the verifications table (ledger_schema.c); `run`
	 * may hold the write lock for a batch: the store's busy timeout waits. */
	rc = ds_ledger_open(&store, path, DS_STORE_MUST_EXIST, err);
	if (rc < 0)
		return ds_err_fallback(err, rc);
	rc = ds_store_begin(store, true, err);
	if (rc == 0)
		rc = ds_store_prepare(
		    store,
		    "INSERT OR REPLACE INTO verifications(kind, namespace, name, form,"
		    " verified, reason, checked_at, seconds)"
		    " VALUES(?, ?, ?, ?, ?, ?, ?, ?)",
		    &q, err);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		const ds_verify_item *it = &items[i];

		sqlite3_reset(q);
		sqlite3_bind_text(q, 1, it->kind, -1, SQLITE_STATIC);
		sqlite3_bind_text(q, 2, it->ns, -1, SQLITE_STATIC);
		sqlite3_bind_text(q, 3, it->name, -1, SQLITE_STATIC);
		sqlite3_bind_text(q, 4, ds_verify_form_name(it->form), -1, SQLITE_STATIC);
		sqlite3_bind_int(q, 5, it->verified ? 1 : 0);
		sqlite3_bind_text(q, 6, it->reason, -1, SQLITE_STATIC);
		sqlite3_bind_int64(q, 7, (sqlite3_int64)(ds_clock_wall_ms() / 1000));
		sqlite3_bind_double(q, 8, it->seconds);
		rc = sqlite3_step(q);
		rc = rc == SQLITE_DONE ? 0 : ds_store_fail(store, rc, "verifications", err);
	}
	sqlite3_finalize(q);
	if (rc == 0)
		rc = ds_store_exec(store, verify_prune, err);
	if (rc == 0)
		rc = ds_store_commit(store, err);
	if (rc < 0)
		ds_store_rollback(store);
	ds_store_free(store);
	return rc < 0 ? ds_err_fallback(err, rc) : 0;
}
