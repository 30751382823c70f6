/*
 * The per-namespace mode in a real ledger file: what failover and failback
 * record, read back by another connection as a running importer would.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/namespace_mode.h"
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char *ledger_in(const char *prefix)
{
	char *dir = tu_mkdtemp(prefix), *path;

	assert_true(asprintf(&path, "%s/ledger.db", dir) > 0);
	free(dir);
	return path;
}

static void test_namespace_mode__unset_then_set_get_and_unchanged(void **state)
{
	char *path = ledger_in("nsmode-set");
	ds_namespace_modes *a = NULL, *b = NULL;
	ds_namespace_mode *rows = NULL;
	enum ds_mode m = DS_MODE_MAX;
	size_t n = 9;
	ds_err err = {0};
	time_t t0 = time(NULL);

	(void)state;
	assert_int_equal(ds_namespace_modes_open(&a, path, &err), 0);
	/* Nothing recorded: the configuration's mode applies (0, *mode untouched). */
	assert_int_equal(ds_namespace_modes_get(a, "ml-dr", &m, &err), 0);
	assert_int_equal(m, DS_MODE_MAX);
	assert_int_equal(ds_namespace_modes_list(a, &rows, &n, &err), 0);
	assert_int_equal(n, 0);
	ds_namespace_mode_list_free(rows, n);

	assert_int_equal(ds_namespace_modes_set(a, "ml-dr", DS_MODE_MIGRATE, "failover", &err), 1);
	/* The same mode again is no change, and keeps who set it. */
	assert_int_equal(ds_namespace_modes_set(a, "ml-dr", DS_MODE_MIGRATE, "other", &err), 0);

	/* Another connection (the running importer) reads it. */
	assert_int_equal(ds_namespace_modes_open(&b, path, &err), 0);
	assert_int_equal(ds_namespace_modes_get(b, "ml-dr", &m, &err), 1);
	assert_int_equal(m, DS_MODE_MIGRATE);
	assert_int_equal(ds_namespace_modes_list(b, &rows, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(rows[0].ns, "ml-dr");
	assert_int_equal(rows[0].mode, DS_MODE_MIGRATE);
	assert_string_equal(rows[0].changed_by, "failover");
	assert_true(rows[0].since >= t0 && rows[0].since <= time(NULL));
	ds_namespace_mode_list_free(rows, n);

	/* Failback: standby, by failback. */
	assert_int_equal(ds_namespace_modes_set(a, "ml-dr", DS_MODE_STANDBY, "failback", &err), 1);
	assert_int_equal(ds_namespace_modes_get(b, "ml-dr", &m, &err), 1);
	assert_int_equal(m, DS_MODE_STANDBY);
	assert_int_equal(ds_namespace_modes_list(b, &rows, &n, &err), 0);
	assert_string_equal(rows[0].changed_by, "failback");
	ds_namespace_mode_list_free(rows, n);

	/* Bad arguments are refused with a reason. */
	assert_int_equal(ds_namespace_modes_set(a, "", DS_MODE_STANDBY, "x", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "namespace"));
	ds_namespace_modes_free(a);
	ds_namespace_modes_free(b);
	free(path);
}

static void test_namespace_mode__list_sorted_and_mode_of_falls_back(void **state)
{
	char *path = ledger_in("nsmode-list");
	const char *names[] = {"web-dr", "ml-dr", "batch-dr", "zeta", "a"};
	ds_namespace_modes *nm = NULL;
	ds_namespace_mode *rows = NULL;
	size_t n = 0;
	ds_err err = {0};

	(void)state;
	assert_int_equal(ds_namespace_modes_open(&nm, path, &err), 0);
	for (size_t i = 0; i < 5; i++)
		assert_int_equal(ds_namespace_modes_set(nm, names[i],
							i % 2 ? DS_MODE_STANDBY : DS_MODE_MIGRATE,
							"failover", &err),
				 1);
	assert_int_equal(ds_namespace_modes_list(nm, &rows, &n, &err), 0);
	assert_int_equal(n, 5);
	for (size_t i = 1; i < n; i++)
		assert_true(strcmp(rows[i - 1].ns, rows[i].ns) < 0);
	/* Every recorded namespace answers its mode; the others, and cluster-scoped, the default.
	 */
	assert_int_equal(ds_namespace_mode_of(rows, n, "web-dr", DS_MODE_STANDBY), DS_MODE_MIGRATE);
	assert_int_equal(ds_namespace_mode_of(rows, n, "ml-dr", DS_MODE_MIGRATE), DS_MODE_STANDBY);
	assert_int_equal(ds_namespace_mode_of(rows, n, "a", DS_MODE_STANDBY), DS_MODE_MIGRATE);
	assert_int_equal(ds_namespace_mode_of(rows, n, "zeta", DS_MODE_MIGRATE), DS_MODE_STANDBY);
	assert_int_equal(ds_namespace_mode_of(rows, n, "batch-dr", DS_MODE_STANDBY),
			 DS_MODE_MIGRATE);
	assert_int_equal(ds_namespace_mode_of(rows, n, "ml", DS_MODE_STANDBY), DS_MODE_STANDBY);
	assert_int_equal(ds_namespace_mode_of(rows, n, NULL, DS_MODE_STANDBY), DS_MODE_STANDBY);
	assert_int_equal(ds_namespace_mode_of(NULL, 0, "ml-dr", DS_MODE_MIGRATE), DS_MODE_MIGRATE);
	assert_string_equal(ds_namespace_mode_word(DS_MODE_MIGRATE), "active");
	assert_string_equal(ds_namespace_mode_word(DS_MODE_STANDBY), "standby");
	ds_namespace_mode_list_free(rows, n);
	ds_namespace_modes_free(nm);

	/* It survives reopening the file. */
	assert_int_equal(ds_namespace_modes_open(&nm, path, &err), 0);
	assert_int_equal(ds_namespace_modes_list(nm, &rows, &n, &err), 0);
	assert_int_equal(n, 5);
	ds_namespace_mode_list_free(rows, n);
	ds_namespace_modes_free(nm);
	free(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_namespace_mode__unset_then_set_get_and_unchanged),
	    cmocka_unit_test(test_namespace_mode__list_sorted_and_mode_of_falls_back),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
