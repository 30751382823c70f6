/*
 * A PodGroup's claim follows its member (issue 24), as users run the pair:
 * the shipped RBAC, drasync-target run (migrate) and drasync-source run
 * (watch) as processes on their ServiceAccount tokens (tu_e2e.h). Both ends
 * are the gated 1.37 cluster (fixture kube_workload: GenericWorkload,
 * DRAWorkloadResourceClaims, scheduling.k8s.io/v1beta1), the only one that
 * serves PodGroups: the source namespace maps to another namespace there.
 *
 * The source namespace holds a PodGroup whose claim, made from template
 * shared-gpu, is shared by the pods of its only member, Deployment group-1
 * (two replicas), and a template dr-gpu. The target's one rule names the
 * Deployment only (`Deployment group-1 -> dr-gpu`, the rule a user writes
 * whose object types have no PodGroup); no rule names the group. What the
 * user sees on the target: the PodGroup and the Deployment both naming dr-gpu;
 * both pods Running, sharing the one claim the target made for the group,
 * from dr-gpu (its request), allocated on the target's devices of
 * gpu.example.com on the pods' node and reserved for the group; the group's
 * rewrite in the importer's log, saying which member's rule it follows (the
 * member named in the target namespace, as the line's object is).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dstest.h"
#include "testutil.h"
#include "tu_e2e.h"
#include "tu_kube.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DRIVER "gpu.example.com"
#define SCHED "scheduling.k8s.io/v1beta1"
#define RES "resource.k8s.io/v1"
#define WAIT_MS 60000

static tu_pair P; /* disposed by teardown(), after a failure too */

static void create_source(tu_pair *p)
{
	const char *ns = p->src_ns;

	for (int i = 0; i < 2; i++)
		tu_kube_create(
		    p->src,
		    tu_kube_doc("apiVersion: " RES "\nkind: ResourceClaimTemplate\n"
				"metadata: {name: %s, namespace: %s}\n"
				"spec:\n  spec:\n    devices:\n      requests:\n"
				"      - name: %s\n        exactly: {deviceClassName: " DRIVER
				"}\n",
				i ? "dr-gpu" : "shared-gpu", ns, i ? "dr" : "gpu"));
	tu_kube_create(p->src, tu_kube_doc("apiVersion: " SCHED "\nkind: PodGroup\n"
					   "metadata: {name: trainers, namespace: %s}\n"
					   "spec:\n  schedulingPolicy: {basic: {}}\n"
					   "  resourceClaims:\n"
					   "  - {name: shared-gpu, resourceClaimTemplateName: "
					   "shared-gpu}\n",
					   ns));
	tu_kube_create(
	    p->src,
	    tu_kube_doc("apiVersion: apps/v1\nkind: Deployment\n"
			"metadata: {name: group-1, namespace: %s}\n"
			"spec:\n  replicas: 2\n"
			"  selector: {matchLabels: {app: group-1}}\n"
			"  template:\n    metadata: {labels: {app: group-1}}\n"
			"    spec:\n"
			"      schedulingGroup: {podGroupName: trainers}\n"
			"      containers:\n"
			"      - name: ctr\n        image: registry.k8s.io/pause:3.10\n"
			"        resources: {claims: [{name: shared-gpu}]}\n"
			"      resourceClaims:\n"
			"      - {name: shared-gpu, resourceClaimTemplateName: shared-gpu}\n",
			ns));
}

/*
 * The target's PodGroup once its entry names template `tmpl`: the group may be
 * applied before its member's record is in the target's ledger, with the
 * source's template, and then re-created once the member maps it.
 */
static json_t *wait_group(tu_pair *p, const char *tmpl)
{
	for (long long end = tu_now_ms() + WAIT_MS;; tu_msleep(300)) {
		json_t *pg = tu_e2e_get(p->dst, SCHED, "PodGroup", p->dst_ns, "trainers");
		const char *t = dt_str(pg, "/spec/resourceClaims/0/resourceClaimTemplateName");

		if (t && strcmp(t, tmpl) == 0)
			return pg;
		if (tu_now_ms() > end) {
			char *log = tu_site_run_log(&p->site);

			fail_msg("the target's PodGroup does not name %s after %d ms: %s\nlog:\n%s",
				 tmpl, WAIT_MS, pg ? json_dumps(pg, JSON_INDENT(1)) : "(none)",
				 log);
		}
		json_decref(pg);
	}
}

/* The group's claim on the target: allocated on pod's node by DRIVER, reserved for the group. */
static void assert_group_claim(tu_pair *p, const char *name, const json_t *pod, const char *uid)
{
	json_t *c = tu_e2e_get(p->dst, RES, "ResourceClaim", p->dst_ns, name), *v;
	const char *node = dt_str(pod, "/spec/nodeName");
	size_t i;

	if (!c)
		fail_msg("the group's claim %s/%s is missing", p->dst_ns, name);
	/* made from the template the member's rule names: its request */
	assert_string_equal(dt_str(c, "/spec/devices/requests/0/name"), "dr");
	if (json_array_size(dt_get(c, "/status/allocation/devices/results")) != 1)
		fail_msg("claim %s is not allocated one device: %s", name,
			 json_dumps(c, JSON_INDENT(1)));
	json_array_foreach (dt_get(c, "/status/allocation/devices/results"), i, v) {
		assert_string_equal(dt_str(v, "/driver"), DRIVER);
		assert_string_equal(dt_str(v, "/pool"), node);
		assert_string_equal(dt_str(v, "/request"), "dr");
	}
	assert_string_equal(dt_str(c, "/status/reservedFor/0/resource"), "podgroups");
	assert_string_equal(dt_str(c, "/status/reservedFor/0/name"), "trainers");
	assert_string_equal(dt_str(c, "/status/reservedFor/0/uid"), uid);
	json_decref(c);
}

