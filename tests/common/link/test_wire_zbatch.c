/* ZBatch frames: a batch's records in one zstd frame (wire_zbatch.c). */
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
#include <zstd.h>

#define N 40

/* A ConfigMap-like JSON object, alike from one record to the next. */
static char *object_json(unsigned i, size_t extra)
{
	size_t cap = 1024 + extra;
	char *buf = malloc(cap);
	int n;

	assert_non_null(buf);
	n = snprintf(
	    buf, cap,
	    "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"labels\":"
	    "{\"app.kubernetes.io/managed-by\":\"drasync-loadgen\",\"app\":\"web-%u\"},"
	    "\"name\":\"cm-%u\",\"namespace\":\"team-a\"},\"data\":{\"config.yaml\":\""
	    "replicas: 3\\nimage: registry.example/web/frontend:1.%u\\nport: 8080\\n"
	    "timeout: 30s\\nretries: 5\\nlog: info\\nfeature.flags: a,b,c,d\\n\",\"pad\":\"",
	    i % 7, i, i % 5);
	for (size_t k = 0; k < extra; k++)
		buf[n++] = (char)('a' + (k * 7 + i) % 26);
	buf[n++] = '"';
	buf[n++] = '}';
	buf[n++] = '}';
	buf[n] = '\0';
	return buf;
}

struct fixture {
	char *json[N];
	uint8_t *bufs[N];
	ds_wire_blob blobs[N];
};

static void make(struct fixture *f, int level)
{
	ds_wire_encoder *enc;
	ds_err err = {0};

	assert_int_equal(ds_wire_encoder_new(&enc, level, 512), 0);
	for (unsigned i = 0; i < N; i++) {
		ds_record r;
		memset(&r, 0, sizeof(r));
		r.epoch = 5;
		r.seq = i + 100;
		r.op = i == 3 ? DS_RECORD_DELETE : DS_RECORD_UPSERT;
		r.api_version = "v1";
		r.kind = "ConfigMap";
		r.ns = "team-a";
		r.name = "cm";
		r.source_uid = "uid";
		r.source_resource_version = "7";
		/* one small payload (plain in the outbox), the rest over the threshold */
		f->json[i] = object_json(i, i == 1 ? 0 : 600);
		if (r.op == DS_RECORD_UPSERT) {
			r.payload = (const uint8_t *)f->json[i];
			r.payload_len = strlen(f->json[i]);
		}
		ds_record_hash(r.payload, r.payload_len, r.content_hash);
		assert_int_equal(
		    ds_wire_record_encode(enc, &r, &f->bufs[i], &f->blobs[i].len, &err), 0);
		f->blobs[i].data = f->bufs[i];
	}
	ds_wire_encoder_free(enc);
}

static void dispose(struct fixture *f)
{
	for (unsigned i = 0; i < N; i++) {
		free(f->json[i]);
		free(f->bufs[i]);
	}
}

/* Envelope{zbatch{raw_size, frame}} by hand. */
static uint8_t *zbatch_frame(uint64_t raw_size, const uint8_t *z, size_t zlen, size_t *len)
{
	Drasync__Envelope env = DRASYNC__ENVELOPE__INIT;
	Drasync__ZBatch m = DRASYNC__ZBATCH__INIT;
	uint8_t *buf;

	m.raw_size = raw_size;
	m.frame.data = (uint8_t *)(uintptr_t)z;
	m.frame.len = zlen;
	env.body_case = DRASYNC__ENVELOPE__BODY_ZBATCH;
	env.zbatch = &m;
	*len = drasync__envelope__get_packed_size(&env);
	buf = malloc(*len);
	assert_non_null(buf);
	drasync__envelope__pack(&env, buf);
	return buf;
}

