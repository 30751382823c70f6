/*
 * The ledger's identity (ledger_identity.h): the decision on the ledger's and
 * the cluster's ids, and the identity in real ledger files: none in a missing
 * or 0-byte file (left as it is), one made once and kept.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/ledger_identity.h"
#include "dstest.h"
#include "testutil.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *ledger_in(const char *prefix)
{
	char *dir = tu_mkdtemp(prefix), *path;

	assert_true(asprintf(&path, "%s/ledger.db", dir) > 0);
	free(dir);
	return path;
}

static void test_ledger_identity__decide(void **state)
{
	static const struct {
		const char *ledger, *cluster;
		bool new_ledger;
		enum ds_identity_verdict want;
	} cases[] = {
	    {"", "", false, DS_IDENTITY_FIRST},
	    {NULL, NULL, false, DS_IDENTITY_FIRST},
	    {"aa", "", false, DS_IDENTITY_PUBLISH},
	    {"aa", "aa", false, DS_IDENTITY_SAME},
	    /* the lost volume: a new ledger where the cluster had one */
	    {"", "aa", false, DS_IDENTITY_LOST},
	    {NULL, "aa", false, DS_IDENTITY_LOST},
	    {"bb", "aa", false, DS_IDENTITY_OTHER},
	    /* --new-ledger takes this ledger whatever the cluster says */
	    {"", "aa", true, DS_IDENTITY_ADOPT},
	    {"bb", "aa", true, DS_IDENTITY_ADOPT},
	    {"", "", true, DS_IDENTITY_ADOPT},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		enum ds_identity_verdict v = ds_ledger_identity_decide(
		    cases[i].ledger, cases[i].cluster, cases[i].new_ledger);

		if (v != cases[i].want)
			fail_msg("case %zu (%s, %s, %d): %s, not %s", i,
				 cases[i].ledger ? cases[i].ledger : "NULL",
				 cases[i].cluster ? cases[i].cluster : "NULL", cases[i].new_ledger,
				 ds_identity_verdict_name(v),
				 ds_identity_verdict_name(cases[i].want));
	}
	assert_string_equal(ds_identity_verdict_name(DS_IDENTITY_LOST), "lost");
	assert_string_equal(ds_identity_verdict_name(DS_IDENTITY_VERDICT_MAX), "none");
}

static void test_ledger_identity__missing_and_empty_files_have_none(void **state)
{
	char *path = ledger_in("ledger-id-none");
	ds_ledger_identity id;
	struct stat sb;
	ds_err err = {0};
	FILE *f;

	(void)state;
	memset(&id, 'x', sizeof(id));
	assert_int_equal(ds_ledger_identity_read(path, &id, &err), 0);
	assert_string_equal(id.id, "");
	/* reading made no file */
	assert_int_equal(stat(path, &sb), -1);
	f = fopen(path, "w");
	assert_non_null(f);
	fclose(f);
	assert_int_equal(ds_ledger_identity_read(path, &id, &err), 0);
	assert_string_equal(id.id, "");
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_size, 0);
	free(path);
}

static void test_ledger_identity__made_once_and_kept(void **state)
{
	char *path = ledger_in("ledger-id-make");
	ds_ledger_identity a, b, c, other;
	char *path2 = ledger_in("ledger-id-other");
	ds_err err = {0};

	(void)state;
	/* missing: the ledger is created with its identity */
	assert_int_equal(ds_ledger_identity_ensure(path, &a, &err), 1);
	assert_int_equal(strlen(a.id), 32);
	for (size_t i = 0; i < 32; i++)
		assert_true(isxdigit((unsigned char)a.id[i]) && !isupper((unsigned char)a.id[i]));
	/* 2026-12-04T19:55:51Z */
	assert_int_equal(strlen(a.created), 20);
	assert_int_equal(a.created[10], 'T');
	assert_int_equal(a.created[19], 'Z');
	/* again: the same one, not a new one */
	assert_int_equal(ds_ledger_identity_ensure(path, &b, &err), 0);
	assert_string_equal(b.id, a.id);
	assert_string_equal(b.created, a.created);
	assert_int_equal(ds_ledger_identity_read(path, &c, &err), 1);
	assert_string_equal(c.id, a.id);
	assert_string_equal(c.created, a.created);
	/* another ledger: another id */
	assert_int_equal(ds_ledger_identity_ensure(path2, &other, &err), 1);
	assert_string_not_equal(other.id, a.id);
	assert_int_equal(ds_ledger_identity_decide(c.id, other.id, false), DS_IDENTITY_OTHER);
	free(path);
	free(path2);
}

static void test_ledger_identity__namespace(void **state)
{
	ds_target_config *cfg = dt_config("kind: TargetConfig\nidentity: {namespace: dr-ops}\n");
	char buf[256];

	(void)state;
	assert_string_equal(ds_ledger_identity_namespace(cfg, buf, sizeof(buf)), "dr-ops");
	ds_target_config_free(cfg);
	cfg = dt_config("kind: TargetConfig\n");
	ds_ledger_identity_namespace(cfg, buf, sizeof(buf));
	/* outside a pod: the default */
	if (access(DS_LEDGER_SA_NAMESPACE_FILE, R_OK) != 0)
		assert_string_equal(buf, DS_LEDGER_DEFAULT_NAMESPACE);
	else
		assert_true(buf[0] != '\0');
	ds_target_config_free(cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ledger_identity__decide),
	    cmocka_unit_test(test_ledger_identity__missing_and_empty_files_have_none),
	    cmocka_unit_test(test_ledger_identity__made_once_and_kept),
	    cmocka_unit_test(test_ledger_identity__namespace),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
