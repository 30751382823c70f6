#ifndef DRASYNC_KEYS_H
#define DRASYNC_KEYS_H

/*
 * CURVE key pairs in Z85 text (40 characters each), as libzmq uses them.
 *
 * Files written by ds_keys_write() (and `keygen --out DIR`):
 *   DIR/NAME.key  the secret key, mode 0600: comment lines and one line "KEY"
 *   DIR/NAME.pub  the public key: comment lines and one line "KEY"
 * A secret key file that group or others may access is refused on load.
 */

#include "drasync/err.h"

#include <stdbool.h>

#define DS_KEY_Z85_LEN 40

typedef struct ds_keypair {
	char public_z85[DS_KEY_Z85_LEN + 1];
	char secret_z85[DS_KEY_Z85_LEN + 1];
} ds_keypair;

/** Generate a fresh CURVE key pair. @return 0, -ENOTSUP when libzmq lacks CURVE */
int ds_keys_generate(ds_keypair *out, ds_err *err);

/**
 * Write DIR/NAME.key (0600) and DIR/NAME.pub, creating DIR (0700) when missing.
 * Existing files are never overwritten unless `force`.
 * @return 0, -EEXIST when a file exists, or another negative errno
 */
int ds_keys_write(const char *dir, const char *name, const ds_keypair *kp, bool force, ds_err *err);

/**
 * Load a secret key file and derive its public key. Refuses (-EPERM) a file
 * that group or others can access, naming the file and its mode.
 * @return 0, -EPERM, -EBADMSG for a malformed file, or another negative errno
 */
int ds_keys_load_secret(const char *path, ds_keypair *out, ds_err *err);

/** Load a public key file (one Z85 key). @return 0, -EBADMSG, or a negative errno */
int ds_keys_load_public(const char *path, char out[DS_KEY_Z85_LEN + 1], ds_err *err);

/** True when `text` is exactly one valid 40-character Z85 key. */
bool ds_keys_z85_valid(const char *text);

#endif
