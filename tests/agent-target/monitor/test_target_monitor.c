/* The monitoring shipped in deploy/monitoring against what the agents expose:
 * every metric the alerts and the dashboard name is one of the target's or the
 * source's registry, and the PrometheusRule holds the plain rules file's groups. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/clock.h"
#include "drasync/metrics.h"
#include "drasync/source_monitor.h"
#include "drasync/target_monitor.h"
#include "drasync/inbox.h"
#include "drasync/object_state.h"
#include "drasync/relocation.h"
#include "drasync/report.h"
#include "drasync/yaml.h"
#include "testutil.h"
#include "tu_http.h"
#include "tu_ledger.h"
#include "tu_site.h"

#include <ctype.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *monitoring(const char *file)
{
	static char path[4][1100];
	static int next;
	char *p = path[next++ % 4];

	snprintf(p, sizeof(path[0]), "%s/deploy/monitoring/%s", tu_env("DS_SOURCE_DIR"), file);
	return p;
}

static ds_metrics *both_registries(void)
{
	ds_metrics *m;

	assert_int_equal(ds_metrics_new(&m), 0);
	assert_int_equal(ds_target_metrics_define(m, NULL), 0);
	assert_int_equal(ds_source_metrics_define(m, NULL), 0);
	return m;
}

/* Whether name is a family of m, or a histogram's _bucket/_sum/_count series. */
static bool exposed(ds_metrics *m, const char *name)
{
	static const char *const sfx[] = {"_bucket", "_sum", "_count"};

	for (size_t i = 0; i < ds_metrics_count(m); i++) {
		const char *f = ds_metrics_name(m, i);
		size_t n = strlen(f);

		if (strcmp(f, name) == 0)
			return true;
		if (ds_metrics_type(m, i) != DS_METRIC_HISTOGRAM || strncmp(f, name, n) != 0)
			continue;
		for (size_t j = 0; j < 3; j++)
			if (strcmp(name + n, sfx[j]) == 0)
				return true;
	}
	return false;
}

/* Every drasync_* identifier of a PromQL expression; returns how many. */
static size_t check_expr(ds_metrics *m, const char *where, const char *expr)
{
	size_t found = 0;

	for (const char *p = strstr(expr, "drasync_"); p; p = strstr(p, "drasync_")) {
		char name[128];
		size_t n = 0;

		if (p > expr && (isalnum((unsigned char)p[-1]) || p[-1] == '_')) {
			p++;
			continue;
		}
		while ((isalnum((unsigned char)p[n]) || p[n] == '_') && n < sizeof(name) - 1) {
			name[n] = p[n];
			n++;
		}
		name[n] = '\0';
		if (!exposed(m, name))
			fail_msg("%s names %s, which no agent exposes:\n%s", where, name, expr);
		found++;
		p += n;
	}
	return found;
}

static json_t *load_yaml(const char *path)
{
	json_t *docs = NULL;
	ds_err err = {0};

	if (ds_yaml_parse_file(path, 0, &docs, NULL, &err) < 0)
		fail_msg("%s: %s", path, err.msg);
	assert_int_equal(json_array_size(docs), 1);
	return docs;
}

static void test_target_monitor__alerts_name_only_exposed_metrics(void **state)
{
	ds_metrics *m = both_registries();
	json_t *docs = load_yaml(monitoring("drasync-rules.yaml")), *group, *rule;
	size_t gi, ri, alerts = 0, names = 0;

	(void)state;
	json_array_foreach (json_object_get(json_array_get(docs, 0), "groups"), gi, group) {
		json_array_foreach (json_object_get(group, "rules"), ri, rule) {
			const char *alert = json_string_value(json_object_get(rule, "alert"));
			const char *expr = json_string_value(json_object_get(rule, "expr"));

			assert_non_null(alert);
			assert_non_null(expr);
			names += check_expr(m, alert, expr);
			alerts++;
		}
	}
	/* link down, lag, failing, waiting, verification, outbox, not ready, refused */
	assert_int_equal(alerts, 8);
	assert_true(names >= alerts);
	json_decref(docs);
	ds_metrics_free(m);
}

