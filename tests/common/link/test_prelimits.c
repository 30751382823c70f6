/*
 * The target's port before authentication, with real CURVE sockets on
 * loopback: the defaults (5 s handshake, 8 MiB frames), a peer that never
 * completes its handshake closed at the handshake timeout, a handshake
 * command over the frame limit refused at its header, a frame over the
 * default limit from an admitted peer refused, and 50 refused handshakes from
 * one address logged in at most two lines, with their count, while every one
 * is still reported (the metrics count them); the caps on unauthenticated
 * connections, per address and in total, close the one over them at once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/clock.h"
#include "drasync/keys.h"
#include "drasync/receiver.h"
#include "testutil.h"
#include "tu_kube.h"
#include "tu_link.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <zmq.h>

#define MiB (1024u * 1024u)
#define EVENTS_MAX 512

/* Every event with its level (tu_events keeps no level). */
struct leveled {
	pthread_mutex_t mu;
	int n;
	struct {
		enum ds_log_level level;
		char name[48];
		char peer[64];
		char detail[300];
	} ev[EVENTS_MAX];
};

static void on_event(void *ud, const ds_transport_event *ev)
{
	struct leveled *l = ud;

	ds_transport_event_log(NULL, ev);
	pthread_mutex_lock(&l->mu);
	if (l->n < EVENTS_MAX) {
		l->ev[l->n].level = ev->level;
		snprintf(l->ev[l->n].name, sizeof(l->ev[0].name), "%s", ev->name);
		snprintf(l->ev[l->n].peer, sizeof(l->ev[0].peer), "%s", ev->peer);
		snprintf(l->ev[l->n].detail, sizeof(l->ev[0].detail), "%s", ev->detail);
		l->n++;
	}
	pthread_mutex_unlock(&l->mu);
}

/* Events named name (NULL: any) at min_level or above. */
static int count(struct leveled *l, const char *name, enum ds_log_level min_level)
{
	int n = 0;

	pthread_mutex_lock(&l->mu);
	for (int i = 0; i < l->n; i++)
		if ((!name || strcmp(l->ev[i].name, name) == 0) && l->ev[i].level >= min_level)
			n++;
	pthread_mutex_unlock(&l->mu);
	return n;
}

struct server {
	atomic_uint unauth; /* the last count on_unauth told */
	ds_receiver *r;
	pthread_t thread;
	struct leveled ev;
	int port;
};

static void *serve(void *arg)
{
	struct server *s = arg;
	ds_err err = {0};

	ds_receiver_run(s->r, &err);
	return NULL;
}

/* The caps the next server_start() sets (0: the defaults). */
static unsigned caps_total, caps_per_address;

static void on_unauth(void *ud, unsigned n)
{
	struct server *s = (struct server *)((char *)ud - offsetof(struct server, ev));

	atomic_store(&s->unauth, n);
}

/* handshake_ms and window_ms 0: the defaults. */
static void server_start(struct server *s, const char *dir, const ds_keypair *keys,
			 int handshake_ms, int window_ms)
{
	ds_receiver_config cfg;
	char auth[1024], inbox[1024];
	const char *colon;
	ds_err err = {0};

	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->ev.mu, NULL);
	ds_receiver_config_default(&cfg);
	tu_path_in(auth, sizeof(auth), dir, "authorized_sources");
	tu_path_in(inbox, sizeof(inbox), dir, "inbox.db");
	cfg.endpoint = "tcp://127.0.0.1:*";
	cfg.keys = keys;
	cfg.authorized_sources = auth;
	cfg.inbox_path = inbox;
	cfg.on_event = on_event;
	cfg.event_ud = &s->ev;
	if (handshake_ms)
		cfg.tuning.handshake_timeout_ms = handshake_ms;
	cfg.refusal_window_ms = window_ms;
	cfg.max_unauth = caps_total;
	cfg.max_unauth_per_address = caps_per_address;
	cfg.on_unauth = on_unauth;
	if (ds_receiver_new(&s->r, &cfg, &err) < 0)
		fail_msg("receiver: %s", err.msg);
	colon = strrchr(ds_receiver_endpoint(s->r), ':');
	assert_non_null(colon);
	s->port = atoi(colon + 1);
	assert_int_equal(pthread_create(&s->thread, NULL, serve, s), 0);
}

static void server_stop(struct server *s)
{
	ds_receiver_stop(s->r);
	pthread_join(s->thread, NULL);
	ds_receiver_free(s->r);
	pthread_mutex_destroy(&s->ev.mu);
}

