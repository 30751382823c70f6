/* The DRA mapping engine on workload-level DRA: PodGroup, Workload, Job spec.scheduling
 * (the rest of SPEC §3 is test_dra_mapping.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/dra_mapping.h"
#include "drasync/k8s_object.h"
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

/* A pod entry shares the group's claim only when all three fields are equal. */
static void assert_shares(const json_t *member, const json_t *group)
{
	const json_t *m = dt_get(member, "/spec/template/spec/resourceClaims/0");
	const json_t *g = dt_get(group, "/spec/resourceClaims/0");

	assert_true(json_equal((json_t *)m, (json_t *)g));
}

/* A rule naming the PodGroup rewrites the group and, through it, every member's shared entry. */
static void test_dra_mapping__podgroup_rule_maps_group_and_members(void **state)
{
	ds_target_config *cfg =
	    dt_config("dra:\n  resourceClaimTemplateMappings:\n"
		      "  - {objectType: PodGroup, objectInstance: trainers, container: ALL, "
		      "source: shared-gpu, resourceClaimTemplate: dr-gpu}\n");
	json_t *docs = resource("podgroup-deployments.yaml");
	json_t *pg = dt_find(docs, "PodGroup", "trainers");
	json_t *src = json_deep_copy(pg);
	ds_report *r;

	(void)state;
	assert_int_equal(ds_report_new(&r), 0);
	/* The members see the group as the source has it. */
	for (int i = 0; i < 2; i++) {
		json_t *d = dt_find(docs, "Deployment", i ? "trainer-b" : "trainer-a");

		assert_string_equal(ds_dra_group_of(d), "trainers");
		assert_int_equal(ds_dra_map_workload_in(ds_target_config_dra(cfg), d, src, r), 1);
		assert_string_equal(
		    dt_str(d, "/spec/template/spec/resourceClaims/0/resourceClaimTemplateName"),
		    "dr-gpu");
		assert_string_equal(dt_str(d, "/spec/template/spec/resourceClaims/0/name"),
				    "shared-gpu");
	}
	assert_int_equal(ds_dra_map_group(ds_target_config_dra(cfg), pg, r), 1);
	assert_string_equal(dt_str(pg, "/spec/resourceClaims/0/resourceClaimTemplateName"),
			    "dr-gpu");
	assert_shares(dt_find(docs, "Deployment", "trainer-a"), pg);
	assert_shares(dt_find(docs, "Deployment", "trainer-b"), pg);
	assert_int_equal(dt_count(r, DS_REPORT_REWRITE, "PodGroup wl/trainers", "ALL", "shared-gpu",
				  "resourceClaimTemplateName=shared-gpu",
				  "resourceClaimTemplateName=dr-gpu"),
			 1);
	assert_int_equal(dt_count(r, DS_REPORT_REWRITE, "Deployment wl/trainer-a", "ctr",
				  "shared-gpu", NULL, "resourceClaimTemplateName=dr-gpu"),
			 1);
	/* Without the group the member is mapped on its own: this rule does not name it. */
	{
		json_t *again = resource("podgroup-deployments.yaml");
		json_t *d = dt_find(again, "Deployment", "trainer-a");

		assert_int_equal(ds_dra_map_workload(ds_target_config_dra(cfg), d, r), 0);
		json_decref(again);
	}
	json_decref(src);
	ds_report_free(r);
	json_decref(docs);
	ds_target_config_free(cfg);
}

