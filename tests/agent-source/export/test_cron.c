/* Cron expressions: every field form, names, macros, the day rule, DST, and bad input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/cron.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static time_t utc(int y, int mo, int d, int h, int mi)
{
	struct tm tm = {0};

	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	return timegm(&tm);
}

static const char *fmt(time_t t, char *buf, size_t n)
{
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, n, "%Y-%m-%dT%H:%MZ %a", &tm);
	return buf;
}

/*
 * The next `n` times of expr after `after` in zone tz, each strictly after
 * the previous, must be want[0..n-1].
 */
static void expect_next(const char *expr, const char *tz, time_t after, size_t n,
			const time_t *want)
{
	ds_cron *c = NULL;
	ds_err err = {0};
	size_t col = 0;
	time_t t = after;

	if (ds_cron_parse(&c, expr, &col, &err) != 0)
		fail_msg("'%s' does not parse: %s (column %zu)", expr, err.msg, col);
	for (size_t i = 0; i < n; i++) {
		time_t next = 0;
		char a[64], b[64], p[64];

		if (ds_cron_next(c, t, tz, &next, &err) != 0)
			fail_msg("'%s' after %s: %s", expr, fmt(t, p, sizeof(p)), err.msg);
		if (next != want[i])
			fail_msg("'%s' (%s) run %zu after %s: got %s, want %s", expr,
				 tz ? tz : "UTC", i + 1, fmt(t, p, sizeof(p)),
				 fmt(next, a, sizeof(a)), fmt(want[i], b, sizeof(b)));
		t = next;
	}
	ds_cron_free(c);
}

#define NEXT(expr, tz, after, ...)                                                                 \
	do {                                                                                       \
		const time_t want_[] = {__VA_ARGS__};                                              \
		expect_next(expr, tz, after, sizeof(want_) / sizeof(want_[0]), want_);             \
	} while (0)

static void test_cron__single_values_and_star(void **state)
{
	(void)state;
	NEXT("5 * * * *", NULL, utc(2026, 1, 2, 10, 7), utc(2026, 1, 2, 11, 5),
	     utc(2026, 1, 2, 12, 5));
	NEXT("* * * * *", NULL, utc(2026, 1, 2, 10, 7), utc(2026, 1, 2, 10, 8),
	     utc(2026, 1, 2, 10, 9));
	/* Strictly after: a run at exactly `after` is not the next one, seconds round up. */
	NEXT("30 10 * * *", NULL, utc(2026, 1, 2, 10, 30), utc(2026, 1, 3, 10, 30));
	NEXT("30 10 * * *", NULL, utc(2026, 1, 2, 10, 30) - 1, utc(2026, 1, 2, 10, 30));
	NEXT("0 0 1 1 *", NULL, utc(2026, 6, 1, 0, 0), utc(2027, 1, 1, 0, 0),
	     utc(2028, 1, 1, 0, 0));
}

static void test_cron__lists_ranges_steps(void **state)
{
	(void)state;
	NEXT("1,2,30 * * * *", NULL, utc(2026, 1, 2, 10, 0), utc(2026, 1, 2, 10, 1),
	     utc(2026, 1, 2, 10, 2), utc(2026, 1, 2, 10, 30), utc(2026, 1, 2, 11, 1));
	NEXT("0 10-12 * * *", NULL, utc(2026, 1, 2, 9, 59), utc(2026, 1, 2, 10, 0),
	     utc(2026, 1, 2, 11, 0), utc(2026, 1, 2, 12, 0), utc(2026, 1, 3, 10, 0));
	NEXT("*/15 * * * *", NULL, utc(2026, 1, 2, 10, 7), utc(2026, 1, 2, 10, 15),
	     utc(2026, 1, 2, 10, 30), utc(2026, 1, 2, 10, 45), utc(2026, 1, 2, 11, 0));
	/* A step over a range: 1, 6, 11, ... 26, then the next hour. */
	NEXT("1-30/5 * * * *", NULL, utc(2026, 1, 2, 10, 0), utc(2026, 1, 2, 10, 1),
	     utc(2026, 1, 2, 10, 6), utc(2026, 1, 2, 10, 11));
	NEXT("1-30/5 * * * *", NULL, utc(2026, 1, 2, 10, 26), utc(2026, 1, 2, 11, 1));
	/* robfig: "N/step" is N to the maximum. */
	NEXT("5/10 * * * *", NULL, utc(2026, 1, 2, 10, 50), utc(2026, 1, 2, 10, 55),
	     utc(2026, 1, 2, 11, 5));
	/* A step larger than the range selects its start only. */
	NEXT("*/90 * * * *", NULL, utc(2026, 1, 2, 10, 50), utc(2026, 1, 2, 11, 0));
	/* Mixed list of a range with a step and single values. */
	NEXT("0 0-6/3,23 * * *", NULL, utc(2026, 1, 2, 0, 0), utc(2026, 1, 2, 3, 0),
	     utc(2026, 1, 2, 6, 0), utc(2026, 1, 2, 23, 0), utc(2026, 1, 3, 0, 0));
	/* Blanks: tabs and several spaces separate fields too. */
	NEXT("  0\t12  *  * *  ", NULL, utc(2026, 1, 2, 0, 0), utc(2026, 1, 2, 12, 0));
}

