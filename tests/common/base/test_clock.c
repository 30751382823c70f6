/* The clock module: deadlines on the monotonic clock and the wait that honours them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/clock.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>

static void test_clock__wall_is_the_epoch(void **state)
{
	int64_t wall = ds_clock_wall_ms();
	int64_t secs = (int64_t)time(NULL);

	(void)state;
	/* Within a second of time(), which counts from the Unix epoch. */
	assert_true(wall / 1000 >= secs - 1 && wall / 1000 <= secs + 1);
}

static void test_clock__deadlines(void **state)
{
	int64_t d = ds_deadline_in(60000);

	(void)state;
	assert_false(ds_deadline_passed(d));
	assert_true(ds_deadline_left(d) > 59000 && ds_deadline_left(d) <= 60000);
	d = ds_deadline_in(-5);
	assert_true(ds_deadline_passed(d));
	assert_int_equal(ds_deadline_left(d), 0);
}

static void test_clock__wait_times_out_at_the_deadline(void **state)
{
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t cond;
	int64_t start = ds_clock_mono_ms(), deadline = start + 80;
	int rc;

	(void)state;
	assert_int_equal(ds_cond_init_monotonic(&cond), 0);
	pthread_mutex_lock(&mu);
	do
		rc = ds_cond_wait_until(&cond, &mu, deadline);
	while (rc == 0);
	pthread_mutex_unlock(&mu);
	assert_int_equal(rc, ETIMEDOUT);
	assert_true(ds_clock_mono_ms() >= deadline);
	/* A deadline already passed does not wait at all. */
	pthread_mutex_lock(&mu);
	assert_int_equal(ds_cond_wait_until(&cond, &mu, start), ETIMEDOUT);
	pthread_mutex_unlock(&mu);
	pthread_cond_destroy(&cond);
}

struct waker {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	int flag;
};

static void *wake(void *arg)
{
	struct waker *w = arg;
	struct timespec ts = {0, 20 * 1000000L};

	nanosleep(&ts, NULL);
	pthread_mutex_lock(&w->mu);
	w->flag = 1;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

static void test_clock__wait_is_woken_by_a_signal(void **state)
{
	struct waker w = {.mu = PTHREAD_MUTEX_INITIALIZER};
	int64_t deadline = ds_deadline_in(30000);
	pthread_t t;
	int rc = 0;

	(void)state;
	assert_int_equal(ds_cond_init_monotonic(&w.cond), 0);
	assert_int_equal(pthread_create(&t, NULL, wake, &w), 0);
	pthread_mutex_lock(&w.mu);
	while (!w.flag && rc == 0)
		rc = ds_cond_wait_until(&w.cond, &w.mu, deadline);
	pthread_mutex_unlock(&w.mu);
	pthread_join(t, NULL);
	assert_int_equal(rc, 0);
	assert_int_equal(w.flag, 1);
	assert_false(ds_deadline_passed(deadline));
	pthread_cond_destroy(&w.cond);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_clock__wall_is_the_epoch),
	    cmocka_unit_test(test_clock__deadlines),
	    cmocka_unit_test(test_clock__wait_times_out_at_the_deadline),
	    cmocka_unit_test(test_clock__wait_is_woken_by_a_signal),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
