#include "drasync/wire.h"

#include "drasync.pb-c.h"
#include "wire_internal.h"

#include <errno.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#define MiB (1024u * 1024u)

void ds_wire_limits_default(ds_wire_limits *lim)
{
	lim->max_frame = 8 * MiB;
	lim->max_record = 16 * MiB;
	lim->max_decoded = 128 * MiB;
	lim->max_batch = 4096;
	lim->max_zbatch = 32 * MiB;
}

/* ---- encoding ---------------------------------------------------------- */

static int pack_envelope(const Drasync__Envelope *env, uint8_t **out, size_t *len)
{
	size_t n = drasync__envelope__get_packed_size(env);
	uint8_t *buf = malloc(n ? n : 1);

	if (!buf)
		return -ENOMEM;
	drasync__envelope__pack(env, buf);
	*out = buf;
	*len = n;
	return 0;
}

/* protobuf-c's structs take `char *` for strings it only reads. */
static char *str(const char *s)
{
	return (char *)(uintptr_t)(s ? s : "");
}

int ds_wire_hello_encode(const ds_wire_hello *h, uint8_t **out, size_t *len)
{
	Drasync__Envelope env = DRASYNC__ENVELOPE__INIT;
	Drasync__Hello m = DRASYNC__HELLO__INIT;
	char *caps[] = {str("zstd"), str("snapshot"), str(DS_CAP_APPLY_RESULTS),
			str(DS_CAP_MANIFEST_PARTS), str(DS_CAP_ZBATCH)};

	m.protocol_version = h->protocol_version;
	m.cluster_name = str(h->cluster_name);
	m.agent_version = str(h->agent_version);
	m.epoch = h->epoch;
	m.n_capabilities = h->zbatch ? 5 : 4;
	m.capabilities = caps;
	env.body_case = DRASYNC__ENVELOPE__BODY_HELLO;
	env.hello = &m;
	return pack_envelope(&env, out, len);
}

int ds_wire_welcome_encode(const ds_wire_welcome *w, uint8_t **out, size_t *len)
{
	Drasync__Envelope env = DRASYNC__ENVELOPE__INIT;
	Drasync__Welcome m = DRASYNC__WELCOME__INIT;
	char *caps[5] = {str("zstd"), str("snapshot")};
	size_t n_caps = 2;

	if (w->apply_results)
		caps[n_caps++] = str(DS_CAP_APPLY_RESULTS);
	if (w->zbatch)
		caps[n_caps++] = str(DS_CAP_ZBATCH);
	if (w->manifest_parts)
		caps[n_caps++] = str(DS_CAP_MANIFEST_PARTS);
	m.protocol_version = w->protocol_version;
	m.agent_version = str(w->agent_version);
	m.epoch = w->epoch;
	m.committed_seq = w->committed_seq;
	m.credit = w->credit;
	m.n_capabilities = n_caps;
	m.capabilities = caps;
	m.source_name = str(w->source_name);
	env.body_case = DRASYNC__ENVELOPE__BODY_WELCOME;
	env.welcome = &m;
	return pack_envelope(&env, out, len);
}

/* Protobuf results for v[0..n), in res/ptrs (caller frees both). @return 0 or -ENOMEM */
static int results_out(const ds_wire_result *v, size_t n, Drasync__RecordResult **res,
		       Drasync__RecordResult ***ptrs)
{
	*res = NULL;
	*ptrs = NULL;
	if (!n)
		return 0;
	*res = calloc(n, sizeof(**res));
	*ptrs = calloc(n, sizeof(**ptrs));
	if (!*res || !*ptrs)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		Drasync__RecordResult init = DRASYNC__RECORD_RESULT__INIT;
		(*res)[i] = init;
		(*res)[i].seq = v[i].seq;
		(*res)[i].status = (Drasync__ResultStatus)v[i].status;
		if (v[i].message && v[i].message[0])
			(*res)[i].message = str(v[i].message);
		(*ptrs)[i] = &(*res)[i];
	}
	return 0;
}

