#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu_rawsource.h"

#include "drasync/wire.h"
#include "tu_kube.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#define MAX_SEQ 4096 /* results kept for seqs first_seq .. first_seq + MAX_SEQ - 1 */

struct tu_raw {
	void *ctx, *sock;
	ds_wire_encoder *enc;
	ds_wire_decoder *dec;
	char source_name[256];
	uint64_t epoch, next_seq, first_seq, committed;
	bool welcomed, dropped;
	char why[300];
	long received;
	tu_raw_result *results; /* by seq - first_seq */
};

static tu_raw_result *slot(tu_raw *c, uint64_t seq)
{
	if (seq < c->first_seq || seq - c->first_seq >= MAX_SEQ)
		return NULL;
	return &c->results[seq - c->first_seq];
}

static void keep_results(tu_raw *c, const ds_wire_result *r, size_t n, bool applied)
{
	for (size_t i = 0; i < n; i++) {
		tu_raw_result *s = slot(c, r[i].seq);

		if (!s)
			continue;
		if (applied) {
			s->apply = r[i].status;
			snprintf(s->apply_msg, sizeof(s->apply_msg), "%s",
				 r[i].message ? r[i].message : "");
		} else {
			s->commit = r[i].status;
			snprintf(s->commit_msg, sizeof(s->commit_msg), "%s",
				 r[i].message ? r[i].message : "");
		}
	}
}

/* One frame from the target, if one comes within timeout_ms: @return whether one came. */
static bool read_one(tu_raw *c, int timeout_ms)
{
	zmq_pollitem_t it = {c->sock, 0, ZMQ_POLLIN, 0};
	ds_wire_msg *msg = NULL;
	ds_err err = {0};
	zmq_msg_t m;

	if (zmq_poll(&it, 1, timeout_ms) <= 0 || !(it.revents & ZMQ_POLLIN))
		return false;
	zmq_msg_init(&m);
	if (zmq_msg_recv(&m, c->sock, 0) < 0) {
		zmq_msg_close(&m);
		return false;
	}
	if (ds_wire_decode(c->dec, zmq_msg_data(&m), zmq_msg_size(&m), &msg, &err) < 0)
		fail_msg("the target sent a frame that does not decode: %s", err.msg);
	zmq_msg_close(&m);
	c->received++;
	switch (ds_wire_msg_kind(msg)) {
	case DS_WIRE_WELCOME: {
		const ds_wire_welcome *w = ds_wire_msg_welcome(msg);

		c->welcomed = true;
		c->committed = w->committed_seq;
		snprintf(c->source_name, sizeof(c->source_name), "%s",
			 w->source_name ? w->source_name : "");
		break;
	}
	case DS_WIRE_ACK: {
		const ds_wire_ack *a = ds_wire_msg_ack(msg);

		if (a->epoch == c->epoch && a->committed_seq > c->committed)
			c->committed = a->committed_seq;
		keep_results(c, a->results, a->n_results, false);
		keep_results(c, a->applied, a->n_applied, true);
		break;
	}
	case DS_WIRE_GOODBYE:
		c->dropped = true;
		snprintf(c->why, sizeof(c->why), "%s", ds_wire_msg_goodbye(msg));
		break;
	default:
		break;
	}
	ds_wire_msg_free(msg);
	return true;
}

tu_raw *tu_raw_connect(const char *endpoint, const ds_keypair *server, const ds_keypair *me,
		       const char *cluster_name, const char *rid, int timeout_ms, bool must)
{
	tu_raw *c = calloc(1, sizeof(*c));
	ds_wire_hello h = {.protocol_version = DS_PROTOCOL_VERSION,
			   .cluster_name = cluster_name,
			   .agent_version = "hostile-test"};
	long long end;
	uint8_t *buf = NULL;
	size_t len;
	int linger = 0;

	assert_non_null(c);
	c->results = calloc(MAX_SEQ, sizeof(*c->results));
	assert_non_null(c->results);
	assert_int_equal(ds_wire_encoder_new(&c->enc, 3, 1u << 30), 0);
	assert_int_equal(ds_wire_decoder_new(&c->dec, NULL), 0);
	/* A fresh epoch: this client's own outbox, as far as the target knows. */
	c->epoch = (uint64_t)tu_now_ms() * 1000u + tu_rand() % 1000u;
	c->ctx = zmq_ctx_new();
	c->sock = zmq_socket(c->ctx, ZMQ_DEALER);
	assert_non_null(c->sock);
	zmq_setsockopt(c->sock, ZMQ_LINGER, &linger, sizeof(linger));
	zmq_setsockopt(c->sock, ZMQ_CURVE_SERVERKEY, server->public_z85, DS_KEY_Z85_LEN);
	zmq_setsockopt(c->sock, ZMQ_CURVE_PUBLICKEY, me->public_z85, DS_KEY_Z85_LEN);
	zmq_setsockopt(c->sock, ZMQ_CURVE_SECRETKEY, me->secret_z85, DS_KEY_Z85_LEN);
	if (rid)
		assert_int_equal(zmq_setsockopt(c->sock, ZMQ_ROUTING_ID, rid, strlen(rid)), 0);
	assert_int_equal(zmq_connect(c->sock, endpoint), 0);
	h.epoch = c->epoch;
	assert_int_equal(ds_wire_hello_encode(&h, &buf, &len), 0);
	assert_true(zmq_send(c->sock, buf, len, 0) == (int)len);
	free(buf);
	for (end = tu_now_ms() + timeout_ms; !c->welcomed && !c->dropped && tu_now_ms() < end;)
		read_one(c, 100);
	if (!c->welcomed) {
		if (must)
			fail_msg("no Welcome from %s in %d ms%s%s", endpoint, timeout_ms,
				 c->dropped ? ": Goodbye: " : "", c->dropped ? c->why : "");
		print_message("no Welcome from %s in %d ms%s%s\n", endpoint, timeout_ms,
			      c->dropped ? ": Goodbye: " : "", c->dropped ? c->why : "");
		tu_raw_free(c);
		return NULL;
	}
	c->next_seq = c->committed + 1;
	c->first_seq = c->next_seq;
	return c;
}

