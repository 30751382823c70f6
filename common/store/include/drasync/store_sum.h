#ifndef DRASYNC_STORE_SUM_H
#define DRASYNC_STORE_SUM_H
/*
 * Per-source sums counted in C, not by SQL's GROUP BY: without an index in
 * the group's order SQLite sorts every row first, and its sorter holds them
 * (4 MB of the importer's heap with 100,000 records waiting). Here the rows
 * stream through a few counters, one per source seen.
 */
#include <sqlite3.h>
#include <stdint.h>

/* Told each source's sum; the same source may be told more than once (add). */
typedef int (*ds_store_sum_fn)(void *ud, const char *source, uint64_t n);

/*
 * Step q to its end: column 0 a source name, column 1 an amount (no second
 * column: each row counts 1); fn told each source's sum.
 * @return SQLITE_DONE; a negative errno fn returned (q left where it was); or
 *         SQLite's error code
 */
int ds_store_sum_by_source(sqlite3_stmt *q, ds_store_sum_fn fn, void *ud);

#endif
