/*
 * scripts/bench.sh e2e (run by tests/bench/e2e.sh, which starts the two
 * clusters and makes the agents' ServiceAccounts): drasync end to end, both
 * agents as real processes, `drasync-source run` (schedule: watch) reading a
 * source API server and pushing over CURVE ZeroMQ to `drasync-target run`
 * applying into a target API server (tests/kube/cluster.sh, both
 * resource.k8s.io/v1). Keys come from the agents' own keygen; each agent
 * authenticates as its ServiceAccount (the source: get/list/watch only).
 *
 *   objects: tests/bench/loadgen makes OBJECTS mixed objects (Deployments,
 *       StatefulSets, headless Services, Secrets, ConfigMaps,
 *       ServiceAccounts, ResourceClaimTemplates, ResourceClaims, bare Pods)
 *       in NAMESPACES namespaces of the source; first as dry-run creates
 *       (-dump: what the API server returns), whose objects, sanitized and
 *       transformed by the importer's own pipeline with the sync phase's
 *       TargetConfig, are what the ceiling sends.
 *   ceiling: loadgen -apply server-side applies (PATCH apply-patch+yaml,
 *       field manager drasync, force: the importer's request) those objects
 *       into fresh namespaces of the target, as the target's ServiceAccount,
 *       with W workers for each W of --ceiling-workers; the best objects/s.
 *       Each run's namespaces are deleted (and waited for) after it.
 *   sync: fresh state dirs, the target started, then the source; from the
 *       source's start until every object is `applied` in the target's
 *       ledger (object_state, read with SQLite every 25 ms): objects/s. The
 *       ratio is sync / ceiling (the target: >= 0.8).
 *   rpo: the same agents go on watching; loadgen -rpo makes CHANGES
 *       ConfigMap changes on the source, one every RPO_INTERVAL ms, and a
 *       watch on the target times each until the target shows it: p50, p99
 *       (targets: p50 < 0.5 s, p99 < 2 s).
 *   kubectl: what a user would do by hand: `kubectl get -o json` of the
 *       same objects | tests/bench/e2e_sanitize.py (drops status, uid,
 *       resourceVersion, creationTimestamp, managedFields, a Service's
 *       allocated clusterIP; maps the namespace) | `kubectl apply
 *       --server-side` into fresh namespaces of the target (created first,
 *       untimed): objects/s. The sanitizer also gives the objects' mean
 *       compact JSON size as the source's API server serves them.
 *   wan: the sync and target namespaces of the earlier phases deleted,
 *       fresh state dirs, the agents connected through tests/kube/faultproxy
 *       (tcp, --latency-ms WAN_LATENCY each way, --rate-kbit WAN_RATE: by
 *       default 50 ms RTT, 100 Mbit/s): seconds from the source's start to
 *       all applied, and the proxy's bytes (both directions, TCP payload:
 *       ZMTP, CURVE, Hello, batches, acks, heartbeats) per object.
 *   wan-slow: the same through a slow, far link (--latency-ms
 *       WAN_SLOW_LATENCY each way, --rate-kbit WAN_SLOW_RATE: by default
 *       200 ms RTT, 2 Mbit/s): wan_slow_s, and the physical limit it is
 *       measured against, wan_slow_ideal_s = the phase's own wire bytes from
 *       the source (the link carries the rate each way, and the Acks go the
 *       other way meanwhile) at that rate plus one RTT for the session's Hello and one per credit
 *       window (objects / the target's credit of CREDIT records, rounded
 *       up); the target: wan_slow_s <= 1.3 x wan_slow_ideal_s. wan_slow_s
 *       ends when the target has committed the snapshot's end (every record
 *       through the link); wan_slow_applied_s when it has applied them all.
 *   one change: with those agents still running (10,000 objects synced),
 *       one ConfigMap patched on the source; when the target's ledger has it
 *       applied, and 2 s more: the source's records pushed (`drasync-source
 *       status -o json`, pushedSeq), the proxy's bytes, and the target API
 *       server's own count of ConfigMap writes (apiserver_request_total,
 *       every verb but GET, LIST and WATCH), each after minus before
 *       (targets: 1, < 4 KB, 1).
 *   velero: the same objects moved by Velero (tests/bench/velero/phase.sh,
 *       --velero-phase): a Velero server for each cluster, one versitygw
 *       bucket; `velero backup create` of the source's namespaces (the
 *       nine kinds, the loadgen label), the target's server sees it,
 *       `velero restore create --namespace-mappings bench-src-i:velero-i`:
 *       objects/s from the backup's creation to the restore Completed and
 *       every object in velero-*; then one ConfigMap changed, the next
 *       backup and a restore (--existing-resource-policy=update) until the
 *       target has the change: seconds, the backup's bytes, the target's
 *       writes; the servers' peak RSS. ratio_vs_velero = sync / velero.
 *   rss: 10,000 ConfigMaps (512 bytes of data, 4 namespaces) made in the
 *       source, fresh state dirs, direct link; when all are applied, VmHWM
 *       of each agent (/proc/PID/status), MB; then the same with
 *       RSS_OBJECTS ConfigMaps (other namespaces) and a fresh pair: memory
 *       flat in the number of objects means the same figures.
 * The machine's load average is printed with each phase.
 *
 * Usage:
 *   bench_e2e --source-agent BIN --target-agent BIN --loadgen BIN --kube-bin BIN
 *             --faultproxy BIN|- --sanitizer PY --source-kubeconfig SA_KC
 *             --target-kubeconfig SA_KC --source-admin KC --target-admin KC --work DIR
 *             [--objects N] [--namespaces K] [--ceiling-workers W,W] [--rpo-changes N]
 *             [--rpo-interval-ms MS] [--rss-objects N] [--wan-latency-ms MS]
 *             [--wan-rate-kbit KBIT] [--wan-slow-latency-ms MS] [--wan-slow-rate-kbit KBIT]
 *             [--velero-phase SCRIPT] [--phases ceiling,sync,rpo,kubectl,wan,wan-slow,velero,rss]
 *             [--log-level L] [--timeout SECONDS]
 * Last line:
 *   RESULT sync_per_s=N ceiling_per_s=N ratio=X kubectl_per_s=N wan_s=N
 *   wire_bytes_per_obj=N json_bytes_per_obj=N wire_ratio=X wan_slow_s=X
 *   wan_slow_ideal_s=X wan_slow_ratio=X wan_slow_applied_s=X rpo_p50_s=X rpo_p99_s=X
 *   one_change_records=N one_change_bytes=N one_change_writes=N rss_mb_source_10k=N
 *   rss_mb_target_10k=N rss_mb_source=N rss_mb_target=N velero_per_s=N
 *   velero_one_change_s=X velero_one_change_bytes=N velero_one_change_writes=N
 *   velero_rss_mb=N ratio_vs_velero=X
 * (a phase not run prints -1 for its figures).
 */