/* A member rule that would map the shared claim elsewhere fails that member, naming both rules. */
static void test_dra_mapping__member_rule_disagreeing_with_group_is_an_error(void **state)
{
	ds_target_config *cfg =
	    dt_config("dra:\n  resourceClaimTemplateMappings:\n"
		      "  - {objectType: PodGroup, objectInstance: trainers, container: ALL, "
		      "resourceClaimTemplate: dr-gpu}\n"
		      "  - {objectType: Deployment, objectInstance: trainer-a, container: ctr, "
		      "resourceClaimTemplate: big-gpu}\n");
	json_t *docs = resource("podgroup-deployments.yaml");
	json_t *pg = dt_find(docs, "PodGroup", "trainers");
	json_t *a = dt_find(docs, "Deployment", "trainer-a");
	json_t *before = json_deep_copy(a);
	ds_report *r;
	const ds_report_entry *e;

	(void)state;
	assert_int_equal(ds_report_new(&r), 0);
	assert_int_equal(ds_dra_map_workload_in(ds_target_config_dra(cfg), a, pg, r), -EINVAL);
	assert_true(json_equal(a, before));
	assert_int_equal(ds_report_count(r), 1);
	e = ds_report_get(r, 0);
	assert_int_equal(e->type, DS_REPORT_ERROR);
	assert_non_null(strstr(e->message, "PodGroup wl/trainers"));
	assert_non_null(strstr(e->message, "rule dra.resourceClaimTemplateMappings[1]"));
	assert_non_null(strstr(e->message, "rule dra.resourceClaimTemplateMappings[0]"));
	assert_non_null(strstr(e->message, "big-gpu"));
	assert_non_null(strstr(e->message, "dr-gpu"));
	/* The group as a whole does not agree: the first member that does not is named. */
	{
		json_t *members = json_pack("[O,O]", dt_find(docs, "Deployment", "trainer-b"), a);
		char why[600];

		assert_int_equal(
		    ds_dra_check_group(ds_target_config_dra(cfg), pg, members, why, sizeof(why)),
		    -EINVAL);
		assert_non_null(strstr(why, "Deployment wl/trainer-a: claim shared-gpu shares"));
		json_array_remove(members, 1);
		assert_int_equal(
		    ds_dra_check_group(ds_target_config_dra(cfg), pg, members, why, sizeof(why)),
		    0);
		json_decref(members);
	}
	/* The other member agrees with the group. */
	assert_int_equal(ds_dra_map_workload_in(ds_target_config_dra(cfg),
						dt_find(docs, "Deployment", "trainer-b"), pg, r),
			 1);
	json_decref(before);
	ds_report_free(r);
	json_decref(docs);
	ds_target_config_free(cfg);
}

/* inventory's view: a shared reference resolves as the group decides, a disagreeing one errs. */
static void test_dra_mapping__workload_refs_follow_the_group(void **state)
{
	ds_target_config *cfg =
	    dt_config("dra:\n  resourceClaimTemplateMappings:\n"
		      "  - {objectType: PodGroup, objectInstance: trainers, container: ALL, "
		      "resourceClaimTemplate: dr-gpu}\n"
		      "  - {objectType: Deployment, objectInstance: trainer-b, container: ALL, "
		      "resourceClaimTemplate: big-gpu}\n");
	json_t *docs = resource("podgroup-deployments.yaml");
	json_t *pg = dt_find(docs, "PodGroup", "trainers");
	ds_dra_ref *refs = NULL;
	size_t n = 0;
	ds_err err = {0};

	(void)state;
	assert_int_equal(ds_dra_workload_refs_in(ds_target_config_dra(cfg),
						 dt_find(docs, "Deployment", "trainer-a"), pg,
						 &refs, &n, &err),
			 0);
	assert_int_equal(n, 1);
	assert_string_equal(refs[0].target, "dr-gpu");
	assert_non_null(refs[0].rule);
	assert_int_equal(refs[0].rule->index, 0);
	assert_string_equal(refs[0].error, "");
	free(refs);
	assert_int_equal(ds_dra_workload_refs_in(ds_target_config_dra(cfg),
						 dt_find(docs, "Deployment", "trainer-b"), pg,
						 &refs, &n, &err),
			 0);
	assert_int_equal(n, 1);
	assert_null(refs[0].rule);
	assert_non_null(strstr(refs[0].error, "shares PodGroup wl/trainers's claim"));
	/* Without the group, the member's own rule. */
	free(refs);
	assert_int_equal(ds_dra_workload_refs(ds_target_config_dra(cfg),
					      dt_find(docs, "Deployment", "trainer-b"), &refs, &n,
					      &err),
			 0);
	assert_string_equal(refs[0].target, "big-gpu");
	free(refs);
	json_decref(docs);
	ds_target_config_free(cfg);
}

