/*
 * The replication link end to end, with real CURVE sockets on loopback and
 * real SQLite files: a 10,000-record round trip; the receiver SIGKILLed and
 * restarted 5 times mid-stream; the sender killed and restarted; an unknown
 * key, a plaintext peer, garbage and oversized frames refused; a revoked key
 * losing its open session.
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
#include "drasync/inbox.h"
#include "drasync/keys.h"
#include "drasync/outbox.h"
#include "drasync/receiver.h"
#include "drasync/sender.h"
#include "testutil.h"

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

/* ---- helpers ---------------------------------------------------------- */

struct events {
	pthread_mutex_t mu;
	char *text;
	size_t len, cap;
};

static void on_event(void *ud, const ds_transport_event *ev)
{
	struct events *e = ud;
	char line[1200];
	int n;

	ds_transport_event_log(NULL, ev);
	if (!e)
		return;
	n = snprintf(line, sizeof(line), "%s|%s|%s\n", ev->name, ev->peer, ev->detail);
	pthread_mutex_lock(&e->mu);
	if (ds_grow((void **)&e->text, &e->cap, e->len + (size_t)n + 1, 1) < 0)
		abort();
	memcpy(e->text + e->len, line, (size_t)n + 1);
	e->len += (size_t)n;
	pthread_mutex_unlock(&e->mu);
}

static int events_count(struct events *e, const char *a, const char *b)
{
	int found = 0;

	pthread_mutex_lock(&e->mu);
	if (e->text) {
		for (char *line = e->text; line && *line;) {
			char *end = strchr(line, '\n');
			size_t l = end ? (size_t)(end - line) : strlen(line);
			char buf[1200];
			snprintf(buf, sizeof(buf), "%.*s", (int)l, line);
			if (strstr(buf, a) && (!b || strstr(buf, b)))
				found++;
			line = end ? end + 1 : NULL;
		}
	}
	pthread_mutex_unlock(&e->mu);
	return found;
}

static int events_has(struct events *e, const char *a, const char *b)
{
	return events_count(e, a, b) > 0;
}

static void events_init(struct events *e)
{
	memset(e, 0, sizeof(*e));
	pthread_mutex_init(&e->mu, NULL);
}

static void events_dispose(struct events *e)
{
	free(e->text);
	pthread_mutex_destroy(&e->mu);
}

static void path_in(char *out, size_t len, const char *dir, const char *name)
{
	snprintf(out, len, "%s/%s", dir, name);
}

/* A JSON object of a realistic shape, different for each seq. */
static size_t json_for(char *buf, size_t cap, unsigned i)
{
	int n =
	    snprintf(buf, cap,
		     "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{"
		     "\"name\":\"trainer-%u\",\"namespace\":\"ml-team\",\"labels\":{\"app\":"
		     "\"trainer\",\"shard\":\"%u\"}},\"spec\":{\"replicas\":%u,\"template\":{"
		     "\"spec\":{\"containers\":[{\"name\":\"main\",\"image\":\"registry."
		     "example/ml/trainer:1.%u\",\"resources\":{\"claims\":[{\"name\":\"gpu\"}]}}],"
		     "\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimTemplateName\":"
		     "\"gpu-%u\"}]}}}}",
		     i, i % 16, i % 5, i % 100, i % 7);
	return (size_t)n;
}

static void fill_outbox(const char *path, unsigned n)
{
	ds_outbox *ob;
	ds_err err = {0};
	char(*json)[1024] = malloc(500 * sizeof(*json));
	char(*names)[64] = malloc(500 * sizeof(*names));
	ds_record *recs = calloc(500, sizeof(*recs));
	unsigned done = 0;

	assert_int_equal(ds_outbox_open(&ob, path, NULL, &err), 0);
	while (done < n) {
		unsigned k = n - done < 500 ? n - done : 500;
		for (unsigned i = 0; i < k; i++) {
			unsigned id = done + i + 1;
			ds_record *r = &recs[i];
			memset(r, 0, sizeof(*r));
			snprintf(names[i], sizeof(names[i]), "trainer-%u", id);
			r->api_version = "apps/v1";
			r->kind = "Deployment";
			r->ns = "ml-team";
			r->name = names[i];
			r->source_uid = "uid";
			r->source_resource_version = "1";
			if (id % 10 == 0) {
				r->op = DS_RECORD_DELETE;
			} else {
				r->op = DS_RECORD_UPSERT;
				r->payload = (const uint8_t *)json[i];
				r->payload_len = json_for(json[i], sizeof(json[i]), id);
			}
		}
		assert_int_equal(ds_outbox_push(ob, recs, k, NULL, &err), 0);
		done += k;
	}
	ds_outbox_free(ob);
	free(json);
	free(names);
	free(recs);
}

/* Read the target's ledger the way an operator would: sqlite3 on the file. */
static long long query_ll(const char *db_path, const char *sql)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	long long v = -1;

	if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
		sqlite3_close(db);
		return -1;
	}
	sqlite3_busy_timeout(db, 5000);
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return v;
}

/* Every record 1..n committed exactly once, in seq order, for `source`. */
static void assert_exactly_once_in_order(const char *inbox, const char *source, long long n)
{
	char sql[512];

	snprintf(sql, sizeof(sql), "SELECT count(*) FROM records WHERE source = '%s'", source);
	assert_int_equal(query_ll(inbox, sql), n);
	snprintf(sql, sizeof(sql), "SELECT count(DISTINCT seq) FROM records WHERE source = '%s'",
		 source);
	assert_int_equal(query_ll(inbox, sql), n);
	snprintf(sql, sizeof(sql), "SELECT min(seq) FROM records WHERE source = '%s'", source);
	assert_int_equal(query_ll(inbox, sql), 1);
	snprintf(sql, sizeof(sql), "SELECT max(seq) FROM records WHERE source = '%s'", source);
	assert_int_equal(query_ll(inbox, sql), n);
	/* Commit order (id) is seq order: no record overtook another. */
	snprintf(sql, sizeof(sql),
		 "SELECT count(*) FROM records a JOIN records b ON a.source = b.source AND "
		 "a.id < b.id WHERE a.source = '%s' AND a.seq > b.seq AND b.id = (SELECT min(id) "
		 "FROM records c WHERE c.id > a.id AND c.source = a.source)",
		 source);
	assert_int_equal(query_ll(inbox, sql), 0);
	snprintf(sql, sizeof(sql),
		 "SELECT count(*) FROM records WHERE source = '%s' AND status != 1", source);
	assert_int_equal(query_ll(inbox, sql), 0);
	snprintf(sql, sizeof(sql), "SELECT committed_seq FROM sources WHERE name = '%s'", source);
	assert_int_equal(query_ll(inbox, sql), n);
}

