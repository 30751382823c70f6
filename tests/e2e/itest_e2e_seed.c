/*
 * The seed's DRA Mapping examples (shared/seeds/swift-dra-mapping.txt, SPEC
 * §3) as an operator runs them: the five rules exactly as the seed lists
 * them, in the target's TargetConfig; the ResourceClaims and
 * ResourceClaimTemplates they name made on the target beforehand by its
 * administrator (the seed's prerequisite 3); on the source (v1beta1
 * cluster) the workloads they describe: Pod test-pod1 whose gpu-container
 * uses a claim and a template, with a sidecar sharing the claim; Pods
 * test-pod2 (a template) and test-pod3 (a claim); Deployment gpu-app.
 * Both agents run as processes on the shipped RBAC's tokens, into the v1
 * cluster. Then the seed's step 7 on the target: the workloads exist, their
 * references name the mapped claims and templates, the pods are Running with
 * those claims allocated; and the mapping report in the importer's log.
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
#define DST_API "resource.k8s.io/v1"

static tu_pair P; /* disposed by teardown(), after a failure too */

/* The seed's rules as written there, and the class of the source's claims mapped. */
static const char seed_rules[] =
    "mode: migrate\n"
    "dra:\n"
    "  resourceClaimMappings:\n"
    "    - {objectType: Pod,        objectInstance: test-pod1, container: gpu-container, "
    "resourceClaim: gpu-rc-claim1}\n"
    "    - {objectType: Pod,        objectInstance: ALL,       container: ALL,           "
    "resourceClaim: gpu-rc-claim2}\n"
    "    - {objectType: Deployment, objectInstance: gpu-app,   container: ALL,           "
    "resourceClaim: gpu-rc-claim3}\n"
    "  resourceClaimTemplateMappings:\n"
    "    - {objectType: Pod, objectInstance: test-pod1, container: gpu-container, "
    "resourceClaimTemplate: gpu-rct1}\n"
    "    - {objectType: Pod, objectInstance: ALL,       container: ALL,           "
    "resourceClaimTemplate: gpu-rct2}\n"
    "  deviceClassMappings:\n"
    "    - {from: gpu.nvidia.com, to: " DRIVER "}\n";

static const char pause_image[] = "registry.k8s.io/pause:3.10";

/* The target's own claims and templates (v1), one device of the target's class each. */
static void create_target_objects(tu_pair *p)
{
	static const char *const claims[] = {"gpu-rc-claim1", "gpu-rc-claim2", "gpu-rc-claim3"};
	static const char *const templates[] = {"gpu-rct1", "gpu-rct2"};
	const char *req =
	    "{devices: {requests: [{name: gpu, exactly: {deviceClassName: " DRIVER "}}]}}";

	for (size_t i = 0; i < 3; i++)
		tu_kube_create(p->dst,
			       tu_kube_doc("apiVersion: " DST_API "\nkind: ResourceClaim\n"
					   "metadata: {name: %s, namespace: %s}\nspec: %s\n",
					   claims[i], p->dst_ns, req));
	for (size_t i = 0; i < 2; i++)
		tu_kube_create(
		    p->dst, tu_kube_doc("apiVersion: " DST_API "\nkind: ResourceClaimTemplate\n"
					"metadata: {name: %s, namespace: %s}\nspec: {spec: %s}\n",
					templates[i], p->dst_ns, req));
}

