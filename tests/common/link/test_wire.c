#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/wire.h"
#include "drasync.pb-c.h"
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A realistic payload: JSON of a Deployment, repeated to the size wanted. */
static char *json_payload(size_t size, unsigned salt)
{
	char *buf = malloc(size + 1);
	size_t o = 0;
	unsigned i = 0;

	assert_non_null(buf);
	while (o < size) {
		char item[256];
		int n = snprintf(item, sizeof(item),
				 "{\"name\":\"c%u-%u\",\"image\":\"registry.example/ml/train:%u\","
				 "\"resources\":{\"claims\":[{\"name\":\"gpu-%u\"}]}},",
				 salt, i, (salt * 7919u + i) % 1000u, i % 8u);
		for (int k = 0; k < n && o < size; k++)
			buf[o++] = item[k];
		i++;
	}
	buf[size] = '\0';
	return buf;
}

static void make_record(ds_record *r, uint64_t seq, const char *payload)
{
	memset(r, 0, sizeof(*r));
	r->epoch = 77;
	r->seq = seq;
	r->op = DS_RECORD_UPSERT;
	r->api_version = "apps/v1";
	r->kind = "Deployment";
	r->ns = "ml-team";
	r->name = "trainer";
	r->source_uid = "uid-1";
	r->source_resource_version = "42";
	r->payload = (const uint8_t *)payload;
	r->payload_len = strlen(payload);
	ds_record_hash(r->payload, r->payload_len, r->content_hash);
}

static void test_wire__batch_round_trip_with_compression(void **state)
{
	ds_wire_encoder *enc;
	ds_wire_decoder *dec;
	ds_wire_blob blobs[3];
	uint8_t *bufs[3], *frame;
	size_t frame_len;
	char *small = json_payload(100, 1), *big = json_payload(65536, 2);
	ds_wire_msg *msg;
	ds_err err = {0};
	int zstd;

	(void)state;
	assert_int_equal(ds_wire_encoder_new(&enc, 3, 512), 0);
	assert_int_equal(ds_wire_decoder_new(&dec, NULL), 0);
	for (int i = 0; i < 3; i++) {
		ds_record r;
		make_record(&r, (uint64_t)i + 10, i == 1 ? big : small);
		if (i == 2) {
			r.op = DS_RECORD_DELETE;
			r.payload = NULL;
			r.payload_len = 0;
			ds_record_hash(NULL, 0, r.content_hash);
		}
		assert_int_equal(ds_wire_record_encode(enc, &r, &bufs[i], &blobs[i].len, &err), 0);
		blobs[i].data = bufs[i];
	}
	/* The big JSON payload is sent compressed. */
	assert_true(blobs[1].len < 65536 / 4);
	assert_int_equal(ds_wire_batch_encode(blobs, 3, &frame, &frame_len), 0);
	assert_int_equal(ds_wire_decode(dec, frame, frame_len, &msg, &err), 0);
	assert_int_equal(ds_wire_msg_kind(msg), DS_WIRE_BATCH);
	assert_int_equal(ds_wire_msg_record_count(msg), 3);
	const ds_record *r1 = ds_wire_msg_record(msg, 1);
	assert_int_equal(r1->seq, 11);
	assert_int_equal(r1->payload_len, 65536);
	assert_memory_equal(r1->payload, big, 65536);
	assert_string_equal(r1->kind, "Deployment");
	assert_string_equal(r1->ns, "ml-team");
	ds_wire_msg_record_wire_payload(msg, 1, &zstd);
	assert_true(zstd);
	ds_wire_msg_record_wire_payload(msg, 0, &zstd);
	assert_false(zstd); /* below the threshold */
	assert_int_equal(ds_wire_msg_record(msg, 2)->op, DS_RECORD_DELETE);
	ds_wire_msg_free(msg);
	free(frame);

	/* A compressed payload altered after compression fails its zstd checksum. */
	bufs[1][blobs[1].len - 2] ^= 0x5a;
	assert_int_equal(ds_wire_batch_encode(&blobs[1], 1, &frame, &frame_len), 0);
	assert_int_equal(ds_wire_decode(dec, frame, frame_len, &msg, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "zstd"));
	free(frame);
	for (int i = 0; i < 3; i++)
		free(bufs[i]);
	free(small);
	free(big);
	ds_wire_encoder_free(enc);
	ds_wire_decoder_free(dec);
}