int ds_wire_ack_encode(const ds_wire_ack *a, uint8_t **out, size_t *len)
{
	Drasync__Envelope env = DRASYNC__ENVELOPE__INIT;
	Drasync__Ack m = DRASYNC__ACK__INIT;
	Drasync__RecordResult *res = NULL, **ptrs = NULL, *app = NULL, **app_ptrs = NULL;
	int rc;

	rc = results_out(a->results, a->n_results, &res, &ptrs);
	if (rc == 0)
		rc = results_out(a->applied, a->n_applied, &app, &app_ptrs);
	if (rc < 0)
		goto out;
	m.epoch = a->epoch;
	m.committed_seq = a->committed_seq;
	m.credit = a->credit;
	m.n_results = a->n_results;
	m.results = ptrs;
	m.n_applied = a->n_applied;
	m.applied = app_ptrs;
	m.has_unapplied = a->unapplied > 0;
	m.unapplied = a->unapplied;
	env.body_case = DRASYNC__ENVELOPE__BODY_ACK;
	env.ack = &m;
	rc = pack_envelope(&env, out, len);
out:
	free(res);
	free(ptrs);
	free(app);
	free(app_ptrs);
	return rc;
}

int ds_wire_goodbye_encode(const char *reason, uint8_t **out, size_t *len)
{
	Drasync__Envelope env = DRASYNC__ENVELOPE__INIT;
	Drasync__Goodbye m = DRASYNC__GOODBYE__INIT;

	m.reason = str(reason);
	env.body_case = DRASYNC__ENVELOPE__BODY_GOODBYE;
	env.goodbye = &m;
	return pack_envelope(&env, out, len);
}

size_t ds_wire_batch_cost(size_t record_len)
{
	return 1 + ds_wire_varint_len(record_len) + record_len;
}

/*
 * Envelope{batch = 3: Batch{records = 1: Record...}} written by hand: a
 * repeated message field is tag, length, bytes, so the records encoded once
 * in the outbox are copied into the frame without being decoded again.
 */
int ds_wire_batch_encode(const ds_wire_blob *records, size_t n, uint8_t **out, size_t *len)
{
	size_t inner = 0, total;
	uint8_t *buf, *p;

	for (size_t i = 0; i < n; i++)
		inner += ds_wire_batch_cost(records[i].len);
	total = 1 + ds_wire_varint_len(inner) + inner;
	buf = malloc(total);
	if (!buf)
		return -ENOMEM;
	p = buf;
	*p++ = (3 << 3) | 2; /* Envelope.batch, length-delimited */
	p = ds_wire_varint_put(p, inner);
	for (size_t i = 0; i < n; i++) {
		*p++ = (1 << 3) | 2; /* Batch.records, length-delimited */
		p = ds_wire_varint_put(p, records[i].len);
		if (records[i].len)
			memcpy(p, records[i].data, records[i].len);
		p += records[i].len;
	}
	*out = buf;
	*len = total;
	return 0;
}

/* ---- decoding ---------------------------------------------------------- */

#define HDR (alignof(max_align_t) > sizeof(size_t) ? alignof(max_align_t) : sizeof(size_t))

void *ds_wire_budget_alloc(void *data, size_t size)
{
	struct budget *b = data;
	unsigned char *p;

	if (size > b->limit - b->used || HDR + size > b->limit - b->used)
		return NULL;
	p = malloc(HDR + size);
	if (!p)
		return NULL;
	b->used += HDR + size;
	memcpy(p, &size, sizeof(size));
	return p + HDR;
}

void ds_wire_budget_free(void *data, void *ptr)
{
	struct budget *b = data;
	unsigned char *p = ptr;
	size_t size;

	if (!p)
		return;
	p -= HDR;
	memcpy(&size, p, sizeof(size));
	b->used -= HDR + size;
	free(p);
}

int ds_wire_decoder_new(ds_wire_decoder **out, const ds_wire_limits *lim)
{
	ds_wire_decoder *dec = calloc(1, sizeof(*dec));

	if (!dec)
		return -ENOMEM;
	if (lim)
		dec->lim = *lim;
	else
		ds_wire_limits_default(&dec->lim);
	dec->dctx = ZSTD_createDCtx();
	if (!dec->dctx) {
		free(dec);
		return -ENOMEM;
	}
	*out = dec;
	return 0;
}

void ds_wire_decoder_free(ds_wire_decoder *dec)
{
	if (!dec)
		return;
	ZSTD_freeDCtx(dec->dctx);
	ZSTD_freeCCtx(dec->cctx);
	free(dec);
}