static long long committed_of(const char *inbox, const char *source)
{
	char sql[256];

	snprintf(sql, sizeof(sql), "SELECT committed_seq FROM sources WHERE name = '%s'", source);
	return query_ll(inbox, sql);
}

static long long mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void msleep(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* Key files for a test directory: server.key/.pub, NAME.key/.pub, authorized. */
static void make_keys(const char *dir, const char *const *sources, size_t n, ds_keypair *server,
		      ds_keypair *clients)
{
	char path[1024];
	FILE *f;
	ds_err err = {0};

	assert_int_equal(ds_keys_generate(server, &err), 0);
	assert_int_equal(ds_keys_write(dir, "server", server, false, &err), 0);
	path_in(path, sizeof(path), dir, "authorized_sources");
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "# name key\n");
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(ds_keys_generate(&clients[i], &err), 0);
		assert_int_equal(ds_keys_write(dir, sources[i], &clients[i], false, &err), 0);
		fprintf(f, "%s %s\n", sources[i], clients[i].public_z85);
	}
	fclose(f);
}

/* ---- in-process receiver ---------------------------------------------- */

static uint32_t rx_credit; /* 0: the default */

struct rx {
	ds_receiver *r;
	pthread_t thread;
	struct events ev;
	int handler_sleep_us;
	long handled;
};

static void slow_handler(void *ud, const char *source, const ds_record *rec, ds_record_result *res)
{
	struct rx *rx = ud;

	(void)source;
	(void)rec;
	(void)res;
	rx->handled++;
	if (rx->handler_sleep_us)
		usleep((useconds_t)rx->handler_sleep_us);
}

static void *rx_main(void *arg)
{
	struct rx *rx = arg;
	ds_err err = {0};

	ds_receiver_run(rx->r, &err);
	return NULL;
}

static void rx_start(struct rx *rx, const char *dir, const ds_keypair *server, size_t max_frame)
{
	ds_receiver_config cfg;
	char auth[1024], inbox[1024];
	ds_err err = {0};

	events_init(&rx->ev);
	ds_receiver_config_default(&cfg);
	path_in(auth, sizeof(auth), dir, "authorized_sources");
	path_in(inbox, sizeof(inbox), dir, "inbox.db");
	cfg.endpoint = "tcp://127.0.0.1:*";
	cfg.keys = server;
	cfg.authorized_sources = auth;
	cfg.inbox_path = inbox;
	cfg.handler = slow_handler;
	cfg.handler_ud = rx;
	cfg.on_event = on_event;
	cfg.event_ud = &rx->ev;
	if (max_frame)
		cfg.tuning.limits.max_frame = max_frame;
	if (rx_credit)
		cfg.credit = rx_credit;
	if (ds_receiver_new(&rx->r, &cfg, &err) < 0)
		fail_msg("receiver: %s", err.msg);
	assert_int_equal(pthread_create(&rx->thread, NULL, rx_main, rx), 0);
}

static void rx_stop(struct rx *rx)
{
	ds_receiver_stop(rx->r);
	pthread_join(rx->thread, NULL);
	ds_receiver_free(rx->r);
	events_dispose(&rx->ev);
}

/* ---- in-process sender ------------------------------------------------- */

struct tx {
	ds_sender *s;
	pthread_t thread;
	uint64_t until;
	int timeout_ms;
	int rc;
	long results, duplicates;
	struct events ev;
};

static void on_result(void *ud, uint64_t seq, enum ds_result_status st, const char *msg)
{
	struct tx *tx = ud;

	(void)seq;
	(void)msg;
	tx->results++;
	if (st == DS_RESULT_DUPLICATE)
		tx->duplicates++;
}

static void on_results(void *ud, const ds_wire_result *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		on_result(ud, v[i].seq, v[i].status, v[i].message);
}

static void tx_new(struct tx *tx, const char *dir, const char *name, const char *endpoint,
		   const ds_keypair *server, const ds_keypair *client, size_t batch)
{
	ds_sender_config cfg;
	char outbox[1024];
	ds_err err = {0};

	memset(tx, 0, sizeof(*tx));
	events_init(&tx->ev);
	ds_sender_config_default(&cfg);
	snprintf(outbox, sizeof(outbox), "%s/%s-outbox.db", dir, name);
	cfg.endpoint = endpoint;
	cfg.server_public_key = server->public_z85;
	cfg.keys = client;
	cfg.outbox_path = outbox;
	cfg.cluster_name = name;
	if (batch)
		cfg.batch_records = batch;
	cfg.on_event = on_event;
	cfg.event_ud = &tx->ev;
	cfg.on_results = on_results;
	cfg.ud = tx;
	if (ds_sender_new(&tx->s, &cfg, &err) < 0)
		fail_msg("sender: %s", err.msg);
}

static void *tx_main(void *arg)
{
	struct tx *tx = arg;
	ds_err err = {0};

	tx->rc = ds_sender_run(tx->s, tx->until, tx->timeout_ms, &err);
	if (tx->rc < 0)
		fprintf(stderr, "sender: %s\n", err.msg);
	return NULL;
}

/* Run the sender until `until` is acknowledged or timeout_ms pass; its rc. */
static int tx_deliver(struct tx *tx, uint64_t until, int timeout_ms)
{
	tx->until = until;
	tx->timeout_ms = timeout_ms;
	tx_main(tx);
	return tx->rc;
}