/* A relocation record (SPEC §5): its namespace travels; a bad one is refused at both ends. */
static void test_wire__relocation_record(void **state)
{
	ds_wire_encoder *enc;
	ds_wire_decoder *dec;
	ds_wire_blob blob;
	uint8_t *buf, *frame;
	size_t frame_len;
	ds_wire_msg *msg;
	ds_err err = {0};
	ds_record r = {.op = DS_RECORD_RELOCATE, .seq = 7, .epoch = 1, .ns = "ml-team"};
	Drasync__Record *m;

	(void)state;
	ds_record_hash(NULL, 0, r.content_hash);
	assert_int_equal(ds_wire_encoder_new(&enc, 3, 512), 0);
	assert_int_equal(ds_wire_decoder_new(&dec, NULL), 0);
	assert_int_equal(ds_wire_record_encode(enc, &r, &buf, &blob.len, &err), 0);
	blob.data = buf;
	assert_int_equal(ds_wire_batch_encode(&blob, 1, &frame, &frame_len), 0);
	assert_int_equal(ds_wire_decode(dec, frame, frame_len, &msg, &err), 0);
	assert_int_equal(ds_wire_msg_record(msg, 0)->op, DS_RECORD_RELOCATE);
	assert_string_equal(ds_wire_msg_record(msg, 0)->ns, "ml-team");
	assert_string_equal(ds_record_op_name(DS_RECORD_RELOCATE), "relocate");
	ds_wire_msg_free(msg);
	free(frame);

	/* A peer's relocation with a namespace the API server would refuse. */
	m = drasync__record__unpack(NULL, blob.len, buf);
	assert_non_null(m);
	{
		char *orig = m->ref->namespace_;
		uint8_t raw[512];
		ds_wire_blob bad;

		m->ref->namespace_ = (char *)"../etc";
		bad = (ds_wire_blob){.data = raw, .len = drasync__record__pack(m, raw)};
		m->ref->namespace_ = orig;
		assert_int_equal(ds_wire_batch_encode(&bad, 1, &frame, &frame_len), 0);
		assert_int_equal(ds_wire_decode(dec, frame, frame_len, &msg, &err), -EBADMSG);
		assert_non_null(strstr(err.msg, "relocation"));
		free(frame);
	}
	drasync__record__free_unpacked(m, NULL);
	free(buf);

	/* The source side refuses to encode one without a valid namespace. */
	r.ns = "Not_A_Label";
	assert_int_equal(ds_wire_record_encode(enc, &r, &buf, &blob.len, &err), -EINVAL);
	r.ns = NULL;
	assert_int_equal(ds_wire_record_encode(enc, &r, &buf, &blob.len, &err), -EINVAL);
	ds_wire_encoder_free(enc);
	ds_wire_decoder_free(dec);
}

/*
 * A snapshot end's manifest is written by hand (not through protobuf-c's
 * messages, issue 23 item 6): its bytes are what protobuf-c packs from the same
 * message, so a target of any version reads it; and it goes through a ZBatch
 * (read there without unpacking) beside a compressed upsert, back to the same
 * entries.
 */
