/* JSON bounded before parsing: size, depth and values counted on the bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/json_limits.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static int check(const char *s, size_t bytes, size_t depth, size_t values, char *why, size_t n)
{
	ds_json_limits lim = {bytes, depth, values};

	return ds_json_check_limits(s, strlen(s), &lim, why, n);
}

/* What jansson counts as values is what the scan counts: exact at the limit. */
static void test_json_limits__values_counted_as_the_parser_sees_them(void **state)
{
	const char *doc =
	    "{\"a\": \"x\\\"y{[\", \"b\": [12, -3.5e2, true], \"c\": false, \"d\": null}";
	/* the object, 4 keys, "x\"y{[", the array, 12, -3.5e2, true, false, null: 12 */
	char why[200];

	(void)state;
	assert_int_equal(check(doc, 1000, 10, 12, why, sizeof(why)), 0);
	assert_int_equal(check(doc, 1000, 10, 11, why, sizeof(why)), -E2BIG);
	assert_non_null(strstr(why, "more than 11 values"));
	/* brackets inside strings are no nesting */
	assert_int_equal(check("{\"k\": \"[[[[[[[[\"}", 1000, 1, 10, why, sizeof(why)), 0);
}

static void test_json_limits__depth_and_bytes(void **state)
{
	char why[200];
	ds_json_limits lim;

	(void)state;
	assert_int_equal(check("[[[1]]]", 100, 3, 10, why, sizeof(why)), 0);
	assert_int_equal(check("[[[[1]]]]", 100, 3, 10, why, sizeof(why)), -E2BIG);
	assert_non_null(strstr(why, "nested deeper than 3 levels"));
	assert_int_equal(check("{\"a\": \"0123456789\"}", 10, 3, 10, why, sizeof(why)), -E2BIG);
	assert_non_null(strstr(why, "JSON of 19 bytes, over the 10 bytes"));
	ds_json_limits_default(&lim);
	assert_int_equal(lim.max_bytes, 3u << 20);
}

/* The record of issue 23: 3 MiB of [{},{},...] is refused before jansson builds it. */
static void test_json_limits__many_small_values_refused_unparsed(void **state)
{
	size_t n = (3u << 20) - 16, used = 0;
	char *s = malloc(n + 1), why[200];
	ds_json_limits lim;

	(void)state;
	assert_non_null(s);
	s[used++] = '[';
	while (used + 4 < n) {
		memcpy(s + used, "{},", 3);
		used += 3;
	}
	memcpy(s + used, "{}]", 3);
	used += 3;
	s[used] = '\0';
	ds_json_limits_default(&lim);
	assert_int_equal(ds_json_check_limits(s, used, &lim, why, sizeof(why)), -E2BIG);
	assert_non_null(strstr(why, "values"));
	free(s);
	/* a real object of the same size passes: a ConfigMap with one big value */
	s = malloc(n + 1);
	assert_non_null(s);
	used = (size_t)snprintf(s, n,
				"{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"data\":{\"v\":\"");
	memset(s + used, 'x', n - used - 4);
	memcpy(s + n - 4, "\"}}", 4);
	assert_int_equal(ds_json_check_limits(s, strlen(s), &lim, why, sizeof(why)), 0);
	{
		json_t *doc = json_loadb(s, strlen(s), 0, NULL);
		assert_non_null(doc);
		json_decref(doc);
	}
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_json_limits__values_counted_as_the_parser_sees_them),
	    cmocka_unit_test(test_json_limits__depth_and_bytes),
	    cmocka_unit_test(test_json_limits__many_small_values_refused_unparsed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