static void tx_free(struct tx *tx)
{
	ds_sender_free(tx->s);
	events_dispose(&tx->ev);
}

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

	path_in(auth, sizeof(auth), dir, "authorized_sources");
	path_in(inbox, sizeof(inbox), dir, "inbox.db");
	path_in(key, sizeof(key), dir, "server.key");
	path_in(epfile, sizeof(epfile), dir, "endpoint");
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

	path_in(key, sizeof(key), dir, "prod-east.key");
	path_in(pub, sizeof(pub), dir, "server.pub");
	path_in(outbox, sizeof(outbox), dir, "prod-east-outbox.db");
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
		msleep(20);
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

	path_in(epfile, sizeof(epfile), dir, "endpoint");
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
		msleep(20);
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
	struct rx rx = {0};
	struct tx tx;

	(void)state;
	make_keys(dir, names, 1, &server, &client);
	snprintf(outbox, sizeof(outbox), "%s/prod-east-outbox.db", dir);
	path_in(inbox, sizeof(inbox), dir, "inbox.db");
	fill_outbox(outbox, N_RECORDS);
	/* A credit that is no multiple of the batch size: the sender must cut its
	 * batches to what was granted, or the receiver drops it. */
	rx_credit = 300;
	rx_start(&rx, dir, &server, 0);
	rx_credit = 0;
	tx_new(&tx, dir, "prod-east", ds_receiver_endpoint(rx.r), &server, &client, 0);
	tx.until = N_RECORDS;
	tx.timeout_ms = 60000;
	tx_main(&tx);
	assert_false(events_has(&rx.ev, "peer_dropped", NULL));
	assert_int_equal(events_count(&tx.ev, "session_open", NULL), 1);
	assert_int_equal(tx.rc, 0);
	assert_int_equal(ds_sender_acked(tx.s), N_RECORDS);
	assert_int_equal(tx.results, N_RECORDS);
	assert_int_equal(tx.duplicates, 0);
	assert_int_equal(rx.handled, N_RECORDS);
	assert_true(events_has(&rx.ev, "zap_admitted", "prod-east"));
	assert_true(events_has(&tx.ev, "session_open", NULL));
	tx_free(&tx);
	rx_stop(&rx);
	assert_exactly_once_in_order(inbox, "prod-east", N_RECORDS);
	/* A payload survives the trip byte for byte (stored compressed or not). */
	assert_int_equal(query_ll(inbox, "SELECT count(*) FROM records WHERE op = 2"), 1000);
	assert_true(query_ll(inbox, "SELECT length(payload) FROM records WHERE seq = 1") > 100);
	free(dir);
}

/* A slow on_result: the sender thread is still handing results over. */
static void slow_result(void *ud, uint64_t seq, enum ds_result_status st, const char *msg)
{
	struct tx *tx = ud;

	(void)seq;
	(void)st;
	(void)msg;
	msleep(5);
	__atomic_add_fetch(&tx->results, 1, __ATOMIC_SEQ_CST);
}

static void slow_results(void *ud, const ds_wire_result *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		slow_result(ud, v[i].seq, v[i].status, v[i].message);
}

static void *tx_forever(void *arg)
{
	struct tx *tx = arg;
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
	struct rx rx = {0};
	struct tx tx;
	ds_err err = {0};
	long long end;

	(void)state;
	make_keys(dir, names, 1, &server, &client);
	snprintf(outbox, sizeof(outbox), "%s/prod-east-outbox.db", dir);
	fill_outbox(outbox, 200);
	rx_start(&rx, dir, &server, 0);
	memset(&tx, 0, sizeof(tx));
	events_init(&tx.ev);
	ds_sender_config_default(&cfg);
	cfg.endpoint = ds_receiver_endpoint(rx.r);
	cfg.server_public_key = server.public_z85;
	cfg.keys = &client;
	cfg.outbox_path = outbox;
	cfg.cluster_name = "prod-east";
	cfg.batch_records = 50;
	cfg.on_event = on_event;
	cfg.event_ud = &tx.ev;
	cfg.on_results = slow_results;
	cfg.ud = &tx;
	assert_int_equal(ds_sender_new(&tx.s, &cfg, &err), 0);
	assert_int_equal(pthread_create(&tx.thread, NULL, tx_forever, &tx), 0);
	end = mono_ms() + 60000;
	while (ds_sender_acked(tx.s) < 200 && mono_ms() < end) {
		uint64_t acked = ds_sender_acked(tx.s);
		long results = __atomic_load_n(&tx.results, __ATOMIC_SEQ_CST);

		if ((uint64_t)results < acked)
			fail_msg("seq %llu shows acknowledged with only %ld results handed over",
				 (unsigned long long)acked, results);
		msleep(1);
	}
	assert_int_equal(ds_sender_acked(tx.s), 200);
	assert_true(__atomic_load_n(&tx.results, __ATOMIC_SEQ_CST) >= 200);
	ds_sender_stop(tx.s);
	pthread_join(tx.thread, NULL);
	tx_free(&tx);
	rx_stop(&rx);
	free(dir);
}

