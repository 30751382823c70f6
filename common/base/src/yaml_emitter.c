/*
 * The YAML module's emitter: jansson values written as block-style YAML
 * through libyaml's emitter, quoting what the resolver would read back as
 * another type.
 */
#include "drasync/yaml.h"

#include "drasync/buf.h"

#include "yaml_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool eq(const char *s, size_t len, const char *lit)
{
	size_t n = strlen(lit);

	return n == len && memcmp(s, lit, n) == 0;
}

/*
 * True when a string written as a plain scalar would not read back as the
 * same string here or in kubectl: it resolves to another type, is a merge
 * key, or is something other YAML 1.1 readers type (timestamps, base 60).
 * Syntactic safety (indicators, ": ", " #", spaces, line breaks) is left to
 * libyaml's emitter analysis.
 */
static bool needs_quotes(const char *s, size_t len)
{
	struct res r = {0};

	ds_yaml_resolve_plain(s, len, &r);
	if (r.kind != R_STR)
		return true;
	if (eq(s, len, "<<") || eq(s, len, "=") || ds_yaml_looks_like_timestamp(s, len))
		return true;
	/* Base 60 numbers ("1:20", "-3:25:45.5") are ints/floats to YAML 1.1 readers. */
	if (len &&
	    (is_digit(s[0]) || ((s[0] == '+' || s[0] == '-') && len > 1 && is_digit(s[1])))) {
		bool colon = false, ok = true;

		for (size_t i = 1; i < len && ok; i++)
			if (s[i] == ':')
				colon = true;
			else if (!is_digit(s[i]) && s[i] != '_' && s[i] != '.')
				ok = false;
		if (ok && colon)
			return true;
	}
	/* A string ending in a line break or with special characters goes through libyaml's
	 * analysis; anything with a NUL must be double-quoted (libyaml escapes it). */
	return memchr(s, '\0', len) != NULL;
}

/* libyaml's write handler: into the ds_str (a failed add is read back by em_fail). */
static int str_write(void *data, unsigned char *buffer, size_t size)
{
	return ds_str_add(data, buffer, size) == 0;
}

struct em {
	yaml_emitter_t e;
	ds_str out; /* the document, bounded by DS_YAML_MAX_INPUT so it can be read back */
	ds_err *err;
	int rc;
};

static int em_fail(struct em *em)
{
	switch (em->e.error) {
	case YAML_MEMORY_ERROR:
		ds_err_set(em->err, "out of memory while writing YAML");
		return -ENOMEM;
	case YAML_WRITER_ERROR:
		if (ds_str_error(&em->out) == -E2BIG) {
			ds_err_set(em->err, "YAML output larger than %u bytes", DS_YAML_MAX_INPUT);
			return -E2BIG;
		}
		if (ds_str_error(&em->out) == -ENOMEM) {
			ds_err_set(em->err, "out of memory while writing YAML");
			return -ENOMEM;
		}
		ds_err_set(em->err, "cannot write YAML: %s",
			   em->e.problem ? em->e.problem : "write error");
		return -EIO;
	default:
		ds_err_set(em->err, "cannot write YAML: %s",
			   em->e.problem ? em->e.problem : "emitter error");
		return -EINVAL;
	}
}

static int emit_event(struct em *em, yaml_event_t *ev)
{
	if (!yaml_emitter_emit(&em->e, ev))
		return em_fail(em);
	return 0;
}

static int emit_string(struct em *em, const char *s, size_t len)
{
	yaml_event_t ev;
	bool quote = needs_quotes(s, len);
	yaml_scalar_style_t style = YAML_ANY_SCALAR_STYLE;

	if (memchr(s, '\0', len))
		style = YAML_DOUBLE_QUOTED_SCALAR_STYLE;
	else if (memchr(s, '\n', len))
		style = YAML_LITERAL_SCALAR_STYLE; /* libyaml falls back to "..." when unsafe */
	if (len > INT_MAX) {
		ds_err_set(em->err, "string too long for YAML");
		return -EINVAL;
	}
	if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)(uintptr_t)s, (int)len,
					  !quote, 1, style))
		return -ENOMEM;
	return emit_event(em, &ev);
}

static int emit_plain(struct em *em, const char *s)
{
	yaml_event_t ev;

	if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)(uintptr_t)s,
					  (int)strlen(s), 1, 1, YAML_PLAIN_SCALAR_STYLE))
		return -ENOMEM;
	return emit_event(em, &ev);
}

/* Shortest text that reads back as the same double and as a float, not an int. */
static void format_real(double d, char *buf, size_t size)
{
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(buf, size, "%.*g", prec, d);
		if (strtod(buf, NULL) == d)
			break;
	}
	if (!strpbrk(buf, ".eEn")) {
		size_t n = strlen(buf);

		if (n + 3 <= size)
			memcpy(buf + n, ".0", 3);
	}
}

