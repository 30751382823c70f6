/*
 * The target's API server misbehaves (tests/kube/faultproxy api in front of
 * the v1beta1 cluster's kube-apiserver; drasync-target run --kubeconfig the
 * proxy's): drasync-source run in watch mode on the v1 cluster pushes
 * straight to drasync-target run.
 *
 * 1. Every write answered 503: the link does not wait for the API server,
 *    every record is committed and acknowledged to the source while nothing
 *    can be applied.
 * 2. Then 429 with Retry-After on ~30 % of the writes, then 503 on ~30 %,
 *    then ~30 % of the connections reset without an answer, the source
 *    changing objects in each phase: retried, every object applied in the
 *    end and equal by hash of the sanitized content, the source's records
 *    acknowledged all along, and the target's metrics count the retries.
 *
 * CI runs 300 objects; DS_SOAK=1 (scripts/soak.sh) 3,000.
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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SOURCE "prod-east"
#define PAYLOAD 600

static const char *const kinds[] = {"v1/ConfigMap", "v1/Secret", "apps/v1/Deployment", NULL};

struct fx {
	tu_site s;
	tu_proxy *api;
	ds_kube *src, *dst;
	char *ns;
	char dst_ns[300];
	char src_metrics[64], dst_metrics[64];
};

static struct fx F;

static int teardown(void **state)
{
	(void)state;
	tu_site_dispose(&F.s);
	tu_proxy_stop(F.api);
	if (F.ns)
		tu_kube_drop_namespace(F.src, F.ns);
	ds_kube_free(F.src);
	ds_kube_free(F.dst);
	memset(&F, 0, sizeof(F));
	return 0;
}

static double src_metric(const char *series)
{
	return tu_metric(F.src_metrics, series);
}

static double dst_metric(const char *series)
{
	return tu_metric(F.dst_metrics, series);
}

/*
 * Wait until the source has every record it pushed (at least `min`)
 * acknowledged: the link kept going, whatever the API server does.
 */
static void wait_all_acked(double min, int timeout_ms, const char *phase)
{
	long long end = tu_now_ms() + timeout_ms;

	for (;;) {
		double pushed = src_metric("drasync_source_records_pushed_total");
		double acked = src_metric("drasync_source_records_acknowledged_total");

		if (pushed >= min && acked >= pushed)
			return;
		if (tu_now_ms() > end) {
			char *log = tu_site_run_log(&F.s);

			fail_msg("%s: the source has %.0f of %.0f records acknowledged (want >= "
				 "%.0f) after %d ms: the link stalled; the target:\n%s",
				 phase, acked, pushed, min, timeout_ms, log);
		}
		tu_msleep(100);
	}
}

static long long injected(const char *kind)
{
	char key[32];

	snprintf(key, sizeof(key), "injected.%s", kind);
	return tu_proxy_stats_int(F.api, key);
}

/* One phase: `kind` on `ratio` of the writes while the source changes; then equality. */
static void phase(const char *kind, int retry_after, int n, int round)
{
	long long t0 = tu_now_ms(), before = injected(kind);
	double retries0 = dst_metric("drasync_target_kube_retries_total");
	double pushed0 = src_metric("drasync_source_records_pushed_total");

	tu_proxy_faults(F.api, kind, 0.3, retry_after, NULL);
	tu_load_change(F.src, F.ns, round * 7 % n, n / 3, round);
	tu_load_create(F.src, F.ns, n * round, n / 10, PAYLOAD);
	/* Acknowledged while the faults go on (they stay on until the objects are equal). */
	wait_all_acked(pushed0 + n / 3 + n / 10, 30000, kind);
	tu_assert_same_objects(F.src, F.ns, F.dst, F.dst_ns, kinds, tu_soak() ? 600000 : 60000);
	if (injected(kind) <= before)
		fail_msg("phase %s: the proxy injected no fault", kind);
	if (dst_metric("drasync_target_kube_retries_total") <= retries0)
		fail_msg("phase %s: the target's metrics show no retry", kind);
	print_message("phase %s: %lld faults injected, %.0f retries, equal after %lld ms\n", kind,
		      injected(kind) - before,
		      dst_metric("drasync_target_kube_retries_total") - retries0, tu_now_ms() - t0);
	print_message("SOAK test=api_faults phase=%s objects=%d injected=%lld retries=%.0f "
		      "equal_s=%.1f\n",
		      kind, n, injected(kind) - before,
		      dst_metric("drasync_target_kube_retries_total") - retries0,
		      (double)(tu_now_ms() - t0) / 1000);
}

