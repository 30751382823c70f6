#include "drasync/sqlite_util.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

bool ds_sqlite_has_table(sqlite3 *db, const char *name)
{
	sqlite3_stmt *q = NULL;
	bool found = false;

	if (sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
			       -1, &q, NULL) == SQLITE_OK) {
		sqlite3_bind_text(q, 1, name, -1, SQLITE_STATIC);
		found = sqlite3_step(q) == SQLITE_ROW;
	}
	sqlite3_finalize(q);
	return found;
}

int ds_sqlite_fail(sqlite3 *db, int rc, const char *what, ds_err *err)
{
	const char *file = db ? sqlite3_db_filename(db, "main") : NULL;

	/* The file first: the operator must know which one (a truncated message
	 * loses the end, which is the SQL). */
	if (file && file[0])
		ds_err_set(err, "%s: %s (%s)", file, sqlite3_errmsg(db), what);
	else
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
	case SQLITE_PERM:
	case SQLITE_READONLY:
		return -EACCES;
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB:
		return -EBADMSG;
	default:
		return -EIO;
	}
}

int ds_sqlite_exec(sqlite3 *db, const char *sql, ds_err *err)
{
	int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);

	return rc == SQLITE_OK ? 0 : ds_sqlite_fail(db, rc, sql, err);
}

int ds_sqlite_open(sqlite3 **out, const char *path, ds_err *err)
{
	sqlite3 *db = NULL;
	int rc;

	rc = sqlite3_open_v2(
	    path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		ds_err_set(err, "cannot open %s: %s", path,
			   db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
		sqlite3_close(db);
		return -EIO;
	}
	sqlite3_busy_timeout(db, 10000);
	/* FULL: a record acknowledged (inbox) or pushed (outbox) survives a power cut. */
	/* Big pages: records are kilobytes of (compressed) JSON, and WAL writes a
	 * frame per page, so small pages mean many system calls per record. Only
	 * takes effect when the file is created. */
	rc = ds_sqlite_exec(db,
			    "PRAGMA page_size=32768; PRAGMA journal_mode=WAL; "
			    "PRAGMA synchronous=FULL;",
			    err);
	if (rc < 0) {
		sqlite3_close(db);
		return ds_err_fallback(err, rc);
	}
	*out = db;
	return 0;
}

int ds_sqlite_check(const char *path, ds_err *err)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *q = NULL;
	struct stat st;
	int rc;

	if (stat(path, &st) < 0 && errno == ENOENT)
		return 0; /* none yet: it is created */
	rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_busy_timeout(db, 10000);
		rc = sqlite3_prepare_v2(db, "PRAGMA quick_check(1)", -1, &q, NULL);
	}
	if (rc == SQLITE_OK)
		rc = sqlite3_step(q);
	if (rc == SQLITE_ROW) {
		const char *res = (const char *)sqlite3_column_text(q, 0);

		if (res && strcmp(res, "ok") == 0) {
			rc = 0;
		} else {
			ds_err_set(err, "%s is damaged: %s", path, res ? res : "no check result");
			rc = -EBADMSG;
		}
	} else {
		int code = rc & 0xff;
		const char *msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);

		if (code == SQLITE_CORRUPT || code == SQLITE_NOTADB)
			ds_err_set(err, "%s is damaged: %s", path, msg);
		else if (code == SQLITE_FULL)
			ds_err_set(err, "%s: no space left on its filesystem: %s", path, msg);
		else
			ds_err_set(err, "cannot read %s: %s", path, msg);
		rc = ds_sqlite_fail(NULL, rc, "", NULL);
	}
	sqlite3_finalize(q);
	sqlite3_close(db);
	return rc;
}
