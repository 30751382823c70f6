#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/store.h"
#include "drasync/version.h"
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A schema of three versions; the tests open a file with the first one, two or three. */
static const ds_store_migration steps[] = {
    {1, "t", "CREATE TABLE t(k INTEGER PRIMARY KEY, v BLOB);"},
    {2, "u", "CREATE TABLE u(k TEXT PRIMARY KEY); INSERT INTO u VALUES('two');"},
    {3, "t.w", "ALTER TABLE t ADD COLUMN w TEXT NOT NULL DEFAULT 'three';"},
};

static const ds_store_schema v1 = {"test", steps, 1, false};
static const ds_store_schema v2 = {"test", steps, 2, false};
static const ds_store_schema v3 = {"test", steps, 3, false};

static char *tmp_path(char *path, size_t size, const char *name)
{
	char *dir = tu_mkdtemp("store");

	snprintf(path, size, "%s/%s", dir, name);
	free(dir);
	return path;
}

/* What `sql` gives as one integer, read with plain SQLite (not through the store). */
static long long scalar(const char *path, const char *sql)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *q = NULL;
	long long v = -1;

	assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK)
		fail_msg("%s: %s", sql, sqlite3_errmsg(db));
	if (sqlite3_step(q) == SQLITE_ROW)
		v = sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	sqlite3_close(db);
	return v;
}

/* A database of several 32 KiB pages at dir/name, closed (checkpointed, no WAL left). */
static void make_db(char *path, size_t size, const char *name)
{
	ds_store *st = NULL;
	ds_err err = {0};

	tmp_path(path, size, name);
	assert_int_equal(ds_store_open(&st, path, &v1, 0, &err), 0);
	assert_int_equal(ds_store_exec(st,
				       "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 "
				       "FROM c WHERE i < 2000) INSERT INTO t SELECT i, "
				       "randomblob(300) FROM c;"
				       "CREATE INDEX tv ON t(v);",
				       &err),
			 0);
	ds_store_free(st);
}

/* Overwrite len bytes at off with a pattern. */
static void scribble(const char *path, off_t off, size_t len)
{
	char junk[512];
	int fd = open(path, O_WRONLY);

	assert_true(fd >= 0 && len <= sizeof(junk));
	memset(junk, 0x5a, len);
	assert_int_equal(pwrite(fd, junk, len, off), (ssize_t)len);
	close(fd);
}

static off_t file_size(const char *path)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	return st.st_size;
}

static void test_store__check_accepts_a_sound_file_and_none(void **state)
{
	char path[1100], missing[1200];
	ds_err err = {0};

	(void)state;
	make_db(path, sizeof(path), "ledger.db");
	assert_int_equal(ds_store_check(path, &err), 0);
	snprintf(missing, sizeof(missing), "%s.none", path);
	assert_int_equal(ds_store_check(missing, &err), 0);
	/* Checking creates nothing. */
	assert_int_equal(access(missing, F_OK), -1);
}

static void test_store__check_names_a_file_that_is_not_a_database(void **state)
{
	char path[1100];
	ds_err err = {0};

	(void)state;
	make_db(path, sizeof(path), "outbox.db");
	scribble(path, 0, 16); /* the header's magic string */
	assert_int_equal(ds_store_check(path, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, path));
	assert_non_null(strstr(err.msg, "is damaged"));
}

static void test_store__check_finds_a_truncated_file(void **state)
{
	char path[1100];
	ds_err err = {0};

	(void)state;
	make_db(path, sizeof(path), "ledger.db");
	assert_int_equal(truncate(path, file_size(path) / 2 + 1000), 0);
	assert_int_equal(ds_store_check(path, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, path));
	assert_non_null(strstr(err.msg, "is damaged"));
}

static void test_store__check_finds_a_damaged_page(void **state)
{
	char path[1100];
	ds_err err = {0};

	(void)state;
	make_db(path, sizeof(path), "ledger.db");
	scribble(path, 32768, 200); /* page 2's b-tree header */
	assert_int_equal(ds_store_check(path, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, path));
}

