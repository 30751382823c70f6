#ifndef DRASYNC_JSON_LIMITS_H
#define DRASYNC_JSON_LIMITS_H

/*
 * JSON from another site bounded before it is parsed (issue 23): a scan of the
 * bytes, no allocation, checks the size, the nesting depth and the number of
 * values, so that a small record cannot make jansson build a huge tree (16 MiB
 * of `[{},{},...]` took over 1.2 GB). Syntax is jansson's to judge; the scan
 * only counts.
 */

#include <stddef.h>

typedef struct ds_json_limits {
	size_t max_bytes;  /* the API server's own request limit: DS_JSON_MAX_BYTES */
	size_t max_depth;  /* nested objects and arrays */
	size_t max_values; /* strings (keys too), numbers, literals, objects, arrays */
} ds_json_limits;

#define DS_JSON_MAX_BYTES (3u << 20)
#define DS_JSON_MAX_DEPTH 100
#define DS_JSON_MAX_VALUES 500000

/** The defaults above. */
void ds_json_limits_default(ds_json_limits *lim);

/**
 * Whether buf (len bytes of JSON text) stays within lim. On -E2BIG why says
 * which limit and by how much ("JSON of 4194304 bytes, over the 3145728 ...").
 * @return 0, or -E2BIG
 */
int ds_json_check_limits(const char *buf, size_t len, const ds_json_limits *lim, char *why,
			 size_t size);

#endif
