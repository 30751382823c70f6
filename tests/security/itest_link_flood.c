/*
 * A flood of unauthenticated connections on the target's link port while a
 * real source syncs through it (issue 23 item 1): drasync-source run in watch
 * mode on the v1 cluster, drasync-target run on the v1beta1 cluster with
 * link: {maxFrameBytes: 2 MiB, maxUnauthenticated: 32,
 * maxUnauthenticatedPerAddress: 8, refusalLogWindow: 3s}. Once the first
 * objects are through, a flood client in this process opens many more TCP
 * connections than the caps allow, half from 127.0.0.1 (the source's own
 * address) and half from 127.0.0.2-6, and on each sends a ZMTP 3.0 CURVE
 * greeting then a handshake command as large as allowed (2 MiB, sent whole),
 * one byte larger (refused at its header), or nothing (held until the
 * handshake timeout), reconnecting as soon as the target closes it; a few
 * libzmq CURVE clients with keys the target does not know are refused by
 * ZAP over and over. Meanwhile objects are created on the source.
 *
 * Asserted: the target's RSS (VmRSS, sampled every 100 ms through the flood)
 * stays under the baseline taken before the flood plus 8 connections x 2 MiB
 * (what one address may make it buffer) plus 48 MiB of headroom (an ASan
 * build, its quarantine cut to 16 MiB for the agent; measured: see the
 * message printed); every object of the source arrives on the target; the
 * caps bite (drasync_target_link_conns_refused_total, both reasons) and the
 * gauge of unauthenticated connections never passes maxUnauthenticated; the
 * target's log holds a handful of warn lines per kind and address, not one
 * per connection, and refusals_repeated lines with the counts.
 *
 * CI: 64 connections for 8 s. DS_SOAK=1 (scripts/soak.sh): 400 for 60 s;
 * DS_FLOOD_CONNS and DS_FLOOD_SECONDS override both.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/keys.h"
#include "testutil.h"
#include "tu_compare.h"
#include "tu_kube.h"
#include "tu_load.h"
#include "tu_site.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#define SOURCE "prod-east"
#define PAYLOAD 1200
#define MiB (1024ll * 1024ll)
#define MAX_FRAME (2 * MiB)
#define CAP_TOTAL 32
#define CAP_PER_ADDRESS 8
#define WINDOW_S 3
#define ADDRESSES 6 /* 127.0.0.1 .. 127.0.0.6 */
#define ZAP_CLIENTS 4
#define HEADROOM_MB 48

static const char *const kinds[] = {"v1/ConfigMap", "v1/Secret", "apps/v1/Deployment", NULL};

struct fx {
	tu_site s;
	ds_kube *src, *dst;
	char *ns;
	char dst_ns[300];
	char dst_metrics[64];
};

static struct fx F;

static int teardown(void **state)
{
	(void)state;
	tu_site_dispose(&F.s);
	if (F.ns)
		tu_kube_drop_namespace(F.src, F.ns);
	ds_kube_free(F.src);
	ds_kube_free(F.dst);
	memset(&F, 0, sizeof(F));
	return 0;
}

static int env_int(const char *name, int dflt)
{
	const char *v = getenv(name);

	return v && atoi(v) > 0 ? atoi(v) : dflt;
}

/* VmRSS of pid in MiB; -1 when it cannot be read. */
static double rss_mb(int pid)
{
	char path[64], line[256];
	double kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "VmRSS:", 6) == 0)
			kb = atof(line + 6);
	fclose(f);
	return kb < 0 ? -1 : kb / 1024;
}

static int count_lines(const char *text, const char *a)
{
	int n = 0;

	for (const char *p = strstr(text, a); p; p = strstr(p + 1, a))
		n++;
	return n;
}

/* At most max lines of log hold needle; else fail with the first few of them. */
static void assert_few(char *log, const char *needle, int max)
{
	int n = count_lines(log, needle);
	char sample[12288] = "";
	size_t used = 0;
	const char *p = log;

	if (n <= max)
		return;
	for (int i = 0; i < 40 && (p = strstr(p, needle)); i++) {
		const char *bol = p, *eol = strchr(p, '\n');
		while (bol > log && bol[-1] != '\n')
			bol--;
		if (!eol)
			eol = p + strlen(p);
		used += (size_t)snprintf(sample + used, sizeof(sample) - used, "%.*s\n",
					 (int)(eol - bol < 150 ? eol - bol : 150), bol);
		if (used >= sizeof(sample))
			break;
		p = eol;
	}
	free(log);
	fail_msg("%d lines of the target's log hold %s (at most %d expected), e.g.:\n%s", n, needle,
		 max, sample);
}

/* ---- the flood client ---------------------------------------------------- */

