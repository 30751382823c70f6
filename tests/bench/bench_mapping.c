/*
 * bench_mapping: the importer's pipeline on one core. A generated set of
 * workloads (all seven kinds) and DRA objects (v1 and v1beta1 claims and
 * templates) goes through parse -> select/sanitize -> namespace and DRA
 * mapping -> conversion to resource.k8s.io/v1 -> serialization, twice:
 *  - the importer's path: one JSON payload per object, as records carry
 *    them, parsed and serialized as JSON (what the API server is sent);
 *  - plan's path: one multi-document YAML stream in, YAML out.
 *
 *   scripts/bench.sh mapping [WORKLOADS]     (default 10000)
 */
#include "drasync/buf.h"
#include "drasync/report.h"
#include "drasync/target_config.h"
#include "drasync/transform.h"
#include "drasync/yaml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const config_text =
    "kind: TargetConfig\nmode: migrate\nnamespaceMappings: {ml: ml-dr}\n"
    "dra:\n"
    "  resourceClaimMappings:\n"
    "  - {objectType: Pod, objectInstance: pod-7, container: trainer, resourceClaim: dr-claim-a}\n"
    "  - {objectType: Deployment, objectInstance: ALL, container: sidecar, resourceClaim: "
    "dr-shared}\n"
    "  - {objectType: All, objectInstance: ALL, container: ALL, source: legacy-claim, "
    "resourceClaim: dr-claim-b}\n"
    "  - {objectType: StatefulSet, objectInstance: ALL, container: ALL, resourceClaim: dr-sts}\n"
    "  resourceClaimTemplateMappings:\n"
    "  - {objectType: All, objectInstance: ALL, container: ALL, resourceClaimTemplate: "
    "dr-template}\n"
    "  - {objectType: Job, objectInstance: ALL, container: ALL, source: gpu, "
    "resourceClaimTemplate: dr-batch}\n"
    "  - {objectType: CronJob, objectInstance: ALL, container: init, resourceClaimTemplate: "
    "dr-init}\n"
    "  deviceClassMappings:\n"
    "  - {from: gpu.nvidia.com, to: gpu.example.com}\n"
    "  - {from: mig.nvidia.com, to: mig.example.com}\n";

static const char *const kinds[][3] = {
    /* kind, apiVersion, where the pod spec sits */
    {"Pod", "v1", ""},
    {"Deployment", "apps/v1", "template"},
    {"StatefulSet", "apps/v1", "template"},
    {"DaemonSet", "apps/v1", "template"},
    {"ReplicaSet", "apps/v1", "template"},
    {"Job", "batch/v1", "template"},
    {"CronJob", "batch/v1", "cron"},
};

static void append(char **buf, size_t *len, size_t *cap, const char *s)
{
	size_t n = strlen(s);

	if (ds_grow((void **)buf, cap, *len + n + 1, 1) < 0)
		abort();
	memcpy(*buf + *len, s, n + 1);
	*len += n;
}

/* A realistic GPU pod spec: an init container and two containers sharing one claim. */
static void pod_spec(char *out, size_t size, const char *in, int i)
{
	const char *field = i % 3 == 0 ? "resourceClaimName" : "resourceClaimTemplateName";
	const char *target =
	    i % 3 == 0 ? (i % 2 ? "legacy-claim" : "shared-claim") : "gpu-template";

	snprintf(out, size,
		 "%sinitContainers:\n"
		 "%s- name: init\n%s  image: busybox:1.36\n%s  resources: {claims: [{name: gpu}]}\n"
		 "%scontainers:\n"
		 "%s- name: trainer\n%s  image: registry.example.com/ml/trainer:v%d\n"
		 "%s  args: [\"--epochs\", \"%d\", \"--batch\", \"64\"]\n"
		 "%s  env:\n%s  - {name: RANK, value: \"%d\"}\n%s  - {name: WORLD, value: \"8\"}\n"
		 "%s  resources:\n%s    limits: {cpu: \"4\", memory: 16Gi}\n%s    claims:\n"
		 "%s    - {name: gpu, request: gpu}\n"
		 "%s- name: sidecar\n%s  image: registry.example.com/ml/metrics:v2\n"
		 "%s  ports: [{containerPort: 9090, name: metrics}]\n"
		 "%s  resources: {claims: [{name: gpu}]}\n"
		 "%sresourceClaims:\n"
		 "%s- name: gpu\n%s  %s: %s\n"
		 "%snodeSelector: {gpu: \"true\"}\n",
		 in, in, in, in, in, in, in, i % 10, in, i % 50, in, in, i % 8, in, in, in, in, in,
		 in, in, in, in, in, in, in, field, target, in);
}

