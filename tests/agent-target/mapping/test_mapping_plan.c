/* The offline pipeline as a module (plan.h): manifests in, objects and counts out, no process. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/k8s_object.h"
#include "drasync/plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char manifests[] =
    "apiVersion: apps/v1\n"
    "kind: Deployment\n"
    "metadata: {name: train, namespace: ml}\n"
    "spec:\n"
    "  selector: {matchLabels: {app: t}}\n"
    "  template:\n"
    "    metadata: {labels: {app: t}}\n"
    "    spec:\n"
    "      containers: [{name: c, image: busybox, resources: {claims: [{name: gpu}]}}]\n"
    "      resourceClaims: [{name: gpu, resourceClaimTemplateName: gpu-rct}]\n"
    "---\n"
    "apiVersion: v1\n"
    "kind: ConfigMap\n"
    "metadata: {name: settings, namespace: ml}\n"
    "data: {a: b}\n";

static ds_plan *run_plan(ds_manifest **man, const ds_target_config *cfg)
{
	ds_plan_opts o = {.cfg = cfg, .api = DS_DRA_V1, .sched = DS_SCHED_V1BETA1};
	ds_plan *p = NULL;
	ds_err err = {0};

	assert_int_equal(ds_manifest_new(man), 0);
	assert_int_equal(
	    ds_manifest_load_buffer(*man, manifests, sizeof(manifests) - 1, "in.yaml", &err), 2);
	assert_int_equal(ds_plan_new(&p), 0);
	assert_int_equal(ds_plan_run(p, *man, &o), 0);
	return p;
}

static void test_plan__objects_in_apply_order_and_what_they_need(void **state)
{
	ds_target_config *cfg = NULL;
	ds_manifest *man = NULL;
	ds_plan *p;
	const json_t *objs;

	(void)state;
	assert_int_equal(ds_target_config_new_empty(&cfg), 0);
	p = run_plan(&man, cfg);
	objs = ds_plan_objects(p);
	assert_int_equal(json_array_size(objs), 2);
	assert_int_equal(ds_plan_count(p)->apply, 2);
	assert_int_equal(ds_plan_count(p)->failed, 0);
	/* The ConfigMap, given last, goes before the workload that may mount it. */
	assert_string_equal(ds_obj_kind(json_array_get(objs, 0)), "ConfigMap");
	assert_string_equal(ds_obj_kind(json_array_get(objs, 1)), "Deployment");
	/* The template is not in the plan: it must exist on the target. */
	assert_int_equal(ds_plan_count(p)->required, 1);
	assert_int_equal(ds_report_count_type(ds_plan_report(p), DS_REPORT_REQUIRE), 1);
	ds_plan_free(p);
	ds_manifest_free(man);
	ds_target_config_free(cfg);
}

static void test_plan__writes_a_list_as_kubectl_prints_it(void **state)
{
	ds_target_config *cfg = NULL;
	ds_manifest *man = NULL;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	ds_err err = {0};
	ds_plan *p;

	(void)state;
	assert_non_null(f);
	assert_int_equal(ds_target_config_new_empty(&cfg), 0);
	p = run_plan(&man, cfg);
	assert_int_equal(ds_plan_write(p, f, true, &err), 0);
	ds_plan_summary(p, f, 1);
	fclose(f);
	assert_non_null(strstr(buf, "\"kind\": \"List\""));
	/* A manifest that could not be read counts as failed. */
	assert_non_null(strstr(buf, "plan: 2 to apply, 0 skipped, 0 held (standby), 1 failed;"));
	assert_non_null(strstr(buf, "mode migrate, resource.k8s.io/v1\n"));
	free(buf);
	ds_plan_free(p);
	ds_manifest_free(man);
	ds_target_config_free(cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_plan__objects_in_apply_order_and_what_they_need),
	    cmocka_unit_test(test_plan__writes_a_list_as_kubectl_prints_it),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
