/* status's report of a ledger, on a ds_ledger_status made here: no ledger file, no cluster. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/ledger_status.h"
#include "drasync/status_report.h"
#include "dstest.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A writable string: the status structures hold char *, as the ledger's reader fills them. */
#define S(lit) ((char[]){lit})

/* What fn writes for st, as a string the caller frees. */
static char *render(int json, const ds_ledger_status *st, enum ds_mode conf)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	if (json)
		assert_int_equal(ds_status_report_json(f, st, "/var/lib/drasync/ledger.db", conf),
				 0);
	else
		ds_status_report_text(f, st, "/var/lib/drasync/ledger.db", conf);
	fclose(f);
	return buf;
}

static void test_status_report__healthy_ledger_needs_no_attention(void **state)
{
	ds_ledger_status st = {0};
	char *text;

	(void)state;
	st.states[DS_APPLY_APPLIED] = 3;
	st.records = 4;
	st.bytes = 3u << 20;
	assert_null(ds_status_report_attention(&st));
	text = render(0, &st, DS_MODE_STANDBY);
	/* How big the ledger is, and what compaction left in it. */
	assert_non_null(strstr(text, "size:    3.0 MiB, 4 records\n"));
	assert_non_null(strstr(text, "mode:    standby\n"));
	assert_non_null(strstr(text, "(no source has connected yet)"));
	assert_non_null(strstr(text, "verification: never"));
	assert_non_null(strstr(text, "ledger id: none yet"));
	free(text);
	/* The identity a lost ledger is told by (ledger_identity.h). */
	snprintf(st.ledger_id, sizeof(st.ledger_id), "3f2a00000000000000000000000000aa");
	snprintf(st.ledger_created, sizeof(st.ledger_created), "2026-11-30T10:00:00Z");
	text = render(0, &st, DS_MODE_STANDBY);
	assert_non_null(strstr(text, "ledger id: 3f2a00000000000000000000000000aa (created "
				     "2026-11-30T10:00:00Z; ConfigMap drasync-ledger)\n"));
	free(text);
	text = render(1, &st, DS_MODE_STANDBY);
	assert_non_null(strstr(text, "\"ledgerId\": \"3f2a00000000000000000000000000aa\""));
	free(text);
}

static void test_status_report__failed_comes_before_waiting_and_verification(void **state)
{
	ds_ledger_status st = {0};

	(void)state;
	st.not_verified = 1;
	assert_string_equal(ds_status_report_attention(&st),
			    "workloads failed their last verification");
	st.states[DS_APPLY_WAITING] = 1;
	assert_string_equal(ds_status_report_attention(&st), "objects wait for objects they need");
	st.states[DS_APPLY_FAILED] = 1;
	assert_string_equal(ds_status_report_attention(&st), "objects failed to apply");
}

static void test_status_report__json_names_the_namespace_mode_and_the_failure(void **state)
{
	ds_ledger_namespace nss[] = {
	    {.name = S("ml"),
	     .recorded = true,
	     .mode = DS_MODE_MIGRATE,
	     .since = 10,
	     .changed_by = S("failover"),
	     .objects = 2},
	    {.name = S("web"), .recorded = false, .changed_by = S(""), .objects = 1},
	};
	ds_ledger_item items[] = {{.source = S("east"),
				   .kind = S("Deployment"),
				   .ns = S("ml"),
				   .name = S("train"),
				   .state = DS_APPLY_FAILED,
				   .reason = S("forbidden")}};
	ds_ledger_status st = {.namespaces = nss, .n_namespaces = 2, .items = items, .n_items = 1};
	json_error_t je;
	json_t *o;
	char *text;

	(void)state;
	st.states[DS_APPLY_FAILED] = 1;
	text = render(1, &st, DS_MODE_STANDBY);
	o = json_loads(text, 0, &je);
	assert_non_null(o);
	assert_false(json_is_true(json_object_get(o, "healthy")));
	assert_string_equal(json_string_value(json_object_get(o, "attention")),
			    "objects failed to apply");
	/* Recorded: the ledger's mode; not recorded: the configuration's. */
	assert_string_equal(json_string_value(json_object_get(
				json_array_get(json_object_get(o, "namespaces"), 0), "changedBy")),
			    "failover");
	assert_string_equal(json_string_value(json_object_get(
				json_array_get(json_object_get(o, "namespaces"), 1), "changedBy")),
			    "config");
	assert_string_equal(json_string_value(json_object_get(
				json_array_get(json_object_get(o, "needsLook"), 0), "reason")),
			    "forbidden");
	json_decref(o);
	free(text);
	text = render(0, &st, DS_MODE_STANDBY);
	assert_non_null(strstr(text, "objects that need a look:"));
	assert_non_null(strstr(text, "Deployment ml/train (source east): forbidden"));
	free(text);
}

