/*
 * deviceClassMappings in ResourceQuotas and LimitRanges (dra_quota.h), in
 * plan form: manifests in, the objects `drasync-target plan` would apply
 * and its report out.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/dra_quota.h"
#include "drasync/k8s_object.h"
#include "drasync/manifest.h"
#include "drasync/plan.h"
#include "dstest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEVICES(c) c ".deviceclass.resource.k8s.io/devices"
#define IMPLICIT(c) "requests.deviceclass.resource.kubernetes.io/" c
#define CONTAINER(c) "deviceclass.resource.kubernetes.io/" c

static const char mappings[] = "dra:\n"
			       "  deviceClassMappings:\n"
			       "  - {from: gpu.nvidia.com, to: gpu.example.com}\n"
			       "  - {from: mig.nvidia.com, to: gpu.example.com}\n";

/* A source namespace's quota and limits as `kubectl get -o yaml` prints them, and a workload. */
static const char namespace_limits[] =
    "apiVersion: apps/v1\n"
    "kind: Deployment\n"
    "metadata: {name: train, namespace: ml}\n"
    "spec:\n"
    "  selector: {matchLabels: {app: t}}\n"
    "  template:\n"
    "    metadata: {labels: {app: t}}\n"
    "    spec:\n"
    "      containers: [{name: c, image: busybox}]\n"
    "---\n"
    "apiVersion: v1\n"
    "kind: ResourceQuota\n"
    "metadata: {name: gpus, namespace: ml, uid: 0b6f, resourceVersion: '812',\n"
    "  creationTimestamp: '2026-12-01T10:00:00Z'}\n"
    "spec:\n"
    "  hard:\n"
    "    gpu.nvidia.com.deviceclass.resource.k8s.io/devices: '4'\n"
    "    requests.deviceclass.resource.kubernetes.io/gpu.nvidia.com: '4'\n"
    "    fpga.example.org.deviceclass.resource.k8s.io/devices: '1'\n"
    "    count/resourceclaims.resource.k8s.io: '10'\n"
    "    requests.example.com/gpu: '4'\n"
    "    requests.cpu: '8'\n"
    "  scopeSelector:\n"
    "    matchExpressions: [{scopeName: PriorityClass, operator: In, values: [high]}]\n"
    "status:\n"
    "  hard: {requests.cpu: '8'}\n"
    "  used: {requests.cpu: '2'}\n"
    "---\n"
    "apiVersion: v1\n"
    "kind: LimitRange\n"
    "metadata: {name: limits, namespace: ml, uid: 77aa}\n"
    "spec:\n"
    "  limits:\n"
    "  - type: Container\n"
    "    max: {cpu: '2', deviceclass.resource.kubernetes.io/gpu.nvidia.com: '2'}\n"
    "    default: {deviceclass.resource.kubernetes.io/gpu.nvidia.com: '1'}\n"
    "    defaultRequest: {deviceclass.resource.kubernetes.io/gpu.nvidia.com: '1'}\n"
    "  - type: PersistentVolumeClaim\n"
    "    max: {storage: 10Gi}\n";

static ds_plan *plan(const char *cfg_yaml, const char *yaml, ds_manifest **man,
		     ds_target_config **cfg)
{
	ds_plan_opts o = {.api = DS_DRA_V1, .sched = DS_SCHED_V1BETA1};
	ds_plan *p = NULL;
	ds_err err = {0};

	*cfg = dt_config(cfg_yaml);
	o.cfg = *cfg;
	assert_int_equal(ds_manifest_new(man), 0);
	assert_true(ds_manifest_load_buffer(*man, yaml, strlen(yaml), "in.yaml", &err) > 0);
	assert_int_equal(ds_plan_new(&p), 0);
	assert_int_equal(ds_plan_run(p, *man, &o), 0);
	return p;
}

static const json_t *planned(const ds_plan *p, const char *kind)
{
	size_t i;
	json_t *o;

	json_array_foreach (ds_plan_objects(p), i, o)
		if (strcmp(ds_obj_kind(o), kind) == 0)
			return o;
	fail_msg("no %s in the plan", kind);
	return NULL;
}

