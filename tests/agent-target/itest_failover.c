/*
 * Disaster recovery as an operator runs it (SPEC §5) on the real v1 cluster:
 * drasync-target run in standby mode, fed over a real link (tu_site: outbox +
 * ds_sender) with every kind of workload, each using the GPU claim template
 * of a dra-example-driver fixture; then drasync-target failover, failback
 * and drill as processes, with run still running.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dstest.h"
#include "testutil.h"
#include "tu_kube.h"
#include "tu_proxy.h"
#include "tu_site.h"

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SOURCE "prod-east"
#define SRC_NS "ml-team"

static struct {
	tu_site s;
	ds_kube *k;
	char *dst; /* the target namespace (SRC_NS mapped there) */
	json_t *podspec;
} F;

static int setup(void **state)
{
	char extra[800];
	json_t *docs;

	(void)state;
	memset(&F, 0, sizeof(F));
	tu_site_init(&F.s, "failover", tu_env("DS_KUBECONFIG_V1"), SOURCE);
	F.k = tu_kube_connect(F.s.kubeconfig);
	F.dst = tu_kube_new_namespace(F.k, "itfo", "");
	snprintf(extra, sizeof(extra),
		 "mode: standby\n"
		 "namespaceMappings: {%s: %s}\n"
		 "dra:\n  deviceClassMappings: [{from: gpu.nvidia.com, to: gpu.example.com}]\n",
		 SRC_NS, F.dst);
	tu_site_write_config(&F.s, extra);
	docs = dt_load_file(tu_fixture("dra-example-driver/v1/basic-resourceclaimtemplate.yaml"));
	F.podspec = json_deep_copy(json_object_get(dt_find(docs, "Pod", "pod0"), "spec"));
	json_decref(docs);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	tu_site_dispose(&F.s);
	tu_kube_drop_namespace(F.k, F.dst);
	ds_kube_free(F.k);
	json_decref(F.podspec);
	memset(&F, 0, sizeof(F));
	return 0;
}

/* ---- the source's objects ------------------------------------------------------ */

static json_t *meta(const char *kind, const char *name)
{
	char uid[200];

	snprintf(uid, sizeof(uid), "uid-%s-%s", kind, name);
	return json_pack("{s:s, s:s, s:s}", "name", name, "namespace", SRC_NS, "uid", uid);
}

/* A pod template of the fixture's pod (its GPU from the claim template). */
static json_t *pod_template(const char *app, bool run_once)
{
	json_t *spec = json_deep_copy(F.podspec);

	if (run_once)
		json_object_set_new(spec, "restartPolicy", json_string("Never"));
	return json_pack("{s:{s:{s:s}}, s:o}", "metadata", "labels", "app", app, "spec", spec);
}

static json_t *workload(const char *api, const char *kind, const char *name, int replicas)
{
	json_t *o = json_pack("{s:s, s:s, s:o}", "apiVersion", api, "kind", kind, "metadata",
			      meta(kind, name));
	json_t *spec = json_object();

	if (strcmp(kind, "Pod") == 0) {
		json_decref(spec);
		json_object_set_new(o, "spec", json_deep_copy(F.podspec));
		return o;
	}
	if (strcmp(kind, "CronJob") == 0) {
		json_object_set_new(spec, "schedule", json_string("0 0 1 1 *"));
		json_object_set_new(spec, "suspend", json_false());
		json_object_set_new(
		    spec, "jobTemplate",
		    json_pack("{s:{s:o}}", "spec", "template", pod_template(name, true)));
	} else if (strcmp(kind, "Job") == 0) {
		json_object_set_new(spec, "template", pod_template(name, true));
	} else {
		json_object_set_new(spec, "selector",
				    json_pack("{s:{s:s}}", "matchLabels", "app", name));
		json_object_set_new(spec, "template", pod_template(name, false));
		if (replicas >= 0)
			json_object_set_new(spec, "replicas", json_integer(replicas));
		if (strcmp(kind, "StatefulSet") == 0)
			json_object_set_new(spec, "serviceName", json_string(name));
	}
	json_object_set_new(o, "spec", spec);
	return o;
}

