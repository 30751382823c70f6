/*
 * The exporter's memory with many selected objects, against a real API server.
 *
 *   bench_exporter create KUBECONFIG NAMESPACE N   N ConfigMaps (~1 KiB each) in a
 *                                                  namespace labelled drasync-bench=yes
 *   bench_exporter pass KUBECONFIG STATE_DIR       one pass (a snapshot on the first),
 *                                                  then a second one (nothing changed)
 *
 * `pass` prints "listed=N pushed=N seconds=S" per pass and "peak_rss_kb=K"
 * (VmHWM: the most this process ever held resident, lists and pushes
 * included), the figure SPEC's 64 MB bound is about.
 */
#include "drasync/export_log.h"
#include "drasync/exporter.h"
#include "drasync/k8s_object.h"
#include "drasync/kube_client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHUNK 200

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long peak_rss_kb(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static ds_kube *connect_to(const char *kubeconfig)
{
	struct ds_kube_transport_opts o;
	ds_kubeconfig *kc = NULL;
	ds_kube *k = NULL;
	ds_err err;

	ds_kube_transport_opts_init(&o);
	o.qps = 0;
	if (ds_kubeconfig_load(&kc, kubeconfig, NULL, &err) < 0 ||
	    ds_kube_new(&k, &kc, &o, &err) < 0) {
		fprintf(stderr, "bench: %s: %s\n", kubeconfig, err.msg);
		return NULL;
	}
	return k;
}

static int create(ds_kube *k, const char *ns, long n)
{
	struct ds_kube_resource nsr, cmr;
	struct ds_kube_op ops[CHUNK];
	json_t *objs[CHUNK];
	ds_kube_error ke;
	char pad[900];
	json_t *nso;
	int rc;

	memset(pad, 'x', sizeof(pad) - 1);
	pad[sizeof(pad) - 1] = '\0';
	rc = ds_kube_resource_find(k, "v1", "Namespace", &nsr, &ke);
	if (rc == 0)
		rc = ds_kube_resource_find(k, "v1", "ConfigMap", &cmr, &ke);
	if (rc < 0)
		return rc;
	nso = json_pack("{s:s,s:s,s:{s:s,s:{s:s}}}", "apiVersion", "v1", "kind", "Namespace",
			"metadata", "name", ns, "labels", "drasync-bench", "yes");
	rc = ds_kube_create(k, &nsr, NULL, nso, NULL, &ke);
	json_decref(nso);
	if (rc < 0 && rc != -EEXIST)
		return rc;
	for (long done = 0; done < n;) {
		long m = n - done < CHUNK ? n - done : CHUNK;
		int failed;

		for (long i = 0; i < m; i++) {
			char name[64];
			snprintf(name, sizeof(name), "cm-%06ld", done + i);
			objs[i] = json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:s,s:s}}", "apiVersion", "v1",
					    "kind", "ConfigMap", "metadata", "name", name,
					    "namespace", ns, "data", "pad", pad, "index", name);
			memset(&ops[i], 0, sizeof(ops[i]));
			ops[i].kind = DS_KUBE_OP_CREATE;
			ops[i].res = &cmr;
			ops[i].ns = ns;
			ops[i].obj = objs[i];
		}
		failed = ds_kube_batch(k, ops, (size_t)m, "drasync-bench", false);
		for (long i = 0; i < m; i++) {
			if (ops[i].rc < 0 && ops[i].rc != -EEXIST) {
				char b[600];
				fprintf(stderr, "bench: create: %s\n",
					ds_kube_error_format(&ops[i].error, b, sizeof(b)));
				failed = -1;
			}
			json_decref(ops[i].result);
			json_decref(objs[i]);
		}
		if (failed < 0)
			return -EIO;
		done += m;
	}
	return 0;
}

static bool selected(void *ud, const json_t *ns)
{
	const char *v = ds_json_str(ds_json_path(ns, "metadata.labels"), "drasync-bench");

	(void)ud;
	return v && strcmp(v, "yes") == 0;
}

static int run_passes(ds_kube *k, const char *state_dir)
{
	ds_exporter_config cfg;
	ds_exporter *ex = NULL;
	ds_err err = {0};
	int rc;

	ds_exporter_config_default(&cfg);
	cfg.on_event = ds_export_log_event;
	cfg.kube = k;
	cfg.state_dir = state_dir;
	cfg.ns_match = selected;
	rc = ds_exporter_new(&ex, &cfg, &err);
	for (int i = 0; rc == 0 && i < 2; i++) {
		ds_export_counts c;
		double t0 = now_s();

		rc = ds_exporter_pass(ex, &c, &err);
		if (rc == 0)
			printf("pass %d: listed=%llu pushed=%llu unchanged=%llu seconds=%.1f\n",
			       i + 1, (unsigned long long)c.listed, (unsigned long long)c.pushed,
			       (unsigned long long)c.unchanged, now_s() - t0);
	}
	if (rc < 0)
		fprintf(stderr, "bench: pass: %s\n", err.msg);
	ds_exporter_free(ex);
	printf("peak_rss_kb=%ld\n", peak_rss_kb());
	return rc;
}

int main(int argc, char **argv)
{
	ds_kube *k;
	int rc;

	if (argc == 5 && strcmp(argv[1], "create") == 0) {
		if (!(k = connect_to(argv[2])))
			return 1;
		rc = create(k, argv[3], strtol(argv[4], NULL, 10));
	} else if (argc == 4 && strcmp(argv[1], "pass") == 0) {
		if (!(k = connect_to(argv[2])))
			return 1;
		rc = run_passes(k, argv[3]);
	} else {
		fprintf(stderr, "usage: bench_exporter create KUBECONFIG NAMESPACE N\n"
				"       bench_exporter pass KUBECONFIG STATE_DIR\n");
		return 2;
	}
	ds_kube_free(k);
	return rc < 0 ? 1 : 0;
}