/* A member rule when no rule names the group: the group follows its members (issue 24). */
static void test_dra_mapping__group_follows_member_rule(void **state)
{
	ds_target_config *cfg =
	    dt_config("dra:\n  resourceClaimTemplateMappings:\n"
		      "  - {objectType: Deployment, objectInstance: ALL, container: ALL, "
		      "resourceClaimTemplate: big-gpu}\n");
	json_t *docs = resource("podgroup-deployments.yaml");
	json_t *pg = dt_find(docs, "PodGroup", "trainers");
	json_t *a = dt_find(docs, "Deployment", "trainer-a");
	json_t *members = json_pack("[O,O]", a, dt_find(docs, "Deployment", "trainer-b"));
	json_t *alone = json_deep_copy(pg);
	char why[600] = "";
	ds_report *r;

	(void)state;
	assert_int_equal(ds_report_new(&r), 0);
	assert_int_equal(
	    ds_dra_check_group(ds_target_config_dra(cfg), pg, members, why, sizeof(why)), 0);
	assert_int_equal(ds_dra_map_workload_members(ds_target_config_dra(cfg), a, pg, members, r),
			 1);
	assert_string_equal(
	    dt_str(a, "/spec/template/spec/resourceClaims/0/resourceClaimTemplateName"), "big-gpu");
	assert_int_equal(ds_dra_map_group_members(ds_target_config_dra(cfg), pg, members, r), 1);
	assert_string_equal(dt_str(pg, "/spec/resourceClaims/0/resourceClaimTemplateName"),
			    "big-gpu");
	assert_shares(a, pg);
	assert_int_equal(dt_count(r, DS_REPORT_REWRITE, "PodGroup wl/trainers", "ALL", "shared-gpu",
				  "resourceClaimTemplateName=shared-gpu",
				  "resourceClaimTemplateName=big-gpu"),
			 1);
	/* Without its members known, the group keeps its claim: no rule names it. */
	assert_int_equal(ds_dra_map_group(ds_target_config_dra(cfg), alone, r), 0);
	assert_string_equal(dt_str(alone, "/spec/resourceClaims/0/resourceClaimTemplateName"),
			    "shared-gpu");
	json_decref(alone);
	json_decref(members);
	ds_report_free(r);
	json_decref(docs);
	ds_target_config_free(cfg);
}

/* Two members whose rules map the shared claim differently: the group's error, both named. */
static void test_dra_mapping__members_disagreeing_is_the_groups_error(void **state)
{
	ds_target_config *cfg =
	    dt_config("dra:\n  resourceClaimTemplateMappings:\n"
		      "  - {objectType: Deployment, objectInstance: trainer-a, container: ALL, "
		      "resourceClaimTemplate: dr-gpu}\n"
		      "  - {objectType: Deployment, objectInstance: trainer-b, container: ALL, "
		      "resourceClaimTemplate: big-gpu}\n");
	json_t *docs = resource("podgroup-deployments.yaml");
	json_t *pg = dt_find(docs, "PodGroup", "trainers");
	json_t *members = json_pack("[O,O]", dt_find(docs, "Deployment", "trainer-a"),
				    dt_find(docs, "Deployment", "trainer-b"));
	json_t *before = json_deep_copy(pg);
	char why[600] = "";
	ds_report *r;

	(void)state;
	assert_int_equal(ds_report_new(&r), 0);
	assert_int_equal(
	    ds_dra_check_group(ds_target_config_dra(cfg), pg, members, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "Deployment wl/trainer-b: claim shared-gpu shares PodGroup "
				    "wl/trainers's claim"));
	assert_non_null(strstr(why, "rule dra.resourceClaimTemplateMappings[1]"));
	assert_non_null(strstr(why, "for Deployment wl/trainer-a rule "
				    "dra.resourceClaimTemplateMappings[0]"));
	assert_int_equal(ds_dra_map_group_members(ds_target_config_dra(cfg), pg, members, r),
			 -EINVAL);
	assert_true(json_equal(pg, before));
	json_decref(before);
	json_decref(members);
	ds_report_free(r);
	json_decref(docs);
	ds_target_config_free(cfg);
}

