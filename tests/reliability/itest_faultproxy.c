/*
 * tests/kube/faultproxy does what the reliability tests rely on, measured
 * from outside: as a TCP proxy in front of an echo server of this test, it
 * adds the latency, keeps to the rate, delays "lost" segments, counts the
 * bytes, and a cut closes every connection and refuses new ones until
 * restored; as a reverse proxy in front of the v1 cluster's API server,
 * requests pass (watches unbuffered), and the faults reach the kube client
 * as the API server's own would: 429 with Retry-After, 503, a reset.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/kube_client.h"
#include "testutil.h"
#include "tu_kube.h"
#include "tu_proxy.h"
#include "tu_site.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- an echo server on loopback ------------------------------------------------ */

static int echo_fd = -1, echo_port;
static pthread_t echo_thread;

static void *echo_conn(void *arg)
{
	int c = (int)(intptr_t)arg;
	char buf[65536];
	ssize_t n;

	while ((n = read(c, buf, sizeof(buf))) > 0)
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(c, buf + off, (size_t)(n - off));

			if (w <= 0)
				goto out;
			off += w;
		}
out:
	close(c);
	return NULL;
}

static void *echo_main(void *arg)
{
	(void)arg;
	for (;;) {
		int c = accept(echo_fd, NULL, NULL);
		pthread_t t;

		if (c < 0)
			return NULL;
		if (pthread_create(&t, NULL, echo_conn, (void *)(intptr_t)c) == 0)
			pthread_detach(t);
		else
			close(c);
	}
}

static void echo_start(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);

	echo_fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(echo_fd >= 0);
	assert_int_equal(bind(echo_fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(echo_fd, 16), 0);
	assert_int_equal(getsockname(echo_fd, (struct sockaddr *)&a, &len), 0);
	echo_port = ntohs(a.sin_port);
	assert_int_equal(pthread_create(&echo_thread, NULL, echo_main, NULL), 0);
}

