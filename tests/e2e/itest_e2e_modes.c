/*
 * The source's schedules and what reaches the target, as users run the pair
 * (both agents as processes on the shipped RBAC's tokens, v1 source ->
 * v1beta1 target, the source namespace mapped to NS-dr):
 *   - once, interval and watch each deliver the namespace (equal by hash on
 *     the target), and a pass over an unchanged source writes nothing on the
 *     target (the target API server's own write counts, tu_kube_writes); a
 *     change goes out with the next pass;
 *   - cron ("* * * * *", SPEC §7): the next three run times on whole
 *     minutes, a pass at start, then a change made between firings is not
 *     on the target before the next firing and is there after it; that
 *     firing pushes one record (status lastPass and pushedSeq, the metrics
 *     drasync_source_passes_total and drasync_source_pass_objects_total)
 *     and drasync writes nothing else on the target;
 *   - namespace mapping: everything lands in NS-dr, the Namespace object
 *     annotated with its source;
 *   - deletes: an object deleted on the source is deleted on the target, also
 *     one deleted while the source agent was down (a tombstone at its next
 *     pass); prunes: one deleted while the source was down and its state
 *     lost (a fresh stateDir: a snapshot) is pruned by the target at the
 *     snapshot's end; an object a user made in NS-dr is never touched.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dstest.h"
#include "testutil.h"
#include "tu_compare.h"
#include "tu_e2e.h"
#include "tu_kube.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static tu_pair P; /* disposed by teardown(), after a failure too */

static const char *const same_kinds[] = {"v1/ConfigMap", "v1/Secret", "apps/v1/Deployment", NULL};

static void create_source(tu_pair *p)
{
	for (int i = 0; i < 6; i++)
		tu_kube_create(p->src,
			       tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: "
					   "{name: cm-%d, namespace: %s}\ndata: {i: \"%d\"}\n",
					   i, p->src_ns, i));
	tu_kube_create(p->src, tu_kube_doc("apiVersion: v1\nkind: Secret\nmetadata: {name: creds, "
					   "namespace: %s}\nstringData: {token: s3cret}\n",
					   p->src_ns));
	tu_kube_create(p->src,
		       tu_kube_doc("apiVersion: resource.k8s.io/v1\nkind: "
				   "ResourceClaimTemplate\nmetadata: {name: gpu, namespace: "
				   "%s}\nspec: {spec: {devices: {requests: [{name: gpu, "
				   "exactly: {deviceClassName: gpu.example.com}}]}}}\n",
				   p->src_ns));
	tu_kube_create(p->src, tu_kube_doc("apiVersion: apps/v1\nkind: Deployment\nmetadata: "
					   "{name: web, namespace: %s}\nspec:\n  replicas: 1\n"
					   "  selector: {matchLabels: {app: web}}\n"
					   "  template:\n    metadata: {labels: {app: web}}\n"
					   "    spec: {containers: [{name: web, image: "
					   "registry.k8s.io/pause:3.10}]}\n",
					   p->src_ns));
}

/* Writes the target's API server counted to what replication writes. */
static long long target_writes(tu_pair *p, char *detail, size_t size)
{
	static const char *const res[] = {"configmaps", "secrets", "deployments",
					  "resourceclaimtemplates", "namespaces"};
	long long n = 0;
	size_t len = 0;

	detail[0] = '\0';
	for (size_t i = 0; i < sizeof(res) / sizeof(res[0]); i++) {
		char d[400];
		long long w = tu_kube_writes(p->dst, res[i], d, sizeof(d));
		int k = snprintf(detail + len, size - len, "%s%s: %lld (%s)", len ? "; " : "",
				 res[i], w, d);

		if (k > 0 && (size_t)k < size - len)
			len += (size_t)k;
		n += w;
	}
	return n;
}

/* Lines of text holding needle. */
static size_t count(const char *text, const char *needle)
{
	size_t n = 0;

	for (const char *at = text; (at = strstr(at, needle)); at += strlen(needle))
		n++;
	return n;
}

