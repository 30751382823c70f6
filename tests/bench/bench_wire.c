/*
 * bench_wire: what the link's compression candidates cost over the e2e
 * benchmark's object mix (docs/benchmarks.md, "Wire compression"). No
 * sockets: the frames' bytes as the sender would make them.
 *
 *   bench_wire --dump FILE [--batch N]
 *
 * FILE: `loadgen -mode mixed -dump` output (scripts/bench.sh wire makes one),
 * one object a line. Each object is sanitized as the exporter does
 * (ds_sanitize), sent in the exporter's kind order, hashed and encoded as the
 * outbox does (zstd level 3 from 512 bytes), in batches of N (256) records.
 * Candidates, bytes per object and against the objects' JSON:
 *   record   today's Batch frames: each payload its own zstd frame
 *   zbatchL  ZBatch frames at zstd level L (1, 3, 6): a batch in one frame
 *   session  one zstd stream over the whole sync, flushed at each batch
 *            (context carried across batches; frames not decodable alone)
 *   dict     a dictionary (zstd's trainer, 64 KiB) from 2,000 payloads across the mix,
 *            then each payload its own frame with it; the dictionary shipped once
 * Then: the target's re-compression of a ZBatch's payloads for the ledger
 * (decode time, level 3), one changed ConfigMap alone against a delta (the
 * previous version as zstd's prefix), and a one-record batch both ways.
 * Last line: RESULT json_bytes_per_obj=N record_ratio=X zbatch1_ratio=X
 *   zbatch3_ratio=X zbatch6_ratio=X session_ratio=X dict_ratio=X
 *   zbatch_encode_us_per_obj=X zbatch_decode_us_per_obj=X delta_bytes=N
 *   full_bytes=N one_record_batch=N one_record_zbatch=N
 */
#include "drasync/clock.h"
#include "drasync/kinds.h"
#include "drasync/sanitize.h"
#include "drasync/wire.h"
#include "benchutil.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zdict.h>
#include <zstd.h>

struct obj {
	int rank;
	size_t line;
	char *payload, *api_version, *kind, *ns, *name, *uid, *rv;
};

static int cmp_obj(const void *x, const void *y)
{
	const struct obj *p = x, *q = y;

	if (p->rank != q->rank)
		return p->rank < q->rank ? -1 : 1;
	return (p->line > q->line) - (p->line < q->line);
}

static const char *field(json_t *o, const char *k)
{
	const char *v = json_string_value(json_object_get(o, k));
	return v ? v : "";
}

static struct obj *load(const char *path, size_t *n_out)
{
	FILE *in = fopen(path, "r");
	struct obj *v = NULL;
	size_t n = 0, cap = 0, linecap = 0;
	char *line = NULL;
	ssize_t len;

	if (!in)
		bu_die("cannot read %s", path);
	while ((len = getline(&line, &linecap, in)) > 0) {
		json_error_t jerr;
		json_t *o = json_loadb(line, (size_t)len, 0, &jerr), *meta;
		struct obj *b;

		if (!o)
			bu_die("%s:%zu: %s", path, n + 1, jerr.text);
		if (n == cap) {
			cap = cap ? cap * 2 : 1024;
			v = realloc(v, cap * sizeof(*v));
			if (!v)
				bu_die("out of memory");
		}
		b = &v[n];
		b->line = n++;
		meta = json_object_get(o, "metadata");
		b->api_version = bu_xstrdup(field(o, "apiVersion"));
		b->kind = bu_xstrdup(field(o, "kind"));
		b->ns = bu_xstrdup(field(meta, "namespace"));
		b->name = bu_xstrdup(field(meta, "name"));
		b->uid = bu_xstrdup(field(meta, "uid"));
		b->rv = bu_xstrdup(field(meta, "resourceVersion"));
		b->rank = ds_kind_rank(b->kind);
		if (ds_sanitize(o) < 0)
			bu_die("out of memory");
		b->payload = json_dumps(o, JSON_SORT_KEYS | JSON_COMPACT);
		if (!b->payload)
			bu_die("out of memory");
		json_decref(o);
	}
	free(line);
	fclose(in);
	qsort(v, n, sizeof(*v), cmp_obj);
	*n_out = n;
	return v;
}

