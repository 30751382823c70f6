/* html.h: what a page shows is text, never markup. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/html.h"

#include <stdlib.h>
#include <string.h>

static void test_html__markup_characters_become_references(void **state)
{
	ds_str s;

	(void)state;
	ds_str_init(&s, 1024);
	assert_int_equal(ds_html_escape(&s, "<script>alert('x')</script> & \"q\""), 0);
	assert_string_equal(ds_str_ptr(&s),
			    "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;");
	ds_str_dispose(&s);
}

static void test_html__control_bytes_are_dropped_utf8_kept(void **state)
{
	ds_str s;

	(void)state;
	ds_str_init(&s, 1024);
	assert_int_equal(ds_html_escape(&s, "a\x01\x1b[31mb\tc\nd \xc3\xa9"), 0);
	assert_string_equal(ds_str_ptr(&s), "a[31mb\tc\nd \xc3\xa9");
	assert_int_equal(ds_html_escape(&s, NULL), 0);
	assert_int_equal(ds_html_escapef(&s, " %d<%s>", 7, "b"), 0);
	assert_string_equal(ds_str_ptr(&s), "a[31mb\tc\nd \xc3\xa9 7&lt;b&gt;");
	ds_str_dispose(&s);
}

static void test_html__a_full_string_fails_and_says_so(void **state)
{
	ds_str s;

	(void)state;
	ds_str_init(&s, 8);
	assert_true(ds_html_escape(&s, "<<<") < 0);
	assert_true(ds_str_error(&s) < 0);
	ds_str_dispose(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_html__markup_characters_become_references),
	    cmocka_unit_test(test_html__control_bytes_are_dropped_utf8_kept),
	    cmocka_unit_test(test_html__a_full_string_fails_and_says_so),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
