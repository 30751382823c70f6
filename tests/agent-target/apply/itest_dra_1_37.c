/*
 * DRA shapes of Kubernetes 1.34-1.37 through the applier against real 1.37
 * control planes (issue 24): a pod asking for a class's implicit extended
 * resource (KEP-5004) lands renamed by deviceClassMappings and is scheduled with
 * a claim from the mapped class's devices; a claim's tolerations are on the
 * target as v1 and as v1beta1; a DeviceTaintRule is skipped with its reason.
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
#include "dstest.h"
#include "testutil.h"
#include "tu_apply.h"
#include "tu_kube.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WAIT_MS 60000

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *resource(const char *name)
{
	static char path[1024];

	snprintf(path, sizeof(path), "%s/dra-1.37/%s", tu_env("DS_RESOURCES"), name);
	return path;
}

static void commit_namespace(tu_apply *e)
{
	tu_apply_commit1(
	    e, tu_kube_doc("apiVersion: v1\nkind: Namespace\nmetadata: {name: '%s'}\n", e->src));
}

/* The source's class is not on the target; the target's own class is, on its own devices. */
static void test_itest_dra_1_37__implicit_extended_resource_follows_the_class_mapping(void **state)
{
	char src_class[64], dst_class[64], dra[300], key[200], ptr[300];
	unsigned n = tu_rand();
	tu_apply_opts o = {.dra_yaml = dra};
	tu_apply *e;
	json_t *pod = NULL;
	long long deadline;
	const char *claim;

	(void)state;
	snprintf(src_class, sizeof(src_class), "src-%u.example.com", n);
	snprintf(dst_class, sizeof(dst_class), "dst-%u.example.com", n);
	/* one more item of tu_apply's deviceClassMappings */
	snprintf(dra, sizeof(dra), "  - {from: %s, to: %s}\n", src_class, dst_class);
	e = tu_apply_new("dra137-ext", &o);
	tu_kube_create(
	    e->k, tu_kube_doc("apiVersion: resource.k8s.io/v1\nkind: DeviceClass\n"
			      "metadata: {name: %s}\nspec:\n  selectors:\n"
			      "  - cel: {expression: \"device.driver == 'gpu.example.com'\"}\n",
			      dst_class));
	commit_namespace(e);
	snprintf(key, sizeof(key), "deviceclass.resource.kubernetes.io/%s", src_class);
	tu_apply_commit1(e, tu_kube_doc("apiVersion: v1\nkind: Pod\n"
					"metadata: {name: ext, namespace: '%s'}\n"
					"spec:\n  containers:\n  - name: c\n    image: x\n"
					"    resources:\n      limits: {%s: 1}\n",
					e->src, key));
	tu_apply_settle(e);
	{
		/* the importer's preflight looked for the class the pod asks for now */
		char want[400];

		snprintf(want, sizeof(want),
			 "container c keeps deviceclass.resource.kubernetes.io/%s: DeviceClass %s "
			 "serves it",
			 dst_class, dst_class);
		tu_apply_assert_state(e, "v1", "Pod", "ext", DS_APPLY_APPLIED, want);
	}
	deadline = now_ms() + WAIT_MS;
	for (;;) {
		json_decref(pod);
		pod = tu_apply_target_get(e, "v1", "Pod", "ext");
		claim = dt_str(pod, "/status/extendedResourceClaimStatus/resourceClaimName");
		if (claim && dt_str(pod, "/spec/nodeName"))
			break;
		if (now_ms() > deadline)
			fail_msg("pod ext was not scheduled with an extended-resource claim");
		tu_msleep(300);
	}
	/* The target's pod asks for the target's class; the source's name is gone. */
	snprintf(ptr, sizeof(ptr),
		 "/spec/containers/0/resources/limits/deviceclass.resource.kubernetes.io~1%s",
		 dst_class);
	assert_non_null(dt_get(pod, ptr));
	snprintf(ptr, sizeof(ptr),
		 "/spec/containers/0/resources/limits/deviceclass.resource.kubernetes.io~1%s",
		 src_class);
	assert_null(dt_get(pod, ptr));
	{
		json_t *c = tu_apply_target_get(e, "resource.k8s.io/v1", "ResourceClaim", claim);

		assert_non_null(c);
		assert_string_equal(dt_str(c, "/spec/devices/requests/0/exactly/deviceClassName"),
				    dst_class);
		assert_non_null(dt_str(c, "/status/allocation/devices/results/0/device"));
		json_decref(c);
	}
	json_decref(pod);
	tu_kube_delete(e->k, "resource.k8s.io/v1", "DeviceClass", NULL, dst_class);
	tu_apply_free(e);
}

