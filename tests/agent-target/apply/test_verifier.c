/*
 * The running importer's verifier, its bookkeeping apart from a cluster: a
 * client whose API server does not answer (a closed loopback port) makes
 * every check "cannot read", so what is tested is when workloads are
 * checked, settled, started again and shed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/verifier.h"
#include "testutil.h"
#include "tu_kube.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct seen {
	pthread_mutex_t mu;
	int n;
	char last[DS_VERIFY_REASON_MAX];
	char last_name[100];
	double seconds;
};

static void on_result(void *ud, const ds_verify_item *it)
{
	struct seen *s = ud;

	pthread_mutex_lock(&s->mu);
	s->n++;
	snprintf(s->last, sizeof(s->last), "%s", it->reason);
	snprintf(s->last_name, sizeof(s->last_name), "%s", it->name);
	s->seconds = it->seconds;
	pthread_mutex_unlock(&s->mu);
}

/* A client of a server that refuses connections, its kubeconfig in a new *dir. */
static ds_kube *dead_kube(char **dir)
{
	*dir = tu_mkdtemp("verifier");
	return tu_kube_refusing(*dir);
}

static ds_verifier *verifier(ds_kube *k, struct seen *s, size_t max_pending)
{
	ds_verifier_config c = {.kube = k,
				.timeout_ms = 400,
				.interval_ms = 100,
				.on_result = on_result,
				.result_ud = s,
				.max_pending = max_pending};
	ds_verifier *v = NULL;
	ds_err err = {0};

	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->mu, NULL);
	assert_int_equal(ds_verifier_new(&v, &c, &err), 0);
	return v;
}

static void test_verifier__checked_after_an_interval_and_settled_at_the_deadline(void **state)
{
	char *dir;
	ds_kube *k = dead_kube(&dir);
	struct seen s;
	ds_verifier *v = verifier(k, &s, 0);
	ds_err err = {0};
	long long t0 = tu_now_ms();
	int settled = 0;

	(void)state;
	assert_int_equal(ds_verifier_add(v, "ConfigMap", "ml-dr", "x"), -EINVAL);
	assert_int_equal(ds_verifier_add(v, "Deployment", "ml-dr", "web"), 0);
	assert_int_equal(ds_verifier_pending(v), 1);
	/* not due before one interval */
	assert_int_equal(ds_verifier_step(v, &err), 0);
	assert_int_equal(s.n, 0);
	while (tu_now_ms() - t0 < 3000 && settled == 0) {
		tu_msleep(50);
		settled = ds_verifier_step(v, &err);
		assert_true(settled >= 0);
		/* checked, not verified, and kept until the deadline */
		if (!settled)
			assert_true(tu_now_ms() - t0 < 400 + 200);
	}
	assert_int_equal(settled, 1);
	assert_int_equal(s.n, 1);
	assert_true(tu_now_ms() - t0 >= 400);
	assert_true(s.seconds >= 0.4);
	assert_string_equal(s.last_name, "web");
	assert_non_null(strstr(s.last, "cannot read Deployment web"));
	assert_int_equal(ds_verifier_pending(v), 0);
	ds_verifier_free(v);
	ds_kube_free(k);
	free(dir);
}

static void test_verifier__added_again_starts_its_deadline_again(void **state)
{
	char *dir;
	ds_kube *k = dead_kube(&dir);
	struct seen s;
	ds_verifier *v = verifier(k, &s, 0);
	ds_err err = {0};
	long long t0 = tu_now_ms(), t1;

	(void)state;
	assert_int_equal(ds_verifier_add(v, "StatefulSet", "ml-dr", "db"), 0);
	tu_msleep(300);
	assert_int_equal(ds_verifier_step(v, &err), 0);
	t1 = tu_now_ms();
	assert_int_equal(ds_verifier_add(v, "StatefulSet", "ml-dr", "db"), 0);
	assert_int_equal(ds_verifier_pending(v), 1);
	while (s.n == 0 && tu_now_ms() - t0 < 3000) {
		tu_msleep(50);
		assert_true(ds_verifier_step(v, &err) >= 0);
	}
	assert_int_equal(s.n, 1);
	/* the deadline of the second add, not the first */
	assert_true(tu_now_ms() - t1 >= 400);
	ds_verifier_free(v);
	ds_kube_free(k);
	free(dir);
}

static void test_verifier__beyond_max_pending_the_oldest_settle_unchecked(void **state)
{
	char *dir;
	ds_kube *k = dead_kube(&dir);
	struct seen s;
	ds_verifier *v = verifier(k, &s, 2);
	ds_err err = {0};

	(void)state;
	assert_int_equal(ds_verifier_add(v, "Deployment", "a", "first"), 0);
	tu_msleep(5);
	assert_int_equal(ds_verifier_add(v, "Deployment", "a", "second"), 0);
	assert_int_equal(ds_verifier_add(v, "Deployment", "a", "third"), 0);
	assert_int_equal(ds_verifier_step(v, &err), 1);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.last_name, "first");
	assert_string_equal(s.last, "not checked: more than 2 workloads wait to be verified");
	assert_int_equal(ds_verifier_pending(v), 2);
	ds_verifier_free(v);
	ds_kube_free(k);
	free(dir);
}

static void *run_main(void *arg)
{
	ds_err err = {0};

	return (void *)(intptr_t)ds_verifier_run(arg, &err);
}

