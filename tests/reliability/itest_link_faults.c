/*
 * The link between the agents fails (tests/kube/faultproxy tcp between them):
 * drasync-source run in watch mode on the v1 cluster, drasync-target run on
 * the v1beta1 cluster, source -> proxy -> target.
 *
 * 1. The link is cut while the first pass's records flow (the proxy closes
 *    every connection and refuses new ones), objects change on the source
 *    meanwhile, the link comes back: the target catches up and holds what
 *    the source holds (by hash of the sanitized content), and the source told
 *    of the outage (log, metrics, `status`) rather than staying silent.
 * 2. A slow lossy link (50 ms each way, 10 % of segments one retransmission
 *    timeout late, a rate cap): the same equality, in bounded time.
 *
 * CI runs 500 objects and a 10 s cut; DS_SOAK=1 (scripts/soak.sh) 10,000
 * objects and a 60 s cut.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "testutil.h"
#include "tu_compare.h"
#include "tu_kube.h"
#include "tu_load.h"
#include "tu_proxy.h"
#include "tu_site.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SOURCE "prod-east"
#define PAYLOAD 1200 /* bytes of noise per object */

static const char *const kinds[] = {"v1/ConfigMap", "v1/Secret", "apps/v1/Deployment", NULL};

struct fx {
	tu_site s;
	tu_proxy *link;
	ds_kube *src, *dst;
	char *ns;
	char dst_ns[300];
	char src_metrics[64], dst_metrics[64]; /* http://127.0.0.1:P */
	int n;				       /* objects created at the start */
};

static struct fx F;

static int teardown(void **state)
{
	(void)state;
	tu_site_dispose(&F.s);
	tu_proxy_stop(F.link);
	if (F.ns)
		tu_kube_drop_namespace(F.src, F.ns);
	ds_kube_free(F.src);
	ds_kube_free(F.dst);
	memset(&F, 0, sizeof(F));
	return 0;
}

static int endpoint_port(const char *endpoint)
{
	const char *colon = strrchr(endpoint, ':');

	assert_non_null(colon);
	return atoi(colon + 1);
}

/* Lines of text holding a. */
static int count_lines(const char *text, const char *a)
{
	int n = 0;

	for (const char *p = strstr(text, a); p; p = strstr(p + 1, a))
		n++;
	return n;
}

/*
 * The clusters, n objects on the source, the target agent, the proxy in
 * front of it (shaped as given) and the source agent pushing through it.
 */
static void start(const char *prefix, int n, int latency_ms, int rate_kbit, double loss)
{
	char *extra;
	int sport = tu_free_port(), dport = tu_free_port();

	memset(&F, 0, sizeof(F));
	F.n = n;
	F.src = tu_kube_connect(tu_env("DS_KUBECONFIG_V1"));
	F.dst = tu_kube_connect(tu_env("DS_KUBECONFIG_V1BETA1"));
	F.ns = tu_kube_new_namespace(F.src, prefix, "");
	snprintf(F.dst_ns, sizeof(F.dst_ns), "%s-dr", F.ns);
	tu_load_create(F.src, F.ns, 0, n, PAYLOAD);

	tu_site_init(&F.s, prefix, tu_env("DS_KUBECONFIG_V1BETA1"), SOURCE);
	snprintf(F.dst_metrics, sizeof(F.dst_metrics), "http://127.0.0.1:%d", dport);
	assert_true(asprintf(&extra,
			     "mode: migrate\nnamespaceMappings: {%s: %s}\n"
			     "metrics: {listen: \"127.0.0.1:%d\"}\n",
			     F.ns, F.dst_ns, dport) > 0);
	tu_site_write_config(&F.s, extra);
	free(extra);
	tu_site_agent_start(&F.s);

	F.link = tu_proxy_start_tcp(endpoint_port(F.s.endpoint), latency_ms, rate_kbit, loss);
	snprintf(F.s.source_endpoint, sizeof(F.s.source_endpoint), "tcp://127.0.0.1:%d",
		 tu_proxy_port(F.link));
	snprintf(F.src_metrics, sizeof(F.src_metrics), "http://127.0.0.1:%d", sport);
	assert_true(asprintf(&extra,
			     "namespaces: [%s]\nschedule: {mode: watch}\n"
			     "metrics: {listen: \"127.0.0.1:%d\"}\n",
			     F.ns, sport) > 0);
	tu_site_write_source_config(&F.s, extra);
	free(extra);
	tu_site_source_start(&F.s, tu_env("DS_KUBECONFIG_V1"), NULL);
}