static char *generate(int workloads, int dra, size_t *len_out)
{
	char *buf = NULL, obj[8192], spec[4096];
	size_t len = 0, cap = 0;

	for (int i = 0; i < workloads; i++) {
		const char *const *k = kinds[i % 7];

		if (strcmp(k[2], "") == 0) {
			pod_spec(spec, sizeof(spec), "  ", i);
			snprintf(obj, sizeof(obj),
				 "---\napiVersion: %s\nkind: %s\nmetadata:\n  name: pod-%d\n  "
				 "namespace: ml\n"
				 "  uid: 6f1c%08d\n  resourceVersion: \"%d\"\n"
				 "  labels: {app: trainer, shard: \"%d\"}\n"
				 "spec:\n%s  nodeName: node-%d\nstatus: {phase: Running}\n",
				 k[1], k[0], i, i, 1000 + i, i % 16, spec, i % 32);
		} else if (strcmp(k[2], "template") == 0) {
			pod_spec(spec, sizeof(spec), "      ", i);
			snprintf(
			    obj, sizeof(obj),
			    "---\napiVersion: %s\nkind: %s\nmetadata:\n  name: w-%d\n  namespace: "
			    "ml\n"
			    "  uid: 6f1c%08d\n  generation: 4\n  labels: {app: trainer}\n"
			    "spec:\n  replicas: %d\n  selector: {matchLabels: {app: trainer}}\n"
			    "  template:\n    metadata: {labels: {app: trainer}}\n    spec:\n%s"
			    "status: {readyReplicas: 2}\n",
			    k[1], k[0], i, i, 1 + i % 5, spec);
		} else {
			pod_spec(spec, sizeof(spec), "          ", i);
			snprintf(
			    obj, sizeof(obj),
			    "---\napiVersion: %s\nkind: %s\nmetadata:\n  name: nightly-%d\n"
			    "  namespace: ml\nspec:\n  schedule: \"0 3 * * *\"\n  jobTemplate:\n"
			    "    spec:\n      template:\n        spec:\n%s",
			    k[1], k[0], i, spec);
		}
		append(&buf, &len, &cap, obj);
	}
	for (int i = 0; i < dra; i++) {
		if (i % 2)
			snprintf(
			    obj, sizeof(obj),
			    "---\napiVersion: resource.k8s.io/v1beta1\nkind: "
			    "ResourceClaimTemplate\n"
			    "metadata: {name: gpu-template-%d, namespace: ml}\nspec:\n  spec:\n"
			    "    devices:\n      requests:\n      - name: gpu\n"
			    "        deviceClassName: gpu.nvidia.com\n        allocationMode: "
			    "ExactCount\n"
			    "        count: %d\n        selectors:\n        - cel: {expression: "
			    "\"device.attributes['gpu.nvidia.com'].memory.isGreaterThan(quantity('"
			    "40Gi'))\"}\n",
			    i, 1 + i % 4);
		else
			snprintf(obj, sizeof(obj),
				 "---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\n"
				 "metadata: {name: claim-%d, namespace: ml, finalizers: "
				 "[resource.kubernetes.io/delete-protection]}\n"
				 "spec:\n  devices:\n    requests:\n    - name: gpu\n      "
				 "firstAvailable:\n"
				 "      - {name: big, deviceClassName: gpu.nvidia.com}\n"
				 "      - {name: slice, deviceClassName: mig.nvidia.com}\n"
				 "status:\n  allocation: {devices: {results: [{request: gpu/big, "
				 "driver: "
				 "gpu.nvidia.com, pool: n1, device: gpu-%d}]}}\n",
				 i, i % 8);
		append(&buf, &len, &cap, obj);
	}
	*len_out = len;
	return buf;
}

