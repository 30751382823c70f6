#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/keys.h"
#include "drasync/zap.h"
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char reported[4096];

static void collect(void *ud, const ds_transport_event *ev)
{
	(void)ud;
	strncat(reported, ev->detail, sizeof(reported) - strlen(reported) - 2);
	strcat(reported, "\n");
}

static void test_zap__authorized_file_bad_lines_reported_and_skipped(void **state)
{
	char *dir = tu_mkdtemp("zap");
	char path[512], text[1024];
	ds_keypair a, b;
	ds_authorized *auth;
	ds_err err = {0};

	(void)state;
	assert_int_equal(ds_keys_generate(&a, &err), 0);
	assert_int_equal(ds_keys_generate(&b, &err), 0);
	snprintf(path, sizeof(path), "%s/authorized_sources", dir);
	snprintf(text, sizeof(text),
		 "# sources allowed to push\n"
		 "\n"
		 "prod-east %s\n"
		 "lonely-name\n"
		 "bad-key 0123456789\n"
		 "  prod-west\t%s  \n"
		 "again %s\n",
		 a.public_z85, b.public_z85, a.public_z85);
	tu_write_file(path, text);
	reported[0] = '\0';
	assert_int_equal(ds_authorized_load(&auth, path, collect, NULL, &err), 0);
	assert_int_equal(ds_authorized_count(auth), 2);
	assert_string_equal(ds_authorized_lookup(auth, a.public_z85), "prod-east");
	assert_string_equal(ds_authorized_lookup(auth, b.public_z85), "prod-west");
	assert_null(ds_authorized_lookup(auth, "0000000000000000000000000000000000000000"));
	/* Each bad line named by file and line number. */
	snprintf(text, sizeof(text), "%s:4:", path);
	assert_non_null(strstr(reported, text));
	snprintf(text, sizeof(text), "%s:5: not a 40-character Z85", path);
	assert_non_null(strstr(reported, text));
	snprintf(text, sizeof(text), "%s:7: key listed twice", path);
	assert_non_null(strstr(reported, text));
	ds_authorized_free(auth);

	assert_int_equal(ds_authorized_load(&auth, "/nonexistent/authorized", NULL, NULL, &err),
			 -ENOENT);
	assert_non_null(strstr(err.msg, "/nonexistent/authorized"));
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_zap__authorized_file_bad_lines_reported_and_skipped),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
