/*
 * The per-source quotas (quota.h): the credit and throttle decisions as pure
 * functions, and the table's transitions as the events an operator reads.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/quota.h"

#include <stdio.h>
#include <string.h>

#define CEILING 1000

static ds_quota_usage usage(uint64_t backlog, uint64_t bytes, uint64_t max_unapplied,
			    uint64_t max_bytes)
{
	return (ds_quota_usage){
	    .backlog = backlog,
	    .ledger_bytes = bytes,
	    .limits = {.max_unapplied = max_unapplied, .max_ledger_bytes = max_bytes}};
}

static void test_quota__credit_shrinks_near_own_bound_only(void **state)
{
	ds_quota_total t = {.backlog = 150, .max_unapplied = CEILING, .sources = 2};
	ds_quota_usage a = usage(90, 0, 100, 0), b = usage(60, 0, 100, 0);

	(void)state;
	/* A is 10 records from its bound: 10 credit; B keeps its full credit. */
	assert_int_equal(ds_quota_credit(64, &a, &t, ds_quota_state(&a, &t, DS_QUOTA_NONE)), 10);
	assert_int_equal(ds_quota_credit(32, &b, &t, ds_quota_state(&b, &t, DS_QUOTA_NONE)), 32);
	/* At its bound: throttled by its backlog, credit 0; B unchanged. */
	a.backlog = 100;
	t.backlog = 160;
	assert_int_equal(ds_quota_state(&a, &t, DS_QUOTA_NONE), DS_QUOTA_BACKLOG);
	assert_int_equal(ds_quota_credit(64, &a, &t, DS_QUOTA_BACKLOG), 0);
	assert_int_equal(ds_quota_state(&b, &t, DS_QUOTA_NONE), DS_QUOTA_NONE);
	assert_int_equal(ds_quota_credit(32, &b, &t, DS_QUOTA_NONE), 32);
}

static void test_quota__resumes_below_low_water(void **state)
{
	ds_quota_total t = {.backlog = 0, .max_unapplied = CEILING, .sources = 1};
	ds_quota_usage a = usage(99, 0, 100, 0);

	(void)state;
	/* Once throttled it stays so until under three quarters of the bound. */
	assert_int_equal(ds_quota_state(&a, &t, DS_QUOTA_BACKLOG), DS_QUOTA_BACKLOG);
	a.backlog = 75;
	assert_int_equal(ds_quota_state(&a, &t, DS_QUOTA_BACKLOG), DS_QUOTA_BACKLOG);
	a.backlog = 74;
	assert_int_equal(ds_quota_state(&a, &t, DS_QUOTA_BACKLOG), DS_QUOTA_NONE);
	assert_int_equal(ds_quota_credit(64, &a, &t, DS_QUOTA_NONE), 26);
	/* Not throttled before: 99 of 100 is under the bound. */
	a.backlog = 99;
	assert_int_equal(ds_quota_state(&a, &t, DS_QUOTA_NONE), DS_QUOTA_NONE);
	assert_int_equal(ds_quota_credit(64, &a, &t, DS_QUOTA_NONE), 1);
}

static void test_quota__ledger_bytes_quota(void **state)
{
	ds_quota_total t = {.backlog = 0, .max_unapplied = CEILING, .sources = 1};
	ds_quota_usage a = usage(0, 4096, 100, 4096), unlimited = usage(0, 1ull << 40, 100, 0);
	uint64_t value = 0, limit = 0;

	(void)state;
	assert_int_equal(ds_quota_state(&a, &t, DS_QUOTA_NONE), DS_QUOTA_LEDGER_BYTES);
	assert_int_equal(ds_quota_credit(64, &a, &t, DS_QUOTA_LEDGER_BYTES), 0);
	ds_quota_measure(&a, &t, DS_QUOTA_LEDGER_BYTES, &value, &limit);
	assert_int_equal(value, 4096);
	assert_int_equal(limit, 4096);
	/* Compaction freed bytes: back under the low-water mark, credit again. */
	a.ledger_bytes = 3000;
	assert_int_equal(ds_quota_state(&a, &t, DS_QUOTA_LEDGER_BYTES), DS_QUOTA_NONE);
	/* 0: unlimited. */
	assert_int_equal(ds_quota_state(&unlimited, &t, DS_QUOTA_NONE), DS_QUOTA_NONE);
	assert_int_equal(ds_quota_credit(64, &unlimited, &t, DS_QUOTA_NONE), 64);
}

