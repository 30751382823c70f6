#include "drasync/quantity.h"

#include <errno.h>
#include <string.h>

static const struct {
	const char *suffix;
	uint64_t factor;
} units[] = {
    {"Ki", 1ull << 10},	  {"Mi", 1ull << 20},	   {"Gi", 1ull << 30},
    {"Ti", 1ull << 40},	  {"k", 1000ull},	   {"M", 1000000ull},
    {"G", 1000000000ull}, {"T", 1000000000000ull}, {"", 1},
};

int ds_quantity_parse_bytes(const char *s, uint64_t *out, size_t *bad)
{
	uint64_t n = 0;
	size_t i = 0;

	*bad = 0;
	for (; s[i] >= '0' && s[i] <= '9'; i++) {
		if (n > (UINT64_MAX - 9) / 10)
			return -ERANGE;
		n = n * 10 + (uint64_t)(s[i] - '0');
	}
	if (i == 0)
		return -EINVAL;
	for (size_t u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
		if (strcmp(s + i, units[u].suffix) != 0)
			continue;
		if (n > UINT64_MAX / units[u].factor)
			return -ERANGE;
		*out = n * units[u].factor;
		return 0;
	}
	*bad = i;
	return -EINVAL;
}