enum { SEND_ALLOWED, SEND_OVER, SEND_NOTHING, SEND_MAX };

struct slot {
	int fd;
	int kind;
	size_t sent, total; /* bytes of greeting + header + body */
	long long closed_at;
};

struct flood {
	int port, conns, seconds;
	atomic_int stop;
	long long opened, closed, bytes;
	pthread_t thread;
};

static const uint8_t zeros[256 * 1024];

/* What slot s sends next, into *out: the greeting, the command's header, then
 * zeros for its body (a command no CURVE server takes). @return its length */
static size_t chunk(const struct slot *s, uint8_t head[64 + 9], const uint8_t **out)
{
	uint64_t size = s->kind == SEND_OVER ? (uint64_t)MAX_FRAME + 1 : (uint64_t)MAX_FRAME;
	size_t left = s->total - s->sent;

	memset(head, 0, 64 + 9);
	head[0] = 0xff; /* ZMTP 3.0 greeting of a CURVE client (RFC 23) */
	head[9] = 0x7f;
	head[10] = 3;
	memcpy(head + 12, "CURVE", 5);
	head[64] = 0x06; /* a long command frame */
	for (int i = 0; i < 8; i++)
		head[65 + i] = (uint8_t)(size >> (56 - 8 * i));
	if (s->sent < 64 + 9) {
		*out = head + s->sent;
		return (64 + 9 - s->sent) < left ? 64 + 9 - s->sent : left;
	}
	*out = zeros;
	return left < sizeof(zeros) ? left : sizeof(zeros);
}

static void slot_open(struct flood *fl, struct slot *s, int i)
{
	struct sockaddr_in sa = {0};
	char from[32];

	s->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (s->fd < 0)
		return;
	/* Half from 127.0.0.1, the rest spread over 127.0.0.2-6. */
	snprintf(from, sizeof(from), "127.0.0.%d", i % 2 ? 2 + (i / 2) % (ADDRESSES - 1) : 1);
	sa.sin_family = AF_INET;
	inet_pton(AF_INET, from, &sa.sin_addr);
	bind(s->fd, (struct sockaddr *)&sa, sizeof(sa));
	sa.sin_port = htons((uint16_t)fl->port);
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	if (connect(s->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS) {
		close(s->fd);
		s->fd = -1;
		return;
	}
	s->kind = (int)((fl->opened + (long long)i) % SEND_MAX);
	s->sent = 0;
	s->total = s->kind == SEND_NOTHING ? 64
		   : s->kind == SEND_OVER  ? 64 + 9
					   : 64 + 9 + (size_t)MAX_FRAME;
	fl->opened++;
}

static void slot_close(struct flood *fl, struct slot *s)
{
	close(s->fd);
	s->fd = -1;
	s->closed_at = tu_now_ms();
	fl->closed++;
}

static void *flood_main(void *arg)
{
	struct flood *fl = arg;
	struct slot *slots = calloc((size_t)fl->conns, sizeof(*slots));
	struct pollfd *pfd = calloc((size_t)fl->conns, sizeof(*pfd));
	static uint8_t buf[64 * 1024];
	uint8_t head[64 + 9];

	if (!slots || !pfd)
		abort();
	for (int i = 0; i < fl->conns; i++)
		slots[i].fd = -1;
	while (!atomic_load(&fl->stop)) {
		long long now = tu_now_ms();

		for (int i = 0; i < fl->conns; i++) {
			struct slot *s = &slots[i];
			/* Back within 20 ms of a close: a flood, not a busy loop. */
			if (s->fd < 0 && now - s->closed_at >= 20)
				slot_open(fl, s, i);
			pfd[i].fd = s->fd;
			pfd[i].events = (short)(POLLIN | (s->sent < s->total ? POLLOUT : 0));
			pfd[i].revents = 0;
		}
		if (poll(pfd, (nfds_t)fl->conns, 20) <= 0)
			continue;
		for (int i = 0; i < fl->conns; i++) {
			struct slot *s = &slots[i];
			if (s->fd < 0 || !pfd[i].revents)
				continue;
			if (pfd[i].revents & (POLLIN | POLLERR | POLLHUP)) {
				ssize_t n = recv(s->fd, buf, sizeof(buf), 0);
				if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
					slot_close(fl, s);
					continue;
				}
			}
			if ((pfd[i].revents & POLLOUT) && s->sent < s->total) {
				const uint8_t *p;
				size_t len = chunk(s, head, &p);
				ssize_t n = send(s->fd, p, len, MSG_NOSIGNAL);
				if (n < 0 && errno != EAGAIN && errno != EINTR) {
					slot_close(fl, s);
					continue;
				}
				if (n > 0) {
					s->sent += (size_t)n;
					fl->bytes += n;
				}
			}
		}
	}
	for (int i = 0; i < fl->conns; i++)
		if (slots[i].fd >= 0)
			close(slots[i].fd);
	free(slots);
	free(pfd);
	return NULL;
}

