/*
 * The source reaches its target only through a SOCKS5 proxy, under a
 * bandwidth cap of 1Mi: drasync-source run (watch mode, v1 cluster) with
 * target.proxy = socks5://127.0.0.1:P, target.proxyCredentialsFile (user:pass,
 * mode 0600) and target.bandwidth, drasync-target run on the v1beta1 cluster.
 *
 *   source --> faultproxy tcp (counts the bytes) --> microsocks (Debian's,
 *   username/password, outgoing connections bound to 127.0.0.3) --> target
 *
 * The target's accepted connections (its debug events) all come from
 * 127.0.0.3, the proxy's outgoing address, never from the source's own
 * 127.0.0.1: the records went through the proxy, authenticated. The cap
 * holds: the rate of the sync's middle 80 %, measured from the sender's own
 * counter (drasync_source_link_bandwidth_bytes_total) and independently from
 * the bytes the faultproxy carried towards the proxy, never passes it by 5 %
 * and uses at least 0.85 of it (0.99-1.00 on a quiet machine: docs/benchmarks.md);
 * the time held shows in drasync_source_link_bandwidth_wait_seconds_total;
 * `status` shows the cap and the proxy; the password is in no log line, no
 * status output and no state file.
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

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SOURCE "prod-east"
#define PASSWORD "pr0xy-s3cret-7f3a"
#define PROXY_OUT_IP "127.0.0.3"
#define RATE (1024 * 1024) /* bytes per second: the cap, target.bandwidth: 1Mi */
#define OBJECTS 1300
#define PAYLOAD 10000 /* incompressible bytes an object: some 9 s of the cap in all */

static const char *const kinds[] = {"v1/ConfigMap", "v1/Secret", "apps/v1/Deployment", NULL};

struct sample {
	long long t_ms;
	double metered;	   /* the sender's counter */
	long long relayed; /* the faultproxy's bytes towards the proxy */
};

#define SAMPLES_MAX 2000

static struct {
	tu_site s;
	tu_proxy *relay;
	int socks_pid;
	char socks_log[1200];
	ds_kube *src, *dst;
	char *ns;
	char dst_ns[300];
	char src_metrics[64];
	struct sample v[SAMPLES_MAX];
	size_t n;
} F;

static int teardown(void **state)
{
	(void)state;
	tu_site_dispose(&F.s);
	tu_proxy_stop(F.relay);
	if (F.socks_pid > 0) {
		kill(F.socks_pid, SIGKILL);
		tu_wait_exit(F.socks_pid, 5000);
	}
	if (F.ns)
		tu_kube_drop_namespace(F.src, F.ns);
	ds_kube_free(F.src);
	ds_kube_free(F.dst);
	memset(&F, 0, sizeof(F));
	return 0;
}

/* microsocks on 127.0.0.1:port, username/password required, going out from 127.0.0.3. */
static void socks_start(int port)
{
	char p[16];

	snprintf(p, sizeof(p), "%d", port);
	snprintf(F.socks_log, sizeof(F.socks_log), "%s/microsocks.log", F.s.dir);
	F.socks_pid = tu_spawn(
	    F.socks_log, (const char *[]){"/usr/bin/microsocks", "-i", "127.0.0.1", "-p", p, "-u",
					  "drasync", "-P", PASSWORD, "-b", PROXY_OUT_IP, NULL});
	for (int i = 0; i < 100; i++) {
		struct tu_run r;
		char cmd[200];
		int code;

		snprintf(cmd, sizeof(cmd), "exec 3<>/dev/tcp/127.0.0.1/%d", port);
		tu_run(&r, NULL, (const char *[]){"/bin/bash", "-c", cmd, NULL});
		code = r.status;
		tu_run_dispose(&r);
		if (code == 0)
			return;
		tu_msleep(50);
	}
	fail_msg("microsocks did not listen on 127.0.0.1:%d", port);
}

static void sample(void)
{
	assert_true(F.n < SAMPLES_MAX);
	F.v[F.n].t_ms = tu_now_ms();
	F.v[F.n].metered = tu_metric(F.src_metrics, "drasync_source_link_bandwidth_bytes_total");
	F.v[F.n].relayed = tu_proxy_stats_int(F.relay, "bytes_up");
	F.n++;
}

/*
 * Bytes per second over the middle of the transfer (from 10 % to 90 % of the
 * final count): the least-squares slope of count over time, which evens out
 * the steps a frame at a time makes.
 */