static void test_target_monitor__prometheusrule_holds_the_plain_rules(void **state)
{
	json_t *plain = load_yaml(monitoring("drasync-rules.yaml"));
	json_t *op = load_yaml(monitoring("prometheusrule.yaml"));
	json_t *rule = json_array_get(op, 0);

	(void)state;
	assert_string_equal(json_string_value(json_object_get(rule, "kind")), "PrometheusRule");
	assert_string_equal(json_string_value(json_object_get(rule, "apiVersion")),
			    "monitoring.coreos.com/v1");
	assert_true(json_equal(json_object_get(json_object_get(rule, "spec"), "groups"),
			       json_object_get(json_array_get(plain, 0), "groups")));
	json_decref(plain);
	json_decref(op);
}

static void test_target_monitor__dashboard_names_only_exposed_metrics(void **state)
{
	ds_metrics *m = both_registries();
	json_error_t jerr;
	json_t *dash = json_load_file(monitoring("grafana-dashboard.json"), 0, &jerr), *panel,
	       *target;
	size_t pi, ti, names = 0;
	bool seen_lag = false, seen_latency = false;

	(void)state;
	if (!dash)
		fail_msg("grafana-dashboard.json:%d: %s", jerr.line, jerr.text);
	assert_true(json_array_size(json_object_get(dash, "panels")) >= 10);
	json_array_foreach (json_object_get(dash, "panels"), pi, panel) {
		const char *title = json_string_value(json_object_get(panel, "title"));

		json_array_foreach (json_object_get(panel, "targets"), ti, target) {
			const char *expr = json_string_value(json_object_get(target, "expr"));

			assert_non_null(expr);
			assert_true(check_expr(m, title, expr) > 0);
			names++;
			seen_lag |= strstr(expr, "drasync_target_source_lag_seconds") != NULL;
			seen_latency |=
			    strstr(expr, "drasync_target_apply_duration_seconds_bucket") != NULL;
		}
	}
	assert_true(names >= 16);
	assert_true(seen_lag && seen_latency);
	/* The template variables too. */
	json_array_foreach (json_object_get(json_object_get(dash, "templating"), "list"), pi,
			    panel) {
		const char *q = json_string_value(json_object_get(panel, "query"));

		if (q && strstr(q, "drasync_"))
			check_expr(m, "templating", q);
	}
	json_decref(dash);
	ds_metrics_free(m);
}

/* The check above can fail: a name no agent has is caught. */
static void test_target_monitor__an_unknown_name_is_caught(void **state)
{
	ds_metrics *m = both_registries();

	(void)state;
	assert_false(exposed(m, "drasync_target_objects_applied"));
	assert_false(exposed(m, "drasync_target_objects_bucket"));
	assert_true(exposed(m, "drasync_target_apply_duration_seconds_count"));
	assert_true(exposed(m, "drasync_source_link_up"));
	ds_metrics_free(m);
}

/* README's Monitoring section has a row for every metric either agent defines. */
static void test_target_monitor__readme_lists_every_metric(void **state)
{
	ds_metrics *m = both_registries();
	char path[1100], row[200], *readme;

	(void)state;
	snprintf(path, sizeof(path), "%s/README.md", tu_env("DS_SOURCE_DIR"));
	readme = tu_read_file(path, NULL);
	for (size_t i = 0; i < ds_metrics_count(m); i++) {
		snprintf(row, sizeof(row), "| `%s` | %s |", ds_metrics_name(m, i),
			 ds_metric_type_name(ds_metrics_type(m, i)));
		if (!strstr(readme, row))
			fail_msg("README.md has no row \"%s\"", row);
	}
	free(readme);
	ds_metrics_free(m);
}

/* A monitor on a real port, its API server a closed one (nothing answers); cfg may be NULL,
 * max_age_ms 0 (the default). */
