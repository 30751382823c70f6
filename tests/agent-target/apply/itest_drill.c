/*
 * `drasync-target drill` against the real v1 control plane (fixture kube_v1:
 * 2 nodes x 4 gpu.example.com devices, a real scheduler and ResourceClaim
 * controller, a node agent that runs pods): a standby namespace built by the
 * applier as `run` builds it (tests/support/tu_apply.h), then the command as
 * an operator runs it: the copy runs and verifies, the standby and the
 * ledger stay as they were, the report is kept, --cleanup removes the copy;
 * a copy that cannot be scheduled is not verified and says why; a scratch
 * namespace that is not a drill's is refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/drill.h"
#include "drasync/k8s_object.h"
#include "dstest.h"
#include "testutil.h"
#include "tu_apply.h"
#include "tu_kube.h"
#include "tu_ledger.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *objf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static json_t *objf(const char *fmt, ...)
{
	char text[3000];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	return dt_object(text);
}

/* A standby site: a Namespace, a template of `count` devices, a Deployment of 2 on it, a Pod. */
static tu_apply *standby_site(const char *name, int count)
{
	tu_apply_opts o = {.mode = "standby"};
	tu_apply *e = tu_apply_new(name, &o);

	tu_apply_commit1(e,
			 objf("apiVersion: v1\nkind: Namespace\nmetadata: {name: '%s'}\n", e->src));
	tu_apply_commit1(
	    e, objf("apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\n"
		    "metadata: {name: gpu, namespace: '%s'}\n"
		    "spec:\n  spec:\n    devices:\n      requests:\n"
		    "      - name: gpu\n        exactly: {deviceClassName: gpu.example.com, "
		    "allocationMode: ExactCount, count: %d}\n",
		    e->src, count));
	tu_apply_commit1(
	    e, objf("apiVersion: apps/v1\nkind: Deployment\n"
		    "metadata: {name: trainer, namespace: '%s'}\n"
		    "spec:\n  replicas: 2\n  selector: {matchLabels: {app: trainer}}\n"
		    "  template:\n    metadata: {labels: {app: trainer}}\n    spec:\n"
		    "      containers:\n      - name: ctr\n        image: busybox\n"
		    "        resources: {claims: [{name: gpu}]}\n"
		    "      resourceClaims:\n      - {name: gpu, resourceClaimTemplateName: gpu}\n",
		    e->src));
	tu_apply_commit1(e,
			 objf("apiVersion: v1\nkind: Pod\nmetadata: {name: solo, namespace: '%s'}\n"
			      "spec:\n  containers:\n  - {name: ctr, image: busybox}\n",
			      e->src));
	tu_apply_settle(e);
	return e;
}

static void drill_cmd(tu_apply *e, struct tu_run *r, const char *const *args)
{
	const char *argv[20] = {
	    tu_env("DS_TARGET_BIN"),   "drill", "--config", e->config, "--kubeconfig",
	    tu_env("DS_KUBECONFIG_V1")};
	size_t n = 6;

	for (; args[n - 6] && n < 19; n++)
		argv[n] = args[n - 6];
	argv[n] = NULL;
	tu_run(r, NULL, argv);
	fprintf(stderr, "drill -> %d\n%s%s", r->status, r->out, r->err);
}

static int get(tu_apply *e, const char *api, const char *kind, const char *ns, const char *name,
	       json_t **out)
{
	struct ds_kube_resource res = tu_kube_resource(e->k, api, kind);
	ds_kube_error ke;

	ds_kube_error_clear(&ke);
	*out = NULL;
	return ds_kube_get(e->k, &res, ns, name, NULL, out, &ke);
}

/* What the standby is: the ledger's states and the Deployment's replicas on the cluster. */
static void standby_state(tu_apply *e, char *buf, size_t size)
{
	long long applied = tu_ledger_int(e->path, "SELECT count(*) FROM object_state WHERE state "
						   "= 'applied'"),
		  held = tu_ledger_int(e->path, "SELECT count(*) FROM object_state WHERE state = "
						"'held'");
	json_t *d = NULL;

	assert_int_equal(get(e, "apps/v1", "Deployment", e->dst, "trainer", &d), 0);
	snprintf(buf, size, "applied=%lld held=%lld replicas=%lld", applied, held,
		 (long long)json_integer_value(dt_get(d, "/spec/replicas")));
	json_decref(d);
}

