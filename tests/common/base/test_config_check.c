/* The shared configuration checks: located errors, columns inside values, host:port. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/config_check.h"

#include <errno.h>
#include <string.h>

struct probe {
	size_t offset; /* where inside the value of "v" to point */
};

static int point_into_v(ds_config_walk *w, const json_t *root, void *ctx)
{
	const struct probe *p = ctx;

	(void)root;
	ds_config_push_key(w, "v"); /* not popped: the walk ends at the error */
	return ds_config_fail_in_value(w, p->offset, "bad");
}

static void expect_column(const char *yaml, size_t offset, int line, int col)
{
	struct probe p = {offset};
	json_t *docs = NULL;
	ds_err err = {0};
	int r = ds_config_run(NULL, yaml, strlen(yaml), "c.yaml", "Thing", point_into_v, &p, &docs,
			      &err);

	assert_int_equal(r, -EINVAL);
	assert_null(docs);
	if (err.line != line || err.col != col || strcmp(err.msg, "v: bad") != 0)
		fail_msg("%s+%zu: got %d:%d '%s', want %d:%d", yaml, offset, err.line, err.col,
			 err.msg, line, col);
}

static void test_config_check__columns_inside_values(void **state)
{
	(void)state;
	expect_column("v: abcdef\n", 3, 1, 7);	      /* plain */
	expect_column("v: \"abcdef\"\n", 3, 1, 8);    /* past the quote */
	expect_column("v: 'abcdef'\n", 3, 1, 8);      /* single quotes */
	expect_column("x: 1\nv:   abc\n", 2, 2, 8);   /* second line */
	expect_column("v: \"a\\tbcdef\"\n", 4, 1, 4); /* an escape before: at the value */
	expect_column("v: 'it''s here'\n", 5, 1, 4);  /* a doubled quote before: at the value */
	expect_column("v: |\n  abcdef\n", 2, 1, 4);   /* block scalar: at the value */
	expect_column("v: \"a\\tbcdef\"\n", 1, 1, 6); /* up to the escape: still exact */
}

static int check_keys_only(ds_config_walk *w, const json_t *root, void *ctx)
{
	static const char *const keys[] = {"endpoint", "serverPublicKey", NULL};

	(void)ctx;
	return ds_config_check_keys(w, root, keys);
}

static void test_config_check__unknown_keys_suggest(void **state)
{
	json_t *docs = NULL;
	ds_err err = {0};
	const char *y1 = "endpoint: a\nendpiont: b\n", *y2 = "endpoint: a\ncolour: b\n";

	(void)state;
	assert_int_equal(ds_config_run(NULL, y1, strlen(y1), "c.yaml", "Thing", check_keys_only,
				       NULL, &docs, &err),
			 -EINVAL);
	assert_string_equal(err.msg, "endpiont: unknown key (did you mean 'endpoint'?)");
	assert_int_equal(err.line, 2);
	assert_int_equal(err.col, 1);
	assert_int_equal(ds_config_run(NULL, y2, strlen(y2), "c.yaml", "Thing", check_keys_only,
				       NULL, &docs, &err),
			 -EINVAL);
	assert_string_equal(err.msg, "colour: unknown key");
	assert_int_equal(ds_config_run(NULL, "endpoint: a\n", 12, "c.yaml", "Thing",
				       check_keys_only, NULL, &docs, &err),
			 0);
	assert_non_null(docs);
	json_decref(docs);
}

static void test_config_check__host_port(void **state)
{
	(void)state;
	assert_true(ds_config_host_port_valid("127.0.0.1:9451"));
	assert_true(ds_config_host_port_valid("dr.example.net:7450"));
	assert_true(ds_config_host_port_valid(":9451"));
	assert_true(ds_config_host_port_valid("[::1]:9451"));
	assert_true(ds_config_host_port_valid("[fd00::1]:1"));
	assert_true(ds_config_host_port_valid("host:65535"));
	assert_false(ds_config_host_port_valid("host:65536"));
	assert_false(ds_config_host_port_valid("host:0"));
	assert_false(ds_config_host_port_valid("host:"));
	assert_false(ds_config_host_port_valid("host"));
	assert_false(ds_config_host_port_valid("host:80x"));
	assert_false(ds_config_host_port_valid("ho st:80"));
	assert_false(ds_config_host_port_valid("::1:80"));
	assert_false(ds_config_host_port_valid("[]:80"));
	assert_false(ds_config_host_port_valid(NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_config_check__columns_inside_values),
	    cmocka_unit_test(test_config_check__unknown_keys_suggest),
	    cmocka_unit_test(test_config_check__host_port),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
