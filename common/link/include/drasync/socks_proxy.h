#ifndef DRASYNC_SOCKS_PROXY_H
#define DRASYNC_SOCKS_PROXY_H

/*
 * The SOCKS5 proxy the source reaches its target through (target.proxy):
 * the URL socks5://[user:pass@]host:port, and the credentials file
 * (target.proxyCredentialsFile) holding one line "user:pass", refused when
 * group or others can read it, as a secret key file is. The credentials go
 * to libzmq (ZMQ_SOCKS_USERNAME/PASSWORD, RFC 1929 username/password) and
 * never into a log line or an error message.
 */

#include "drasync/err.h"

#include <stddef.h>

#define DS_SOCKS_FIELD_MAX 256 /* host:port, user and password: 255 bytes each at most */

typedef struct ds_socks_proxy {
	char address[DS_SOCKS_FIELD_MAX];  /* "host:port", as ZMQ_SOCKS_PROXY takes it */
	char username[DS_SOCKS_FIELD_MAX]; /* "" : no authentication */
	char password[DS_SOCKS_FIELD_MAX];
} ds_socks_proxy;

/**
 * Parse a socks5:// URL into *out (its credentials included, when present).
 * @param bad  set to the 0-based offset in url of what is wrong
 * @return 0 or -EINVAL; err says what is wrong without repeating a password
 */
int ds_socks_proxy_parse(const char *url, ds_socks_proxy *out, size_t *bad, ds_err *err);

/**
 * Read "user:pass" (one line; '#' comments and blank lines ignored) from path
 * into out->username and out->password.
 * @return 0; -EPERM when group or others can access the file; -EBADMSG for a
 *         bad content; another negative errno when it cannot be read
 */
int ds_socks_proxy_load_credentials(const char *path, ds_socks_proxy *out, ds_err *err);

/** Wipe the credentials. */
void ds_socks_proxy_dispose(ds_socks_proxy *p);

#endif
