/* `relocate`'s durable state and its decisions (source_relocation.h), on a real outbox.db. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/exporter.h"
#include "drasync/outbox.h"
#include "drasync/record.h"
#include "drasync/source_relocation.h"
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t last_seq(const char *path)
{
	ds_outbox *ob = NULL;
	ds_outbox_state st;

	assert_int_equal(ds_outbox_open(&ob, path, NULL, NULL), 0);
	assert_int_equal(ds_outbox_state_get(ob, &st, NULL), 0);
	ds_outbox_free(ob);
	return st.last_seq;
}

static bool exported(ds_store *db, const char *ns)
{
	char **v = NULL;
	size_t n = 0;
	bool r;

	assert_int_equal(ds_source_relocation_excluded(db, &v, &n, NULL), 0);
	r = ds_source_relocation_exports((const char *const *)v, n, ns);
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
	return r;
}

static void test_source_relocation__next_step(void **state)
{
	ds_source_relocation row = {0};

	(void)state;
	assert_int_equal(ds_source_relocation_next(&row, false), DS_SRC_STEP_BEGIN);
	row.state = DS_SRC_RELOCATION_SYNCING;
	assert_int_equal(ds_source_relocation_next(&row, true), DS_SRC_STEP_SYNC);
	row.state = DS_SRC_RELOCATION_PARKING;
	assert_int_equal(ds_source_relocation_next(&row, true), DS_SRC_STEP_PARK);
	row.state = DS_SRC_RELOCATION_SENT;
	assert_int_equal(ds_source_relocation_next(&row, true), DS_SRC_STEP_WAIT);
	row.state = DS_SRC_RELOCATION_ACTIVE;
	assert_int_equal(ds_source_relocation_next(&row, true), DS_SRC_STEP_DONE);
	row.state = DS_SRC_RELOCATION_FAILED;
	assert_int_equal(ds_source_relocation_next(&row, true), DS_SRC_STEP_BEGIN);
}

/* Intent, one push, the outcome: nothing twice, and the exports follow the state. */
static void test_source_relocation__once_and_its_outcome(void **state)
{
	char *dir = tu_mkdtemp("ds-reloc"), path[4096];
	ds_store *db = NULL;
	ds_source_relocation row;
	ds_err err = {0};
	uint64_t seq = 0, again = 0;

	(void)state;
	assert_int_equal(ds_export_db_path(dir, path, sizeof(path)), 0);
	assert_int_equal(ds_source_relocation_open(&db, dir, &err), 0);
	assert_int_equal(ds_source_relocation_get(db, "ml", &row, &err), 0);
	assert_true(exported(db, "ml"));

	assert_int_equal(ds_source_relocation_begin(db, "ml", "tcp://dr:7450", &err), 0);
	assert_int_equal(ds_source_relocation_get(db, "ml", &row, &err), 1);
	assert_int_equal(row.state, DS_SRC_RELOCATION_SYNCING);
	assert_string_equal(row.target, "tcp://dr:7450");
	assert_false(exported(db, "ml"));
	assert_true(exported(db, "other"));
	/* the relocation record waits for the final pass */
	assert_int_equal(ds_source_relocation_push(path, "ml", &seq, &err), -EALREADY);
	assert_int_equal(last_seq(path), 0);
	assert_int_equal(ds_source_relocation_synced(db, "ml", &err), 0);
	assert_int_equal(ds_source_relocation_get(db, "ml", &row, &err), 1);
	assert_int_equal(row.state, DS_SRC_RELOCATION_PARKING);
	assert_false(exported(db, "ml"));

	assert_int_equal(ds_source_relocation_push(path, "ml", &seq, &err), 0);
	assert_int_equal(seq, 1);
	assert_int_equal(ds_source_relocation_push(path, "ml", &again, &err), -EALREADY);
	assert_int_equal(last_seq(path), 1); /* rolled back: pushed once */
	assert_int_equal(ds_source_relocation_get(db, "ml", &row, &err), 1);
	assert_int_equal(row.state, DS_SRC_RELOCATION_SENT);
	assert_int_equal(row.seq, 1);

	/* The commit result changes nothing; the apply result finishes it. */
	ds_wire_result ok = {.seq = 1, .status = DS_RESULT_OK, .message = ""};
	ds_wire_result other = {.seq = 9, .status = DS_RESULT_APPLIED, .message = "x"};
	ds_wire_result done = {.seq = 1, .status = DS_RESULT_APPLIED, .message = "verified active"};
	assert_int_equal(ds_source_relocation_on_results(db, &ok, 1, &err), 0);
	assert_int_equal(ds_source_relocation_on_results(db, &other, 1, &err), 0);
	assert_int_equal(ds_source_relocation_on_results(db, &done, 1, &err), 1);
	assert_int_equal(ds_source_relocation_get(db, "ml", &row, &err), 1);
	assert_int_equal(row.state, DS_SRC_RELOCATION_ACTIVE);
	assert_string_equal(row.message, "verified active");
	assert_true(row.finished_at > 0);
	assert_false(exported(db, "ml")); /* relocated: never exported again */

	/* Done is done: a new intent, or giving up, changes nothing. */
	assert_int_equal(ds_source_relocation_begin(db, "ml", "tcp://else:1", &err), 0);
	assert_int_equal(ds_source_relocation_fail(db, "ml", "late", &err), 0);
	assert_int_equal(ds_source_relocation_get(db, "ml", &row, &err), 1);
	assert_int_equal(row.state, DS_SRC_RELOCATION_ACTIVE);
	assert_string_equal(row.target, "tcp://dr:7450");
	ds_store_free(db);
	free(dir);
}

