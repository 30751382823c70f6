#ifndef DRASYNC_CLOCK_H
#define DRASYNC_CLOCK_H

/*
 * The one clock module (systemd's now(clockid_t)). Two clocks, each in
 * milliseconds:
 *   - monotonic: every interval, timeout, deadline and backoff; it never
 *     jumps when an operator or NTP sets the wall clock;
 *   - wall: what is stored or shown (a ledger's committed_at, a log line's
 *     time, a report's date), never what a wait is measured against.
 * A deadline is a point on the monotonic clock; a condition variable that a
 * deadline wakes is made with ds_cond_init_monotonic() and waited on with
 * ds_cond_wait_until().
 */

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/** Milliseconds on CLOCK_MONOTONIC (an arbitrary origin: compare, never store). */
int64_t ds_clock_mono_ms(void);

/** Nanoseconds on CLOCK_MONOTONIC (rate arithmetic: the link's bandwidth cap). */
int64_t ds_clock_mono_ns(void);

/** Milliseconds since the Unix epoch on CLOCK_REALTIME (store and show, never wait on). */
int64_t ds_clock_wall_ms(void);

/** Seconds on CLOCK_MONOTONIC with a fraction (benchmark and progress figures). */
double ds_clock_mono_s(void);

/** A deadline ms milliseconds from now on the monotonic clock (ms < 0 counts as 0). */
int64_t ds_deadline_in(int64_t ms);

/** Milliseconds left until deadline, 0 once it has passed. */
int64_t ds_deadline_left(int64_t deadline);

/** Whether the monotonic deadline has passed. */
bool ds_deadline_passed(int64_t deadline);

/** pthread_cond_init() of a condition variable that waits on the monotonic clock. @return 0 or a
 * positive errno as pthread does */
int ds_cond_init_monotonic(pthread_cond_t *cond);

/**
 * Wait on cond (made by ds_cond_init_monotonic()) with mu held until it is
 * signalled or the monotonic deadline passes.
 * @return 0 when woken (perhaps spuriously: recheck the predicate), ETIMEDOUT
 *         when the deadline passed
 */
int ds_cond_wait_until(pthread_cond_t *cond, pthread_mutex_t *mu, int64_t deadline);

#endif