#include "drasync/clock.h"
#include "drasync/report.h"
#include "drasync/sanitize.h"
#include "drasync/kinds.h"
#include "drasync/target_config.h"
#include "drasync/transform.h"
#include "benchutil.h"
#include "e2e_session.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define OBJ_PREFIX "mixed"
#define RSS_PREFIX "rss"
#define RSS_NAMESPACES 4
#define RSS_SMALL 10000 /* the rss phase's first round: RSS flat from it to --rss-objects */

static long vm_hwm_kib(pid_t pid)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "VmHWM:", 6) == 0) {
			kib = strtol(line + 6, NULL, 10);
			break;
		}
	fclose(f);
	return kib;
}

static void machine_load(const char *phase)
{
	char *la = bu_read_file("/proc/loadavg");

	la[strcspn(la, "\n")] = '\0';
	printf("%s: machine: %ld CPUs, load average %s\n", phase, sysconf(_SC_NPROCESSORS_ONLN),
	       la);
	free(la);
}

/* ---- options -------------------------------------------------------------- */

static bool phase_on(const struct opts *o, const char *phase)
{
	size_t n = strlen(phase);

	for (const char *p = o->phases; p && *p;) {
		size_t k = strcspn(p, ",");
		if (k == n && strncmp(p, phase, n) == 0)
			return true;
		p += k;
		if (*p == ',')
			p++;
	}
	return false;
}

/* ---- the target API server ------------------------------------------------ */

