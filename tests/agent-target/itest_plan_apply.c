/*
 * What `plan` prints is what a real API server accepts and runs: the fixtures
 * of one resource.k8s.io version planned for the other, applied with
 * server-side apply to the real control planes (kube_v1, kube_v1beta1), and
 * their pods Running with claims allocated on the target's devices.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "testutil.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *tmpdir;

static void kubectl(struct tu_run *r, const char *kubeconfig, const char *const *args)
{
	const char *argv[40];
	size_t n = 0;

	argv[n++] = tu_env("DS_KUBE_BIN");
	argv[n++] = "kubectl";
	argv[n++] = "--kubeconfig";
	argv[n++] = kubeconfig;
	for (; *args && n < 39; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	tu_run(r, NULL, argv);
}

/* Plan the fixtures of `folder` for `api`, mapping each namespace NS to plan-NS. */
static char *plan_folder(const char *const *files, const char *api, const char *const *namespaces)
{
	char cfg[4096], *cfg_path, *out_path;
	size_t o = 0;
	const char *argv[40];
	size_t n = 0;
	struct tu_run r;

	o += (size_t)snprintf(cfg + o, sizeof(cfg) - o,
			      "kind: TargetConfig\nmode: migrate\nnamespaceMappings:\n");
	for (const char *const *ns = namespaces; *ns; ns++)
		o += (size_t)snprintf(cfg + o, sizeof(cfg) - o, "  %s: plan-%s\n", *ns, *ns);
	if (asprintf(&cfg_path, "%s/target-%s.yaml", tmpdir, strrchr(api, '/') + 1) < 0 ||
	    asprintf(&out_path, "%s/plan-%s.yaml", tmpdir, strrchr(api, '/') + 1) < 0)
		fail_msg("out of memory");
	tu_write_file(cfg_path, cfg);
	argv[n++] = tu_env("DS_TARGET_BIN");
	argv[n++] = "plan";
	argv[n++] = "--config";
	argv[n++] = cfg_path;
	argv[n++] = "--target-api";
	argv[n++] = api;
	argv[n++] = "--source-cluster";
	argv[n++] = "itest";
	for (const char *const *f = files; *f && n < 38; f++) {
		argv[n++] = "-f";
		argv[n++] = tu_fixture(*f);
	}
	argv[n] = NULL;
	tu_run(&r, NULL, argv);
	if (r.status != 0)
		fail_msg("plan failed (%d):\n%s", r.status, r.err);
	tu_write_file(out_path, r.out);
	tu_run_dispose(&r);
	free(cfg_path);
	return out_path;
}

static void apply(const char *kubeconfig, const char *path)
{
	struct tu_run r;

	kubectl(&r, kubeconfig,
		(const char *[]){"apply", "--server-side", "--field-manager=drasync", "-f", path,
				 NULL});
	if (r.status != 0)
		fail_msg("the API server refused the plan:\n%s\n%s", r.out, r.err);
	tu_run_dispose(&r);
}

static void wait_running(const char *kubeconfig, const char *ns)
{
	struct tu_run r;

	kubectl(&r, kubeconfig,
		(const char *[]){"wait", "-n", ns, "--for=jsonpath={.status.phase}=Running", "pod",
				 "--all", "--timeout=120s", NULL});
	if (r.status != 0) {
		struct tu_run d;
		kubectl(
		    &d, kubeconfig,
		    (const char *[]){"get", "pods,resourceclaims", "-n", ns, "-o", "wide", NULL});
		fail_msg("pods of %s not Running:\n%s\n%s\n%s", ns, r.err, d.out, d.err);
	}
	tu_run_dispose(&r);
}

/* Every claim of the namespace is allocated, to devices of the target's driver. */
static void claims_allocated(const char *kubeconfig, const char *ns, size_t want)
{
	struct tu_run r;
	json_t *list, *items, *c;
	json_error_t je;
	size_t i;

	kubectl(&r, kubeconfig,
		(const char *[]){"get", "resourceclaims", "-n", ns, "-o", "json", NULL});
	assert_int_equal(r.status, 0);
	list = json_loads(r.out, 0, &je);
	assert_non_null(list);
	items = json_object_get(list, "items");
	assert_int_equal(json_array_size(items), want);
	json_array_foreach (items, i, c) {
		json_t *res = json_object_get(
		    json_object_get(json_object_get(json_object_get(c, "status"), "allocation"),
				    "devices"),
		    "results");
		const char *driver =
		    json_string_value(json_object_get(json_array_get(res, 0), "driver"));

		if (!driver || strcmp(driver, "gpu.example.com") != 0)
			fail_msg("claim %zu of %s is not allocated:\n%s", i, ns, r.out);
	}
	json_decref(list);
	tu_run_dispose(&r);
}

