/* `drasync-target plan` as a user runs it: on every fixture, bad input, exit codes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/k8s_object.h"
#include "drasync/yaml.h"
#include "dstest.h"
#include "testutil.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *tmpdir;

static const char *write_tmp(const char *name, const char *text)
{
	static char paths[8][1024];
	static unsigned next;
	char *p = paths[next++ % 8];

	snprintf(p, sizeof(paths[0]), "%s/%s", tmpdir, name);
	tu_write_file(p, text);
	return p;
}

static const char *migrate_cfg(void)
{
	return write_tmp("migrate.yaml",
			 "apiVersion: drasync.io/v1alpha1\nkind: TargetConfig\nmode: migrate\n");
}

/* Run plan with argv tail; parse stdout as JSON when -o json. */
static void plan(struct tu_run *r, const char *input, const char *const *args)
{
	const char *argv[32];
	size_t n = 0;

	argv[n++] = tu_env("DS_TARGET_BIN");
	argv[n++] = "plan";
	for (; *args && n < 31; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	tu_run(r, input, argv);
	if (r->status >= 128 || strstr(r->err, "Sanitizer"))
		fail_msg("plan crashed (status %d):\n%s", r->status, r->err);
}

static json_t *items(const struct tu_run *r)
{
	json_error_t je;
	json_t *list = json_loads(r->out, 0, &je);
	json_t *it;

	if (!list)
		fail_msg("stdout is not JSON: %s\n%s", je.text, r->out);
	assert_string_equal(ds_obj_kind(list), "List");
	it = json_incref(json_object_get(list, "items"));
	json_decref(list);
	return it;
}

static size_t count_docs(const char *path)
{
	json_t *docs = dt_load_file(path);
	size_t n = json_array_size(docs);

	json_decref(docs);
	return n;
}

/* Every v1 fixture passes through unchanged in substance. */
static void test_plan__every_v1_fixture_in_migrate_mode(void **state)
{
	char dir[1024];
	DIR *d;
	struct dirent *de;
	int seen = 0;

	(void)state;
	snprintf(dir, sizeof(dir), "%s", tu_fixture("dra-example-driver/v1"));
	d = tu_opendir(dir);
	while ((de = readdir(d))) {
		char path[1400];
		struct tu_run r;
		json_t *out, *orig, *o;
		size_t i;

		if (!strstr(de->d_name, ".yaml"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		plan(&r, NULL,
		     (const char *[]){"--config", migrate_cfg(), "-f", path, "-o", "json", NULL});
		if (r.status != 0)
			fail_msg("%s: exit %d\n%s", de->d_name, r.status, r.err);
		out = items(&r);
		assert_int_equal(json_array_size(out), count_docs(path));
		orig = dt_load_file(path);
		json_array_foreach (out, i, o) {
			json_t *src = dt_find(orig, ds_obj_kind(o), ds_obj_name(o));

			/* Same spec (no rules, same API version), plus drasync's label. */
			if (json_object_get(src, "spec") &&
			    !json_equal(json_object_get(o, "spec"), json_object_get(src, "spec")))
				fail_msg("%s: %s %s: spec differs:\n%s\n%s", de->d_name,
					 ds_obj_kind(o), ds_obj_name(o),
					 json_dumps(json_object_get(o, "spec"), JSON_SORT_KEYS),
					 json_dumps(json_object_get(src, "spec"), JSON_SORT_KEYS));
			assert_string_equal(ds_obj_api_version(o), ds_obj_api_version(src));
			assert_string_equal(
			    dt_str(o, "/metadata/labels/app.kubernetes.io~1managed-by"), "drasync");
		}
		/* Namespaces come first: the apply order. */
		assert_string_equal(ds_obj_kind(json_array_get(out, 0)), "Namespace");
		assert_non_null(strstr(r.err, "0 failed"));
		json_decref(orig);
		json_decref(out);
		tu_run_dispose(&r);
		seen++;
	}
	closedir(d);
	assert_int_equal(seen, 10);
}

/* Every v1beta1 fixture onto a v1 target (converted) and a v1beta1 target (as it was). */
static void test_plan__every_v1beta1_fixture_both_targets(void **state)
{
	char dir[1024];
	DIR *d;
	struct dirent *de;
	int seen = 0;

	(void)state;
	snprintf(dir, sizeof(dir), "%s", tu_fixture("dra-example-driver/v1beta1"));
	d = tu_opendir(dir);
	while ((de = readdir(d))) {
		char path[1400];
		json_t *orig;

		if (!strstr(de->d_name, ".yaml"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		orig = dt_load_file(path);
		for (int beta = 0; beta < 2; beta++) {
			struct tu_run r;
			json_t *out, *o;
			size_t i;

			plan(&r, NULL,
			     (const char *[]){"--config", migrate_cfg(), "--target-api",
					      beta ? "resource.k8s.io/v1beta1"
						   : "resource.k8s.io/v1",
					      "-f", path, "-o", "json", NULL});
			if (r.status != 0)
				fail_msg("%s: exit %d\n%s", de->d_name, r.status, r.err);
			out = items(&r);
			assert_int_equal(json_array_size(out), json_array_size(orig));
			json_array_foreach (out, i, o) {
				json_t *src = dt_find(orig, ds_obj_kind(o), ds_obj_name(o));
				json_t *rq;
				size_t k;

				if (!ds_obj_in_group(o, "resource.k8s.io")) {
					assert_true(!json_object_get(src, "spec") ||
						    json_equal(json_object_get(o, "spec"),
							       json_object_get(src, "spec")));
					continue;
				}
				assert_string_equal(ds_obj_api_version(o),
						    beta ? "resource.k8s.io/v1beta1"
							 : "resource.k8s.io/v1");
				json_array_foreach (
				    dt_get(o, strcmp(ds_obj_kind(o), "ResourceClaim") == 0
						  ? "/spec/devices/requests"
						  : "/spec/spec/devices/requests"),
				    k, rq) {
					/* v1 holds the class under exactly, v1beta1 on the request.
					 */
					assert_string_equal(
					    dt_str(rq, beta ? "/deviceClassName"
							    : "/exactly/deviceClassName"),
					    "gpu.example.com");
					assert_null(
					    dt_get(rq, beta ? "/exactly" : "/deviceClassName"));
				}
				if (beta)
					assert_true(json_equal(json_object_get(o, "spec"),
							       json_object_get(src, "spec")));
			}
			json_decref(out);
			tu_run_dispose(&r);
		}
		json_decref(orig);
		seen++;
	}
	closedir(d);
	assert_int_equal(seen, 4);
}

/* v1beta1 fixtures onto a v1 target, and v1 fixtures onto a v1beta1 target. */
static void test_plan__conversion_both_ways(void **state)
{
	struct tu_run r;
	json_t *out, *t;

	(void)state;
	plan(&r, NULL,
	     (const char *[]){"--config", migrate_cfg(), "-f",
			      tu_fixture("dra-example-driver/v1beta1/gpu-test2.yaml"), "-o", "json",
			      NULL});
	assert_int_equal(r.status, 0);
	out = items(&r);
	t = dt_find(out, "ResourceClaimTemplate", "multiple-gpus");
	assert_string_equal(ds_obj_api_version(t), "resource.k8s.io/v1");
	assert_int_equal(
	    json_integer_value(dt_get(t, "/spec/spec/devices/requests/0/exactly/count")), 2);
	assert_non_null(strstr(r.err, "convert     ResourceClaimTemplate gpu-test2/multiple-gpus: "
				      "resource.k8s.io/v1beta1 -> resource.k8s.io/v1"));
	json_decref(out);
	tu_run_dispose(&r);

	plan(&r, NULL,
	     (const char *[]){
		 "--config", migrate_cfg(), "--target-api", "resource.k8s.io/v1beta1", "-f",
		 tu_fixture("dra-example-driver/v1/gpu-allow-multiple-allocations.yaml"), "-o",
		 "json", NULL});
	assert_int_equal(r.status, 0);
	out = items(&r);
	t = dt_find(out, "ResourceClaim", "shared-gpu-pod0");
	assert_string_equal(ds_obj_api_version(t), "resource.k8s.io/v1beta1");
	assert_string_equal(dt_str(t, "/spec/devices/requests/0/deviceClassName"),
			    "gpu.example.com");
	assert_string_equal(dt_str(t, "/spec/devices/requests/0/capacity/requests/memory"), "16Gi");
	assert_null(dt_get(t, "/spec/devices/requests/0/exactly"));
	json_decref(out);
	tu_run_dispose(&r);
}

/* The mapping on real manifests: references, namespaces, report lines, YAML output. */
static void test_plan__mapping_on_fixtures(void **state)
{
	const char *cfg = write_tmp(
	    "map.yaml",
	    "kind: TargetConfig\nmode: migrate\n"
	    "namespaceMappings: {basic-shared-claim-across-pods: dr}\n"
	    "dra:\n  resourceClaimMappings:\n"
	    "  - {objectType: Pod, objectInstance: pod1, container: ALL, resourceClaim: dr-gpu}\n"
	    "  resourceClaimTemplateMappings:\n"
	    "  - {objectType: All, objectInstance: ALL, container: ALL, resourceClaimTemplate: "
	    "dr-template}\n"
	    "  deviceClassMappings:\n  - {from: gpu.example.com, to: gpu.nvidia.com}\n");
	struct tu_run r, ry;
	json_t *out, *p, *docs;
	ds_err err = {0};

	(void)state;
	plan(&r, NULL,
	     (const char *[]){
		 "-c", cfg, "-f",
		 tu_fixture("dra-example-driver/v1/basic-shared-claim-across-pods.yaml"), "-f",
		 tu_fixture("dra-example-driver/v1/basic-resourceclaimtemplate.yaml"), "-o", "json",
		 NULL});
	assert_int_equal(r.status, 0);
	out = items(&r);
	p = dt_find(out, "Pod", "pod1");
	assert_string_equal(ds_obj_namespace(p), "dr");
	assert_string_equal(dt_str(p, "/spec/resourceClaims/0/resourceClaimName"), "dr-gpu");
	p = dt_find(out, "Pod", "pod0");
	/* pod0 of the shared-claim fixture references a claim: the template rule does not win a tie
	 * it is not in, but it is the only rule that matches pod0, so it applies. */
	assert_string_equal(dt_str(dt_find(out, "Namespace", "dr"), "/metadata/name"), "dr");
	assert_string_equal(dt_str(dt_find(out, "ResourceClaim", "single-gpu"),
				   "/spec/devices/requests/0/exactly/deviceClassName"),
			    "gpu.nvidia.com");
	assert_non_null(strstr(r.err, "rewrite     Pod dr/pod1 container=ctr0 entry=shared-gpu: "
				      "resourceClaimName=single-gpu -> resourceClaimName=dr-gpu "
				      "(rule dra.resourceClaimMappings[0])"));
	assert_non_null(
	    strstr(r.err, "needs ResourceClaimTemplate basic-resourceclaimtemplate/dr-template"));
	assert_non_null(strstr(r.err, "needs DeviceClass gpu.nvidia.com"));
	(void)p;

	/* -o yaml prints the same objects as a multi-document stream. */
	plan(&ry, NULL,
	     (const char *[]){
		 "-c", cfg, "-f",
		 tu_fixture("dra-example-driver/v1/basic-shared-claim-across-pods.yaml"), "-f",
		 tu_fixture("dra-example-driver/v1/basic-resourceclaimtemplate.yaml"), NULL});
	assert_int_equal(ry.status, 0);
	assert_int_equal(ds_yaml_parse(ry.out, strlen(ry.out), "stdout", 0, &docs, NULL, &err), 0);
	assert_true(json_equal(docs, out));
	json_decref(docs);
	json_decref(out);
	tu_run_dispose(&r);
	tu_run_dispose(&ry);
}

static void test_plan__standby_holds_pods_and_scales_down(void **state)
{
	const char *cfg = write_tmp("standby.yaml", "kind: TargetConfig\nmode: standby\n");
	const char *dep = write_tmp(
	    "dep.yaml",
	    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: infer, namespace: ml, uid: "
	    "abc-123}\n"
	    "spec:\n  replicas: 4\n  selector: {matchLabels: {app: i}}\n  template:\n    metadata: "
	    "{labels: {app: i}}\n"
	    "    spec:\n      containers: [{name: c, image: x, resources: {claims: [{name: g}]}}]\n"
	    "      resourceClaims: [{name: g, resourceClaimTemplateName: gpu-template}]\n"
	    "status: {readyReplicas: 4}\n");
	struct tu_run r;
	json_t *out, *d;

	(void)state;
	plan(&r, NULL,
	     (const char *[]){"--config", cfg, "--source-cluster", "prod-east", "-f", dep, "-f",
			      tu_fixture("dra-example-driver/v1beta1/gpu-test1.yaml"), "-o", "json",
			      NULL});
	assert_int_equal(r.status, 0);
	out = items(&r);
	assert_int_equal(json_array_size(out),
			 3); /* Namespace, template, Deployment; two pods held */
	d = dt_find(out, "Deployment", "infer");
	assert_int_equal(json_integer_value(dt_get(d, "/spec/replicas")), 0);
	assert_string_equal(dt_str(d, "/metadata/annotations/drasync.io~1replicas"), "4");
	assert_string_equal(dt_str(d, "/metadata/annotations/drasync.io~1source-cluster"),
			    "prod-east");
	assert_string_equal(dt_str(d, "/metadata/annotations/drasync.io~1source-uid"), "abc-123");
	assert_null(dt_get(d, "/metadata/uid"));
	assert_null(dt_get(d, "/status"));
	assert_non_null(strstr(r.err, "hold        Pod gpu-test1/pod0"));
	assert_non_null(strstr(r.err, "2 held (standby)"));
	json_decref(out);
	tu_run_dispose(&r);
}

/* One bad file or object is reported with its place and skipped; the rest is planned. */
static void test_plan__bad_manifests_are_located_and_skipped(void **state)
{
	const char *broken =
	    write_tmp("broken.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: [unclosed\n");
	const char *noname = write_tmp(
	    "noname.yaml",
	    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok}\n---\n"
	    "apiVersion: v1\nkind: ConfigMap\nmetadata: {namespace: x}\n---\n- just\n- a list\n");
	const char *ambiguous_cfg = write_tmp(
	    "amb.yaml", "kind: TargetConfig\nmode: migrate\ndra:\n  resourceClaimMappings:\n"
			"  - {objectType: Pod, objectInstance: ALL, container: ALL, source: "
			"shared-gpu, resourceClaim: a}\n"
			"  - {objectType: Pod, objectInstance: ALL, container: ALL, source: "
			"single-gpu, resourceClaim: b}\n");
	struct tu_run r;
	json_t *out;

	(void)state;
	plan(&r, NULL,
	     (const char *[]){"-c", migrate_cfg(), "-f", broken, "-f", noname, "-f",
			      "/nonexistent.yaml", "-o", "json", NULL});
	assert_int_equal(r.status, 1);
	out = items(&r);
	assert_int_equal(json_array_size(out), 1);
	assert_string_equal(ds_obj_name(json_array_get(out, 0)), "ok");
	assert_non_null(strstr(r.err, "broken.yaml:5:1:"));
	assert_non_null(
	    strstr(r.err, "noname.yaml:5:1: ConfigMap x/(no name): missing metadata.name"));
	assert_non_null(strstr(r.err, "noname.yaml:9:1: (document): not a mapping"));
	assert_non_null(strstr(r.err, "/nonexistent.yaml"));
	assert_non_null(strstr(r.err, "4 failed"));
	json_decref(out);
	tu_run_dispose(&r);

	/* An unresolvable tie fails that pod only. */
	plan(&r, NULL,
	     (const char *[]){"-c", ambiguous_cfg, "-f",
			      tu_fixture("dra-example-driver/v1beta1/gpu-test4.yaml"), "-o", "json",
			      NULL});
	assert_int_equal(r.status, 1);
	out = items(&r);
	assert_int_equal(json_array_size(out), 2); /* Namespace and the claim */
	assert_non_null(strstr(r.err, "gpu-test4.yaml:"));
	assert_non_null(strstr(r.err, "Pod gpu-test4/pod0: container ctr0, claim shared-gpu: "
				      "dra.resourceClaimMappings[0] (-> resourceClaimName a) and "
				      "dra.resourceClaimMappings[1] (-> resourceClaimName b) match "
				      "with the same specificity"));
	json_decref(out);
	tu_run_dispose(&r);
}

static void test_plan__usage_and_config_errors_exit_2(void **state)
{
	const char *badcfg =
	    write_tmp("bad.yaml", "kind: TargetConfig\ndra:\n  resourceClaimMapings: []\n");
	const char *f = tu_fixture("dra-example-driver/v1/cel-selector.yaml");
	struct tu_run r;

	(void)state;
	plan(&r, NULL, (const char *[]){"-c", badcfg, "-f", f, NULL});
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err,
			       "bad.yaml:3:3: dra.resourceClaimMapings: unknown key (did you mean "
			       "'resourceClaimMappings'?)"));
	assert_string_equal(r.out, "");
	tu_run_dispose(&r);
	plan(&r, NULL, (const char *[]){"-c", migrate_cfg(), NULL});
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "-f FILE is required"));
	tu_run_dispose(&r);
	plan(&r, NULL, (const char *[]){"-c", migrate_cfg(), "-f", f, "-o", "xml", NULL});
	assert_int_equal(r.status, 2);
	tu_run_dispose(&r);
	plan(&r, NULL,
	     (const char *[]){"-c", migrate_cfg(), "-f", f, "--target-api", "resource.k8s.io/v2",
			      NULL});
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "--target-api resource.k8s.io/v2"));
	tu_run_dispose(&r);
	plan(&r, NULL, (const char *[]){"-c", "/nonexistent/target.yaml", "-f", f, NULL});
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "/nonexistent/target.yaml"));
	tu_run_dispose(&r);
	plan(&r, NULL, (const char *[]){"--help", NULL});
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "--target-api"));
	tu_run_dispose(&r);
}

