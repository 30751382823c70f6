/*
 * drasync-source run and status as an operator runs them: the real binary as
 * a process against the real v1 cluster, pushing to a real CURVE target in
 * this process. Schedules once, watch, interval and cron; exit codes; the
 * target's failures; SIGTERM; status from the files.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "testutil.h"
#include "tu_kube.h"
#include "tu_target.h"

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct site {
	char *dir;
	char config[1100], log[1100], state[1100];
	tu_target *target;
	ds_kube *k;
	char *ns;
};

/* The config of a source replicating s->ns, with `schedule` a YAML flow map. */
static void write_config(struct site *s, const char *endpoint, const char *schedule)
{
	char *text;

	if (asprintf(&text,
		     "apiVersion: drasync.io/v1alpha1\n"
		     "kind: SourceConfig\n"
		     "clusterName: itest-source\n"
		     "target: {endpoint: \"%s\", serverPublicKey: \"%s\"}\n"
		     "keys: {secretKeyFile: %s}\n"
		     "stateDir: %s\n"
		     "namespaces: [%s]\n"
		     "schedule: %s\n",
		     endpoint, tu_target_server_keys(s->target)->public_z85,
		     tu_target_write_source_key(s->target, s->dir), s->state, s->ns, schedule) < 0)
		fail_msg("out of memory");
	tu_write_file(s->config, text);
	free(text);
}

static void site_start(struct site *s, const char *schedule)
{
	memset(s, 0, sizeof(*s));
	s->dir = tu_mkdtemp("cmd-run");
	snprintf(s->config, sizeof(s->config), "%s/source.yaml", s->dir);
	snprintf(s->log, sizeof(s->log), "%s/agent.log", s->dir);
	snprintf(s->state, sizeof(s->state), "%s/state", s->dir);
	s->target = tu_target_start(s->dir, tu_target_verdict_by_name, NULL);
	s->k = tu_kube_connect(tu_env("DS_KUBECONFIG_V1"));
	s->ns = tu_kube_new_namespace(s->k, "itr", "");
	write_config(s, tu_target_endpoint(s->target), schedule);
}

static void site_stop(struct site *s)
{
	tu_kube_drop_namespace(s->k, s->ns);
	ds_kube_free(s->k);
	tu_target_stop(s->target);
	free(s->dir);
}

static void configmap(struct site *s, const char *name, const char *value)
{
	tu_kube_create(s->k, tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, "
					 "namespace: %s}\ndata: {v: '%s'}\n",
					 name, s->ns, value));
}

static char *key(struct site *s, const char *group_kind, const char *name)
{
	static char buf[4][600];
	static int next;
	char *p = buf[next++ % 4];

	snprintf(p, sizeof(buf[0]), "%s/%s/%s", group_kind, s->ns, name);
	return p;
}

/* drasync-source run once, to completion. */
static void run_once(struct site *s, struct tu_run *r, const char *extra)
{
	const char *argv[] = {tu_env("DS_SOURCE_BIN"),
			      "run",
			      "--config",
			      s->config,
			      "--kubeconfig",
			      tu_env("DS_KUBECONFIG_V1"),
			      extra ? "--timeout" : NULL,
			      extra,
			      NULL};

	tu_run(r, NULL, argv);
}

static json_t *status_json(struct site *s, int *exit_code)
{
	const char *argv[] = {
	    tu_env("DS_SOURCE_BIN"), "status", "--config", s->config, "-o", "json", NULL};
	struct tu_run r;
	json_error_t je;
	json_t *o;

	tu_run(&r, NULL, argv);
	*exit_code = r.status;
	o = json_loads(r.out, 0, &je);
	if (!o)
		fail_msg("status -o json printed no JSON (%s):\n%s\n%s", je.text, r.out, r.err);
	tu_run_dispose(&r);
	return o;
}

static long long jint(const json_t *o, const char *path)
{
	char buf[128];
	const json_t *v = o;

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *save = NULL, *part = strtok_r(buf, ".", &save); part;
	     part = strtok_r(NULL, ".", &save))
		v = json_object_get(v, part);
	if (!json_is_integer(v) && !json_is_boolean(v))
		fail_msg("status has no number at %s", path);
	return json_is_boolean(v) ? json_is_true(v) : (long long)json_integer_value(v);
}

static const json_t *kind_row(const json_t *st, const char *kind)
{
	size_t i;
	const json_t *row;

	json_array_foreach (json_object_get(st, "kinds"), i, row)
		if (strcmp(json_string_value(json_object_get(row, "kind")), kind) == 0)
			return row;
	fail_msg("status lists no kind %s", kind);
	return NULL;
}

