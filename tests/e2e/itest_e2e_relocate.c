/*
 * Planned relocation (SPEC §5), as users run it: both agents as processes on
 * the shipped RBAC's tokens, the source's with the opt-in relocate Role
 * (deploy/kustomize/source-relocate) in its namespace; v1 source cluster ->
 * v1beta1 target cluster in standby.
 *   - refused: the target's sources[] has no relocate: true; `drasync-source
 *     relocate` exits 1 with the target's reason, the source's workloads are
 *     back (replicas 2, the Pod still there) and carry no
 *     drasync.io/relocated-to mark, the target logs relocate_refused and its
 *     namespace stays standby;
 *   - relocated: relocate: true and a SIGHUP; the same command exits 0 and
 *     prints the outcome; on the target the Deployment runs 2 pods and the
 *     Pod 1, each claim allocated on the target's devices; on the source the
 *     Deployment is parked (replicas 0, drasync.io/replicas 2) and the bare
 *     Pod deleted; `drasync-source status` says relocated; the parked form
 *     never reaches the target (it keeps 2 replicas); running the command
 *     again does nothing twice (one relocation record in the outbox).
 *   - crashes: with drasync-source run stopped, the trainer scaled 2 -> 1 and
 *     a ConfigMap made (only the command's final pass can carry them), then
 *     `relocate` SIGKILLed once it parked; drasync-source run started, the
 *     command run again and the agent SIGKILLed and restarted while it
 *     waits: the relocation finishes once (one relocation record at the
 *     target, one `relocated` event), B runs 1 trainer with the ConfigMap,
 *     A is parked at 1, and `drasync-target status` lists the relocation.
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
#define DST_API "resource.k8s.io/v1beta1"
#define TARGET_EXTRA                                                                               \
	"mode: standby\n"                                                                          \
	"dra:\n  deviceClassMappings: [{from: gpu.nvidia.com, to: " DRIVER "}]\n"

static tu_pair P; /* disposed by teardown(), after a failure too */

static void create_workloads(tu_pair *p)
{
	const char *ns = p->src_ns;
	static const char claims[] =
	    "resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]\n";

	tu_kube_create(p->src, tu_kube_doc("apiVersion: resource.k8s.io/v1\nkind: "
					   "ResourceClaimTemplate\nmetadata: {name: one-gpu, "
					   "namespace: %s}\nspec: {spec: {devices: {requests: "
					   "[{name: gpu, exactly: {deviceClassName: "
					   "gpu.nvidia.com}}]}}}\n",
					   ns));
	tu_kube_create(p->src,
		       tu_kube_doc("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: %s, "
				   "labels: {app: p}}\nspec:\n  %s  containers: [{name: main, "
				   "image: registry.k8s.io/pause:3.10, resources: {claims: "
				   "[{name: gpu}]}}]\n",
				   ns, claims));
	tu_kube_create(p->src,
		       tu_kube_doc("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: "
				   "trainer, namespace: %s}\nspec:\n  replicas: 2\n  selector: "
				   "{matchLabels: {app: trainer}}\n  template:\n    metadata: "
				   "{labels: {app: trainer}}\n    spec:\n      %s      containers: "
				   "[{name: main, image: registry.k8s.io/pause:3.10, resources: "
				   "{claims: [{name: gpu}]}}]\n",
				   ns, claims));
}

static long long replicas(ds_kube *k, const char *ns)
{
	json_t *o = tu_e2e_get(k, "apps/v1", "Deployment", ns, "trainer");
	json_t *v = o ? dt_get(o, "/spec/replicas") : NULL;
	long long n = json_is_integer(v) ? (long long)json_integer_value(v) : -1;

	json_decref(o);
	return n;
}

/* drasync-source relocate on the source's token; its result (caller disposes). */
static void relocate(tu_pair *p, struct tu_run *r)
{
	tu_run(r, NULL,
	       (const char *[]){tu_env("DS_SOURCE_BIN"), "relocate", "--config", p->site.source_cfg,
				"--kubeconfig", p->rbac.source_kubeconfig, "--namespace", p->src_ns,
				"--timeout", "75s", NULL});
}

static void assert_has(const char *what, const struct tu_run *r, const char *needle)
{
	if (!strstr(r->out, needle) && !strstr(r->err, needle))
		fail_msg("%s: no '%s' (exit %d)\nstdout:\n%s\nstderr:\n%s", what, needle, r->status,
			 r->out, r->err);
}

