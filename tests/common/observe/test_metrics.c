/* metrics.h: definitions checked as Prometheus names them, the exposition text
 * exactly, escaping, the series cap, threads, and promtool's verdict on both
 * agents' registries. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/metrics.h"
#include "drasync/source_monitor.h"
#include "drasync/target_monitor.h"
#include "tu_http.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ds_metric_def def_;

static const ds_metric_def *def(const char *name, enum ds_metric_type t, const char *labels,
				const double *buckets, size_t n)
{
	def_ = (ds_metric_def){.name = name,
			       .type = t,
			       .help = "h",
			       .labels = labels,
			       .buckets = buckets,
			       .n_buckets = n};
	return &def_;
}

static char *render(ds_metrics *m)
{
	ds_str s;
	char *text;

	ds_str_init(&s, 1 << 20);
	assert_int_equal(ds_metrics_render(m, &s), 0);
	text = ds_str_take(&s, NULL);
	assert_non_null(text);
	return text;
}

static void test_metrics__definitions_follow_prometheus_naming(void **state)
{
	static const double b[] = {1, 2};
	static const double bad_b[] = {2, 1};
	ds_metrics *m;
	ds_err err = {0};

	(void)state;
	assert_int_equal(ds_metrics_new(&m), 0);
	assert_int_equal(
	    ds_metrics_define(m, def("x_applied", DS_METRIC_COUNTER, NULL, NULL, 0), &err),
	    -EINVAL);
	assert_non_null(strstr(err.msg, "_total"));
	assert_int_equal(ds_metrics_define(m, def("x_total", DS_METRIC_GAUGE, NULL, NULL, 0), &err),
			 -EINVAL);
	assert_int_equal(
	    ds_metrics_define(m, def("9x_total", DS_METRIC_COUNTER, NULL, NULL, 0), &err), -EINVAL);
	assert_int_equal(ds_metrics_define(
			     m, def("x_total", DS_METRIC_COUNTER, "kind,bad-label", NULL, 0), &err),
			 -EINVAL);
	assert_non_null(strstr(err.msg, "bad-label"));
	assert_int_equal(
	    ds_metrics_define(m, def("x_total", DS_METRIC_COUNTER, "kind,kind", NULL, 0), &err),
	    -EINVAL);
	assert_int_equal(
	    ds_metrics_define(m, def("h_seconds", DS_METRIC_HISTOGRAM, NULL, NULL, 0), &err),
	    -EINVAL);
	assert_int_equal(
	    ds_metrics_define(m, def("h_seconds", DS_METRIC_HISTOGRAM, "", bad_b, 2), &err),
	    -EINVAL);
	assert_int_equal(ds_metrics_define(m, def("h_count", DS_METRIC_HISTOGRAM, "", b, 2), &err),
			 -EINVAL);
	assert_int_equal(
	    ds_metrics_define(m, def("h_seconds", DS_METRIC_HISTOGRAM, "le", b, 2), &err), -EINVAL);
	assert_int_equal(ds_metrics_count(m), 0);
	/* The same again is fine; the same name otherwise is not. */
	assert_int_equal(
	    ds_metrics_define(m, def("x_total", DS_METRIC_COUNTER, "kind", NULL, 0), &err), 0);
	assert_int_equal(
	    ds_metrics_define(m, def("x_total", DS_METRIC_COUNTER, "kind", NULL, 0), &err), 0);
	assert_int_equal(
	    ds_metrics_define(m, def("x_total", DS_METRIC_COUNTER, "result", NULL, 0), &err),
	    -EEXIST);
	assert_int_equal(ds_metrics_count(m), 1);
	assert_string_equal(ds_metrics_name(m, 0), "x_total");
	assert_null(ds_metrics_name(m, 1));
	ds_metrics_free(m);
}