static double src_metric(const char *series)
{
	return tu_metric(F.src_metrics, series);
}

/* Wait until the proxy carried `bytes` towards the target; fails after timeout_ms. */
static void wait_bytes_up(long long bytes, int timeout_ms)
{
	long long end = tu_now_ms() + timeout_ms;

	while (tu_proxy_stats_int(F.link, "bytes_up") < bytes) {
		if (tu_now_ms() > end) {
			char *log = tu_site_source_run_log(&F.s);

			fail_msg("the link carried %lld of %lld bytes in %d ms; the source:\n%s",
				 tu_proxy_stats_int(F.link, "bytes_up"), bytes, timeout_ms, log);
		}
		tu_msleep(10);
	}
}

/*
 * drasync-source status -o json: its exit code; agent.connected into
 * *connected, agent.lastEvent into last.
 */
static int source_status(bool *connected, char last[64])
{
	struct tu_run r;
	json_t *doc;
	int code;

	tu_run(&r, NULL,
	       (const char *[]){tu_env("DS_SOURCE_BIN"), "status", "--config", F.s.source_cfg, "-o",
				"json", NULL});
	doc = json_loads(r.out, 0, NULL);
	if (!doc)
		fail_msg("drasync-source status -o json exited %d, not JSON:\n%s\n%s", r.status,
			 r.out, r.err);
	*connected = json_is_true(json_object_get(json_object_get(doc, "agent"), "connected"));
	snprintf(
	    last, 64, "%s",
	    json_string_value(json_object_get(json_object_get(doc, "agent"), "lastEvent"))
		? json_string_value(json_object_get(json_object_get(doc, "agent"), "lastEvent"))
		: "");
	json_decref(doc);
	code = r.status;
	tu_run_dispose(&r);
	return code;
}