/* Wait up to timeout_ms for query_ll(inbox, sql) to be `want`; fails the test after. */
static void wait_query(const char *inbox, const char *sql, long long want, int timeout_ms)
{
	long long end = mono_ms() + timeout_ms, v;

	while ((v = query_ll(inbox, sql)) != want) {
		if (mono_ms() > end)
			fail_msg("%s is %lld after %d ms, not %lld", sql, v, timeout_ms, want);
		msleep(50);
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
	struct rx rx = {0};
	struct tx tx;
	long long seen;

	(void)state;
	make_keys(dir, names, 1, &server, &client);
	snprintf(outbox, sizeof(outbox), "%s/prod-east-outbox.db", dir);
	path_in(inbox, sizeof(inbox), dir, "inbox.db");
	fill_outbox(outbox, 10);
	rx_start(&rx, dir, &server, 0);
	tx_new(&tx, dir, "prod-east", ds_receiver_endpoint(rx.r), &server, &client, 0);
	assert_int_equal(pthread_create(&tx.thread, NULL, tx_forever, &tx), 0);
	wait_query(inbox,
		   "SELECT count(*) FROM presence WHERE source = 'prod-east' AND ended_at IS NULL"
		   " AND peer LIKE '127.0.0.1:%'",
		   1, 10000);
	while (ds_sender_acked(tx.s) < 10)
		msleep(10);
	/* Idle now (everything acknowledged): still seen, valid beyond the heartbeat timeout. */
	seen = query_ll(inbox, "SELECT seen_at FROM presence");
	wait_query(inbox, "SELECT seen_at > (SELECT since FROM presence) FROM presence", 1, 5000);
	assert_true(query_ll(inbox, "SELECT seen_at FROM presence") > seen);
	assert_true(query_ll(inbox, "SELECT valid_until - seen_at FROM presence") >= 5000);

	ds_sender_stop(tx.s);
	pthread_join(tx.thread, NULL);
	tx_free(&tx);
	/* The connection closed: ended within a sweep or two, with the reason. */
	wait_query(inbox,
		   "SELECT count(*) FROM presence WHERE ended_at IS NOT NULL AND end_reason ="
		   " 'connection closed'",
		   1, 8000);
	rx_stop(&rx);
	free(dir);
}

static void test_transport__receiver_sigkilled_5_times(void **state)
{
	char *dir = tu_mkdtemp("transport-rxkill");
	const char *names[] = {"prod-east"};
	ds_keypair server, client;
	char outbox[1024], inbox[1024], endpoint[256];
	struct tx tx;
	pid_t pid;

	(void)state;
	make_keys(dir, names, 1, &server, &client);
	snprintf(outbox, sizeof(outbox), "%s/prod-east-outbox.db", dir);
	path_in(inbox, sizeof(inbox), dir, "inbox.db");
	fill_outbox(outbox, N_RECORDS);
	pid = start_receiver_child(dir, "tcp://127.0.0.1:*", endpoint, sizeof(endpoint));
	tx_new(&tx, dir, "prod-east", endpoint, &server, &client, 100);
	tx.until = N_RECORDS;
	tx.timeout_ms = 150000;
	assert_int_equal(pthread_create(&tx.thread, NULL, tx_main, &tx), 0);
	for (int k = 1; k <= 5; k++) {
		long long target = k * 1500, c = 0;
		char again[256];
		for (int i = 0; i < 3000 && (c = committed_of(inbox, "prod-east")) < target; i++)
			msleep(10);
		assert_true(c >= target);
		assert_true(c < N_RECORDS); /* killed mid-stream, really */
		kill9(pid);
		pid = start_receiver_child(dir, endpoint, again, sizeof(again));
		assert_string_equal(again, endpoint);
	}
	pthread_join(tx.thread, NULL);
	assert_int_equal(tx.rc, 0);
	assert_int_equal(ds_sender_acked(tx.s), N_RECORDS);
	assert_true(events_has(&tx.ev, "disconnected", NULL));
	tx_free(&tx);
	kill(pid, SIGTERM);
	assert_int_equal(wait_exit(pid, 10000), 0);
	assert_exactly_once_in_order(inbox, "prod-east", N_RECORDS);
	free(dir);
}

static void test_transport__sender_killed_and_restarted(void **state)
{
	char *dir = tu_mkdtemp("transport-txkill");
	const char *names[] = {"prod-east"};
	ds_keypair server, client;
	char outbox[1024], inbox[1024], until[32];
	struct rx rx = {0};
	pid_t pid;

	(void)state;
	make_keys(dir, names, 1, &server, &client);
	snprintf(outbox, sizeof(outbox), "%s/prod-east-outbox.db", dir);
	path_in(inbox, sizeof(inbox), dir, "inbox.db");
	fill_outbox(outbox, N_RECORDS);
	rx.handler_sleep_us = 200;
	rx_start(&rx, dir, &server, 0);
	snprintf(until, sizeof(until), "%d", N_RECORDS);
	const char *argv[] = {"test_transport",		  "--sender", dir,
			      ds_receiver_endpoint(rx.r), until,      NULL};
	pid = spawn(argv);
	for (int k = 1; k <= 3; k++) {
		long long target = k * 2500, c = 0;
		for (int i = 0; i < 3000 && (c = committed_of(inbox, "prod-east")) < target; i++)
			msleep(10);
		assert_true(c >= target);
		assert_true(c < N_RECORDS);
		kill9(pid);
		pid = spawn(argv);
	}
	assert_int_equal(wait_exit(pid, 120000), 0);
	rx_stop(&rx);
	assert_exactly_once_in_order(inbox, "prod-east", N_RECORDS);
	free(dir);
}

static void test_transport__unknown_key_refused_until_authorized(void **state)
{
	char *dir = tu_mkdtemp("transport-zap");
	const char *names[] = {"prod-east"};
	ds_keypair server, known, stranger;
	char inbox[1024], auth[1024], line[200];
	struct rx rx = {0};
	struct tx tx;
	ds_err err = {0};
	FILE *f;

	(void)state;
	make_keys(dir, names, 1, &server, &known);
	assert_int_equal(ds_keys_generate(&stranger, &err), 0);
	path_in(inbox, sizeof(inbox), dir, "inbox.db");
	path_in(auth, sizeof(auth), dir, "authorized_sources");
	rx_start(&rx, dir, &server, 0);
	{
		char outbox[1024];
		snprintf(outbox, sizeof(outbox), "%s/stranger-outbox.db", dir);
		fill_outbox(outbox, 50);
	}
	tx_new(&tx, dir, "stranger", ds_receiver_endpoint(rx.r), &server, &stranger, 0);
	tx.until = 50;
	tx.timeout_ms = 2500;
	tx_main(&tx);
	assert_int_equal(tx.rc, -ETIMEDOUT);
	assert_int_equal(ds_sender_acked(tx.s), 0);
	assert_true(events_has(&rx.ev, "zap_refused", "unknown key"));
	assert_true(events_has(&rx.ev, "zap_refused", "127.0.0.1"));
	assert_true(events_has(&tx.ev, "handshake_failed", "authentication refused"));
	assert_int_equal(query_ll(inbox, "SELECT count(*) FROM records"), 0);

	/* The file is re-read when it changes: authorize the key, it gets in. */
	msleep(20);
	f = fopen(auth, "a");
	assert_non_null(f);
	snprintf(line, sizeof(line), "stranger %s\n", stranger.public_z85);
	fputs(line, f);
	fclose(f);
	tx.timeout_ms = 30000;
	tx_main(&tx);
	assert_int_equal(tx.rc, 0);
	assert_true(events_has(&rx.ev, "zap_admitted", "stranger"));
	tx_free(&tx);
	rx_stop(&rx);
	assert_exactly_once_in_order(inbox, "stranger", 50);
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
	struct rx rx = {0};
	struct tx east, west;
	FILE *f;

	(void)state;
	make_keys(dir, names, 2, &server, clients);
	path_in(inbox, sizeof(inbox), dir, "inbox.db");
	path_in(auth, sizeof(auth), dir, "authorized_sources");
	rx_start(&rx, dir, &server, 0);
	snprintf(outbox, sizeof(outbox), "%s/prod-east-outbox.db", dir);
	fill_outbox(outbox, 50);
	tx_new(&east, dir, "prod-east", ds_receiver_endpoint(rx.r), &server, &clients[0], 0);
	assert_int_equal(tx_deliver(&east, 50, 30000), 0);
	assert_int_equal(committed_of(inbox, "prod-east"), 50);
	assert_int_equal(events_count(&rx.ev, "source_revoked", NULL), 0);

	/* east's session stays open (heartbeats) while it has nothing to send;
	 * revoke it by rewriting the file without its line. */
	msleep(20);
	f = fopen(auth, "w");
	assert_non_null(f);
	fprintf(f, "prod-west %s\n", clients[1].public_z85);
	fclose(f);
	for (int i = 0; i < 300 && !events_has(&rx.ev, "source_revoked", "prod-east"); i++)
		msleep(10);
	assert_true(events_has(&rx.ev, "source_revoked", "prod-east"));
	assert_true(events_has(&rx.ev, "source_revoked", clients[0].public_z85));

	/* What east queues now never reaches the ledger: it is refused at the
	 * handshake from here on. */
	fill_outbox(outbox, 20);
	assert_int_equal(tx_deliver(&east, 70, 2500), -ETIMEDOUT);
	assert_int_equal(committed_of(inbox, "prod-east"), 50);
	assert_true(events_has(&rx.ev, "zap_refused", "unknown key"));
	assert_true(events_has(&east.ev, "goodbye", "no longer authorized") ||
		    events_has(&east.ev, "handshake_failed", "authentication refused"));

	/* west, still listed, is served as before. */
	snprintf(outbox, sizeof(outbox), "%s/prod-west-outbox.db", dir);
	fill_outbox(outbox, 40);
	tx_new(&west, dir, "prod-west", ds_receiver_endpoint(rx.r), &server, &clients[1], 0);
	assert_int_equal(tx_deliver(&west, 40, 30000), 0);
	tx_free(&west);
	tx_free(&east);
	rx_stop(&rx);
	assert_exactly_once_in_order(inbox, "prod-west", 40);
	assert_exactly_once_in_order(inbox, "prod-east", 50);
	free(dir);
}

static void test_transport__plaintext_client_refused(void **state)
{
	char *dir = tu_mkdtemp("transport-plain");
	const char *names[] = {"prod-east"};
	ds_keypair server, known;
	char inbox[1024];
	struct rx rx = {0};
	void *ctx, *sock;
	int linger = 0, got = 0;
	char buf[64];

	(void)state;
	make_keys(dir, names, 1, &server, &known);
	path_in(inbox, sizeof(inbox), dir, "inbox.db");
	rx_start(&rx, dir, &server, 0);
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
		for (int i = 0; i < 150 && events_count(&rx.ev, "handshake_failed", NULL) <= k; i++)
			msleep(20);
		assert_true(events_count(&rx.ev, "handshake_failed", NULL) > k);
		/* Nothing ever comes back to a plaintext peer. */
		got = zmq_recv(sock, buf, sizeof(buf), ZMQ_DONTWAIT);
		assert_true(got < 0);
		zmq_close(sock);
		if (events_has(&rx.ev, "handshake_failed", "127.0.0.1:"))
			break;
	}
	assert_true(events_has(&rx.ev, "handshake_failed", "127.0.0.1:"));
	assert_false(events_has(&rx.ev, "session_open", NULL));
	assert_false(events_has(&rx.ev, "zap_admitted", NULL));
	zmq_ctx_term(ctx);
	rx_stop(&rx);
	assert_int_equal(query_ll(inbox, "SELECT count(*) FROM records"), 0);
	free(dir);
}

