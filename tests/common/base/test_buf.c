/* buf.h: ds_grow, and ds_str's limits, failure, hand-over and formats. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/buf.h"
#include "testutil.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void test_buf__grow_keeps_contents_and_fails_on_overflow(void **state)
{
	int *v = NULL;
	size_t cap = 0;

	(void)state;
	assert_int_equal(ds_grow((void **)&v, &cap, 3, sizeof(*v)), 0);
	assert_true(cap >= 3);
	v[0] = 7;
	assert_int_equal(ds_grow((void **)&v, &cap, 1000, sizeof(*v)), 0);
	assert_true(cap >= 1000);
	assert_int_equal(v[0], 7);
	/* The size would overflow: nothing changes. */
	assert_int_equal(ds_grow((void **)&v, &cap, SIZE_MAX / 2, sizeof(*v)), -ENOMEM);
	assert_true(cap >= 1000 && cap < 4096);
	assert_int_equal(v[0], 7);
	free(v);
}

static void test_buf__str_adds_bytes_and_formats(void **state)
{
	ds_str s;
	char big[300];

	(void)state;
	ds_str_init(&s, 1024);
	assert_null(ds_str_ptr(&s));
	assert_int_equal(ds_str_len(&s), 0);
	assert_int_equal(ds_str_adds(&s, "/api/"), 0);
	assert_int_equal(ds_str_add(&s, "v1xyz", 2), 0);
	assert_int_equal(ds_str_addf(&s, "/%s/%d", "pods", 42), 0);
	assert_string_equal(ds_str_ptr(&s), "/api/v1/pods/42");
	assert_int_equal(ds_str_len(&s), strlen("/api/v1/pods/42"));
	/* Embedded NULs are bytes like any other. */
	assert_int_equal(ds_str_add(&s, "a\0b", 3), 0);
	assert_int_equal(ds_str_len(&s), strlen("/api/v1/pods/42") + 3);
	assert_memory_equal(ds_str_ptr(&s) + ds_str_len(&s) - 3, "a\0b", 4);
	/* A format longer than any internal step. */
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	ds_str_reset(&s);
	assert_int_equal(ds_str_addf(&s, "[%s]", big), 0);
	assert_int_equal(ds_str_len(&s), sizeof(big) + 1);
	assert_int_equal(ds_str_ptr(&s)[0], '[');
	assert_int_equal(ds_str_ptr(&s)[sizeof(big)], ']');
	assert_int_equal(ds_str_ptr(&s)[sizeof(big) + 1], '\0');
	ds_str_drop(&s, 1);
	assert_int_equal(ds_str_len(&s), sizeof(big));
	assert_int_equal(ds_str_ptr(&s)[0], 'x');
	ds_str_drop(&s, 10000);
	assert_int_equal(ds_str_len(&s), 0);
	assert_string_equal(ds_str_ptr(&s), "");
	ds_str_dispose(&s);
	assert_null(ds_str_ptr(&s));
	ds_str_dispose(NULL);
}

static void test_buf__str_limit_is_exact(void **state)
{
	ds_str s;

	(void)state;
	ds_str_init(&s, 8);
	assert_int_equal(ds_str_adds(&s, "12345678"), 0); /* exactly max */
	assert_int_equal(ds_str_len(&s), 8);
	assert_int_equal(ds_str_error(&s), 0);
	assert_int_equal(ds_str_add(&s, "9", 1), -E2BIG);
	ds_str_dispose(&s);

	ds_str_init(&s, 8);
	assert_int_equal(ds_str_addf(&s, "%d", 123456789), -E2BIG);
	ds_str_dispose(&s);

	ds_str_init(&s, 0);
	assert_int_equal(ds_str_add(&s, "", 0), 0);
	assert_int_equal(ds_str_add(&s, "x", 1), -E2BIG);
	ds_str_dispose(&s);
}

/*
 * No dispose after a failure: the string must already have freed itself
 * (LeakSanitizer, which the unit tests run under, reports it otherwise).
 */
static void test_buf__str_frees_itself_and_keeps_failing(void **state)
{
	ds_str s;
	size_t len = 99;

	(void)state;
	ds_str_init(&s, 16);
	assert_int_equal(ds_str_adds(&s, "0123456789"), 0);
	assert_int_equal(ds_str_adds(&s, "0123456789"), -E2BIG);
	assert_null(ds_str_ptr(&s));
	assert_int_equal(ds_str_len(&s), 0);
	assert_int_equal(ds_str_error(&s), -E2BIG);
	/* Later adds, small ones too, fail the same way: one check at the end suffices. */
	assert_int_equal(ds_str_adds(&s, "x"), -E2BIG);
	assert_int_equal(ds_str_addf(&s, "%s", "x"), -E2BIG);
	assert_null(ds_str_take(&s, &len));
	assert_int_equal(len, 99);
	assert_null(ds_str_ptr(&s));
	/* A reset clears the failure. */
	ds_str_reset(&s);
	assert_int_equal(ds_str_adds(&s, "again"), 0);
	assert_string_equal(ds_str_ptr(&s), "again");
	ds_str_dispose(&s);

	/* Out of memory (a size no allocator gives): -ENOMEM, freed, sticky. */
	ds_str_init(&s, SIZE_MAX);
	assert_int_equal(ds_str_adds(&s, "held"), 0);
	assert_int_equal(ds_str_add(&s, "x", SIZE_MAX / 2), -ENOMEM);
	assert_null(ds_str_ptr(&s));
	assert_int_equal(ds_str_add(&s, "x", 1), -ENOMEM);
	assert_int_equal(ds_str_add(&s, "x", SIZE_MAX - 2), -ENOMEM);
	assert_int_equal(ds_str_error(&s), -ENOMEM);
}

static void test_buf__str_take_hands_over_and_empties(void **state)
{
	ds_str s;
	char *p;
	size_t len = 99;

	(void)state;
	ds_str_init(&s, 64);
	/* Nothing added: an allocated empty string, not NULL. */
	p = ds_str_take(&s, &len);
	assert_non_null(p);
	assert_string_equal(p, "");
	assert_int_equal(len, 0);
	free(p);

	assert_int_equal(ds_str_addf(&s, "%s=%u", "limit", 500u), 0);
	p = ds_str_take(&s, &len);
	assert_string_equal(p, "limit=500");
	assert_int_equal(len, 9);
	/* s is empty and usable, with the same maximum. */
	assert_null(ds_str_ptr(&s));
	assert_int_equal(ds_str_len(&s), 0);
	assert_int_equal(ds_str_adds(&s, "second"), 0);
	assert_string_equal(p, "limit=500");
	free(p);
	p = ds_str_take(&s, NULL);
	assert_string_equal(p, "second");
	free(p);
	assert_int_equal(ds_str_add(&s, "", 65), -E2BIG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_buf__grow_keeps_contents_and_fails_on_overflow),
	    cmocka_unit_test(test_buf__str_adds_bytes_and_formats),
	    cmocka_unit_test(test_buf__str_limit_is_exact),
	    cmocka_unit_test(test_buf__str_frees_itself_and_keeps_failing),
	    cmocka_unit_test(test_buf__str_take_hands_over_and_empties),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