static void test_metrics__exposition_text_is_exact(void **state)
{
	static const double b[] = {0.5, 1, 2.5};
	static const ds_metric_def defs[] = {
	    {"app_applied_total", DS_METRIC_COUNTER, "Objects applied.\nBy kind \\ result.",
	     "kind,result", NULL, 0},
	    {"app_backlog_records", DS_METRIC_GAUGE, "Backlog.", NULL, NULL, 0},
	    {"app_apply_seconds", DS_METRIC_HISTOGRAM, "Latency.", "", b, 3},
	    {"app_lag_seconds", DS_METRIC_GAUGE, "Lag.", "source", NULL, 0},
	};
	ds_metrics *m;
	char *text;

	(void)state;
	assert_int_equal(ds_metrics_new(&m), 0);
	assert_int_equal(ds_metrics_define_all(m, defs, 4, NULL), 0);
	assert_int_equal(
	    ds_metrics_add(m, "app_applied_total", (const char *[]){"Pod", "applied"}, 2), 0);
	assert_int_equal(
	    ds_metrics_add(m, "app_applied_total", (const char *[]){"Pod", "applied"}, 1), 0);
	assert_int_equal(
	    ds_metrics_add(m, "app_applied_total", (const char *[]){"Job", "failed"}, 1), 0);
	assert_int_equal(ds_metrics_set(m, "app_backlog_records", NULL, 0.25), 0);
	assert_int_equal(ds_metrics_observe(m, "app_apply_seconds", NULL, 0.2), 0);
	assert_int_equal(ds_metrics_observe(m, "app_apply_seconds", NULL, 1), 0);
	assert_int_equal(ds_metrics_observe(m, "app_apply_seconds", NULL, 9), 0);
	text = render(m);
	assert_string_equal(text,
			    "# HELP app_applied_total Objects applied.\\nBy kind \\\\ result.\n"
			    "# TYPE app_applied_total counter\n"
			    "app_applied_total{kind=\"Pod\",result=\"applied\"} 3\n"
			    "app_applied_total{kind=\"Job\",result=\"failed\"} 1\n"
			    "# HELP app_backlog_records Backlog.\n"
			    "# TYPE app_backlog_records gauge\n"
			    "app_backlog_records 0.25\n"
			    "# HELP app_apply_seconds Latency.\n"
			    "# TYPE app_apply_seconds histogram\n"
			    "app_apply_seconds_bucket{le=\"0.5\"} 1\n"
			    "app_apply_seconds_bucket{le=\"1\"} 2\n"
			    "app_apply_seconds_bucket{le=\"2.5\"} 2\n"
			    "app_apply_seconds_bucket{le=\"+Inf\"} 3\n"
			    "app_apply_seconds_sum 10.2\n"
			    "app_apply_seconds_count 3\n"
			    "# HELP app_lag_seconds Lag.\n"
			    "# TYPE app_lag_seconds gauge\n");
	free(text);
	tu_promtool_check_metrics(text = render(m));
	free(text);
	ds_metrics_free(m);
}

static void test_metrics__values_read_back_exactly(void **state)
{
	static const double vs[] = {0,	  3,	  -2,		0.1, 0.005, 0.6000000000000001,
				    1e21, 1.5e-7, 123456789.125};
	static const char *const want[] = {"0",	    "3",       "-2",
					   "0.1",   "0.005",   "0.6000000000000001",
					   "1e+21", "1.5e-07", "123456789.125"};
	ds_str s;

	(void)state;
	for (size_t i = 0; i < sizeof(vs) / sizeof(vs[0]); i++) {
		ds_str_init(&s, 64);
		assert_int_equal(ds_metrics_format_value(&s, vs[i]), 0);
		assert_string_equal(ds_str_ptr(&s), want[i]);
		assert_true(strtod(ds_str_ptr(&s), NULL) == vs[i]);
		ds_str_dispose(&s);
	}
	ds_str_init(&s, 64);
	ds_metrics_format_value(&s, INFINITY);
	ds_metrics_format_value(&s, -INFINITY);
	ds_metrics_format_value(&s, NAN);
	assert_string_equal(ds_str_ptr(&s), "+Inf-InfNaN");
	ds_str_dispose(&s);
}

static void test_metrics__updates_are_checked(void **state)
{
	ds_metrics *m;
	double v = -1;

	(void)state;
	assert_int_equal(ds_metrics_new(&m), 0);
	assert_int_equal(
	    ds_metrics_define(m, def("c_total", DS_METRIC_COUNTER, "k", NULL, 0), NULL), 0);
	assert_int_equal(ds_metrics_define(m, def("g", DS_METRIC_GAUGE, NULL, NULL, 0), NULL), 0);
	assert_int_equal(ds_metrics_add(m, "nope_total", NULL, 1), -ENOENT);
	assert_int_equal(ds_metrics_add(m, "c_total", (const char *[]){"a"}, -1), -EINVAL);
	assert_int_equal(ds_metrics_add(m, "c_total", NULL, 1), -EINVAL); /* label value missing */
	assert_int_equal(ds_metrics_add(m, "c_total", (const char *[]){"a"}, NAN), -EINVAL);
	assert_int_equal(ds_metrics_observe(m, "g", NULL, 1), -EINVAL);
	assert_int_equal(ds_metrics_add(m, "g", NULL, -3), 0);
	assert_int_equal(ds_metrics_value(m, "g", NULL, &v), 0);
	assert_true(v == -3);
	assert_int_equal(ds_metrics_value(m, "c_total", (const char *[]){"a"}, &v), -ENOENT);
	ds_metrics_free(m);
}

