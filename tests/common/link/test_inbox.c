#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/inbox.h"
#include "testutil.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct seen {
	uint64_t seqs[64];
	size_t n;
};

static void handler(void *ud, const char *source, const ds_record *rec, ds_record_result *res)
{
	struct seen *s = ud;

	assert_string_equal(source, "prod-east");
	s->seqs[s->n++] = rec->seq;
	if (rec->name && strcmp(rec->name, "broken") == 0) {
		res->status = DS_RESULT_FAILED;
		snprintf(res->message, sizeof(res->message), "admission webhook denied %s",
			 rec->name);
	}
}

/* A decoded batch of records first..last of `epoch`; op of `first` may be a snapshot-begin. */
static ds_wire_msg *batch(uint64_t epoch, uint64_t first, uint64_t last, enum ds_record_op op0,
			  const char *name)
{
	ds_wire_encoder *enc;
	ds_wire_decoder *dec;
	ds_wire_blob blobs[32];
	uint8_t *bufs[32], *frame;
	size_t n = (size_t)(last - first + 1), len;
	ds_wire_msg *msg;
	ds_err err = {0};
	const char *json = "{\"kind\":\"ConfigMap\"}";

	assert_int_equal(ds_wire_encoder_new(&enc, 1, 512), 0);
	assert_int_equal(ds_wire_decoder_new(&dec, NULL), 0);
	for (size_t i = 0; i < n; i++) {
		ds_record r;
		memset(&r, 0, sizeof(r));
		r.epoch = epoch;
		r.seq = first + i;
		r.op = i == 0 ? op0 : DS_RECORD_UPSERT;
		r.api_version = "v1";
		r.kind = "ConfigMap";
		r.ns = "ml-team";
		r.name = name;
		r.snapshot_id = "snap";
		r.payload = (const uint8_t *)json;
		r.payload_len = strlen(json);
		ds_record_hash(r.payload, r.payload_len, r.content_hash);
		assert_int_equal(ds_wire_record_encode(enc, &r, &bufs[i], &blobs[i].len, &err), 0);
		blobs[i].data = bufs[i];
	}
	assert_int_equal(ds_wire_batch_encode(blobs, n, &frame, &len), 0);
	assert_int_equal(ds_wire_decode(dec, frame, len, &msg, &err), 0);
	for (size_t i = 0; i < n; i++)
		free(bufs[i]);
	free(frame);
	ds_wire_encoder_free(enc);
	ds_wire_decoder_free(dec);
	return msg;
}

