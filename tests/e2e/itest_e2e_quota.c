/*
 * A namespace's limits reach the DR site and hold there: the pair as users
 * run it (tu_e2e.h: the shipped RBAC on both clusters, drasync-target run
 * and drasync-source run as processes on their ServiceAccount tokens), the
 * v1beta1 cluster the source, the v1 cluster the target, whose
 * deviceClassMappings map gpu.nvidia.com to gpu.example.com. The source
 * namespace holds a ResourceQuota with DRA keys (the devices of a class,
 * KEP-5004's implicit extended resource, one of a class no mapping names)
 * and a LimitRange with a DRA container resource. What the user sees on the
 * target: both objects, renamed; the target's quota controller counting the
 * renamed keys (status.hard, then status.used of a claim of the target's
 * class); the target's API server refusing a claim past the renamed limit;
 * every rename in the importer's log, and the class the target lacks named.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/k8s_object.h"
#include "dstest.h"
#include "testutil.h"
#include "tu_e2e.h"
#include "tu_kube.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SRC_DEVICES "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"
#define DST_DEVICES "gpu.example.com.deviceclass.resource.k8s.io/devices"
#define SRC_IMPLICIT "requests.deviceclass.resource.kubernetes.io/gpu.nvidia.com"
#define DST_IMPLICIT "requests.deviceclass.resource.kubernetes.io/gpu.example.com"
#define UNMAPPED "fpga.example.org.deviceclass.resource.k8s.io/devices"
#define SRC_CONTAINER "deviceclass.resource.kubernetes.io/gpu.nvidia.com"
#define DST_CONTAINER "deviceclass.resource.kubernetes.io/gpu.example.com"

static tu_pair P; /* disposed by teardown(), after a failure too */

static const char *hard_of(const json_t *q, const char *map, const char *key)
{
	return json_string_value(
	    json_object_get(json_object_get(json_object_get(q, map), "hard"), key));
}

/* The target's ResourceQuota once its controller has counted `key` as `used` (NULL: any). */
static json_t *wait_quota(tu_pair *p, const char *key, const char *used)
{
	for (long long end = tu_now_ms() + 60000;; tu_msleep(300)) {
		json_t *q = tu_e2e_get(p->dst, "v1", "ResourceQuota", p->dst_ns, "gpus");
		const char *u =
		    json_string_value(json_object_get(ds_json_path(q, "status.used"), key));

		if (q && hard_of(q, "status", key) && (!used || (u && strcmp(u, used) == 0)))
			return q;
		if (tu_now_ms() > end) {
			char *t = q ? json_dumps(q, JSON_INDENT(1)) : NULL;
			char *log = tu_site_run_log(&p->site);

			fail_msg("quota on the target after 60 s (want %s used %s): %s\nlog:\n%s",
				 key, used ? used : "-", t ? t : "(none)", log);
		}
		json_decref(q);
	}
}

/* A claim of `count` devices of the target's class in the target namespace. @return its error */
static ds_kube_error claim(tu_pair *p, const char *name, int count)
{
	struct ds_kube_resource res =
	    tu_kube_resource(p->dst, "resource.k8s.io/v1", "ResourceClaim");
	json_t *c = tu_kube_doc("apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\n"
				"metadata: {name: %s, namespace: %s}\n"
				"spec: {devices: {requests: [{name: g, exactly: {deviceClassName: "
				"gpu.example.com, allocationMode: ExactCount, count: %d}}]}}\n",
				name, p->dst_ns, count);
	ds_kube_error ke;

	ds_kube_error_clear(&ke);
	if (ds_kube_create(p->dst, &res, p->dst_ns, c, NULL, &ke) == 0)
		ke.code = 201;
	json_decref(c);
	return ke;
}

