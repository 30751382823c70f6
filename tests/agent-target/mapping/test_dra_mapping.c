/* The DRA mapping engine against every rule of SPEC §3. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/dra_mapping.h"
#include "drasync/k8s_object.h"
#include "dstest.h"
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The seed's two example lists, verbatim, plus a device class mapping. */
static const char *const seed_config =
    "apiVersion: drasync.io/v1alpha1\n"
    "kind: TargetConfig\n"
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
    "    - {from: gpu.nvidia.com, to: gpu.example.com}\n";

/* A pod with one container using one entry of the given kind. */
static json_t *pod(const char *name, const char *container, const char *field, const char *target)
{
	char buf[1024];

	snprintf(buf, sizeof(buf),
		 "apiVersion: v1\nkind: Pod\nmetadata: {name: %s, namespace: ml}\n"
		 "spec:\n"
		 "  containers:\n"
		 "  - name: %s\n    image: x\n    resources:\n      claims:\n      - name: gpu\n"
		 "  resourceClaims:\n  - name: gpu\n    %s: %s\n",
		 name, container, field, target);
	return dt_object(buf);
}

struct fx {
	ds_target_config *cfg;
	ds_report *rep;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	f->cfg = dt_config(seed_config);
	assert_int_equal(ds_report_new(&f->rep), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	ds_report_free(f->rep);
	ds_target_config_free(f->cfg);
	free(f);
	return 0;
}

static const ds_dra_config *dra(void **state)
{
	return ds_target_config_dra(((struct fx *)*state)->cfg);
}

static ds_report *rep(void **state)
{
	return ((struct fx *)*state)->rep;
}

static void test_dra_mapping__seed_specific_pod_container_wins(void **state)
{
	json_t *p = pod("test-pod1", "gpu-container", "resourceClaimName", "src-claim");

	assert_int_equal(ds_dra_map_workload(dra(state), p, rep(state)), 1);
	assert_string_equal(dt_str(p, "/spec/resourceClaims/0/resourceClaimName"), "gpu-rc-claim1");
	assert_null(dt_get(p, "/spec/resourceClaims/0/resourceClaimTemplateName"));
	assert_int_equal(dt_count(rep(state), DS_REPORT_REWRITE, "Pod ml/test-pod1",
				  "gpu-container", "gpu", "resourceClaimName=src-claim",
				  "resourceClaimName=gpu-rc-claim1"),
			 1);
	json_decref(p);
}

static void test_dra_mapping__seed_other_container_falls_to_all(void **state)
{
	json_t *p = pod("test-pod1", "sidecar", "resourceClaimName", "src-claim");

	assert_int_equal(ds_dra_map_workload(dra(state), p, rep(state)), 1);
	assert_string_equal(dt_str(p, "/spec/resourceClaims/0/resourceClaimName"), "gpu-rc-claim2");
	json_decref(p);
}

static void test_dra_mapping__seed_any_pod_maps_to_claim2(void **state)
{
	json_t *p = pod("other", "c", "resourceClaimName", "src-claim");

	assert_int_equal(ds_dra_map_workload(dra(state), p, rep(state)), 1);
	assert_string_equal(dt_str(p, "/spec/resourceClaims/0/resourceClaimName"), "gpu-rc-claim2");
	json_decref(p);
}

/* The two seed lists use identical selectors: the entry's own kind breaks the tie. */
static void test_dra_mapping__same_kind_tie_break_for_templates(void **state)
{
	json_t *p1 = pod("test-pod1", "gpu-container", "resourceClaimTemplateName", "src-t");
	json_t *p2 = pod("x", "c", "resourceClaimTemplateName", "src-t");

	assert_int_equal(ds_dra_map_workload(dra(state), p1, rep(state)), 1);
	assert_int_equal(ds_dra_map_workload(dra(state), p2, rep(state)), 1);
	assert_string_equal(dt_str(p1, "/spec/resourceClaims/0/resourceClaimTemplateName"),
			    "gpu-rct1");
	assert_string_equal(dt_str(p2, "/spec/resourceClaims/0/resourceClaimTemplateName"),
			    "gpu-rct2");
	assert_null(dt_get(p1, "/spec/resourceClaims/0/resourceClaimName"));
	json_decref(p1);
	json_decref(p2);
}

static void test_dra_mapping__deployment_rule_only_for_that_deployment(void **state)
{
	json_t *d = dt_object(
	    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: gpu-app, namespace: ml}\n"
	    "spec:\n  template:\n    spec:\n      containers:\n      - name: a\n        resources: "
	    "{claims: [{name: g}]}\n"
	    "      - name: b\n        resources: {claims: [{name: g}]}\n"
	    "      resourceClaims: [{name: g, resourceClaimTemplateName: gpu-template}]\n");
	json_t *other = dt_object(
	    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: ml}\n"
	    "spec:\n  template:\n    spec:\n      containers:\n      - name: a\n        resources: "
	    "{claims: [{name: g}]}\n"
	    "      resourceClaims: [{name: g, resourceClaimTemplateName: gpu-template}]\n");

	/* A claim rule against a template reference: the claim rule is the only match, it wins. */
	assert_int_equal(ds_dra_map_workload(dra(state), d, rep(state)), 2);
	assert_string_equal(dt_str(d, "/spec/template/spec/resourceClaims/0/resourceClaimName"),
			    "gpu-rc-claim3");
	assert_null(dt_get(d, "/spec/template/spec/resourceClaims/0/resourceClaimTemplateName"));
	assert_int_equal(json_array_size(dt_get(d, "/spec/template/spec/resourceClaims")), 1);
	/* Pod rules do not apply to Deployments; no Deployment rule for "web". */
	assert_int_equal(ds_dra_map_workload(dra(state), other, rep(state)), 0);
	assert_string_equal(
	    dt_str(other, "/spec/template/spec/resourceClaims/0/resourceClaimTemplateName"),
	    "gpu-template");
	json_decref(d);
	json_decref(other);
}