static void test_api_faults__429_503_resets_retried_nothing_lost(void **state)
{
	int n = tu_soak() ? 3000 : 300;
	int sport = tu_free_port(), dport = tu_free_port();
	long long applied;
	char *extra, *log;

	(void)state;
	memset(&F, 0, sizeof(F));
	F.src = tu_kube_connect(tu_env("DS_KUBECONFIG_V1"));
	F.dst = tu_kube_connect(tu_env("DS_KUBECONFIG_V1BETA1"));
	F.ns = tu_kube_new_namespace(F.src, "apif", "");
	snprintf(F.dst_ns, sizeof(F.dst_ns), "%s-dr", F.ns);
	tu_load_create(F.src, F.ns, 0, n, PAYLOAD);

	tu_site_init(&F.s, "apif", NULL, SOURCE);
	F.api = tu_proxy_start_api(tu_env("DS_KUBECONFIG_V1BETA1"), F.s.dir);
	F.s.kubeconfig = tu_proxy_kubeconfig(F.api);
	snprintf(F.dst_metrics, sizeof(F.dst_metrics), "http://127.0.0.1:%d", dport);
	snprintf(F.src_metrics, sizeof(F.src_metrics), "http://127.0.0.1:%d", sport);
	assert_true(asprintf(&extra,
			     "mode: migrate\nnamespaceMappings: {%s: %s}\n"
			     "metrics: {listen: \"127.0.0.1:%d\"}\n",
			     F.ns, F.dst_ns, dport) > 0);
	tu_site_write_config(&F.s, extra);
	free(extra);
	assert_true(asprintf(&extra,
			     "namespaces: [%s]\nschedule: {mode: watch}\n"
			     "metrics: {listen: \"127.0.0.1:%d\"}\n",
			     F.ns, sport) > 0);
	tu_site_write_source_config(&F.s, extra);
	free(extra);

	/* 1. No write gets through: every record is acknowledged all the same. */
	tu_proxy_faults(F.api, "503", 1.0, 0, NULL);
	tu_site_agent_start(&F.s);
	tu_site_source_start(&F.s, tu_env("DS_KUBECONFIG_V1"), NULL);
	wait_all_acked(n, 60000, "all writes 503");
	/* The acks may come before the apply stage's first write: wait for it. */
	for (long long end = tu_now_ms() + 30000; injected("503") == 0;) {
		if (tu_now_ms() > end)
			fail_msg("the apply stage sent no write in 30 s after every record was "
				 "acknowledged");
		tu_msleep(50);
	}
	applied =
	    tu_site_ledger_int(&F.s, "SELECT count(*) FROM object_state WHERE state = 'applied'");
	if (applied > 0)
		fail_msg("%lld objects applied while every write was answered 503", applied);

	/* 2. Faults on a share of the writes, phase after phase. */
	phase("429", 1, n, 1);
	phase("503", 0, n, 2);
	phase("reset", 0, n, 3);
	tu_load_delete(F.src, F.ns, 0, n / 10);
	tu_proxy_faults(F.api, "none", 0, 0, NULL);
	tu_assert_same_objects(F.src, F.ns, F.dst, F.dst_ns, kinds, 60000);

	/* The retries show in the target's log too (the applier's own, or the
	 * client's when an object gave up there); nothing failed for good. */
	log = tu_site_run_log(&F.s);
	if (strstr(log, " state=failed"))
		fail_msg("an object failed for good:\n%s", log);
	free(log);
	assert_true(dst_metric("drasync_target_kube_retries_total") > 0);

	tu_site_source_sigterm(&F.s);
	tu_site_agent_sigterm(&F.s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_api_faults__429_503_resets_retried_nothing_lost,
				      teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