/* once: everything selected arrives, exit 0; a second run ships nothing. */
static void test_itest_cmd_run__once_ships_everything_then_nothing(void **state)
{
	struct site s;
	struct tu_run r;
	json_t *st;
	int code;

	(void)state;
	site_start(&s, "{mode: once}");
	configmap(&s, "settings", "1");
	tu_kube_create(s.k, tu_kube_doc("apiVersion: v1\nkind: Secret\nmetadata: {name: creds, "
					"namespace: %s}\nstringData: {token: t0ps3cret}\n",
					s.ns));
	tu_kube_create(s.k,
		       tu_kube_doc("apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\n"
				   "metadata: {name: gpu, namespace: %s}\n"
				   "spec: {spec: {devices: {requests: [{name: gpu, exactly: "
				   "{deviceClassName: gpu.example.com}}]}}}\n",
				   s.ns));

	run_once(&s, &r, NULL);
	if (r.status != 0)
		fail_msg("once exited %d\nstdout:\n%s\nstderr:\n%s", r.status, r.out, r.err);
	assert_int_equal(
	    tu_target_count(s.target, 0, DS_RECORD_UPSERT, key(&s, "/ConfigMap", "settings")), 1);
	assert_int_equal(
	    tu_target_count(s.target, 0, DS_RECORD_UPSERT, key(&s, "/Secret", "creds")), 1);
	assert_int_equal(tu_target_count(s.target, 0, DS_RECORD_UPSERT,
					 key(&s, "resource.k8s.io/ResourceClaimTemplate", "gpu")),
			 1);
	/* kube-root-ca.crt is never replicated. */
	assert_int_equal(tu_target_count(s.target, 0, 0, key(&s, "/ConfigMap", "kube-root-ca.crt")),
			 0);
	assert_non_null(strstr(r.out, "0 failed"));
	/* The log never holds the Secret's value. */
	assert_null(strstr(r.err, "t0ps3cret"));
	tu_run_dispose(&r);

	st = status_json(&s, &code);
	if (code != 0)
		fail_msg("status exit %d: %s", code, json_dumps(st, JSON_INDENT(2)));
	assert_true(jint(st, "pushedSeq") > 0);
	assert_true(jint(st, "pushedSeq") == jint(st, "ackedSeq"));
	assert_int_equal(jint(st, "backlog"), 0);
	assert_int_equal(jint(st, "agent.running"), 0);
	assert_true(jint(st, "epoch") > 0);
	assert_int_equal(jint(kind_row(st, "ConfigMap"), "ok"), 1);
	assert_int_equal(jint(kind_row(st, "Secret"), "ok"), 1);
	json_decref(st);

	/* A restart with nothing changed ships nothing. */
	{
		size_t before = tu_target_len(s.target);

		run_once(&s, &r, NULL);
		assert_int_equal(r.status, 0);
		tu_run_dispose(&r);
		assert_int_equal(tu_target_count(s.target, before, DS_RECORD_UPSERT, NULL), 0);
	}
	site_stop(&s);
}

/* once: objects the target failed are printed with its reason, exit 1; status says so. */
static void test_itest_cmd_run__once_reports_what_the_target_failed(void **state)
{
	struct site s;
	struct tu_run r;
	json_t *st;
	int code;

	(void)state;
	site_start(&s, "{mode: once}");
	configmap(&s, "good", "1");
	configmap(&s, "bad-claims", "1");
	configmap(&s, "skip-me", "1");

	run_once(&s, &r, NULL);
	if (r.status != 1)
		fail_msg("once exited %d, not 1\nstdout:\n%s\nstderr:\n%s", r.status, r.out, r.err);
	assert_non_null(strstr(r.out, "failed ConfigMap"));
	assert_non_null(strstr(r.out, "bad-claims: DeviceClass gpu.nowhere.example does not "
				      "exist on the target"));
	assert_non_null(strstr(r.out, "skipped ConfigMap"));
	assert_non_null(strstr(r.out, "1 failed"));
	tu_run_dispose(&r);

	st = status_json(&s, &code);
	assert_int_equal(code, 1);
	assert_int_equal(jint(kind_row(st, "ConfigMap"), "failed"), 1);
	assert_int_equal(jint(kind_row(st, "ConfigMap"), "skipped"), 1);
	assert_int_equal(jint(kind_row(st, "ConfigMap"), "ok"), 1);
	assert_true(json_array_size(json_object_get(st, "failures")) >= 1);
	json_decref(st);
	site_stop(&s);
}

