/* scheduling.k8s.io Workload and PodGroup between v1alpha2 (1.36), v1alpha3 and v1beta1 (1.37). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/sched_convert.h"
#include "dstest.h"
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *resource(const char *name)
{
	char path[1024];

	snprintf(path, sizeof(path), "%s/workload-claims/%s", tu_env("DS_RESOURCES"), name);
	return dt_load_file(path);
}

static void test_sched_convert__podgroup_v1alpha2_to_v1beta1_and_back(void **state)
{
	json_t *docs = resource("workload-v1alpha2.yaml");
	json_t *pg = dt_find(docs, "PodGroup", "training-workers-0");
	json_t *orig = json_deep_copy(pg);
	ds_err err = {0};

	(void)state;
	assert_int_equal(ds_sched_convert(pg, DS_SCHED_V1BETA1, &err), 1);
	assert_string_equal(dt_str(pg, "/apiVersion"), "scheduling.k8s.io/v1beta1");
	assert_string_equal(dt_str(pg, "/spec/workloadRef/workloadName"), "training");
	assert_string_equal(dt_str(pg, "/spec/workloadRef/templateName"), "workers");
	assert_null(dt_get(pg, "/spec/podGroupTemplateRef"));
	assert_true(json_is_object(dt_get(pg, "/spec/disruptionMode/single")));
	assert_string_equal(dt_str(pg, "/spec/resourceClaims/0/resourceClaimTemplateName"),
			    "shared-gpu");
	/* Already there: nothing to do. */
	assert_int_equal(ds_sched_convert(pg, DS_SCHED_V1BETA1, &err), 0);
	assert_int_equal(ds_sched_convert(pg, DS_SCHED_V1ALPHA2, &err), 1);
	assert_true(json_equal(pg, orig));
	json_decref(orig);
	json_decref(docs);
}

static void test_sched_convert__workload_templates(void **state)
{
	json_t *docs = resource("workload-v1alpha2.yaml");
	json_t *wl = dt_find(docs, "Workload", "training");
	ds_err err = {0};

	(void)state;
	assert_int_equal(ds_sched_convert(wl, DS_SCHED_V1BETA1, &err), 1);
	assert_true(json_is_object(dt_get(wl, "/spec/podGroupTemplates/0/disruptionMode/all")));
	assert_int_equal(
	    dt_get(wl, "/spec/podGroupTemplates/0/schedulingPolicy/gang/minCount") ? 1 : 0, 1);
	assert_int_equal(ds_sched_convert(wl, DS_SCHED_V1ALPHA2, &err), 1);
	assert_string_equal(dt_str(wl, "/spec/podGroupTemplates/0/disruptionMode"), "PodGroup");
	json_decref(docs);
}

/* A field v1alpha2 cannot hold is an error naming it, and the object is left as it was. */
static void test_sched_convert__field_the_target_cannot_hold(void **state)
{
	json_t *docs = resource("podgroup-deployments.yaml");
	json_t *pg = dt_find(docs, "PodGroup", "trainers");
	json_t *before;
	ds_err err = {0};

	(void)state;
	json_object_set_new(json_object_get(pg, "spec"), "preemptionPolicy", json_string("Never"));
	before = json_deep_copy(pg);
	assert_int_equal(ds_sched_convert(pg, DS_SCHED_V1ALPHA2, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "spec.preemptionPolicy"));
	assert_non_null(strstr(err.msg, "scheduling.k8s.io/v1alpha2 PodGroup cannot hold it"));
	assert_true(json_equal(pg, before));
	json_decref(before);

	/* A field neither version knows is not converted either. */
	json_object_del(json_object_get(pg, "spec"), "preemptionPolicy");
	json_object_set_new(json_object_get(pg, "spec"), "futureField", json_true());
	ds_err_clear(&err);
	assert_int_equal(ds_sched_convert(pg, DS_SCHED_V1ALPHA2, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "spec.futureField: unknown field"));
	/* A union member v1alpha2 has no string for. */
	json_object_del(json_object_get(pg, "spec"), "futureField");
	json_object_set_new(json_object_get(pg, "spec"), "disruptionMode",
			    json_pack("{s:{}}", "someday"));
	ds_err_clear(&err);
	assert_int_equal(ds_sched_convert(pg, DS_SCHED_V1ALPHA2, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "spec.disruptionMode.someday"));
	json_decref(docs);
}