/* Job spec.scheduling.resourceClaims: a rule on the Job's references rewrites both sides. */
static void test_dra_mapping__job_scheduling_claims_follow_the_pods(void **state)
{
	ds_target_config *cfg =
	    dt_config("dra:\n  resourceClaimTemplateMappings:\n"
		      "  - {objectType: Job, objectInstance: trainer, container: ALL, "
		      "resourceClaimTemplate: dr-gpu}\n");
	json_t *docs = resource("job-scheduling.yaml");
	json_t *job = dt_find(docs, "Job", "trainer");
	ds_report *r;

	(void)state;
	assert_int_equal(ds_report_new(&r), 0);
	assert_int_equal(ds_dra_map_workload(ds_target_config_dra(cfg), job, r), 3);
	assert_string_equal(
	    dt_str(job, "/spec/template/spec/resourceClaims/0/resourceClaimTemplateName"),
	    "dr-gpu");
	assert_string_equal(
	    dt_str(job, "/spec/scheduling/resourceClaims/0/resourceClaimTemplateName"), "dr-gpu");
	assert_int_equal(json_array_size(dt_get(job, "/spec/template/spec/resourceClaims")), 1);
	assert_int_equal(dt_count(r, DS_REPORT_REWRITE, "Job wl/trainer", "ALL", "shared-gpu", NULL,
				  "resourceClaimTemplateName=dr-gpu"),
			 1);
	ds_report_free(r);
	json_decref(docs);
	ds_target_config_free(cfg);
}

/* One container's rule on a claim the Job's pods share reaches the scheduling entry; two
 * containers mapped differently would split the shared claim: an error, the Job unchanged. */
static void test_dra_mapping__job_shared_claim_cannot_be_split(void **state)
{
	ds_target_config *one =
	    dt_config("dra:\n  resourceClaimTemplateMappings:\n"
		      "  - {objectType: Job, objectInstance: trainer, container: ALL, "
		      "resourceClaimTemplate: dr-gpu}\n"
		      "  - {objectType: Job, objectInstance: trainer, container: sidecar, "
		      "resourceClaimTemplate: small-gpu}\n");
	json_t *docs = resource("job-scheduling.yaml");
	json_t *job = dt_find(docs, "Job", "trainer");
	json_t *before = json_deep_copy(job);
	ds_report *r;
	const char *msg;

	(void)state;
	assert_int_equal(ds_report_new(&r), 0);
	assert_int_equal(ds_dra_map_workload(ds_target_config_dra(one), job, r), -EINVAL);
	assert_true(json_equal(job, before));
	msg = ds_report_get(r, 0)->message;
	assert_non_null(strstr(msg, "shared with spec.scheduling.resourceClaims"));
	assert_non_null(strstr(msg, "resourceClaimTemplateMappings[1]"));
	assert_non_null(strstr(msg, "resourceClaimTemplateMappings[0]"));
	assert_non_null(strstr(msg, "cannot be split"));
	json_decref(before);
	ds_report_free(r);
	json_decref(docs);
	ds_target_config_free(one);
}

/* A Workload's podGroupTemplates are mapped by rules with objectType Workload. */
static void test_dra_mapping__workload_templates(void **state)
{
	ds_target_config *cfg =
	    dt_config("dra:\n  resourceClaimTemplateMappings:\n"
		      "  - {objectType: Workload, objectInstance: training, container: ALL, "
		      "resourceClaimTemplate: dr-gpu}\n");
	json_t *docs = resource("workload-v1alpha2.yaml");
	json_t *wl = dt_find(docs, "Workload", "training");
	json_t *pg = dt_find(docs, "PodGroup", "training-workers-0");
	ds_report *r;

	(void)state;
	assert_int_equal(ds_report_new(&r), 0);
	assert_int_equal(ds_dra_map_group(ds_target_config_dra(cfg), wl, r), 1);
	assert_string_equal(
	    dt_str(wl, "/spec/podGroupTemplates/0/resourceClaims/0/resourceClaimTemplateName"),
	    "dr-gpu");
	/* objectType Workload does not name the PodGroups. */
	assert_int_equal(ds_dra_map_group(ds_target_config_dra(cfg), pg, r), 0);
	ds_report_free(r);
	json_decref(docs);
	ds_target_config_free(cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_dra_mapping__podgroup_rule_maps_group_and_members),
	    cmocka_unit_test(test_dra_mapping__member_rule_disagreeing_with_group_is_an_error),
	    cmocka_unit_test(test_dra_mapping__group_follows_member_rule),
	    cmocka_unit_test(test_dra_mapping__members_disagreeing_is_the_groups_error),
	    cmocka_unit_test(test_dra_mapping__workload_refs_follow_the_group),
	    cmocka_unit_test(test_dra_mapping__job_scheduling_claims_follow_the_pods),
	    cmocka_unit_test(test_dra_mapping__job_shared_claim_cannot_be_split),
	    cmocka_unit_test(test_dra_mapping__workload_templates),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