/* Instance (8) beats container + source + type (4 + 2 + 1). */
static void test_dra_mapping__specificity_weights(void **state)
{
	ds_target_config *cfg = dt_config(
	    "dra:\n  resourceClaimMappings:\n"
	    "  - {objectType: Pod, objectInstance: ALL, container: c, source: gpu, resourceClaim: "
	    "seven}\n"
	    "  - {objectType: All, objectInstance: p, container: ALL, resourceClaim: eight}\n"
	    "  - {objectType: Pod, objectInstance: ALL, container: ALL, source: src-claim, "
	    "resourceClaim: three}\n"
	    "  - {objectType: All, objectInstance: ALL, container: c, resourceClaim: four}\n");
	const ds_dra_config *d = ds_target_config_dra(cfg);
	const ds_dra_rule *w = NULL;
	ds_err err = {0};
	json_t *p = pod("p", "c", "resourceClaimName", "src-claim");
	json_t *q = pod("q", "c", "resourceClaimName", "src-claim");
	json_t *r = pod("r", "other", "resourceClaimName", "src-claim");

	(void)state;
	assert_int_equal(ds_dra_map_workload(d, p, NULL), 1);
	assert_string_equal(dt_str(p, "/spec/resourceClaims/0/resourceClaimName"), "eight");
	assert_int_equal(ds_dra_map_workload(d, q, NULL), 1);
	assert_string_equal(dt_str(q, "/spec/resourceClaims/0/resourceClaimName"), "seven");
	assert_int_equal(ds_dra_map_workload(d, r, NULL), 1);
	assert_string_equal(dt_str(r, "/spec/resourceClaims/0/resourceClaimName"), "three");
	assert_int_equal(ds_dra_resolve(d, DS_WORKLOAD_POD, "q", "c", "other-entry", "x",
					DS_TARGET_CLAIM, &w, &err),
			 0);
	assert_non_null(w);
	assert_string_equal(w->target, "four");
	assert_int_equal(ds_dra_rule_specificity(w), 4);
	json_decref(p);
	json_decref(q);
	json_decref(r);
	ds_target_config_free(cfg);
}

/* `source` names the source claim/template or the pod-level entry. */
static void test_dra_mapping__source_selector(void **state)
{
	ds_target_config *cfg = dt_config("dra:\n  resourceClaimMappings:\n"
					  "  - {objectType: All, objectInstance: ALL, container: "
					  "ALL, source: src-claim, resourceClaim: by-claim}\n"
					  "  resourceClaimTemplateMappings:\n"
					  "  - {objectType: All, objectInstance: ALL, container: "
					  "ALL, source: gpu, resourceClaimTemplate: by-entry}\n");
	const ds_dra_config *d = ds_target_config_dra(cfg);
	json_t *a = pod("a", "c", "resourceClaimName", "src-claim");
	json_t *b = pod("b", "c", "resourceClaimTemplateName", "some-template");
	json_t *c = pod("c", "c", "resourceClaimName", "unrelated");

	(void)state;
	/* a: both rules match (claim name and entry name "gpu"): same kind wins. */
	assert_int_equal(ds_dra_map_workload(d, a, NULL), 1);
	assert_string_equal(dt_str(a, "/spec/resourceClaims/0/resourceClaimName"), "by-claim");
	/* b: only the entry-name rule matches. */
	assert_int_equal(ds_dra_map_workload(d, b, NULL), 1);
	assert_string_equal(dt_str(b, "/spec/resourceClaims/0/resourceClaimTemplateName"),
			    "by-entry");
	/* c: the entry is named gpu, so the template rule matches a claim reference: it still wins
	 * (no tie), turning the claim into a template reference. */
	assert_int_equal(ds_dra_map_workload(d, c, NULL), 1);
	assert_string_equal(dt_str(c, "/spec/resourceClaims/0/resourceClaimTemplateName"),
			    "by-entry");
	assert_null(dt_get(c, "/spec/resourceClaims/0/resourceClaimName"));
	json_decref(a);
	json_decref(b);
	json_decref(c);
	ds_target_config_free(cfg);
}

