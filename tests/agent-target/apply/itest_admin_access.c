/*
 * Admin access to devices (DRA, Kubernetes 1.36 GA) against the real v1
 * control plane (fixture kube_v1, Kubernetes 1.37): a claim and a template
 * with adminAccess wait, with their reason, while the target namespace lacks
 * the admins' grant (label resource.kubernetes.io/admin-access: "true"),
 * which drasync neither copies from the source nor sets; the pod that uses the
 * template waits for it; once the test (the target's admin) labels the
 * namespace they are applied, and a later apply of the Namespace keeps the
 * label. `status` and `verify` say it as they go.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/k8s_object.h"
#include "dstest.h"
#include "testutil.h"
#include "tu_apply.h"
#include "tu_kube.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define LABEL_PTR "/metadata/labels/resource.kubernetes.io~1admin-access"

static void commit_namespace(tu_apply *e, const char *team)
{
	/* the source's admins granted admin access there: not the target's grant */
	tu_apply_commit1(e, tu_objf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: '%s'\n"
				    "  labels: {resource.kubernetes.io/admin-access: 'true',"
				    " team: '%s'}\n",
				    e->src, team));
}

/* `drasync-target status` or `verify --timeout 2s` on the site, as a user runs them. */
static void run_cmd(tu_apply *e, struct tu_run *r, const char *verb)
{
	bool verify = strcmp(verb, "verify") == 0;

	tu_run(r, NULL,
	       (const char *[]){tu_env("DS_TARGET_BIN"), verb, "--config", e->config,
				verify ? "--kubeconfig" : NULL, tu_env("DS_KUBECONFIG_V1"),
				"--timeout", "2s", NULL});
	fprintf(stderr, "%s -> %d\n%s%s", verb, r->status, r->out, r->err);
	if (r->status >= 128 || strstr(r->err, "Sanitizer"))
		fail_msg("%s crashed (status %d)", verb, r->status);
}

