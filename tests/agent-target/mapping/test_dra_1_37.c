/*
 * DRA shapes of Kubernetes 1.34-1.37 in plan form (issue 24): DeviceTaintRule and
 * ResourcePoolStatusRequest skipped, claims' tolerations through every conversion,
 * extended resources backed by DRA (KEP-5004) renamed by deviceClassMappings, and
 * the device-attribute paths (KEP-5304) a mapping moves. Upstream manifests:
 * tests/resources/dra-1.37 (SOURCE.md) and ../shared/fixtures.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/dra_convert.h"
#include "drasync/field_loss.h"
#include "drasync/k8s_object.h"
#include "drasync/plan.h"
#include "dstest.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct run {
	ds_manifest *man;
	ds_plan *p;
	char *text; /* what plan printed: each report entry, then the summary */
	size_t len;
};

static const char *resource(const char *name)
{
	static char slots[4][1024];
	static unsigned next;
	char *p = slots[next++ % 4];

	snprintf(p, sizeof(slots[0]), "%s/dra-1.37/%s", tu_env("DS_RESOURCES"), name);
	return p;
}

/* plan over files (NULL-terminated) and inline YAML (may be NULL), to `api`. */
static void plan(struct run *r, const char *cfg_yaml, enum ds_dra_version api,
		 const char *const *files, const char *yaml)
{
	ds_target_config *cfg = NULL;
	ds_plan_opts o = {.api = api, .sched = DS_SCHED_V1BETA1};
	ds_err err = {0};
	FILE *f;

	memset(r, 0, sizeof(*r));
	if (cfg_yaml) {
		char y[4096];

		/* migrate: standby would hold the Pods back */
		snprintf(y, sizeof(y), "mode: migrate\n%s", cfg_yaml);
		cfg = dt_config(y);
	} else
		assert_int_equal(ds_target_config_new_empty(&cfg), 0);
	o.cfg = cfg;
	assert_non_null(f = open_memstream(&r->text, &r->len));
	o.report = f;
	assert_int_equal(ds_manifest_new(&r->man), 0);
	for (size_t i = 0; files && files[i]; i++)
		if (ds_manifest_load(r->man, files[i], &err) < 0)
			fail_msg("%s: %s", files[i], err.msg);
	if (yaml)
		assert_true(ds_manifest_load_buffer(r->man, yaml, strlen(yaml), "in.yaml", &err) >
			    0);
	assert_int_equal(ds_plan_new(&r->p), 0);
	assert_int_equal(ds_plan_run(r->p, r->man, &o), 0);
	ds_plan_summary(r->p, f, 0);
	fclose(f);
	ds_target_config_free(cfg);
}

static void run_free(struct run *r)
{
	ds_plan_free(r->p);
	ds_manifest_free(r->man);
	free(r->text);
}

static json_t *planned(struct run *r, const char *kind, const char *name)
{
	return dt_find((json_t *)ds_plan_objects(r->p), kind, name);
}

static json_t *planned_or_null(struct run *r, const char *kind, const char *name)
{
	size_t i;
	json_t *o;

	json_array_foreach (ds_plan_objects(r->p), i, o)
		if (strcmp(ds_obj_kind(o), kind) == 0 && strcmp(ds_obj_name(o), name) == 0)
			return o;
	return NULL;
}

static void assert_says(const struct run *r, const char *what)
{
	if (!strstr(r->text, what)) {
		fprintf(stderr, "plan said:\n%s", r->text);
		fail_msg("plan does not say '%s'", what);
	}
}

/* ---- DeviceTaintRule, ResourcePoolStatusRequest ---- */

static const char taint_rule_v1beta2[] = "apiVersion: resource.k8s.io/v1beta2\n"
					 "kind: DeviceTaintRule\n"
					 "metadata: {name: beta}\n"
					 "spec:\n"
					 "  deviceSelector: {driver: gpu.example.com}\n"
					 "  taint: {key: k, effect: NoSchedule}\n"
					 "---\n"
					 "apiVersion: example.com/v1\n"
					 "kind: DeviceTaintRule\n"
					 "metadata: {name: other, namespace: ml}\n";

