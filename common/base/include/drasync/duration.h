#ifndef DRASYNC_DURATION_H
#define DRASYNC_DURATION_H

/*
 * Durations as Go's time.ParseDuration reads them (what kubectl users write):
 * a sign, then one or more decimal numbers each with an optional fraction and
 * a unit, "300ms", "1.5h", "2h45m", "-1.5h"; units ns, us, µs (U+00B5 or
 * U+03BC), ms, s, m, h; "0" alone needs no unit. Fractions beyond
 * nanosecond precision are truncated, as Go does.
 */

#include "drasync/err.h"

#include <stddef.h>
#include <stdint.h>

/**
 * Parse `s` into nanoseconds.
 * @param col_out  optional: on failure, the 1-based byte column in s at fault
 * @return 0; -EINVAL (err says why: missing unit, unknown unit, not a number)
 *         or -ERANGE (beyond +-292 years)
 */
int ds_duration_parse(const char *s, int64_t *ns_out, size_t *col_out, ds_err *err);

/**
 * ds_duration_parse() of a duration that must be positive and a whole number
 * of milliseconds or more ("1ms" at the least; "1500us" reads as 1 ms).
 * @return as ds_duration_parse(); -EINVAL when zero, negative or below 1ms
 */
int ds_duration_parse_ms(const char *s, long long *ms_out, size_t *col_out, ds_err *err);

#endif
