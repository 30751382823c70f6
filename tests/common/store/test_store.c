#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/sqlite_util.h"
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A database of several 32 KiB pages at dir/name, closed (checkpointed, no WAL left). */
static void make_db(char *path, size_t size, const char *name)
{
	char *dir = tu_mkdtemp("sqlite-util");
	sqlite3 *db = NULL;
	ds_err err = {0};

	snprintf(path, size, "%s/%s", dir, name);
	free(dir);
	assert_int_equal(ds_sqlite_open(&db, path, &err), 0);
	assert_int_equal(ds_sqlite_exec(db,
					"CREATE TABLE t(k INTEGER PRIMARY KEY, v BLOB);"
					"WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 "
					"FROM c WHERE i < 2000) INSERT INTO t SELECT i, "
					"randomblob(300) FROM c;"
					"CREATE INDEX tv ON t(v);",
					&err),
			 0);
	sqlite3_close(db);
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

static void test_sqlite_util__check_accepts_a_sound_file_and_none(void **state)
{
	char path[1100], missing[1200];
	ds_err err = {0};

	(void)state;
	make_db(path, sizeof(path), "ledger.db");
	assert_int_equal(ds_sqlite_check(path, &err), 0);
	snprintf(missing, sizeof(missing), "%s.none", path);
	assert_int_equal(ds_sqlite_check(missing, &err), 0);
	/* Checking creates nothing. */
	assert_int_equal(access(missing, F_OK), -1);
}

static void test_sqlite_util__check_names_a_file_that_is_not_a_database(void **state)
{
	char path[1100];
	ds_err err = {0};

	(void)state;
	make_db(path, sizeof(path), "outbox.db");
	scribble(path, 0, 16); /* the header's magic string */
	assert_int_equal(ds_sqlite_check(path, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, path));
	assert_non_null(strstr(err.msg, "is damaged"));
}

static void test_sqlite_util__check_finds_a_truncated_file(void **state)
{
	char path[1100];
	ds_err err = {0};

	(void)state;
	make_db(path, sizeof(path), "ledger.db");
	assert_int_equal(truncate(path, file_size(path) / 2 + 1000), 0);
	assert_int_equal(ds_sqlite_check(path, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, path));
	assert_non_null(strstr(err.msg, "is damaged"));
}

static void test_sqlite_util__check_finds_a_damaged_page(void **state)
{
	char path[1100];
	ds_err err = {0};

	(void)state;
	make_db(path, sizeof(path), "ledger.db");
	scribble(path, 32768, 200); /* page 2's b-tree header */
	assert_int_equal(ds_sqlite_check(path, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, path));
}

static void test_sqlite_util__fail_names_the_file_first(void **state)
{
	char path[1100];
	sqlite3 *db = NULL;
	ds_err err = {0};

	(void)state;
	make_db(path, sizeof(path), "ledger.db");
	assert_int_equal(ds_sqlite_open(&db, path, &err), 0);
	assert_int_equal(ds_sqlite_exec(db, "INSERT INTO nosuch VALUES(1)", &err), -EIO);
	assert_int_equal(strncmp(err.msg, path, strlen(path)), 0);
	assert_non_null(strstr(err.msg, "no such table"));
	sqlite3_close(db);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sqlite_util__check_accepts_a_sound_file_and_none),
	    cmocka_unit_test(test_sqlite_util__check_names_a_file_that_is_not_a_database),
	    cmocka_unit_test(test_sqlite_util__check_finds_a_truncated_file),
	    cmocka_unit_test(test_sqlite_util__check_finds_a_damaged_page),
	    cmocka_unit_test(test_sqlite_util__fail_names_the_file_first),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
