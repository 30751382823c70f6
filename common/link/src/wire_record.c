/*
 * One record for the wire: the source's encoder (the outbox stores what it
 * makes; wire.c's batches concatenate it, never re-encode it), and the checks
 * the decoder shares with it.
 */
#include "drasync/wire.h"

#include "drasync/buf.h"
#include "drasync.pb-c.h"
#include "wire_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

/* protobuf-c's structs take `char *` for strings it only reads. */
static char *str(const char *s)
{
	return (char *)(uintptr_t)(s ? s : "");
}

struct ds_wire_encoder {
	ZSTD_CCtx *cctx;
	int level;
	size_t threshold;
	uint8_t *zbuf;
	size_t zcap;
};

int ds_wire_encoder_new(ds_wire_encoder **out, int zstd_level, size_t threshold)
{
	ds_wire_encoder *enc = calloc(1, sizeof(*enc));

	if (!enc)
		return -ENOMEM;
	enc->cctx = ZSTD_createCCtx();
	if (!enc->cctx) {
		free(enc);
		return -ENOMEM;
	}
	enc->level = zstd_level;
	enc->threshold = threshold;
	/* The frame carries an XXH64 checksum of the content: the target checks it
	 * while decompressing, at a fraction of the cost of re-hashing. */
	if (ZSTD_isError(ZSTD_CCtx_setParameter(enc->cctx, ZSTD_c_compressionLevel, zstd_level)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(enc->cctx, ZSTD_c_checksumFlag, 1))) {
		ZSTD_freeCCtx(enc->cctx);
		free(enc);
		return -EINVAL;
	}
	*out = enc;
	return 0;
}

void ds_wire_encoder_free(ds_wire_encoder *enc)
{
	if (!enc)
		return;
	ZSTD_freeCCtx(enc->cctx);
	free(enc->zbuf);
	free(enc);
}

/* A relocation's namespace: a DNS label (RFC 1123), as the API server checks it. */
bool ds_wire_relocate_ns_ok(const char *ns)
{
	size_t n = ns ? strlen(ns) : 0;

	if (n == 0 || n > 63 || ns[0] == '-' || ns[n - 1] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((ns[i] >= 'a' && ns[i] <= 'z') || (ns[i] >= '0' && ns[i] <= '9') ||
		      ns[i] == '-'))
			return false;
	return true;
}

/*
 * Record.snapshot_end (field 11, the last, so protobuf-c would put it here too)
 * written straight from rec's manifest: no protobuf-c message an entry, which
 * cost the source 5.6 MB beside the packed bytes at 100,000 objects (issue 23
 * item 6). The bytes are those drasync__record__pack() makes; test_wire's
 * round trips decode them.
 */
#define ENTRY_FIXED (1 + 1 + 1 + DS_HASH_LEN) /* key's tag, hash's tag and length, hash */

static size_t entry_len(const ds_manifest_entry *e)
{
	size_t k = strlen(str(e->key));

	return ENTRY_FIXED + ds_wire_varint_len(k) + k;
}

static size_t snapshot_end_len(const ds_record *rec)
{
	size_t id = strlen(rec->snapshot_id), n = 1 + ds_wire_varint_len(id) + id;

	for (size_t i = 0; i < rec->manifest_len; i++) {
		size_t e = entry_len(&rec->manifest[i]);
		n += 1 + ds_wire_varint_len(e) + e;
	}
	if (rec->parts_left)
		n += 1 + ds_wire_varint_len(rec->parts_left);
	return n;
}

static void snapshot_end_put(const ds_record *rec, size_t se_len, uint8_t *p)
{
	size_t id = strlen(rec->snapshot_id);

	*p++ = (11 << 3) | 2; /* Record.snapshot_end */
	p = ds_wire_varint_put(p, se_len);
	*p++ = (1 << 3) | 2; /* SnapshotEnd.snapshot_id */
	p = ds_wire_varint_put(p, id);
	memcpy(p, rec->snapshot_id, id);
	p += id;
	for (size_t i = 0; i < rec->manifest_len; i++) {
		const char *key = str(rec->manifest[i].key);
		size_t k = strlen(key);

		*p++ = (2 << 3) | 2; /* SnapshotEnd.manifest */
		p = ds_wire_varint_put(p, entry_len(&rec->manifest[i]));
		*p++ = (1 << 3) | 2; /* ManifestEntry.key */
		p = ds_wire_varint_put(p, k);
		memcpy(p, key, k);
		p += k;
		*p++ = (2 << 3) | 2; /* ManifestEntry.content_hash */
		*p++ = DS_HASH_LEN;
		memcpy(p, rec->manifest[i].content_hash, DS_HASH_LEN);
		p += DS_HASH_LEN;
	}
	if (rec->parts_left) {
		*p++ = (3 << 3) | 0; /* SnapshotEnd.parts_left */
		ds_wire_varint_put(p, rec->parts_left);
	}
}

/* A part needs 1..DS_MANIFEST_MAX_PARTS records after it; any other record none. */
bool ds_wire_parts_left_ok(enum ds_record_op op, uint32_t parts_left)
{
	if (op == DS_RECORD_SNAPSHOT_PART)
		return parts_left >= 1 && parts_left < DS_MANIFEST_MAX_PARTS;
	return parts_left == 0;
}