/* A CURVE client with an authorized key that misbehaves. */
static void *evil_socket(void *ctx, const ds_keypair *server, const ds_keypair *me,
			 const char *endpoint, void **monitor)
{
	void *sock = zmq_socket(ctx, ZMQ_DEALER);
	static int n;
	char mon[64];
	int linger = 0;

	zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof(linger));
	zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, server->public_z85, 40);
	zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, me->public_z85, 40);
	zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, me->secret_z85, 40);
	snprintf(mon, sizeof(mon), "inproc://evil-mon-%d", n++);
	zmq_socket_monitor(sock, mon, ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED);
	*monitor = zmq_socket(ctx, ZMQ_PAIR);
	zmq_setsockopt(*monitor, ZMQ_LINGER, &linger, sizeof(linger));
	zmq_connect(*monitor, mon);
	assert_int_equal(zmq_connect(sock, endpoint), 0);
	return sock;
}

/* Wait for an event on a monitor PAIR. */
static int wait_event(void *monitor, uint16_t want, int timeout_ms)
{
	for (int waited = 0; waited < timeout_ms; waited += 20) {
		zmq_msg_t a, b;
		int got = 0;
		zmq_msg_init(&a);
		zmq_msg_init(&b);
		if (zmq_msg_recv(&a, monitor, ZMQ_DONTWAIT) >= 0) {
			uint16_t ev;
			memcpy(&ev, zmq_msg_data(&a), 2);
			zmq_msg_recv(&b, monitor, 0);
			got = ev == want;
		}
		zmq_msg_close(&a);
		zmq_msg_close(&b);
		if (got)
			return 1;
		msleep(20);
	}
	return 0;
}

