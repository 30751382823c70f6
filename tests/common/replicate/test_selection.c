/* What is replicated and what is skipped, with the reason a user reads (SPEC §2). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/selection.h"
#include "dstest.h"

#include <stdio.h>
#include <string.h>

static int check(const char *yaml, int replicate_dc, char *why, size_t size)
{
	json_t *o = dt_object(yaml);
	ds_err err = {0};
	int r = ds_selection_check(o, replicate_dc, &err);

	snprintf(why, size, "%s", err.msg);
	json_decref(o);
	return r;
}

static void test_selection__replicated_kinds(void **state)
{
	static const char *const objs[] = {
	    "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n",
	    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\n",
	    "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: a}\n",
	    "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: a}\n",
	    "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: a}\n",
	    "apiVersion: batch/v1\nkind: Job\nmetadata: {name: a}\n",
	    "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: a}\n",
	    "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: a}\n",
	    "apiVersion: resource.k8s.io/v1beta1\nkind: ResourceClaimTemplate\nmetadata: {name: "
	    "a}\n",
	    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
	    "apiVersion: v1\nkind: Secret\nmetadata: {name: a}\ntype: Opaque\n",
	    "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: a}\n",
	    "apiVersion: v1\nkind: Service\nmetadata: {name: a}\n",
	    "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: a}\n",
	    "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n",
	};
	char why[300];

	(void)state;
	for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++)
		assert_int_equal(check(objs[i], 0, why, sizeof(why)), 1);
}

static void test_selection__skips_say_why(void **state)
{
	static const struct {
		const char *yaml, *why;
		int replicate_dc;
	} cases[] = {
	    {"apiVersion: v1\nkind: Pod\nmetadata:\n  name: web-7d9f-abcde\n  ownerReferences:\n"
	     "  - {apiVersion: apps/v1, kind: ReplicaSet, name: web-7d9f, uid: u, controller: "
	     "true}\n",
	     "controlled by ReplicaSet web-7d9f, which recreates it on the target", 0},
	    {"apiVersion: apps/v1\nkind: ReplicaSet\nmetadata:\n  name: web-7d9f\n  "
	     "ownerReferences:\n"
	     "  - {apiVersion: apps/v1, kind: Deployment, name: web, uid: u, controller: true}\n",
	     "controlled by Deployment web", 0},
	    {"apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: nightly-123\n  ownerReferences:\n"
	     "  - {apiVersion: batch/v1, kind: CronJob, name: nightly, uid: u, controller: true}\n",
	     "controlled by CronJob nightly", 0},
	    {"apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata:\n  name: pod0-gpu-x7\n"
	     "  annotations: {resource.kubernetes.io/pod-claim-name: gpu}\n",
	     "generated from a template for a pod (gpu)", 0},
	    {"apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata:\n  name: "
	     "pod0-gpu-x7\n  ownerReferences:\n"
	     "  - {apiVersion: v1, kind: Pod, name: pod0, uid: u}\n",
	     "generated from a template for a pod (pod0)", 0},
	    {"apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata:\n  name: "
	     "ext-extended-resources-5dkzq\n"
	     "  annotations: {resource.kubernetes.io/extended-resource-claim: 'true'}\n"
	     "  ownerReferences:\n  - {apiVersion: v1, kind: Pod, name: ext, uid: u, controller: "
	     "true}\n",
	     "made by the scheduler for a pod's extended resources", 0},
	    {"apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata:\n  name: "
	     "trainers-shared-gpu-ntgjb\n"
	     "  annotations: {resource.kubernetes.io/pod-claim-name: shared-gpu}\n"
	     "  ownerReferences:\n  - {apiVersion: scheduling.k8s.io/v1beta1, kind: PodGroup, "
	     "name: "
	     "trainers, uid: u, controller: true}\n",
	     "controlled by PodGroup trainers", 0},
	    {"apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata:\n  name: job-0\n"
	     "  ownerReferences:\n  - {apiVersion: batch/v1, kind: Job, name: job, uid: u, "
	     "controller: true}\n",
	     "controlled by Job job", 0},
	    {"apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: node-1-gpu}\n",
	     "ResourceSlices describe the source's devices", 0},
	    {"apiVersion: resource.k8s.io/v1\nkind: DeviceTaintRule\nmetadata: {name: t}\n",
	     "describes one cluster's hardware: a DeviceTaintRule", 0},
	    {"apiVersion: resource.k8s.io/v1alpha3\nkind: DeviceTaintRule\nmetadata: {name: t}\n",
	     "describes one cluster's hardware: a DeviceTaintRule", 0},
	    {"apiVersion: resource.k8s.io/v1alpha3\nkind: ResourcePoolStatusRequest\nmetadata: "
	     "{name: r}\n",
	     "describes one cluster's hardware: a ResourcePoolStatusRequest", 0},
	    {"apiVersion: example.com/v1\nkind: DeviceTaintRule\nmetadata: {name: t}\n",
	     "kind DeviceTaintRule (example.com) is not replicated", 0},
	    {"apiVersion: v1\nkind: Event\nmetadata: {name: e}\n", "Events are made by the target",
	     0},
	    {"apiVersion: v1\nkind: Endpoints\nmetadata: {name: e}\n",
	     "Endpoints are made by the target", 0},
	    {"apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: e}\n",
	     "EndpointSlices are made", 0},
	    {"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kube-root-ca.crt}\n",
	     "own kube-root-ca.crt", 0},
	    {"apiVersion: v1\nkind: Secret\nmetadata: {name: t}\ntype: "
	     "kubernetes.io/service-account-token\n",
	     "service-account token Secrets are issued by the target", 0},
	    {"apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: "
	     "gpu.example.com}\n",
	     "set dra.replicateDeviceClasses", 0},
	    {"apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: i}\n",
	     "kind Ingress (networking.k8s.io) is not replicated", 0},
	    {"apiVersion: example.com/v1\nkind: Pod\nmetadata: {name: p}\n",
	     "kind Pod (example.com)", 0},
	    {"kind: Pod\nmetadata: {name: p}\n", "no apiVersion or kind", 0},
	};
	char why[300];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		why[0] = '\0';
		assert_int_equal(check(cases[i].yaml, cases[i].replicate_dc, why, sizeof(why)), 0);
		if (!strstr(why, cases[i].why))
			fail_msg("case %zu: '%s' does not say '%s'", i, why, cases[i].why);
	}
	assert_int_equal(
	    check("apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: g}\n", 1,
		  why, sizeof(why)),
	    1);
	/* A non-controller owner does not stop replication. */
	assert_int_equal(
	    check("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  ownerReferences:\n"
		  "  - {apiVersion: v1, kind: Secret, name: s, uid: u}\n",
		  0, why, sizeof(why)),
	    1);
}