static void test_wire__snapshot_end_is_protobuf_c_s_bytes_and_round_trips(void **state)
{
	char long_key[300], *payload = json_payload(4000, 3);
	ds_manifest_entry entries[4] = {{.key = "apps/Deployment/ml-team/trainer"},
					{.key = "/ConfigMap/ml-team/settings"},
					{.key = long_key},
					{.key = "resource.k8s.io/DeviceClass//gpu.example.com"}};
	Drasync__ManifestEntry me[4], *mep[4];
	Drasync__SnapshotEnd se = DRASYNC__SNAPSHOT_END__INIT;
	Drasync__Record m = DRASYNC__RECORD__INIT;
	ds_record up, end = {.epoch = 77, .seq = 2, .op = DS_RECORD_SNAPSHOT_END};
	ds_wire_encoder *enc;
	ds_wire_zbatcher *z;
	ds_wire_decoder *dec;
	ds_wire_blob blobs[2];
	uint8_t *bufs[2], *want, *frame;
	size_t want_len, frame_len;
	ds_wire_msg *msg;
	const ds_record *got;
	ds_err err = {0};

	(void)state;
	memset(long_key, 'k', sizeof(long_key) - 1); /* a key whose length takes two bytes */
	long_key[sizeof(long_key) - 1] = '\0';
	for (size_t i = 0; i < 4; i++) {
		Drasync__ManifestEntry init = DRASYNC__MANIFEST_ENTRY__INIT;

		for (size_t b = 0; b < DS_HASH_LEN; b++)
			entries[i].content_hash[b] = (uint8_t)(i * 40 + b);
		me[i] = init;
		me[i].key = (char *)(uintptr_t)entries[i].key;
		me[i].content_hash.data = entries[i].content_hash;
		me[i].content_hash.len = DS_HASH_LEN;
		mep[i] = &me[i];
	}
	end.snapshot_id = "snap-7";
	end.manifest = entries;
	end.manifest_len = 4;
	ds_record_hash(NULL, 0, end.content_hash);
	make_record(&up, 1, payload);
	assert_int_equal(ds_wire_encoder_new(&enc, 3, 512), 0);
	assert_int_equal(ds_wire_record_encode(enc, &up, &bufs[0], &blobs[0].len, &err), 0);
	assert_int_equal(ds_wire_record_encode(enc, &end, &bufs[1], &blobs[1].len, &err), 0);
	blobs[0].data = bufs[0];
	blobs[1].data = bufs[1];

	/* protobuf-c's own packing of the same record */
	m.epoch = 77;
	m.seq = 2;
	m.op = DRASYNC__OP__OP_SNAPSHOT_END;
	m.has_content_hash = 1;
	m.content_hash.data = end.content_hash;
	m.content_hash.len = DS_HASH_LEN;
	se.snapshot_id = (char *)"snap-7";
	se.n_manifest = 4;
	se.manifest = mep;
	m.snapshot_end = &se;
	want_len = drasync__record__get_packed_size(&m);
	want = malloc(want_len);
	assert_non_null(want);
	drasync__record__pack(&m, want);
	assert_int_equal(blobs[1].len, want_len);
	assert_memory_equal(blobs[1].data, want, want_len);

	assert_int_equal(ds_wire_zbatcher_new(&z, 3, 0), 0);
	assert_int_equal(ds_wire_zbatch_encode(z, blobs, 2, &frame, &frame_len, NULL), 0);
	assert_int_equal(ds_wire_decoder_new(&dec, NULL), 0);
	assert_int_equal(ds_wire_decode(dec, frame, frame_len, &msg, &err), 0);
	assert_int_equal(ds_wire_msg_record_count(msg), 2);
	assert_int_equal(ds_wire_msg_record(msg, 0)->payload_len, 4000);
	assert_memory_equal(ds_wire_msg_record(msg, 0)->payload, payload, 4000);
	got = ds_wire_msg_record(msg, 1);
	assert_int_equal(got->op, DS_RECORD_SNAPSHOT_END);
	assert_string_equal(got->snapshot_id, "snap-7");
	assert_int_equal(got->manifest_len, 4);
	for (size_t i = 0; i < 4; i++) {
		assert_string_equal(got->manifest[i].key, entries[i].key);
		assert_memory_equal(got->manifest[i].content_hash, entries[i].content_hash,
				    DS_HASH_LEN);
	}
	ds_wire_msg_free(msg);
	ds_wire_decoder_free(dec);
	ds_wire_zbatcher_free(z);
	ds_wire_encoder_free(enc);
	free(frame);
	free(want);
	free(bufs[0]);
	free(bufs[1]);
	free(payload);
}

/* One record packed by protobuf-c in a Batch frame, decoded: the decoder's rc. */
static int decode_packed(const Drasync__Record *m, ds_err *err)
{
	size_t n = drasync__record__get_packed_size(m), len;
	uint8_t *rec = malloc(n), *frame;
	ds_wire_blob blob;
	ds_wire_decoder *dec;
	ds_wire_msg *msg = NULL;
	int rc;

	assert_non_null(rec);
	drasync__record__pack(m, rec);
	blob.data = rec;
	blob.len = n;
	assert_int_equal(ds_wire_batch_encode(&blob, 1, &frame, &len), 0);
	assert_int_equal(ds_wire_decoder_new(&dec, NULL), 0);
	rc = ds_wire_decode(dec, frame, len, &msg, err);
	ds_wire_msg_free(msg);
	ds_wire_decoder_free(dec);
	free(frame);
	free(rec);
	return rc;
}

/*
 * A large manifest travels in parts: a SNAPSHOT_PART says how many records
 * follow up to the snapshot's end. Its bytes are protobuf-c's; a part with no
 * records to follow, an end that says some follow, or more parts than a
 * manifest may have are refused on both sides of the wire; the target's
 * Welcome says whether it takes parts.
 */