static ds_record record_of(const struct obj *o, uint64_t seq)
{
	ds_record r;

	memset(&r, 0, sizeof(r));
	r.epoch = 7;
	r.seq = seq;
	r.op = DS_RECORD_UPSERT;
	r.api_version = o->api_version;
	r.kind = o->kind;
	r.ns = o->ns;
	r.name = o->name;
	r.source_uid = o->uid;
	r.source_resource_version = o->rv;
	r.payload = (const uint8_t *)o->payload;
	r.payload_len = strlen(o->payload);
	ds_record_hash(r.payload, r.payload_len, r.content_hash);
	return r;
}

static ds_wire_blob *encode_all(const struct obj *v, size_t n, size_t threshold)
{
	ds_wire_encoder *enc;
	ds_wire_blob *b = calloc(n, sizeof(*b));
	ds_err err = {0};

	if (!b || ds_wire_encoder_new(&enc, 3, threshold) < 0)
		bu_die("out of memory");
	for (size_t i = 0; i < n; i++) {
		ds_record r = record_of(&v[i], i + 1);
		uint8_t *out;
		size_t len;
		if (ds_wire_record_encode(enc, &r, &out, &len, &err) < 0)
			bu_die("encode: %s", err.msg);
		b[i].data = out;
		b[i].len = len;
	}
	ds_wire_encoder_free(enc);
	return b;
}

/* Bytes of the Batch frames of blobs in batches of `batch`. */
static size_t classic_bytes(const ds_wire_blob *b, size_t n, size_t batch)
{
	size_t sum = 0;

	for (size_t i = 0; i < n; i += batch) {
		size_t k = n - i < batch ? n - i : batch, len;
		uint8_t *f;
		if (ds_wire_batch_encode(&b[i], k, &f, &len) < 0)
			bu_die("out of memory");
		sum += len;
		free(f);
	}
	return sum;
}

/* ZBatch frames at level; decoded again (timed) when dec_s is set. */
static size_t zbatch_bytes(const ds_wire_blob *b, size_t n, size_t batch, int level, double *enc_s,
			   double *dec_s)
{
	ds_wire_zbatcher *z;
	ds_wire_decoder *dec;
	size_t sum = 0;
	double te = 0, td = 0;

	if (ds_wire_zbatcher_new(&z, level, 0) < 0 || ds_wire_decoder_new(&dec, NULL) < 0)
		bu_die("out of memory");
	for (size_t i = 0; i < n; i += batch) {
		size_t k = n - i < batch ? n - i : batch, len;
		uint8_t *f;
		ds_wire_msg *msg;
		ds_err err = {0};
		double t0 = ds_clock_mono_s();
		int rc = ds_wire_zbatch_encode(z, &b[i], k, &f, &len, NULL);
		if (rc == -E2BIG) /* does not pay: the sender sends a Batch */
			rc = ds_wire_batch_encode(&b[i], k, &f, &len);
		if (rc < 0)
			bu_die("zbatch: %d", rc);
		te += ds_clock_mono_s() - t0;
		sum += len;
		if (dec_s) {
			t0 = ds_clock_mono_s();
			if (ds_wire_decode(dec, f, len, &msg, &err) < 0)
				bu_die("decode: %s", err.msg);
			td += ds_clock_mono_s() - t0;
			ds_wire_msg_free(msg);
		}
		free(f);
	}
	if (enc_s)
		*enc_s = te;
	if (dec_s)
		*dec_s = td;
	ds_wire_zbatcher_free(z);
	ds_wire_decoder_free(dec);
	return sum;
}