static void test_cron__names(void **state)
{
	(void)state;
	/* 2026-01-02 is a Friday. */
	NEXT("0 9 * * MON-FRI", NULL, utc(2026, 1, 2, 10, 0), utc(2026, 1, 5, 9, 0),
	     utc(2026, 1, 6, 9, 0));
	NEXT("0 9 * * mon-fri", NULL, utc(2026, 1, 2, 10, 0), utc(2026, 1, 5, 9, 0));
	NEXT("0 9 * * Sat,sun", NULL, utc(2026, 1, 2, 10, 0), utc(2026, 1, 3, 9, 0),
	     utc(2026, 1, 4, 9, 0), utc(2026, 1, 10, 9, 0));
	NEXT("0 0 1 jan,Jul *", NULL, utc(2026, 1, 2, 0, 0), utc(2026, 7, 1, 0, 0),
	     utc(2027, 1, 1, 0, 0));
	NEXT("0 0 1 FEB-APR *", NULL, utc(2026, 1, 2, 0, 0), utc(2026, 2, 1, 0, 0),
	     utc(2026, 3, 1, 0, 0), utc(2026, 4, 1, 0, 0), utc(2027, 2, 1, 0, 0));
	NEXT("0 0 1 */4 *", NULL, utc(2026, 1, 2, 0, 0), utc(2026, 5, 1, 0, 0),
	     utc(2026, 9, 1, 0, 0), utc(2027, 1, 1, 0, 0));
}

static void test_cron__sunday_is_0_and_7(void **state)
{
	(void)state;
	/* 2026-01-04 and 2026-01-11 are Sundays. */
	NEXT("0 12 * * 0", NULL, utc(2026, 1, 2, 0, 0), utc(2026, 1, 4, 12, 0),
	     utc(2026, 1, 11, 12, 0));
	NEXT("0 12 * * 7", NULL, utc(2026, 1, 2, 0, 0), utc(2026, 1, 4, 12, 0),
	     utc(2026, 1, 11, 12, 0));
	NEXT("0 12 * * SUN", NULL, utc(2026, 1, 2, 0, 0), utc(2026, 1, 4, 12, 0));
	/* 5-7: Friday, Saturday, Sunday. */
	NEXT("0 12 * * 5-7", NULL, utc(2026, 1, 2, 13, 0), utc(2026, 1, 3, 12, 0),
	     utc(2026, 1, 4, 12, 0), utc(2026, 1, 9, 12, 0));
	/* N/step in day-of-week stops at Saturday (6), as robfig: 1/2 is Mon, Wed, Fri. */
	NEXT("0 12 * * 1/2", NULL, utc(2026, 1, 2, 13, 0), utc(2026, 1, 5, 12, 0),
	     utc(2026, 1, 7, 12, 0), utc(2026, 1, 9, 12, 0), utc(2026, 1, 12, 12, 0));
}

static void test_cron__macros(void **state)
{
	time_t at = utc(2026, 1, 2, 10, 7); /* Friday */

	(void)state;
	NEXT("@hourly", NULL, at, utc(2026, 1, 2, 11, 0), utc(2026, 1, 2, 12, 0));
	NEXT("@daily", NULL, at, utc(2026, 1, 3, 0, 0), utc(2026, 1, 4, 0, 0));
	NEXT("@midnight", NULL, at, utc(2026, 1, 3, 0, 0));
	NEXT("@weekly", NULL, at, utc(2026, 1, 4, 0, 0), utc(2026, 1, 11, 0, 0));
	NEXT("@monthly", NULL, at, utc(2026, 2, 1, 0, 0), utc(2026, 3, 1, 0, 0));
	NEXT("@yearly", NULL, at, utc(2027, 1, 1, 0, 0), utc(2028, 1, 1, 0, 0));
	NEXT("@annually", NULL, at, utc(2027, 1, 1, 0, 0));
	NEXT("@DAILY", NULL, at, utc(2026, 1, 3, 0, 0));
	NEXT("  @hourly  ", NULL, at, utc(2026, 1, 2, 11, 0));
}

