#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu_yaml.h"

#include "drasync/yaml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parse text that must succeed; returns the documents array. */
json_t *tu_yaml_parse_ok(const char *text)
{
	json_t *docs = NULL;
	ds_err err = {0};
	char buf[512];
	int rc = ds_yaml_parse(text, strlen(text), "t.yaml", 0, &docs, NULL, &err);

	if (rc)
		fail_msg("parse failed (%d): %s\ninput:\n%s", rc,
			 ds_err_format(&err, buf, sizeof(buf)), text);
	return docs;
}

/* Parse a single-document text that must succeed; returns its root (caller decrefs). */
json_t *tu_yaml_parse1(const char *text)
{
	json_t *docs = tu_yaml_parse_ok(text);
	json_t *v;

	assert_int_equal(json_array_size(docs), 1);
	v = json_incref(json_array_get(docs, 0));
	json_decref(docs);
	return v;
}

/* Parse text that must fail; returns "file:line:col: msg" in buf. */
const char *tu_yaml_parse_err(const char *text, int want_rc, char *buf, size_t size)
{
	json_t *docs = NULL;
	ds_err err = {0};
	int rc = ds_yaml_parse(text, strlen(text), "t.yaml", DS_YAML_LOCATIONS, &docs, NULL, &err);

	if (rc == 0)
		fail_msg("parse unexpectedly succeeded:\n%s", text);
	assert_int_equal(rc, want_rc);
	assert_null(docs);
	return ds_err_format(&err, buf, size);
}

/* Compact JSON text of a value, to compare whole structures exactly. */
void tu_assert_json(const json_t *v, const char *want)
{
	char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);

	assert_non_null(s);
	if (strcmp(s, want) != 0) {
		char copy[4096];

		snprintf(copy, sizeof(copy), "%s", s);
		free(s);
		fail_msg("got  %s\nwant %s", copy, want);
	}
	free(s);
}

void tu_yaml_assert_parses_to(const char *text, const char *want)
{
	json_t *v = tu_yaml_parse1(text);

	tu_assert_json(v, want);
	json_decref(v);
}

char *tu_yaml_emit(const json_t *v)
{
	char *s = NULL;
	ds_err err = {0};

	assert_int_equal(ds_yaml_emit_string(v, &s, &err), 0);
	assert_non_null(s);
	return s;
}

/* parse -> emit -> parse gives an equal value. */
void tu_yaml_assert_round_trip(const json_t *v)
{
	char *y = tu_yaml_emit(v);
	json_t *back = tu_yaml_parse_ok(y);

	if (!json_equal(json_array_get(back, 0), v) || json_array_size(back) != 1) {
		char *a = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
		char *b = json_dumps(back, JSON_ENCODE_ANY | JSON_COMPACT);
		char msg[16384];

		snprintf(msg, sizeof(msg), "round trip differs\nyaml:\n%s\nvalue %s\nback %s", y, a,
			 b);
		free(a);
		free(b);
		fail_msg("%s", msg);
	}
	json_decref(back);
	free(y);
}