const char *tu_raw_source_name(const tu_raw *c)
{
	return c->source_name;
}

uint64_t tu_raw_epoch(const tu_raw *c)
{
	return c->epoch;
}

uint64_t tu_raw_next_seq(const tu_raw *c)
{
	return c->next_seq;
}

/* Encode recs as a Batch of epoch, seqs from first on; the frame into *out. */
static void encode_batch(tu_raw *c, ds_record *recs, size_t n, uint64_t epoch, uint64_t first,
			 uint8_t **out, size_t *len)
{
	ds_wire_blob *blobs = calloc(n, sizeof(*blobs));
	ds_err err = {0};

	assert_non_null(blobs);
	for (size_t i = 0; i < n; i++) {
		uint8_t *b = NULL;
		size_t bl = 0;

		recs[i].epoch = epoch;
		recs[i].seq = first + i;
		memset(recs[i].content_hash, 0, DS_HASH_LEN);
		if (recs[i].payload_len)
			ds_record_hash(recs[i].payload, recs[i].payload_len, recs[i].content_hash);
		if (ds_wire_record_encode(c->enc, &recs[i], &b, &bl, &err) < 0)
			fail_msg("record %zu does not encode: %s", i, err.msg);
		blobs[i] = (ds_wire_blob){b, bl};
	}
	assert_int_equal(ds_wire_batch_encode(blobs, n, out, len), 0);
	for (size_t i = 0; i < n; i++)
		free((void *)(uintptr_t)blobs[i].data);
	free(blobs);
}

void tu_raw_send_nowait(tu_raw *c, ds_record *recs, size_t n, uint64_t epoch, uint64_t first_seq)
{
	uint8_t *frame = NULL;
	size_t len = 0;

	encode_batch(c, recs, n, epoch, first_seq, &frame, &len);
	zmq_send(c->sock, frame, len, ZMQ_DONTWAIT);
	free(frame);
}

uint64_t tu_raw_send(tu_raw *c, ds_record *recs, size_t n, uint64_t *seqs, int timeout_ms)
{
	uint64_t first = c->next_seq, last = first + n - 1;
	uint8_t *frame = NULL;
	size_t len = 0;
	long long end;

	assert_true(n > 0 && last - c->first_seq < MAX_SEQ);
	encode_batch(c, recs, n, c->epoch, first, &frame, &len);
	assert_true(zmq_send(c->sock, frame, len, 0) == (int)len);
	free(frame);
	c->next_seq = last + 1;
	for (size_t i = 0; seqs && i < n; i++)
		seqs[i] = first + i;
	for (end = tu_now_ms() + timeout_ms; c->committed < last && !c->dropped;) {
		if (tu_now_ms() > end)
			fail_msg("the target acknowledged %llu of %llu..%llu in %d ms",
				 (unsigned long long)c->committed, (unsigned long long)first,
				 (unsigned long long)last, timeout_ms);
		read_one(c, 100);
	}
	if (c->dropped)
		fail_msg("the target dropped the session of %s for seq %llu..%llu: %s",
			 c->source_name, (unsigned long long)first, (unsigned long long)last,
			 c->why);
	return last;
}

void tu_raw_pump(tu_raw *c, int timeout_ms)
{
	for (long long end = tu_now_ms() + timeout_ms; tu_now_ms() < end;)
		read_one(c, 50);
}

const tu_raw_result *tu_raw_wait_applied(tu_raw *c, uint64_t seq, int timeout_ms)
{
	tu_raw_result *s = slot(c, seq);

	if (!s) {
		fail_msg("seq %llu of %s was never sent", (unsigned long long)seq, c->source_name);
		return NULL;
	}
	for (long long end = tu_now_ms() + timeout_ms; !s->apply;) {
		if (c->dropped)
			fail_msg("the target dropped the session of %s waiting for the apply "
				 "result of seq %llu: %s",
				 c->source_name, (unsigned long long)seq, c->why);
		if (tu_now_ms() > end)
			fail_msg("no apply result for seq %llu of %s in %d ms (commit result "
				 "%d %s)",
				 (unsigned long long)seq, c->source_name, timeout_ms, s->commit,
				 s->commit_msg);
		read_one(c, 100);
	}
	return s;
}

const tu_raw_result *tu_raw_result_of(const tu_raw *c, uint64_t seq)
{
	if (seq < c->first_seq || seq >= c->next_seq)
		return NULL;
	return &c->results[seq - c->first_seq];
}

bool tu_raw_dropped(const tu_raw *c, const char **why)
{
	if (why)
		*why = c->why;
	return c->dropped;
}

long tu_raw_received(const tu_raw *c)
{
	return c->received;
}

void tu_raw_free(tu_raw *c)
{
	if (!c)
		return;
	zmq_close(c->sock);
	zmq_ctx_term(c->ctx);
	ds_wire_encoder_free(c->enc);
	ds_wire_decoder_free(c->dec);
	free(c->results);
	free(c);
}
