#include "drasync/log.h"

#include "drasync/string_table.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static enum ds_log_level min_level = DS_LOG_INFO;

static const char *const ds_log_level_table[DS_LOG_LEVEL_MAX] = {"debug", "info", "warn", "error"};
DS_DEFINE_PRIVATE_STRING_TABLE_LOOKUP(ds_log_level, enum ds_log_level)

void ds_log_set_level(enum ds_log_level level)
{
	min_level = level;
}

int ds_log_level_parse(const char *name, enum ds_log_level *out)
{
	int l = ds_log_level_from_string(name);

	if (l < 0)
		return l;
	*out = (enum ds_log_level)l;
	return 0;
}

void ds_log(enum ds_log_level level, const char *event, const char *fields, ...)
{
	char line[2048];
	char ts[40];
	struct timespec now;
	struct tm tm;
	size_t n;
	va_list ap;

	if (level < min_level || level >= DS_LOG_LEVEL_MAX)
		return;
	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	n = (size_t)snprintf(line, sizeof(line), "ts=%s.%03ldZ level=%s event=%s", ts,
			     now.tv_nsec / 1000000, ds_log_level_to_string(level), event);
	if (fields && fields[0] && n + 1 < sizeof(line)) {
		line[n++] = ' ';
		va_start(ap, fields);
		vsnprintf(line + n, sizeof(line) - n, fields, ap);
		va_end(ap);
	}
	/* One fputs per line so concurrent threads do not interleave inside a line. */
	fprintf(stderr, "%s\n", line);
}

const char *ds_log_quote(const char *value, char *buf, unsigned long size)
{
	size_t o = 0;
	int need = 0;

	if (!buf || size < 3)
		return "";
	if (!value)
		value = "";
	if (!value[0])
		need = 1;
	for (const char *p = value; *p; p++)
		if (*p == ' ' || *p == '"' || *p == '=' || *p == '\\' || (unsigned char)*p < 0x20)
			need = 1;
	if (!need) {
		snprintf(buf, size, "%s", value);
		return buf;
	}
	buf[o++] = '"';
	for (const char *p = value; *p && o + 3 < size; p++) {
		if (*p == '"' || *p == '\\') {
			buf[o++] = '\\';
			buf[o++] = *p;
		} else if (*p == '\n') {
			buf[o++] = '\\';
			buf[o++] = 'n';
		} else if ((unsigned char)*p < 0x20) {
			buf[o++] = ' ';
		} else {
			buf[o++] = *p;
		}
	}
	buf[o++] = '"';
	buf[o] = '\0';
	return buf;
}