/* One zstd stream over the plain records, flushed at each batch. */
static size_t session_bytes(const ds_wire_blob *plain, size_t n, size_t batch)
{
	ZSTD_CCtx *c = ZSTD_createCCtx();
	size_t cap = 1u << 20, sum = 0;
	uint8_t *out = malloc(cap);

	ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 3);
	ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
	for (size_t i = 0; i < n; i++) {
		ZSTD_inBuffer in = {plain[i].data, plain[i].len, 0};
		int flush = (i + 1) % batch == 0 || i + 1 == n;
		size_t left;
		sum += 2; /* tag and length of the record in its batch */
		do {
			ZSTD_outBuffer o = {out, cap, 0};
			left = ZSTD_compressStream2(c, &o, &in,
						    flush ? (i + 1 == n ? ZSTD_e_end : ZSTD_e_flush)
							  : ZSTD_e_continue);
			if (ZSTD_isError(left))
				bu_die("zstd: %s", ZSTD_getErrorName(left));
			sum += o.pos;
		} while (left || in.pos < in.size);
		if (flush)
			sum += 8; /* the frame's envelope */
	}
	free(out);
	ZSTD_freeCCtx(c);
	return sum;
}

/* Per-record frames with a dictionary trained on the first payloads, + the dictionary. */
static size_t dict_bytes(const struct obj *v, const ds_wire_blob *plain, size_t n, size_t batch,
			 size_t *dict_len)
{
	size_t train = n < 2000 ? n : 2000, total = 0, dcap = 64 * 1024, sum, cap = 1u << 20;
	size_t *sizes = calloc(train, sizeof(*sizes));
	uint8_t *samples, *dict = malloc(dcap), *out = malloc(cap);
	ZSTD_CCtx *c = ZSTD_createCCtx();
	ZSTD_CDict *cd;

	/* every (n / train)-th object: the objects come in kind order */
	for (size_t i = 0; i < train; i++)
		total += sizes[i] = strlen(v[i * (n / train)].payload);
	samples = malloc(total);
	total = 0;
	for (size_t i = 0; i < train; i++) {
		memcpy(samples + total, v[i * (n / train)].payload, sizes[i]);
		total += sizes[i];
	}
	*dict_len = ZDICT_trainFromBuffer(dict, dcap, samples, sizes, (unsigned)train);
	if (ZDICT_isError(*dict_len))
		bu_die("zdict: %s", ZDICT_getErrorName(*dict_len));
	cd = ZSTD_createCDict(dict, *dict_len, 3);
	sum = *dict_len;
	for (size_t i = 0; i < n; i++) {
		size_t plen = strlen(v[i].payload);
		size_t z = ZSTD_compress_usingCDict(c, out, cap, v[i].payload, plen, cd);
		/* the record without its payload, then the payload, + 4 for the checksum */
		sum += plain[i].len - plen + (z < plen ? z + 4 : plen) + 2;
		if ((i + 1) % batch == 0 || i + 1 == n)
			sum += 4;
	}
	ZSTD_freeCDict(cd);
	ZSTD_freeCCtx(c);
	free(sizes);
	free(samples);
	free(dict);
	free(out);
	return sum;
}

/* The first ConfigMap with one data value changed: alone, and against its previous version. */
static void delta(const struct obj *v, size_t n, size_t *full, size_t *with_prefix)
{
	ZSTD_CCtx *c = ZSTD_createCCtx();
	size_t cap = 1u << 20;
	uint8_t *out = malloc(cap);
	const struct obj *cm = NULL;
	char *changed;

	for (size_t i = 0; i < n && !cm; i++)
		if (strcmp(v[i].kind, "ConfigMap") == 0)
			cm = &v[i];
	if (!cm)
		bu_die("no ConfigMap in the dump");
	changed = bu_xstrdup(cm->payload);
	{
		char *p = strstr(changed, "\"data\":{");
		char *q = p ? strchr(p + 8, ':') : NULL;
		if (q && q[1] == '"' && q[2])
			q[2] = q[2] == 'x' ? 'y' : 'x'; /* one character of the first value */
	}
	ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 3);
	ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
	*full = ZSTD_compress2(c, out, cap, changed, strlen(changed));
	ZSTD_CCtx_refPrefix(c, cm->payload, strlen(cm->payload));
	*with_prefix = ZSTD_compress2(c, out, cap, changed, strlen(changed));
	free(changed);
	free(out);
	ZSTD_freeCCtx(c);
}