static void test_e2e_group_claims__member_rule_maps_the_group_pods_run_on_its_claim(void **state)
{
	tu_pair *const p = &P;
	json_t *pg, *d, *pods, *pod;
	const char *claim = NULL;
	char *log, line[700], uid[80];
	size_t i;

	(void)state;
	tu_pair_init(p, "e2eg", "DS_KUBECONFIG_WORKLOAD", "DS_KUBECONFIG_WORKLOAD", "prod-east",
		     "mode: migrate\n"
		     "dra:\n  resourceClaimTemplateMappings:\n"
		     "  - {objectType: Deployment, objectInstance: group-1, container: ALL,\n"
		     "     resourceClaimTemplate: dr-gpu}\n",
		     NULL);
	create_source(p);
	tu_pair_target_start(p);
	tu_pair_source_start(p, NULL);

	/* The group and its member name the template the member's rule gives. */
	pg = wait_group(p, "dr-gpu");
	assert_string_equal(dt_str(pg, "/spec/resourceClaims/0/name"), "shared-gpu");
	json_decref(pg);
	d = tu_e2e_wait_get(p->dst, "apps/v1", "Deployment", p->dst_ns, "group-1", WAIT_MS,
			    &p->site);
	assert_string_equal(
	    dt_str(d, "/spec/template/spec/resourceClaims/0/resourceClaimTemplateName"), "dr-gpu");
	assert_string_equal(dt_str(d, "/spec/template/spec/resourceClaims/0/name"), "shared-gpu");
	assert_string_equal(dt_str(d, "/spec/template/spec/schedulingGroup/podGroupName"),
			    "trainers");
	assert_int_equal(json_integer_value(dt_get(d, "/spec/replicas")), 2);
	json_decref(d);

	/* Both pods Running on the group's one claim, made on the target from dr-gpu. */
	pods = tu_e2e_wait_running(p->dst, p->dst_ns, "app=group-1", 2, 90000, &p->site);
	for (long long end = tu_now_ms() + WAIT_MS;; tu_msleep(300)) {
		pg = tu_e2e_get(p->dst, SCHED, "PodGroup", p->dst_ns, "trainers");
		claim = dt_str(pg, "/status/resourceClaimStatuses/0/resourceClaimName");
		if (claim)
			break;
		if (tu_now_ms() > end)
			fail_msg("the target's PodGroup has no claim after %d ms: %s", WAIT_MS,
				 pg ? json_dumps(pg, JSON_INDENT(1)) : "(gone)");
		json_decref(pg);
	}
	snprintf(uid, sizeof(uid), "%s", dt_str(pg, "/metadata/uid"));
	json_array_foreach (pods, i, pod) {
		const char *rc = dt_str(pod, "/status/resourceClaimStatuses/0/resourceClaimName");

		if (!rc || strcmp(rc, claim) != 0)
			fail_msg("pod %s uses claim %s, not the group's %s",
				 dt_str(pod, "/metadata/name"), rc ? rc : "(none)", claim);
		assert_string_equal(dt_str(pod, "/spec/schedulingGroup/podGroupName"), "trainers");
		assert_group_claim(p, claim, pod, uid);
	}
	json_decref(pg);
	json_decref(pods);
	/* One claim in the target namespace: the group's (none per pod, none copied). */
	pods = tu_e2e_list(p->dst, RES, "ResourceClaim", p->dst_ns, NULL);
	assert_int_equal(json_array_size(pods), 1);
	json_decref(pods);

	/* The importer says what it did to the group, and whose rule it followed. */
	log = tu_site_run_log(&p->site);
	snprintf(line, sizeof(line),
		 "event=mapping type=rewrite object=\"PodGroup %s/trainers\" container=ALL "
		 "entry=shared-gpu from=\"resourceClaimTemplateName=shared-gpu\" "
		 "to=\"resourceClaimTemplateName=dr-gpu\" detail=\"(rule "
		 "dra.resourceClaimTemplateMappings[0] of its member Deployment %s/group-1, "
		 "spec.resourceClaims)\"",
		 p->dst_ns, p->dst_ns);
	tu_e2e_assert_log("target log", log, line, true);
	tu_e2e_assert_log("target log", log, "state=failed", false);
	tu_e2e_assert_log("target log", log, "Forbidden", false);
	tu_e2e_assert_log("target log", log, "forbidden", false);
	free(log);
	log = tu_site_source_run_log(&p->site);
	tu_e2e_assert_log("source log", log, "level=error", false);
	tu_e2e_assert_log("source log", log, "forbidden", false);
	free(log);

	tu_site_source_sigterm(&p->site);
	tu_site_agent_sigterm(&p->site);
}

static int teardown(void **state)
{
	(void)state;
	if (P.src)
		tu_pair_dispose(&P);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(
		test_e2e_group_claims__member_rule_maps_the_group_pods_run_on_its_claim, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