static void test_dra_1_37__taint_rules_and_pool_status_requests_are_never_copied(void **state)
{
	const char *files[] = {resource("devicetaintrule.yaml"),
			       resource("devicetaintrule-v1alpha3.yaml"),
			       resource("resourcepoolstatusrequest.yaml"), NULL};
	struct run r;

	(void)state;
	plan(&r, "dra:\n  replicateDeviceClasses: true\n", DS_DRA_V1, files, taint_rule_v1beta2);
	assert_int_equal(json_array_size(ds_plan_objects(r.p)), 0);
	assert_int_equal(ds_plan_count(r.p)->skip, 5);
	assert_int_equal(ds_plan_count(r.p)->failed, 0);
	/* v1 (GA 1.37), v1alpha3 (1.33-1.36), v1beta2: one reason, the kind's own words */
	assert_int_equal(dt_count(ds_plan_report(r.p), DS_REPORT_SKIP, "DeviceTaintRule example",
				  NULL, NULL, NULL, NULL),
			 2);
	assert_says(&r, "skip        DeviceTaintRule example: describes one cluster's hardware: a "
			"DeviceTaintRule taints the source's devices");
	assert_says(&r, "skip        DeviceTaintRule beta: describes one cluster's hardware");
	assert_says(&r, "skip        ResourcePoolStatusRequest example: describes one cluster's "
			"hardware: a ResourcePoolStatusRequest asks the source's control plane");
	/* The name alone is not enough: another group's kind of that name is just unknown. */
	assert_says(&r, "DeviceTaintRule ml/other: kind DeviceTaintRule (example.com) is not "
			"replicated");
	run_free(&r);
}

/* ---- tolerations through conversion ---- */

static const char first_available[] =
    "apiVersion: resource.k8s.io/v1\n"
    "kind: ResourceClaimTemplate\n"
    "metadata: {name: any-gpu, namespace: ml}\n"
    "spec:\n"
    "  spec:\n"
    "    devices:\n"
    "      requests:\n"
    "      - name: gpu\n"
    "        firstAvailable:\n"
    "        - name: big\n"
    "          deviceClassName: gpu.example.com\n"
    "          tolerations: [{key: dra.example.com/unhealthy, operator: Exists, effect: "
    "NoExecute}]\n"
    "        - name: small\n"
    "          deviceClassName: gpu.example.com\n"
    "          tolerations: [{key: k, operator: Equal, value: v, effect: NoSchedule, "
    "tolerationSeconds: 30}]\n";

static void test_dra_1_37__tolerations_survive_every_conversion(void **state)
{
	const char *files[] = {resource("pod-external-toleration.yaml"), NULL};
	static const enum ds_dra_version via[] = {DS_DRA_V1BETA1, DS_DRA_V1BETA2, DS_DRA_V1};
	json_t *src = dt_load_file(resource("pod-external-toleration.yaml"));
	json_t *want = json_deep_copy(dt_get(dt_find(src, "ResourceClaim", "external-claim"),
					     "/spec/devices/requests/0/exactly/tolerations"));
	json_t *fa = dt_object(first_available);
	json_t *fa_want = json_deep_copy(fa);

	(void)state;
	assert_non_null(want);
	for (size_t i = 0; i < 3; i++) {
		struct run r;
		json_t *c, *t, *back;
		ds_err err = {0};

		plan(&r, NULL, via[i], files, first_available);
		assert_int_equal(ds_plan_count(r.p)->failed, 0);
		c = planned(&r, "ResourceClaim", "external-claim");
		t = planned(&r, "ResourceClaimTemplate", "any-gpu");
		assert_string_equal(ds_obj_api_version(c), ds_dra_api_version(via[i]));
		if (via[i] == DS_DRA_V1BETA1) {
			/* flat in v1beta1: the request holds them itself */
			assert_true(
			    json_equal(dt_get(c, "/spec/devices/requests/0/tolerations"), want));
			assert_null(dt_get(c, "/spec/devices/requests/0/exactly"));
		} else {
			assert_true(json_equal(
			    dt_get(c, "/spec/devices/requests/0/exactly/tolerations"), want));
		}
		/* subrequests hold them in every version */
		assert_true(
		    json_equal(dt_get(t, "/spec/spec/devices/requests/0/firstAvailable"),
			       dt_get(fa_want, "/spec/spec/devices/requests/0/firstAvailable")));
		/* and back to v1 as the source wrote it (but for drasync's own metadata) */
		back = json_deep_copy(t);
		assert_true(ds_dra_convert(back, DS_DRA_V1, &err) >= 0);
		assert_true(json_equal(json_object_get(back, "spec"), json_object_get(fa, "spec")));
		json_decref(back);
		back = json_deep_copy(c);
		assert_true(ds_dra_convert(back, DS_DRA_V1, &err) >= 0);
		assert_true(json_equal(
		    json_object_get(back, "spec"),
		    json_object_get(dt_find(src, "ResourceClaim", "external-claim"), "spec")));
		json_decref(back);
		run_free(&r);
	}
	json_decref(fa);
	json_decref(fa_want);
	json_decref(want);
	json_decref(src);
}

