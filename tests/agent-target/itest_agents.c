/*
 * The two agents as an operator runs them, on two real clusters:
 * drasync-target run on the v1beta1 cluster, drasync-source run (once) on the
 * v1 cluster, talking CURVE ZeroMQ over loopback. The source's objects land on
 * the target mapped to their namespace and converted to what it serves.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/keys.h"
#include "testutil.h"
#include "tu_kube.h"

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

struct sites {
	char *dir;
	char target_cfg[1100], source_cfg[1100], target_log[1100];
	char endpoint[256];
	ds_keypair target_keys, source_keys;
	ds_kube *src, *dst;
	char *ns;
	char dst_ns[300];
	int target_pid;
};

static void write_configs(struct sites *s, const char *listen, const char *device_class)
{
	char auth[1100], *text;
	ds_err err = {0};

	assert_int_equal(ds_keys_write(s->dir, "target", &s->target_keys, true, &err), 0);
	assert_int_equal(ds_keys_write(s->dir, "source", &s->source_keys, true, &err), 0);
	snprintf(auth, sizeof(auth), "%s/authorized_sources", s->dir);
	assert_true(asprintf(&text, "prod-east %s\n", s->source_keys.public_z85) > 0);
	tu_write_file(auth, text);
	free(text);
	assert_true(asprintf(&text,
			     "apiVersion: drasync.io/v1alpha1\n"
			     "kind: TargetConfig\n"
			     "listen: \"%s\"\n"
			     "keys: {secretKeyFile: %s/target.key, authorizedSources: %s}\n"
			     "stateDir: %s/target-state\n"
			     "mode: migrate\n"
			     "namespaceMappings: {%s: %s}\n"
			     "dra:\n"
			     "  deviceClassMappings: [{from: gpu.nvidia.com, to: %s}]\n"
			     /* the shared cluster's drasync/drasync-ledger is no test's */
			     "identity: {namespace: ds-noid-%d}\n",
			     listen, s->dir, auth, s->dir, s->ns, s->dst_ns, device_class,
			     (int)getpid()) > 0);
	tu_write_file(s->target_cfg, text);
	free(text);
}

static void write_source_config(struct sites *s)
{
	char *text;

	assert_true(asprintf(&text,
			     "apiVersion: drasync.io/v1alpha1\n"
			     "kind: SourceConfig\n"
			     "clusterName: prod-east\n"
			     "target: {endpoint: \"%s\", serverPublicKey: \"%s\"}\n"
			     "keys: {secretKeyFile: %s/source.key}\n"
			     "stateDir: %s/source-state\n"
			     "namespaces: [%s]\n"
			     "schedule: {mode: once}\n",
			     s->endpoint, s->target_keys.public_z85, s->dir, s->dir, s->ns) > 0);
	tu_write_file(s->source_cfg, text);
	free(text);
}

/* The endpoint the target bound, from its "started" log line. */
static void wait_listening(struct sites *s)
{
	long long end = tu_now_ms() + 30000;

	for (;;) {
		char *log = tu_read_file(s->target_log, NULL);
		const char *p = strstr(log, "event=started listen=");

		if (p) {
			p += strlen("event=started listen=");
			snprintf(s->endpoint, sizeof(s->endpoint), "%.*s", (int)strcspn(p, " \n"),
				 p);
			free(log);
			return;
		}
		if (tu_now_ms() > end)
			fail_msg("drasync-target run did not start:\n%s", log);
		free(log);
		tu_msleep(100);
	}
}

/* Wait until the target's log has a line holding both a and b. */
static void wait_log(struct sites *s, const char *a, const char *b)
{
	long long end = tu_now_ms() + 30000;

	for (;;) {
		char *log = tu_read_file(s->target_log, NULL);
		bool found = false;

		for (char *line = strtok(log, "\n"); line && !found; line = strtok(NULL, "\n"))
			found = strstr(line, a) && strstr(line, b);
		free(log);
		if (found)
			return;
		if (tu_now_ms() > end) {
			log = tu_read_file(s->target_log, NULL);
			fail_msg("no line with '%s' and '%s' in the target's log:\n%s", a, b, log);
		}
		tu_msleep(100);
	}
}

/* Wait for an object on the target cluster; its JSON (caller decrefs). */
static json_t *wait_object(ds_kube *k, const char *api, const char *kind, const char *ns,
			   const char *name, struct sites *s)
{
	struct ds_kube_resource r = tu_kube_resource(k, api, kind);
	long long end = tu_now_ms() + 60000;
	ds_kube_error ke;
	json_t *o = NULL;

	while (ds_kube_get(k, &r, ns, name, NULL, &o, &ke) < 0) {
		if (tu_now_ms() > end) {
			char *log = tu_read_file(s->target_log, NULL);

			fail_msg("%s %s/%s never appeared on the target:\n%s", kind, ns, name, log);
		}
		tu_msleep(200);
	}
	return o;
}

