/*
 * Disaster recovery and several sites, as users run the pair: both agents as
 * processes on the shipped RBAC's tokens (v1 source cluster -> v1beta1
 * target cluster).
 *   - standby -> failover -> failback -> drill: drasync-target run in
 *     standby holds a workload set (a Deployment of 2, a CronJob, a Pod and
 *     a Job, each with a claim from a template whose class is mapped) in its
 *     standby form; the source site goes down; `failover` activates it (pods
 *     Running on the target's devices), `verify` says so; the source comes
 *     back and `failback` returns to standby; a `drill` with both agents
 *     running verifies a copy in NS-drill and leaves the standby untouched;
 *     `status` shows each step.
 *   - two sources into one target: two drasync-source processes (two
 *     namespaces of the v1 cluster acting as two sites, each its own source
 *     name and key in authorized_sources) feed one drasync-target; each
 *     lands in its own mapped namespace, annotated with its source; a
 *     snapshot of one (its state lost) prunes only its own objects.
 *   - two sources writing one object: two namespaces (two sites) mapped to
 *     one target namespace, each holding a ConfigMap of the same name. The
 *     first source's lands; the second's is refused as a conflict, with the
 *     reason in drasync-target status, its log and
 *     drasync_target_refused_total, and in the second source's status and
 *     log; the first's object is untouched, also by the second's changes
 *     and delete, and keeps following the first source.
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

#define DRIVER "gpu.example.com"
#define DST_API "resource.k8s.io/v1beta1"

static tu_pair P; /* disposed by teardown(), after a failure too */

/* ---- standby, failover, failback, drill ---------------------------------------- */

static void create_workloads(tu_pair *p)
{
	const char *ns = p->src_ns;
	char spec[4][400];
	int indent[4] = {2, 6, 10, 6};

	for (size_t i = 0; i < 4; i++) {
		int n = snprintf(spec[i], sizeof(spec[i]), "%*s", indent[i], "");

		assert_true(n >= 0);
		/* resourceClaims and containers at the pod spec's indentation */
		snprintf(spec[i] + n, sizeof(spec[i]) - (size_t)n,
			 "resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]\n"
			 "%*scontainers: [{name: main, image: registry.k8s.io/pause:3.10, "
			 "resources: {claims: [{name: gpu}]}}]\n",
			 indent[i], "");
	}
	tu_kube_create(p->src, tu_kube_doc("apiVersion: resource.k8s.io/v1\nkind: "
					   "ResourceClaimTemplate\nmetadata: {name: one-gpu, "
					   "namespace: %s}\nspec: {spec: {devices: {requests: "
					   "[{name: gpu, exactly: {deviceClassName: "
					   "gpu.nvidia.com}}]}}}\n",
					   ns));
	tu_kube_create(p->src, tu_kube_doc("apiVersion: v1\nkind: Pod\nmetadata: {name: p, "
					   "namespace: %s, labels: {app: p}}\nspec:\n%s",
					   ns, spec[0]));
	tu_kube_create(p->src, tu_kube_doc("apiVersion: apps/v1\nkind: Deployment\nmetadata: "
					   "{name: trainer, namespace: %s}\nspec:\n  replicas: 2\n"
					   "  selector: {matchLabels: {app: trainer}}\n"
					   "  template:\n    metadata: {labels: {app: trainer}}\n"
					   "    spec:\n%s",
					   ns, spec[1]));
	tu_kube_create(p->src,
		       tu_kube_doc("apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: "
				   "nightly, namespace: %s}\nspec:\n  schedule: '0 0 1 1 "
				   "*'\n  jobTemplate:\n    spec:\n      template:\n"
				   "        metadata: {labels: {app: nightly}}\n        spec:\n"
				   "          restartPolicy: Never\n%s",
				   ns, spec[2]));
	tu_kube_create(p->src, tu_kube_doc("apiVersion: batch/v1\nkind: Job\nmetadata: {name: "
					   "batch, namespace: %s}\nspec:\n  template:\n"
					   "    metadata: {labels: {app: batch}}\n    spec:\n"
					   "      restartPolicy: Never\n%s",
					   ns, spec[3]));
}

