#include "drasync/store_sum.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Sources counted at once; more and the counters are told and start again. */
#define SUM_SOURCES 16
#define SOURCE_MAX 254 /* a DNS subdomain and its NUL */

struct counter {
	char source[SOURCE_MAX];
	uint64_t n;
};

static int tell(struct counter *c, int *used, ds_store_sum_fn fn, void *ud)
{
	for (int i = 0; i < *used; i++) {
		int rc = fn(ud, c[i].source, c[i].n);
		if (rc < 0)
			return rc;
	}
	*used = 0;
	return 0;
}

int ds_store_sum_by_source(sqlite3_stmt *q, ds_store_sum_fn fn, void *ud)
{
	struct counter c[SUM_SOURCES];
	bool amount = sqlite3_column_count(q) > 1;
	int used = 0, rc;

	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		const char *source = (const char *)sqlite3_column_text(q, 0);
		uint64_t n = amount ? (uint64_t)sqlite3_column_int64(q, 1) : 1;
		int i = 0;

		if (!source)
			source = "";
		if (strlen(source) >= SOURCE_MAX) { /* not a source's name: told as it is */
			int f = fn(ud, source, n);
			if (f < 0)
				return f;
			continue;
		}
		while (i < used && strcmp(c[i].source, source) != 0)
			i++;
		if (i == used) {
			if (used == SUM_SOURCES) {
				int f = tell(c, &used, fn, ud);
				if (f < 0)
					return f;
			}
			i = used++;
			snprintf(c[i].source, sizeof(c[i].source), "%s", source);
			c[i].n = 0;
		}
		c[i].n += n;
	}
	if (rc != SQLITE_DONE)
		return rc;
	rc = tell(c, &used, fn, ud);
	return rc < 0 ? rc : SQLITE_DONE;
}