/* stdin, and `kubectl get -o json` output (a List). */
static void test_plan__stdin_and_lists(void **state)
{
	const char *list =
	    "{\"apiVersion\": \"v1\", \"kind\": \"List\", \"metadata\": {\"resourceVersion\": "
	    "\"\"}, \"items\": [\n"
	    " {\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"metadata\": {\"name\": \"a\", "
	    "\"namespace\": \"n\",\n"
	    "  \"ownerReferences\": [{\"apiVersion\": \"apps/v1\", \"kind\": \"ReplicaSet\", "
	    "\"name\": \"rs\", \"uid\": \"u\", \"controller\": true}]},\n"
	    "  \"spec\": {\"containers\": [{\"name\": \"c\", \"image\": \"x\"}]}},\n"
	    " {\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": "
	    "\"kube-root-ca.crt\", \"namespace\": \"n\"}},\n"
	    " {\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": "
	    "\"settings\", \"namespace\": \"n\"}, \"data\": {\"a\": \"1\"}}\n"
	    "]}\n";
	struct tu_run r;
	json_t *out;

	(void)state;
	plan(&r, list, (const char *[]){"-c", migrate_cfg(), "-f", "-", "-o", "json", NULL});
	assert_int_equal(r.status, 0);
	out = items(&r);
	assert_int_equal(json_array_size(out), 1);
	assert_string_equal(dt_str(json_array_get(out, 0), "/data/a"), "1");
	assert_non_null(strstr(r.err, "skip        Pod n/a: controlled by ReplicaSet rs"));
	assert_non_null(strstr(r.err, "skip        ConfigMap n/kube-root-ca.crt"));
	json_decref(out);
	tu_run_dispose(&r);
}

