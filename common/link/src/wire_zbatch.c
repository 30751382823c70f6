/*
 * ZBatch frames (docs/transport.md, "Compression"): the records of a batch
 * with plain payloads, as one Batch in one zstd frame. The source makes them
 * from the outbox's records (payloads compressed one by one); the target
 * checks the declared size before allocating anything, decompresses (zstd
 * checks the frame's XXH64 content checksum), validates the records as those
 * of a Batch, and re-compresses each payload on its own for the ledger.
 */
#include "wire_internal.h"

#include "drasync/buf.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define MiB (1024u * 1024u)
/* The ledger's per-record frames: as the outbox makes them by default. */
#define STORE_LEVEL 3
#define STORE_THRESHOLD 512

struct ds_wire_zbatcher {
	ZSTD_CCtx *cctx;
	ZSTD_DCtx *dctx;
	size_t max_plain;
	uint8_t *plain, *zbuf, *tmp;
	size_t plain_cap, zcap, tmp_cap;
};

static ZSTD_CCtx *new_cctx(int level)
{
	ZSTD_CCtx *c = ZSTD_createCCtx();

	if (c && (ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level)) ||
		  ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1)) ||
		  ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 1)))) {
		ZSTD_freeCCtx(c);
		return NULL;
	}
	return c;
}

int ds_wire_zbatcher_new(ds_wire_zbatcher **out, int zstd_level, size_t max_plain)
{
	ds_wire_zbatcher *z;

	if (zstd_level < 1 || zstd_level > ZSTD_maxCLevel())
		return -EINVAL;
	z = calloc(1, sizeof(*z));
	if (!z)
		return -ENOMEM;
	z->cctx = new_cctx(zstd_level);
	z->dctx = ZSTD_createDCtx();
	z->max_plain = max_plain ? max_plain : 32 * MiB;
	if (!z->cctx || !z->dctx) {
		ds_wire_zbatcher_free(z);
		return -ENOMEM;
	}
	*out = z;
	return 0;
}

void ds_wire_zbatcher_free(ds_wire_zbatcher *z)
{
	if (!z)
		return;
	ZSTD_freeCCtx(z->cctx);
	ZSTD_freeDCtx(z->dctx);
	free(z->plain);
	free(z->zbuf);
	free(z->tmp);
	free(z);
}

/*
 * What the zbatcher needs of an encoded Record, read from its top-level fields
 * without unpacking it: a snapshot end's manifest (every key of the source) is
 * never unpacked on the source (issue 23 item 6: that unpack was 21 MB at
 * 100,000 objects). Wire types are checked and the required fields must be
 * there, as protobuf-c's unpack would; what nested messages hold is the
 * target's to check.
 */
struct scan {
	bool payload, zstd, has_raw_size;
	uint64_t payload_len, raw_size;
};

static const uint8_t *varint_get(const uint8_t *p, const uint8_t *end, uint64_t *v)
{
	*v = 0;
	for (unsigned shift = 0; p < end && shift < 64; shift += 7) {
		uint8_t b = *p++;
		*v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return p;
	}
	return NULL;
}

static int record_scan(const ds_wire_blob *blob, struct scan *out)
{
	const uint8_t *p = blob->data, *end = p + blob->len;
	unsigned required = 0; /* epoch, seq, op */

	memset(out, 0, sizeof(*out));
	while (p < end) {
		uint64_t key, v;
		unsigned field, type;

		if (!(p = varint_get(p, end, &key)))
			return -EBADMSG;
		field = (unsigned)(key >> 3);
		type = (unsigned)(key & 7);
		if (field == 0)
			return -EBADMSG;
		switch (type) {
		case 0:
			if (!(p = varint_get(p, end, &v)))
				return -EBADMSG;
			if (field >= 1 && field <= 3)
				required |= 1u << (field - 1);
			else if (field == 7)
				out->zstd = v == DRASYNC__COMPRESSION__COMPRESSION_ZSTD;
			else if (field == 8) {
				out->has_raw_size = true;
				out->raw_size = v;
			}
			break;
		case 1:
		case 5:
			if ((size_t)(end - p) < (type == 1 ? 8u : 4u))
				return -EBADMSG;
			p += type == 1 ? 8 : 4;
			break;
		case 2:
			if (!(p = varint_get(p, end, &v)) || v > (uint64_t)(end - p))
				return -EBADMSG;
			if (field == 9) {
				out->payload = true;
				out->payload_len = v;
			}
			p += v;
			break;
		default:
			return -EBADMSG;
		}
	}
	if (required != 7u)
		return -EBADMSG;
	if (!out->payload)
		out->zstd = false;
	return 0;
}