static void test_itest_agents__source_once_lands_mapped_on_the_target(void **state)
{
	struct sites s;
	ds_err err = {0};
	struct tu_run r;
	json_t *o;
	int code;

	(void)state;
	memset(&s, 0, sizeof(s));
	s.dir = tu_mkdtemp("agents");
	snprintf(s.target_cfg, sizeof(s.target_cfg), "%s/target.yaml", s.dir);
	snprintf(s.source_cfg, sizeof(s.source_cfg), "%s/source.yaml", s.dir);
	snprintf(s.target_log, sizeof(s.target_log), "%s/target.log", s.dir);
	assert_int_equal(ds_keys_generate(&s.target_keys, &err), 0);
	assert_int_equal(ds_keys_generate(&s.source_keys, &err), 0);
	s.src = tu_kube_connect(tu_env("DS_KUBECONFIG_V1"));
	s.dst = tu_kube_connect(tu_env("DS_KUBECONFIG_V1BETA1"));
	s.ns = tu_kube_new_namespace(s.src, "ita", "");
	snprintf(s.dst_ns, sizeof(s.dst_ns), "%s-dr", s.ns);

	/* On the source: settings, and a GPU claim template of resource.k8s.io/v1. */
	tu_kube_create(s.src, tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: "
					  "settings, namespace: %s}\ndata: {mode: fast}\n",
					  s.ns));
	tu_kube_create(s.src,
		       tu_kube_doc("apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\n"
				   "metadata: {name: gpu, namespace: %s}\n"
				   "spec: {spec: {devices: {requests: [{name: gpu, exactly: "
				   "{deviceClassName: gpu.nvidia.com}}]}}}\n",
				   s.ns));

	/* The target agent, on a port of its own choosing. */
	write_configs(&s, "tcp://127.0.0.1:*", "gpu.example.com");
	tu_write_file(s.target_log, "");
	s.target_pid = tu_spawn(
	    s.target_log, (const char *[]){tu_env("DS_TARGET_BIN"), "run", "--config", s.target_cfg,
					   "--kubeconfig", tu_env("DS_KUBECONFIG_V1BETA1"), NULL});
	running_target = s.target_pid;
	wait_listening(&s);

	/* The source agent, once. */
	write_source_config(&s);
	tu_run(&r, NULL,
	       (const char *[]){tu_env("DS_SOURCE_BIN"), "run", "--config", s.source_cfg,
				"--kubeconfig", tu_env("DS_KUBECONFIG_V1"), "--timeout", "60s",
				NULL});
	if (r.status != 0)
		fail_msg("drasync-source run exited %d\n%s\n%s", r.status, r.out, r.err);
	/* once waited for the apply results: both objects are applied, not only
	 * committed. */
	{
		const char *line = strstr(r.out, "acknowledged by the target: ");
		unsigned long long applied = 0, held = 1, waiting = 1, failed = 1;

		if (!line ||
		    sscanf(line,
			   "acknowledged by the target: %llu applied, %llu held, %llu waiting, "
			   "%llu failed",
			   &applied, &held, &waiting, &failed) != 4 ||
		    applied < 3 || held || waiting || failed)
			fail_msg("drasync-source run once did not report everything applied "
				 "(namespace, ConfigMap, template at least):\n%s",
				 r.out);
	}
	tu_run_dispose(&r);

	/* On the target: the namespace mapped, the template in v1beta1 with the
	 * device class renamed, the identity annotations set. */
	o = wait_object(s.dst, "v1", "ConfigMap", s.dst_ns, "settings", &s);
	assert_string_equal(json_string_value(json_object_get(json_object_get(o, "data"), "mode")),
			    "fast");
	assert_string_equal(json_string_value(json_object_get(
				json_object_get(json_object_get(o, "metadata"), "annotations"),
				"drasync.io/source-cluster")),
			    "prod-east");
	json_decref(o);
	o = wait_object(s.dst, "resource.k8s.io/v1beta1", "ResourceClaimTemplate", s.dst_ns, "gpu",
			&s);
	{
		const json_t *req = json_array_get(
		    json_object_get(
			json_object_get(json_object_get(json_object_get(o, "spec"), "spec"),
					"devices"),
			"requests"),
		    0);

		assert_string_equal(json_string_value(json_object_get(req, "deviceClassName")),
				    "gpu.example.com");
	}
	json_decref(o);

	/* SIGHUP with a broken file: reported with its place, the rules kept. */
	tu_write_file(s.target_cfg, "apiVersion: drasync.io/v1alpha1\nkind: TargetConfig\n"
				    "mode: sideways\n");
	kill(s.target_pid, SIGHUP);
	wait_log(&s, "event=reload_failed", "target.yaml:3:7");
	/* SIGHUP with new rules: the template is mapped again (its spec cannot
	 * change in place: re-created), with no new record from the source. */
	write_configs(&s, s.endpoint, "gpu.other.example.com");
	kill(s.target_pid, SIGHUP);
	wait_log(&s, "event=reloaded", "mapping_rules=0 device_class_mappings=1");
	{
		long long end = tu_now_ms() + 60000;
		const char *cls = NULL;

		while (tu_now_ms() < end) {
			o = wait_object(s.dst, "resource.k8s.io/v1beta1", "ResourceClaimTemplate",
					s.dst_ns, "gpu", &s);
			cls = json_string_value(json_object_get(
			    json_array_get(
				json_object_get(
				    json_object_get(
					json_object_get(json_object_get(o, "spec"), "spec"),
					"devices"),
				    "requests"),
				0),
			    "deviceClassName"));
			if (cls && strcmp(cls, "gpu.other.example.com") == 0) {
				json_decref(o);
				break;
			}
			json_decref(o);
			cls = NULL;
			tu_msleep(200);
		}
		if (!cls) {
			char *log = tu_read_file(s.target_log, NULL);
			fail_msg("the reloaded device class mapping was never applied:\n%s", log);
		}
	}
	wait_log(&s, "event=apply", "deleted and re-created");

	kill(s.target_pid, SIGTERM);
	code = tu_wait_exit(s.target_pid, 15000);
	running_target = 0;
	if (code != 0) {
		char *log = tu_read_file(s.target_log, NULL);

		fail_msg("drasync-target run exited %d after SIGTERM:\n%s", code, log);
	}
	tu_kube_drop_namespace(s.src, s.ns);
	{
		char *dst = strdup(s.dst_ns);

		tu_kube_drop_namespace(s.dst, dst);
	}
	ds_kube_free(s.src);
	ds_kube_free(s.dst);
	free(s.dir);
}

