#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu_site.h"

#include "testutil.h"
#include "tu_kube.h"
#include "tu_ledger.h"

#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* tu_free_port() is tu_httpd.c's (declared in both headers): one definition. */

void tu_site_init(tu_site *s, const char *prefix, const char *kubeconfig, const char *source)
{
	ds_err err = {0};

	memset(s, 0, sizeof(*s));
	s->dir = tu_mkdtemp(prefix);
	s->kubeconfig = kubeconfig;
	s->source = source;
	snprintf(s->cfg, sizeof(s->cfg), "%s/target.yaml", s->dir);
	snprintf(s->log, sizeof(s->log), "%s/target.log", s->dir);
	snprintf(s->outbox, sizeof(s->outbox), "%s/outbox.db", s->dir);
	snprintf(s->ledger, sizeof(s->ledger), "%s/target-state/ledger.db", s->dir);
	snprintf(s->endpoint, sizeof(s->endpoint), "tcp://127.0.0.1:%d", tu_free_port());
	snprintf(s->source_cfg, sizeof(s->source_cfg), "%s/source.yaml", s->dir);
	snprintf(s->source_log, sizeof(s->source_log), "%s/source.log", s->dir);
	snprintf(s->source_outbox, sizeof(s->source_outbox), "%s/source-state/outbox.db", s->dir);
	assert_int_equal(ds_keys_generate(&s->tkeys, &err), 0);
	assert_int_equal(ds_keys_generate(&s->skeys, &err), 0);
	tu_write_file(s->log, "");
	tu_write_file(s->source_log, "");
	if (ds_outbox_open(&s->ob, s->outbox, NULL, &err) < 0)
		fail_msg("outbox: %s", err.msg);
}

void tu_site_dispose(tu_site *s)
{
	tu_site_sender_stop(s);
	if (s->source_pid) {
		kill(s->source_pid, SIGKILL);
		tu_wait_exit(s->source_pid, 10000);
		s->source_pid = 0;
	}
	if (s->agent_pid) {
		kill(s->agent_pid, SIGKILL);
		tu_wait_exit(s->agent_pid, 10000);
		s->agent_pid = 0;
	}
	ds_outbox_free(s->ob);
	s->ob = NULL;
	free(s->dir);
	s->dir = NULL;
}

void tu_site_write_config(tu_site *s, const char *extra)
{
	char auth[1100], identity[128], *text;
	ds_err err = {0};

	assert_int_equal(ds_keys_write(s->dir, "target", &s->tkeys, true, &err), 0);
	snprintf(identity, sizeof(identity), "identity: {namespace: ds-noid-%s}\n",
		 strrchr(s->endpoint, ':') ? strrchr(s->endpoint, ':') + 1 : "0");
	snprintf(auth, sizeof(auth), "%s/authorized_sources", s->dir);
	assert_true(asprintf(&text, "%s %s\n", s->source, s->skeys.public_z85) > 0);
	tu_write_file(auth, text);
	free(text);
	assert_true(
	    asprintf(&text,
		     "apiVersion: drasync.io/v1alpha1\n"
		     "kind: TargetConfig\n"
		     "listen: \"%s\"\n"
		     "keys: {secretKeyFile: %s/target.key, authorizedSources: %s}\n"
		     "stateDir: %s/target-state\n"
		     "%s%s%s%s%s",
		     s->endpoint, s->dir, auth, s->dir, extra ? extra : "",
		     /* the ledger's identity in a namespace of its own, none by default: the
		      * shared test clusters' drasync/drasync-ledger would be every site's */
		     extra && strstr(extra, "identity:") ? "" : identity,
		     /* the operator's grant (SPEC §5): every namespace, unless the test says */
		     extra && strstr(extra, "sources:") ? "" : "sources: [{name: ",
		     extra && strstr(extra, "sources:") ? "" : s->source,
		     extra && strstr(extra, "sources:") ? "" : ", namespaces: ['*']}]\n") > 0);
	tu_write_file(s->cfg, text);
	free(text);
}

/* The part of the log at `path` from offset `from` on (caller frees). */
static char *log_from(const char *path, long from)
{
	size_t len;
	char *all = tu_read_file(path, &len), *out;

	out = strdup(all + ((size_t)from <= len ? (size_t)from : len));
	free(all);
	assert_non_null(out);
	return out;
}

char *tu_site_run_log(const tu_site *s)
{
	return log_from(s->log, s->log_from);
}

