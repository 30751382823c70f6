#ifndef DRASYNC_LABEL_SELECTOR_H
#define DRASYNC_LABEL_SELECTOR_H

/*
 * Label selectors in kubectl's syntax (`kubectl get -l`), read as
 * k8s.io/apimachinery labels.Parse reads them: comma-separated requirements,
 * all of which must hold:
 *
 *   key=value, key==value, key!=value     equality (!= also holds when key is absent)
 *   key in (v1, v2), key notin (v1, v2)   sets (notin also holds when key is absent)
 *   key, !key                             existence
 *   key>N, key<N                          integer comparison of the label's value
 *
 * Blanks (space, tab, CR, LF) around tokens are ignored. Keys are qualified
 * names: an optional DNS subdomain prefix (at most 253) and '/', then a name
 * of 1-63 of [A-Za-z0-9-_.] starting and ending alphanumeric. Values are 0-63
 * of the same characters, alphanumeric at both ends when not empty. An empty
 * value is valid ("key=", "key in ()"). The empty selector matches everything.
 */

#include "drasync/err.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct ds_label_selector ds_label_selector;

/**
 * Parse a selector.
 * @param col_out  optional: on failure, the 1-based byte column in s at fault
 * @return 0; -EINVAL with err saying what was found and what was expected,
 *         or why a key or value is invalid; -ENOMEM
 */
int ds_label_selector_parse(ds_label_selector **out, const char *s, size_t *col_out, ds_err *err);

void ds_label_selector_free(ds_label_selector *sel);

/** Whether `labels` (a JSON object of strings, e.g. metadata.labels; NULL = none) match. */
bool ds_label_selector_matches(const ds_label_selector *sel, const json_t *labels);

/** Number of requirements (0 for the empty selector, which matches everything). */
size_t ds_label_selector_count(const ds_label_selector *sel);

/** Whether s is a valid label key (qualified name) / label value. */
bool ds_label_key_valid(const char *s, size_t len);
bool ds_label_value_valid(const char *s, size_t len);

#endif
