#ifndef DRASYNC_BUF_H
#define DRASYNC_BUF_H

/*
 * Growable arrays, bounded strings and bounded whole-file reads: the one
 * place the modules' buffers grow and their input files are read.
 */

#include <stddef.h>
#include <stdio.h>

/**
 * Make *p (an array of *cap elements of `elem` bytes) hold at least `need`
 * elements: the capacity doubles from 16 until it does. *p and *cap are
 * untouched on failure.
 * @return 0, or -ENOMEM (out of memory, or the size would overflow)
 */
int ds_grow(void **p, size_t *cap, size_t need, size_t elem);

/**
 * Read f to its end into a NUL-terminated buffer (*out, to free; *len_out
 * without the NUL, may be NULL), reading no more than max + 1 bytes.
 * @return 0; -E2BIG when f holds more than max bytes; -EIO on a read error;
 *         -ENOMEM
 */
int ds_read_stream(FILE *f, size_t max, char **out, size_t *len_out);

/** ds_read_stream() of the file at path. @return as it, or -errno of the open */
int ds_read_file(const char *path, size_t max, char **out, size_t *len_out);

/*
 * A string that grows up to a maximum length fixed at init. The first add
 * that fails (too long, out of memory) frees what was held and is remembered:
 * every later add and take fail the same way, so a caller may chain adds and
 * check once (ds_str_error, or the NULL of ds_str_take). A stack value:
 * ds_str_init() before use, ds_str_dispose() after (or ds_str_take()).
 */
typedef struct ds_str {
	char *p;	 /* NUL-terminated once anything was added; NULL before */
	size_t len, cap; /* bytes held (without the NUL), bytes allocated */
	size_t max;	 /* most bytes it may hold (without the NUL) */
	int err;	 /* 0, or the negative errno of the add that failed */
} ds_str;

/** An empty string that may hold up to `max` bytes. Allocates nothing. */
void ds_str_init(ds_str *s, size_t max);

/**
 * Append n bytes of p (may contain NULs; p may be NULL when n is 0).
 * @return 0; -E2BIG when the result would be longer than max; -ENOMEM. On
 *         failure the string is freed and keeps failing (see above).
 */
int ds_str_add(ds_str *s, const void *p, size_t n);

/** ds_str_add() of a NUL-terminated string. */
int ds_str_adds(ds_str *s, const char *str);

/** Append printf-style formatted text. @return as ds_str_add(), or -EINVAL on a format error */
int ds_str_addf(ds_str *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** Remove the first n bytes (all of them when n >= len). */
void ds_str_drop(ds_str *s, size_t n);

/** Make s empty and usable again (clears a failure), keeping its memory and max. */
void ds_str_reset(ds_str *s);

/**
 * Hand the contents to the caller: a NUL-terminated buffer (to free; "" when
 * nothing was added), *len (may be NULL) its length. s is left empty and
 * usable, as after ds_str_reset().
 * @return the buffer, or NULL when an earlier add failed or out of memory
 */
char *ds_str_take(ds_str *s, size_t *len);

/** Free what s holds; s is left empty and usable (same max). NULL-safe. */
void ds_str_dispose(ds_str *s);

/**
 * The bytes held, NUL-terminated and writable in place (borrowed: valid until
 * the next add); NULL while nothing is held.
 */
char *ds_str_ptr(const ds_str *s);

/** Bytes held, without the NUL. */
size_t ds_str_len(const ds_str *s);

/** 0, or the negative errno of the add that failed (-E2BIG, -ENOMEM, -EINVAL). */
int ds_str_error(const ds_str *s);

#endif