/* The upstream claim with exactly.tolerations, on a v1 target and (converted) a v1beta1 one. */
static void check_tolerations(const char *kubeconfig_env, const char *api, const char *ptr)
{
	tu_apply_opts o = {.kubeconfig_env = kubeconfig_env};
	tu_apply *e = tu_apply_new("dra137-tol", &o);
	json_t *docs = dt_load_file(resource("pod-external-toleration.yaml"));
	json_t *claim = dt_find(docs, "ResourceClaim", "external-claim"), *got;

	assert_int_equal(ds_obj_set_namespace(claim, e->src), 0);
	commit_namespace(e);
	tu_apply_commit1(e, json_incref(claim));
	tu_apply_settle(e);
	/* applied: the server kept every field drasync sent (else a field-loss failure) */
	tu_apply_assert_state(e, "resource.k8s.io/v1", "ResourceClaim", "external-claim",
			      DS_APPLY_APPLIED, NULL);
	got = tu_apply_target_get(e, api, "ResourceClaim", "external-claim");
	assert_non_null(got);
	assert_true(json_equal(dt_get(got, ptr), dt_get(claim, "/spec/devices/requests/0/exactly/"
							       "tolerations")));
	json_decref(got);
	json_decref(docs);
	tu_apply_free(e);
}

static void test_itest_dra_1_37__tolerations_on_v1_and_v1beta1_targets(void **state)
{
	(void)state;
	check_tolerations(NULL, "resource.k8s.io/v1",
			  "/spec/devices/requests/0/exactly/tolerations");
	check_tolerations("DS_KUBECONFIG_V1BETA1", "resource.k8s.io/v1beta1",
			  "/spec/devices/requests/0/tolerations");
}

static void test_itest_dra_1_37__device_taint_rule_is_skipped(void **state)
{
	tu_apply *e = tu_apply_new("dra137-taint", NULL);
	json_t *docs = dt_load_file(resource("devicetaintrule.yaml"));
	ds_object_state_row row;
	json_t *got;

	(void)state;
	commit_namespace(e);
	tu_apply_commit1(e, json_incref(json_array_get(docs, 0)));
	tu_apply_settle(e);
	/* A source never lists it: a record of one is outside every grant, its reason said. */
	row = tu_apply_row(e, "resource.k8s.io/v1", "DeviceTaintRule", "example", true);
	if (row.state != DS_APPLY_REFUSED || !row.reason ||
	    !strstr(row.reason, "is not replicated by drasync: describes one cluster's hardware"))
		fail_msg("DeviceTaintRule example: state %s (%s)", ds_apply_state_name(row.state),
			 row.reason ? row.reason : "no reason");
	ds_object_state_row_dispose(&row);
	got = tu_apply_target_get(e, "resource.k8s.io/v1", "DeviceTaintRule", "example");
	assert_null(got);
	json_decref(docs);
	tu_apply_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(
		test_itest_dra_1_37__implicit_extended_resource_follows_the_class_mapping),
	    cmocka_unit_test(test_itest_dra_1_37__tolerations_on_v1_and_v1beta1_targets),
	    cmocka_unit_test(test_itest_dra_1_37__device_taint_rule_is_skipped),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