/* CURVE clients with keys nobody authorized: refused by ZAP, back in 100 ms. */
static void zap_clients(void *ctx, int port, const ds_keypair *server, void *socks[])
{
	char ep[64];
	int linger = 0, ivl = 100;

	snprintf(ep, sizeof(ep), "tcp://127.0.0.1:%d", port);
	for (int i = 0; i < ZAP_CLIENTS; i++) {
		ds_keypair me;
		ds_err err = {0};

		assert_int_equal(ds_keys_generate(&me, &err), 0);
		socks[i] = zmq_socket(ctx, ZMQ_DEALER);
		zmq_setsockopt(socks[i], ZMQ_LINGER, &linger, sizeof(linger));
		zmq_setsockopt(socks[i], ZMQ_RECONNECT_IVL, &ivl, sizeof(ivl));
		zmq_setsockopt(socks[i], ZMQ_CURVE_SERVERKEY, server->public_z85, 40);
		zmq_setsockopt(socks[i], ZMQ_CURVE_PUBLICKEY, me.public_z85, 40);
		zmq_setsockopt(socks[i], ZMQ_CURVE_SECRETKEY, me.secret_z85, 40);
		assert_int_equal(zmq_connect(socks[i], ep), 0);
	}
}

/* ---- the test ------------------------------------------------------------- */

static double dst_metric(const char *series)
{
	return tu_metric(F.dst_metrics, series);
}

static void start(int n)
{
	char *extra;
	int dport = tu_free_port();

	memset(&F, 0, sizeof(F));
	F.src = tu_kube_connect(tu_env("DS_KUBECONFIG_V1"));
	F.dst = tu_kube_connect(tu_env("DS_KUBECONFIG_V1BETA1"));
	F.ns = tu_kube_new_namespace(F.src, "lflood", "");
	snprintf(F.dst_ns, sizeof(F.dst_ns), "%s-dr", F.ns);
	tu_load_create(F.src, F.ns, 0, n, PAYLOAD);

	tu_site_init(&F.s, "lflood", tu_env("DS_KUBECONFIG_V1BETA1"), SOURCE);
	snprintf(F.dst_metrics, sizeof(F.dst_metrics), "http://127.0.0.1:%d", dport);
	assert_true(asprintf(&extra,
			     "mode: migrate\nnamespaceMappings: {%s: %s}\n"
			     "metrics: {listen: \"127.0.0.1:%d\"}\n"
			     "link:\n  handshakeTimeout: 2s\n  maxFrameBytes: %lld\n"
			     "  maxUnauthenticated: %d\n  maxUnauthenticatedPerAddress: %d\n"
			     "  refusalLogWindow: %ds\n",
			     F.ns, F.dst_ns, dport, (long long)MAX_FRAME, CAP_TOTAL,
			     CAP_PER_ADDRESS, WINDOW_S) > 0);
	tu_site_write_config(&F.s, extra);
	free(extra);
	/* The agent's ASan quarantine would hold every freed frame buffer (256
	 * MiB by default): cut to 16 MiB, so RSS measures the agent's memory. */
	{
		const char *was = getenv("ASAN_OPTIONS");
		char opts[512];
		snprintf(opts, sizeof(opts), "%s%squarantine_size_mb=16", was ? was : "",
			 was && *was ? ":" : "");
		setenv("ASAN_OPTIONS", opts, 1);
	}
	tu_site_agent_start(&F.s);
	assert_true(asprintf(&extra, "namespaces: [%s]\nschedule: {mode: watch}\n", F.ns) > 0);
	tu_site_write_source_config(&F.s, extra);
	free(extra);
	tu_site_source_start(&F.s, tu_env("DS_KUBECONFIG_V1"), NULL);
}

