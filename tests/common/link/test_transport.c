/*
 * The replication link end to end, with real CURVE sockets on loopback and
 * real SQLite files: a 10,000-record round trip; the receiver SIGKILLed and
 * restarted 5 times mid-stream; the sender killed and restarted; an unknown
 * key and a plaintext peer refused; a revoked key losing its open session.
 * Garbage frames, snapshots and credit are test_transport_flow.c's.
 *
 * The same executable is the child process of the kill tests:
 *   test_transport --receiver DIR ENDPOINT     (serves until SIGTERM)
 *   test_transport --sender DIR ENDPOINT UNTIL (exits 0 once UNTIL is acked)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/buf.h"
#include "drasync/clock.h"
#include "drasync/inbox.h"
#include "drasync/keys.h"
#include "drasync/outbox.h"
#include "drasync/receiver.h"
#include "drasync/sender.h"
#include "testutil.h"
#include "tu_kube.h"
#include "tu_link.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#define N_RECORDS 10000

/* ---- child processes ---------------------------------------------------- */

static volatile sig_atomic_t child_stop;
static ds_receiver *child_receiver;

static void on_term(int sig)
{
	(void)sig;
	child_stop = 1;
	if (child_receiver)
		ds_receiver_stop(child_receiver);
}

static void child_handler(void *ud, const char *source, const ds_record *rec, ds_record_result *res)
{
	(void)ud;
	(void)source;
	(void)rec;
	(void)res;
	usleep(200); /* an apply takes time: leaves room to kill mid-stream */
}

static int child_receiver_main(const char *dir, const char *endpoint)
{
	ds_receiver_config cfg;
	char auth[1024], inbox[1024], key[1024], epfile[1024], tmp[1100];
	ds_keypair server;
	ds_err err = {0};
	FILE *f;
	int rc;

	tu_path_in(auth, sizeof(auth), dir, "authorized_sources");
	tu_path_in(inbox, sizeof(inbox), dir, "inbox.db");
	tu_path_in(key, sizeof(key), dir, "server.key");
	tu_path_in(epfile, sizeof(epfile), dir, "endpoint");
	if (ds_keys_load_secret(key, &server, &err) < 0) {
		fprintf(stderr, "receiver child: %s\n", err.msg);
		return 1;
	}
	ds_receiver_config_default(&cfg);
	cfg.endpoint = endpoint;
	cfg.keys = &server;
	cfg.authorized_sources = auth;
	cfg.inbox_path = inbox;
	cfg.handler = child_handler;
	cfg.on_event = ds_transport_event_log;
	cfg.event_ud = (void *)"receiver-child";
	if (ds_receiver_new(&child_receiver, &cfg, &err) < 0) {
		fprintf(stderr, "receiver child: %s\n", err.msg);
		return 1;
	}
	signal(SIGTERM, on_term);
	snprintf(tmp, sizeof(tmp), "%s.tmp", epfile);
	f = fopen(tmp, "w");
	fprintf(f, "%s\n", ds_receiver_endpoint(child_receiver));
	fclose(f);
	rename(tmp, epfile);
	rc = ds_receiver_run(child_receiver, &err);
	ds_receiver_free(child_receiver);
	return rc < 0 ? 1 : 0;
}

static int child_sender_main(const char *dir, const char *endpoint, const char *until)
{
	ds_sender_config cfg;
	char key[1024], pub[1024], outbox[1024];
	char server_pub[DS_KEY_Z85_LEN + 1];
	ds_keypair me;
	ds_sender *s;
	ds_err err = {0};
	int rc;

	tu_path_in(key, sizeof(key), dir, "prod-east.key");
	tu_path_in(pub, sizeof(pub), dir, "server.pub");
	tu_path_in(outbox, sizeof(outbox), dir, "prod-east-outbox.db");
	if (ds_keys_load_secret(key, &me, &err) < 0 ||
	    ds_keys_load_public(pub, server_pub, &err) < 0) {
		fprintf(stderr, "sender child: %s\n", err.msg);
		return 1;
	}
	ds_sender_config_default(&cfg);
	cfg.endpoint = endpoint;
	cfg.server_public_key = server_pub;
	cfg.keys = &me;
	cfg.outbox_path = outbox;
	cfg.cluster_name = "prod-east";
	cfg.batch_records = 100;
	cfg.on_event = ds_transport_event_log;
	cfg.event_ud = (void *)"sender-child";
	if (ds_sender_new(&s, &cfg, &err) < 0) {
		fprintf(stderr, "sender child: %s\n", err.msg);
		return 1;
	}
	rc = ds_sender_run(s, strtoull(until, NULL, 10), 120000, &err);
	if (rc < 0)
		fprintf(stderr, "sender child: %s\n", err.msg);
	ds_sender_free(s);
	return rc < 0 ? 1 : 0;
}