/* Same specificity, same kind, different targets: an error for that workload only. */
static void test_dra_mapping__ambiguous_tie_is_a_workload_error(void **state)
{
	ds_target_config *cfg = dt_config("dra:\n  resourceClaimMappings:\n"
					  "  - {objectType: Pod, objectInstance: ALL, container: "
					  "ALL, source: gpu, resourceClaim: t1}\n"
					  "  - {objectType: Pod, objectInstance: ALL, container: "
					  "ALL, source: src-claim, resourceClaim: t2}\n");
	const ds_dra_config *d = ds_target_config_dra(cfg);
	json_t *p = pod("p", "c", "resourceClaimName", "src-claim");
	json_t *before = json_deep_copy(p);
	json_t *fine = pod("q", "c", "resourceClaimName", "other-claim");
	ds_report *r;

	(void)state;
	assert_int_equal(ds_report_new(&r), 0);
	assert_int_equal(ds_dra_map_workload(d, p, r), -EINVAL);
	assert_true(json_equal(p, before));
	assert_int_equal(ds_report_count_type(r, DS_REPORT_ERROR), 1);
	assert_non_null(strstr(ds_report_get(r, 0)->message, "same specificity"));
	assert_non_null(strstr(ds_report_get(r, 0)->message, "resourceClaimMappings[0]"));
	assert_non_null(strstr(ds_report_get(r, 0)->message, "resourceClaimMappings[1]"));
	/* Another workload whose claim only one rule matches is mapped. */
	assert_int_equal(ds_dra_map_workload(d, fine, r), 1);
	assert_string_equal(dt_str(fine, "/spec/resourceClaims/0/resourceClaimName"), "t1");
	ds_report_free(r);
	json_decref(p);
	json_decref(before);
	json_decref(fine);
	ds_target_config_free(cfg);
}

/* Two containers share an entry but resolve differently: the entry is split. */
static void test_dra_mapping__split_shared_entry(void **state)
{
	ds_target_config *cfg = dt_config("dra:\n  resourceClaimMappings:\n"
					  "  - {objectType: Pod, objectInstance: pod0, container: "
					  "ts-ctr0, resourceClaim: fast-gpu}\n");
	json_t *docs = dt_load_file(
	    tu_fixture("dra-example-driver/v1/basic-resourceclaim-opaque-config.yaml"));
	json_t *p = dt_find(docs, "Pod", "pod0");
	json_t *rcs;
	ds_report *r;

	(void)state;
	assert_int_equal(ds_report_new(&r), 0);
	assert_int_equal(ds_dra_map_workload(ds_target_config_dra(cfg), p, r), 1);
	rcs = dt_get(p, "/spec/resourceClaims"); /* the mapped spec replaced the old one */
	/* The unchanged group keeps the original entry; the mapped one gets a new, valid name. */
	assert_int_equal(json_array_size(rcs), 2);
	assert_string_equal(dt_str(rcs, "/0/name"), "shared-gpus");
	assert_string_equal(dt_str(rcs, "/0/resourceClaimTemplateName"), "multiple-gpus");
	assert_string_equal(dt_str(rcs, "/1/name"), "shared-gpus-fast-gpu");
	assert_string_equal(dt_str(rcs, "/1/resourceClaimName"), "fast-gpu");
	assert_true(ds_dns_label_valid(dt_str(rcs, "/1/name")));
	/* Only ts-ctr0 moves; its request is kept. */
	assert_string_equal(dt_str(p, "/spec/containers/0/resources/claims/0/name"),
			    "shared-gpus-fast-gpu");
	assert_string_equal(dt_str(p, "/spec/containers/0/resources/claims/0/request"), "ts-gpu");
	for (int i = 1; i < 4; i++) {
		char ptr[64];
		snprintf(ptr, sizeof(ptr), "/spec/containers/%d/resources/claims/0/name", i);
		assert_string_equal(dt_str(p, ptr), "shared-gpus");
	}
	assert_int_equal(ds_report_count_type(r, DS_REPORT_SPLIT), 1);
	assert_int_equal(dt_count(r, DS_REPORT_REWRITE,
				  "Pod basic-resourceclaim-opaque-config/pod0", "ts-ctr0",
				  "shared-gpus", "multiple-gpus", "fast-gpu"),
			 1);
	ds_report_free(r);
	json_decref(docs);
	ds_target_config_free(cfg);
}