static void test_inbox__duplicates_acked_not_handed_on_and_gaps_refused(void **state)
{
	char *dir = tu_mkdtemp("inbox");
	char path[1024];
	ds_inbox *ib;
	ds_wire_result res[32];
	struct seen seen = {{0}, 0};
	uint64_t committed = 99, epoch, seq;
	ds_wire_msg *m;
	ds_err err = {0};

	(void)state;
	snprintf(path, sizeof(path), "%s/inbox.db", dir);
	assert_int_equal(ds_inbox_open(&ib, path, &err), 0);
	assert_int_equal(ds_inbox_session(ib, "prod-east", "prod-east", 7, &committed, &err), 0);
	assert_int_equal(committed, 0);

	m = batch(7, 1, 5, DS_RECORD_UPSERT, "cm");
	assert_int_equal(
	    ds_inbox_commit(ib, "prod-east", 7, m, handler, &seen, res, &committed, &err), 0);
	ds_wire_msg_free(m);
	assert_int_equal(committed, 5);
	assert_int_equal(seen.n, 5);

	/* Resent 3..7: 3..5 are duplicates, acknowledged and not handed on. */
	m = batch(7, 3, 7, DS_RECORD_UPSERT, "cm");
	assert_int_equal(
	    ds_inbox_commit(ib, "prod-east", 7, m, handler, &seen, res, &committed, &err), 0);
	ds_wire_msg_free(m);
	assert_int_equal(committed, 7);
	assert_int_equal(seen.n, 7);
	assert_int_equal(seen.seqs[5], 6);
	assert_int_equal(res[0].status, DS_RESULT_DUPLICATE);
	assert_int_equal(res[2].status, DS_RESULT_DUPLICATE);
	assert_int_equal(res[3].status, DS_RESULT_OK);

	/* A gap (8 missing) is a protocol error and commits nothing. */
	m = batch(7, 9, 10, DS_RECORD_UPSERT, "cm");
	assert_int_equal(
	    ds_inbox_commit(ib, "prod-east", 7, m, handler, &seen, res, &committed, &err), -EPROTO);
	assert_non_null(strstr(err.msg, "gap"));
	ds_wire_msg_free(m);
	assert_int_equal(ds_inbox_committed(ib, "prod-east", &epoch, &seq, &err), 0);
	assert_int_equal(seq, 7);
	assert_int_equal(seen.n, 7);

	/* ...unless a snapshot starts there: the source resends the whole state. */
	m = batch(7, 20, 21, DS_RECORD_SNAPSHOT_BEGIN, "broken");
	assert_int_equal(
	    ds_inbox_commit(ib, "prod-east", 7, m, handler, &seen, res, &committed, &err), 0);
	ds_wire_msg_free(m);
	assert_int_equal(committed, 21);
	/* The handler's failure is committed with the record and reported. */
	assert_int_equal(res[1].status, DS_RESULT_FAILED);
	assert_string_equal(res[1].message, "admission webhook denied broken");

	/* A batch of another epoch than the session's is refused. */
	m = batch(8, 22, 22, DS_RECORD_UPSERT, "cm");
	assert_int_equal(
	    ds_inbox_commit(ib, "prod-east", 7, m, handler, &seen, res, &committed, &err), -EPROTO);
	ds_wire_msg_free(m);

	/* A new epoch (the source's outbox was recreated) restarts at 0. */
	assert_int_equal(ds_inbox_session(ib, "prod-east", NULL, 8, &committed, &err), 0);
	assert_int_equal(committed, 0);
	ds_inbox_free(ib);

	/* Survives reopening; the same epoch resumes where it was. */
	assert_int_equal(ds_inbox_open(&ib, path, &err), 0);
	assert_int_equal(ds_inbox_session(ib, "prod-east", NULL, 8, &committed, &err), 0);
	assert_int_equal(committed, 0);
	ds_inbox_free(ib);
	free(dir);
}

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The link presence the split-brain guard of failover reads, on a real file. */
static void test_inbox__presence_open_seen_expired_and_ended(void **state)
{
	char *dir = tu_mkdtemp("inbox-presence");
	char path[1024];
	ds_inbox *ib, *other;
	ds_inbox_presence p;
	int64_t t0 = wall_ms();
	ds_err err = {0};

	(void)state;
	snprintf(path, sizeof(path), "%s/inbox.db", dir);
	assert_int_equal(ds_inbox_open(&ib, path, &err), 0);
	assert_int_equal(ds_inbox_open(&other, path, &err), 0);
	/* Never connected. */
	assert_int_equal(ds_inbox_presence_get(other, "prod-east", wall_ms(), &p, &err), 0);

	/* Hello: connected, from its peer, since now, for valid_ms. */
	assert_int_equal(
	    ds_inbox_presence_seen(ib, "prod-east", "10.0.0.7:40112", true, 9000, &err), 0);
	assert_int_equal(ds_inbox_presence_get(other, "prod-east", wall_ms(), &p, &err), 1);
	assert_true(p.connected);
	assert_string_equal(p.peer, "10.0.0.7:40112");
	assert_true(p.since >= t0 && p.since <= wall_ms());
	assert_true(p.valid_until >= p.since + 9000);
	assert_int_equal(p.ended_at, 0);
	/* A receiver that died leaves the row open: past valid_until it is not connected. */
	assert_int_equal(ds_inbox_presence_get(other, "prod-east", p.valid_until + 1, &p, &err), 1);
	assert_false(p.connected);

	/* Seen again: valid longer, since unchanged. */
	{
		int64_t since = p.since, until = p.valid_until;
		struct timespec ts = {0, 20 * 1000000L};
		nanosleep(&ts, NULL);
		assert_int_equal(ds_inbox_presence_seen(ib, "prod-east", NULL, false, 9000, &err),
				 0);
		assert_int_equal(ds_inbox_presence_get(other, "prod-east", wall_ms(), &p, &err), 1);
		assert_int_equal(p.since, since);
		assert_true(p.valid_until > until);
		assert_string_equal(p.peer, "10.0.0.7:40112");
	}

	/* Ended: not connected, with the reason; a later "seen" does not reopen it. */
	assert_int_equal(ds_inbox_presence_end(ib, "prod-east", "connection closed", &err), 0);
	assert_int_equal(ds_inbox_presence_seen(ib, "prod-east", NULL, false, 9000, &err), 0);
	assert_int_equal(ds_inbox_presence_get(other, "prod-east", wall_ms(), &p, &err), 1);
	assert_false(p.connected);
	assert_true(p.ended_at >= t0);
	assert_string_equal(p.end_reason, "connection closed");

	/* A new Hello opens it again. */
	assert_int_equal(
	    ds_inbox_presence_seen(ib, "prod-east", "10.0.0.7:40200", true, 9000, &err), 0);
	assert_int_equal(ds_inbox_presence_get(other, "prod-east", wall_ms(), &p, &err), 1);
	assert_true(p.connected);
	assert_string_equal(p.peer, "10.0.0.7:40200");
	assert_int_equal(p.ended_at, 0);
	assert_string_equal(p.end_reason, "");
	ds_inbox_free(ib);
	ds_inbox_free(other);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_inbox__duplicates_acked_not_handed_on_and_gaps_refused),
	    cmocka_unit_test(test_inbox__presence_open_seen_expired_and_ended),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