static void test_transport__garbage_and_oversized_frames_drop_only_that_peer(void **state)
{
	char *dir = tu_mkdtemp("transport-evil");
	const char *names[] = {"prod-east", "evil-a", "evil-b"};
	ds_keypair server, keys[3];
	char outbox[1024], inbox[1024];
	struct rx rx = {0};
	struct tx tx;
	void *ctx, *a, *b, *mon_a, *mon_b;
	size_t big = 2u << 20;
	char *bigbuf;

	(void)state;
	make_keys(dir, names, 3, &server, keys);
	snprintf(outbox, sizeof(outbox), "%s/prod-east-outbox.db", dir);
	path_in(inbox, sizeof(inbox), dir, "inbox.db");
	fill_outbox(outbox, 3000);
	rx.handler_sleep_us = 300;
	rx_start(&rx, dir, &server, 1u << 20);
	tx_new(&tx, dir, "prod-east", ds_receiver_endpoint(rx.r), &server, &keys[0], 100);
	tx.until = 3000;
	tx.timeout_ms = 60000;
	assert_int_equal(pthread_create(&tx.thread, NULL, tx_main, &tx), 0);

	ctx = zmq_ctx_new();
	a = evil_socket(ctx, &server, &keys[1], ds_receiver_endpoint(rx.r), &mon_a);
	b = evil_socket(ctx, &server, &keys[2], ds_receiver_endpoint(rx.r), &mon_b);
	assert_true(wait_event(mon_a, ZMQ_EVENT_HANDSHAKE_SUCCEEDED, 5000));
	assert_true(wait_event(mon_b, ZMQ_EVENT_HANDSHAKE_SUCCEEDED, 5000));
	/* Garbage: not a protobuf Envelope. */
	zmq_send(a, "\x0a\xff\xff\xff\xff\x0f garbage", 14, 0);
	/* Oversized: over the receiver's ZMQ_MAXMSGSIZE of 1 MiB. */
	bigbuf = malloc(big);
	memset(bigbuf, 'x', big);
	zmq_send(b, bigbuf, big, 0);
	free(bigbuf);
	assert_true(wait_event(mon_a, ZMQ_EVENT_DISCONNECTED, 10000));
	assert_true(wait_event(mon_b, ZMQ_EVENT_DISCONNECTED, 10000));
	zmq_close(a);
	zmq_close(b);
	zmq_close(mon_a);
	zmq_close(mon_b);
	zmq_ctx_term(ctx);

	pthread_join(tx.thread, NULL);
	assert_int_equal(tx.rc, 0);
	assert_true(events_has(&rx.ev, "peer_dropped", "not a valid protobuf"));
	assert_true(events_has(&rx.ev, "disconnected", "MAXMSGSIZE"));
	tx_free(&tx);
	rx_stop(&rx);
	assert_exactly_once_in_order(inbox, "prod-east", 3000);
	assert_int_equal(query_ll(inbox, "SELECT count(*) FROM records WHERE source != "
					 "'prod-east'"),
			 0);
	free(dir);
}

struct snap {
	char outbox[1024];
	ds_sender *sender;
	int calls;
	uint64_t committed;
};

/* What the exporter does when told: push a full snapshot into the outbox. */
static void on_snapshot_required(void *ud, uint64_t committed)
{
	struct snap *sn = ud;
	ds_outbox *ob;
	ds_record recs[5];
	ds_manifest_entry manifest[3];
	const char *json[3] = {"{\"a\":1}", "{\"b\":2}", "{\"c\":3}"};
	const char *names[3] = {"a", "b", "c"};
	char keys[3][64];
	ds_err err = {0};

	sn->calls++;
	sn->committed = committed;
	memset(recs, 0, sizeof(recs));
	recs[0].op = DS_RECORD_SNAPSHOT_BEGIN;
	recs[0].snapshot_id = "snap-1";
	for (int i = 0; i < 3; i++) {
		ds_record *r = &recs[i + 1];
		r->op = DS_RECORD_UPSERT;
		r->api_version = "v1";
		r->kind = "ConfigMap";
		r->ns = "ml-team";
		r->name = names[i];
		r->payload = (const uint8_t *)json[i];
		r->payload_len = strlen(json[i]);
		snprintf(keys[i], sizeof(keys[i]), "v1/ConfigMap/ml-team/%s", names[i]);
		manifest[i].key = keys[i];
		ds_record_hash(json[i], strlen(json[i]), manifest[i].content_hash);
	}
	recs[4].op = DS_RECORD_SNAPSHOT_END;
	recs[4].snapshot_id = "snap-1";
	recs[4].manifest = manifest;
	recs[4].manifest_len = 3;
	assert_int_equal(ds_outbox_open(&ob, sn->outbox, NULL, &err), 0);
	assert_int_equal(ds_outbox_push(ob, recs, 5, NULL, &err), 0);
	ds_outbox_free(ob);
	ds_sender_wake(sn->sender);
}

static void test_transport__lost_ledger_gets_a_snapshot(void **state)
{
	char *dir = tu_mkdtemp("transport-snap");
	const char *names[] = {"prod-east"};
	ds_keypair server, client;
	char inbox[1024], f[1100];
	struct rx rx = {0};
	ds_sender_config cfg;
	struct snap sn;
	struct events ev;
	ds_sender *s;
	ds_err err = {0};

	(void)state;
	make_keys(dir, names, 1, &server, &client);
	memset(&sn, 0, sizeof(sn));
	snprintf(sn.outbox, sizeof(sn.outbox), "%s/prod-east-outbox.db", dir);
	path_in(inbox, sizeof(inbox), dir, "inbox.db");
	fill_outbox(sn.outbox, 1100);
	rx_start(&rx, dir, &server, 0);
	events_init(&ev);
	ds_sender_config_default(&cfg);
	cfg.endpoint = ds_receiver_endpoint(rx.r);
	cfg.server_public_key = server.public_z85;
	cfg.keys = &client;
	cfg.outbox_path = sn.outbox;
	cfg.cluster_name = "prod-east";
	cfg.on_event = on_event;
	cfg.event_ud = &ev;
	cfg.on_snapshot_required = on_snapshot_required;
	cfg.ud = &sn;
	assert_int_equal(ds_sender_new(&s, &cfg, &err), 0);
	sn.sender = s;
	assert_int_equal(ds_sender_run(s, 1100, 60000, &err), 0);
	ds_sender_free(s);
	rx_stop(&rx);
	assert_int_equal(sn.calls, 0);

	/* The target loses its ledger; the acked records are pruned from the outbox. */
	unlink(inbox);
	snprintf(f, sizeof(f), "%s-wal", inbox);
	unlink(f);
	snprintf(f, sizeof(f), "%s-shm", inbox);
	unlink(f);
	rx_start(&rx, dir, &server, 0);
	cfg.endpoint = ds_receiver_endpoint(rx.r);
	assert_int_equal(ds_sender_new(&s, &cfg, &err), 0);
	sn.sender = s;
	assert_int_equal(ds_sender_run(s, 1105, 60000, &err), 0);
	assert_int_equal(sn.calls, 1);
	assert_int_equal(sn.committed, 0);
	assert_true(events_has(&ev, "snapshot_required", "snapshot is required"));
	ds_sender_free(s);
	rx_stop(&rx);
	events_dispose(&ev);
	/* The snapshot went through the gap: begin at 1101, end at 1105, manifest kept. */
	assert_int_equal(query_ll(inbox, "SELECT count(*) FROM records"), 5);
	assert_int_equal(query_ll(inbox, "SELECT seq FROM records WHERE op = 3"), 1101);
	assert_int_equal(query_ll(inbox, "SELECT seq FROM records WHERE op = 4"), 1105);
	assert_int_equal(query_ll(inbox, "SELECT committed_seq FROM sources"), 1105);
	assert_int_equal(query_ll(inbox, "SELECT count(*) FROM manifests WHERE seq = 1105 AND "
					 "key LIKE 'v1/ConfigMap/ml-team/%' AND "
					 "length(content_hash) = 32"),
			 3);
	free(dir);
}