static int dial(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				.sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

/* Read exactly n bytes within timeout_ms; the bytes read (fewer: EOF, error or timeout). */
static size_t read_n(int fd, char *buf, size_t n, int timeout_ms)
{
	long long end = tu_now_ms() + timeout_ms;
	size_t got = 0;

	while (got < n) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		long long left = end - tu_now_ms();
		ssize_t r;

		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			break;
		r = read(fd, buf + got, n - got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	return got;
}

/* One byte there and back: the round trip in ms. */
static long long rtt(int fd)
{
	long long t0 = tu_now_ms();
	char c = 'x';

	assert_int_equal(write(fd, &c, 1), 1);
	assert_int_equal(read_n(fd, &c, 1, 5000), 1);
	return tu_now_ms() - t0;
}

struct writer {
	int fd;
	const char *buf;
	size_t n;
	pthread_t th;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;

	for (size_t off = 0; off < w->n;) {
		ssize_t r = write(w->fd, w->buf + off, w->n - off);

		if (r <= 0)
			break;
		off += (size_t)r;
	}
	return NULL;
}

/* Send n bytes and read them back (a writer thread: both directions at once); ms it took. */
static long long echo_bulk(int fd, size_t n)
{
	char *out = malloc(n), *in = malloc(n);
	struct writer w = {.fd = fd, .buf = out, .n = n};
	long long t0 = tu_now_ms(), took;

	assert_non_null(out);
	assert_non_null(in);
	for (size_t i = 0; i < n; i++)
		out[i] = (char)('a' + i % 26);
	assert_int_equal(pthread_create(&w.th, NULL, writer_main, &w), 0);
	assert_int_equal(read_n(fd, in, n, 60000), n);
	took = tu_now_ms() - t0;
	pthread_join(w.th, NULL);
	assert_memory_equal(in, out, n);
	free(out);
	free(in);
	return took;
}

static void test_faultproxy__tcp_latency_rate_loss_counts_and_cut(void **state)
{
	tu_proxy *p;
	int fd, fd2;
	long long t, min = 1000000;
	char c;

	(void)state;
	echo_start();
	p = tu_proxy_start_tcp(echo_port, 50, 0, 0);
	fd = dial(tu_proxy_port(p));

	/* 50 ms each way: a round trip of 100 ms and a little. */
	for (int i = 0; i < 5; i++) {
		t = rtt(fd);
		min = t < min ? t : min;
	}
	if (min < 100 || min > 300)
		fail_msg("round trip %lld ms through 2 x 50 ms", min);

	/* 1,600 kbit/s each way: 200,000 bytes take 1 s, not much less, not much more. */
	tu_proxy_set(p, 0, 1600, -1);
	t = echo_bulk(fd, 200000);
	if (t < 900 || t > 3000)
		fail_msg("200,000 bytes at 1,600 kbit/s took %lld ms", t);
	assert_int_equal(tu_proxy_stats_int(p, "bytes_up"), 5 + 200000);
	assert_int_equal(tu_proxy_stats_int(p, "bytes_down"), 5 + 200000);

	/* Half the segments a retransmission timeout (200 ms) late: 20 round
	 * trips of 2 segments take seconds instead of nothing. */
	tu_proxy_set(p, 0, 0, 50);
	t = tu_now_ms();
	for (int i = 0; i < 20; i++)
		rtt(fd);
	t = tu_now_ms() - t;
	if (t < 2000 || t > 12000)
		fail_msg("20 round trips at 50%% loss took %lld ms (expected about 4 s)", t);
	tu_proxy_set(p, 0, 0, 0);

	/* Cut: the connection ends, a new one is closed at once; restored, it works. */
	tu_proxy_cut(p);
	assert_int_equal(read_n(fd, &c, 1, 2000), 0);
	close(fd);
	assert_int_equal(tu_proxy_stats_int(p, "cut"), 1);
	fd2 = dial(tu_proxy_port(p));
	t = tu_now_ms();
	assert_int_equal(read_n(fd2, &c, 1, 2000), 0);
	assert_true(tu_now_ms() - t < 1000);
	close(fd2);
	tu_proxy_restore(p);
	fd = dial(tu_proxy_port(p));
	assert_true(rtt(fd) < 500);
	close(fd);
	assert_int_equal(tu_proxy_stats_int(p, "cut"), 0);
	assert_int_equal(tu_proxy_stats_int(p, "connections"), 2);
	tu_proxy_stop(p);
	shutdown(echo_fd, SHUT_RDWR);
	close(echo_fd);
	pthread_join(echo_thread, NULL);
}

/* ---- the API proxy ---------------------------------------------------------------- */

/* A client that does not retry: the faults show as they are. */
static ds_kube *connect_no_retry(const char *kubeconfig)
{
	struct ds_kube_transport_opts o;
	ds_kubeconfig *kc = NULL;
	ds_kube *k = NULL;
	ds_err err = {0};

	ds_kube_transport_opts_init(&o);
	o.qps = 0;
	o.max_retries = 0;
	if (ds_kubeconfig_load(&kc, kubeconfig, NULL, &err) < 0)
		fail_msg("kubeconfig %s: %s", kubeconfig, err.msg);
	if (ds_kube_new(&k, &kc, &o, &err) < 0)
		fail_msg("client: %s", err.msg);
	return k;
}

struct watch {
	ds_kube *k;
	const char *ns;
	atomic_bool stop, synced;
	atomic_llong added_at; /* when cm "late" was seen (ms), 0: not yet */
	int rc;
	pthread_t th;
};

static int on_event(void *user, enum ds_kube_event_type type, json_t *obj)
{
	struct watch *w = user;
	const char *name =
	    json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));

	if (type == DS_KUBE_SYNC)
		atomic_store(&w->synced, true);
	if (type == DS_KUBE_ADDED && name && strcmp(name, "late") == 0) {
		atomic_store(&w->added_at, tu_now_ms());
		return 1;
	}
	return 0;
}

static void *watch_main(void *arg)
{
	struct watch *w = arg;
	struct ds_kube_resource r = tu_kube_resource(w->k, "v1", "ConfigMap");
	struct ds_kube_watch_opts o = {.stop = &w->stop, .timeout_seconds = 60};

	w->rc = ds_kube_watch(w->k, &r, w->ns, &o, on_event, w, NULL);
	return NULL;
}