static double rate_of(bool metered, double *seconds)
{
	double total = metered ? F.v[F.n - 1].metered : (double)F.v[F.n - 1].relayed;
	double sx = 0, sy = 0, sxx = 0, sxy = 0, k = 0, t0 = -1, t1 = 0;

	for (size_t i = 0; i < F.n; i++) {
		double y = metered ? F.v[i].metered : (double)F.v[i].relayed;
		double x = (double)F.v[i].t_ms / 1000.0;

		if (y < 0.1 * total || y > 0.9 * total)
			continue;
		if (t0 < 0)
			t0 = x;
		t1 = x;
		sx += x;
		sy += y;
		sxx += x * x;
		sxy += x * y;
		k++;
	}
	if (k < 10)
		fail_msg("only %.0f samples in the middle of the transfer", k);
	*seconds = t1 - t0;
	return (k * sxy - sx * sy) / (k * sxx - sx * sx);
}

static void assert_no_password(const char *what, const char *text)
{
	if (text && strstr(text, PASSWORD))
		fail_msg("the proxy's password is in %s:\n%s", what, text);
}

static void test_link_proxy__socks5_only_path_under_the_cap(void **state)
{
	int sport = tu_free_port(), socks_port = tu_free_port();
	char cred[900], *extra, *log, *tlog, *state_file;
	double rate_m, rate_r, secs_m, secs_r, wait_s;
	long long t_start, t_done;
	struct tu_run st;
	int accepted = 0;

	(void)state;
	memset(&F, 0, sizeof(F));
	F.src = tu_kube_connect(tu_env("DS_KUBECONFIG_V1"));
	F.dst = tu_kube_connect(tu_env("DS_KUBECONFIG_V1BETA1"));
	F.ns = tu_kube_new_namespace(F.src, "lproxy", "");
	snprintf(F.dst_ns, sizeof(F.dst_ns), "%s-dr", F.ns);
	tu_load_create(F.src, F.ns, 0, OBJECTS, PAYLOAD);

	/* The target, logging every accepted connection with its peer. */
	tu_site_init(&F.s, "lproxy", tu_env("DS_KUBECONFIG_V1BETA1"), SOURCE);
	assert_true(
	    asprintf(&extra, "mode: migrate\nnamespaceMappings: {%s: %s}\n", F.ns, F.dst_ns) > 0);
	tu_site_write_config(&F.s, extra);
	free(extra);
	tu_site_agent_start_args(&F.s, (const char *[]){"--log-level", "debug", NULL});

	/* The only way: the relay, then the SOCKS5 proxy. */
	socks_start(socks_port);
	F.relay = tu_proxy_start_tcp(socks_port, 0, 0, 0);

	snprintf(cred, sizeof(cred), "%s/proxy-credentials", F.s.dir);
	tu_write_file(cred, "# the site's egress proxy\ndrasync:" PASSWORD "\n");
	assert_int_equal(chmod(cred, 0600), 0);
	snprintf(F.s.source_target_extra, sizeof(F.s.source_target_extra),
		 ", bandwidth: 1Mi, proxy: \"socks5://127.0.0.1:%d\", proxyCredentialsFile: %s",
		 tu_proxy_port(F.relay), cred);
	snprintf(F.src_metrics, sizeof(F.src_metrics), "http://127.0.0.1:%d", sport);
	assert_true(asprintf(&extra,
			     "namespaces: [%s]\nschedule: {mode: watch}\n"
			     "metrics: {listen: \"127.0.0.1:%d\"}\n",
			     F.ns, sport) > 0);
	tu_site_write_source_config(&F.s, extra);
	free(extra);
	t_start = tu_now_ms();
	tu_site_source_start(&F.s, tu_env("DS_KUBECONFIG_V1"), NULL);

	/* Sample both counters until every record is acknowledged. */
	for (;;) {
		double pushed, acked;

		tu_msleep(100);
		sample();
		pushed = tu_metric(F.src_metrics, "drasync_source_records_pushed_total");
		acked = tu_metric(F.src_metrics, "drasync_source_records_acknowledged_total");
		if (pushed >= OBJECTS && acked >= pushed)
			break;
		if (tu_now_ms() - t_start > 50000) {
			log = tu_site_source_run_log(&F.s);
			fail_msg("not synced in 50 s (%.0f of %.0f acknowledged); the source:\n%s",
				 acked, pushed, log);
		}
	}
	t_done = tu_now_ms();
	tu_assert_same_objects(F.src, F.ns, F.dst, F.dst_ns, kinds, 30000);

	/* Through the proxy and nowhere else. */
	tlog = tu_site_run_log(&F.s);
	for (const char *p = strstr(tlog, "event=accepted"); p;
	     p = strstr(p + 1, "event=accepted")) {
		const char *peer = strstr(p, "peer=");
		const char *eol = strchr(p, '\n');

		if (!peer || (eol && peer > eol))
			fail_msg("an accepted line without its peer:\n%s", tlog);
		if (strncmp(peer + 5, PROXY_OUT_IP ":", strlen(PROXY_OUT_IP) + 1) != 0 &&
		    strncmp(peer + 5, "\"" PROXY_OUT_IP ":", strlen(PROXY_OUT_IP) + 2) != 0)
			fail_msg("the target accepted a connection not from the proxy:\n%.200s", p);
		accepted++;
	}
	if (accepted < 1)
		fail_msg("the target logged no accepted connection:\n%s", tlog);
	assert_true(tu_proxy_stats_int(F.relay, "connections") >= 1);

	/* The cap held, by the sender's count and by the relay's. */
	rate_m = rate_of(true, &secs_m);
	rate_r = rate_of(false, &secs_r);
	wait_s = tu_metric(F.src_metrics, "drasync_source_link_bandwidth_wait_seconds_total");
	print_message("proxy+cap: %d objects, %.0f bytes metered, %lld relayed in %.1f s; "
		      "rate %.0f B/s (sender) %.0f B/s (relay) over %.1f s, cap %d; held %.1f s; "
		      "%d connection(s) accepted from " PROXY_OUT_IP "\n",
		      OBJECTS, F.v[F.n - 1].metered, F.v[F.n - 1].relayed,
		      (double)(t_done - t_start) / 1000, rate_m, rate_r, secs_m, RATE, wait_s,
		      accepted);
	if (secs_m < 5)
		fail_msg("the transfer's middle took %.1f s: too short to measure a rate", secs_m);
	/* The cap is a ceiling: neither count may pass it by more than 5 %. Below it,
	 * a loaded machine (CI) can leave the sender short of work for a moment, so
	 * the suite asks only that the link was used (0.85); the quiet-machine
	 * figure (within 5 %) is in docs/benchmarks.md. */
	if (rate_m > 1.05 * RATE || rate_r > 1.05 * RATE)
		fail_msg("the rate passed the cap %d by more than 5%%: %.0f (sender), %.0f (relay)",
			 RATE, rate_m, rate_r);
	if (rate_m < 0.85 * RATE || rate_r < 0.85 * RATE)
		fail_msg("the link ran under 0.85 of the cap %d: %.0f (sender), %.0f (relay)", RATE,
			 rate_m, rate_r);
	/* The relay carried what the sender metered, and a little framing. */
	assert_true((double)F.v[F.n - 1].relayed >= F.v[F.n - 1].metered);
	assert_true((double)F.v[F.n - 1].relayed < F.v[F.n - 1].metered * 1.05 + 65536);
	if (wait_s < 1)
		fail_msg("drasync_source_link_bandwidth_wait_seconds_total is %.2f", wait_s);
	assert_true(tu_metric(F.src_metrics,
			      "drasync_source_link_bandwidth_limit_bytes_per_second") == RATE);

	/* What the operator sees, and where the password is not. */
	log = tu_site_source_run_log(&F.s);
	if (!strstr(log, "event=bandwidth_capped"))
		fail_msg("the source did not log that the cap holds it back:\n%s", log);
	assert_no_password("the source's log", log);
	assert_no_password("the target's log", tlog);
	tu_run(
	    &st, NULL,
	    (const char *[]){tu_env("DS_SOURCE_BIN"), "status", "--config", F.s.source_cfg, NULL});
	if (!strstr(st.out, "bandwidth:    capped at 1048576 bytes/s") ||
	    !strstr(st.out, "proxy:        SOCKS5 127.0.0.1:"))
		fail_msg("status does not show the cap and the proxy:\n%s", st.out);
	assert_no_password("status", st.out);
	assert_no_password("status (stderr)", st.err);
	tu_run_dispose(&st);
	assert_true(asprintf(&extra, "%s/source-state/agent.json", F.s.dir) > 0);
	state_file = tu_read_file(extra, NULL);
	assert_no_password("agent.json", state_file);
	free(state_file);
	free(extra);
	print_message("RESULT test=link_proxy cap_bytes_s=%d rate_sender=%.0f rate_relay=%.0f "
		      "ratio_sender=%.4f ratio_relay=%.4f wait_s=%.1f sync_s=%.1f\n",
		      RATE, rate_m, rate_r, rate_m / RATE, rate_r / RATE, wait_s,
		      (double)(t_done - t_start) / 1000);
	free(log);
	free(tlog);
	tu_site_source_sigterm(&F.s);
	tu_site_agent_sigterm(&F.s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_link_proxy__socks5_only_path_under_the_cap, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
