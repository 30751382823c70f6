/*
 * The Kubernetes client's write rate against a real API server.
 *
 *   bench_client KUBECONFIG N MANIFEST [ROUND]
 *
 * Creates N small ConfigMaps (a) through the concurrent path (ds_kube_batch)
 * in namespace bench-concurrent-ROUND, (b) one by one in bench-serial-ROUND,
 * and writes the same N objects for namespace bench-kubectl-ROUND to MANIFEST
 * (for kubectl apply). ROUND defaults to 1; a round per run lets one cluster
 * serve several. Prints "concurrent_per_s=R" and "serial_per_s=R" lines.
 *
 * With DS_BENCH_SERVER_PIDS="pid ..." (the API server and etcd), also prints the
 * CPU time those processes and this one spent per object, to show which side
 * bounds the rate.
 */
#include "drasync/kube_client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU seconds used so far by the processes in DS_BENCH_SERVER_PIDS. */
static double server_cpu(void)
{
	const char *pids = getenv("DS_BENCH_SERVER_PIDS");
	double total = 0;
	char *list, *save = NULL;

	if (!pids || !(list = strdup(pids)))
		return 0;
	for (char *p = strtok_r(list, " ", &save); p; p = strtok_r(NULL, " ", &save)) {
		char path[64], buf[1024];
		unsigned long ut = 0, st = 0;
		FILE *f;
		char *rp;

		snprintf(path, sizeof(path), "/proc/%s/stat", p);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(buf, sizeof(buf), f) && (rp = strrchr(buf, ')')) &&
		    sscanf(rp + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut,
			   &st) == 2)
			total += (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
		fclose(f);
	}
	free(list);
	return total;
}

/* CPU seconds the whole machine has been busy (all processes), from /proc/stat. */
static double machine_busy(void)
{
	unsigned long long v[8] = {0};
	FILE *f = fopen("/proc/stat", "r");

	if (!f)
		return 0;
	if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
		   &v[4], &v[5], &v[6], &v[7]) != 8)
		v[0] = v[1] = v[2] = v[5] = v[6] = v[7] = 0;
	fclose(f);
	/* user nice system (idle iowait) irq softirq steal */
	return (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)sysconf(_SC_CLK_TCK);
}

