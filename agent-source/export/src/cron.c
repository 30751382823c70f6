#include "drasync/cron.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define ZONEINFO "/usr/share/zoneinfo"
#define SEARCH_YEARS 9 /* Feb 29 can be 8 years away (2096 -> 2104) */

enum field { F_MINUTE, F_HOUR, F_DOM, F_MONTH, F_DOW, F_MAX };

struct ds_cron {
	uint64_t bits[F_MAX]; /* bit n set: value n selected (day-of-week 7 folded into 0) */
	bool dom_star, dow_star;
};

static const struct range {
	const char *name;
	unsigned min, max;
	const char *const *names; /* index = value - min */
} ranges[F_MAX] = {
    [F_MINUTE] = {"minute", 0, 59, NULL},
    [F_HOUR] = {"hour", 0, 23, NULL},
    [F_DOM] = {"day-of-month", 1, 31, NULL},
    [F_MONTH] = {"month", 1, 12,
		 (const char *const[]){"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug",
				       "sep", "oct", "nov", "dec"}},
    [F_DOW] = {"day-of-week", 0, 7,
	       (const char *const[]){"sun", "mon", "tue", "wed", "thu", "fri", "sat", "sun"}},
};

static const struct macro {
	const char *name, *expr;
} macros[] = {
    {"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"},
    {"@weekly", "0 0 * * 0"}, {"@daily", "0 0 * * *"},	  {"@midnight", "0 0 * * *"},
    {"@hourly", "0 * * * *"},
};

/* A part of the expression being parsed: [s, s + len), at 1-based column col. */
struct tok {
	const char *s;
	size_t len, col;
};

struct parse {
	size_t *col_out;
	ds_err *err;
};

