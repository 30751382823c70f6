/*
 * Workload-level DRA through the applier against real 1.37 control planes: a
 * PodGroup whose template claim two Deployments share, on the gated cluster
 * (fixture kube_workload: GenericWorkload, DRAWorkloadResourceClaims,
 * scheduling.k8s.io/v1beta1) and on the default one (kube_v1, gates off),
 * where the server drops what it does not serve; and a pod that keeps an
 * extended resource a target DeviceClass serves (KEP-5004).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/applier.h"
#include "drasync/k8s_object.h"
#include "drasync/kube_client.h"
#include "drasync/object_state.h"
#include "drasync/selection.h"
#include "dstest.h"
#include "testutil.h"
#include "tu_apply.h"
#include "tu_kube.h"
#include "tu_ledger.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SOURCE "prod-east"
#define WAIT_MS 60000

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The manifests of tests/resources/workload-claims/name, moved to the source namespace. */
static json_t *resource(const char *name, const char *ns)
{
	char path[1024];
	json_t *docs, *d;
	size_t i;

	snprintf(path, sizeof(path), "%s/workload-claims/%s", tu_env("DS_RESOURCES"), name);
	docs = dt_load_file(path);
	json_array_foreach (docs, i, d)
		assert_int_equal(ds_obj_set_namespace(d, ns), 0);
	return docs;
}

static void commit_all(tu_apply *e, json_t *docs)
{
	json_t *v[16];
	size_t i, n = 0;
	json_t *d;

	json_array_foreach (docs, i, d)
		v[n++] = d;
	tu_apply_commit(e, v, n);
}

static void commit_namespace(tu_apply *e)
{
	tu_apply_commit1(
	    e, tu_kube_doc("apiVersion: v1\nkind: Namespace\nmetadata: {name: '%s'}\n", e->src));
}

static void assert_state(tu_apply *e, const char *api, const char *kind, const char *name,
			 enum ds_apply_state want, const char *reason_part)
{
	ds_object_state *st = NULL;
	ds_object_state_row r;
	ds_err err = {0};
	char key[600];

	ds_object_state_key(api, kind, e->src, name, key, sizeof(key));
	assert_int_equal(ds_object_state_open(&st, e->path, &err), 0);
	if (ds_object_state_get(st, SOURCE, key, &r, &err) < 0)
		fail_msg("row %s: %s", key, err.msg);
	ds_object_state_free(st);
	if (r.state != want || (reason_part && (!r.reason || !strstr(r.reason, reason_part))))
		fail_msg("%s %s: state %s (%s), want %s with reason containing '%s'", kind, name,
			 ds_apply_state_name(r.state), r.reason ? r.reason : "no reason",
			 ds_apply_state_name(want), reason_part ? reason_part : "");
	ds_object_state_row_dispose(&r);
}

/* A list of kind in the target namespace (caller decrefs). */
static json_t *list(tu_apply *e, const char *api, const char *kind)
{
	struct ds_kube_resource r = tu_kube_resource(e->k, api, kind);
	ds_kube_error ke;
	json_t *out = NULL;
	char b[800];

	if (ds_kube_list(e->k, &r, e->dst, NULL, &out, NULL, &ke) < 0)
		fail_msg("list %s: %s", kind, ds_kube_error_format(&ke, b, sizeof(b)));
	return out;
}

static json_t *get(tu_apply *e, const char *api, const char *kind, const char *name)
{
	struct ds_kube_resource r = tu_kube_resource(e->k, api, kind);
	ds_kube_error ke;
	json_t *obj = NULL;

	if (ds_kube_get(e->k, &r, r.namespaced ? e->dst : NULL, name, NULL, &obj, &ke) < 0)
		return NULL;
	return obj;
}

/* The pods of Deployment d (label app=d) that share claim `claim`, scheduled. */
static size_t pods_sharing(tu_apply *e, const char *deployment, const char *claim)
{
	json_t *pods = list(e, "v1", "Pod"), *p;
	size_t i, n = 0;

	json_array_foreach (json_object_get(pods, "items"), i, p) {
		const char *app = ds_obj_label(p, "app");
		const char *rc = dt_str(p, "/status/resourceClaimStatuses/0/resourceClaimName");

		if (app && strcmp(app, deployment) == 0 && rc && strcmp(rc, claim) == 0 &&
		    dt_str(p, "/spec/nodeName"))
			n++;
	}
	json_decref(pods);
	return n;
}

