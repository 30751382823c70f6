#include "drasync/config_check.h"

#include "drasync/string_table.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ds_config_mark ds_config_push_key(ds_config_walk *w, const char *key)
{
	ds_config_mark m = {strlen(w->ptr), strlen(w->path)};
	size_t o = m.ptr;

	/* RFC 6901: '~' -> "~0", '/' -> "~1". */
	if (o + 1 < sizeof(w->ptr))
		w->ptr[o++] = '/';
	for (const char *p = key; *p && o + 2 < sizeof(w->ptr); p++) {
		if (*p == '~' || *p == '/') {
			w->ptr[o++] = '~';
			w->ptr[o++] = *p == '~' ? '0' : '1';
		} else {
			w->ptr[o++] = *p;
		}
	}
	w->ptr[o] = '\0';
	snprintf(w->path + m.path, sizeof(w->path) - m.path, "%s%s", m.path ? "." : "", key);
	return m;
}

ds_config_mark ds_config_push_index(ds_config_walk *w, size_t i)
{
	ds_config_mark m = {strlen(w->ptr), strlen(w->path)};

	snprintf(w->ptr + m.ptr, sizeof(w->ptr) - m.ptr, "/%zu", i);
	snprintf(w->path + m.path, sizeof(w->path) - m.path, "[%zu]", i);
	return m;
}

void ds_config_pop(ds_config_walk *w, ds_config_mark m)
{
	w->ptr[m.ptr] = '\0';
	w->path[m.path] = '\0';
}

static void set_error(ds_config_walk *w, int line, int col, const char *fmt, va_list ap)
{
	char msg[200];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (w->path[0])
		ds_err_setloc(w->err, w->file, line, col, "%s: %s", w->path, msg);
	else
		ds_err_setloc(w->err, w->file, line, col, "%s", msg);
}