/* v1alpha3 <-> v1beta1: every field of each kept as it is, only apiVersion changes. */
static void test_sched_convert__v1alpha3_v1beta1_every_field(void **state)
{
	json_t *docs = resource("workload-v1alpha3.yaml");
	const char *kinds[][2] = {{"Workload", "training"}, {"PodGroup", "training-workers-0"}};
	ds_err err = {0};

	(void)state;
	for (size_t k = 0; k < 2; k++) {
		json_t *o = dt_find(docs, kinds[k][0], kinds[k][1]);
		json_t *orig = json_deep_copy(o);

		assert_int_equal(ds_sched_convert(o, DS_SCHED_V1BETA1, &err), 1);
		assert_string_equal(dt_str(o, "/apiVersion"), "scheduling.k8s.io/v1beta1");
		/* field by field: the spec is the same object */
		assert_true(json_equal(json_object_get(o, "spec"), json_object_get(orig, "spec")));
		assert_int_equal(ds_sched_convert(o, DS_SCHED_V1ALPHA3, &err), 1);
		assert_true(json_equal(o, orig));
		json_decref(orig);
	}
	{
		json_t *pg = dt_find(docs, "PodGroup", "training-workers-0");
		assert_string_equal(dt_str(pg, "/spec/parentCompositePodGroupName"),
				    "training-cells-0");
		assert_string_equal(dt_str(pg, "/spec/preemptionPolicy"), "PreemptLowerPriority");
		assert_string_equal(dt_str(pg, "/spec/workloadRef/templateName"), "workers");
	}
	json_decref(docs);
}

/* v1alpha2 -> v1alpha3 -> v1beta1 -> v1alpha2: each step converts, the end is the start. */
static void test_sched_convert__v1alpha2_v1alpha3_round_trip(void **state)
{
	json_t *docs = resource("workload-v1alpha2.yaml");
	const char *kinds[][2] = {{"Workload", "training"}, {"PodGroup", "training-workers-0"}};
	ds_err err = {0};

	(void)state;
	for (size_t k = 0; k < 2; k++) {
		json_t *o = dt_find(docs, kinds[k][0], kinds[k][1]);
		json_t *orig = json_deep_copy(o);

		assert_int_equal(ds_sched_convert(o, DS_SCHED_V1ALPHA3, &err), 1);
		assert_string_equal(dt_str(o, "/apiVersion"), "scheduling.k8s.io/v1alpha3");
		if (k == 1) {
			assert_string_equal(dt_str(o, "/spec/workloadRef/workloadName"),
					    "training");
			assert_string_equal(dt_str(o, "/spec/workloadRef/templateName"), "workers");
			assert_null(dt_get(o, "/spec/podGroupTemplateRef"));
			assert_true(json_is_object(dt_get(o, "/spec/disruptionMode/single")));
			assert_string_equal(
			    dt_str(o, "/spec/resourceClaims/0/resourceClaimTemplateName"),
			    "shared-gpu");
		} else {
			assert_true(json_is_object(
			    dt_get(o, "/spec/podGroupTemplates/0/disruptionMode/all")));
			assert_int_equal(
			    json_integer_value(dt_get(
				o, "/spec/podGroupTemplates/0/schedulingPolicy/gang/minCount")),
			    2);
		}
		assert_int_equal(ds_sched_convert(o, DS_SCHED_V1BETA1, &err), 1);
		assert_int_equal(ds_sched_convert(o, DS_SCHED_V1ALPHA3, &err), 1);
		assert_int_equal(ds_sched_convert(o, DS_SCHED_V1ALPHA2, &err), 1);
		assert_true(json_equal(o, orig));
		json_decref(orig);
	}
	json_decref(docs);
}

/* What v1alpha2 cannot hold of a v1alpha3 object is an error naming the field; the
 * object stays as it was. */
