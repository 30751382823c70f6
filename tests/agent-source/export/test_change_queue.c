/* The watch's debounce: coalescing per object, due times, dropping. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/change_queue.h"

#include <stdio.h>
#include <string.h>

static json_t *version(int v)
{
	return json_pack("{s:{s:s},s:i}", "metadata", "name", "x", "v", v);
}

static void put(ds_change_queue *q, const char *key, int tag, bool deleted, int v, long long now)
{
	json_t *o = version(v);

	assert_int_equal(ds_change_queue_put(q, key, tag, deleted, o, now), 0);
	json_decref(o);
}

static void test_change_queue__a_burst_leaves_one_entry_with_the_latest_state(void **state)
{
	ds_change_queue *q;
	ds_change c;

	(void)state;
	assert_int_equal(ds_change_queue_new(&q, 200, -1), 0);
	for (int i = 0; i < 100; i++)
		put(q, "/ConfigMap/a/x", 3, false, i, 1000 + i);
	assert_int_equal(ds_change_queue_len(q), 1);
	/* due at the first change plus the window, not pushed back by the others */
	assert_int_equal(ds_change_queue_take(q, 1199, &c), 0);
	assert_int_equal(ds_change_queue_take(q, 1200, &c), 1);
	assert_string_equal(c.key, "/ConfigMap/a/x");
	assert_int_equal(c.tag, 3);
	assert_false(c.deleted);
	assert_int_equal(json_integer_value(json_object_get(c.obj, "v")), 99);
	ds_change_dispose(&c);
	assert_int_equal(ds_change_queue_take(q, 5000, &c), 0);
	/* a change after the take opens a new window */
	put(q, "/ConfigMap/a/x", 3, false, 100, 1300);
	assert_int_equal(ds_change_queue_take(q, 1499, &c), 0);
	assert_int_equal(ds_change_queue_take(q, 1500, &c), 1);
	ds_change_dispose(&c);
	ds_change_queue_free(q);
}

static void test_change_queue__entries_come_out_in_order_and_deletion_wins(void **state)
{
	ds_change_queue *q;
	char key[64];
	ds_change c;

	(void)state;
	assert_int_equal(ds_change_queue_new(&q, 10, 10), 0);
	/* enough keys to make the table grow */
	for (int i = 0; i < 5000; i++) {
		snprintf(key, sizeof(key), "/ConfigMap/a/k%d", i);
		put(q, key, 0, false, i, i);
	}
	put(q, "/ConfigMap/a/k7", 0, true, -1, 6000);
	assert_int_equal(ds_change_queue_len(q), 5000);
	for (int i = 0; i < 5000; i++) {
		snprintf(key, sizeof(key), "/ConfigMap/a/k%d", i);
		assert_int_equal(ds_change_queue_take(q, 100000, &c), 1);
		assert_string_equal(c.key, key);
		assert_int_equal(c.deleted, i == 7);
		ds_change_dispose(&c);
	}
	assert_int_equal(ds_change_queue_len(q), 0);
	ds_change_queue_free(q);
}

static bool in_ns_b(void *ud, const char *key, int tag, const json_t *obj)
{
	(void)ud;
	(void)tag;
	(void)obj;
	return strncmp(key, "/ConfigMap/b/", 13) == 0;
}

static void test_change_queue__drop_removes_matching_entries(void **state)
{
	ds_change_queue *q;
	ds_change c;

	(void)state;
	assert_int_equal(ds_change_queue_new(&q, 0, 0), 0);
	put(q, "/ConfigMap/a/1", 0, false, 1, 0);
	put(q, "/ConfigMap/b/2", 0, false, 2, 0);
	put(q, "/ConfigMap/b/3", 0, false, 3, 0);
	put(q, "/ConfigMap/a/4", 0, false, 4, 0);
	assert_int_equal(ds_change_queue_drop(q, in_ns_b, NULL), 2);
	assert_int_equal(ds_change_queue_take(q, 0, &c), 1);
	assert_string_equal(c.key, "/ConfigMap/a/1");
	ds_change_dispose(&c);
	/* the dropped key is gone from the table too: a new put queues it again */
	put(q, "/ConfigMap/b/2", 0, false, 5, 0);
	assert_int_equal(ds_change_queue_take(q, 0, &c), 1);
	assert_string_equal(c.key, "/ConfigMap/a/4");
	ds_change_dispose(&c);
	assert_int_equal(ds_change_queue_take(q, 0, &c), 1);
	assert_string_equal(c.key, "/ConfigMap/b/2");
	ds_change_dispose(&c);
	ds_change_queue_free(q);
}

