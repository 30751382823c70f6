/*
 * drasync-source run (watch) watched as a platform team watches it: its
 * /metrics scraped with libcurl and checked by promtool, /healthz, /readyz
 * 503 while the target is unreachable and 200 once it runs, the records
 * pushed and acknowledged moving as objects change on the v1 cluster, the
 * link going down and reconnecting when the target (drasync-target run on
 * the v1beta1 cluster) is killed and restarted, 404 and 405.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "testutil.h"
#include "tu_http.h"
#include "tu_kube.h"
#include "tu_site.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static tu_site site;
static bool site_up;
static int source_pid;
static char source_log[1100];

static int teardown(void **state)
{
	(void)state;
	if (source_pid > 0) {
		kill(source_pid, SIGKILL);
		tu_wait_exit(source_pid, 5000);
	}
	source_pid = 0;
	if (site_up)
		tu_site_dispose(&site);
	site_up = false;
	return 0;
}

static double series(const char *text, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, name, n) == 0 && p[n] == ' ')
			return strtod(p + n + 1, NULL);
	return -1;
}

static char *scrape(const char *base)
{
	char url[128];

	snprintf(url, sizeof(url), "%s/metrics", base);
	return tu_http_get(url, 200);
}

/* Scrape until ok(text) holds; the text (caller frees). */
static char *wait_until(const char *base, bool (*ok)(const char *text, void *ud), void *ud,
			const char *what, int timeout_ms)
{
	long long end = tu_now_ms() + timeout_ms;

	for (;;) {
		char *text = scrape(base);

		if (ok(text, ud))
			return text;
		if (tu_now_ms() > end) {
			char *log = tu_read_file(source_log, NULL);

			fail_msg("%s never happened:\n%s\nsource log:\n%s", what, text, log);
		}
		free(text);
		tu_msleep(300);
	}
}

static bool at_least(const char *text, void *ud)
{
	const char *const *a = ud; /* name, min as text */

	return series(text, a[0]) >= strtod(a[1], NULL);
}

/* Everything pushed is acknowledged, and more than min was pushed. */
static bool caught_up(const char *text, void *ud)
{
	double pushed = series(text, "drasync_source_records_pushed_total");

	return pushed > *(double *)ud &&
	       series(text, "drasync_source_records_acknowledged_total") == pushed &&
	       series(text, "drasync_source_outbox_backlog_records") == 0 &&
	       series(text, "drasync_source_lag_seconds") == 0;
}

static long readyz(const char *base, char **body)
{
	char url[128];
	tu_http_reply r;
	long code;

	snprintf(url, sizeof(url), "%s/readyz", base);
	tu_http(&r, "GET", url);
	code = r.code;
	if (body)
		*body = strdup(r.body);
	tu_http_dispose(&r);
	return code;
}

static void wait_ready(const char *base, long want, int timeout_ms)
{
	long long end = tu_now_ms() + timeout_ms;
	char *body = NULL;

	while (readyz(base, &body) != want) {
		if (tu_now_ms() > end)
			fail_msg("/readyz never answered %ld (last: %s)", want, body);
		free(body);
		body = NULL;
		tu_msleep(200);
	}
	free(body);
}

