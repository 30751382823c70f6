/* Go-style durations: every unit, fractions, signs, and the errors users see. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/duration.h"

#include <errno.h>
#include <string.h>

#define SEC 1000000000LL

static void test_duration__good(void **state)
{
	static const struct {
		const char *s;
		int64_t ns;
	} good[] = {
	    {"0", 0},
	    {"-0", 0},
	    {"1ns", 1},
	    {"1us", 1000},
	    {"1\xc2\xb5s", 1000},
	    {"1\xce\xbcs", 1000},
	    {"300ms", 300000000},
	    {"5s", 5 * SEC},
	    {"15m", 900 * SEC},
	    {"1h", 3600 * SEC},
	    {"1.5h", 5400 * SEC},
	    {"2h45m", 9900 * SEC},
	    {"1h30m15s", 5415 * SEC},
	    {".5s", SEC / 2},
	    {"5.s", 5 * SEC},
	    {"+3s", 3 * SEC},
	    {"-1.5h", -5400 * SEC},
	    {"1.0000000001s", SEC},		     /* beyond ns precision: truncated */
	    {"2562047h47m16.854775807s", INT64_MAX}, /* the largest */
	    {"-2562047h47m16.854775808s", INT64_MIN},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		int64_t ns = 42;
		ds_err err = {0};
		int r = ds_duration_parse(good[i].s, &ns, NULL, &err);

		if (r != 0 || ns != good[i].ns)
			fail_msg("'%s': r=%d ns=%lld (want %lld) %s", good[i].s, r, (long long)ns,
				 (long long)good[i].ns, err.msg);
	}
}

static void test_duration__bad(void **state)
{
	static const struct {
		const char *s;
		int rc;
		size_t col;
		const char *msg;
	} bad[] = {
	    {"", -EINVAL, 1, "empty duration"},
	    {"1", -EINVAL, 2, "missing unit in duration '1'"},
	    {"15", -EINVAL, 3, "missing unit"},
	    {"1h30", -EINVAL, 5, "missing unit"},
	    {"5x", -EINVAL, 2, "unknown unit in duration '5x'"},
	    {"5sec", -EINVAL, 2, "unknown unit"},
	    {"1H", -EINVAL, 2, "unknown unit"},
	    {"h", -EINVAL, 1, "expected a number"},
	    {"-", -EINVAL, 2, "a number must follow the sign"},
	    {"1h.m", -EINVAL, 3, "expected a number"},
	    {" 5s", -EINVAL, 1, "expected a number"},
	    {"5 s", -EINVAL, 2, "unknown unit"},
	    {"9223372036854775808ns", -ERANGE, 1, "out of range"},
	    {"2562048h", -ERANGE, 1, "out of range"},
	    {"2562047h47m16.854775808s", -ERANGE, 1, "out of range"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int64_t ns = 42;
		size_t col = 0;
		ds_err err = {0};
		int r = ds_duration_parse(bad[i].s, &ns, &col, &err);

		if (r != bad[i].rc || col != bad[i].col || !strstr(err.msg, bad[i].msg))
			fail_msg("'%s': r=%d col=%zu '%s' (want %d col %zu '%s')", bad[i].s, r, col,
				 err.msg, bad[i].rc, bad[i].col, bad[i].msg);
		assert_int_equal(ns, 42); /* untouched on failure */
	}
}

static void test_duration__ms_must_be_positive(void **state)
{
	long long ms = 7;
	ds_err err = {0};

	(void)state;
	assert_int_equal(ds_duration_parse_ms("200ms", &ms, NULL, &err), 0);
	assert_int_equal(ms, 200);
	assert_int_equal(ds_duration_parse_ms("1500us", &ms, NULL, &err), 0);
	assert_int_equal(ms, 1);
	assert_int_equal(ds_duration_parse_ms("1.5h", &ms, NULL, &err), 0);
	assert_int_equal(ms, 5400000);
	ms = 7;
	assert_int_equal(ds_duration_parse_ms("-1.5h", &ms, NULL, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "must be positive"));
	assert_int_equal(ds_duration_parse_ms("0", &ms, NULL, &err), -EINVAL);
	assert_int_equal(ds_duration_parse_ms("999us", &ms, NULL, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "at least 1ms"));
	assert_int_equal(ms, 7);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_duration__good),
	    cmocka_unit_test(test_duration__bad),
	    cmocka_unit_test(test_duration__ms_must_be_positive),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
