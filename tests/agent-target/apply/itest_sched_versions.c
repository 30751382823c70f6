/*
 * scheduling.k8s.io versions against the real gated 1.37 control plane
 * (fixture kube_workload: Workload and PodGroup served as v1beta1 and
 * v1alpha3): records of a v1alpha3 source and of a 1.36 (v1alpha2) source are
 * converted to the version the target is written in (v1beta1), applied, and
 * read back from the API server in v1alpha3 and v1beta1 with every field the
 * source set, as the source set it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/k8s_object.h"
#include "dstest.h"
#include "testutil.h"
#include "tu_apply.h"

#include <stdio.h>
#include <string.h>

#define V1ALPHA3 "scheduling.k8s.io/v1alpha3"
#define V1BETA1 "scheduling.k8s.io/v1beta1"

/* Fail unless obj's value at ptr is want (compared as JSON). */
static void assert_at(const json_t *obj, const char *ptr, const json_t *want, const char *what)
{
	const json_t *got = dt_get(obj, ptr);

	if (!got || !json_equal(got, want)) {
		char *g = got ? json_dumps(got, JSON_COMPACT) : NULL;
		char *w = json_dumps(want, JSON_COMPACT);
		fail_msg("%s %s: %s, want %s", what, ptr, g ? g : "(absent)", w ? w : "?");
	}
}

static void test_itest_sched_versions__v1alpha3_and_v1alpha2_sources_onto_1_37(void **state)
{
	tu_apply_opts o = {.kubeconfig_env = "DS_KUBECONFIG_WORKLOAD"};
	tu_apply *e = tu_apply_new("sched-versions", &o);
	json_t *wl, *pg, *old;
	ds_object_state_row r;

	(void)state;
	tu_apply_commit1(
	    e, tu_objf("apiVersion: v1\nkind: Namespace\nmetadata: {name: '%s'}\n", e->src));
	tu_apply_commit1(
	    e, tu_objf("apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\n"
		       "metadata: {name: shared-gpu, namespace: '%s'}\n"
		       "spec:\n  spec:\n    devices:\n      requests:\n"
		       "      - {name: gpu, exactly: {deviceClassName: gpu.example.com}}\n",
		       e->src));
	wl = tu_objf(
	    "apiVersion: " V1ALPHA3 "\nkind: Workload\n"
	    "metadata: {name: training, namespace: '%s'}\nspec:\n  podGroupTemplates:\n"
	    "  - name: workers\n    schedulingPolicy: {gang: {minCount: 2}}\n"
	    "    disruptionMode: {all: {}}\n"
	    "    resourceClaims: [{name: shared-gpu, resourceClaimTemplateName: shared-gpu}]\n",
	    e->src);
	pg = tu_objf(
	    "apiVersion: " V1ALPHA3 "\nkind: PodGroup\n"
	    "metadata: {name: training-workers-0, namespace: '%s'}\nspec:\n"
	    "  workloadRef: {workloadName: training, templateName: workers}\n"
	    "  schedulingPolicy: {gang: {minCount: 2}}\n  disruptionMode: {single: {}}\n"
	    "  resourceClaims: [{name: shared-gpu, resourceClaimTemplateName: shared-gpu}]\n",
	    e->src);
	/* a 1.36 source's PodGroup of the same template */
	old = tu_objf("apiVersion: scheduling.k8s.io/v1alpha2\nkind: PodGroup\n"
		      "metadata: {name: training-workers-1, namespace: '%s'}\nspec:\n"
		      "  podGroupTemplateRef:\n    workload: {workloadName: training,"
		      " podGroupTemplateName: workers}\n"
		      "  schedulingPolicy: {gang: {minCount: 2}}\n  disruptionMode: PodGroup\n",
		      e->src);
	tu_apply_commit(e, (json_t *const[]){wl, pg, old}, 3);
	tu_apply_settle(e);

	tu_apply_assert_state(e, V1ALPHA3, "Workload", "training", DS_APPLY_APPLIED, NULL);
	tu_apply_assert_state(e, V1ALPHA3, "PodGroup", "training-workers-0", DS_APPLY_APPLIED,
			      NULL);
	tu_apply_assert_state(e, "scheduling.k8s.io/v1alpha2", "PodGroup", "training-workers-1",
			      DS_APPLY_APPLIED, NULL);
	/* written in the version the target prefers */
	r = tu_apply_row(e, V1ALPHA3, "PodGroup", "training-workers-0", false);
	assert_non_null(r.target_api_version);
	assert_string_equal(r.target_api_version, V1BETA1);
	ds_object_state_row_dispose(&r);

	/* read back in both versions the server serves: each field as the source set it */
	for (int v = 0; v < 2; v++) {
		const char *api = v ? V1BETA1 : V1ALPHA3;
		json_t *got = tu_apply_target_get(e, api, "Workload", "training");

		assert_non_null(got);
		assert_string_equal(ds_obj_api_version(got), api);
		assert_at(got, "/spec/podGroupTemplates/0/schedulingPolicy",
			  dt_get(wl, "/spec/podGroupTemplates/0/schedulingPolicy"), "Workload");
		assert_at(got, "/spec/podGroupTemplates/0/disruptionMode",
			  dt_get(wl, "/spec/podGroupTemplates/0/disruptionMode"), "Workload");
		assert_at(got, "/spec/podGroupTemplates/0/resourceClaims",
			  dt_get(wl, "/spec/podGroupTemplates/0/resourceClaims"), "Workload");
		json_decref(got);

		got = tu_apply_target_get(e, api, "PodGroup", "training-workers-0");
		assert_non_null(got);
		for (const char *const *f =
			 (const char *const[]){"/spec/workloadRef", "/spec/schedulingPolicy",
					       "/spec/disruptionMode", "/spec/resourceClaims",
					       NULL};
		     *f; f++)
			assert_at(got, *f, dt_get(pg, *f), "PodGroup");
		json_decref(got);

		/* the v1alpha2 one, in the union shapes */
		got = tu_apply_target_get(e, api, "PodGroup", "training-workers-1");
		assert_non_null(got);
		assert_string_equal(dt_str(got, "/spec/workloadRef/workloadName"), "training");
		assert_string_equal(dt_str(got, "/spec/workloadRef/templateName"), "workers");
		assert_true(json_is_object(dt_get(got, "/spec/disruptionMode/all")));
		assert_null(dt_get(got, "/spec/podGroupTemplateRef"));
		json_decref(got);
	}
	json_decref(wl);
	json_decref(pg);
	json_decref(old);
	tu_apply_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_itest_sched_versions__v1alpha3_and_v1alpha2_sources_onto_1_37),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