static long long int_at(tu_pair *p, const char *ns, const char *api, const char *kind,
			const char *name, const char *ptr)
{
	json_t *o = tu_e2e_get(p->dst, api, kind, ns, name);
	json_t *v = o ? dt_get(o, ptr) : NULL;
	long long out = json_is_integer(v) ? (long long)json_integer_value(v) : -1;

	json_decref(o);
	return out;
}

static bool suspended(tu_pair *p, const char *ns)
{
	json_t *o = tu_e2e_get(p->dst, "batch/v1", "CronJob", ns, "nightly");
	bool s = o && json_is_true(dt_get(o, "/spec/suspend"));

	json_decref(o);
	return s;
}

/* A drasync-target command that must exit 0; its output (caller frees). */
static char *dr(tu_pair *p, const char *const args[])
{
	struct tu_run r;
	char *out;

	tu_pair_target_cmd(p, &r, args);
	if (r.status != 0) {
		char *log = tu_site_run_log(&p->site);
		size_t len = strlen(log);

		fail_msg("drasync-target %s: exit %d\nstdout:\n%s\nstderr:\n%s\nrun's log:\n...%s",
			 args[0], r.status, r.out, r.err, len > 4000 ? log + len - 4000 : log);
	}
	assert_true(asprintf(&out, "%s%s", r.out, r.err) > 0);
	tu_run_dispose(&r);
	return out;
}

