/* target.proxy: the socks5:// URL and the credentials file (mode checked, never quoted). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/socks_proxy.h"
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void test_socks_proxy__parse(void **state)
{
	static const struct {
		const char *url, *address, *user, *pass;
	} good[] = {
	    {"socks5://egress.corp:1080", "egress.corp:1080", "", ""},
	    {"socks5://u:p@10.1.2.3:1", "10.1.2.3:1", "u", "p"},
	    {"socks5://u:p@ss@[fd00::1]:1080", "[fd00::1]:1080", "u", "p@ss"},
	};
	static const struct {
		const char *url;
		size_t bad;
		const char *msg;
	} bad[] = {
	    {"http://p:1", 0, "not a SOCKS5 proxy URL"},
	    {"socks4://p:1", 0, "not a SOCKS5 proxy URL"},
	    {"socks5://p", 9, "not host:port"},
	    {"socks5://p:0", 9, "not host:port"},
	    {"socks5://:1080", 9, "not host:port"},
	    {"socks5://p:1/x", 9, "not host:port"},
	    {"socks5://u@p:1", 9, "not user:pass"},
	    {"socks5://:pw@p:1", 9, "not user:pass"},
	    {"socks5://u:@p:1", 9, "not user:pass"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		ds_socks_proxy p;
		size_t off = 99;
		ds_err err = {0};

		assert_int_equal(ds_socks_proxy_parse(good[i].url, &p, &off, &err), 0);
		assert_string_equal(p.address, good[i].address);
		assert_string_equal(p.username, good[i].user);
		assert_string_equal(p.password, good[i].pass);
		ds_socks_proxy_dispose(&p);
		assert_string_equal(p.password, "");
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ds_socks_proxy p = {.address = ""};
		size_t off = 99;
		ds_err err = {0};

		assert_int_equal(ds_socks_proxy_parse(bad[i].url, &p, &off, &err), -EINVAL);
		assert_int_equal(off, bad[i].bad);
		if (!strstr(err.msg, bad[i].msg))
			fail_msg("%s: %s", bad[i].url, err.msg);
		assert_null(strstr(err.msg, "pw"));
		assert_string_equal(p.address, ""); /* untouched on failure */
	}
}

static void write_mode(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(chmod(path, mode), 0);
}

static void test_socks_proxy__credentials_file(void **state)
{
	char path[1024];
	ds_socks_proxy p = {.address = "proxy:1080"};
	ds_err err = {0};

	(void)state;
	snprintf(path, sizeof(path), "%s/socks-credentials-%d", tu_env("DS_TEST_TMP"),
		 (int)getpid());

	write_mode(path, "# the egress proxy\ndrasync:s3cr3t:x\n", 0600);
	assert_int_equal(ds_socks_proxy_load_credentials(path, &p, &err), 0);
	assert_string_equal(p.address, "proxy:1080");
	assert_string_equal(p.username, "drasync");
	assert_string_equal(p.password, "s3cr3t:x");

	/* Readable by others: refused like a secret key file, the password not quoted. */
	ds_socks_proxy_dispose(&p);
	write_mode(path, "drasync:s3cr3t\n", 0644);
	assert_int_equal(ds_socks_proxy_load_credentials(path, &p, &err), -EPERM);
	assert_non_null(strstr(err.msg, "accessible by group or others (mode 0644)"));
	assert_non_null(strstr(err.msg, "chmod 600"));
	assert_string_equal(p.username, "");

	static const char *const bad[] = {"drasync\n", "# only a comment\n", "a:b\nc:d\n",
					  ":s3cr3t\n"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ds_err_clear(&err);
		write_mode(path, bad[i], 0600);
		assert_int_equal(ds_socks_proxy_load_credentials(path, &p, &err), -EBADMSG);
		assert_null(strstr(err.msg, "s3cr3t"));
		assert_string_equal(err.file, path);
	}
	remove(path);
	ds_err_clear(&err);
	assert_int_equal(ds_socks_proxy_load_credentials(path, &p, &err), -ENOENT);
	assert_non_null(strstr(err.msg, path));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_socks_proxy__parse),
	    cmocka_unit_test(test_socks_proxy__credentials_file),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
