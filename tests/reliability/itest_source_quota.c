/*
 * A noisy source does not throttle a quiet one: `drasync-target run` on the
 * v1 cluster with two real sources over CURVE (two ds_sender with keys of
 * their own, each draining its outbox, as drasync-source does), "noisy" with
 * small quotas (maxUnappliedRecords 20, maxLedgerBytes 8Ki) and "quiet" with
 * the defaults.
 *
 * - noisy floods its objects: it reaches its ledger bytes quota and stops,
 *   reported throttled (event=source_throttled quota=ledger_bytes, the metric
 *   drasync_target_source_throttled{source="noisy"} 1, `status -o json`
 *   throttledBy ledger_bytes), while every object of quiet arrives on the
 *   target cluster and quiet is never throttled;
 * - its quota raised by a SIGHUP reload, noisy resumes (event=source_resumed)
 *   and every one of its objects arrives: nothing lost, its backlog bound
 *   (20) throttling it on the way in a few lines, not a line per record.
 *
 * CI: 300 noisy objects, 50 quiet. DS_SOAK=1 (scripts/soak.sh): 3,000 and 500.
 * Prints `SOAK test=source_quota ...`.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "testutil.h"
#include "tu_e2e.h"
#include "tu_http.h"
#include "tu_kube.h"
#include "tu_site.h"

#include "drasync/sender.h"

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOISY "noisy"
#define QUIET "quiet"
#define NOISY_BOUND 20
#define NOISY_BYTES "8Ki"

static struct fx {
	ds_kube *k;
	char *ns_noisy, *ns_quiet;
	tu_site t; /* the target, and noisy's sender */
	tu_site q; /* quiet's sender (its outbox and keys; the target is t's) */
	char base[64];
	int n_noisy, n_quiet;
	int metrics_port;
} F;

static bool soak(void)
{
	const char *v = getenv("DS_SOAK");

	return v && v[0] && strcmp(v, "0") != 0;
}

static void write_config(bool noisy_bytes_quota)
{
	char extra[1200], auth[1200], *text;

	snprintf(extra, sizeof(extra),
		 "mode: migrate\n"
		 "metrics: {listen: \"127.0.0.1:%d\"}\n"
		 "sources:\n"
		 "- {name: " NOISY ", namespaces: [%s], maxUnappliedRecords: %d%s}\n"
		 "- {name: " QUIET ", namespaces: [%s]}\n",
		 F.metrics_port, F.ns_noisy, NOISY_BOUND,
		 noisy_bytes_quota ? ", maxLedgerBytes: " NOISY_BYTES : "", F.ns_quiet);
	tu_site_write_config(&F.t, extra);
	/* Both keys authorized (the site writes its own source's only). */
	snprintf(auth, sizeof(auth), "%s/authorized_sources", F.t.dir);
	assert_true(asprintf(&text, "%s %s\n%s %s\n", NOISY, F.t.skeys.public_z85, QUIET,
			     F.q.skeys.public_z85) > 0);
	tu_write_file(auth, text);
	free(text);
}

static int setup(void **state)
{
	(void)state;
	memset(&F, 0, sizeof(F));
	F.n_noisy = soak() ? 3000 : 300;
	F.n_quiet = soak() ? 500 : 50;
	F.k = tu_kube_connect(tu_env("DS_KUBECONFIG_V1"));
	F.ns_noisy = tu_kube_new_namespace(F.k, "quota-noisy", "");
	F.ns_quiet = tu_kube_new_namespace(F.k, "quota-quiet", "");
	tu_site_init(&F.t, "source-quota", tu_env("DS_KUBECONFIG_V1"), NOISY);
	tu_site_init(&F.q, "source-quota-quiet", tu_env("DS_KUBECONFIG_V1"), QUIET);
	F.q.tkeys = F.t.tkeys;
	snprintf(F.q.endpoint, sizeof(F.q.endpoint), "%s", F.t.endpoint);
	F.metrics_port = tu_free_port();
	snprintf(F.base, sizeof(F.base), "http://127.0.0.1:%d", F.metrics_port);
	write_config(true);
	tu_site_agent_start(&F.t);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	tu_site_dispose(&F.q);
	tu_site_dispose(&F.t);
	tu_kube_drop_namespace(F.k, F.ns_noisy);
	tu_kube_drop_namespace(F.k, F.ns_quiet);
	ds_kube_free(F.k);
	return 0;
}

static json_t *configmap(const char *ns, const char *who, int i)
{
	char name[64], num[16];

	snprintf(name, sizeof(name), "%s-%d", who, i);
	snprintf(num, sizeof(num), "%d", i);
	return json_pack("{s:s, s:s, s:{s:s, s:s, s:s}, s:{s:s, s:s}}", "apiVersion", "v1", "kind",
			 "ConfigMap", "metadata", "name", name, "namespace", ns, "uid", name,
			 "data", "source", who, "i", num);
}