/* Every missing object is required once per needer, even when its name contains another's. */
static void test_plan__each_missing_object_required_once(void **state)
{
	const char *pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns1}\n"
			  "spec:\n  containers:\n  - name: c\n    image: x\n"
			  "    resources: {claims: [{name: a}, {name: b}, {name: c}]}\n"
			  "  resourceClaims:\n"
			  "  - {name: a, resourceClaimName: gpu-claim-long}\n"
			  "  - {name: b, resourceClaimName: gpu-claim}\n"
			  "  - {name: c, resourceClaimName: gpu-claim-long}\n";
	struct tu_run r;
	const char *at;
	int lines = 0;

	(void)state;
	plan(&r, pod, (const char *[]){"-c", migrate_cfg(), "-f", "-", "-o", "json", NULL});
	assert_int_equal(r.status, 0);
	for (at = r.err; (at = strstr(at, "needs ResourceClaim ")); at++)
		lines++;
	if (lines != 2 || !strstr(r.err, "needs ResourceClaim ns1/gpu-claim-long,") ||
	    !strstr(r.err, "needs ResourceClaim ns1/gpu-claim,") ||
	    !strstr(r.err, "2 object(s) must already exist on the target"))
		fail_msg("expected gpu-claim-long and gpu-claim required once each:\n%s", r.err);
	tu_run_dispose(&r);
}