uint64_t ds_wire_records_plain_bytes(const ds_wire_blob *records, size_t n)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < n; i++) {
		struct scan sc;

		if (record_scan(&records[i], &sc) == 0 && sc.payload)
			sum += sc.has_raw_size ? sc.raw_size : sc.payload_len;
	}
	return sum;
}

/* Append Batch.records = rec (tag, length, bytes) to z->plain. */
static int plain_put(ds_wire_zbatcher *z, size_t *used, const Drasync__Record *rec,
		     const ds_wire_blob *as_is)
{
	size_t n = as_is ? as_is->len : drasync__record__get_packed_size(rec);
	size_t need = *used + 1 + ds_wire_varint_len(n) + n;
	uint8_t *p;

	if (need > z->max_plain)
		return -E2BIG;
	if (ds_grow((void **)&z->plain, &z->plain_cap, need, 1) < 0)
		return -ENOMEM;
	p = z->plain + *used;
	*p++ = (1 << 3) | 2; /* Batch.records, length-delimited */
	p = ds_wire_varint_put(p, n);
	if (as_is)
		memcpy(p, as_is->data, n);
	else
		drasync__record__pack(rec, p);
	*used = need;
	return 0;
}

/* Record blob as it goes into the plain Batch: its payload decompressed. */
static int add_record(ds_wire_zbatcher *z, const ds_wire_blob *blob, size_t *used,
		      uint64_t *plain_bytes)
{
	Drasync__Record *r;
	struct scan sc;
	int rc = record_scan(blob, &sc);

	if (rc < 0)
		return rc;
	if (sc.payload)
		*plain_bytes += sc.has_raw_size ? sc.raw_size : sc.payload_len;
	if (!sc.zstd)
		return plain_put(z, used, NULL, blob);
	r = drasync__record__unpack(NULL, blob->len, blob->data);
	if (!r)
		return -EBADMSG;
	if (r->has_payload && r->has_compression &&
	    r->compression == DRASYNC__COMPRESSION__COMPRESSION_ZSTD) {
		ProtobufCBinaryData orig = r->payload;
		unsigned long long fcs = ZSTD_getFrameContentSize(orig.data, orig.len);
		size_t got;

		if (fcs == ZSTD_CONTENTSIZE_UNKNOWN || fcs == ZSTD_CONTENTSIZE_ERROR) {
			rc = -EBADMSG;
		} else if (fcs > z->max_plain) {
			rc = -E2BIG;
		} else if (ds_grow((void **)&z->tmp, &z->tmp_cap, fcs ? (size_t)fcs : 1, 1) < 0) {
			rc = -ENOMEM;
		} else {
			got =
			    ZSTD_decompressDCtx(z->dctx, z->tmp, (size_t)fcs, orig.data, orig.len);
			if (ZSTD_isError(got) || got != fcs) {
				rc = -EBADMSG;
			} else {
				r->payload.data = z->tmp;
				r->payload.len = got;
				r->has_compression = 0;
				r->compression = DRASYNC__COMPRESSION__COMPRESSION_NONE;
				rc = plain_put(z, used, r, NULL);
				r->payload = orig; /* free_unpacked frees what unpack made */
			}
		}
	} else {
		rc = plain_put(z, used, NULL, blob);
	}
	drasync__record__free_unpacked(r, NULL);
	return rc;
}

/*
 * A batch far over the usual (a snapshot end's manifest: 6.8 MB at 100,000
 * objects) does not keep its buffers for the batches after it: kept, they
 * were the source's resident memory from then on.
 */
#define KEEP_BYTES (2 * MiB)

static void zbatcher_shrink(ds_wire_zbatcher *z)
{
	if (z->plain_cap > KEEP_BYTES) {
		free(z->plain);
		z->plain = NULL;
		z->plain_cap = 0;
	}
	if (z->zcap > KEEP_BYTES) {
		free(z->zbuf);
		z->zbuf = NULL;
		z->zcap = 0;
	}
	if (z->tmp_cap > KEEP_BYTES) {
		free(z->tmp);
		z->tmp = NULL;
		z->tmp_cap = 0;
	}
}

