/* Standby mode transformations (SPEC §5). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/standby.h"
#include "dstest.h"

#include <stdio.h>

static void test_standby__scaled_workloads_keep_their_count(void **state)
{
	static const char *const kinds[] = {"Deployment", "StatefulSet", "ReplicaSet"};
	char y[200];
	ds_report *rep;

	(void)state;
	assert_int_equal(ds_report_new(&rep), 0);
	for (int i = 0; i < 3; i++) {
		json_t *o;

		snprintf(
		    y, sizeof(y),
		    "apiVersion: apps/v1\nkind: %s\nmetadata: {name: w}\nspec: {replicas: 3}\n",
		    kinds[i]);
		o = dt_object(y);
		assert_int_equal(ds_standby_apply(o, rep), DS_STANDBY_CHANGED);
		assert_int_equal(json_integer_value(dt_get(o, "/spec/replicas")), 0);
		assert_string_equal(dt_str(o, "/metadata/annotations/drasync.io~1replicas"), "3");
		json_decref(o);
	}
	/* Unset replicas means 1 in Kubernetes. */
	{
		json_t *o = dt_object(
		    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: w}\nspec: {}\n");
		ds_standby_apply(o, rep);
		assert_string_equal(dt_str(o, "/metadata/annotations/drasync.io~1replicas"), "1");
		json_decref(o);
	}
	assert_int_equal(dt_count(rep, DS_REPORT_STANDBY, "StatefulSet w", NULL, NULL, "3", "0"),
			 1);
	ds_report_free(rep);
}

static void test_standby__cronjob_daemonset_pod_job(void **state)
{
	json_t *cj = dt_object("apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: c}\nspec: "
			       "{schedule: '* * * * *'}\n");
	json_t *ds =
	    dt_object("apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: d}\n"
		      "spec: {template: {spec: {nodeSelector: {gpu: 'true'}, containers: []}}}\n");
	json_t *pod = dt_object("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n");
	json_t *job = dt_object("apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\n");
	json_t *cm = dt_object("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n");

	(void)state;
	assert_int_equal(ds_standby_apply(cj, NULL), DS_STANDBY_CHANGED);
	assert_true(json_is_true(dt_get(cj, "/spec/suspend")));
	assert_string_equal(dt_str(cj, "/metadata/annotations/drasync.io~1suspend"), "false");
	assert_int_equal(ds_standby_apply(ds, NULL), DS_STANDBY_CHANGED);
	assert_string_equal(dt_str(ds, "/spec/template/spec/nodeSelector/drasync.io~1standby"),
			    "true");
	assert_string_equal(dt_str(ds, "/spec/template/spec/nodeSelector/gpu"), "true");
	assert_int_equal(ds_standby_apply(pod, NULL), DS_STANDBY_HOLD);
	assert_int_equal(ds_standby_apply(job, NULL), DS_STANDBY_HOLD);
	assert_int_equal(ds_standby_apply(cm, NULL), DS_STANDBY_UNCHANGED);
	json_decref(cj);
	json_decref(ds);
	json_decref(pod);
	json_decref(job);
	json_decref(cm);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_standby__scaled_workloads_keep_their_count),
	    cmocka_unit_test(test_standby__cronjob_daemonset_pod_job),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