/* A full stdout is an error of its own, not "out of memory", and not a success. */
static void test_plan__write_error_on_stdout_is_reported(void **state)
{
	static const char *const outputs[] = {"yaml", "json"};

	(void)state;
	for (size_t i = 0; i < 2; i++) {
		const char *argv[] = {
		    tu_env("DS_TARGET_BIN"),
		    "plan",
		    "-c",
		    migrate_cfg(),
		    "-f",
		    tu_fixture("dra-example-driver/v1/basic-shared-claim-across-pods.yaml"),
		    "-o",
		    outputs[i],
		    NULL};
		struct tu_run r;

		tu_run_to(&r, NULL, "/dev/full", argv);
		if (r.status != 1 ||
		    !strstr(r.err, "plan: writing to stdout: No space left on device") ||
		    strstr(r.err, "out of memory"))
			fail_msg("-o %s to /dev/full: exit %d\n%s", outputs[i], r.status, r.err);
		tu_run_dispose(&r);
	}
}

/* Truncated and garbage input never crashes plan (ASan/UBSan would abort it). */
static void test_plan__truncated_and_garbage_input(void **state)
{
	size_t len;
	char *text = tu_read_file(
	    tu_fixture("dra-example-driver/v1/basic-resourceclaim-opaque-config.yaml"), &len);
	unsigned seed = 12345;

	(void)state;
	for (size_t cut = 0; cut < len; cut += 37) {
		struct tu_run r;
		char save = text[cut];

		text[cut] = '\0';
		plan(&r, text, (const char *[]){"-c", migrate_cfg(), "-f", "-", "-q", NULL});
		assert_true(r.status == 0 || r.status == 1);
		text[cut] = save;
		tu_run_dispose(&r);
	}
	for (int i = 0; i < 20; i++) {
		char junk[512];
		struct tu_run r;

		for (size_t k = 0; k < sizeof(junk) - 1; k++) {
			seed = seed * 1103515245u + 12345u;
			junk[k] = (char)(1 + (seed >> 16) % 255);
		}
		junk[sizeof(junk) - 1] = '\0';
		plan(&r, junk, (const char *[]){"-c", migrate_cfg(), "-f", "-", "-q", NULL});
		assert_true(r.status == 0 || r.status == 1);
		tu_run_dispose(&r);
	}
	free(text);
}

