/*
 * The target's ledger stays the size of what it holds, however long it runs
 * (docs/store.md "Compaction"): drasync-source run in watch mode on the v1
 * cluster, drasync-target run on the v1beta1 cluster; N objects created, then
 * each changed M times on the source. Once the target holds the last version
 * of every object, its ledger (ledger.db once the agent stopped) is within
 * FACTOR times the ledger of a fresh sync of the same objects by a second
 * target agent with a new ledger; the agent said what compaction did (log,
 * metrics).
 *
 * CI runs 100 objects x 20 changes; DS_SOAK=1 (scripts/soak.sh) 1,000 x 500;
 * DS_COMPACT_OBJECTS and DS_COMPACT_CHANGES set other counts.
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
#include "tu_site.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SOURCE "prod-east"
#define PAYLOAD 1200 /* bytes of noise per object */
/* The churned ledger against a fresh one of the same objects: measured about
 * 1.0-1.3 (docs/benchmarks.md); without compaction it is about M. */
#define FACTOR 3.0

static const char *const kinds[] = {"v1/ConfigMap", "v1/Secret", "apps/v1/Deployment", NULL};

struct fx {
	tu_site s, fresh;
	ds_kube *src, *dst;
	char *ns;
	char dst_ns[300], fresh_ns[300];
	char metrics[64];
};

static struct fx F;

static int teardown(void **state)
{
	(void)state;
	tu_site_dispose(&F.s);
	tu_site_dispose(&F.fresh);
	if (F.ns)
		tu_kube_drop_namespace(F.src, F.ns);
	if (F.dst && F.dst_ns[0])
		tu_kube_drop_namespace(F.dst, strdup(F.dst_ns)); /* takes the name */
	if (F.dst && F.fresh_ns[0])
		tu_kube_drop_namespace(F.dst, strdup(F.fresh_ns));
	ds_kube_free(F.src);
	ds_kube_free(F.dst);
	memset(&F, 0, sizeof(F));
	return 0;
}

static int count_of(const char *env, int ci, int soak)
{
	const char *v = getenv(env);

	return v && atoi(v) > 0 ? atoi(v) : tu_soak() ? soak : ci;
}

/* A target agent on site s (mapping the source namespace to dst_ns), and the source agent. */
static void start_pair(tu_site *s, const char *prefix, const char *dst_ns, int metrics_port)
{
	char *extra;

	tu_site_init(s, prefix, tu_env("DS_KUBECONFIG_V1BETA1"), SOURCE);
	assert_true(asprintf(&extra,
			     "mode: migrate\nnamespaceMappings: {%s: %s}\n"
			     "metrics: {listen: \"127.0.0.1:%d\"}\n",
			     F.ns, dst_ns, metrics_port) > 0);
	tu_site_write_config(s, extra);
	free(extra);
	tu_site_agent_start(s);
	assert_true(asprintf(&extra, "namespaces: [%s]\nschedule: {mode: watch}\n", F.ns) > 0);
	tu_site_write_source_config(s, extra);
	free(extra);
	tu_site_source_start(s, tu_env("DS_KUBECONFIG_V1"), NULL);
}

static double metric(const char *series)
{
	return tu_metric(F.metrics, series);
}

static long long file_size(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0 ? (long long)sb.st_size : -1;
}