void ds_wire_msg_free(ds_wire_msg *msg)
{
	if (!msg)
		return;
	for (size_t i = 0; i < msg->n_records; i++) {
		if (msg->inflated)
			ds_wire_budget_free(&msg->budget, msg->inflated[i]);
		if (msg->manifests)
			ds_wire_budget_free(&msg->budget, msg->manifests[i]);
	}
	ds_wire_budget_free(&msg->budget, msg->inflated);
	ds_wire_budget_free(&msg->budget, msg->manifests);
	ds_wire_budget_free(&msg->budget, msg->records);
	ds_wire_budget_free(&msg->budget, msg->results);
	ds_wire_budget_free(&msg->budget, msg->applied);
	ds_wire_zbatch_free(msg);
	if (msg->env)
		drasync__envelope__free_unpacked(msg->env, &msg->alloc);
	ds_wire_arena_release(&msg->arena);
	free(msg);
}

static void *charge(ds_wire_msg *msg, size_t n, size_t size)
{
	void *p;

	if (n == 0)
		return NULL;
	if (size && n > SIZE_MAX / size)
		return NULL;
	p = ds_wire_budget_alloc(&msg->budget, n * size);
	if (p)
		memset(p, 0, n * size);
	return p;
}

/* RFC 8878: magic 0xFD2FB528, then the frame header descriptor, bit 2 = content checksum. */
static int zstd_has_checksum(const uint8_t *p, size_t len)
{
	return len >= 5 && p[0] == 0x28 && p[1] == 0xB5 && p[2] == 0x2F && p[3] == 0xFD &&
	       (p[4] & 0x04);
}

static int hash_ok(const ProtobufCBinaryData *h)
{
	return h->len == DS_HASH_LEN;
}