static void test_e2e_quota__limits_arrive_renamed_and_the_target_enforces_them(void **state)
{
	tu_pair *const p = &P;
	ds_kube_error ke;
	json_t *q, *lr;
	char *log, line[400];

	(void)state;
	tu_pair_init(p, "e2eq", "DS_KUBECONFIG_V1BETA1", "DS_KUBECONFIG_V1", "prod-east",
		     "mode: migrate\n"
		     "dra:\n  deviceClassMappings: [{from: gpu.nvidia.com, to: gpu.example.com}]\n",
		     NULL);
	tu_kube_create(p->src, tu_kube_doc("apiVersion: v1\nkind: ResourceQuota\n"
					   "metadata: {name: gpus, namespace: %s}\n"
					   "spec:\n  hard:\n"
					   "    " SRC_DEVICES ": '2'\n"
					   "    " SRC_IMPLICIT ": '2'\n"
					   "    " UNMAPPED ": '1'\n"
					   "    count/configmaps: '20'\n",
					   p->src_ns));
	tu_kube_create(p->src, tu_kube_doc("apiVersion: v1\nkind: LimitRange\n"
					   "metadata: {name: limits, namespace: %s}\n"
					   "spec:\n  limits:\n  - type: Container\n"
					   "    max: {cpu: '2', " SRC_CONTAINER ": '1'}\n",
					   p->src_ns));
	tu_kube_create(p->src,
		       tu_kube_doc("apiVersion: v1\nkind: ConfigMap\n"
				   "metadata: {name: settings, namespace: %s}\ndata: {a: b}\n",
				   p->src_ns));
	tu_pair_target_start(p);
	tu_pair_source_start(p, NULL);

	/* Both arrive renamed; what no mapping names is kept. */
	lr = tu_e2e_wait_get(p->dst, "v1", "LimitRange", p->dst_ns, "limits", 60000, &p->site);
	assert_string_equal(dt_str(lr, "/spec/limits/0/max/cpu"), "2");
	assert_string_equal(
	    json_string_value(json_object_get(dt_get(lr, "/spec/limits/0/max"), DST_CONTAINER)),
	    "1");
	assert_null(json_object_get(dt_get(lr, "/spec/limits/0/max"), SRC_CONTAINER));
	json_decref(lr);
	q = tu_e2e_wait_get(p->dst, "v1", "ResourceQuota", p->dst_ns, "gpus", 60000, &p->site);
	assert_string_equal(hard_of(q, "spec", DST_DEVICES), "2");
	assert_string_equal(hard_of(q, "spec", DST_IMPLICIT), "2");
	assert_string_equal(hard_of(q, "spec", UNMAPPED), "1");
	assert_string_equal(hard_of(q, "spec", "count/configmaps"), "20");
	assert_null(hard_of(q, "spec", SRC_DEVICES));
	assert_null(hard_of(q, "spec", SRC_IMPLICIT));
	json_decref(q);
	json_decref(
	    tu_e2e_wait_get(p->dst, "v1", "ConfigMap", p->dst_ns, "settings", 60000, &p->site));

	/* The target's quota controller counts the renamed keys... */
	q = wait_quota(p, DST_DEVICES, NULL);
	assert_null(hard_of(q, "status", SRC_DEVICES));
	json_decref(q);
	/* ...a claim of the target's class uses them... */
	ke = claim(p, "one", 1);
	if (ke.code != 201)
		fail_msg("a claim of 1 device within the quota: %d %s", ke.code, ke.message);
	json_decref(wait_quota(p, DST_DEVICES, "1"));
	/* ...and the target's API server refuses a claim past them. */
	ke = claim(p, "three", 3);
	assert_int_equal(ke.code, 403);
	if (!strstr(ke.message, "exceeded quota") || !strstr(ke.message, DST_DEVICES))
		fail_msg("refusal does not name the renamed key: %s", ke.message);
	assert_null(tu_e2e_get(p->dst, "resource.k8s.io/v1", "ResourceClaim", p->dst_ns, "three"));

	/* Every rename in the importer's log, and the class the target has not. */
	log = tu_site_run_log(&p->site);
	snprintf(line, sizeof(line),
		 "event=mapping type=deviceclass object=\"ResourceQuota %s/gpus\" container=\"\" "
		 "entry=spec.hard from=" SRC_DEVICES " to=" DST_DEVICES,
		 p->dst_ns);
	tu_e2e_assert_log("target log", log, line, true);
	snprintf(line, sizeof(line),
		 "event=mapping type=deviceclass object=\"ResourceQuota %s/gpus\" container=\"\" "
		 "entry=spec.hard from=" SRC_IMPLICIT " to=" DST_IMPLICIT,
		 p->dst_ns);
	tu_e2e_assert_log("target log", log, line, true);
	snprintf(line, sizeof(line),
		 "event=mapping type=deviceclass object=\"LimitRange %s/limits\" container=\"\" "
		 "entry=spec.limits[0].max from=" SRC_CONTAINER " to=" DST_CONTAINER,
		 p->dst_ns);
	tu_e2e_assert_log("target log", log, line, true);
	tu_e2e_assert_log("target log", log, "needs DeviceClass fpga.example.org", true);
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
		test_e2e_quota__limits_arrive_renamed_and_the_target_enforces_them, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