/* Every group mapped: the first keeps the name, names stay unique and deterministic. */
static void test_dra_mapping__split_all_groups_mapped(void **state)
{
	ds_target_config *cfg = dt_config("dra:\n  resourceClaimTemplateMappings:\n"
					  "  - {objectType: Pod, objectInstance: ALL, container: "
					  "ctr0, resourceClaimTemplate: a.gpu.example.com}\n"
					  "  - {objectType: Pod, objectInstance: ALL, container: "
					  "ctr1, resourceClaimTemplate: b-template}\n");
	json_t *docs, *p, *again;

	(void)state;
	/* B-Template is not a valid name: the config refuses it. */
	{
		ds_target_config *bad = NULL;
		const char *y = "dra:\n  resourceClaimTemplateMappings:\n"
				"  - {objectType: Pod, objectInstance: ALL, container: ctr1, "
				"resourceClaimTemplate: B-Template}\n";
		ds_err err = {0};
		assert_int_equal(ds_target_config_parse(&bad, y, strlen(y), "t.yaml", &err),
				 -EINVAL);
		assert_null(bad);
	}
	docs = dt_load_file(tu_fixture("dra-example-driver/v1beta1/gpu-test3.yaml"));
	p = dt_find(docs, "Pod", "pod0");
	again = json_deep_copy(p);
	assert_int_equal(ds_dra_map_workload(ds_target_config_dra(cfg), p, NULL), 2);
	assert_int_equal(ds_dra_map_workload(ds_target_config_dra(cfg), again, NULL), 2);
	assert_true(json_equal(p, again));
	assert_string_equal(dt_str(p, "/spec/resourceClaims/0/name"), "shared-gpu");
	assert_string_equal(dt_str(p, "/spec/resourceClaims/0/resourceClaimTemplateName"),
			    "a.gpu.example.com");
	assert_string_equal(dt_str(p, "/spec/resourceClaims/1/name"), "shared-gpu-b-template");
	assert_string_equal(dt_str(p, "/spec/containers/0/resources/claims/0/name"), "shared-gpu");
	assert_string_equal(dt_str(p, "/spec/containers/1/resources/claims/0/name"),
			    "shared-gpu-b-template");
	json_decref(again);
	json_decref(docs);
	ds_target_config_free(cfg);
}

static void test_dra_mapping__split_names_are_dns_labels_and_unique(void **state)
{
	char big[300];
	char cfgtext[1200];
	ds_target_config *cfg;
	json_t *p;
	const char *n1, *n2;

	(void)state;
	memset(big, 'x', 200);
	big[200] = '\0';
	memcpy(big + 60, ".example.", 9);
	snprintf(cfgtext, sizeof(cfgtext),
		 "dra:\n  resourceClaimMappings:\n"
		 "  - {objectType: Pod, objectInstance: ALL, container: a, resourceClaim: %s1}\n"
		 "  - {objectType: Pod, objectInstance: ALL, container: b, resourceClaim: %s2}\n"
		 "  - {objectType: Pod, objectInstance: ALL, container: c, resourceClaim: t}\n",
		 big, big);
	cfg = dt_config(cfgtext);
	/* An entry already named like the natural split name forces a suffix. */
	p = dt_object("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n"
		      "  containers:\n"
		      "  - {name: z, resources: {claims: [{name: e}]}}\n"
		      "  - {name: a, resources: {claims: [{name: e}]}}\n"
		      "  - {name: b, resources: {claims: [{name: e}]}}\n"
		      "  - {name: c, resources: {claims: [{name: e}]}}\n"
		      "  - {name: d, resources: {claims: [{name: e-t}]}}\n"
		      "  resourceClaims: [{name: e, resourceClaimName: orig}, {name: e-t, "
		      "resourceClaimName: other}]\n");
	assert_int_equal(ds_dra_map_workload(ds_target_config_dra(cfg), p, NULL), 3);
	assert_int_equal(json_array_size(dt_get(p, "/spec/resourceClaims")), 5);
	n1 = dt_str(p, "/spec/containers/1/resources/claims/0/name");
	n2 = dt_str(p, "/spec/containers/2/resources/claims/0/name");
	assert_true(ds_dns_label_valid(n1));
	assert_true(ds_dns_label_valid(n2));
	assert_true(strlen(n1) <= 63);
	assert_string_not_equal(n1, n2);
	assert_string_equal(dt_str(p, "/spec/containers/0/resources/claims/0/name"), "e");
	assert_string_equal(dt_str(p, "/spec/containers/3/resources/claims/0/name"), "e-t-2");
	json_decref(p);
	ds_target_config_free(cfg);
}

static void test_dra_mapping__init_containers(void **state)
{
	ds_target_config *cfg = dt_config("dra:\n  resourceClaimTemplateMappings:\n"
					  "  - {objectType: Pod, objectInstance: pod0, container: "
					  "init0, resourceClaimTemplate: init-gpu}\n");
	json_t *docs =
	    dt_load_file(tu_fixture("dra-example-driver/v1/initcontainer-shared-gpu.yaml"));
	json_t *p = dt_find(docs, "Pod", "pod0");

	(void)state;
	assert_int_equal(ds_dra_map_workload(ds_target_config_dra(cfg), p, NULL), 1);
	/* init0 comes first in pod-spec order but ctr0 is unchanged, so ctr0 keeps the entry. */
	assert_string_equal(dt_str(p, "/spec/resourceClaims/0/name"), "shared-gpu");
	assert_string_equal(dt_str(p, "/spec/resourceClaims/0/resourceClaimTemplateName"),
			    "single-gpu");
	assert_string_equal(dt_str(p, "/spec/resourceClaims/1/resourceClaimTemplateName"),
			    "init-gpu");
	assert_string_equal(dt_str(p, "/spec/initContainers/0/resources/claims/0/name"),
			    dt_str(p, "/spec/resourceClaims/1/name"));
	assert_string_equal(dt_str(p, "/spec/containers/0/resources/claims/0/name"), "shared-gpu");
	json_decref(docs);
	ds_target_config_free(cfg);
}