/* once: no target answering; --timeout ends the wait with exit 1, records kept. */
static void test_itest_cmd_run__once_times_out_without_a_target(void **state)
{
	struct site s;
	struct tu_run r;
	json_t *st;
	int code;

	(void)state;
	site_start(&s, "{mode: once}");
	configmap(&s, "waiting", "1");
	/* A port nothing listens on: the first target's, after stopping it. */
	write_config(&s, "tcp://127.0.0.1:9", "{mode: once}");
	run_once(&s, &r, "2s");
	if (r.status != 1)
		fail_msg("once exited %d, not 1\nstderr:\n%s", r.status, r.err);
	assert_non_null(strstr(r.err, "did not acknowledge"));
	tu_run_dispose(&r);
	st = status_json(&s, &code);
	assert_true(jint(st, "backlog") > 0);
	assert_int_equal(code, 1);
	json_decref(st);

	/* With the target back, the records go out and nothing is pushed twice. */
	write_config(&s, tu_target_endpoint(s.target), "{mode: once}");
	run_once(&s, &r, "60s");
	assert_int_equal(r.status, 0);
	tu_run_dispose(&r);
	assert_int_equal(
	    tu_target_count(s.target, 0, DS_RECORD_UPSERT, key(&s, "/ConfigMap", "waiting")), 1);
	site_stop(&s);
}

/* On a terminal (a pty from script(1)) the first pass shows its progress. */
static void test_itest_cmd_run__a_pass_on_a_terminal_shows_progress(void **state)
{
	struct site s;
	struct tu_run r;
	char *cmd;

	(void)state;
	site_start(&s, "{mode: once}");
	for (int i = 0; i < 20; i++) {
		char name[32];

		snprintf(name, sizeof(name), "cm-%d", i);
		configmap(&s, name, "1");
	}
	if (asprintf(&cmd, "%s run --config %s --kubeconfig %s", tu_env("DS_SOURCE_BIN"), s.config,
		     tu_env("DS_KUBECONFIG_V1")) < 0)
		fail_msg("out of memory");
	tu_run(&r, NULL, (const char *[]){"/usr/bin/script", "-qec", cmd, "/dev/null", NULL});
	if (r.status != 0 || !strstr(r.out, "listed ") || !strstr(r.out, "objects/s"))
		fail_msg("exit %d, no progress line on the terminal:\n%s", r.status, r.out);
	tu_run_dispose(&r);
	free(cmd);
	/* Without a terminal (the other tests) no progress line is written. */
	run_once(&s, &r, NULL);
	assert_null(strstr(r.err, "objects/s"));
	tu_run_dispose(&r);
	site_stop(&s);
}

static char *read_log(struct site *s)
{
	return tu_read_file(s->log, NULL);
}

static void wait_log(struct site *s, const char *what, int timeout_ms)
{
	long long end = tu_now_ms() + timeout_ms;

	for (;;) {
		char *text = read_log(s);
		bool found = strstr(text, what) != NULL;

		if (found) {
			free(text);
			return;
		}
		if (tu_now_ms() > end) {
			fprintf(stderr, "%s", text);
			free(text);
			fail_msg("the agent's log has no '%s' after %d ms", what, timeout_ms);
		}
		free(text);
		tu_msleep(100);
	}
}

static int spawn_agent(struct site *s)
{
	const char *argv[] = {
	    tu_env("DS_SOURCE_BIN"),	"run",	       "--config", s->config, "--kubeconfig",
	    tu_env("DS_KUBECONFIG_V1"), "--log-level", "debug",	   NULL};

	tu_write_file(s->log, "");
	return tu_spawn(s->log, argv);
}

/* watch: changes arrive as they happen; status while it runs; SIGTERM exits 0. */
static void test_itest_cmd_run__watch_streams_changes_and_stops_on_sigterm(void **state)
{
	struct site s;
	json_t *st;
	char *text, *p;
	size_t before;
	int pid, code;

	(void)state;
	site_start(&s, "{mode: watch, debounce: 100ms}");
	configmap(&s, "first", "1");
	pid = spawn_agent(&s);
	tu_target_wait(s.target, 0, DS_RECORD_UPSERT, key(&s, "/ConfigMap", "first"), 30000);

	before = tu_target_len(s.target);
	configmap(&s, "later", "1");
	tu_target_wait(s.target, before, DS_RECORD_UPSERT, key(&s, "/ConfigMap", "later"), 15000);
	tu_kube_merge(s.k, "v1", "ConfigMap", s.ns, "later", NULL, "{\"data\":{\"v\":\"2\"}}");
	tu_msleep(1500);
	p = tu_target_last_payload(s.target, key(&s, "/ConfigMap", "later"));
	assert_non_null(p);
	assert_non_null(strstr(p, "\"v\":\"2\""));
	free(p);
	tu_kube_delete(s.k, "v1", "ConfigMap", s.ns, "first");
	tu_target_wait(s.target, before, DS_RECORD_DELETE, key(&s, "/ConfigMap", "first"), 15000);

	st = status_json(&s, &code);
	assert_int_equal(jint(st, "agent.running"), 1);
	assert_int_equal(jint(st, "agent.connected"), 1);
	assert_int_equal(code, 0);
	json_decref(st);

	assert_int_equal(kill(pid, SIGTERM), 0);
	code = tu_wait_exit(pid, 15000);
	text = read_log(&s);
	if (code != 0)
		fail_msg("after SIGTERM the agent exited %d\n%s", code, text);
	assert_non_null(strstr(text, "event=stopping signal=SIGTERM"));
	assert_non_null(strstr(text, "event=stopped exit=0"));
	free(text);

	st = status_json(&s, &code);
	assert_int_equal(jint(st, "agent.running"), 0);
	assert_int_equal(code, 1); /* a watch agent that is not running needs attention */
	json_decref(st);
	site_stop(&s);
}

