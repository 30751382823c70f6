#ifndef DRASYNC_BUF_H
#define DRASYNC_BUF_H

/*
 * Growable arrays and bounded whole-file reads: the one place the modules'
 * buffers grow and their input files are read.
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

#endif