static void test_faultproxy__api_passes_watches_and_injects(void **state)
{
	char *dir = tu_mkdtemp("fpapi"), *ns;
	tu_proxy *p;
	ds_kube *direct, *k;
	struct ds_kube_resource cm;
	struct watch w = {0};
	ds_kube_error ke;
	json_t *o = NULL;
	long long t0;

	(void)state;
	direct = tu_kube_connect(tu_env("DS_KUBECONFIG_V1"));
	ns = tu_kube_new_namespace(direct, "fpapi", "");
	p = tu_proxy_start_api(tu_env("DS_KUBECONFIG_V1"), dir);
	k = connect_no_retry(tu_proxy_kubeconfig(p));
	cm = tu_kube_resource(k, "v1", "ConfigMap");

	/* Requests pass: a create through the proxy is on the server. */
	tu_kube_create(k, tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, "
				      "namespace: %s}\ndata: {x: \"1\"}\n",
				      ns));
	assert_int_equal(ds_kube_get(direct, &cm, ns, "a", NULL, &o, &ke), 0);
	json_decref(o);

	/* A watch through the proxy sees an event as it happens, not when the stream ends. */
	w.k = k;
	w.ns = ns;
	assert_int_equal(pthread_create(&w.th, NULL, watch_main, &w), 0);
	for (long long end = tu_now_ms() + 10000; !atomic_load(&w.synced);)
		if (tu_now_ms() > end)
			fail_msg("the watch through the proxy never listed");
		else
			tu_msleep(20);
	tu_msleep(300);
	t0 = tu_now_ms();
	tu_kube_create(direct, tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: "
					   "late, namespace: %s}\n",
					   ns));
	for (long long end = tu_now_ms() + 5000; !atomic_load(&w.added_at);)
		if (tu_now_ms() > end) {
			atomic_store(&w.stop, true);
			pthread_join(w.th, NULL);
			fail_msg("the watch event did not come through within 5 s");
		} else
			tu_msleep(10);
	pthread_join(w.th, NULL);
	print_message("watch event through the proxy after %lld ms\n",
		      (long long)atomic_load(&w.added_at) - t0);

	/* 429 with Retry-After on every POST; GETs pass. */
	tu_proxy_faults(p, "429", 1.0, 7, "POST");
	assert_int_equal(ds_kube_get(k, &cm, ns, "a", NULL, &o, &ke), 0);
	json_decref(o);
	o = tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b, namespace: %s}\n",
			ns);
	assert_true(ds_kube_create(k, &cm, ns, o, NULL, &ke) < 0);
	assert_int_equal(ke.code, 429);
	assert_int_equal(ke.retry_after, 7);
	assert_string_equal(ke.reason, "TooManyRequests");

	/* 503 on a third of the POSTs: exactly that share. */
	tu_proxy_faults(p, "503", 1.0 / 3, 0, NULL);
	{
		int refused = 0;

		for (int i = 0; i < 9; i++) {
			json_t *c = tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: "
						"c-%d, namespace: %s}\n",
						i, ns);

			if (ds_kube_create(k, &cm, ns, c, NULL, &ke) < 0) {
				assert_int_equal(ke.code, 503);
				refused++;
			}
			json_decref(c);
		}
		assert_int_equal(refused, 3);
	}

	/* A reset: no answer at all. */
	tu_proxy_faults(p, "reset", 1.0, 0, NULL);
	assert_true(ds_kube_create(k, &cm, ns, o, NULL, &ke) == -ECONNRESET);
	assert_int_equal(ke.code, 0);
	json_decref(o);

	assert_int_equal(tu_proxy_stats_int(p, "injected.429"), 1);
	assert_int_equal(tu_proxy_stats_int(p, "injected.503"), 3);
	/* libcurl itself sends a request again, once, on a fresh connection when a
	 * reused one closed before any byte of an answer: one or two resets. */
	assert_in_range(tu_proxy_stats_int(p, "injected.reset"), 1, 2);
	assert_true(tu_proxy_stats_int(p, "passed") >= 9);
	{
		char *log = tu_proxy_log(p);

		assert_non_null(strstr(log, "fault: 429 Retry-After 7 on POST"));
		assert_non_null(strstr(log, "fault: reset on POST"));
		free(log);
	}
	tu_proxy_stop(p);
	ds_kube_free(k);
	tu_kube_drop_namespace(direct, ns);
	ds_kube_free(direct);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_faultproxy__tcp_latency_rate_loss_counts_and_cut),
	    cmocka_unit_test(test_faultproxy__api_passes_watches_and_injects),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
