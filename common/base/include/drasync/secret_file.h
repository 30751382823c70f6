#ifndef DRASYNC_SECRET_FILE_H
#define DRASYNC_SECRET_FILE_H

/*
 * A small file that may hold a secret (a CURVE secret key, a SOCKS5 proxy's
 * password), read whole: opened without following a symlink unless the path
 * is one (Kubernetes mounts a Secret's files as symlinks), a regular file,
 * refused when group or others may access it, bounded in size. Callers parse
 * the lines themselves and wipe the buffer when done.
 */

#include "drasync/err.h"

#include <stdbool.h>
#include <stddef.h>

/**
 * Read the file at path into buf (cap bytes, NUL-terminated).
 * @param what    the file's name in messages ("secret key file")
 * @param secret  refuse the file when any bit of 0077 is set in its mode
 * @return the number of bytes read; -ENOENT and other open(2) errors;
 *         -EINVAL (not a regular file); -EPERM (group or others may access
 *         it: the message says to chmod 600); -EBADMSG (more than cap - 1
 *         bytes)
 */
int ds_secret_file_read(const char *path, const char *what, bool secret, char *buf, size_t cap,
			ds_err *err);

#endif