/* The source's workloads (v1beta1 cluster), their own claim and template of gpu.nvidia.com. */
static void create_source(tu_pair *p)
{
	const char *ns = p->src_ns;
	const char *req = "{devices: {requests: [{name: gpu, deviceClassName: gpu.nvidia.com}]}}";

	tu_kube_create(p->src, tu_kube_doc("apiVersion: resource.k8s.io/v1beta1\nkind: "
					   "ResourceClaim\nmetadata: {name: src-claim, namespace: "
					   "%s}\nspec: %s\n",
					   ns, req));
	tu_kube_create(p->src, tu_kube_doc("apiVersion: resource.k8s.io/v1beta1\nkind: "
					   "ResourceClaimTemplate\nmetadata: {name: src-rct, "
					   "namespace: %s}\nspec: {spec: %s}\n",
					   ns, req));
	tu_kube_create(
	    p->src,
	    tu_kube_doc("apiVersion: v1\nkind: Pod\nmetadata: {name: test-pod1, namespace: "
			"%s, labels: {app: test-pod1}}\nspec:\n"
			"  resourceClaims: [{name: gpu, resourceClaimName: src-claim}, "
			"{name: scratch, resourceClaimTemplateName: src-rct}]\n"
			"  containers:\n"
			"  - {name: gpu-container, image: %s, resources: {claims: [{name: "
			"gpu}, {name: scratch}]}}\n"
			"  - {name: sidecar, image: %s, resources: {claims: [{name: gpu}]}}\n",
			ns, pause_image, pause_image));
	tu_kube_create(p->src, tu_kube_doc("apiVersion: v1\nkind: Pod\nmetadata: {name: test-pod2, "
					   "namespace: %s, labels: {app: test-pod2}}\nspec:\n"
					   "  resourceClaims: [{name: gpu, "
					   "resourceClaimTemplateName: src-rct}]\n"
					   "  containers: [{name: main, image: %s, resources: "
					   "{claims: [{name: gpu}]}}]\n",
					   ns, pause_image));
	tu_kube_create(p->src, tu_kube_doc("apiVersion: v1\nkind: Pod\nmetadata: {name: test-pod3, "
					   "namespace: %s, labels: {app: test-pod3}}\nspec:\n"
					   "  resourceClaims: [{name: gpu, resourceClaimName: "
					   "src-claim}]\n"
					   "  containers: [{name: main, image: %s, resources: "
					   "{claims: [{name: gpu}]}}]\n",
					   ns, pause_image));
	tu_kube_create(
	    p->src, tu_kube_doc("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: gpu-app, "
				"namespace: %s}\nspec:\n  replicas: 1\n"
				"  selector: {matchLabels: {app: gpu-app}}\n"
				"  template:\n    metadata: {labels: {app: gpu-app}}\n    spec:\n"
				"      resourceClaims: [{name: gpu, resourceClaimTemplateName: "
				"src-rct}]\n"
				"      containers: [{name: main, image: %s, resources: {claims: "
				"[{name: gpu}]}}]\n",
				ns, pause_image));
}

/* The claim names of container `ctr` (index) as "a,b". */
static void container_claims(const json_t *spec, size_t ctr, char *out, size_t size)
{
	json_t *c = json_array_get(dt_get(spec, "/containers"), ctr), *v;
	size_t i, len = 0;

	out[0] = '\0';
	json_array_foreach (dt_get(c, "/resources/claims"), i, v) {
		int n = snprintf(out + len, size - len, "%s%s", i ? "," : "", dt_str(v, "/name"));

		assert_true(n > 0 && (size_t)n < size - len);
		len += (size_t)n;
	}
}

/* The pod-level entries of spec as "name=claim:X|template:Y,...". */
static void entries(const json_t *spec, char *out, size_t size)
{
	json_t *v;
	size_t i, len = 0;

	out[0] = '\0';
	json_array_foreach (dt_get(spec, "/resourceClaims"), i, v) {
		const char *c = dt_str(v, "/resourceClaimName");
		const char *t = dt_str(v, "/resourceClaimTemplateName");
		int n = snprintf(out + len, size - len, "%s%s=%s:%s", i ? "," : "",
				 dt_str(v, "/name"), c ? "claim" : "template", c ? c : t);

		assert_true(n > 0 && (size_t)n < size - len);
		len += (size_t)n;
	}
}