/* interval: the next three slots are logged; a change goes out with the next pass. */
static void test_itest_cmd_run__interval_passes_ship_the_difference(void **state)
{
	struct site s;
	char *text;
	size_t before;
	int pid, code;

	(void)state;
	site_start(&s, "{mode: interval, every: 2s}");
	configmap(&s, "ticking", "1");
	pid = spawn_agent(&s);
	tu_target_wait(s.target, 0, DS_RECORD_UPSERT, key(&s, "/ConfigMap", "ticking"), 30000);
	wait_log(&s, "event=schedule mode=interval next=", 5000);
	wait_log(&s, "event=pass_next", 5000);

	before = tu_target_len(s.target);
	tu_kube_merge(s.k, "v1", "ConfigMap", s.ns, "ticking", NULL, "{\"data\":{\"v\":\"2\"}}");
	tu_target_wait(s.target, before, DS_RECORD_UPSERT, key(&s, "/ConfigMap", "ticking"), 10000);
	/* Unchanged objects are not sent again by later passes. */
	tu_msleep(4500);
	assert_int_equal(
	    tu_target_count(s.target, before, DS_RECORD_UPSERT, key(&s, "/ConfigMap", "ticking")),
	    1);

	assert_int_equal(kill(pid, SIGINT), 0);
	code = tu_wait_exit(pid, 15000);
	text = read_log(&s);
	if (code != 0)
		fail_msg("after SIGINT the agent exited %d\n%s", code, text);
	/* the first pass at start, then scheduled ones */
	assert_non_null(strstr(text, "event=pass_start reason=start"));
	assert_non_null(strstr(text, "event=pass_start reason=schedule"));
	free(text);
	site_stop(&s);
}

/* cron: the first pass runs at start, the next three minute slots are logged. */
static void test_itest_cmd_run__cron_logs_its_next_three_runs(void **state)
{
	struct site s;
	char *text, *line;
	int pid, code, commas = 0;

	(void)state;
	site_start(&s, "{mode: cron, expr: \"*/5 * * * *\", timeZone: Europe/Berlin}");
	configmap(&s, "crontab", "1");
	pid = spawn_agent(&s);
	tu_target_wait(s.target, 0, DS_RECORD_UPSERT, key(&s, "/ConfigMap", "crontab"), 30000);
	wait_log(&s, "event=pass_next", 10000);
	kill(pid, SIGTERM);
	code = tu_wait_exit(pid, 15000);
	text = read_log(&s);
	assert_int_equal(code, 0);
	line = strstr(text, "event=schedule mode=cron next=");
	assert_non_null(line);
	for (char *c = line; *c && *c != '\n'; c++)
		commas += *c == ',';
	assert_int_equal(commas, 2);
	/* every slot is on a five-minute boundary */
	for (char *c = strstr(line, "next=") + 5; *c && *c != '\n'; c++)
		if (*c == 'T') { /* THH:MM:SS */
			assert_true(c[5] == '0' || c[5] == '5');
			assert_true(c[7] == '0' && c[8] == '0');
		}
	free(text);
	site_stop(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_itest_cmd_run__once_ships_everything_then_nothing),
	    cmocka_unit_test(test_itest_cmd_run__once_reports_what_the_target_failed),
	    cmocka_unit_test(test_itest_cmd_run__once_times_out_without_a_target),
	    cmocka_unit_test(test_itest_cmd_run__a_pass_on_a_terminal_shows_progress),
	    cmocka_unit_test(test_itest_cmd_run__watch_streams_changes_and_stops_on_sigterm),
	    cmocka_unit_test(test_itest_cmd_run__interval_passes_ship_the_difference),
	    cmocka_unit_test(test_itest_cmd_run__cron_logs_its_next_three_runs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
