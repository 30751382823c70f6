/* The monitoring shipped in deploy/monitoring against what the agents expose:
 * every metric the alerts and the dashboard name is one of the target's or the
 * source's registry, and the PrometheusRule holds the plain rules file's groups. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/metrics.h"
#include "drasync/source_monitor.h"
#include "drasync/target_monitor.h"
#include "drasync/yaml.h"
#include "testutil.h"

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_target_monitor__alerts_name_only_exposed_metrics),
	    cmocka_unit_test(test_target_monitor__prometheusrule_holds_the_plain_rules),
	    cmocka_unit_test(test_target_monitor__dashboard_names_only_exposed_metrics),
	    cmocka_unit_test(test_target_monitor__an_unknown_name_is_caught),
	    cmocka_unit_test(test_target_monitor__readme_lists_every_metric),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