char *tu_site_source_run_log(const tu_site *s)
{
	return log_from(s->source_log, s->source_log_from);
}

/*
 * Start argv logging to `log` (its current size kept in *from) and wait until
 * the run logged `started`; fails the test, with the log, when the agent
 * exits first or takes 30 s.
 */
static int start_agent(const char *what, const char *log, long *from, const char *const argv[])
{
	struct stat st;
	long long end = tu_now_ms() + 30000;
	int pid;

	*from = stat(log, &st) == 0 ? (long)st.st_size : 0;
	pid = tu_spawn(log, argv);
	for (;;) {
		char *text = log_from(log, *from);
		bool up = strstr(text, "event=started ") != NULL;
		int gone = up ? 0 : waitpid(pid, NULL, WNOHANG);

		if (up) {
			free(text);
			return pid;
		}
		if (gone == pid)
			fail_msg("%s exited before it started:\n%s", what, text);
		if (tu_now_ms() > end)
			fail_msg("%s did not start in 30 s:\n%s", what, text);
		free(text);
		tu_msleep(50);
	}
}

void tu_site_agent_start(tu_site *s)
{
	tu_site_agent_start_args(s, NULL);
}

void tu_site_agent_start_args(tu_site *s, const char *const *args)
{
	const char *argv[32] = {tu_env("DS_TARGET_BIN"), "run",	       "--config", s->cfg,
				"--kubeconfig",		 s->kubeconfig};
	size_t n = 6;

	for (size_t i = 0; args && args[i]; i++) {
		assert_true(n + 1 < sizeof(argv) / sizeof(argv[0]));
		argv[n++] = args[i];
	}
	argv[n] = NULL;
	s->agent_pid = start_agent("drasync-target run", s->log, &s->log_from, argv);
}

void tu_site_write_source_config(tu_site *s, const char *extra)
{
	ds_err err = {0};
	char *text;

	assert_int_equal(ds_keys_write(s->dir, "source", &s->skeys, true, &err), 0);
	if (!s->source_endpoint[0])
		snprintf(s->source_endpoint, sizeof(s->source_endpoint), "%s", s->endpoint);
	assert_true(asprintf(&text,
			     "apiVersion: drasync.io/v1alpha1\n"
			     "kind: SourceConfig\n"
			     "clusterName: %s\n"
			     "target: {endpoint: \"%s\", serverPublicKey: \"%s\"%s}\n"
			     "keys: {secretKeyFile: %s/source.key}\n"
			     "stateDir: %s/source-state\n"
			     "%s",
			     s->source, s->source_endpoint, s->tkeys.public_z85,
			     s->source_target_extra, s->dir, s->dir, extra ? extra : "") > 0);
	tu_write_file(s->source_cfg, text);
	free(text);
}

void tu_site_source_start(tu_site *s, const char *kubeconfig, const char *const *args)
{
	const char *argv[32] = {tu_env("DS_SOURCE_BIN"), "run",		 "--config",
				s->source_cfg,		 "--kubeconfig", kubeconfig};
	size_t n = 6;

	for (size_t i = 0; args && args[i]; i++) {
		assert_true(n + 1 < sizeof(argv) / sizeof(argv[0]));
		argv[n++] = args[i];
	}
	argv[n] = NULL;
	s->source_pid = start_agent("drasync-source run", s->source_log, &s->source_log_from, argv);
}

int tu_site_source_wait(tu_site *s, int timeout_ms)
{
	int code = tu_wait_exit(s->source_pid, timeout_ms);

	s->source_pid = 0;
	if (code < 0) {
		char *log = tu_site_source_run_log(s);

		fail_msg("drasync-source run was still running after %d ms:\n%s", timeout_ms, log);
	}
	return code;
}

/* SIGKILL *pid; it must die of it. */
static void sigkill_agent(int *pid)
{
	assert_int_equal(kill(*pid, SIGKILL), 0);
	assert_int_equal(tu_wait_exit(*pid, 10000), 128 + SIGKILL);
	*pid = 0;
}

/* SIGTERM *pid (`what`, logging at log from offset from); it must exit 0. */
static void sigterm_agent(int *pid, const char *what, const char *log, long from)
{
	int code;

	kill(*pid, SIGTERM);
	code = tu_wait_exit(*pid, 20000);
	*pid = 0;
	if (code != 0) {
		char *text = log_from(log, from);
		size_t n = strlen(text);

		/* the end of the log says why (cmocka's message would cut it short) */
		fprintf(stderr, "%s exited %d after SIGTERM; the end of its log:\n%s\n", what, code,
			text + (n > 12000 ? n - 12000 : 0));
		free(text);
		fail_msg("%s exited %d after SIGTERM (its log is above)", what, code);
	}
}