/* A plain TCP connection to the server from loopback address `from`, reads
 * timing out after 20 s. */
static int tcp_connect_from(int port, const char *from)
{
	struct sockaddr_in sa = {0};
	struct timeval tv = {20, 0};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	sa.sin_family = AF_INET;
	assert_int_equal(inet_pton(AF_INET, from, &sa.sin_addr), 1);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

static int tcp_connect(int port)
{
	return tcp_connect_from(port, "127.0.0.1");
}

/* Read (and drop) until the server closes the connection; ms it took, -1 on a timeout. */
static int64_t until_closed(int fd, int64_t since)
{
	char buf[256];

	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return ds_clock_mono_ms() - since;
		if (n < 0)
			return -1;
	}
}

static void test_prelimits__defaults(void **state)
{
	ds_transport_tuning t;

	(void)state;
	ds_transport_tuning_default(&t);
	assert_int_equal(t.handshake_timeout_ms, 5000);
	assert_int_equal(t.limits.max_frame, 8 * MiB);
}

static void test_prelimits__silent_peer_closed_at_handshake_timeout(void **state)
{
	char *dir = tu_mkdtemp("prelimits-silent");
	const char *names[] = {"prod-east"};
	ds_keypair server, client;
	struct server s;
	int64_t t0, took;
	int fd, fds[5];

	(void)state;
	tu_link_make_keys(dir, names, 1, &server, &client);
	server_start(&s, dir, &server, 600, 0);
	/* Connects, then says nothing: not even the ZMTP greeting. */
	t0 = ds_clock_mono_ms();
	fd = tcp_connect(s.port);
	took = until_closed(fd, t0);
	close(fd);
	print_message("a silent peer was closed after %lld ms (handshake timeout 600 ms)\n",
		      (long long)took);
	assert_true(took >= 500);
	assert_true(took < 4000);
	/* Five more at once: all closed, one warn line for the address. */
	t0 = ds_clock_mono_ms();
	for (int i = 0; i < 5; i++)
		fds[i] = tcp_connect(s.port);
	for (int i = 0; i < 5; i++) {
		took = until_closed(fds[i], t0);
		close(fds[i]);
		assert_true(took >= 500 && took < 4000);
	}
	for (int i = 0; i < 100 && count(&s.ev, "handshake_failed", DS_LOG_DEBUG) < 6; i++)
		tu_msleep(20);
	assert_int_equal(count(&s.ev, "handshake_failed", DS_LOG_DEBUG), 6);
	assert_int_equal(count(&s.ev, "handshake_failed", DS_LOG_WARN), 1);
	server_stop(&s);
	free(dir);
}

/* ZMTP 3.0 greeting of a CURVE client (RFC 23). */
static void greeting(uint8_t g[64])
{
	memset(g, 0, 64);
	g[0] = 0xff;
	g[9] = 0x7f;
	g[10] = 3;
	g[11] = 0;
	memcpy(g + 12, "CURVE", 5);
}

static void test_prelimits__handshake_command_over_limit_refused_at_its_header(void **state)
{
	char *dir = tu_mkdtemp("prelimits-bigcmd");
	const char *names[] = {"prod-east"};
	ds_keypair server, client;
	struct server s;
	uint8_t g[64], cmd[9];
	uint64_t size = 8 * MiB + 1;
	int64_t t0, took;
	int fd;

	(void)state;
	tu_link_make_keys(dir, names, 1, &server, &client);
	/* A long handshake timeout: only the frame limit can close it soon. */
	server_start(&s, dir, &server, 30000, 0);
	fd = tcp_connect(s.port);
	greeting(g);
	assert_int_equal(send(fd, g, sizeof(g), 0), (ssize_t)sizeof(g));
	/* A long command frame announcing 8 MiB + 1: its body never comes. */
	cmd[0] = 0x06;
	for (int i = 0; i < 8; i++)
		cmd[1 + i] = (uint8_t)(size >> (56 - 8 * i));
	t0 = ds_clock_mono_ms();
	assert_int_equal(send(fd, cmd, sizeof(cmd), 0), (ssize_t)sizeof(cmd));
	took = until_closed(fd, t0);
	close(fd);
	print_message("a handshake command of 8 MiB + 1 was refused after %lld ms\n",
		      (long long)took);
	assert_true(took >= 0);
	assert_true(took < 5000);
	server_stop(&s);
	free(dir);
}

