#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/keys.h"
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zmq.h>

static void test_keys__written_pair_loads_back_and_matches(void **state)
{
	char *dir = tu_mkdtemp("keys");
	char path[1024], pub[DS_KEY_Z85_LEN + 1];
	ds_keypair kp, loaded;
	struct stat st;
	ds_err err = {0};

	(void)state;
	assert_int_equal(ds_keys_generate(&kp, &err), 0);
	assert_true(ds_keys_z85_valid(kp.public_z85));
	assert_true(ds_keys_z85_valid(kp.secret_z85));
	assert_int_equal(ds_keys_write(dir, "source", &kp, false, &err), 0);

	snprintf(path, sizeof(path), "%s/source.key", dir);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(ds_keys_load_secret(path, &loaded, &err), 0);
	assert_string_equal(loaded.secret_z85, kp.secret_z85);
	assert_string_equal(loaded.public_z85, kp.public_z85);

	snprintf(path, sizeof(path), "%s/source.pub", dir);
	assert_int_equal(ds_keys_load_public(path, pub, &err), 0);
	assert_string_equal(pub, kp.public_z85);

	/* A second write must not destroy the existing key. */
	assert_int_equal(ds_keys_write(dir, "source", &kp, false, &err), -EEXIST);
	assert_non_null(strstr(err.msg, "already exists"));
	free(dir);
}

static void test_keys__secret_readable_by_others_is_refused(void **state)
{
	char *dir = tu_mkdtemp("keys");
	char path[1024], buf[512];
	ds_keypair kp;
	ds_err err = {0};

	(void)state;
	assert_int_equal(ds_keys_generate(&kp, &err), 0);
	assert_int_equal(ds_keys_write(dir, "t", &kp, false, &err), 0);
	snprintf(path, sizeof(path), "%s/t.key", dir);
	assert_int_equal(chmod(path, 0640), 0);
	assert_int_equal(ds_keys_load_secret(path, &kp, &err), -EPERM);
	ds_err_format(&err, buf, sizeof(buf));
	assert_non_null(strstr(buf, path));
	assert_non_null(strstr(buf, "0640"));
	assert_int_equal(chmod(path, 0604), 0);
	assert_int_equal(ds_keys_load_secret(path, &kp, &err), -EPERM);
	assert_int_equal(chmod(path, 0400), 0);
	assert_int_equal(ds_keys_load_secret(path, &kp, &err), 0);
	free(dir);
}

static void test_keys__malformed_files_are_rejected_with_location(void **state)
{
	char *dir = tu_mkdtemp("keys");
	char path[1024];
	ds_keypair kp;
	ds_err err = {0};

	(void)state;
	snprintf(path, sizeof(path), "%s/bad.key", dir);
	tu_write_file(path, "# comment\nnot-a-key\n");
	chmod(path, 0600);
	assert_int_equal(ds_keys_load_secret(path, &kp, &err), -EBADMSG);
	assert_int_equal(err.line, 2);
	tu_write_file(path, "# only a comment\n");
	assert_int_equal(ds_keys_load_secret(path, &kp, &err), -EBADMSG);
	assert_int_equal(ds_keys_load_secret("/nonexistent/x.key", &kp, &err), -ENOENT);
	assert_false(ds_keys_z85_valid("short"));
	assert_false(ds_keys_z85_valid("0123456789012345678901234567890123456789 "));
	free(dir);
}

/* Every failure says something: a bad key name is refused with a sentence, not silence. */
static void test_keys__bad_name_is_refused_with_a_message(void **state)
{
	char *dir = tu_mkdtemp("keys");
	ds_keypair kp;
	ds_err err = {0};

	(void)state;
	assert_int_equal(ds_keys_generate(&kp, &err), 0);
	assert_int_equal(ds_keys_write(dir, "a/b", &kp, false, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "a/b"));
	free(dir);
}

static void test_keys__keygen_subcommand_on_both_agents(void **state)
{
	const char *bins[] = {"DS_SOURCE_BIN", "DS_TARGET_BIN"};
	const char *names[] = {"source", "target"};

	(void)state;
	for (size_t i = 0; i < 2; i++) {
		char *dir = tu_mkdtemp("keygen");
		char out[1024], path[1100];
		struct tu_run r;
		ds_keypair kp;
		ds_err err = {0};
		struct stat st;

		snprintf(out, sizeof(out), "%s/keys", dir);
		const char *argv[] = {tu_env(bins[i]), "keygen", "--out", out, NULL};
		tu_run(&r, NULL, argv);
		assert_int_equal(r.status, 0);
		snprintf(path, sizeof(path), "%s/%s.key", out, names[i]);
		assert_int_equal(stat(path, &st), 0);
		assert_int_equal(st.st_mode & 0777, 0600);
		assert_int_equal(ds_keys_load_secret(path, &kp, &err), 0);
		/* The public key printed is the one of the secret key written. */
		assert_non_null(strstr(r.out, kp.public_z85));
		tu_run_dispose(&r);

		/* Run again: refuses to overwrite, exit 1, clear message. */
		tu_run(&r, NULL, argv);
		assert_int_equal(r.status, 1);
		assert_non_null(strstr(r.err, "already exists"));
		tu_run_dispose(&r);

		const char *noargs[] = {tu_env(bins[i]), "keygen", NULL};
		tu_run(&r, NULL, noargs);
		assert_int_equal(r.status, 2);
		tu_run_dispose(&r);
		free(dir);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_keys__written_pair_loads_back_and_matches),
	    cmocka_unit_test(test_keys__secret_readable_by_others_is_refused),
	    cmocka_unit_test(test_keys__malformed_files_are_rejected_with_location),
	    cmocka_unit_test(test_keys__bad_name_is_refused_with_a_message),
	    cmocka_unit_test(test_keys__keygen_subcommand_on_both_agents),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
