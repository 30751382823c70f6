#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/err.h"
#include "drasync/log.h"
#include "testutil.h"

#include <errno.h>
#include <string.h>

static void test_err__location_is_formatted_as_file_line_col(void **state)
{
	ds_err err = {0};
	char buf[512];

	(void)state;
	ds_err_setloc(&err, "target.yaml", 12, 7, "unknown key '%s'", "objecType");
	assert_string_equal(ds_err_format(&err, buf, sizeof(buf)),
			    "target.yaml:12:7: unknown key 'objecType'");
	ds_err_set(&err, "plain %d", 3);
	assert_string_equal(ds_err_format(&err, buf, sizeof(buf)), "plain 3");
	ds_err_set(NULL, "NULL is accepted");
}

/* A failure whose callee said nothing still reaches the user as a sentence. */
static void test_err__fallback_fills_only_an_empty_message(void **state)
{
	ds_err err = {0};

	(void)state;
	assert_int_equal(ds_err_fallback(&err, -ENOENT), -ENOENT);
	assert_string_equal(err.msg, strerror(ENOENT));
	ds_err_set(&err, "outbox.db: no such table");
	assert_int_equal(ds_err_fallback(&err, -EIO), -EIO);
	assert_string_equal(err.msg, "outbox.db: no such table");
	/* success and a NULL err are left alone */
	ds_err_clear(&err);
	assert_int_equal(ds_err_fallback(&err, 3), 3);
	assert_string_equal(err.msg, "");
	assert_int_equal(ds_err_fallback(NULL, -ENOMEM), -ENOMEM);
}

static void test_err__log_quote_only_when_needed(void **state)
{
	char buf[64];

	(void)state;
	assert_string_equal(ds_log_quote("10.0.0.1:7450", buf, sizeof(buf)), "10.0.0.1:7450");
	assert_string_equal(ds_log_quote("a b", buf, sizeof(buf)), "\"a b\"");
	assert_string_equal(ds_log_quote("say \"hi\"", buf, sizeof(buf)), "\"say \\\"hi\\\"\"");
	assert_string_equal(ds_log_quote("", buf, sizeof(buf)), "\"\"");
}

static void test_err__agents_answer_help_and_version(void **state)
{
	const char *bins[] = {"DS_SOURCE_BIN", "DS_TARGET_BIN"};

	(void)state;
	for (size_t i = 0; i < 2; i++) {
		struct tu_run r;
		const char *help[] = {tu_env(bins[i]), "--help", NULL};
		const char *ver[] = {tu_env(bins[i]), "--version", NULL};
		const char *bad[] = {tu_env(bins[i]), "no-such-command", NULL};

		tu_run(&r, NULL, help);
		assert_int_equal(r.status, 0);
		assert_non_null(strstr(r.out, "Usage: drasync-"));
		tu_run_dispose(&r);
		tu_run(&r, NULL, ver);
		assert_int_equal(r.status, 0);
		assert_non_null(strstr(r.out, "drasync-"));
		tu_run_dispose(&r);
		tu_run(&r, NULL, bad);
		assert_int_equal(r.status, 2);
		assert_non_null(strstr(r.err, "unknown command 'no-such-command'"));
		tu_run_dispose(&r);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_err__location_is_formatted_as_file_line_col),
	    cmocka_unit_test(test_err__fallback_fills_only_an_empty_message),
	    cmocka_unit_test(test_err__log_quote_only_when_needed),
	    cmocka_unit_test(test_err__agents_answer_help_and_version),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