/* Delete the namespaces in one request each, waiting for all of them at once. */
static void delete_namespaces(const char *kubeconfig, const char *const *namespaces)
{
	const char *argv[40] = {"delete"};
	char names[32][128];
	size_t n = 1, i = 0;
	struct tu_run r;

	for (const char *const *ns = namespaces; *ns && i < 32 && n < 35; ns++, i++) {
		snprintf(names[i], sizeof(names[i]), "namespace/plan-%s", *ns);
		argv[n++] = names[i];
	}
	argv[n++] = "--ignore-not-found";
	argv[n++] = "--wait=true";
	argv[n++] = "--timeout=120s";
	argv[n] = NULL;
	kubectl(&r, kubeconfig, argv);
	tu_run_dispose(&r);
}

/* 1.32/1.33-era manifests (flat v1beta1 requests) onto a 1.34+ cluster. */
static void test_plan_apply__v1beta1_fixtures_run_on_a_v1_cluster(void **state)
{
	static const char *const files[] = {
	    "dra-example-driver/v1beta1/gpu-test1.yaml",
	    "dra-example-driver/v1beta1/gpu-test2.yaml",
	    "dra-example-driver/v1beta1/gpu-test3.yaml",
	    "dra-example-driver/v1beta1/gpu-test4.yaml",
	    NULL,
	};
	static const char *const namespaces[] = {"gpu-test1", "gpu-test2", "gpu-test3", "gpu-test4",
						 NULL};
	/* claims: test1 two generated, test2 one, test3 one, test4 the shared one */
	static const size_t claims[] = {2, 1, 1, 1};
	const char *kc = tu_env("DS_KUBECONFIG_V1");
	char *out;

	(void)state;
	delete_namespaces(kc, namespaces);
	out = plan_folder(files, "resource.k8s.io/v1", namespaces);
	apply(kc, out);
	for (size_t i = 0; namespaces[i]; i++) {
		char ns[64];

		snprintf(ns, sizeof(ns), "plan-%s", namespaces[i]);
		wait_running(kc, ns);
		claims_allocated(kc, ns, claims[i]);
	}
	delete_namespaces(kc, namespaces);
	free(out);
}

/* 1.34+ manifests (requests under `exactly`) onto a cluster that serves only v1beta1. */
static void test_plan_apply__v1_fixtures_on_a_v1beta1_cluster(void **state)
{
	static const char *const run_files[] = {
	    "dra-example-driver/v1/basic-resourceclaimtemplate.yaml",
	    "dra-example-driver/v1/basic-shared-claim-across-pods.yaml",
	    "dra-example-driver/v1/initcontainer-shared-gpu.yaml",
	    NULL,
	};
	static const char *const run_namespaces[] = {
	    "basic-resourceclaimtemplate",
	    "basic-shared-claim-across-pods",
	    "initcontainer-shared-gpu",
	    NULL,
	};
	static const size_t claims[] = {2, 1, 1};
	/* The rest only has to be accepted: some need features a 1.33 scheduler lacks. */
	static const char *const accept_files[] = {
	    "dra-example-driver/v1/basic-multiple-requests.yaml",
	    "dra-example-driver/v1/basic-resourceclaim-opaque-config.yaml",
	    "dra-example-driver/v1/basic-shared-claim-across-containers.yaml",
	    "dra-example-driver/v1/cel-selector.yaml",
	    "dra-example-driver/v1/prioritized-alternatives.yaml",
	    NULL,
	};
	static const char *const accept_namespaces[] = {
	    "basic-multiple-requests",
	    "basic-resourceclaim-opaque-config",
	    "basic-shared-claim-across-containers",
	    "cel-selector",
	    "prioritized-alternatives",
	    NULL,
	};
	const char *kc = tu_env("DS_KUBECONFIG_V1BETA1");
	char *out;

	(void)state;
	delete_namespaces(kc, run_namespaces);
	delete_namespaces(kc, accept_namespaces);
	out = plan_folder(run_files, "resource.k8s.io/v1beta1", run_namespaces);
	apply(kc, out);
	for (size_t i = 0; run_namespaces[i]; i++) {
		char ns[80];

		snprintf(ns, sizeof(ns), "plan-%s", run_namespaces[i]);
		wait_running(kc, ns);
		claims_allocated(kc, ns, claims[i]);
	}
	delete_namespaces(kc, run_namespaces);
	free(out);
	out = plan_folder(accept_files, "resource.k8s.io/v1beta1", accept_namespaces);
	apply(kc, out);
	delete_namespaces(kc, accept_namespaces);
	free(out);
}

static int setup(void **state)
{
	(void)state;
	tmpdir = tu_mkdtemp("plan-apply");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	free(tmpdir);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_plan_apply__v1beta1_fixtures_run_on_a_v1_cluster),
	    cmocka_unit_test(test_plan_apply__v1_fixtures_on_a_v1beta1_cluster),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