static void test_e2e_seed__the_seeds_examples_land_mapped(void **state)
{
	static const struct {
		const char *app, *entries;
		size_t claims;
	} want[] = {
	    /* gpu-container keeps gpu (gpu-rc-claim1) and scratch (gpu-rct1); the
	     * sidecar's share of gpu is split off to gpu-rc-claim2 */
	    {"test-pod1",
	     "gpu=claim:gpu-rc-claim1,gpu-gpu-rc-claim2=claim:gpu-rc-claim2,scratch=template:gpu-"
	     "rct1",
	     3},
	    {"test-pod2", "gpu=template:gpu-rct2", 1},
	    {"test-pod3", "gpu=claim:gpu-rc-claim2", 1},
	    {"gpu-app", "gpu=claim:gpu-rc-claim3", 1},
	};
	tu_pair *const p = &P;
	char got[600], line[800];
	json_t *o, *st;
	char *log;

	(void)state;
	tu_pair_init(p, "e2es", "DS_KUBECONFIG_V1BETA1", "DS_KUBECONFIG_V1", "prod-east",
		     seed_rules, NULL);
	create_target_objects(p);
	create_source(p);
	tu_pair_target_start(p);
	tu_pair_source_start(p, NULL);

	/* The workloads, their references mapped as the seed says. */
	for (size_t i = 0; i < 3; i++) {
		o = tu_e2e_wait_get(p->dst, "v1", "Pod", p->dst_ns, want[i].app, 60000, &p->site);
		entries(dt_get(o, "/spec"), got, sizeof(got));
		assert_string_equal(got, want[i].entries);
		json_decref(o);
	}
	o = tu_e2e_wait_get(p->dst, "apps/v1", "Deployment", p->dst_ns, "gpu-app", 60000, &p->site);
	entries(dt_get(o, "/spec/template/spec"), got, sizeof(got));
	assert_string_equal(got, want[3].entries);
	assert_int_equal(json_integer_value(dt_get(o, "/spec/replicas")), 1);
	json_decref(o);
	o = tu_e2e_get(p->dst, "v1", "Pod", p->dst_ns, "test-pod1");
	container_claims(dt_get(o, "/spec"), 0, got, sizeof(got));
	assert_string_equal(got, "gpu,scratch");
	container_claims(dt_get(o, "/spec"), 1, got, sizeof(got));
	assert_string_equal(got, "gpu-gpu-rc-claim2");
	json_decref(o);
	/* The source's own claim and template arrive too, converted, the class mapped. */
	o = tu_e2e_wait_get(p->dst, DST_API, "ResourceClaim", p->dst_ns, "src-claim", 30000,
			    &p->site);
	assert_string_equal(dt_str(o, "/spec/devices/requests/0/exactly/deviceClassName"), DRIVER);
	json_decref(o);
	o = tu_e2e_wait_get(p->dst, DST_API, "ResourceClaimTemplate", p->dst_ns, "src-rct", 30000,
			    &p->site);
	assert_string_equal(dt_str(o, "/spec/spec/devices/requests/0/exactly/deviceClassName"),
			    DRIVER);
	json_decref(o);

	/* Step 7: pods Running, the mapped claims allocated on the target's devices. */
	for (size_t i = 0; i < 4; i++) {
		char sel[80];
		json_t *pods;

		snprintf(sel, sizeof(sel), "app=%s", want[i].app);
		pods = tu_e2e_wait_running(p->dst, p->dst_ns, sel, 1, 90000, &p->site);
		assert_int_equal(
		    tu_e2e_assert_pod_claims(p->dst, DST_API, json_array_get(pods, 0), DRIVER),
		    want[i].claims);
		json_decref(pods);
	}
	/* The shared gpu-rc-claim2 is reserved for both pods that use it. */
	o = tu_e2e_get(p->dst, DST_API, "ResourceClaim", p->dst_ns, "gpu-rc-claim2");
	assert_int_equal(json_array_size(dt_get(o, "/status/reservedFor")), 2);
	json_decref(o);
	/* gpu-rc-claim1 and gpu-rc-claim3 were never used on the source: untouched by drasync. */
	o = tu_e2e_get(p->dst, DST_API, "ResourceClaim", p->dst_ns, "gpu-rc-claim1");
	assert_null(dt_get(o, "/metadata/labels/app.kubernetes.io~1managed-by"));
	json_decref(o);

	for (long long end = tu_now_ms() + 60000;; tu_msleep(500)) {
		st = tu_pair_status(p);
		if (json_integer_value(dt_get(st, "/verification/verified")) >= 4)
			break;
		if (tu_now_ms() > end)
			fail_msg("status after 60 s: %s", json_dumps(st, JSON_INDENT(1)));
		json_decref(st);
	}
	assert_int_equal(json_integer_value(dt_get(st, "/verification/notVerified")), 0);
	assert_true(json_is_true(dt_get(st, "/healthy")));
	json_decref(st);

	/* The report of SPEC §3 in the importer's log, one line per rewritten reference. */
	log = tu_site_run_log(&p->site);
	snprintf(
	    line, sizeof(line),
	    "event=mapping type=rewrite object=\"Pod %s/test-pod1\" container=gpu-container "
	    "entry=gpu from=\"resourceClaimName=src-claim\" to=\"resourceClaimName=gpu-rc-claim1\"",
	    p->dst_ns);
	tu_e2e_assert_log("target log", log, line, true);
	snprintf(
	    line, sizeof(line),
	    "event=mapping type=rewrite object=\"Pod %s/test-pod1\" container=sidecar "
	    "entry=gpu from=\"resourceClaimName=src-claim\" to=\"resourceClaimName=gpu-rc-claim2\"",
	    p->dst_ns);
	tu_e2e_assert_log("target log", log, line, true);
	snprintf(line, sizeof(line), "event=mapping type=split object=\"Pod %s/test-pod1\"",
		 p->dst_ns);
	tu_e2e_assert_log("target log", log, line, true);
	snprintf(line, sizeof(line),
		 "event=mapping type=rewrite object=\"Deployment %s/gpu-app\" container=main "
		 "entry=gpu from=\"resourceClaimTemplateName=src-rct\" "
		 "to=\"resourceClaimName=gpu-rc-claim3\"",
		 p->dst_ns);
	tu_e2e_assert_log("target log", log, line, true);
	tu_e2e_assert_log("target log", log, "state=failed", false);
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
	    cmocka_unit_test_teardown(test_e2e_seed__the_seeds_examples_land_mapped, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
