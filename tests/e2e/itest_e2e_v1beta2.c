/*
 * A resource.k8s.io/v1beta2 pair, as users run it: the shipped RBAC,
 * drasync-target run (migrate) and drasync-source run (watch) as processes
 * on their ServiceAccount tokens (tu_e2e.h). Both ends are the cluster of
 * fixture kube_v1beta2, which serves resource.k8s.io as Kubernetes 1.33 did
 * (v1beta2 the version clients prefer, no v1; v1beta1 beside it for the 1.33
 * scheduler): the source reads v1beta2, the target writes v1beta2, and the
 * source namespace maps to another namespace there.
 *
 * The source namespace holds, in v1beta2's shapes (requests under `exactly`
 * or `firstAvailable`), a claim whose request offers subrequests, a template,
 * a Pod using the claim and a Deployment using the template, all of class
 * gpu.nvidia.com, which the cluster has not (so the source's pods wait
 * there); the target maps it to gpu.example.com. What the user sees on the
 * target: the claim and the template in v1beta2, written by drasync as
 * v1beta2 (their managedFields), the class mapped in every request and
 * subrequest, nothing converted; both pods Running with their claims
 * allocated on the target's devices (the subrequest the scheduler chose named
 * in the allocation); the mapping in the importer's log.
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
#define API "resource.k8s.io/v1beta2"
#define WAIT_MS 60000

static tu_pair P; /* disposed by teardown(), after a failure too */

static void create_source(tu_pair *p)
{
	const char *ns = p->src_ns;

	tu_kube_create(p->src,
		       tu_kube_doc("apiVersion: " API "\nkind: ResourceClaim\n"
				   "metadata: {name: pick, namespace: %s}\n"
				   "spec:\n  devices:\n    requests:\n"
				   "    - name: gpu\n      firstAvailable:\n"
				   "      - name: huge\n        deviceClassName: gpu.nvidia.com\n"
				   "        selectors: [{cel: {expression: \"device.capacity['"
				   "gpu.example.com'].memory.compareTo(quantity('1Ti')) >= 0\"}}]\n"
				   "      - {name: any, deviceClassName: gpu.nvidia.com}\n",
				   ns));
	tu_kube_create(p->src,
		       tu_kube_doc("apiVersion: " API "\nkind: ResourceClaimTemplate\n"
				   "metadata: {name: one-gpu, namespace: %s}\n"
				   "spec:\n  spec:\n    devices:\n      requests:\n"
				   "      - name: gpu\n        exactly:\n"
				   "          deviceClassName: gpu.nvidia.com\n"
				   "          allocationMode: ExactCount\n          count: 1\n",
				   ns));
	tu_kube_create(p->src,
		       tu_kube_doc("apiVersion: v1\nkind: Pod\n"
				   "metadata: {name: solo, namespace: %s, labels: {app: solo}}\n"
				   "spec:\n  containers:\n"
				   "  - name: c\n    image: registry.k8s.io/pause:3.10\n"
				   "    resources: {claims: [{name: gpu}]}\n"
				   "  resourceClaims: [{name: gpu, resourceClaimName: pick}]\n",
				   ns));
	tu_kube_create(p->src,
		       tu_kube_doc("apiVersion: apps/v1\nkind: Deployment\n"
				   "metadata: {name: web, namespace: %s}\n"
				   "spec:\n  replicas: 1\n  selector: {matchLabels: {app: web}}\n"
				   "  template:\n    metadata: {labels: {app: web}}\n    spec:\n"
				   "      containers:\n"
				   "      - name: c\n        image: registry.k8s.io/pause:3.10\n"
				   "        resources: {claims: [{name: gpu}]}\n"
				   "      resourceClaims: [{name: gpu, resourceClaimTemplateName: "
				   "one-gpu}]\n",
				   ns));
}

/* The manager drasync wrote obj with this API version (what server-side apply records). */
static void assert_written_as(const json_t *obj, const char *api)
{
	json_t *mf = dt_get(obj, "/metadata/managedFields"), *m;
	size_t i, n = 0;

	json_array_foreach (mf, i, m) {
		const char *mgr = dt_str(m, "/manager");

		if (!mgr || strncmp(mgr, "drasync", 7) != 0)
			continue;
		assert_string_equal(dt_str(m, "/apiVersion"), api);
		n++;
	}
	if (n == 0)
		fail_msg("%s: no managedFields entry of drasync: %s", dt_str(obj, "/metadata/name"),
			 json_dumps(mf, JSON_INDENT(1)));
}

