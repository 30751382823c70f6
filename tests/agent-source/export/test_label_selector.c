/* kubectl label selectors: every operator, blanks, the empty selector, bad input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/label_selector.h"

#include <errno.h>
#include <string.h>

/* Whether `sel` matches the labels written as JSON (e.g. {"env":"prod"}). */
static bool match(const char *sel_text, const char *labels_json)
{
	ds_label_selector *sel = NULL;
	ds_err err = {0};
	json_t *labels = labels_json ? json_loads(labels_json, 0, NULL) : NULL;
	bool m;

	if (ds_label_selector_parse(&sel, sel_text, NULL, &err) != 0)
		fail_msg("'%s' does not parse: %s", sel_text, err.msg);
	m = ds_label_selector_matches(sel, labels);
	ds_label_selector_free(sel);
	json_decref(labels);
	return m;
}

#define PROD "{\"env\":\"prod\",\"tier\":\"web\",\"drasync.io/replicate\":\"true\",\"gpus\":\"4\"}"
#define NOLABELS "{}"

static void test_label_selector__equality(void **state)
{
	(void)state;
	assert_true(match("env=prod", PROD));
	assert_true(match("env==prod", PROD));
	assert_false(match("env=staging", PROD));
	assert_false(match("env=prod", NOLABELS));
	assert_true(match("env!=staging", PROD));
	assert_false(match("env!=prod", PROD));
	/* != also holds when the label is absent. */
	assert_true(match("env!=prod", NOLABELS));
	assert_true(match("drasync.io/replicate=true", PROD));
	/* Values are case-sensitive. */
	assert_false(match("env=Prod", PROD));
	/* The empty value: "key=" wants the label present and empty. */
	assert_false(match("env=", PROD));
	assert_true(match("env=", "{\"env\":\"\"}"));
}

static void test_label_selector__sets(void **state)
{
	(void)state;
	assert_true(match("env in (prod, staging)", PROD));
	assert_true(match("env in (staging,prod)", PROD));
	assert_false(match("env in (staging)", PROD));
	assert_false(match("env in (prod)", NOLABELS));
	assert_true(match("tier notin (db)", PROD));
	assert_false(match("tier notin (db, web)", PROD));
	/* notin also holds when the label is absent. */
	assert_true(match("tier notin (web)", NOLABELS));
	/* Empty values inside sets: "()" is {""}, "(a,,b)" holds "". */
	assert_true(match("env in ()", "{\"env\":\"\"}"));
	assert_false(match("env in ()", PROD));
	assert_true(match("env in (a,,b)", "{\"env\":\"\"}"));
	assert_true(match("env in (a,)", "{\"env\":\"\"}"));
	/* "in" and "notin" are values inside a set. */
	assert_true(match("x in (in, notin)", "{\"x\":\"notin\"}"));
}

static void test_label_selector__existence(void **state)
{
	(void)state;
	assert_true(match("env", PROD));
	assert_false(match("env", NOLABELS));
	assert_false(match("!env", PROD));
	assert_true(match("!env", NOLABELS));
	assert_true(match("!missing", PROD));
	/* No labels object at all: as none. */
	assert_true(match("!env", NULL));
	assert_false(match("env", NULL));
	/* A non-string value is not a label. */
	assert_false(match("env", "{\"env\":1}"));
}

static void test_label_selector__integer_comparisons(void **state)
{
	(void)state;
	assert_true(match("gpus>2", PROD));
	assert_false(match("gpus>4", PROD));
	assert_true(match("gpus<5", PROD));
	assert_false(match("gpus<-1", PROD));
	assert_false(match("gpus>2", NOLABELS));
	/* A label that is not an integer never compares. */
	assert_false(match("env>2", PROD));
	assert_false(match("env<2", PROD));
}

static void test_label_selector__requirements_are_anded(void **state)
{
	(void)state;
	assert_true(match("env=prod,tier=web", PROD));
	assert_false(match("env=prod,tier=db", PROD));
	assert_true(match("env in (prod),tier notin (db),drasync.io/replicate,!legacy", PROD));
	assert_false(match("env in (prod),!tier", PROD));
}

static void test_label_selector__blanks(void **state)
{
	(void)state;
	assert_true(match("  env  =  prod  ,  tier != db ", PROD));
	assert_true(match("env\tin\t(\tprod\t,\tstaging\t)", PROD));
	assert_true(match("env\r\n=\nprod", PROD));
	assert_true(match(" ! legacy ", PROD));
	assert_true(match("env in(prod)", PROD));
}

static void test_label_selector__empty_matches_everything(void **state)
{
	ds_label_selector *sel = NULL;

	(void)state;
	assert_true(match("", PROD));
	assert_true(match("", NOLABELS));
	assert_true(match("   ", NULL));
	assert_int_equal(ds_label_selector_parse(&sel, "", NULL, NULL), 0);
	assert_int_equal(ds_label_selector_count(sel), 0);
	ds_label_selector_free(sel);
	assert_int_equal(ds_label_selector_parse(&sel, "a, b=c, d in (e)", NULL, NULL), 0);
	assert_int_equal(ds_label_selector_count(sel), 3);
	ds_label_selector_free(sel);
}

