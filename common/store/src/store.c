#include "drasync/store.h"

#include "drasync/version.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct ds_store_stmt {
	sqlite3_stmt *q;
	ds_store_stmt *next;
};

struct ds_store {
	sqlite3 *db;
	char *path;
	const ds_store_schema *schema;
	int version;
	ds_store_stmt *stmts; /* every handle of ds_store_stmt_new(), finalized at free */
};

static int map_rc(int rc)
{
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

int ds_store_fail_db(sqlite3 *db, int rc, const char *what, ds_err *err)
{
	const char *file = db ? sqlite3_db_filename(db, "main") : NULL;

	/* The file first: the operator must know which one (a truncated message
	 * loses the end, which is the SQL). */
	if (file && file[0])
		ds_err_set(err, "%s: %s (%s)", file, sqlite3_errmsg(db), what);
	else
		ds_err_set(err, "%s: %s", what, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
	return map_rc(rc);
}

int ds_store_fail(ds_store *st, int rc, const char *what, ds_err *err)
{
	if (st && st->db)
		return ds_store_fail_db(st->db, rc, what, err);
	if (st && st->path)
		ds_err_set(err, "%s: %s (%s)", st->path, sqlite3_errstr(rc), what);
	else
		ds_err_set(err, "%s: %s", what, sqlite3_errstr(rc));
	return map_rc(rc);
}

sqlite3 *ds_store_db(ds_store *st)
{
	return st->db;
}

const char *ds_store_path(const ds_store *st)
{
	return st->path;
}

int ds_store_version(ds_store *st)
{
	return st->version;
}

int ds_store_exec(ds_store *st, const char *sql, ds_err *err)
{
	int rc = sqlite3_exec(st->db, sql, NULL, NULL, NULL);

	return rc == SQLITE_OK ? 0 : ds_store_fail(st, rc, sql, err);
}

int ds_store_begin(ds_store *st, bool immediate, ds_err *err)
{
	return ds_store_exec(st, immediate ? "BEGIN IMMEDIATE" : "BEGIN", err);
}

int ds_store_commit(ds_store *st, ds_err *err)
{
	return ds_store_exec(st, "COMMIT", err);
}

void ds_store_rollback(ds_store *st)
{
	if (!sqlite3_get_autocommit(st->db))
		sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
}

bool ds_store_has_table(ds_store *st, const char *name)
{
	sqlite3_stmt *q = NULL;
	bool found = false;

	if (sqlite3_prepare_v2(st->db,
			       "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", -1,
			       &q, NULL) == SQLITE_OK) {
		sqlite3_bind_text(q, 1, name, -1, SQLITE_STATIC);
		found = sqlite3_step(q) == SQLITE_ROW;
	}
	sqlite3_finalize(q);
	return found;
}

static int read_version(ds_store *st, int *out, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	int rc = sqlite3_prepare_v2(st->db, "PRAGMA user_version", -1, &q, NULL);

	if (rc == SQLITE_OK)
		rc = sqlite3_step(q);
	if (rc == SQLITE_ROW) {
		*out = sqlite3_column_int(q, 0);
		rc = 0;
	} else {
		rc = ds_store_fail(st, rc, "schema version", err);
	}
	sqlite3_finalize(q);
	return rc;
}

/* store_info's value for key into buf ("" when the file has none). */
static void read_info(ds_store *st, const char *key, char *buf, size_t size)
{
	sqlite3_stmt *q = NULL;

	buf[0] = '\0';
	if (!ds_store_has_table(st, "store_info"))
		return;
	if (sqlite3_prepare_v2(st->db, "SELECT value FROM store_info WHERE key = ?", -1, &q,
			       NULL) == SQLITE_OK) {
		sqlite3_bind_text(q, 1, key, -1, SQLITE_STATIC);
		if (sqlite3_step(q) == SQLITE_ROW && sqlite3_column_text(q, 0))
			snprintf(buf, size, "%s", (const char *)sqlite3_column_text(q, 0));
	}
	sqlite3_finalize(q);
}

static int set_info(ds_store *st, const char *key, const char *value, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	int rc = sqlite3_prepare_v2(st->db,
				    "INSERT INTO store_info(key, value) VALUES(?1, ?2)"
				    " ON CONFLICT(key) DO UPDATE SET value = ?2",
				    -1, &q, NULL);

	if (rc == SQLITE_OK) {
		sqlite3_bind_text(q, 1, key, -1, SQLITE_STATIC);
		sqlite3_bind_text(q, 2, value, -1, SQLITE_STATIC);
		rc = sqlite3_step(q);
	}
	rc = rc == SQLITE_DONE ? 0 : ds_store_fail(st, rc, "store_info", err);
	sqlite3_finalize(q);
	return rc;
}

int ds_store_info_get(ds_store *st, const char *key, char *buf, size_t size)
{
	read_info(st, key, buf, size);
	return buf[0] ? 1 : 0;
}

int ds_store_info_set(ds_store *st, const char *key, const char *value, ds_err *err)
{
	if (!ds_store_has_table(st, "store_info")) {
		ds_err_set(err, "%s has no store_info table", st->path);
		return -ENOENT;
	}
	return set_info(st, key, value, err);
}

/* The file holds what the schema expects, at a version this drasync knows. */
static int check_file(ds_store *st, ds_err *err)
{
	char file[64], by[64];

	read_info(st, "file", file, sizeof(file));
	if (file[0] && strcmp(file, st->schema->file) != 0) {
		ds_err_set(err, "%s is a drasync %s file where the %s was expected: check the path",
			   st->path, file, st->schema->file);
		return -EBADMSG;
	}
	if (st->version > st->schema->n_steps) {
		read_info(st, "written_by", by, sizeof(by));
		ds_err_set(
		    err,
		    "%s has %s schema version %d, written by drasync %s; this drasync %s "
		    "reads versions up to %d: run the drasync that wrote it (or a newer one)",
		    st->path, st->schema->file, st->version, by[0] ? by : "(unknown)", DS_VERSION,
		    st->schema->n_steps);
		return -EPROTONOSUPPORT;
	}
	return 0;
}

/*
 * Every step after the file's version, in one IMMEDIATE transaction: a second
 * agent opening the same file meanwhile waits, then finds it migrated.
 */
static int migrate(ds_store *st, ds_err *err)
{
	const ds_store_schema *s = st->schema;
	char by[64], sql[64];
	int rc;

	rc = ds_store_begin(st, true, err);
	if (rc < 0)
		return rc;
	rc = read_version(st, &st->version, err);
	if (rc == 0)
		rc = check_file(st, err);
	for (int v = st->version; rc == 0 && v < s->n_steps; v++) {
		int src = sqlite3_exec(st->db, s->steps[v].sql, NULL, NULL, NULL);

		if (src != SQLITE_OK) {
			char what[160];

			snprintf(what, sizeof(what), "%s schema version %d: %s", s->file,
				 s->steps[v].version, s->steps[v].what);
			rc = ds_store_fail(st, src, what, err);
		}
	}
	if (rc == 0 && st->version < s->n_steps) {
		snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", s->n_steps);
		rc = ds_store_exec(st, sql, err);
		if (rc == 0 && ds_store_has_table(st, "store_info"))
			rc = set_info(st, "file", s->file, err);
	}
	if (rc == 0 && ds_store_has_table(st, "store_info")) {
		/* Who wrote it last: what a newer file's refusal names. */
		read_info(st, "written_by", by, sizeof(by));
		if (strcmp(by, DS_VERSION) != 0)
			rc = set_info(st, "written_by", DS_VERSION, err);
	}
	if (rc == 0)
		rc = ds_store_commit(st, err);
	if (rc < 0) {
		ds_store_rollback(st);
		return rc;
	}
	st->version = s->n_steps;
	return 0;
}

static pthread_once_t heap_limit_once = PTHREAD_ONCE_INIT;

static void heap_limit(void)
{
	sqlite3_soft_heap_limit64(DS_STORE_HEAP_LIMIT);
}

int ds_store_open(ds_store **out, const char *path, const ds_store_schema *schema, unsigned flags,
		  ds_err *err)
{
	bool ro = flags & DS_STORE_READONLY;
	ds_store *st;
	struct stat sb;
	int rc;

	if ((flags & (DS_STORE_READONLY | DS_STORE_MUST_EXIST)) && stat(path, &sb) < 0) {
		ds_err_set(err, "no %s at %s", schema->file, path);
		return -ENOENT;
	}
	st = calloc(1, sizeof(*st));
	if (!st)
		return ds_err_fallback(err, -ENOMEM);
	st->schema = schema;
	st->path = strdup(path);
	if (!st->path) {
		free(st);
		return ds_err_fallback(err, -ENOMEM);
	}
	pthread_once(&heap_limit_once, heap_limit);
	rc = sqlite3_open_v2(path, &st->db,
			     (ro ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) |
				 (ro || (flags & DS_STORE_MUST_EXIST) ? 0 : SQLITE_OPEN_CREATE) |
				 SQLITE_OPEN_NOMUTEX,
			     NULL);
	if (rc != SQLITE_OK) {
		ds_err_set(err, "cannot open the %s %s: %s", schema->file, path,
			   st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc));
		rc = map_rc(rc);
		goto out;
	}
	sqlite3_busy_timeout(st->db, DS_STORE_BUSY_MS);
	if (!ro) {
		/* FULL: a record acknowledged (ledger) or pushed (outbox) survives a
		 * power cut. Big pages: records are kilobytes of (compressed) JSON,
		 * and WAL writes a frame per page, so small pages mean many system
		 * calls per record; page_size only takes effect on a new file. */
		/* auto_vacuum too only takes effect on a new file (before its first
		 * table), and after page_size, which it would otherwise fix at the
		 * default: an older file keeps its mode until a VACUUM (docs/store.md). */
		rc = ds_store_exec(st, "PRAGMA page_size=32768", err);
		if (rc == 0 && schema->incremental_vacuum)
			rc = ds_store_exec(st, "PRAGMA auto_vacuum=INCREMENTAL", err);
		if (rc == 0)
			rc = ds_store_exec(st, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;",
					   err);
		if (rc == 0) {
			char limit[64];

			snprintf(limit, sizeof(limit), "PRAGMA journal_size_limit=%d",
				 DS_STORE_WAL_LIMIT);
			rc = ds_store_exec(st, limit, err);
		}
		if (rc == 0)
			rc = migrate(st, err);
	} else {
		rc = read_version(st, &st->version, err);
		if (rc == 0)
			rc = check_file(st, err);
	}
out:
	if (rc < 0) {
		ds_store_free(st);
		return ds_err_fallback(err, rc);
	}
	*out = st;
	return 0;
}

void ds_store_free(ds_store *st)
{
	if (!st)
		return;
	while (st->stmts) {
		ds_store_stmt *h = st->stmts;

		st->stmts = h->next;
		sqlite3_finalize(h->q);
		free(h);
	}
	sqlite3_close(st->db);
	free(st->path);
	free(st);
}

int ds_store_stmt_new(ds_store *st, const char *sql, ds_store_stmt **out, ds_err *err)
{
	ds_store_stmt *h = calloc(1, sizeof(*h));
	int rc;

	if (!h)
		return ds_err_fallback(err, -ENOMEM);
	rc = sqlite3_prepare_v3(st->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &h->q, NULL);
	if (rc != SQLITE_OK) {
		free(h);
		return ds_store_fail(st, rc, sql, err);
	}
	h->next = st->stmts;
	st->stmts = h;
	*out = h;
	return 0;
}

int ds_store_stmt_lazy(ds_store *st, ds_store_stmt **slot, const char *sql, sqlite3_stmt **q,
		       ds_err *err)
{
	if (!*slot) {
		int rc = ds_store_stmt_new(st, sql, slot, err);

		if (rc < 0)
			return rc;
	}
	*q = ds_store_stmt_use(*slot);
	return 0;
}

int ds_store_prepare(ds_store *st, const char *sql, sqlite3_stmt **q, ds_err *err)
{
	int rc = sqlite3_prepare_v2(st->db, sql, -1, q, NULL);

	return rc == SQLITE_OK ? 0 : ds_store_fail(st, rc, sql, err);
}

sqlite3_stmt *ds_store_stmt_use(ds_store_stmt *h)
{
	sqlite3_reset(h->q);
	sqlite3_clear_bindings(h->q);
	return h->q;
}

void ds_store_stmt_done(ds_store_stmt *h)
{
	if (h)
		sqlite3_reset(h->q);
}

int ds_store_check(const char *path, ds_err *err)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *q = NULL;
	struct stat sb;
	int rc;

	if (stat(path, &sb) < 0 && errno == ENOENT)
		return 0; /* none yet: it is created */
	rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_busy_timeout(db, DS_STORE_BUSY_MS);
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
		rc = map_rc(rc);
	}
	sqlite3_finalize(q);
	sqlite3_close(db);
	return rc;
}
