#include "drasync/buf.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

int ds_grow(void **p, size_t *cap, size_t need, size_t elem)
{
	size_t c = *cap ? *cap : 16;
	void *np;

	if (need <= *cap)
		return 0;
	while (c < need) {
		if (c > SIZE_MAX / 2 / elem)
			return -ENOMEM;
		c *= 2;
	}
	np = realloc(*p, c * elem);
	if (!np)
		return -ENOMEM;
	*p = np;
	*cap = c;
	return 0;
}

int ds_read_stream(FILE *f, size_t max, char **out, size_t *len_out)
{
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int rc = 0;

	for (;;) {
		/* read in steps of 64 KiB, never more than max + 1 bytes in all */
		size_t want = max - len < 65536 ? max + 1 : len + 65536, n;

		if (ds_grow((void **)&buf, &cap, want + 1, 1) < 0) {
			rc = -ENOMEM;
			break;
		}
		n = fread(buf + len, 1, want - len, f);
		len += n;
		if (len > max) {
			rc = -E2BIG;
			break;
		}
		if (n == 0) {
			if (ferror(f))
				rc = -EIO;
			break;
		}
	}
	if (rc < 0) {
		free(buf);
		return rc;
	}
	buf[len] = '\0';
	*out = buf;
	if (len_out)
		*len_out = len;
	return 0;
}

int ds_read_file(const char *path, size_t max, char **out, size_t *len_out)
{
	FILE *f = fopen(path, "rbe");
	int rc;

	if (!f)
		return -errno;
	rc = ds_read_stream(f, max, out, len_out);
	fclose(f);
	return rc;
}
