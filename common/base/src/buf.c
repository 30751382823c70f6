#include "drasync/buf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

void ds_str_init(ds_str *s, size_t max)
{
	memset(s, 0, sizeof(*s));
	s->max = max;
}

/* The first failure frees the contents and sticks until a reset. */
static int str_fail(ds_str *s, int rc)
{
	free(s->p);
	s->p = NULL;
	s->len = s->cap = 0;
	s->err = rc;
	return rc;
}

/* Room for `more` bytes after the contents, plus the NUL. */
static int str_room(ds_str *s, size_t more)
{
	if (s->err)
		return s->err;
	if (more > s->max || s->len > s->max - more)
		return str_fail(s, -E2BIG);
	if (more > SIZE_MAX - 1 - s->len ||
	    ds_grow((void **)&s->p, &s->cap, s->len + more + 1, 1) < 0)
		return str_fail(s, -ENOMEM);
	return 0;
}

int ds_str_add(ds_str *s, const void *p, size_t n)
{
	int rc = str_room(s, n);

	if (rc)
		return rc;
	if (n)
		memcpy(s->p + s->len, p, n);
	s->len += n;
	s->p[s->len] = '\0';
	return 0;
}

int ds_str_adds(ds_str *s, const char *str)
{
	return ds_str_add(s, str, strlen(str));
}

int ds_str_addf(ds_str *s, const char *fmt, ...)
{
	va_list ap;
	int n, rc;

	if (s->err)
		return s->err;
	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return str_fail(s, -EINVAL);
	rc = str_room(s, (size_t)n);
	if (rc)
		return rc;
	va_start(ap, fmt);
	vsnprintf(s->p + s->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	s->len += (size_t)n;
	return 0;
}

void ds_str_drop(ds_str *s, size_t n)
{
	if (!s->p)
		return;
	if (n > s->len)
		n = s->len;
	memmove(s->p, s->p + n, s->len - n);
	s->len -= n;
	s->p[s->len] = '\0';
}

void ds_str_reset(ds_str *s)
{
	s->len = 0;
	s->err = 0;
	if (s->p)
		s->p[0] = '\0';
}

char *ds_str_take(ds_str *s, size_t *len)
{
	char *p;

	if (!s->p && ds_str_add(s, "", 0) < 0)
		return NULL;
	p = s->p;
	if (len)
		*len = s->len;
	ds_str_init(s, s->max);
	return p;
}

void ds_str_dispose(ds_str *s)
{
	if (!s)
		return;
	free(s->p);
	ds_str_init(s, s->max);
}

char *ds_str_ptr(const ds_str *s)
{
	return s->p;
}

size_t ds_str_len(const ds_str *s)
{
	return s->len;
}

int ds_str_error(const ds_str *s)
{
	return s->err;
}