static int setup(void **state)
{
	(void)state;
	tmpdir = tu_mkdtemp("plan");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	free(tmpdir);
	return 0;
}

static const char *resource_path(const char *name)
{
	static char path[1024];

	snprintf(path, sizeof(path), "%s/workload-claims/%s", tu_env("DS_RESOURCES"), name);
	return path;
}

/* plan maps a PodGroup and its members together, in any input order, and converts the group. */
static void test_plan__podgroup_and_members_mapped_together(void **state)
{
	const char *cfg = write_tmp(
	    "group.yaml", "apiVersion: drasync.io/v1alpha1\nkind: TargetConfig\nmode: migrate\n"
			  "dra:\n  resourceClaimTemplateMappings:\n"
			  "  - {objectType: PodGroup, objectInstance: trainers, container: ALL, "
			  "resourceClaimTemplate: dr-gpu}\n");
	struct tu_run r;
	json_t *out, *o;
	size_t i, seen = 0;

	(void)state;
	plan(&r, NULL,
	     (const char *[]){"--config", cfg, "-f", resource_path("podgroup-deployments.yaml"),
			      "-o", "json", "--target-scheduling-api", "scheduling.k8s.io/v1alpha2",
			      NULL});
	if (r.status != 0)
		fail_msg("exit %d\n%s", r.status, r.err);
	out = items(&r);
	json_array_foreach (out, i, o) {
		const char *kind = ds_obj_kind(o);
		if (strcmp(kind, "PodGroup") == 0) {
			assert_string_equal(ds_obj_api_version(o), "scheduling.k8s.io/v1alpha2");
			assert_string_equal(
			    dt_str(o, "/spec/resourceClaims/0/resourceClaimTemplateName"),
			    "dr-gpu");
			/* Before the members it is shared with. */
			assert_int_equal(seen, 0);
		} else if (strcmp(kind, "Deployment") == 0) {
			assert_string_equal(
			    dt_str(
				o,
				"/spec/template/spec/resourceClaims/0/resourceClaimTemplateName"),
			    "dr-gpu");
			seen++;
		}
	}
	assert_int_equal(seen, 2);
	assert_non_null(strstr(r.err, "shared with PodGroup wl/trainers"));
	assert_non_null(strstr(r.err, "convert     PodGroup wl/trainers: scheduling.k8s.io/v1beta1 "
				      "-> scheduling.k8s.io/v1alpha2"));
	assert_non_null(strstr(r.err, "needs ResourceClaimTemplate wl/dr-gpu"));
	json_decref(out);
	tu_run_dispose(&r);
}

/* A member rule that disagrees with the group fails that member: exit 1, both rules named. */
static void test_plan__member_disagreeing_with_group_fails(void **state)
{
	const char *cfg = write_tmp(
	    "clash.yaml", "apiVersion: drasync.io/v1alpha1\nkind: TargetConfig\nmode: migrate\n"
			  "dra:\n  resourceClaimTemplateMappings:\n"
			  "  - {objectType: Deployment, objectInstance: trainer-b, container: ALL, "
			  "resourceClaimTemplate: big-gpu}\n");
	struct tu_run r;

	(void)state;
	plan(&r, NULL,
	     (const char *[]){"--config", cfg, "-f", resource_path("podgroup-deployments.yaml"),
			      NULL});
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.err, "Deployment wl/trainer-b: claim shared-gpu shares PodGroup "
				      "wl/trainers's claim"));
	assert_non_null(strstr(r.err, "rule dra.resourceClaimTemplateMappings[0]"));
	/* Nothing of the group: the PodGroup and the member that agrees fail with it. */
	assert_non_null(strstr(r.err,
			       "PodGroup wl/trainers: nothing of PodGroup wl/trainers and its "
			       "members is applied: Deployment wl/trainer-b: claim"));
	assert_non_null(strstr(r.err, "Deployment wl/trainer-a: nothing of PodGroup wl/trainers"));
	assert_non_null(strstr(r.err, "1 to apply, 0 skipped, 0 held (standby), 3 failed"));
	tu_run_dispose(&r);
}

/* The claim entry of PodGroup or Deployment `name` of plan's JSON output (NULL: none). */
static const char *claim_of(json_t *out, const char *kind, const char *name)
{
	size_t i;
	json_t *o;

	json_array_foreach (out, i, o)
		if (strcmp(ds_obj_kind(o), kind) == 0 && strcmp(ds_obj_name(o), name) == 0)
			return dt_str(o, strcmp(kind, "PodGroup") == 0
					     ? "/spec/resourceClaims/0/resourceClaimTemplateName"
					     : "/spec/template/spec/resourceClaims/0/"
					       "resourceClaimTemplateName");
	return NULL;
}

static const char *group_cfg(const char *rules)
{
	static char text[2048];

	snprintf(text, sizeof(text),
		 "apiVersion: drasync.io/v1alpha1\nkind: TargetConfig\nmode: migrate\n"
		 "dra:\n  resourceClaimTemplateMappings:\n%s",
		 rules);
	return write_tmp("group-rules.yaml", text);
}

