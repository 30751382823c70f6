/*
 * drasync-target inventory as a process against the real control planes
 * (fixtures kube_v1, kube_v1beta1): the exists column. A ledger holds
 * workloads whose templates (after mapping) are in the test's fresh target
 * namespace or not; one present, one missing is yes / no and exit 1, until
 * the missing one is created. On the cluster that serves only v1beta1 the
 * lookup goes through the version it serves.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dstest.h"
#include "testutil.h"
#include "tu_kube.h"
#include "tu_ledger.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct site {
	char *dir, *dst;
	char config[1100], ledger[1100];
	const char *kubeconfig;
	ds_kube *k;
};

#define POD                                                                                        \
	"apiVersion: v1\nkind: Pod\nmetadata: {name: %s, namespace: ml}\nspec:\n"                  \
	"  containers: [{name: ctr0, image: x, resources: {claims: [{name: gpu}]}}]\n"             \
	"  resourceClaims: [{name: gpu, resourceClaimTemplateName: %s}]\n"
#define DEPLOYMENT                                                                                 \
	"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: %s, namespace: ml}\nspec:\n"      \
	"  selector: {matchLabels: {app: c}}\n  template:\n    metadata: {labels: {app: c}}\n"     \
	"    spec:\n"                                                                              \
	"      containers: [{name: ctr0, image: x, resources: {claims: [{name: gpu}]}}]\n"         \
	"      resourceClaims: [{name: gpu, resourceClaimTemplateName: %s}]\n"

static void site_new(struct site *s, const char *kubeconfig_env)
{
	char text[2000];

	memset(s, 0, sizeof(*s));
	s->kubeconfig = tu_env(kubeconfig_env);
	s->k = tu_kube_connect(s->kubeconfig);
	s->dst = tu_kube_new_namespace(s->k, "inv", "");
	s->dir = tu_mkdtemp("itest-inventory");
	snprintf(s->config, sizeof(s->config), "%s/target.yaml", s->dir);
	snprintf(s->ledger, sizeof(s->ledger), "%s/ledger.db", s->dir);
	snprintf(text, sizeof(text),
		 "apiVersion: drasync.io/v1alpha1\nkind: TargetConfig\nstateDir: %s\n"
		 "namespaceMappings: {ml: %s}\n"
		 "dra:\n  resourceClaimTemplateMappings:\n"
		 "    - {objectType: Deployment, objectInstance: c, container: ALL, "
		 "resourceClaimTemplate: present-rct}\n",
		 s->dir, s->dst);
	tu_write_file(s->config, text);
}

static void site_free(struct site *s)
{
	tu_kube_drop_namespace(s->k, s->dst);
	ds_kube_free(s->k);
	free(s->dir);
}

/* Pod a -> present-rct, Pod b -> missing-rct (both unmapped), Deployment c -> gone, mapped. */
static void fill(struct site *s)
{
	ds_record recs[3];
	char *payloads[3], y[1000];
	json_t *objs[3];
	tu_ledger l;

	snprintf(y, sizeof(y), POD, "a", "present-rct");
	objs[0] = dt_object(y);
	snprintf(y, sizeof(y), POD, "b", "missing-rct");
	objs[1] = dt_object(y);
	snprintf(y, sizeof(y), DEPLOYMENT, "c", "gone");
	objs[2] = dt_object(y);
	for (int i = 0; i < 3; i++)
		recs[i] = tu_record_upsert(objs[i], "uid", &payloads[i]);
	tu_ledger_open(&l, s->ledger, "prod-east");
	tu_ledger_commit(&l, recs, 3, NULL, NULL);
	tu_ledger_close(&l);
	for (int i = 0; i < 3; i++) {
		free(payloads[i]);
		json_decref(objs[i]);
	}
}

static void create_template(struct site *s, const char *api, const char *name)
{
	if (strcmp(api, "resource.k8s.io/v1") == 0)
		tu_kube_create(s->k,
			       tu_kube_doc("apiVersion: %s\nkind: ResourceClaimTemplate\n"
					   "metadata: {name: %s, namespace: %s}\n"
					   "spec: {spec: {devices: {requests: [{name: gpu, "
					   "exactly: {deviceClassName: gpu.example.com}}]}}}\n",
					   api, name, s->dst));
	else
		tu_kube_create(s->k, tu_kube_doc("apiVersion: %s\nkind: ResourceClaimTemplate\n"
						 "metadata: {name: %s, namespace: %s}\n"
						 "spec: {spec: {devices: {requests: [{name: gpu, "
						 "deviceClassName: gpu.example.com}]}}}\n",
						 api, name, s->dst));
}

static void inventory(struct site *s, const char *output, struct tu_run *r)
{
	tu_run(r, NULL,
	       (const char *[]){tu_env("DS_TARGET_BIN"), "inventory", "--config", s->config,
				"--kubeconfig", s->kubeconfig, "-o", output, NULL});
}