static void test_store__fail_names_the_file_first(void **state)
{
	char path[1100];
	ds_store *st = NULL;
	ds_err err = {0};

	(void)state;
	make_db(path, sizeof(path), "ledger.db");
	assert_int_equal(ds_store_open(&st, path, &v1, 0, &err), 0);
	assert_int_equal(ds_store_exec(st, "INSERT INTO nosuch VALUES(1)", &err), -EIO);
	assert_int_equal(strncmp(err.msg, path, strlen(path)), 0);
	assert_non_null(strstr(err.msg, "no such table"));
	ds_store_free(st);
}

static void test_store__a_new_file_is_at_the_newest_version(void **state)
{
	char path[1100];
	ds_store *st = NULL;
	ds_err err = {0};

	(void)state;
	tmp_path(path, sizeof(path), "new.db");
	assert_int_equal(ds_store_open(&st, path, &v3, 0, &err), 0);
	assert_int_equal(ds_store_version(st), 3);
	ds_store_free(st);
	assert_int_equal(scalar(path, "PRAGMA user_version"), 3);
	assert_int_equal(scalar(path, "SELECT count(*) FROM u"), 1);
	assert_int_equal(scalar(path, "PRAGMA page_size"), 32768);
	/* store_info is not in this schema: the store adds no table of its own. */
	assert_int_equal(
	    scalar(path, "SELECT count(*) FROM sqlite_master WHERE name = 'store_info'"), 0);
}

static void test_store__migrates_in_order_and_keeps_the_rows(void **state)
{
	char path[1100];
	ds_store *st = NULL;
	ds_err err = {0};

	(void)state;
	make_db(path, sizeof(path), "old.db"); /* version 1 with 2,000 rows */
	assert_int_equal(scalar(path, "PRAGMA user_version"), 1);
	assert_int_equal(ds_store_open(&st, path, &v2, 0, &err), 0);
	assert_int_equal(ds_store_version(st), 2);
	ds_store_free(st);
	assert_int_equal(ds_store_open(&st, path, &v3, 0, &err), 0);
	assert_int_equal(ds_store_version(st), 3);
	ds_store_free(st);
	assert_int_equal(scalar(path, "PRAGMA user_version"), 3);
	assert_int_equal(scalar(path, "SELECT count(*) FROM t WHERE w = 'three'"), 2000);
	assert_int_equal(scalar(path, "SELECT count(*) FROM u"), 1);
}

static void test_store__a_failed_migration_changes_nothing(void **state)
{
	static const ds_store_migration bad[] = {
	    {1, "t", "CREATE TABLE t(k INTEGER PRIMARY KEY, v BLOB);"},
	    {2, "u", "CREATE TABLE u(k TEXT PRIMARY KEY);"},
	    {3, "a typo", "ALTER TABLE nosuch ADD COLUMN w TEXT;"},
	};
	static const ds_store_schema bad3 = {"test", bad, 3, false};
	char path[1100];
	ds_store *st = NULL;
	ds_err err = {0};

	(void)state;
	make_db(path, sizeof(path), "old.db");
	assert_int_equal(ds_store_open(&st, path, &bad3, 0, &err), -EIO);
	assert_null(st);
	assert_non_null(strstr(err.msg, path));
	assert_non_null(strstr(err.msg, "test schema version 3: a typo"));
	/* Step 2 ran in the same transaction as the failed step 3: rolled back too. */
	assert_int_equal(scalar(path, "PRAGMA user_version"), 1);
	assert_int_equal(scalar(path, "SELECT count(*) FROM sqlite_master WHERE name = 'u'"), 0);
}