/* v1beta1's flat tolerations (1.33+) into v1's `exactly`, and a 1.37 derivedAttributes. */
static void test_dra_1_37__flat_tolerations_move_under_exactly(void **state)
{
	struct run r;
	json_t *c;

	(void)state;
	plan(&r, NULL, DS_DRA_V1, NULL,
	     "apiVersion: resource.k8s.io/v1beta1\n"
	     "kind: ResourceClaim\n"
	     "metadata: {name: tolerant, namespace: ml}\n"
	     "spec:\n"
	     "  devices:\n"
	     "    requests:\n"
	     "    - name: gpu\n"
	     "      deviceClassName: gpu.example.com\n"
	     "      tolerations: [{key: k, operator: Exists}]\n"
	     "      derivedAttributes: [{name: gpu.example.com/x, expression: '1'}]\n");
	assert_int_equal(ds_plan_count(r.p)->failed, 0);
	c = planned(&r, "ResourceClaim", "tolerant");
	assert_string_equal(dt_str(c, "/spec/devices/requests/0/exactly/tolerations/0/key"), "k");
	assert_non_null(dt_get(c, "/spec/devices/requests/0/exactly/derivedAttributes/0"));
	assert_null(dt_get(c, "/spec/devices/requests/0/tolerations"));
	assert_says(&r, "convert     ResourceClaim ml/tolerant: resource.k8s.io/v1beta1 -> "
			"resource.k8s.io/v1");
	run_free(&r);
}

/* A target that cannot hold them (gate off, a 1.32 server) drops them: a field-loss error. */
static void test_dra_1_37__dropped_tolerations_are_a_field_loss(void **state)
{
	json_t *docs = dt_load_file(resource("pod-external-toleration.yaml"));
	json_t *sent = dt_find(docs, "ResourceClaim", "external-claim");
	json_t *kept = json_deep_copy(sent);
	json_t *fa = dt_object(first_available), *fa_kept = json_deep_copy(fa);
	char buf[512];

	(void)state;
	json_object_del(dt_get(kept, "/spec/devices/requests/0/exactly"), "tolerations");
	assert_int_equal(ds_field_loss_find(sent, kept, NULL, buf, sizeof(buf)), 1);
	assert_string_equal(buf, "spec.devices.requests[].exactly.tolerations");
	assert_non_null(strstr(ds_field_loss_cause(buf), "DRADeviceTaints"));
	assert_non_null(strstr(ds_field_loss_cause(buf), "1.32 or older"));
	json_object_del(dt_get(fa_kept, "/spec/spec/devices/requests/0/firstAvailable/1"),
			"tolerations");
	assert_int_equal(ds_field_loss_find(fa, fa_kept, NULL, buf, sizeof(buf)), 1);
	assert_string_equal(buf, "spec.spec.devices.requests[].firstAvailable[].tolerations");
	assert_non_null(strstr(ds_field_loss_cause(buf), "DRADeviceTaints"));
	json_decref(fa);
	json_decref(fa_kept);
	json_decref(kept);
	json_decref(docs);
}

/* ---- extended resources backed by DRA (KEP-5004) ---- */

static const char class_map[] = "dra:\n"
				"  replicateDeviceClasses: true\n"
				"  deviceClassMappings:\n"
				"    - {from: gpu.example.com, to: gpu.nvidia.com}\n"
				"    - {from: tpu.example.com, to: gpu.example.com}\n";

static void test_dra_1_37__implicit_extended_resources_follow_device_class_mappings(void **state)
{
	const char *files[] = {tu_fixture("dra-example-driver/v1/extended-resource-request.yaml"),
			       NULL};
	struct run r;
	json_t *pod0, *pod1;

	(void)state;
	plan(&r, class_map, DS_DRA_V1, files, NULL);
	assert_int_equal(ds_plan_count(r.p)->failed, 0);
	pod0 = planned(&r, "Pod", "pod0");
	pod1 = planned(&r, "Pod", "pod1");
	assert_non_null(dt_get(pod0, "/spec/containers/0/resources/limits/"
				     "deviceclass.resource.kubernetes.io~1gpu.nvidia.com"));
	assert_null(dt_get(pod0, "/spec/containers/0/resources/limits/"
				 "deviceclass.resource.kubernetes.io~1gpu.example.com"));
	assert_says(&r, "deviceclass Pod extended-resource-request/pod0 container=ctr0: "
			"limits.deviceclass.resource.kubernetes.io/gpu.example.com=1 -> "
			"limits.deviceclass.resource.kubernetes.io/gpu.nvidia.com=1 "
			"(deviceClassMappings, the class's extended resource)");
	/* an explicit name is no class's name: kept */
	assert_non_null(dt_get(pod1, "/spec/containers/0/resources/limits/example.com~1gpu"));
	assert_int_equal(dt_count(ds_plan_report(r.p), DS_REPORT_DEVICE_CLASS,
				  "Pod extended-resource-request/pod1", NULL, NULL, NULL, NULL),
			 0);
	/* what serves it is said for the renamed name */
	assert_says(&r, "keeps deviceclass.resource.kubernetes.io/gpu.nvidia.com");
	run_free(&r);
}