static void test_verifier__run_thread_settles_and_stops(void **state)
{
	char *dir;
	ds_kube *k = dead_kube(&dir);
	struct seen s;
	ds_verifier *v = verifier(k, &s, 0);
	pthread_t t;
	void *rc;
	long long t0 = tu_now_ms();
	int n = 0;

	(void)state;
	assert_int_equal(pthread_create(&t, NULL, run_main, v), 0);
	assert_int_equal(ds_verifier_add(v, "Pod", "ml-dr", "p"), 0);
	while (n == 0 && tu_now_ms() - t0 < 5000) {
		tu_msleep(50);
		pthread_mutex_lock(&s.mu);
		n = s.n;
		pthread_mutex_unlock(&s.mu);
	}
	assert_int_equal(n, 1);
	ds_verifier_stop(v);
	pthread_join(t, &rc);
	assert_int_equal((intptr_t)rc, 0);
	ds_verifier_free(v);
	ds_kube_free(k);
	free(dir);
}

/*
 * Backoff and the rate cap: one workload not verifying is checked after
 * 100 ms, then 200, 400, 800 ms later and at its deadline (2 s): 5 checks,
 * not 20; fifty waiting at 10 checks a second get about ten checks a second
 * between them, not fifty.
 */
static void test_verifier__checks_back_off_and_are_capped_per_second(void **state)
{
	char *dir;
	ds_kube *k = dead_kube(&dir);
	struct seen s;
	ds_verifier_config c = {.kube = k,
				.timeout_ms = 2000,
				.interval_ms = 100,
				.checks_per_s = 10,
				.on_result = on_result,
				.result_ud = &s};
	ds_verifier *v = NULL;
	ds_err err = {0};
	long long t0;
	char name[32];

	(void)state;
	memset(&s, 0, sizeof(s));
	pthread_mutex_init(&s.mu, NULL);
	assert_int_equal(ds_verifier_new(&v, &c, &err), 0);
	assert_int_equal(ds_verifier_add(v, "Deployment", "ml-dr", "web"), 0);
	t0 = tu_now_ms();
	while (s.n == 0 && tu_now_ms() - t0 < 5000) {
		assert_true(ds_verifier_step(v, &err) >= 0);
		tu_msleep(10);
	}
	assert_int_equal(s.n, 1);
	print_message("one workload: %llu checks until its deadline\n", ds_verifier_checks(v));
	assert_true(ds_verifier_checks(v) >= 4 && ds_verifier_checks(v) <= 6);

	for (int i = 0; i < 50; i++) {
		snprintf(name, sizeof(name), "w%d", i);
		assert_int_equal(ds_verifier_add(v, "Deployment", "ml-dr", name), 0);
	}
	{
		unsigned long long before = ds_verifier_checks(v);
		t0 = tu_now_ms();
		while (tu_now_ms() - t0 < 1500) {
			assert_true(ds_verifier_step(v, &err) >= 0);
			tu_msleep(5);
		}
		/* due from 100 ms on: 1.4 s at 10 a second */
		print_message("fifty workloads: %llu checks in 1.5 s\n",
			      ds_verifier_checks(v) - before);
		assert_true(ds_verifier_checks(v) - before <= 16);
		assert_true(ds_verifier_checks(v) - before >= 10);
	}
	ds_verifier_free(v);
	ds_kube_free(k);
	free(dir);
}

static bool held(void *ud)
{
	return *(bool *)ud;
}

/* While hold() is true nothing is checked, not even past a deadline; then all that is due. */
static void test_verifier__held_checks_nothing_then_catches_up(void **state)
{
	char *dir;
	ds_kube *k = dead_kube(&dir);
	struct seen s;
	bool busy = true;
	ds_verifier_config c = {.kube = k,
				.timeout_ms = 300,
				.interval_ms = 50,
				.hold = held,
				.hold_ud = &busy,
				.on_result = on_result,
				.result_ud = &s};
	ds_verifier *v = NULL;
	ds_err err = {0};
	long long t0 = tu_now_ms();

	(void)state;
	memset(&s, 0, sizeof(s));
	pthread_mutex_init(&s.mu, NULL);
	assert_int_equal(ds_verifier_new(&v, &c, &err), 0);
	assert_int_equal(ds_verifier_add(v, "Deployment", "ml-dr", "web"), 0);
	assert_int_equal(ds_verifier_add(v, "StatefulSet", "ml-dr", "db"), 0);
	while (tu_now_ms() - t0 < 600) {
		assert_int_equal(ds_verifier_step(v, &err), 0);
		tu_msleep(20);
	}
	assert_int_equal(ds_verifier_checks(v), 0);
	assert_int_equal(s.n, 0);
	assert_int_equal(ds_verifier_pending(v), 2);
	busy = false;
	t0 = tu_now_ms();
	while (s.n < 2 && tu_now_ms() - t0 < 3000) {
		assert_true(ds_verifier_step(v, &err) >= 0);
		tu_msleep(20);
	}
	/* both past their deadline: one last check each, then settled */
	assert_int_equal(s.n, 2);
	assert_int_equal(ds_verifier_checks(v), 2);
	assert_true(s.seconds >= 0.6);
	ds_verifier_free(v);
	ds_kube_free(k);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_verifier__checked_after_an_interval_and_settled_at_the_deadline),
	    cmocka_unit_test(test_verifier__checks_back_off_and_are_capped_per_second),
	    cmocka_unit_test(test_verifier__added_again_starts_its_deadline_again),
	    cmocka_unit_test(test_verifier__beyond_max_pending_the_oldest_settle_unchecked),
	    cmocka_unit_test(test_verifier__run_thread_settles_and_stops),
	    cmocka_unit_test(test_verifier__held_checks_nothing_then_catches_up),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