static void test_cron__feb_29_only_in_leap_years(void **state)
{
	(void)state;
	NEXT("0 0 29 2 *", NULL, utc(2027, 3, 1, 0, 0), utc(2028, 2, 29, 0, 0),
	     utc(2032, 2, 29, 0, 0), utc(2036, 2, 29, 0, 0));
	/* 2100 is not a leap year: 2096 -> 2104, further than robfig's 5-year search. */
	NEXT("0 0 29 2 *", NULL, utc(2096, 3, 1, 0, 0), utc(2104, 2, 29, 0, 0));
}

static void test_cron__month_ends(void **state)
{
	(void)state;
	/* Day 31 skips the 30-day months and February. */
	NEXT("0 0 31 * *", NULL, utc(2026, 1, 31, 0, 0), utc(2026, 3, 31, 0, 0),
	     utc(2026, 5, 31, 0, 0), utc(2026, 7, 31, 0, 0), utc(2026, 8, 31, 0, 0),
	     utc(2026, 10, 31, 0, 0));
	NEXT("0 0 30 * *", NULL, utc(2026, 1, 30, 0, 0), utc(2026, 3, 30, 0, 0));
	/* Crossing the year end. */
	NEXT("59 23 31 12 *", NULL, utc(2026, 12, 31, 23, 59), utc(2027, 12, 31, 23, 59));
}

static void test_cron__day_of_month_or_day_of_week(void **state)
{
	time_t at = utc(2026, 1, 1, 0, 0); /* Thursday */

	(void)state;
	/* Both restricted: either one (the 13th, or a Friday). */
	NEXT("0 0 13 * FRI", NULL, at, utc(2026, 1, 2, 0, 0), utc(2026, 1, 9, 0, 0),
	     utc(2026, 1, 13, 0, 0), utc(2026, 1, 16, 0, 0));
	/* One unrestricted: the other decides alone. */
	NEXT("0 0 * * FRI", NULL, at, utc(2026, 1, 2, 0, 0), utc(2026, 1, 9, 0, 0),
	     utc(2026, 1, 16, 0, 0));
	NEXT("0 0 13 * *", NULL, at, utc(2026, 1, 13, 0, 0), utc(2026, 2, 13, 0, 0));
	NEXT("0 0 13 * ?", NULL, at, utc(2026, 1, 13, 0, 0), utc(2026, 2, 13, 0, 0));
	/* "*\/2" has a step, so it counts as restricted (robfig): odd days OR Fridays. */
	NEXT("0 0 */2 * FRI", NULL, at, utc(2026, 1, 2, 0, 0), utc(2026, 1, 3, 0, 0),
	     utc(2026, 1, 5, 0, 0), utc(2026, 1, 7, 0, 0), utc(2026, 1, 9, 0, 0));
	/* "*" with a step of 1 is still unrestricted: Fridays only. */
	NEXT("0 0 */1 * FRI", NULL, at, utc(2026, 1, 2, 0, 0), utc(2026, 1, 9, 0, 0));
	/* Day 30 of February never comes, but Mondays do. */
	NEXT("0 0 30 2 MON", NULL, at, utc(2026, 2, 2, 0, 0), utc(2026, 2, 9, 0, 0));
}

static void test_cron__next_three_from_a_fixed_instant(void **state)
{
	(void)state;
	/* Friday 17:50: the working-hours schedule resumes on Monday. */
	NEXT("*/15 9-17 * * MON-FRI", NULL, utc(2026, 1, 2, 17, 50), utc(2026, 1, 5, 9, 0),
	     utc(2026, 1, 5, 9, 15), utc(2026, 1, 5, 9, 30));
}