static void test_wire__a_manifest_in_parts(void **state)
{
	ds_manifest_entry entries[2] = {{.key = "/ConfigMap/ml-team/a"},
					{.key = "/ConfigMap/ml-team/b"}};
	Drasync__ManifestEntry me[2], *mep[2];
	Drasync__SnapshotEnd se = DRASYNC__SNAPSHOT_END__INIT;
	Drasync__Record m = DRASYNC__RECORD__INIT;
	ds_record part = {.epoch = 77, .seq = 5, .op = DS_RECORD_SNAPSHOT_PART};
	ds_wire_welcome w = {DS_PROTOCOL_VERSION, "t", 77, 0, 10, "p", true, true, true};
	ds_wire_encoder *enc;
	ds_wire_decoder *dec;
	ds_wire_blob blob;
	uint8_t *buf, *want, *frame;
	size_t want_len, frame_len;
	ds_wire_msg *msg;
	const ds_record *got;
	ds_err err = {0};

	(void)state;
	for (size_t i = 0; i < 2; i++) {
		Drasync__ManifestEntry init = DRASYNC__MANIFEST_ENTRY__INIT;

		memset(entries[i].content_hash, (int)(i + 1), DS_HASH_LEN);
		me[i] = init;
		me[i].key = (char *)(uintptr_t)entries[i].key;
		me[i].content_hash.data = entries[i].content_hash;
		me[i].content_hash.len = DS_HASH_LEN;
		mep[i] = &me[i];
	}
	part.snapshot_id = "snap-9";
	part.manifest = entries;
	part.manifest_len = 2;
	part.parts_left = 300; /* a varint of two bytes */
	ds_record_hash(NULL, 0, part.content_hash);
	assert_int_equal(ds_wire_encoder_new(&enc, 3, 512), 0);
	assert_int_equal(ds_wire_record_encode(enc, &part, &buf, &blob.len, &err), 0);
	blob.data = buf;

	m.epoch = 77;
	m.seq = 5;
	m.op = DRASYNC__OP__OP_SNAPSHOT_PART;
	m.has_content_hash = 1;
	m.content_hash.data = part.content_hash;
	m.content_hash.len = DS_HASH_LEN;
	se.snapshot_id = (char *)"snap-9";
	se.n_manifest = 2;
	se.manifest = mep;
	se.has_parts_left = 1;
	se.parts_left = 300;
	m.snapshot_end = &se;
	want_len = drasync__record__get_packed_size(&m);
	want = malloc(want_len);
	assert_non_null(want);
	drasync__record__pack(&m, want);
	assert_int_equal(blob.len, want_len);
	assert_memory_equal(blob.data, want, want_len);

	assert_int_equal(ds_wire_batch_encode(&blob, 1, &frame, &frame_len), 0);
	assert_int_equal(ds_wire_decoder_new(&dec, NULL), 0);
	assert_int_equal(ds_wire_decode(dec, frame, frame_len, &msg, &err), 0);
	got = ds_wire_msg_record(msg, 0);
	assert_int_equal(got->op, DS_RECORD_SNAPSHOT_PART);
	assert_int_equal(got->parts_left, 300);
	assert_string_equal(got->snapshot_id, "snap-9");
	assert_int_equal(got->manifest_len, 2);
	assert_string_equal(got->manifest[1].key, "/ConfigMap/ml-team/b");
	ds_wire_msg_free(msg);
	free(frame);
	free(buf);

	/* refused by the encoder */
	part.parts_left = 0;
	assert_int_equal(ds_wire_record_encode(enc, &part, &buf, &blob.len, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "parts_left 0"));
	part.parts_left = DS_MANIFEST_MAX_PARTS;
	assert_int_equal(ds_wire_record_encode(enc, &part, &buf, &blob.len, &err), -EINVAL);
	part.op = DS_RECORD_SNAPSHOT_END;
	part.parts_left = 1;
	assert_int_equal(ds_wire_record_encode(enc, &part, &buf, &blob.len, &err), -EINVAL);
	/* and by the decoder */
	se.has_parts_left = 0;
	assert_int_equal(decode_packed(&m, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "snapshot-part with parts_left 0"));
	se.has_parts_left = 1;
	se.parts_left = DS_MANIFEST_MAX_PARTS;
	assert_int_equal(decode_packed(&m, &err), -EBADMSG);
	m.op = DRASYNC__OP__OP_SNAPSHOT_END;
	se.parts_left = 3;
	assert_int_equal(decode_packed(&m, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "snapshot-end with parts_left 3"));
	se.parts_left = 1;
	m.op = DRASYNC__OP__OP_SNAPSHOT_PART;
	assert_int_equal(decode_packed(&m, &err), 0);

	/* the capability, in the Welcome and not */
	assert_int_equal(ds_wire_welcome_encode(&w, &buf, &blob.len), 0);
	assert_int_equal(ds_wire_decode(dec, buf, blob.len, &msg, &err), 0);
	assert_true(ds_wire_msg_welcome(msg)->manifest_parts);
	ds_wire_msg_free(msg);
	free(buf);
	w.manifest_parts = false;
	assert_int_equal(ds_wire_welcome_encode(&w, &buf, &blob.len), 0);
	assert_int_equal(ds_wire_decode(dec, buf, blob.len, &msg, &err), 0);
	assert_false(ds_wire_msg_welcome(msg)->manifest_parts);
	ds_wire_msg_free(msg);
	free(buf);
	ds_wire_decoder_free(dec);
	ds_wire_encoder_free(enc);
	free(want);
}

