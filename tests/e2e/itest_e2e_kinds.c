/*
 * Every workload kind with its DRA objects, across DRA API versions, as users
 * run the pair: the shipped RBAC on both clusters, drasync-target run
 * (migrate) and drasync-source run (watch) as processes on their
 * ServiceAccount tokens (tu_e2e.h). The source namespace holds a
 * ResourceClaim and a ResourceClaimTemplate of the source's device class
 * gpu.nvidia.com (which the target has not), a Pod using the claim, and a
 * Deployment, StatefulSet, DaemonSet, ReplicaSet, Job and CronJob each using
 * the template; the target maps the class to its own gpu.example.com.
 * v1 source -> v1beta1 target, then v1beta1 source -> v1 target. What the
 * user sees on the target: every object there, equal by hash where mapping
 * does not change it; the claim and the template converted to the target's
 * version with the class mapped; every pod Running with its claims
 * allocated on the target's devices on its own node; `status` healthy with
 * every workload verified; the mapping in the target's log.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dstest.h"
#include "testutil.h"
#include "tu_compare.h"
#include "tu_e2e.h"
#include "tu_kube.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DRIVER "gpu.example.com"

static tu_pair P; /* disposed by teardown(), after a failure too */

/* Kinds whose every object in the namespace is the source's own (not made by a controller). */
static const char *const same_kinds[] = {
    "v1/ConfigMap",	   "v1/Secret",		"v1/Service",	    "apps/v1/Deployment",
    "apps/v1/StatefulSet", "apps/v1/DaemonSet", "batch/v1/CronJob", NULL};

/* The request gpu of class gpu.nvidia.com in the DRA version api (v1: under exactly). */
static void request(char *out, size_t size, const char *api, const char *indent)
{
	const char *sel = "selectors: [{cel: {expression: 'device.driver.startsWith(\"gpu.\")'}}]";

	if (strcmp(api, "resource.k8s.io/v1") == 0)
		snprintf(out, size,
			 "%s- name: gpu\n%s  exactly: {deviceClassName: gpu.nvidia.com, "
			 "allocationMode: ExactCount, count: 1, %s}\n",
			 indent, indent, sel);
	else
		snprintf(out, size,
			 "%s- name: gpu\n%s  deviceClassName: gpu.nvidia.com\n"
			 "%s  allocationMode: ExactCount\n%s  count: 1\n%s  %s\n",
			 indent, indent, indent, indent, indent, sel);
}

/* A pod spec (YAML, under `indent`) whose container main uses entry gpu from `ref`. */
static void podspec(char *out, size_t size, const char *ref, const char *indent, bool once)
{
	snprintf(out, size,
		 "%srestartPolicy: %s\n"
		 "%sserviceAccountName: runner\n"
		 "%sresourceClaims: [{name: gpu, %s}]\n"
		 "%scontainers:\n"
		 "%s- name: main\n"
		 "%s  image: registry.k8s.io/pause:3.10\n"
		 "%s  envFrom: [{configMapRef: {name: settings}}]\n"
		 "%s  resources: {claims: [{name: gpu}]}\n",
		 indent, once ? "Never" : "Always", indent, indent, ref, indent, indent, indent,
		 indent, indent);
}

