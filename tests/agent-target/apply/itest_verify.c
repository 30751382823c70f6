/*
 * Verification against the real v1 control plane (fixture kube_v1: 2 nodes x
 * 4 gpu.example.com devices, a real scheduler and ResourceClaim controller, a
 * node agent that runs pods): workloads go through the ledger and the applier
 * as `run` applies them (tests/support/tu_apply.h), then ds_verify and
 * `drasync-target verify` judge them from the cluster.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/keys.h"
#include "drasync/namespace_mode.h"
#include "drasync/verify.h"
#include "dstest.h"
#include "testutil.h"
#include "tu_apply.h"
#include "tu_kube.h"

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

static void commit_namespace(tu_apply *e)
{
	tu_apply_commit1(e,
			 objf("apiVersion: v1\nkind: Namespace\nmetadata: {name: '%s'}\n", e->src));
}

/* A template of `count` devices of class cls (the source's class: gpu.nvidia.com is mapped). */
static void commit_template(tu_apply *e, const char *name, const char *cls, int count)
{
	tu_apply_commit1(e, objf("apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\n"
				 "metadata: {name: %s, namespace: '%s'}\n"
				 "spec:\n  spec:\n    devices:\n      requests:\n"
				 "      - name: gpu\n        exactly: {deviceClassName: %s, "
				 "allocationMode: ExactCount, count: %d}\n",
				 name, e->src, cls, count));
}

/* A Deployment of `replicas` pods, each with a claim from template tmpl. */
static void commit_deployment(tu_apply *e, const char *name, int replicas, const char *tmpl)
{
	tu_apply_commit1(
	    e,
	    objf("apiVersion: apps/v1\nkind: Deployment\n"
		 "metadata: {name: %s, namespace: '%s'}\n"
		 "spec:\n  replicas: %d\n  selector: {matchLabels: {app: %s}}\n"
		 "  template:\n    metadata: {labels: {app: %s}}\n    spec:\n"
		 "      containers:\n      - name: ctr\n        image: busybox\n"
		 "        command: [sleep, infinity]\n        resources: {claims: [{name: gpu}]}\n"
		 "      resourceClaims:\n      - {name: gpu, resourceClaimTemplateName: %s}\n",
		 name, e->src, replicas, name, name, tmpl));
}

static const char *map_ns(void *cfg, const char *ns)
{
	return ds_target_config_map_namespace(cfg, ns);
}

/* The workloads of the site's ledger, verified with timeout_ms. Caller frees. */
static ds_verify_item *verify_site(tu_apply *e, long long timeout_ms, size_t *n,
				   ds_verify_summary *sum)
{
	ds_verify_modes modes = {e->cfg, e->path, NULL};
	ds_verify_select sel = {.map_ns = map_ns,
				.map_ud = e->cfg,
				.form_of = ds_verify_namespace_form,
				.form_ud = &modes};
	ds_verify_opts o = {.timeout_ms = timeout_ms, .interval_ms = 500};
	ds_verify_item *items = NULL;
	ds_verify *v = NULL;
	ds_err err = {0};

	if (ds_verify_items_from_ledger(e->path, &sel, &items, n, &err) < 0)
		fail_msg("items: %s", err.msg);
	assert_int_equal(ds_verify_new(&v, e->k, &err), 0);
	if (ds_verify_run(v, items, *n, &o, sum, &err) < 0)
		fail_msg("verify: %s", err.msg);
	ds_verify_free(v);
	ds_verify_modes_dispose(&modes);
	for (size_t i = 0; i < *n; i++)
		fprintf(stderr, "  %s %s/%s: %s in %.1f s: %s\n", items[i].kind, items[i].ns,
			items[i].name, items[i].verified ? "verified" : "NOT verified",
			items[i].seconds, items[i].reason);
	return items;
}

/* drasync-target verify --config <the site's file> --kubeconfig <v1> args... */
static void verify_cmd(tu_apply *e, struct tu_run *r, const char *const *args)
{
	const char *argv[16] = {
	    tu_env("DS_TARGET_BIN"),   "verify", "--config", e->config, "--kubeconfig",
	    tu_env("DS_KUBECONFIG_V1")};
	size_t n = 6;

	for (; args[n - 6] && n < 15; n++)
		argv[n] = args[n - 6];
	argv[n] = NULL;
	tu_run(r, NULL, argv);
	fprintf(stderr, "verify -> %d\n%s%s", r->status, r->out, r->err);
}

