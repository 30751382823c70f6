#include "drasync/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void ds_err_clear(ds_err *err)
{
	if (!err)
		return;
	memset(err, 0, sizeof(*err));
}

void ds_err_set(ds_err *err, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return;
	ds_err_clear(err);
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
}

void ds_err_setloc(ds_err *err, const char *file, int line, int col, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return;
	ds_err_clear(err);
	snprintf(err->file, sizeof(err->file), "%s", file ? file : "");
	err->line = line;
	err->col = col;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
}

int ds_err_fallback(ds_err *err, int rc)
{
	if (err && rc < 0 && !err->msg[0])
		ds_err_set(err, "%s", strerror(-rc));
	return rc;
}

const char *ds_err_format(const ds_err *err, char *buf, size_t size)
{
	if (!buf || size == 0)
		return buf;
	if (!err) {
		buf[0] = '\0';
		return buf;
	}
	if (err->file[0] && err->line > 0)
		snprintf(buf, size, "%s:%d:%d: %s", err->file, err->line, err->col, err->msg);
	else if (err->file[0])
		snprintf(buf, size, "%s: %s", err->file, err->msg);
	else
		snprintf(buf, size, "%s", err->msg);
	return buf;
}