static const char workloads[] =
    "apiVersion: apps/v1\n"
    "kind: Deployment\n"
    "metadata: {name: d, namespace: ml}\n"
    "spec:\n"
    "  selector: {matchLabels: {app: d}}\n"
    "  template:\n"
    "    metadata: {labels: {app: d}}\n"
    "    spec:\n"
    "      initContainers:\n"
    "      - name: init\n"
    "        image: busybox\n"
    "        resources:\n"
    "          requests: {deviceclass.resource.kubernetes.io/gpu.example.com: '1'}\n"
    "          limits: {deviceclass.resource.kubernetes.io/gpu.example.com: '1'}\n"
    "      containers:\n"
    "      - name: main\n"
    "        image: busybox\n"
    "        resources:\n"
    "          limits: {cpu: '1', deviceclass.resource.kubernetes.io/gpu.example.com: 2, "
    "deviceclass.resource.kubernetes.io/fpga.example.com: 1, "
    "deviceclass.resource.kubernetes.io/tpu.example.com: 1}\n"
    "---\n"
    "apiVersion: batch/v1\n"
    "kind: CronJob\n"
    "metadata: {name: cj, namespace: ml}\n"
    "spec:\n"
    "  schedule: '@hourly'\n"
    "  jobTemplate:\n"
    "    spec:\n"
    "      template:\n"
    "        spec:\n"
    "          restartPolicy: Never\n"
    "          containers:\n"
    "          - name: c\n"
    "            image: busybox\n"
    "            resources:\n"
    "              limits: {deviceclass.resource.kubernetes.io/gpu.example.com: 1}\n"
    "---\n"
    "apiVersion: apps/v1\n"
    "kind: StatefulSet\n"
    "metadata: {name: both, namespace: ml}\n"
    "spec:\n"
    "  selector: {matchLabels: {app: s}}\n"
    "  serviceName: s\n"
    "  template:\n"
    "    metadata: {labels: {app: s}}\n"
    "    spec:\n"
    "      containers:\n"
    "      - name: c\n"
    "        image: busybox\n"
    "        resources:\n"
    "          limits: {deviceclass.resource.kubernetes.io/gpu.example.com: 1, "
    "deviceclass.resource.kubernetes.io/gpu.nvidia.com: 1}\n"
    "---\n"
    "apiVersion: resource.k8s.io/v1\n"
    "kind: DeviceClass\n"
    "metadata: {name: gpu.example.com}\n"
    "spec:\n"
    "  selectors: [{cel: {expression: \"device.driver == 'gpu.example.com'\"}}]\n"
    "  extendedResourceName: example.com/gpu\n"
    "---\n"
    "apiVersion: resource.k8s.io/v1\n"
    "kind: DeviceClass\n"
    "metadata: {name: fpga.example.com}\n"
    "spec:\n"
    "  extendedResourceName: example.com/fpga\n";

static void test_dra_1_37__every_workload_kind_and_replicated_classes(void **state)
{
	struct run r;
	json_t *d, *cj, *dc;

	(void)state;
	plan(&r, class_map, DS_DRA_V1, NULL, workloads);
	d = planned(&r, "Deployment", "d");
	cj = planned(&r, "CronJob", "cj");
	assert_string_equal(dt_str(d, "/spec/template/spec/initContainers/0/resources/requests/"
				      "deviceclass.resource.kubernetes.io~1gpu.nvidia.com"),
			    "1");
	assert_int_equal(
	    json_integer_value(dt_get(d, "/spec/template/spec/containers/0/resources/limits/"
					 "deviceclass.resource.kubernetes.io~1gpu.nvidia.com")),
	    2);
	/* other keys kept, in their order */
	assert_string_equal(json_object_iter_key(json_object_iter(
				dt_get(d, "/spec/template/spec/containers/0/resources/limits"))),
			    "cpu");
	assert_non_null(dt_get(d, "/spec/template/spec/containers/0/resources/limits/"
				  "deviceclass.resource.kubernetes.io~1fpga.example.com"));
	/* renamed once: the mappings do not chain (tpu -> gpu.example.com, not further) */
	assert_int_equal(
	    json_integer_value(dt_get(d, "/spec/template/spec/containers/0/resources/limits/"
					 "deviceclass.resource.kubernetes.io~1gpu.example.com")),
	    1);
	assert_null(dt_get(d, "/spec/template/spec/containers/0/resources/limits/"
			      "deviceclass.resource.kubernetes.io~1tpu.example.com"));
	assert_int_equal(dt_count(ds_plan_report(r.p), DS_REPORT_DEVICE_CLASS, "Deployment ml/d",
				  NULL, NULL, "deviceclass.resource.kubernetes.io/gpu.example.com",
				  "deviceclass.resource.kubernetes.io/gpu.nvidia.com"),
			 3);
	assert_non_null(dt_get(cj, "/spec/jobTemplate/spec/template/spec/containers/0/resources/"
				   "limits/deviceclass.resource.kubernetes.io~1gpu.nvidia.com"));
	/* two names that the mapping makes one: an error for that workload only */
	assert_int_equal(ds_plan_count(r.p)->failed, 1);
	assert_says(&r, "StatefulSet ml/both: container c: "
			"limits.deviceclass.resource.kubernetes.io/gpu.example.com and "
			"limits.deviceclass.resource.kubernetes.io/gpu.nvidia.com are both set and "
			"deviceClassMappings makes them one name, "
			"deviceclass.resource.kubernetes.io/gpu.nvidia.com");
	assert_null(planned_or_null(&r, "StatefulSet", "both"));
	/* A class mapped away leaves its extended resource to the class it maps to. */
	dc = planned(&r, "DeviceClass", "gpu.example.com");
	assert_null(dt_get(dc, "/spec/extendedResourceName"));
	assert_says(&r, "deviceclass DeviceClass gpu.example.com: extendedResourceName="
			"example.com/gpu -> (removed) (deviceClassMappings: gpu.example.com maps "
			"to gpu.nvidia.com; pods asking for example.com/gpu are served on the "
			"target by the DeviceClass that carries it: give gpu.nvidia.com "
			"extendedResourceName example.com/gpu)");
	/* one no mapping names keeps it */
	assert_string_equal(
	    dt_str(planned(&r, "DeviceClass", "fpga.example.com"), "/spec/extendedResourceName"),
	    "example.com/fpga");
	run_free(&r);
}

