#include "drasync/socks_proxy.h"

#include "drasync/config_check.h"
#include "drasync/secret_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PREFIX "socks5://"
#define CRED_FILE_MAX 1024

/* user:pass into out; false when either is empty or too long. */
static bool split_credentials(const char *s, size_t len, ds_socks_proxy *out)
{
	const char *colon = memchr(s, ':', len);
	size_t ul, pl;

	if (!colon)
		return false;
	ul = (size_t)(colon - s);
	pl = len - ul - 1;
	if (ul == 0 || pl == 0 || ul >= sizeof(out->username) || pl >= sizeof(out->password))
		return false;
	memcpy(out->username, s, ul);
	out->username[ul] = '\0';
	memcpy(out->password, colon + 1, pl);
	out->password[pl] = '\0';
	return true;
}

int ds_socks_proxy_parse(const char *url, ds_socks_proxy *out, size_t *bad, ds_err *err)
{
	ds_socks_proxy p;
	const char *rest, *at;
	size_t plen = strlen(PREFIX);

	memset(&p, 0, sizeof(p));
	*bad = 0;
	if (strncmp(url, PREFIX, plen) != 0) {
		ds_err_set(err, "not a SOCKS5 proxy URL: write socks5://[user:pass@]host:port");
		return -EINVAL;
	}
	rest = url + plen;
	at = strrchr(rest, '@');
	if (at) {
		if (!split_credentials(rest, (size_t)(at - rest), &p)) {
			explicit_bzero(&p, sizeof(p));
			*bad = plen;
			ds_err_set(err,
				   "the proxy's credentials are not user:pass (both not empty, "
				   "255 bytes each at most)");
			return -EINVAL;
		}
		rest = at + 1;
	}
	if (strlen(rest) >= sizeof(p.address) || rest[0] == ':' ||
	    !ds_config_host_port_valid(rest) || strchr(rest, '/')) {
		explicit_bzero(&p, sizeof(p));
		*bad = (size_t)(rest - url);
		ds_err_set(err, "the proxy's address is not host:port (port 1-65535)");
		return -EINVAL;
	}
	snprintf(p.address, sizeof(p.address), "%s", rest);
	*out = p;
	explicit_bzero(&p, sizeof(p));
	return 0;
}

int ds_socks_proxy_load_credentials(const char *path, ds_socks_proxy *out, ds_err *err)
{
	char buf[CRED_FILE_MAX + 1];
	ds_socks_proxy p = *out;
	int rc, lineno = 0, found = 0;
	char *line, *save = NULL;

	rc = ds_secret_file_read(path, "proxy credentials file", true, buf, sizeof(buf), err);
	if (rc < 0)
		goto out;
	rc = 0;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		size_t l = strlen(line);

		lineno++;
		while (l > 0 && line[l - 1] == '\r')
			line[--l] = '\0';
		if (l == 0 || line[0] == '#')
			continue;
		/* The line is never quoted back: it holds the password. */
		if (found || !split_credentials(line, l, &p)) {
			rc = -EBADMSG;
			ds_err_setloc(err, path, lineno, 1,
				      found ? "more than one credentials line in the file"
					    : "not user:pass (both not empty, 255 bytes each at "
					      "most)");
			goto out;
		}
		found = 1;
	}
	if (!found) {
		rc = -EBADMSG;
		ds_err_setloc(err, path, 0, 0, "no user:pass line in the file");
		goto out;
	}
	*out = p;
out:
	explicit_bzero(buf, sizeof(buf));
	explicit_bzero(&p, sizeof(p));
	return rc;
}

void ds_socks_proxy_dispose(ds_socks_proxy *p)
{
	explicit_bzero(p, sizeof(*p));
}
