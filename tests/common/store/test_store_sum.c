/*
 * ds_store_sum_by_source: per-source sums counted in C as the rows stream
 * equal SQL's GROUP BY of the same rows, with more sources than it counts at
 * once (16), interleaved, and fn told a source more than once where so.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/store_sum.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#define SOURCES 40

struct sums {
	char name[SOURCES + 1][300];
	uint64_t n[SOURCES + 1];
	int used, calls, fail_at;
};

static int add(void *ud, const char *source, uint64_t n)
{
	struct sums *s = ud;
	int i = 0;

	if (s->fail_at && ++s->calls == s->fail_at)
		return -EIO;
	while (i < s->used && strcmp(s->name[i], source) != 0)
		i++;
	if (i == s->used) {
		assert_true(s->used <= SOURCES);
		snprintf(s->name[s->used++], sizeof(s->name[0]), "%s", source);
	}
	s->n[i] += n;
	return 0;
}

static sqlite3 *db_with_rows(int sources, int rows)
{
	sqlite3 *db = NULL;
	char sql[300];

	assert_int_equal(sqlite3_open(":memory:", &db), SQLITE_OK);
	assert_int_equal(
	    sqlite3_exec(db, "CREATE TABLE r(id INTEGER PRIMARY KEY, source TEXT, len INTEGER)",
			 NULL, NULL, NULL),
	    SQLITE_OK);
	for (int i = 0; i < rows; i++) {
		/* interleaved: each source's rows far apart, as records of many sessions */
		snprintf(sql, sizeof(sql), "INSERT INTO r(source, len) VALUES('src-%02d', %d)",
			 (i * 7) % sources, i % 13 + 1);
		assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
	}
	return db;
}

/* GROUP BY's answer for source, column col ("count(*)" or "sum(len)"). */
static uint64_t grouped(sqlite3 *db, const char *what, const char *source)
{
	sqlite3_stmt *q = NULL;
	char sql[200];
	uint64_t n = 0;

	snprintf(sql, sizeof(sql), "SELECT %s FROM r WHERE source = ?", what);
	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &q, NULL), SQLITE_OK);
	sqlite3_bind_text(q, 1, source, -1, SQLITE_STATIC);
	if (sqlite3_step(q) == SQLITE_ROW)
		n = (uint64_t)sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	return n;
}

static void check(int sources, const char *select, const char *what)
{
	sqlite3 *db = db_with_rows(sources, 1000);
	sqlite3_stmt *q = NULL;
	static struct sums s;

	memset(&s, 0, sizeof(s));
	assert_int_equal(sqlite3_prepare_v2(db, select, -1, &q, NULL), SQLITE_OK);
	assert_int_equal(ds_store_sum_by_source(q, add, &s), SQLITE_DONE);
	sqlite3_finalize(q);
	assert_int_equal(s.used, sources);
	for (int i = 0; i < s.used; i++)
		assert_int_equal(s.n[i], grouped(db, what, s.name[i]));
	sqlite3_close(db);
}

static void test_store_sum__counts_equal_group_by_with_few_sources(void **state)
{
	(void)state;
	check(3, "SELECT source FROM r", "count(*)");
	check(3, "SELECT source, len FROM r", "sum(len)");
}

static void test_store_sum__counts_equal_group_by_past_its_counters(void **state)
{
	(void)state;
	check(SOURCES, "SELECT source FROM r", "count(*)");
	check(SOURCES, "SELECT source, len FROM r", "sum(len)");
}

static void test_store_sum__fn_failure_stops_with_its_value(void **state)
{
	sqlite3 *db = db_with_rows(SOURCES, 200);
	sqlite3_stmt *q = NULL;
	static struct sums s;

	(void)state;
	memset(&s, 0, sizeof(s));
	s.fail_at = 2;
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT source FROM r", -1, &q, NULL), SQLITE_OK);
	assert_int_equal(ds_store_sum_by_source(q, add, &s), -EIO);
	sqlite3_finalize(q);
	sqlite3_close(db);
}

static void test_store_sum__no_rows_tells_nothing(void **state)
{
	sqlite3 *db = db_with_rows(1, 0);
	sqlite3_stmt *q = NULL;
	static struct sums s;

	(void)state;
	memset(&s, 0, sizeof(s));
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT source FROM r", -1, &q, NULL), SQLITE_OK);
	assert_int_equal(ds_store_sum_by_source(q, add, &s), SQLITE_DONE);
	assert_int_equal(s.used, 0);
	sqlite3_finalize(q);
	sqlite3_close(db);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_store_sum__counts_equal_group_by_with_few_sources),
	    cmocka_unit_test(test_store_sum__counts_equal_group_by_past_its_counters),
	    cmocka_unit_test(test_store_sum__fn_failure_stops_with_its_value),
	    cmocka_unit_test(test_store_sum__no_rows_tells_nothing),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
