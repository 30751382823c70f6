#include "drasync/duration.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define NS 1ull
#define US (1000ull * NS)
#define MS (1000ull * US)
#define SEC (1000ull * MS)
#define MIN (60ull * SEC)
#define HOUR (60ull * MIN)

static const struct unit {
	const char *name;
	uint64_t ns;
} units[] = {
    {"ns", NS},	       {"us", US}, {"\xc2\xb5s", US}, /* U+00B5 micro sign */
    {"\xce\xbcs", US},				      /* U+03BC Greek mu */
    {"ms", MS},	       {"s", SEC}, {"m", MIN},	      {"h", HOUR},
};

static int bad(ds_err *err, size_t *col_out, size_t col, int rc, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int bad(ds_err *err, size_t *col_out, size_t col, int rc, const char *fmt, ...)
{
	va_list ap;

	if (col_out)
		*col_out = col;
	if (err) {
		ds_err_clear(err);
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return rc;
}

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

int ds_duration_parse(const char *s, int64_t *ns_out, size_t *col_out, ds_err *err)
{
	const char *p = s;
	uint64_t total = 0;
	int neg = 0;

	if (!s || !*s)
		return bad(err, col_out, 1, -EINVAL, "empty duration%s", "");
	if (*p == '-' || *p == '+')
		neg = *p++ == '-';
	if (strcmp(p, "0") == 0) {
		*ns_out = 0;
		return 0;
	}
	if (!*p)
		return bad(err, col_out, (size_t)(p - s) + 1, -EINVAL,
			   "invalid duration '%s': a number must follow the sign", s);
	while (*p) {
		const char *start = p, *u;
		uint64_t whole = 0, frac = 0, scale = 1, unit = 0, v;
		int digits = 0;
		size_t ulen = 0;

		/* Digits beyond 2^63 overflow; fraction digits beyond precision are dropped. */
		for (; is_digit(*p); p++, digits++) {
			if (whole > (1ull << 63) / 10)
				return bad(err, col_out, (size_t)(start - s) + 1, -ERANGE,
					   "duration '%s' out of range", s);
			whole = whole * 10 + (uint64_t)(*p - '0');
			if (whole > 1ull << 63)
				return bad(err, col_out, (size_t)(start - s) + 1, -ERANGE,
					   "duration '%s' out of range", s);
		}
		if (*p == '.') {
			p++;
			for (; is_digit(*p); p++, digits++) {
				if (scale > UINT64_MAX / 100)
					continue;
				frac = frac * 10 + (uint64_t)(*p - '0');
				scale *= 10;
			}
		}
		if (!digits)
			return bad(err, col_out, (size_t)(start - s) + 1, -EINVAL,
				   "invalid duration '%s': expected a number", s);
		u = p;
		while (*p && *p != '.' && !is_digit(*p))
			p++;
		ulen = (size_t)(p - u);
		if (ulen == 0)
			return bad(err, col_out, (size_t)(u - s) + 1, -EINVAL,
				   "missing unit in duration '%s' (ns, us, ms, s, m or h)", s);
		for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
			if (strlen(units[i].name) == ulen && memcmp(units[i].name, u, ulen) == 0)
				unit = units[i].ns;
		if (!unit)
			return bad(err, col_out, (size_t)(u - s) + 1, -EINVAL,
				   "unknown unit in duration '%s' (ns, us, ms, s, m or h)", s);
		if (whole > (1ull << 63) / unit)
			return bad(err, col_out, (size_t)(start - s) + 1, -ERANGE,
				   "duration '%s' out of range", s);
		v = whole * unit;
		/* frac/scale < 1, so this adds less than one unit. */
		v += (uint64_t)((double)frac * ((double)unit / (double)scale));
		if (v > 1ull << 63 || total > (1ull << 63) - v)
			return bad(err, col_out, (size_t)(start - s) + 1, -ERANGE,
				   "duration '%s' out of range", s);
		total += v;
	}
	if (!neg && total > (uint64_t)INT64_MAX)
		return bad(err, col_out, 1, -ERANGE, "duration '%s' out of range", s);
	*ns_out = neg ? (total == 1ull << 63 ? INT64_MIN : -(int64_t)total) : (int64_t)total;
	return 0;
}

int ds_duration_parse_ms(const char *s, long long *ms_out, size_t *col_out, ds_err *err)
{
	int64_t ns;
	int r = ds_duration_parse(s, &ns, col_out, err);

	if (r < 0)
		return r;
	if (ns < (int64_t)MS) {
		if (col_out)
			*col_out = 1;
		ds_err_set(err, "duration '%s' must be positive and at least 1ms", s);
		return -EINVAL;
	}
	*ms_out = (long long)(ns / (int64_t)MS);
	return 0;
}