/* Wait until the source's current run logged `needle` n times. */
static void wait_source_log(tu_pair *p, const char *needle, size_t n, int timeout_ms)
{
	long long end = tu_now_ms() + timeout_ms;

	for (;;) {
		char *log = tu_site_source_run_log(&p->site);
		size_t got = count(log, needle);

		if (got >= n) {
			free(log);
			return;
		}
		if (tu_now_ms() > end)
			fail_msg("the source logged '%s' %zu times, not %zu, in %d ms:\n%s", needle,
				 got, n, timeout_ms, log);
		free(log);
		tu_msleep(100);
	}
}

/* The last line of text holding needle, into out; fails when none does. */
static void last_line_with(const char *text, const char *needle, char *out, size_t size)
{
	const char *at = NULL, *start, *end;

	for (const char *f = text; (f = strstr(f, needle)); f++)
		at = f;
	if (!at)
		fail_msg("no line with '%s' in:\n%s", needle, text);
	for (start = at; start > text && start[-1] != '\n'; start--)
		;
	end = strchr(at, '\n');
	snprintf(out, size, "%.*s", (int)(end ? end - start : (long)strlen(start)), start);
}

static void wait_cm_value(tu_pair *p, const char *name, const char *want, int timeout_ms)
{
	long long end = tu_now_ms() + timeout_ms;

	for (;;) {
		json_t *o = tu_e2e_get(p->dst, "v1", "ConfigMap", p->dst_ns, name);
		const char *v = o ? dt_str(o, "/data/i") : NULL;
		bool ok = v && strcmp(v, want) == 0;

		json_decref(o);
		if (ok)
			return;
		if (tu_now_ms() > end)
			fail_msg("ConfigMap %s/%s on the target has i=%s, not %s after %d ms",
				 p->dst_ns, name, v ? v : "(none)", want, timeout_ms);
		tu_msleep(200);
	}
}

static void once_run(tu_pair *p, const char *what)
{
	int code;
	char *log;

	tu_pair_source_start(p, (const char *const[]){"--timeout", "90s", NULL});
	code = tu_site_source_wait(&p->site, 120000);
	log = tu_site_source_run_log(&p->site);
	if (code != 0)
		fail_msg("%s: once exited %d:\n%s", what, code, log);
	tu_e2e_assert_log(what, log, "acknowledged by the target: ", true);
	tu_e2e_assert_log(what, log, " 0 failed", true);
	free(log);
}

static void test_e2e_modes__once_delivers_and_a_second_pass_writes_nothing(void **state)
{
	tu_pair *const p = &P;
	char d0[2000], d1[2000];
	long long w0, w1;
	char *log;

	(void)state;
	tu_pair_init(p, "e2eo", "DS_KUBECONFIG_V1", "DS_KUBECONFIG_V1BETA1", "prod-east",
		     "mode: migrate\n", "schedule: {mode: once}\n");
	create_source(p);
	tu_pair_target_start(p);
	once_run(p, "first once");
	tu_assert_same_objects(p->src, p->src_ns, p->dst, p->dst_ns, same_kinds, 30000);
	json_decref(tu_e2e_wait_get(p->dst, "resource.k8s.io/v1beta1", "ResourceClaimTemplate",
				    p->dst_ns, "gpu", 30000, &p->site));

	w0 = target_writes(p, d0, sizeof(d0));
	once_run(p, "second once");
	log = tu_site_source_run_log(&p->site);
	tu_e2e_assert_log("second once", log, "pushed=0 ", true);
	free(log);
	tu_msleep(1000); /* what the target would apply of it has been applied */
	w1 = target_writes(p, d1, sizeof(d1));
	if (w1 != w0)
		fail_msg("an unchanged second once pass wrote on the target:\nbefore %s\nafter  %s",
			 d0, d1);

	tu_kube_merge(p->src, "v1", "ConfigMap", p->src_ns, "cm-3", NULL,
		      "{\"data\":{\"i\":\"changed\"}}");
	once_run(p, "third once");
	log = tu_site_source_run_log(&p->site);
	tu_e2e_assert_log("third once", log, "pushed=1 ", true);
	free(log);
	wait_cm_value(p, "cm-3", "changed", 10000);
	tu_assert_same_objects(p->src, p->src_ns, p->dst, p->dst_ns, same_kinds, 10000);
	tu_site_agent_sigterm(&p->site);
}

