/*
 * The replication link's flow control end to end, with real CURVE sockets
 * on loopback and real SQLite files: garbage and oversized frames drop only
 * the peer that sent them; a lost ledger gets a snapshot; the receiver's
 * credit bounds what a sender may have in flight.
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
		tu_msleep(20);
	}
	return 0;
}

static void test_transport__garbage_and_oversized_frames_drop_only_that_peer(void **state)
{
	char *dir = tu_mkdtemp("transport-evil");
	const char *names[] = {"prod-east", "evil-a", "evil-b"};
	ds_keypair server, keys[3];
	char outbox[1024], inbox[1024];
	struct tu_rx rx = {0};
	struct tu_tx tx;
	void *ctx, *a, *b, *mon_a, *mon_b;
	size_t big = 2u << 20;
	char *bigbuf;

	(void)state;
	tu_link_make_keys(dir, names, 3, &server, keys);
	snprintf(outbox, sizeof(outbox), "%s/prod-east-outbox.db", dir);
	tu_path_in(inbox, sizeof(inbox), dir, "inbox.db");
	tu_link_fill_outbox(outbox, 3000);
	rx.handler_sleep_us = 300;
	tu_rx_start(&rx, dir, &server, 1u << 20);
	tu_tx_new(&tx, dir, "prod-east", ds_receiver_endpoint(rx.r), &server, &keys[0], 100);
	tx.until = 3000;
	tx.timeout_ms = 60000;
	assert_int_equal(pthread_create(&tx.thread, NULL, tu_tx_main, &tx), 0);

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
	assert_true(tu_events_has(&rx.ev, "peer_dropped", "not a valid protobuf"));
	assert_true(tu_events_has(&rx.ev, "disconnected", "MAXMSGSIZE"));
	tu_tx_free(&tx);
	tu_rx_stop(&rx);
	tu_assert_exactly_once_in_order(inbox, "prod-east", 3000);
	assert_int_equal(tu_query_ll(inbox, "SELECT count(*) FROM records WHERE source != "
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
	struct tu_rx rx = {0};
	ds_sender_config cfg;
	struct snap sn;
	struct tu_events ev;
	ds_sender *s;
	ds_err err = {0};

	(void)state;
	tu_link_make_keys(dir, names, 1, &server, &client);
	memset(&sn, 0, sizeof(sn));
	snprintf(sn.outbox, sizeof(sn.outbox), "%s/prod-east-outbox.db", dir);
	tu_path_in(inbox, sizeof(inbox), dir, "inbox.db");
	tu_link_fill_outbox(sn.outbox, 1100);
	tu_rx_start(&rx, dir, &server, 0);
	tu_events_init(&ev);
	ds_sender_config_default(&cfg);
	cfg.endpoint = ds_receiver_endpoint(rx.r);
	cfg.server_public_key = server.public_z85;
	cfg.keys = &client;
	cfg.outbox_path = sn.outbox;
	cfg.cluster_name = "prod-east";
	cfg.on_event = tu_link_on_event;
	cfg.event_ud = &ev;
	cfg.on_snapshot_required = on_snapshot_required;
	cfg.ud = &sn;
	assert_int_equal(ds_sender_new(&s, &cfg, &err), 0);
	sn.sender = s;
	assert_int_equal(ds_sender_run(s, 1100, 60000, &err), 0);
	ds_sender_free(s);
	tu_rx_stop(&rx);
	assert_int_equal(sn.calls, 0);

	/* The target loses its ledger; the acked records are pruned from the outbox. */
	unlink(inbox);
	snprintf(f, sizeof(f), "%s-wal", inbox);
	unlink(f);
	snprintf(f, sizeof(f), "%s-shm", inbox);
	unlink(f);
	tu_rx_start(&rx, dir, &server, 0);
	cfg.endpoint = ds_receiver_endpoint(rx.r);
	assert_int_equal(ds_sender_new(&s, &cfg, &err), 0);
	sn.sender = s;
	assert_int_equal(ds_sender_run(s, 1105, 60000, &err), 0);
	assert_int_equal(sn.calls, 1);
	assert_int_equal(sn.committed, 0);
	assert_true(tu_events_has(&ev, "snapshot_required", "snapshot is required"));
	ds_sender_free(s);
	tu_rx_stop(&rx);
	tu_events_dispose(&ev);
	/* The snapshot went through the gap: begin at 1101, end at 1105, manifest kept. */
	assert_int_equal(tu_query_ll(inbox, "SELECT count(*) FROM records"), 5);
	assert_int_equal(tu_query_ll(inbox, "SELECT seq FROM records WHERE op = 3"), 1101);
	assert_int_equal(tu_query_ll(inbox, "SELECT seq FROM records WHERE op = 4"), 1105);
	assert_int_equal(tu_query_ll(inbox, "SELECT committed_seq FROM sources"), 1105);
	assert_int_equal(tu_query_ll(inbox, "SELECT count(*) FROM manifests WHERE seq = 1105 AND "
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
	struct tu_rx rx = {0};
	ds_sender_config cfg;
	struct snap sn;
	struct tu_events ev;
	ds_sender *s;

	(void)state;
	tu_link_make_keys(dir, names, 1, &server, &client);
	memset(&sn, 0, sizeof(sn));
	snprintf(sn.outbox, sizeof(sn.outbox), "%s/prod-east-outbox.db", dir);
	tu_path_in(inbox, sizeof(inbox), dir, "inbox.db");
	tu_link_fill_outbox(sn.outbox, 1100);
	tu_rx_start(&rx, dir, &server, 0);
	tu_events_init(&ev);
	ds_sender_config_default(&cfg);
	cfg.endpoint = ds_receiver_endpoint(rx.r);
	cfg.server_public_key = server.public_z85;
	cfg.keys = &client;
	cfg.outbox_path = sn.outbox;
	cfg.cluster_name = "prod-east";
	cfg.on_event = tu_link_on_event;
	cfg.event_ud = &ev;
	cfg.on_snapshot_required = on_snapshot_breaks_outbox;
	cfg.ud = &sn;
	assert_int_equal(ds_sender_new(&s, &cfg, NULL), 0);
	assert_int_equal(ds_sender_run(s, 1100, 60000, NULL), 0);
	ds_sender_free(s);
	tu_rx_stop(&rx);

	/* The target loses its ledger: a snapshot is required, and the outbox then fails. */
	unlink(inbox);
	snprintf(f, sizeof(f), "%s-wal", inbox);
	unlink(f);
	snprintf(f, sizeof(f), "%s-shm", inbox);
	unlink(f);
	tu_rx_start(&rx, dir, &server, 0);
	cfg.endpoint = ds_receiver_endpoint(rx.r);
	assert_int_equal(ds_sender_new(&s, &cfg, NULL), 0);
	assert_int_equal(ds_sender_run(s, 1105, 1500, NULL), -ETIMEDOUT);
	assert_int_equal(sn.calls, 1);
	assert_true(tu_events_has(&ev, "snapshot_required", "snapshot is required"));
	assert_true(tu_events_has(&ev, "resume_failed", "no such table"));
	ds_sender_free(s);
	tu_rx_stop(&rx);
	tu_events_dispose(&ev);
	free(dir);
}

static void test_transport__sender_beyond_credit_dropped(void **state)
{
	char *dir = tu_mkdtemp("transport-credit");
	const char *names[] = {"greedy"};
	ds_keypair server, client;
	char inbox[1024];
	struct tu_rx rx = {0};
	void *ctx, *sock, *mon;
	ds_wire_encoder *enc;
	ds_wire_blob blobs[12];
	uint8_t *bufs[12], *frame, reply[4096];
	size_t len;
	ds_wire_hello h = {DS_PROTOCOL_VERSION, "greedy", "test", 5, false};
	ds_err err = {0};
	const char *json = "{\"kind\":\"Secret\"}";

	(void)state;
	tu_link_make_keys(dir, names, 1, &server, &client);
	tu_path_in(inbox, sizeof(inbox), dir, "inbox.db");
	rx.credit = 10;
	tu_rx_start(&rx, dir, &server, 0);
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
	assert_true(tu_events_has(&rx.ev, "peer_dropped", "beyond the credit"));
	for (int i = 0; i < 12; i++)
		free(bufs[i]);
	ds_wire_encoder_free(enc);
	zmq_close(sock);
	zmq_close(mon);
	zmq_ctx_term(ctx);
	tu_rx_stop(&rx);
	assert_int_equal(tu_query_ll(inbox, "SELECT count(*) FROM records"), 0);
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
			tu_msleep(20);
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
	struct tu_tx tx;
	ds_err err = {0};

	(void)state;
	tu_link_make_keys(dir, names, 1, &server, &client);
	snprintf(outbox, sizeof(outbox), "%s/prod-east-outbox.db", dir);
	tu_link_fill_outbox(outbox, 100);
	ctx = zmq_ctx_new();
	router = zmq_socket(ctx, ZMQ_ROUTER);
	zmq_setsockopt(router, ZMQ_CURVE_SERVER, &one, sizeof(one));
	zmq_setsockopt(router, ZMQ_CURVE_SECRETKEY, server.secret_z85, 40);
	zmq_setsockopt(router, ZMQ_LINGER, &linger, sizeof(linger));
	zmq_setsockopt(router, ZMQ_RCVTIMEO, &timeout, sizeof(timeout));
	assert_int_equal(zmq_bind(router, "tcp://127.0.0.1:*"), 0);
	zmq_getsockopt(router, ZMQ_LAST_ENDPOINT, ep, &epl);

	tu_tx_new(&tx, dir, "prod-east", ep, &server, &client, 0);
	tx.until = 100;
	tx.timeout_ms = 20000;
	assert_int_equal(pthread_create(&tx.thread, NULL, tu_tx_main, &tx), 0);

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
		ds_wire_welcome w = {DS_PROTOCOL_VERSION, "test", epoch, 0,    10,
				     "prod-east",	  false,  false, false};
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
	tu_tx_free(&tx);
	zmq_close(router);
	zmq_ctx_term(ctx);
	free(dir);
}

/* The next frame from the router within ms: its kind, the records it carries
 * (*records), the peer's routing id (rid); -1 when none came. */
static int next_frame(void *router, int ms, uint8_t *rid, int *rid_len, size_t *records,
		      uint64_t *epoch)
{
	ds_wire_decoder *dec;
	int kind = -1;

	assert_int_equal(ds_wire_decoder_new(&dec, NULL), 0);
	for (int waited = 0; waited < ms && kind < 0; waited += 20) {
		zmq_msg_t body;
		ds_wire_msg *msg;
		ds_err err = {0};
		int n = zmq_recv(router, rid, 256, ZMQ_DONTWAIT);

		if (n < 0) {
			tu_msleep(20);
			continue;
		}
		*rid_len = n;
		zmq_msg_init(&body);
		assert_true(zmq_msg_recv(&body, router, 0) >= 0);
		assert_int_equal(
		    ds_wire_decode(dec, zmq_msg_data(&body), zmq_msg_size(&body), &msg, &err), 0);
		kind = (int)ds_wire_msg_kind(msg);
		if (kind == DS_WIRE_BATCH)
			*records = ds_wire_msg_record_count(msg);
		if (kind == DS_WIRE_HELLO)
			*epoch = ds_wire_msg_hello(msg)->epoch;
		ds_wire_msg_free(msg);
		zmq_msg_close(&body);
	}
	ds_wire_decoder_free(dec);
	return kind;
}

/*
 * A snapshot whose manifest is in parts goes only to a target that takes
 * them: to a Welcome without "manifest-parts" the sender sends nothing, says
 * why (target_too_old) and retries; once the target's Welcome lists it, the
 * records go.
 */
static void test_transport__manifest_parts_only_to_a_target_that_takes_them(void **state)
{
	char *dir = tu_mkdtemp("transport-parts");
	const char *names[] = {"prod-east"};
	ds_manifest_entry man[2] = {{.key = "/ConfigMap/ml-team/cm-0"},
				    {.key = "/ConfigMap/ml-team/cm-1"}};
	ds_record recs[2];
	ds_keypair server, client;
	char outbox[1024], ep[256];
	size_t epl = sizeof(ep), len, records = 0, sent = 0;
	void *ctx, *router;
	int one = 1, linger = 0, rid_len = 0, kind;
	uint8_t rid[256], *buf;
	uint64_t epoch = 0;
	ds_outbox *ob;
	struct tu_tx tx;
	ds_err err = {0};

	(void)state;
	tu_link_make_keys(dir, names, 1, &server, &client);
	snprintf(outbox, sizeof(outbox), "%s/prod-east-outbox.db", dir);
	tu_link_fill_outbox(outbox, 2);
	memset(recs, 0, sizeof(recs));
	recs[0].op = DS_RECORD_SNAPSHOT_PART;
	recs[0].parts_left = 1;
	recs[1].op = DS_RECORD_SNAPSHOT_END;
	for (int i = 0; i < 2; i++) {
		recs[i].snapshot_id = "snap-parts";
		recs[i].manifest = &man[i];
		recs[i].manifest_len = 1;
	}
	assert_int_equal(ds_outbox_open(&ob, outbox, NULL, &err), 0);
	assert_int_equal(ds_outbox_push(ob, recs, 2, NULL, &err), 0);
	ds_outbox_free(ob);

	ctx = zmq_ctx_new();
	router = zmq_socket(ctx, ZMQ_ROUTER);
	zmq_setsockopt(router, ZMQ_CURVE_SERVER, &one, sizeof(one));
	zmq_setsockopt(router, ZMQ_CURVE_SECRETKEY, server.secret_z85, 40);
	zmq_setsockopt(router, ZMQ_LINGER, &linger, sizeof(linger));
	assert_int_equal(zmq_bind(router, "tcp://127.0.0.1:*"), 0);
	zmq_getsockopt(router, ZMQ_LAST_ENDPOINT, ep, &epl);
	tu_tx_new(&tx, dir, "prod-east", ep, &server, &client, 0);
	tx.until = 4;
	tx.timeout_ms = 30000;
	assert_int_equal(pthread_create(&tx.thread, NULL, tu_tx_main, &tx), 0);

	/* An older target: no "manifest-parts" in its Welcome. */
	assert_int_equal(next_frame(router, 10000, rid, &rid_len, &records, &epoch), DS_WIRE_HELLO);
	{
		ds_wire_welcome w = {DS_PROTOCOL_VERSION, "old", epoch, 0,    100,
				     "prod-east",	  true,	 true,	false};
		assert_int_equal(ds_wire_welcome_encode(&w, &buf, &len), 0);
		send_to_peer(router, rid, (size_t)rid_len, buf, len);
	}
	/* Nothing but a new Hello (the retry) comes. */
	do {
		records = 0;
		kind = next_frame(router, 10000, rid, &rid_len, &records, &epoch);
		sent += records;
	} while (kind == DS_WIRE_BATCH);
	assert_int_equal(kind, DS_WIRE_HELLO);
	assert_int_equal(sent, 0);
	if (!tu_events_has(&tx.ev, "target_too_old", "manifest-parts"))
		fail_msg("no target_too_old event naming the capability");

	/* This version's target. */
	{
		ds_wire_welcome w = {DS_PROTOCOL_VERSION, "new", epoch, 0,   100,
				     "prod-east",	  true,	 true,	true};
		assert_int_equal(ds_wire_welcome_encode(&w, &buf, &len), 0);
		send_to_peer(router, rid, (size_t)rid_len, buf, len);
	}
	while (sent < 4) {
		records = 0;
		assert_int_equal(next_frame(router, 10000, rid, &rid_len, &records, &epoch),
				 DS_WIRE_BATCH);
		sent += records;
	}
	assert_int_equal(sent, 4);
	ds_sender_stop(tx.s);
	pthread_join(tx.thread, NULL);
	tu_tx_free(&tx);
	zmq_close(router);
	zmq_ctx_term(ctx);
	free(dir);
}

/*
 * A capped sender over real sockets: frames held back longer than the Ack
 * timeout do not reset the session (nothing is in flight while one waits),
 * every record is committed once, the link takes at least as long as the
 * cap says, and the hold is counted.
 */
#define CAP_RECORDS 5
#define CAP_RATE (32u * 1024)

static void test_transport__capped_sender_holds_without_timing_out(void **state)
{
	char *dir = tu_mkdtemp("transport-cap");
	const char *names[] = {"prod-east"};
	static char json[CAP_RECORDS][100032];
	ds_record recs[CAP_RECORDS];
	char outbox[1024], inbox[1024], rname[CAP_RECORDS][32];
	ds_sender_bandwidth_stats st;
	ds_keypair server, client;
	struct tu_rx rx = {0};
	struct tu_tx tx;
	ds_outbox *ob;
	ds_err err = {0};
	double t0, secs, floor_s;

	(void)state;
	tu_link_make_keys(dir, names, 1, &server, &client);
	snprintf(outbox, sizeof(outbox), "%s/prod-east-outbox.db", dir);
	snprintf(inbox, sizeof(inbox), "%s/inbox.db", dir);
	/* Records of ~100 KB of random hex: some 50 KB a frame after zstd, one a batch. */
	memset(recs, 0, sizeof(recs));
	srand(7);
	for (int i = 0; i < CAP_RECORDS; i++) {
		int n = snprintf(json[i], sizeof(json[i]), "{\"data\":\"");

		for (int k = 0; k < 100000; k++)
			json[i][n + k] = "0123456789abcdef"[rand() % 16];
		snprintf(json[i] + n + 100000, sizeof(json[i]) - (size_t)n - 100000, "\"}");
		snprintf(rname[i], sizeof(rname[i]), "blob-%d", i);
		recs[i].op = DS_RECORD_UPSERT;
		recs[i].api_version = "v1";
		recs[i].kind = "ConfigMap";
		recs[i].ns = "ml-team";
		recs[i].name = rname[i];
		recs[i].payload = (const uint8_t *)json[i];
		recs[i].payload_len = strlen(json[i]);
	}
	assert_int_equal(ds_outbox_open(&ob, outbox, NULL, &err), 0);
	assert_int_equal(ds_outbox_push(ob, recs, CAP_RECORDS, NULL, &err), 0);
	ds_outbox_free(ob);

	tu_rx_start(&rx, dir, &server, 0);
	/* Each frame is about 1.5 s of the cap; the Ack timeout is 1 s. */
	tu_tx_new_capped(&tx, dir, "prod-east", ds_receiver_endpoint(rx.r), &server, &client, 0,
			 CAP_RATE, 1000);
	t0 = ds_clock_mono_s();
	assert_int_equal(tu_tx_deliver(&tx, CAP_RECORDS, 30000), 0);
	secs = ds_clock_mono_s() - t0;
	ds_sender_bandwidth_stats_get(tx.s, &st);

	tu_assert_exactly_once_in_order(inbox, "prod-east", CAP_RECORDS);
	assert_int_equal(tu_events_count(&tx.ev, "session_open", NULL), 1);
	assert_int_equal(tu_events_count(&tx.ev, "ack_timeout", NULL), 0);
	assert_int_equal(tu_events_count(&tx.ev, "bandwidth_capped", NULL), 1);
	assert_int_equal(st.rate, CAP_RATE);
	assert_true(st.bytes > CAP_RECORDS * 40000u);
	/* The bucket lets a batch's worth (64 KiB) and one frame go ahead of the rate. */
	floor_s = ((double)st.bytes - 2.0 * 65536) / CAP_RATE;
	print_message("capped: %llu bytes in %.2f s (floor %.2f s), held %.2f s\n",
		      (unsigned long long)st.bytes, secs, floor_s, st.wait_seconds);
	assert_true(secs >= floor_s);
	assert_true(st.wait_seconds >= floor_s * 0.8);
	tu_tx_free(&tx);
	tu_rx_stop(&rx);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_transport__garbage_and_oversized_frames_drop_only_that_peer),
	    cmocka_unit_test(test_transport__lost_ledger_gets_a_snapshot),
	    cmocka_unit_test(test_transport__snapshot_required_with_no_err),
	    cmocka_unit_test(test_transport__sender_beyond_credit_dropped),
	    cmocka_unit_test(test_transport__manifest_parts_only_to_a_target_that_takes_them),
	    cmocka_unit_test(test_transport__sender_never_exceeds_credit),
	    cmocka_unit_test(test_transport__capped_sender_holds_without_timing_out),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