static double now(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	int workloads = argc > 1 ? atoi(argv[1]) : 10000;
	int dra = workloads / 5;
	size_t len, n_apply = 0, n_other = 0, out_bytes = 0;
	char *text;
	ds_target_config *cfg = NULL;
	ds_report *rep = NULL;
	json_t *docs = NULL;
	ds_err err = {0};
	double t0, t1, t2, t3, c0, c1;

	if (workloads < 1) {
		fprintf(stderr, "usage: bench_mapping [WORKLOADS]\n");
		return 2;
	}
	text = generate(workloads, dra, &len);
	if (ds_target_config_parse(&cfg, config_text, strlen(config_text), "bench.yaml", &err) <
		0 ||
	    ds_report_new(&rep) < 0) {
		fprintf(stderr, "bench: setup failed: %s\n", err.msg);
		return 1;
	}
	fprintf(stderr, "bench: %d workloads + %d DRA objects, %.1f MB of YAML, one thread\n",
		workloads, dra, (double)len / 1e6);
	/* The importer's path: per-object JSON payloads, made from the same objects. */
	if (ds_yaml_parse(text, len, "bench", 0, &docs, NULL, &err) < 0) {
		fprintf(stderr, "bench: parse: %s\n", err.msg);
		return 1;
	}
	size_t n_docs = json_array_size(docs);
	char **payloads = calloc(n_docs, sizeof(*payloads));
	size_t *plens = calloc(n_docs, sizeof(*plens)), json_bytes = 0, json_out = 0, json_ok = 0;
	for (size_t i = 0; i < n_docs; i++) {
		payloads[i] =
		    json_dumps(json_array_get(docs, i), JSON_COMPACT | JSON_PRESERVE_ORDER);
		plens[i] = strlen(payloads[i]);
		json_bytes += plens[i];
	}
	json_decref(docs);
	docs = NULL;
	double j0 = now(CLOCK_MONOTONIC), jc0 = now(CLOCK_PROCESS_CPUTIME_ID);
	ds_transform_opts jo = {.cfg = cfg, .dra_version = DS_DRA_V1, .source_cluster = "bench"};
	for (size_t i = 0; i < n_docs; i++) {
		json_error_t je;
		json_t *obj = json_loadb(payloads[i], plens[i], JSON_REJECT_DUPLICATES, &je);
		char *out;

		if (!obj) {
			fprintf(stderr, "bench: json: %s\n", je.text);
			return 1;
		}
		if (ds_transform_object(&jo, obj, NULL) == DS_TRANSFORM_APPLY)
			json_ok++;
		out = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER);
		json_out += strlen(out);
		free(out);
		json_decref(obj);
	}
	double j1 = now(CLOCK_MONOTONIC), jc1 = now(CLOCK_PROCESS_CPUTIME_ID);
	fprintf(stderr,
		"bench: importer path (JSON payloads): %.3fs wall, %.3fs cpu, %.1f MB in, %.1f MB "
		"out\n",
		j1 - j0, jc1 - jc0, (double)json_bytes / 1e6, (double)json_out / 1e6);
	for (size_t i = 0; i < n_docs; i++)
		free(payloads[i]);
	free(payloads);
	free(plens);
	if (json_ok != (size_t)(workloads + dra)) {
		fprintf(stderr, "bench: expected every object to be applied\n");
		return 1;
	}

	/* plan's path: one YAML stream. */
	t0 = now(CLOCK_MONOTONIC);
	c0 = now(CLOCK_PROCESS_CPUTIME_ID);
	if (ds_yaml_parse(text, len, "bench", 0, &docs, NULL, &err) < 0) {
		fprintf(stderr, "bench: parse: %s\n", err.msg);
		return 1;
	}
	t1 = now(CLOCK_MONOTONIC);
	ds_transform_opts o = {.cfg = cfg, .dra_version = DS_DRA_V1, .source_cluster = "bench"};
	for (size_t i = 0; i < json_array_size(docs); i++) {
		if (ds_transform_object(&o, json_array_get(docs, i), rep) == DS_TRANSFORM_APPLY)
			n_apply++;
		else
			n_other++;
	}
	t2 = now(CLOCK_MONOTONIC);
	for (size_t i = 0; i < json_array_size(docs); i++) {
		char *y = NULL;

		if (ds_yaml_emit_string(json_array_get(docs, i), &y, &err) < 0) {
			fprintf(stderr, "bench: emit: %s\n", err.msg);
			return 1;
		}
		out_bytes += strlen(y);
		free(y);
	}
	t3 = now(CLOCK_MONOTONIC);
	c1 = now(CLOCK_PROCESS_CPUTIME_ID);
	fprintf(stderr,
		"bench: plan path (YAML stream): parse %.3fs, select+sanitize+map+convert %.3fs, "
		"serialize %.3fs; "
		"total %.3fs wall, %.3fs cpu\n",
		t1 - t0, t2 - t1, t3 - t2, t3 - t0, c1 - c0);
	fprintf(stderr,
		"bench: %zu applied, %zu not, %zu report entries (%zu rewrites, %zu splits), "
		"%.1f MB out\n",
		n_apply, n_other, ds_report_count(rep),
		ds_report_count_type(rep, DS_REPORT_REWRITE),
		ds_report_count_type(rep, DS_REPORT_SPLIT), (double)out_bytes / 1e6);
	if (n_apply != (size_t)(workloads + dra)) {
		fprintf(stderr, "bench: expected every object to be applied\n");
		ds_report_print(stderr, rep);
		return 1;
	}
	/*
	 * Rates are per second of this thread's CPU time, i.e. on one core even when
	 * the machine is shared; the wall-clock rates are printed above them.
	 */
	fprintf(stderr, "bench: wall-clock rates: workloads_per_s=%.0f workloads_per_s_yaml=%.0f\n",
		(double)workloads / (j1 - j0), (double)workloads / (t3 - t0));
	printf("RESULT workloads_per_s=%.0f objects_per_s=%.0f workloads_per_s_yaml=%.0f "
	       "objects_per_s_yaml=%.0f\n",
	       (double)workloads / (jc1 - jc0), (double)(workloads + dra) / (jc1 - jc0),
	       (double)workloads / (c1 - c0), (double)(workloads + dra) / (c1 - c0));
	json_decref(docs);
	ds_report_free(rep);
	ds_target_config_free(cfg);
	free(text);
	return 0;
}
