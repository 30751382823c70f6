#include "drasync/json_limits.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

void ds_json_limits_default(ds_json_limits *lim)
{
	lim->max_bytes = DS_JSON_MAX_BYTES;
	lim->max_depth = DS_JSON_MAX_DEPTH;
	lim->max_values = DS_JSON_MAX_VALUES;
}

static int over(char *why, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int over(char *why, size_t size, const char *fmt, ...)
{
	va_list ap;

	if (why && size) {
		va_start(ap, fmt);
		vsnprintf(why, size, fmt, ap);
		va_end(ap);
	}
	return -E2BIG;
}

int ds_json_check_limits(const char *buf, size_t len, const ds_json_limits *lim, char *why,
			 size_t size)
{
	size_t depth = 0, values = 0;
	bool in_string = false, in_scalar = false;

	if (len > lim->max_bytes)
		return over(why, size,
			    "JSON of %zu bytes, over the %zu bytes the API server accepts in "
			    "one request: not parsed",
			    len, lim->max_bytes);
	for (size_t i = 0; i < len; i++) {
		char c = buf[i];

		if (in_string) {
			if (c == '\\')
				i++; /* the escaped character, whatever it is */
			else if (c == '"')
				in_string = false;
			continue;
		}
		if (c == '"' || c == '{' || c == '[' ||
		    (!in_scalar &&
		     (c == '-' || (c >= '0' && c <= '9') || c == 't' || c == 'f' || c == 'n'))) {
			if (++values > lim->max_values)
				return over(why, size,
					    "JSON with more than %zu values (the limit is %zu): "
					    "not parsed",
					    lim->max_values, lim->max_values);
		}
		switch (c) {
		case '"':
			in_string = true;
			in_scalar = false;
			break;
		case '{':
		case '[':
			in_scalar = false;
			if (++depth > lim->max_depth)
				return over(
				    why, size,
				    "JSON nested deeper than %zu levels (the limit is %zu): "
				    "not parsed",
				    lim->max_depth, lim->max_depth);
			break;
		case '}':
		case ']':
			in_scalar = false;
			if (depth)
				depth--;
			break;
		case ',':
		case ':':
		case ' ':
		case '\t':
		case '\n':
		case '\r':
			in_scalar = false;
			break;
		default:
			in_scalar = true; /* inside a number or a literal */
			break;
		}
	}
	return 0;
}