static void test_sched_convert__v1alpha3_to_v1alpha2_field_loss(void **state)
{
	json_t *docs = resource("workload-v1alpha3.yaml");
	json_t *pg = dt_find(docs, "PodGroup", "training-workers-0");
	json_t *wl = dt_find(docs, "Workload", "training");
	json_t *before = json_deep_copy(pg);
	ds_err err = {0};

	(void)state;
	assert_int_equal(ds_sched_convert(pg, DS_SCHED_V1ALPHA2, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "spec.parentCompositePodGroupName"));
	assert_non_null(strstr(err.msg, "scheduling.k8s.io/v1alpha2 PodGroup cannot hold it"));
	assert_true(json_equal(pg, before));
	json_object_del(json_object_get(pg, "spec"), "parentCompositePodGroupName");
	ds_err_clear(&err);
	assert_int_equal(ds_sched_convert(pg, DS_SCHED_V1ALPHA2, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "spec.preemptionPolicy"));
	json_object_del(json_object_get(pg, "spec"), "preemptionPolicy");
	assert_int_equal(ds_sched_convert(pg, DS_SCHED_V1ALPHA2, &err), 1);
	assert_string_equal(dt_str(pg, "/spec/disruptionMode"), "Pod");
	assert_string_equal(dt_str(pg, "/spec/podGroupTemplateRef/workload/podGroupTemplateName"),
			    "workers");
	assert_string_equal(dt_str(pg, "/spec/priorityClassName"), "high");

	ds_err_clear(&err);
	assert_int_equal(ds_sched_convert(wl, DS_SCHED_V1ALPHA2, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "spec.compositePodGroupTemplates"));
	assert_non_null(strstr(err.msg, "v1alpha2 Workload cannot hold it"));
	json_object_del(json_object_get(wl, "spec"), "compositePodGroupTemplates");
	ds_err_clear(&err);
	assert_int_equal(ds_sched_convert(wl, DS_SCHED_V1ALPHA2, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "spec.podGroupTemplates[0].preemptionPolicy"));
	assert_non_null(strstr(err.msg, "PodGroupTemplate cannot hold it"));
	json_decref(before);
	json_decref(docs);
}

static void test_sched_convert__versions_and_other_kinds(void **state)
{
	enum ds_sched_version v;
	json_t *pod = dt_object("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n");
	json_t *pc = dt_object("apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\n"
			       "metadata: {name: p}\nvalue: 1\n");
	json_t *v3 = dt_object("apiVersion: scheduling.k8s.io/v1alpha4\nkind: PodGroup\n"
			       "metadata: {name: p}\nspec: {}\n");
	ds_err err = {0};

	(void)state;
	assert_int_equal(ds_sched_version_parse("scheduling.k8s.io/v1beta1", &v), 0);
	assert_int_equal(v, DS_SCHED_V1BETA1);
	assert_int_equal(ds_sched_version_parse("v1alpha2", &v), 0);
	assert_int_equal(v, DS_SCHED_V1ALPHA2);
	assert_int_equal(ds_sched_version_parse("scheduling.k8s.io/v1alpha3", &v), 0);
	assert_int_equal(v, DS_SCHED_V1ALPHA3);
	assert_string_equal(ds_sched_api_version(DS_SCHED_V1ALPHA3), "scheduling.k8s.io/v1alpha3");
	assert_int_equal(ds_sched_version_parse("v1", &v), -EINVAL);
	assert_null(ds_sched_api_version(DS_SCHED_AS_IS));
	assert_int_equal(ds_sched_convert(pod, DS_SCHED_V1BETA1, &err), 0);
	assert_int_equal(ds_sched_convert(pc, DS_SCHED_V1BETA1, &err), 0);
	assert_int_equal(ds_sched_convert(v3, DS_SCHED_AS_IS, &err), 0);
	assert_int_equal(ds_sched_convert(v3, DS_SCHED_V1BETA1, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "only v1alpha2, v1alpha3 and v1beta1"));
	json_decref(pod);
	json_decref(pc);
	json_decref(v3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sched_convert__podgroup_v1alpha2_to_v1beta1_and_back),
	    cmocka_unit_test(test_sched_convert__workload_templates),
	    cmocka_unit_test(test_sched_convert__field_the_target_cannot_hold),
	    cmocka_unit_test(test_sched_convert__v1alpha3_v1beta1_every_field),
	    cmocka_unit_test(test_sched_convert__v1alpha2_v1alpha3_round_trip),
	    cmocka_unit_test(test_sched_convert__v1alpha3_to_v1alpha2_field_loss),
	    cmocka_unit_test(test_sched_convert__versions_and_other_kinds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