static void test_link_flood__caps_hold_while_the_source_syncs(void **state)
{
	int first = 100, per_step = 10, created;
	int conns = env_int("DS_FLOOD_CONNS", tu_soak() ? 400 : 64);
	int seconds = env_int("DS_FLOOD_SECONDS", tu_soak() ? 60 : 8);
	double base, rss, rss_max = 0, gauge, gauge_max = 0, bound;
	double per_address, total, handshakes, zap;
	/* Static: the flood thread must not read a stack a failed assert left. */
	static struct flood fl;
	void *ctx = zmq_ctx_new(), *socks[ZAP_CLIENTS];
	long long t0, next_create;
	char *log;
	int warn_lines, repeated;

	(void)state;
	memset(&fl, 0, sizeof(fl));
	start(first);
	tu_assert_same_objects(F.src, F.ns, F.dst, F.dst_ns, kinds, 90000);
	tu_msleep(1000);
	base = rss_mb(F.s.agent_pid);
	assert_true(base > 0);
	bound = base + (double)CAP_PER_ADDRESS * (double)MAX_FRAME / MiB + HEADROOM_MB;

	fl.port = atoi(strrchr(F.s.endpoint, ':') + 1);
	fl.conns = conns;
	fl.seconds = seconds;
	assert_int_equal(pthread_create(&fl.thread, NULL, flood_main, &fl), 0);
	zap_clients(ctx, fl.port, &F.s.tkeys, socks);
	created = first;
	t0 = tu_now_ms();
	next_create = t0;
	while (tu_now_ms() - t0 < (long long)seconds * 1000) {
		if (tu_now_ms() >= next_create) {
			/* The source keeps working: new objects every half second. */
			tu_load_create(F.src, F.ns, created, per_step, PAYLOAD);
			created += per_step;
			next_create += 500;
			gauge = dst_metric("drasync_target_link_unauthenticated_connections");
			if (gauge > gauge_max)
				gauge_max = gauge;
		}
		rss = rss_mb(F.s.agent_pid);
		assert_true(rss > 0);
		if (rss > rss_max)
			rss_max = rss;
		tu_msleep(100);
	}
	atomic_store(&fl.stop, 1);
	pthread_join(fl.thread, NULL);
	for (int i = 0; i < ZAP_CLIENTS; i++)
		zmq_close(socks[i]);
	zmq_ctx_term(ctx);
	print_message("flood: %d connections for %d s: %lld opened, %lld closed by the target, "
		      "%lld MiB sent; target RSS %.1f MiB before, %.1f MiB at most (bound %.1f), "
		      "unauthenticated at most %.0f; %d objects created\n",
		      conns, seconds, fl.opened, fl.closed, fl.bytes / MiB, base, rss_max, bound,
		      gauge_max, created);

	/* Every object of the source arrives. */
	tu_assert_same_objects(F.src, F.ns, F.dst, F.dst_ns, kinds, tu_soak() ? 300000 : 120000);

	/* The caps bit, for both reasons, and the gauge stayed within them. */
	per_address =
	    dst_metric("drasync_target_link_conns_refused_total{reason=\"unauth_per_address\"}");
	total = dst_metric("drasync_target_link_conns_refused_total{reason=\"unauth_total\"}");
	handshakes = dst_metric("drasync_target_link_refused_total{reason=\"handshake_failed\"}");
	zap = dst_metric("drasync_target_link_refused_total{reason=\"zap_refused\"}");
	print_message("refused: %.0f per address, %.0f over the total, %.0f handshakes failed, "
		      "%.0f ZAP refusals\n",
		      per_address, total, handshakes, zap);
	assert_true(per_address > 0);
	assert_true(total > 0);
	/* ZAP refusals: few, the CURVE clients come from 127.0.0.1, whose slots the
	 * flood fills (printed, not asserted). */
	assert_true(gauge_max > 0);
	assert_true(gauge_max <= CAP_TOTAL);
	assert_true(rss_max < bound);

	/* The log: aggregated, a few lines per kind and address and window. */
	log = tu_site_run_log(&F.s);
	warn_lines = count_lines(log, "level=warn event=conn_refused_unauth_");
	repeated = count_lines(log, "event=refusals_repeated");
	print_message("target log: %d warn lines of conn_refused_*, %d refusals_repeated, %d "
		      "handshake_failed, %d disconnected, %zu bytes\n",
		      warn_lines, repeated, count_lines(log, "event=handshake_failed"),
		      count_lines(log, "event=disconnected"), strlen(log));
	assert_true(warn_lines >= 1);
	assert_few(log, "level=warn event=conn_refused_unauth_",
		   2 * ADDRESSES * (seconds / WINDOW_S + 2));
	assert_true(warn_lines * 4 < per_address + total);
	assert_true(repeated >= 1);
	assert_few(log, "event=handshake_failed", ADDRESSES * (seconds / WINDOW_S + 2));
	assert_few(log, "event=disconnected", ADDRESSES * (seconds / WINDOW_S + 4));
	free(log);
	print_message("SOAK test=link_flood conns=%d seconds=%d rss_max_mb=%.1f rss_base_mb=%.1f "
		      "refused=%.0f synced=%d\n",
		      conns, seconds, rss_max, base, per_address + total, created);

	tu_site_source_sigterm(&F.s);
	tu_site_agent_sigterm(&F.s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_link_flood__caps_hold_while_the_source_syncs, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