static char *kubectl(const struct opts *o, const char *kc, const char *tag, const char *const *args)
{
	const char *argv[32] = {o->kube_bin, "kubectl", "--kubeconfig", kc};
	size_t n = 4;

	for (; *args && n < 31; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	return bu_run(argv, o->work, tag);
}

/*
 * apiserver_request_total of the target summed over every verb that writes;
 * resource NULL: every resource. detail: the sum per verb.
 */
static double api_writes(const struct opts *o, const char *resource, char *detail, size_t size)
{
	static const char *const verbs[] = {"APPLY",  "PATCH",	"POST",	  "PUT",
					    "DELETE", "CREATE", "UPDATE", "DELETECOLLECTION"};
	enum { NV = sizeof(verbs) / sizeof(verbs[0]) };
	double per[NV] = {0}, total = 0;
	char *text = kubectl(o, o->target_admin, "metrics",
			     (const char *[]){"get", "--raw", "/metrics", NULL});
	char want[96];
	size_t used = 0;

	snprintf(want, sizeof(want), "resource=\"%s\"", resource ? resource : "");
	for (char *p = text; p && *p;) {
		char *nl = strchr(p, '\n');
		if (nl)
			*nl = '\0';
		if (strncmp(p, "apiserver_request_total{", 24) == 0 &&
		    (!resource || strstr(p, want))) {
			const char *sp = strrchr(p, ' ');
			for (size_t v = 0; v < NV; v++) {
				char label[48];
				snprintf(label, sizeof(label), "verb=\"%s\"", verbs[v]);
				if (strstr(p, label))
					per[v] += sp ? strtod(sp + 1, NULL) : 0;
			}
		}
		p = nl ? nl + 1 : NULL;
	}
	free(text);
	if (detail)
		detail[0] = '\0';
	for (size_t v = 0; v < NV; v++) {
		total += per[v];
		if (detail && per[v] > 0 && used < size)
			used += (size_t)snprintf(detail + used, size - used, "%s%s=%.0f",
						 used ? " " : "", verbs[v], per[v]);
	}
	return total;
}

/* Delete the target's namespaces whose names start with prefix, and wait. */
static void drop_namespaces(const struct opts *o, const char *prefix)
{
	char cmd[4096];
	double t0 = ds_clock_mono_s();

	snprintf(cmd, sizeof(cmd),
		 "'%s' kubectl --kubeconfig '%s' get namespaces -o name | grep '^namespace/%s' "
		 "| xargs -r '%s' kubectl --kubeconfig '%s' delete --wait=true --timeout=900s "
		 ">/dev/null",
		 o->kube_bin, o->target_admin, prefix, o->kube_bin, o->target_admin);
	if (system(cmd) != 0)
		bu_die("could not delete the namespaces %s* (%s)", prefix, cmd);
	printf("settle: the target's namespaces %s* and their objects deleted in %.1f s\n", prefix,
	       ds_clock_mono_s() - t0);
}

/* ---- keys and configurations --------------------------------------------- */

/* loadgen -dump, then the real objects; the transformed dump into ceiling_path. */
static size_t make_objects(const struct opts *o, const char *target_cfg, const char *ceiling_path)
{
	char src_ns[4096], n_str[32], dump[600];
	ds_target_config *cfg = NULL;
	ds_report *rep = NULL;
	ds_err err = {0};
	FILE *in, *out;
	char *line = NULL;
	size_t linecap = 0, n = 0;
	ssize_t len;
	double t0;

	bu_ns_list(src_ns, sizeof(src_ns), "bench-src", o->namespaces);
	snprintf(dump, sizeof(dump), "%s/source.ndjson", o->work);
	snprintf(n_str, sizeof(n_str), "%u", o->objects);
	{
		const char *argv[] = {o->loadgen, "-kubeconfig", o->source_admin, "-mode",
				      "mixed",	  "-namespaces", src_ns,	  "-count",
				      n_str,	  "-prefix",	 OBJ_PREFIX,	  "-dump",
				      dump,	  NULL};
		free(bu_run(argv, o->work, "dump"));
	}
	t0 = ds_clock_mono_s();
	{
		const char *argv[] = {o->loadgen, "-kubeconfig", o->source_admin, "-mode",
				      "mixed",	  "-namespaces", src_ns,	  "-count",
				      n_str,	  "-prefix",	 OBJ_PREFIX,	  NULL};
		char *res = bu_run(argv, o->work, "loadgen");
		const char *l = bu_last_line(res, "loadgen created=");
		printf("objects: %u mixed objects in %u namespaces of the source made in %.1f s "
		       "(%.*s)\n",
		       o->objects, o->namespaces, ds_clock_mono_s() - t0, (int)strcspn(l, "\n"), l);
		free(res);
	}

	/* The ceiling's objects: sanitized as the exporter does, transformed as the
	 * importer does (the sync phase's configuration), in the exporter's order. */
	if (ds_target_config_load(&cfg, target_cfg, &err) < 0)
		bu_die("%s: %s", target_cfg, err.msg);
	if (ds_report_new(&rep) < 0)
		bu_die("out of memory");
	in = fopen(dump, "r");
	out = fopen(ceiling_path, "w");
	if (!in || !out)
		bu_die("cannot open %s or %s", dump, ceiling_path);
	for (int rank_pass = 0; rank_pass < 64; rank_pass++) {
		rewind(in);
		while ((len = getline(&line, &linecap, in)) > 0) {
			json_error_t jerr;
			json_t *obj = json_loadb(line, (size_t)len, 0, &jerr), *meta;
			const char *kind;
			char *s, *uid;
			int r;

			if (!obj || !json_is_object(obj))
				bu_die("%s: %s", dump, obj ? "not an object" : jerr.text);
			kind = json_string_value(json_object_get(obj, "kind"));
			if (!kind || ds_kind_rank(kind) != rank_pass ||
			    strcmp(kind, "Namespace") == 0) {
				json_decref(obj);
				continue;
			}
			meta = json_object_get(obj, "metadata");
			/* a copy: sanitizing drops metadata.uid */
			uid = bu_xstrdup(json_string_value(json_object_get(meta, "uid")));
			{
				ds_transform_opts topts = {.cfg = cfg,
							   .dra_version = DS_DRA_V1,
							   .source_cluster = SOURCE_CLUSTER,
							   .source_uid = uid};
				if (ds_sanitize(obj) < 0)
					bu_die("out of memory");
				r = ds_transform_object(&topts, obj, rep);
			}
			free(uid);
			if (r != DS_TRANSFORM_APPLY)
				bu_die(
				    "the importer's pipeline does not apply a %s of the dump (%d)",
				    kind, r);
			s = json_dumps(obj, JSON_SORT_KEYS | JSON_COMPACT);
			if (!s || fprintf(out, "%s\n", s) < 0)
				bu_die("cannot write %s", ceiling_path);
			free(s);
			json_decref(obj);
			n++;
		}
	}
	free(line);
	fclose(in);
	if (fclose(out) != 0)
		bu_die("cannot write %s", ceiling_path);
	ds_report_free(rep);
	ds_target_config_free(cfg);
	if (n != o->objects)
		bu_die("the ceiling has %zu objects, not %u", n, o->objects);
	return n;
}

static double ceiling(const struct opts *o, const char *ceiling_path, char *summary, size_t size)
{
	char list[256], *save = NULL, prefix[32], tag[32];
	double best = 0;
	size_t used = 0;

	snprintf(list, sizeof(list), "%s", o->ceiling_workers);
	summary[0] = '\0';
	for (char *w = strtok_r(list, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
		const char *argv[] = {
		    o->loadgen,		 "-kubeconfig", o->target_kc, "-apply", ceiling_path,
		    "-namespace-prefix", prefix,	"-workers",   w,	NULL};
		char *out;
		const char *line;
		double rate;

		snprintf(prefix, sizeof(prefix), "ceil-w%s", w);
		snprintf(tag, sizeof(tag), "ceiling-w%s", w);
		out = bu_run(argv, o->work, tag);
		line = bu_last_line(out, "loadgen applied=");
		rate = bu_field(line, "per_s=");
		printf("ceiling: client-go, %s workers: %.0f objects in %.2f s: %.0f objects/s "
		       "(server-side apply of the importer's objects into the target, its "
		       "ServiceAccount)\n",
		       w, bu_field(line, "applied="), bu_field(line, "seconds="), rate);
		if (used < size)
			used += (size_t)snprintf(summary + used, size - used, "%sW=%s:%.0f",
						 used ? " " : "", w, rate);
		if (rate > best)
			best = rate;
		free(out);
		drop_namespaces(o, prefix);
	}
	return best;
}

/* ---- the phases ----------------------------------------------------------- */

struct results {
	double sync_per_s, ceiling_per_s, kubectl_per_s, wan_s, wire_per_obj, json_per_obj;
	double rpo_p50, rpo_p99, one_records, one_bytes, one_writes, rss_source, rss_target;
	double rss_source_small, rss_target_small; /* at RSS_SMALL objects */
	double wan_slow_s, wan_slow_ideal_s, wan_slow_applied_s;
	double velero_per_s, velero_one_s, velero_one_bytes, velero_one_writes, velero_rss;
};

/* Seconds of the ts= of a log line ("ts=2026-12-01T20:02:18.235Z"); -1 when none. */
static double log_ts(const char *line)
{
	struct tm tm;
	int ms = 0;
	const char *p = strstr(line, "ts=");

	memset(&tm, 0, sizeof(tm));
	if (!p || sscanf(p + 3, "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
			 &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms) != 7)
		return -1;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	return (double)timegm(&tm) + ms / 1000.0;
}

/* How long the source's first pass took by its log: its first line to event=pass_finished. */
static double source_pass_s(const struct session *s)
{
	char *log = bu_read_file(s->source_log);
	const char *fin = strstr(log, "event=pass_finished");
	double secs = -1;

	if (fin) {
		while (fin > log && fin[-1] != '\n')
			fin--;
		if (log_ts(log) >= 0 && log_ts(fin) >= 0)
			secs = log_ts(fin) - log_ts(log);
	}
	free(log);
	return secs;
}

/* Start a session's agents (through the faultproxy when wan); seconds to all applied. */
/* Seconds from the source's start to every object applied; *committed (may be
 * NULL): to the snapshot's end committed in the target's ledger. */
static double sync_session(const struct opts *o, struct session *s, const struct keys *k, bool wan,
			   const char *prefix, long want, double *committed)
{
	double t0, secs, cpu_t, cpu_s;

	e2e_target_start(o, s);
	if (wan)
		e2e_proxy_start(o, s);
	t0 = ds_clock_mono_s();
	e2e_source_start(o, s, k);
	if (committed) {
		*committed = e2e_wait_committed(o, s, t0);
		if (wan)
			s->committed_bytes = e2e_proxy_bytes(o, s, &s->committed_bytes_up);
		printf("%s: every record of the first pass committed by the target in %.2f s\n",
		       s->tag, *committed);
	}
	secs = e2e_wait_applied(o, s, prefix, want, t0);
	cpu_s = bu_proc_cpu_s(s->source);
	cpu_t = bu_proc_cpu_s(s->target);
	printf("%s: %ld objects from the source's start to all applied in the target's ledger: "
	       "%.2f s, %.0f objects/s (CPU: the source %.1f s, the target %.1f s)\n",
	       s->tag, want, secs, (double)want / secs, cpu_s, cpu_t);
	printf("%s: the source's first pass (listed, sanitized, in its outbox) took %.2f s by its "
	       "log\n",
	       s->tag, source_pass_s(s));
	return secs;
}

static void phase_rpo(const struct opts *o, struct results *r)
{
	char src_ns[4096], dst_ns[4096], n[16], iv[32];
	const char *argv[] = {o->loadgen,
			      "-kubeconfig",
			      o->source_admin,
			      "-target-kubeconfig",
			      o->target_admin,
			      "-namespaces",
			      src_ns,
			      "-target-namespaces",
			      dst_ns,
			      "-rpo",
			      n,
			      "-interval",
			      iv,
			      NULL};
	char *out;
	const char *line;

	bu_msleep(3000); /* what the first pass left in flight (acks, results) is not the news */
	machine_load("rpo");
	bu_ns_list(src_ns, sizeof(src_ns), "bench-src", o->namespaces);
	bu_ns_list(dst_ns, sizeof(dst_ns), "e2e", o->namespaces);
	snprintf(n, sizeof(n), "%u", o->rpo_changes);
	snprintf(iv, sizeof(iv), "%ums", o->rpo_interval_ms);
	out = bu_run(argv, o->work, "rpo");
	line = bu_last_line(out, "loadgen rpo ");
	r->rpo_p50 = bu_field(line, "p50_s=");
	r->rpo_p99 = bu_field(line, "p99_s=");
	printf("rpo: %u ConfigMap changes on the source, one every %u ms, each timed until a "
	       "watch on the target shows it: %.*s\n",
	       o->rpo_changes, o->rpo_interval_ms, (int)strcspn(line, "\n"), line);
	if (bu_field(line, "seen=") < o->rpo_changes)
		printf("rpo: NOT every change reached the target (the missing count as the "
		       "timeout)\n");
	free(out);
}

static void phase_kubectl(const struct opts *o, struct results *r)
{
	char cmd[8192], stats[600], map[4096], log[700];
	double t0, secs;
	size_t used = 0;
	char *st;

	machine_load("kubectl");
	/* the namespaces first, untimed, with their default ServiceAccounts (pods need them) */
	map[0] = '\0';
	for (unsigned i = 0; i < o->namespaces && used < sizeof(map); i++) {
		char ns[64];
		snprintf(ns, sizeof(ns), "kubectl-%u", i);
		free(kubectl(o, o->target_admin, "kubectl-ns",
			     (const char *[]){"create", "namespace", ns, NULL}));
		used += (size_t)snprintf(map + used, sizeof(map) - used, "%sbench-src-%u=%s",
					 i ? "," : "", i, ns);
	}
	for (unsigned i = 0; i < o->namespaces; i++) {
		double end = ds_clock_mono_s() + 60;
		char ns[64];
		snprintf(ns, sizeof(ns), "kubectl-%u", i);
		for (;;) {
			snprintf(cmd, sizeof(cmd),
				 "'%s' kubectl --kubeconfig '%s' -n %s get serviceaccount default "
				 ">/dev/null 2>&1",
				 o->kube_bin, o->target_admin, ns);
			if (system(cmd) == 0)
				break;
			if (ds_clock_mono_s() > end)
				bu_die("no ServiceAccount default in %s after 60 s", ns);
			bu_msleep(200);
		}
	}
	snprintf(stats, sizeof(stats), "%s/kubectl-stats.txt", o->work);
	snprintf(
	    cmd, sizeof(cmd),
	    "set -o pipefail; exec 2>>'%s/kubectl-apply.log'; '%s' kubectl --kubeconfig '%s' get "
	    "deployments.apps,statefulsets.apps,services,secrets,configmaps,serviceaccounts,"
	    "resourceclaimtemplates.resource.k8s.io,resourceclaims.resource.k8s.io,pods "
	    "-A -l app.kubernetes.io/managed-by=drasync-loadgen -o json "
	    "| python3 '%s' --map '%s' --stats '%s' "
	    "| '%s' kubectl --kubeconfig '%s' apply --server-side --force-conflicts -f - "
	    ">'%s/kubectl-apply.out'",
	    o->work, o->kube_bin, o->source_admin, o->sanitizer, map, stats, o->kube_bin,
	    o->target_admin, o->work);
	snprintf(log, sizeof(log), "%s/kubectl-apply.log", o->work);
	t0 = ds_clock_mono_s();
	if (bu_wait_child(bu_spawn((const char *[]){"/bin/bash", "-c", cmd, NULL}, NULL, log)) !=
	    0) {
		bu_show_tail(log);
		bu_die("the kubectl pipeline failed: %s", cmd);
	}
	secs = ds_clock_mono_s() - t0;
	st = bu_read_file(stats);
	{
		double objs = bu_field(st, "objects="), bytes = bu_field(st, "json_bytes=");
		if (objs < o->objects)
			bu_die("kubectl get returned %.0f objects, not %u", objs, o->objects);
		r->kubectl_per_s = objs / secs;
		r->json_per_obj = bytes / objs;
		printf("kubectl: kubectl get -o json | sanitize | kubectl apply --server-side: "
		       "%.0f objects in %.2f s: %.0f objects/s\n",
		       objs, secs, r->kubectl_per_s);
		printf("objects: %.0f bytes of compact JSON as the source's API server serves "
		       "them, %.0f bytes an object\n",
		       bytes, r->json_per_obj);
	}
	free(st);
}

/* The objects' compact JSON as the source's API server serves them (the kubectl
 * phase's measure, without its apply): for the wan phase run alone. */
static void json_bytes_only(const struct opts *o, struct results *r)
{
	char cmd[8192], stats[4200], log[4200], *st;
	double objs, bytes;

	snprintf(stats, sizeof(stats), "%s/json-stats.txt", o->work);
	snprintf(log, sizeof(log), "%s/json-stats.log", o->work);
	snprintf(cmd, sizeof(cmd),
		 "set -o pipefail; '%s' kubectl --kubeconfig '%s' get "
		 "deployments.apps,statefulsets.apps,services,secrets,configmaps,serviceaccounts,"
		 "resourceclaimtemplates.resource.k8s.io,resourceclaims.resource.k8s.io,pods "
		 "-A -l app.kubernetes.io/managed-by=drasync-loadgen -o json "
		 "| python3 '%s' --stats '%s' >/dev/null",
		 o->kube_bin, o->source_admin, o->sanitizer, stats);
	if (bu_wait_child(bu_spawn((const char *[]){"/bin/bash", "-c", cmd, NULL}, NULL, log)) !=
	    0) {
		bu_show_tail(log);
		bu_die("measuring the objects' JSON failed: %s", cmd);
	}
	st = bu_read_file(stats);
	objs = bu_field(st, "objects=");
	bytes = bu_field(st, "json_bytes=");
	free(st);
	if (objs > 0)
		r->json_per_obj = bytes / objs;
}

/* With the wan session's agents running: one ConfigMap changed on the source. */
static void phase_one_change(const struct opts *o, struct session *s, struct results *r)
{
	char name[64], target[128], d0[1024], d1[1024];
	double rec0, rec1, b0, b1, w0, w1, a0, a1, t0;
	long long seq0, seq;
	unsigned idx = 4; /* loadgen's mixed mode: object 4 is the first ConfigMap */

	machine_load("one change");
	snprintf(name, sizeof(name), "%s-configmap-%u", OBJ_PREFIX, idx);
	snprintf(target, sizeof(target), "bench-src-%u/%s", (idx / 9) % o->namespaces, name);
	seq0 = e2e_ledger_applied_seq(s, name);
	if (seq0 == 0)
		bu_die("one change: %s is not applied on the target", name);
	bu_msleep(3000); /* let what the first pass left settle */
	rec0 = e2e_source_pushed(o, s);
	b0 = e2e_proxy_bytes(o, s, NULL);
	w0 = api_writes(o, "configmaps", d0, sizeof(d0));
	a0 = api_writes(o, NULL, NULL, 0);
	t0 = ds_clock_mono_s();
	free(bu_run(
	    (const char *[]){o->loadgen, "-kubeconfig", o->source_admin, "-patch", target, NULL},
	    o->work, "patch"));
	while ((seq = e2e_ledger_applied_seq(s, name)) == seq0) {
		e2e_check_alive(s);
		if (ds_clock_mono_s() - t0 > 60)
			bu_die("one change: %s not applied again within 60 s", name);
		bu_msleep(25);
	}
	printf("one change: %s applied on the target %.2f s after the patch\n", target,
	       ds_clock_mono_s() - t0);
	bu_msleep(2000); /* what may still be in flight */
	rec1 = e2e_source_pushed(o, s);
	b1 = e2e_proxy_bytes(o, s, NULL);
	w1 = api_writes(o, "configmaps", d1, sizeof(d1));
	a1 = api_writes(o, NULL, NULL, 0);
	r->one_records = rec1 - rec0;
	r->one_bytes = b1 - b0;
	r->one_writes = w1 - w0;
	printf("one change: records pushed by the source %.0f, bytes on the wire %.0f (both "
	       "directions, %.1f s), ConfigMap writes on the target %.0f (before: %s; after: %s), "
	       "writes of every resource on the target %.0f\n",
	       r->one_records, r->one_bytes, ds_clock_mono_s() - t0 + 3, r->one_writes, d0, d1,
	       a1 - a0);
}

/* The same objects through Velero: tests/bench/velero/phase.sh says what it measures. */
static void phase_velero(const struct opts *o, struct results *r)
{
	char n_str[32], ns_str[32];
	const char *argv[] = {"/bin/bash",	o->velero_phase, "--kube-bin",
			      o->kube_bin,	"--loadgen",	 o->loadgen,
			      "--source-admin", o->source_admin, "--target-admin",
			      o->target_admin,	"--work",	 o->work,
			      "--objects",	n_str,		 "--namespaces",
			      ns_str,		"--src-prefix",	 "bench-src",
			      "--dst-prefix",	"velero",	 NULL};
	const char *line;
	char *out;

	machine_load("velero");
	snprintf(n_str, sizeof(n_str), "%u", o->objects);
	snprintf(ns_str, sizeof(ns_str), "%u", o->namespaces);
	out = bu_run(argv, o->work, "velero");
	for (const char *p = out; p && *p;) {
		size_t len = strcspn(p, "\n");
		if (strncmp(p, "velero: ", 8) == 0)
			printf("%.*s\n", (int)len, p);
		p += len;
		if (*p)
			p++;
	}
	line = bu_last_line(out, "velero per_s=");
	r->velero_per_s = bu_field(line, "per_s=");
	r->velero_one_s = bu_field(line, "one_change_s=");
	r->velero_one_bytes = bu_field(line, "one_change_bytes=");
	r->velero_one_writes = bu_field(line, "one_change_writes=");
	r->velero_rss = bu_field(line, "rss_mb_source=");
	if (bu_field(line, "rss_mb_target=") > r->velero_rss)
		r->velero_rss = bu_field(line, "rss_mb_target=");
	printf("velero: %.*s\n", (int)strcspn(line, "\n"), line);
	free(out);
}

/* One round of the rss phase: n ConfigMaps under prefix, a fresh pair of agents; VmHWM, MB. */
static void rss_round(const struct opts *o, const struct keys *k, const char *prefix, unsigned n,
		      double *mb_source, double *mb_target)
{
	char tag[64], src_prefix[64], dst_prefix[64], src_ns[512], n_str[32];
	struct session s;
	double t0;

	snprintf(tag, sizeof(tag), "%s-%u", RSS_PREFIX, n);
	snprintf(src_prefix, sizeof(src_prefix), "%s-src", prefix);
	snprintf(dst_prefix, sizeof(dst_prefix), "%s-dst", prefix);
	bu_ns_list(src_ns, sizeof(src_ns), src_prefix, RSS_NAMESPACES);
	snprintf(n_str, sizeof(n_str), "%u", n);
	t0 = ds_clock_mono_s();
	{
		const char *argv[] = {o->loadgen,   "-kubeconfig", o->source_admin, "-mode",
				      "configmaps", "-namespaces", src_ns,	    "-count",
				      n_str,	    "-prefix",	   prefix,	    "-workers",
				      "64",	    NULL};
		free(bu_run(argv, o->work, "loadgen-rss"));
	}
	printf("rss: %u ConfigMaps in %u namespaces of the source made in %.1f s\n", n,
	       RSS_NAMESPACES, ds_clock_mono_s() - t0);
	e2e_session_init(o, &s, k, tag, src_prefix, dst_prefix, RSS_NAMESPACES);
	(void)sync_session(o, &s, k, false, prefix, (long)n, NULL);
	bu_msleep(1000);
	*mb_source = (double)vm_hwm_kib(s.source) / 1024.0;
	*mb_target = (double)vm_hwm_kib(s.target) / 1024.0;
	printf("rss: peak RSS (VmHWM) at %u objects: drasync-source %.1f MB, drasync-target "
	       "%.1f MB\n",
	       n, *mb_source, *mb_target);
	e2e_session_stop(&s);
}

/* RSS_SMALL objects, then rss_objects, each by a fresh pair: flat means the same figures. */
static void phase_rss(const struct opts *o, const struct keys *k, struct results *r)
{
	machine_load("rss");
	if (o->rss_objects > RSS_SMALL)
		rss_round(o, k, "rss10k", RSS_SMALL, &r->rss_source_small, &r->rss_target_small);
	rss_round(o, k, RSS_PREFIX, o->rss_objects, &r->rss_source, &r->rss_target);
}

/* The target's credit (common/link receiver.c's default, which the bench's
 * target.yaml keeps): records a source may have unacknowledged, so one round
 * trip at least for each window of them. */
#define CREDIT 2048

/* The objects again, through a slow and far link: seconds, and the ideal. */
static void phase_wan_slow(const struct opts *o, const struct keys *k, struct results *r)
{
	struct opts slow = *o;
	struct session s;
	double secs, applied, bytes, up, rtt, windows;

	if (!strcmp(o->faultproxy, "-"))
		bu_die("the wan-slow phase needs --faultproxy");
	machine_load("wan-slow");
	slow.wan_latency_ms = o->wan_slow_latency_ms;
	slow.wan_rate_kbit = o->wan_slow_rate_kbit;
	e2e_session_init(&slow, &s, k, "wan-slow", "bench-src", "slow", o->namespaces);
	/* The link's figure ends when the target has committed the last record:
	 * applying is the next stage (the target's API server), timed apart. */
	applied = sync_session(&slow, &s, k, true, OBJ_PREFIX, (long)o->objects, &secs);
	/* The link carries the rate each way: the records' direction is the
	 * bottleneck (the Acks travel the other way at the same time). */
	bytes = s.committed_bytes;
	up = s.committed_bytes_up;
	rtt = 2.0 * o->wan_slow_latency_ms / 1000.0;
	windows = (double)((o->objects + CREDIT - 1) / CREDIT);
	r->wan_slow_s = secs;
	r->wan_slow_applied_s = applied;
	r->wan_slow_ideal_s = up * 8.0 / (o->wan_slow_rate_kbit * 1000.0) + rtt * (1 + windows);
	printf("wan-slow: %.0f bytes on the wire until committed (%.0f an object), %.0f of them "
	       "from the source; at %u kbit/s each way that is %.2f s, plus %.0f round trips of "
	       "%.3f s (Hello, %.0f credit windows of %d): ideal %.2f s, measured %.2f s to "
	       "committed (%.2f of the ideal), %.2f s to applied\n",
	       bytes, bytes / o->objects, up, o->wan_slow_rate_kbit,
	       up * 8.0 / (o->wan_slow_rate_kbit * 1000.0), 1 + windows, rtt, windows, CREDIT,
	       r->wan_slow_ideal_s, secs, secs / r->wan_slow_ideal_s, applied);
	e2e_session_stop(&s);
	drop_namespaces(o, "slow-");
}

static int bench(const struct opts *o)
{
	struct results r = {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
			    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1};
	char ceiling_path[600], ceil_summary[512] = "";
	struct keys k;
	struct session sync, wan;
	bool need_objects = phase_on(o, "ceiling") || phase_on(o, "sync") || phase_on(o, "rpo") ||
			    phase_on(o, "kubectl") || phase_on(o, "wan") ||
			    phase_on(o, "wan-slow") || phase_on(o, "velero");

	machine_load("start");
	e2e_make_keys(o, &k);
	e2e_session_init(o, &sync, &k, "sync", "bench-src", "e2e", o->namespaces);
	snprintf(ceiling_path, sizeof(ceiling_path), "%s/ceiling.ndjson", o->work);
	if (need_objects)
		make_objects(o, sync.target_cfg, ceiling_path);

	if (phase_on(o, "ceiling")) {
		machine_load("ceiling");
		r.ceiling_per_s = ceiling(o, ceiling_path, ceil_summary, sizeof(ceil_summary));
	}
	if (phase_on(o, "sync") || phase_on(o, "rpo")) {
		double secs;
		machine_load("sync");
		secs = sync_session(o, &sync, &k, false, OBJ_PREFIX, (long)o->objects, NULL);
		r.sync_per_s = (double)o->objects / secs;
		if (phase_on(o, "rpo"))
			phase_rpo(o, &r);
		e2e_session_stop(&sync);
	}
	if (phase_on(o, "kubectl"))
		phase_kubectl(o, &r);
	if (phase_on(o, "wan")) {
		double secs, bytes;
		if (!strcmp(o->faultproxy, "-"))
			bu_die("the wan phase needs --faultproxy");
		machine_load("wan");
		drop_namespaces(o, "e2e-");
		drop_namespaces(o, "kubectl-");
		e2e_session_init(o, &wan, &k, "wan", "bench-src", "wan", o->namespaces);
		secs = sync_session(o, &wan, &k, true, OBJ_PREFIX, (long)o->objects, NULL);
		bytes = e2e_proxy_bytes(o, &wan, NULL);
		r.wan_s = secs;
		r.wire_per_obj = bytes / o->objects;
		if (r.json_per_obj <= 0)
			json_bytes_only(o, &r);
		printf("wan: %.0f bytes on the wire (both directions): %.0f an object", bytes,
		       r.wire_per_obj);
		if (r.json_per_obj > 0)
			printf(" (%.2f of its JSON as the API server serves it)",
			       r.wire_per_obj / r.json_per_obj);
		printf("\n");
		phase_one_change(o, &wan, &r);
		e2e_session_stop(&wan);
		drop_namespaces(o, "wan-");
	}
	if (phase_on(o, "wan-slow")) {
		drop_namespaces(o, "e2e-");
		drop_namespaces(o, "kubectl-");
		phase_wan_slow(o, &k, &r);
	}
	if (phase_on(o, "velero")) {
		if (!o->velero_phase)
			bu_die("the velero phase needs --velero-phase");
		phase_velero(o, &r);
	}
	if (phase_on(o, "rss"))
		phase_rss(o, &k, &r);

	machine_load("end");
	if (ceil_summary[0])
		printf("ceiling: best of %s\n", ceil_summary);
	printf("targets: ratio >= 0.8, rpo p50 < 0.5 s and p99 < 2 s, one change: 1 record, "
	       "< 4096 bytes, 1 write\n");
	printf("RESULT sync_per_s=%.0f ceiling_per_s=%.0f ratio=%.2f kubectl_per_s=%.0f "
	       "wan_s=%.1f wire_bytes_per_obj=%.0f json_bytes_per_obj=%.0f wire_ratio=%.3f "
	       "wan_slow_s=%.1f wan_slow_ideal_s=%.1f wan_slow_ratio=%.2f wan_slow_applied_s=%.1f "
	       "rpo_p50_s=%.3f "
	       "rpo_p99_s=%.3f one_change_records=%.0f one_change_bytes=%.0f "
	       "one_change_writes=%.0f rss_mb_source_10k=%.0f rss_mb_target_10k=%.0f "
	       "rss_mb_source=%.0f rss_mb_target=%.0f velero_per_s=%.1f velero_one_change_s=%.2f "
	       "velero_one_change_bytes=%.0f velero_one_change_writes=%.0f velero_rss_mb=%.0f "
	       "ratio_vs_velero=%.1f\n",
	       r.sync_per_s, r.ceiling_per_s,
	       r.sync_per_s > 0 && r.ceiling_per_s > 0 ? r.sync_per_s / r.ceiling_per_s : -1,
	       r.kubectl_per_s, r.wan_s, r.wire_per_obj, r.json_per_obj,
	       r.json_per_obj > 0 ? r.wire_per_obj / r.json_per_obj : -1, r.wan_slow_s,
	       r.wan_slow_ideal_s, r.wan_slow_ideal_s > 0 ? r.wan_slow_s / r.wan_slow_ideal_s : -1,
	       r.wan_slow_applied_s, r.rpo_p50, r.rpo_p99, r.one_records, r.one_bytes, r.one_writes,
	       r.rss_source_small, r.rss_target_small, r.rss_source, r.rss_target, r.velero_per_s,
	       r.velero_one_s, r.velero_one_bytes, r.velero_one_writes, r.velero_rss,
	       r.sync_per_s > 0 && r.velero_per_s > 0 ? r.sync_per_s / r.velero_per_s : -1);
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = {.log_level = "info",
			 .faultproxy = "-",
			 .ceiling_workers = "16,64,256",
			 .phases = "ceiling,sync,rpo,kubectl,wan,wan-slow,rss",
			 .velero_phase = NULL,
			 .objects = 10000,
			 .namespaces = 10,
			 .rpo_changes = 200,
			 .rpo_interval_ms = 50,
			 .rss_objects = 100000,
			 .wan_latency_ms = 25,
			 .wan_rate_kbit = 100000,
			 .wan_slow_latency_ms = 100,
			 .wan_slow_rate_kbit = 2000,
			 .timeout = 1800};

	bu_init("bench e2e");
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 1; i + 1 < argc; i += 2) {
		const char *k = argv[i], *v = argv[i + 1];
		if (strcmp(k, "--source-agent") == 0)
			o.source_agent = v;
		else if (strcmp(k, "--target-agent") == 0)
			o.target_agent = v;
		else if (strcmp(k, "--loadgen") == 0)
			o.loadgen = v;
		else if (strcmp(k, "--kube-bin") == 0)
			o.kube_bin = v;
		else if (strcmp(k, "--faultproxy") == 0)
			o.faultproxy = v;
		else if (strcmp(k, "--sanitizer") == 0)
			o.sanitizer = v;
		else if (strcmp(k, "--source-kubeconfig") == 0)
			o.source_kc = v;
		else if (strcmp(k, "--target-kubeconfig") == 0)
			o.target_kc = v;
		else if (strcmp(k, "--source-admin") == 0)
			o.source_admin = v;
		else if (strcmp(k, "--target-admin") == 0)
			o.target_admin = v;
		else if (strcmp(k, "--work") == 0)
			o.work = v;
		else if (strcmp(k, "--log-level") == 0)
			o.log_level = v;
		else if (strcmp(k, "--ceiling-workers") == 0)
			o.ceiling_workers = v;
		else if (strcmp(k, "--velero-phase") == 0)
			o.velero_phase = v;
		else if (strcmp(k, "--phases") == 0)
			o.phases = v;
		else if (strcmp(k, "--objects") == 0)
			o.objects = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(k, "--namespaces") == 0)
			o.namespaces = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(k, "--rpo-changes") == 0)
			o.rpo_changes = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(k, "--rpo-interval-ms") == 0)
			o.rpo_interval_ms = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(k, "--rss-objects") == 0)
			o.rss_objects = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(k, "--wan-latency-ms") == 0)
			o.wan_latency_ms = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(k, "--wan-rate-kbit") == 0)
			o.wan_rate_kbit = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(k, "--wan-slow-latency-ms") == 0)
			o.wan_slow_latency_ms = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(k, "--wan-slow-rate-kbit") == 0)
			o.wan_slow_rate_kbit = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(k, "--timeout") == 0)
			o.timeout = strtod(v, NULL);
		else
			bu_die("unknown option %s", k);
	}
	if (!o.source_agent || !o.target_agent || !o.loadgen || !o.kube_bin || !o.sanitizer ||
	    !o.source_kc || !o.target_kc || !o.source_admin || !o.target_admin || !o.work ||
	    o.namespaces == 0 || o.objects < 9 * o.namespaces || o.rpo_changes == 0 ||
	    o.rss_objects == 0 || o.wan_slow_rate_kbit == 0)
		bu_die("%s",
		       "usage: bench_e2e --source-agent BIN --target-agent BIN --loadgen BIN "
		       "--kube-bin BIN --sanitizer PY --source-kubeconfig KC "
		       "--target-kubeconfig KC --source-admin KC --target-admin KC --work DIR "
		       "[...] (objects >= 9 per namespace)");
	return bench(&o);
}