static void assert_out(const char *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void assert_out(const char *out, const char *fmt, ...)
{
	char want[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(want, sizeof(want), fmt, ap);
	va_end(ap);
	if (!strstr(out, want))
		fail_msg("no '%s' in:\n%s", want, out);
}

/* The status entry of namespace ns (borrowed from st). */
static json_t *ns_status(json_t *st, const char *ns)
{
	json_t *n;
	size_t i;

	json_array_foreach (json_object_get(st, "namespaces"), i, n)
		if (strcmp(json_string_value(json_object_get(n, "name")), ns) == 0)
			return n;
	fail_msg("status has no namespace %s: %s", ns, json_dumps(st, JSON_INDENT(1)));
	return NULL;
}

static void assert_mode(tu_pair *p, const char *mode, const char *by)
{
	json_t *st = tu_pair_status(p), *n = ns_status(st, p->dst_ns);

	assert_string_equal(dt_str(n, "/mode"), mode);
	assert_string_equal(dt_str(n, "/changedBy"), by);
	json_decref(st);
}

/* The workloads run in ns, every claim allocated on the target's devices on its node. */
static void assert_running(tu_pair *p, const char *ns)
{
	static const struct {
		const char *app;
		size_t n;
	} apps[] = {{"trainer", 2}, {"p", 1}, {"batch", 1}};

	for (size_t i = 0; i < 3; i++) {
		char sel[40];
		json_t *pods, *pod;
		size_t j;

		snprintf(sel, sizeof(sel), "app=%s", apps[i].app);
		pods = tu_e2e_wait_running(p->dst, ns, sel, apps[i].n, 90000, &p->site);
		json_array_foreach (pods, j, pod)
			assert_int_equal(tu_e2e_assert_pod_claims(p->dst, DST_API, pod, DRIVER), 1);
		json_decref(pods);
	}
}

/* The standby form in the target namespace: scaled to 0, suspended, the Pod and Job held. */
static void wait_standby(tu_pair *p, int timeout_ms)
{
	long long end = tu_now_ms() + timeout_ms;

	for (;;) {
		json_t *pod = tu_e2e_get(p->dst, "v1", "Pod", p->dst_ns, "p");
		json_t *job = tu_e2e_get(p->dst, "batch/v1", "Job", p->dst_ns, "batch");
		json_t *pods = tu_e2e_list(p->dst, "v1", "Pod", p->dst_ns, NULL);
		long long rep =
		    int_at(p, p->dst_ns, "apps/v1", "Deployment", "trainer", "/spec/replicas");
		bool ok = rep == 0 && suspended(p, p->dst_ns) && !pod && !job &&
			  json_array_size(pods) == 0;

		json_decref(pod);
		json_decref(job);
		json_decref(pods);
		if (ok)
			return;
		if (tu_now_ms() > end)
			fail_msg("not in standby form after %d ms: trainer replicas %lld, nightly "
				 "%s, Pod p %s, Job batch %s",
				 timeout_ms, rep, suspended(p, p->dst_ns) ? "suspended" : "active",
				 pod ? "present" : "absent", job ? "present" : "absent");
		tu_msleep(300);
	}
}

static void test_e2e_dr__standby_failover_failback_drill(void **state)
{
	tu_pair *const p = &P;
	char drill[128];
	json_t *o, *st;
	char *out;

	(void)state;
	tu_pair_init(p, "e2ed", "DS_KUBECONFIG_V1", "DS_KUBECONFIG_V1BETA1", "prod-east",
		     "mode: standby\n"
		     "dra:\n  deviceClassMappings: [{from: gpu.nvidia.com, to: " DRIVER "}]\n",
		     NULL);
	snprintf(drill, sizeof(drill), "%s-drill", p->dst_ns);
	create_workloads(p);
	tu_pair_target_start(p);
	tu_pair_source_start(p, NULL);

	/* Standby: nothing runs, the source's replica count kept. */
	json_decref(tu_e2e_wait_get(p->dst, "apps/v1", "Deployment", p->dst_ns, "trainer", 60000,
				    &p->site));
	wait_standby(p, 30000);
	o = tu_e2e_get(p->dst, "apps/v1", "Deployment", p->dst_ns, "trainer");
	assert_string_equal(dt_str(o, "/metadata/annotations/drasync.io~1replicas"), "2");
	json_decref(o);
	o = tu_e2e_wait_get(p->dst, DST_API, "ResourceClaimTemplate", p->dst_ns, "one-gpu", 10000,
			    &p->site);
	assert_string_equal(dt_str(o, "/spec/spec/devices/requests/0/deviceClassName"), DRIVER);
	json_decref(o);
	for (long long end = tu_now_ms() + 20000;; tu_msleep(300)) {
		st = tu_pair_status(p);
		if (json_integer_value(dt_get(ns_status(st, p->dst_ns), "/held")) == 2)
			break;
		if (tu_now_ms() > end)
			fail_msg("the Pod and the Job are not held: %s",
				 json_dumps(st, JSON_INDENT(1)));
		json_decref(st);
	}
	json_decref(st);
	assert_mode(p, "standby", "config");

	/* The source site goes down; failover (no --force needed). */
	tu_site_source_sigterm(&p->site);
	for (long long end = tu_now_ms() + 20000;
	     tu_site_ledger_int(&p->site, "SELECT count(*) FROM presence WHERE ended_at IS NULL");
	     tu_msleep(200))
		if (tu_now_ms() > end)
			fail_msg("the source's session is still open on the target");
	out = dr(p, (const char *const[]){"failover", "--namespace", p->dst_ns, NULL});
	assert_out(out, "namespace %s: standby -> active", p->dst_ns);
	assert_out(out, "Deployment %s/trainer: replicas 0 -> 2", p->dst_ns);
	assert_out(out, "CronJob %s/nightly: suspend true -> false", p->dst_ns);
	assert_out(out, "Pod %s/p: created (was held)", p->dst_ns);
	assert_out(out, "Job %s/batch: created (was held)", p->dst_ns);
	free(out);
	assert_running(p, p->dst_ns);
	assert_false(suspended(p, p->dst_ns));
	assert_mode(p, "active", "failover");

	/* verify: what a user runs after the failover. */
	out = dr(
	    p, (const char *const[]){"verify", "--namespace", p->dst_ns, "--timeout", "60s", NULL});
	assert_out(out, "Deployment %s/trainer (active): verified in ", p->dst_ns);
	assert_out(out, "Pod %s/p (active): verified in ", p->dst_ns);
	assert_out(out, "Job %s/batch (active): verified in ", p->dst_ns);
	assert_out(out, "summary: 4 workloads, 4 verified, 0 NOT verified");
	free(out);
	st = tu_pair_status(p);
	assert_int_equal(json_integer_value(dt_get(st, "/verification/notVerified")), 0);
	assert_true(json_integer_value(dt_get(st, "/verification/verified")) >= 3);
	json_decref(st);

	/* The source site is back; failback to standby. */
	tu_pair_source_start(p, NULL);
	out = dr(p, (const char *const[]){"failback", "--namespace", p->dst_ns, NULL});
	assert_out(out, "namespace %s: active -> standby", p->dst_ns);
	free(out);
	wait_standby(p, 60000);
	assert_mode(p, "standby", "failback");

	/* A drill with both agents running: a verified copy, the standby untouched. */
	out = dr(
	    p, (const char *const[]){"drill", "--namespace", p->dst_ns, "--timeout", "120s", NULL});
	assert_out(out, "drill of %s into %s: VERIFIED", p->dst_ns, drill);
	assert_out(out, "Deployment %s/trainer: verified in ", drill);
	assert_out(out, "Pod %s/p: verified in ", drill);
	free(out);
	assert_running(p, drill);
	wait_standby(p, 1000);
	assert_mode(p, "standby", "failback");
	out = tu_site_run_log(&p->site);
	tu_e2e_assert_log("target log", out, "state=failed", false);
	free(out);
	tu_site_source_sigterm(&p->site);
	tu_site_agent_sigterm(&p->site);
}

/* ---- several sources into one target ------------------------------------------- */

static struct {
	ds_kube *src, *dst;
	char *ns[2];
	char dst_ns[2][64];
	tu_rbac rbac;
	tu_site site[2]; /* [0] runs the target too */
} M;

static const char *const same_kinds[] = {"v1/ConfigMap", "v1/Secret", "apps/v1/Deployment", NULL};

static void test_e2e_dr__two_sources_into_one_target(void **state)
{
	static const char *const names[] = {"site-a", "site-b"};
	char *text, path[1200];
	struct tu_run r;
	json_t *st, *v;
	size_t i, seen = 0;

	(void)state;
	M.src = tu_kube_connect(tu_env("DS_KUBECONFIG_V1"));
	M.dst = tu_kube_connect(tu_env("DS_KUBECONFIG_V1BETA1"));
	for (i = 0; i < 2; i++) {
		M.ns[i] = tu_kube_new_namespace(M.src, i ? "e2eb" : "e2ea", "");
		snprintf(M.dst_ns[i], sizeof(M.dst_ns[i]), "%s-dr", M.ns[i]);
		for (int j = 0; j < 3; j++)
			tu_kube_create(M.src, tu_kube_doc("apiVersion: v1\nkind: ConfigMap\n"
							  "metadata: {name: cm-%d, namespace: %s}\n"
							  "data: {site: %s}\n",
							  j, M.ns[i], names[i]));
		tu_kube_create(M.src,
			       tu_kube_doc("apiVersion: apps/v1\nkind: Deployment\nmetadata: "
					   "{name: web, namespace: %s}\nspec:\n  replicas: 1\n"
					   "  selector: {matchLabels: {app: web}}\n"
					   "  template:\n    metadata: {labels: {app: web}}\n"
					   "    spec: {containers: [{name: web, image: "
					   "registry.k8s.io/pause:3.10}]}\n",
					   M.ns[i]));
	}
	tu_rbac_install(
	    &M.rbac, tu_env("DS_KUBECONFIG_V1"), (const char *const[]){M.ns[0], M.ns[1], NULL},
	    tu_env("DS_KUBECONFIG_V1BETA1"), (const char *const[]){M.dst_ns[0], M.dst_ns[1], NULL});

	/* One target, two authorized sources, each with its own key. */
	tu_site_init(&M.site[0], "e2emulti", M.rbac.target_kubeconfig, names[0]);
	tu_site_init(&M.site[1], "e2emulti", M.rbac.target_kubeconfig, names[1]);
	/* SPEC §5: each source is granted its own namespace, and only that */
	assert_true(
	    asprintf(&text,
		     "identity: {namespace: drasync}\nmode: migrate\n"
		     "namespaceMappings: {%s: %s, %s: %s}\n"
		     "sources:\n- {name: %s, namespaces: [%s]}\n- {name: %s, namespaces: [%s]}\n",
		     M.ns[0], M.dst_ns[0], M.ns[1], M.dst_ns[1], names[0], M.ns[0], names[1],
		     M.ns[1]) > 0);
	tu_site_write_config(&M.site[0], text);
	free(text);
	snprintf(path, sizeof(path), "%s/authorized_sources", M.site[0].dir);
	assert_true(asprintf(&text, "%s %s\n%s %s\n", names[0], M.site[0].skeys.public_z85,
			     names[1], M.site[1].skeys.public_z85) > 0);
	tu_write_file(path, text);
	free(text);
	M.site[1].tkeys = M.site[0].tkeys;
	snprintf(M.site[1].source_endpoint, sizeof(M.site[1].source_endpoint), "%s",
		 M.site[0].endpoint);
	for (i = 0; i < 2; i++) {
		assert_true(asprintf(&text, "namespaces: [%s]\n", M.ns[i]) > 0);
		tu_site_write_source_config(&M.site[i], text);
		free(text);
	}
	tu_site_agent_start(&M.site[0]);
	for (i = 0; i < 2; i++)
		tu_site_source_start(&M.site[i], M.rbac.source_kubeconfig, NULL);

	for (i = 0; i < 2; i++) {
		json_t *o;

		tu_assert_same_objects(M.src, M.ns[i], M.dst, M.dst_ns[i], same_kinds, 60000);
		o = tu_e2e_get(M.dst, "v1", "ConfigMap", M.dst_ns[i], "cm-0");
		assert_string_equal(dt_str(o, "/metadata/annotations/drasync.io~1source-cluster"),
				    names[i]);
		json_decref(o);
	}
	/* status: both sources, each with its own epoch and committed records. */
	st = tu_pair_status(&(tu_pair){.site = M.site[0]});
	json_array_foreach (json_object_get(st, "sources"), i, v) {
		const char *c = dt_str(v, "/cluster");

		if (c && (strcmp(c, names[0]) == 0 || strcmp(c, names[1]) == 0) &&
		    json_integer_value(dt_get(v, "/committedSeq")) > 0)
			seen++;
	}
	if (seen != 2)
		fail_msg("status does not show both sources: %s", json_dumps(st, JSON_INDENT(1)));
	json_decref(st);

	/* site-a loses its state while down and a ConfigMap is deleted there:
	 * its snapshot prunes it from site-a's namespace, site-b's stay. */
	tu_site_source_sigterm(&M.site[0]);
	tu_kube_delete(M.src, "v1", "ConfigMap", M.ns[0], "cm-1");
	snprintf(path, sizeof(path), "%s/source-state", M.site[0].dir);
	tu_run(&r, NULL, (const char *[]){"/bin/rm", "-rf", path, NULL});
	assert_int_equal(r.status, 0);
	tu_run_dispose(&r);
	tu_site_source_start(&M.site[0], M.rbac.source_kubeconfig, NULL);
	tu_e2e_wait_gone(M.dst, "v1", "ConfigMap", M.dst_ns[0], "cm-1", 30000, &M.site[0]);
	for (i = 0; i < 2; i++)
		tu_assert_same_objects(M.src, M.ns[i], M.dst, M.dst_ns[i], same_kinds, 15000);
	text = tu_site_run_log(&M.site[0]);
	tu_e2e_assert_log("target log", text, "state=failed", false);
	tu_e2e_assert_log("target log", text, "conflict", false);
	free(text);
	for (i = 0; i < 2; i++)
		tu_site_source_sigterm(&M.site[i]);
	tu_site_agent_sigterm(&M.site[0]);
}

/* A line of text holding both a and b; fails when none does. */
static void line_with_both(const char *text, const char *a, const char *b, char *out, size_t size)
{
	for (const char *at = text; (at = strstr(at, a)); at++) {
		const char *start = at, *end = strchr(at, '\n');

		while (start > text && start[-1] != '\n')
			start--;
		end = end ? end : at + strlen(at);
		snprintf(out, size, "%.*s", (int)(end - start), start);
		if (strstr(out, b))
			return;
	}
	fail_msg("no line with '%s' and '%s' in:\n%s", a, b, text);
}

static void test_e2e_dr__two_sources_one_object_second_refused(void **state)
{
	static const char *const names[] = {"site-a", "site-b"};
	int mport = tu_free_port();
	char *text, path[1200], series[200], reason[600], needle[300], line[2000];
	const char *shared, *rv0;
	json_t *st, *v, *o, *first;
	bool found = false;
	size_t i;

	(void)state;
	M.src = tu_kube_connect(tu_env("DS_KUBECONFIG_V1"));
	M.dst = tu_kube_connect(tu_env("DS_KUBECONFIG_V1BETA1"));
	for (i = 0; i < 2; i++) {
		M.ns[i] = tu_kube_new_namespace(M.src, i ? "e2eob" : "e2eoa", "");
		tu_kube_create(M.src, tu_kube_doc("apiVersion: v1\nkind: ConfigMap\n"
						  "metadata: {name: settings, namespace: %s}\n"
						  "data: {site: %s}\n",
						  M.ns[i], names[i]));
		tu_kube_create(M.src, tu_kube_doc("apiVersion: v1\nkind: ConfigMap\n"
						  "metadata: {name: only-%s, namespace: %s}\n"
						  "data: {site: %s}\n",
						  names[i], M.ns[i], names[i]));
	}
	/* Both sites' namespaces map to one target namespace. */
	snprintf(M.dst_ns[0], sizeof(M.dst_ns[0]), "%s-dr", M.ns[0]);
	snprintf(M.dst_ns[1], sizeof(M.dst_ns[1]), "%s", M.dst_ns[0]);
	shared = M.dst_ns[0];
	tu_rbac_install(&M.rbac, tu_env("DS_KUBECONFIG_V1"),
			(const char *const[]){M.ns[0], M.ns[1], NULL},
			tu_env("DS_KUBECONFIG_V1BETA1"), (const char *const[]){shared, NULL});
	tu_site_init(&M.site[0], "e2eone", M.rbac.target_kubeconfig, names[0]);
	tu_site_init(&M.site[1], "e2eone", M.rbac.target_kubeconfig, names[1]);
	assert_true(asprintf(&text,
			     "identity: {namespace: drasync}\nmode: migrate\n"
			     "metrics: {listen: \"127.0.0.1:%d\"}\n"
			     "namespaceMappings: {%s: %s, %s: %s}\n"
			     "sources:\n- {name: %s, namespaces: [%s]}\n"
			     "- {name: %s, namespaces: [%s]}\n",
			     mport, M.ns[0], shared, M.ns[1], shared, names[0], M.ns[0], names[1],
			     M.ns[1]) > 0);
	tu_site_write_config(&M.site[0], text);
	free(text);
	snprintf(path, sizeof(path), "%s/authorized_sources", M.site[0].dir);
	assert_true(asprintf(&text, "%s %s\n%s %s\n", names[0], M.site[0].skeys.public_z85,
			     names[1], M.site[1].skeys.public_z85) > 0);
	tu_write_file(path, text);
	free(text);
	M.site[1].tkeys = M.site[0].tkeys;
	snprintf(M.site[1].source_endpoint, sizeof(M.site[1].source_endpoint), "%s",
		 M.site[0].endpoint);
	for (i = 0; i < 2; i++) {
		assert_true(asprintf(&text, "namespaces: [%s]\n", M.ns[i]) > 0);
		tu_site_write_source_config(&M.site[i], text);
		free(text);
	}

	/* site-a first: its ConfigMap lands. */
	tu_site_agent_start(&M.site[0]);
	tu_site_source_start(&M.site[0], M.rbac.source_kubeconfig, NULL);
	json_decref(
	    tu_e2e_wait_get(M.dst, "v1", "ConfigMap", shared, "only-site-a", 60000, &M.site[0]));
	first = tu_e2e_wait_get(M.dst, "v1", "ConfigMap", shared, "settings", 10000, &M.site[0]);
	assert_string_equal(dt_str(first, "/data/site"), "site-a");
	rv0 = dt_str(first, "/metadata/resourceVersion");

	/* site-b: what is its own lands beside it; the same object is refused. */
	tu_site_source_start(&M.site[1], M.rbac.source_kubeconfig, NULL);
	json_decref(
	    tu_e2e_wait_get(M.dst, "v1", "ConfigMap", shared, "only-site-b", 60000, &M.site[0]));
	snprintf(reason, sizeof(reason),
		 "conflict: ConfigMap %s/settings on the target is replicated from source site-a; "
		 "source site-b may not write it too (map its namespace elsewhere)",
		 shared);
	for (long long end = tu_now_ms() + 20000; !found; tu_msleep(300)) {
		st = tu_pair_status(&(tu_pair){.site = M.site[0]});
		json_array_foreach (json_object_get(json_object_get(st, "refused"), "site-b"), i,
				    v) {
			if (strcmp(dt_str(v, "/kind"), "ConfigMap") == 0 &&
			    strcmp(dt_str(v, "/name"), "settings") == 0) {
				assert_string_equal(dt_str(v, "/reason"), reason);
				found = true;
			}
		}
		if (!found && tu_now_ms() > end)
			fail_msg("drasync-target status shows no refusal of site-b's settings: %s",
				 json_dumps(st, JSON_INDENT(1)));
		if (found) {
			/* only that: the namespace both map to is the target's own, and
			 * drasync writes nothing on it for either (SPEC §5) */
			assert_int_equal(json_array_size(json_object_get(
					     json_object_get(st, "refused"), "site-b")),
					 1);
			assert_true(json_is_false(json_object_get(st, "healthy")));
		}
		json_decref(st);
	}
	text = tu_site_run_log(&M.site[0]);
	snprintf(needle, sizeof(needle), "ConfigMap/%s/settings ", M.ns[1]);
	line_with_both(text, needle, "state=refused", line, sizeof(line));
	tu_e2e_assert_log("the refusal's line", line, reason, true);
	tu_e2e_assert_log("the refusal's line", line, "level=warn", true);
	free(text);
	snprintf(series, sizeof(series),
		 "drasync_target_refused_total{source=\"site-b\",reason=\"owner\"}");
	if (tu_e2e_metric(mport, series) < 1)
		fail_msg("%s is %g", series, tu_e2e_metric(mport, series));
	snprintf(series, sizeof(series),
		 "drasync_target_refused_total{source=\"site-a\",reason=\"owner\"}");
	assert_true(tu_e2e_metric(mport, series) <= 0);

	/* site-b hears it: its status and its log. */
	found = false;
	for (long long end = tu_now_ms() + 20000; !found; tu_msleep(300)) {
		st = tu_e2e_source_status(&M.site[1]);
		json_array_foreach (json_object_get(st, "failures"), i, v) {
			if (strcmp(dt_str(v, "/name"), "settings") == 0 &&
			    strcmp(dt_str(v, "/status"), "refused") == 0) {
				assert_string_equal(dt_str(v, "/message"), reason);
				found = true;
			}
		}
		json_array_foreach (json_object_get(st, "kinds"), i, v) {
			if (found)
				assert_int_equal(json_integer_value(json_object_get(v, "refused")),
						 strcmp(dt_str(v, "/kind"), "ConfigMap") == 0 ? 1
											      : 0);
		}
		if (!found && tu_now_ms() > end)
			fail_msg("drasync-source status of site-b shows no refusal: %s",
				 json_dumps(st, JSON_INDENT(1)));
		if (found)
			assert_true(json_is_true(json_object_get(st, "needsAttention")));
		json_decref(st);
	}
	text = tu_site_source_run_log(&M.site[1]);
	line_with_both(text, "event=target_refused", "settings", line, sizeof(line));
	tu_e2e_assert_log("site-b's log", line, "conflict: ", true);
	free(text);

	/* The first's object is untouched... */
	o = tu_e2e_get(M.dst, "v1", "ConfigMap", shared, "settings");
	assert_string_equal(dt_str(o, "/data/site"), "site-a");
	assert_string_equal(dt_str(o, "/metadata/resourceVersion"), rv0);
	assert_string_equal(dt_str(o, "/metadata/annotations/drasync.io~1source-cluster"),
			    "site-a");
	json_decref(o);
	/* ...by site-b's change and delete too (its delete is no tombstone of site-a's)... */
	tu_kube_merge(M.src, "v1", "ConfigMap", M.ns[1], "settings", NULL,
		      "{\"data\":{\"site\":\"site-b-changed\"}}");
	tu_kube_merge(M.src, "v1", "ConfigMap", M.ns[1], "only-site-b", NULL,
		      "{\"data\":{\"site\":\"site-b-changed\"}}");
	for (long long end = tu_now_ms() + 15000;; tu_msleep(200)) {
		o = tu_e2e_get(M.dst, "v1", "ConfigMap", shared, "only-site-b");
		if (o && strcmp(dt_str(o, "/data/site"), "site-b-changed") == 0)
			break;
		if (tu_now_ms() > end)
			fail_msg("site-b's change of only-site-b did not arrive");
		json_decref(o);
	}
	json_decref(o);
	tu_kube_delete(M.src, "v1", "ConfigMap", M.ns[1], "settings");
	tu_e2e_wait_gone(M.src, "v1", "ConfigMap", M.ns[1], "settings", 10000, NULL);
	tu_kube_delete(M.src, "v1", "ConfigMap", M.ns[1], "only-site-b");
	tu_e2e_wait_gone(M.dst, "v1", "ConfigMap", shared, "only-site-b", 15000, &M.site[0]);
	o = tu_e2e_get(M.dst, "v1", "ConfigMap", shared, "settings");
	assert_non_null(o);
	assert_string_equal(dt_str(o, "/data/site"), "site-a");
	assert_string_equal(dt_str(o, "/metadata/resourceVersion"), rv0);
	json_decref(o);
	/* ...and it keeps following site-a. */
	tu_kube_merge(M.src, "v1", "ConfigMap", M.ns[0], "settings", NULL,
		      "{\"data\":{\"site\":\"site-a-changed\"}}");
	for (long long end = tu_now_ms() + 15000;; tu_msleep(200)) {
		o = tu_e2e_get(M.dst, "v1", "ConfigMap", shared, "settings");
		if (o && strcmp(dt_str(o, "/data/site"), "site-a-changed") == 0)
			break;
		if (tu_now_ms() > end)
			fail_msg("site-a's change of settings did not arrive");
		json_decref(o);
	}
	json_decref(o);
	json_decref(first);
	text = tu_site_run_log(&M.site[0]);
	tu_e2e_assert_log("target log", text, "state=failed", false);
	free(text);
	for (i = 0; i < 2; i++)
		tu_site_source_sigterm(&M.site[i]);
	tu_site_agent_sigterm(&M.site[0]);
}

static int teardown(void **state)
{
	(void)state;
	if (P.src)
		tu_pair_dispose(&P);
	return 0;
}

static int teardown_multi(void **state)
{
	(void)state;
	for (size_t i = 0; i < 2; i++) {
		if (M.site[i].dir)
			tu_site_dispose(&M.site[i]);
	}
	tu_rbac_remove(&M.rbac);
	for (size_t i = 0; i < 2; i++) {
		if (M.ns[i])
			tu_kube_drop_namespace(M.src, M.ns[i]);
	}
	ds_kube_free(M.src);
	ds_kube_free(M.dst);
	memset(&M, 0, sizeof(M));
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_e2e_dr__standby_failover_failback_drill, teardown),
	    cmocka_unit_test_teardown(test_e2e_dr__two_sources_into_one_target, teardown_multi),
	    cmocka_unit_test_teardown(test_e2e_dr__two_sources_one_object_second_refused,
				      teardown_multi),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
