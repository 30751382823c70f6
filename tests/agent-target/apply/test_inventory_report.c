/* inventory's output of an inventory made here: no ledger, no cluster. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/inventory_report.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A writable string: the inventory's rows hold char *. */
#define S(lit) ((char[]){lit})

/* What the report writes, as a string of its own (the caller frees it). */
static char *render(const ds_inventory *inv, const char *format, int want)
{
	char *buf = NULL, *out;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_int_equal(ds_inventory_report(f, inv, format, "/state/ledger.db", "t.yaml"), want);
	fclose(f);
	/* A copy: gcc -O3 takes a pointer from open_memstream's buffer for one
	 * into this frame (-Wdangling-pointer) when render() is inlined. */
	out = strdup(buf ? buf : "");
	free(buf);
	assert_non_null(out);
	return out;
}

static void test_inventory_report__table_notes_and_one_line_per_unknown_reason(void **state)
{
	ds_inventory_ref refs[] = {
	    {.type = DS_INVENTORY_REFERENCE,
	     .source = S("east"),
	     .ns = S("ml"),
	     .target_ns = S("ml-dr"),
	     .object_type = S("Deployment"),
	     .instance = S("train"),
	     .container = S("trainer"),
	     .entry = S("gpu"),
	     .target_kind = DS_TARGET_TEMPLATE,
	     .target = S("gpu-rct"),
	     .exists = DS_EXISTS_UNKNOWN,
	     .exists_reason = S("not checked (--offline)")},
	    {.type = DS_INVENTORY_REFERENCE,
	     .source = S("east"),
	     .ns = S("ml"),
	     .target_ns = S("ml-dr"),
	     .object_type = S("Pod"),
	     .instance = S("p"),
	     .entry = S("gpu"),
	     .target_kind = DS_TARGET_CLAIM,
	     .target = S("c"),
	     .rule = S("dra.resourceClaimMappings[0]"),
	     .rule_line = 9,
	     .exists = DS_EXISTS_UNKNOWN,
	     .exists_reason = S("not checked (--offline)")},
	};
	ds_inventory inv = {.refs = refs, .n_refs = 2, .objects = 2};
	char *text = render(&inv, "text", 0);
	const char *first;

	(void)state;
	assert_non_null(strstr(text, "ledger: /state/ledger.db\n"));
	/* Moved by namespaceMappings: the target namespace is shown. */
	assert_non_null(strstr(text, "template ml-dr/gpu-rct"));
	assert_non_null(strstr(text, "dra.resourceClaimMappings[0] line 9"));
	/* No container lists the entry: ALL, as the rules match it. */
	assert_non_null(strstr(text, "ALL"));
	assert_non_null(strstr(text, "2 objects, 2 claim references: 1 unmapped"));
	/* The reason both share, said once. */
	assert_non_null(strstr(text, "targets: 2 are unknown: not checked (--offline)\n"));
	first = strstr(text, "are unknown");
	assert_non_null(first);
	assert_null(strstr(first + 1, "are unknown"));
	assert_non_null(strstr(text, "inventory --config t.yaml -o yaml"));
	free(text);
}

static void
test_inventory_report__json_carries_the_ledger_and_other_formats_are_refused(void **state)
{
	ds_inventory inv = {0};
	char *text;

	(void)state;
	text = render(&inv, "json", 0);
	assert_non_null(strstr(text, "\"ledger\": \"/state/ledger.db\""));
	free(text);
	text = render(&inv, "text", 0);
	assert_non_null(strstr(text, "(the ledger holds no workload with claims"));
	free(text);
	text = render(&inv, "xml", -EINVAL);
	free(text);
}

static void test_inventory_report__a_kubeconfig_named_but_missing_is_an_error(void **state)
{
	ds_target_config *cfg = NULL;
	ds_kube *kube = NULL;
	char why[300] = "";
	ds_err err = {0};

	(void)state;
	assert_int_equal(ds_target_config_new_empty(&cfg), 0);
	assert_true(ds_inventory_kube("/nonexistent/kubeconfig", NULL, cfg, &kube, why, sizeof(why),
				      &err) < 0);
	assert_null(kube);
	assert_true(err.msg[0] != '\0');
	ds_target_config_free(cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_inventory_report__table_notes_and_one_line_per_unknown_reason),
	    cmocka_unit_test(
		test_inventory_report__json_carries_the_ledger_and_other_formats_are_refused),
	    cmocka_unit_test(test_inventory_report__a_kubeconfig_named_but_missing_is_an_error),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