/* ---- device attributes in the container (KEP-5304) ---- */

/* Where Kubernetes v1.37.2 mounts them (k8s.io/dynamic-resource-allocation v0.37.2,
 * api/metadata ContainerDir): resourceclaims/<claim>/ or resourceclaimtemplates/<entry>/,
 * then <request>/<driver>-metadata.json. */
#define ATTR "/var/run/kubernetes.io/dra-device-attributes"

static void test_dra_1_37__a_renamed_claim_moves_the_attribute_files(void **state)
{
	const char *files[] = {resource("pod-external-toleration.yaml"), NULL};
	struct run r;

	(void)state;
	plan(&r,
	     "dra:\n  resourceClaimMappings:\n"
	     "  - {objectType: Pod, objectInstance: test-external-claim, container: ALL, "
	     "source: resource, resourceClaim: dr-claim}\n",
	     DS_DRA_V1, files, NULL);
	assert_int_equal(ds_plan_count(r.p)->failed, 0);
	/* the container that lists the claim, for all of its requests; the other sees none */
	assert_says(&r, "attributes  Pod test-external-claim container=with-resource "
			"entry=resource: " ATTR "/resourceclaims/external-claim/ -> " ATTR
			"/resourceclaims/dr-claim/ (device attributes, KEP-5304");
	assert_int_equal(ds_report_count_type(ds_plan_report(r.p), DS_REPORT_ATTRIBUTES), 1);
	run_free(&r);
}

static const char requests_pod[] =
    "apiVersion: v1\n"
    "kind: Pod\n"
    "metadata: {name: vm-with-gpu, namespace: ml}\n"
    "spec:\n"
    "  resourceClaims:\n"
    "  - {name: pgpu, resourceClaimName: physical-gpu-claim}\n"
    "  containers:\n"
    "  - name: compute\n"
    "    image: busybox\n"
    "    resources:\n"
    "      claims: [{name: pgpu, request: gpu-request}, {name: pgpu, request: nic}]\n";

static void test_dra_1_37__claim_to_template_names_each_request(void **state)
{
	struct run r;

	(void)state;
	plan(&r,
	     "dra:\n  resourceClaimTemplateMappings:\n"
	     "  - {objectType: Pod, objectInstance: vm-with-gpu, container: compute, "
	     "source: physical-gpu-claim, resourceClaimTemplate: dr-gpu}\n",
	     DS_DRA_V1, NULL, requests_pod);
	assert_says(&r, "container=compute entry=pgpu: " ATTR
			"/resourceclaims/physical-gpu-claim/gpu-request/ -> " ATTR
			"/resourceclaimtemplates/pgpu/gpu-request/");
	assert_says(&r, ATTR "/resourceclaims/physical-gpu-claim/nic/ -> " ATTR
			     "/resourceclaimtemplates/pgpu/nic/");
	assert_says(&r, "under the entry's name (the claim made from the template is the pod's, "
			"or its PodGroup's)");
	assert_int_equal(ds_report_count_type(ds_plan_report(r.p), DS_REPORT_ATTRIBUTES), 2);
	run_free(&r);
}