static int decode_record(ds_wire_decoder *dec, ds_wire_msg *msg, size_t i, ds_err *err)
{
	const Drasync__Record *r = msg->batch->records[i];
	ds_record *out = &msg->records[i];
	unsigned long long seq = (unsigned long long)r->seq;

	if ((int)r->op <= 0 || (int)r->op >= DS_RECORD_OP_MAX) {
		ds_err_set(err, "record seq %llu: unknown op %d", seq, (int)r->op);
		return -EBADMSG;
	}
	if (r->seq == 0) {
		ds_err_set(err, "record seq 0 is not valid (seq starts at 1)");
		return -EBADMSG;
	}
	if (!r->has_content_hash || !hash_ok(&r->content_hash)) {
		ds_err_set(err, "record seq %llu: content hash missing or not 32 bytes", seq);
		return -EBADMSG;
	}
	out->epoch = r->epoch;
	out->seq = r->seq;
	out->op = (enum ds_record_op)r->op;
	memcpy(out->content_hash, r->content_hash.data, DS_HASH_LEN);
	if (out->op == DS_RECORD_UPSERT || out->op == DS_RECORD_DELETE) {
		const Drasync__ObjectRef *ref = r->ref;
		if (!ref || !ref->api_version || !ref->api_version[0] || !ref->kind ||
		    !ref->kind[0] || !ref->name || !ref->name[0]) {
			ds_err_set(err,
				   "record seq %llu: object reference without apiVersion, kind "
				   "or name",
				   seq);
			return -EBADMSG;
		}
		out->api_version = ref->api_version;
		out->kind = ref->kind;
		out->ns = ref->namespace_ ? ref->namespace_ : "";
		out->name = ref->name;
		out->source_uid = ref->source_uid ? ref->source_uid : "";
		out->source_resource_version =
		    ref->source_resource_version ? ref->source_resource_version : "";
	}
	if (out->op == DS_RECORD_RELOCATE) {
		if (!r->ref || !ds_wire_relocate_ns_ok(r->ref->namespace_) || r->has_payload) {
			ds_err_set(
			    err,
			    "record seq %llu: a relocation without a valid namespace, or with "
			    "a payload",
			    seq);
			return -EBADMSG;
		}
		out->ns = r->ref->namespace_;
	}
	if (out->op == DS_RECORD_SNAPSHOT_BEGIN) {
		if (!r->snapshot_begin || !r->snapshot_begin->snapshot_id[0]) {
			ds_err_set(err, "record seq %llu: snapshot-begin without a snapshot id",
				   seq);
			return -EBADMSG;
		}
		out->snapshot_id = r->snapshot_begin->snapshot_id;
	}
	if (out->op == DS_RECORD_SNAPSHOT_END || out->op == DS_RECORD_SNAPSHOT_PART) {
		const Drasync__SnapshotEnd *se = r->snapshot_end;
		uint32_t left = se && se->has_parts_left ? se->parts_left : 0;

		if (!se || !se->snapshot_id[0]) {
			ds_err_set(err, "record seq %llu: %s without a snapshot id", seq,
				   ds_record_op_name(out->op));
			return -EBADMSG;
		}
		if (!ds_wire_parts_left_ok(out->op, left)) {
			ds_err_set(
			    err, "record seq %llu: %s with parts_left %u (a part needs 1..%u)", seq,
			    ds_record_op_name(out->op), left, DS_MANIFEST_MAX_PARTS - 1);
			return -EBADMSG;
		}
		out->snapshot_id = se->snapshot_id;
		out->parts_left = left;
		if (se->n_manifest) {
			ds_manifest_entry *m = charge(msg, se->n_manifest, sizeof(*m));
			if (!m) {
				ds_err_set(err, "record seq %llu: manifest over the memory limit",
					   seq);
				return -E2BIG;
			}
			msg->manifests[i] = m;
			for (size_t k = 0; k < se->n_manifest; k++) {
				if (!hash_ok(&se->manifest[k]->content_hash)) {
					ds_err_set(err,
						   "record seq %llu: manifest entry %zu: hash "
						   "not 32 bytes",
						   seq, k);
					return -EBADMSG;
				}
				m[k].key = se->manifest[k]->key;
				memcpy(m[k].content_hash, se->manifest[k]->content_hash.data,
				       DS_HASH_LEN);
			}
			out->manifest = m;
			out->manifest_len = se->n_manifest;
		}
	}
	if (r->has_payload && r->payload.len) {
		uint64_t raw = r->has_raw_size ? r->raw_size : r->payload.len;
		uint8_t h[DS_HASH_LEN];
		if (r->has_encoding && r->encoding != DRASYNC__ENCODING__ENCODING_JSON) {
			ds_err_set(err, "record seq %llu: unknown payload encoding %d", seq,
				   (int)r->encoding);
			return -EBADMSG;
		}
		if (raw > dec->lim.max_record) {
			ds_err_set(err,
				   "record seq %llu: payload of %llu bytes over the limit of "
				   "%zu",
				   seq, (unsigned long long)raw, dec->lim.max_record);
			return -E2BIG;
		}
		if (!r->has_compression ||
		    r->compression == DRASYNC__COMPRESSION__COMPRESSION_NONE) {
			if (raw != r->payload.len) {
				ds_err_set(err,
					   "record seq %llu: raw size %llu but %zu payload "
					   "bytes",
					   seq, (unsigned long long)raw, r->payload.len);
				return -EBADMSG;
			}
			out->payload = r->payload.data;
			out->payload_len = r->payload.len;
		} else if (r->compression == DRASYNC__COMPRESSION__COMPRESSION_ZSTD) {
			unsigned long long fcs =
			    ZSTD_getFrameContentSize(r->payload.data, r->payload.len);
			uint8_t *buf;
			size_t got;
			if (!zstd_has_checksum(r->payload.data, r->payload.len)) {
				ds_err_set(err,
					   "record seq %llu: zstd payload without a content "
					   "checksum",
					   seq);
				return -EBADMSG;
			}
			if (fcs != raw || raw == 0) {
				ds_err_set(err,
					   "record seq %llu: zstd frame size does not match the "
					   "declared %llu bytes",
					   seq, (unsigned long long)raw);
				return -EBADMSG;
			}
			buf = ds_wire_budget_alloc(&msg->budget, (size_t)raw);
			if (!buf) {
				ds_err_set(err,
					   "record seq %llu: decompressed payloads over the "
					   "memory limit",
					   seq);
				return -E2BIG;
			}
			msg->inflated[i] = buf;
			got = ZSTD_decompressDCtx(dec->dctx, buf, (size_t)raw, r->payload.data,
						  r->payload.len);
			if (ZSTD_isError(got) || got != raw) {
				ds_err_set(err, "record seq %llu: corrupt zstd payload (%s)", seq,
					   ZSTD_isError(got) ? ZSTD_getErrorName(got) : "short");
				return -EBADMSG;
			}
			out->payload = buf;
			out->payload_len = (size_t)raw;
		} else {
			ds_err_set(err, "record seq %llu: unknown compression %d", seq,
				   (int)r->compression);
			return -EBADMSG;
		}
		/* A compressed payload was checked by zstd against its XXH64 checksum
		 * (and by CURVE's MAC in transit), so was one of a ZBatch (the checksum
		 * of the whole batch; what the store keeps plain is hashed then); a
		 * plain one is checked here. */
		if (out->payload == r->payload.data && !msg->zbatch) {
			ds_record_hash(out->payload, out->payload_len, h);
			if (memcmp(h, out->content_hash, DS_HASH_LEN) != 0) {
				ds_err_set(err,
					   "record seq %llu: payload does not match its "
					   "content hash",
					   seq);
				return -EBADMSG;
			}
		}
	} else if (out->op == DS_RECORD_UPSERT) {
		ds_err_set(err, "record seq %llu: upsert without a payload", seq);
		return -EBADMSG;
	}
	return 0;
}