static void test_itest_verify__deployment_with_a_claim_template_runs_and_verifies(void **state)
{
	tu_apply *e = tu_apply_new("verify-ok", NULL);
	ds_verify_summary sum;
	ds_verify_item *items;
	struct tu_run r;
	char want[300];
	size_t n;

	(void)state;
	commit_namespace(e);
	commit_template(e, "single-gpu", "gpu.nvidia.com", 1);
	commit_deployment(e, "gpu-app", 2, "single-gpu");
	tu_apply_settle(e);

	items = verify_site(e, 90000, &n, &sum);
	assert_int_equal(n, 1);
	assert_string_equal(items[0].kind, "Deployment");
	assert_string_equal(items[0].ns, e->dst);
	assert_int_equal(items[0].form, DS_VERIFY_ACTIVE);
	if (!items[0].verified)
		fail_msg("not verified: %s", items[0].reason);
	assert_string_equal(items[0].reason, "2/2 pods Running, 2 claims allocated");
	assert_int_equal(sum.verified, 1);
	assert_int_equal(sum.not_verified, 0);
	ds_verify_items_free(items, n);

	/* The command: exit 0, the line and the summary; text and json. */
	verify_cmd(e, &r, (const char *[]){"--timeout", "60s", NULL});
	assert_int_equal(r.status, 0);
	snprintf(want, sizeof(want), "Deployment %s/gpu-app (active): verified in ", e->dst);
	assert_non_null(strstr(r.out, want));
	assert_non_null(strstr(r.out, ": 2/2 pods Running, 2 claims allocated\n"));
	assert_non_null(strstr(r.out, "summary: 1 workload, 1 verified, 0 NOT verified"));
	tu_run_dispose(&r);
	verify_cmd(e, &r, (const char *[]){"--namespace", e->dst, "-o", "json", NULL});
	assert_int_equal(r.status, 0);
	{
		json_t *o = json_loads(r.out, 0, NULL);
		assert_non_null(o);
		assert_true(json_is_true(json_object_get(o, "verified")));
		assert_int_equal(json_integer_value(dt_get(o, "/summary/verified")), 1);
		assert_string_equal(dt_str(o, "/workloads/0/name"), "gpu-app");
		json_decref(o);
	}
	tu_run_dispose(&r);
	/* status shows the last verification; healthy. */
	tu_run(&r, NULL,
	       (const char *[]){tu_env("DS_TARGET_BIN"), "status", "--config", e->config, NULL});
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "verification: 1 verified, 0 NOT verified"));
	tu_run_dispose(&r);
	tu_apply_free(e);
}

/* Kept refs (ds_verify_keep_refs): a template read is used again for its time,
 * then read again; a template deleted meanwhile is missed only until then. */
static void test_itest_verify__kept_refs_are_read_again_after_their_time(void **state)
{
	tu_apply *e = tu_apply_new("verify-keep", NULL);
	ds_verify_summary sum;
	ds_verify_item *items;
	ds_verify *v = NULL;
	ds_err err = {0};
	size_t n;

	(void)state;
	commit_namespace(e);
	commit_template(e, "kept-gpu", "gpu.nvidia.com", 1);
	commit_deployment(e, "kept-app", 1, "kept-gpu");
	tu_apply_settle(e);
	items = verify_site(e, 90000, &n, &sum);
	assert_int_equal(n, 1);
	if (!items[0].verified)
		fail_msg("not verified: %s", items[0].reason);

	assert_int_equal(ds_verify_new(&v, e->k, &err), 0);
	ds_verify_keep_refs(v, 1500);
	assert_int_equal(ds_verify_check(v, &items[0]), 1);
	tu_kube_delete(e->k, "resource.k8s.io/v1", "ResourceClaimTemplate", e->dst, "kept-gpu");
	/* within its time: the template as read, still verified */
	assert_int_equal(ds_verify_check(v, &items[0]), 1);
	usleep(1600 * 1000);
	/* after it: read again, gone */
	assert_int_equal(ds_verify_check(v, &items[0]), 0);
	assert_non_null(strstr(items[0].reason, "kept-gpu"));
	ds_verify_free(v);
	ds_verify_items_free(items, n);
	tu_apply_free(e);
}