static void test_e2e_modes__interval_passes_write_only_changes(void **state)
{
	tu_pair *const p = &P;
	char d0[2000], d1[2000];
	long long w0, w1;
	size_t passes;
	char *log;

	(void)state;
	tu_pair_init(p, "e2ei", "DS_KUBECONFIG_V1", "DS_KUBECONFIG_V1BETA1", "prod-east",
		     "mode: migrate\n", "schedule: {mode: interval, every: 2s}\n");
	create_source(p);
	tu_pair_target_start(p);
	tu_pair_source_start(p, NULL);
	wait_source_log(p, "event=schedule mode=interval next=", 1, 10000);
	tu_assert_same_objects(p->src, p->src_ns, p->dst, p->dst_ns, same_kinds, 60000);

	/* Two more passes over an unchanged source: nothing written on the target. */
	log = tu_site_source_run_log(&p->site);
	passes = count(log, "event=pass_finished ");
	free(log);
	w0 = target_writes(p, d0, sizeof(d0));
	wait_source_log(p, "event=pass_finished ", passes + 2, 15000);
	tu_msleep(1000);
	w1 = target_writes(p, d1, sizeof(d1));
	if (w1 != w0)
		fail_msg("unchanged interval passes wrote on the target:\nbefore %s\nafter  %s", d0,
			 d1);

	/* A change goes out with the next pass. */
	tu_kube_merge(p->src, "v1", "ConfigMap", p->src_ns, "cm-2", NULL,
		      "{\"data\":{\"i\":\"changed\"}}");
	wait_cm_value(p, "cm-2", "changed", 15000);
	tu_assert_same_objects(p->src, p->src_ns, p->dst, p->dst_ns, same_kinds, 10000);
	log = tu_site_source_run_log(&p->site);
	tu_e2e_assert_log("interval", log, "pushed=1 ", true);
	tu_e2e_assert_log("interval", log, "level=error", false);
	free(log);
	tu_site_source_sigterm(&p->site);
	tu_site_agent_sigterm(&p->site);
}

/* The wall clock in ms (cron slots are wall-clock times). */
static long long wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static long long jint(const json_t *o, const char *ptr)
{
	json_t *v = dt_get(o, ptr);

	if (!json_is_integer(v))
		fail_msg("no integer at %s in %s", ptr, json_dumps(o, JSON_INDENT(1)));
	return (long long)json_integer_value(v);
}

/*
 * What drasync last wrote of each object it manages in NS-dr: the
 * resourceVersion of the kinds with no status, and a Deployment's
 * generation, labels and drasync.io/applied-hash (its status and the
 * controller's revision annotation move on their own).
 * "Kind/name" -> fingerprint; caller decrefs.
 */
static json_t *written(tu_pair *p)
{
	static const char *const kinds[][2] = {{"v1", "ConfigMap"},
					       {"v1", "Secret"},
					       {"resource.k8s.io/v1beta1", "ResourceClaimTemplate"},
					       {"apps/v1", "Deployment"}};
	json_t *out = json_object();

	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		json_t *items = tu_e2e_list(p->dst, kinds[k][0], kinds[k][1], p->dst_ns,
					    "app.kubernetes.io/managed-by=drasync"),
		       *o;
		size_t i;

		json_array_foreach (items, i, o) {
			char key[200], *fp;

			snprintf(key, sizeof(key), "%s/%s", kinds[k][1],
				 dt_str(o, "/metadata/name"));
			if (strcmp(kinds[k][1], "Deployment") == 0) {
				json_t *m = json_pack(
				    "{sO* sO* sO*}", "g", dt_get(o, "/metadata/generation"), "l",
				    dt_get(o, "/metadata/labels"), "h",
				    dt_get(o, "/metadata/annotations/drasync.io~1applied-hash"));
				fp = json_dumps(m, JSON_SORT_KEYS | JSON_COMPACT);
				json_decref(m);
			} else {
				fp = strdup(dt_str(o, "/metadata/resourceVersion"));
			}
			json_object_set_new(out, key, json_string(fp));
			free(fp);
		}
		json_decref(items);
	}
	return out;
}

