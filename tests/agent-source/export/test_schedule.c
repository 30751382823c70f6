/* The pass clock: interval slots anchored at the start, cron slots, overruns counted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/schedule.h"

#include <errno.h>
#include <string.h>
#include <time.h>

static int64_t utc_ms(int y, int mo, int d, int h, int mi, int s)
{
	struct tm tm = {0};

	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = s;
	return (int64_t)timegm(&tm) * 1000;
}

static void test_schedule__interval_slots_from_the_start(void **state)
{
	ds_schedule_config cfg = {.mode = DS_SCHEDULE_INTERVAL, .every_ms = 15 * 60 * 1000};
	int64_t start = utc_ms(2026, 12, 1, 8, 0, 0), next = 0;
	uint64_t missed = 99;
	ds_schedule *s = NULL;
	ds_err err = {0};

	(void)state;
	assert_int_equal(ds_schedule_new(&s, &cfg, start, &err), 0);
	/* A short pass: the next slot is start + every, nothing missed. */
	assert_int_equal(ds_schedule_next(s, start, start + 20 * 1000, &next, &missed, &err), 0);
	assert_true(next == utc_ms(2026, 12, 1, 8, 15, 0));
	assert_int_equal(missed, 0);
	/* Exactly on a slot: strictly after it. */
	assert_int_equal(
	    ds_schedule_next(s, start, utc_ms(2026, 12, 1, 8, 15, 0), &next, &missed, &err), 0);
	assert_true(next == utc_ms(2026, 12, 1, 8, 30, 0));
	assert_int_equal(missed, 1);
	/* A pass started at 8:15 that ran 40 minutes: 8:30 and 8:45 are not run
	 * (and not run twice later), the next is 9:00. */
	assert_int_equal(ds_schedule_next(s, utc_ms(2026, 12, 1, 8, 15, 0),
					  utc_ms(2026, 12, 1, 8, 55, 0), &next, &missed, &err),
			 0);
	assert_true(next == utc_ms(2026, 12, 1, 9, 0, 0));
	assert_int_equal(missed, 2);
	ds_schedule_free(s);
}

static void test_schedule__cron_slots_and_overruns(void **state)
{
	ds_schedule_config cfg = {.mode = DS_SCHEDULE_CRON, .cron_expr = "*/15 * * * *"};
	int64_t next = 0;
	uint64_t missed = 99;
	ds_schedule *s = NULL;
	ds_err err = {0};

	(void)state;
	assert_int_equal(ds_schedule_new(&s, &cfg, 0, &err), 0);
	assert_int_equal(
	    ds_schedule_next(s, 0, utc_ms(2026, 12, 1, 8, 7, 30), &next, &missed, &err), 0);
	assert_true(next == utc_ms(2026, 12, 1, 8, 15, 0));
	assert_int_equal(missed, 0);
	/* The 8:15 pass ran until 8:47: 8:30 and 8:45 were overrun. */
	assert_int_equal(ds_schedule_next(s, utc_ms(2026, 12, 1, 8, 15, 0),
					  utc_ms(2026, 12, 1, 8, 47, 0), &next, &missed, &err),
			 0);
	assert_true(next == utc_ms(2026, 12, 1, 9, 0, 0));
	assert_int_equal(missed, 2);
	ds_schedule_free(s);
}

static void test_schedule__cron_in_a_time_zone(void **state)
{
	ds_schedule_config cfg = {
	    .mode = DS_SCHEDULE_CRON, .cron_expr = "0 9 * * MON-FRI", .time_zone = "Europe/Berlin"};
	int64_t next = 0;
	ds_schedule *s = NULL;
	ds_err err = {0};

	(void)state;
	assert_int_equal(ds_schedule_new(&s, &cfg, 0, &err), 0);
	/* Tuesday 2026-12-01 09:00 in Berlin (CET, UTC+1) is 08:00Z. */
	assert_int_equal(ds_schedule_next(s, 0, utc_ms(2026, 12, 1, 7, 0, 0), &next, NULL, &err),
			 0);
	assert_true(next == utc_ms(2026, 12, 1, 8, 0, 0));
	/* After Friday's run the next is Monday. */
	assert_int_equal(ds_schedule_next(s, 0, utc_ms(2026, 12, 4, 8, 0, 0), &next, NULL, &err),
			 0);
	assert_true(next == utc_ms(2026, 12, 7, 8, 0, 0));
	ds_schedule_free(s);
}

static void test_schedule__bad_configurations(void **state)
{
	ds_schedule_config watch = {.mode = DS_SCHEDULE_WATCH};
	ds_schedule_config zero = {.mode = DS_SCHEDULE_INTERVAL, .every_ms = 0};
	ds_schedule_config bad = {.mode = DS_SCHEDULE_CRON, .cron_expr = "61 * * * *"};
	ds_schedule *s = NULL;
	ds_err err = {0};

	(void)state;
	assert_int_equal(ds_schedule_new(&s, &watch, 0, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "watch"));
	ds_err_clear(&err);
	assert_int_equal(ds_schedule_new(&s, &zero, 0, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "every"));
	ds_err_clear(&err);
	assert_int_equal(ds_schedule_new(&s, &bad, 0, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "minute"));
	assert_null(s);
}

static void test_schedule__format_time(void **state)
{
	char buf[40];

	(void)state;
	assert_string_equal(
	    ds_schedule_format_time(utc_ms(2028, 2, 29, 23, 59, 58) + 7, buf, sizeof(buf)),
	    "2028-02-29T23:59:58.007Z");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_schedule__interval_slots_from_the_start),
	    cmocka_unit_test(test_schedule__cron_slots_and_overruns),
	    cmocka_unit_test(test_schedule__cron_in_a_time_zone),
	    cmocka_unit_test(test_schedule__bad_configurations),
	    cmocka_unit_test(test_schedule__format_time),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
