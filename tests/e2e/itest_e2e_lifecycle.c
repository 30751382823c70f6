/*
 * The whole DR lifecycle (SPEC §5 "Planned relocation", docs/operations.md
 * "The way home"), as operators run it: two real clusters, four agents as
 * processes on the shipped RBAC's tokens: site A (the v1 cluster) runs
 * drasync-source for NS and drasync-target for the copy coming back, site B
 * (the v1beta1 cluster) drasync-target for NS-dr and drasync-source for it.
 * Both targets are standby and grant the other site relocate: true.
 *   - planned: A→B standby (B's source exports nothing of the standby copy);
 *     relocate A→B (B runs 2 pods, claims allocated from B's devices; A
 *     parked); changes at B (a scale to 3, a new ConfigMap, the claim template
 *     re-created with another spec) reach A in standby form, carrying A's
 *     target's marks and none of B's; the API servers' write counts and both
 *     outboxes settle; the way home: relocate B→A (A runs 3 pods with B's
 *     changes, B parked), A's source exports NS again and B's target takes
 *     its namespace back to standby at A's first record; everything settles
 *     again.
 *   - unplanned: A's source SIGKILLed (site A lost), failover --force at B, a
 *     change at B; site A back: `drasync-source park` there, A's target
 *     started (reverse replication: A gets B's change, parked); the way home
 *     (relocate B→A, failback at B, A's source started) ends with A active
 *     and equal to B, B's changes kept.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dstest.h"
#include "testutil.h"
#include "tu_e2e.h"
#include "tu_kube.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DRIVER "gpu.example.com"
#define API_A "resource.k8s.io/v1"
#define API_B "resource.k8s.io/v1beta1"
/* each target: standby, and the other site may relocate to it */
#define TARGET_EXTRA(site)                                                                         \
	"sources: [{name: " site ", namespaces: ['*'], relocate: true}]\nmode: standby\n"

static tu_pair A2B, B2A; /* disposed by teardown(), after a failure too */

static void create_workloads(tu_pair *p)
{
	const char *ns = p->src_ns;

	tu_kube_create(p->src, tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg, "
					   "namespace: %s}\ndata: {epochs: '10'}\n",
					   ns));
	tu_kube_create(p->src,
		       tu_kube_doc("apiVersion: resource.k8s.io/v1\nkind: "
				   "ResourceClaimTemplate\nmetadata: {name: one-gpu, "
				   "namespace: %s}\nspec: {spec: {devices: {requests: "
				   "[{name: gpu, exactly: {deviceClassName: " DRIVER "}}]}}}\n",
				   ns));
	tu_kube_create(p->src,
		       tu_kube_doc("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: "
				   "trainer, namespace: %s}\nspec:\n  replicas: 2\n  selector: "
				   "{matchLabels: {app: trainer}}\n  template:\n    metadata: "
				   "{labels: {app: trainer}}\n    spec:\n      resourceClaims: "
				   "[{name: gpu, resourceClaimTemplateName: one-gpu}]\n      "
				   "containers: [{name: main, image: registry.k8s.io/pause:3.10, "
				   "resources: {claims: [{name: gpu}]}}]\n",
				   ns));
}

/* The four agents' sites: A→B (A2B) and B→A (B2A), configs written, nothing running. */
static void init_sites(const char *prefix)
{
	char rprefix[32];

	tu_pair_init(&A2B, prefix, "DS_KUBECONFIG_V1", "DS_KUBECONFIG_V1BETA1", "site-a",
		     TARGET_EXTRA("site-a"), NULL);
	snprintf(rprefix, sizeof(rprefix), "%sr", prefix);
	tu_pair_init_reverse(&B2A, &A2B, rprefix, "site-b", TARGET_EXTRA("site-b"), NULL);
	create_workloads(&A2B);
	tu_pair_grant_relocate(&A2B);
	tu_pair_grant_relocate(&B2A);
}

static long long replicas(ds_kube *k, const char *ns)
{
	json_t *o = tu_e2e_get(k, "apps/v1", "Deployment", ns, "trainer");
	json_t *v = o ? dt_get(o, "/spec/replicas") : NULL;
	long long n = json_is_integer(v) ? (long long)json_integer_value(v) : -1;

	json_decref(o);
	return n;
}

/* The Deployment's drasync.io/replicas ("" when none). */
static char *kept_count(ds_kube *k, const char *ns)
{
	json_t *o = tu_e2e_get(k, "apps/v1", "Deployment", ns, "trainer");
	const char *v = o ? dt_str(o, "/metadata/annotations/drasync.io~1replicas") : NULL;
	char *s = strdup(v ? v : "");

	json_decref(o);
	return s;
}