/* The drill reports kept in the site's stateDir. */
static size_t reports(tu_apply *e, json_t **last)
{
	char dir[1200], path[1500];
	struct dirent *de;
	size_t n = 0;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/drills", e->dir);
	d = opendir(dir);
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		n++;
		if (last) {
			snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
			json_decref(*last);
			*last = json_load_file(path, 0, NULL);
		}
	}
	closedir(d);
	return n;
}

static void test_itest_drill__copy_runs_verifies_and_leaves_the_standby(void **state)
{
	tu_apply *e = standby_site("drill-ok", 1);
	char before[200], after[200], into[200], want[600];
	json_t *ns = NULL, *rep = NULL;
	struct tu_run r;

	(void)state;
	standby_state(e, before, sizeof(before));
	assert_string_equal(before, "applied=3 held=1 replicas=0");

	drill_cmd(e, &r, (const char *[]){"--namespace", e->dst, "--timeout", "90s", NULL});
	assert_int_equal(r.status, 0);
	snprintf(into, sizeof(into), "%s-drill", e->dst);
	snprintf(want, sizeof(want), "drill of %s into %s: VERIFIED", e->dst, into);
	assert_non_null(strstr(r.out, want));
	snprintf(want, sizeof(want), "Deployment %s/trainer: verified in ", into);
	assert_non_null(strstr(r.out, want));
	assert_non_null(strstr(r.out, "2/2 pods Running, 2 claims allocated"));
	snprintf(want, sizeof(want), "Pod %s/solo: verified in ", into);
	assert_non_null(strstr(r.out, want));
	assert_non_null(strstr(r.out, "workloads: 2 of 2 verified"));
	tu_run_dispose(&r);

	/* The copy's namespace carries the label; the standby and the ledger did not move. */
	assert_int_equal(get(e, "v1", "Namespace", NULL, into, &ns), 0);
	assert_string_equal(dt_str(ns, "/metadata/labels/drasync.io~1drill"), e->dst);
	json_decref(ns);
	standby_state(e, after, sizeof(after));
	assert_string_equal(after, before);
	assert_int_equal(get(e, "v1", "Pod", e->dst, "solo", &ns), -ENOENT);

	/* The report is kept, every workload in it. */
	assert_int_equal(reports(e, &rep), 1);
	assert_non_null(rep);
	assert_string_equal(dt_str(rep, "/namespace"), e->dst);
	assert_string_equal(dt_str(rep, "/into"), into);
	assert_true(json_is_true(json_object_get(rep, "verified")));
	assert_int_equal(json_array_size(json_object_get(rep, "workloads")), 2);
	/* the template, the Deployment, the Pod (the Namespace is the scratch one) */
	assert_int_equal(json_integer_value(dt_get(rep, "/objects/applied")), 3);
	json_decref(rep);

	/* Again, with --cleanup: the copy is reused, verified, then removed. */
	drill_cmd(e, &r, (const char *[]){"-n", e->dst, "--cleanup", "-o", "json", NULL});
	assert_int_equal(r.status, 0);
	rep = json_loads(r.out, 0, NULL);
	assert_non_null(rep);
	assert_true(json_is_true(json_object_get(rep, "cleanedUp")));
	json_decref(rep);
	assert_non_null(strstr(r.err, "there from an earlier drill"));
	tu_run_dispose(&r);
	ns = NULL;
	{
		int rc = get(e, "v1", "Namespace", NULL, into, &ns);
		/* gone, or on its way out */
		assert_true(rc == -ENOENT ||
			    (rc == 0 && dt_str(ns, "/metadata/deletionTimestamp")));
		json_decref(ns);
	}
	assert_int_equal(reports(e, NULL), 2);
	tu_apply_free(e);
}

/* Every workload kind with a DRA claim, in standby, drilled: each runs (a CronJob is
 * unsuspended: it has no pods before its schedule), none of the standby moves. */