static void test_cron__time_zone_with_dst(void **state)
{
	const char *ny = "America/New_York";

	(void)state;
	/* 2012-03-11: 02:00 EST becomes 03:00 EDT. 00:00 EST is 05:00Z. */
	/* 02:30 does not exist that night: skipped, nothing in its place. */
	NEXT("30 2 * * *", ny, utc(2012, 3, 11, 5, 0), utc(2012, 3, 12, 6, 30),
	     utc(2012, 3, 13, 6, 30));
	NEXT("30 2 11 3 *", ny, utc(2012, 3, 11, 5, 0), utc(2013, 3, 11, 6, 30));
	/* Hourly: 01:00 EST, then 03:00 EDT; 01:30 runs once. */
	NEXT("0 * * * *", ny, utc(2012, 3, 11, 5, 0), utc(2012, 3, 11, 6, 0),
	     utc(2012, 3, 11, 7, 0), utc(2012, 3, 11, 8, 0));
	NEXT("30 1 * * *", ny, utc(2012, 3, 11, 5, 0), utc(2012, 3, 11, 6, 30),
	     utc(2012, 3, 12, 5, 30));
	/* 2012-11-04: 02:00 EDT becomes 01:00 EST; 01:xx happens twice and runs twice. */
	NEXT("0 1 * * *", ny, utc(2012, 11, 4, 4, 0), utc(2012, 11, 4, 5, 0),
	     utc(2012, 11, 4, 6, 0), utc(2012, 11, 5, 6, 0));
	NEXT("0 * * * *", ny, utc(2012, 11, 4, 4, 0), utc(2012, 11, 4, 5, 0),
	     utc(2012, 11, 4, 6, 0), utc(2012, 11, 4, 7, 0));
	/* From 01:45 EDT the next 01:30 is the EST one. */
	NEXT("30 1 4 11 *", ny, utc(2012, 11, 4, 5, 45), utc(2012, 11, 4, 6, 30));
	/* 02:30 exists once (EST) on the fall-back night. */
	NEXT("30 2 4 11 *", ny, utc(2012, 11, 4, 4, 0), utc(2012, 11, 4, 7, 30));
	/* Berlin: 09:00 local is 08:00Z in winter and 07:00Z in summer (CEST from 2026-03-29). */
	NEXT("0 9 * * *", "Europe/Berlin", utc(2026, 3, 27, 12, 0), utc(2026, 3, 28, 8, 0),
	     utc(2026, 3, 29, 7, 0));
	/* UTC spelled out is UTC. */
	NEXT("0 9 * * *", "UTC", utc(2026, 3, 27, 12, 0), utc(2026, 3, 28, 9, 0));
	NEXT("0 9 * * *", "Etc/UTC", utc(2026, 3, 27, 12, 0), utc(2026, 3, 28, 9, 0));
}

static void test_cron__tz_environment_restored(void **state)
{
	ds_cron *c = NULL;
	time_t next = 0;

	(void)state;
	assert_int_equal(ds_cron_parse(&c, "0 9 * * *", NULL, NULL), 0);
	setenv("TZ", "Asia/Tokyo", 1);
	assert_int_equal(ds_cron_next(c, utc(2026, 1, 2, 0, 0), "America/New_York", &next, NULL),
			 0);
	assert_int_equal(next, utc(2026, 1, 2, 14, 0));
	assert_string_equal(getenv("TZ"), "Asia/Tokyo");
	unsetenv("TZ");
	assert_int_equal(ds_cron_next(c, utc(2026, 1, 2, 0, 0), "Asia/Tokyo", &next, NULL), 0);
	assert_int_equal(next, utc(2026, 1, 3, 0, 0));
	/* Unset TZ comes back as its equivalent, the system's zone file. */
	assert_string_equal(getenv("TZ"), ":/etc/localtime");
	ds_cron_free(c);
}

static void test_cron__zones(void **state)
{
	ds_err err = {0};
	ds_cron *c = NULL;
	time_t next = 7;

	(void)state;
	assert_int_equal(ds_cron_zone_check("America/New_York", &err), 0);
	assert_int_equal(ds_cron_zone_check("Europe/Berlin", &err), 0);
	assert_int_equal(ds_cron_zone_check(NULL, &err), 0);
	assert_int_equal(ds_cron_zone_check("Mars/Olympus_Mons", &err), -ENOENT);
	assert_non_null(strstr(err.msg, "unknown time zone 'Mars/Olympus_Mons'"));
	assert_int_equal(ds_cron_zone_check("../../etc/passwd", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "is not a time zone name"));
	assert_int_equal(ds_cron_zone_check("/etc/localtime", &err), -EINVAL);
	assert_int_equal(ds_cron_zone_check("Europe/", &err), -EINVAL);
	assert_int_equal(ds_cron_zone_check("Europe//Berlin", &err), -EINVAL);
	assert_int_equal(ds_cron_zone_check("Europe/Ber lin", &err), -EINVAL);
	/* A directory is not a zone. */
	assert_int_equal(ds_cron_zone_check("Europe", &err), -ENOENT);
	assert_int_equal(ds_cron_parse(&c, "@daily", NULL, NULL), 0);
	assert_int_equal(ds_cron_next(c, 0, "Nowhere/Town", &next, &err), -ENOENT);
	assert_int_equal(next, 7);
	ds_cron_free(c);
}

