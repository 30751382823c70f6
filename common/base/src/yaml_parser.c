#include "drasync/yaml.h"

#include "drasync/buf.h"

#include "yaml_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/*
 * The YAML module's parser: libyaml's event parser drives a recursive builder
 * of jansson values (depth bounded by DS_YAML_MAX_DEPTH, so the C stack is
 * bounded too), recording where each node starts when asked to. Plain
 * scalars are resolved with the rules of the go-yaml v2 fork inside
 * sigs.k8s.io/yaml, which is what kubectl uses; see yaml_resolver.c.
 */

/* ------------------------------------------------------------------ */
/* Locations                                                           */

struct loc_entry {
	size_t doc;
	size_t off, len; /* the JSON pointer, in locs->arena */
	ds_yaml_loc loc;
};

struct loc_slot {
	size_t idx; /* entry index + 1, 0 = empty */
	uint64_t hash;
};

struct ds_yaml_locs {
	char *file;
	struct loc_entry *v;
	size_t n, cap;
	char *arena;
	size_t alen, acap;
	struct loc_slot *slots; /* open-addressing index */
	size_t nslots;		/* power of two */
};

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
static int locs_index(ds_yaml_locs *locs)
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

/* ------------------------------------------------------------------ */
/* Parser                                                              */

struct anchor {
	char *name;
	json_t *value; /* NULL while the anchored node is being parsed */
	size_t nodes;  /* nodes in value, the cost of one alias */
	int height;
	size_t loc_first, loc_end; /* its location entries */
	size_t prefix_len;	   /* length of its JSON pointer */
};

struct ps {
	yaml_parser_t p;
	const char *buf;
	size_t len;
	const char *file;
	ds_err *err;
	ds_yaml_locs *locs; /* NULL: record nothing */
	size_t doc;
	struct anchor *anchors;
	size_t nanchors, capanchors;
	size_t nodes;	    /* nodes read from the text */
	size_t alias_nodes; /* nodes added by aliases */
	char *ptr;	    /* current JSON pointer (with locations) */
	size_t ptrlen, ptrcap;
};

#define DS_YAML_MIN_ALIAS_BUDGET 100000u