static void test_link_faults__cut_mid_stream_then_restored(void **state)
{
	int n = tu_soak() ? 10000 : 500, cut_ms = tu_soak() ? 60000 : 10000;
	/* Slow enough that the first pass takes seconds: the cut lands mid-stream. */
	int rate_kbit = tu_soak() ? 20000 : 1000;
	long long t_cut, t_restore, t_done;
	double acked_at_cut, acked_before_restore, pushed;
	bool connected = true;
	char *log, last[64];

	(void)state;
	start("lcut", n, 0, rate_kbit, 0);

	/* About half the first pass's bytes are through (some 1,400 bytes an
	 * object on the wire): cut. */
	wait_bytes_up((long long)n * 700, 120000);
	tu_proxy_cut(F.link);
	t_cut = tu_now_ms();
	tu_msleep(300);
	acked_at_cut = src_metric("drasync_source_records_acknowledged_total");
	if (acked_at_cut >= n)
		fail_msg("the cut came too late: %.0f of %d records already acknowledged",
			 acked_at_cut, n);

	/* The source keeps changing during the outage: a tenth changed, a
	 * hundredth deleted, a hundredth new. */
	tu_load_change(F.src, F.ns, 0, n / 10, 1);
	tu_load_delete(F.src, F.ns, n - n / 100, n / 100);
	tu_load_create(F.src, F.ns, n, n / 100, PAYLOAD);
	while (tu_now_ms() - t_cut < cut_ms - 1000)
		tu_msleep(100);

	/* Nothing passed, and the source says so. */
	acked_before_restore = src_metric("drasync_source_records_acknowledged_total");
	pushed = src_metric("drasync_source_records_pushed_total");
	assert_true(acked_before_restore == acked_at_cut);
	assert_true(pushed > acked_before_restore);
	assert_true(src_metric("drasync_source_link_up") == 0);
	assert_int_equal(source_status(&connected, last), 1);
	assert_false(connected);
	if (strcmp(last, "disconnected") != 0 && strcmp(last, "hello_timeout") != 0 &&
	    strcmp(last, "ack_timeout") != 0)
		fail_msg("drasync-source status during the cut: last event %s", last);
	log = tu_site_source_run_log(&F.s);
	if (count_lines(log, "event=disconnected") < 1)
		fail_msg("the source's log does not tell of the cut:\n%s", log);
	free(log);
	while (tu_now_ms() - t_cut < cut_ms)
		tu_msleep(50);

	tu_proxy_restore(F.link);
	t_restore = tu_now_ms();
	tu_assert_same_objects(F.src, F.ns, F.dst, F.dst_ns, kinds, tu_soak() ? 900000 : 60000);
	t_done = tu_now_ms();

	/* Back up: a new session, every record acknowledged. */
	log = tu_site_source_run_log(&F.s);
	if (count_lines(log, "event=session_open") < 2)
		fail_msg("the source's log has no second session after the restore:\n%s", log);
	free(log);
	assert_true(src_metric("drasync_source_link_up") == 1);
	assert_true(src_metric("drasync_source_link_reconnects_total") >= 1);
	for (long long end = tu_now_ms() + 30000;
	     src_metric("drasync_source_records_acknowledged_total") <
	     src_metric("drasync_source_records_pushed_total");)
		if (tu_now_ms() > end)
			fail_msg("records pushed and never acknowledged after the restore");
		else
			tu_msleep(100);
	assert_int_equal(source_status(&connected, last), 0);
	assert_true(connected);
	assert_string_equal(last, "session_open");
	print_message("cut: %d objects, %.0f acknowledged at the cut, %lld ms cut, caught up "
		      "%lld ms after the restore; %lld bytes up, %lld down, %lld connections\n",
		      n, acked_at_cut, t_restore - t_cut, t_done - t_restore,
		      tu_proxy_stats_int(F.link, "bytes_up"),
		      tu_proxy_stats_int(F.link, "bytes_down"),
		      tu_proxy_stats_int(F.link, "connections"));
	print_message("SOAK test=link_faults case=cut objects=%d acked_at_cut=%.0f cut_s=%.1f "
		      "catch_up_s=%.1f bytes_up=%lld\n",
		      n, acked_at_cut, (double)(t_restore - t_cut) / 1000,
		      (double)(t_done - t_restore) / 1000, tu_proxy_stats_int(F.link, "bytes_up"));

	tu_site_source_sigterm(&F.s);
	tu_site_agent_sigterm(&F.s);
}

static void test_link_faults__slow_lossy_link(void **state)
{
	int n = tu_soak() ? 10000 : 500;
	long long t0, t_done;

	(void)state;
	t0 = tu_now_ms();
	start("lloss", n, 50, tu_soak() ? 20000 : 4000, 10);

	/* Changes while the first pass is on the wire. */
	wait_bytes_up((long long)n * 600 / 4, 120000);
	tu_load_change(F.src, F.ns, 0, n / 5, 1);
	tu_load_delete(F.src, F.ns, n - n / 50, n / 50);
	tu_assert_same_objects(F.src, F.ns, F.dst, F.dst_ns, kinds, tu_soak() ? 1800000 : 75000);
	t_done = tu_now_ms();
	print_message("lossy: %d objects over 50 ms latency, 10%% loss: equal after %lld ms; "
		      "%lld bytes up, %lld down, %lld connections\n",
		      n, t_done - t0, tu_proxy_stats_int(F.link, "bytes_up"),
		      tu_proxy_stats_int(F.link, "bytes_down"),
		      tu_proxy_stats_int(F.link, "connections"));
	print_message("SOAK test=link_faults case=lossy objects=%d latency_ms=50 loss_pct=10 "
		      "equal_s=%.1f bytes_up=%lld\n",
		      n, (double)(t_done - t0) / 1000, tu_proxy_stats_int(F.link, "bytes_up"));

	tu_site_source_sigterm(&F.s);
	tu_site_agent_sigterm(&F.s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_link_faults__cut_mid_stream_then_restored, teardown),
	    cmocka_unit_test_teardown(test_link_faults__slow_lossy_link, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