/*
 * Gated target: the rule naming the PodGroup moves the group and both members
 * to another template together; the target's controller makes one claim for
 * the group from it, the scheduler allocates it, and the pods of both
 * Deployments share it.
 */
static void test_itest_group_claims__podgroup_claim_shared_on_gated_cluster(void **state)
{
	tu_apply_opts o = {
	    .kubeconfig_env = "DS_KUBECONFIG_WORKLOAD",
	    .dra_yaml = "  resourceClaimTemplateMappings:\n"
			"  - {objectType: PodGroup, objectInstance: trainers, container: ALL,\n"
			"     source: shared-gpu, resourceClaimTemplate: dr-gpu}\n"};
	tu_apply *e = tu_apply_new("group-claims", &o);
	json_t *docs = resource("podgroup-deployments.yaml", e->src);
	json_t *pg = NULL, *claims = NULL;
	const char *claim = NULL;
	long long deadline;

	(void)state;
	commit_namespace(e);
	tu_apply_commit1(e, tu_kube_doc("apiVersion: resource.k8s.io/v1\n"
					"kind: ResourceClaimTemplate\n"
					"metadata: {name: dr-gpu, namespace: '%s'}\n"
					"spec:\n  spec:\n    devices:\n      requests:\n"
					"      - name: dr\n        exactly: {deviceClassName: "
					"gpu.nvidia.com}\n",
					e->src));
	commit_all(e, docs);
	tu_apply_settle(e);
	assert_state(e, "scheduling.k8s.io/v1beta1", "PodGroup", "trainers", DS_APPLY_APPLIED,
		     NULL);
	assert_state(e, "apps/v1", "Deployment", "trainer-a", DS_APPLY_APPLIED, NULL);
	assert_state(e, "apps/v1", "Deployment", "trainer-b", DS_APPLY_APPLIED, NULL);

	/* The group and its members name one template on the target. */
	pg = get(e, "scheduling.k8s.io/v1beta1", "PodGroup", "trainers");
	assert_non_null(pg);
	assert_string_equal(dt_str(pg, "/spec/resourceClaims/0/resourceClaimTemplateName"),
			    "dr-gpu");
	for (int i = 0; i < 2; i++) {
		json_t *d = get(e, "apps/v1", "Deployment", i ? "trainer-b" : "trainer-a");
		assert_string_equal(
		    dt_str(d, "/spec/template/spec/resourceClaims/0/resourceClaimTemplateName"),
		    "dr-gpu");
		assert_string_equal(dt_str(d, "/spec/template/spec/schedulingGroup/podGroupName"),
				    "trainers");
		json_decref(d);
	}
	json_decref(pg);
	pg = NULL;

	/* One claim, the group's, allocated, and the pods of both share it. */
	deadline = now_ms() + WAIT_MS;
	for (;;) {
		json_decref(pg);
		pg = get(e, "scheduling.k8s.io/v1beta1", "PodGroup", "trainers");
		claim = dt_str(pg, "/status/resourceClaimStatuses/0/resourceClaimName");
		if (claim && pods_sharing(e, "trainer-a", claim) == 1 &&
		    pods_sharing(e, "trainer-b", claim) == 1)
			break;
		if (now_ms() > deadline)
			fail_msg(
			    "the pods of trainer-a and trainer-b do not share the group's claim "
			    "(%s) after %d ms",
			    claim ? claim : "none yet", WAIT_MS);
		tu_msleep(300);
	}
	claims = list(e, "resource.k8s.io/v1", "ResourceClaim");
	assert_int_equal(json_array_size(json_object_get(claims, "items")), 1);
	{
		json_t *c = json_array_get(json_object_get(claims, "items"), 0);
		ds_err why = {0};

		assert_string_equal(ds_obj_name(c), claim);
		/* As the exporter hands it over: a List's items carry no kind. */
		json_object_set_new(c, "apiVersion", json_string("resource.k8s.io/v1"));
		json_object_set_new(c, "kind", json_string("ResourceClaim"));
		assert_string_equal(dt_str(c, "/spec/devices/requests/0/name"), "dr");
		assert_non_null(dt_str(c, "/status/allocation/devices/results/0/device"));
		assert_string_equal(dt_str(c, "/status/reservedFor/0/resource"), "podgroups");
		/* Made by the target for the group: never replicated back. */
		assert_int_equal(ds_selection_check(c, false, &why), 0);
		if (!strstr(why.msg, "PodGroup trainers"))
			fail_msg("the group's claim is skipped for another reason: %s", why.msg);
	}
	json_decref(claims);
	json_decref(pg);
	json_decref(docs);
	tu_apply_free(e);
}

