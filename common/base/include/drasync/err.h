#ifndef DRASYNC_ERR_H
#define DRASYNC_ERR_H

/*
 * Human-readable error detail. Functions return 0 or a negative errno. A public
 * function that fails always fills its optional `ds_err *err` (last parameter)
 * with a message and, for errors in an input file, where it happened; when
 * nothing more specific is known the message is strerror(-rc).
 * Callers start with `ds_err err = {0};`: an empty message means "none yet".
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
 * The "always fills" fallback, for a public function's exit: when rc < 0 and
 * err holds no message yet, set it to strerror(-rc). NULL-safe.
 * @return rc
 */
int ds_err_fallback(ds_err *err, int rc);

/**
 * Format as "file:line:col: msg" (or just "msg" without a location) into buf.
 * @return buf
 */
const char *ds_err_format(const ds_err *err, char *buf, size_t size);

#endif