static void test_itest_drill__every_workload_kind_with_claims(void **state)
{
	static const char *const kinds[] = {"Deployment", "StatefulSet", "ReplicaSet",
					    "DaemonSet",  "CronJob",	 "Job"};
	tu_apply_opts o = {.mode = "standby"};
	tu_apply *e = tu_apply_new("drill-kinds", &o);
	const char *pod =
	    "      containers:\n      - name: ctr\n        image: busybox\n"
	    "        resources: {claims: [{name: gpu}]}\n"
	    "      resourceClaims:\n      - {name: gpu, resourceClaimTemplateName: gpu}\n";
	char into[200], want[600];
	struct tu_run r;
	json_t *rep = NULL;
	long long applied, held;

	(void)state;
	tu_apply_commit1(e,
			 objf("apiVersion: v1\nkind: Namespace\nmetadata: {name: '%s'}\n", e->src));
	tu_apply_commit1(
	    e, objf("apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\n"
		    "metadata: {name: gpu, namespace: '%s'}\n"
		    "spec:\n  spec:\n    devices:\n      requests:\n"
		    "      - name: gpu\n        exactly: {deviceClassName: gpu.example.com}\n",
		    e->src));
	tu_apply_commit1(
	    e, objf("apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\n"
		    "metadata: {name: solo-gpu, namespace: '%s'}\n"
		    "spec:\n  devices:\n    requests:\n"
		    "    - name: gpu\n      exactly: {deviceClassName: gpu.example.com}\n",
		    e->src));
	tu_apply_commit1(e, objf("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: "
				 "deploy, namespace: '%s'}\nspec:\n  replicas: 1\n"
				 "  selector: {matchLabels: {app: deploy}}\n  template:\n"
				 "    metadata: {labels: {app: deploy}}\n    spec:\n%s",
				 e->src, pod));
	tu_apply_commit1(e, objf("apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: "
				 "sts, namespace: '%s'}\nspec:\n  replicas: 1\n  serviceName: sts\n"
				 "  selector: {matchLabels: {app: sts}}\n  template:\n"
				 "    metadata: {labels: {app: sts}}\n    spec:\n%s",
				 e->src, pod));
	tu_apply_commit1(e, objf("apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: "
				 "rs, namespace: '%s'}\nspec:\n  replicas: 1\n"
				 "  selector: {matchLabels: {app: rs}}\n  template:\n"
				 "    metadata: {labels: {app: rs}}\n    spec:\n%s",
				 e->src, pod));
	tu_apply_commit1(e, objf("apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: "
				 "ds, namespace: '%s'}\nspec:\n"
				 "  selector: {matchLabels: {app: ds}}\n  template:\n"
				 "    metadata: {labels: {app: ds}}\n    spec:\n%s",
				 e->src, pod));
	tu_apply_commit1(
	    e, objf("apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: "
		    "nightly, namespace: '%s'}\nspec:\n  schedule: '0 3 * * *'\n"
		    "  jobTemplate:\n    spec:\n      template:\n        spec:\n"
		    "          restartPolicy: Never\n"
		    "          containers:\n          - name: ctr\n            image: busybox\n"
		    "            resources: {claims: [{name: gpu}]}\n"
		    "          resourceClaims:\n"
		    "          - {name: gpu, resourceClaimTemplateName: gpu}\n",
		    e->src));
	tu_apply_commit1(e, objf("apiVersion: batch/v1\nkind: Job\nmetadata: {name: once, "
				 "namespace: '%s'}\nspec:\n  template:\n    spec:\n"
				 "      restartPolicy: Never\n%s",
				 e->src, pod));
	tu_apply_commit1(e,
			 objf("apiVersion: v1\nkind: Pod\nmetadata: {name: solo, namespace: "
			      "'%s'}\nspec:\n  containers:\n  - name: ctr\n    image: busybox\n"
			      "    resources: {claims: [{name: gpu}]}\n"
			      "  resourceClaims:\n  - {name: gpu, resourceClaimName: solo-gpu}\n",
			      e->src));
	tu_apply_settle(e);
	applied =
	    tu_ledger_int(e->path, "SELECT count(*) FROM object_state WHERE state = 'applied'");
	held = tu_ledger_int(e->path, "SELECT count(*) FROM object_state WHERE state = 'held'");
	/* the Namespace, the template, the claim and five parked workloads; the Job and the Pod */
	assert_int_equal(applied, 8);
	assert_int_equal(held, 2);

	/* the copy's seven pods (one a node for the DaemonSet) need 7 of the 16 devices */
	tu_kube_wait_devices_free(e->k, 180000);
	drill_cmd(e, &r,
		  (const char *[]){"--namespace", e->dst, "--timeout", "120s", "--cleanup", NULL});
	assert_int_equal(r.status, 0);
	snprintf(into, sizeof(into), "%s-drill", e->dst);
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		snprintf(want, sizeof(want), "%s %s/", kinds[i], into);
		if (!strstr(r.out, want) || !strstr(strstr(r.out, want), ": verified in "))
			fail_msg("%s not verified in the drill:\n%s", kinds[i], r.out);
	}
	snprintf(want, sizeof(want), "Pod %s/solo: verified in ", into);
	assert_non_null(strstr(r.out, want));
	assert_non_null(strstr(r.out, "workloads: 7 of 7 verified"));
	tu_run_dispose(&r);
	/* the standby as it was */
	assert_int_equal(
	    tu_ledger_int(e->path, "SELECT count(*) FROM object_state WHERE state = 'applied'"),
	    applied);
	assert_int_equal(
	    tu_ledger_int(e->path, "SELECT count(*) FROM object_state WHERE state = 'held'"), held);
	assert_int_equal(reports(e, &rep), 1);
	assert_int_equal(json_array_size(json_object_get(rep, "workloads")), 7);
	json_decref(rep);
	tu_apply_free(e);
}

