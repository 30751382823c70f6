#ifndef DRASYNC_WIRE_INTERNAL_H
#define DRASYNC_WIRE_INTERNAL_H

/* What wire.c (frames, records) and wire_zbatch.c (compressed batches) share. */

#include "drasync/wire.h"
#include "drasync.pb-c.h"

#include <zstd.h>

/*
 * Every allocation of one decode is charged to a budget, so a small frame
 * that unpacks into a huge tree (many tiny repeated messages) or a
 * decompression bomb fails cleanly instead of exhausting memory.
 */
struct budget {
	size_t used;
	size_t limit;
};

/* A ProtobufCAllocator's alloc/free over a struct budget. */
void *ds_wire_budget_alloc(void *data, size_t size);
void ds_wire_budget_free(void *data, void *ptr);

/*
 * The decoder's ProtobufCAllocator (wire_arena.c): small allocations carved out
 * of chunks, each chunk and every large allocation charged to the budget; all
 * of it given back by ds_wire_arena_release(). A carved allocation's free does
 * nothing until then.
 */
struct ds_wire_chunk;
struct own;
struct ds_wire_arena {
	struct budget *budget;
	struct ds_wire_chunk *chunks;
	struct own *own; /* the large ones, not freed yet */
	uint8_t *cur, *end;
};
void ds_wire_arena_init(struct ds_wire_arena *a, struct budget *b);
void *ds_wire_arena_alloc(void *data, size_t size);
void ds_wire_arena_free(void *data, void *ptr);
void ds_wire_arena_release(struct ds_wire_arena *a);

/* A relocation's namespace: a DNS label (RFC 1123), as the API server checks it. */
bool ds_wire_relocate_ns_ok(const char *ns);
/* A part needs 1..DS_MANIFEST_MAX_PARTS - 1 records after it; any other record none. */
bool ds_wire_parts_left_ok(enum ds_record_op op, uint32_t parts_left);

/* Protobuf's varint: its length, and written at p (@return past it). */
static inline size_t ds_wire_varint_len(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static inline uint8_t *ds_wire_varint_put(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

struct ds_wire_decoder {
	ds_wire_limits lim;
	ZSTD_DCtx *dctx;
	ZSTD_CCtx *cctx; /* re-compresses a ZBatch's payloads for the store; made on first use */
};

struct ds_wire_msg {
	struct budget budget;
	struct ds_wire_arena arena; /* what alloc takes from */
	ProtobufCAllocator alloc;
	Drasync__Envelope *env;
	Drasync__Batch *batch;	/* env->batch, or the Batch a ZBatch held */
	Drasync__Batch *zbatch; /* unpacked from a ZBatch (owned), else NULL */
	enum ds_wire_kind kind;
	union {
		ds_wire_hello hello;
		ds_wire_welcome welcome;
		ds_wire_ack ack;
	} u;
	ds_wire_result *results, *applied;
	ds_record *records;
	size_t n_records;
	uint8_t **inflated; /* per record, NULL when the payload was not compressed */
	ds_manifest_entry **manifests;
	ds_wire_blob *stored; /* per record of a ZBatch: its payload re-compressed, or {NULL, 0} */
};

/* The records of msg->batch, validated (wire.c). */
int ds_wire_decode_records(ds_wire_decoder *dec, ds_wire_msg *msg, ds_err *err);
/* Decode the ZBatch of msg->env into msg->zbatch, then its records (wire_zbatch.c). */
int ds_wire_decode_zbatch(ds_wire_decoder *dec, ds_wire_msg *msg, ds_err *err);
/* A ZBatch's per-record payloads re-compressed as one zstd frame each, for the store. */
void ds_wire_zbatch_free(ds_wire_msg *msg);

#endif