/* Wait until trainer in ns has replicas `n` and kept count `kept` ("" none). */
static void wait_trainer(tu_pair *log, ds_kube *k, const char *ns, long long n, const char *kept,
			 int timeout_ms)
{
	for (long long end = tu_now_ms() + timeout_ms;; tu_msleep(200)) {
		char *c = kept_count(k, ns);
		long long r = replicas(k, ns);
		bool ok = r == n && strcmp(c, kept) == 0;

		if (ok || tu_now_ms() > end) {
			if (!ok) {
				char *tl = tu_site_run_log(&log->site);
				fail_msg("trainer in %s: replicas %lld kept '%s', want %lld '%s'\n"
					 "--- %s target log:\n%s",
					 ns, r, c, n, kept, log->site.source, tl);
			}
			free(c);
			return;
		}
		free(c);
	}
}

static void assert_has(const char *what, const struct tu_run *r, const char *needle)
{
	if (!strstr(r->out, needle) && !strstr(r->err, needle))
		fail_msg("%s: no '%s' (exit %d)\nstdout:\n%s\nstderr:\n%s", what, needle, r->status,
			 r->out, r->err);
}

/* drasync-source relocate NS of pair p, on its source's token: must exit 0. */
static void relocate(tu_pair *p, tu_pair *other)
{
	struct tu_run r;

	tu_run(&r, NULL,
	       (const char *[]){tu_env("DS_SOURCE_BIN"), "relocate", "--config", p->site.source_cfg,
				"--kubeconfig", p->rbac.source_kubeconfig, "--namespace", p->src_ns,
				"--timeout", "90s", NULL});
	if (r.status != 0) {
		char *tl = tu_site_run_log(&p->site), *sl = tu_site_source_run_log(&other->site);
		fail_msg("relocate %s: exit %d\nstdout:\n%s\nstderr:\n%s\n--- target log:\n%s\n"
			 "--- the other site's source log:\n%s",
			 p->src_ns, r.status, r.out, r.err, tl, sl);
	}
	assert_has("relocate", &r, "verified active");
	tu_run_dispose(&r);
}

/* A drasync-target command of pair p: must exit 0. */
static void target_cmd(tu_pair *p, const char *cmd, const char *extra)
{
	struct tu_run r;

	tu_pair_target_cmd(p, &r, (const char *[]){cmd, "--namespace", p->dst_ns, extra, NULL});
	if (r.status != 0)
		fail_msg("drasync-target %s --namespace %s: exit %d\n%s%s", cmd, p->dst_ns,
			 r.status, r.out, r.err);
	tu_run_dispose(&r);
}

/* Pods of trainer Running in ns, each claim allocated from that cluster's devices. */
static void wait_running(ds_kube *k, const char *api, const char *ns, size_t n, const tu_site *log)
{
	json_t *pods = tu_e2e_wait_running(k, ns, "app=trainer", n, 60000, log), *pod;
	size_t i;

	json_array_foreach (pods, i, pod)
		assert_int_equal(tu_e2e_assert_pod_claims(k, api, pod, DRIVER), 1);
	json_decref(pods);
}

/* Every write both API servers counted of these resources, and both sources' last seq. */
static long long activity(char *detail, size_t size)
{
	static const char *const res[] = {"deployments", "configmaps", "resourceclaimtemplates"};
	long long sum = 0;
	size_t used = 0;

	for (size_t i = 0; i < sizeof(res) / sizeof(res[0]); i++) {
		long long a = tu_kube_writes(A2B.src, res[i], NULL, 0);
		long long b = tu_kube_writes(A2B.dst, res[i], NULL, 0);

		used += (size_t)snprintf(detail + used, size > used ? size - used : 0,
					 "%s A=%lld B=%lld; ", res[i], a, b);
		sum += a * 7 + b * 13;
	}
	long long sa =
	    tu_site_source_outbox_int(&A2B.site, "SELECT coalesce(max(seq), 0) FROM outbox");
	long long sb =
	    tu_site_source_outbox_int(&B2A.site, "SELECT coalesce(max(seq), 0) FROM outbox");
	snprintf(detail + used, size > used ? size - used : 0, "outbox A=%lld B=%lld", sa, sb);
	return sum + sa * 17 + sb * 19;
}

/*
 * Nothing travels back and forth: over 6 s (after a pause for the last
 * debounce and pass), neither API server counts a write of these resources
 * and neither source pushes a record.
 */
