/*
 * scripts/bench.sh target (run by tests/bench/target.sh, which starts the
 * cluster): the importer, `drasync-target run` as a real process against one
 * local API server, fed by a real ds_sender over CURVE from this program.
 *
 *   (a) the objects: tests/bench/loadgen -dump sends MIXED objects of loadgen's
 *       mixed mode (Deployments, StatefulSets, headless Services, Secrets,
 *       ConfigMaps, ServiceAccounts, ResourceClaimTemplates, ResourceClaims,
 *       bare Pods; 10 namespaces) as dry-run creates and writes what the API
 *       server returned: the objects as an exporter reads them. Each is
 *       sanitized as the exporter does (ds_sanitize) and becomes an upsert
 *       record, uid and resourceVersion in the envelope; the namespaces come
 *       first, the kinds in the exporter's order. The same objects, through
 *       the importer's own pipeline (ds_transform_object with the target's
 *       configuration), are what the ceiling sends.
 *   (b) the ceiling: loadgen -apply server-side applies (PATCH
 *       apply-patch+yaml, field manager drasync, force, as the importer does)
 *       those transformed objects into fresh namespaces of the same API
 *       server, as the same ServiceAccount, with W workers for each W of
 *       --ceiling-workers: the best objects/s is the ceiling. After each
 *       run its namespaces are deleted and waited for, so every run and the
 *       importer's meet the same quiet cluster: not one still making
 *       ReplicaSets and Pods for an earlier run's workloads, nor a store
 *       twice or four times the size.
 *   (c) apply: the records pushed into an outbox, then drained by a
 *       ds_sender to `drasync-target run`; from the first send until every
 *       object is `applied` in the target's ledger (object_state, read with
 *       SQLite every 25 ms): objects/s.
 *   (d) burst: BURST updates of BURST_OBJECTS of those ConfigMaps (round
 *       after round, each round one change to each, pushed as fast as the
 *       outbox takes them while the sender runs); when the last version of
 *       each is applied and is on the API server, the API server's own count
 *       of writes to configmaps (apiserver_request_total, every verb but
 *       GET, LIST and WATCH; nothing else writes ConfigMaps meanwhile) before
 *       and after.
 *
 * Usage:
 *   bench_target --agent BIN --loadgen BIN --kube-bin BIN --kubeconfig AGENT_KC
 *                --admin-kubeconfig KC --work DIR [--mixed N] [--namespaces K]
 *                [--ceiling-workers W,W,...] [--burst N] [--burst-objects K]
 *                [--log-level L] [--timeout SECONDS]
 * Last line: RESULT apply_per_s=N ceiling_per_s=N ratio=X burst_writes=N
 */
#include "drasync/clock.h"
#include "drasync/keys.h"
#include "drasync/object_state.h"
#include "drasync/outbox.h"
#include "drasync/report.h"
#include "drasync/sanitize.h"
#include "drasync/kinds.h"
#include "drasync/sender.h"
#include "drasync/target_config.h"
#include "drasync/transform.h"
#include "benchutil.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SOURCE_CLUSTER "bench-source"
#define PUSH_CHUNK 512 /* records per outbox push, as an exporter's batch */

/* ---- child processes ------------------------------------------------------ */