static const char *value(const json_t *map, const char *key)
{
	return json_string_value(json_object_get(map, key));
}

static void test_dra_quota__key_forms(void **state)
{
	char b[300];

	(void)state;
	assert_string_equal(ds_dra_quota_key_class(DEVICES("gpu.nvidia.com"), true, b, sizeof(b)),
			    "gpu.nvidia.com");
	assert_string_equal(ds_dra_quota_key_class(IMPLICIT("gpu.nvidia.com"), true, b, sizeof(b)),
			    "gpu.nvidia.com");
	assert_string_equal(
	    ds_dra_quota_key_class(CONTAINER("gpu.nvidia.com"), false, b, sizeof(b)),
	    "gpu.nvidia.com");
	/* not a class: the claim count, an explicit extended resource, the others */
	assert_null(ds_dra_quota_key_class("count/resourceclaims.resource.k8s.io", true, b, 300));
	assert_null(ds_dra_quota_key_class("requests.example.com/gpu", true, b, sizeof(b)));
	assert_null(ds_dra_quota_key_class("requests.cpu", true, b, sizeof(b)));
	assert_null(ds_dra_quota_key_class(DEVICES(""), true, b, sizeof(b)));
	assert_null(ds_dra_quota_key_class(IMPLICIT(""), true, b, sizeof(b)));
	/* a quota holds requests.<name> of an extended resource, a LimitRange the name */
	assert_null(ds_dra_quota_key_class(CONTAINER("gpu.nvidia.com"), true, b, sizeof(b)));
	assert_null(ds_dra_quota_key_class(DEVICES("gpu.nvidia.com"), false, b, sizeof(b)));
	assert_null(ds_dra_quota_key_class(DEVICES("gpu.nvidia.com"), true, b, 5));
}