/* The claim template and every workload (pod_only: the template and the Pod). */
static uint64_t push(int deployment_replicas, bool pod_only)
{
	json_t *docs =
	    dt_load_file(tu_fixture("dra-example-driver/v1/basic-resourceclaimtemplate.yaml"));
	json_t *tmpl = json_deep_copy(dt_find(docs, "ResourceClaimTemplate", "single-gpu"));
	json_t *objs[8];
	size_t n = 0;

	json_decref(docs);
	json_object_set_new(json_object_get(tmpl, "metadata"), "namespace", json_string(SRC_NS));
	json_object_set_new(json_object_get(tmpl, "metadata"), "uid", json_string("uid-template"));
	objs[n++] = tmpl;
	if (pod_only) {
		objs[n++] = workload("v1", "Pod", "p", -1);
		return tu_site_push(&F.s, objs, n);
	}
	objs[n++] = workload("apps/v1", "Deployment", "trainer", deployment_replicas);
	objs[n++] = workload("apps/v1", "StatefulSet", "db", 1);
	objs[n++] = workload("apps/v1", "ReplicaSet", "rs", 1);
	objs[n++] = workload("apps/v1", "DaemonSet", "agent", -1);
	objs[n++] = workload("batch/v1", "CronJob", "nightly", -1);
	objs[n++] = workload("batch/v1", "Job", "batch", -1);
	objs[n++] = workload("v1", "Pod", "p", -1);
	return tu_site_push(&F.s, objs, n);
}

/* ---- the target ------------------------------------------------------------------ */