static void test_change_queue__a_lone_change_goes_once_quiet_a_burst_at_the_window(void **state)
{
	ds_change_queue *q;
	ds_change c;

	(void)state;
	assert_int_equal(ds_change_queue_new(&q, 200, 50), 0);
	/* a lone change: due once quiet for 50 ms, not after the whole window */
	put(q, "/ConfigMap/a/lone", 0, false, 1, 1000);
	assert_int_equal(ds_change_queue_take(q, 1049, &c), 0);
	assert_int_equal(ds_change_queue_take(q, 1050, &c), 1);
	assert_string_equal(c.key, "/ConfigMap/a/lone");
	ds_change_dispose(&c);

	/* changes 20 ms apart keep it waiting, one entry with the latest state,
	 * until the window closes 200 ms after the first */
	for (int i = 0; i < 20; i++)
		put(q, "/ConfigMap/a/busy", 0, false, i, 2000 + 20 * i);
	assert_int_equal(ds_change_queue_len(q), 1);
	assert_int_equal(ds_change_queue_take(q, 2199, &c), 0);
	assert_int_equal(ds_change_queue_take(q, 2200, &c), 1);
	assert_int_equal(json_integer_value(json_object_get(c.obj, "v")), 19);
	ds_change_dispose(&c);

	/* a short burst: due 50 ms after its last change */
	put(q, "/ConfigMap/a/short", 0, false, 1, 3000);
	put(q, "/ConfigMap/a/short", 0, false, 2, 3030);
	assert_int_equal(ds_change_queue_take(q, 3079, &c), 0);
	assert_int_equal(ds_change_queue_take(q, 3080, &c), 1);
	assert_int_equal(json_integer_value(json_object_get(c.obj, "v")), 2);
	ds_change_dispose(&c);
	ds_change_queue_free(q);
}

static void test_change_queue__an_entry_held_by_a_change_goes_after_those_due_before(void **state)
{
	ds_change_queue *q;
	ds_change c;

	(void)state;
	assert_int_equal(ds_change_queue_new(&q, 200, 50), 0);
	put(q, "/ConfigMap/a/1", 0, false, 1, 0);
	put(q, "/ConfigMap/a/2", 0, false, 2, 10);
	put(q, "/ConfigMap/a/3", 0, false, 3, 20);
	put(q, "/ConfigMap/a/1", 0, false, 4, 40); /* due at 90 now */
	/* 2 (due 60) and 3 (due 70) first, then 1 */
	assert_int_equal(ds_change_queue_take(q, 59, &c), 0);
	assert_int_equal(ds_change_queue_take(q, 100, &c), 1);
	assert_string_equal(c.key, "/ConfigMap/a/2");
	ds_change_dispose(&c);
	assert_int_equal(ds_change_queue_take(q, 100, &c), 1);
	assert_string_equal(c.key, "/ConfigMap/a/3");
	ds_change_dispose(&c);
	assert_int_equal(ds_change_queue_take(q, 89, &c), 0);
	assert_int_equal(ds_change_queue_take(q, 90, &c), 1);
	assert_string_equal(c.key, "/ConfigMap/a/1");
	assert_int_equal(json_integer_value(json_object_get(c.obj, "v")), 4);
	ds_change_dispose(&c);
	assert_int_equal(ds_change_queue_len(q), 0);
	ds_change_queue_free(q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_change_queue__a_burst_leaves_one_entry_with_the_latest_state),
	    cmocka_unit_test(test_change_queue__entries_come_out_in_order_and_deletion_wins),
	    cmocka_unit_test(test_change_queue__drop_removes_matching_entries),
	    cmocka_unit_test(
		test_change_queue__a_lone_change_goes_once_quiet_a_burst_at_the_window),
	    cmocka_unit_test(
		test_change_queue__an_entry_held_by_a_change_goes_after_those_due_before),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