static uint64_t push(tu_site *s, const char *ns, const char *who, int n)
{
	json_t **objs = calloc((size_t)n, sizeof(*objs));
	uint64_t last;

	assert_non_null(objs);
	for (int i = 0; i < n; i++)
		objs[i] = configmap(ns, who, i);
	last = tu_site_push(s, objs, (size_t)n);
	free(objs);
	return last;
}

/* How many of who's ConfigMaps the target cluster holds in ns. */
static int on_target(const char *ns, const char *who)
{
	json_t *items = tu_e2e_list(F.k, "v1", "ConfigMap", ns, NULL), *o;
	size_t i, len = strlen(who);
	int n = 0;

	json_array_foreach (items, i, o) {
		const char *name =
		    json_string_value(json_object_get(json_object_get(o, "metadata"), "name"));
		n += name && strncmp(name, who, len) == 0 && name[len] == '-';
	}
	json_decref(items);
	return n;
}

static void wait_on_target(const char *ns, const char *who, int want, int timeout_ms)
{
	long long end = tu_now_ms() + timeout_ms;
	int n;

	while ((n = on_target(ns, who)) < want && tu_now_ms() < end)
		tu_msleep(300);
	if (n < want) {
		char *log = tu_site_run_log(&F.t);
		fail_msg("%d of %d objects of %s on the target after %d ms:\n%s", n, want, who,
			 timeout_ms, log);
	}
}

/* The value of one series of /metrics; -1 when absent. */
static double metric(const char *series)
{
	char url[128], *text;
	size_t n = strlen(series);
	double v = -1;

	snprintf(url, sizeof(url), "%s/metrics", F.base);
	text = tu_http_get(url, 200);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, series, n) == 0 && p[n] == ' ')
			v = strtod(p + n + 1, NULL);
	free(text);
	return v;
}

static int count(const char *text, const char *part)
{
	int n = 0;

	for (const char *p = strstr(text, part); p; p = strstr(p + 1, part))
		n++;
	return n;
}

static int log_count(const char *part)
{
	char *log = tu_site_run_log(&F.t);
	int n = count(log, part);

	free(log);
	return n;
}

static void wait_log(const char *part, int timeout_ms)
{
	long long end = tu_now_ms() + timeout_ms;

	while (!log_count(part) && tu_now_ms() < end)
		tu_msleep(100);
	if (!log_count(part)) {
		char *log = tu_site_run_log(&F.t);
		fail_msg("no '%s' in the target's log after %d ms:\n%s", part, timeout_ms, log);
	}
}

#define RESUMED_BYTES "event=source_resumed peer=\"\" detail=\"source=" NOISY " quota=ledger_bytes"
#define THROTTLED_BACKLOG "event=source_throttled peer=\"\" detail=\"source=" NOISY " quota=backlog"

/* Until a or b is in the log more often than it was before (a0, b0 times). */
static void wait_log_either(const char *a, int a0, const char *b, int b0, int timeout_ms)
{
	long long end = tu_now_ms() + timeout_ms;

	while (log_count(a) <= a0 && log_count(b) <= b0 && tu_now_ms() < end)
		tu_msleep(100);
	if (log_count(a) <= a0 && log_count(b) <= b0) {
		char *log = tu_site_run_log(&F.t);
		fail_msg("neither '%s' nor '%s' in the target's log after %d ms:\n%s", a, b,
			 timeout_ms, log);
	}
}

/* `drasync-target status -o json`'s entry for source (caller decrefs). */
static json_t *status_of(const char *source)
{
	struct tu_run r;
	json_t *st, *srcs, *s, *found = NULL;
	size_t i;

	tu_run(&r, NULL,
	       (const char *[]){tu_env("DS_TARGET_BIN"), "status", "--config", F.t.cfg, "-o",
				"json", NULL});
	st = json_loads(r.out, 0, NULL);
	if (!st)
		fail_msg("status -o json (exit %d): %s\n%s", r.status, r.out, r.err);
	srcs = json_object_get(st, "sources");
	json_array_foreach (srcs, i, s)
		if (strcmp(json_string_value(json_object_get(s, "name")), source) == 0)
			found = json_incref(s);
	json_decref(st);
	tu_run_dispose(&r);
	if (!found)
		fail_msg("status does not list source %s", source);
	return found;
}