static void test_dra_1_37__a_split_entry_moves_only_the_split_containers(void **state)
{
	const char *files[] = {
	    tu_fixture("dra-example-driver/v1/basic-shared-claim-across-containers.yaml"), NULL};
	struct run r;

	(void)state;
	plan(&r,
	     "dra:\n  resourceClaimTemplateMappings:\n"
	     "  - {objectType: Pod, objectInstance: pod0, container: ctr1, source: shared-gpu, "
	     "resourceClaimTemplate: dr-gpu}\n",
	     DS_DRA_V1, files, NULL);
	assert_int_equal(ds_plan_count(r.p)->failed, 0);
	assert_says(&r, "split       Pod basic-shared-claim-across-containers/pod0");
	assert_says(&r,
		    "attributes  Pod basic-shared-claim-across-containers/pod0 container=ctr1 "
		    "entry=shared-gpu-dr-gpu: " ATTR "/resourceclaimtemplates/shared-gpu/ -> " ATTR
		    "/resourceclaimtemplates/shared-gpu-dr-gpu/");
	assert_int_equal(
	    dt_count(ds_plan_report(r.p), DS_REPORT_ATTRIBUTES, NULL, "ctr0", NULL, NULL, NULL), 0);
	run_free(&r);
}

/* Template to template under the same entry name: the paths are the entry's, so the same
 * (the devices are not); a template made a claim moves them, for a controller's pods too. */
static void test_dra_1_37__same_paths_say_nothing(void **state)
{
	struct run r;

	(void)state;
	plan(&r,
	     "dra:\n  resourceClaimTemplateMappings:\n"
	     "  - {objectType: All, objectInstance: ALL, container: ALL, source: gpu, "
	     "resourceClaimTemplate: dr-gpu}\n"
	     "  resourceClaimMappings:\n"
	     "  - {objectType: Deployment, objectInstance: d, container: ALL, source: one, "
	     "resourceClaim: dr-one}\n",
	     DS_DRA_V1, NULL,
	     "apiVersion: apps/v1\n"
	     "kind: Deployment\n"
	     "metadata: {name: d, namespace: ml}\n"
	     "spec:\n"
	     "  selector: {matchLabels: {app: d}}\n"
	     "  template:\n"
	     "    metadata: {labels: {app: d}}\n"
	     "    spec:\n"
	     "      containers: [{name: c, image: busybox, resources: {claims: [{name: gpu}, "
	     "{name: one}]}}]\n"
	     "      resourceClaims: [{name: gpu, resourceClaimTemplateName: gpu-rct}, "
	     "{name: one, resourceClaimTemplateName: one-rct}]\n");
	assert_int_equal(ds_report_count_type(ds_plan_report(r.p), DS_REPORT_REWRITE), 2);
	assert_int_equal(ds_report_count_type(ds_plan_report(r.p), DS_REPORT_ATTRIBUTES), 1);
	assert_says(&r, "entry=one: " ATTR "/resourceclaimtemplates/one/ -> " ATTR
			"/resourceclaims/dr-one/");
	run_free(&r);
}

/*
 * firstAvailable (KEP-4816): the kubelet plugin strips the subrequest from the directory
 * (v0.37.2 kubeletplugin stripSubrequestNames, metadata.go BaseRequestRef): whichever
 * subrequest is allocated, the files are under the request's name. A container names
 * requests only (a DNS label, no "/"). Upstream pod0 of prioritized-alternatives (every
 * request, no request named), and a container that names the request.
 */
static void test_dra_1_37__first_available_files_are_under_the_request(void **state)
{
	const char *files[] = {tu_fixture("dra-example-driver/v1/prioritized-alternatives.yaml"),
			       NULL};
	struct run r;

	(void)state;
	plan(&r,
	     "dra:\n  resourceClaimMappings:\n"
	     "  - {objectType: Pod, objectInstance: pod0, container: ALL, source: gpu, "
	     "resourceClaim: dr-gpu}\n"
	     "  - {objectType: Pod, objectInstance: named, container: ALL, source: gpu, "
	     "resourceClaim: dr-gpu}\n",
	     DS_DRA_V1, files,
	     "apiVersion: v1\nkind: Pod\n"
	     "metadata: {name: named, namespace: prioritized-alternatives}\n"
	     "spec:\n"
	     "  resourceClaims: [{name: gpu, resourceClaimTemplateName: prioritized-gpu}]\n"
	     "  containers:\n"
	     "  - {name: ctr0, image: x, resources: {claims: [{name: gpu, request: gpu}]}}\n");
	assert_int_equal(ds_plan_count(r.p)->failed, 0);
	assert_says(&r,
		    "attributes  Pod prioritized-alternatives/pod0 container=ctr0 entry=gpu: " ATTR
		    "/resourceclaimtemplates/gpu/ -> " ATTR "/resourceclaims/dr-gpu/ ");
	assert_says(&r,
		    "attributes  Pod prioritized-alternatives/named container=ctr0 entry=gpu: " ATTR
		    "/resourceclaimtemplates/gpu/gpu/ -> " ATTR "/resourceclaims/dr-gpu/gpu/ ");
	/* pod1 (no rule) keeps its paths; no subrequest is ever a directory */
	assert_int_equal(ds_report_count_type(ds_plan_report(r.p), DS_REPORT_ATTRIBUTES), 2);
	assert_null(strstr(r.text, "older-gpu/"));
	assert_null(strstr(r.text, "gpu/bleeding-edge-gpu"));
	run_free(&r);
}