/* The exporter's side breaks instead of pushing: the outbox loses its table. */
static void on_snapshot_breaks_outbox(void *ud, uint64_t committed)
{
	struct snap *sn = ud;
	sqlite3 *db = NULL;

	sn->calls++;
	sn->committed = committed;
	assert_int_equal(sqlite3_open(sn->outbox, &db), SQLITE_OK);
	sqlite3_busy_timeout(db, 5000);
	assert_int_equal(sqlite3_exec(db, "ALTER TABLE outbox RENAME TO gone", NULL, NULL, NULL),
			 SQLITE_OK);
	sqlite3_close(db);
}

/* err is optional: the snapshot-required path reports through events, never through it. */
static void test_transport__snapshot_required_with_no_err(void **state)
{
	char *dir = tu_mkdtemp("transport-snap-noerr");
	const char *names[] = {"prod-east"};
	ds_keypair server, client;
	char inbox[1024], f[1100];
	struct rx rx = {0};
	ds_sender_config cfg;
	struct snap sn;
	struct events ev;
	ds_sender *s;

	(void)state;
	make_keys(dir, names, 1, &server, &client);
	memset(&sn, 0, sizeof(sn));
	snprintf(sn.outbox, sizeof(sn.outbox), "%s/prod-east-outbox.db", dir);
	path_in(inbox, sizeof(inbox), dir, "inbox.db");
	fill_outbox(sn.outbox, 1100);
	rx_start(&rx, dir, &server, 0);
	events_init(&ev);
	ds_sender_config_default(&cfg);
	cfg.endpoint = ds_receiver_endpoint(rx.r);
	cfg.server_public_key = server.public_z85;
	cfg.keys = &client;
	cfg.outbox_path = sn.outbox;
	cfg.cluster_name = "prod-east";
	cfg.on_event = on_event;
	cfg.event_ud = &ev;
	cfg.on_snapshot_required = on_snapshot_breaks_outbox;
	cfg.ud = &sn;
	assert_int_equal(ds_sender_new(&s, &cfg, NULL), 0);
	assert_int_equal(ds_sender_run(s, 1100, 60000, NULL), 0);
	ds_sender_free(s);
	rx_stop(&rx);

	/* The target loses its ledger: a snapshot is required, and the outbox then fails. */
	unlink(inbox);
	snprintf(f, sizeof(f), "%s-wal", inbox);
	unlink(f);
	snprintf(f, sizeof(f), "%s-shm", inbox);
	unlink(f);
	rx_start(&rx, dir, &server, 0);
	cfg.endpoint = ds_receiver_endpoint(rx.r);
	assert_int_equal(ds_sender_new(&s, &cfg, NULL), 0);
	assert_int_equal(ds_sender_run(s, 1105, 1500, NULL), -ETIMEDOUT);
	assert_int_equal(sn.calls, 1);
	assert_true(events_has(&ev, "snapshot_required", "snapshot is required"));
	assert_true(events_has(&ev, "resume_failed", "no such table"));
	ds_sender_free(s);
	rx_stop(&rx);
	events_dispose(&ev);
	free(dir);
}

static void test_transport__sender_beyond_credit_dropped(void **state)
{
	char *dir = tu_mkdtemp("transport-credit");
	const char *names[] = {"greedy"};
	ds_keypair server, client;
	char inbox[1024];
	struct rx rx = {0};
	void *ctx, *sock, *mon;
	ds_wire_encoder *enc;
	ds_wire_blob blobs[12];
	uint8_t *bufs[12], *frame, reply[4096];
	size_t len;
	ds_wire_hello h = {DS_PROTOCOL_VERSION, "greedy", "test", 5};
	ds_err err = {0};
	const char *json = "{\"kind\":\"Secret\"}";

	(void)state;
	make_keys(dir, names, 1, &server, &client);
	path_in(inbox, sizeof(inbox), dir, "inbox.db");
	rx_credit = 10;
	rx_start(&rx, dir, &server, 0);
	rx_credit = 0;
	ctx = zmq_ctx_new();
	sock = evil_socket(ctx, &server, &client, ds_receiver_endpoint(rx.r), &mon);
	assert_int_equal(ds_wire_hello_encode(&h, &frame, &len), 0);
	zmq_send(sock, frame, len, 0);
	free(frame);
	{
		int timeout = 5000;
		zmq_setsockopt(sock, ZMQ_RCVTIMEO, &timeout, sizeof(timeout));
	}
	assert_true(zmq_recv(sock, reply, sizeof(reply), 0) > 0); /* Welcome, credit 10 */
	assert_int_equal(ds_wire_encoder_new(&enc, 1, 512), 0);
	for (int i = 0; i < 12; i++) {
		ds_record r;
		memset(&r, 0, sizeof(r));
		r.epoch = 5;
		r.seq = (uint64_t)i + 1;
		r.op = DS_RECORD_UPSERT;
		r.api_version = "v1";
		r.kind = "Secret";
		r.name = "s";
		r.payload = (const uint8_t *)json;
		r.payload_len = strlen(json);
		ds_record_hash(r.payload, r.payload_len, r.content_hash);
		assert_int_equal(ds_wire_record_encode(enc, &r, &bufs[i], &blobs[i].len, &err), 0);
		blobs[i].data = bufs[i];
	}
	assert_int_equal(ds_wire_batch_encode(blobs, 12, &frame, &len), 0);
	zmq_send(sock, frame, len, 0);
	free(frame);
	assert_true(wait_event(mon, ZMQ_EVENT_DISCONNECTED, 10000));
	assert_true(events_has(&rx.ev, "peer_dropped", "beyond the credit"));
	for (int i = 0; i < 12; i++)
		free(bufs[i]);
	ds_wire_encoder_free(enc);
	zmq_close(sock);
	zmq_close(mon);
	zmq_ctx_term(ctx);
	rx_stop(&rx);
	assert_int_equal(query_ll(inbox, "SELECT count(*) FROM records"), 0);
	free(dir);
}

