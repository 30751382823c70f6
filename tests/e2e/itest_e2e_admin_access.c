/*
 * Admin access to devices (DRA, GA in 1.36) waits for the target admins'
 * grant, as users run the pair: the shipped RBAC, drasync-target run (migrate)
 * and drasync-source run (watch) as processes on their ServiceAccount tokens
 * (tu_e2e.h); the v1beta1 cluster the source, the v1 cluster the target.
 *
 * The source namespace carries the source admins' grant (label
 * resource.kubernetes.io/admin-access: "true", without which the source's
 * API server refuses its claims) and holds a template and a claim with
 * adminAccess, a pod using the template, and a plain claim. On the target
 * the plain claim is applied at once; the admin-access ones wait, with their
 * reason in `drasync-target status`, in the importer's log and in `verify`
 * (exit 1), and the target Namespace has no grant (drasync neither copies nor
 * sets it). The test, as the target's admin, labels the Namespace: the
 * template and the claim are applied, converted with adminAccess kept, the
 * pod follows and runs with its claim allocated on the target's devices, and
 * `verify` passes, the pod verified, nothing waiting any more.
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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DRIVER "gpu.example.com"
#define RES "resource.k8s.io/v1"
#define LABEL "resource.kubernetes.io/admin-access"
#define LABEL_PTR "/metadata/labels/resource.kubernetes.io~1admin-access"
#define GRANT "{\"metadata\":{\"labels\":{\"" LABEL "\":\"true\"}}}"
#define WAIT_MS 60000

static tu_pair P; /* disposed by teardown(), after a failure too */

static void create_source(tu_pair *p)
{
	const char *ns = p->src_ns, *api = "resource.k8s.io/v1beta1";

	/* the source admins' grant: the source's API server admits the claims below */
	tu_kube_merge(p->src, "v1", "Namespace", NULL, ns, NULL, GRANT);
	tu_kube_create(p->src, tu_kube_doc("apiVersion: %s\nkind: ResourceClaimTemplate\n"
					   "metadata: {name: monitor, namespace: %s}\n"
					   "spec:\n  spec:\n    devices:\n      requests:\n"
					   "      - {name: watch, deviceClassName: " DRIVER ",\n"
					   "         allocationMode: All, adminAccess: true}\n",
					   api, ns));
	tu_kube_create(p->src, tu_kube_doc("apiVersion: %s\nkind: ResourceClaim\n"
					   "metadata: {name: inspect, namespace: %s}\n"
					   "spec:\n  devices:\n    requests:\n"
					   "    - {name: all, deviceClassName: " DRIVER ",\n"
					   "       allocationMode: All, adminAccess: true}\n",
					   api, ns));
	tu_kube_create(p->src, tu_kube_doc("apiVersion: %s\nkind: ResourceClaim\n"
					   "metadata: {name: plain, namespace: %s}\n"
					   "spec:\n  devices:\n    requests:\n"
					   "    - {name: gpu, deviceClassName: " DRIVER "}\n",
					   api, ns));
	tu_kube_create(p->src,
		       tu_kube_doc("apiVersion: v1\nkind: Pod\n"
				   "metadata: {name: dcgm, namespace: %s, labels: {app: dcgm}}\n"
				   "spec:\n  containers:\n"
				   "  - name: c\n    image: registry.k8s.io/pause:3.10\n"
				   "    resources: {claims: [{name: gpus}]}\n"
				   "  resourceClaims:\n"
				   "  - {name: gpus, resourceClaimTemplateName: monitor}\n",
				   ns));
}

/* `drasync-target verify --timeout 2s`: its exit status; *out its stdout (caller frees). */
static int verify(tu_pair *p, char **out)
{
	struct tu_run r;
	int status;

	tu_pair_target_cmd(p, &r, (const char *[]){"verify", "--timeout", "2s", NULL});
	status = r.status;
	if (status >= 128 || strstr(r.err, "Sanitizer"))
		fail_msg("verify crashed (status %d): %s", status, r.err);
	*out = strdup(r.out);
	tu_run_dispose(&r);
	return status;
}

/* `drasync-target status` (text) once it names `want`; fails after WAIT_MS. */
static char *status_saying(tu_pair *p, const char *want)
{
	for (long long end = tu_now_ms() + WAIT_MS;; tu_msleep(500)) {
		struct tu_run r;
		char *text;

		tu_run(&r, NULL,
		       (const char *[]){tu_env("DS_TARGET_BIN"), "status", "--config", p->site.cfg,
					NULL});
		text = strdup(r.out);
		tu_run_dispose(&r);
		if (strstr(text, want))
			return text;
		if (tu_now_ms() > end)
			fail_msg("status does not say '%s' after %d ms:\n%s", want, WAIT_MS, text);
		free(text);
	}
}

