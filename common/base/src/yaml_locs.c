#include "drasync/yaml.h"

#include "drasync/buf.h"

#include "yaml_parser_internal.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/*
 * Where each node of a parsed YAML stream starts: one entry per node
 * (document, JSON pointer, line and column, and the key's for a mapping
 * value), the pointers in one arena, found through an open-addressing index.
 * The parser (yaml_parser.c) adds the entries; callers find them.
 */

void ds_yaml_locs_free(ds_yaml_locs *locs)
{
	if (!locs)
		return;
	free(locs->file);
	free(locs->v);
	free(locs->arena);
	free(locs->slots);
	free(locs);
}

const char *ds_yaml_locs_file(const ds_yaml_locs *locs)
{
	return locs ? locs->file : NULL;
}

static uint64_t hash_key(size_t doc, const char *s, size_t len)
{
	uint64_t h = 1469598103934665603ull ^ (uint64_t)doc; /* FNV-1a */

	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)s[i];
		h *= 1099511628211ull;
	}
	/* FNV's low bits mix poorly and the table uses them: finish with murmur3's fmix64. */
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return h;
}

/* Index the entries; a later entry for the same (doc, pointer) wins. */
int ds_yaml_locs_index(ds_yaml_locs *locs)
{
	size_t n = 16;

	while (n < locs->n * 2)
		n *= 2;
	free(locs->slots);
	locs->slots = calloc(n, sizeof(*locs->slots));
	if (!locs->slots)
		return -ENOMEM;
	locs->nslots = n;
	for (size_t i = 0; i < locs->n; i++) {
		const struct loc_entry *e = &locs->v[i];
		uint64_t hv = hash_key(e->doc, locs->arena + e->off, e->len);
		size_t h = (size_t)hv & (n - 1);

		/* The full hash sits in the slot, so probing rarely touches the entries. */
		for (;; h = (h + 1) & (n - 1)) {
			struct loc_slot *sl = &locs->slots[h];
			const struct loc_entry *o;

			if (!sl->idx) {
				sl->idx = i + 1;
				sl->hash = hv;
				break;
			}
			if (sl->hash != hv)
				continue;
			o = &locs->v[sl->idx - 1];
			if (o->doc == e->doc && o->len == e->len &&
			    memcmp(locs->arena + o->off, locs->arena + e->off, e->len) == 0) {
				sl->idx = i + 1;
				break;
			}
		}
	}
	return 0;
}

int ds_yaml_locs_find(const ds_yaml_locs *locs, size_t doc, const char *ptr, ds_yaml_loc *out)
{
	size_t len, h;
	uint64_t hv;

	if (!locs || !ptr || !locs->nslots)
		return -ENOENT;
	len = strlen(ptr);
	hv = hash_key(doc, ptr, len);
	h = (size_t)hv & (locs->nslots - 1);
	for (;; h = (h + 1) & (locs->nslots - 1)) {
		const struct loc_slot *sl = &locs->slots[h];
		const struct loc_entry *e;

		if (!sl->idx)
			return -ENOENT;
		if (sl->hash != hv)
			continue;
		e = &locs->v[sl->idx - 1];
		if (e->doc == doc && e->len == len && memcmp(locs->arena + e->off, ptr, len) == 0) {
			if (out)
				*out = e->loc;
			return 0;
		}
	}
}

int ds_yaml_locs_add(ds_yaml_locs *locs, size_t doc, const char *p1, size_t l1, const char *p2,
		     size_t l2, const ds_yaml_loc *loc)
{
	struct loc_entry *e;
	int rc;

	rc = ds_grow((void **)&locs->v, &locs->cap, locs->n + 1, sizeof(*locs->v));
	if (!rc)
		rc = ds_grow((void **)&locs->arena, &locs->acap, locs->alen + l1 + l2 + 1, 1);
	if (rc)
		return rc;
	e = &locs->v[locs->n++];
	e->doc = doc;
	e->off = locs->alen;
	e->len = l1 + l2;
	e->loc = *loc;
	if (l1)
		memcpy(locs->arena + locs->alen, p1, l1);
	if (l2)
		memcpy(locs->arena + locs->alen + l1, p2, l2);
	locs->alen += l1 + l2;
	return 0;
}