static void test_itest_source_monitor__metrics_health_and_link(void **state)
{
	ds_kube *k = tu_kube_connect(tu_env("DS_KUBECONFIG_V1"));
	char *ns = tu_kube_new_namespace(k, "smon", "");
	char cfg[1100], base[64], url[160], *text, *body = NULL, *yaml;
	int port = tu_free_port();
	double pushed, zero = 0;
	ds_err err = {0};
	tu_http_reply r;

	(void)state;
	tu_kube_create(k, tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, "
				      "namespace: %s}\ndata: {v: '1'}\n",
				      ns));
	/* The target's site: configured, not running yet. */
	tu_site_init(&site, "source-monitor", tu_env("DS_KUBECONFIG_V1BETA1"), "prod-east");
	site_up = true;
	tu_site_write_config(&site, "mode: migrate\n");
	assert_int_equal(ds_keys_write(site.dir, "source", &site.skeys, true, &err), 0);
	snprintf(cfg, sizeof(cfg), "%s/source.yaml", site.dir);
	snprintf(source_log, sizeof(source_log), "%s/source.log", site.dir);
	assert_true(asprintf(&yaml,
			     "apiVersion: drasync.io/v1alpha1\n"
			     "kind: SourceConfig\n"
			     "clusterName: prod-east\n"
			     "target: {endpoint: \"%s\", serverPublicKey: \"%s\"}\n"
			     "keys: {secretKeyFile: %s/source.key}\n"
			     "stateDir: %s/source-state\n"
			     "namespaces: [%s]\n"
			     "schedule: {mode: watch}\n"
			     "metrics: {listen: \"127.0.0.1:%d\"}\n",
			     site.endpoint, site.tkeys.public_z85, site.dir, site.dir, ns,
			     port) > 0);
	tu_write_file(cfg, yaml);
	free(yaml);
	tu_write_file(source_log, "");
	source_pid = tu_spawn(source_log,
			      (const char *[]){tu_env("DS_SOURCE_BIN"), "run", "--config", cfg,
					       "--kubeconfig", tu_env("DS_KUBECONFIG_V1"), NULL});
	snprintf(base, sizeof(base), "http://127.0.0.1:%d", port);

	/* Alive, not ready: no target to talk to. */
	{
		long long end = tu_now_ms() + 30000;
		tu_http_reply h;

		snprintf(url, sizeof(url), "%s/healthz", base);
		for (;;) {
			tu_http(&h, "GET", url);
			if (h.code == 200)
				break;
			tu_http_dispose(&h);
			if (tu_now_ms() > end)
				fail_msg("the source never served /healthz:\n%s",
					 tu_read_file(source_log, NULL));
			tu_msleep(100);
		}
		assert_string_equal(h.body, "ok\n");
		tu_http_dispose(&h);
	}
	assert_int_equal(readyz(base, &body), 503);
	assert_non_null(strstr(body, "not connected to the target"));
	free(body);
	/* The initial list is pushed into the outbox and waits there. */
	text = wait_until(base, at_least,
			  (void *)(const char *[]){"drasync_source_records_pushed_total", "2"},
			  "the first pass's push", 60000);
	tu_promtool_check_metrics(text);
	assert_true(series(text, "drasync_source_link_up") == 0);
	assert_true(series(text, "drasync_source_records_acknowledged_total") == 0);
	assert_true(series(text, "drasync_source_outbox_backlog_records") ==
		    series(text, "drasync_source_records_pushed_total"));
	assert_true(series(text, "drasync_source_ready") == 0);
	assert_true(series(text, "drasync_build_info{agent=\"source\",version=\"" DS_TEST_VERSION
				 "\"}") == 1);
	free(text);
	/* It has waited: the lag in seconds shows it. */
	tu_msleep(1500);
	text = scrape(base);
	assert_true(series(text, "drasync_source_lag_seconds") >= 1);
	free(text);

	/* 404 and 405 on the source's port too. */
	snprintf(url, sizeof(url), "%s/", base);
	tu_http(&r, "GET", url);
	assert_int_equal(r.code, 404);
	tu_http_dispose(&r);
	snprintf(url, sizeof(url), "%s/readyz", base);
	tu_http(&r, "DELETE", url);
	assert_int_equal(r.code, 405);
	tu_http_dispose(&r);

	/* The target starts: connected, ready, everything acknowledged and applied. */
	tu_site_agent_start(&site);
	wait_ready(base, 200, 60000);
	text = wait_until(base, caught_up, &zero, "everything acknowledged", 60000);
	tu_promtool_check_metrics(text);
	assert_true(series(text, "drasync_source_link_up") == 1);
	assert_true(series(text, "drasync_source_link_events_total{event=\"session_open\"}") >= 1);
	assert_true(series(text, "drasync_source_link_reconnects_total") == 0);
	pushed = series(text, "drasync_source_records_pushed_total");
	free(text);
	text = wait_until(base, at_least,
			  (void *)(const char *[]){
			      "drasync_source_objects{kind=\"ConfigMap\",result=\"applied\"}", "1"},
			  "the ConfigMap applied on the target", 60000);
	free(text);

	/* A change on the source: pushed and acknowledged move. */
	tu_kube_create(k, tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b, "
				      "namespace: %s}\ndata: {v: '2'}\n",
				      ns));
	text = wait_until(base, caught_up, &pushed, "the new ConfigMap acknowledged", 60000);
	free(text);

	/* The target dies: the link goes down, not ready; it comes back: reconnected. */
	tu_site_agent_sigkill(&site);
	{
		long long end = tu_now_ms() + 90000;

		while (readyz(base, NULL) != 503) {
			if (tu_now_ms() > end)
				fail_msg("/readyz stayed 200 with the target gone:\n%s",
					 tu_read_file(source_log, NULL));
			tu_msleep(300);
		}
	}
	text = scrape(base);
	assert_true(series(text, "drasync_source_link_up") == 0);
	free(text);
	tu_site_agent_start(&site);
	wait_ready(base, 200, 90000);
	text = wait_until(base, at_least,
			  (void *)(const char *[]){"drasync_source_link_reconnects_total", "1"},
			  "a reconnect counted", 30000);
	tu_promtool_check_metrics(text);
	free(text);

	kill(source_pid, SIGTERM);
	assert_int_equal(tu_wait_exit(source_pid, 30000), 0);
	source_pid = 0;
	tu_site_agent_sigterm(&site);
	tu_kube_drop_namespace(k, ns);
	ds_kube_free(k);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_itest_source_monitor__metrics_health_and_link, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