/*
 * Issue 24 on the gated cluster: a rule that names only the members (objectType
 * Deployment) maps the group. The PodGroup arrives first, alone: applied with
 * its own claim. Its members arrive later: the group is decided again with them
 * before they are applied (they wait for it), its immutable spec.resourceClaims
 * changed, so it is deleted and created again; then the pods of both members
 * share the new group's claim, made from the mapped template, and the old
 * group's claim is gone with it.
 */
static void test_itest_group_claims__member_rule_maps_group_late_members_recreate_it(void **state)
{
	tu_apply_opts o = {.kubeconfig_env = "DS_KUBECONFIG_WORKLOAD",
			   .dra_yaml =
			       "  resourceClaimTemplateMappings:\n"
			       "  - {objectType: Deployment, objectInstance: ALL, container: ALL,\n"
			       "     resourceClaimTemplate: dr-gpu}\n"};
	tu_apply *e = tu_apply_new("group-follow", &o);
	json_t *docs = resource("podgroup-deployments.yaml", e->src);
	json_t *pg = NULL, *claims, *c;
	char uid[100];
	const char *claim = NULL;
	long long deadline;
	size_t i;

	(void)state;
	commit_namespace(e);
	tu_apply_commit1(e, tu_kube_doc("apiVersion: resource.k8s.io/v1\n"
					"kind: ResourceClaimTemplate\n"
					"metadata: {name: dr-gpu, namespace: '%s'}\n"
					"spec:\n  spec:\n    devices:\n      requests:\n"
					"      - name: dr\n        exactly: {deviceClassName: "
					"gpu.nvidia.com}\n",
					e->src));
	/* The template the source's group names, and the group without its members. */
	tu_apply_commit1(e, json_incref(dt_find(docs, "ResourceClaimTemplate", "shared-gpu")));
	tu_apply_commit1(e, json_incref(dt_find(docs, "PodGroup", "trainers")));
	tu_apply_settle(e);
	assert_state(e, "scheduling.k8s.io/v1beta1", "PodGroup", "trainers", DS_APPLY_APPLIED,
		     NULL);
	pg = get(e, "scheduling.k8s.io/v1beta1", "PodGroup", "trainers");
	assert_non_null(pg);
	assert_string_equal(dt_str(pg, "/spec/resourceClaims/0/resourceClaimTemplateName"),
			    "shared-gpu");
	snprintf(uid, sizeof(uid), "%s", dt_str(pg, "/metadata/uid"));
	json_decref(pg);

	/* The members arrive: the rule naming them maps the group with them. */
	tu_apply_commit1(e, json_incref(dt_find(docs, "Deployment", "trainer-a")));
	tu_apply_commit1(e, json_incref(dt_find(docs, "Deployment", "trainer-b")));
	tu_apply_settle(e);
	pg = get(e, "scheduling.k8s.io/v1beta1", "PodGroup", "trainers");
	assert_non_null(pg);
	assert_string_equal(dt_str(pg, "/spec/resourceClaims/0/resourceClaimTemplateName"),
			    "dr-gpu");
	assert_string_equal(dt_str(pg, "/spec/resourceClaims/0/name"), "shared-gpu");
	assert_string_not_equal(dt_str(pg, "/metadata/uid"), uid);
	json_decref(pg);
	assert_int_equal(tu_apply_stats(e).recreated, 1);
	assert_state(e, "scheduling.k8s.io/v1beta1", "PodGroup", "trainers", DS_APPLY_APPLIED,
		     "deleted and re-created (its spec.resourceClaims changed");
	assert_state(e, "apps/v1", "Deployment", "trainer-a", DS_APPLY_APPLIED, NULL);
	assert_state(e, "apps/v1", "Deployment", "trainer-b", DS_APPLY_APPLIED, NULL);
	pg = NULL;

	/* The pods of both members share the new group's claim, from the mapped template. */
	deadline = now_ms() + WAIT_MS;
	for (;;) {
		json_decref(pg);
		pg = get(e, "scheduling.k8s.io/v1beta1", "PodGroup", "trainers");
		claim = dt_str(pg, "/status/resourceClaimStatuses/0/resourceClaimName");
		if (claim && pods_sharing(e, "trainer-a", claim) == 1 &&
		    pods_sharing(e, "trainer-b", claim) == 1)
			break;
		if (now_ms() > deadline)
			fail_msg("the members' pods do not share the re-created group's claim (%s) "
				 "after %d ms",
				 claim ? claim : "none yet", WAIT_MS);
		tu_msleep(300);
	}
	c = get(e, "resource.k8s.io/v1", "ResourceClaim", claim);
	assert_non_null(c);
	assert_string_equal(dt_str(c, "/spec/devices/requests/0/name"), "dr");
	json_decref(c);
	/* The old group's claim (from shared-gpu, request "gpu") went with it. */
	deadline = now_ms() + WAIT_MS;
	for (;;) {
		size_t old = 0;
		json_t *it;

		claims = list(e, "resource.k8s.io/v1", "ResourceClaim");
		json_array_foreach (json_object_get(claims, "items"), i, it)
			if (strcmp(dt_str(it, "/spec/devices/requests/0/name"), "dr") != 0)
				old++;
		json_decref(claims);
		if (old == 0)
			break;
		if (now_ms() > deadline)
			fail_msg("%zu claim(s) of the old group still there after %d ms", old,
				 WAIT_MS);
		tu_msleep(300);
	}
	json_decref(pg);
	json_decref(docs);
	tu_apply_free(e);
}