/*
 * A PodGroup's claim (KEP-5729): the claim made from the group's template carries the
 * group entry's name (controller.go: the pod-claim-name annotation), so its members'
 * containers find the files under resourceclaimtemplates/<entry>/. A rule naming only the
 * members that turns the template into a claim moves the group's paths: said for the group
 * and for each member's container. Another template under the same entry says nothing.
 */
static void test_dra_1_37__a_podgroup_claim_moves_with_its_members(void **state)
{
	char path[1024];
	const char *files[] = {path, NULL};
	struct run r;

	(void)state;
	snprintf(path, sizeof(path), "%s/workload-claims/podgroup-deployments.yaml",
		 tu_env("DS_RESOURCES"));
	plan(&r,
	     "dra:\n  resourceClaimMappings:\n"
	     "  - {objectType: Deployment, objectInstance: ALL, container: ALL, "
	     "source: shared-gpu, resourceClaim: dr-gpu}\n",
	     DS_DRA_V1, files, NULL);
	assert_int_equal(ds_plan_count(r.p)->failed, 0);
	assert_says(&r, "attributes  PodGroup wl/trainers container=ALL entry=shared-gpu: " ATTR
			"/resourceclaimtemplates/shared-gpu/ -> " ATTR
			"/resourceclaims/dr-gpu/ (device attributes, KEP-5304, "
			"spec.resourceClaims: the containers of the group's pods that use entry "
			"shared-gpu find their devices' <driver>-metadata.json under the claim's "
			"name)");
	assert_says(&r, "attributes  Deployment wl/trainer-a container=ctr entry=shared-gpu: " ATTR
			"/resourceclaimtemplates/shared-gpu/ -> " ATTR "/resourceclaims/dr-gpu/");
	assert_says(&r, "attributes  Deployment wl/trainer-b container=ctr entry=shared-gpu: " ATTR
			"/resourceclaimtemplates/shared-gpu/ -> " ATTR "/resourceclaims/dr-gpu/");
	assert_int_equal(ds_report_count_type(ds_plan_report(r.p), DS_REPORT_ATTRIBUTES), 3);
	run_free(&r);

	plan(&r,
	     "dra:\n  resourceClaimTemplateMappings:\n"
	     "  - {objectType: Deployment, objectInstance: ALL, container: ALL, "
	     "source: shared-gpu, resourceClaimTemplate: dr-gpu}\n",
	     DS_DRA_V1, files, NULL);
	assert_int_equal(ds_plan_count(r.p)->failed, 0);
	assert_says(&r, "rewrite     PodGroup wl/trainers container=ALL entry=shared-gpu");
	assert_int_equal(ds_report_count_type(ds_plan_report(r.p), DS_REPORT_ATTRIBUTES), 0);
	run_free(&r);
}

/* A Workload's podGroupTemplates: the PodGroups made from a template take its entries, so
 * the paths of their pods move with the template's entry (said with the template's name). */
static void test_dra_1_37__a_workload_template_claim_moves(void **state)
{
	struct run r;

	(void)state;
	plan(&r,
	     "dra:\n  resourceClaimMappings:\n"
	     "  - {objectType: Workload, objectInstance: training, container: ALL, "
	     "source: gpu, resourceClaim: dr-gpu}\n",
	     DS_DRA_V1, NULL,
	     "apiVersion: scheduling.k8s.io/v1beta1\nkind: Workload\n"
	     "metadata: {name: training, namespace: wl}\nspec:\n  podGroupTemplates:\n"
	     "  - name: workers\n    schedulingPolicy: {gang: {minCount: 1}}\n"
	     "    resourceClaims:\n    - {name: gpu, resourceClaimTemplateName: gpu}\n"
	     "  - name: other\n    schedulingPolicy: {basic: {}}\n"
	     "    resourceClaims:\n    - {name: gpu, resourceClaimName: gpu}\n");
	assert_int_equal(ds_plan_count(r.p)->failed, 0);
	assert_says(&r, "attributes  Workload wl/training container=ALL entry=gpu: " ATTR
			"/resourceclaimtemplates/gpu/ -> " ATTR
			"/resourceclaims/dr-gpu/ (device attributes, KEP-5304, podGroupTemplates "
			"workers:");
	assert_says(&r, "attributes  Workload wl/training container=ALL entry=gpu: " ATTR
			"/resourceclaims/gpu/ -> " ATTR
			"/resourceclaims/dr-gpu/ (device attributes, KEP-5304, podGroupTemplates "
			"other:");
	assert_int_equal(ds_report_count_type(ds_plan_report(r.p), DS_REPORT_ATTRIBUTES), 2);
	run_free(&r);
}