static void test_source_quota__noisy_source_throttled_quiet_one_flows(void **state)
{
	long long t0 = tu_now_ms(), quiet_ms, resume_ms, end;
	uint64_t noisy_last, quiet_last, acked_throttled;
	json_t *st;
	int throttled_lines, backlog_lines, resumed0, backlog0;

	(void)state;
	/* noisy floods; it stops at its ledger bytes quota with most of it unsent. */
	noisy_last = push(&F.t, F.ns_noisy, NOISY, F.n_noisy);
	tu_site_sender_start(&F.t);
	wait_log("event=source_throttled peer=\"\" detail=\"source=" NOISY " quota=ledger_bytes",
		 60000);
	end = tu_now_ms() + 10000;
	while (metric("drasync_target_source_throttled{source=\"" NOISY "\"}") != 1 &&
	       tu_now_ms() < end)
		tu_msleep(200);
	assert_true(metric("drasync_target_source_throttled{source=\"" NOISY "\"}") == 1);
	assert_true(metric("drasync_target_source_ledger_bytes{source=\"" NOISY "\"}") >= 8192);

	/* quiet syncs all its objects meanwhile, never throttled. */
	quiet_last = push(&F.q, F.ns_quiet, QUIET, F.n_quiet);
	tu_site_sender_start(&F.q);
	tu_site_wait_acked(&F.q, quiet_last, 60000);
	wait_on_target(F.ns_quiet, QUIET, F.n_quiet, 120000);
	quiet_ms = tu_now_ms() - t0;
	assert_int_equal(log_count("source=" QUIET " quota="), 0);
	assert_true(metric("drasync_target_source_throttled{source=\"" QUIET "\"}") == 0);
	/* noisy is still held: the operator sees why in status. */
	acked_throttled = ds_sender_acked(F.t.tx);
	assert_true(acked_throttled < noisy_last);
	assert_true(on_target(F.ns_noisy, NOISY) < F.n_noisy);
	assert_true(metric("drasync_target_source_throttled{source=\"" NOISY "\"}") == 1);
	st = status_of(NOISY);
	assert_true(json_is_true(json_object_get(st, "throttled")));
	assert_string_equal(json_string_value(json_object_get(st, "throttledBy")), "ledger_bytes");
	assert_int_equal(json_integer_value(json_object_get(st, "maxLedgerBytes")), 8192);
	assert_true(json_integer_value(json_object_get(st, "ledgerBytes")) >= 8192);
	assert_int_equal(json_integer_value(json_object_get(st, "maxUnappliedRecords")),
			 NOISY_BOUND);
	json_decref(st);
	st = status_of(QUIET);
	assert_false(json_is_true(json_object_get(st, "throttled")));
	assert_true(json_is_null(json_object_get(st, "throttledBy")));
	json_decref(st);

	/* The quota raised (SIGHUP): noisy resumes and every object arrives. */
	resumed0 = log_count(RESUMED_BYTES);
	backlog0 = log_count(THROTTLED_BACKLOG);
	write_config(false);
	resume_ms = tu_now_ms();
	kill(F.t.agent_pid, SIGHUP);
	/* The bytes quota lets go: noisy resumes, or (a slow apply stage, its backlog
	 * over its own bound by then) the backlog quota takes over, said as such. */
	wait_log_either(RESUMED_BYTES, resumed0, THROTTLED_BACKLOG, backlog0, 30000);
	tu_site_wait_acked(&F.t, noisy_last, soak() ? 600000 : 120000);
	wait_on_target(F.ns_noisy, NOISY, F.n_noisy, soak() ? 600000 : 120000);
	resume_ms = tu_now_ms() - resume_ms;
	assert_int_equal(tu_site_ledger_int(&F.t, "SELECT committed_seq FROM sources WHERE name = "
						  "'" NOISY "'"),
			 (long long)noisy_last);
	end = tu_now_ms() + 10000;
	while (metric("drasync_target_source_throttled{source=\"" NOISY "\"}") != 0 &&
	       tu_now_ms() < end)
		tu_msleep(200);
	assert_true(metric("drasync_target_source_throttled{source=\"" NOISY "\"}") == 0);
	/* Aggregated: a line per transition, far fewer than the records. */
	throttled_lines = log_count("event=source_throttled");
	backlog_lines = log_count("source=" NOISY " quota=backlog");
	assert_true(throttled_lines < F.n_noisy / 4);
	assert_true(log_count("event=source_resumed") <= throttled_lines);
	assert_int_equal(log_count("source=" QUIET " quota="), 0);
	print_message("SOAK test=source_quota noisy_objects=%d quiet_objects=%d "
		      "noisy_acked_while_throttled=%llu quiet_all_applied_ms=%lld "
		      "noisy_rest_after_raise_ms=%lld throttled_lines=%d backlog_transitions=%d\n",
		      F.n_noisy, F.n_quiet, (unsigned long long)acked_throttled, quiet_ms,
		      resume_ms, throttled_lines, backlog_lines);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_source_quota__noisy_source_throttled_quiet_one_flows),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
