/*
 * The decisions of failover and failback (failover.h) on JSON fixtures, no
 * cluster: what the snapshot of a namespace holds, when a mode's form is
 * settled, the lines of the snapshot diff (what a failover activates, what a
 * failback parks), the split-brain guard's verdict and which ledger rows are
 * reported as not done. Fixtures: tests/resources/failover/.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/failover.h"
#include "testutil.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

/* "now" of sources.json, on the wall clock. */
#define NOW_MS 1796000000000LL

static json_t *fixture(const char *name)
{
	char path[1024];
	json_error_t je;
	json_t *j;

	snprintf(path, sizeof(path), "%s/failover/%s", tu_env("DS_RESOURCES"), name);
	j = json_load_file(path, 0, &je);
	if (!j)
		fail_msg("%s: %s", path, je.text);
	return j;
}

/* The snapshot of namespace ml-dr from a fixture's lists, kind by kind. */
static json_t *snapshot_of(const char *name)
{
	static const char *const kinds[] = {"Deployment", "StatefulSet", "ReplicaSet", "DaemonSet",
					    "CronJob",	  "Job",	 "Pod"};
	json_t *lists = fixture(name), *snap = json_object();

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		json_t *list = json_object_get(lists, kinds[i]);
		if (list)
			assert_int_equal(ds_failover_snapshot_add(snap, kinds[i], "ml-dr", list),
					 0);
	}
	json_decref(lists);
	return snap;
}

static bool has_line(const json_t *lines, const char *want)
{
	size_t i;
	json_t *l;

	json_array_foreach (lines, i, l)
		if (strcmp(json_string_value(l), want) == 0)
			return true;
	return false;
}

static void test_failover__snapshot_keeps_what_the_mode_changes(void **state)
{
	json_t *snap = snapshot_of("standby.json"), *v;

	(void)state;
	/* Deleted objects and those another owns (the Deployment's ReplicaSet) are out. */
	assert_int_equal(json_object_size(snap), 3);
	assert_null(json_object_get(snap, "Deployment ml-dr/gone"));
	assert_null(json_object_get(snap, "ReplicaSet ml-dr/trainer-5d8f"));
	v = json_object_get(snap, "Deployment ml-dr/trainer");
	assert_int_equal(json_integer_value(json_object_get(v, "replicas")), 0);
	assert_true(json_is_true(json_object_get(v, "standby")));
	assert_null(json_object_get(v, "parked"));
	v = json_object_get(snap, "DaemonSet ml-dr/exporter");
	assert_true(json_is_true(json_object_get(v, "parked")));
	assert_null(json_object_get(v, "replicas"));
	v = json_object_get(snap, "CronJob ml-dr/nightly");
	assert_true(json_is_true(json_object_get(v, "suspend")));
	json_decref(snap);
}

static void test_failover__settled_in_the_form_of_the_mode(void **state)
{
	json_t *standby = snapshot_of("standby.json"), *active = snapshot_of("active.json");
	json_t *empty = json_object();

	(void)state;
	assert_true(ds_failover_settled(standby, DS_MODE_STANDBY));
	assert_false(ds_failover_settled(standby, DS_MODE_MIGRATE));
	assert_true(ds_failover_settled(active, DS_MODE_MIGRATE));
	/* after a failback no bare Pod may be left, and every workload is marked */
	assert_false(ds_failover_settled(active, DS_MODE_STANDBY));
	json_object_del(active, "Pod ml-dr/probe");
	assert_false(ds_failover_settled(active, DS_MODE_STANDBY));
	assert_true(ds_failover_settled(empty, DS_MODE_STANDBY));
	assert_true(ds_failover_settled(empty, DS_MODE_MIGRATE));
	json_decref(standby);
	json_decref(active);
	json_decref(empty);
}

static void test_failover__diff_says_what_a_failover_activates(void **state)
{
	json_t *before = snapshot_of("standby.json"), *after = snapshot_of("active.json");
	json_t *lines = NULL;
	size_t unchanged = 99;

	(void)state;
	assert_int_equal(ds_failover_diff(before, after, &lines, &unchanged), 4);
	assert_int_equal(unchanged, 0);
	assert_int_equal(json_array_size(lines), 4);
	assert_true(has_line(lines, "Deployment ml-dr/trainer: replicas 0 -> 3"));
	assert_true(has_line(lines, "DaemonSet ml-dr/exporter: unparked"));
	assert_true(has_line(lines, "CronJob ml-dr/nightly: suspend true -> false"));
	assert_true(has_line(lines, "Pod ml-dr/probe: created (was held)"));
	json_decref(lines);
	json_decref(before);
	json_decref(after);
}