/* Receive what a sender sends for `ms` milliseconds; returns the records, sets *max_seq. */
static size_t drain_batches(void *router, int ms, uint64_t *max_seq)
{
	ds_wire_decoder *dec;
	size_t n = 0;

	assert_int_equal(ds_wire_decoder_new(&dec, NULL), 0);
	for (int waited = 0; waited < ms; waited += 20) {
		zmq_msg_t rid, body;
		ds_wire_msg *msg;
		ds_err err = {0};
		zmq_msg_init(&rid);
		zmq_msg_init(&body);
		if (zmq_msg_recv(&rid, router, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&rid);
			zmq_msg_close(&body);
			msleep(20);
			continue;
		}
		assert_true(zmq_msg_recv(&body, router, 0) >= 0);
		assert_int_equal(
		    ds_wire_decode(dec, zmq_msg_data(&body), zmq_msg_size(&body), &msg, &err), 0);
		assert_int_equal(ds_wire_msg_kind(msg), DS_WIRE_BATCH);
		for (size_t i = 0; i < ds_wire_msg_record_count(msg); i++) {
			uint64_t seq = ds_wire_msg_record(msg, i)->seq;
			*max_seq = seq > *max_seq ? seq : *max_seq;
			n++;
		}
		ds_wire_msg_free(msg);
		zmq_msg_close(&rid);
		zmq_msg_close(&body);
	}
	ds_wire_decoder_free(dec);
	return n;
}

static void send_to_peer(void *router, const void *rid, size_t rid_len, uint8_t *buf, size_t len)
{
	assert_true(zmq_send(router, rid, rid_len, ZMQ_SNDMORE) >= 0);
	assert_true(zmq_send(router, buf, len, 0) >= 0);
	free(buf);
}

/* The sender's side of flow control, seen from a hand-driven target. */
static void test_transport__sender_never_exceeds_credit(void **state)
{
	char *dir = tu_mkdtemp("transport-flow");
	const char *names[] = {"prod-east"};
	ds_keypair server, client;
	char outbox[1024], ep[256];
	size_t epl = sizeof(ep), len;
	void *ctx, *router;
	int one = 1, linger = 0, timeout = 10000;
	uint8_t rid[256], *buf, hello_buf[4096];
	int rid_len, hello_len;
	uint64_t max_seq = 0, epoch;
	ds_wire_decoder *dec;
	ds_wire_msg *msg;
	struct tx tx;
	ds_err err = {0};

	(void)state;
	make_keys(dir, names, 1, &server, &client);
	snprintf(outbox, sizeof(outbox), "%s/prod-east-outbox.db", dir);
	fill_outbox(outbox, 100);
	ctx = zmq_ctx_new();
	router = zmq_socket(ctx, ZMQ_ROUTER);
	zmq_setsockopt(router, ZMQ_CURVE_SERVER, &one, sizeof(one));
	zmq_setsockopt(router, ZMQ_CURVE_SECRETKEY, server.secret_z85, 40);
	zmq_setsockopt(router, ZMQ_LINGER, &linger, sizeof(linger));
	zmq_setsockopt(router, ZMQ_RCVTIMEO, &timeout, sizeof(timeout));
	assert_int_equal(zmq_bind(router, "tcp://127.0.0.1:*"), 0);
	zmq_getsockopt(router, ZMQ_LAST_ENDPOINT, ep, &epl);

	tx_new(&tx, dir, "prod-east", ep, &server, &client, 0);
	tx.until = 100;
	tx.timeout_ms = 20000;
	assert_int_equal(pthread_create(&tx.thread, NULL, tx_main, &tx), 0);

	rid_len = zmq_recv(router, rid, sizeof(rid), 0);
	assert_true(rid_len > 0);
	hello_len = zmq_recv(router, hello_buf, sizeof(hello_buf), 0);
	assert_true(hello_len > 0);
	assert_int_equal(ds_wire_decoder_new(&dec, NULL), 0);
	assert_int_equal(ds_wire_decode(dec, hello_buf, (size_t)hello_len, &msg, &err), 0);
	assert_int_equal(ds_wire_msg_kind(msg), DS_WIRE_HELLO);
	epoch = ds_wire_msg_hello(msg)->epoch;
	ds_wire_msg_free(msg);
	ds_wire_decoder_free(dec);
	{
		ds_wire_welcome w = {DS_PROTOCOL_VERSION, "test", epoch, 0, 10, "prod-east", false};
		assert_int_equal(ds_wire_welcome_encode(&w, &buf, &len), 0);
		send_to_peer(router, rid, (size_t)rid_len, buf, len);
	}
	/* Credit 10 and no ack: exactly records 1..10, then silence. */
	assert_int_equal(drain_batches(router, 1500, &max_seq), 10);
	assert_int_equal(max_seq, 10);
	{
		ds_wire_ack a = {epoch, 4, 10, NULL, 0, NULL, 0, 0};
		assert_int_equal(ds_wire_ack_encode(&a, &buf, &len), 0);
		send_to_peer(router, rid, (size_t)rid_len, buf, len);
	}
	/* Acked up to 4, credit 10: up to seq 14, i.e. 4 more. */
	assert_int_equal(drain_batches(router, 1500, &max_seq), 4);
	assert_int_equal(max_seq, 14);
	assert_int_equal(ds_sender_acked(tx.s), 4);
	ds_sender_stop(tx.s);
	pthread_join(tx.thread, NULL);
	assert_int_equal(tx.rc, 0);
	tx_free(&tx);
	zmq_close(router);
	zmq_ctx_term(ctx);
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
	    cmocka_unit_test(test_transport__garbage_and_oversized_frames_drop_only_that_peer),
	    cmocka_unit_test(test_transport__lost_ledger_gets_a_snapshot),
	    cmocka_unit_test(test_transport__snapshot_required_with_no_err),
	    cmocka_unit_test(test_transport__sender_beyond_credit_dropped),
	    cmocka_unit_test(test_transport__sender_never_exceeds_credit),
	};

	if (argc == 4 && strcmp(argv[1], "--receiver") == 0)
		return child_receiver_main(argv[2], argv[3]);
	if (argc == 5 && strcmp(argv[1], "--sender") == 0)
		return child_sender_main(argv[2], argv[3], argv[4]);
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
