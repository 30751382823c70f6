#ifndef DRASYNC_STOP_SIGNALS_H
#define DRASYNC_STOP_SIGNALS_H

/*
 * SIGTERM and SIGINT (and SIGHUP) for an agent's `run`: blocked in every
 * thread and received by one thread of their own (sigwait), which logs the
 * signal and calls on_stop, or on_reload for SIGHUP (a run without one logs
 * that it has nothing to reload). ds_stop_signals_block() must run before any
 * other thread is started, so that every thread inherits the mask.
 */

#include <pthread.h>
#include <stdbool.h>

typedef struct ds_stop_signals {
	void (*on_stop)(void *ud, int sig); /* from the signal thread, once per signal */
	void (*on_reload)(void *ud);	    /* SIGHUP; may be NULL */
	void *ud;
	pthread_t thread;
	bool started;
} ds_stop_signals;

/** Block SIGTERM, SIGINT, SIGHUP (and the thread's own wake-up) in the calling thread. */
void ds_stop_signals_block(void);

/** Start the signal thread; on_reload may be NULL. @return 0 or a negative errno */
int ds_stop_signals_start(ds_stop_signals *s, void (*on_stop)(void *ud, int sig),
			  void (*on_reload)(void *ud), void *ud);

/** End the signal thread (NULL-safe, and safe when it never started). */
void ds_stop_signals_end(ds_stop_signals *s);

#endif
