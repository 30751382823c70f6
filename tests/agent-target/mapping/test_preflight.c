/* What an object needs on the target, workload-level DRA and extended resources included. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/preflight.h"
#include "dstest.h"
#include "testutil.h"

#include <stdio.h>
#include <string.h>

struct seen {
	char text[2000];
	size_t used;
};

static int need(void *ud, const char *kind, const char *ns, const char *name)
{
	struct seen *s = ud;
	int w = snprintf(s->text + s->used, sizeof(s->text) - s->used, "%s %s/%s; ", kind,
			 ns ? ns : "", name);

	s->used += (size_t)w;
	return 0;
}

static const char *needs(const char *yaml, struct seen *s)
{
	json_t *obj = dt_object(yaml);

	memset(s, 0, sizeof(*s));
	assert_int_equal(ds_preflight_needs(obj, need, s), 0);
	json_decref(obj);
	return s->text;
}

static void test_preflight__groups_and_their_members(void **state)
{
	struct seen s;

	(void)state;
	assert_string_equal(needs("apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\n"
				  "metadata: {name: g, namespace: wl}\n"
				  "spec:\n  workloadRef: {workloadName: w, templateName: t}\n"
				  "  resourceClaims: [{name: a, resourceClaimTemplateName: tpl},"
				  " {name: b, resourceClaimName: rc}]\n",
				  &s),
			    "ResourceClaimTemplate wl/tpl; ResourceClaim wl/rc; Workload wl/w; ");
	assert_string_equal(needs("apiVersion: scheduling.k8s.io/v1alpha2\nkind: PodGroup\n"
				  "metadata: {name: g, namespace: wl}\n"
				  "spec:\n  podGroupTemplateRef: {workload: {workloadName: w,"
				  " podGroupTemplateName: t}}\n",
				  &s),
			    "Workload wl/w; ");
	assert_string_equal(needs("apiVersion: scheduling.k8s.io/v1beta1\nkind: Workload\n"
				  "metadata: {name: w, namespace: wl}\n"
				  "spec:\n  podGroupTemplates:\n"
				  "  - {name: t, resourceClaims: [{name: a, "
				  "resourceClaimTemplateName: tpl}]}\n",
				  &s),
			    "ResourceClaimTemplate wl/tpl; ");
	assert_string_equal(
	    needs("apiVersion: apps/v1\nkind: Deployment\n"
		  "metadata: {name: d, namespace: wl}\n"
		  "spec:\n  template:\n    spec:\n"
		  "      schedulingGroup: {podGroupName: g}\n"
		  "      containers: [{name: c, image: x}]\n"
		  "      resourceClaims: [{name: a, resourceClaimTemplateName: tpl}]\n",
		  &s),
	    "ResourceClaimTemplate wl/tpl; PodGroup wl/g; ");
	assert_string_equal(
	    needs("apiVersion: batch/v1\nkind: Job\n"
		  "metadata: {name: j, namespace: wl}\n"
		  "spec:\n  scheduling:\n    resourceClaims: [{name: a, "
		  "resourceClaimTemplateName: shared}]\n"
		  "  template:\n    spec:\n      containers: [{name: c, image: x}]\n",
		  &s),
	    "ResourceClaimTemplate wl/shared; ");
}

static int ext(void *ud, const char *container, const char *resource)
{
	struct seen *s = ud;
	int w =
	    snprintf(s->text + s->used, sizeof(s->text) - s->used, "%s=%s; ", container, resource);

	s->used += (size_t)w;
	return 0;
}

static void test_preflight__extended_resources_and_classes(void **state)
{
	json_t *pod = dt_object(
	    "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n"
	    "  initContainers: [{name: i, image: x, resources: {requests: {example.com/fpga: "
	    "1}}}]\n"
	    "  containers:\n"
	    "  - {name: c, image: x, resources: {limits: {nvidia.com/gpu: 2, cpu: 1, memory: 1Gi},"
	    " requests: {nvidia.com/gpu: 2, hugepages-2Mi: 1Mi}}}\n"
	    "  - {name: d, image: x, resources: {limits: {kubernetes.io/x: 1, a.kubernetes.io/y: 1,"
	    " deviceclass.resource.kubernetes.io/gpu.example.com: 1}}}\n");
	json_t *dc = dt_object("apiVersion: resource.k8s.io/v1\nkind: DeviceClass\n"
			       "metadata: {name: gpu.example.com}\n"
			       "spec: {extendedResourceName: nvidia.com/gpu}\n");
	struct seen s = {0};

	(void)state;
	assert_int_equal(ds_preflight_extended(pod, ext, &s), 0);
	assert_string_equal(s.text, "i=example.com/fpga; c=nvidia.com/gpu; "
				    "d=deviceclass.resource.kubernetes.io/gpu.example.com; ");
	assert_true(ds_preflight_class_serves(dc, "nvidia.com/gpu"));
	assert_true(
	    ds_preflight_class_serves(dc, "deviceclass.resource.kubernetes.io/gpu.example.com"));
	assert_false(ds_preflight_class_serves(dc, "example.com/fpga"));
	assert_false(ds_preflight_class_serves(dc, "deviceclass.resource.kubernetes.io/other"));
	json_decref(pod);
	json_decref(dc);
}

/* adminAccess where each resource.k8s.io version holds it; the namespace grant, exactly "true". */
static void test_preflight__admin_access(void **state)
{
	json_t *v1 =
	    dt_object("apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\n"
		      "metadata: {name: mon, namespace: ops}\nspec:\n  devices:\n"
		      "    requests:\n    - {name: plain, exactly: {deviceClassName: g}}\n"
		      "    - {name: watch, exactly: {deviceClassName: g, adminAccess: true}}\n");
	json_t *b1 = dt_object("apiVersion: resource.k8s.io/v1beta1\nkind: ResourceClaimTemplate\n"
			       "metadata: {name: mon, namespace: ops}\nspec:\n  spec:\n"
			       "    devices:\n      requests:\n"
			       "      - {name: all, deviceClassName: g, adminAccess: true}\n");
	json_t *b2 = dt_object("apiVersion: resource.k8s.io/v1beta2\nkind: ResourceClaim\n"
			       "metadata: {name: mon, namespace: ops}\nspec:\n  devices:\n"
			       "    requests:\n    - {name: w, exactly: {deviceClassName: g,"
			       " adminAccess: false}}\n");
	json_t *cls = dt_object("apiVersion: resource.k8s.io/v1\nkind: DeviceClass\n"
				"metadata: {name: g}\nspec: {adminAccess: true}\n");
	json_t *granted = dt_object("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ops\n"
				    "  labels: {resource.kubernetes.io/admin-access: 'true'}\n");
	json_t *other = dt_object("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ops\n"
				  "  labels: {resource.kubernetes.io/admin-access: 'True'}\n");
	json_t *bare = dt_object("apiVersion: v1\nkind: Namespace\nmetadata: {name: ops}\n");

	(void)state;
	assert_string_equal(ds_preflight_admin_access(v1), "watch");
	assert_string_equal(ds_preflight_admin_access(b1), "all");
	assert_null(ds_preflight_admin_access(b2)); /* false asks for nothing */
	assert_null(ds_preflight_admin_access(cls));
	assert_true(ds_preflight_admin_granted(granted));
	assert_false(ds_preflight_admin_granted(other)); /* case-sensitive, as the API server */
	assert_false(ds_preflight_admin_granted(bare));
	assert_false(ds_preflight_admin_granted(NULL));
	json_decref(v1);
	json_decref(b1);
	json_decref(b2);
	json_decref(cls);
	json_decref(granted);
	json_decref(other);
	json_decref(bare);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_preflight__admin_access),
	    cmocka_unit_test(test_preflight__groups_and_their_members),
	    cmocka_unit_test(test_preflight__extended_resources_and_classes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
