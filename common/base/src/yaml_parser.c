#include "drasync/yaml.h"

#include "drasync/buf.h"

#include "yaml_internal.h"
#include "yaml_parser_internal.h"

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
 *
 * This file holds the events, anchors, sequences, aliases, nodes, the
 * stream and the entry points; yaml_mapping.c the scalars, keys, mappings
 * and merge keys; yaml_locs.c the locations.
 */

#define DS_YAML_MIN_ALIAS_BUDGET 100000u

int ds_yaml_fail(struct ps *ps, const yaml_mark_t *m, int rc, const char *fmt, ...)
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
			return ds_yaml_fail(ps, &m, -EBADMSG, "%s (#%X)", problem,
					    (unsigned)p->problem_value);
		return ds_yaml_fail(ps, &m, -EBADMSG, "%s", problem);
	default:
		if (m.index < ps->len && ps->buf[m.index] == '\t' &&
		    !strcmp(problem, "found character that cannot start any token"))
			return ds_yaml_fail(
			    ps, &m, -EBADMSG,
			    "found a tab character that cannot start any token (YAML is "
			    "indented with spaces, not tabs)");
		if (p->context)
			return ds_yaml_fail(ps, &m, -EBADMSG, "%s %s", p->context, problem);
		return ds_yaml_fail(ps, &m, -EBADMSG, "%s", problem);
	}
}

int ds_yaml_next(struct ps *ps, yaml_event_t *ev)
{
	if (!yaml_parser_parse(&ps->p, ev))
		return parser_error(ps);
	return 0;
}

/* JSON pointer maintenance (only with locations). */
int ds_yaml_ptr_push(struct ps *ps, const char *seg, size_t len)
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

	return ds_yaml_ptr_push(ps, b, (size_t)n);
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
	return ds_yaml_locs_add(ps->locs, ps->doc, ps->ptr, ps->ptrlen, NULL, 0, &loc);
}

struct anchor *ds_yaml_anchor_find(struct ps *ps, const char *name)
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

		rc = ds_yaml_next(ps, &ev);
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
		rc = ds_yaml_parse_node(ps, &ev, depth + 1, NULL, &c);
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

static int parse_alias(struct ps *ps, yaml_event_t *ev, int depth, const yaml_mark_t *keymark,
		       struct built *out)
{
	const char *name = (const char *)ev->data.alias.anchor;
	struct anchor *a = ds_yaml_anchor_find(ps, name);
	size_t budget = ps->nodes > DS_YAML_MIN_ALIAS_BUDGET ? ps->nodes : DS_YAML_MIN_ALIAS_BUDGET;
	int rc;

	if (!a)
		return ds_yaml_fail(ps, &ev->start_mark, -EBADMSG, "unknown anchor '%s'", name);
	if (!a->value)
		return ds_yaml_fail(ps, &ev->start_mark, -EBADMSG,
				    "alias '*%s' refers to a node that contains it", name);
	if (depth + a->height > DS_YAML_MAX_DEPTH)
		return ds_yaml_fail(ps, &ev->start_mark, -EBADMSG, "nesting deeper than %d levels",
				    DS_YAML_MAX_DEPTH);
	if (a->nodes > budget - ps->alias_nodes)
		return ds_yaml_fail(ps, &ev->start_mark, -EBADMSG,
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
		rc = ds_yaml_locs_add(ps->locs, ps->doc, ps->ptr, ps->ptrlen, tail, tl, &e.loc);
		free(tail);
		if (rc)
			return rc;
	}
	return 0;
}

/* Build the value of the node that starts with *ev (consumed). */
int ds_yaml_parse_node(struct ps *ps, yaml_event_t *ev, int depth, const yaml_mark_t *keymark,
		       struct built *out)
{
	const yaml_char_t *anchor = NULL;
	size_t ai = 0;
	int rc = 0;

	if (depth > DS_YAML_MAX_DEPTH) {
		rc = ds_yaml_fail(ps, &ev->start_mark, -EBADMSG, "nesting deeper than %d levels",
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
		rc = ds_yaml_fail(ps, &ev->start_mark, -EBADMSG, "unexpected YAML event");
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
		rc = ds_yaml_parse_scalar(ps, ev, out);
	else if (ev->type == YAML_SEQUENCE_START_EVENT)
		rc = parse_sequence(ps, depth, out);
	else
		rc = ds_yaml_parse_mapping(ps, depth, out);
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

		rc = ds_yaml_next(ps, &ev);
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
		rc = ds_yaml_next(ps, &ev);
		if (rc)
			return rc;
		ps->ptrlen = 0;
		rc = ds_yaml_parse_node(ps, &ev, 1, NULL, &root);
		anchors_clear(ps);
		if (rc)
			return rc;
		rc = ds_yaml_next(ps, &ev); /* document end */
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
		rc = ds_yaml_locs_index(ps.locs);
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