/* CPU seconds of this process (who, RUSAGE_SELF) or of its waited-for children. */
static double rusage_cpu_s(int who)
{
	struct rusage ru;

	if (getrusage(who, &ru) < 0)
		return -1;
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* ---- options -------------------------------------------------------------- */

struct opts {
	const char *agent, *loadgen, *kube_bin, *kubeconfig, *admin_kubeconfig, *work, *log_level;
	const char *ceiling_workers;
	unsigned mixed, namespaces, burst, burst_objects;
	double timeout;
};

/* ---- the objects as records ------------------------------------------------ */

struct object {
	int rank;
	size_t line;
	json_t *sanitized; /* what the record carries */
	char *payload;	   /* canonical JSON of sanitized */
	char *api_version, *kind, *ns, *name, *uid;
};

static int cmp_object(const void *x, const void *y)
{
	const struct object *p = x, *q = y;

	if (p->rank != q->rank)
		return p->rank < q->rank ? -1 : 1;
	return (p->line > q->line) - (p->line < q->line);
}

static ds_record record_of(const struct object *o, const char *payload)
{
	ds_record r;

	memset(&r, 0, sizeof(r));
	r.op = DS_RECORD_UPSERT;
	r.api_version = o->api_version;
	r.kind = o->kind;
	r.ns = o->ns;
	r.name = o->name;
	r.source_uid = o->uid;
	r.source_resource_version = "";
	r.payload = (const uint8_t *)payload;
	r.payload_len = strlen(payload);
	return r;
}

/*
 * Read the dump, sanitize each object into a record, write the transformed
 * objects (what the importer sends) to ceiling_path.
 */
static struct object *load_objects(const char *dump, const ds_target_config *cfg,
				   const char *ceiling_path, size_t *n_out)
{
	FILE *in = fopen(dump, "r"), *out;
	struct object *objs = NULL;
	size_t n = 0, cap = 0, linecap = 0;
	char *line = NULL;
	ssize_t len;
	ds_report *rep = NULL;

	if (!in)
		bu_die("cannot read %s", dump);
	if (ds_report_new(&rep) < 0)
		bu_die("out of memory");
	while ((len = getline(&line, &linecap, in)) > 0) {
		json_error_t jerr;
		json_t *obj = json_loadb(line, (size_t)len, 0, &jerr), *meta;
		struct object *o;
		const char *uid, *ns;

		if (!obj || !json_is_object(obj))
			bu_die("%s:%zu: %s", dump, n + 1, obj ? "not an object" : jerr.text);
		if (n == cap) {
			cap = cap ? cap * 2 : 1024;
			objs = realloc(objs, cap * sizeof(*objs));
			if (!objs)
				bu_die("out of memory");
		}
		o = &objs[n];
		memset(o, 0, sizeof(*o));
		o->line = n++;
		meta = json_object_get(obj, "metadata");
		uid = json_string_value(json_object_get(meta, "uid"));
		ns = json_string_value(json_object_get(meta, "namespace"));
		o->api_version = bu_xstrdup(json_string_value(json_object_get(obj, "apiVersion")));
		o->kind = bu_xstrdup(json_string_value(json_object_get(obj, "kind")));
		o->name = bu_xstrdup(json_string_value(json_object_get(meta, "name")));
		o->ns = bu_xstrdup(ns ? ns : "");
		o->uid = bu_xstrdup(uid);
		o->rank = ds_kind_rank(o->kind); /* the order the exporter sends in */
		if (ds_sanitize(obj) < 0)
			bu_die("out of memory");
		o->sanitized = obj;
		o->payload = json_dumps(obj, JSON_SORT_KEYS | JSON_COMPACT);
		if (!o->payload)
			bu_die("out of memory");
	}
	free(line);
	fclose(in);
	qsort(objs, n, sizeof(*objs), cmp_object);

	out = fopen(ceiling_path, "w");
	if (!out)
		bu_die("cannot write %s", ceiling_path);
	for (size_t i = 0; i < n; i++) {
		ds_transform_opts topts = {.cfg = cfg,
					   .dra_version = DS_DRA_V1,
					   .source_cluster = SOURCE_CLUSTER,
					   .source_uid = objs[i].uid};
		json_t *t = json_deep_copy(objs[i].sanitized);
		char *s;
		int r;

		if (!t)
			bu_die("out of memory");
		r = ds_transform_object(&topts, t, rep);
		if (r != DS_TRANSFORM_APPLY)
			bu_die("the importer's pipeline does not apply %s %s/%s (%d)", objs[i].kind,
			       objs[i].ns, objs[i].name, r);
		s = json_dumps(t, JSON_SORT_KEYS | JSON_COMPACT);
		if (!s || fprintf(out, "%s\n", s) < 0)
			bu_die("cannot write %s", ceiling_path);
		free(s);
		json_decref(t);
	}
	if (fclose(out) != 0)
		bu_die("cannot write %s", ceiling_path);
	ds_report_free(rep);
	*n_out = n;
	return objs;
}

static uint64_t push(ds_outbox *ob, const ds_record *recs, size_t n)
{
	uint64_t last = 0;
	ds_err err = {0};

	for (size_t i = 0; i < n; i += PUSH_CHUNK) {
		size_t k = n - i < PUSH_CHUNK ? n - i : PUSH_CHUNK;
		if (ds_outbox_push(ob, recs + i, k, &last, &err) < 0)
			bu_die("outbox push: %s", err.msg);
	}
	return last;
}

/* ---- the target agent ----------------------------------------------------- */

struct target {
	pid_t pid;
	char log[700], config[700], ledger[700], endpoint[256];
};

static void write_target_config(const struct opts *o, const char *path, const char *keydir,
				const char *auth, const char *state)
{
	char text[8192];
	size_t used;

	used =
	    (size_t)snprintf(text, sizeof(text),
			     "apiVersion: drasync.io/v1alpha1\n"
			     "kind: TargetConfig\n"
			     "listen: \"tcp://127.0.0.1:*\"\n"
			     "keys: {secretKeyFile: \"%s/target.key\", authorizedSources: \"%s\"}\n"
			     "stateDir: \"%s\"\n"
			     "mode: migrate\n"
			     "namespaceMappings:\n",
			     keydir, auth, state);
	for (unsigned i = 0; i < o->namespaces && used < sizeof(text); i++)
		used += (size_t)snprintf(text + used, sizeof(text) - used,
					 "  bench-src-%u: bench-dst-%u\n", i, i);
	if (used >= sizeof(text))
		bu_die("target configuration too long");
	bu_write_file(path, text);
}

static void target_start(const struct opts *o, struct target *t)
{
	const char *argv[] = {o->agent,	     "run",	    "--config",	  t->config, "--kubeconfig",
			      o->kubeconfig, "--log-level", o->log_level, NULL};
	double end = ds_clock_mono_s() + 60;

	bu_write_file(t->log, "");
	t->pid = bu_spawn(argv, NULL, t->log);
	for (;;) {
		char *log = bu_read_file(t->log);
		const char *p = strstr(log, "event=started listen=");
		int st;

		if (p) {
			p += strlen("event=started listen=");
			snprintf(t->endpoint, sizeof(t->endpoint), "%.*s", (int)strcspn(p, " \n"),
				 p);
			free(log);
			return;
		}
		free(log);
		if (waitpid(t->pid, &st, WNOHANG) == t->pid) {
			bu_child_forget(t->pid);
			bu_show_tail(t->log);
			bu_die("drasync-target run exited before it listened (log: %s)", t->log);
		}
		if (ds_clock_mono_s() > end) {
			bu_show_tail(t->log);
			bu_die("drasync-target run did not start within 60 s");
		}
		bu_msleep(50);
	}
}

static void target_stop(struct target *t)
{
	int st;

	bu_child_forget(t->pid);
	kill(t->pid, SIGTERM);
	for (int i = 0; i < 300; i++) {
		if (waitpid(t->pid, &st, WNOHANG) == t->pid) {
			if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
				fprintf(stderr, "bench target: drasync-target run ended with %d\n",
					st);
			return;
		}
		bu_msleep(100);
	}
	kill(t->pid, SIGKILL);
	waitpid(t->pid, &st, 0);
	fprintf(stderr, "bench target: drasync-target run did not stop on SIGTERM\n");
}

/* ---- the ledger, read as an operator would with sqlite3 ------------------- */

struct states {
	long applied, pending, waiting, failed, other, total;
};

static sqlite3 *ledger_open(const char *path)
{
	sqlite3 *db = NULL;

	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
		bu_die("cannot open %s: %s", path, db ? sqlite3_errmsg(db) : "?");
	sqlite3_busy_timeout(db, 2000);
	return db;
}

static void ledger_states(sqlite3 *db, struct states *s)
{
	sqlite3_stmt *q = NULL;
	int rc;

	memset(s, 0, sizeof(*s));
	rc = sqlite3_prepare_v2(db, "SELECT state, count(*) FROM object_state GROUP BY state", -1,
				&q, NULL);
	if (rc != SQLITE_OK) {
		/* the applier may not have made the table yet */
		sqlite3_finalize(q);
		return;
	}
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		const char *st = (const char *)sqlite3_column_text(q, 0);
		long c = sqlite3_column_int64(q, 1);
		s->total += c;
		if (!st)
			s->other += c;
		else if (strcmp(st, "applied") == 0)
			s->applied += c;
		else if (strcmp(st, "pending") == 0)
			s->pending += c;
		else if (strcmp(st, "waiting") == 0)
			s->waiting += c;
		else if (strcmp(st, "failed") == 0)
			s->failed += c;
		else
			s->other += c;
	}
	sqlite3_finalize(q);
}