static ds_target_monitor *monitor(const char *dir, const char *ledger, const ds_target_config *cfg,
				  int max_age_ms, ds_kube **k, char *base, size_t size)
{
	char kcpath[1100];
	ds_kubeconfig *kc = NULL;
	ds_target_monitor *m = NULL;
	ds_target_monitor_config mc = {0};
	ds_err err = {0};
	int port = tu_free_port();
	char listen[64];

	snprintf(kcpath, sizeof(kcpath), "%s/kubeconfig", dir);
	tu_write_file(kcpath, "apiVersion: v1\nkind: Config\n"
			      "clusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\"}}]\n"
			      "users: [{name: u, user: {token: t}}]\n"
			      "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
			      "current-context: x\n");
	assert_int_equal(ds_kubeconfig_load(&kc, kcpath, NULL, &err), 0);
	assert_int_equal(ds_kube_new(k, &kc, NULL, &err), 0);
	mc.ledger_path = ledger;
	mc.config_path = "target.yaml";
	mc.kube = *k;
	mc.cfg = cfg;
	mc.inventory_max_age_ms = max_age_ms;
	assert_int_equal(ds_target_monitor_new(&m, &mc, &err), 0);
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
	assert_int_equal(ds_target_monitor_serve(m, listen, &err), 0);
	snprintf(base, size, "http://127.0.0.1:%d", port);
	return m;
}

static void expect_readyz(const char *base, long code, const char *why)
{
	char url[128];
	tu_http_reply r;

	snprintf(url, sizeof(url), "%s/readyz", base);
	tu_http(&r, "GET", url);
	if (r.code != code || !strstr(r.body, why))
		fail_msg("/readyz: %ld %s, expected %ld with '%s'", r.code, r.body, code, why);
	tu_http_dispose(&r);
}

/* /readyz names the first condition that fails, in order: bound, ledger, API server. */
static void test_target_monitor__readyz_says_what_is_missing(void **state)
{
	char *dir = tu_mkdtemp("monitor"), ledger[1100], base[64], url[128], *body;
	ds_kube *k = NULL;
	ds_target_monitor *m;
	ds_inbox *ib = NULL;
	ds_err err = {0};

	(void)state;
	snprintf(ledger, sizeof(ledger), "%s/ledger.db", dir);
	m = monitor(dir, ledger, NULL, 0, &k, base, sizeof(base));
	snprintf(url, sizeof(url), "%s/healthz", base);
	body = tu_http_get(url, 200);
	assert_string_equal(body, "ok\n");
	free(body);
	expect_readyz(base, 503, "the link is not bound yet");
	ds_target_monitor_set_listening(m, "tcp://0.0.0.0:7450");
	expect_readyz(base, 503, "ledger");
	assert_int_equal(ds_inbox_open(&ib, ledger, &err), 0);
	expect_readyz(base, 503, "API server https://127.0.0.1:1");
	/* The scrape says so too, and stays valid. */
	body = tu_http_get(strcat(strcpy(url, base), "/metrics"), 200);
	assert_non_null(strstr(body, "\ndrasync_target_ready 0\n"));
	tu_promtool_check_metrics(body);
	free(body);
	ds_target_monitor_free(m);
	ds_inbox_free(ib);
	ds_kube_free(k);
	free(dir);
}

static void apply(ds_target_monitor *m, const char *key, enum ds_apply_state st, bool unchanged,
		  const ds_report *rep, size_t first, size_t n)
{
	ds_applier_event ev = {.source = "prod-east",
			       .key = key,
			       .state = st,
			       .unchanged = unchanged,
			       .report = rep,
			       .report_first = first,
			       .report_n = n,
			       .seconds = 0.2};

	ds_target_monitor_on_apply(m, &ev);
}

static double value(ds_target_monitor *m, const char *name, const char *const *labels)
{
	double v = -1;

	if (ds_metrics_value(ds_target_monitor_metrics(m), name, labels, &v) < 0)
		return -1;
	return v;
}