int ds_wire_decode_records(ds_wire_decoder *dec, ds_wire_msg *msg, ds_err *err)
{
	const Drasync__Batch *b = msg->batch;
	int rc;

	if (b->n_records == 0) {
		ds_err_set(err, "empty batch");
		return -EBADMSG;
	}
	if (b->n_records > dec->lim.max_batch) {
		ds_err_set(err, "batch of %zu records over the limit of %zu", b->n_records,
			   dec->lim.max_batch);
		return -E2BIG;
	}
	msg->records = charge(msg, b->n_records, sizeof(*msg->records));
	msg->inflated = charge(msg, b->n_records, sizeof(*msg->inflated));
	msg->manifests = charge(msg, b->n_records, sizeof(*msg->manifests));
	if (!msg->records || !msg->inflated || !msg->manifests) {
		ds_err_set(err, "batch over the memory limit");
		return -E2BIG;
	}
	msg->n_records = b->n_records;
	for (size_t i = 0; i < b->n_records; i++) {
		rc = decode_record(dec, msg, i, err);
		if (rc < 0)
			return rc;
		if (i == 0)
			continue;
		if (msg->records[i].epoch != msg->records[0].epoch) {
			ds_err_set(err, "batch mixes epochs");
			return -EBADMSG;
		}
		if (msg->records[i].op == DS_RECORD_SNAPSHOT_BEGIN
			? msg->records[i].seq <= msg->records[i - 1].seq
			: msg->records[i].seq != msg->records[i - 1].seq + 1) {
			ds_err_set(err, "batch seq %llu follows %llu (not consecutive)",
				   (unsigned long long)msg->records[i].seq,
				   (unsigned long long)msg->records[i - 1].seq);
			return -EBADMSG;
		}
	}
	return 0;
}

/* An Ack's results into *out (charged to the message); statuses checked. */
static int results_in(ds_wire_msg *msg, const Drasync__RecordResult *const *v, size_t n,
		      ds_wire_result **out, ds_err *err)
{
	if (!n)
		return 0;
	*out = charge(msg, n, sizeof(**out));
	if (!*out) {
		ds_err_set(err, "ack over the memory limit");
		return -E2BIG;
	}
	for (size_t i = 0; i < n; i++) {
		if ((int)v[i]->status <= 0 || (int)v[i]->status >= DS_RESULT_STATUS_MAX) {
			ds_err_set(err, "ack: unknown result status %d", (int)v[i]->status);
			return -EBADMSG;
		}
		(*out)[i].seq = v[i]->seq;
		(*out)[i].status = (enum ds_result_status)v[i]->status;
		(*out)[i].message = v[i]->message ? v[i]->message : "";
	}
	return 0;
}