/* Every workload type, at its own pod-spec path; objectType narrows, All covers. */
static void test_dra_mapping__all_seven_workload_types(void **state)
{
	static const struct {
		const char *kind, *api, *wrap_pre, *wrap_post, *ptr;
	} kinds[] = {
	    {"Pod", "v1", "spec:\n", "", "/spec"},
	    {"Deployment", "apps/v1", "spec:\n template:\n  spec:\n", "", "/spec/template/spec"},
	    {"ReplicaSet", "apps/v1", "spec:\n template:\n  spec:\n", "", "/spec/template/spec"},
	    {"StatefulSet", "apps/v1", "spec:\n template:\n  spec:\n", "", "/spec/template/spec"},
	    {"DaemonSet", "apps/v1", "spec:\n template:\n  spec:\n", "", "/spec/template/spec"},
	    {"Job", "batch/v1", "spec:\n template:\n  spec:\n", "", "/spec/template/spec"},
	    {"CronJob", "batch/v1", "spec:\n jobTemplate:\n  spec:\n   template:\n    spec:\n", "",
	     "/spec/jobTemplate/spec/template/spec"},
	};
	ds_target_config *cfg = dt_config(
	    "dra:\n  resourceClaimMappings:\n"
	    "  - {objectType: All, objectInstance: ALL, container: ALL, resourceClaim: any}\n"
	    "  - {objectType: StatefulSet, objectInstance: ALL, container: ALL, resourceClaim: "
	    "sts-only}\n");

	(void)state;
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		char y[1024], ptr[160];
		json_t *o;

		snprintf(y, sizeof(y),
			 "apiVersion: %s\nkind: %s\nmetadata: {name: w}\n%s"
			 "     containers: [{name: c, resources: {claims: [{name: g}]}}]\n"
			 "     resourceClaims: [{name: g, resourceClaimTemplateName: src}]\n",
			 kinds[i].api, kinds[i].kind, kinds[i].wrap_pre);
		o = dt_object(y);
		assert_int_equal(ds_dra_map_workload(ds_target_config_dra(cfg), o, NULL), 1);
		snprintf(ptr, sizeof(ptr), "%s/resourceClaims/0/resourceClaimName", kinds[i].ptr);
		assert_string_equal(dt_str(o, ptr),
				    strcmp(kinds[i].kind, "StatefulSet") == 0 ? "sts-only" : "any");
		json_decref(o);
	}
	ds_target_config_free(cfg);
}

/* An entry no container lists is resolved as (container ALL, entry). */
static void test_dra_mapping__unlisted_entry_uses_container_all(void **state)
{
	ds_target_config *cfg = dt_config(
	    "dra:\n  resourceClaimMappings:\n"
	    "  - {objectType: Pod, objectInstance: ALL, container: c, resourceClaim: named}\n"
	    "  - {objectType: Pod, objectInstance: ALL, container: ALL, source: spare, "
	    "resourceClaim: for-all}\n");
	json_t *p = dt_object("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n"
			      "  containers: [{name: c}]\n"
			      "  resourceClaims: [{name: spare, resourceClaimName: x}]\n");
	ds_report *r;

	(void)state;
	assert_int_equal(ds_report_new(&r), 0);
	assert_int_equal(ds_dra_map_workload(ds_target_config_dra(cfg), p, r), 1);
	assert_string_equal(dt_str(p, "/spec/resourceClaims/0/resourceClaimName"), "for-all");
	assert_int_equal(dt_count(r, DS_REPORT_REWRITE, "Pod p", "ALL", "spare", "x", "for-all"),
			 1);
	ds_report_free(r);
	json_decref(p);
	ds_target_config_free(cfg);
}

static void test_dra_mapping__no_rule_leaves_reference(void **state)
{
	json_t *d = dt_object(
	    "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n template:\n  spec:\n"
	    "   containers: [{name: c, resources: {claims: [{name: g}]}}]\n"
	    "   resourceClaims: [{name: g, resourceClaimTemplateName: keep}]\n");
	json_t *before = json_deep_copy(d);

	assert_int_equal(ds_dra_map_workload(dra(state), d, rep(state)), 0);
	assert_true(json_equal(d, before));
	assert_int_equal(ds_report_count(rep(state)), 0);
	json_decref(d);
	json_decref(before);
}

static void test_dra_mapping__undefined_entry_is_an_error(void **state)
{
	json_t *p = dt_object("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n"
			      "  containers: [{name: c, resources: {claims: [{name: missing}]}}]\n"
			      "  resourceClaims: [{name: g, resourceClaimName: x}]\n");
	json_t *before = json_deep_copy(p);

	assert_int_equal(ds_dra_map_workload(dra(state), p, rep(state)), -EINVAL);
	assert_true(json_equal(p, before));
	assert_non_null(
	    strstr(ds_report_get(rep(state), 0)->message,
		   "container c uses claim 'missing', which spec.resourceClaims does not define"));
	json_decref(p);
	json_decref(before);
}