/*
 * Job.spec.scheduling (gate WorkloadWithJob): the Job's rule moves the
 * scheduling claim and both containers' entry together; the target's Job
 * controller makes the Workload and PodGroup (owned by the Job, never
 * replicated) and the two pods share the group's claim, made from the new
 * template.
 */
static void test_itest_group_claims__job_scheduling_claim_shared(void **state)
{
	tu_apply_opts o = {.kubeconfig_env = "DS_KUBECONFIG_WORKLOAD",
			   .dra_yaml =
			       "  resourceClaimTemplateMappings:\n"
			       "  - {objectType: Job, objectInstance: trainer, container: ALL,\n"
			       "     resourceClaimTemplate: dr-gpu}\n"};
	tu_apply *e = tu_apply_new("group-claims", &o);
	json_t *docs = resource("job-scheduling.yaml", e->src);
	json_t *job, *pods = NULL, *p;
	const char *claim = NULL;
	long long deadline;
	size_t i, sharing = 0;

	(void)state;
	commit_namespace(e);
	tu_apply_commit1(e, tu_kube_doc("apiVersion: resource.k8s.io/v1\n"
					"kind: ResourceClaimTemplate\n"
					"metadata: {name: dr-gpu, namespace: '%s'}\n"
					"spec:\n  spec:\n    devices:\n      requests:\n"
					"      - name: dr\n        exactly: {deviceClassName: "
					"gpu.example.com}\n",
					e->src));
	commit_all(e, docs);
	tu_apply_settle(e);
	assert_state(e, "batch/v1", "Job", "trainer", DS_APPLY_APPLIED, NULL);
	job = get(e, "batch/v1", "Job", "trainer");
	assert_non_null(job);
	assert_string_equal(
	    dt_str(job, "/spec/scheduling/resourceClaims/0/resourceClaimTemplateName"), "dr-gpu");
	assert_string_equal(
	    dt_str(job, "/spec/template/spec/resourceClaims/0/resourceClaimTemplateName"),
	    "dr-gpu");
	json_decref(job);
	deadline = now_ms() + WAIT_MS;
	for (;;) {
		json_decref(pods);
		pods = list(e, "v1", "Pod");
		sharing = 0;
		claim = NULL;
		json_array_foreach (json_object_get(pods, "items"), i, p) {
			const char *rc =
			    dt_str(p, "/status/resourceClaimStatuses/0/resourceClaimName");
			if (!rc || !dt_str(p, "/spec/nodeName") ||
			    !dt_str(p, "/spec/schedulingGroup/podGroupName"))
				continue;
			if (!claim)
				claim = rc;
			if (strcmp(claim, rc) == 0)
				sharing++;
		}
		if (sharing == 2)
			break;
		if (now_ms() > deadline)
			fail_msg("the Job's two pods do not share one group claim after %d ms",
				 WAIT_MS);
		tu_msleep(300);
	}
	{
		json_t *c = get(e, "resource.k8s.io/v1", "ResourceClaim", claim);
		json_t *groups = list(e, "scheduling.k8s.io/v1beta1", "PodGroup");
		json_t *g = json_array_get(json_object_get(groups, "items"), 0);
		ds_err why = {0};

		assert_non_null(c);
		assert_string_equal(dt_str(c, "/spec/devices/requests/0/name"), "dr");
		assert_string_equal(dt_str(c, "/metadata/ownerReferences/0/kind"), "PodGroup");
		/* The Job's own PodGroup is the target's: never replicated. */
		assert_non_null(g);
		json_object_set_new(g, "apiVersion", json_string("scheduling.k8s.io/v1beta1"));
		json_object_set_new(g, "kind", json_string("PodGroup"));
		assert_int_equal(ds_selection_check(g, false, &why), 0);
		assert_non_null(strstr(why.msg, "controlled by Job trainer"));
		json_decref(groups);
		json_decref(c);
	}
	json_decref(pods);
	json_decref(docs);
	tu_apply_free(e);
}