/* Refused: failed, exported again, and a new attempt starts over. */
static void test_source_relocation__refused_starts_over(void **state)
{
	char *dir = tu_mkdtemp("ds-reloc"), path[4096];
	ds_store *db = NULL;
	ds_source_relocation rows[4];
	ds_err err = {0};
	uint64_t seq = 0;
	ds_wire_result no = {.seq = 1, .status = DS_RESULT_REFUSED, .message = "may not relocate"};

	(void)state;
	assert_int_equal(ds_export_db_path(dir, path, sizeof(path)), 0);
	assert_int_equal(ds_source_relocation_open(&db, dir, &err), 0);
	assert_int_equal(ds_source_relocation_begin(db, "web", "t", &err), 0);
	assert_int_equal(ds_source_relocation_synced(db, "web", &err), 0);
	assert_int_equal(ds_source_relocation_push(path, "web", &seq, &err), 0);
	assert_int_equal(ds_source_relocation_on_results(db, &no, 1, &err), 1);
	assert_int_equal(ds_source_relocation_list(db, rows, 4, &err), 1);
	assert_int_equal(rows[0].state, DS_SRC_RELOCATION_FAILED);
	assert_int_equal(rows[0].status, DS_RESULT_REFUSED);
	assert_true(exported(db, "web"));
	assert_int_equal(ds_source_relocation_begin(db, "web", "t2", &err), 0);
	assert_int_equal(ds_source_relocation_list(db, rows, 4, &err), 1);
	assert_int_equal(rows[0].state, DS_SRC_RELOCATION_SYNCING);
	assert_int_equal(rows[0].seq, 0);
	assert_string_equal(rows[0].message, "");
	assert_false(exported(db, "web"));
	ds_store_free(db);
	free(dir);
}

struct guard {
	const char *relocating;
	int calls;
};

static int guard_hook(void *ud, struct sqlite3 *db, const ds_record *pushed, size_t n, ds_err *err)
{
	struct guard *g = ud;

	g->calls++;
	return ds_source_relocation_check_push(db, pushed, n, g->relocating, err);
}

/* Push records of ns through the guard, in the push's transaction. @return the push's result */
static int push_of(const char *path, const char *ns, const char *relocating)
{
	static const char payload[] = "{}";
	ds_record recs[2] = {
	    {.op = DS_RECORD_UPSERT,
	     .api_version = "v1",
	     .kind = "ConfigMap",
	     .ns = "other",
	     .name = "a",
	     .source_uid = "u1",
	     .source_resource_version = "1",
	     .payload = (const uint8_t *)payload,
	     .payload_len = 2},
	    {.op = DS_RECORD_UPSERT,
	     .api_version = "v1",
	     .kind = "ConfigMap",
	     .ns = ns,
	     .name = "b",
	     .source_uid = "u2",
	     .source_resource_version = "1",
	     .payload = (const uint8_t *)payload,
	     .payload_len = 2},
	};
	struct guard g = {relocating, 0};
	ds_outbox *ob = NULL;
	ds_err err = {0};
	int rc;

	assert_int_equal(ds_outbox_open(&ob, path, NULL, NULL), 0);
	rc = ds_outbox_push_with(ob, recs, 2, guard_hook, &g, NULL, &err);
	ds_outbox_free(ob);
	assert_int_equal(g.calls, 1);
	return rc;
}