static void test_wire__control_messages_round_trip(void **state)
{
	ds_wire_decoder *dec;
	ds_wire_msg *msg;
	uint8_t *buf;
	size_t len;
	ds_err err = {0};
	ds_wire_hello h = {DS_PROTOCOL_VERSION, "prod-east", "0.1.0", 9, false};
	ds_wire_result res[2] = {{5, DS_RESULT_OK, ""}, {6, DS_RESULT_FAILED, "quota exceeded"}};
	ds_wire_result app[1] = {{3, DS_RESULT_WAITING, "waits for ResourceClaimTemplate ml/gpu"}};
	ds_wire_ack a = {9, 6, 128, res, 2, app, 1, 40};

	(void)state;
	assert_int_equal(ds_wire_decoder_new(&dec, NULL), 0);
	assert_int_equal(ds_wire_hello_encode(&h, &buf, &len), 0);
	assert_int_equal(ds_wire_decode(dec, buf, len, &msg, &err), 0);
	assert_string_equal(ds_wire_msg_hello(msg)->cluster_name, "prod-east");
	assert_int_equal(ds_wire_msg_hello(msg)->epoch, 9);
	assert_null(ds_wire_msg_ack(msg));
	ds_wire_msg_free(msg);
	free(buf);
	assert_int_equal(ds_wire_ack_encode(&a, &buf, &len), 0);
	assert_int_equal(ds_wire_decode(dec, buf, len, &msg, &err), 0);
	assert_int_equal(ds_wire_msg_ack(msg)->committed_seq, 6);
	assert_int_equal(ds_wire_msg_ack(msg)->n_results, 2);
	assert_string_equal(ds_wire_msg_ack(msg)->results[1].message, "quota exceeded");
	assert_int_equal(ds_wire_msg_ack(msg)->results[1].status, DS_RESULT_FAILED);
	/* Apply results of earlier records travel apart from the commit results. */
	assert_int_equal(ds_wire_msg_ack(msg)->n_applied, 1);
	assert_int_equal(ds_wire_msg_ack(msg)->applied[0].seq, 3);
	assert_int_equal(ds_wire_msg_ack(msg)->applied[0].status, DS_RESULT_WAITING);
	assert_string_equal(ds_wire_msg_ack(msg)->applied[0].message,
			    "waits for ResourceClaimTemplate ml/gpu");
	assert_int_equal(ds_wire_msg_ack(msg)->unapplied, 40);
	ds_wire_msg_free(msg);
	free(buf);
	ds_wire_decoder_free(dec);
}

static int decode_fails(ds_wire_decoder *dec, const void *buf, size_t len, const char *why)
{
	ds_wire_msg *msg = NULL;
	ds_err err = {0};
	int rc;

	ds_err_clear(&err);
	rc = ds_wire_decode(dec, buf, len, &msg, &err);
	assert_null(msg);
	assert_true(rc < 0);
	if (why && !strstr(err.msg, why))
		fail_msg("expected '%s' in '%s'", why, err.msg);
	return rc;
}