int ds_config_fail(ds_config_walk *w, bool at_key, const char *fmt, ...)
{
	ds_yaml_loc loc = {0, 0, 0, 0};
	int line = 0, col = 0;
	va_list ap;

	if (w->locs && ds_yaml_locs_find(w->locs, 0, w->ptr, &loc) == 0) {
		line = loc.line;
		col = loc.col;
		if (at_key && loc.key_line > 0) {
			line = loc.key_line;
			col = loc.key_col;
		}
	}
	va_start(ap, fmt);
	set_error(w, line, col, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* Byte offset of 1-based line:col in the text, or SIZE_MAX. */
static size_t text_offset(const ds_config_walk *w, int line, int col)
{
	size_t o = 0;

	if (!w->src || line < 1 || col < 1)
		return SIZE_MAX;
	for (int l = 1; l < line; l++) {
		const char *nl = memchr(w->src + o, '\n', w->src_len - o);
		if (!nl)
			return SIZE_MAX;
		o = (size_t)(nl - w->src) + 1;
	}
	o += (size_t)col - 1;
	return o < w->src_len ? o : SIZE_MAX;
}

/*
 * Whether the `n` bytes of the value from text offset `o` are the string's
 * bytes as written (no escape, quote doubling or line break among them), so
 * that a column inside the string is a column in the file.
 */
static bool written_as_is(const ds_config_walk *w, size_t o, size_t n, char quote)
{
	if (o + n > w->src_len)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = w->src[o + i];
		if (c == '\n' || c == '\r' || (quote == '"' && c == '\\') ||
		    (quote == '\'' && c == '\''))
			return false;
	}
	return true;
}

int ds_config_fail_in_value(ds_config_walk *w, size_t offset, const char *fmt, ...)
{
	ds_yaml_loc loc = {0, 0, 0, 0};
	int line = 0, col = 0;
	va_list ap;

	if (w->locs && ds_yaml_locs_find(w->locs, 0, w->ptr, &loc) == 0) {
		size_t o = text_offset(w, loc.line, loc.col);
		line = loc.line;
		col = loc.col;
		if (o != SIZE_MAX && offset < 4096) {
			char c = w->src[o];
			char quote = c == '"' || c == '\'' ? c : 0;
			size_t start = o + (quote ? 1 : 0);

			if (c != '|' && c != '>' && written_as_is(w, start, offset, quote))
				col += (int)offset + (quote ? 1 : 0);
		}
	}
	va_start(ap, fmt);
	set_error(w, line, col, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), prev[64], cur[64];

	if (la >= 63 || lb >= 63)
		return 99;
	for (size_t j = 0; j <= lb; j++)
		prev[j] = j;
	for (size_t i = 1; i <= la; i++) {
		cur[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
			size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
			cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
		}
		memcpy(prev, cur, (lb + 1) * sizeof(size_t));
	}
	return prev[lb];
}

int ds_config_check_keys(ds_config_walk *w, const json_t *obj, const char *const *allowed)
{
	const char *key;
	json_t *v;

	json_object_foreach ((json_t *)(uintptr_t)obj, key, v) {
		const char *best = NULL;
		size_t best_d = 3;
		int ok = 0;

		for (const char *const *a = allowed; *a; a++) {
			size_t d;

			if (strcmp(key, *a) == 0) {
				ok = 1;
				break;
			}
			d = edit_distance(key, *a);
			if (d < best_d) {
				best_d = d;
				best = *a;
			}
		}
		if (ok)
			continue;
		/* The walk is left at the bad key: the load stops here. */
		ds_config_push_key(w, key);
		if (best)
			return ds_config_fail(w, true, "unknown key (did you mean '%s'?)", best);
		return ds_config_fail(w, true, "unknown key");
	}
	return 0;
}

/* What a user is told a value is; to_string only: true and false are both "a boolean". */
static const char *const json_type_table[] = {
    [JSON_OBJECT] = "a mapping",   [JSON_ARRAY] = "a list",  [JSON_STRING] = "a string",
    [JSON_INTEGER] = "an integer", [JSON_REAL] = "a number", [JSON_TRUE] = "a boolean",
    [JSON_FALSE] = "a boolean",	   [JSON_NULL] = "null",
};
DS_STRING_TABLE_TO_STRING(json_type, json_type, static)

const char *ds_config_type_name(const json_t *v)
{
	const char *s = json_type_to_string(json_typeof(v));

	return s ? s : "null";
}

int ds_config_member(ds_config_walk *w, const json_t *obj, const char *key, json_type type,
		     json_t **out)
{
	json_t *v = json_object_get(obj, key);
	static const char *const want[] = {
	    [JSON_OBJECT] = "a mapping",   [JSON_ARRAY] = "a list",  [JSON_STRING] = "a string",
	    [JSON_INTEGER] = "an integer", [JSON_REAL] = "a number", [JSON_TRUE] = "a boolean",
	    [JSON_FALSE] = "a boolean",	   [JSON_NULL] = "null",
	};

	*out = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (json_typeof(v) != type && !(type == JSON_TRUE && json_is_boolean(v))) {
		ds_config_mark m = ds_config_push_key(w, key);
		int r = ds_config_fail(w, false, "expected %s, found %s", want[type],
				       ds_config_type_name(v));
		ds_config_pop(w, m);
		return r;
	}
	*out = v;
	return 0;
}

int ds_config_member_str(ds_config_walk *w, const json_t *obj, const char *key, const char **out)
{
	json_t *v;
	int r = ds_config_member(w, obj, key, JSON_STRING, &v);

	if (r < 0)
		return r;
	*out = v ? json_string_value(v) : NULL;
	return 0;
}

int ds_config_member_bool(ds_config_walk *w, const json_t *obj, const char *key, bool dflt,
			  bool *out)
{
	json_t *v;
	int r = ds_config_member(w, obj, key, JSON_TRUE, &v);

	if (r < 0)
		return r;
	*out = v ? json_is_true(v) : dflt;
	return 0;
}

int ds_config_member_int_range(ds_config_walk *w, const json_t *obj, const char *key, long long lo,
			       long long hi, const char *bounds, long long *out)
{
	json_t *v;
	ds_config_mark m;
	int r;

	if ((r = ds_config_member(w, obj, key, JSON_INTEGER, &v)) < 0 || !v)
		return r;
	m = ds_config_push_key(w, key);
	if (json_integer_value(v) < lo || json_integer_value(v) > hi)
		r = ds_config_fail(w, false, "%lld is out of bounds (%s)",
				   (long long)json_integer_value(v), bounds);
	else
		*out = (long long)json_integer_value(v);
	ds_config_pop(w, m);
	return r;
}

int ds_config_section_str(ds_config_walk *w, const json_t *obj, const char *section,
			  const char *const *keys, const char **outs[])
{
	json_t *sec;
	ds_config_mark m;
	int r;

	if ((r = ds_config_member(w, obj, section, JSON_OBJECT, &sec)) < 0 || !sec)
		return r;
	m = ds_config_push_key(w, section);
	if ((r = ds_config_check_keys(w, sec, keys)) < 0)
		return r;
	for (size_t i = 0; keys[i]; i++)
		if ((r = ds_config_member_str(w, sec, keys[i], outs[i])) < 0)
			return r;
	ds_config_pop(w, m);
	return 0;
}

int ds_config_check_header(ds_config_walk *w, const json_t *root, const char *kind,
			   const char *program)
{
	const char *api, *k;
	ds_config_mark m;
	int r;

	if ((r = ds_config_member_str(w, root, "apiVersion", &api)) < 0 ||
	    (r = ds_config_member_str(w, root, "kind", &k)) < 0)
		return r;
	if (api && strcmp(api, DS_CONFIG_API_VERSION) != 0) {
		m = ds_config_push_key(w, "apiVersion");
		r = ds_config_fail(w, false, "unsupported apiVersion '%s' (expected %s)", api,
				   DS_CONFIG_API_VERSION);
		ds_config_pop(w, m);
		return r;
	}
	if (k && strcmp(k, kind) != 0) {
		m = ds_config_push_key(w, "kind");
		r = ds_config_fail(w, false, "this is a '%s'; %s reads kind %s", k, program, kind);
		ds_config_pop(w, m);
		return r;
	}
	return 0;
}

int ds_config_run(const char *path, const char *buf, size_t len, const char *filename,
		  const char *kind, ds_config_root_fn fn, void *ctx, json_t **docs_out, ds_err *err)
{
	char *text = NULL;
	json_t *docs = NULL;
	ds_yaml_locs *locs = NULL;
	ds_config_walk w = {.err = err};
	size_t n;
	int r;

	if (path) {
		if ((r = ds_yaml_read_file(path, &text, &len, err)) < 0)
			return r;
		buf = text;
		filename = path;
	}
	r = ds_yaml_parse(buf, len, filename, DS_YAML_LOCATIONS, &docs, &locs, err);
	if (r < 0) {
		r = r == -EBADMSG ? -EINVAL : r;
		goto out;
	}
	n = json_array_size(docs);
	if (n != 1) {
		if (n == 0)
			ds_err_setloc(err, filename, 0, 0,
				      "the file is empty; expected a %s document", kind);
		else
			ds_err_setloc(err, filename, 0, 0, "expected one %s document, found %zu",
				      kind, n);
		r = -EINVAL;
		goto out;
	}
	w.locs = locs;
	w.file = filename;
	w.src = buf;
	w.src_len = len;
	if ((r = fn(&w, json_array_get(docs, 0), ctx)) < 0)
		goto out;
	*docs_out = docs;
	docs = NULL;
out:
	json_decref(docs);
	ds_yaml_locs_free(locs);
	free(text);
	return r;
}

bool ds_config_host_port_valid(const char *s)
{
	const char *colon = s ? strrchr(s, ':') : NULL;
	char *end;
	long port;

	if (!colon || !colon[1])
		return false;
	if (s[0] == '[') {
		if (colon == s || colon[-1] != ']' || colon - s < 3)
			return false;
		for (const char *p = s + 1; p < colon - 1; p++)
			if (!isxdigit((unsigned char)*p) && *p != ':' && *p != '.')
				return false;
	} else {
		for (const char *p = s; p < colon; p++)
			if (!isalnum((unsigned char)*p) && *p != '-' && *p != '.' && *p != '*')
				return false;
	}
	for (const char *p = colon + 1; *p; p++)
		if (!isdigit((unsigned char)*p))
			return false;
	errno = 0;
	port = strtol(colon + 1, &end, 10);
	return errno == 0 && *end == '\0' && port >= 1 && port <= 65535;
}