static int decode_body(ds_wire_decoder *dec, ds_wire_msg *msg, ds_err *err)
{
	int rc;

	Drasync__Envelope *env = msg->env;

	switch (env->body_case) {
	case DRASYNC__ENVELOPE__BODY_HELLO:
		msg->kind = DS_WIRE_HELLO;
		msg->u.hello.protocol_version = env->hello->protocol_version;
		msg->u.hello.cluster_name = env->hello->cluster_name;
		msg->u.hello.agent_version =
		    env->hello->agent_version ? env->hello->agent_version : "";
		msg->u.hello.epoch = env->hello->epoch;
		for (size_t i = 0; i < env->hello->n_capabilities; i++)
			if (env->hello->capabilities[i] &&
			    strcmp(env->hello->capabilities[i], DS_CAP_ZBATCH) == 0)
				msg->u.hello.zbatch = true;
		if (!env->hello->cluster_name[0] || env->hello->epoch == 0) {
			ds_err_set(err, "hello without a cluster name or epoch");
			return -EBADMSG;
		}
		return 0;
	case DRASYNC__ENVELOPE__BODY_WELCOME:
		msg->kind = DS_WIRE_WELCOME;
		msg->u.welcome.protocol_version = env->welcome->protocol_version;
		msg->u.welcome.agent_version =
		    env->welcome->agent_version ? env->welcome->agent_version : "";
		msg->u.welcome.epoch = env->welcome->epoch;
		msg->u.welcome.committed_seq = env->welcome->committed_seq;
		msg->u.welcome.credit = env->welcome->credit;
		msg->u.welcome.source_name =
		    env->welcome->source_name ? env->welcome->source_name : "";
		for (size_t i = 0; i < env->welcome->n_capabilities; i++)
			if (env->welcome->capabilities[i] &&
			    strcmp(env->welcome->capabilities[i], DS_CAP_APPLY_RESULTS) == 0)
				msg->u.welcome.apply_results = true;
			else if (env->welcome->capabilities[i] &&
				 strcmp(env->welcome->capabilities[i], DS_CAP_ZBATCH) == 0)
				msg->u.welcome.zbatch = true;
			else if (env->welcome->capabilities[i] &&
				 strcmp(env->welcome->capabilities[i], DS_CAP_MANIFEST_PARTS) == 0)
				msg->u.welcome.manifest_parts = true;
		return 0;
	case DRASYNC__ENVELOPE__BODY_ACK: {
		const Drasync__Ack *a = env->ack;
		msg->kind = DS_WIRE_ACK;
		msg->u.ack.epoch = a->epoch;
		msg->u.ack.committed_seq = a->committed_seq;
		msg->u.ack.credit = a->credit;
		msg->u.ack.unapplied = a->has_unapplied ? a->unapplied : 0;
		rc = results_in(msg, (const Drasync__RecordResult *const *)a->results, a->n_results,
				&msg->results, err);
		if (rc == 0)
			rc = results_in(msg, (const Drasync__RecordResult *const *)a->applied,
					a->n_applied, &msg->applied, err);
		if (rc < 0)
			return rc;
		msg->u.ack.results = msg->results;
		msg->u.ack.n_results = a->n_results;
		msg->u.ack.applied = msg->applied;
		msg->u.ack.n_applied = a->n_applied;
		return 0;
	}
	case DRASYNC__ENVELOPE__BODY_GOODBYE:
		msg->kind = DS_WIRE_GOODBYE;
		return 0;
	case DRASYNC__ENVELOPE__BODY_BATCH:
		msg->kind = DS_WIRE_BATCH;
		msg->batch = env->batch;
		return ds_wire_decode_records(dec, msg, err);
	case DRASYNC__ENVELOPE__BODY_ZBATCH:
		msg->kind = DS_WIRE_BATCH;
		return ds_wire_decode_zbatch(dec, msg, err);
	default:
		ds_err_set(err, "envelope without a known body");
		return -EBADMSG;
	}
}