static void test_itest_verify__more_devices_than_the_target_has_says_the_scheduler(void **state)
{
	tu_apply *e = tu_apply_new("verify-greedy", NULL);
	ds_verify_summary sum;
	ds_verify_item *items;
	struct tu_run r;
	char want[300];
	size_t n;

	(void)state;
	commit_namespace(e);
	/* 9 devices in one claim: every node publishes 8 */
	commit_template(e, "nine-gpus", "gpu.example.com", 9);
	commit_deployment(e, "greedy", 1, "nine-gpus");
	tu_apply_settle(e);

	items = verify_site(e, 15000, &n, &sum);
	assert_int_equal(n, 1);
	assert_false(items[0].verified);
	assert_true(items[0].seconds >= 14.0);
	/* the PodScheduled=False message of the scheduler, and the claim left unallocated */
	assert_non_null(strstr(items[0].reason, "is not scheduled: 0/2 nodes are available"));
	assert_non_null(strstr(items[0].reason, "cannot allocate all claims"));
	assert_non_null(strstr(items[0].reason, "is not allocated"));
	assert_int_equal(sum.not_verified, 1);
	ds_verify_items_free(items, n);

	verify_cmd(e, &r, (const char *[]){"--timeout", "2s", NULL});
	assert_int_equal(r.status, 1);
	snprintf(want, sizeof(want), "Deployment %s/greedy (active): NOT verified: pod greedy-",
		 e->dst);
	assert_non_null(strstr(r.out, want));
	assert_non_null(strstr(r.out, "is not scheduled: 0/2 nodes are available"));
	assert_non_null(strstr(r.out, "summary: 1 workload, 0 verified, 1 NOT verified"));
	tu_run_dispose(&r);
	/* status: needs attention, with the reason */
	tu_run(&r, NULL,
	       (const char *[]){tu_env("DS_TARGET_BIN"), "status", "--config", e->config, NULL});
	assert_int_equal(r.status, 1);
	snprintf(want, sizeof(want), "NOT verified Deployment %s/greedy (active, ", e->dst);
	assert_non_null(strstr(r.out, want));
	assert_non_null(strstr(r.out, "needs attention: workloads failed their last verification"));
	tu_run_dispose(&r);
	tu_apply_free(e);
}

static void test_itest_verify__claim_naming_a_missing_device_class_names_it(void **state)
{
	tu_apply_opts o = {.dra_yaml = "  requireTargetObjects: false\n"};
	tu_apply *e = tu_apply_new("verify-noclass", &o);
	ds_verify_summary sum;
	ds_verify_item *items;
	char cls[100], want[300];
	size_t n;

	(void)state;
	snprintf(cls, sizeof(cls), "itest-missing-%u.example.com", tu_rand());
	commit_namespace(e);
	tu_apply_commit1(e, objf("apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\n"
				 "metadata: {name: lonely, namespace: '%s'}\n"
				 "spec:\n  devices:\n    requests:\n"
				 "    - name: gpu\n      exactly: {deviceClassName: %s}\n",
				 e->src, cls));
	tu_apply_commit1(e, objf("apiVersion: v1\nkind: Pod\nmetadata: {name: wants-lonely, "
				 "namespace: '%s'}\n"
				 "spec:\n  containers:\n  - name: ctr\n    image: busybox\n"
				 "    resources: {claims: [{name: gpu}]}\n"
				 "  resourceClaims:\n  - {name: gpu, resourceClaimName: lonely}\n",
				 e->src));
	tu_apply_settle(e);

	items = verify_site(e, 5000, &n, &sum);
	assert_int_equal(n, 1);
	assert_string_equal(items[0].kind, "Pod");
	assert_false(items[0].verified);
	snprintf(want, sizeof(want),
		 "DeviceClass %s (requested by ResourceClaim lonely) does not exist on the target",
		 cls);
	assert_non_null(strstr(items[0].reason, want));
	assert_non_null(strstr(items[0].reason, "ResourceClaim lonely of pod wants-lonely is not "
						"allocated"));
	ds_verify_items_free(items, n);
	tu_apply_free(e);
}