static void *curve_dealer(void *ctx, const ds_keypair *server, const ds_keypair *me, int port)
{
	void *sock = zmq_socket(ctx, ZMQ_DEALER);
	char ep[64];
	int linger = 0, never = -1;

	zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof(linger));
	/* One handshake per socket: a refused one does not come back. */
	zmq_setsockopt(sock, ZMQ_RECONNECT_IVL, &never, sizeof(never));
	zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, server->public_z85, 40);
	zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, me->public_z85, 40);
	zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, me->secret_z85, 40);
	snprintf(ep, sizeof(ep), "tcp://127.0.0.1:%d", port);
	assert_int_equal(zmq_connect(sock, ep), 0);
	return sock;
}

static void test_prelimits__frame_over_default_limit_refused(void **state)
{
	char *dir = tu_mkdtemp("prelimits-bigframe");
	const char *names[] = {"prod-east"};
	ds_keypair server, client;
	struct server s;
	size_t big = 8 * MiB + 1;
	char *buf;
	void *ctx, *sock;

	(void)state;
	tu_link_make_keys(dir, names, 1, &server, &client);
	server_start(&s, dir, &server, 0, 0);
	ctx = zmq_ctx_new();
	sock = curve_dealer(ctx, &server, &client, s.port);
	for (int i = 0; i < 250 && count(&s.ev, "zap_admitted", DS_LOG_DEBUG) == 0; i++)
		tu_msleep(20);
	assert_int_equal(count(&s.ev, "zap_admitted", DS_LOG_DEBUG), 1);
	buf = calloc(1, big);
	assert_non_null(buf);
	zmq_send(sock, buf, big, 0);
	free(buf);
	for (int i = 0; i < 500 && count(&s.ev, "disconnected", DS_LOG_DEBUG) == 0; i++)
		tu_msleep(20);
	zmq_close(sock);
	zmq_ctx_term(ctx);
	assert_true(count(&s.ev, "disconnected", DS_LOG_DEBUG) >= 1);
	/* Closed by libzmq at the frame's header, never read into the receiver
	 * (which would drop it as not a protobuf Envelope). */
	assert_int_equal(count(&s.ev, "peer_dropped", DS_LOG_DEBUG), 0);
	assert_int_equal(count(&s.ev, "session_open", DS_LOG_DEBUG), 0);
	server_stop(&s);
	free(dir);
}

static void test_prelimits__refused_handshakes_logged_once_per_window(void **state)
{
	char *dir = tu_mkdtemp("prelimits-refused");
	const char *names[] = {"prod-east"};
	const int window_ms = 10000;
	ds_keypair server, client, stranger;
	struct server s;
	ds_err err = {0};
	void *ctx;
	int64_t t0, took;
	int refused, loud, before = 0, summary = -1;
	unsigned long long more = 0;

	(void)state;
	tu_link_make_keys(dir, names, 1, &server, &client);
	assert_int_equal(ds_keys_generate(&stranger, &err), 0);
	server_start(&s, dir, &server, 0, window_ms);
	ctx = zmq_ctx_new();
	t0 = ds_clock_mono_ms();
	for (int k = 0; k < 50; k++) {
		void *sock = curve_dealer(ctx, &server, &stranger, s.port);
		for (int i = 0; i < 250 && count(&s.ev, "zap_refused", DS_LOG_DEBUG) <= k; i++)
			tu_msleep(5);
		zmq_close(sock);
		assert_true(count(&s.ev, "zap_refused", DS_LOG_DEBUG) > k);
	}
	took = ds_clock_mono_ms() - t0;
	zmq_ctx_term(ctx);
	print_message("50 refused handshakes in %lld ms\n", (long long)took);
	assert_true(took < window_ms);
	/* Every refusal is reported (the metrics count them all)... */
	refused = count(&s.ev, "zap_refused", DS_LOG_DEBUG);
	assert_true(refused >= 50);
	/* ...and only the first one at WARN, no handshake_failed line next to it. */
	assert_int_equal(count(&s.ev, "zap_refused", DS_LOG_WARN), 1);
	assert_int_equal(count(&s.ev, "handshake_failed", DS_LOG_WARN), 0);
	/* At the window's end, one line with how many more. */
	for (int i = 0;
	     i < window_ms / 20 + 200 && count(&s.ev, "refusals_repeated", DS_LOG_WARN) == 0; i++)
		tu_msleep(20);
	loud = count(&s.ev, NULL, DS_LOG_WARN);
	assert_int_equal(count(&s.ev, "refusals_repeated", DS_LOG_WARN), 1);
	pthread_mutex_lock(&s.ev.mu);
	for (int i = 0; i < s.ev.n; i++)
		if (strcmp(s.ev.ev[i].name, "refusals_repeated") == 0) {
			summary = i;
			more = strtoull(s.ev.ev[i].detail, NULL, 10);
			assert_string_equal(s.ev.ev[i].peer, "127.0.0.1");
		}
	for (int i = 0; i < summary; i++)
		before += strcmp(s.ev.ev[i].name, "zap_refused") == 0;
	pthread_mutex_unlock(&s.ev.mu);
	assert_true(summary >= 0);
	/* The count: every zap_refused after the first one, in that window. */
	assert_true(before >= 50);
	assert_int_equal(more, (unsigned long long)before - 1);
	assert_int_equal(loud, 2);
	server_stop(&s);
	free(dir);
}