static void test_dra_quota__plan_renames_quota_and_limits_before_the_workloads(void **state)
{
	ds_target_config *cfg;
	ds_manifest *man;
	ds_plan *p = plan(mappings, namespace_limits, &man, &cfg);
	const ds_report *rep = ds_plan_report(p);
	const json_t *objs = ds_plan_objects(p), *rq, *lr, *hard, *item;

	(void)state;
	assert_int_equal(ds_plan_count(p)->apply, 3);
	assert_int_equal(ds_plan_count(p)->failed, 0);
	/* the limits first, then the quota, then what they govern */
	assert_string_equal(ds_obj_kind(json_array_get(objs, 0)), "LimitRange");
	assert_string_equal(ds_obj_kind(json_array_get(objs, 1)), "ResourceQuota");
	assert_string_equal(ds_obj_kind(json_array_get(objs, 2)), "Deployment");

	rq = planned(p, "ResourceQuota");
	hard = ds_json_path(rq, "spec.hard");
	assert_int_equal(json_object_size(hard), 6);
	assert_string_equal(value(hard, DEVICES("gpu.example.com")), "4");
	assert_string_equal(value(hard, IMPLICIT("gpu.example.com")), "4");
	assert_null(json_object_get(hard, DEVICES("gpu.nvidia.com")));
	assert_null(json_object_get(hard, IMPLICIT("gpu.nvidia.com")));
	/* no mapping names it: kept as it is */
	assert_string_equal(value(hard, DEVICES("fpga.example.org")), "1");
	assert_string_equal(value(hard, "count/resourceclaims.resource.k8s.io"), "10");
	assert_string_equal(value(hard, "requests.example.com/gpu"), "4");
	assert_string_equal(value(hard, "requests.cpu"), "8");
	/* scopes name no DeviceClass */
	assert_string_equal(dt_str(rq, "/spec/scopeSelector/matchExpressions/0/scopeName"),
			    "PriorityClass");
	/* sanitized: no status, no server fields */
	assert_null(json_object_get(rq, "status"));
	assert_null(ds_json_path(rq, "metadata.uid"));
	assert_null(ds_json_path(rq, "metadata.resourceVersion"));
	assert_null(ds_json_path(rq, "metadata.creationTimestamp"));

	lr = planned(p, "LimitRange");
	item = dt_get(lr, "/spec/limits/0");
	assert_string_equal(value(ds_json_path(item, "max"), CONTAINER("gpu.example.com")), "2");
	assert_string_equal(value(ds_json_path(item, "max"), "cpu"), "2");
	assert_null(json_object_get(ds_json_path(item, "max"), CONTAINER("gpu.nvidia.com")));
	assert_string_equal(value(ds_json_path(item, "default"), CONTAINER("gpu.example.com")),
			    "1");
	assert_string_equal(
	    value(ds_json_path(item, "defaultRequest"), CONTAINER("gpu.example.com")), "1");
	assert_string_equal(dt_str(lr, "/spec/limits/1/max/storage"), "10Gi");
	assert_null(ds_json_path(lr, "metadata.uid"));

	/* every rename in the report, with where it was */
	assert_int_equal(dt_count(rep, DS_REPORT_DEVICE_CLASS, "ResourceQuota ml/gpus", NULL,
				  "spec.hard", DEVICES("gpu.nvidia.com"),
				  DEVICES("gpu.example.com")),
			 1);
	assert_int_equal(dt_count(rep, DS_REPORT_DEVICE_CLASS, "ResourceQuota ml/gpus", NULL,
				  "spec.hard", IMPLICIT("gpu.nvidia.com"),
				  IMPLICIT("gpu.example.com")),
			 1);
	assert_int_equal(dt_count(rep, DS_REPORT_DEVICE_CLASS, "LimitRange ml/limits", NULL,
				  "spec.limits[0].max", CONTAINER("gpu.nvidia.com"),
				  CONTAINER("gpu.example.com")),
			 1);
	assert_int_equal(dt_count(rep, DS_REPORT_DEVICE_CLASS, "LimitRange ml/limits", NULL,
				  "spec.limits[0].defaultRequest", NULL, NULL),
			 1);
	assert_int_equal(dt_count(rep, DS_REPORT_DEVICE_CLASS, NULL, NULL, NULL, NULL, NULL), 5);
	/* the classes the quota and limits name, which the plan does not hold, must exist */
	assert_int_equal(
	    dt_count(rep, DS_REPORT_REQUIRE, "ResourceQuota ml/gpus", NULL, NULL, NULL, NULL), 2);
	assert_int_equal(
	    dt_count(rep, DS_REPORT_REQUIRE, "LimitRange ml/limits", NULL, NULL, NULL, NULL), 1);
	ds_plan_free(p);
	ds_manifest_free(man);
	ds_target_config_free(cfg);
}

/* The message of the only entry of type t about object, or fails. */
static const char *message_of(const ds_report *rep, enum ds_report_type t, const char *object)
{
	for (size_t i = 0; i < ds_report_count(rep); i++) {
		const ds_report_entry *e = ds_report_get(rep, i);
		if (e->type == t && e->object && strcmp(e->object, object) == 0 && e->message &&
		    !e->from)
			return e->message;
	}
	fail_msg("no %s entry for %s", ds_report_type_name(t), object);
	return NULL;
}

static void test_dra_quota__two_classes_that_become_one_add_up(void **state)
{
	static const char yaml[] =
	    "apiVersion: v1\n"
	    "kind: ResourceQuota\n"
	    "metadata: {name: gpus, namespace: ml}\n"
	    "spec:\n"
	    "  hard:\n"
	    "    gpu.nvidia.com.deviceclass.resource.k8s.io/devices: '4'\n"
	    "    mig.nvidia.com.deviceclass.resource.k8s.io/devices: 3\n"
	    "    requests.deviceclass.resource.kubernetes.io/gpu.nvidia.com: '2'\n"
	    "    requests.deviceclass.resource.kubernetes.io/mig.nvidia.com: '2'\n";
	ds_target_config *cfg;
	ds_manifest *man;
	ds_plan *p = plan(mappings, yaml, &man, &cfg);
	const json_t *hard = ds_json_path(planned(p, "ResourceQuota"), "spec.hard");

	(void)state;
	assert_int_equal(json_object_size(hard), 2);
	assert_string_equal(value(hard, DEVICES("gpu.example.com")), "7");
	assert_string_equal(value(hard, IMPLICIT("gpu.example.com")), "2");
	assert_non_null(
	    strstr(message_of(ds_plan_report(p), DS_REPORT_DEVICE_CLASS, "ResourceQuota ml/gpus"),
		   "added up to 7"));
	ds_plan_free(p);
	ds_manifest_free(man);
	ds_target_config_free(cfg);
}