static int fail(struct ps *ps, const yaml_mark_t *m, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(struct ps *ps, const yaml_mark_t *m, int rc, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (m)
		ds_err_setloc(ps->err, ps->file, (int)m->line + 1, (int)m->column + 1, "%s", msg);
	else
		ds_err_setloc(ps->err, ps->file, 0, 0, "%s", msg);
	return rc;
}

/* Line and column (1-based) of a byte offset, for reader errors libyaml reports by offset. */
static void offset_to_mark(const struct ps *ps, size_t off, yaml_mark_t *m)
{
	size_t line = 0, col = 0;

	if (off > ps->len)
		off = ps->len;
	for (size_t i = 0; i < off; i++) {
		if (ps->buf[i] == '\n')
			line++, col = 0;
		else if (((unsigned char)ps->buf[i] & 0xC0) != 0x80)
			col++;
	}
	m->index = off;
	m->line = line;
	m->column = col;
}

static int parser_error(struct ps *ps)
{
	yaml_parser_t *p = &ps->p;
	const char *problem = p->problem ? p->problem : "invalid YAML";
	yaml_mark_t m = p->problem_mark;

	switch (p->error) {
	case YAML_MEMORY_ERROR:
		ds_err_set(ps->err, "out of memory while reading YAML");
		return -ENOMEM;
	case YAML_READER_ERROR:
		offset_to_mark(ps, p->problem_offset, &m);
		if (p->problem_value != -1)
			return fail(ps, &m, -EBADMSG, "%s (#%X)", problem,
				    (unsigned)p->problem_value);
		return fail(ps, &m, -EBADMSG, "%s", problem);
	default:
		if (m.index < ps->len && ps->buf[m.index] == '\t' &&
		    !strcmp(problem, "found character that cannot start any token"))
			return fail(ps, &m, -EBADMSG,
				    "found a tab character that cannot start any token (YAML is "
				    "indented with spaces, not tabs)");
		if (p->context)
			return fail(ps, &m, -EBADMSG, "%s %s", p->context, problem);
		return fail(ps, &m, -EBADMSG, "%s", problem);
	}
}

static int next(struct ps *ps, yaml_event_t *ev)
{
	if (!yaml_parser_parse(&ps->p, ev))
		return parser_error(ps);
	return 0;
}

/* JSON pointer maintenance (only with locations). */
static int ptr_push(struct ps *ps, const char *seg, size_t len)
{
	size_t need = ps->ptrlen + 2 + len * 2;
	int rc = ds_grow((void **)&ps->ptr, &ps->ptrcap, need, 1);

	if (rc)
		return rc;
	ps->ptr[ps->ptrlen++] = '/';
	for (size_t i = 0; i < len; i++) {
		if (seg[i] == '~') {
			ps->ptr[ps->ptrlen++] = '~';
			ps->ptr[ps->ptrlen++] = '0';
		} else if (seg[i] == '/') {
			ps->ptr[ps->ptrlen++] = '~';
			ps->ptr[ps->ptrlen++] = '1';
		} else {
			ps->ptr[ps->ptrlen++] = seg[i];
		}
	}
	return 0;
}

static int ptr_push_index(struct ps *ps, size_t i)
{
	char b[32];
	int n = snprintf(b, sizeof(b), "%zu", i);

	return ptr_push(ps, b, (size_t)n);
}

static int loc_add(ds_yaml_locs *locs, size_t doc, const char *p1, size_t l1, const char *p2,
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

static int record(struct ps *ps, const yaml_mark_t *m, const yaml_mark_t *key)
{
	ds_yaml_loc loc = {(int)m->line + 1, (int)m->column + 1, 0, 0};

	if (!ps->locs)
		return 0;
	if (key) {
		loc.key_line = (int)key->line + 1;
		loc.key_col = (int)key->column + 1;
	}
	return loc_add(ps->locs, ps->doc, ps->ptr, ps->ptrlen, NULL, 0, &loc);
}

static struct anchor *anchor_find(struct ps *ps, const char *name)
{
	/* The latest definition of a name wins (YAML allows redefinition). */
	for (size_t i = ps->nanchors; i > 0; i--)
		if (strcmp(ps->anchors[i - 1].name, name) == 0)
			return &ps->anchors[i - 1];
	return NULL;
}

static void anchors_clear(struct ps *ps)
{
	for (size_t i = 0; i < ps->nanchors; i++) {
		free(ps->anchors[i].name);
		json_decref(ps->anchors[i].value);
	}
	ps->nanchors = 0;
}

/* An anchor on a mapping key: a complete scalar (steals value). */
static int anchor_add(struct ps *ps, const char *name, json_t *value)
{
	struct anchor *a;

	if (!value || ds_grow((void **)&ps->anchors, &ps->capanchors, ps->nanchors + 1,
			      sizeof(*ps->anchors))) {
		json_decref(value);
		return -ENOMEM;
	}
	a = &ps->anchors[ps->nanchors];
	memset(a, 0, sizeof(*a));
	a->name = strdup(name);
	if (!a->name) {
		json_decref(value);
		return -ENOMEM;
	}
	a->value = value;
	a->nodes = 1;
	a->loc_first = a->loc_end = ps->locs ? ps->locs->n : 0;
	ps->nanchors++;
	return 0;
}

/* A node under construction: value plus bookkeeping for anchors and aliases. */
struct built {
	json_t *v;
	size_t nodes;
	int height;
};

static int parse_node(struct ps *ps, yaml_event_t *ev, int depth, const yaml_mark_t *keymark,
		      struct built *out);

/* The short form of a tag ("tag:yaml.org,2002:int" -> "int"), NULL for others. */
static const char *core_tag(const yaml_char_t *tag)
{
	static const char prefix[] = "tag:yaml.org,2002:";

	if (!tag)
		return NULL;
	if (strncmp((const char *)tag, prefix, sizeof(prefix) - 1) == 0)
		return (const char *)tag + sizeof(prefix) - 1;
	return NULL;
}

/*
 * Type a scalar event: untagged plain scalars are resolved, quoted ones are
 * strings, core tags (!!str !!int !!float !!bool !!null) are honoured as
 * go-yaml does, other tags leave the text a string.
 */
static int scalar_res(struct ps *ps, const yaml_event_t *ev, struct res *r)
{
	const char *s = (const char *)ev->data.scalar.value;
	size_t len = ev->data.scalar.length;
	const char *tag = core_tag(ev->data.scalar.tag);

	r->kind = R_STR;
	if (!ev->data.scalar.tag) {
		if (ev->data.scalar.plain_implicit)
			ds_yaml_resolve_plain(s, len, r);
		return 0;
	}
	if (!tag)
		return 0; /* "!", "!foo", unknown: text */
	if (!strcmp(tag, "str") || !strcmp(tag, "binary") || !strcmp(tag, "timestamp"))
		return 0;
	if (strcmp(tag, "int") && strcmp(tag, "float") && strcmp(tag, "bool") &&
	    strcmp(tag, "null"))
		return 0; /* !!map, !!seq, !!merge, ... on a scalar: go-yaml keeps the text */
	ds_yaml_resolve_plain(s, len, r);
	if (!strcmp(tag, "float") && r->kind == R_INT) {
		r->kind = R_REAL;
		r->d = (double)r->i;
	}
	if ((!strcmp(tag, "int") && r->kind == R_INT) ||
	    (!strcmp(tag, "float") && (r->kind == R_REAL || r->kind == R_NONFINITE)) ||
	    (!strcmp(tag, "bool") && r->kind == R_BOOL) ||
	    (!strcmp(tag, "null") && r->kind == R_NULL))
		return 0;
	if (!strcmp(tag, "int") && r->kind == R_REAL && r->big)
		return 0; /* an integer beyond int64 */
	return fail(ps, &ev->start_mark, -EBADMSG, "cannot decode %.*s as !!%s",
		    (int)(len > 64 ? 64 : len), s, tag);
}

/* Go's strconv.FormatFloat(v, 'g', -1, 32), as sigs.k8s.io/yaml turns float keys into strings. */
static void format_float32_key(double d, char *buf, size_t size)
{
	float f = (float)d;
	int prec, exp;
	char tmp[64];

	if (isnan(f)) {
		snprintf(buf, size, ".nan");
		return;
	}
	if (isinf(f)) {
		snprintf(buf, size, f > 0 ? ".inf" : "-.inf");
		return;
	}
	for (prec = 1; prec < 9; prec++) {
		snprintf(tmp, sizeof(tmp), "%.*e", prec - 1, (double)f);
		if (strtof(tmp, NULL) == f)
			break;
	}
	snprintf(tmp, sizeof(tmp), "%.*e", prec - 1, (double)f);
	exp = atoi(strchr(tmp, 'e') + 1);
	if (exp < -4 || exp >= 6) { /* Go: shortest %g switches at 1e6 */
		snprintf(buf, size, "%s", tmp);
	} else {
		int decimals = prec - 1 - exp;

		snprintf(buf, size, "%.*f", decimals > 0 ? decimals : 0, (double)f);
	}
}

/* A JSON scalar as a mapping key string (sigs.k8s.io/yaml's key conversion). */
static int key_from_res(struct ps *ps, const yaml_mark_t *m, const struct res *r, char *buf,
			size_t size)
{
	switch (r->kind) {
	case R_NULL:
		return fail(ps, m, -EBADMSG, "unsupported mapping key: null");
	case R_BOOL:
		snprintf(buf, size, "%s", r->b ? "true" : "false");
		return 0;
	case R_INT:
		snprintf(buf, size, "%lld", r->i);
		return 0;
	case R_REAL:
	case R_NONFINITE:
		format_float32_key(r->d, buf, size);
		return 0;
	case R_STR:
	default:
		return -EINVAL; /* caller uses the text */
	}
}

static json_t *json_from_res(const struct res *r)
{
	switch (r->kind) {
	case R_NULL:
		return json_null();
	case R_BOOL:
		return json_boolean(r->b);
	case R_INT:
		return json_integer(r->i);
	case R_REAL:
		return json_real(r->d);
	default:
		return NULL;
	}
}

static int parse_scalar(struct ps *ps, yaml_event_t *ev, struct built *out)
{
	struct res r = {0};
	int rc = scalar_res(ps, ev, &r);

	if (rc)
		return rc;
	if (r.kind == R_NONFINITE)
		return fail(ps, &ev->start_mark, -EBADMSG,
			    "%s cannot be represented in JSON (quote it to keep it as a string)",
			    (const char *)ev->data.scalar.value);
	if (r.kind == R_STR)
		out->v = json_stringn((const char *)ev->data.scalar.value, ev->data.scalar.length);
	else
		out->v = json_from_res(&r);
	if (!out->v)
		return fail(ps, &ev->start_mark, -ENOMEM, "out of memory");
	out->nodes = 1;
	out->height = 0;
	return 0;
}

static int parse_sequence(struct ps *ps, int depth, struct built *out)
{
	yaml_event_t ev;
	json_t *arr = json_array();
	size_t base = ps->ptrlen;
	int rc = 0;

	if (!arr)
		return -ENOMEM;
	out->nodes = 1;
	out->height = 0;
	for (size_t i = 0;; i++) {
		struct built c = {0};

		rc = next(ps, &ev);
		if (rc)
			goto out;
		if (ev.type == YAML_SEQUENCE_END_EVENT) {
			yaml_event_delete(&ev);
			break;
		}
		if (ps->locs && (rc = ptr_push_index(ps, i)) != 0) {
			yaml_event_delete(&ev);
			goto out;
		}
		rc = parse_node(ps, &ev, depth + 1, NULL, &c);
		ps->ptrlen = base;
		if (rc)
			goto out;
		if (json_array_append_new(arr, c.v)) {
			rc = -ENOMEM;
			goto out;
		}
		out->nodes += c.nodes;
		if (c.height + 1 > out->height)
			out->height = c.height + 1;
	}
	out->v = arr;
	arr = NULL;
out:
	json_decref(arr);
	return rc;
}

static bool is_merge_key(const yaml_event_t *ev)
{
	const char *tag = core_tag(ev->data.scalar.tag);

	if (ev->data.scalar.length != 2 || memcmp(ev->data.scalar.value, "<<", 2) != 0)
		return false;
	if (!ev->data.scalar.tag)
		return ev->data.scalar.plain_implicit;
	return tag && !strcmp(tag, "merge");
}

/* Find the first '/'-separated segment after `prefix` in an entry and unescape it. */
static bool entry_segment(const ds_yaml_locs *locs, const struct loc_entry *e, size_t prefix,
			  char *seg, size_t cap, size_t *seglen)
{
	const char *p = locs->arena + e->off + prefix;
	size_t len = e->len - prefix, n = 0;

	if (len < 2 || p[0] != '/')
		return false;
	for (size_t i = 1; i < len && p[i] != '/'; i++) {
		char c = p[i];

		if (c == '~' && i + 1 < len) {
			c = p[i + 1] == '1' ? '/' : '~';
			i++;
		}
		if (n + 1 >= cap)
			return false;
		seg[n++] = c;
	}
	*seglen = n;
	return true;
}

/*
 * Merge `src` (a mapping) into `obj`: keys already present stay (explicit keys
 * and earlier merge sources win), new ones are recorded in `merged`. With
 * locations, the entries of src (recorded under `src_prefix`) for the keys
 * taken are copied under the mapping's own pointer.
 */
static int merge_one(struct ps *ps, json_t *obj, json_t *merged, json_t *src, size_t loc_a,
		     size_t loc_b, const char *src_prefix, size_t src_prefix_len)
{
	void *it;
	json_t *taken = NULL;
	int rc = 0;

	if (ps->locs) {
		taken = json_object();
		if (!taken)
			return -ENOMEM;
	}
	for (it = json_object_iter(src); it; it = json_object_iter_next(src, it)) {
		const char *k = json_object_iter_key(it);
		size_t kl = json_object_iter_key_len(it);

		if (json_object_getn(obj, k, kl))
			continue;
		if (json_object_setn(obj, k, kl, json_object_iter_value(it)) ||
		    json_object_setn_new(merged, k, kl, json_null()) ||
		    (taken && json_object_setn_new(taken, k, kl, json_null()))) {
			rc = -ENOMEM;
			goto out;
		}
	}
	if (ps->locs) {
		char seg[1024];
		size_t sl;
		size_t end = loc_b;

		for (size_t i = loc_a; i < end; i++) {
			struct loc_entry e = ps->locs->v[i];
			const char *p = ps->locs->arena + e.off;

			if (e.len <= src_prefix_len || memcmp(p, src_prefix, src_prefix_len) != 0)
				continue;
			if (!entry_segment(ps->locs, &e, src_prefix_len, seg, sizeof(seg), &sl))
				continue;
			if (!json_object_getn(taken, seg, sl))
				continue;
			/* The arena may move: copy the tail first. */
			{
				size_t tl = e.len - src_prefix_len;
				char *tail = malloc(tl);

				if (!tail) {
					rc = -ENOMEM;
					goto out;
				}
				memcpy(tail, p + src_prefix_len, tl);
				rc = loc_add(ps->locs, ps->doc, ps->ptr, ps->ptrlen, tail, tl,
					     &e.loc);
				free(tail);
				if (rc)
					goto out;
			}
		}
	}
out:
	json_decref(taken);
	return rc;
}

/*
 * Merge the value of a "<<" key (a mapping, or a list of mappings whose
 * earlier entries win) into obj. Locations of the sources were recorded from
 * entry loc_a on, under `prefix` (the "<<" key's pointer).
 */
static int merge_value(struct ps *ps, const yaml_event_t *kev, json_t *obj, json_t *merged,
		       json_t *v, size_t loc_a, const char *prefix, size_t plen)
{
	size_t i, loc_b = ps->locs ? ps->locs->n : 0;
	json_t *m;
	int rc = 0;

	if (json_is_object(v))
		return merge_one(ps, obj, merged, v, loc_a, loc_b, prefix, plen);
	if (!json_is_array(v))
		return fail(ps, &kev->start_mark, -EBADMSG,
			    "merge key '<<' needs a mapping or a list of mappings");
	json_array_foreach (v, i, m) {
		if (!json_is_object(m))
			return fail(ps, &kev->start_mark, -EBADMSG,
				    "merge key '<<' needs a mapping or a list of mappings");
	}
	/* Earlier sources win, so merge them first. */
	json_array_foreach (v, i, m) {
		char *ip = NULL;

		if (ps->locs && asprintf(&ip, "%.*s/%zu", (int)plen, prefix, i) < 0)
			return -ENOMEM;
		rc = merge_one(ps, obj, merged, m, loc_a, loc_b, ip, ip ? strlen(ip) : 0);
		free(ip);
		if (rc)
			return rc;
	}
	return 0;
}

/* A "<<" entry of a mapping: parse its value and merge it into obj. */
static int map_merge(struct ps *ps, int depth, const yaml_event_t *kev, json_t *obj,
		     json_t **merged, struct built *out)
{
	yaml_event_t vev;
	struct built c = {0};
	size_t base = ps->ptrlen, loc_a = ps->locs ? ps->locs->n : 0, plen = 0;
	char *prefix = NULL;
	int rc;

	if (ps->locs) {
		if ((rc = ptr_push(ps, "<<", 2)) != 0)
			return rc;
		prefix = strndup(ps->ptr, ps->ptrlen);
		plen = ps->ptrlen;
		if (!prefix)
			return -ENOMEM;
	}
	rc = next(ps, &vev);
	if (!rc)
		rc = parse_node(ps, &vev, depth + 1, &kev->start_mark, &c);
	ps->ptrlen = base;
	if (!rc && !*merged && !(*merged = json_object()))
		rc = -ENOMEM;
	if (!rc)
		rc = merge_value(ps, kev, obj, *merged, c.v, loc_a, prefix, plen);
	if (!rc) {
		out->nodes += c.nodes;
		if (c.height > out->height)
			out->height = c.height;
	}
	free(prefix);
	json_decref(c.v);
	return rc;
}

/* The key text of a scalar key; an anchor on it is defined here. */
static int key_of_scalar(struct ps *ps, const yaml_event_t *kev, char *kbuf, size_t size,
			 const char **key, size_t *klen)
{
	struct res r = {0};
	int rc = scalar_res(ps, kev, &r);

	if (rc)
		return rc;
	if (r.kind == R_STR) {
		*key = (const char *)kev->data.scalar.value;
		*klen = kev->data.scalar.length;
	} else {
		rc = key_from_res(ps, &kev->start_mark, &r, kbuf, size);
		if (rc)
			return rc;
		*key = kbuf;
		*klen = strlen(kbuf);
	}
	if (kev->data.scalar.anchor) {
		json_t *kv = r.kind == R_STR || r.kind == R_NONFINITE ? json_stringn(*key, *klen)
								      : json_from_res(&r);

		rc = anchor_add(ps, (const char *)kev->data.scalar.anchor, kv);
	}
	return rc;
}

/* The key text of an alias used as a key: its anchored scalar, as a key string. */
static int key_of_alias(struct ps *ps, const yaml_event_t *kev, char *kbuf, size_t size,
			const char **key, size_t *klen)
{
	struct anchor *a = anchor_find(ps, (const char *)kev->data.alias.anchor);
	struct res r = {0};
	int rc;

	if (!a || !a->value)
		return fail(ps, &kev->start_mark, -EBADMSG, "unknown anchor '%s'",
			    (const char *)kev->data.alias.anchor);
	if (json_is_string(a->value)) {
		*key = json_string_value(a->value);
		*klen = json_string_length(a->value);
		return 0;
	}
	r.kind = json_is_null(a->value)	     ? R_NULL
		 : json_is_boolean(a->value) ? R_BOOL
		 : json_is_integer(a->value) ? R_INT
		 : json_is_real(a->value)    ? R_REAL
					     : R_STR;
	r.b = json_is_true(a->value);
	r.i = json_integer_value(a->value);
	r.d = json_real_value(a->value);
	if (r.kind == R_STR)
		return fail(ps, &kev->start_mark, -EBADMSG, "unsupported mapping key: a %s",
			    json_is_object(a->value) ? "mapping" : "sequence");
	rc = key_from_res(ps, &kev->start_mark, &r, kbuf, size);
	if (rc)
		return rc;
	*key = kbuf;
	*klen = strlen(kbuf);
	return 0;
}

/* The key of a mapping entry as a string (borrowed from kev, the anchors or kbuf). */
static int map_key(struct ps *ps, const yaml_event_t *kev, char *kbuf, size_t size,
		   const char **key, size_t *klen)
{
	if (kev->type == YAML_SCALAR_EVENT)
		return key_of_scalar(ps, kev, kbuf, size, key, klen);
	if (kev->type == YAML_ALIAS_EVENT)
		return key_of_alias(ps, kev, kbuf, size, key, klen);
	return fail(ps, &kev->start_mark, -EBADMSG, "unsupported mapping key: a %s",
		    kev->type == YAML_MAPPING_START_EVENT ? "mapping" : "sequence");
}

/* Reject keys JSON cannot hold here and duplicates; an explicit key replaces a merged one. */
static int map_check_key(struct ps *ps, const yaml_event_t *kev, json_t *obj, json_t *merged,
			 const char *key, size_t klen)
{
	if (memchr(key, '\0', klen))
		/* jansson's json_equal() and json_deep_copy() stop keys at a NUL. */
		return fail(ps, &kev->start_mark, -EBADMSG, "mapping key contains a NUL character");
	if (json_object_getn(obj, key, klen)) {
		if (!merged || !json_object_getn(merged, key, klen))
			return fail(ps, &kev->start_mark, -EBADMSG, "duplicate key '%.*s'",
				    (int)(klen > 128 ? 128 : klen), key);
		json_object_deln(merged, key, klen);
	}
	return 0;
}

/* Parse the value of the entry `key` and set it in obj. */
static int map_value(struct ps *ps, int depth, const yaml_event_t *kev, json_t *obj,
		     const char *key, size_t klen, struct built *out)
{
	yaml_event_t vev;
	struct built c = {0};
	size_t base = ps->ptrlen;
	int rc;

	if (ps->locs && (rc = ptr_push(ps, key, klen)) != 0)
		return rc;
	rc = next(ps, &vev);
	if (!rc)
		rc = parse_node(ps, &vev, depth + 1, &kev->start_mark, &c);
	ps->ptrlen = base;
	if (rc)
		return rc;
	if (json_object_setn_new(obj, key, klen, c.v))
		return -ENOMEM;
	out->nodes += c.nodes;
	if (c.height + 1 > out->height)
		out->height = c.height + 1;
	return 0;
}

/* A mapping, entry by entry: a merge ("<<"), or a key checked and its value set. */
static int parse_mapping(struct ps *ps, int depth, struct built *out)
{
	yaml_event_t kev;
	json_t *obj = json_object();
	json_t *merged = NULL; /* keys that came from "<<" (explicit keys replace them) */
	int rc = 0;

	if (!obj)
		return -ENOMEM;
	out->nodes = 1;
	out->height = 0;
	for (;;) {
		char kbuf[64];
		const char *key = NULL;
		size_t klen = 0;

		rc = next(ps, &kev);
		if (rc)
			goto out;
		if (kev.type == YAML_MAPPING_END_EVENT) {
			yaml_event_delete(&kev);
			break;
		}
		if (kev.type == YAML_SCALAR_EVENT && is_merge_key(&kev)) {
			rc = map_merge(ps, depth, &kev, obj, &merged, out);
		} else {
			rc = map_key(ps, &kev, kbuf, sizeof(kbuf), &key, &klen);
			if (!rc)
				rc = map_check_key(ps, &kev, obj, merged, key, klen);
			if (!rc)
				rc = map_value(ps, depth, &kev, obj, key, klen, out);
		}
		/* Only now: the key may point into the event. */
		yaml_event_delete(&kev);
		if (rc)
			goto out;
	}
	out->v = obj;
	obj = NULL;
out:
	json_decref(merged);
	json_decref(obj);
	return rc;
}

static int parse_alias(struct ps *ps, yaml_event_t *ev, int depth, const yaml_mark_t *keymark,
		       struct built *out)
{
	const char *name = (const char *)ev->data.alias.anchor;
	struct anchor *a = anchor_find(ps, name);
	size_t budget = ps->nodes > DS_YAML_MIN_ALIAS_BUDGET ? ps->nodes : DS_YAML_MIN_ALIAS_BUDGET;
	int rc;

	if (!a)
		return fail(ps, &ev->start_mark, -EBADMSG, "unknown anchor '%s'", name);
	if (!a->value)
		return fail(ps, &ev->start_mark, -EBADMSG,
			    "alias '*%s' refers to a node that contains it", name);
	if (depth + a->height > DS_YAML_MAX_DEPTH)
		return fail(ps, &ev->start_mark, -EBADMSG, "nesting deeper than %d levels",
			    DS_YAML_MAX_DEPTH);
	if (a->nodes > budget - ps->alias_nodes)
		return fail(ps, &ev->start_mark, -EBADMSG,
			    "aliases expand to more than %zu nodes (alias bomb?)", budget);
	ps->alias_nodes += a->nodes;
	out->v = json_deep_copy(a->value);
	if (!out->v)
		return -ENOMEM;
	out->nodes = a->nodes;
	out->height = a->height;
	rc = record(ps, &ev->start_mark, keymark);
	if (rc || !ps->locs)
		return rc;
	/* Copy the anchor's inner locations under the alias's pointer. */
	for (size_t i = a->loc_first + 1; i < a->loc_end; i++) {
		struct loc_entry e = ps->locs->v[i];
		size_t tl = e.len - a->prefix_len;
		char *tail = malloc(tl ? tl : 1);

		if (!tail)
			return -ENOMEM;
		memcpy(tail, ps->locs->arena + e.off + a->prefix_len, tl);
		rc = loc_add(ps->locs, ps->doc, ps->ptr, ps->ptrlen, tail, tl, &e.loc);
		free(tail);
		if (rc)
			return rc;
	}
	return 0;
}

/* Build the value of the node that starts with *ev (consumed). */
static int parse_node(struct ps *ps, yaml_event_t *ev, int depth, const yaml_mark_t *keymark,
		      struct built *out)
{
	const yaml_char_t *anchor = NULL;
	size_t ai = 0;
	int rc = 0;

	if (depth > DS_YAML_MAX_DEPTH) {
		rc = fail(ps, &ev->start_mark, -EBADMSG, "nesting deeper than %d levels",
			  DS_YAML_MAX_DEPTH);
		goto out;
	}
	if (ev->type == YAML_ALIAS_EVENT) {
		rc = parse_alias(ps, ev, depth, keymark, out);
		goto out;
	}
	if (ev->type == YAML_SCALAR_EVENT)
		anchor = ev->data.scalar.anchor;
	else if (ev->type == YAML_SEQUENCE_START_EVENT)
		anchor = ev->data.sequence_start.anchor;
	else if (ev->type == YAML_MAPPING_START_EVENT)
		anchor = ev->data.mapping_start.anchor;
	else {
		rc = fail(ps, &ev->start_mark, -EBADMSG, "unexpected YAML event");
		goto out;
	}
	if (anchor) {
		struct anchor *a;

		rc = ds_grow((void **)&ps->anchors, &ps->capanchors, ps->nanchors + 1,
			     sizeof(*ps->anchors));
		if (rc)
			goto out;
		a = &ps->anchors[ps->nanchors];
		memset(a, 0, sizeof(*a));
		a->name = strdup((const char *)anchor);
		if (!a->name) {
			rc = -ENOMEM;
			goto out;
		}
		a->loc_first = ps->locs ? ps->locs->n : 0;
		a->prefix_len = ps->ptrlen;
		ai = ++ps->nanchors;
	}
	ps->nodes++;
	rc = record(ps, &ev->start_mark, keymark);
	if (rc)
		goto out;
	if (ev->type == YAML_SCALAR_EVENT)
		rc = parse_scalar(ps, ev, out);
	else if (ev->type == YAML_SEQUENCE_START_EVENT)
		rc = parse_sequence(ps, depth, out);
	else
		rc = parse_mapping(ps, depth, out);
	if (!rc && ai) {
		struct anchor *a = &ps->anchors[ai - 1];

		a->value = json_incref(out->v);
		a->nodes = out->nodes;
		a->height = out->height;
		a->loc_end = ps->locs ? ps->locs->n : 0;
	}
out:
	yaml_event_delete(ev);
	return rc;
}

static int parse_stream(struct ps *ps, json_t *docs)
{
	yaml_event_t ev;
	int rc;

	for (;;) {
		struct built root = {0};
		size_t loc_mark = ps->locs ? ps->locs->n : 0;

		rc = next(ps, &ev);
		if (rc)
			return rc;
		if (ev.type == YAML_STREAM_END_EVENT) {
			yaml_event_delete(&ev);
			return 0;
		}
		if (ev.type != YAML_DOCUMENT_START_EVENT) { /* stream start */
			yaml_event_delete(&ev);
			continue;
		}
		yaml_event_delete(&ev);
		rc = next(ps, &ev);
		if (rc)
			return rc;
		ps->ptrlen = 0;
		rc = parse_node(ps, &ev, 1, NULL, &root);
		anchors_clear(ps);
		if (rc)
			return rc;
		rc = next(ps, &ev); /* document end */
		if (rc) {
			json_decref(root.v);
			return rc;
		}
		yaml_event_delete(&ev);
		if (json_is_null(root.v)) {
			/* Empty (or null) documents are skipped, as kubectl does. */
			json_decref(root.v);
			if (ps->locs)
				ps->locs->n = loc_mark;
			continue;
		}
		if (json_array_append_new(docs, root.v))
			return -ENOMEM;
		ps->doc++;
	}
}

/* Height of a jansson value, stopping once it exceeds `limit`. */
static int height_over(const json_t *v, int limit)
{
	int h = 0;

	if (limit < 0)
		return 1;
	if (json_is_object(v)) {
		const char *k;
		json_t *c;

		json_object_foreach ((json_t *)v, k, c) {
			int ch = height_over(c, limit - 1) + 1;

			if (ch > h)
				h = ch;
			if (h > limit)
				break;
		}
	} else if (json_is_array(v)) {
		size_t i;
		json_t *c;

		json_array_foreach (v, i, c) {
			int ch = height_over(c, limit - 1) + 1;

			if (ch > h)
				h = ch;
			if (h > limit)
				break;
		}
	}
	return h;
}

/*
 * JSON fast path: a stream of JSON texts starting with '{' or '[' (kubectl
 * reads a '{' stream with a JSON decoder, so surrogate pairs and concatenated
 * objects are JSON's). Returns 1 when the input is not plain JSON within our
 * bounds (duplicate keys, NUL in strings, big numbers, too deep...); the YAML
 * path then reads it and reports any error with its location.
 */
static int parse_json_stream(const char *buf, size_t len, json_t *docs)
{
	size_t off = 0;

	for (;;) {
		json_error_t jerr;
		json_t *v;

		while (off < len && (buf[off] == ' ' || buf[off] == '\t' || buf[off] == '\n' ||
				     buf[off] == '\r'))
			off++;
		if (off == len)
			return json_array_size(docs) ? 0 : 1;
		if (buf[off] != '{' && buf[off] != '[')
			return 1;
		v = json_loadb(buf + off, len - off,
			       JSON_REJECT_DUPLICATES | JSON_DISABLE_EOF_CHECK, &jerr);
		if (!v)
			return 1;
		if (height_over(v, DS_YAML_MAX_DEPTH - 1) > DS_YAML_MAX_DEPTH - 1) {
			json_decref(v);
			return 1;
		}
		if (json_array_append_new(docs, v))
			return 1;
		off += (size_t)jerr.position;
	}
}

int ds_yaml_parse(const char *buf, size_t len, const char *filename, unsigned flags,
		  json_t **docs_out, ds_yaml_locs **locs_out, ds_err *err)
{
	struct ps ps;
	json_t *docs = NULL;
	int rc;

	memset(&ps, 0, sizeof(ps));
	ps.buf = buf;
	ps.len = len;
	ps.file = filename ? filename : "-";
	ps.err = err;
	if (!docs_out || (!buf && len)) {
		ds_err_set(err, "ds_yaml_parse: invalid arguments");
		return -EINVAL;
	}
	if (len > DS_YAML_MAX_INPUT) {
		ds_err_setloc(err, ps.file, 0, 0, "input larger than %u bytes", DS_YAML_MAX_INPUT);
		return -E2BIG;
	}
	if (!yaml_parser_initialize(&ps.p)) {
		ds_err_set(err, "out of memory");
		return -ENOMEM;
	}
	yaml_parser_set_input_string(&ps.p, (const unsigned char *)(buf ? buf : ""), len);
	docs = json_array();
	if (!docs) {
		rc = -ENOMEM;
		goto out;
	}
	if (flags & DS_YAML_LOCATIONS) {
		ps.locs = calloc(1, sizeof(*ps.locs));
		if (!ps.locs || !(ps.locs->file = strdup(ps.file))) {
			rc = -ENOMEM;
			goto out;
		}
	}
	if (parse_json_stream(buf ? buf : "", len, docs) == 0) {
		rc = 0;
		if (ps.locs) {
			/* Positions come from the YAML reader; JSON it cannot read (surrogate
			 * escapes, concatenated texts) simply has none. */
			json_t *ydocs = json_array();

			if (!ydocs) {
				rc = -ENOMEM;
				goto out;
			}
			if (parse_stream(&ps, ydocs)) {
				ps.locs->n = 0;
				ds_err_clear(err);
			}
			json_decref(ydocs);
		}
	} else {
		json_array_clear(docs);
		rc = parse_stream(&ps, docs);
	}
	if (!rc && ps.locs)
		rc = locs_index(ps.locs);
	if (rc)
		goto out;
	*docs_out = docs;
	docs = NULL;
	if (locs_out) {
		*locs_out = ps.locs;
		ps.locs = NULL;
	}
out:
	if (rc == -ENOMEM && err && !err->msg[0])
		ds_err_set(err, "out of memory");
	anchors_clear(&ps);
	free(ps.anchors);
	free(ps.ptr);
	ds_yaml_locs_free(ps.locs);
	json_decref(docs);
	yaml_parser_delete(&ps.p);
	return ds_err_fallback(err, rc);
}

int ds_yaml_read_file(const char *path, char **out, size_t *len_out, ds_err *err)
{
	FILE *f = NULL;
	char *buf = NULL;
	size_t len = 0;
	int rc = 0;
	bool is_stdin = path && strcmp(path, "-") == 0;

	if (!path) {
		ds_err_set(err, "ds_yaml_read_file: no path");
		return -EINVAL;
	}
	f = is_stdin ? stdin : fopen(path, "rb");
	if (!f) {
		rc = -errno;
		ds_err_setloc(err, path, 0, 0, "cannot open: %s", strerror(errno));
		return ds_err_fallback(err, rc);
	}
	rc = ds_read_stream(f, DS_YAML_MAX_INPUT, &buf, &len);
	if (rc == -E2BIG)
		ds_err_setloc(err, path, 0, 0, "input larger than %u bytes", DS_YAML_MAX_INPUT);
	else if (rc == -EIO)
		ds_err_setloc(err, path, 0, 0, "read error");
	else if (rc < 0)
		ds_err_set(err, "out of memory");
	if (!is_stdin)
		fclose(f);
	if (rc < 0)
		return rc;
	*out = buf;
	if (len_out)
		*len_out = len;
	return 0;
}

int ds_yaml_parse_file(const char *path, unsigned flags, json_t **docs_out, ds_yaml_locs **locs_out,
		       ds_err *err)
{
	char *buf = NULL;
	size_t len = 0;
	int rc = ds_yaml_read_file(path, &buf, &len, err);

	if (rc < 0)
		return rc;
	rc = ds_yaml_parse(buf, len, path, flags, docs_out, locs_out, err);
	free(buf);
	return ds_err_fallback(err, rc);
}