static void test_label_selector__keys_and_values(void **state)
{
	char k63[64], k64[65], p253[300];

	(void)state;
	memset(k63, 'a', 63);
	k63[63] = '\0';
	memset(k64, 'a', 64);
	k64[64] = '\0';
	assert_true(ds_label_key_valid("app", 3));
	assert_true(ds_label_key_valid("App_Name.v-1", 12));
	assert_true(ds_label_key_valid("example.com/app", 15));
	assert_true(ds_label_key_valid(k63, 63));
	assert_false(ds_label_key_valid(k64, 64));
	assert_false(ds_label_key_valid("", 0));
	assert_false(ds_label_key_valid("-app", 4));
	assert_false(ds_label_key_valid("app-", 4));
	assert_false(ds_label_key_valid("/app", 4));
	assert_false(ds_label_key_valid("example.com/", 12));
	assert_false(ds_label_key_valid("a/b/c", 5));
	assert_false(ds_label_key_valid("Example.com/app", 15)); /* prefix is a DNS subdomain */
	assert_false(ds_label_key_valid("example_com/app", 15));
	/* A 253-character prefix is fine, 254 is not. */
	memset(p253, 'a', 253);
	for (int i = 50; i < 253; i += 50)
		p253[i] = '.';
	memcpy(p253 + 253, "/x", 3);
	assert_true(ds_label_key_valid(p253, 255));
	memmove(p253 + 1, p253, 256);
	assert_false(ds_label_key_valid(p253, 256));
	assert_true(ds_label_value_valid("", 0));
	assert_true(ds_label_value_valid("v1.2_3-x", 8));
	assert_true(ds_label_value_valid(k63, 63));
	assert_false(ds_label_value_valid(k64, 64));
	assert_false(ds_label_value_valid("-v", 2));
	assert_false(ds_label_value_valid("v.", 2));
	assert_false(ds_label_value_valid("a/b", 3));
}

static const struct bad {
	const char *sel;
	size_t col;
	const char *msg;
} bad[] = {
    {",", 1, "found ',', expected: !, a label key, or end of string"},
    {"=x", 1, "found '=', expected: !, a label key"},
    {"a=b,", 5, "found end of string, expected: a label key after ','"},
    {"a=b,,c", 5, "found ',', expected: a label key after ','"},
    {"a b", 3, "found 'b', expected: =, ==, !=, in, notin, >, <, ',' or end of string"},
    {"a=b c", 5, "found 'c', expected: ',' or end of string"},
    {"a=(b)", 3, "found '(', expected: a value"},
    {"a==b=c", 5, "found '=', expected: ',' or end of string"},
    {"!", 2, "found end of string, expected: a label key after '!'"},
    {"!a=b", 3, "found '=', expected: ',' or end of string ('!key' takes no value)"},
    {"!!a", 2, "found '!', expected: a label key after '!'"},
    {"a in b", 6, "found 'b', expected: '('"},
    {"a in", 5, "found end of string, expected: '('"},
    {"a in (b", 8, "found end of string, expected: ',' or ')'"},
    {"a in (b c)", 9, "found 'c', expected: ',' or ')'"},
    {"a in (b=)", 8, "found '=', expected: ',' or ')'"},
    {"a in ((b))", 7, "found '(', expected: ',', ')' or a value"},
    {"a notin", 8, "found end of string, expected: '('"},
    {"a>", 3, "found end of string, expected: an integer"},
    {"a>b", 3, "'b' is not an integer ('>' and '<' compare integers)"},
    {"a<1.5", 3, "'1.5' is not an integer"},
    {"-a=b", 1, "invalid label key '-a': the name part must be letters"},
    {"a/b/c=d", 1, "invalid label key 'a/b/c': a key has at most one '/'"},
    {"/a=b", 1, "invalid label key '/a': the prefix before '/' is empty"},
    {"Ex.com/a", 1, "invalid label key 'Ex.com/a': the prefix must be a DNS subdomain"},
    {"ex.com/=b", 1, "invalid label key 'ex.com/': the name part is empty"},
    {"a=b*", 3, "invalid value 'b*' for label 'a'"},
    {"a in (ok, -bad)", 11, "invalid value '-bad' for label 'a'"},
    {"env=prod, tier in (web,db), x!=y z", 34, "found 'z', expected: ',' or end of string"},
};

static void test_label_selector__bad_inputs(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ds_label_selector *sel = NULL;
		ds_err err = {0};
		size_t col = 99;
		int r = ds_label_selector_parse(&sel, bad[i].sel, &col, &err);

		if (r != -EINVAL || col != bad[i].col || !strstr(err.msg, bad[i].msg))
			fail_msg("'%s': r=%d col=%zu '%s' (want col %zu '%s')", bad[i].sel, r, col,
				 err.msg, bad[i].col, bad[i].msg);
		assert_null(sel);
	}
}

static void test_label_selector__long_key_rejected(void **state)
{
	char sel[80];
	ds_label_selector *s = NULL;
	ds_err err = {0};

	(void)state;
	memset(sel, 'k', 64);
	memcpy(sel + 64, "=v", 3);
	assert_int_equal(ds_label_selector_parse(&s, sel, NULL, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "the name part is longer than 63 characters"));
	memset(sel, 'v', 64);
	memcpy(sel, "k=", 2);
	sel[66] = '\0';
	memset(sel + 2, 'v', 64);
	assert_int_equal(ds_label_selector_parse(&s, sel, NULL, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "invalid value"));
	assert_null(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_label_selector__equality),
	    cmocka_unit_test(test_label_selector__sets),
	    cmocka_unit_test(test_label_selector__existence),
	    cmocka_unit_test(test_label_selector__integer_comparisons),
	    cmocka_unit_test(test_label_selector__requirements_are_anded),
	    cmocka_unit_test(test_label_selector__blanks),
	    cmocka_unit_test(test_label_selector__empty_matches_everything),
	    cmocka_unit_test(test_label_selector__keys_and_values),
	    cmocka_unit_test(test_label_selector__bad_inputs),
	    cmocka_unit_test(test_label_selector__long_key_rejected),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