static int fail(struct parse *p, size_t col, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(struct parse *p, size_t col, const char *fmt, ...)
{
	char msg[sizeof(p->err->msg)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (p->col_out)
		*p->col_out = col;
	ds_err_set(p->err, "%s", msg);
	return -EINVAL;
}

/* A number or (for month and day-of-week) a name, within the field's range. */
static int value(struct parse *p, const struct range *r, struct tok t, unsigned *out)
{
	unsigned long v = 0;

	if (t.len == 0)
		return fail(p, t.col, "%s: missing a number", r->name);
	if (t.s[0] >= '0' && t.s[0] <= '9') {
		for (size_t i = 0; i < t.len; i++) {
			if (t.s[i] < '0' || t.s[i] > '9')
				return fail(p, t.col, "%s: '%.*s' is not a number", r->name,
					    (int)t.len, t.s);
			if (v < 1000)
				v = v * 10 + (unsigned long)(t.s[i] - '0');
		}
		if (v < r->min || v > r->max)
			return fail(p, t.col, "%s: %.*s out of range %u-%u", r->name, (int)t.len,
				    t.s, r->min, r->max);
		*out = (unsigned)v;
		return 0;
	}
	if (r->names) {
		for (unsigned i = 0; i <= r->max - r->min; i++) {
			if (t.len == 3 && strncasecmp(t.s, r->names[i], 3) == 0) {
				*out = r->min + i;
				return 0;
			}
		}
		return fail(p, t.col, "%s: unknown name '%.*s' (expected %s)", r->name, (int)t.len,
			    t.s, r->min == 1 ? "JAN-DEC or 1-12" : "SUN-SAT or 0-7");
	}
	return fail(p, t.col, "%s: '%.*s' is not a number", r->name, (int)t.len, t.s);
}

static struct tok sub(struct tok t, size_t from, size_t to)
{
	struct tok r = {t.s + from, to - from, t.col + from};
	return r;
}

static size_t find(struct tok t, char c, size_t from)
{
	for (size_t i = from; i < t.len; i++)
		if (t.s[i] == c)
			return i;
	return t.len;
}

/* One list item: `*`, `N`, `N-M`, each with an optional `/step`. */
static int item(struct parse *p, enum field f, struct tok t, uint64_t *bits, bool *star)
{
	const struct range *r = &ranges[f];
	size_t slash = find(t, '/', 0), dash;
	struct tok span = sub(t, 0, slash);
	unsigned lo, hi, step = 1;
	bool is_star = false;
	int rc;

	if (t.len == 0)
		return fail(p, t.col, "%s: empty list item", r->name);
	if (slash < t.len && find(t, '/', slash + 1) < t.len)
		return fail(p, t.col + find(t, '/', slash + 1), "%s: more than one '/'", r->name);
	if (span.len == 1 &&
	    (span.s[0] == '*' || (span.s[0] == '?' && (f == F_DOM || f == F_DOW)))) {
		is_star = true;
		lo = r->min;
		hi = f == F_DOW ? 6 : r->max;
	} else {
		dash = find(span, '-', 0);
		if ((rc = value(p, r, sub(span, 0, dash), &lo)) < 0)
			return rc;
		hi = lo;
		if (dash < span.len) {
			if (find(span, '-', dash + 1) < span.len)
				return fail(p, span.col + find(span, '-', dash + 1),
					    "%s: more than one '-'", r->name);
			if ((rc = value(p, r, sub(span, dash + 1, span.len), &hi)) < 0)
				return rc;
			if (lo > hi)
				return fail(p, span.col, "%s: range %u-%u starts after it ends",
					    r->name, lo, hi);
		}
	}
	if (slash < t.len) {
		struct tok st = sub(t, slash + 1, t.len);
		unsigned long v = 0;

		if (st.len == 0)
			return fail(p, st.col, "%s: missing a step after '/'", r->name);
		for (size_t i = 0; i < st.len; i++) {
			if (st.s[i] < '0' || st.s[i] > '9')
				return fail(p, st.col, "%s: step '%.*s' is not a number", r->name,
					    (int)st.len, st.s);
			if (v < 1000)
				v = v * 10 + (unsigned long)(st.s[i] - '0');
		}
		/* A step beyond the range selects only its start, as in robfig and Vixie. */
		if (v == 0)
			return fail(p, st.col, "%s: step must be positive", r->name);
		step = (unsigned)v;
		/* robfig: "N/step" runs from N to the field's maximum (6 for days of week). */
		if (!is_star && find(span, '-', 0) == span.len)
			hi = f == F_DOW && lo < 7 ? 6 : r->max;
		if (step > 1)
			is_star = false;
	}
	for (unsigned v = lo; v <= hi; v += step)
		*bits |= 1ull << (f == F_DOW && v == 7 ? 0 : v);
	*star = *star || is_star;
	return 0;
}

static int field(struct parse *p, enum field f, struct tok t, ds_cron *c)
{
	bool star = false;
	size_t at = 0;
	int rc;

	for (;;) {
		size_t comma = find(t, ',', at);
		if ((rc = item(p, f, sub(t, at, comma), &c->bits[f], &star)) < 0)
			return rc;
		if (comma == t.len)
			break;
		at = comma + 1;
	}
	if (f == F_DOM)
		c->dom_star = star;
	if (f == F_DOW)
		c->dow_star = star;
	return 0;
}

static const unsigned month_days[13] = {0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

/* A day-of-month list that no selected month has (30 February) would never run. */
static int check_possible(struct parse *p, const ds_cron *c, size_t dom_col)
{
	if (!c->dow_star && !c->dom_star)
		return 0; /* either field matching is enough: day-of-week always comes */
	for (unsigned m = 1; m <= 12; m++) {
		if (!(c->bits[F_MONTH] & (1ull << m)))
			continue;
		for (unsigned d = 1; d <= month_days[m]; d++)
			if (c->bits[F_DOM] & (1ull << d))
				return 0;
	}
	return fail(p, dom_col, "day-of-month: no selected month has any of the selected days");
}

static bool blank(char c)
{
	return c == ' ' || c == '\t';
}

static int parse_fields(struct parse *p, const char *expr, size_t base_col, ds_cron *c)
{
	struct tok f[F_MAX + 1];
	size_t n = 0, i = 0, len = strlen(expr);
	static const char *const order =
	    "minute hour day-of-month month day-of-week, e.g. \"*/15 * * * *\"";
	int rc;

	while (i < len) {
		size_t start;

		while (i < len && blank(expr[i]))
			i++;
		if (i == len)
			break;
		start = i;
		while (i < len && !blank(expr[i]))
			i++;
		if (n == F_MAX)
			return fail(
			    p, base_col + start,
			    "expected 5 fields (%s), found more (there is no seconds field)",
			    order);
		f[n].s = expr + start;
		f[n].len = i - start;
		f[n].col = base_col + start;
		n++;
	}
	if (n == 0)
		return fail(p, 0,
			    "empty expression: expected 5 fields (%s) or a macro such as "
			    "@hourly",
			    order);
	if (n < F_MAX)
		return fail(p, 0, "expected 5 fields (%s), found %zu", order, n);
	for (enum field k = 0; k < F_MAX; k++)
		if ((rc = field(p, k, f[k], c)) < 0)
			return rc;
	return check_possible(p, c, f[F_DOM].col);
}

int ds_cron_parse(ds_cron **out, const char *expr, size_t *col_out, ds_err *err)
{
	struct parse p = {col_out, err};
	ds_cron *c = NULL;
	size_t lead = 0;
	int rc;

	if (col_out)
		*col_out = 0;
	if (!expr)
		return fail(&p, 0, "no expression");
	while (blank(expr[lead]))
		lead++;
	if (strncmp(expr + lead, "CRON_TZ=", 8) == 0 || strncmp(expr + lead, "TZ=", 3) == 0)
		return fail(&p, lead + 1,
			    "a time zone prefix is not supported here; set "
			    "schedule.timeZone instead");
	c = calloc(1, sizeof(*c));
	if (!c) {
		ds_err_set(err, "out of memory");
		return -ENOMEM;
	}
	if (expr[lead] == '@') {
		size_t n = strcspn(expr + lead, " \t");
		const char *m = NULL;

		for (size_t i = 0; i < sizeof(macros) / sizeof(macros[0]); i++)
			if (strlen(macros[i].name) == n &&
			    strncasecmp(expr + lead, macros[i].name, n) == 0)
				m = macros[i].expr;
		if (!m && n == 6 && strncasecmp(expr + lead, "@every", 6) == 0)
			rc = fail(&p, lead + 1,
				  "@every is not a cron expression; use schedule "
				  "mode interval with every");
		else if (!m)
			rc = fail(&p, lead + 1,
				  "unknown macro '%.*s' (expected @yearly, @annually, @monthly, "
				  "@weekly, @daily, @midnight or @hourly)",
				  (int)n, expr + lead);
		else if (expr[lead + n + strspn(expr + lead + n, " \t")])
			rc = fail(&p, lead + n + strspn(expr + lead + n, " \t") + 1,
				  "nothing may follow the macro %.*s", (int)n, expr + lead);
		else
			rc = parse_fields(&p, m, 0, c);
	} else {
		rc = parse_fields(&p, expr, 1, c);
	}
	if (rc < 0) {
		free(c);
		return rc;
	}
	*out = c;
	return 0;
}

void ds_cron_free(ds_cron *cron)
{
	free(cron);
}

/* ------------------------------------------------------------------ */
/* Time zones                                                          */

static bool zone_is_utc(const char *tz)
{
	return !tz || !*tz || strcmp(tz, "UTC") == 0 || strcmp(tz, "Etc/UTC") == 0;
}

int ds_cron_zone_check(const char *tz, ds_err *err)
{
	char path[512], magic[4];
	FILE *f;
	size_t n;

	if (zone_is_utc(tz))
		return 0;
	if (tz[0] == '/' || strlen(tz) > 200) {
		ds_err_set(err, "'%s' is not a time zone name (such as Europe/Berlin)", tz);
		return -EINVAL;
	}
	for (const char *p = tz; *p; p++) {
		bool ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			  (*p >= '0' && *p <= '9') || *p == '/' || *p == '_' || *p == '-' ||
			  *p == '+' || *p == '.';
		/* No empty, "." or ".." components: the name stays under ZONEINFO. */
		if (!ok || (*p == '.' && (p == tz || p[-1] == '/')) ||
		    (*p == '/' && (p[1] == '/' || !p[1]))) {
			ds_err_set(err, "'%s' is not a time zone name (such as Europe/Berlin)", tz);
			return -EINVAL;
		}
	}
	snprintf(path, sizeof(path), "%s/%s", ZONEINFO, tz);
	f = fopen(path, "rb");
	n = f ? fread(magic, 1, sizeof(magic), f) : 0;
	if (f)
		fclose(f);
	if (n != sizeof(magic) || memcmp(magic, "TZif", 4) != 0) {
		ds_err_set(err, "unknown time zone '%s' (no %s; is tzdata installed?)", tz, path);
		return -ENOENT;
	}
	return 0;
}

static pthread_mutex_t tz_lock = PTHREAD_MUTEX_INITIALIZER;

/* Wall-clock fields of t and back, in UTC or in the zone TZ names. */
static void local(time_t t, bool utc, struct tm *tm)
{
	if (utc)
		gmtime_r(&t, tm);
	else
		localtime_r(&t, tm);
}

static time_t make(struct tm *tm, bool utc)
{
	tm->tm_isdst = -1;
	return utc ? timegm(tm) : mktime(tm);
}

/* Date(y, mon, mday, hour, 0, 0) in the zone, normalised as mktime does. */
static time_t date(int year, int mon, int mday, int hour, bool utc)
{
	struct tm tm = {0};

	tm.tm_year = year;
	tm.tm_mon = mon;
	tm.tm_mday = mday;
	tm.tm_hour = hour;
	return make(&tm, utc);
}

static bool day_matches(const ds_cron *c, const struct tm *tm)
{
	bool dom = c->bits[F_DOM] & (1ull << tm->tm_mday);
	bool dow = c->bits[F_DOW] & (1ull << tm->tm_wday);

	if (c->dom_star || c->dow_star)
		return dom && dow;
	return dom || dow;
}

/*
 * robfig/cron's SpecSchedule.Next over wall-clock fields: months and days
 * advance on the calendar (midnight to midnight), hours and minutes advance
 * as elapsed time, so an hour a DST gap removes is never visited and an hour
 * that repeats is visited twice. `added` marks the first move, which also
 * truncates the finer fields.
 */
static int next_in_zone(const ds_cron *c, time_t after, bool utc, time_t *next)
{
	struct tm tm;
	time_t t;
	bool added = false;
	int year_limit;

	/* Start at the first whole minute after `after`. */
	t = after - (((after % 60) + 60) % 60) + 60;
	local(t, utc, &tm);
	year_limit = tm.tm_year + SEARCH_YEARS;
wrap:
	if (tm.tm_year > year_limit)
		return -ENOENT;
	while (!(c->bits[F_MONTH] & (1ull << (tm.tm_mon + 1)))) {
		if (!added) {
			added = true;
			t = date(tm.tm_year, tm.tm_mon, 1, 0, utc);
			local(t, utc, &tm);
		}
		t = date(tm.tm_year, tm.tm_mon + 1, 1, 0, utc);
		local(t, utc, &tm);
		if (tm.tm_mon == 0)
			goto wrap;
	}
	while (!day_matches(c, &tm)) {
		if (!added) {
			added = true;
			t = date(tm.tm_year, tm.tm_mon, tm.tm_mday, 0, utc);
			local(t, utc, &tm);
		}
		t = date(tm.tm_year, tm.tm_mon, tm.tm_mday + 1, tm.tm_hour, utc);
		local(t, utc, &tm);
		/* A midnight that DST moved: back to the day's first hour. */
		if (tm.tm_hour != 0) {
			t += tm.tm_hour > 12 ? (24 - tm.tm_hour) * 3600 : -tm.tm_hour * 3600;
			local(t, utc, &tm);
		}
		if (tm.tm_mday == 1)
			goto wrap;
	}
	while (!(c->bits[F_HOUR] & (1ull << tm.tm_hour))) {
		if (!added) {
			added = true;
			t -= tm.tm_min * 60 + tm.tm_sec;
		}
		t += 3600;
		local(t, utc, &tm);
		if (tm.tm_hour == 0)
			goto wrap;
	}
	while (!(c->bits[F_MINUTE] & (1ull << tm.tm_min))) {
		if (!added) {
			added = true;
			t -= tm.tm_sec;
		}
		t += 60;
		local(t, utc, &tm);
		if (tm.tm_min == 0)
			goto wrap;
	}
	*next = t;
	return 0;
}

int ds_cron_next(const ds_cron *cron, time_t after, const char *tz, time_t *next, ds_err *err)
{
	char *saved = NULL, zone[600];
	const char *cur;
	time_t t = 0;
	int rc;

	if (zone_is_utc(tz)) {
		rc = next_in_zone(cron, after, true, &t);
		goto out;
	}
	if ((rc = ds_cron_zone_check(tz, err)) < 0)
		return rc;
	snprintf(zone, sizeof(zone), ":%s/%s", ZONEINFO, tz);
	pthread_mutex_lock(&tz_lock);
	cur = getenv("TZ");
	saved = strdup(cur ? cur : ":/etc/localtime");
	if (!saved || setenv("TZ", zone, 1) < 0) {
		pthread_mutex_unlock(&tz_lock);
		free(saved);
		ds_err_set(err, "out of memory");
		return -ENOMEM;
	}
	tzset();
	rc = next_in_zone(cron, after, false, &t);
	/*
	 * Never unsetenv: replacing an existing variable keeps the environment
	 * array in place for threads reading it meanwhile.
	 */
	(void)setenv("TZ", saved, 1);
	tzset();
	pthread_mutex_unlock(&tz_lock);
	free(saved);
out:
	if (rc == -ENOENT) {
		ds_err_set(err, "the expression names no time in the next %d years", SEARCH_YEARS);
		return rc;
	}
	*next = t;
	return 0;
}