/*
 * A rule set that maps one member of the group elsewhere: nothing of the group
 * is applied (the members are found in the ledger), each says why with both rules.
 */
static void test_itest_group_claims__disagreeing_member_holds_the_whole_group(void **state)
{
	tu_apply_opts o = {
	    .kubeconfig_env = "DS_KUBECONFIG_WORKLOAD",
	    .dra_yaml = "  resourceClaimTemplateMappings:\n"
			"  - {objectType: Deployment, objectInstance: trainer-b, container: ALL,\n"
			"     resourceClaimTemplate: big-gpu}\n"};
	tu_apply *e = tu_apply_new("group-claims", &o);
	json_t *docs = resource("podgroup-deployments.yaml", e->src);

	(void)state;
	commit_namespace(e);
	commit_all(e, docs);
	tu_apply_settle(e);
	assert_state(e, "scheduling.k8s.io/v1beta1", "PodGroup", "trainers", DS_APPLY_FAILED,
		     "nothing of PodGroup");
	assert_state(e, "apps/v1", "Deployment", "trainer-a", DS_APPLY_FAILED,
		     "nothing of PodGroup");
	assert_state(e, "apps/v1", "Deployment", "trainer-b", DS_APPLY_FAILED,
		     "rule dra.resourceClaimTemplateMappings[0]");
	assert_null(get(e, "scheduling.k8s.io/v1beta1", "PodGroup", "trainers"));
	assert_null(get(e, "apps/v1", "Deployment", "trainer-a"));
	/* What the group does not share is applied. */
	assert_state(e, "resource.k8s.io/v1", "ResourceClaimTemplate", "shared-gpu",
		     DS_APPLY_APPLIED, NULL);
	json_decref(docs);
	tu_apply_free(e);
}

/*
 * Default target (gates off, no scheduling.k8s.io Workload API): the PodGroup
 * is refused as not served, and each Deployment, applied because the rule set
 * does not require its objects, fails naming the field the server dropped and
 * why: nothing silently lost.
 */
static void test_itest_group_claims__ungated_target_names_dropped_fields(void **state)
{
	tu_apply_opts o = {.dra_yaml = "  requireTargetObjects: false\n"};
	tu_apply *e = tu_apply_new("group-claims", &o);
	json_t *docs = resource("podgroup-deployments.yaml", e->src);
	json_t *d;

	(void)state;
	commit_namespace(e);
	commit_all(e, docs);
	tu_apply_settle(e);
	assert_state(e, "resource.k8s.io/v1", "ResourceClaimTemplate", "shared-gpu",
		     DS_APPLY_APPLIED, NULL);
	assert_state(e, "scheduling.k8s.io/v1beta1", "PodGroup", "trainers", DS_APPLY_FAILED,
		     "does not serve");
	for (int i = 0; i < 2; i++) {
		const char *name = i ? "trainer-b" : "trainer-a";

		assert_state(e, "apps/v1", "Deployment", name, DS_APPLY_FAILED,
			     "the target dropped spec.template.spec.schedulingGroup");
		assert_state(e, "apps/v1", "Deployment", name, DS_APPLY_FAILED, "GenericWorkload");
		/* It really is there without the field. */
		d = get(e, "apps/v1", "Deployment", name);
		assert_non_null(d);
		assert_null(dt_get(d, "/spec/template/spec/schedulingGroup"));
		json_decref(d);
	}
	json_decref(docs);
	tu_apply_free(e);

	/* Allowed loss: the same Deployment is applied. */
	o.dra_yaml = "  requireTargetObjects: false\n"
		     "  allowFieldLoss: [spec.template.spec.schedulingGroup]\n";
	e = tu_apply_new("group-claims", &o);
	docs = resource("podgroup-deployments.yaml", e->src);
	commit_namespace(e);
	commit_all(e, docs);
	tu_apply_settle(e);
	assert_state(e, "apps/v1", "Deployment", "trainer-a", DS_APPLY_APPLIED, NULL);
	json_decref(docs);
	tu_apply_free(e);
}