int ds_wire_record_encode(ds_wire_encoder *enc, const ds_record *rec, uint8_t **out, size_t *len,
			  ds_err *err)
{
	Drasync__Record m = DRASYNC__RECORD__INIT;
	Drasync__ObjectRef ref = DRASYNC__OBJECT_REF__INIT;
	Drasync__SnapshotBegin sb = DRASYNC__SNAPSHOT_BEGIN__INIT;
	uint8_t *buf = NULL;
	size_t n, se_len = 0;
	int rc = 0;

	if ((int)rec->op <= 0 || rec->op >= DS_RECORD_OP_MAX) {
		ds_err_set(err, "record op %d is not valid", (int)rec->op);
		return -EINVAL;
	}
	m.epoch = rec->epoch;
	m.seq = rec->seq;
	m.op = (Drasync__Op)rec->op;
	m.has_content_hash = 1;
	m.content_hash.data = (uint8_t *)(uintptr_t)rec->content_hash;
	m.content_hash.len = DS_HASH_LEN;
	if (rec->op == DS_RECORD_UPSERT || rec->op == DS_RECORD_DELETE) {
		if (!rec->kind || !rec->kind[0] || !rec->name || !rec->name[0] ||
		    !rec->api_version || !rec->api_version[0]) {
			ds_err_set(err, "record %llu: apiVersion, kind and name are required",
				   (unsigned long long)rec->seq);
			return -EINVAL;
		}
		ref.api_version = str(rec->api_version);
		ref.kind = str(rec->kind);
		ref.namespace_ = str(rec->ns);
		ref.name = str(rec->name);
		ref.source_uid = str(rec->source_uid);
		ref.source_resource_version = str(rec->source_resource_version);
		m.ref = &ref;
	}
	if (rec->op == DS_RECORD_RELOCATE) {
		if (!ds_wire_relocate_ns_ok(rec->ns)) {
			ds_err_set(err, "record %llu: a relocation needs a namespace (a DNS label)",
				   (unsigned long long)rec->seq);
			return -EINVAL;
		}
		ref.namespace_ = str(rec->ns);
		m.ref = &ref;
	}
	if (rec->op == DS_RECORD_SNAPSHOT_BEGIN || rec->op == DS_RECORD_SNAPSHOT_END ||
	    rec->op == DS_RECORD_SNAPSHOT_PART) {
		if (!rec->snapshot_id || !rec->snapshot_id[0]) {
			ds_err_set(err, "record %llu: a snapshot marker needs a snapshot id",
				   (unsigned long long)rec->seq);
			return -EINVAL;
		}
	}
	if (!ds_wire_parts_left_ok(rec->op, rec->parts_left)) {
		ds_err_set(err, "record %llu: parts_left %u is not valid for a %s record",
			   (unsigned long long)rec->seq, rec->parts_left,
			   ds_record_op_name(rec->op));
		return -EINVAL;
	}
	if (rec->op == DS_RECORD_SNAPSHOT_BEGIN) {
		sb.snapshot_id = str(rec->snapshot_id);
		m.snapshot_begin = &sb;
	}
	if (rec->payload_len) {
		m.has_encoding = 1;
		m.encoding = DRASYNC__ENCODING__ENCODING_JSON;
		m.has_raw_size = 1;
		m.raw_size = rec->payload_len;
		m.has_payload = 1;
		m.payload.data = (uint8_t *)(uintptr_t)rec->payload;
		m.payload.len = rec->payload_len;
		if (rec->payload_len >= enc->threshold) {
			size_t bound = ZSTD_compressBound(rec->payload_len);
			size_t z;
			if (ds_grow((void **)&enc->zbuf, &enc->zcap, bound, 1) < 0) {
				rc = -ENOMEM;
				goto out;
			}
			z = ZSTD_compress2(enc->cctx, enc->zbuf, enc->zcap, rec->payload,
					   rec->payload_len);
			/* Keep it plain when compression does not pay. */
			if (!ZSTD_isError(z) && z < rec->payload_len) {
				m.has_compression = 1;
				m.compression = DRASYNC__COMPRESSION__COMPRESSION_ZSTD;
				m.payload.data = enc->zbuf;
				m.payload.len = z;
			}
		}
	}
	n = drasync__record__get_packed_size(&m);
	if (rec->op == DS_RECORD_SNAPSHOT_END || rec->op == DS_RECORD_SNAPSHOT_PART) {
		se_len = snapshot_end_len(rec);
		n += 1 + ds_wire_varint_len(se_len) + se_len;
	}
	buf = malloc(n ? n : 1);
	if (!buf) {
		rc = -ENOMEM;
		goto out;
	}
	if (rec->op == DS_RECORD_SNAPSHOT_END || rec->op == DS_RECORD_SNAPSHOT_PART)
		snapshot_end_put(rec, se_len, buf + drasync__record__pack(&m, buf));
	else
		drasync__record__pack(&m, buf);
	*out = buf;
	*len = n;
out:
	return ds_err_fallback(err, rc);
}
