#include "drasync/yaml.h"

#include "drasync/buf.h"

#include "yaml_internal.h"
#include "yaml_parser_internal.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/*
 * The parser's scalars and mappings: a scalar event typed (by its tag or the
 * resolver) into a JSON value or a mapping key string as sigs.k8s.io/yaml
 * does, and a mapping read entry by entry with its merge keys ("<<"), its
 * anchors on keys and its duplicate checks.
 */

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
	return ds_yaml_fail(ps, &ev->start_mark, -EBADMSG, "cannot decode %.*s as !!%s",
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
		return ds_yaml_fail(ps, m, -EBADMSG, "unsupported mapping key: null");
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

int ds_yaml_parse_scalar(struct ps *ps, yaml_event_t *ev, struct built *out)
{
	struct res r = {0};
	int rc = scalar_res(ps, ev, &r);

	if (rc)
		return rc;
	if (r.kind == R_NONFINITE)
		return ds_yaml_fail(
		    ps, &ev->start_mark, -EBADMSG,
		    "%s cannot be represented in JSON (quote it to keep it as a string)",
		    (const char *)ev->data.scalar.value);
	if (r.kind == R_STR)
		out->v = json_stringn((const char *)ev->data.scalar.value, ev->data.scalar.length);
	else
		out->v = json_from_res(&r);
	if (!out->v)
		return ds_yaml_fail(ps, &ev->start_mark, -ENOMEM, "out of memory");
	out->nodes = 1;
	out->height = 0;
	return 0;
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
				rc = ds_yaml_locs_add(ps->locs, ps->doc, ps->ptr, ps->ptrlen, tail,
						      tl, &e.loc);
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
		return ds_yaml_fail(ps, &kev->start_mark, -EBADMSG,
				    "merge key '<<' needs a mapping or a list of mappings");
	json_array_foreach (v, i, m) {
		if (!json_is_object(m))
			return ds_yaml_fail(ps, &kev->start_mark, -EBADMSG,
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
		if ((rc = ds_yaml_ptr_push(ps, "<<", 2)) != 0)
			return rc;
		prefix = strndup(ps->ptr, ps->ptrlen);
		plen = ps->ptrlen;
		if (!prefix)
			return -ENOMEM;
	}
	rc = ds_yaml_next(ps, &vev);
	if (!rc)
		rc = ds_yaml_parse_node(ps, &vev, depth + 1, &kev->start_mark, &c);
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
	struct anchor *a = ds_yaml_anchor_find(ps, (const char *)kev->data.alias.anchor);
	struct res r = {0};
	int rc;

	if (!a || !a->value)
		return ds_yaml_fail(ps, &kev->start_mark, -EBADMSG, "unknown anchor '%s'",
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
		return ds_yaml_fail(ps, &kev->start_mark, -EBADMSG, "unsupported mapping key: a %s",
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
	return ds_yaml_fail(ps, &kev->start_mark, -EBADMSG, "unsupported mapping key: a %s",
			    kev->type == YAML_MAPPING_START_EVENT ? "mapping" : "sequence");
}

/* Reject keys JSON cannot hold here and duplicates; an explicit key replaces a merged one. */
static int map_check_key(struct ps *ps, const yaml_event_t *kev, json_t *obj, json_t *merged,
			 const char *key, size_t klen)
{
	if (memchr(key, '\0', klen))
		/* jansson's json_equal() and json_deep_copy() stop keys at a NUL. */
		return ds_yaml_fail(ps, &kev->start_mark, -EBADMSG,
				    "mapping key contains a NUL character");
	if (json_object_getn(obj, key, klen)) {
		if (!merged || !json_object_getn(merged, key, klen))
			return ds_yaml_fail(ps, &kev->start_mark, -EBADMSG, "duplicate key '%.*s'",
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

	if (ps->locs && (rc = ds_yaml_ptr_push(ps, key, klen)) != 0)
		return rc;
	rc = ds_yaml_next(ps, &vev);
	if (!rc)
		rc = ds_yaml_parse_node(ps, &vev, depth + 1, &kev->start_mark, &c);
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
int ds_yaml_parse_mapping(struct ps *ps, int depth, struct built *out)
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

		rc = ds_yaml_next(ps, &kev);
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
