/*
 * A ledger and an outbox written by drasync before its files had versions
 * (tests/resources/store/, the two files named *-before-versions.db, written by the real agents of
 * commit dac885a in itest_e2e_dr, a source "prod-east" with ten records, a
 * namespace failed back to standby, four verifications) open with today's
 * modules, are migrated in place and keep everything they held.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/inbox.h"
#include "drasync/ledger_status.h"
#include "drasync/namespace_mode.h"
#include "drasync/object_index.h"
#include "drasync/outbox.h"
#include "drasync/schemas.h"
#include "drasync/version.h"
#include "testutil.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EPOCH 7922649131368156626ull
#define NS "e2ed-959102-dr"

/* A copy of the fixture in a fresh directory (the fixture itself stays as written). */
static void copy_fixture(const char *name, char *path, size_t size)
{
	char src[1024], cmd[3200];
	char *dir = tu_mkdtemp("migrate");

	snprintf(src, sizeof(src), "%s/store/%s", getenv("DS_RESOURCES"), name);
	snprintf(path, size, "%s/%s", dir, name);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", src, path);
	assert_int_equal(system(cmd), 0);
	free(dir);
}

static long long scalar(const char *path, const char *sql)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *q = NULL;
	long long v = -1;

	assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &q, NULL), SQLITE_OK);
	if (sqlite3_step(q) == SQLITE_ROW)
		v = sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	sqlite3_close(db);
	return v;
}

static void text(const char *path, const char *sql, char *buf, size_t size)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *q = NULL;

	buf[0] = '\0';
	assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &q, NULL), SQLITE_OK);
	if (sqlite3_step(q) == SQLITE_ROW && sqlite3_column_text(q, 0))
		snprintf(buf, size, "%s", (const char *)sqlite3_column_text(q, 0));
	sqlite3_finalize(q);
	sqlite3_close(db);
}

/* What `drasync-target status` reads, as it reads it. */
static void assert_status(const char *path)
{
	ds_ledger_status *st = NULL;
	const ds_ledger_namespace *dr = NULL;
	ds_err err = {0};

	assert_int_equal(ds_ledger_status_read(path, 100, &st, &err), 0);
	assert_int_equal(st->n_sources, 1);
	assert_string_equal(st->sources[0].name, "prod-east");
	assert_int_equal(st->sources[0].epoch, EPOCH);
	assert_int_equal(st->sources[0].committed_seq, 10);
	assert_int_equal(st->sources[0].objects, 8);
	assert_int_equal(st->states[DS_APPLY_APPLIED], 5);
	assert_int_equal(st->states[DS_APPLY_HELD], 2);
	assert_int_equal(st->states[DS_APPLY_SKIPPED], 1);
	/* The failed-back namespace (and the source's, where its objects were first) */
	for (size_t i = 0; i < st->n_namespaces; i++)
		if (strcmp(st->namespaces[i].name, NS) == 0)
			dr = &st->namespaces[i];
	if (!dr)
		fail_msg("no namespace %s in the status", NS);
	assert_true(dr->recorded);
	assert_int_equal(dr->mode, DS_MODE_STANDBY);
	assert_string_equal(dr->changed_by, "failback");
	assert_int_equal(st->n_verifications, 4);
	ds_ledger_status_free(st);
}

static void test_store_migrate__a_ledger_from_before_versions(void **state)
{
	char path[1200], buf[64];
	ds_inbox *ib = NULL;
	ds_namespace_modes *nm = NULL;
	enum ds_mode mode = DS_MODE_MIGRATE;
	uint64_t epoch = 0, seq = 0;
	ds_err err = {0};

	(void)state;
	copy_fixture("ledger-before-versions.db", path, sizeof(path));
	assert_int_equal(scalar(path, "PRAGMA user_version"), 0);
	/* status reads it before any agent has migrated it (read only: it stays at 0) */
	assert_status(path);
	assert_int_equal(scalar(path, "PRAGMA user_version"), 0);

	/* The receiver opens it first, as `run` does: migrated in place. */
	assert_int_equal(ds_inbox_open(&ib, path, &err), 0);
	assert_int_equal(scalar(path, "PRAGMA user_version"), ds_ledger_schema.n_steps);
	assert_int_equal(ds_inbox_committed(ib, "prod-east", &epoch, &seq, &err), 0);
	assert_int_equal(epoch, EPOCH);
	assert_int_equal(seq, 10);
	ds_inbox_free(ib);
	text(path, "SELECT value FROM store_info WHERE key = 'file'", buf, sizeof(buf));
	assert_string_equal(buf, "ledger");
	text(path, "SELECT value FROM store_info WHERE key = 'written_by'", buf, sizeof(buf));
	assert_string_equal(buf, DS_VERSION);

	/* The failed-back namespace is still standby: a reconnecting source's
	 * records must not make it active. */
	assert_int_equal(ds_namespace_modes_open(&nm, path, &err), 0);
	assert_int_equal(ds_namespace_modes_get(nm, NS, &mode, &err), 1);
	assert_int_equal(mode, DS_MODE_STANDBY);
	ds_namespace_modes_free(nm);

	assert_int_equal(scalar(path, "SELECT count(*) FROM records"), 10);
	assert_status(path);
}

static void test_store_migrate__an_outbox_from_before_versions(void **state)
{
	char path[1200];
	ds_outbox *ob = NULL;
	ds_outbox_state os;
	ds_object_index *idx = NULL;
	ds_index_row row;
	char key[512];
	ds_err err = {0};

	(void)state;
	copy_fixture("outbox-before-versions.db", path, sizeof(path));
	assert_int_equal(scalar(path, "PRAGMA user_version"), 0);
	assert_int_equal(ds_outbox_open(&ob, path, NULL, &err), 0);
	assert_int_equal(scalar(path, "PRAGMA user_version"), ds_outbox_schema.n_steps);
	/* The same numbering: the target must not see a new epoch and resend all. */
	assert_int_equal(ds_outbox_epoch(ob), EPOCH);
	assert_int_equal(ds_outbox_state_get(ob, &os, &err), 0);
	assert_int_equal(os.last_seq, 10);
	assert_int_equal(os.acked_seq, 10);
	ds_outbox_free(ob);

	assert_int_equal(ds_object_index_open(&idx, path, &err), 0);
	assert_int_equal(ds_object_index_generation(idx), 2);
	assert_int_equal(ds_object_key(key, sizeof(key), "v1", "Namespace", "", "e2ed-959102"), 0);
	assert_int_equal(ds_object_index_get(idx, key, &row, &err), 0);
	assert_false(row.deleted);
	ds_object_index_free(idx);
	assert_int_equal(scalar(path, "SELECT count(*) FROM export_objects"), 8);
}

static void test_store_migrate__a_ledger_is_not_an_outbox(void **state)
{
	char path[1200];
	ds_outbox *ob = NULL;
	ds_inbox *ib = NULL;
	ds_err err = {0};

	(void)state;
	copy_fixture("ledger-before-versions.db", path, sizeof(path));
	assert_int_equal(ds_inbox_open(&ib, path, &err), 0); /* migrated: it says it is a ledger */
	ds_inbox_free(ib);
	assert_int_equal(ds_outbox_open(&ob, path, NULL, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "is a drasync ledger file where the outbox was expected"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_store_migrate__a_ledger_from_before_versions),
	    cmocka_unit_test(test_store_migrate__an_outbox_from_before_versions),
	    cmocka_unit_test(test_store_migrate__a_ledger_is_not_an_outbox),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