static void test_metrics__label_values_are_escaped(void **state)
{
	ds_metrics *m;
	char *text;

	(void)state;
	assert_int_equal(ds_metrics_new(&m), 0);
	assert_int_equal(
	    ds_metrics_define(m, def("e_total", DS_METRIC_COUNTER, "k", NULL, 0), NULL), 0);
	assert_int_equal(ds_metrics_add(m, "e_total", (const char *[]){"a\"b\\c\nd"}, 1), 0);
	text = render(m);
	assert_non_null(strstr(text, "e_total{k=\"a\\\"b\\\\c\\nd\"} 1\n"));
	tu_promtool_check_metrics(text);
	free(text);
	ds_metrics_free(m);
}

static void test_metrics__a_family_holds_a_bounded_number_of_series(void **state)
{
	ds_metrics *m;
	char v[32];

	(void)state;
	assert_int_equal(ds_metrics_new(&m), 0);
	assert_int_equal(
	    ds_metrics_define(m, def("s_total", DS_METRIC_COUNTER, "k", NULL, 0), NULL), 0);
	for (int i = 0; i < DS_METRICS_MAX_SERIES; i++) {
		snprintf(v, sizeof(v), "v%d", i);
		assert_int_equal(ds_metrics_add(m, "s_total", (const char *[]){v}, 1), 0);
	}
	assert_int_equal(ds_metrics_add(m, "s_total", (const char *[]){"one-more"}, 1), -E2BIG);
	/* An existing series still counts. */
	assert_int_equal(ds_metrics_add(m, "s_total", (const char *[]){"v0"}, 1), 0);
	assert_int_equal(ds_metrics_clear(m, "s_total"), 0);
	assert_int_equal(ds_metrics_add(m, "s_total", (const char *[]){"one-more"}, 1), 0);
	ds_metrics_free(m);
}

static void collect(void *ud, ds_metrics *m)
{
	int *calls = ud;

	ds_metrics_set(m, "g", NULL, ++*calls);
}

static void test_metrics__the_collector_runs_at_each_render(void **state)
{
	ds_metrics *m;
	int calls = 0;
	char *text;

	(void)state;
	assert_int_equal(ds_metrics_new(&m), 0);
	assert_int_equal(ds_metrics_define(m, def("g", DS_METRIC_GAUGE, NULL, NULL, 0), NULL), 0);
	ds_metrics_set_collector(m, collect, &calls);
	free(render(m));
	text = render(m);
	assert_non_null(strstr(text, "\ng 2\n"));
	free(text);
	ds_metrics_free(m);
}

static void *adder(void *arg)
{
	ds_metrics *m = arg;

	for (int i = 0; i < 10000; i++) {
		ds_metrics_add(m, "t_total", (const char *[]){i % 2 ? "a" : "b"}, 1);
		if (i % 1000 == 0)
			free(render(m));
	}
	return NULL;
}

static void test_metrics__threads_lose_no_count(void **state)
{
	ds_metrics *m;
	pthread_t t[4];
	double a = 0, b = 0;

	(void)state;
	assert_int_equal(ds_metrics_new(&m), 0);
	assert_int_equal(
	    ds_metrics_define(m, def("t_total", DS_METRIC_COUNTER, "k", NULL, 0), NULL), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL, adder, m), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(ds_metrics_value(m, "t_total", (const char *[]){"a"}, &a), 0);
	assert_int_equal(ds_metrics_value(m, "t_total", (const char *[]){"b"}, &b), 0);
	assert_true(a == 20000 && b == 20000);
	ds_metrics_free(m);
}

/* Both agents' registries, every family given a series, as promtool sees them. */
static void test_metrics__agents_registries_pass_promtool(void **state)
{
	int (*define[])(ds_metrics *, ds_err *) = {ds_target_metrics_define,
						   ds_source_metrics_define};

	(void)state;
	for (size_t d = 0; d < 2; d++) {
		ds_metrics *m;
		ds_err err = {0};
		char *text;

		assert_int_equal(ds_metrics_new(&m), 0);
		assert_int_equal(define[d](m, &err), 0);
		assert_true(ds_metrics_count(m) >= 10);
		text = render(m);
		tu_promtool_check_metrics(text);
		free(text);
		ds_metrics_free(m);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_metrics__definitions_follow_prometheus_naming),
	    cmocka_unit_test(test_metrics__exposition_text_is_exact),
	    cmocka_unit_test(test_metrics__values_read_back_exactly),
	    cmocka_unit_test(test_metrics__updates_are_checked),
	    cmocka_unit_test(test_metrics__label_values_are_escaped),
	    cmocka_unit_test(test_metrics__a_family_holds_a_bounded_number_of_series),
	    cmocka_unit_test(test_metrics__the_collector_runs_at_each_render),
	    cmocka_unit_test(test_metrics__threads_lose_no_count),
	    cmocka_unit_test(test_metrics__agents_registries_pass_promtool),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
