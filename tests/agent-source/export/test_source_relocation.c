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
	assert_int_equal(row.state, DS_SRC_RELOCATION_PARKING);
	assert_string_equal(row.target, "tcp://dr:7450");
	assert_false(exported(db, "ml"));
	assert_true(exported(db, "other"));

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
	assert_int_equal(ds_source_relocation_push(path, "web", &seq, &err), 0);
	assert_int_equal(ds_source_relocation_on_results(db, &no, 1, &err), 1);
	assert_int_equal(ds_source_relocation_list(db, rows, 4, &err), 1);
	assert_int_equal(rows[0].state, DS_SRC_RELOCATION_FAILED);
	assert_int_equal(rows[0].status, DS_RESULT_REFUSED);
	assert_true(exported(db, "web"));
	assert_int_equal(ds_source_relocation_begin(db, "web", "t2", &err), 0);
	assert_int_equal(ds_source_relocation_list(db, rows, 4, &err), 1);
	assert_int_equal(rows[0].state, DS_SRC_RELOCATION_PARKING);
	assert_int_equal(rows[0].seq, 0);
	assert_string_equal(rows[0].message, "");
	assert_false(exported(db, "web"));
	ds_store_free(db);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_source_relocation__next_step),
	    cmocka_unit_test(test_source_relocation__once_and_its_outcome),
	    cmocka_unit_test(test_source_relocation__refused_starts_over),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