static void wait_target_log(tu_pair *p, const char *needle, int timeout_ms)
{
	for (long long end = tu_now_ms() + timeout_ms;; tu_msleep(200)) {
		char *log = tu_site_run_log(&p->site);
		bool found = strstr(log, needle) != NULL;

		free(log);
		if (found)
			return;
		if (tu_now_ms() > end)
			tu_e2e_assert_log("target log", tu_site_run_log(&p->site), needle, true);
	}
}

static void test_e2e_relocate__refused_then_relocated(void **state)
{
	tu_pair *const p = &P;
	struct tu_run r;
	json_t *o, *pods, *pod;
	char *text;
	size_t i;

	(void)state;
	tu_pair_init(p, "e2er", "DS_KUBECONFIG_V1", "DS_KUBECONFIG_V1BETA1", "prod-east",
		     TARGET_EXTRA, NULL);
	create_workloads(p);
	tu_pair_grant_relocate(p);
	tu_pair_target_start(p);
	tu_pair_source_start(p, NULL);

	/* A→B standby: the Deployment at 0 with its count kept. */
	json_decref(tu_e2e_wait_get(p->dst, "apps/v1", "Deployment", p->dst_ns, "trainer", 60000,
				    &p->site));
	json_decref(tu_e2e_wait_get(p->dst, DST_API, "ResourceClaimTemplate", p->dst_ns, "one-gpu",
				    20000, &p->site));
	assert_int_equal(replicas(p->dst, p->dst_ns), 0);

	/* Refused: the target's sources[] does not grant relocate. */
	relocate(p, &r);
	assert_int_equal(r.status, 1);
	assert_has("refused", &r, "may not relocate: sources[].relocate is false");
	assert_has("refused", &r, "back from standby");
	tu_run_dispose(&r);
	wait_target_log(p, "event=relocate_refused", 5000);
	assert_int_equal(replicas(p->src, p->src_ns), 2);
	o = tu_e2e_get(p->src, "v1", "Pod", p->src_ns, "p");
	assert_non_null(o);
	json_decref(o);
	/* Nothing went: no relocation's mark stays behind on the source's objects. */
	o = tu_e2e_get(p->src, "apps/v1", "Deployment", p->src_ns, "trainer");
	assert_non_null(o);
	assert_null(dt_get(o, "/metadata/annotations/drasync.io~1relocated-to"));
	json_decref(o);
	o = tu_e2e_get(p->src, "resource.k8s.io/v1", "ResourceClaimTemplate", p->src_ns, "one-gpu");
	assert_non_null(o);
	assert_null(dt_get(o, "/metadata/annotations/drasync.io~1relocated-to"));
	json_decref(o);
	assert_int_equal(replicas(p->dst, p->dst_ns), 0);

	/* Granted: relocate: true, read again on SIGHUP. */
	assert_true(asprintf(&text,
			     "identity: {namespace: drasync}\nnamespaceMappings: {%s: %s}\n"
			     "sources: [{name: prod-east, namespaces: ['*'], relocate: true}]\n"
			     "%s",
			     p->src_ns, p->dst_ns, TARGET_EXTRA) > 0);
	tu_site_write_config(&p->site, text);
	free(text);
	assert_int_equal(kill(p->site.agent_pid, SIGHUP), 0);
	wait_target_log(p, "event=reloaded", 10000);

	relocate(p, &r);
	if (r.status != 0)
		fail_msg("relocate: exit %d\nstdout:\n%s\nstderr:\n%s\ntarget log:\n%s", r.status,
			 r.out, r.err, tu_site_run_log(&p->site));
	assert_has("relocated", &r, "relocated: ");
	assert_has("relocated", &r, "verified active");
	assert_has("relocated", &r, "replicas 2 -> 0");
	assert_has("relocated", &r, "Pod ");
	tu_run_dispose(&r);

	/* B runs it, each claim on B's devices; A is parked. */
	pods = tu_e2e_wait_running(p->dst, p->dst_ns, "app=trainer", 2, 30000, &p->site);
	json_array_foreach (pods, i, pod)
		assert_int_equal(tu_e2e_assert_pod_claims(p->dst, DST_API, pod, DRIVER), 1);
	json_decref(pods);
	pods = tu_e2e_wait_running(p->dst, p->dst_ns, "app=p", 1, 30000, &p->site);
	json_array_foreach (pods, i, pod)
		assert_int_equal(tu_e2e_assert_pod_claims(p->dst, DST_API, pod, DRIVER), 1);
	json_decref(pods);
	o = tu_e2e_get(p->src, "apps/v1", "Deployment", p->src_ns, "trainer");
	assert_non_null(o);
	assert_int_equal(json_integer_value(dt_get(o, "/spec/replicas")), 0);
	assert_string_equal(dt_str(o, "/metadata/annotations/drasync.io~1replicas"), "2");
	json_decref(o);
	tu_e2e_wait_gone(p->src, "v1", "Pod", p->src_ns, "p", 20000, &p->site);

	/* status says so; the parked form did not travel. */
	tu_run(&r, NULL,
	       (const char *[]){tu_env("DS_SOURCE_BIN"), "status", "--config", p->site.source_cfg,
				NULL});
	assert_has("status", &r, "relocated to ");
	tu_run_dispose(&r);
	tu_msleep(2000);
	assert_int_equal(replicas(p->dst, p->dst_ns), 2);

	/* Again: done already, nothing sent twice. */
	relocate(p, &r);
	assert_int_equal(r.status, 0);
	assert_has("again", &r, "was relocated already");
	tu_run_dispose(&r);
	assert_int_equal(tu_site_source_outbox_int(&p->site, "SELECT count(*) FROM relocations"),
			 1);
	assert_int_equal(
	    tu_site_ledger_int(&p->site, "SELECT count(*) FROM relocations WHERE state = 'active'"),
	    1);
	assert_int_equal(tu_site_ledger_int(&p->site, "SELECT count(*) FROM relocations"), 2);
}

