#include "drasync/clock.h"

#include <errno.h>
#include <time.h>

static int64_t ms_of(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t ds_clock_mono_ms(void)
{
	return ms_of(CLOCK_MONOTONIC);
}

int64_t ds_clock_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t ds_clock_wall_ms(void)
{
	return ms_of(CLOCK_REALTIME);
}

double ds_clock_mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int64_t ds_deadline_in(int64_t ms)
{
	return ds_clock_mono_ms() + (ms > 0 ? ms : 0);
}

int64_t ds_deadline_left(int64_t deadline)
{
	int64_t left = deadline - ds_clock_mono_ms();

	return left > 0 ? left : 0;
}

bool ds_deadline_passed(int64_t deadline)
{
	return ds_clock_mono_ms() >= deadline;
}

int ds_cond_init_monotonic(pthread_cond_t *cond)
{
	pthread_condattr_t attr;
	int rc = pthread_condattr_init(&attr);

	if (rc)
		return rc;
	rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	if (rc == 0)
		rc = pthread_cond_init(cond, &attr);
	pthread_condattr_destroy(&attr);
	return rc;
}

int ds_cond_wait_until(pthread_cond_t *cond, pthread_mutex_t *mu, int64_t deadline)
{
	struct timespec ts;

	if (ds_deadline_passed(deadline))
		return ETIMEDOUT;
	ts.tv_sec = (time_t)(deadline / 1000);
	ts.tv_nsec = (long)(deadline % 1000) * 1000000L;
	return pthread_cond_timedwait(cond, mu, &ts) == ETIMEDOUT ? ETIMEDOUT : 0;
}