static void test_itest_admin_access__waits_for_the_label_then_applies(void **state)
{
	tu_apply *e = tu_apply_new("admin-access", NULL);
	const char *label = "{\"metadata\":{\"labels\":{\"resource.kubernetes.io/admin-access\":"
			    "\"true\"}}}";
	json_t *ns, *o;
	struct tu_run r;
	char want[400];

	(void)state;
	commit_namespace(e, "gpu");
	tu_apply_commit1(e, tu_objf("apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\n"
				    "metadata: {name: monitor, namespace: '%s'}\n"
				    "spec:\n  spec:\n    devices:\n      requests:\n"
				    "      - name: watch\n        exactly:\n"
				    "          deviceClassName: gpu.example.com\n"
				    "          allocationMode: All\n          adminAccess: true\n",
				    e->src));
	/* a v1beta1 claim: converted to v1, adminAccess moves under exactly */
	tu_apply_commit1(e, tu_objf("apiVersion: resource.k8s.io/v1beta1\nkind: ResourceClaim\n"
				    "metadata: {name: inspect, namespace: '%s'}\n"
				    "spec:\n  devices:\n    requests:\n"
				    "    - {name: all, deviceClassName: gpu.example.com,"
				    " allocationMode: All, adminAccess: true}\n",
				    e->src));
	tu_apply_commit1(
	    e, tu_objf("apiVersion: v1\nkind: Pod\nmetadata: {name: dcgm, namespace: '%s'}\n"
		       "spec:\n  containers:\n  - name: c\n    image: busybox\n"
		       "    resources: {claims: [{name: gpus}]}\n"
		       "  resourceClaims:\n  - {name: gpus, resourceClaimTemplateName: monitor}\n",
		       e->src));
	/* and one that asks for nothing of the kind: applied at once */
	tu_apply_commit1(e,
			 tu_objf("apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\n"
				 "metadata: {name: plain, namespace: '%s'}\n"
				 "spec:\n  devices:\n    requests:\n"
				 "    - {name: gpu, exactly: {deviceClassName: gpu.example.com}}\n",
				 e->src));
	tu_apply_settle(e);

	/* the Namespace is there, without the source's grant */
	ns = tu_apply_target_get(e, "v1", "Namespace", e->dst);
	assert_non_null(ns);
	assert_null(dt_get(ns, LABEL_PTR));
	assert_string_equal(dt_str(ns, "/metadata/labels/team"), "gpu");
	json_decref(ns);
	tu_apply_assert_state(e, "resource.k8s.io/v1", "ResourceClaim", "plain", DS_APPLY_APPLIED,
			      NULL);
	tu_apply_assert_state(e, "resource.k8s.io/v1", "ResourceClaimTemplate", "monitor",
			      DS_APPLY_WAITING,
			      "request watch asks for adminAccess, which the target admits only in "
			      "a Namespace labelled resource.kubernetes.io/admin-access: \"true\"");
	tu_apply_assert_state(e, "resource.k8s.io/v1", "ResourceClaimTemplate", "monitor",
			      DS_APPLY_WAITING, "drasync never sets it");
	tu_apply_assert_state(e, "resource.k8s.io/v1beta1", "ResourceClaim", "inspect",
			      DS_APPLY_WAITING, "request all asks for adminAccess");
	tu_apply_assert_state(e, "v1", "Pod", "dcgm", DS_APPLY_WAITING, "ResourceClaimTemplate");
	assert_null(
	    tu_apply_target_get(e, "resource.k8s.io/v1", "ResourceClaimTemplate", "monitor"));
	assert_null(tu_apply_target_get(e, "resource.k8s.io/v1", "ResourceClaim", "inspect"));
	assert_null(tu_apply_target_get(e, "v1", "Pod", "dcgm"));

	/* looked at again: still waiting while the namespace lacks the grant */
	tu_msleep(400); /* past wait_retry_ms */
	assert_true(tu_apply_pass(e) > 0);
	tu_apply_assert_state(e, "resource.k8s.io/v1", "ResourceClaimTemplate", "monitor",
			      DS_APPLY_WAITING, "lacks it");

	/* what a user sees: status lists them with the reason; verify says what is missing */
	run_cmd(e, &r, "status");
	snprintf(want, sizeof(want), "waiting ResourceClaimTemplate %s/monitor (source ", e->src);
	assert_non_null(strstr(r.out, want));
	assert_non_null(strstr(r.out, "asks for adminAccess"));
	tu_run_dispose(&r);
	run_cmd(e, &r, "verify");
	assert_int_equal(r.status, 1);
	snprintf(
	    want, sizeof(want),
	    "ResourceClaimTemplate %s/monitor (active): NOT verified: asks for admin access to "
	    "devices and waits: Namespace %s on the target lacks label "
	    "resource.kubernetes.io/admin-access: \"true\"",
	    e->dst, e->dst);
	if (!strstr(r.out, want))
		fail_msg("verify said:\n%s\nwant: %s", r.out, want);
	tu_run_dispose(&r);

	/* the target's admin grants it */
	tu_kube_merge(e->k, "v1", "Namespace", NULL, e->dst, NULL, label);
	tu_msleep(400);
	tu_apply_settle(e);
	tu_apply_assert_state(e, "resource.k8s.io/v1", "ResourceClaimTemplate", "monitor",
			      DS_APPLY_APPLIED, NULL);
	tu_apply_assert_state(e, "resource.k8s.io/v1beta1", "ResourceClaim", "inspect",
			      DS_APPLY_APPLIED, NULL);
	o = tu_apply_target_get(e, "resource.k8s.io/v1", "ResourceClaimTemplate", "monitor");
	assert_non_null(o);
	assert_true(json_is_true(dt_get(o, "/spec/spec/devices/requests/0/exactly/adminAccess")));
	json_decref(o);
	o = tu_apply_target_get(e, "resource.k8s.io/v1", "ResourceClaim", "inspect");
	assert_non_null(o);
	assert_true(json_is_true(dt_get(o, "/spec/devices/requests/0/exactly/adminAccess")));
	json_decref(o);
	/* the pod waited for its template, and follows it */
	tu_msleep(400);
	tu_apply_settle(e);
	tu_apply_assert_state(e, "v1", "Pod", "dcgm", DS_APPLY_APPLIED, NULL);
	o = tu_apply_target_get(e, "v1", "Pod", "dcgm");
	assert_non_null(o);
	json_decref(o);
	/* applied, it waits no more: verify has nothing of it to say */
	run_cmd(e, &r, "verify");
	snprintf(want, sizeof(want), "ResourceClaimTemplate %s/monitor", e->dst);
	if (strstr(r.out, want))
		fail_msg("verify still names the template:\n%s", r.out);
	tu_run_dispose(&r);

	/* a new version of the source's Namespace is applied: the admins' label stays */
	commit_namespace(e, "gpu-ops");
	tu_apply_settle(e);
	ns = tu_apply_target_get(e, "v1", "Namespace", e->dst);
	assert_non_null(ns);
	assert_string_equal(dt_str(ns, "/metadata/labels/team"), "gpu-ops");
	assert_string_equal(dt_str(ns, LABEL_PTR), "true");
	json_decref(ns);
	tu_apply_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_itest_admin_access__waits_for_the_label_then_applies),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
