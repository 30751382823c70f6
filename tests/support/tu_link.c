#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu_link.h"

#include "drasync/buf.h"
#include "drasync/outbox.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void tu_link_on_event(void *ud, const ds_transport_event *ev)
{
	struct tu_events *e = ud;
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

int tu_events_count(struct tu_events *e, const char *a, const char *b)
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

int tu_events_has(struct tu_events *e, const char *a, const char *b)
{
	return tu_events_count(e, a, b) > 0;
}

void tu_events_init(struct tu_events *e)
{
	memset(e, 0, sizeof(*e));
	pthread_mutex_init(&e->mu, NULL);
}

void tu_events_dispose(struct tu_events *e)
{
	free(e->text);
	pthread_mutex_destroy(&e->mu);
}

void tu_path_in(char *out, size_t len, const char *dir, const char *name)
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

void tu_link_fill_outbox(const char *path, unsigned n)
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
long long tu_query_ll(const char *db_path, const char *sql)
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
void tu_assert_exactly_once_in_order(const char *inbox, const char *source, long long n)
{
	char sql[512];

	snprintf(sql, sizeof(sql), "SELECT count(*) FROM records WHERE source = '%s'", source);
	assert_int_equal(tu_query_ll(inbox, sql), n);
	snprintf(sql, sizeof(sql), "SELECT count(DISTINCT seq) FROM records WHERE source = '%s'",
		 source);
	assert_int_equal(tu_query_ll(inbox, sql), n);
	snprintf(sql, sizeof(sql), "SELECT min(seq) FROM records WHERE source = '%s'", source);
	assert_int_equal(tu_query_ll(inbox, sql), 1);
	snprintf(sql, sizeof(sql), "SELECT max(seq) FROM records WHERE source = '%s'", source);
	assert_int_equal(tu_query_ll(inbox, sql), n);
	/* Commit order (id) is seq order: no record overtook another. */
	snprintf(sql, sizeof(sql),
		 "SELECT count(*) FROM records a JOIN records b ON a.source = b.source AND "
		 "a.id < b.id WHERE a.source = '%s' AND a.seq > b.seq AND b.id = (SELECT min(id) "
		 "FROM records c WHERE c.id > a.id AND c.source = a.source)",
		 source);
	assert_int_equal(tu_query_ll(inbox, sql), 0);
	snprintf(sql, sizeof(sql),
		 "SELECT count(*) FROM records WHERE source = '%s' AND status != 1", source);
	assert_int_equal(tu_query_ll(inbox, sql), 0);
	snprintf(sql, sizeof(sql), "SELECT committed_seq FROM sources WHERE name = '%s'", source);
	assert_int_equal(tu_query_ll(inbox, sql), n);
}

long long tu_committed_of(const char *inbox, const char *source)
{
	char sql[256];

	snprintf(sql, sizeof(sql), "SELECT committed_seq FROM sources WHERE name = '%s'", source);
	return tu_query_ll(inbox, sql);
}

/* Key files for a test directory: server.key/.pub, NAME.key/.pub, authorized. */
void tu_link_make_keys(const char *dir, const char *const *sources, size_t n, ds_keypair *server,
		       ds_keypair *clients)
{
	char path[1024];
	FILE *f;
	ds_err err = {0};

	assert_int_equal(ds_keys_generate(server, &err), 0);
	assert_int_equal(ds_keys_write(dir, "server", server, false, &err), 0);
	tu_path_in(path, sizeof(path), dir, "authorized_sources");
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

/* ---- in-process receiver ---- */

static void slow_handler(void *ud, const char *source, const ds_record *rec, ds_record_result *res)
{
	struct tu_rx *rx = ud;

	(void)source;
	(void)rec;
	(void)res;
	rx->handled++;
	if (rx->handler_sleep_us)
		usleep((useconds_t)rx->handler_sleep_us);
}

static void *rx_main(void *arg)
{
	struct tu_rx *rx = arg;
	ds_err err = {0};

	ds_receiver_run(rx->r, &err);
	return NULL;
}

void tu_rx_start(struct tu_rx *rx, const char *dir, const ds_keypair *server, size_t max_frame)
{
	ds_receiver_config cfg;
	char auth[1024], inbox[1024];
	ds_err err = {0};

	tu_events_init(&rx->ev);
	ds_receiver_config_default(&cfg);
	tu_path_in(auth, sizeof(auth), dir, "authorized_sources");
	tu_path_in(inbox, sizeof(inbox), dir, "inbox.db");
	cfg.endpoint = "tcp://127.0.0.1:*";
	cfg.keys = server;
	cfg.authorized_sources = auth;
	cfg.inbox_path = inbox;
	cfg.handler = slow_handler;
	cfg.handler_ud = rx;
	cfg.on_event = tu_link_on_event;
	cfg.event_ud = &rx->ev;
	if (max_frame)
		cfg.tuning.limits.max_frame = max_frame;
	if (rx->credit)
		cfg.credit = rx->credit;
	cfg.no_zbatch = rx->no_zbatch;
	cfg.stats = &rx->stats;
	if (ds_receiver_new(&rx->r, &cfg, &err) < 0)
		fail_msg("receiver: %s", err.msg);
	assert_int_equal(pthread_create(&rx->thread, NULL, rx_main, rx), 0);
}

void tu_rx_stop(struct tu_rx *rx)
{
	ds_receiver_stop(rx->r);
	pthread_join(rx->thread, NULL);
	ds_receiver_free(rx->r);
	tu_events_dispose(&rx->ev);
}

/* ---- in-process sender ---- */

static void on_result(void *ud, uint64_t seq, enum ds_result_status st, const char *msg)
{
	struct tu_tx *tx = ud;

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

void tu_tx_new(struct tu_tx *tx, const char *dir, const char *name, const char *endpoint,
	       const ds_keypair *server, const ds_keypair *client, size_t batch)
{
	tu_tx_new_capped(tx, dir, name, endpoint, server, client, batch, 0, 0);
}

void tu_tx_new_capped(struct tu_tx *tx, const char *dir, const char *name, const char *endpoint,
		      const ds_keypair *server, const ds_keypair *client, size_t batch,
		      uint64_t bandwidth, int ack_timeout_ms)
{
	ds_sender_config cfg;
	char outbox[1024];
	ds_err err = {0};

	memset(tx, 0, sizeof(*tx));
	tu_events_init(&tx->ev);
	ds_sender_config_default(&cfg);
	snprintf(outbox, sizeof(outbox), "%s/%s-outbox.db", dir, name);
	cfg.endpoint = endpoint;
	cfg.server_public_key = server->public_z85;
	cfg.keys = client;
	cfg.outbox_path = outbox;
	cfg.cluster_name = name;
	if (batch)
		cfg.batch_records = batch;
	cfg.bandwidth = bandwidth;
	if (ack_timeout_ms > 0)
		cfg.ack_timeout_ms = ack_timeout_ms;
	cfg.on_event = tu_link_on_event;
	cfg.event_ud = &tx->ev;
	cfg.on_results = on_results;
	cfg.ud = tx;
	if (ds_sender_new(&tx->s, &cfg, &err) < 0)
		fail_msg("sender: %s", err.msg);
}

void *tu_tx_main(void *arg)
{
	struct tu_tx *tx = arg;
	ds_err err = {0};

	tx->rc = ds_sender_run(tx->s, tx->until, tx->timeout_ms, &err);
	if (tx->rc < 0)
		fprintf(stderr, "sender: %s\n", err.msg);
	return NULL;
}

/* Run the sender until `until` is acknowledged or timeout_ms pass; its rc. */
int tu_tx_deliver(struct tu_tx *tx, uint64_t until, int timeout_ms)
{
	tx->until = until;
	tx->timeout_ms = timeout_ms;
	tu_tx_main(tx);
	return tx->rc;
}

void tu_tx_free(struct tu_tx *tx)
{
	ds_sender_free(tx->s);
	tu_events_dispose(&tx->ev);
}