/* A failure found only while applying (after an earlier entry was rewritten) leaves no trace. */
static void test_dra_mapping__late_failure_leaves_object_unchanged(void **state)
{
	ds_target_config *cfg = dt_config(
	    "dra:\n  resourceClaimMappings:\n"
	    "  - {objectType: Pod, objectInstance: ALL, container: a, resourceClaim: mapped}\n"
	    "  resourceClaimTemplateMappings:\n"
	    "  - {objectType: Pod, objectInstance: ALL, container: b, "
	    "resourceClaimTemplate: tmpl, attach: true}\n");
	json_t *p =
	    dt_object("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ml}\nspec:\n"
		      "  containers:\n  - {name: a, resources: {claims: [{name: g}]}}\n"
		      "  - {name: b, resources: oops}\n"
		      "  resourceClaims: [{name: g, resourceClaimName: src}]\n");
	json_t *before = json_deep_copy(p);
	char *want = json_dumps(p, JSON_COMPACT), *got;

	assert_int_equal(ds_dra_map_workload(ds_target_config_dra(cfg), p, rep(state)), -EINVAL);
	got = json_dumps(p, JSON_COMPACT);
	assert_string_equal(got, want);
	assert_true(json_equal(p, before));
	/* one entry, the error: no rewrite reported for what was not done */
	assert_int_equal(ds_report_count(rep(state)), 1);
	assert_int_equal(ds_report_get(rep(state), 0)->type, DS_REPORT_ERROR);
	assert_non_null(strstr(ds_report_get(rep(state), 0)->message,
			       "container b: resources is not a mapping"));
	free(want);
	free(got);
	json_decref(p);
	json_decref(before);
	ds_target_config_free(cfg);
}

/* attach: containers without claims get the target; extendedResources are removed. */
static void test_dra_mapping__attach_replaces_extended_resources(void **state)
{
	ds_target_config *cfg =
	    dt_config("dra:\n  resourceClaimTemplateMappings:\n"
		      "  - {objectType: Pod, objectInstance: ALL, container: ALL, "
		      "resourceClaimTemplate: single-gpu,\n"
		      "     attach: true, extendedResources: "
		      "[deviceclass.resource.kubernetes.io/gpu.example.com, example.com/gpu]}\n");
	json_t *docs =
	    dt_load_file(tu_fixture("dra-example-driver/v1/extended-resource-request.yaml"));
	ds_report *r;

	(void)state;
	assert_int_equal(ds_report_new(&r), 0);
	for (int i = 0; i < 2; i++) {
		json_t *p = dt_find(docs, "Pod", i == 0 ? "pod0" : "pod1");

		assert_int_equal(ds_dra_map_workload(ds_target_config_dra(cfg), p, r), 2);
		assert_string_equal(dt_str(p, "/spec/resourceClaims/0/resourceClaimTemplateName"),
				    "single-gpu");
		assert_string_equal(dt_str(p, "/spec/resourceClaims/0/name"), "single-gpu");
		assert_string_equal(dt_str(p, "/spec/containers/0/resources/claims/0/name"),
				    "single-gpu");
		assert_int_equal(json_object_size(dt_get(p, "/spec/containers/0/resources/limits")),
				 0);
	}
	assert_int_equal(ds_report_count_type(r, DS_REPORT_ATTACH), 2);
	assert_int_equal(dt_count(r, DS_REPORT_RESOURCE, "pod0", "ctr0", NULL,
				  "limits.deviceclass.resource.kubernetes.io/gpu.example.com=1",
				  NULL),
			 1);
	assert_int_equal(
	    dt_count(r, DS_REPORT_RESOURCE, "pod1", "ctr0", NULL, "limits.example.com/gpu=1", NULL),
	    1);
	ds_report_free(r);
	json_decref(docs);
	ds_target_config_free(cfg);
}

/* Without attach a container without claims is left alone; attach reuses an existing entry. */
static void test_dra_mapping__attach_off_by_default_and_reuses_entry(void **state)
{
	ds_target_config *off = dt_config(
	    "dra:\n  resourceClaimMappings:\n"
	    "  - {objectType: All, objectInstance: ALL, container: ALL, resourceClaim: shared}\n");
	ds_target_config *on = dt_config("dra:\n  resourceClaimMappings:\n"
					 "  - {objectType: All, objectInstance: ALL, container: "
					 "ALL, resourceClaim: shared, attach: true}\n");
	const char *y =
	    "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n"
	    "  containers:\n  - {name: a, resources: {claims: [{name: g}]}}\n  - {name: b}\n"
	    "  resourceClaims: [{name: g, resourceClaimName: src}]\n";
	json_t *p1 = dt_object(y), *p2 = dt_object(y);

	(void)state;
	assert_int_equal(ds_dra_map_workload(ds_target_config_dra(off), p1, NULL), 1);
	assert_null(dt_get(p1, "/spec/containers/1/resources"));
	assert_int_equal(ds_dra_map_workload(ds_target_config_dra(on), p2, NULL), 2);
	assert_int_equal(json_array_size(dt_get(p2, "/spec/resourceClaims")), 1);
	assert_string_equal(dt_str(p2, "/spec/containers/1/resources/claims/0/name"), "g");
	json_decref(p1);
	json_decref(p2);
	ds_target_config_free(off);
	ds_target_config_free(on);
}