static void assert_settled(const char *when)
{
	char before[600], after[600];
	long long a, b;

	tu_msleep(3000);
	a = activity(before, sizeof(before));
	tu_msleep(6000);
	b = activity(after, sizeof(after));
	if (a != b)
		fail_msg("%s: not settled:\nbefore: %s\nafter:  %s\n--- A's target log:\n%s\n"
			 "--- B's target log:\n%s",
			 when, before, after, tu_site_run_log(&B2A.site),
			 tu_site_run_log(&A2B.site));
}

static void start_all(void)
{
	tu_pair_target_start(&A2B);
	tu_pair_target_start(&B2A);
	tu_pair_source_start(&A2B, NULL);
	tu_pair_source_start(&B2A, NULL);
}

/* A→B standby: trainer at B at 0 keeping 2, and B's source exports nothing of the copy. */
/* Until the site's ledger answers sql with want (at most 30 s). */
static void wait_ledger(const tu_site *site, const char *sql, long long want)
{
	long long got = -1;

	for (long long end = tu_now_ms() + 30000; tu_now_ms() < end; tu_msleep(250))
		if ((got = tu_site_ledger_int(site, sql)) == want)
			return;
	fail_msg("after 30 s the ledger answers %lld to %s (want %lld)", got, sql, want);
}

static void wait_standby_at_b(void)
{
	json_decref(tu_e2e_wait_get(A2B.dst, "apps/v1", "Deployment", A2B.dst_ns, "trainer", 60000,
				    &A2B.site));
	json_decref(tu_e2e_wait_get(A2B.dst, API_B, "ResourceClaimTemplate", A2B.dst_ns, "one-gpu",
				    20000, &A2B.site));
	wait_trainer(&A2B, A2B.dst, A2B.dst_ns, 0, "2", 20000);
}