/* What the run command's callbacks feed: outcomes by kind and result, the
 * rewrites by the rule the report names, verifications, link events. */
static void test_target_monitor__callbacks_count_by_bounded_labels(void **state)
{
	char *dir = tu_mkdtemp("monitor"), ledger[1100], base[64];
	ds_kube *k = NULL;
	ds_target_monitor *m;
	ds_report *rep = NULL;
	ds_verify_item vi = {.verified = false};
	char *text;

	(void)state;
	snprintf(ledger, sizeof(ledger), "%s/ledger.db", dir);
	m = monitor(dir, ledger, NULL, 0, &k, base, sizeof(base));
	assert_int_equal(ds_report_new(&rep), 0);
	ds_report_add(rep, DS_REPORT_REWRITE, "Deployment ns/app", "main", "gpu", "claim a",
		      "claim b", "(rule dra.resourceClaimMappings[2])");
	ds_report_add(rep, DS_REPORT_ATTACH, "Deployment ns/app", "side", "gpu", NULL, "claim b",
		      "(attach, rule dra.resourceClaimMappings[3])");
	ds_report_add(rep, DS_REPORT_DEVICE_CLASS, "ResourceClaim ns/c", NULL, "gpu", "a", "b",
		      "(deviceClassMappings)");
	ds_report_add(rep, DS_REPORT_CONVERT, "ResourceClaim ns/c", NULL, NULL, "v1", "v1beta1",
		      NULL);
	apply(m, "apps/Deployment/ns/app", DS_APPLY_APPLIED, false, rep, 0, 2);
	apply(m, "resource.k8s.io/ResourceClaim/ns/c", DS_APPLY_APPLIED, false, rep, 2, 2);
	apply(m, "apps/Deployment/ns/app", DS_APPLY_APPLIED, true, rep, 0, 2); /* no API call */
	apply(m, "/ConfigMap/ns/x", DS_APPLY_FAILED, false, NULL, 0, 0);
	assert_true(value(m, "drasync_target_objects_applied_total",
			  (const char *[]){"Deployment", "applied"}) == 1);
	assert_true(value(m, "drasync_target_objects_applied_total",
			  (const char *[]){"Deployment", "unchanged"}) == 1);
	assert_true(value(m, "drasync_target_objects_applied_total",
			  (const char *[]){"ConfigMap", "failed"}) == 1);
	assert_true(value(m, "drasync_target_mapping_rewrites_total",
			  (const char *[]){"rewrite", "dra.resourceClaimMappings[2]"}) == 1);
	assert_true(value(m, "drasync_target_mapping_rewrites_total",
			  (const char *[]){"attach", "dra.resourceClaimMappings[3]"}) == 1);
	assert_true(value(m, "drasync_target_mapping_rewrites_total",
			  (const char *[]){"deviceclass", "dra.deviceClassMappings"}) == 1);
	/* A conversion is not a mapping rewrite; an unchanged object adds none. */
	assert_true(
	    value(m, "drasync_target_mapping_rewrites_total", (const char *[]){"convert", ""}) < 0);
	ds_target_monitor_on_verified(m, &vi);
	vi.verified = true;
	ds_target_monitor_on_verified(m, &vi);
	ds_target_monitor_on_verified(m, &vi);
	assert_true(value(m, "drasync_target_verifications_total", (const char *[]){"verified"}) ==
		    2);
	assert_true(
	    value(m, "drasync_target_verifications_total", (const char *[]){"not_verified"}) == 1);
	ds_target_monitor_on_link_event(
	    m, &(ds_transport_event){DS_LOG_DEBUG, "session_open", "", ""});
	ds_target_monitor_on_link_event(
	    m, &(ds_transport_event){DS_LOG_DEBUG, "zap_refused", "1.2.3.4", "key"});
	assert_true(value(m, "drasync_target_link_sessions_total", NULL) == 1);
	assert_true(
	    value(m, "drasync_target_link_refused_total", (const char *[]){"zap_refused"}) == 1);
	assert_true(value(m, "drasync_target_link_events_total", (const char *[]){"zap_refused"}) ==
		    1);
	/* Three outcomes needed an API call: three observations of 0.2 s. */
	text = tu_http_get(strcat(strcpy((char[128]){0}, base), "/metrics"), 200);
	assert_non_null(strstr(text, "\ndrasync_target_apply_duration_seconds_count 3\n"));
	assert_non_null(
	    strstr(text, "\ndrasync_target_apply_duration_seconds_bucket{le=\"0.25\"} 3\n"));
	assert_non_null(
	    strstr(text, "\ndrasync_target_apply_duration_seconds_bucket{le=\"0.1\"} 0\n"));
	tu_promtool_check_metrics(text);
	free(text);
	ds_report_free(rep);
	ds_target_monitor_free(m);
	ds_kube_free(k);
	free(dir);
}