/* A few rows not applied, with their reasons, to stderr. */
static void ledger_show_unapplied(sqlite3 *db)
{
	sqlite3_stmt *q = NULL;

	if (sqlite3_prepare_v2(db,
			       "SELECT key, state, reason FROM object_state WHERE state != "
			       "'applied' LIMIT 10",
			       -1, &q, NULL) != SQLITE_OK)
		return;
	while (sqlite3_step(q) == SQLITE_ROW)
		fprintf(stderr, "  %s: %s: %s\n", sqlite3_column_text(q, 0),
			sqlite3_column_text(q, 1),
			sqlite3_column_text(q, 2) ? (const char *)sqlite3_column_text(q, 2) : "");
	sqlite3_finalize(q);
}

/* How many of the given (key, seq) rows are applied at exactly that seq. */
static long ledger_applied_at(sqlite3 *db, char *const *keys, const uint64_t *seqs, size_t n)
{
	sqlite3_stmt *q = NULL;
	long c = 0;

	if (sqlite3_prepare_v2(db,
			       "SELECT count(*) FROM object_state WHERE key = ? AND seq = ? AND "
			       "state = 'applied'",
			       -1, &q, NULL) != SQLITE_OK)
		bu_die("ledger: %s", sqlite3_errmsg(db));
	for (size_t i = 0; i < n; i++) {
		sqlite3_reset(q);
		sqlite3_bind_text(q, 1, keys[i], -1, SQLITE_STATIC);
		sqlite3_bind_int64(q, 2, (sqlite3_int64)seqs[i]);
		if (sqlite3_step(q) == SQLITE_ROW)
			c += sqlite3_column_int64(q, 0);
	}
	sqlite3_finalize(q);
	return c;
}

