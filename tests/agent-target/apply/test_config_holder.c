/* The running importer's configuration across reloads: each replaced one is freed once its users
 * let go. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/config_holder.h"
#include "drasync/target_config.h"

#include <stdlib.h>

#define N_RELOADS 50

static ds_target_config *empty(void)
{
	ds_target_config *cfg = NULL;

	assert_int_equal(ds_target_config_new_empty(&cfg), 0);
	return cfg;
}

/*
 * N reloads, each handed to the applier at pass i; a verifier-like user holds
 * the first configuration throughout. The test keeps a reference to every
 * configuration to watch its count: 1 means only the test's is left.
 */
static void test_config_holder__reloads_free_each_old_config_once_its_users_are_done(void **state)
{
	ds_target_config *watch[N_RELOADS + 1], *cfg = empty(), *user;
	ds_config_holder *h = NULL;

	(void)state;
	watch[0] = ds_target_config_ref(cfg);
	assert_int_equal(ds_config_holder_new(&h, &cfg), 0);
	assert_null(cfg);
	user = ds_config_holder_get(h); /* the verifier's, across the reloads */
	assert_ptr_equal(user, watch[0]);
	assert_int_equal(ds_target_config_refs(watch[0]), 3);
	for (uint64_t i = 1; i <= N_RELOADS; i++) {
		cfg = empty();
		watch[i] = ds_target_config_ref(cfg);
		assert_int_equal(ds_config_holder_set(h, &cfg), 0);
		assert_null(cfg);
		assert_ptr_equal(ds_config_holder_peek(h), watch[i]);
		/* Not handed to the applier yet: the one replaced is kept, whatever the passes. */
		assert_int_equal(ds_config_holder_passed(h, UINT64_MAX - 1), 1);
		assert_int_equal(ds_target_config_refs(watch[i - 1]), i == 1 ? 3 : 2);
		ds_config_holder_handed(h, 10 * i);
		/* The pass in flight at the reload may still read the old rules. */
		assert_int_equal(ds_config_holder_passed(h, 10 * i), 1);
		assert_int_equal(ds_target_config_refs(watch[i - 1]), i == 1 ? 3 : 2);
		/* The next pass took the new ones: the holder lets the old one go. */
		assert_int_equal(ds_config_holder_passed(h, 10 * i + 1), 0);
		assert_int_equal(ds_target_config_refs(watch[i - 1]), i == 1 ? 2 : 1);
	}
	/* The first one lives as long as its user. */
	ds_target_config_unref(user);
	assert_int_equal(ds_target_config_refs(watch[0]), 1);
	/* The one in force: the holder's and the test's. */
	assert_int_equal(ds_target_config_refs(watch[N_RELOADS]), 2);
	ds_config_holder_free(h);
	assert_int_equal(ds_target_config_refs(watch[N_RELOADS]), 1);
	/* Only the test's references are left: dropping them frees all (ASan: no leak). */
	for (size_t i = 0; i <= N_RELOADS; i++)
		ds_target_config_unref(watch[i]);
}

/* Reloads faster than the applier's passes: each is kept until a pass beyond its reload began. */
static void test_config_holder__reloads_within_one_pass_wait_for_the_next(void **state)
{
	ds_target_config *watch[3], *cfg = empty();
	ds_config_holder *h = NULL;

	(void)state;
	watch[0] = ds_target_config_ref(cfg);
	assert_int_equal(ds_config_holder_new(&h, &cfg), 0);
	for (size_t i = 1; i < 3; i++) {
		cfg = empty();
		watch[i] = ds_target_config_ref(cfg);
		assert_int_equal(ds_config_holder_set(h, &cfg), 0);
		ds_config_holder_handed(h, 7); /* both while pass 7 ran */
	}
	assert_int_equal(ds_config_holder_passed(h, 7), 2);
	assert_int_equal(ds_target_config_refs(watch[0]), 2);
	assert_int_equal(ds_target_config_refs(watch[1]), 2);
	assert_int_equal(ds_config_holder_passed(h, 8), 0);
	assert_int_equal(ds_target_config_refs(watch[0]), 1);
	assert_int_equal(ds_target_config_refs(watch[1]), 1);
	ds_target_config_unref(watch[0]);
	ds_target_config_unref(watch[1]);
	/* Freed with the holder when the applier never passed again (stop). */
	cfg = empty();
	watch[0] = ds_target_config_ref(cfg);
	assert_int_equal(ds_config_holder_set(h, &cfg), 0);
	ds_config_holder_free(h);
	assert_int_equal(ds_target_config_refs(watch[0]), 1);
	assert_int_equal(ds_target_config_refs(watch[2]), 1);
	ds_target_config_unref(watch[0]);
	ds_target_config_unref(watch[2]);
}

static void test_config_holder__ref_and_unref_are_null_safe(void **state)
{
	(void)state;
	assert_null(ds_target_config_ref(NULL));
	ds_target_config_unref(NULL);
	assert_int_equal(ds_target_config_refs(NULL), 0);
	ds_config_holder_free(NULL);
}

/* The applier's events ask before any reload: nothing to let go of (UBSan: no memmove of NULL). */
static void test_config_holder__passes_before_any_reload(void **state)
{
	ds_target_config *cfg = empty(), *watch = ds_target_config_ref(cfg);
	ds_config_holder *h = NULL;

	(void)state;
	assert_int_equal(ds_config_holder_new(&h, &cfg), 0);
	assert_int_equal(ds_config_holder_passed(h, 1), 0);
	assert_int_equal(ds_config_holder_passed(h, 2), 0);
	assert_int_equal(ds_target_config_refs(watch), 2);
	ds_config_holder_free(h);
	assert_int_equal(ds_target_config_refs(watch), 1);
	ds_target_config_unref(watch);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(
		test_config_holder__reloads_free_each_old_config_once_its_users_are_done),
	    cmocka_unit_test(test_config_holder__reloads_within_one_pass_wait_for_the_next),
	    cmocka_unit_test(test_config_holder__ref_and_unref_are_null_safe),
	    cmocka_unit_test(test_config_holder__passes_before_any_reload),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
