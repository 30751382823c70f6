/* The per-object pipeline: the mode an object is transformed for (SPEC §5, DR). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/transform.h"
#include "dstest.h"

#include <stdio.h>
#include <string.h>

/* As the importer answers from the ledger: ml-dr failed over (active), web-dr failed back. */
struct modes {
	char asked[4][64];
	int n;
};

static enum ds_mode ledger_mode(void *ud, const char *ns, enum ds_mode configured)
{
	struct modes *m = ud;

	if (m->n < 4)
		snprintf(m->asked[m->n++], sizeof(m->asked[0]), "%s", ns ? ns : "(none)");
	if (ns && strcmp(ns, "ml-dr") == 0)
		return DS_MODE_MIGRATE;
	if (ns && strcmp(ns, "web-dr") == 0)
		return DS_MODE_STANDBY;
	return configured;
}

static int transform(const char *cfg_yaml, const char *obj_yaml, struct modes *m, json_t **out)
{
	ds_target_config *cfg = dt_config(cfg_yaml);
	ds_transform_opts o = {
	    .cfg = cfg, .dra_version = DS_DRA_V1, .mode_of = ledger_mode, .mode_ud = m};
	ds_report *rep;
	json_t *obj = dt_object(obj_yaml);
	int r;

	assert_int_equal(ds_report_new(&rep), 0);
	r = ds_transform_object(&o, obj, rep);
	ds_report_free(rep);
	ds_target_config_free(cfg);
	*out = obj;
	return r;
}

static void test_transform__the_mode_of_the_target_namespace_wins_over_the_config(void **state)
{
	static const char standby[] =
	    "apiVersion: drasync.io/v1alpha1\nkind: TargetConfig\n"
	    "mode: standby\nnamespaceMappings: {ml: ml-dr, web: web-dr}\n";
	static const char migrate[] =
	    "apiVersion: drasync.io/v1alpha1\nkind: TargetConfig\n"
	    "mode: migrate\nnamespaceMappings: {ml: ml-dr, web: web-dr}\n";
	struct modes m = {0};
	json_t *o;

	(void)state;
	/* Standby configured, ml-dr failed over: active form, asked for the target namespace. */
	assert_int_equal(
	    transform(standby,
		      "apiVersion: apps/v1\nkind: Deployment\n"
		      "metadata: {name: trainer, namespace: ml}\nspec: {replicas: 3}\n",
		      &m, &o),
	    DS_TRANSFORM_APPLY);
	assert_string_equal(m.asked[0], "ml-dr");
	assert_int_equal(json_integer_value(dt_get(o, "/spec/replicas")), 3);
	assert_null(dt_get(o, "/metadata/annotations/drasync.io~1replicas"));
	json_decref(o);
	assert_int_equal(transform(standby,
				   "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ml}\n"
				   "spec: {containers: [{name: c, image: x}]}\n",
				   &m, &o),
			 DS_TRANSFORM_APPLY);
	json_decref(o);

	/* A namespace the ledger does not name keeps the configured standby. */
	assert_int_equal(
	    transform(standby,
		      "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: other}\n"
		      "spec: {containers: [{name: c, image: x}]}\n",
		      &m, &o),
	    DS_TRANSFORM_HOLD);
	json_decref(o);

	/* Migrate configured, web-dr failed back: standby form, the Pod held. */
	assert_int_equal(transform(migrate,
				   "apiVersion: batch/v1\nkind: CronJob\n"
				   "metadata: {name: nightly, namespace: web}\n"
				   "spec: {schedule: '0 0 * * *', jobTemplate: {}}\n",
				   &m, &o),
			 DS_TRANSFORM_APPLY);
	assert_true(json_is_true(dt_get(o, "/spec/suspend")));
	json_decref(o);
	assert_int_equal(
	    transform(migrate,
		      "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: web}\n"
		      "spec: {containers: [{name: c, image: x}]}\n",
		      &m, &o),
	    DS_TRANSFORM_HOLD);
	assert_string_equal(m.asked[m.n - 1], "web-dr");
	json_decref(o);
}

/* The PodGroup the importer knows, as its source sent it. */
static const json_t *the_group(void *ud, const char *ns, const char *name)
{
	json_t *g = ud;

	assert_string_equal(ns, "wl"); /* the source namespace, before namespaceMappings */
	return strcmp(name, ds_obj_name(g)) == 0 ? g : NULL;
}

/* Members are mapped with their group, Workload/PodGroup converted to what the target serves. */
static void test_transform__group_members_and_scheduling_versions(void **state)
{
	ds_target_config *cfg =
	    dt_config("mode: migrate\nnamespaceMappings: {wl: wl-dr}\n"
		      "dra:\n  resourceClaimTemplateMappings:\n"
		      "  - {objectType: All, objectInstance: trainers, container: ALL, "
		      "resourceClaimTemplate: dr-gpu}\n");
	json_t *group = dt_object("apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\n"
				  "metadata: {name: trainers, namespace: wl}\n"
				  "spec:\n  schedulingPolicy: {basic: {}}\n"
				  "  disruptionMode: {all: {}}\n"
				  "  resourceClaims: [{name: g, resourceClaimTemplateName: t}]\n");
	json_t *pg = json_deep_copy(group);
	json_t *pod =
	    dt_object("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: wl}\n"
		      "spec:\n  schedulingGroup: {podGroupName: trainers}\n"
		      "  containers: [{name: c, image: x, resources: {claims: [{name: g}]}}]\n"
		      "  resourceClaims: [{name: g, resourceClaimTemplateName: t}]\n");
	ds_transform_opts o = {.cfg = cfg,
			       .dra_version = DS_DRA_V1,
			       .sched_version = DS_SCHED_V1ALPHA2,
			       .group_of = the_group,
			       .group_ud = group};
	ds_report *rep;

	(void)state;
	assert_int_equal(ds_report_new(&rep), 0);
	assert_int_equal(ds_transform_object(&o, pg, rep), DS_TRANSFORM_APPLY);
	assert_string_equal(ds_obj_api_version(pg), "scheduling.k8s.io/v1alpha2");
	assert_string_equal(dt_str(pg, "/spec/disruptionMode"), "PodGroup");
	assert_string_equal(dt_str(pg, "/spec/resourceClaims/0/resourceClaimTemplateName"),
			    "dr-gpu");
	assert_string_equal(ds_obj_namespace(pg), "wl-dr");
	assert_int_equal(ds_transform_object(&o, pod, rep), DS_TRANSFORM_APPLY);
	assert_string_equal(dt_str(pod, "/spec/resourceClaims/0/resourceClaimTemplateName"),
			    "dr-gpu");
	/* A field the target's version cannot hold fails the object. */
	json_decref(pg);
	pg = json_deep_copy(group);
	json_object_set_new(json_object_get(pg, "spec"), "preemptionPolicy", json_string("Never"));
	assert_int_equal(ds_transform_object(&o, pg, rep), DS_TRANSFORM_ERROR);
	assert_int_equal(dt_count(rep, DS_REPORT_ERROR, "PodGroup", NULL, NULL, NULL, NULL), 1);
	json_decref(pg);
	json_decref(pod);
	json_decref(group);
	ds_report_free(rep);
	ds_target_config_free(cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_transform__the_mode_of_the_target_namespace_wins_over_the_config),
	    cmocka_unit_test(test_transform__group_members_and_scheduling_versions),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