/* Objects of the source namespace the source's index pushed after seq (a record each). */
static long long ns_pushed_after(tu_pair *p, long long seq, const char *name)
{
	char sql[400];

	snprintf(sql, sizeof(sql),
		 "SELECT count(*) FROM export_objects WHERE namespace = '%s' AND seq > %lld%s%s%s",
		 p->src_ns, seq, name ? " AND name = '" : "", name ? name : "", name ? "'" : "");
	return tu_site_source_outbox_int(&p->site, sql);
}

static void test_e2e_modes__cron_fires_and_carries_only_changes(void **state)
{
	tu_pair *const p = &P;
	int mport = tu_free_port();
	long long next, seq0, pushed0, pushed_sum, passes, left;
	char extra[200], line[1000];
	json_t *st, *w0, *w1, *v;
	const char *key;
	char *log;

	(void)state;
	snprintf(
	    extra, sizeof(extra),
	    "schedule: {mode: cron, expr: \"* * * * *\"}\nmetrics: {listen: \"127.0.0.1:%d\"}\n",
	    mport);
	tu_pair_init(p, "e2ec", "DS_KUBECONFIG_V1", "DS_KUBECONFIG_V1BETA1", "prod-east",
		     "mode: migrate\n", extra);
	create_source(p);
	tu_pair_target_start(p);
	tu_pair_source_start(p, NULL);

	/* The run times the operator checks the expression by: whole minutes. */
	wait_source_log(p, "event=schedule mode=cron next=", 1, 10000);
	log = tu_site_source_run_log(&p->site);
	last_line_with(log, "event=schedule mode=cron next=", line, sizeof(line));
	free(log);
	if (count(line, ":00.000Z") != 3)
		fail_msg("cron * * * * *: the next three runs are not on whole minutes: %s", line);

	/* A pass at start brings the target up to date. */
	wait_source_log(p, "event=pass_next ", 1, 60000);
	tu_assert_same_objects(p->src, p->src_ns, p->dst, p->dst_ns, same_kinds, 60000);
	json_decref(tu_e2e_wait_get(p->dst, "resource.k8s.io/v1beta1", "ResourceClaimTemplate",
				    p->dst_ns, "gpu", 30000, &p->site));
	st = tu_e2e_source_status(&p->site);
	next = jint(st, "/agent/nextPassMs");
	seq0 = jint(st, "/pushedSeq");
	pushed0 = jint(st, "/lastPass/pushed");
	json_decref(st);
	/* 6 ConfigMaps, a Secret, a template, a Deployment and the Namespace (and
	 * the cluster's DeviceClasses, which the source offers the target) */
	assert_true(pushed0 >= 10);
	pushed_sum = pushed0;
	passes = 1;

	/* A firing too close to tell "before" from "after": let it go by; with
	 * nothing changed in the namespace it pushes nothing of it. */
	if (next - wall_ms() < 15000) {
		wait_source_log(p, "event=pass_next ", 2, (int)(next - wall_ms()) + 30000);
		passes++;
		st = tu_e2e_source_status(&p->site);
		assert_int_equal(ns_pushed_after(p, seq0, NULL), 0);
		assert_true(jint(st, "/lastPass/unchanged") >= 10);
		pushed_sum += jint(st, "/lastPass/pushed");
		seq0 = jint(st, "/pushedSeq");
		next = jint(st, "/agent/nextPassMs");
		json_decref(st);
	}

	/* A change between firings: not on the target before the next one... */
	w0 = written(p);
	tu_kube_merge(p->src, "v1", "ConfigMap", p->src_ns, "cm-3", NULL,
		      "{\"data\":{\"i\":\"changed\"}}");
	while ((left = next - wall_ms()) > 1500) {
		json_t *o = tu_e2e_get(p->dst, "v1", "ConfigMap", p->dst_ns, "cm-3");

		if (!o || strcmp(dt_str(o, "/data/i") ? dt_str(o, "/data/i") : "", "3") != 0)
			fail_msg("cm-3 on the target changed %lld ms before the cron firing: %s",
				 left, o ? json_dumps(o, JSON_COMPACT) : "(gone)");
		json_decref(o);
		tu_msleep(left > 3000 ? 1000 : 300);
	}
	st = tu_e2e_source_status(&p->site);
	assert_int_equal(jint(st, "/pushedSeq"), seq0); /* nothing went out between firings */
	json_decref(st);

	/* ...and there after it. */
	wait_cm_value(p, "cm-3", "changed", (int)(next - wall_ms()) + 30000);
	assert_true(wall_ms() >= next);
	wait_source_log(p, "event=pass_next ", (size_t)passes + 1, 30000);
	passes++;

	/* That firing: one record of the namespace; its other objects, unchanged, cost none. */
	st = tu_e2e_source_status(&p->site);
	assert_true(jint(st, "/lastPass/startedMs") >= next);
	assert_int_equal(ns_pushed_after(p, seq0, NULL), 1);
	assert_int_equal(ns_pushed_after(p, seq0, "cm-3"), 1);
	assert_true(jint(st, "/lastPass/pushed") >= 1);
	assert_true(jint(st, "/lastPass/unchanged") >= 9);
	assert_int_equal(jint(st, "/pushedSeq"),
			 seq0 + jint(st, "/lastPass/pushed") + jint(st, "/lastPass/tombstoned"));
	pushed_sum += jint(st, "/lastPass/pushed");
	json_decref(st);
	assert_int_equal(
	    (long long)tu_e2e_metric(mport, "drasync_source_passes_total{result=\"ok\"}"), passes);
	assert_int_equal((long long)tu_e2e_metric(
			     mport, "drasync_source_pass_objects_total{outcome=\"pushed\"}"),
			 pushed_sum);

	/* On the target drasync wrote cm-3 and nothing else. */
	tu_msleep(1000);
	w1 = written(p);
	assert_int_equal(json_object_size(w1), json_object_size(w0));
	json_object_foreach (w0, key, v) {
		const char *now = json_string_value(json_object_get(w1, key));
		bool same = now && strcmp(now, json_string_value(v)) == 0;

		if (strcmp(key, "ConfigMap/cm-3") == 0 ? same : !same)
			fail_msg("after the cron firing %s is %s (was %s)", key, now ? now : "gone",
				 json_string_value(v));
	}
	json_decref(w0);
	json_decref(w1);
	tu_assert_same_objects(p->src, p->src_ns, p->dst, p->dst_ns, same_kinds, 10000);
	log = tu_site_source_run_log(&p->site);
	tu_e2e_assert_log("cron", log, "level=error", false);
	tu_e2e_assert_log("cron", log, "event=pass_overran", false);
	free(log);
	tu_site_source_sigterm(&p->site);
	tu_site_agent_sigterm(&p->site);
}

