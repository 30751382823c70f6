/*
 * The source agent's decisions without a cluster: what a link event says of
 * the session, once's tally, report and exit code, the outbox checked first.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/source_agent.h"
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_source_agent__link_change(void **state)
{
	(void)state;
	assert_int_equal(ds_source_agent_link_change("session_open"), 1);
	assert_int_equal(ds_source_agent_link_change("disconnected"), 0);
	assert_int_equal(ds_source_agent_link_change("hello_timeout"), 0);
	assert_int_equal(ds_source_agent_link_change("ack_timeout"), 0);
	assert_int_equal(ds_source_agent_link_change("goodbye"), 0);
	assert_int_equal(ds_source_agent_link_change("handshake_failed"), 0);
	/* Others leave agent.json as it is. */
	assert_int_equal(ds_source_agent_link_change("connecting"), -1);
	assert_int_equal(ds_source_agent_link_change(""), -1);
}

/* Two kinds, one object failed, one skipped (listed), two more beyond the list. */
static void status_of(ds_export_status *st, ds_index_kind_count kinds[2],
		      ds_export_failure failures[2])
{
	memset(st, 0, sizeof(*st));
	memset(kinds, 0, 2 * sizeof(kinds[0]));
	memset(failures, 0, 2 * sizeof(failures[0]));
	st->outbox.acked_seq = 12;
	snprintf(kinds[0].kind, sizeof(kinds[0].kind), "ConfigMap");
	kinds[0].applied = 5;
	kinds[0].ok = 1;
	kinds[0].held = 2;
	snprintf(kinds[1].kind, sizeof(kinds[1].kind), "Deployment");
	kinds[1].applied = 1;
	kinds[1].waiting = 0;
	kinds[1].ok = 2;
	st->kinds = kinds;
	st->n_kinds = 2;
	snprintf(failures[0].kind, sizeof(failures[0].kind), "ConfigMap");
	snprintf(failures[0].ns, sizeof(failures[0].ns), "ml-team");
	snprintf(failures[0].name, sizeof(failures[0].name), "settings");
	snprintf(failures[0].message, sizeof(failures[0].message), "admission denied");
	failures[0].status = DS_RESULT_FAILED;
	snprintf(failures[1].kind, sizeof(failures[1].kind), "DeviceClass");
	snprintf(failures[1].name, sizeof(failures[1].name), "gpu");
	snprintf(failures[1].message, sizeof(failures[1].message), "not replicated");
	failures[1].status = DS_RESULT_SKIPPED;
	st->failures = failures;
	st->n_failures = 2;
}

static void test_source_agent__tally_decides_the_exit(void **state)
{
	ds_index_kind_count kinds[2];
	ds_export_failure failures[2];
	ds_export_status st;
	ds_source_agent_tally t;

	(void)state;
	status_of(&st, kinds, failures);
	assert_int_equal(ds_source_agent_tally_of(&st, &t), 1);
	assert_int_equal(t.acknowledged, 12);
	assert_int_equal(t.applied, 6);
	assert_int_equal(t.held, 2);
	assert_int_equal(t.committed, 3);
	assert_int_equal(t.waiting, 0);
	assert_int_equal(t.failed, 1); /* a skipped object is not a failure */
	/* Only skipped objects: nothing needs attention. */
	failures[0].status = DS_RESULT_SKIPPED;
	assert_int_equal(ds_source_agent_tally_of(&st, &t), 0);
	assert_int_equal(t.failed, 0);
	/* Failures beyond the list count; so does a workload left waiting. */
	st.more_failures = 2;
	assert_int_equal(ds_source_agent_tally_of(&st, &t), 1);
	assert_int_equal(t.failed, 2);
	st.more_failures = 0;
	kinds[1].waiting = 1;
	assert_int_equal(ds_source_agent_tally_of(&st, &t), 1);
	assert_int_equal(t.waiting, 1);
}

/* What ds_source_agent_report() writes for st, into text; its return in *rc. */
static const char *report_of(const ds_export_status *st, char *text, size_t size, int *rc)
{
	FILE *f = tmpfile();
	size_t n;

	assert_non_null(f);
	*rc = ds_source_agent_report(f, st, "source.yaml");
	rewind(f);
	n = fread(text, 1, size - 1, f);
	text[n] = '\0';
	fclose(f);
	return text;
}

static void test_source_agent__report(void **state)
{
	ds_index_kind_count kinds[2];
	ds_export_failure failures[2];
	ds_export_status st;
	char text[2048];
	int rc;

	(void)state;
	status_of(&st, kinds, failures);
	st.more_failures = 2;
	assert_string_equal(report_of(&st, text, sizeof(text), &rc),
			    "failed ConfigMap ml-team/settings: admission denied\n"
			    "skipped DeviceClass gpu: not replicated\n"
			    "... and 2 more (drasync-source status --config source.yaml)\n"
			    "12 records acknowledged by the target: 6 applied, 2 held, 0 "
			    "waiting, 3 failed, 0 refused\n");
	assert_int_equal(rc, 1);
}

/* A refused object (issue 22) is listed with its reason, counted, and needs attention. */
static void test_source_agent__refusals_are_reported(void **state)
{
	ds_index_kind_count kinds[2];
	ds_export_failure failures[2];
	ds_export_status st;
	ds_source_agent_tally t;
	char text[2048];
	int rc;

	(void)state;
	status_of(&st, kinds, failures);
	failures[0].status = DS_RESULT_SKIPPED;
	assert_int_equal(ds_source_agent_tally_of(&st, &t), 0);
	failures[1].status = DS_RESULT_REFUSED;
	snprintf(failures[1].message, sizeof(failures[1].message),
		 "kind DeviceClass is not replicated by drasync");
	kinds[1].refused = 1;
	assert_int_equal(ds_source_agent_tally_of(&st, &t), 1);
	assert_int_equal(t.refused, 1);
	assert_int_equal(t.failed, 0);
	assert_string_equal(report_of(&st, text, sizeof(text), &rc),
			    "skipped ConfigMap ml-team/settings: admission denied\n"
			    "refused DeviceClass gpu: kind DeviceClass is not replicated by "
			    "drasync\n"
			    "12 records acknowledged by the target: 6 applied, 2 held, 0 "
			    "waiting, 0 failed, 1 refused\n");
	assert_int_equal(rc, 1);
}

static void test_source_agent__check_outbox(void **state)
{
	char *dir = tu_mkdtemp("source-agent");
	char db[1200], hint[9000];
	ds_err err = {0};

	(void)state;
	/* None yet: sound. */
	assert_int_equal(ds_source_agent_check_outbox(dir, hint, sizeof(hint), &err), 0);
	assert_string_equal(hint, "");
	/* Not a database: damaged, with what to do. */
	assert_int_equal(ds_export_db_path(dir, db, sizeof(db)), 0);
	tu_write_file(db, "this is not an SQLite database, not even close to one.........\n");
	assert_int_equal(ds_source_agent_check_outbox(dir, hint, sizeof(hint), &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "damaged"));
	assert_non_null(strstr(hint, "move "));
	assert_non_null(strstr(hint, ".damaged"));
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_source_agent__link_change),
	    cmocka_unit_test(test_source_agent__tally_decides_the_exit),
	    cmocka_unit_test(test_source_agent__report),
	    cmocka_unit_test(test_source_agent__refusals_are_reported),
	    cmocka_unit_test(test_source_agent__check_outbox),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