/* Issue 24: a rule naming the only member of a PodGroup maps the group's entry with it (the
 * rule a SWIFT user writes: SWIFT's object types have no PodGroup). */
static void test_plan__only_members_rule_maps_the_group(void **state)
{
	const char *cfg = group_cfg("  - {objectType: Deployment, objectInstance: group-1, "
				    "container: ALL, resourceClaimTemplate: dr-gpu}\n");
	const char *in = write_tmp(
	    "one-member.yaml",
	    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: group-1, namespace: ml}\n"
	    "spec:\n  selector: {matchLabels: {app: g}}\n  template:\n"
	    "    metadata: {labels: {app: g}}\n    spec:\n"
	    "      schedulingGroup: {podGroupName: gang}\n"
	    "      containers:\n      - name: ctr\n        image: x\n"
	    "        resources: {claims: [{name: gpu}]}\n"
	    "      resourceClaims:\n      - {name: gpu, resourceClaimTemplateName: gpu}\n---\n"
	    "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\n"
	    "metadata: {name: gang, namespace: ml}\nspec:\n  schedulingPolicy: {basic: {}}\n"
	    "  resourceClaims:\n  - {name: gpu, resourceClaimTemplateName: gpu}\n");
	struct tu_run r;
	json_t *out;

	(void)state;
	plan(&r, NULL, (const char *[]){"--config", cfg, "-f", in, "-o", "json", NULL});
	if (r.status != 0)
		fail_msg("exit %d\n%s", r.status, r.err);
	out = items(&r);
	assert_string_equal(claim_of(out, "PodGroup", "gang"), "dr-gpu");
	assert_string_equal(claim_of(out, "Deployment", "group-1"), "dr-gpu");
	assert_non_null(strstr(r.err, "rewrite     PodGroup ml/gang container=ALL entry=gpu: "
				      "resourceClaimTemplateName=gpu -> "
				      "resourceClaimTemplateName=dr-gpu (rule "
				      "dra.resourceClaimTemplateMappings[0] of its member "
				      "Deployment ml/group-1, spec.resourceClaims)"));
	assert_non_null(strstr(r.err, "2 to apply, 0 skipped, 0 held (standby), 0 failed"));
	json_decref(out);
	tu_run_dispose(&r);
}

/* Two members whose rules agree map the group with them. */
static void test_plan__members_agreeing_map_the_group(void **state)
{
	const char *cfg = group_cfg("  - {objectType: Deployment, objectInstance: trainer-a, "
				    "container: ALL, resourceClaimTemplate: dr-gpu}\n"
				    "  - {objectType: Deployment, objectInstance: trainer-b, "
				    "container: ctr, resourceClaimTemplate: dr-gpu}\n");
	struct tu_run r;
	json_t *out;

	(void)state;
	plan(&r, NULL,
	     (const char *[]){"--config", cfg, "-f", resource_path("podgroup-deployments.yaml"),
			      "-o", "json", NULL});
	if (r.status != 0)
		fail_msg("exit %d\n%s", r.status, r.err);
	out = items(&r);
	assert_string_equal(claim_of(out, "PodGroup", "trainers"), "dr-gpu");
	assert_string_equal(claim_of(out, "Deployment", "trainer-a"), "dr-gpu");
	assert_string_equal(claim_of(out, "Deployment", "trainer-b"), "dr-gpu");
	assert_non_null(strstr(r.err, "4 to apply, 0 skipped, 0 held (standby), 0 failed"));
	json_decref(out);
	tu_run_dispose(&r);
}

/* Two members whose rules differ: an error for the group naming both, nothing of it applied. */
static void test_plan__members_disagreeing_fail_the_group(void **state)
{
	const char *cfg = group_cfg("  - {objectType: Deployment, objectInstance: trainer-a, "
				    "container: ALL, resourceClaimTemplate: dr-gpu}\n"
				    "  - {objectType: Deployment, objectInstance: trainer-b, "
				    "container: ALL, resourceClaimTemplate: big-gpu}\n");
	struct tu_run r;
	json_t *out;

	(void)state;
	plan(&r, NULL,
	     (const char *[]){"--config", cfg, "-f", resource_path("podgroup-deployments.yaml"),
			      "-o", "json", NULL});
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.err,
			       "PodGroup wl/trainers: nothing of PodGroup wl/trainers and its "
			       "members is applied: Deployment wl/trainer-b: claim shared-gpu "
			       "shares PodGroup wl/trainers's claim"));
	assert_non_null(strstr(r.err, "rule dra.resourceClaimTemplateMappings[1] (line 7) maps it "
				      "to resourceClaimTemplateName=big-gpu, but for Deployment "
				      "wl/trainer-a rule dra.resourceClaimTemplateMappings[0] "
				      "(line 6) maps it to resourceClaimTemplateName=dr-gpu"));
	assert_non_null(strstr(r.err, "Deployment wl/trainer-a: nothing of PodGroup wl/trainers"));
	assert_non_null(strstr(r.err, "Deployment wl/trainer-b: nothing of PodGroup wl/trainers"));
	assert_non_null(strstr(r.err, "1 to apply, 0 skipped, 0 held (standby), 3 failed"));
	out = items(&r);
	assert_null(claim_of(out, "PodGroup", "trainers"));
	assert_null(claim_of(out, "Deployment", "trainer-a"));
	json_decref(out);
	tu_run_dispose(&r);
}