static void test_wire_zbatch__round_trip_smaller_and_stored_per_record(void **state)
{
	struct fixture f;
	ds_wire_zbatcher *z;
	ds_wire_decoder *dec;
	ds_wire_msg *msg;
	ds_err err = {0};
	uint8_t *frame, *classic;
	size_t len, classic_len;
	uint64_t json = 0, want_json = 0;

	(void)state;
	make(&f, 3);
	for (unsigned i = 0; i < N; i++)
		if (i != 3)
			want_json += strlen(f.json[i]);
	assert_int_equal(ds_wire_zbatcher_new(&z, 3, 0), 0);
	assert_int_equal(ds_wire_decoder_new(&dec, NULL), 0);
	assert_int_equal(ds_wire_zbatch_encode(z, f.blobs, N, &frame, &len, &json), 0);
	assert_int_equal(json, want_json);
	assert_int_equal(ds_wire_records_plain_bytes(f.blobs, N), want_json);
	assert_int_equal(ds_wire_batch_encode(f.blobs, N, &classic, &classic_len), 0);
	/* what the records share is paid for once: far under the per-record frames */
	assert_true(len * 3 < classic_len);
	assert_int_equal(ds_wire_decode(dec, frame, len, &msg, &err), 0);
	assert_int_equal(ds_wire_msg_kind(msg), DS_WIRE_BATCH);
	assert_int_equal(ds_wire_msg_record_count(msg), N);
	assert_int_equal(ds_wire_msg_json_bytes(msg), want_json);
	for (unsigned i = 0; i < N; i++) {
		const ds_record *r = ds_wire_msg_record(msg, i);
		int zstd = -1;
		ds_wire_blob st = ds_wire_msg_record_wire_payload(msg, i, &zstd);
		assert_int_equal(r->seq, i + 100);
		assert_string_equal(r->kind, "ConfigMap");
		if (i == 3) {
			assert_int_equal(r->op, DS_RECORD_DELETE);
			assert_int_equal(st.len, 0);
			continue;
		}
		assert_int_equal(r->payload_len, strlen(f.json[i]));
		assert_memory_equal(r->payload, f.json[i], r->payload_len);
		/* The ledger keeps its own frame per record, as from a Batch: checksummed,
		 * content size in the header, inflating to the JSON. */
		assert_int_equal(zstd, i == 1 ? 0 : 1);
		if (zstd) {
			uint8_t *plain;
			size_t plain_len;
			assert_int_equal(ds_wire_payload_plain_len(&st, 1), r->payload_len);
			assert_int_equal(
			    ds_wire_payload_inflate(&st, 1, 1 << 20, &plain, &plain_len), 0);
			assert_memory_equal(plain, f.json[i], plain_len);
			assert_true(st.len > 4 && (st.data[4] & 0x04)); /* content checksum */
			free(plain);
		}
	}
	ds_wire_msg_free(msg);
	free(frame);
	free(classic);
	/* Where one frame does not pay (a lone delete: a hash and names): told, to send a Batch. */
	assert_int_equal(ds_wire_zbatch_encode(z, &f.blobs[3], 1, &frame, &len, NULL), -E2BIG);
	ds_wire_zbatcher_free(z);
	ds_wire_decoder_free(dec);
	dispose(&f);
}