static int zbatch_encode(ds_wire_zbatcher *z, const ds_wire_blob *records, size_t n, uint8_t **out,
			 size_t *len, uint64_t *plain_bytes)
{
	Drasync__Envelope env = DRASYNC__ENVELOPE__INIT;
	Drasync__ZBatch m = DRASYNC__ZBATCH__INIT;
	size_t used = 0, classic = 0, zlen, total;
	uint64_t json = 0;
	uint8_t *buf;
	int rc;

	for (size_t i = 0; i < n; i++) {
		rc = add_record(z, &records[i], &used, &json);
		if (rc < 0)
			return rc;
		classic += ds_wire_batch_cost(records[i].len);
	}
	classic += 1 + ds_wire_varint_len(classic);
	if (ds_grow((void **)&z->zbuf, &z->zcap, ZSTD_compressBound(used), 1) < 0)
		return -ENOMEM;
	zlen = ZSTD_compress2(z->cctx, z->zbuf, z->zcap, z->plain, used);
	if (ZSTD_isError(zlen))
		return -E2BIG;
	m.raw_size = used;
	m.frame.data = z->zbuf;
	m.frame.len = zlen;
	env.body_case = DRASYNC__ENVELOPE__BODY_ZBATCH;
	env.zbatch = &m;
	total = drasync__envelope__get_packed_size(&env);
	if (total >= classic)
		return -E2BIG; /* compression with context does not pay: a Batch then */
	buf = malloc(total);
	if (!buf)
		return -ENOMEM;
	drasync__envelope__pack(&env, buf);
	*out = buf;
	*len = total;
	if (plain_bytes)
		*plain_bytes = json;
	return 0;
}

int ds_wire_zbatch_encode(ds_wire_zbatcher *z, const ds_wire_blob *records, size_t n, uint8_t **out,
			  size_t *len, uint64_t *plain_bytes)
{
	int rc = zbatch_encode(z, records, n, out, len, plain_bytes);

	zbatcher_shrink(z);
	return rc;
}

/* ---- decoding ---------------------------------------------------------- */

/* RFC 8878: magic 0xFD2FB528, then the frame header descriptor, bit 2 = content checksum. */
static int has_checksum(const uint8_t *p, size_t len)
{
	return len >= 5 && p[0] == 0x28 && p[1] == 0xB5 && p[2] == 0x2F && p[3] == 0xFD &&
	       (p[4] & 0x04);
}

/*
 * A payload the store keeps plain must match its SHA-256, as a Batch's plain
 * ones do (what the store keeps compressed carries a checksum of the bytes the
 * ZBatch's own checksum vouched for).
 */
static bool plain_ok(const ds_record *rec, ds_err *err)
{
	uint8_t h[DS_HASH_LEN];

	ds_record_hash(rec->payload, rec->payload_len, h);
	if (memcmp(h, rec->content_hash, DS_HASH_LEN) == 0)
		return true;
	ds_err_set(err, "record seq %llu: payload does not match its content hash",
		   (unsigned long long)rec->seq);
	return false;
}

