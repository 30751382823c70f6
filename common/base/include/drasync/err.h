#ifndef DRASYNC_ERR_H
#define DRASYNC_ERR_H

/*
 * Human-readable error detail. Functions return 0 or a negative errno; when
 * they fail they may fill an optional `ds_err *err` (last parameter) with a
 * message and, for errors in an input file, where it happened.
 */

#include <stddef.h>

typedef struct ds_err {
	char msg[256];
	char file[160]; /* input file, "" when not about a file */
	int line;	/* 1-based; 0 when unknown */
	int col;	/* 1-based; 0 when unknown */
} ds_err;

/** Reset to "no error". NULL-safe. */
void ds_err_clear(ds_err *err);

/** Set the message (printf-style), clearing the location. NULL-safe. */
void ds_err_set(ds_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** Set the message and the location in an input file. NULL-safe. */
void ds_err_setloc(ds_err *err, const char *file, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/**
 * Format as "file:line:col: msg" (or just "msg" without a location) into buf.
 * @return buf
 */
const char *ds_err_format(const ds_err *err, char *buf, size_t size);

#endif