/* The events named name, with the line at WARN among them. */
static void expect_refusals(struct server *s, const char *name, int n)
{
	for (int i = 0; i < 100 && count(&s->ev, name, DS_LOG_DEBUG) < n; i++)
		tu_msleep(20);
	assert_int_equal(count(&s->ev, name, DS_LOG_DEBUG), n);
	assert_int_equal(count(&s->ev, name, DS_LOG_WARN), 1);
}

static void test_prelimits__unauthenticated_caps_close_at_once(void **state)
{
	char *dir = tu_mkdtemp("prelimits-caps");
	const char *names[] = {"prod-east"};
	ds_keypair server, client;
	struct server s;
	int held[4], fd;
	int64_t t0, took;

	(void)state;
	tu_link_make_keys(dir, names, 1, &server, &client);
	caps_total = 4;
	caps_per_address = 2;
	/* A handshake timeout of 3 s: a close well before it is the caps'. */
	server_start(&s, dir, &server, 3000, 0);
	held[0] = tcp_connect(s.port);
	held[1] = tcp_connect(s.port);
	for (int i = 0; i < 100 && atomic_load(&s.unauth) < 2; i++)
		tu_msleep(20);
	assert_int_equal(atomic_load(&s.unauth), 2);
	/* A third from 127.0.0.1, five times: each closed at once, one line. */
	for (int i = 0; i < 5; i++) {
		t0 = ds_clock_mono_ms();
		fd = tcp_connect(s.port);
		took = until_closed(fd, t0);
		close(fd);
		assert_true(took >= 0 && took < 1500);
	}
	expect_refusals(&s, "conn_refused_unauth_per_address", 5);
	/* Two from 127.0.0.2 fit the total of 4; one from 127.0.0.3 does not. */
	held[2] = tcp_connect_from(s.port, "127.0.0.2");
	held[3] = tcp_connect_from(s.port, "127.0.0.3");
	for (int i = 0; i < 100 && atomic_load(&s.unauth) < 4; i++)
		tu_msleep(20);
	assert_int_equal(atomic_load(&s.unauth), 4);
	t0 = ds_clock_mono_ms();
	fd = tcp_connect_from(s.port, "127.0.0.4");
	took = until_closed(fd, t0);
	close(fd);
	assert_true(took >= 0 && took < 1500);
	expect_refusals(&s, "conn_refused_unauth_total", 1);
	/* The ones held are closed at the handshake timeout, and the count is 0. */
	for (int i = 0; i < 4; i++) {
		took = until_closed(held[i], t0);
		close(held[i]);
		assert_true(took >= 0);
	}
	for (int i = 0; i < 200 && atomic_load(&s.unauth) > 0; i++)
		tu_msleep(20);
	assert_int_equal(atomic_load(&s.unauth), 0);
	/* Room again: a new one is not refused. */
	fd = tcp_connect(s.port);
	tu_msleep(300);
	close(fd);
	assert_int_equal(count(&s.ev, "conn_refused_unauth_per_address", DS_LOG_DEBUG), 5);
	server_stop(&s);
	caps_total = caps_per_address = 0;
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_prelimits__defaults),
	    cmocka_unit_test(test_prelimits__silent_peer_closed_at_handshake_timeout),
	    cmocka_unit_test(test_prelimits__handshake_command_over_limit_refused_at_its_header),
	    cmocka_unit_test(test_prelimits__frame_over_default_limit_refused),
	    cmocka_unit_test(test_prelimits__refused_handshakes_logged_once_per_window),
	    cmocka_unit_test(test_prelimits__unauthenticated_caps_close_at_once),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