static void test_dra_mapping__device_classes_everywhere(void **state)
{
	ds_target_config *cfg = dt_config(
	    "dra:\n  deviceClassMappings:\n  - {from: gpu.example.com, to: gpu.nvidia.com}\n");
	json_t *v1 =
	    dt_load_file(tu_fixture("dra-example-driver/v1/prioritized-alternatives.yaml"));
	json_t *b1 = dt_load_file(tu_fixture("dra-example-driver/v1beta1/gpu-test2.yaml"));
	json_t *cl =
	    dt_load_file(tu_fixture("dra-example-driver/v1/basic-shared-claim-across-pods.yaml"));
	json_t *t;
	ds_report *r;

	(void)state;
	assert_int_equal(ds_report_new(&r), 0);
	t = dt_find(v1, "ResourceClaimTemplate", "prioritized-gpu");
	assert_int_equal(ds_dra_map_device_classes(ds_target_config_dra(cfg), t, r), 3);
	for (int i = 0; i < 3; i++) {
		char ptr[80];
		snprintf(ptr, sizeof(ptr),
			 "/spec/spec/devices/requests/0/firstAvailable/%d/deviceClassName", i);
		assert_string_equal(dt_str(t, ptr), "gpu.nvidia.com");
	}
	assert_int_equal(dt_count(r, DS_REPORT_DEVICE_CLASS, "prioritized-gpu", NULL,
				  "gpu/huge-gpu", "gpu.example.com", "gpu.nvidia.com"),
			 1);
	t = dt_find(b1, "ResourceClaimTemplate", "multiple-gpus");
	assert_int_equal(ds_dra_map_device_classes(ds_target_config_dra(cfg), t, r), 1);
	assert_string_equal(dt_str(t, "/spec/spec/devices/requests/0/deviceClassName"),
			    "gpu.nvidia.com");
	t = dt_find(cl, "ResourceClaim", "single-gpu");
	assert_int_equal(ds_dra_map_device_classes(ds_target_config_dra(cfg), t, r), 1);
	assert_string_equal(dt_str(t, "/spec/devices/requests/0/exactly/deviceClassName"),
			    "gpu.nvidia.com");
	/* Mappings do not chain: the renamed class is not renamed again. */
	assert_int_equal(ds_dra_map_device_classes(ds_target_config_dra(cfg), t, r), 0);
	ds_report_free(r);
	json_decref(v1);
	json_decref(b1);
	json_decref(cl);
	ds_target_config_free(cfg);
}

/* ds_dra_workload_refs: every reference, as ds_dra_map_workload resolves it, nothing changed. */
static void test_dra_mapping__workload_refs_as_the_mapping_resolves_them(void **state)
{
	struct fx *f = *state;
	const ds_dra_config *d = ds_target_config_dra(f->cfg);
	json_t *docs =
	    dt_load_file(tu_fixture("dra-example-driver/v1/initcontainer-shared-gpu.yaml"));
	json_t *p = dt_find(docs, "Pod", "pod0"), *before, *mapped;
	ds_dra_ref *refs = NULL;
	ds_report *r;
	ds_err err = {0};
	size_t n = 0;

	/* an entry no container lists, and a container without claims */
	assert_int_equal(json_array_append_new(dt_get(p, "/spec/resourceClaims"),
					       json_pack("{ss ss}", "name", "spare",
							 "resourceClaimName", "spare-claim")),
			 0);
	assert_int_equal(
	    json_array_append_new(dt_get(p, "/spec/containers"),
				  json_pack("{ss ss}", "name", "sidecar", "image", "busybox")),
	    0);
	before = json_deep_copy(p);
	assert_int_equal(ds_dra_workload_refs(d, p, &refs, &n, &err), 0);
	assert_true(json_equal(p, before));
	assert_int_equal(n, 3);
	/* pod-spec order: the init container, the container, the unlisted entry */
	assert_string_equal(refs[0].container, "init0");
	assert_true(refs[0].init_container);
	assert_string_equal(refs[1].container, "ctr0");
	assert_false(refs[1].init_container);
	for (size_t i = 0; i < 2; i++) {
		assert_string_equal(refs[i].entry, "shared-gpu");
		assert_int_equal(refs[i].kind, DS_TARGET_TEMPLATE);
		assert_string_equal(refs[i].from, "single-gpu");
		/* Pod ALL ALL: claim rule [1] and template rule [1] tie; E's kind wins */
		assert_non_null(refs[i].rule);
		assert_string_equal(refs[i].rule->list, "resourceClaimTemplateMappings");
		assert_int_equal(refs[i].rule->index, 1);
		assert_int_equal(refs[i].target_kind, DS_TARGET_TEMPLATE);
		assert_string_equal(refs[i].target, "gpu-rct2");
		assert_false(refs[i].attach);
		assert_string_equal(refs[i].error, "");
	}
	assert_null(refs[2].container);
	assert_string_equal(refs[2].entry, "spare");
	assert_int_equal(refs[2].kind, DS_TARGET_CLAIM);
	assert_string_equal(refs[2].from, "spare-claim");
	assert_string_equal(refs[2].rule->list, "resourceClaimMappings");
	assert_int_equal(refs[2].rule->index, 1);
	assert_string_equal(refs[2].target, "gpu-rc-claim2");
	/* what the mapping then does agrees */
	mapped = json_deep_copy(p);
	assert_int_equal(ds_report_new(&r), 0);
	assert_int_equal(ds_dra_map_workload(d, mapped, r), 3);
	assert_string_equal(dt_str(mapped, "/spec/resourceClaims/0/resourceClaimTemplateName"),
			    "gpu-rct2");
	assert_string_equal(dt_str(mapped, "/spec/resourceClaims/1/resourceClaimName"),
			    "gpu-rc-claim2");
	free(refs);
	ds_report_free(r);
	json_decref(mapped);
	json_decref(before);
	json_decref(docs);
}