/* Each plain payload of STORE_THRESHOLD bytes or more as its own zstd frame. */
static int recompress(ds_wire_decoder *dec, ds_wire_msg *msg, ds_err *err)
{
	size_t n = msg->n_records;

	msg->stored = ds_wire_budget_alloc(&msg->budget, n * sizeof(*msg->stored));
	if (!msg->stored) {
		ds_err_set(err, "batch over the memory limit");
		return -E2BIG;
	}
	memset(msg->stored, 0, n * sizeof(*msg->stored));
	for (size_t i = 0; i < n; i++) {
		const Drasync__Record *r = msg->batch->records[i];
		const ds_record *rec = &msg->records[i];
		size_t bound, zlen;
		uint8_t *buf;

		if (!rec->payload_len || (r->has_compression &&
					  r->compression != DRASYNC__COMPRESSION__COMPRESSION_NONE))
			continue; /* no payload, or its own frame, which zstd checked */
		if (rec->payload_len < STORE_THRESHOLD) {
			if (!plain_ok(rec, err))
				return -EBADMSG;
			continue; /* stored plain, as the outbox would */
		}
		if (!dec->cctx && !(dec->cctx = new_cctx(STORE_LEVEL)))
			return ds_err_fallback(err, -ENOMEM);
		bound = ZSTD_compressBound(rec->payload_len);
		buf = ds_wire_budget_alloc(&msg->budget, bound);
		if (!buf) {
			ds_err_set(err,
				   "record seq %llu: re-compressed payloads over the memory limit",
				   (unsigned long long)rec->seq);
			return -E2BIG;
		}
		zlen = ZSTD_compress2(dec->cctx, buf, bound, rec->payload, rec->payload_len);
		if (ZSTD_isError(zlen) || zlen >= rec->payload_len) {
			ds_wire_budget_free(&msg->budget, buf);
			if (!plain_ok(rec, err))
				return -EBADMSG;
			continue; /* kept plain, as the outbox would */
		}
		msg->stored[i].data = buf;
		msg->stored[i].len = zlen;
	}
	return 0;
}

int ds_wire_decode_zbatch(ds_wire_decoder *dec, ds_wire_msg *msg, ds_err *err)
{
	const Drasync__ZBatch *zb = msg->env->zbatch;
	size_t limit = dec->lim.max_zbatch ? dec->lim.max_zbatch : 32 * MiB;
	unsigned long long raw = (unsigned long long)zb->raw_size, fcs;
	uint8_t *buf;
	size_t got;
	int rc;

	if (raw == 0 || raw > limit) {
		ds_err_set(err, "zbatch of %llu bytes declared: %s", raw,
			   raw ? "over the limit" : "empty");
		return raw ? -E2BIG : -EBADMSG;
	}
	if (!has_checksum(zb->frame.data, zb->frame.len)) {
		ds_err_set(err, "zbatch frame is not zstd with a content checksum");
		return -EBADMSG;
	}
	fcs = ZSTD_getFrameContentSize(zb->frame.data, zb->frame.len);
	if (fcs != raw) {
		ds_err_set(err, "zbatch frame size does not match the declared %llu bytes", raw);
		return -EBADMSG;
	}
	buf = ds_wire_budget_alloc(&msg->budget, (size_t)raw);
	if (!buf) {
		ds_err_set(err, "zbatch of %llu bytes over the memory limit", raw);
		return -E2BIG;
	}
	got = ZSTD_decompressDCtx(dec->dctx, buf, (size_t)raw, zb->frame.data, zb->frame.len);
	if (ZSTD_isError(got) || got != raw) {
		ds_err_set(err, "corrupt zbatch frame (%s)",
			   ZSTD_isError(got) ? ZSTD_getErrorName(got) : "short");
		ds_wire_budget_free(&msg->budget, buf);
		return -EBADMSG;
	}
	/* protobuf-c copies what it keeps: the decompressed bytes can go. */
	msg->zbatch = drasync__batch__unpack(&msg->alloc, (size_t)raw, buf);
	ds_wire_budget_free(&msg->budget, buf);
	if (!msg->zbatch) {
		ds_err_set(err, "zbatch does not hold a valid protobuf Batch (or over the memory "
				"limit)");
		return -EBADMSG;
	}
	msg->batch = msg->zbatch;
	rc = ds_wire_decode_records(dec, msg, err);
	if (rc < 0)
		return rc;
	return recompress(dec, msg, err);
}

uint64_t ds_wire_msg_json_bytes(const ds_wire_msg *msg)
{
	uint64_t sum = 0;

	for (size_t i = 0; msg->kind == DS_WIRE_BATCH && i < msg->n_records; i++)
		sum += msg->records[i].payload_len;
	return sum;
}

void ds_wire_zbatch_free(ds_wire_msg *msg)
{
	if (msg->stored) {
		for (size_t i = 0; i < msg->n_records; i++)
			ds_wire_budget_free(&msg->budget, (void *)(uintptr_t)msg->stored[i].data);
		ds_wire_budget_free(&msg->budget, msg->stored);
		msg->stored = NULL;
	}
	if (msg->zbatch)
		drasync__batch__free_unpacked(msg->zbatch, &msg->alloc);
	msg->zbatch = NULL;
}
