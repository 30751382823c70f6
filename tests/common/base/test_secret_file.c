/* Reading a small secret file: what is refused (mode, kind, size), what is followed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/secret_file.h"
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[512];

static int setup(void **state)
{
	char *d = tu_mkdtemp("secret-file");

	(void)state;
	snprintf(dir, sizeof(dir), "%s", d);
	free(d);
	return 0;
}

static void path_of(char *out, size_t n, const char *name)
{
	snprintf(out, n, "%s/%s", dir, name);
}

static void write_mode(const char *path, const char *text, mode_t mode)
{
	tu_write_file(path, text);
	assert_int_equal(chmod(path, mode), 0);
}

static void test_secret_file__reads_a_private_file(void **state)
{
	char path[600], buf[64];
	ds_err err = {0};

	(void)state;
	path_of(path, sizeof(path), "ok");
	write_mode(path, "user:pass\n", 0600);
	assert_int_equal(
	    ds_secret_file_read(path, "proxy credentials file", true, buf, sizeof(buf), &err), 10);
	assert_string_equal(buf, "user:pass\n");
}

static void test_secret_file__refuses_group_or_others(void **state)
{
	char path[600], buf[64];
	ds_err err = {0};

	(void)state;
	path_of(path, sizeof(path), "open");
	write_mode(path, "user:pass\n", 0640);
	assert_int_equal(ds_secret_file_read(path, "secret key file", true, buf, sizeof(buf), &err),
			 -EPERM);
	assert_non_null(strstr(err.msg, "secret key file is accessible by group or others (mode "
					"0640); refusing it: run chmod 600"));
	/* A public file may be read by anyone. */
	assert_int_equal(ds_secret_file_read(path, "key file", false, buf, sizeof(buf), &err), 10);
}

static void test_secret_file__follows_a_symlink(void **state)
{
	char target[600], link[600], buf[64];
	ds_err err = {0};

	(void)state;
	path_of(target, sizeof(target), "..data-secret");
	path_of(link, sizeof(link), "mounted");
	write_mode(target, "k\n", 0600);
	assert_int_equal(symlink(target, link), 0);
	assert_int_equal(ds_secret_file_read(link, "key file", true, buf, sizeof(buf), &err), 2);
	assert_string_equal(buf, "k\n");
}

static void test_secret_file__refuses_what_is_not_a_file(void **state)
{
	char buf[64];
	ds_err err = {0};

	(void)state;
	assert_int_equal(ds_secret_file_read(dir, "key file", true, buf, sizeof(buf), &err),
			 -EINVAL);
	assert_non_null(strstr(err.msg, "is not a regular file"));
	assert_int_equal(ds_secret_file_read("/nonexistent/drasync/key", "key file", true, buf,
					     sizeof(buf), &err),
			 -ENOENT);
	assert_non_null(strstr(err.msg, "cannot open key file /nonexistent/drasync/key"));
}

static void test_secret_file__bounded(void **state)
{
	char path[600], buf[8];
	ds_err err = {0};

	(void)state;
	path_of(path, sizeof(path), "seven");
	write_mode(path, "1234567", 0600); /* cap - 1 bytes: fits */
	assert_int_equal(ds_secret_file_read(path, "key file", true, buf, sizeof(buf), &err), 7);
	assert_string_equal(buf, "1234567");
	path_of(path, sizeof(path), "eight");
	write_mode(path, "12345678", 0600);
	assert_int_equal(ds_secret_file_read(path, "key file", true, buf, sizeof(buf), &err),
			 -EBADMSG);
	assert_non_null(strstr(err.msg, "key file larger than 7 bytes"));
	/* Nothing of it is left in the buffer. */
	for (size_t i = 0; i < sizeof(buf); i++)
		assert_int_equal(buf[i], 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_secret_file__reads_a_private_file),
	    cmocka_unit_test(test_secret_file__refuses_group_or_others),
	    cmocka_unit_test(test_secret_file__follows_a_symlink),
	    cmocka_unit_test(test_secret_file__refuses_what_is_not_a_file),
	    cmocka_unit_test(test_secret_file__bounded),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