int main(int argc, char **argv)
{
	const char *dump = NULL;
	size_t batch = 256, n, json = 0, rec, zb[3], sess, dct, dict_len, full, pre, one, onez;
	int levels[3] = {1, 3, 6};
	double enc_s = 0, dec_s = 0;
	struct obj *v;
	ds_wire_blob *blobs, *plain;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--dump") == 0)
			dump = argv[i + 1];
		else if (strcmp(argv[i], "--batch") == 0)
			batch = (size_t)strtoul(argv[i + 1], NULL, 10);
		else
			bu_die("unknown option %s", argv[i]);
	}
	if (!dump || !batch)
		bu_die("usage: bench_wire --dump FILE [--batch N]");
	v = load(dump, &n);
	if (!n)
		bu_die("%s holds no objects", dump);
	for (size_t i = 0; i < n; i++)
		json += strlen(v[i].payload);
	blobs = encode_all(v, n, 512);
	plain = encode_all(v, n, SIZE_MAX);
	rec = classic_bytes(blobs, n, batch);
	for (int l = 0; l < 3; l++)
		zb[l] = zbatch_bytes(blobs, n, batch, levels[l], l == 1 ? &enc_s : NULL,
				     l == 1 ? &dec_s : NULL);
	sess = session_bytes(plain, n, batch);
	dct = dict_bytes(v, plain, n, batch, &dict_len);
	delta(v, n, &full, &pre);
	one = classic_bytes(blobs + 4, 1, 1);
	onez = zbatch_bytes(blobs + 4, 1, 1, 3, NULL, NULL);
	printf("objects: %zu, %zu bytes of sanitized compact JSON, %.0f an object, batches of "
	       "%zu\n",
	       n, json, (double)json / (double)n, batch);
	printf("record   %9zu bytes  %6.1f an object  %.3f of the JSON\n", rec,
	       (double)rec / (double)n, (double)rec / (double)json);
	for (int l = 0; l < 3; l++)
		printf("zbatch%d  %9zu bytes  %6.1f an object  %.3f of the JSON\n", levels[l],
		       zb[l], (double)zb[l] / (double)n, (double)zb[l] / (double)json);
	printf("session  %9zu bytes  %6.1f an object  %.3f of the JSON\n", sess,
	       (double)sess / (double)n, (double)sess / (double)json);
	printf("dict     %9zu bytes  %6.1f an object  %.3f of the JSON (dictionary %zu bytes)\n",
	       dct, (double)dct / (double)n, (double)dct / (double)json, dict_len);
	printf("zbatch3: encode %.1f us an object (decompress the outbox's, compress the batch); "
	       "decode %.1f us an object (with the ledger's re-compression)\n",
	       enc_s * 1e6 / (double)n, dec_s * 1e6 / (double)n);
	printf("one ConfigMap changed: %zu bytes alone, %zu as a delta on its previous version\n",
	       full, pre);
	printf("one-record batch: %zu bytes as a Batch, %zu as a ZBatch (the sender sends the "
	       "smaller)\n",
	       one, onez);
	printf("RESULT json_bytes_per_obj=%.0f record_ratio=%.3f zbatch1_ratio=%.3f "
	       "zbatch3_ratio=%.3f zbatch6_ratio=%.3f session_ratio=%.3f dict_ratio=%.3f "
	       "zbatch_encode_us_per_obj=%.1f zbatch_decode_us_per_obj=%.1f delta_bytes=%zu "
	       "full_bytes=%zu one_record_batch=%zu one_record_zbatch=%zu\n",
	       (double)json / (double)n, (double)rec / (double)json, (double)zb[0] / (double)json,
	       (double)zb[1] / (double)json, (double)zb[2] / (double)json,
	       (double)sess / (double)json, (double)dct / (double)json, enc_s * 1e6 / (double)n,
	       dec_s * 1e6 / (double)n, pre, full, one, onez);
	return 0;
}