static void test_quota__ceiling_throttles_only_sources_over_their_share(void **state)
{
	/* A filled the ceiling alone (its own bound defaults to the ceiling). */
	ds_quota_total t = {.backlog = CEILING, .max_unapplied = CEILING, .sources = 2};
	ds_quota_usage a = usage(CEILING, 0, 0, 0), b = usage(0, 0, 0, 0);

	(void)state;
	assert_int_equal(ds_quota_state(&a, &t, DS_QUOTA_NONE), DS_QUOTA_BACKLOG);
	assert_int_equal(ds_quota_credit(64, &a, &t, DS_QUOTA_BACKLOG), 0);
	/* B holds nothing: it may still fill its share (500), 64 at a time. */
	assert_int_equal(ds_quota_state(&b, &t, DS_QUOTA_NONE), DS_QUOTA_NONE);
	assert_int_equal(ds_quota_credit(64, &b, &t, DS_QUOTA_NONE), 64);
	b.backlog = 480;
	assert_int_equal(ds_quota_credit(64, &b, &t, DS_QUOTA_NONE), 20);
	/* At its share with the ceiling full: throttled by the total. */
	b.backlog = 500;
	a.backlog = 600;
	t.backlog = 1100;
	assert_int_equal(ds_quota_state(&b, &t, DS_QUOTA_NONE), DS_QUOTA_TOTAL_BACKLOG);
	/* Under the ceiling the room is the ceiling's, larger than the share. */
	t.backlog = 100;
	b.backlog = 0;
	a = usage(100, 0, 0, 0);
	assert_int_equal(ds_quota_credit(2048, &a, &t, DS_QUOTA_NONE), 900);
}

struct events {
	char lines[16][600];
	int n;
};

static void on_event(void *ud, const ds_transport_event *ev)
{
	struct events *e = ud;

	if (e->n < 16)
		snprintf(e->lines[e->n++], sizeof(e->lines[0]), "%s %s", ev->name, ev->detail);
}

static void limits(void *ud, const char *source, ds_quota_limits *out)
{
	(void)ud;
	out->max_unapplied = strcmp(source, "noisy") == 0 ? 10 : 0;
	out->max_ledger_bytes = strcmp(source, "big") == 0 ? 1000 : 0;
}

static void test_quota__table_reports_each_transition_once(void **state)
{
	struct events ev = {0};
	ds_quota *q = NULL;

	(void)state;
	assert_int_equal(ds_quota_new(&q, CEILING, limits, NULL, on_event, &ev), 0);
	ds_quota_backlog_begin(q);
	/* Records and pending objects of a source: two parts that add up. */
	assert_int_equal(ds_quota_count_backlog(q, "noisy", 6), 0);
	assert_int_equal(ds_quota_count_backlog(q, "noisy", 4), 0);
	assert_int_equal(ds_quota_count_backlog(q, "quiet", 3), 0);
	ds_quota_bytes_begin(q);
	assert_int_equal(ds_quota_set_bytes(q, "big", 900), 0);
	ds_quota_judge(q, 3);
	assert_int_equal(ds_quota_total_backlog(q), 13);
	assert_int_equal(ev.n, 1);
	assert_string_equal(ev.lines[0], "source_throttled source=noisy quota=backlog value=10 "
					 "limit=10: no credit until it is under 8");
	assert_int_equal(ds_quota_credit_for(q, "noisy", 64), 0);
	assert_int_equal(ds_quota_credit_for(q, "quiet", 64), 64);
	/* A commit of "big" passes its bytes; judged again: one line, not one per record. */
	assert_int_equal(ds_quota_add(q, "big", 2, 200), 0);
	ds_quota_judge(q, 3);
	ds_quota_judge(q, 3);
	assert_int_equal(ev.n, 2);
	assert_string_equal(ev.lines[1], "source_throttled source=big quota=ledger_bytes "
					 "value=1100 limit=1000: no credit until it is under 750");
	/* The apply stage caught up with noisy; compaction freed big's bytes. */
	ds_quota_backlog_begin(q);
	assert_int_equal(ds_quota_count_backlog(q, "noisy", 7), 0);
	ds_quota_bytes_begin(q);
	assert_int_equal(ds_quota_set_bytes(q, "big", 100), 0);
	ds_quota_judge(q, 3);
	assert_int_equal(ev.n, 4);
	assert_non_null(strstr(ev.lines[2], "source_resumed source=noisy quota=backlog value=7 "));
	assert_non_null(
	    strstr(ev.lines[3], "source_resumed source=big quota=ledger_bytes value=100 "));
	assert_int_equal(ds_quota_credit_for(q, "noisy", 64), 3);
	ds_quota_free(q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_quota__credit_shrinks_near_own_bound_only),
	    cmocka_unit_test(test_quota__resumes_below_low_water),
	    cmocka_unit_test(test_quota__ledger_bytes_quota),
	    cmocka_unit_test(test_quota__ceiling_throttles_only_sources_over_their_share),
	    cmocka_unit_test(test_quota__table_reports_each_transition_once),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