/* Every outcome of a relocation is counted, "returned" (the way home) too: a
 * relocation finished active, then a record of its namespace ingested from
 * the ledger, shows in /metrics as outcome="returned". */
static void test_target_monitor__relocation_outcomes_include_returned(void **state)
{
	char *dir = tu_mkdtemp("monitor"), ledger[1100], base[64], url[128], *payload = NULL;
	ds_record rec = {.op = DS_RECORD_RELOCATE, .ns = "ml"}, up;
	json_t *cm = json_pack("{ss ss s{ss ss}}", "apiVersion", "v1", "kind", "ConfigMap",
			       "metadata", "name", "c", "namespace", "ml");
	ds_object_state *st = NULL;
	ds_relocation_row rows[2];
	ds_target_monitor *m;
	ds_kube *k = NULL;
	tu_ledger l;
	size_t n = 0;
	ds_err err = {0};
	char *text;

	(void)state;
	snprintf(ledger, sizeof(ledger), "%s/ledger.db", dir);
	tu_ledger_open(&l, ledger, "east");
	tu_ledger_commit(&l, &rec, 1, NULL, NULL);
	assert_int_equal(ds_object_state_open(&st, ledger, &err), 0);
	assert_int_equal(ds_object_state_ingest(st, &err), 1);
	assert_int_equal(ds_relocation_pending(st, rows, 2, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(ds_relocation_finish(st, &rows[0], "ml-dr", DS_RELOCATION_ACTIVE,
					      "verified active", &err),
			 0);
	m = monitor(dir, ledger, NULL, 0, &k, base, sizeof(base));
	ds_target_monitor_on_relocation(m, DS_RELOCATION_ACTIVE);
	snprintf(url, sizeof(url), "%s/metrics", base);
	text = tu_http_get(url, 200);
	assert_non_null(strstr(text, "\ndrasync_target_relocations_total{outcome=\"active\"} 1\n"));
	assert_non_null(
	    strstr(text, "\ndrasync_target_relocations_total{outcome=\"returned\"} 0\n"));
	free(text);

	/* the source sends the namespace again after its relocation: it came home */
	up = tu_record_upsert(cm, "u1", &payload);
	tu_ledger_commit(&l, &up, 1, NULL, NULL);
	assert_int_equal(ds_object_state_ingest(st, &err), 1);
	text = tu_http_get(url, 200);
	assert_non_null(
	    strstr(text, "\ndrasync_target_relocations_total{outcome=\"returned\"} 1\n"));
	tu_promtool_check_metrics(text);
	free(text);
	free(payload);
	json_decref(cm);
	ds_object_state_free(st);
	tu_ledger_close(&l);
	ds_target_monitor_free(m);
	ds_kube_free(k);
	free(dir);
}

static void *get_root(void *url)
{
	tu_http_reply *r = calloc(1, sizeof(*r));

	if (r)
		tu_http(r, "GET", url);
	return r;
}

/* Issue 23: the status page reads the inventory (every workload payload of the ledger) at most
 * once per interval, whoever asks; concurrent requests share one read; a new configuration in
 * force is read at once; the page says when the inventory was read. */
static void test_target_monitor__status_page_inventory_is_cached(void **state)
{
	enum { max_age_ms = 1500 };
	char *dir = tu_mkdtemp("monitor"), ledger[1100], base[64], url[128], *body;
	ds_target_config *cfg = NULL, *cfg2 = NULL;
	ds_kube *k = NULL;
	ds_target_monitor *m;
	ds_inbox *ib = NULL;
	ds_err err = {0};
	pthread_t t[2];
	int64_t start;

	(void)state;
	snprintf(ledger, sizeof(ledger), "%s/ledger.db", dir);
	assert_int_equal(ds_inbox_open(&ib, ledger, &err), 0);
	assert_int_equal(ds_target_config_new_empty(&cfg), 0);
	m = monitor(dir, ledger, cfg, max_age_ms, &k, base, sizeof(base));
	snprintf(url, sizeof(url), "%s/", base);
	assert_int_equal(ds_target_monitor_inventory_builds(m), 0);
	start = ds_clock_mono_ms();
	body = tu_http_get(url, 200);
	assert_non_null(strstr(body, "<p id=\"inventory-built\">Read from the ledger 20"));
	assert_non_null(strstr(body, "No claim reference in the ledger."));
	free(body);
	free(tu_http_get(url, 200));
	free(tu_http_get(url, 200));
	if (ds_clock_mono_ms() - start >= max_age_ms)
		fail_msg("three GETs took over %d ms: the machine is too slow for this test",
			 max_age_ms);
	assert_int_equal(ds_target_monitor_inventory_builds(m), 1);
	/* A reload: the mapping shown is the one in force, not the cached one. */
	assert_int_equal(ds_target_config_new_empty(&cfg2), 0);
	ds_target_monitor_set_config(m, cfg2);
	free(tu_http_get(url, 200));
	assert_int_equal(ds_target_monitor_inventory_builds(m), 2);
	free(tu_http_get(url, 200));
	assert_int_equal(ds_target_monitor_inventory_builds(m), 2);
	/* After the interval, two requests at once: one read of the ledger between them. */
	usleep((max_age_ms + 100) * 1000);
	start = ds_clock_mono_ms();
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&t[i], NULL, get_root, url), 0);
	for (int i = 0; i < 2; i++) {
		tu_http_reply *r = NULL;

		assert_int_equal(pthread_join(t[i], (void **)&r), 0);
		assert_non_null(r);
		assert_int_equal(r->code, 200);
		assert_non_null(strstr(r->body, "id=\"inventory-built\""));
		tu_http_dispose(r);
		free(r);
	}
	if (ds_clock_mono_ms() - start >= max_age_ms)
		fail_msg("two GETs took over %d ms: the machine is too slow for this test",
			 max_age_ms);
	assert_int_equal(ds_target_monitor_inventory_builds(m), 3);
	ds_target_monitor_free(m);
	ds_target_config_unref(cfg);
	ds_target_config_unref(cfg2);
	ds_inbox_free(ib);
	ds_kube_free(k);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_target_monitor__alerts_name_only_exposed_metrics),
	    cmocka_unit_test(test_target_monitor__prometheusrule_holds_the_plain_rules),
	    cmocka_unit_test(test_target_monitor__dashboard_names_only_exposed_metrics),
	    cmocka_unit_test(test_target_monitor__an_unknown_name_is_caught),
	    cmocka_unit_test(test_target_monitor__readme_lists_every_metric),
	    cmocka_unit_test(test_target_monitor__readyz_says_what_is_missing),
	    cmocka_unit_test(test_target_monitor__callbacks_count_by_bounded_labels),
	    cmocka_unit_test(test_target_monitor__relocation_outcomes_include_returned),
	    cmocka_unit_test(test_target_monitor__status_page_inventory_is_cached),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