void tu_site_source_sigkill(tu_site *s)
{
	sigkill_agent(&s->source_pid);
}

void tu_site_source_sigterm(tu_site *s)
{
	sigterm_agent(&s->source_pid, "drasync-source run", s->source_log, s->source_log_from);
}

long long tu_site_source_outbox_int(const tu_site *s, const char *sql)
{
	return tu_ledger_int(s->source_outbox, sql);
}

void tu_site_agent_sigkill(tu_site *s)
{
	sigkill_agent(&s->agent_pid);
}

void tu_site_agent_sigterm(tu_site *s)
{
	sigterm_agent(&s->agent_pid, "drasync-target run", s->log, s->log_from);
}

static void *tx_main(void *arg)
{
	tu_site *s = arg;
	ds_err err = {0};
	int rc;

	rc = ds_sender_run(s->tx, 0, 0, &err);
	if (rc < 0)
		fprintf(stderr, "sender: %d %s\n", rc, err.msg);
	return NULL;
}

void tu_site_sender_start(tu_site *s)
{
	ds_sender_config sc;
	ds_err err = {0};

	ds_sender_config_default(&sc);
	sc.endpoint = s->endpoint;
	sc.server_public_key = s->tkeys.public_z85;
	sc.keys = &s->skeys;
	sc.outbox_path = s->outbox;
	sc.cluster_name = s->source;
	if (ds_sender_new(&s->tx, &sc, &err) < 0)
		fail_msg("sender: %s", err.msg);
	assert_int_equal(pthread_create(&s->tx_thread, NULL, tx_main, s), 0);
	s->tx_running = true;
}

void tu_site_sender_stop(tu_site *s)
{
	if (s->tx_running) {
		ds_sender_stop(s->tx);
		pthread_join(s->tx_thread, NULL);
		s->tx_running = false;
	}
	ds_sender_free(s->tx);
	s->tx = NULL;
}

long long tu_site_wait_acked(tu_site *s, uint64_t seq, int timeout_ms)
{
	long long t0 = tu_now_ms(), end = t0 + timeout_ms;

	while (ds_sender_acked(s->tx) < seq) {
		if (tu_now_ms() > end) {
			char *log = tu_site_run_log(s);

			fail_msg("the target acknowledged %llu of %llu after %d ms:\n%s",
				 (unsigned long long)ds_sender_acked(s->tx),
				 (unsigned long long)seq, timeout_ms, log);
		}
		tu_msleep(10);
	}
	return tu_now_ms() - t0;
}

static const char *obj_str(const json_t *o, const char *field)
{
	return json_string_value(json_object_get(json_object_get(o, "metadata"), field));
}

uint64_t tu_site_push(tu_site *s, json_t **objs, size_t n)
{
	ds_record recs[100];
	char *payloads[100];
	uint64_t last = 0;
	ds_err err = {0};

	for (size_t i = 0; i < n;) {
		size_t m = n - i < 100 ? n - i : 100;

		for (size_t j = 0; j < m; j++) {
			json_t *o = objs[i + j];

			payloads[j] = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
			assert_non_null(payloads[j]);
			recs[j] = (ds_record){
			    .op = DS_RECORD_UPSERT,
			    .api_version = json_string_value(json_object_get(o, "apiVersion")),
			    .kind = json_string_value(json_object_get(o, "kind")),
			    .ns = obj_str(o, "namespace"),
			    .name = obj_str(o, "name"),
			    .source_uid = obj_str(o, "uid"),
			    .source_resource_version = "1",
			    .payload = (const uint8_t *)payloads[j],
			    .payload_len = strlen(payloads[j])};
		}
		if (ds_outbox_push(s->ob, recs, m, &last, &err) < 0)
			fail_msg("outbox push: %s", err.msg);
		for (size_t j = 0; j < m; j++) {
			free(payloads[j]);
			json_decref(objs[i + j]);
		}
		i += m;
		if (s->tx)
			ds_sender_wake(s->tx);
	}
	return last;
}

long long tu_site_ledger_int(const tu_site *s, const char *sql)
{
	return tu_ledger_int(s->ledger, sql);
}