static double own_cpu(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void print_cpu(const char *what, long n, double server, double own, double busy, double secs)
{
	if (!getenv("DS_BENCH_SERVER_PIDS"))
		return;
	printf("%s: CPU per object: API server + etcd %.2f ms, client %.2f ms\n", what,
	       server * 1000.0 / (double)n, own * 1000.0 / (double)n);
	printf("%s: cores busy: API server + etcd %.2f, client %.2f, whole machine %.2f of %ld\n",
	       what, server / secs, own / secs, busy / secs, sysconf(_SC_NPROCESSORS_ONLN));
}

static json_t *configmap(const char *ns, long i)
{
	char name[64], idx[32];

	snprintf(name, sizeof(name), "cm-%05ld", i);
	snprintf(idx, sizeof(idx), "%ld", i);
	return json_pack("{s:s,s:s,s:{s:s,s:s,s:{s:s}},s:{s:s,s:s}}", "apiVersion", "v1", "kind",
			 "ConfigMap", "metadata", "name", name, "namespace", ns, "labels",
			 "app.kubernetes.io/managed-by", "drasync-bench", "data", "key",
			 "a small value", "index", idx);
}

static int make_ns(ds_kube *k, const char *name)
{
	struct ds_kube_resource r;
	ds_kube_error ke;
	json_t *ns = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Namespace",
			       "metadata", "name", name);
	int rc = ds_kube_resource_find(k, "v1", "Namespace", &r, &ke);

	if (rc == 0)
		rc = ds_kube_create(k, &r, NULL, ns, NULL, &ke);
	json_decref(ns);
	if (rc < 0 && rc != -EEXIST) {
		char b[600];
		fprintf(stderr, "bench: namespace %s: %s\n", name,
			ds_kube_error_format(&ke, b, sizeof(b)));
		return rc;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct ds_kube_transport_opts o;
	struct ds_kube_resource r;
	ds_kubeconfig *kc = NULL;
	ds_kube *k = NULL;
	struct ds_kube_op *ops = NULL;
	json_t **objs = NULL;
	ds_kube_error ke;
	ds_err err = {0};
	long n;
	double t0, dt, s0, c0, m0;
	int rc = 1, failed;
	FILE *mf;
	const char *round;
	char ns_concurrent[64], ns_serial[64], ns_kubectl[64];

	if ((argc != 4 && argc != 5) || (n = strtol(argv[2], NULL, 10)) <= 0) {
		fprintf(stderr, "usage: bench_client KUBECONFIG N MANIFEST [ROUND]\n");
		return 2;
	}
	round = argc == 5 ? argv[4] : "1";
	snprintf(ns_concurrent, sizeof(ns_concurrent), "bench-concurrent-%s", round);
	snprintf(ns_serial, sizeof(ns_serial), "bench-serial-%s", round);
	snprintf(ns_kubectl, sizeof(ns_kubectl), "bench-kubectl-%s", round);
	ds_kube_transport_opts_init(&o);
	o.qps = 0;	     /* no client-side limit: the server is what we measure against */
	o.max_parallel = 16; /* streams in flight: more only queue up on a small server */
	if (getenv("DS_BENCH_PARALLEL"))
		o.max_parallel = atoi(getenv("DS_BENCH_PARALLEL"));
	if (ds_kubeconfig_load(&kc, argv[1], NULL, &err) < 0 ||
	    ds_kube_new(&k, &kc, &o, &err) < 0) {
		fprintf(stderr, "bench: %s\n", err.msg);
		goto out;
	}
	if (ds_kube_resource_find(k, "v1", "ConfigMap", &r, &ke) < 0 ||
	    make_ns(k, ns_concurrent) < 0 || make_ns(k, ns_serial) < 0)
		goto out;
	ops = calloc((size_t)n, sizeof(*ops));
	objs = calloc((size_t)n, sizeof(*objs));
	if (!ops || !objs)
		goto out;

	/* (a) concurrent */
	for (long i = 0; i < n; i++) {
		objs[i] = configmap(ns_concurrent, i);
		ops[i] = (struct ds_kube_op){.kind = DS_KUBE_OP_CREATE, .res = &r, .obj = objs[i]};
	}
	t0 = now_s();
	s0 = server_cpu();
	c0 = own_cpu();
	m0 = machine_busy();
	failed = ds_kube_batch(k, ops, (size_t)n, "drasync-bench", false);
	dt = now_s() - t0;
	s0 = server_cpu() - s0;
	c0 = own_cpu() - c0;
	m0 = machine_busy() - m0;
	if (failed != 0) {
		char b[600];
		for (long i = 0; i < n; i++)
			if (ops[i].rc < 0) {
				fprintf(stderr, "bench: concurrent: %ld failed, first: %s\n",
					(long)failed,
					ds_kube_error_format(&ops[i].error, b, sizeof(b)));
				break;
			}
		goto out;
	}
	for (long i = 0; i < n; i++) {
		json_decref(ops[i].result);
		json_decref(objs[i]);
		objs[i] = NULL;
	}
	printf("concurrent: %ld objects in %.3f s\n", n, dt);
	print_cpu("concurrent", n, s0, c0, m0, dt);
	printf("concurrent_per_s=%.0f\n", (double)n / dt);
	fflush(stdout);

	/* (b) serial */
	for (long i = 0; i < n; i++)
		objs[i] = configmap(ns_serial, i);
	t0 = now_s();
	s0 = server_cpu();
	c0 = own_cpu();
	m0 = machine_busy();
	for (long i = 0; i < n; i++) {
		if (ds_kube_create(k, &r, NULL, objs[i], NULL, &ke) < 0) {
			char b[600];
			fprintf(stderr, "bench: serial %ld: %s\n", i,
				ds_kube_error_format(&ke, b, sizeof(b)));
			goto out;
		}
	}
	dt = now_s() - t0;
	s0 = server_cpu() - s0;
	c0 = own_cpu() - c0;
	m0 = machine_busy() - m0;
	printf("serial: %ld objects in %.3f s\n", n, dt);
	print_cpu("serial", n, s0, c0, m0, dt);
	printf("serial_per_s=%.0f\n", (double)n / dt);
	fflush(stdout);

	/* the same objects for kubectl, as one JSON List */
	mf = fopen(argv[3], "w");
	if (!mf)
		goto out;
	{
		json_t *list =
		    json_pack("{s:s,s:s,s:[]}", "apiVersion", "v1", "kind", "List", "items");
		for (long i = 0; i < n; i++)
			json_array_append_new(json_object_get(list, "items"),
					      configmap(ns_kubectl, i));
		json_dumpf(list, mf, JSON_COMPACT);
		json_decref(list);
	}
	if (fclose(mf) != 0)
		goto out;
	rc = 0;
out:
	if (objs)
		for (long i = 0; i < n; i++)
			json_decref(objs[i]);
	free(objs);
	free(ops);
	ds_kube_free(k);
	ds_kubeconfig_free(kc);
	return rc;
}