static void test_itest_drill__unschedulable_copy_is_not_verified_and_says_why(void **state)
{
	tu_apply *e = standby_site("drill-greedy", 9); /* 9 devices a pod: nodes have 8 */
	struct tu_run r;
	char into[200];

	(void)state;
	snprintf(into, sizeof(into), "%s-copy", e->dst);
	drill_cmd(e, &r,
		  (const char *[]){"--namespace", e->dst, "--into", into, "--timeout", "5s",
				   "--cleanup", NULL});
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.out, "NOT verified"));
	assert_non_null(strstr(r.out, "cannot allocate all claims"));
	assert_non_null(strstr(r.out, "workloads: 1 of 2 verified"));
	tu_run_dispose(&r);
	tu_apply_free(e);
}

static void test_itest_drill__refuses_what_it_must_not_touch(void **state)
{
	tu_apply *e = standby_site("drill-refuse", 1);
	struct tu_run r;

	(void)state;
	/* The standby namespace itself, and any namespace without the label. */
	drill_cmd(e, &r, (const char *[]){"--namespace", e->dst, "--into", e->dst, NULL});
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "another namespace"));
	tu_run_dispose(&r);
	drill_cmd(e, &r, (const char *[]){"--namespace", e->dst, "--into", "default", NULL});
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "namespace default exists and is not a drill copy of"));
	assert_non_null(strstr(r.err, "--into"));
	tu_run_dispose(&r);
	/* Nothing in the ledger for it. */
	drill_cmd(e, &r, (const char *[]){"--namespace", "no-such-ns", NULL});
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "holds no objects for namespace no-such-ns"));
	tu_run_dispose(&r);
	/* Usage. */
	drill_cmd(e, &r, (const char *[]){NULL});
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "--namespace NS are required"));
	tu_run_dispose(&r);
	drill_cmd(e, &r, (const char *[]){"-n", "a", "-n", "b", NULL});
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "one --namespace at a time"));
	tu_run_dispose(&r);
	drill_cmd(e, &r, (const char *[]){"-n", e->dst, "--timeout", "soon", NULL});
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "a Go duration"));
	tu_run_dispose(&r);
	assert_int_equal(reports(e, NULL), 0);
	tu_apply_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_itest_drill__every_workload_kind_with_claims),
	    cmocka_unit_test(test_itest_drill__copy_runs_verifies_and_leaves_the_standby),
	    cmocka_unit_test(test_itest_drill__unschedulable_copy_is_not_verified_and_says_why),
	    cmocka_unit_test(test_itest_drill__refuses_what_it_must_not_touch),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