static void pack_batch_of(Drasync__Record *rec, size_t copies, uint8_t **out, size_t *len)
{
	Drasync__Envelope env = DRASYNC__ENVELOPE__INIT;
	Drasync__Batch b = DRASYNC__BATCH__INIT;
	Drasync__Record **ptrs = calloc(copies, sizeof(*ptrs));

	for (size_t i = 0; i < copies; i++)
		ptrs[i] = rec;
	b.n_records = copies;
	b.records = ptrs;
	env.body_case = DRASYNC__ENVELOPE__BODY_BATCH;
	env.batch = &b;
	*len = drasync__envelope__get_packed_size(&env);
	*out = malloc(*len);
	drasync__envelope__pack(&env, *out);
	free(ptrs);
}

static void test_wire__hostile_frames_are_rejected(void **state)
{
	ds_wire_limits lim;
	ds_wire_decoder *dec;
	Drasync__Record rec = DRASYNC__RECORD__INIT;
	Drasync__ObjectRef ref = DRASYNC__OBJECT_REF__INIT;
	uint8_t hash[32] = {0}, *buf;
	size_t len;
	char payload[] = "{\"kind\":\"Pod\"}";

	(void)state;
	ds_wire_limits_default(&lim);
	lim.max_decoded = 1 << 20;
	lim.max_batch = 100000;
	lim.max_record = 1 << 16;
	assert_int_equal(ds_wire_decoder_new(&dec, &lim), 0);

	decode_fails(dec, "\xff\xff\xff\xff garbage", 13, "not a valid protobuf");
	decode_fails(dec, "", 0, "without a known body");

	ref.api_version = (char *)"v1";
	ref.kind = (char *)"Pod";
	ref.name = (char *)"p";
	rec.epoch = 1;
	rec.seq = 1;
	rec.op = DRASYNC__OP__OP_UPSERT;
	rec.ref = &ref;
	rec.has_content_hash = 1;
	rec.content_hash.data = hash;
	rec.content_hash.len = 32;
	rec.has_payload = 1;
	rec.payload.data = (uint8_t *)payload;
	rec.payload.len = strlen(payload);

	/* Wrong hash: the payload was altered. */
	pack_batch_of(&rec, 1, &buf, &len);
	decode_fails(dec, buf, len, "content hash");
	free(buf);
	/* Truncated frame. */
	ds_record_hash(payload, strlen(payload), hash);
	pack_batch_of(&rec, 1, &buf, &len);
	decode_fails(dec, buf, len - 3, NULL);
	free(buf);
	/* Same seq twice in one batch. */
	pack_batch_of(&rec, 2, &buf, &len);
	decode_fails(dec, buf, len, "not consecutive");
	free(buf);
	/* Unknown op. */
	rec.op = (Drasync__Op)99;
	pack_batch_of(&rec, 1, &buf, &len);
	decode_fails(dec, buf, len, "unknown op");
	free(buf);
	rec.op = DRASYNC__OP__OP_UPSERT;
	/* A zstd bomb: declared size beyond the record limit. */
	rec.has_compression = 1;
	rec.compression = DRASYNC__COMPRESSION__COMPRESSION_ZSTD;
	rec.has_raw_size = 1;
	rec.raw_size = 1u << 30;
	pack_batch_of(&rec, 1, &buf, &len);
	assert_int_equal(decode_fails(dec, buf, len, "over the limit"), -E2BIG);
	free(buf);
	/* Not zstd at all. */
	rec.raw_size = 14;
	pack_batch_of(&rec, 1, &buf, &len);
	decode_fails(dec, buf, len, "zstd");
	free(buf);
	rec.has_compression = 0;
	rec.has_raw_size = 0;
	/* Tiny frame that would unpack into far more memory than the limit allows. */
	pack_batch_of(&rec, 10000, &buf, &len);
	assert_true(len < lim.max_decoded);
	decode_fails(dec, buf, len, NULL);
	free(buf);
	/* Over the frame limit. */
	lim.max_frame = 16;
	ds_wire_decoder_free(dec);
	assert_int_equal(ds_wire_decoder_new(&dec, &lim), 0);
	pack_batch_of(&rec, 1, &buf, &len);
	assert_int_equal(decode_fails(dec, buf, len, "over the limit"), -E2BIG);
	free(buf);
	ds_wire_decoder_free(dec);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_wire__batch_round_trip_with_compression),
	    cmocka_unit_test(test_wire__control_messages_round_trip),
	    cmocka_unit_test(test_wire__relocation_record),
	    cmocka_unit_test(test_wire__snapshot_end_is_protobuf_c_s_bytes_and_round_trips),
	    cmocka_unit_test(test_wire__a_manifest_in_parts),
	    cmocka_unit_test(test_wire__hostile_frames_are_rejected),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
