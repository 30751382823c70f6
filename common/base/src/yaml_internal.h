#ifndef DRASYNC_YAML_INTERNAL_H
#define DRASYNC_YAML_INTERNAL_H

/*
 * What the three parts of the YAML module share: the resolver
 * (yaml_resolver.c) types plain scalars, the parser (yaml_parser.c) and the
 * emitter (yaml_emitter.c) use it to read them and to decide what to quote.
 */

#include <stdbool.h>
#include <stddef.h>

enum res_kind { R_STR, R_NULL, R_BOOL, R_INT, R_REAL, R_NONFINITE };

/* The type and value of a resolved scalar. */
struct res {
	enum res_kind kind;
	bool b;
	bool big; /* R_REAL from an integer beyond int64 */
	long long i;
	double d;
};

/* Type a plain (untagged, unquoted) scalar as go-yaml v2 does. */
void ds_yaml_resolve_plain(const char *s, size_t len, struct res *r);

/* go-yaml's parseTimestamp quick check plus the date shape; such values stay strings. */
bool ds_yaml_looks_like_timestamp(const char *s, size_t len);

#endif