static void test_itest_verify__standby_is_parked_and_held(void **state)
{
	tu_apply_opts o = {.mode = "standby"};
	tu_apply *e = tu_apply_new("verify-standby", &o);
	ds_verify_summary sum;
	ds_verify_item *items;
	size_t n;

	(void)state;
	commit_namespace(e);
	commit_template(e, "single-gpu", "gpu.nvidia.com", 1);
	commit_deployment(e, "gpu-app", 3, "single-gpu");
	tu_apply_commit1(e, objf("apiVersion: batch/v1\nkind: Job\nmetadata: {name: once, "
				 "namespace: '%s'}\n"
				 "spec:\n  template:\n    spec:\n      restartPolicy: Never\n"
				 "      containers:\n      - {name: ctr, image: busybox}\n",
				 e->src));
	tu_apply_settle(e);

	items = verify_site(e, 0, &n, &sum);
	assert_int_equal(n, 2);
	assert_string_equal(items[0].kind, "Deployment");
	assert_int_equal(items[0].form, DS_VERIFY_STANDBY);
	assert_true(items[0].verified);
	assert_string_equal(items[0].reason,
			    "parked: replicas 0 (source count 3 in drasync.io/replicas)");
	assert_string_equal(items[1].kind, "Job");
	assert_true(items[1].held);
	assert_true(items[1].verified);
	assert_string_equal(items[1].reason, "held in the ledger, not on the cluster");
	assert_int_equal(sum.verified, 2);
	ds_verify_items_free(items, n);

	/* The ledger says the namespace is active (as failover leaves it): the
	 * parked Deployment is now what is wrong, whatever the file's mode. */
	{
		ds_namespace_modes *nm = NULL;
		ds_err err = {0};
		assert_int_equal(ds_namespace_modes_open(&nm, e->path, &err), 0);
		assert_int_equal(ds_namespace_modes_set(nm, e->dst, DS_MODE_MIGRATE, "test", &err),
				 1);
		ds_namespace_modes_free(nm);
	}
	items = verify_site(e, 0, &n, &sum);
	assert_int_equal(n, 2);
	assert_int_equal(items[0].form, DS_VERIFY_ACTIVE);
	assert_false(items[0].verified);
	assert_non_null(strstr(items[0].reason, "still parked"));
	ds_verify_items_free(items, n);
	tu_apply_free(e);
}

static void test_itest_verify__command_usage_and_no_ledger_exit_2(void **state)
{
	char *dir = tu_mkdtemp("verify-cmd");
	char config[1100], text[1400];
	struct tu_run r;
	tu_apply *e;

	(void)state;
	snprintf(config, sizeof(config), "%s/target.yaml", dir);
	snprintf(text, sizeof(text),
		 "apiVersion: drasync.io/v1alpha1\nkind: TargetConfig\nmode: migrate\n"
		 "stateDir: '%s'\n",
		 dir);
	tu_write_file(config, text);
	tu_run(&r, NULL,
	       (const char *[]){tu_env("DS_TARGET_BIN"), "verify", "--config", config, NULL});
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "no ledger at"));
	assert_non_null(strstr(r.err, "drasync-target run --config"));
	tu_run_dispose(&r);
	tu_run(&r, NULL,
	       (const char *[]){tu_env("DS_TARGET_BIN"), "verify", "--config", config, "--timeout",
				"5 minutes", NULL});
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "--timeout: '5 minutes'"));
	tu_run_dispose(&r);
	tu_run(&r, NULL, (const char *[]){tu_env("DS_TARGET_BIN"), "verify", NULL});
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "--config FILE is required"));
	tu_run_dispose(&r);
	tu_run(&r, NULL, (const char *[]){tu_env("DS_TARGET_BIN"), "verify", "--help", NULL});
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "Examples:"));
	tu_run_dispose(&r);
	free(dir);

	/* A namespace with no workload: which namespaces have some. */
	e = tu_apply_new("verify-ns", NULL);
	commit_namespace(e);
	commit_template(e, "single-gpu", "gpu.nvidia.com", 1);
	commit_deployment(e, "gpu-app", 0, "single-gpu");
	tu_apply_settle(e);
	verify_cmd(e, &r, (const char *[]){"--namespace", "verify-ns", NULL});
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "no workload in namespace verify-ns"));
	assert_non_null(strstr(r.err, e->dst));
	tu_run_dispose(&r);
	/* 0 replicas wanted is verified at once */
	verify_cmd(e, &r, (const char *[]){"--timeout", "0", NULL});
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, " s: 0 replicas wanted\n"));
	tu_run_dispose(&r);
	tu_apply_free(e);
}

/* The target agent of the running case: stopped by the teardown even when an assertion fails. */
static int running_target;

static int stop_target(void **state)
{
	(void)state;
	if (running_target > 0) {
		kill(running_target, SIGKILL);
		tu_wait_exit(running_target, 5000);
	}
	running_target = 0;
	return 0;
}