/* A Job's spec.scheduling claims are its pods' group claims: the same lines, for the list. */
static void test_dra_1_37__a_job_scheduling_claim_moves(void **state)
{
	char path[1024];
	const char *files[] = {path, NULL};
	struct run r;

	(void)state;
	snprintf(path, sizeof(path), "%s/workload-claims/job-scheduling.yaml",
		 tu_env("DS_RESOURCES"));
	plan(&r,
	     "dra:\n  resourceClaimMappings:\n"
	     "  - {objectType: Job, objectInstance: trainer, container: ALL, "
	     "source: shared-gpu, resourceClaim: dr-gpu}\n",
	     DS_DRA_V1, files, NULL);
	assert_int_equal(ds_plan_count(r.p)->failed, 0);
	assert_says(&r, "attributes  Job wl/trainer container=ALL entry=shared-gpu: " ATTR
			"/resourceclaimtemplates/shared-gpu/ -> " ATTR
			"/resourceclaims/dr-gpu/ (device attributes, KEP-5304, "
			"spec.scheduling.resourceClaims:");
	assert_says(&r, "attributes  Job wl/trainer container=main entry=shared-gpu: " ATTR
			"/resourceclaimtemplates/shared-gpu/ -> " ATTR "/resourceclaims/dr-gpu/");
	assert_says(&r, "attributes  Job wl/trainer container=sidecar entry=shared-gpu: " ATTR
			"/resourceclaimtemplates/shared-gpu/ -> " ATTR "/resourceclaims/dr-gpu/");
	assert_int_equal(ds_report_count_type(ds_plan_report(r.p), DS_REPORT_ATTRIBUTES), 3);
	run_free(&r);
}

/*
 * The group and the members a mapping names are named where they go: with the namespace
 * mapped, the PodGroup's line says which member's rule it follows, and the member's line
 * which group it shares with, in the target namespace, as the lines' objects are.
 */
static void test_dra_1_37__a_group_and_its_members_are_named_in_the_target_namespace(void **state)
{
	char path[1024];
	const char *files[] = {path, NULL};
	struct run r;

	(void)state;
	snprintf(path, sizeof(path), "%s/workload-claims/podgroup-deployments.yaml",
		 tu_env("DS_RESOURCES"));
	plan(&r,
	     "namespaceMappings: {wl: wl-dr}\n"
	     "dra:\n  resourceClaimTemplateMappings:\n"
	     "  - {objectType: Deployment, objectInstance: ALL, container: ALL, "
	     "resourceClaimTemplate: dr-gpu}\n",
	     DS_DRA_V1, files, NULL);
	assert_int_equal(ds_plan_count(r.p)->failed, 0);
	assert_says(&r, "rewrite     PodGroup wl-dr/trainers container=ALL entry=shared-gpu: "
			"resourceClaimTemplateName=shared-gpu -> resourceClaimTemplateName=dr-gpu "
			"(rule dra.resourceClaimTemplateMappings[0] of its member Deployment "
			"wl-dr/trainer-a, spec.resourceClaims)");
	assert_says(&r, "rewrite     Deployment wl-dr/trainer-b container=ctr entry=shared-gpu: "
			"resourceClaimTemplateName=shared-gpu -> resourceClaimTemplateName=dr-gpu "
			"(rule dra.resourceClaimTemplateMappings[0], shared with PodGroup "
			"wl-dr/trainers)");
	assert_null(strstr(r.text, " wl/"));
	run_free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_dra_1_37__taint_rules_and_pool_status_requests_are_never_copied),
	    cmocka_unit_test(test_dra_1_37__tolerations_survive_every_conversion),
	    cmocka_unit_test(test_dra_1_37__flat_tolerations_move_under_exactly),
	    cmocka_unit_test(test_dra_1_37__dropped_tolerations_are_a_field_loss),
	    cmocka_unit_test(
		test_dra_1_37__implicit_extended_resources_follow_device_class_mappings),
	    cmocka_unit_test(test_dra_1_37__every_workload_kind_and_replicated_classes),
	    cmocka_unit_test(test_dra_1_37__a_renamed_claim_moves_the_attribute_files),
	    cmocka_unit_test(test_dra_1_37__claim_to_template_names_each_request),
	    cmocka_unit_test(test_dra_1_37__a_split_entry_moves_only_the_split_containers),
	    cmocka_unit_test(test_dra_1_37__same_paths_say_nothing),
	    cmocka_unit_test(test_dra_1_37__first_available_files_are_under_the_request),
	    cmocka_unit_test(test_dra_1_37__a_podgroup_claim_moves_with_its_members),
	    cmocka_unit_test(test_dra_1_37__a_workload_template_claim_moves),
	    cmocka_unit_test(test_dra_1_37__a_job_scheduling_claim_moves),
	    cmocka_unit_test(
		test_dra_1_37__a_group_and_its_members_are_named_in_the_target_namespace),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