static const struct bad {
	const char *expr;
	size_t col;
	const char *msg;
} bad[] = {
    {"", 0, "empty expression: expected 5 fields"},
    {"   ", 0, "empty expression"},
    {"* * * *", 0, "expected 5 fields (minute hour day-of-month month day-of-week"},
    {"* * * * * *", 11, "found more (there is no seconds field)"},
    {"61 * * * *", 1, "minute: 61 out of range 0-59"},
    {"99999999999 * * * *", 1, "minute: 99999999999 out of range 0-59"},
    {"* 24 * * *", 3, "hour: 24 out of range 0-23"},
    {"* * 0 * *", 5, "day-of-month: 0 out of range 1-31"},
    {"* * 32 * *", 5, "day-of-month: 32 out of range 1-31"},
    {"* * * 0 *", 7, "month: 0 out of range 1-12"},
    {"* * * 13 *", 7, "month: 13 out of range 1-12"},
    {"* * * * 8", 9, "day-of-week: 8 out of range 0-7"},
    {"* * * FOO *", 7, "month: unknown name 'FOO' (expected JAN-DEC or 1-12)"},
    {"* * * JAN-FOO *", 11, "month: unknown name 'FOO'"},
    {"* * * JANUARY *", 7, "month: unknown name 'JANUARY'"},
    {"* * * * MONDAY", 9, "day-of-week: unknown name 'MONDAY' (expected SUN-SAT or 0-7)"},
    {"* * * * MON-", 13, "day-of-week: missing a number"},
    {"* * MON * *", 5, "day-of-month: 'MON' is not a number"},
    {"a * * * *", 1, "minute: 'a' is not a number"},
    {"1a * * * *", 1, "minute: '1a' is not a number"},
    {"? * * * *", 1, "minute: '?' is not a number"},
    {"5-1 * * * *", 1, "minute: range 5-1 starts after it ends"},
    {"0 0 * * 5-1", 9, "day-of-week: range 5-1 starts after it ends"},
    {"-5 * * * *", 1, "minute: missing a number"},
    {"1-2-3 * * * *", 4, "minute: more than one '-'"},
    {"*/0 * * * *", 3, "minute: step must be positive"},
    {"*/x * * * *", 3, "minute: step 'x' is not a number"},
    {"*/ * * * *", 3, "minute: missing a step after '/'"},
    {"*/5/2 * * * *", 4, "minute: more than one '/'"},
    {"1,,2 * * * *", 3, "minute: empty list item"},
    {"1, * * * *", 3, "minute: empty list item"},
    {"0 0 30 2 *", 5, "day-of-month: no selected month has any of the selected days"},
    {"0 0 31 4,6,9,11 *", 5, "day-of-month: no selected month"},
    {"@every 5m", 1, "@every is not a cron expression; use schedule mode interval"},
    {"@reboot", 1, "unknown macro '@reboot'"},
    {"@fortnightly", 1, "unknown macro '@fortnightly' (expected @yearly"},
    {"@weekly 5", 9, "nothing may follow the macro @weekly"},
    {"CRON_TZ=UTC 0 * * * *", 1,
     "a time zone prefix is not supported here; set "
     "schedule.timeZone"},
    {"TZ=UTC 0 * * * *", 1, "time zone prefix"},
};

static void test_cron__bad_forms_are_rejected(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ds_cron *c = NULL;
		ds_err err = {0};
		size_t col = 99;
		int r = ds_cron_parse(&c, bad[i].expr, &col, &err);

		if (r != -EINVAL || col != bad[i].col || !strstr(err.msg, bad[i].msg))
			fail_msg("'%s': r=%d col=%zu '%s' (want col %zu '%s')", bad[i].expr, r, col,
				 err.msg, bad[i].col, bad[i].msg);
		assert_null(c);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cron__single_values_and_star),
	    cmocka_unit_test(test_cron__lists_ranges_steps),
	    cmocka_unit_test(test_cron__names),
	    cmocka_unit_test(test_cron__sunday_is_0_and_7),
	    cmocka_unit_test(test_cron__macros),
	    cmocka_unit_test(test_cron__feb_29_only_in_leap_years),
	    cmocka_unit_test(test_cron__month_ends),
	    cmocka_unit_test(test_cron__day_of_month_or_day_of_week),
	    cmocka_unit_test(test_cron__next_three_from_a_fixed_instant),
	    cmocka_unit_test(test_cron__time_zone_with_dst),
	    cmocka_unit_test(test_cron__tz_environment_restored),
	    cmocka_unit_test(test_cron__zones),
	    cmocka_unit_test(test_cron__bad_forms_are_rejected),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