/*
 * The exporters' guard: once the intent is committed, a push with a record of
 * the namespace is refused whole (rolled back), but the command's final pass
 * while it syncs; after it, nothing of it, the final pass's exporter either.
 */
static void test_source_relocation__push_guard(void **state)
{
	char *dir = tu_mkdtemp("ds-reloc"), path[4096];
	ds_store *db = NULL;
	ds_err err = {0};

	(void)state;
	assert_int_equal(ds_export_db_path(dir, path, sizeof(path)), 0);
	assert_int_equal(ds_source_relocation_open(&db, dir, &err), 0);
	assert_int_equal(push_of(path, "ml", NULL), 0);
	assert_int_equal(last_seq(path), 2);
	assert_int_equal(push_of(path, "ml", "ml"), -ESTALE); /* no relocation of ml syncing */
	assert_int_equal(last_seq(path), 2);

	assert_int_equal(ds_source_relocation_begin(db, "ml", "t", &err), 0);
	assert_int_equal(push_of(path, "ml", NULL), -ESTALE);
	assert_int_equal(last_seq(path), 2); /* rolled back, "other" with it */
	assert_int_equal(push_of(path, "web", NULL), 0);
	assert_int_equal(last_seq(path), 4);
	assert_int_equal(push_of(path, "ml", "ml"), 0); /* the final pass */
	assert_int_equal(last_seq(path), 6);

	assert_int_equal(ds_source_relocation_synced(db, "ml", &err), 0);
	assert_int_equal(push_of(path, "ml", "ml"), -ESTALE);
	assert_int_equal(push_of(path, "ml", NULL), -ESTALE);
	assert_int_equal(last_seq(path), 6);
	ds_store_free(db);
	free(dir);
}

/* The way home: a relocated namespace comes back when its target made it active after. */
static void test_source_relocation__comes_back(void **state)
{
	char *dir = tu_mkdtemp("ds-reloc");
	ds_source_relocation row = {.state = DS_SRC_RELOCATION_ACTIVE, .finished_at = 1000};
	ds_store *db = NULL;
	ds_err err = {0};

	(void)state;
	assert_false(ds_source_relocation_came_back(&row, NULL, 0));
	assert_false(ds_source_relocation_came_back(&row, "standby", 2000));
	assert_false(ds_source_relocation_came_back(&row, "active", 1000)); /* its own failover */
	assert_true(ds_source_relocation_came_back(&row, "active", 1001));
	row.state = DS_SRC_RELOCATION_SENT;
	assert_false(ds_source_relocation_came_back(&row, "active", 2000));

	/* park (the operator): relocated at once, no record; then it comes back */
	assert_int_equal(ds_source_relocation_open(&db, dir, &err), 0);
	assert_int_equal(ds_source_relocation_parked_by_operator(db, "ml", "tcp://b:1", &err), 0);
	assert_int_equal(ds_source_relocation_get(db, "ml", &row, &err), 1);
	assert_int_equal(row.state, DS_SRC_RELOCATION_ACTIVE);
	assert_int_equal(row.seq, 0);
	assert_true(row.finished_at > 0);
	assert_false(exported(db, "ml"));
	assert_int_equal(ds_source_relocation_next(&row, true), DS_SRC_STEP_DONE);
	assert_int_equal(ds_source_relocation_returned(db, "ml", &err), 0);
	assert_int_equal(ds_source_relocation_get(db, "ml", &row, &err), 1);
	assert_int_equal(row.state, DS_SRC_RELOCATION_RETURNED);
	assert_true(exported(db, "ml"));
	/* a new relocation starts over */
	assert_int_equal(ds_source_relocation_next(&row, true), DS_SRC_STEP_BEGIN);
	assert_int_equal(ds_source_relocation_begin(db, "ml", "tcp://b:1", &err), 0);
	assert_int_equal(ds_source_relocation_get(db, "ml", &row, &err), 1);
	assert_int_equal(row.state, DS_SRC_RELOCATION_SYNCING);
	ds_store_free(db);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_source_relocation__next_step),
	    cmocka_unit_test(test_source_relocation__once_and_its_outcome),
	    cmocka_unit_test(test_source_relocation__refused_starts_over),
	    cmocka_unit_test(test_source_relocation__push_guard),
	    cmocka_unit_test(test_source_relocation__comes_back),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
