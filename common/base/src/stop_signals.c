/* SIGTERM, SIGINT and SIGHUP received by a thread of their own. */
#include "drasync/stop_signals.h"

#include "drasync/log.h"

#include <errno.h>
#include <signal.h>

/* SIGUSR1 is how ds_stop_signals_end() wakes the thread. */
static void stop_set(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGHUP);
	sigaddset(set, SIGUSR1);
}

void ds_stop_signals_block(void)
{
	sigset_t set;

	stop_set(&set);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
}

static void *signal_main(void *arg)
{
	ds_stop_signals *s = arg;
	sigset_t set;
	int sig = 0;

	stop_set(&set);
	while (sigwait(&set, &sig) == 0) {
		if (sig == SIGUSR1)
			break;
		if (sig == SIGHUP) {
			if (s->on_reload) {
				ds_log(DS_LOG_INFO, "reloading", "signal=SIGHUP");
				s->on_reload(s->ud);
			} else {
				ds_log(
				    DS_LOG_INFO, "signal_ignored",
				    "signal=SIGHUP detail=\"nothing to reload: the configuration "
				    "is read at start; restart to change it\"");
			}
			continue;
		}
		ds_log(DS_LOG_INFO, "stopping", "signal=%s", sig == SIGTERM ? "SIGTERM" : "SIGINT");
		s->on_stop(s->ud, sig);
	}
	return NULL;
}

int ds_stop_signals_start(ds_stop_signals *s, void (*on_stop)(void *ud, int sig),
			  void (*on_reload)(void *ud), void *ud)
{
	int rc;

	s->on_stop = on_stop;
	s->on_reload = on_reload;
	s->ud = ud;
	rc = pthread_create(&s->thread, NULL, signal_main, s);
	s->started = rc == 0;
	return -rc;
}

void ds_stop_signals_end(ds_stop_signals *s)
{
	if (!s || !s->started)
		return;
	pthread_kill(s->thread, SIGUSR1);
	pthread_join(s->thread, NULL);
	s->started = false;
}