/* The JSON row of (objectType, instance), or fails. */
static json_t *row(json_t *doc, const char *type, const char *name)
{
	size_t i;
	json_t *v;

	json_array_foreach (json_object_get(doc, "references"), i, v)
		if (strcmp(dt_str(v, "/objectType"), type) == 0 &&
		    strcmp(dt_str(v, "/objectInstance"), name) == 0)
			return v;
	fail_msg("no row %s %s", type, name);
	return NULL;
}

static void check_exists(struct site *s, const char *a, const char *b, const char *c, int rc)
{
	struct tu_run r;
	json_error_t jerr;
	json_t *doc;

	inventory(s, "json", &r);
	assert_int_equal(r.status, rc);
	doc = json_loads(r.out, 0, &jerr);
	if (!doc)
		fail_msg("not JSON: %s\n%s\n%s", jerr.text, r.out, r.err);
	assert_string_equal(dt_str(row(doc, "Pod", "a"), "/targetExists"), a);
	assert_string_equal(dt_str(row(doc, "Pod", "b"), "/targetExists"), b);
	assert_string_equal(dt_str(row(doc, "Deployment", "c"), "/targetExists"), c);
	assert_string_equal(dt_str(row(doc, "Pod", "a"), "/to/namespace"), s->dst);
	assert_string_equal(dt_str(row(doc, "Deployment", "c"), "/to/name"), "present-rct");
	assert_true(json_is_null(json_object_get(row(doc, "Pod", "a"), "targetExistsReason")));
	assert_int_equal(json_integer_value(json_object_get(doc, "missing")), rc ? 1 : 0);
	assert_true(json_is_boolean(json_object_get(row(doc, "Pod", "b"), "missing")));
	assert_int_equal(json_is_true(json_object_get(row(doc, "Pod", "b"), "missing")), rc == 1);
	json_decref(doc);
	tu_run_dispose(&r);
}

static void test_itest_inventory__present_yes_missing_no_and_exit_1(void **state)
{
	struct site s;
	struct tu_run r;
	char line[400];

	(void)state;
	site_new(&s, "DS_KUBECONFIG_V1");
	fill(&s);
	create_template(&s, "resource.k8s.io/v1", "present-rct");

	/* the table: a and c land on present-rct (yes), b's missing-rct is not there */
	inventory(&s, "text", &r);
	assert_int_equal(r.status, 1);
	snprintf(line, sizeof(line), "template %s/present-rct", s.dst);
	assert_non_null(strstr(r.out, line));
	assert_non_null(strstr(r.out, "1 need a look"));
	assert_non_null(strstr(r.out, "  Pod ml/b, container ctr0, entry gpu: the target has no "
				      "such object and no source replicates it\n"));
	assert_null(strstr(r.out, "unknown"));
	tu_run_dispose(&r);
	check_exists(&s, "yes", "no", "yes", 1);

	/* -o yaml says which target has the name already, which not; exit 1 all the same */
	inventory(&s, "yaml", &r);
	assert_int_equal(r.status, 1);
	snprintf(line, sizeof(line),
		 "    #   the target has ResourceClaimTemplate %s/present-rct: the name may stay\n",
		 s.dst);
	assert_non_null(strstr(r.out, line));
	snprintf(line, sizeof(line),
		 "    #   the target has no ResourceClaimTemplate %s/missing-rct\n", s.dst);
	assert_non_null(strstr(r.out, line));
	assert_non_null(strstr(r.err, "1 claim references need a look"));
	tu_run_dispose(&r);

	/* the operator creates it: exit 0 */
	create_template(&s, "resource.k8s.io/v1", "missing-rct");
	check_exists(&s, "yes", "yes", "yes", 0);

	/* a context the kubeconfig lacks is a usage error naming what to pass */
	tu_run(&r, NULL,
	       (const char *[]){tu_env("DS_TARGET_BIN"), "inventory", "--config", s.config,
				"--kubeconfig", s.kubeconfig, "--context", "no-such-context",
				NULL});
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "no-such-context"));
	assert_non_null(strstr(r.err, "--context NAME"));
	tu_run_dispose(&r);
	site_free(&s);
}

/* A cluster that serves resource.k8s.io/v1beta1 only: asked in that version. */
static void test_itest_inventory__v1beta1_cluster_is_asked_in_its_version(void **state)
{
	struct site s;

	(void)state;
	site_new(&s, "DS_KUBECONFIG_V1BETA1");
	fill(&s);
	create_template(&s, "resource.k8s.io/v1beta1", "present-rct");
	check_exists(&s, "yes", "no", "yes", 1);
	site_free(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_itest_inventory__present_yes_missing_no_and_exit_1),
	    cmocka_unit_test(test_itest_inventory__v1beta1_cluster_is_asked_in_its_version),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