static void test_failover__diff_says_what_a_failback_parks(void **state)
{
	json_t *before = snapshot_of("active.json"), *after = snapshot_of("standby.json");
	json_t *lines = NULL;
	size_t unchanged = 99;

	(void)state;
	assert_int_equal(ds_failover_diff(before, after, &lines, &unchanged), 4);
	assert_int_equal(unchanged, 0);
	assert_true(has_line(lines, "Deployment ml-dr/trainer: replicas 3 -> 0"));
	assert_true(has_line(lines, "DaemonSet ml-dr/exporter: parked"));
	assert_true(has_line(lines, "CronJob ml-dr/nightly: suspend false -> true"));
	/* the Pod drasync created at failover is gone, held again */
	assert_string_equal(json_string_value(json_array_get(lines, 3)),
			    "Pod ml-dr/probe: deleted (held in the ledger again)");
	json_decref(lines);
	json_decref(before);
	json_decref(after);
}

static void test_failover__diff_of_the_same_form_changes_nothing(void **state)
{
	json_t *a = snapshot_of("standby.json"), *b = snapshot_of("standby.json");
	json_t *lines = NULL;
	size_t unchanged = 0;

	(void)state;
	/* Only the marks differ (SSA dropped the annotation): not a line an operator reads. */
	json_object_set_new(json_object_get(b, "Deployment ml-dr/trainer"), "standby",
			    json_false());
	assert_int_equal(ds_failover_diff(a, b, &lines, &unchanged), 0);
	assert_int_equal(unchanged, 3);
	assert_int_equal(json_array_size(lines), 0);
	json_decref(lines);
	json_decref(a);
	json_decref(b);
}

static void test_failover__guard_refuses_while_a_source_is_connected(void **state)
{
	json_t *sources = fixture("sources.json"), *lines = json_array();
	const char *line;

	(void)state;
	assert_int_equal(ds_failover_guard_verdict(json_object_get(sources, "none_connected"),
						   false, NOW_MS, lines),
			 DS_FAILOVER_GO);
	assert_int_equal(json_array_size(lines), 0);
	assert_int_equal(ds_failover_guard_verdict(json_object_get(sources, "one_connected"), false,
						   NOW_MS, lines),
			 DS_FAILOVER_REFUSED);
	assert_int_equal(json_array_size(lines), 1);
	line = json_string_value(json_array_get(lines, 0));
	assert_string_equal(line, "refused: source prod-east is still connected to this target "
				  "(session from 10.1.2.3:5555 since 2026-11-30T00:36:40Z, seen "
				  "12 s ago)");
	json_array_clear(lines);
	/* --force: it goes on, and says so */
	assert_int_equal(ds_failover_guard_verdict(json_object_get(sources, "one_connected"), true,
						   NOW_MS, lines),
			 DS_FAILOVER_FORCED);
	line = json_string_value(json_array_get(lines, 0));
	assert_non_null(strstr(line, "warning: source prod-east"));
	assert_non_null(strstr(line, "; --force given"));
	/* no sources at all, and lines may be NULL */
	assert_int_equal(ds_failover_guard_verdict(NULL, false, NOW_MS, NULL), DS_FAILOVER_GO);
	json_decref(lines);
	json_decref(sources);
}

static void test_failover__problems_are_the_rows_not_done(void **state)
{
	char kept[] = "not deleted: not labelled app.kubernetes.io/managed-by=drasync";
	ds_object_state_row r = {0};

	(void)state;
	r.state = DS_APPLY_APPLIED;
	assert_null(ds_failover_problem(&r));
	r.state = DS_APPLY_FAILED;
	assert_string_equal(ds_failover_problem(&r), "FAILED");
	r.state = DS_APPLY_WAITING;
	assert_string_equal(ds_failover_problem(&r), "NOT APPLIED (waits)");
	r.state = DS_APPLY_PENDING;
	assert_string_equal(ds_failover_problem(&r), "NOT APPLIED (still retrying)");
	/* held is standby's form; held but left on the target is reported */
	r.state = DS_APPLY_HELD;
	assert_null(ds_failover_problem(&r));
	r.reason = kept;
	assert_string_equal(ds_failover_problem(&r), "KEPT on the target");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_failover__snapshot_keeps_what_the_mode_changes),
	    cmocka_unit_test(test_failover__settled_in_the_form_of_the_mode),
	    cmocka_unit_test(test_failover__diff_says_what_a_failover_activates),
	    cmocka_unit_test(test_failover__diff_says_what_a_failback_parks),
	    cmocka_unit_test(test_failover__diff_of_the_same_form_changes_nothing),
	    cmocka_unit_test(test_failover__guard_refuses_while_a_source_is_connected),
	    cmocka_unit_test(test_failover__problems_are_the_rows_not_done),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