static void test_e2e_lifecycle__planned_there_and_home(void **state)
{
	const char *n = A2B.src_ns;
	json_t *o;
	char *text;

	(void)state;
	init_sites("e2elc");
	n = A2B.src_ns;
	start_all();
	wait_running(A2B.src, API_A, n, 2, &A2B.site);
	wait_standby_at_b();
	tu_msleep(1500);
	/* B's source exports nothing of the copy (its Namespace, made by the operator, is
	 * not one: A's target leaves it alone) */
	{
		char sql[300];

		snprintf(sql, sizeof(sql),
			 "SELECT count(*) FROM export_objects WHERE namespace = '%s' AND kind != "
			 "'Namespace'",
			 A2B.dst_ns);
		assert_int_equal(tu_site_source_outbox_int(&B2A.site, sql), 0);
	}

	/* relocate A→B: B runs it on B's devices, A parked and marked */
	relocate(&A2B, &B2A);
	wait_running(A2B.dst, API_B, A2B.dst_ns, 2, &A2B.site);
	wait_trainer(&A2B, A2B.src, n, 0, "2", 10000);
	o = tu_e2e_get(A2B.src, "v1", "ConfigMap", n, "cfg");
	assert_non_null(dt_str(o, "/metadata/annotations/drasync.io~1relocated-to"));
	json_decref(o);

	/* reverse replication: B's source exports the namespace now active there; A's
	 * target updates what the relocation parked, in standby form, its own marks */
	o = tu_e2e_wait_get(A2B.src, "v1", "ConfigMap", n, "cfg", 5000, &B2A.site);
	for (long long end = tu_now_ms() + 30000;
	     !dt_str(o, "/metadata/annotations/drasync.io~1source") && tu_now_ms() < end;
	     tu_msleep(200)) {
		json_decref(o);
		o = tu_e2e_get(A2B.src, "v1", "ConfigMap", n, "cfg");
	}
	if (!dt_str(o, "/metadata/annotations/drasync.io~1source"))
		fail_msg("cfg at A was not updated by A's target:\n%s", tu_site_run_log(&B2A.site));
	assert_string_equal(dt_str(o, "/metadata/annotations/drasync.io~1source"), "site-b");
	assert_string_equal(dt_str(o, "/metadata/annotations/drasync.io~1source-cluster"),
			    "site-b");
	json_decref(o);

	/* changes at B: the claim template re-created with another spec, a scale, a ConfigMap */
	tu_kube_delete(A2B.dst, API_B, "ResourceClaimTemplate", A2B.dst_ns, "one-gpu");
	tu_e2e_wait_gone(A2B.dst, API_B, "ResourceClaimTemplate", A2B.dst_ns, "one-gpu", 20000,
			 &A2B.site);
	tu_kube_create(A2B.dst, tu_kube_doc("apiVersion: " API_B "\nkind: ResourceClaimTemplate\n"
					    "metadata: {name: one-gpu, namespace: %s}\nspec: "
					    "{spec: {devices: {requests: [{name: gpu, "
					    "deviceClassName: " DRIVER ", allocationMode: "
					    "ExactCount, count: 1}]}}}\n",
					    A2B.dst_ns));
	tu_kube_merge(A2B.dst, "apps/v1", "Deployment", A2B.dst_ns, "trainer", NULL,
		      "{\"spec\": {\"replicas\": 3}}");
	tu_kube_create(A2B.dst, tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: "
					    "made-at-b, namespace: %s}\ndata: {step: b}\n",
					    A2B.dst_ns));
	wait_running(A2B.dst, API_B, A2B.dst_ns, 3, &A2B.site);

	/* ... reach A in standby form */
	wait_trainer(&B2A, A2B.src, n, 0, "3", 30000);
	o = tu_e2e_wait_get(A2B.src, "v1", "ConfigMap", n, "made-at-b", 20000, &B2A.site);
	assert_string_equal(dt_str(o, "/data/step"), "b");
	json_decref(o);
	for (long long end = tu_now_ms() + 20000;; tu_msleep(200)) {
		o = tu_e2e_get(A2B.src, API_A, "ResourceClaimTemplate", n, "one-gpu");
		if (o && dt_get(o, "/spec/spec/devices/requests/0/exactly/count"))
			break;
		json_decref(o);
		if (tu_now_ms() > end)
			fail_msg("the re-created template did not reach A:\n%s",
				 tu_site_run_log(&B2A.site));
	}
	assert_int_equal(
	    json_integer_value(dt_get(o, "/spec/spec/devices/requests/0/exactly/count")), 1);
	assert_string_equal(dt_str(o, "/metadata/annotations/drasync.io~1source"), "site-b");
	json_decref(o);
	o = tu_e2e_list(A2B.src, "v1", "Pod", n, "app=trainer");
	assert_int_equal(json_array_size(o), 0); /* standby at A: nothing runs */
	json_decref(o);
	/* A's source exports nothing of it: relocated */
	text = tu_site_source_run_log(&A2B.site);
	tu_e2e_assert_log("A's source", text, "event=relocation_returned", false);
	free(text);
	assert_settled("B active, A standby");

	/* the way home: relocate B→A (A's source then sends ml-team again, and B's target
	 * takes its namespace back to standby before applying any of it) */
	relocate(&B2A, &A2B);
	wait_running(A2B.src, API_A, n, 3, &B2A.site);
	o = tu_e2e_get(A2B.src, "v1", "ConfigMap", n, "made-at-b");
	assert_non_null(o);
	json_decref(o);
	wait_trainer(&A2B, A2B.dst, A2B.dst_ns, 0, "3", 20000);

	/* A's source exports NS again (the relocation came back); B keeps it standby */
	for (long long end = tu_now_ms() + 20000;; tu_msleep(200)) {
		text = tu_site_source_run_log(&A2B.site);
		bool back = strstr(text, "event=relocation_returned") != NULL;
		free(text);
		if (back)
			break;
		if (tu_now_ms() > end)
			fail_msg("A's source did not take NS back:\n%s",
				 tu_site_source_run_log(&A2B.site));
	}
	json_decref(
	    tu_e2e_wait_get(A2B.dst, "v1", "ConfigMap", A2B.dst_ns, "made-at-b", 20000, &A2B.site));
	wait_trainer(&A2B, A2B.dst, A2B.dst_ns, 0, "3", 20000);
	o = tu_e2e_list(A2B.dst, "v1", "Pod", A2B.dst_ns, "app=trainer");
	for (long long end = tu_now_ms() + 30000; json_array_size(o) && tu_now_ms() < end;
	     tu_msleep(300)) {
		json_decref(o);
		o = tu_e2e_list(A2B.dst, "v1", "Pod", A2B.dst_ns, "app=trainer");
	}
	assert_int_equal(json_array_size(o), 0);
	json_decref(o);
	/* B parked its copy on its own (its source's relocation), so the waits above
	 * do not say B's target has taken the way home yet: its ledger says when */
	wait_ledger(&A2B.site, "SELECT count(*) FROM relocations WHERE state = 'returned'", 1);
	wait_ledger(&A2B.site,
		    "SELECT count(*) FROM namespace_modes WHERE mode = 'standby' AND changed_by = "
		    "'relocation-home'",
		    1);
	assert_settled("home: A active, B standby");
}