static void test_store__a_newer_file_is_refused_naming_its_writer(void **state)
{
	char path[1100], want[200];
	ds_store *st = NULL;
	ds_err err = {0};
	static const ds_store_migration info[] = {
	    {1, "t", "CREATE TABLE t(k INTEGER PRIMARY KEY);"},
	    {2, "store_info",
	     "CREATE TABLE store_info(key TEXT PRIMARY KEY, value TEXT NOT NULL);"},
	    {3, "x", "CREATE TABLE x(k INTEGER);"},
	};
	static const ds_store_schema info2 = {"test", info, 2, false},
				     info3 = {"test", info, 3, false};

	(void)state;
	tmp_path(path, sizeof(path), "newer.db");
	assert_int_equal(ds_store_open(&st, path, &info3, 0, &err), 0);
	ds_store_free(st);
	st = NULL;
	/* This drasync knows only versions 1 and 2. */
	assert_int_equal(ds_store_open(&st, path, &info2, 0, &err), -EPROTONOSUPPORT);
	assert_null(st);
	assert_non_null(strstr(err.msg, path));
	assert_non_null(strstr(err.msg, "schema version 3"));
	snprintf(want, sizeof(want), "written by drasync %s", DS_VERSION);
	assert_non_null(strstr(err.msg, want));
	assert_non_null(strstr(err.msg, "up to 2"));
	/* A reader refuses it too, and the refusal changed nothing. */
	assert_int_equal(ds_store_open(&st, path, &info2, DS_STORE_READONLY, &err),
			 -EPROTONOSUPPORT);
	assert_int_equal(scalar(path, "PRAGMA user_version"), 3);
}

static void test_store__a_file_of_another_kind_is_refused(void **state)
{
	static const ds_store_migration info[] = {
	    {1, "store_info",
	     "CREATE TABLE store_info(key TEXT PRIMARY KEY, value TEXT NOT NULL);"},
	};
	static const ds_store_schema outbox = {"outbox", info, 1, false},
				     ledger = {"ledger", info, 1, false};
	char path[1100];
	ds_store *st = NULL;
	ds_err err = {0};

	(void)state;
	tmp_path(path, sizeof(path), "outbox.db");
	assert_int_equal(ds_store_open(&st, path, &outbox, 0, &err), 0);
	ds_store_free(st);
	assert_int_equal(ds_store_open(&st, path, &ledger, 0, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "is a drasync outbox file where the ledger was expected"));
}

static void test_store__readonly_neither_creates_nor_migrates(void **state)
{
	char path[1100], missing[1200];
	ds_store *st = NULL;
	ds_err err = {0};

	(void)state;
	make_db(path, sizeof(path), "old.db");
	snprintf(missing, sizeof(missing), "%s.none", path);
	assert_int_equal(ds_store_open(&st, missing, &v3, DS_STORE_READONLY, &err), -ENOENT);
	assert_int_equal(access(missing, F_OK), -1);
	assert_non_null(strstr(err.msg, missing));
	assert_int_equal(ds_store_open(&st, path, &v3, DS_STORE_READONLY, &err), 0);
	assert_int_equal(ds_store_version(st), 1); /* read as it is */
	assert_true(ds_store_has_table(st, "t"));
	assert_false(ds_store_has_table(st, "u"));
	/* A write fails: the connection is read only. */
	assert_int_equal(ds_store_exec(st, "DELETE FROM t", &err), -EACCES);
	ds_store_free(st);
	assert_int_equal(scalar(path, "PRAGMA user_version"), 1);
	assert_int_equal(scalar(path, "SELECT count(*) FROM t"), 2000);
	/* MUST_EXIST: a missing file is not created, an existing one is written and migrated. */
	assert_int_equal(ds_store_open(&st, missing, &v3, DS_STORE_MUST_EXIST, &err), -ENOENT);
	assert_int_equal(access(missing, F_OK), -1);
	assert_int_equal(ds_store_open(&st, path, &v3, DS_STORE_MUST_EXIST, &err), 0);
	assert_int_equal(ds_store_exec(st, "DELETE FROM t WHERE k = 1", &err), 0);
	ds_store_free(st);
	assert_int_equal(scalar(path, "PRAGMA user_version"), 3);
}

