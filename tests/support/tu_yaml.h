#ifndef DRASYNC_TU_YAML_H
#define DRASYNC_TU_YAML_H

/*
 * Parsing and emitting YAML in a test (after cmocka.h): each helper fails
 * the test, showing the input, when the YAML module does not do what it must.
 */

#include <jansson.h>
#include <stddef.h>

/** Parse text that must succeed; returns the documents array (caller decrefs). */
json_t *tu_yaml_parse_ok(const char *text);

/** Parse a single-document text that must succeed; returns its root (caller decrefs). */
json_t *tu_yaml_parse1(const char *text);

/** Parse text that must fail with want_rc; returns "file:line:col: msg" in buf. */
const char *tu_yaml_parse_err(const char *text, int want_rc, char *buf, size_t size);

/** Fail unless the compact JSON text of v is want, to compare whole structures exactly. */
void tu_assert_json(const json_t *v, const char *want);

/** Fail unless text parses to the one document whose compact JSON is want. */
void tu_yaml_assert_parses_to(const char *text, const char *want);

/** The YAML text of v, which must emit (caller frees). */
char *tu_yaml_emit(const json_t *v);

/** Fail unless parse -> emit -> parse gives a value equal to v. */
void tu_yaml_assert_round_trip(const json_t *v);

#endif