/* Wait until the log at path holds one of the needles; fail with it after timeout_ms. */
static void wait_file_has(const char *path, const char *a, const char *b, int timeout_ms)
{
	for (long long end = tu_now_ms() + timeout_ms;; tu_msleep(50)) {
		char *text = tu_read_file(path, NULL);
		bool found = text && (strstr(text, a) || (b && strstr(text, b)));

		if (found || tu_now_ms() > end) {
			if (!found)
				fail_msg("%s: no '%s' after %d ms:\n%s", path, a, timeout_ms,
					 text ? text : "");
			free(text);
			return;
		}
		free(text);
	}
}

static int count_of(const char *text, const char *needle)
{
	int n = 0;

	for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

static void test_e2e_relocate__crashes_finish_once(void **state)
{
	tu_pair *const p = &P;
	char log1[1200], log2[1200], *text;
	const char *argv[16];
	struct tu_run r;
	json_t *o, *pods, *pod, *st, *rels;
	int pid;
	size_t i;

	(void)state;
	tu_pair_init(
	    p, "e2ek", "DS_KUBECONFIG_V1", "DS_KUBECONFIG_V1BETA1", "prod-east",
	    "sources: [{name: prod-east, namespaces: ['*'], relocate: true}]\n" TARGET_EXTRA, NULL);
	create_workloads(p);
	tu_pair_grant_relocate(p);
	tu_pair_target_start(p);
	tu_pair_source_start(p, NULL);
	json_decref(tu_e2e_wait_get(p->dst, "apps/v1", "Deployment", p->dst_ns, "trainer", 60000,
				    &p->site));
	json_decref(tu_e2e_wait_get(p->dst, DST_API, "ResourceClaimTemplate", p->dst_ns, "one-gpu",
				    20000, &p->site));
	tu_site_source_sigterm(&p->site);

	/* Changes no agent saw: only the final pass carries them. */
	tu_kube_merge(p->src, "apps/v1", "Deployment", p->src_ns, "trainer", NULL,
		      "{\"spec\": {\"replicas\": 1}}");
	tu_kube_create(p->src, tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: "
					   "late, namespace: %s}\ndata: {step: final}\n",
					   p->src_ns));

	/* relocate, SIGKILLed once it parked */
	argv[0] = tu_env("DS_SOURCE_BIN");
	argv[1] = "relocate";
	argv[2] = "--config";
	argv[3] = p->site.source_cfg;
	argv[4] = "--kubeconfig";
	argv[5] = p->rbac.source_kubeconfig;
	argv[6] = "--namespace";
	argv[7] = p->src_ns;
	argv[8] = "--timeout";
	argv[9] = "75s";
	argv[10] = NULL;
	snprintf(log1, sizeof(log1), "%s/relocate1.log", p->site.dir);
	snprintf(log2, sizeof(log2), "%s/relocate2.log", p->site.dir);
	tu_write_file(log1, "");
	tu_write_file(log2, "");
	pid = tu_spawn(log1, argv);
	wait_file_has(log1, "parked in", NULL, 30000);
	kill(pid, SIGKILL);
	tu_wait_exit(pid, 5000);
	text = tu_read_file(log1, NULL);
	assert_non_null(strstr(text, "final pass of "));
	free(text);

	/* the agent back, the command again; the agent SIGKILLed and restarted meanwhile */
	tu_pair_source_start(p, NULL);
	pid = tu_spawn(log2, argv);
	/* the first run did not finish: this one goes on with it (parking, or sent) */
	wait_file_has(log2, "going on with the relocation", NULL, 30000);
	tu_site_source_sigkill(&p->site);
	tu_msleep(300);
	tu_pair_source_start(p, NULL);
	if (tu_wait_exit(pid, 90000) != 0) {
		text = tu_read_file(log2, NULL);
		fail_msg("relocate again: not 0\n%s\ntarget log:\n%s", text,
			 tu_site_run_log(&p->site));
	}
	text = tu_read_file(log2, NULL);
	assert_non_null(strstr(text, "relocated: "));
	assert_null(strstr(text, "final pass of ")); /* done once, by the first run */
	free(text);

	/* B runs what A had at the end, each claim on B's devices */
	pods = tu_e2e_wait_running(p->dst, p->dst_ns, "app=trainer", 1, 30000, &p->site);
	json_array_foreach (pods, i, pod)
		assert_int_equal(tu_e2e_assert_pod_claims(p->dst, DST_API, pod, DRIVER), 1);
	json_decref(pods);
	assert_int_equal(replicas(p->dst, p->dst_ns), 1);
	o = tu_e2e_wait_get(p->dst, "v1", "ConfigMap", p->dst_ns, "late", 5000, &p->site);
	assert_string_equal(dt_str(o, "/data/step"), "final");
	json_decref(o);
	o = tu_e2e_get(p->src, "apps/v1", "Deployment", p->src_ns, "trainer");
	assert_non_null(o);
	assert_int_equal(json_integer_value(dt_get(o, "/spec/replicas")), 0);
	assert_string_equal(dt_str(o, "/metadata/annotations/drasync.io~1replicas"), "1");
	json_decref(o);

	/* once: one relocation record reached the target, one failover */
	assert_int_equal(tu_site_ledger_int(&p->site, "SELECT count(*) FROM relocations"), 1);
	assert_int_equal(
	    tu_site_ledger_int(&p->site, "SELECT count(*) FROM relocations WHERE state = 'active'"),
	    1);
	text = tu_site_run_log(&p->site);
	assert_int_equal(count_of(text, "event=relocated "), 1);
	assert_int_equal(count_of(text, "event=relocate_started "), 1);
	free(text);

	/* the target's status lists it */
	st = tu_pair_status(p);
	rels = json_object_get(st, "relocations");
	assert_int_equal(json_array_size(rels), 1);
	assert_string_equal(dt_str(json_array_get(rels, 0), "/source"), "prod-east");
	assert_string_equal(dt_str(json_array_get(rels, 0), "/namespace"), p->src_ns);
	assert_string_equal(dt_str(json_array_get(rels, 0), "/targetNamespace"), p->dst_ns);
	assert_string_equal(dt_str(json_array_get(rels, 0), "/outcome"), "active");
	assert_true(json_is_integer(dt_get(json_array_get(rels, 0), "/finishedAt")));
	json_decref(st);
	tu_run(&r, NULL,
	       (const char *[]){tu_env("DS_TARGET_BIN"), "status", "--config", p->site.cfg, NULL});
	assert_has("target status", &r, "RELOCATION FROM");
	assert_has("target status", &r, p->src_ns);
	tu_run_dispose(&r);
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
	    cmocka_unit_test_teardown(test_e2e_relocate__refused_then_relocated, teardown),
	    cmocka_unit_test_teardown(test_e2e_relocate__crashes_finish_once, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
