/*
 * drasync-target retry run as a process on a real ledger, without a cluster:
 * usage errors exit 2 saying what to type, a match is marked and printed with
 * its reason (exit 0), nothing matching exits 1 and says so. That the applier
 * then applies it is in tests/agent-target/apply/itest_applier.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/object_state.h"
#include "testutil.h"
#include "tu_ledger.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SOURCE "prod-east"

static void expect(const char *const *args, int code, const char *in_err, const char *in_out)
{
	const char *argv[16] = {tu_env("DS_TARGET_BIN"), "retry"};
	struct tu_run r;
	size_t n = 2;

	for (; args[n - 2] && n < 15; n++)
		argv[n] = args[n - 2];
	argv[n] = NULL;
	tu_run(&r, NULL, argv);
	if (r.status != code || (in_err && !strstr(r.err, in_err)) ||
	    (in_out && !strstr(r.out, in_out)))
		fail_msg("retry %s: exit %d (want %d)\nstdout:\n%s\nstderr:\n%s(want '%s' / '%s')",
			 args[0] ? args[0] : "", r.status, code, r.out, r.err, in_err ? in_err : "",
			 in_out ? in_out : "");
	tu_run_dispose(&r);
}

static void test_cmd_retry__usage(void **state)
{
	(void)state;
	expect((const char *[]){"--help", NULL}, 0, NULL, "Examples:");
	expect((const char *[]){NULL}, 2, "--config FILE is required", NULL);
	expect((const char *[]){"--bogus", NULL}, 2, "Try 'drasync-target retry --help'", NULL);
	expect((const char *[]){"--config", "t.yaml", "settings", NULL}, 2,
	       "'settings' is not KIND/NAME", "");
	expect((const char *[]){"--config", "t.yaml", "settings", NULL}, 2, "ConfigMap/settings",
	       NULL);
	expect((const char *[]){"--config", "t.yaml", "ConfigMap/", NULL}, 2, "not KIND/NAME",
	       NULL);
	expect((const char *[]){"--config", "t.yaml", "a/b", "c/d", NULL}, 2, "one KIND/NAME",
	       NULL);
	expect((const char *[]){"--config", "/nonexistent/t.yaml", NULL}, 2, "/nonexistent/t.yaml",
	       NULL);
}

static void test_cmd_retry__marks_failed_objects_by_target_name(void **state)
{
	char *dir = tu_mkdtemp("cmd-retry");
	char ledger[1024], config[1024], yaml[1200];
	ds_object_state *st = NULL;
	ds_object_state_row *rows = NULL, r;
	ds_err err = {0};
	tu_ledger l;
	ds_record recs[2];
	char *payloads[2];
	size_t n = 0;

	(void)state;
	snprintf(ledger, sizeof(ledger), "%s/ledger.db", dir);
	snprintf(config, sizeof(config), "%s/target.yaml", dir);
	snprintf(yaml, sizeof(yaml),
		 "apiVersion: drasync.io/v1alpha1\nkind: TargetConfig\nmode: migrate\n"
		 "stateDir: %s\nnamespaceMappings: {ml-team: ml-team-dr}\n",
		 dir);
	tu_write_file(config, yaml);
	/* no ledger yet: nothing to retry */
	expect((const char *[]){"--config", config, NULL}, 1, "no ledger at", NULL);

	tu_ledger_open(&l, ledger, SOURCE);
	for (int i = 0; i < 2; i++) {
		json_t *o =
		    json_pack("{s:s, s:s, s:{s:s, s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
			      "metadata", "name", i ? "other" : "settings", "namespace", "ml-team");
		recs[i] = tu_record_upsert(o, "uid", &payloads[i]);
		recs[i].api_version = "v1";
		recs[i].kind = "ConfigMap";
		recs[i].ns = "ml-team";
		recs[i].name = i ? "other" : "settings";
		json_decref(o);
	}
	tu_ledger_commit(&l, recs, 2, NULL, NULL);
	assert_int_equal(ds_object_state_open(&st, ledger, &err), 0);
	assert_int_equal(ds_object_state_ingest(st, &err), 2);
	assert_int_equal(ds_object_state_pick(st, INT64_C(1) << 50, 10, &rows, &n, &err), 0);
	assert_int_equal(n, 2);
	for (size_t i = 0; i < n; i++) {
		ds_object_state_result res = {
		    .state = DS_APPLY_FAILED,
		    .reason = "apply: 404 NotFound: namespaces \"ml-team-dr\" not found"};
		assert_int_equal(ds_object_state_set(st, rows[i].id, rows[i].record_id, &res, &err),
				 0);
	}
	ds_object_state_rows_free(rows, n);

	/* the source namespace is not how the object is named */
	expect((const char *[]){"--config", config, "--namespace", "ml-team", "ConfigMap/settings",
				NULL},
	       1, "nothing to retry", NULL);
	/* without --namespace a name is cluster-scoped; the message says where it is */
	expect((const char *[]){"--config", config, "ConfigMap/settings", NULL}, 1,
	       "add --namespace ml-team-dr", NULL);
	expect((const char *[]){"--config", config, "-n", "ml-team-dr", "configmap/settings", NULL},
	       0, NULL, "ConfigMap ml-team-dr/settings: was failed: apply: 404 NotFound");
	assert_int_equal(
	    ds_object_state_get(st, SOURCE, "core/ConfigMap/ml-team/settings", &r, &err), 0);
	assert_int_equal(r.state, DS_APPLY_PENDING);
	ds_object_state_row_dispose(&r);
	assert_int_equal(ds_object_state_get(st, SOURCE, "core/ConfigMap/ml-team/other", &r, &err),
			 0);
	assert_int_equal(r.state, DS_APPLY_FAILED);
	ds_object_state_row_dispose(&r);
	/* marked already: due, so nothing to mark; the other one in the namespace is */
	expect((const char *[]){"--config", config, "-n", "ml-team-dr", "ConfigMap/settings", NULL},
	       1, "nothing to retry", NULL);
	expect((const char *[]){"--config", config, "--namespace", "ml-team-dr", NULL}, 0, NULL,
	       "1 object marked");
	assert_int_equal(ds_object_state_count(st, DS_APPLY_FAILED, NULL), 0);
	assert_int_equal(ds_object_state_count(st, DS_APPLY_PENDING, NULL), 2);

	ds_object_state_free(st);
	tu_ledger_close(&l);
	free(payloads[0]);
	free(payloads[1]);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cmd_retry__usage),
	    cmocka_unit_test(test_cmd_retry__marks_failed_objects_by_target_name),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