/* Wait until the log has a line holding both a and b; fails after timeout_ms. */
static void wait_log(const char *path, const char *a, const char *b, long long timeout_ms)
{
	long long end = tu_now_ms() + timeout_ms;

	for (;;) {
		char *log = tu_read_file(path, NULL);
		bool found = false;

		for (char *line = strtok(log, "\n"); line && !found; line = strtok(NULL, "\n"))
			found = strstr(line, a) && strstr(line, b);
		free(log);
		if (found)
			return;
		if (tu_now_ms() > end) {
			log = tu_read_file(path, NULL);
			fail_msg("no line with '%s' and '%s' in the log:\n%s", a, b, log);
		}
		tu_msleep(200);
	}
}

/*
 * drasync-target run applies what the ledger holds (no source needs to
 * connect) and verifies each workload: event=verified for the one that runs,
 * event=not_verified with the scheduler's words at --verify-timeout for the
 * one that asks for more devices than a node has; status shows both.
 */
static void test_itest_verify__run_verifies_what_it_applies(void **state)
{
	tu_apply *e = tu_apply_new("verify-run", NULL);
	ds_keypair server, source;
	char cfg[1100], log[1100], auth[1100], line[300], *base, *text;
	ds_err err = {0};
	struct tu_run r;
	int pid;

	(void)state;
	commit_namespace(e);
	commit_template(e, "single-gpu", "gpu.nvidia.com", 1);
	commit_template(e, "nine-gpus", "gpu.example.com", 9);
	commit_deployment(e, "fine", 1, "single-gpu");
	commit_deployment(e, "greedy", 1, "nine-gpus");
	/* The agent's file: the site's, with keys and a port of its own choosing. */
	assert_int_equal(ds_keys_generate(&server, &err), 0);
	assert_int_equal(ds_keys_generate(&source, &err), 0);
	assert_int_equal(ds_keys_write(e->dir, "target", &server, true, &err), 0);
	snprintf(auth, sizeof(auth), "%s/authorized_sources", e->dir);
	snprintf(line, sizeof(line), "prod-east %s\n", source.public_z85);
	tu_write_file(auth, line);
	base = tu_read_file(e->config, NULL);
	assert_true(asprintf(&text,
			     "%slisten: 'tcp://127.0.0.1:*'\n"
			     "keys: {secretKeyFile: '%s/target.key', authorizedSources: '%s'}\n"
			     /* the shared cluster's drasync/drasync-ledger is no test's */
			     "identity: {namespace: ds-noid-%d}\n",
			     base, e->dir, auth, (int)getpid()) > 0);
	snprintf(cfg, sizeof(cfg), "%s/run.yaml", e->dir);
	tu_write_file(cfg, text);
	free(text);
	free(base);
	snprintf(log, sizeof(log), "%s/run.log", e->dir);
	tu_write_file(log, "");
	pid = tu_spawn(log, (const char *[]){tu_env("DS_TARGET_BIN"), "run", "--config", cfg,
					     "--kubeconfig", tu_env("DS_KUBECONFIG_V1"),
					     "--verify-timeout", "8s", NULL});
	running_target = pid;

	wait_log(log, "event=verified kind=Deployment", "name=fine form=active", 60000);
	wait_log(log, "event=verified", "reason=\"1/1 pods Running, 1 claim allocated\"", 1000);
	wait_log(log, "event=not_verified kind=Deployment", "name=greedy", 60000);
	wait_log(log, "name=greedy", "is not scheduled: 0/2 nodes are available", 1000);
	/* none left to verify: the summary */
	wait_log(log, "event=verification_summary", "verified=1 not_verified=1", 5000);
	tu_run(&r, NULL,
	       (const char *[]){tu_env("DS_TARGET_BIN"), "status", "--config", cfg, NULL});
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.out, "verification: 1 verified, 1 NOT verified"));
	assert_non_null(strstr(r.out, "/greedy (active, "));
	tu_run_dispose(&r);

	kill(pid, SIGTERM);
	assert_int_equal(tu_wait_exit(pid, 20000), 0);
	running_target = 0;
	tu_apply_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_itest_verify__deployment_with_a_claim_template_runs_and_verifies),
	    cmocka_unit_test(
		test_itest_verify__more_devices_than_the_target_has_says_the_scheduler),
	    cmocka_unit_test(test_itest_verify__claim_naming_a_missing_device_class_names_it),
	    cmocka_unit_test(test_itest_verify__kept_refs_are_read_again_after_their_time),
	    cmocka_unit_test(test_itest_verify__standby_is_parked_and_held),
	    cmocka_unit_test(test_itest_verify__command_usage_and_no_ledger_exit_2),
	    cmocka_unit_test_teardown(test_itest_verify__run_verifies_what_it_applies, stop_target),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