static void test_ledger_compaction__churn_keeps_the_ledger_near_a_fresh_one(void **state)
{
	int n = count_of("DS_COMPACT_OBJECTS", 100, 1000);
	int m = count_of("DS_COMPACT_CHANGES", 20, 500);
	int port = tu_free_port();
	long long t0 = tu_now_ms(), bytes, fresh, end;
	double records = -1, compacted, committed;
	char *log;

	(void)state;
	memset(&F, 0, sizeof(F));
	F.src = tu_kube_connect(tu_env("DS_KUBECONFIG_V1"));
	F.dst = tu_kube_connect(tu_env("DS_KUBECONFIG_V1BETA1"));
	F.ns = tu_kube_new_namespace(F.src, "cmpct", "");
	snprintf(F.dst_ns, sizeof(F.dst_ns), "%s-dr", F.ns);
	snprintf(F.fresh_ns, sizeof(F.fresh_ns), "%s-fr", F.ns);
	snprintf(F.metrics, sizeof(F.metrics), "http://127.0.0.1:%d", port);
	tu_load_create(F.src, F.ns, 0, n, PAYLOAD);
	start_pair(&F.s, "cmpct", F.dst_ns, port);
	tu_assert_same_objects(F.src, F.ns, F.dst, F.dst_ns, kinds, tu_soak() ? 900000 : 90000);

	/* The history: every object changed m times. */
	for (int round = 1; round <= m; round++)
		tu_load_change(F.src, F.ns, 0, n, round);
	tu_assert_same_objects(F.src, F.ns, F.dst, F.dst_ns, kinds, tu_soak() ? 1800000 : 120000);

	/* Compaction catches up between passes (every 5 s): the ledger holds the
	 * live objects' records, not their history. */
	for (end = tu_now_ms() + (tu_soak() ? 600000 : 60000); tu_now_ms() < end; tu_msleep(500)) {
		records = metric("drasync_target_ledger_records");
		if (records >= 0 && records <= n + 4)
			break;
	}
	compacted = metric("drasync_target_ledger_compacted_rows_total{table=\"records\"}");
	if (records < 0 || records > n + 4) {
		log = tu_site_run_log(&F.s);
		fail_msg("the ledger still holds %.0f records for %d objects (%.0f compacted); the "
			 "agent:\n%s",
			 records, n, compacted, log);
	}
	/* Everything the source committed but the live objects' records (and a
	 * snapshot end) went; the watch may coalesce changes, so count what came. */
	committed = metric("drasync_target_source_committed_seq{source=\"" SOURCE "\"}");
	assert_true(committed >= 2.0 * n); /* there was a history to compact */
	if (compacted < committed - n - 8)
		fail_msg("%.0f records committed, %.0f compacted, %.0f left for %d objects",
			 committed, compacted, records, n);
	assert_true(metric("drasync_target_ledger_bytes") > 0);
	log = tu_site_run_log(&F.s);
	if (!strstr(log, "event=ledger_compacted"))
		fail_msg("no ledger_compacted line in the agent's log:\n%s", log);
	free(log);
	tu_site_source_sigterm(&F.s);
	tu_site_agent_sigterm(&F.s);
	bytes = file_size(F.s.ledger); /* the agent closed it: its log is in the file */

	/* The same objects, synced once into a new ledger. */
	start_pair(&F.fresh, "cmpfr", F.fresh_ns, tu_free_port());
	tu_assert_same_objects(F.src, F.ns, F.dst, F.fresh_ns, kinds, tu_soak() ? 900000 : 90000);
	tu_site_source_sigterm(&F.fresh);
	tu_site_agent_sigterm(&F.fresh);
	fresh = file_size(F.fresh.ledger);
	assert_true(bytes > 0 && fresh > 0);

	print_message("ledger compaction: %d objects x %d changes: %lld bytes after, %lld fresh "
		      "(%.2fx), %.0f records committed, %.0f compacted, %lld s\n",
		      n, m, bytes, fresh, (double)bytes / (double)fresh, committed, compacted,
		      (tu_now_ms() - t0) / 1000);
	print_message("SOAK test=ledger_compaction objects=%d changes=%d ledger_bytes=%lld "
		      "fresh_bytes=%lld factor=%.2f\n",
		      n, m, bytes, fresh, (double)bytes / (double)fresh);
	if ((double)bytes > FACTOR * (double)fresh)
		fail_msg("the churned ledger is %lld bytes, %.2f times a fresh one (%lld): more "
			 "than %.1f",
			 bytes, (double)bytes / (double)fresh, fresh, FACTOR);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(
		test_ledger_compaction__churn_keeps_the_ledger_near_a_fresh_one, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