/*
 * KEP-5004: a DeviceClass with extendedResourceName on the target serves a pod
 * that keeps the extended resource in its limits; drasync applies the pod as
 * it is (no conversion), says which class serves it, and the target's
 * scheduler makes and allocates the claim, which drasync never replicates.
 */
static void test_itest_group_claims__extended_resource_served_by_device_class(void **state)
{
	tu_apply_opts o = {.kubeconfig_env = "DS_KUBECONFIG_WORKLOAD"};
	tu_apply *e = tu_apply_new("extended", &o);
	char dc_name[160], res[160];
	json_t *pod = NULL;
	long long deadline;
	const char *claim;

	(void)state;
	snprintf(dc_name, sizeof(dc_name), "ext-%s.example.com", e->dst);
	snprintf(res, sizeof(res), "example.com/%s", e->dst);
	tu_kube_create(e->k,
		       tu_kube_doc("apiVersion: resource.k8s.io/v1\nkind: DeviceClass\n"
				   "metadata: {name: %s}\nspec:\n  selectors:\n"
				   "  - cel: {expression: \"device.driver == 'gpu.example.com'\"}\n"
				   "  extendedResourceName: %s\n",
				   dc_name, res));
	commit_namespace(e);
	tu_apply_commit1(e, tu_kube_doc("apiVersion: v1\nkind: Pod\n"
					"metadata: {name: ext, namespace: '%s'}\n"
					"spec:\n  containers:\n  - name: c\n    image: x\n"
					"    resources:\n      limits: {%s: 1}\n",
					e->src, res));
	tu_apply_settle(e);
	{
		char want[500];
		snprintf(want, sizeof(want), "container c keeps %s: DeviceClass %s serves it", res,
			 dc_name);
		assert_state(e, "v1", "Pod", "ext", DS_APPLY_APPLIED, want);
	}
	deadline = now_ms() + WAIT_MS;
	for (;;) {
		json_decref(pod);
		pod = get(e, "v1", "Pod", "ext");
		claim = dt_str(pod, "/status/extendedResourceClaimStatus/resourceClaimName");
		if (claim && dt_str(pod, "/spec/nodeName"))
			break;
		if (now_ms() > deadline)
			fail_msg("pod ext was not scheduled with an extended-resource claim");
		tu_msleep(300);
	}
	/* Applied without conversion: the limit kept, no claim entry added. */
	assert_non_null(dt_get(pod, "/spec/containers/0/resources/limits"));
	assert_null(dt_get(pod, "/spec/resourceClaims"));
	{
		json_t *c = get(e, "resource.k8s.io/v1", "ResourceClaim", claim);
		ds_err why = {0};

		assert_non_null(c);
		assert_non_null(dt_str(c, "/status/allocation/devices/results/0/device"));
		assert_int_equal(ds_selection_check(c, false, &why), 0);
		assert_non_null(strstr(why.msg, "extended-resource-claim"));
		json_decref(c);
	}
	json_decref(pod);
	tu_kube_delete(e->k, "resource.k8s.io/v1", "DeviceClass", NULL, dc_name);
	tu_apply_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_itest_group_claims__podgroup_claim_shared_on_gated_cluster),
	    cmocka_unit_test(
		test_itest_group_claims__member_rule_maps_group_late_members_recreate_it),
	    cmocka_unit_test(test_itest_group_claims__job_scheduling_claim_shared),
	    cmocka_unit_test(test_itest_group_claims__disagreeing_member_holds_the_whole_group),
	    cmocka_unit_test(test_itest_group_claims__ungated_target_names_dropped_fields),
	    cmocka_unit_test(test_itest_group_claims__extended_resource_served_by_device_class),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