static void create_source(tu_pair *p, const char *api)
{
	const char *ns = p->src_ns, *tmpl = "resourceClaimTemplateName: one-gpu";
	char req[600], spec[1500];

	tu_kube_create(p->src, tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: "
					   "settings, namespace: %s}\ndata: {MODE: fast}\n",
					   ns));
	tu_kube_create(p->src, tu_kube_doc("apiVersion: v1\nkind: Secret\nmetadata: {name: creds, "
					   "namespace: %s}\nstringData: {token: s3cret}\n",
					   ns));
	tu_kube_create(p->src, tu_kube_doc("apiVersion: v1\nkind: ServiceAccount\nmetadata: "
					   "{name: runner, namespace: %s}\n",
					   ns));
	tu_kube_create(p->src, tu_kube_doc("apiVersion: v1\nkind: Service\nmetadata: {name: db, "
					   "namespace: %s}\nspec: {clusterIP: None, selector: "
					   "{app: db}, ports: [{port: 5432}]}\n",
					   ns));
	request(req, sizeof(req), api, "    ");
	tu_kube_create(p->src, tu_kube_doc("apiVersion: %s\nkind: ResourceClaim\nmetadata: {name: "
					   "shared-gpu, namespace: %s}\nspec:\n  devices:\n"
					   "   requests:\n%s",
					   api, ns, req));
	request(req, sizeof(req), api, "      ");
	tu_kube_create(p->src, tu_kube_doc("apiVersion: %s\nkind: ResourceClaimTemplate\nmetadata:"
					   " {name: one-gpu, namespace: %s}\nspec:\n  spec:\n"
					   "    devices:\n     requests:\n%s",
					   api, ns, req));
	podspec(spec, sizeof(spec), "resourceClaimName: shared-gpu", "  ", false);
	tu_kube_create(p->src, tu_kube_doc("apiVersion: v1\nkind: Pod\nmetadata: {name: solo, "
					   "namespace: %s, labels: {app: solo}}\nspec:\n%s",
					   ns, spec));
	podspec(spec, sizeof(spec), tmpl, "      ", false);
	static const char *const controllers[] = {"Deployment", "StatefulSet", "DaemonSet",
						  "ReplicaSet"};
	static const char *const names[] = {"web", "db", "agent", "rs"};
	for (size_t i = 0; i < 4; i++)
		tu_kube_create(
		    p->src,
		    tu_kube_doc("apiVersion: apps/v1\nkind: %s\nmetadata: {name: %s, "
				"namespace: %s}\nspec:\n%s%s"
				"  selector: {matchLabels: {app: %s}}\n"
				"  template:\n    metadata: {labels: {app: %s}}\n"
				"    spec:\n%s",
				controllers[i], names[i], ns,
				strcmp(controllers[i], "DaemonSet") ? "  replicas: 1\n" : "",
				strcmp(controllers[i], "StatefulSet") ? "" : "  serviceName: db\n",
				names[i], names[i], spec));
	podspec(spec, sizeof(spec), tmpl, "      ", true);
	tu_kube_create(p->src, tu_kube_doc("apiVersion: batch/v1\nkind: Job\nmetadata: {name: "
					   "batch, namespace: %s}\nspec:\n  template:\n"
					   "    metadata: {labels: {app: batch}}\n    spec:\n%s",
					   ns, spec));
	podspec(spec, sizeof(spec), tmpl, "          ", true);
	tu_kube_create(
	    p->src, tu_kube_doc("apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: nightly, "
				"namespace: %s}\nspec:\n  schedule: '0 0 1 1 *'\n  jobTemplate:\n"
				"    spec:\n      template:\n        metadata: {labels: {app: "
				"nightly}}\n        spec:\n%s",
				ns, spec));
}

/* The request of a claim spec (at ptr, "/spec" or "/spec/spec") in the target's version. */
static void assert_converted(const json_t *obj, const char *ptr, const char *dst_api)
{
	char path[200];
	const json_t *req;
	bool v1 = strcmp(dst_api, "resource.k8s.io/v1") == 0;

	assert_string_equal(dt_str(obj, "/apiVersion"), dst_api);
	snprintf(path, sizeof(path), "%s/devices/requests/0%s", ptr, v1 ? "/exactly" : "");
	req = dt_get(obj, path);
	if (!req)
		fail_msg("%s: no request at %s", dt_str(obj, "/metadata/name"), path);
	/* the mapped field */
	assert_string_equal(dt_str(req, "/deviceClassName"), DRIVER);
	/* carried through the conversion */
	assert_string_equal(dt_str(req, "/allocationMode"), "ExactCount");
	assert_int_equal(json_integer_value(dt_get(req, "/count")), 1);
	assert_string_equal(dt_str(req, "/selectors/0/cel/expression"),
			    "device.driver.startsWith(\"gpu.\")");
	snprintf(path, sizeof(path), "%s/devices/requests/0/exactly", ptr);
	if (!v1)
		assert_null(dt_get(obj, path));
	assert_string_equal(dt_str(obj, "/metadata/labels/app.kubernetes.io~1managed-by"),
			    "drasync");
	assert_string_equal(dt_str(obj, "/metadata/annotations/drasync.io~1source-cluster"),
			    "prod-east");
}

