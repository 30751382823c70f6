#ifndef DRASYNC_DSTEST_H
#define DRASYNC_DSTEST_H

/* Helpers for tests of the import pipeline. Include after cmocka.h. */

#include "drasync/report.h"
#include "drasync/target_config.h"

#include <jansson.h>

/** A TargetConfig from YAML text; fails the test when it does not load. */
ds_target_config *dt_config(const char *yaml);

/** The single object of a YAML document; fails the test otherwise. Caller decrefs. */
json_t *dt_object(const char *yaml);

/** Every document of a YAML file (List not unrolled). Caller decrefs. */
json_t *dt_load_file(const char *path);

/** The object of `kind` named `name` in an array of objects (borrowed), or fails. */
json_t *dt_find(json_t *objs, const char *kind, const char *name);

/** String at a JSON-pointer-like path "/spec/resourceClaims/0/name", or NULL. */
const char *dt_str(const json_t *obj, const char *ptr);

/** Value at a JSON pointer path, or NULL. */
json_t *dt_get(const json_t *obj, const char *ptr);

/** Number of report entries of `type` whose object, container, entry, from and to
 * contain the given substrings (NULL = any). */
size_t dt_count(const ds_report *rep, enum ds_report_type type, const char *object,
		const char *container, const char *entry, const char *from, const char *to);

/** Print the report (for failing test diagnostics). */
void dt_dump(const ds_report *rep);

#endif