static int emit_value(struct em *em, const json_t *v, int depth)
{
	yaml_event_t ev;
	char num[64];
	int rc = 0;

	if (depth > DS_YAML_MAX_DEPTH) {
		ds_err_set(em->err, "value nested deeper than %d levels", DS_YAML_MAX_DEPTH);
		return -EINVAL;
	}
	switch (json_typeof(v)) {
	case JSON_OBJECT: {
		bool empty = json_object_size(v) == 0;

		if (!yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1,
							 empty ? YAML_FLOW_MAPPING_STYLE
							       : YAML_BLOCK_MAPPING_STYLE))
			return -ENOMEM;
		if ((rc = emit_event(em, &ev)) != 0)
			return rc;
		for (void *it = json_object_iter((json_t *)v); it;
		     it = json_object_iter_next((json_t *)v, it)) {
			rc =
			    emit_string(em, json_object_iter_key(it), json_object_iter_key_len(it));
			if (!rc)
				rc = emit_value(em, json_object_iter_value(it), depth + 1);
			if (rc)
				return rc;
		}
		if (!yaml_mapping_end_event_initialize(&ev))
			return -ENOMEM;
		return emit_event(em, &ev);
	}
	case JSON_ARRAY: {
		bool empty = json_array_size(v) == 0;

		if (!yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1,
							  empty ? YAML_FLOW_SEQUENCE_STYLE
								: YAML_BLOCK_SEQUENCE_STYLE))
			return -ENOMEM;
		if ((rc = emit_event(em, &ev)) != 0)
			return rc;
		for (size_t i = 0; i < json_array_size(v); i++)
			if ((rc = emit_value(em, json_array_get(v, i), depth + 1)) != 0)
				return rc;
		if (!yaml_sequence_end_event_initialize(&ev))
			return -ENOMEM;
		return emit_event(em, &ev);
	}
	case JSON_STRING:
		return emit_string(em, json_string_value(v), json_string_length(v));
	case JSON_INTEGER:
		snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		return emit_plain(em, num);
	case JSON_REAL:
		format_real(json_real_value(v), num, sizeof(num));
		return emit_plain(em, num);
	case JSON_TRUE:
		return emit_plain(em, "true");
	case JSON_FALSE:
		return emit_plain(em, "false");
	case JSON_NULL:
	default:
		return emit_plain(em, "null");
	}
}

static int emit_doc(struct em *em, const json_t *value)
{
	yaml_event_t ev;
	int rc;

	if (!value) {
		ds_err_set(em->err, "no value to write");
		return -EINVAL;
	}
	yaml_emitter_set_unicode(&em->e, 1);
	yaml_emitter_set_indent(&em->e, 2);
	yaml_emitter_set_width(&em->e, -1);
	if (!yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING))
		return -ENOMEM;
	if ((rc = emit_event(em, &ev)) != 0)
		return rc;
	if (!yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1))
		return -ENOMEM;
	if ((rc = emit_event(em, &ev)) != 0)
		return rc;
	if ((rc = emit_value(em, value, 1)) != 0)
		return rc;
	if (!yaml_document_end_event_initialize(&ev, 1))
		return -ENOMEM;
	if ((rc = emit_event(em, &ev)) != 0)
		return rc;
	if (!yaml_stream_end_event_initialize(&ev))
		return -ENOMEM;
	if ((rc = emit_event(em, &ev)) != 0)
		return rc;
	if (!yaml_emitter_flush(&em->e))
		return em_fail(em);
	return 0;
}

int ds_yaml_emit_string(const json_t *value, char **out, ds_err *err)
{
	struct em em;
	int rc;

	if (!out) {
		ds_err_set(err, "ds_yaml_emit_string: no output");
		return -EINVAL;
	}
	memset(&em, 0, sizeof(em));
	ds_str_init(&em.out, DS_YAML_MAX_INPUT);
	em.err = err;
	if (!yaml_emitter_initialize(&em.e)) {
		ds_err_set(err, "out of memory");
		return -ENOMEM;
	}
	yaml_emitter_set_output(&em.e, str_write, &em.out);
	rc = emit_doc(&em, value);
	yaml_emitter_delete(&em.e);
	if (!rc) {
		char *doc = ds_str_take(&em.out, NULL);

		if (doc)
			*out = doc;
		else
			rc = -ENOMEM;
	}
	if (rc == -ENOMEM && err && !err->msg[0])
		ds_err_set(err, "out of memory");
	ds_str_dispose(&em.out);
	return ds_err_fallback(err, rc);
}

int ds_yaml_emit(FILE *out, const json_t *value, ds_err *err)
{
	char *s = NULL;
	int rc;

	if (!out) {
		ds_err_set(err, "ds_yaml_emit: no output");
		return -EINVAL;
	}
	/* Emit into memory first so a failure writes nothing partial. */
	rc = ds_yaml_emit_string(value, &s, err);
	if (rc)
		return rc;
	if (fputs(s, out) == EOF) {
		ds_err_set(err, "cannot write YAML: %s", strerror(errno));
		rc = -EIO;
	}
	free(s);
	return ds_err_fallback(err, rc);
}