/* A tie is the reference's error; an attach rule's container is a reference; a bad spec fails. */
static void test_dra_mapping__workload_refs_ties_attach_and_errors(void **state)
{
	ds_target_config *tie = dt_config("dra:\n  resourceClaimMappings:\n"
					  "  - {objectType: Pod, objectInstance: ALL, container: "
					  "ALL, source: gpu, resourceClaim: t1}\n"
					  "  - {objectType: Pod, objectInstance: ALL, container: "
					  "ALL, source: src-claim, resourceClaim: t2}\n"
					  "  - {objectType: Pod, objectInstance: ALL, container: "
					  "side, resourceClaim: shared, attach: true}\n");
	json_t *p = dt_object("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ml}\n"
			      "spec:\n  containers:\n"
			      "  - {name: c, resources: {claims: [{name: gpu}]}}\n"
			      "  - {name: side}\n  - {name: other}\n"
			      "  resourceClaims: [{name: gpu, resourceClaimName: src-claim}]\n");
	json_t *bad = dt_object("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n"
				"spec:\n  template:\n    spec:\n      containers:\n"
				"      - {name: c, resources: {claims: [{name: nowhere}]}}\n");
	json_t *cm = dt_object("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n");
	ds_dra_ref *refs = NULL;
	ds_err err = {0};
	size_t n = 0;

	(void)state;
	assert_int_equal(ds_dra_workload_refs(ds_target_config_dra(tie), p, &refs, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_string_equal(refs[0].container, "c");
	assert_null(refs[0].rule);
	assert_string_equal(refs[0].target, "src-claim");
	assert_non_null(strstr(refs[0].error, "same specificity"));
	assert_non_null(strstr(refs[0].error, "resourceClaimMappings[0]"));
	assert_non_null(strstr(refs[0].error, "resourceClaimMappings[1]"));
	assert_true(refs[1].attach);
	assert_string_equal(refs[1].container, "side");
	assert_null(refs[1].entry);
	assert_null(refs[1].from);
	assert_int_equal(refs[1].rule->index, 2);
	assert_int_equal(refs[1].target_kind, DS_TARGET_CLAIM);
	assert_string_equal(refs[1].target, "shared");
	assert_string_equal(refs[1].error, "");
	free(refs);

	refs = NULL;
	assert_int_equal(ds_dra_workload_refs(ds_target_config_dra(tie), bad, &refs, &n, &err),
			 -EINVAL);
	assert_null(refs);
	assert_non_null(strstr(err.msg, "container c uses claim 'nowhere'"));
	n = 7;
	assert_int_equal(ds_dra_workload_refs(ds_target_config_dra(tie), cm, &refs, &n, &err), 0);
	assert_int_equal(n, 0);
	assert_null(refs);
	json_decref(p);
	json_decref(bad);
	json_decref(cm);
	ds_target_config_free(tie);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_dra_mapping__seed_specific_pod_container_wins,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_dra_mapping__seed_other_container_falls_to_all,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_dra_mapping__seed_any_pod_maps_to_claim2, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_dra_mapping__same_kind_tie_break_for_templates,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(
		test_dra_mapping__deployment_rule_only_for_that_deployment, setup, teardown),
	    cmocka_unit_test(test_dra_mapping__specificity_weights),
	    cmocka_unit_test(test_dra_mapping__source_selector),
	    cmocka_unit_test(test_dra_mapping__ambiguous_tie_is_a_workload_error),
	    cmocka_unit_test(test_dra_mapping__split_shared_entry),
	    cmocka_unit_test(test_dra_mapping__split_all_groups_mapped),
	    cmocka_unit_test(test_dra_mapping__split_names_are_dns_labels_and_unique),
	    cmocka_unit_test(test_dra_mapping__init_containers),
	    cmocka_unit_test(test_dra_mapping__all_seven_workload_types),
	    cmocka_unit_test(test_dra_mapping__unlisted_entry_uses_container_all),
	    cmocka_unit_test_setup_teardown(test_dra_mapping__no_rule_leaves_reference, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_dra_mapping__undefined_entry_is_an_error, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_dra_mapping__late_failure_leaves_object_unchanged,
					    setup, teardown),
	    cmocka_unit_test(test_dra_mapping__attach_replaces_extended_resources),
	    cmocka_unit_test(test_dra_mapping__attach_off_by_default_and_reuses_entry),
	    cmocka_unit_test_setup_teardown(test_dra_mapping__device_classes_everywhere, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(
		test_dra_mapping__workload_refs_as_the_mapping_resolves_them, setup, teardown),
	    cmocka_unit_test(test_dra_mapping__workload_refs_ties_attach_and_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