static void test_e2e_lifecycle__unplanned_and_home(void **state)
{
	const char *n;
	struct tu_run r;
	json_t *a, *b;

	(void)state;
	init_sites("e2elu");
	n = A2B.src_ns;
	tu_pair_target_start(&A2B);
	tu_pair_source_start(&A2B, NULL);
	tu_pair_source_start(&B2A, NULL);
	wait_running(A2B.src, API_A, n, 2, &A2B.site);
	wait_standby_at_b();

	/* site A lost; B takes over */
	tu_site_source_sigkill(&A2B.site);
	target_cmd(&A2B, "failover", "--force");
	wait_running(A2B.dst, API_B, A2B.dst_ns, 2, &A2B.site);
	tu_kube_create(A2B.dst, tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: "
					    "made-at-b, namespace: %s}\ndata: {step: b}\n",
					    A2B.dst_ns));
	tu_kube_merge(A2B.dst, "v1", "ConfigMap", A2B.dst_ns, "cfg", NULL,
		      "{\"data\": {\"epochs\": \"20\"}}");

	/* site A back: parked first, then its target takes B's copy */
	tu_run(&r, NULL,
	       (const char *[]){tu_env("DS_SOURCE_BIN"), "park", "--config", A2B.site.source_cfg,
				"--kubeconfig", A2B.rbac.source_kubeconfig, "--namespace", n,
				NULL});
	if (r.status != 0)
		fail_msg("park: exit %d\n%s%s", r.status, r.out, r.err);
	assert_has("park", &r, "parked: ");
	tu_run_dispose(&r);
	wait_trainer(&A2B, A2B.src, n, 0, "2", 10000);
	tu_pair_target_start(&B2A);
	for (long long end = tu_now_ms() + 30000;; tu_msleep(200)) {
		a = tu_e2e_get(A2B.src, "v1", "ConfigMap", n, "cfg");
		if (a && dt_str(a, "/data/epochs") && strcmp(dt_str(a, "/data/epochs"), "20") == 0)
			break;
		json_decref(a);
		if (tu_now_ms() > end)
			fail_msg("B's change did not reach A:\n%s", tu_site_run_log(&B2A.site));
	}
	json_decref(a);
	json_decref(tu_e2e_wait_get(A2B.src, "v1", "ConfigMap", n, "made-at-b", 20000, &B2A.site));
	wait_trainer(&B2A, A2B.src, n, 0, "2", 10000);

	/* the way home: relocate B→A, then B's copy back to standby (B's failover was not a
	 * relocation from A: the operator says it) before A's source runs again */
	relocate(&B2A, &A2B);
	wait_running(A2B.src, API_A, n, 2, &B2A.site);
	a = tu_e2e_get(A2B.src, "v1", "ConfigMap", n, "made-at-b");
	b = tu_e2e_get(A2B.dst, "v1", "ConfigMap", A2B.dst_ns, "made-at-b");
	assert_non_null(a);
	assert_non_null(b);
	assert_true(json_equal(json_object_get(a, "data"), json_object_get(b, "data")));
	json_decref(a);
	json_decref(b);
	a = tu_e2e_get(A2B.src, "v1", "ConfigMap", n, "cfg");
	b = tu_e2e_get(A2B.dst, "v1", "ConfigMap", A2B.dst_ns, "cfg");
	assert_true(json_equal(json_object_get(a, "data"), json_object_get(b, "data")));
	assert_string_equal(dt_str(a, "/data/epochs"), "20"); /* B's change */
	json_decref(a);
	json_decref(b);
	wait_trainer(&A2B, A2B.dst, A2B.dst_ns, 0, "2", 20000);
	assert_int_equal(replicas(A2B.src, n), 2);

	target_cmd(&A2B, "failback", NULL);
	/* A's source back on: it takes NS back and B stays standby */
	tu_pair_source_start(&A2B, NULL);
	for (long long end = tu_now_ms() + 20000;; tu_msleep(200)) {
		char *text = tu_site_source_run_log(&A2B.site);
		bool back = strstr(text, "event=relocation_returned") != NULL;
		free(text);
		if (back)
			break;
		if (tu_now_ms() > end)
			fail_msg("A's source did not take NS back:\n%s",
				 tu_site_source_run_log(&A2B.site));
	}
	wait_trainer(&A2B, A2B.dst, A2B.dst_ns, 0, "2", 20000);
}

static int teardown(void **state)
{
	(void)state;
	if (B2A.src)
		tu_pair_dispose(&B2A);
	if (A2B.src)
		tu_pair_dispose(&A2B);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_e2e_lifecycle__planned_there_and_home, teardown),
	    cmocka_unit_test_teardown(test_e2e_lifecycle__unplanned_and_home, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
