/*
 * The decoder's protobuf-c allocator: small allocations carved out of chunks
 * (1 KiB, doubling up to 64 KiB), large ones (and what protobuf-c frees while it unpacks) one
 * malloc each; all of it charged to the frame's budget and given back at once when the message is
 * freed.
 *
 * Why: a snapshot end carries every key of its source with its hash
 * (SPEC §6), three allocations an entry (the message, the key, the hash).
 * One malloc each, with the budget's header, cost about 208 bytes an entry;
 * carved, 136: decoding a 100,000-object manifest peaked 32.1 MB above the
 * receiver's start before, 25.8 MB after (bench_manifest, docs/benchmarks.md).
 *
 * Under ASan each allocation is followed by a poisoned gap and the rest of
 * the chunk stays poisoned, so a read past a key or a hash is still caught.
 */

#include "wire_internal.h"

#include <sanitizer/asan_interface.h>
#include <stdint.h>
#include <string.h>

#define CHUNK_FIRST 1024u   /* a small frame's decode takes little of its budget */
#define CHUNK (64u * 1024u) /* chunks double up to this */
#define LARGE (CHUNK / 16u) /* larger: an allocation of its own */
#define TAG_CARVED 0x6172656e61ull
#define TAG_OWN 0x6f776e6564ull
#if defined(__SANITIZE_ADDRESS__)
#define GAP 8u
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GAP 8u
#endif
#endif
#ifndef GAP
#define GAP 0u
#endif

struct ds_wire_chunk {
	struct ds_wire_chunk *next;
	size_t size; /* of the data after it (16-aligned) */
};

/* An allocation of its own: the tag right before its data, as for a carved one. */
struct own {
	struct own *prev, *next;
	uint64_t tag;
};

static size_t round8(size_t n)
{
	return (n + 7u) & ~(size_t)7u;
}

void ds_wire_arena_init(struct ds_wire_arena *a, struct budget *b)
{
	memset(a, 0, sizeof(*a));
	a->budget = b;
}

static void *own_alloc(struct ds_wire_arena *a, size_t size)
{
	struct own *o;

	if (size > SIZE_MAX - sizeof(*o))
		return NULL;
	o = ds_wire_budget_alloc(a->budget, sizeof(*o) + size);
	if (!o)
		return NULL;
	o->tag = TAG_OWN;
	o->prev = NULL;
	o->next = a->own;
	if (a->own)
		a->own->prev = o;
	a->own = o;
	return o + 1;
}

void *ds_wire_arena_alloc(void *data, size_t size)
{
	struct ds_wire_arena *a = data;
	size_t need;
	uint8_t *p;

	if (size > LARGE)
		return own_alloc(a, size);
	need = sizeof(uint64_t) + round8(size) + GAP;
	if ((size_t)(a->end - a->cur) < need) {
		size_t csize = a->chunks ? a->chunks->size * 2 : CHUNK_FIRST;
		struct ds_wire_chunk *c;

		if (csize > CHUNK)
			csize = CHUNK;
		if (csize < need)
			csize = need;
		c = ds_wire_budget_alloc(a->budget, sizeof(*c) + csize);
		if (!c)
			return NULL;
		c->next = a->chunks;
		c->size = csize;
		a->chunks = c;
		a->cur = (uint8_t *)(c + 1);
		a->end = a->cur + csize;
		ASAN_POISON_MEMORY_REGION(a->cur, csize);
	}
	p = a->cur;
	a->cur += need;
	ASAN_UNPOISON_MEMORY_REGION(p, sizeof(uint64_t) + size);
	memcpy(p, &(uint64_t){TAG_CARVED}, sizeof(uint64_t));
	return p + sizeof(uint64_t);
}

void ds_wire_arena_free(void *data, void *ptr)
{
	struct ds_wire_arena *a = data;
	uint64_t tag;
	struct own *o;

	if (!ptr)
		return;
	memcpy(&tag, (uint8_t *)ptr - sizeof(tag), sizeof(tag));
	if (tag != TAG_OWN)
		return; /* carved: given back with its chunk */
	o = (struct own *)ptr - 1;
	if (o->prev)
		o->prev->next = o->next;
	else
		a->own = o->next;
	if (o->next)
		o->next->prev = o->prev;
	ds_wire_budget_free(a->budget, o);
}

void ds_wire_arena_release(struct ds_wire_arena *a)
{
	while (a->chunks) {
		struct ds_wire_chunk *c = a->chunks;

		a->chunks = c->next;
		ASAN_UNPOISON_MEMORY_REGION(c + 1, c->size);
		ds_wire_budget_free(a->budget, c);
	}
	while (a->own) {
		struct own *o = a->own;

		a->own = o->next;
		ds_wire_budget_free(a->budget, o);
	}
	a->cur = a->end = NULL;
}