/* The object on the target, NULL when absent or being deleted. Caller decrefs. */
static json_t *get(const char *api, const char *kind, const char *name)
{
	struct ds_kube_resource r = tu_kube_resource(F.k, api, kind);
	ds_kube_error ke;
	json_t *o = NULL;

	if (ds_kube_get(F.k, &r, F.dst, name, NULL, &o, &ke) < 0)
		return NULL;
	if (dt_get(o, "/metadata/deletionTimestamp")) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static long long int_at(const char *api, const char *kind, const char *name, const char *ptr)
{
	json_t *o = get(api, kind, name);
	json_t *v = o ? dt_get(o, ptr) : NULL;
	long long out = json_is_integer(v) ? (long long)json_integer_value(v) : -1;

	json_decref(o);
	return out;
}

/* The standby form of every workload, the Pod and the Job absent. */
static bool standby_form(char *why, size_t size)
{
	json_t *ds = get("apps/v1", "DaemonSet", "agent");
	json_t *cj = get("batch/v1", "CronJob", "nightly");
	json_t *pod = get("v1", "Pod", "p"), *job = get("batch/v1", "Job", "batch");
	bool ok = false;

	why[0] = '\0';
	if (int_at("apps/v1", "Deployment", "trainer", "/spec/replicas") != 0)
		snprintf(why, size, "Deployment trainer has replicas %lld",
			 int_at("apps/v1", "Deployment", "trainer", "/spec/replicas"));
	else if (int_at("apps/v1", "StatefulSet", "db", "/spec/replicas") != 0)
		snprintf(why, size, "StatefulSet db is not at 0");
	else if (int_at("apps/v1", "ReplicaSet", "rs", "/spec/replicas") != 0)
		snprintf(why, size, "ReplicaSet rs is not at 0");
	else if (!ds || !dt_str(ds, "/spec/template/spec/nodeSelector/drasync.io~1standby"))
		snprintf(why, size, "DaemonSet agent is %s", ds ? "not parked" : "missing");
	else if (!cj || !json_is_true(dt_get(cj, "/spec/suspend")))
		snprintf(why, size, "CronJob nightly is %s", cj ? "not suspended" : "missing");
	else if (pod || job)
		snprintf(why, size, "%s is on the target", pod ? "Pod p" : "Job batch");
	else
		ok = true;
	json_decref(ds);
	json_decref(cj);
	json_decref(pod);
	json_decref(job);
	return ok;
}

static void wait_standby(int timeout_ms)
{
	long long end = tu_now_ms() + timeout_ms;
	char why[300];

	while (!standby_form(why, sizeof(why))) {
		if (tu_now_ms() > end) {
			char *log = tu_site_run_log(&F.s);
			size_t len = strlen(log);

			fail_msg("not in standby form after %d ms: %s\n...%s", timeout_ms, why,
				 len > 6000 ? log + len - 6000 : log);
		}
		tu_msleep(300);
	}
}

static void dr(struct tu_run *r, const char *verb, bool force)
{
	tu_run(r, NULL,
	       (const char *[]){tu_env("DS_TARGET_BIN"), verb, "--config", F.s.cfg, "--kubeconfig",
				F.s.kubeconfig, "--timeout", "60s", force ? "--force" : NULL,
				NULL});
}

/* A failing command's output and the agent's log. */
static void fail_run(const char *what, const struct tu_run *r)
{
	char *log = tu_site_run_log(&F.s);
	size_t len = strlen(log);

	fail_msg("%s: exit %d\nstdout:\n%s\nstderr:\n%s\nrun's log:\n...%s", what, r->status,
		 r->out, r->err, len > 4000 ? log + len - 4000 : log);
}

static void assert_line(const struct tu_run *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void assert_line(const struct tu_run *r, const char *fmt, ...)
{
	char want[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(want, sizeof(want), fmt, ap);
	va_end(ap);
	if (!strstr(r->out, want))
		fail_msg("no line '%s' in the output:\n%s\nstderr:\n%s", want, r->out, r->err);
}

static json_t *status_json(void)
{
	struct tu_run r;
	json_error_t jerr;
	json_t *o;

	tu_run(&r, NULL,
	       (const char *[]){tu_env("DS_TARGET_BIN"), "status", "--config", F.s.cfg, "-o",
				"json", NULL});
	o = json_loads(r.out, 0, &jerr);
	if (!o)
		fail_msg("status -o json: %s\n%s%s", jerr.text, r.out, r.err);
	tu_run_dispose(&r);
	return o;
}

/* The status entry of the target namespace. Borrowed from st. */
static json_t *ns_status(json_t *st)
{
	json_t *n;
	size_t i;

	json_array_foreach (json_object_get(st, "namespaces"), i, n)
		if (strcmp(json_string_value(json_object_get(n, "name")), F.dst) == 0)
			return n;
	fail_msg("status has no namespace %s", F.dst);
	return NULL;
}

static void test_itest_failover__standby_failover_update_failback(void **state)
{
	struct tu_run r;
	json_t *st, *o;
	long long end;
	char deploy_hash[80], sts_hash[80];

	(void)state;
	tu_site_agent_start(&F.s);
	tu_site_sender_start(&F.s);
	tu_site_wait_acked(&F.s, push(2, false), 30000);

	/* Standby: scaled to 0, suspended, parked; the Pod and the Job held. */
	wait_standby(60000);
	o = get("apps/v1", "Deployment", "trainer");
	assert_string_equal(dt_str(o, "/metadata/annotations/drasync.io~1replicas"), "2");
	assert_string_equal(dt_str(o, "/spec/template/spec/resourceClaims/0/"
				      "resourceClaimTemplateName"),
			    "single-gpu");
	assert_non_null(dt_str(o, "/metadata/annotations/drasync.io~1applied-hash"));
	snprintf(deploy_hash, sizeof(deploy_hash), "%s",
		 dt_str(o, "/metadata/annotations/drasync.io~1applied-hash"));
	json_decref(o);
	o = get("apps/v1", "StatefulSet", "db");
	assert_non_null(dt_str(o, "/metadata/annotations/drasync.io~1applied-hash"));
	snprintf(sts_hash, sizeof(sts_hash), "%s",
		 dt_str(o, "/metadata/annotations/drasync.io~1applied-hash"));
	json_decref(o);
	end = tu_now_ms() + 30000;
	while (tu_site_ledger_int(&F.s, "SELECT count(*) FROM object_state WHERE state = 'held'") <
	       2) {
		if (tu_now_ms() > end)
			fail_msg("the Pod and the Job are not held in the ledger");
		tu_msleep(200);
	}
	st = status_json();
	assert_int_equal(
	    json_integer_value(json_object_get(json_object_get(st, "objects"), "held")), 2);
	assert_string_equal(json_string_value(json_object_get(ns_status(st), "mode")), "standby");
	assert_string_equal(json_string_value(json_object_get(ns_status(st), "changedBy")),
			    "config");
	assert_int_equal(json_integer_value(json_object_get(ns_status(st), "held")), 2);
	json_decref(st);

	/* Split brain: the source is still connected; refused, nothing changed. */
	end = tu_now_ms() + 10000;
	while (tu_site_ledger_int(&F.s, "SELECT count(*) FROM presence WHERE source = '" SOURCE
					"' AND ended_at IS NULL") != 1) {
		if (tu_now_ms() > end)
			fail_msg("no open presence row for the source");
		tu_msleep(100);
	}
	dr(&r, "failover", false);
	if (r.status != 1 || !strstr(r.err, "source " SOURCE " is still connected") ||
	    !strstr(r.err, "--force") || !strstr(r.err, "Nothing was changed"))
		fail_run("failover while the source is connected", &r);
	tu_run_dispose(&r);
	assert_int_equal(int_at("apps/v1", "Deployment", "trainer", "/spec/replicas"), 0);
	assert_int_equal(tu_site_ledger_int(&F.s, "SELECT count(*) FROM namespace_modes"), 0);

	/* --force: everything active, said line by line. */
	dr(&r, "failover", true);
	if (r.status != 0)
		fail_run("failover --force", &r);
	assert_line(&r, "namespace %s: standby -> active", F.dst);
	assert_line(&r, "Deployment %s/trainer: replicas 0 -> 2", F.dst);
	assert_line(&r, "StatefulSet %s/db: replicas 0 -> 1", F.dst);
	assert_line(&r, "ReplicaSet %s/rs: replicas 0 -> 1", F.dst);
	assert_line(&r, "CronJob %s/nightly: suspend true -> false", F.dst);
	assert_line(&r, "DaemonSet %s/agent: unparked", F.dst);
	assert_line(&r, "Pod %s/p: created (was held)", F.dst);
	assert_line(&r, "Job %s/batch: created (was held)", F.dst);
	assert_line(&r, "failover: 1 namespace active, 7 workloads changed");
	assert_non_null(strstr(r.err, "warning: source " SOURCE " is still connected"));
	tu_run_dispose(&r);
	assert_int_equal(int_at("apps/v1", "Deployment", "trainer", "/spec/replicas"), 2);
	assert_int_equal(int_at("apps/v1", "StatefulSet", "db", "/spec/replicas"), 1);
	o = get("apps/v1", "Deployment", "trainer");
	assert_null(dt_get(o, "/metadata/annotations/drasync.io~1replicas"));
	/* A Deployment's applied-hash leaves the parking out: the deployment
	 * controller copies its annotations onto the ReplicaSet, and one that
	 * changed would cost a ReplicaSet write before the scale-up. Other kinds
	 * carry the hash of the form applied. */
	assert_string_equal(dt_str(o, "/metadata/annotations/drasync.io~1applied-hash"),
			    deploy_hash);
	json_decref(o);
	o = get("apps/v1", "StatefulSet", "db");
	assert_string_not_equal(dt_str(o, "/metadata/annotations/drasync.io~1applied-hash"),
				sts_hash);
	json_decref(o);
	o = get("apps/v1", "DaemonSet", "agent");
	assert_null(dt_get(o, "/spec/template/spec/nodeSelector/drasync.io~1standby"));
	json_decref(o);
	o = get("batch/v1", "CronJob", "nightly");
	assert_false(json_is_true(dt_get(o, "/spec/suspend")));
	json_decref(o);
	o = get("v1", "Pod", "p");
	assert_non_null(o);
	assert_string_equal(dt_str(o, "/metadata/annotations/drasync.io~1source-uid"), "uid-Pod-p");
	json_decref(o);
	o = get("batch/v1", "Job", "batch");
	assert_non_null(o);
	json_decref(o);
	st = status_json();
	assert_string_equal(json_string_value(json_object_get(ns_status(st), "mode")), "active");
	assert_string_equal(json_string_value(json_object_get(ns_status(st), "changedBy")),
			    "failover");
	assert_true(json_integer_value(json_object_get(ns_status(st), "since")) > 0);
	assert_int_equal(json_integer_value(json_object_get(ns_status(st), "held")), 0);
	json_decref(st);

	/* The running importer keeps it active: an update arrives in active form. */
	tu_site_wait_acked(&F.s, push(3, false), 30000);
	end = tu_now_ms() + 30000;
	while (int_at("apps/v1", "Deployment", "trainer", "/spec/replicas") != 3) {
		if (tu_now_ms() > end) {
			char *log = tu_site_run_log(&F.s);
			fail_msg("the update was not applied active (replicas %lld):\n%s",
				 int_at("apps/v1", "Deployment", "trainer", "/spec/replicas"), log);
		}
		tu_msleep(200);
	}
	tu_msleep(1500); /* a pass or two more: nothing puts standby back */
	assert_int_equal(int_at("apps/v1", "Deployment", "trainer", "/spec/replicas"), 3);
	o = get("apps/v1", "Deployment", "trainer");
	assert_null(dt_get(o, "/metadata/annotations/drasync.io~1replicas"));
	json_decref(o);

	/* Again: nothing to change, and it says so. */
	dr(&r, "failover", true);
	if (r.status != 0 || !strstr(r.out, "failover: nothing to change"))
		fail_run("a second failover", &r);
	assert_null(strstr(r.out, "->"));
	tu_run_dispose(&r);

	/* Failback: standby again, the Pod and the Job drasync created deleted. */
	dr(&r, "failback", false);
	if (r.status != 0)
		fail_run("failback", &r);
	assert_line(&r, "namespace %s: active -> standby", F.dst);
	assert_line(&r, "Deployment %s/trainer: replicas 3 -> 0", F.dst);
	assert_line(&r, "StatefulSet %s/db: replicas 1 -> 0", F.dst);
	assert_line(&r, "CronJob %s/nightly: suspend false -> true", F.dst);
	assert_line(&r, "DaemonSet %s/agent: parked", F.dst);
	assert_line(&r, "Pod %s/p: deleted (held in the ledger again)", F.dst);
	assert_line(&r, "Job %s/batch: deleted (held in the ledger again)", F.dst);
	tu_run_dispose(&r);
	wait_standby(30000);
	o = get("apps/v1", "Deployment", "trainer");
	assert_string_equal(dt_str(o, "/metadata/annotations/drasync.io~1replicas"), "3");
	json_decref(o);
	/* Held again, and the reason says they were taken off the target (deleted by the
	 * command, or by the running importer, which then found them gone). */
	assert_int_equal(
	    tu_site_ledger_int(&F.s, "SELECT count(*) FROM object_state WHERE state = 'held' AND"
				     " reason LIKE '%from the target%'"),
	    2);
	st = status_json();
	assert_string_equal(json_string_value(json_object_get(ns_status(st), "mode")), "standby");
	assert_string_equal(json_string_value(json_object_get(ns_status(st), "changedBy")),
			    "failback");
	assert_int_equal(json_integer_value(json_object_get(ns_status(st), "held")), 2);
	json_decref(st);

	dr(&r, "failback", false);
	if (r.status != 0 || !strstr(r.out, "failback: nothing to change"))
		fail_run("a second failback", &r);
	tu_run_dispose(&r);

	/*
	 * Drill the standby, run still running: a copy of all seven in a scratch
	 * namespace, each verified, removed after; the standby untouched.
	 */
	tu_kube_wait_devices_free(F.k, 180000);
	tu_run(&r, NULL,
	       (const char *[]){tu_env("DS_TARGET_BIN"), "drill", "--config", F.s.cfg,
				"--kubeconfig", F.s.kubeconfig, "--namespace", F.dst, "--timeout",
				"120s", "--cleanup", NULL});
	if (r.status != 0)
		fail_run("drill", &r);
	assert_line(&r, "drill of %s into %s-drill: VERIFIED", F.dst, F.dst);
	assert_line(&r, "workloads: 7 of 7 verified");
	assert_line(&r, "Deployment %s-drill/trainer: verified in ", F.dst);
	assert_line(&r, "DaemonSet %s-drill/agent: verified in ", F.dst);
	assert_line(&r, "Pod %s-drill/p: verified in ", F.dst);
	assert_line(&r, "Job %s-drill/batch: verified in ", F.dst);
	tu_run_dispose(&r);
	wait_standby(10000);
	assert_int_equal(
	    tu_site_ledger_int(&F.s, "SELECT count(*) FROM object_state WHERE state = 'held'"), 2);
}

static void wait_held(long long want)
{
	long long end = tu_now_ms() + 30000;

	while (tu_site_ledger_int(&F.s, "SELECT count(*) FROM object_state WHERE state = 'held'") !=
	       want) {
		if (tu_now_ms() > end)
			fail_msg("not %lld objects held in the ledger", want);
		tu_msleep(200);
	}
}

/*
 * Once the source's session is gone, failover needs no --force; failback
 * deletes only what drasync created for that source object: a Pod whose
 * source uid on the target is another's is kept, and said so.
 */
static void test_itest_failover__source_gone_then_failback_keeps_what_is_not_ours(void **state)
{
	struct tu_run r;
	json_t *o;
	long long end;

	(void)state;
	tu_site_agent_start(&F.s);
	tu_site_sender_start(&F.s);
	tu_site_wait_acked(&F.s, push(0, true), 30000);
	wait_held(1);
	tu_site_sender_stop(&F.s);
	end = tu_now_ms() + 15000;
	while (tu_site_ledger_int(&F.s, "SELECT count(*) FROM presence WHERE ended_at IS NOT NULL"
					" AND end_reason = 'connection closed'") != 1) {
		if (tu_now_ms() > end)
			fail_msg("the source's presence did not end after its sender stopped");
		tu_msleep(100);
	}

	dr(&r, "failover", false);
	if (r.status != 0 || strstr(r.err, "still connected"))
		fail_run("failover once the source is gone", &r);
	assert_line(&r, "Pod %s/p: created (was held)", F.dst);
	tu_run_dispose(&r);

	/* Someone on the target made the Pod another object's. */
	tu_kube_merge(F.k, "v1", "Pod", F.dst, "p", NULL,
		      "{\"metadata\":{\"annotations\":{\"drasync.io/source-uid\":\"not-ours\"}}}");
	dr(&r, "failback", false);
	if (r.status != 1)
		fail_run("failback with a Pod that is not drasync's", &r);
	assert_line(&r, "Pod %s/p: KEPT on the target: ", F.dst);
	assert_non_null(strstr(r.out, "not deleted"));
	assert_non_null(strstr(r.out, "not-ours"));
	assert_null(strstr(r.out, "deleted (held in the ledger again)"));
	tu_run_dispose(&r);
	o = get("v1", "Pod", "p");
	assert_non_null(o);
	json_decref(o);
}

/* The claim template, the Pod and the Job (held) and n Deployments "d-NN" of 1 replica
 * without claims (their pods need no device). */
static uint64_t push_many(int n)
{
	json_t *docs =
	    dt_load_file(tu_fixture("dra-example-driver/v1/basic-resourceclaimtemplate.yaml"));
	json_t *tmpl = json_deep_copy(dt_find(docs, "ResourceClaimTemplate", "single-gpu"));
	json_t *objs[64];
	size_t k = 0;
	char name[32];

	assert_true(n + 3 <= 64);
	json_decref(docs);
	json_object_set_new(json_object_get(tmpl, "metadata"), "namespace", json_string(SRC_NS));
	json_object_set_new(json_object_get(tmpl, "metadata"), "uid", json_string("uid-template"));
	objs[k++] = tmpl;
	objs[k++] = workload("v1", "Pod", "p", -1);
	objs[k++] = workload("batch/v1", "Job", "batch", -1);
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "d-%02d", i);
		objs[k] = workload("apps/v1", "Deployment", name, 1);
		json_object_set_new(json_object_get(json_object_get(objs[k], "spec"), "template"),
				    "spec",
				    json_pack("{s:[{s:s, s:s}]}", "containers", "name", "c",
					      "image", "registry.k8s.io/pause:3.10"));
		k++;
	}
	return tu_site_push(&F.s, objs, k);
}

/* Deployments d-NN of the target namespace at their 1 replica. */
static int deployments_active(void)
{
	struct ds_kube_resource r = tu_kube_resource(F.k, "apps/v1", "Deployment");
	struct ds_kube_list_opts lo = {0};
	json_t *list = NULL, *item;
	ds_kube_error ke;
	size_t i;
	int n = 0;

	TU_KUBE_CHECK(ds_kube_list(F.k, &r, F.dst, &lo, &list, NULL, &ke), ke);
	json_array_foreach (json_object_get(list, "items"), i, item) {
		json_t *rep = dt_get(item, "/spec/replicas");

		n += json_is_integer(rep) && json_integer_value(rep) == 1 &&
		     strncmp(dt_str(item, "/metadata/name"), "d-", 2) == 0;
	}
	json_decref(list);
	return n;
}

/*
 * SIGKILL during failover (issue 15): failover killed once it has activated
 * some of the workloads, not all; failover run again finishes the job (every
 * workload active, the held Pod and Job created, the namespace active) and a
 * third run changes nothing.
 */
static void test_itest_failover__sigkill_during_failover_then_again_finishes(void **state)
{
	enum { N = 40 };
	char log[1200], *text;
	struct tu_run r;
	tu_proxy *api;
	json_t *st, *o;
	long long end, t0;
	int pid, code, at_kill = 0;

	(void)state;
	tu_site_agent_start(&F.s);
	tu_site_sender_start(&F.s);
	tu_site_wait_acked(&F.s, push_many(N), 30000);
	wait_held(2);
	end = tu_now_ms() + 60000;
	while (tu_site_ledger_int(&F.s, "SELECT count(*) FROM object_state WHERE kind = "
					"'Deployment' AND state = 'applied'") < N) {
		if (tu_now_ms() > end)
			fail_msg("the %d Deployments were not applied in standby in 60 s", N);
		tu_msleep(200);
	}
	tu_site_sender_stop(&F.s);

	/* Through the fault proxy, every second write answered 429 Retry-After 1:
	 * the run takes some 20 s, however fast the API server, and the kill
	 * lands midway. */
	api = tu_proxy_start_api(F.s.kubeconfig, F.s.dir);
	tu_proxy_faults(api, "429", 0.5, 1, NULL);
	snprintf(log, sizeof(log), "%s/failover-killed.log", F.s.dir);
	tu_write_file(log, "");
	t0 = tu_now_ms();
	pid = tu_spawn(log, (const char *[]){tu_env("DS_TARGET_BIN"), "failover", "--config",
					     F.s.cfg, "--kubeconfig", tu_proxy_kubeconfig(api),
					     "--timeout", "60s", "--force", NULL});
	/* Killed with some workloads active, not all. */
	for (end = tu_now_ms() + 60000;;) {
		at_kill = deployments_active();
		if (at_kill > 0)
			break;
		if (tu_now_ms() > end)
			fail_msg("failover activated nothing in 60 s");
		tu_msleep(5);
	}
	kill(pid, SIGKILL);
	code = tu_wait_exit(pid, 10000);
	tu_proxy_stop(api);
	text = tu_read_file(log, NULL);
	at_kill = deployments_active();
	fprintf(stderr,
		"failover: SIGKILL after %lld ms with %d of %d Deployments active (exit %d)\n",
		tu_now_ms() - t0, at_kill, N, code);
	if (code != 128 + SIGKILL || at_kill >= N)
		fail_msg("failover was not killed midway (exit %d, %d of %d active):\n%s", code,
			 at_kill, N, text);
	free(text);

	/* Again: it finishes what the killed one left. */
	dr(&r, "failover", true);
	if (r.status != 0)
		fail_run("failover after a killed failover", &r);
	tu_run_dispose(&r);
	assert_int_equal(deployments_active(), N);
	o = get("v1", "Pod", "p");
	assert_non_null(o);
	json_decref(o);
	o = get("batch/v1", "Job", "batch");
	assert_non_null(o);
	json_decref(o);
	st = status_json();
	assert_string_equal(json_string_value(json_object_get(ns_status(st), "mode")), "active");
	assert_int_equal(json_integer_value(json_object_get(ns_status(st), "held")), 0);
	json_decref(st);

	/* A third run has nothing left to do. */
	dr(&r, "failover", true);
	if (r.status != 0)
		fail_run("failover once more", &r);
	if (strstr(r.out, "replicas 0 -> ") || strstr(r.out, "created (was held)"))
		fail_run("a failover after a finished one changed workloads", &r);
	tu_run_dispose(&r);
	fprintf(stderr, "SOAK test=failover_sigkill deployments=%d active_at_kill=%d\n", N,
		at_kill);
}

int main(int argc, char **argv)
{
	if (argc > 1 && argv[1][0])
		cmocka_set_test_filter(argv[1]);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_itest_failover__standby_failover_update_failback,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(
		test_itest_failover__source_gone_then_failback_keeps_what_is_not_ours, setup,
		teardown),
	    cmocka_unit_test_setup_teardown(
		test_itest_failover__sigkill_during_failover_then_again_finishes, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