static void test_dra_quota__a_merge_that_cannot_be_made_fails_the_object(void **state)
{
	static const char yaml[] =
	    "apiVersion: v1\n"
	    "kind: LimitRange\n"
	    "metadata: {name: limits, namespace: ml}\n"
	    "spec:\n"
	    "  limits:\n"
	    "  - type: Container\n"
	    "    max: {deviceclass.resource.kubernetes.io/gpu.nvidia.com: '2',\n"
	    "          deviceclass.resource.kubernetes.io/mig.nvidia.com: '1'}\n"
	    "---\n"
	    "apiVersion: v1\n"
	    "kind: ResourceQuota\n"
	    "metadata: {name: q, namespace: ml}\n"
	    "spec:\n"
	    "  hard:\n"
	    "    gpu.nvidia.com.deviceclass.resource.k8s.io/devices: 1k\n"
	    "    mig.nvidia.com.deviceclass.resource.k8s.io/devices: '2'\n";
	ds_target_config *cfg;
	ds_manifest *man;
	ds_plan *p = plan(mappings, yaml, &man, &cfg);
	const ds_report *rep = ds_plan_report(p);

	(void)state;
	assert_int_equal(ds_plan_count(p)->failed, 2);
	assert_int_equal(json_array_size(ds_plan_objects(p)), 0);
	assert_non_null(
	    strstr(message_of(rep, DS_REPORT_ERROR, "LimitRange ml/limits"),
		   "spec.limits[0].max: two names become " CONTAINER("gpu.example.com")));
	assert_non_null(strstr(message_of(rep, DS_REPORT_ERROR, "ResourceQuota ml/q"),
			       "only plain device counts are added up"));
	/* nothing else is said of an object that fails */
	assert_int_equal(dt_count(rep, DS_REPORT_DEVICE_CLASS, NULL, NULL, NULL, NULL, NULL), 0);
	ds_plan_free(p);
	ds_manifest_free(man);
	ds_target_config_free(cfg);
}

static void test_dra_quota__without_mappings_nothing_changes(void **state)
{
	ds_target_config *cfg;
	ds_manifest *man;
	ds_plan *p = plan("dra: {}\n", namespace_limits, &man, &cfg);
	const json_t *hard = ds_json_path(planned(p, "ResourceQuota"), "spec.hard");

	(void)state;
	assert_int_equal(ds_plan_count(p)->apply, 3);
	assert_string_equal(value(hard, DEVICES("gpu.nvidia.com")), "4");
	assert_string_equal(value(hard, IMPLICIT("gpu.nvidia.com")), "4");
	assert_int_equal(
	    dt_count(ds_plan_report(p), DS_REPORT_DEVICE_CLASS, NULL, NULL, NULL, NULL, NULL), 0);
	ds_plan_free(p);
	ds_manifest_free(man);
	ds_target_config_free(cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_dra_quota__key_forms),
	    cmocka_unit_test(test_dra_quota__plan_renames_quota_and_limits_before_the_workloads),
	    cmocka_unit_test(test_dra_quota__two_classes_that_become_one_add_up),
	    cmocka_unit_test(test_dra_quota__a_merge_that_cannot_be_made_fails_the_object),
	    cmocka_unit_test(test_dra_quota__without_mappings_nothing_changes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
