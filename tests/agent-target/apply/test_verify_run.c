/*
 * verify's command-side decisions (verify_run.h), no cluster: which
 * --namespace holds no workload, and the report -o json prints.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/verify_run.h"

#include <jansson.h>
#include <string.h>

/* Three workloads in two namespaces, ordered by namespace as the ledger gives them. */
static void items_new(ds_verify_item *items)
{
	assert_int_equal(ds_verify_item_init(&items[0], "Deployment", "ml-dr", "trainer",
					     DS_VERIFY_ACTIVE, false),
			 0);
	assert_int_equal(
	    ds_verify_item_init(&items[1], "Job", "ml-dr", "warmup", DS_VERIFY_ACTIVE, false), 0);
	assert_int_equal(ds_verify_item_init(&items[2], "CronJob", "web-dr", "nightly",
					     DS_VERIFY_STANDBY, false),
			 0);
}

static void items_dispose(ds_verify_item *items)
{
	for (size_t i = 0; i < 3; i++)
		ds_verify_item_dispose(&items[i]);
}

static void test_verify_run__missing_names_the_namespaces_with_workloads(void **state)
{
	const char *const asked[] = {"ml-dr", "ml-typo", "web-dr", "db-dr"};
	ds_verify_item items[3];
	json_t *lines = NULL;

	(void)state;
	items_new(items);
	assert_int_equal(ds_verify_run_missing(items, 3, asked, 4, &lines), 2);
	assert_int_equal(json_array_size(lines), 2);
	assert_string_equal(json_string_value(json_array_get(lines, 0)),
			    "the ledger has no workload in namespace ml-typo (name the target "
			    "namespace, after namespaceMappings); namespaces with workloads: "
			    "ml-dr, web-dr");
	assert_non_null(strstr(json_string_value(json_array_get(lines, 1)), "namespace db-dr"));
	json_decref(lines);
	/* every one asked holds some */
	assert_int_equal(ds_verify_run_missing(items, 3, asked, 1, &lines), 0);
	assert_int_equal(json_array_size(lines), 0);
	json_decref(lines);
	/* an empty ledger names none */
	assert_int_equal(ds_verify_run_missing(NULL, 0, asked, 1, &lines), 1);
	assert_null(strstr(json_string_value(json_array_get(lines, 0)), "namespaces with"));
	json_decref(lines);
	items_dispose(items);
}

static void test_verify_run__report_holds_each_workload_and_the_summary(void **state)
{
	ds_verify_summary sum = {.total = 3, .verified = 2, .not_verified = 1, .seconds = 4.5};
	ds_verify_item items[3];
	json_t *r, *w;

	(void)state;
	items_new(items);
	items[0].verified = items[2].verified = true;
	snprintf(items[1].reason, sizeof(items[1].reason), "0/1 pods Running");
	r = ds_verify_run_report("/var/lib/drasync/ledger.db", items, 3, &sum);
	assert_non_null(r);
	assert_string_equal(json_string_value(json_object_get(r, "ledger")),
			    "/var/lib/drasync/ledger.db");
	assert_false(json_is_true(json_object_get(r, "verified")));
	w = json_array_get(json_object_get(r, "workloads"), 1);
	assert_string_equal(json_string_value(json_object_get(w, "kind")), "Job");
	assert_string_equal(json_string_value(json_object_get(w, "namespace")), "ml-dr");
	assert_false(json_is_true(json_object_get(w, "verified")));
	assert_string_equal(json_string_value(json_object_get(w, "reason")), "0/1 pods Running");
	w = json_array_get(json_object_get(r, "workloads"), 2);
	assert_string_equal(json_string_value(json_object_get(w, "form")),
			    ds_verify_form_name(DS_VERIFY_STANDBY));
	assert_int_equal(
	    json_integer_value(json_object_get(json_object_get(r, "summary"), "notVerified")), 1);
	json_decref(r);
	sum.not_verified = 0;
	r = ds_verify_run_report("l", NULL, 0, &sum);
	assert_true(json_is_true(json_object_get(r, "verified")));
	assert_int_equal(json_array_size(json_object_get(r, "workloads")), 0);
	json_decref(r);
	items_dispose(items);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_verify_run__missing_names_the_namespaces_with_workloads),
	    cmocka_unit_test(test_verify_run__report_holds_each_workload_and_the_summary),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