static void test_e2e_modes__watch_deletes_and_prunes(void **state)
{
	tu_pair *const p = &P;
	char d0[2000], d1[2000], path[1200], line[1000];
	long long w0, w1;
	struct tu_run r;
	json_t *o;
	char *log;

	(void)state;
	tu_pair_init(p, "e2ew", "DS_KUBECONFIG_V1", "DS_KUBECONFIG_V1BETA1", "prod-east",
		     "mode: migrate\n", NULL);
	create_source(p);
	/* Something of the target's own users beside what drasync manages. */
	tu_kube_create(p->dst, tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: "
					   "local-notes, namespace: %s}\ndata: {k: v}\n",
					   p->dst_ns));
	tu_pair_target_start(p);
	tu_pair_source_start(p, NULL);
	tu_assert_same_objects(p->src, p->src_ns, p->dst, p->dst_ns, same_kinds, 60000);

	/* Namespace mapping: the source's namespace is the target's NS-dr. That one was
	 * on the target before (its users' ConfigMap is in it): it keeps its own
	 * metadata, drasync writes into it and never on it (SPEC §5). */
	o = tu_e2e_wait_get(p->dst, "v1", "Namespace", NULL, p->dst_ns, 10000, &p->site);
	assert_null(dt_str(o, "/metadata/annotations/drasync.io~1source-cluster"));
	assert_null(dt_str(o, "/metadata/labels/app.kubernetes.io~1managed-by"));
	json_decref(o);
	assert_null(tu_e2e_get(p->dst, "v1", "Namespace", NULL, p->src_ns));

	/* Idle: watching an unchanged source writes nothing on the target. */
	w0 = target_writes(p, d0, sizeof(d0));
	tu_msleep(3000);
	w1 = target_writes(p, d1, sizeof(d1));
	if (w1 != w0)
		fail_msg("an idle watch wrote on the target:\nbefore %s\nafter  %s", d0, d1);

	/* A change, then deletes on the source, while it runs. */
	tu_kube_merge(p->src, "v1", "ConfigMap", p->src_ns, "cm-4", NULL,
		      "{\"data\":{\"i\":\"changed\"}}");
	wait_cm_value(p, "cm-4", "changed", 15000);
	tu_kube_delete(p->src, "v1", "ConfigMap", p->src_ns, "cm-0");
	tu_kube_delete(p->src, "apps/v1", "Deployment", p->src_ns, "web");
	tu_kube_delete(p->src, "resource.k8s.io/v1", "ResourceClaimTemplate", p->src_ns, "gpu");
	tu_e2e_wait_gone(p->dst, "v1", "ConfigMap", p->dst_ns, "cm-0", 15000, &p->site);
	tu_e2e_wait_gone(p->dst, "apps/v1", "Deployment", p->dst_ns, "web", 15000, &p->site);
	tu_e2e_wait_gone(p->dst, "resource.k8s.io/v1beta1", "ResourceClaimTemplate", p->dst_ns,
			 "gpu", 15000, &p->site);
	tu_assert_same_objects(p->src, p->src_ns, p->dst, p->dst_ns, same_kinds, 15000);

	/* Deleted while the source agent was down: a tombstone at its next pass. */
	tu_site_source_sigterm(&p->site);
	tu_kube_delete(p->src, "v1", "ConfigMap", p->src_ns, "cm-1");
	tu_pair_source_start(p, NULL);
	tu_e2e_wait_gone(p->dst, "v1", "ConfigMap", p->dst_ns, "cm-1", 20000, &p->site);
	wait_source_log(p, "tombstoned=1 ", 1, 10000);

	/* Deleted while it was down, its state lost: the fresh agent's first
	 * pass is a snapshot, and the target prunes what it no longer holds. */
	tu_site_source_sigterm(&p->site);
	tu_kube_delete(p->src, "v1", "ConfigMap", p->src_ns, "cm-2");
	snprintf(path, sizeof(path), "%s/source-state", p->site.dir);
	tu_run(&r, NULL, (const char *[]){"/bin/rm", "-rf", path, NULL});
	assert_int_equal(r.status, 0);
	tu_run_dispose(&r);
	tu_pair_source_start(p, NULL);
	tu_e2e_wait_gone(p->dst, "v1", "ConfigMap", p->dst_ns, "cm-2", 30000, &p->site);
	tu_assert_same_objects(p->src, p->src_ns, p->dst, p->dst_ns, same_kinds, 15000);
	log = tu_site_run_log(&p->site);
	/* The importer says it pruned it (the source sent no tombstone). */
	snprintf(line, sizeof(line), "object=core/ConfigMap/%s/cm-2 target=- ", p->src_ns);
	last_line_with(log, line, line, sizeof(line));
	tu_e2e_assert_log("the prune's line", line,
			  "state=deleted reason=\"pruned: not in the snapshot that ended at seq ",
			  true);
	free(log);
	log = tu_site_source_run_log(&p->site);
	tu_e2e_assert_log("source log (fresh state)", log, "tombstoned=0 ", true);
	free(log);

	/* The user's own ConfigMap was never touched. */
	o = tu_e2e_get(p->dst, "v1", "ConfigMap", p->dst_ns, "local-notes");
	assert_non_null(o);
	assert_null(dt_get(o, "/metadata/labels/app.kubernetes.io~1managed-by"));
	json_decref(o);
	tu_site_source_sigterm(&p->site);
	tu_site_agent_sigterm(&p->site);
}

static int teardown(void **state)
{
	(void)state;
	if (P.src)
		tu_pair_dispose(&P);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(
		test_e2e_modes__once_delivers_and_a_second_pass_writes_nothing, teardown),
	    cmocka_unit_test_teardown(test_e2e_modes__interval_passes_write_only_changes, teardown),
	    cmocka_unit_test_teardown(test_e2e_modes__cron_fires_and_carries_only_changes,
				      teardown),
	    cmocka_unit_test_teardown(test_e2e_modes__watch_deletes_and_prunes, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