static void test_store__statement_handles(void **state)
{
	char path[1100];
	ds_store *st = NULL;
	ds_store_stmt *ins = NULL, *cnt = NULL;
	sqlite3_stmt *q;
	ds_err err = {0};

	(void)state;
	tmp_path(path, sizeof(path), "stmt.db");
	assert_int_equal(ds_store_open(&st, path, &v1, 0, &err), 0);
	assert_int_equal(ds_store_stmt_new(st, "INSERT INTO t(k, v) VALUES(?, ?)", &ins, &err), 0);
	assert_int_equal(ds_store_stmt_new(st, "SELECT count(*) FROM t", &cnt, &err), 0);
	assert_int_equal(ds_store_stmt_new(st, "SELECT nosuch FROM t", &cnt, &err), -EIO);
	assert_non_null(strstr(err.msg, "no such column"));
	assert_non_null(cnt); /* the failed call left it alone */
	for (int i = 1; i <= 3; i++) {
		q = ds_store_stmt_use(ins);
		sqlite3_bind_int(q, 1, i);
		/* v left unbound: use() cleared the last row's binding, so it is NULL */
		if (i == 1)
			sqlite3_bind_text(q, 2, "x", -1, SQLITE_STATIC);
		assert_int_equal(sqlite3_step(q), SQLITE_DONE);
		ds_store_stmt_done(ins);
	}
	q = ds_store_stmt_use(cnt);
	assert_int_equal(sqlite3_step(q), SQLITE_ROW);
	assert_int_equal(sqlite3_column_int(q, 0), 3);
	ds_store_stmt_done(cnt);
	ds_store_free(st); /* finalizes both: ASan finds a leak otherwise */
	assert_int_equal(scalar(path, "SELECT count(*) FROM t WHERE v IS NULL"), 2);
}

/* A burst larger than DS_STORE_WAL_LIMIT grows the -wal; once checkpointed, the next write
 * starts the log over and cuts the file back to the limit. */
static void test_store__wal_cut_back_after_a_burst(void **state)
{
	char path[1100], wal[1200];
	ds_store *st = NULL;
	ds_store_stmt *ins = NULL;
	sqlite3_stmt *q;
	struct stat sb;
	static char blob[64 * 1024];
	ds_err err = {0};

	(void)state;
	tmp_path(path, sizeof(path), "wal.db");
	snprintf(wal, sizeof(wal), "%s-wal", path);
	assert_int_equal(ds_store_open(&st, path, &v1, 0, &err), 0);
	assert_int_equal(ds_store_exec(st, "PRAGMA wal_autocheckpoint=0", &err), 0);
	assert_int_equal(ds_store_stmt_new(st, "INSERT INTO t(k, v) VALUES(?, ?)", &ins, &err), 0);
	assert_int_equal(ds_store_exec(st, "BEGIN", &err), 0);
	for (int i = 1; i <= 3 * DS_STORE_WAL_LIMIT / (int)sizeof(blob); i++) {
		q = ds_store_stmt_use(ins);
		sqlite3_bind_int(q, 1, i);
		sqlite3_bind_blob(q, 2, blob, sizeof(blob), SQLITE_STATIC);
		assert_int_equal(sqlite3_step(q), SQLITE_DONE);
		ds_store_stmt_done(ins);
	}
	assert_int_equal(ds_store_exec(st, "COMMIT", &err), 0);
	assert_int_equal(stat(wal, &sb), 0);
	assert_true(sb.st_size > 2 * DS_STORE_WAL_LIMIT);
	assert_int_equal(ds_store_exec(st, "PRAGMA wal_checkpoint(PASSIVE)", &err), 0);
	assert_int_equal(ds_store_exec(st, "DELETE FROM t WHERE k = 1", &err), 0);
	assert_int_equal(stat(wal, &sb), 0);
	assert_true(sb.st_size <= DS_STORE_WAL_LIMIT);
	ds_store_free(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_store__check_accepts_a_sound_file_and_none),
	    cmocka_unit_test(test_store__check_names_a_file_that_is_not_a_database),
	    cmocka_unit_test(test_store__check_finds_a_truncated_file),
	    cmocka_unit_test(test_store__check_finds_a_damaged_page),
	    cmocka_unit_test(test_store__fail_names_the_file_first),
	    cmocka_unit_test(test_store__a_new_file_is_at_the_newest_version),
	    cmocka_unit_test(test_store__migrates_in_order_and_keeps_the_rows),
	    cmocka_unit_test(test_store__a_failed_migration_changes_nothing),
	    cmocka_unit_test(test_store__a_newer_file_is_refused_naming_its_writer),
	    cmocka_unit_test(test_store__a_file_of_another_kind_is_refused),
	    cmocka_unit_test(test_store__readonly_neither_creates_nor_migrates),
	    cmocka_unit_test(test_store__statement_handles),
	    cmocka_unit_test(test_store__wal_cut_back_after_a_burst),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