/* What `run` needs beyond plan's keys is checked before it binds: exit 2. */
static void test_itest_agents__target_run_refuses_a_config_it_cannot_run(void **state)
{
	char *dir = tu_mkdtemp("agents-bad");
	char cfg[1100], *text;
	struct tu_run r;

	(void)state;
	snprintf(cfg, sizeof(cfg), "%s/target.yaml", dir);
	tu_write_file(cfg, "apiVersion: drasync.io/v1alpha1\nkind: TargetConfig\nmode: migrate\n");
	tu_run(&r, NULL, (const char *[]){tu_env("DS_TARGET_BIN"), "run", "--config", cfg, NULL});
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "`listen` is required"));
	tu_run_dispose(&r);

	assert_true(asprintf(&text,
			     "apiVersion: drasync.io/v1alpha1\nkind: TargetConfig\nlisten: "
			     "\"tcp://127.0.0.1:*\"\nkeys: {secretKeyFile: %s/none.key, "
			     "authorizedSources: %s/auth}\nmode: migrate\n",
			     dir, dir) > 0);
	tu_write_file(cfg, text);
	free(text);
	tu_run(&r, NULL, (const char *[]){tu_env("DS_TARGET_BIN"), "run", "--config", cfg, NULL});
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "drasync-target keygen"));
	tu_run_dispose(&r);

	/* SPEC §5: a sources[] name that is not an authorized source, located in the file. */
	tu_run(&r, NULL, (const char *[]){tu_env("DS_TARGET_BIN"), "keygen", "--out", dir, NULL});
	assert_int_equal(r.status, 0);
	tu_run_dispose(&r);
	{
		char pub[1200], auth[1200], line[200] = "";
		FILE *f;

		snprintf(pub, sizeof(pub), "%s/target.pub", dir);
		f = fopen(pub, "r");
		assert_non_null(f);
		while (fgets(line, sizeof(line), f) && line[0] == '#')
			;
		fclose(f);
		snprintf(auth, sizeof(auth), "%s/auth", dir);
		assert_true(asprintf(&text, "prod-east %s", line) > 0);
		tu_write_file(auth, text);
		free(text);
	}
	assert_true(asprintf(&text,
			     "apiVersion: drasync.io/v1alpha1\nkind: TargetConfig\nlisten: "
			     "\"tcp://127.0.0.1:*\"\nkeys: {secretKeyFile: %s/target.key, "
			     "authorizedSources: %s/auth}\nstateDir: %s/state\nmode: migrate\n"
			     "sources:\n- {name: prod-east, namespaces: [ml-team]}\n"
			     "- {name: prod-esat, namespaces: [ml-team-2]}\n",
			     dir, dir, dir) > 0);
	tu_write_file(cfg, text);
	free(text);
	tu_run(&r, NULL, (const char *[]){tu_env("DS_TARGET_BIN"), "run", "--config", cfg, NULL});
	assert_int_equal(r.status, 2);
	if (!strstr(r.err, "target.yaml:9:3:") ||
	    !strstr(r.err, "sources[1].name: 'prod-esat' is not a source of the authorized-sources "
			   "file"))
		fail_msg("run with an unknown source in sources[]: %s", r.err);
	tu_run_dispose(&r);

	tu_run(&r, NULL, (const char *[]){tu_env("DS_TARGET_BIN"), "run", "--help", NULL});
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "Example"));
	tu_run_dispose(&r);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_itest_agents__target_run_refuses_a_config_it_cannot_run),
	    cmocka_unit_test_teardown(test_itest_agents__source_once_lands_mapped_on_the_target,
				      stop_target),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