static void test_wire_zbatch__declared_sizes_checked_before_allocation(void **state)
{
	struct fixture f;
	ds_wire_zbatcher *z;
	ds_wire_decoder *dec;
	ds_wire_limits lim;
	ds_wire_msg *msg = NULL;
	ds_err err = {0};
	uint8_t *frame, *bad;
	size_t len, bad_len;
	Drasync__Envelope *env;
	uint8_t zbuf[64];
	size_t zlen;

	(void)state;
	make(&f, 3);
	assert_int_equal(ds_wire_zbatcher_new(&z, 3, 0), 0);
	assert_int_equal(ds_wire_zbatch_encode(z, f.blobs, N, &frame, &len, NULL), 0);
	env = drasync__envelope__unpack(NULL, len, frame);
	assert_non_null(env);

	/* A declared size over the ZBatch limit: refused from the header alone. */
	ds_wire_limits_default(&lim);
	assert_int_equal(ds_wire_decoder_new(&dec, &lim), 0);
	bad = zbatch_frame(1ull << 40, env->zbatch->frame.data, env->zbatch->frame.len, &bad_len);
	assert_int_equal(ds_wire_decode(dec, bad, bad_len, &msg, &err), -E2BIG);
	assert_non_null(strstr(err.msg, "over the limit"));
	assert_null(msg);
	free(bad);
	/* A declared size the zstd frame does not say: refused before decompressing. */
	bad = zbatch_frame(env->zbatch->raw_size + 1, env->zbatch->frame.data,
			   env->zbatch->frame.len, &bad_len);
	assert_int_equal(ds_wire_decode(dec, bad, bad_len, &msg, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "does not match the declared"));
	free(bad);
	/* Zero declared. */
	bad = zbatch_frame(0, env->zbatch->frame.data, env->zbatch->frame.len, &bad_len);
	assert_int_equal(ds_wire_decode(dec, bad, bad_len, &msg, &err), -EBADMSG);
	free(bad);
	ds_wire_decoder_free(dec);

	/* Within the ZBatch limit but over the decoder's memory budget: no allocation. */
	lim.max_decoded = 4096;
	assert_int_equal(ds_wire_decoder_new(&dec, &lim), 0);
	assert_int_equal(ds_wire_decode(dec, frame, len, &msg, &err), -E2BIG);
	assert_non_null(strstr(err.msg, "memory limit"));
	ds_wire_decoder_free(dec);

	/* A frame without a content checksum is refused. */
	assert_int_equal(ds_wire_decoder_new(&dec, NULL), 0);
	zlen = ZSTD_compress(zbuf, sizeof(zbuf), "\x0a\x00", 2, 1); /* no checksum flag */
	assert_false(ZSTD_isError(zlen));
	bad = zbatch_frame(2, zbuf, zlen, &bad_len);
	assert_int_equal(ds_wire_decode(dec, bad, bad_len, &msg, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "content checksum"));
	free(bad);
	ds_wire_decoder_free(dec);
	drasync__envelope__free_unpacked(env, NULL);
	free(frame);
	ds_wire_zbatcher_free(z);
	dispose(&f);
}