/* A member's rule against the group's rule: the group's error, both rules named. */
static void test_plan__member_rule_against_group_rule_fails_the_group(void **state)
{
	const char *cfg = group_cfg("  - {objectType: PodGroup, objectInstance: trainers, "
				    "container: ALL, resourceClaimTemplate: dr-gpu}\n"
				    "  - {objectType: Deployment, objectInstance: trainer-a, "
				    "container: ALL, resourceClaimTemplate: big-gpu}\n");
	struct tu_run r;

	(void)state;
	plan(&r, NULL,
	     (const char *[]){"--config", cfg, "-f", resource_path("podgroup-deployments.yaml"),
			      NULL});
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.err,
			       "PodGroup wl/trainers: nothing of PodGroup wl/trainers and its "
			       "members is applied: Deployment wl/trainer-a: claim shared-gpu"));
	assert_non_null(strstr(r.err,
			       "rule dra.resourceClaimTemplateMappings[1] (line 7) maps it "
			       "to resourceClaimTemplateName=big-gpu, but rule "
			       "dra.resourceClaimTemplateMappings[0] (line 6) gives the group "
			       "resourceClaimTemplateName=dr-gpu"));
	assert_non_null(strstr(r.err, "1 to apply, 0 skipped, 0 held (standby), 3 failed"));
	tu_run_dispose(&r);
}

/* A Workload's podGroupTemplates follow the PodGroups made from them, which follow their
 * members; a Workload rule still decides the template on its own. */
static void test_plan__workload_template_follows_its_groups(void **state)
{
	const char *cfg = group_cfg("  - {objectType: Deployment, objectInstance: trainer, "
				    "container: ALL, resourceClaimTemplate: dr-gpu}\n");
	const char *in = write_tmp(
	    "workload.yaml",
	    "apiVersion: scheduling.k8s.io/v1beta1\nkind: Workload\n"
	    "metadata: {name: training, namespace: wl}\nspec:\n  podGroupTemplates:\n"
	    "  - name: workers\n    schedulingPolicy: {gang: {minCount: 1}}\n"
	    "    resourceClaims:\n    - {name: gpu, resourceClaimTemplateName: gpu}\n"
	    "  - name: other\n    schedulingPolicy: {basic: {}}\n"
	    "    resourceClaims:\n    - {name: gpu, resourceClaimTemplateName: gpu}\n---\n"
	    "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\n"
	    "metadata: {name: training-workers-0, namespace: wl}\nspec:\n"
	    "  workloadRef: {workloadName: training, templateName: workers}\n"
	    "  schedulingPolicy: {gang: {minCount: 1}}\n"
	    "  resourceClaims:\n  - {name: gpu, resourceClaimTemplateName: gpu}\n---\n"
	    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: trainer, namespace: wl}\n"
	    "spec:\n  selector: {matchLabels: {app: t}}\n  template:\n"
	    "    metadata: {labels: {app: t}}\n    spec:\n"
	    "      schedulingGroup: {podGroupName: training-workers-0}\n"
	    "      containers:\n      - name: ctr\n        image: x\n"
	    "        resources: {claims: [{name: gpu}]}\n"
	    "      resourceClaims:\n      - {name: gpu, resourceClaimTemplateName: gpu}\n");
	struct tu_run r;
	json_t *out, *o;
	size_t i;
	bool seen = false;

	(void)state;
	plan(&r, NULL, (const char *[]){"--config", cfg, "-f", in, "-o", "json", NULL});
	if (r.status != 0)
		fail_msg("exit %d\n%s", r.status, r.err);
	out = items(&r);
	assert_string_equal(claim_of(out, "PodGroup", "training-workers-0"), "dr-gpu");
	assert_string_equal(claim_of(out, "Deployment", "trainer"), "dr-gpu");
	json_array_foreach (out, i, o)
		if (strcmp(ds_obj_kind(o), "Workload") == 0) {
			assert_string_equal(dt_str(o, "/spec/podGroupTemplates/0/resourceClaims/0/"
						      "resourceClaimTemplateName"),
					    "dr-gpu");
			/* No PodGroup is made from the other template: it keeps its claim. */
			assert_string_equal(dt_str(o, "/spec/podGroupTemplates/1/resourceClaims/0/"
						      "resourceClaimTemplateName"),
					    "gpu");
			seen = true;
		}
	assert_true(seen);
	assert_non_null(strstr(r.err, "rewrite     Workload wl/training container=ALL entry=gpu: "
				      "resourceClaimTemplateName=gpu -> "
				      "resourceClaimTemplateName=dr-gpu (rule "
				      "dra.resourceClaimTemplateMappings[0] of its member PodGroup "
				      "wl/training-workers-0, podGroupTemplates workers)"));
	json_decref(out);
	tu_run_dispose(&r);
	/* A rule naming the Workload that maps the template elsewhere: the Workload's error. */
	cfg = group_cfg("  - {objectType: Deployment, objectInstance: trainer, "
			"container: ALL, resourceClaimTemplate: dr-gpu}\n"
			"  - {objectType: Workload, objectInstance: training, "
			"container: ALL, resourceClaimTemplate: big-gpu}\n");
	plan(&r, NULL, (const char *[]){"--config", cfg, "-f", in, NULL});
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.err, "Workload wl/training: PodGroup wl/training-workers-0: claim "
				      "gpu shares Workload wl/training's claim"));
	assert_non_null(strstr(r.err, "but rule dra.resourceClaimTemplateMappings[1] (line 7) "
				      "gives the group resourceClaimTemplateName=big-gpu"));
	tu_run_dispose(&r);
}