static void test_selection__apply_order(void **state)
{
	const char *order[] = {"Namespace",   "ServiceAccount",	       "ConfigMap",
			       "Secret",      "PersistentVolumeClaim", "Service",
			       "DeviceClass", "ResourceClaimTemplate", "ResourceClaim",
			       "Deployment"};
	int prev = -1;

	(void)state;
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		json_t *o = json_pack("{s:s, s:s}", "apiVersion", "v1", "kind", order[i]);
		int r = ds_selection_apply_rank(o);

		assert_true(r > prev);
		prev = r;
		json_decref(o);
	}
}

static void test_selection__no_kind_is_applied_last(void **state)
{
	/* An object without a kind ranks after everything known (it ranked with the
	 * ServiceAccounts, before ConfigMaps and Secrets). */
	json_t *none = json_pack("{s:s}", "apiVersion", "v1");
	json_t *pod = json_pack("{s:s, s:s}", "apiVersion", "v1", "kind", "Pod");

	(void)state;
	assert_true(ds_selection_apply_rank(none) > ds_selection_apply_rank(pod));
	json_decref(none);
	json_decref(pod);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_selection__replicated_kinds),
	    cmocka_unit_test(test_selection__skips_say_why),
	    cmocka_unit_test(test_selection__apply_order),
	    cmocka_unit_test(test_selection__no_kind_is_applied_last),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