static void test_wire_zbatch__checksum_and_contents_checked(void **state)
{
	struct fixture f;
	ds_wire_zbatcher *z;
	ds_wire_decoder *dec;
	ds_wire_msg *msg = NULL;
	ds_err err = {0};
	uint8_t *frame, *bad;
	size_t len, bad_len;
	Drasync__Envelope *env;
	uint8_t *copy;
	size_t zl;

	(void)state;
	make(&f, 3);
	assert_int_equal(ds_wire_zbatcher_new(&z, 3, 0), 0);
	assert_int_equal(ds_wire_decoder_new(&dec, NULL), 0);
	assert_int_equal(ds_wire_zbatch_encode(z, f.blobs, N, &frame, &len, NULL), 0);
	env = drasync__envelope__unpack(NULL, len, frame);
	assert_non_null(env);
	zl = env->zbatch->frame.len;
	copy = malloc(zl);
	assert_non_null(copy);

	/* The XXH64 content checksum (the frame's last 4 bytes) altered: refused. */
	memcpy(copy, env->zbatch->frame.data, zl);
	copy[zl - 1] ^= 0x01;
	bad = zbatch_frame(env->zbatch->raw_size, copy, zl, &bad_len);
	assert_int_equal(ds_wire_decode(dec, bad, bad_len, &msg, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "corrupt zbatch"));
	assert_null(msg);
	free(bad);
	/* The compressed data altered: refused too (checksum or corrupt block). */
	memcpy(copy, env->zbatch->frame.data, zl);
	copy[zl / 2] ^= 0x40;
	bad = zbatch_frame(env->zbatch->raw_size, copy, zl, &bad_len);
	assert_int_equal(ds_wire_decode(dec, bad, bad_len, &msg, &err), -EBADMSG);
	free(bad);
	free(copy);

	/* Records out of order inside a ZBatch: validated as a Batch's. */
	{
		ds_wire_blob two[2] = {f.blobs[5], f.blobs[4]};
		assert_int_equal(ds_wire_zbatch_encode(z, two, 2, &bad, &bad_len, NULL), 0);
		assert_int_equal(ds_wire_decode(dec, bad, bad_len, &msg, &err), -EBADMSG);
		assert_non_null(strstr(err.msg, "not consecutive"));
		free(bad);
	}
	/* A small payload (kept plain in the store) whose SHA-256 is not the one sent: refused. */
	{
		ds_wire_encoder *enc;
		ds_record r;
		uint8_t *rb;
		ds_wire_blob one;
		memset(&r, 0, sizeof(r));
		r.epoch = 5;
		r.seq = 1;
		r.op = DS_RECORD_UPSERT;
		r.api_version = "v1";
		r.kind = "ConfigMap";
		r.name = "cm";
		r.payload = (const uint8_t *)f.json[1];
		r.payload_len = strlen(f.json[1]);
		ds_record_hash("other", 5, r.content_hash);
		assert_int_equal(ds_wire_encoder_new(&enc, 3, 512), 0);
		assert_int_equal(ds_wire_record_encode(enc, &r, &rb, &one.len, &err), 0);
		one.data = rb;
		assert_int_equal(ds_wire_zbatch_encode(z, &one, 1, &bad, &bad_len, NULL), 0);
		assert_int_equal(ds_wire_decode(dec, bad, bad_len, &msg, &err), -EBADMSG);
		assert_non_null(strstr(err.msg, "content hash"));
		free(bad);
		free(rb);
		ds_wire_encoder_free(enc);
	}
	/* Not a Batch inside: refused. */
	{
		uint8_t zbuf[128], junk[16];
		size_t zlen;
		ZSTD_CCtx *c = ZSTD_createCCtx();
		memset(junk, 0xff, sizeof(junk));
		ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
		zlen = ZSTD_compress2(c, zbuf, sizeof(zbuf), junk, sizeof(junk));
		ZSTD_freeCCtx(c);
		bad = zbatch_frame(sizeof(junk), zbuf, zlen, &bad_len);
		assert_int_equal(ds_wire_decode(dec, bad, bad_len, &msg, &err), -EBADMSG);
		assert_non_null(strstr(err.msg, "Batch"));
		free(bad);
	}
	drasync__envelope__free_unpacked(env, NULL);
	free(frame);
	ds_wire_zbatcher_free(z);
	ds_wire_decoder_free(dec);
	dispose(&f);
}

static void test_wire_zbatch__capability_in_hello_and_welcome(void **state)
{
	ds_wire_decoder *dec;
	ds_wire_msg *msg;
	ds_err err = {0};
	uint8_t *buf;
	size_t len;

	(void)state;
	assert_int_equal(ds_wire_decoder_new(&dec, NULL), 0);
	for (int on = 0; on < 2; on++) {
		ds_wire_hello h = {DS_PROTOCOL_VERSION, "prod-east", "t", 9, on != 0};
		ds_wire_welcome w = {DS_PROTOCOL_VERSION, "t", 9, 0, 10, "p", true, on != 0, false};
		assert_int_equal(ds_wire_hello_encode(&h, &buf, &len), 0);
		assert_int_equal(ds_wire_decode(dec, buf, len, &msg, &err), 0);
		assert_int_equal(ds_wire_msg_hello(msg)->zbatch, on != 0);
		ds_wire_msg_free(msg);
		free(buf);
		assert_int_equal(ds_wire_welcome_encode(&w, &buf, &len), 0);
		assert_int_equal(ds_wire_decode(dec, buf, len, &msg, &err), 0);
		assert_int_equal(ds_wire_msg_welcome(msg)->zbatch, on != 0);
		assert_true(ds_wire_msg_welcome(msg)->apply_results);
		ds_wire_msg_free(msg);
		free(buf);
	}
	ds_wire_decoder_free(dec);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_wire_zbatch__round_trip_smaller_and_stored_per_record),
	    cmocka_unit_test(test_wire_zbatch__declared_sizes_checked_before_allocation),
	    cmocka_unit_test(test_wire_zbatch__checksum_and_contents_checked),
	    cmocka_unit_test(test_wire_zbatch__capability_in_hello_and_welcome),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