/* The one object `name` of kind: the same on both sides by hash of its sanitized content. */
static void assert_same(tu_pair *p, const char *api, const char *kind, const char *name)
{
	json_t *a = tu_e2e_get(p->src, api, kind, p->src_ns, name);
	json_t *b = tu_e2e_wait_get(p->dst, api, kind, p->dst_ns, name, 30000, &p->site);
	char ha[65], hb[65];

	assert_non_null(a);
	tu_compare_digest(a, ha);
	tu_compare_digest(b, hb);
	if (strcmp(ha, hb) != 0) {
		char *ta = json_dumps(a, JSON_INDENT(1) | JSON_SORT_KEYS);
		char *tb = json_dumps(b, JSON_INDENT(1) | JSON_SORT_KEYS);

		fail_msg("%s %s differs:\nsource %s\ntarget %s", kind, name, ta, tb);
	}
	json_decref(a);
	json_decref(b);
}

static void kinds_across(const char *src_env, const char *src_api, const char *dst_env,
			 const char *dst_api)
{
	static const struct {
		const char *app;
		size_t pods;
	} apps[] = {{"solo", 1}, {"web", 1}, {"db", 1}, {"agent", 2}, {"rs", 1}, {"batch", 1}};
	tu_pair *const p = &P;
	json_t *o, *st;
	size_t claims = 0;
	char *log;

	tu_pair_init(p, "e2ek", src_env, dst_env, "prod-east",
		     "mode: migrate\n"
		     "dra:\n  deviceClassMappings: [{from: gpu.nvidia.com, to: " DRIVER "}]\n",
		     NULL);
	create_source(p, src_api);
	tu_pair_target_start(p);
	tu_pair_source_start(p, NULL);

	tu_assert_same_objects(p->src, p->src_ns, p->dst, p->dst_ns, same_kinds, 90000);
	/* Kinds whose controllers' objects live beside the source's: one by one. */
	assert_same(p, "v1", "Pod", "solo");
	assert_same(p, "apps/v1", "ReplicaSet", "rs");
	assert_same(p, "batch/v1", "Job", "batch");
	assert_same(p, "v1", "ServiceAccount", "runner");

	/* Converted to the target's DRA version, the class mapped. */
	o = tu_e2e_wait_get(p->dst, dst_api, "ResourceClaim", p->dst_ns, "shared-gpu", 30000,
			    &p->site);
	assert_converted(o, "/spec", dst_api);
	json_decref(o);
	o = tu_e2e_wait_get(p->dst, dst_api, "ResourceClaimTemplate", p->dst_ns, "one-gpu", 30000,
			    &p->site);
	assert_converted(o, "/spec/spec", dst_api);
	json_decref(o);
	o = tu_e2e_wait_get(p->dst, "batch/v1", "CronJob", p->dst_ns, "nightly", 30000, &p->site);
	assert_string_equal(dt_str(o, "/spec/jobTemplate/spec/template/spec/resourceClaims/0/"
				      "resourceClaimTemplateName"),
			    "one-gpu");
	assert_false(json_is_true(dt_get(o, "/spec/suspend")));
	json_decref(o);

	/* Every pod runs on the target, its claims allocated there. */
	for (size_t i = 0; i < sizeof(apps) / sizeof(apps[0]); i++) {
		char sel[80];
		json_t *pods, *pod;
		size_t j;

		snprintf(sel, sizeof(sel), "app=%s", apps[i].app);
		pods = tu_e2e_wait_running(p->dst, p->dst_ns, sel, apps[i].pods, 90000, &p->site);
		json_array_foreach (pods, j, pod) {
			size_t n = tu_e2e_assert_pod_claims(p->dst, dst_api, pod, DRIVER);

			if (n != 1)
				fail_msg("pod %s has %zu claims, not 1",
					 dt_str(pod, "/metadata/name"), n);
			claims += n;
		}
		json_decref(pods);
	}
	assert_int_equal(claims, 7);
	/* The DaemonSet's pods: one on each of the target's nodes. */
	o = tu_e2e_list(p->dst, "v1", "Pod", p->dst_ns, "app=agent");
	assert_string_not_equal(dt_str(json_array_get(o, 0), "/spec/nodeName"),
				dt_str(json_array_get(o, 1), "/spec/nodeName"));
	json_decref(o);

	/* status: healthy, every workload verified by the running importer. */
	for (long long end = tu_now_ms() + 60000;; tu_msleep(500)) {
		st = tu_pair_status(p);
		if (json_integer_value(dt_get(st, "/verification/verified")) >= 7 &&
		    json_integer_value(dt_get(st, "/verification/notVerified")) == 0)
			break;
		if (tu_now_ms() > end) {
			char *t = json_dumps(st, JSON_INDENT(1));

			fail_msg("status after 60 s: %s", t);
		}
		json_decref(st);
	}
	if (!json_is_true(dt_get(st, "/healthy"))) {
		char *t = json_dumps(st, JSON_INDENT(1));
		fail_msg("status not healthy: %s", t);
	}
	json_decref(st);

	/* The mapping is in the importer's log, and no error in either. */
	log = tu_site_run_log(&p->site);
	for (size_t i = 0; i < 2; i++) {
		char obj[200], line[600];

		snprintf(obj, sizeof(obj), "%s %s/%s",
			 i ? "ResourceClaim" : "ResourceClaimTemplate", p->dst_ns,
			 i ? "shared-gpu" : "one-gpu");
		snprintf(line, sizeof(line),
			 "event=mapping type=deviceclass object=\"%s\" container=\"\" entry=gpu "
			 "from=\"deviceClassName=gpu.nvidia.com\" to=" DRIVER,
			 obj);
		tu_e2e_assert_log("target log", log, line, true);
		snprintf(line, sizeof(line),
			 "event=mapping type=convert object=\"%s\" container=\"\" entry=\"\" "
			 "from=%s to=%s",
			 obj, src_api, dst_api);
		tu_e2e_assert_log("target log", log, line, true);
	}
	tu_e2e_assert_log("target log", log, "state=failed", false);
	/* A 403 reads "403 Forbidden: ... is forbidden: ..." (a bare "403" is
	 * also in timestamps such as 21:50:01.403Z). */
	tu_e2e_assert_log("target log", log, "Forbidden", false);
	tu_e2e_assert_log("target log", log, "forbidden", false);
	free(log);
	log = tu_site_source_run_log(&p->site);
	tu_e2e_assert_log("source log", log, "level=error", false);
	tu_e2e_assert_log("source log", log, "Forbidden", false);
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

static void test_e2e_kinds__v1_source_to_v1beta1_target(void **state)
{
	(void)state;
	kinds_across("DS_KUBECONFIG_V1", "resource.k8s.io/v1", "DS_KUBECONFIG_V1BETA1",
		     "resource.k8s.io/v1beta1");
}

static void test_e2e_kinds__v1beta1_source_to_v1_target(void **state)
{
	(void)state;
	kinds_across("DS_KUBECONFIG_V1BETA1", "resource.k8s.io/v1beta1", "DS_KUBECONFIG_V1",
		     "resource.k8s.io/v1");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_e2e_kinds__v1_source_to_v1beta1_target, teardown),
	    cmocka_unit_test_teardown(test_e2e_kinds__v1beta1_source_to_v1_target, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