static void test_e2e_admin_access__waits_for_the_target_admins_grant(void **state)
{
	tu_pair *const p = &P;
	json_t *ns, *o, *pods;
	char *text, want[600];
	size_t i;

	(void)state;
	tu_pair_init(p, "e2ea", "DS_KUBECONFIG_V1BETA1", "DS_KUBECONFIG_V1", "prod-east",
		     "mode: migrate\n", NULL);
	create_source(p);
	tu_pair_target_start(p);
	tu_pair_source_start(p, NULL);

	/* What asks for nothing of the kind is applied at once. */
	json_decref(
	    tu_e2e_wait_get(p->dst, RES, "ResourceClaim", p->dst_ns, "plain", WAIT_MS, &p->site));

	/* The others wait, and say why: status... */
	snprintf(want, sizeof(want), "waiting ResourceClaimTemplate %s/monitor (source ",
		 p->src_ns);
	text = status_saying(p, want);
	tu_e2e_assert_log("status", text, "request watch asks for adminAccess", true);
	snprintf(want, sizeof(want), "waiting ResourceClaim %s/inspect (source ", p->src_ns);
	tu_e2e_assert_log("status", text, want, true);
	free(text);
	/* ...the importer's log (event apply, state waiting) and the source's (target_waiting)...
	 */
	text = tu_site_run_log(&p->site);
	snprintf(want, sizeof(want), "target=\"ResourceClaimTemplate %s/monitor\" seq=", p->dst_ns);
	tu_e2e_assert_log("target log", text, want, true);
	snprintf(want, sizeof(want),
		 "state=waiting reason=\"waits for admin access: request watch asks for "
		 "adminAccess, which the target admits only in a Namespace labelled " LABEL
		 ": \\\"true\\\"; Namespace %s on the target lacks it (a grant of the target's "
		 "admins: drasync never sets it;",
		 p->dst_ns);
	tu_e2e_assert_log("target log", text, want, true);
	free(text);
	snprintf(
	    want, sizeof(want),
	    "event=target_waiting object=resource.k8s.io/ResourceClaim/%s/inspect seq=", p->src_ns);
	/* the outcome travels back in a later Ack than the one status reads from */
	for (long long end = tu_now_ms() + WAIT_MS;; tu_msleep(200)) {
		text = tu_site_source_run_log(&p->site);
		if (strstr(text, want) || tu_now_ms() > end)
			break;
		free(text);
	}
	tu_e2e_assert_log("source log", text, want, true);
	tu_e2e_assert_log("source log", text,
			  "reason=\"waits for admin access: request all asks for adminAccess",
			  true);
	free(text);
	/* ...and verify, which fails while they wait. */
	assert_int_equal(verify(p, &text), 1);
	snprintf(want, sizeof(want),
		 "ResourceClaimTemplate %s/monitor (active): NOT verified: asks for admin access "
		 "to devices and waits: Namespace %s on the target lacks label " LABEL ": \"true\"",
		 p->dst_ns, p->dst_ns);
	tu_e2e_assert_log("verify", text, want, true);
	free(text);
	/* Nothing of them on the target, and no grant copied from the source. */
	assert_null(tu_e2e_get(p->dst, RES, "ResourceClaimTemplate", p->dst_ns, "monitor"));
	assert_null(tu_e2e_get(p->dst, RES, "ResourceClaim", p->dst_ns, "inspect"));
	assert_null(tu_e2e_get(p->dst, "v1", "Pod", p->dst_ns, "dcgm"));
	ns = tu_e2e_get(p->dst, "v1", "Namespace", NULL, p->dst_ns);
	assert_non_null(ns);
	assert_null(dt_get(ns, LABEL_PTR));
	json_decref(ns);

	/* The target's admin grants it: they are applied at the importer's next look. */
	tu_kube_merge(p->dst, "v1", "Namespace", NULL, p->dst_ns, NULL, GRANT);
	o = tu_e2e_wait_get(p->dst, RES, "ResourceClaimTemplate", p->dst_ns, "monitor", WAIT_MS,
			    &p->site);
	assert_true(json_is_true(dt_get(o, "/spec/spec/devices/requests/0/exactly/adminAccess")));
	assert_string_equal(dt_str(o, "/spec/spec/devices/requests/0/exactly/allocationMode"),
			    "All");
	json_decref(o);
	o = tu_e2e_wait_get(p->dst, RES, "ResourceClaim", p->dst_ns, "inspect", WAIT_MS, &p->site);
	assert_true(json_is_true(dt_get(o, "/spec/devices/requests/0/exactly/adminAccess")));
	json_decref(o);
	/* The pod followed its template and runs, its claim allocated on the target. */
	pods = tu_e2e_wait_running(p->dst, p->dst_ns, "app=dcgm", 1, 90000, &p->site);
	json_array_foreach (pods, i, o)
		assert_int_equal(tu_e2e_assert_pod_claims(p->dst, RES, o, DRIVER), 1);
	json_decref(pods);

	/* verify passes: the pod verified on its admin-access claim; nothing waits any more. */
	for (long long end = tu_now_ms() + WAIT_MS;; tu_msleep(500)) {
		int rc = verify(p, &text);

		snprintf(want, sizeof(want), "Pod %s/dcgm (active): verified in ", p->dst_ns);
		if (rc == 0 && strstr(text, want))
			break;
		if (tu_now_ms() > end)
			fail_msg("verify (exit %d) after %d ms:\n%s", rc, WAIT_MS, text);
		free(text);
	}
	tu_e2e_assert_log("verify", text, "Running, 1 claim allocated", true);
	tu_e2e_assert_log("verify", text, "1 verified, 0 NOT verified", true);
	tu_e2e_assert_log("verify", text, "admin access", false);
	free(text);

	text = tu_site_run_log(&p->site);
	tu_e2e_assert_log("target log", text, "state=failed", false);
	tu_e2e_assert_log("target log", text, "forbidden", false);
	free(text);
	text = tu_site_source_run_log(&p->site);
	tu_e2e_assert_log("source log", text, "level=error", false);
	free(text);

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
	    cmocka_unit_test_teardown(test_e2e_admin_access__waits_for_the_target_admins_grant,
				      teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