/* ---- the sender, on a thread of its own ----------------------------------- */

struct feed {
	ds_sender *sender;
	pthread_t thread;
	int rc;
	ds_err err;
};

static void *feed_run(void *arg)
{
	struct feed *f = arg;

	f->rc = ds_sender_run(f->sender, 0, 0, &f->err);
	return NULL;
}

/* ---- the API server's write count ----------------------------------------- */

/* apiserver_request_total for resource="configmaps", every verb that writes
 * (summed over the other labels); detail: the sum per verb. */
static double configmap_writes(const struct opts *o, char *detail, size_t size)
{
	const char *argv[] = {o->kube_bin, "kubectl", "--kubeconfig", o->admin_kubeconfig,
			      "get",	   "--raw",   "/metrics",     NULL};
	static const char *const verbs[] = {"APPLY",  "PATCH",	"POST",	  "PUT",
					    "DELETE", "CREATE", "UPDATE", "DELETECOLLECTION"};
	enum { NV = sizeof(verbs) / sizeof(verbs[0]) };
	double per[NV] = {0}, total = 0;
	char *text = bu_run(argv, o->work, "metrics");
	size_t used = 0;

	for (char *p = text; p && *p;) {
		char *nl = strchr(p, '\n');
		if (nl)
			*nl = '\0';
		if (strncmp(p, "apiserver_request_total{", 24) == 0 &&
		    strstr(p, "resource=\"configmaps\"")) {
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
	detail[0] = '\0';
	for (size_t v = 0; v < NV; v++) {
		total += per[v];
		if (per[v] > 0 && used < size)
			used += (size_t)snprintf(detail + used, size - used, "%s%s=%.0f",
						 used ? " " : "", verbs[v], per[v]);
	}
	return total;
}

/* Requests the API server has answered 429 (APF or max-inflight throttling), all resources. */
static double throttled(const struct opts *o)
{
	const char *argv[] = {o->kube_bin, "kubectl", "--kubeconfig", o->admin_kubeconfig,
			      "get",	   "--raw",   "/metrics",     NULL};
	char *text = bu_run(argv, o->work, "metrics");
	double total = 0;

	for (char *p = text; p && *p;) {
		char *nl = strchr(p, '\n');
		if (nl)
			*nl = '\0';
		if (strncmp(p, "apiserver_request_total{", 24) == 0 && strstr(p, "code=\"429\"")) {
			const char *sp = strrchr(p, ' ');
			total += sp ? strtod(sp + 1, NULL) : 0;
		}
		p = nl ? nl + 1 : NULL;
	}
	free(text);
	return total;
}

/* ---- the benchmark -------------------------------------------------------- */

/*
 * Delete the namespaces whose names start with prefix and wait until they are
 * gone, with all they held: the next phase meets the same quiet cluster
 * (its controllers are not still making ReplicaSets and Pods for the last
 * phase's workloads, the store holds what it held before).
 */
static void drop_namespaces(const struct opts *o, const char *prefix)
{
	char cmd[4096];
	double t0 = ds_clock_mono_s();

	snprintf(cmd, sizeof(cmd),
		 "'%s' kubectl --kubeconfig '%s' get namespaces -o name | grep '^namespace/%s' "
		 "| xargs -r '%s' kubectl --kubeconfig '%s' delete --wait=true --timeout=600s "
		 ">/dev/null",
		 o->kube_bin, o->admin_kubeconfig, prefix, o->kube_bin, o->admin_kubeconfig);
	if (system(cmd) != 0)
		bu_die("could not delete the namespaces %s* (%s)", prefix, cmd);
	printf("settle: namespaces %s* and their objects deleted in %.1f s\n", prefix,
	       ds_clock_mono_s() - t0);
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
		    o->loadgen,		 "-kubeconfig", o->kubeconfig, "-apply", ceiling_path,
		    "-namespace-prefix", prefix,	"-workers",    w,	 NULL};
		char *out;
		const char *line;
		double rate, secs;

		double cpu0 = rusage_cpu_s(RUSAGE_CHILDREN), t429 = throttled(o);

		snprintf(prefix, sizeof(prefix), "ceil-w%s", w);
		snprintf(tag, sizeof(tag), "ceiling-w%s", w);
		out = bu_run(argv, o->work, tag);
		line = bu_last_line(out, "loadgen applied=");
		rate = bu_field(line, "per_s=");
		secs = bu_field(line, "seconds=");
		printf("ceiling: client-go, %s workers: %.0f objects in %.2f s: %.0f objects/s "
		       "(server-side apply, the importer's objects, its ServiceAccount; the "
		       "generator used %.1f CPU s; %.0f answers 429)\n",
		       w, bu_field(line, "applied="), secs, rate,
		       rusage_cpu_s(RUSAGE_CHILDREN) - cpu0, throttled(o) - t429);
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

static int bench(const struct opts *o)
{
	char keydir[600], auth[700], cfg_path[600], state[600], dump[600], ceiling_path[600];
	char outbox_path[600], src_ns[4096], n_str[32], ceil_summary[512];
	char detail_before[1024], detail_after[1024];
	ds_keypair server, source;
	ds_target_config *cfg = NULL;
	ds_outbox *ob = NULL;
	ds_sender_config sc;
	struct target t;
	struct feed feed;
	struct object *objs;
	ds_record *recs;
	size_t n;
	uint64_t last_seq;
	ds_err err = {0};
	sqlite3 *db;
	struct states s;
	double t0, t_acked = 0, t_applied = 0, apply_rate, ceil_rate, last_progress;
	double agent_cpu0, self_cpu0, t429;
	long last_applied = -1;
	double writes_before, writes_after;

	memset(&t, 0, sizeof(t));
	memset(&feed, 0, sizeof(feed));
	if (ds_keys_generate(&server, &err) < 0 || ds_keys_generate(&source, &err) < 0)
		bu_die("keys: %s", err.msg);
	snprintf(keydir, sizeof(keydir), "%s/keys", o->work);
	if (ds_keys_write(keydir, "target", &server, true, &err) < 0)
		bu_die("keys: %s", err.msg);
	snprintf(auth, sizeof(auth), "%s/authorized_sources", keydir);
	{
		char line[200];
		snprintf(line, sizeof(line), "%s %s\n", SOURCE_CLUSTER, source.public_z85);
		bu_write_file(auth, line);
	}
	snprintf(cfg_path, sizeof(cfg_path), "%s/target.yaml", o->work);
	snprintf(state, sizeof(state), "%s/target-state", o->work);
	write_target_config(o, cfg_path, keydir, auth, state);
	if (ds_target_config_load(&cfg, cfg_path, &err) < 0)
		bu_die("%s: %s", cfg_path, err.msg);

	/* (a) the objects */
	bu_ns_list(src_ns, sizeof(src_ns), "bench-src", o->namespaces);
	snprintf(dump, sizeof(dump), "%s/source.ndjson", o->work);
	snprintf(ceiling_path, sizeof(ceiling_path), "%s/ceiling.ndjson", o->work);
	snprintf(n_str, sizeof(n_str), "%u", o->mixed);
	{
		const char *argv[] = {o->loadgen, "-kubeconfig", o->admin_kubeconfig,
				      "-mode",	  "mixed",	 "-namespaces",
				      src_ns,	  "-count",	 n_str,
				      "-prefix",  "mixed",	 "-dump",
				      dump,	  NULL};
		char *out = bu_run(argv, o->work, "dump");
		const char *line = bu_last_line(out, "loadgen dumped=");
		printf("objects: %.*s\n", (int)strcspn(line, "\n"), line);
		free(out);
	}
	objs = load_objects(dump, cfg, ceiling_path, &n);
	recs = calloc(n, sizeof(*recs));
	if (!recs)
		bu_die("out of memory");
	for (size_t i = 0; i < n; i++)
		recs[i] = record_of(&objs[i], objs[i].payload);
	{
		size_t bytes = 0;
		for (size_t i = 0; i < n; i++)
			bytes += recs[i].payload_len;
		printf("records: %zu upserts (%u namespaces + %u objects), %zu bytes of JSON\n", n,
		       o->namespaces, o->mixed, bytes);
	}

	/* (b) the ceiling, first; each run cleaned away after it (drop_namespaces) */
	ceil_rate = ceiling(o, ceiling_path, ceil_summary, sizeof(ceil_summary));

	/* (c) apply */
	snprintf(outbox_path, sizeof(outbox_path), "%s/outbox.db", o->work);
	if (ds_outbox_open(&ob, outbox_path, NULL, &err) < 0)
		bu_die("outbox: %s", err.msg);
	last_seq = push(ob, recs, n);
	snprintf(t.config, sizeof(t.config), "%s", cfg_path);
	snprintf(t.log, sizeof(t.log), "%s/target.log", o->work);
	snprintf(t.ledger, sizeof(t.ledger), "%s/ledger.db", state);
	target_start(o, &t);
	ds_sender_config_default(&sc);
	sc.endpoint = t.endpoint;
	sc.server_public_key = server.public_z85;
	sc.keys = &source;
	sc.outbox_path = outbox_path;
	sc.cluster_name = SOURCE_CLUSTER;
	if (ds_sender_new(&feed.sender, &sc, &err) < 0)
		bu_die("sender: %s", err.msg);
	db = ledger_open(t.ledger);
	agent_cpu0 = bu_proc_cpu_s(t.pid);
	t429 = throttled(o);
	self_cpu0 = rusage_cpu_s(RUSAGE_SELF);
	t0 = ds_clock_mono_s();
	if (pthread_create(&feed.thread, NULL, feed_run, &feed) != 0)
		bu_die("cannot start the sender thread");
	last_progress = t0;
	for (;;) {
		double now;

		bu_msleep(25);
		now = ds_clock_mono_s();
		if (!t_acked && ds_sender_acked(feed.sender) >= last_seq)
			t_acked = now;
		ledger_states(db, &s);
		if (s.applied >= (long)n) {
			t_applied = now;
			break;
		}
		if (s.applied != last_applied) {
			last_applied = s.applied;
			last_progress = now;
		}
		if (now - last_progress > 60 || now - t0 > o->timeout) {
			fprintf(stderr,
				"bench target: %ld of %zu applied after %.1f s (pending %ld, "
				"waiting %ld, failed %ld, other %ld); some rows:\n",
				s.applied, n, now - t0, s.pending, s.waiting, s.failed, s.other);
			ledger_show_unapplied(db);
			bu_show_tail(t.log);
			bu_die("the importer did not apply every object (log: %s)", t.log);
		}
	}
	apply_rate = (double)n / (t_applied - t0);
	printf("apply: %zu objects from the first send to all applied on the target: %.2f s, "
	       "%.0f objects/s (every record committed in the ledger after %.2f s)\n",
	       n, t_applied - t0, apply_rate, t_acked ? t_acked - t0 : -1);
	printf("apply: CPU used meanwhile: the importer %.1f s, this program's sender and "
	       "ledger polling %.1f s; %.0f answers 429\n",
	       bu_proc_cpu_s(t.pid) - agent_cpu0, rusage_cpu_s(RUSAGE_SELF) - self_cpu0,
	       throttled(o) - t429);

	/* (d) burst */
	{
		size_t k = o->burst_objects, rounds = (o->burst + k - 1) / k, found = 0;
		struct object **cms = calloc(k, sizeof(*cms));
		char **keys = calloc(k, sizeof(*keys));
		uint64_t *seqs = calloc(k, sizeof(*seqs));
		char **bodies = calloc(k, sizeof(*bodies));
		ds_record *brecs = calloc(k, sizeof(*brecs));
		size_t sent = 0;
		double b0, b_applied;
		bool ok = true;

		if (!cms || !keys || !seqs || !bodies || !brecs)
			bu_die("out of memory");
		for (size_t i = 0; i < n && found < k; i++)
			if (strcmp(objs[i].kind, "ConfigMap") == 0)
				cms[found++] = &objs[i];
		if (found < k)
			bu_die("only %zu ConfigMaps for the burst", found);
		for (size_t j = 0; j < k; j++) {
			char kb[600];
			ds_object_state_key(cms[j]->api_version, cms[j]->kind, cms[j]->ns,
					    cms[j]->name, kb, sizeof(kb));
			keys[j] = bu_xstrdup(kb);
		}
		bu_msleep(2000); /* what the importer may still write (nothing: all applied) */
		writes_before = configmap_writes(o, detail_before, sizeof(detail_before));
		b0 = ds_clock_mono_s();
		for (size_t r = 0; r < rounds; r++) {
			size_t m = 0;
			uint64_t last = 0;
			for (size_t j = 0; j < k && sent < o->burst; j++, sent++) {
				json_t *obj = json_deep_copy(cms[j]->sanitized), *data;
				char v[32];
				if (!obj)
					bu_die("out of memory");
				data = json_object_get(obj, "data");
				if (!data) {
					data = json_object();
					json_object_set_new(obj, "data", data);
				}
				snprintf(v, sizeof(v), "%zu", r);
				json_object_set_new(data, "burst", json_string(v));
				free(bodies[j]);
				bodies[j] = json_dumps(obj, JSON_SORT_KEYS | JSON_COMPACT);
				json_decref(obj);
				if (!bodies[j])
					bu_die("out of memory");
				brecs[m++] = record_of(cms[j], bodies[j]);
			}
			if (ds_outbox_push(ob, brecs, m, &last, &err) < 0)
				bu_die("outbox push: %s", err.msg);
			for (size_t j = 0; j < m; j++)
				seqs[j] = last - (m - 1) + j;
			ds_sender_wake(feed.sender);
		}
		printf("burst: %zu updates to %zu ConfigMaps pushed in %zu rounds in %.2f s\n",
		       sent, k, rounds, ds_clock_mono_s() - b0);
		for (;;) {
			if (ds_sender_acked(feed.sender) >= seqs[k - 1] &&
			    ledger_applied_at(db, keys, seqs, k) == (long)k)
				break;
			if (ds_clock_mono_s() - b0 > 120) {
				ledger_show_unapplied(db);
				bu_die("the burst's last versions were not applied within 120 s");
			}
			bu_msleep(25);
		}
		b_applied = ds_clock_mono_s();
		/* The last version is what the API server holds. */
		for (size_t j = 0; j < k; j++) {
			char ns[300], jp[64], tag[32];
			const char *tns = ds_target_config_map_namespace(cfg, cms[j]->ns);
			const char *argv[] = {
			    o->kube_bin, "kubectl", "--kubeconfig", o->admin_kubeconfig, "-n",
			    ns,		 "get",	    "configmap",    cms[j]->name,	 "-o",
			    jp,		 NULL};
			char *out, want[32];
			snprintf(ns, sizeof(ns), "%s", tns);
			snprintf(jp, sizeof(jp), "jsonpath={.data.burst}");
			snprintf(tag, sizeof(tag), "burst-get");
			snprintf(want, sizeof(want), "%zu", rounds - 1);
			out = bu_run(argv, o->work, tag);
			if (strcmp(out, want) != 0) {
				fprintf(stderr, "bench target: %s/%s holds %s, not %s\n", ns,
					cms[j]->name, out, want);
				ok = false;
			}
			free(out);
		}
		bu_msleep(2000); /* a write still in flight would count */
		writes_after = configmap_writes(o, detail_after, sizeof(detail_after));
		printf("burst: the last version of each applied %.2f s after the first push; %s "
		       "on the API server\n",
		       b_applied - b0,
		       ok ? "every ConfigMap holds the last update" : "NOT the last update");
		printf("burst: ConfigMap writes on the API server: %.0f (before: %s; after: %s)\n",
		       writes_after - writes_before, detail_before, detail_after);
		if (!ok)
			bu_die("the burst's final state is wrong");
		for (size_t j = 0; j < k; j++) {
			free(keys[j]);
			free(bodies[j]);
		}
		free(cms);
		free(keys);
		free(seqs);
		free(bodies);
		free(brecs);
	}

	ds_sender_stop(feed.sender);
	pthread_join(feed.thread, NULL);
	if (feed.rc < 0)
		fprintf(stderr, "bench target: sender: %s\n", feed.err.msg);
	ds_sender_free(feed.sender);
	target_stop(&t);
	sqlite3_close(db);
	ds_outbox_free(ob);

	printf("ceiling: best of %s\n", ceil_summary);
	printf("targets: ratio >= 0.8, burst_writes <= 30\n");
	printf("RESULT apply_per_s=%.0f ceiling_per_s=%.0f ratio=%.2f burst_writes=%.0f\n",
	       apply_rate, ceil_rate, ceil_rate > 0 ? apply_rate / ceil_rate : 0,
	       writes_after - writes_before);
	for (size_t i = 0; i < n; i++) {
		json_decref(objs[i].sanitized);
		free(objs[i].payload);
		free(objs[i].api_version);
		free(objs[i].kind);
		free(objs[i].ns);
		free(objs[i].name);
		free(objs[i].uid);
	}
	free(objs);
	free(recs);
	ds_target_config_free(cfg);
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = {.log_level = "info",
			 .ceiling_workers = "16,64,256",
			 .mixed = 10000,
			 .namespaces = 10,
			 .burst = 1000,
			 .burst_objects = 10,
			 .timeout = 1800};

	bu_init("bench target");
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 1; i + 1 < argc; i += 2) {
		const char *k = argv[i], *v = argv[i + 1];
		if (strcmp(k, "--agent") == 0)
			o.agent = v;
		else if (strcmp(k, "--loadgen") == 0)
			o.loadgen = v;
		else if (strcmp(k, "--kube-bin") == 0)
			o.kube_bin = v;
		else if (strcmp(k, "--kubeconfig") == 0)
			o.kubeconfig = v;
		else if (strcmp(k, "--admin-kubeconfig") == 0)
			o.admin_kubeconfig = v;
		else if (strcmp(k, "--work") == 0)
			o.work = v;
		else if (strcmp(k, "--log-level") == 0)
			o.log_level = v;
		else if (strcmp(k, "--ceiling-workers") == 0)
			o.ceiling_workers = v;
		else if (strcmp(k, "--mixed") == 0)
			o.mixed = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(k, "--namespaces") == 0)
			o.namespaces = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(k, "--burst") == 0)
			o.burst = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(k, "--burst-objects") == 0)
			o.burst_objects = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(k, "--timeout") == 0)
			o.timeout = strtod(v, NULL);
		else
			bu_die("unknown option %s", k);
	}
	if (!o.agent || !o.loadgen || !o.kube_bin || !o.kubeconfig || !o.admin_kubeconfig ||
	    !o.work || o.namespaces == 0 || o.burst_objects == 0 || o.burst < o.burst_objects)
		bu_die("%s", "usage: bench_target --agent BIN --loadgen BIN --kube-bin BIN "
			     "--kubeconfig AGENT_KC --admin-kubeconfig KC --work DIR [...]");
	return bench(&o);
}