static pid_t spawn(const char *const argv[])
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		execv("/proc/self/exe", (char *const *)(uintptr_t)argv);
		_exit(127);
	}
	return pid;
}

static void kill9(pid_t pid)
{
	int status;

	kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
}

static int wait_exit(pid_t pid, int timeout_ms)
{
	int status;

	for (int waited = 0; waited < timeout_ms; waited += 20) {
		pid_t w = waitpid(pid, &status, WNOHANG);
		if (w == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		tu_msleep(20);
	}
	kill9(pid);
	return -1;
}

static pid_t start_receiver_child(const char *dir, const char *endpoint, char *bound,
				  size_t bound_len)
{
	char epfile[1024];
	const char *argv[] = {"test_transport", "--receiver", dir, endpoint, NULL};
	pid_t pid;

	tu_path_in(epfile, sizeof(epfile), dir, "endpoint");
	unlink(epfile);
	pid = spawn(argv);
	for (int i = 0; i < 500; i++) {
		FILE *f = fopen(epfile, "r");
		if (f) {
			if (fgets(bound, (int)bound_len, f))
				bound[strcspn(bound, "\n")] = '\0';
			fclose(f);
			return pid;
		}
		tu_msleep(20);
	}
	kill9(pid);
	fail_msg("receiver child did not start");
	return -1;
}

/* ---- tests -------------------------------------------------------------- */

static void test_transport__round_trip_10000_records(void **state)
{
	char *dir = tu_mkdtemp("transport-rt");
	const char *names[] = {"prod-east"};
	ds_keypair server, client;
	char outbox[1024], inbox[1024];
	struct tu_rx rx = {0};
	struct tu_tx tx;

	(void)state;
	tu_link_make_keys(dir, names, 1, &server, &client);
	snprintf(outbox, sizeof(outbox), "%s/prod-east-outbox.db", dir);
	tu_path_in(inbox, sizeof(inbox), dir, "inbox.db");
	tu_link_fill_outbox(outbox, N_RECORDS);
	/* A credit that is no multiple of the batch size: the sender must cut its
	 * batches to what was granted, or the receiver drops it. */
	rx.credit = 300;
	tu_rx_start(&rx, dir, &server, 0);
	tu_tx_new(&tx, dir, "prod-east", ds_receiver_endpoint(rx.r), &server, &client, 0);
	tx.until = N_RECORDS;
	tx.timeout_ms = 60000;
	tu_tx_main(&tx);
	assert_false(tu_events_has(&rx.ev, "peer_dropped", NULL));
	assert_int_equal(tu_events_count(&tx.ev, "session_open", NULL), 1);
	assert_int_equal(tx.rc, 0);
	assert_int_equal(ds_sender_acked(tx.s), N_RECORDS);
	assert_int_equal(tx.results, N_RECORDS);
	assert_int_equal(tx.duplicates, 0);
	assert_int_equal(rx.handled, N_RECORDS);
	assert_true(tu_events_has(&rx.ev, "zap_admitted", "prod-east"));
	assert_true(tu_events_has(&tx.ev, "session_open", NULL));
	tu_tx_free(&tx);
	tu_rx_stop(&rx);
	tu_assert_exactly_once_in_order(inbox, "prod-east", N_RECORDS);
	/* A payload survives the trip byte for byte (stored compressed or not). */
	assert_int_equal(tu_query_ll(inbox, "SELECT count(*) FROM records WHERE op = 2"), 1000);
	assert_true(tu_query_ll(inbox, "SELECT length(payload) FROM records WHERE seq = 1") > 100);
	free(dir);
}

/* A slow on_result: the sender thread is still handing results over. */
static void slow_result(void *ud, uint64_t seq, enum ds_result_status st, const char *msg)
{
	struct tu_tx *tx = ud;

	(void)seq;
	(void)st;
	(void)msg;
	tu_msleep(5);
	__atomic_add_fetch(&tx->results, 1, __ATOMIC_SEQ_CST);
}

static void slow_results(void *ud, const ds_wire_result *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		slow_result(ud, v[i].seq, v[i].status, v[i].message);
}

static void *tx_forever(void *arg)
{
	struct tu_tx *tx = arg;
	ds_err err = {0};

	tx->rc = ds_sender_run(tx->s, 0, 0, &err);
	return NULL;
}

/*
 * Another thread that sees a seq acknowledged (a `once` run waiting for the
 * target) also finds that seq's result handed to on_result.
 */
static void test_transport__acked_seq_shows_after_its_results(void **state)
{
	char *dir = tu_mkdtemp("transport-acked");
	const char *names[] = {"prod-east"};
	ds_keypair server, client;
	ds_sender_config cfg;
	char outbox[1024];
	struct tu_rx rx = {0};
	struct tu_tx tx;
	ds_err err = {0};
	long long end;

	(void)state;
	tu_link_make_keys(dir, names, 1, &server, &client);
	snprintf(outbox, sizeof(outbox), "%s/prod-east-outbox.db", dir);
	tu_link_fill_outbox(outbox, 200);
	tu_rx_start(&rx, dir, &server, 0);
	memset(&tx, 0, sizeof(tx));
	tu_events_init(&tx.ev);
	ds_sender_config_default(&cfg);
	cfg.endpoint = ds_receiver_endpoint(rx.r);
	cfg.server_public_key = server.public_z85;
	cfg.keys = &client;
	cfg.outbox_path = outbox;
	cfg.cluster_name = "prod-east";
	cfg.batch_records = 50;
	cfg.on_event = tu_link_on_event;
	cfg.event_ud = &tx.ev;
	cfg.on_results = slow_results;
	cfg.ud = &tx;
	assert_int_equal(ds_sender_new(&tx.s, &cfg, &err), 0);
	assert_int_equal(pthread_create(&tx.thread, NULL, tx_forever, &tx), 0);
	end = ds_clock_mono_ms() + 60000;
	while (ds_sender_acked(tx.s) < 200 && ds_clock_mono_ms() < end) {
		uint64_t acked = ds_sender_acked(tx.s);
		long results = __atomic_load_n(&tx.results, __ATOMIC_SEQ_CST);

		if ((uint64_t)results < acked)
			fail_msg("seq %llu shows acknowledged with only %ld results handed over",
				 (unsigned long long)acked, results);
		tu_msleep(1);
	}
	assert_int_equal(ds_sender_acked(tx.s), 200);
	assert_true(__atomic_load_n(&tx.results, __ATOMIC_SEQ_CST) >= 200);
	ds_sender_stop(tx.s);
	pthread_join(tx.thread, NULL);
	tu_tx_free(&tx);
	tu_rx_stop(&rx);
	free(dir);
}

/* Wait up to timeout_ms for tu_query_ll(inbox, sql) to be `want`; fails the test after. */
static void wait_query(const char *inbox, const char *sql, long long want, int timeout_ms)
{
	long long end = ds_clock_mono_ms() + timeout_ms, v;

	while ((v = tu_query_ll(inbox, sql)) != want) {
		if (ds_clock_mono_ms() > end)
			fail_msg("%s is %lld after %d ms, not %lld", sql, v, timeout_ms, want);
		tu_msleep(50);
	}
}

/*
 * The receiver records a source's presence in the ledger (failover's
 * split-brain guard reads it): open at Hello, seen again every 2 s while the
 * connection lives although nothing is sent, ended when the sender goes.
 */
static void test_transport__presence_while_connected_ended_when_the_sender_goes(void **state)
{
	char *dir = tu_mkdtemp("transport-presence");
	const char *names[] = {"prod-east"};
	ds_keypair server, client;
	char outbox[1024], inbox[1024];
	struct tu_rx rx = {0};
	struct tu_tx tx;
	long long seen;

	(void)state;
	tu_link_make_keys(dir, names, 1, &server, &client);
	snprintf(outbox, sizeof(outbox), "%s/prod-east-outbox.db", dir);
	tu_path_in(inbox, sizeof(inbox), dir, "inbox.db");
	tu_link_fill_outbox(outbox, 10);
	tu_rx_start(&rx, dir, &server, 0);
	tu_tx_new(&tx, dir, "prod-east", ds_receiver_endpoint(rx.r), &server, &client, 0);
	assert_int_equal(pthread_create(&tx.thread, NULL, tx_forever, &tx), 0);
	wait_query(inbox,
		   "SELECT count(*) FROM presence WHERE source = 'prod-east' AND ended_at IS NULL"
		   " AND peer LIKE '127.0.0.1:%'",
		   1, 10000);
	while (ds_sender_acked(tx.s) < 10)
		tu_msleep(10);
	/* Idle now (everything acknowledged): still seen, valid beyond the heartbeat timeout. */
	seen = tu_query_ll(inbox, "SELECT seen_at FROM presence");
	wait_query(inbox, "SELECT seen_at > (SELECT since FROM presence) FROM presence", 1, 5000);
	assert_true(tu_query_ll(inbox, "SELECT seen_at FROM presence") > seen);
	assert_true(tu_query_ll(inbox, "SELECT valid_until - seen_at FROM presence") >= 5000);

	ds_sender_stop(tx.s);
	pthread_join(tx.thread, NULL);
	tu_tx_free(&tx);
	/* The connection closed: ended within a sweep or two, with the reason. */
	wait_query(inbox,
		   "SELECT count(*) FROM presence WHERE ended_at IS NOT NULL AND end_reason ="
		   " 'connection closed'",
		   1, 8000);
	tu_rx_stop(&rx);
	free(dir);
}

static void test_transport__receiver_sigkilled_5_times(void **state)
{
	char *dir = tu_mkdtemp("transport-rxkill");
	const char *names[] = {"prod-east"};
	ds_keypair server, client;
	char outbox[1024], inbox[1024], endpoint[256];
	struct tu_tx tx;
	pid_t pid;

	(void)state;
	tu_link_make_keys(dir, names, 1, &server, &client);
	snprintf(outbox, sizeof(outbox), "%s/prod-east-outbox.db", dir);
	tu_path_in(inbox, sizeof(inbox), dir, "inbox.db");
	tu_link_fill_outbox(outbox, N_RECORDS);
	pid = start_receiver_child(dir, "tcp://127.0.0.1:*", endpoint, sizeof(endpoint));
	tu_tx_new(&tx, dir, "prod-east", endpoint, &server, &client, 100);
	tx.until = N_RECORDS;
	tx.timeout_ms = 150000;
	assert_int_equal(pthread_create(&tx.thread, NULL, tu_tx_main, &tx), 0);
	for (int k = 1; k <= 5; k++) {
		long long target = k * 1500, c = 0;
		char again[256];
		for (int i = 0; i < 3000 && (c = tu_committed_of(inbox, "prod-east")) < target; i++)
			tu_msleep(10);
		assert_true(c >= target);
		assert_true(c < N_RECORDS); /* killed mid-stream, really */
		kill9(pid);
		pid = start_receiver_child(dir, endpoint, again, sizeof(again));
		assert_string_equal(again, endpoint);
	}
	pthread_join(tx.thread, NULL);
	assert_int_equal(tx.rc, 0);
	assert_int_equal(ds_sender_acked(tx.s), N_RECORDS);
	assert_true(tu_events_has(&tx.ev, "disconnected", NULL));
	tu_tx_free(&tx);
	kill(pid, SIGTERM);
	assert_int_equal(wait_exit(pid, 10000), 0);
	tu_assert_exactly_once_in_order(inbox, "prod-east", N_RECORDS);
	free(dir);
}

static void test_transport__sender_killed_and_restarted(void **state)
{
	char *dir = tu_mkdtemp("transport-txkill");
	const char *names[] = {"prod-east"};
	ds_keypair server, client;
	char outbox[1024], inbox[1024], until[32];
	struct tu_rx rx = {0};
	pid_t pid;

	(void)state;
	tu_link_make_keys(dir, names, 1, &server, &client);
	snprintf(outbox, sizeof(outbox), "%s/prod-east-outbox.db", dir);
	tu_path_in(inbox, sizeof(inbox), dir, "inbox.db");
	tu_link_fill_outbox(outbox, N_RECORDS);
	rx.handler_sleep_us = 200;
	tu_rx_start(&rx, dir, &server, 0);
	snprintf(until, sizeof(until), "%d", N_RECORDS);
	const char *argv[] = {"test_transport",		  "--sender", dir,
			      ds_receiver_endpoint(rx.r), until,      NULL};
	pid = spawn(argv);
	for (int k = 1; k <= 3; k++) {
		long long target = k * 2500, c = 0;
		for (int i = 0; i < 3000 && (c = tu_committed_of(inbox, "prod-east")) < target; i++)
			tu_msleep(10);
		assert_true(c >= target);
		assert_true(c < N_RECORDS);
		kill9(pid);
		pid = spawn(argv);
	}
	assert_int_equal(wait_exit(pid, 120000), 0);
	tu_rx_stop(&rx);
	tu_assert_exactly_once_in_order(inbox, "prod-east", N_RECORDS);
	free(dir);
}

static void test_transport__unknown_key_refused_until_authorized(void **state)
{
	char *dir = tu_mkdtemp("transport-zap");
	const char *names[] = {"prod-east"};
	ds_keypair server, known, stranger;
	char inbox[1024], auth[1024], line[200];
	struct tu_rx rx = {0};
	struct tu_tx tx;
	ds_err err = {0};
	FILE *f;

	(void)state;
	tu_link_make_keys(dir, names, 1, &server, &known);
	assert_int_equal(ds_keys_generate(&stranger, &err), 0);
	tu_path_in(inbox, sizeof(inbox), dir, "inbox.db");
	tu_path_in(auth, sizeof(auth), dir, "authorized_sources");
	tu_rx_start(&rx, dir, &server, 0);
	{
		char outbox[1024];
		snprintf(outbox, sizeof(outbox), "%s/stranger-outbox.db", dir);
		tu_link_fill_outbox(outbox, 50);
	}
	tu_tx_new(&tx, dir, "stranger", ds_receiver_endpoint(rx.r), &server, &stranger, 0);
	tx.until = 50;
	tx.timeout_ms = 2500;
	tu_tx_main(&tx);
	assert_int_equal(tx.rc, -ETIMEDOUT);
	assert_int_equal(ds_sender_acked(tx.s), 0);
	assert_true(tu_events_has(&rx.ev, "zap_refused", "unknown key"));
	assert_true(tu_events_has(&rx.ev, "zap_refused", "127.0.0.1"));
	assert_true(tu_events_has(&tx.ev, "handshake_failed", "authentication refused"));
	assert_int_equal(tu_query_ll(inbox, "SELECT count(*) FROM records"), 0);

	/* The file is re-read when it changes: authorize the key, it gets in. */
	tu_msleep(20);
	f = fopen(auth, "a");
	assert_non_null(f);
	snprintf(line, sizeof(line), "stranger %s\n", stranger.public_z85);
	fputs(line, f);
	fclose(f);
	tx.timeout_ms = 30000;
	tu_tx_main(&tx);
	assert_int_equal(tx.rc, 0);
	assert_true(tu_events_has(&rx.ev, "zap_admitted", "stranger"));
	tu_tx_free(&tx);
	tu_rx_stop(&rx);
	tu_assert_exactly_once_in_order(inbox, "stranger", 50);
	free(dir);
}

/* Removing a source from the authorized-sources file closes its open session
 * (not only its next handshake); the other sources are served on. */
static void test_transport__revoked_key_loses_its_open_session(void **state)
{
	char *dir = tu_mkdtemp("transport-revoke");
	const char *names[] = {"prod-east", "prod-west"};
	ds_keypair server, clients[2];
	char inbox[1024], auth[1024], outbox[1024];
	struct tu_rx rx = {0};
	struct tu_tx east, west;
	FILE *f;

	(void)state;
	tu_link_make_keys(dir, names, 2, &server, clients);
	tu_path_in(inbox, sizeof(inbox), dir, "inbox.db");
	tu_path_in(auth, sizeof(auth), dir, "authorized_sources");
	tu_rx_start(&rx, dir, &server, 0);
	snprintf(outbox, sizeof(outbox), "%s/prod-east-outbox.db", dir);
	tu_link_fill_outbox(outbox, 50);
	tu_tx_new(&east, dir, "prod-east", ds_receiver_endpoint(rx.r), &server, &clients[0], 0);
	assert_int_equal(tu_tx_deliver(&east, 50, 30000), 0);
	assert_int_equal(tu_committed_of(inbox, "prod-east"), 50);
	assert_int_equal(tu_events_count(&rx.ev, "source_revoked", NULL), 0);

	/* east's session stays open (heartbeats) while it has nothing to send;
	 * revoke it by rewriting the file without its line. */
	tu_msleep(20);
	f = fopen(auth, "w");
	assert_non_null(f);
	fprintf(f, "prod-west %s\n", clients[1].public_z85);
	fclose(f);
	for (int i = 0; i < 300 && !tu_events_has(&rx.ev, "source_revoked", "prod-east"); i++)
		tu_msleep(10);
	assert_true(tu_events_has(&rx.ev, "source_revoked", "prod-east"));
	assert_true(tu_events_has(&rx.ev, "source_revoked", clients[0].public_z85));

	/* What east queues now never reaches the ledger: it is refused at the
	 * handshake from here on. */
	tu_link_fill_outbox(outbox, 20);
	assert_int_equal(tu_tx_deliver(&east, 70, 2500), -ETIMEDOUT);
	assert_int_equal(tu_committed_of(inbox, "prod-east"), 50);
	assert_true(tu_events_has(&rx.ev, "zap_refused", "unknown key"));
	assert_true(tu_events_has(&east.ev, "goodbye", "no longer authorized") ||
		    tu_events_has(&east.ev, "handshake_failed", "authentication refused"));

	/* west, still listed, is served as before. */
	snprintf(outbox, sizeof(outbox), "%s/prod-west-outbox.db", dir);
	tu_link_fill_outbox(outbox, 40);
	tu_tx_new(&west, dir, "prod-west", ds_receiver_endpoint(rx.r), &server, &clients[1], 0);
	assert_int_equal(tu_tx_deliver(&west, 40, 30000), 0);
	tu_tx_free(&west);
	tu_tx_free(&east);
	tu_rx_stop(&rx);
	tu_assert_exactly_once_in_order(inbox, "prod-west", 40);
	tu_assert_exactly_once_in_order(inbox, "prod-east", 50);
	free(dir);
}

static void test_transport__plaintext_client_refused(void **state)
{
	char *dir = tu_mkdtemp("transport-plain");
	const char *names[] = {"prod-east"};
	ds_keypair server, known;
	char inbox[1024];
	struct tu_rx rx = {0};
	void *ctx, *sock;
	int linger = 0, got = 0;
	char buf[64];

	(void)state;
	tu_link_make_keys(dir, names, 1, &server, &known);
	tu_path_in(inbox, sizeof(inbox), dir, "inbox.db");
	tu_rx_start(&rx, dir, &server, 0);
	ctx = zmq_ctx_new();
	/* Three plaintext peers: each is refused during the handshake and logged
	 * with its address. The address is read from the live connection, which
	 * a refused peer leaves within milliseconds, so on a loaded machine one
	 * of them may be logged without it; all three never are. The reason
	 * libzmq gives depends on which side notices first (mechanism mismatch,
	 * or the peer hanging up on the CURVE greeting). */
	for (int k = 0; k < 3; k++) {
		sock = zmq_socket(ctx, ZMQ_DEALER);
		zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof(linger));
		assert_int_equal(zmq_connect(sock, ds_receiver_endpoint(rx.r)), 0);
		zmq_send(sock, "hello", 5, ZMQ_DONTWAIT);
		for (int i = 0; i < 150 && tu_events_count(&rx.ev, "handshake_failed", NULL) <= k;
		     i++)
			tu_msleep(20);
		assert_true(tu_events_count(&rx.ev, "handshake_failed", NULL) > k);
		/* Nothing ever comes back to a plaintext peer. */
		got = zmq_recv(sock, buf, sizeof(buf), ZMQ_DONTWAIT);
		assert_true(got < 0);
		zmq_close(sock);
		if (tu_events_has(&rx.ev, "handshake_failed", "127.0.0.1:"))
			break;
	}
	assert_true(tu_events_has(&rx.ev, "handshake_failed", "127.0.0.1:"));
	assert_false(tu_events_has(&rx.ev, "session_open", NULL));
	assert_false(tu_events_has(&rx.ev, "zap_admitted", NULL));
	zmq_ctx_term(ctx);
	tu_rx_stop(&rx);
	assert_int_equal(tu_query_ll(inbox, "SELECT count(*) FROM records"), 0);
	free(dir);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_transport__round_trip_10000_records),
	    cmocka_unit_test(test_transport__acked_seq_shows_after_its_results),
	    cmocka_unit_test(test_transport__presence_while_connected_ended_when_the_sender_goes),
	    cmocka_unit_test(test_transport__receiver_sigkilled_5_times),
	    cmocka_unit_test(test_transport__sender_killed_and_restarted),
	    cmocka_unit_test(test_transport__unknown_key_refused_until_authorized),
	    cmocka_unit_test(test_transport__revoked_key_loses_its_open_session),
	    cmocka_unit_test(test_transport__plaintext_client_refused),
	};

	if (argc == 4 && strcmp(argv[1], "--receiver") == 0)
		return child_receiver_main(argv[2], argv[3]);
	if (argc == 5 && strcmp(argv[1], "--sender") == 0)
		return child_sender_main(argv[2], argv[3], argv[4]);
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
