/* The string-table macro: both lookups, and an unknown string is an error, never a default. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/string_table.h"

#include <errno.h>

enum colour { COLOUR_NONE, COLOUR_RED, COLOUR_GREEN, COLOUR_BLUE, COLOUR_MAX };

/* sparse: COLOUR_NONE and COLOUR_BLUE have no name */
static const char *const colour_table[COLOUR_MAX] = {
    [COLOUR_RED] = "red",
    [COLOUR_GREEN] = "green",
};
DS_DEFINE_PRIVATE_STRING_TABLE_LOOKUP(colour, enum colour)

static void test_string_table__to_string(void **state)
{
	(void)state;
	assert_string_equal(colour_to_string(COLOUR_RED), "red");
	assert_string_equal(colour_to_string(COLOUR_GREEN), "green");
	assert_null(colour_to_string(COLOUR_NONE));
	assert_null(colour_to_string(COLOUR_BLUE));
	assert_null(colour_to_string(COLOUR_MAX));
	assert_null(colour_to_string((enum colour) - 1));
}

static void test_string_table__from_string(void **state)
{
	(void)state;
	assert_int_equal(colour_from_string("red"), COLOUR_RED);
	assert_int_equal(colour_from_string("green"), COLOUR_GREEN);
	/* an unknown string, written by a newer version say, is -EINVAL, not a default */
	assert_int_equal(colour_from_string("purple"), -EINVAL);
	assert_int_equal(colour_from_string("Red"), -EINVAL);
	assert_int_equal(colour_from_string(""), -EINVAL);
	assert_int_equal(colour_from_string(NULL), -EINVAL);
}

static void test_string_table__round_trip(void **state)
{
	(void)state;
	for (int i = 0; i < COLOUR_MAX; i++) {
		const char *s = colour_to_string((enum colour)i);

		if (s)
			assert_int_equal(colour_from_string(s), i);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_string_table__to_string),
	    cmocka_unit_test(test_string_table__from_string),
	    cmocka_unit_test(test_string_table__round_trip),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