/* Each source's quotas from the configuration, and which one throttles it now. */
static void test_status_report__quotas_per_source(void **state)
{
	ds_target_config *cfg =
	    dt_config("maxUnappliedRecords: 1000\n"
		      "sources:\n"
		      "- {name: noisy, namespaces: [a], maxUnappliedRecords: 20}\n"
		      "- {name: big, namespaces: [b], maxLedgerBytes: 1Ki}\n"
		      "- {name: quiet, namespaces: [c]}\n");
	ds_ledger_source srcs[] = {
	    {.name = S("noisy"), .cluster = S("e"), .unapplied = 20, .ledger_bytes = 500},
	    {.name = S("big"), .cluster = S("w"), .unapplied = 1, .ledger_bytes = 2048},
	    {.name = S("quiet"), .cluster = S("n"), .unapplied = 5, .ledger_bytes = 100},
	};
	ds_ledger_status st = {.sources = srcs, .n_sources = 3};
	json_t *o, *a;
	char *text;

	(void)state;
	ds_ledger_status_quotas(&st, cfg);
	assert_int_equal(srcs[0].throttled, DS_QUOTA_BACKLOG);
	assert_int_equal(srcs[1].throttled, DS_QUOTA_LEDGER_BYTES);
	assert_int_equal(srcs[2].throttled, DS_QUOTA_NONE);
	text = render(0, &st, DS_MODE_STANDBY);
	assert_non_null(strstr(text, "20/20"));
	assert_non_null(strstr(text, "500/unlimited  throttled (backlog)\n"));
	assert_non_null(strstr(text, "2048/1024  throttled (ledger_bytes)\n"));
	assert_non_null(strstr(text, "5/1000"));
	assert_non_null(strstr(text, "100/unlimited  ok\n"));
	free(text);
	text = render(1, &st, DS_MODE_STANDBY);
	o = json_loads(text, 0, NULL);
	assert_non_null(o);
	a = json_object_get(o, "sources");
	assert_string_equal(json_string_value(json_object_get(json_array_get(a, 0), "throttledBy")),
			    "backlog");
	assert_int_equal(
	    json_integer_value(json_object_get(json_array_get(a, 1), "maxLedgerBytes")), 1024);
	assert_true(json_is_false(json_object_get(json_array_get(a, 2), "throttled")));
	assert_true(json_is_null(json_object_get(json_array_get(a, 2), "throttledBy")));
	json_decref(o);
	free(text);
	ds_target_config_free(cfg);
}

/* The planned relocations the sources asked for: source, namespace, outcome, when. */
static void test_status_report__relocations(void **state)
{
	ds_ledger_relocation rel[2] = {
	    {S("prod-east"), S("ml"), S("ml-dr"), S("active"), S("verified active"), 1765000000,
	     1765000030},
	    {S("prod-east"), S("web"), S(""), S("pending"), S(""), 1765000100, 0},
	};
	ds_ledger_status st = {0};
	json_t *o, *a;
	char *text;

	(void)state;
	text = render(0, &st, DS_MODE_STANDBY);
	assert_null(strstr(text, "RELOCATION"));
	free(text);
	st.relocations = rel;
	st.n_relocations = 2;
	text = render(0, &st, DS_MODE_STANDBY);
	assert_non_null(strstr(text, "RELOCATION FROM"));
	assert_non_null(strstr(text, "prod-east            ml                       ml-dr"));
	assert_non_null(strstr(text, "active   2025-12-06T05:46:40Z  2025-12-06T05:47:10Z  "
				     "verified active\n"));
	assert_non_null(strstr(text, "pending  2025-12-06T05:48:20Z  -"));
	free(text);
	text = render(1, &st, DS_MODE_STANDBY);
	o = json_loads(text, 0, NULL);
	a = json_object_get(o, "relocations");
	assert_int_equal(json_array_size(a), 2);
	assert_string_equal(dt_str(json_array_get(a, 0), "/outcome"), "active");
	assert_string_equal(dt_str(json_array_get(a, 0), "/targetNamespace"), "ml-dr");
	assert_int_equal(json_integer_value(dt_get(json_array_get(a, 0), "/finishedAt")),
			 1765000030);
	assert_true(json_is_null(dt_get(json_array_get(a, 1), "/finishedAt")));
	json_decref(o);
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_status_report__relocations),
	    cmocka_unit_test(test_status_report__healthy_ledger_needs_no_attention),
	    cmocka_unit_test(test_status_report__failed_comes_before_waiting_and_verification),
	    cmocka_unit_test(test_status_report__json_names_the_namespace_mode_and_the_failure),
	    cmocka_unit_test(test_status_report__quotas_per_source),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
