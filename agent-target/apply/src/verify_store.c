#include "verify_internal.h"

#include "drasync/clock.h"

#include <errno.h>
#include <sqlite3.h>
#include <string.h>

/* ---- in the ledger -------------------------------------------------------------------- */

static const char verify_schema[] =
    "CREATE TABLE IF NOT EXISTS verifications(kind TEXT NOT NULL, namespace TEXT NOT NULL,"
    " name TEXT NOT NULL, form TEXT, verified INTEGER NOT NULL, reason TEXT,"
    " checked_at INTEGER NOT NULL, seconds REAL, PRIMARY KEY(kind, namespace, name));";

/* Rows of workloads the ledger no longer has (deleted, or never there). */
static const char verify_prune[] =
    "DELETE FROM verifications WHERE NOT EXISTS (SELECT 1 FROM object_state o"
    " WHERE o.kind = verifications.kind AND coalesce(o.target_name, o.name) ="
    " verifications.name AND o.op = 1"
    " AND o.state IN ('applied', 'held', 'pending', 'waiting', 'failed'))";

int ds_verify_store(const char *path, const ds_verify_item *items, size_t n, ds_err *err)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *q = NULL;
	int rc;

	rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL);
	if (rc != SQLITE_OK) {
		ds_err_set(err, "cannot open the ledger %s: %s", path,
			   db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
		rc = -EIO;
		goto out;
	}
	/* `run` may hold the write lock for a batch; wait for it. */
	sqlite3_busy_timeout(db, 10000);
	if (sqlite3_exec(db, verify_schema, NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(
		db,
		"INSERT OR REPLACE INTO verifications(kind, namespace, name, form,"
		" verified, reason, checked_at, seconds) VALUES(?, ?, ?, ?, ?, ?, ?, ?)",
		-1, &q, NULL) != SQLITE_OK)
		goto sql_error;
	for (size_t i = 0; i < n; i++) {
		const ds_verify_item *it = &items[i];
		sqlite3_bind_text(q, 1, it->kind, -1, SQLITE_STATIC);
		sqlite3_bind_text(q, 2, it->ns, -1, SQLITE_STATIC);
		sqlite3_bind_text(q, 3, it->name, -1, SQLITE_STATIC);
		sqlite3_bind_text(q, 4, ds_verify_form_name(it->form), -1, SQLITE_STATIC);
		sqlite3_bind_int(q, 5, it->verified ? 1 : 0);
		sqlite3_bind_text(q, 6, it->reason, -1, SQLITE_STATIC);
		sqlite3_bind_int64(q, 7, (sqlite3_int64)(ds_clock_wall_ms() / 1000));
		sqlite3_bind_double(q, 8, it->seconds);
		if (sqlite3_step(q) != SQLITE_DONE)
			goto sql_error;
		sqlite3_reset(q);
	}
	if (sqlite3_exec(db, verify_prune, NULL, NULL, NULL) != SQLITE_OK &&
	    !strstr(sqlite3_errmsg(db), "no such table"))
		goto sql_error;
	if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
		goto sql_error;
	rc = 0;
	goto out;
sql_error:
	ds_err_set(err, "ledger %s: verifications: %s", path, sqlite3_errmsg(db));
	sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	rc = -EIO;
out:
	sqlite3_finalize(q);
	sqlite3_close(db);
	return rc < 0 ? ds_err_fallback(err, rc) : 0;
}