static void test_e2e_v1beta2__source_and_target_in_v1beta2(void **state)
{
	tu_pair *const p = &P;
	json_t *o, *pods, *pod;
	char *log, line[600];
	const char *sub;
	size_t i;

	(void)state;
	tu_pair_init(p, "e2eb2", "DS_KUBECONFIG_V1BETA2", "DS_KUBECONFIG_V1BETA2", "prod-east",
		     "mode: migrate\n"
		     "dra:\n  deviceClassMappings: [{from: gpu.nvidia.com, to: " DRIVER "}]\n",
		     NULL);
	create_source(p);
	tu_pair_target_start(p);
	tu_pair_source_start(p, NULL);

	/* In v1beta2, written as v1beta2, the class mapped in the request and each subrequest. */
	o = tu_e2e_wait_get(p->dst, API, "ResourceClaim", p->dst_ns, "pick", WAIT_MS, &p->site);
	assert_written_as(o, API);
	assert_string_equal(dt_str(o, "/spec/devices/requests/0/firstAvailable/0/name"), "huge");
	assert_string_equal(dt_str(o, "/spec/devices/requests/0/firstAvailable/0/deviceClassName"),
			    DRIVER);
	assert_non_null(dt_str(o, "/spec/devices/requests/0/firstAvailable/0/selectors/0/cel/"
				  "expression"));
	assert_string_equal(dt_str(o, "/spec/devices/requests/0/firstAvailable/1/deviceClassName"),
			    DRIVER);
	assert_null(dt_get(o, "/spec/devices/requests/0/exactly"));
	json_decref(o);
	o = tu_e2e_wait_get(p->dst, API, "ResourceClaimTemplate", p->dst_ns, "one-gpu", WAIT_MS,
			    &p->site);
	assert_written_as(o, API);
	assert_string_equal(dt_str(o, "/spec/spec/devices/requests/0/exactly/deviceClassName"),
			    DRIVER);
	assert_int_equal(
	    json_integer_value(dt_get(o, "/spec/spec/devices/requests/0/exactly/count")), 1);
	json_decref(o);

	/* Both pods Running on the target's devices. */
	pods = tu_e2e_wait_running(p->dst, p->dst_ns, "app=solo", 1, 90000, &p->site);
	assert_int_equal(tu_e2e_assert_pod_claims(p->dst, API, json_array_get(pods, 0), DRIVER), 1);
	json_decref(pods);
	pods = tu_e2e_wait_running(p->dst, p->dst_ns, "app=web", 1, 90000, &p->site);
	json_array_foreach (pods, i, pod)
		assert_int_equal(tu_e2e_assert_pod_claims(p->dst, API, pod, DRIVER), 1);
	json_decref(pods);
	/* No device has 1Ti: the scheduler took the second subrequest of the mapped claim. */
	o = tu_e2e_get(p->dst, API, "ResourceClaim", p->dst_ns, "pick");
	sub = dt_str(o, "/status/allocation/devices/results/0/request");
	assert_non_null(sub);
	assert_string_equal(sub, "gpu/any");
	json_decref(o);

	/* The importer's log: the mapping, and no conversion (v1beta2 on both ends). */
	log = tu_site_run_log(&p->site);
	snprintf(line, sizeof(line),
		 "event=mapping type=deviceclass object=\"ResourceClaim %s/pick\" container=\"\" "
		 "entry=gpu/any from=\"deviceClassName=gpu.nvidia.com\" to=" DRIVER,
		 p->dst_ns);
	tu_e2e_assert_log("target log", log, line, true);
	snprintf(line, sizeof(line),
		 "event=mapping type=deviceclass object=\"ResourceClaimTemplate %s/one-gpu\" "
		 "container=\"\" entry=gpu from=\"deviceClassName=gpu.nvidia.com\" to=" DRIVER,
		 p->dst_ns);
	tu_e2e_assert_log("target log", log, line, true);
	tu_e2e_assert_log("target log", log, "type=convert", false);
	tu_e2e_assert_log("target log", log, "state=failed", false);
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
	    cmocka_unit_test_teardown(test_e2e_v1beta2__source_and_target_in_v1beta2, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