/* KEP-5004: which path a kept extended resource takes on this target. */
static void test_plan__extended_resource_paths(void **state)
{
	const char *cfg = write_tmp("ext.yaml", "apiVersion: drasync.io/v1alpha1\nkind: "
						"TargetConfig\nmode: migrate\n"
						"dra: {replicateDeviceClasses: true}\n");
	const char *in = write_tmp(
	    "ext-in.yaml",
	    "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: gpu.example.com}\n"
	    "spec: {extendedResourceName: example.com/gpu}\n---\n"
	    "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ml}\nspec:\n"
	    "  containers:\n  - name: c\n    image: x\n    resources: {limits: {example.com/gpu: "
	    "1, "
	    "cpu: 1}}\n"
	    "  - name: d\n    image: x\n    resources: {limits: {nvidia.com/gpu: 1}, requests: "
	    "{nvidia.com/gpu: 1}}\n"
	    "  - name: e\n    image: x\n    resources: {limits: "
	    "{deviceclass.resource.kubernetes.io/gpu.example.com: 1, kubernetes.io/x: 1}}\n");
	struct tu_run r;

	(void)state;
	plan(&r, NULL, (const char *[]){"--config", cfg, "-f", in, NULL});
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.err, "extended    Pod ml/p container=c: keeps example.com/gpu: "
				      "DeviceClass gpu.example.com of this plan serves it"));
	assert_non_null(strstr(r.err, "container=d: keeps nvidia.com/gpu: the target needs a "
				      "DeviceClass with extendedResourceName nvidia.com/gpu"));
	assert_non_null(strstr(r.err, "container=e: keeps "
				      "deviceclass.resource.kubernetes.io/gpu.example.com: "
				      "DeviceClass gpu.example.com"));
	/* once per container; cpu and kubernetes.io names are not extended resources */
	assert_null(strstr(strstr(r.err, "container=d") + 1, "container=d"));
	assert_null(strstr(r.err, "keeps cpu"));
	assert_null(strstr(r.err, "keeps kubernetes.io/x"));
	tu_run_dispose(&r);
}

/* Admin access: the source's grant on a Namespace is not carried; each claim and template that
 * asks for it is said to wait for the target admins' label, in the report and the summary. */
static void test_plan__admin_access_waits_for_the_label(void **state)
{
	static const char in[] =
	    "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ops\n"
	    "  labels: {resource.kubernetes.io/admin-access: 'true', team: gpu}\n"
	    "---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\n"
	    "metadata: {name: monitor, namespace: ops}\nspec:\n  devices:\n    requests:\n"
	    "    - {name: watch, exactly: {deviceClassName: gpu.example.com, adminAccess: true}}\n"
	    "---\napiVersion: resource.k8s.io/v1beta1\nkind: ResourceClaimTemplate\n"
	    "metadata: {name: monitor-all, namespace: ops}\nspec:\n  spec:\n    devices:\n"
	    "      requests:\n"
	    "      - {name: every, deviceClassName: gpu.example.com, adminAccess: true,"
	    " allocationMode: All}\n"
	    "---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\n"
	    "metadata: {name: plain, namespace: ops}\nspec:\n  devices:\n    requests:\n"
	    "    - {name: gpu, exactly: {deviceClassName: gpu.example.com}}\n";
	struct tu_run r;
	json_t *out, *ns, *t;

	(void)state;
	plan(&r, in, (const char *[]){"-c", migrate_cfg(), "-f", "-", "-o", "json", NULL});
	assert_int_equal(r.status, 0);
	out = items(&r);
	ns = dt_find(out, "Namespace", "ops");
	assert_null(dt_get(ns, "/metadata/labels/resource.kubernetes.io~1admin-access"));
	assert_string_equal(dt_str(ns, "/metadata/labels/team"), "gpu");
	/* converted to v1, the request keeps adminAccess where v1 holds it */
	t = dt_find(out, "ResourceClaimTemplate", "monitor-all");
	assert_true(json_is_true(dt_get(t, "/spec/spec/devices/requests/0/exactly/adminAccess")));
	assert_non_null(strstr(r.err, "ResourceClaim ops/monitor: request watch asks for "
				      "adminAccess: the target admits it only in a Namespace "
				      "labelled resource.kubernetes.io/admin-access: \"true\""));
	assert_non_null(strstr(r.err, "ResourceClaimTemplate ops/monitor-all: request every asks "
				      "for adminAccess"));
	assert_non_null(strstr(r.err, "drasync never sets it"));
	assert_null(strstr(r.err, "ResourceClaim ops/plain: request"));
	assert_non_null(strstr(
	    r.err, "2 claim(s) or template(s) wait for the admin-access label; mode migrate"));
	json_decref(out);
	tu_run_dispose(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_plan__every_v1_fixture_in_migrate_mode),
	    cmocka_unit_test(test_plan__every_v1beta1_fixture_both_targets),
	    cmocka_unit_test(test_plan__conversion_both_ways),
	    cmocka_unit_test(test_plan__mapping_on_fixtures),
	    cmocka_unit_test(test_plan__standby_holds_pods_and_scales_down),
	    cmocka_unit_test(test_plan__bad_manifests_are_located_and_skipped),
	    cmocka_unit_test(test_plan__usage_and_config_errors_exit_2),
	    cmocka_unit_test(test_plan__stdin_and_lists),
	    cmocka_unit_test(test_plan__truncated_and_garbage_input),
	    cmocka_unit_test(test_plan__each_missing_object_required_once),
	    cmocka_unit_test(test_plan__write_error_on_stdout_is_reported),
	    cmocka_unit_test(test_plan__podgroup_and_members_mapped_together),
	    cmocka_unit_test(test_plan__member_disagreeing_with_group_fails),
	    cmocka_unit_test(test_plan__only_members_rule_maps_the_group),
	    cmocka_unit_test(test_plan__members_agreeing_map_the_group),
	    cmocka_unit_test(test_plan__members_disagreeing_fail_the_group),
	    cmocka_unit_test(test_plan__member_rule_against_group_rule_fails_the_group),
	    cmocka_unit_test(test_plan__workload_template_follows_its_groups),
	    cmocka_unit_test(test_plan__extended_resource_paths),
	    cmocka_unit_test(test_plan__admin_access_waits_for_the_label),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