int ds_wire_decode(ds_wire_decoder *dec, const void *frame, size_t len, ds_wire_msg **out,
		   ds_err *err)
{
	ds_wire_msg *msg;
	int rc;

	if (len > dec->lim.max_frame) {
		ds_err_set(err, "frame of %zu bytes over the limit of %zu", len,
			   dec->lim.max_frame);
		return -E2BIG;
	}
	msg = calloc(1, sizeof(*msg));
	if (!msg)
		return ds_err_fallback(err, -ENOMEM);
	msg->budget.limit = dec->lim.max_decoded;
	ds_wire_arena_init(&msg->arena, &msg->budget);
	msg->alloc.alloc = ds_wire_arena_alloc;
	msg->alloc.free = ds_wire_arena_free;
	msg->alloc.allocator_data = &msg->arena;
	msg->env = drasync__envelope__unpack(&msg->alloc, len, frame);
	if (!msg->env) {
		ds_err_set(err,
			   "not a valid protobuf Envelope (%zu bytes, or over the memory limit)",
			   len);
		rc = -EBADMSG;
		goto out;
	}
	rc = decode_body(dec, msg, err);
out:
	if (rc < 0) {
		ds_wire_msg_free(msg);
		return ds_err_fallback(err, rc);
	}
	*out = msg;
	return 0;
}

enum ds_wire_kind ds_wire_msg_kind(const ds_wire_msg *msg)
{
	return msg->kind;
}

const ds_wire_hello *ds_wire_msg_hello(const ds_wire_msg *msg)
{
	return msg->kind == DS_WIRE_HELLO ? &msg->u.hello : NULL;
}

const ds_wire_welcome *ds_wire_msg_welcome(const ds_wire_msg *msg)
{
	return msg->kind == DS_WIRE_WELCOME ? &msg->u.welcome : NULL;
}

const ds_wire_ack *ds_wire_msg_ack(const ds_wire_msg *msg)
{
	return msg->kind == DS_WIRE_ACK ? &msg->u.ack : NULL;
}

const char *ds_wire_msg_goodbye(const ds_wire_msg *msg)
{
	return msg->kind == DS_WIRE_GOODBYE ? msg->env->goodbye->reason : NULL;
}

size_t ds_wire_msg_record_count(const ds_wire_msg *msg)
{
	return msg->kind == DS_WIRE_BATCH ? msg->n_records : 0;
}

const ds_record *ds_wire_msg_record(const ds_wire_msg *msg, size_t i)
{
	return i < ds_wire_msg_record_count(msg) ? &msg->records[i] : NULL;
}

ds_wire_blob ds_wire_msg_record_wire_payload(const ds_wire_msg *msg, size_t i, int *zstd)
{
	ds_wire_blob b = {NULL, 0};
	const Drasync__Record *r;

	*zstd = 0;
	if (i >= ds_wire_msg_record_count(msg))
		return b;
	if (msg->stored && msg->stored[i].data) {
		*zstd = 1;
		return msg->stored[i];
	}
	r = msg->batch->records[i];
	if (!r->has_payload)
		return b;
	b.data = r->payload.data;
	b.len = r->payload.len;
	*zstd = r->has_compression && r->compression == DRASYNC__COMPRESSION__COMPRESSION_ZSTD;
	return b;
}

size_t ds_wire_payload_plain_len(const ds_wire_blob *in, int zstd)
{
	unsigned long long fcs;

	if (!zstd)
		return in->len;
	fcs = ZSTD_getFrameContentSize(in->data, in->len);
	if (fcs == ZSTD_CONTENTSIZE_UNKNOWN || fcs == ZSTD_CONTENTSIZE_ERROR || fcs > SIZE_MAX)
		return in->len;
	return (size_t)fcs;
}

int ds_wire_payload_inflate(const ds_wire_blob *in, int zstd, size_t max, uint8_t **out,
			    size_t *len)
{
	unsigned long long fcs;
	uint8_t *buf;
	size_t got;

	if (!zstd) {
		buf = malloc(in->len ? in->len : 1);
		if (!buf)
			return -ENOMEM;
		if (in->len)
			memcpy(buf, in->data, in->len);
		*out = buf;
		*len = in->len;
		return 0;
	}
	fcs = ZSTD_getFrameContentSize(in->data, in->len);
	if (fcs == ZSTD_CONTENTSIZE_UNKNOWN || fcs == ZSTD_CONTENTSIZE_ERROR || fcs > max)
		return -EBADMSG;
	buf = malloc(fcs ? (size_t)fcs : 1);
	if (!buf)
		return -ENOMEM;
	got = ZSTD_decompress(buf, (size_t)fcs, in->data, in->len);
	if (ZSTD_isError(got) || got != fcs) {
		free(buf);
		return -EBADMSG;
	}
	*out = buf;
	*len = got;
	return 0;
}
