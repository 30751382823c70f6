/*
 * The ledger checked before a command uses it (run, failover, failback,
 * drill): a damaged file is named, with what to do about it, instead of
 * failing later at some statement; a lost one (new while the cluster knew
 * another, ledger_identity.h) is refused.
 */
#include "commands.h"

#include "drasync/clock.h"
#include "drasync/ledger_identity.h"
#include "drasync/log.h"
#include "drasync/store.h"
#include "drasync/target_agent.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>

int ds_target_check_ledger(const char *cmd, const char *ledger)
{
	ds_err err = {0};
	int rc = ds_store_check(ledger, &err);

	if (rc == 0)
		return 0;
	fprintf(stderr, "drasync-target %s: %s\n", cmd, err.msg);
	if (rc == -EBADMSG)
		fprintf(stderr,
			"  (the ledger cannot be used: stop drasync-target, move %s and its -wal "
			"and -shm files aside, e.g. to %s.damaged, and start again with "
			"--new-ledger: with an empty ledger every source sends a full snapshot and "
			"the target is rebuilt from it, the namespace modes read back from the "
			"Namespaces)\n",
			ledger, ledger);
	else if (rc == -ENOSPC)
		fprintf(stderr, "  (free space on the filesystem that holds %s and start again)\n",
			ledger);
	return 1;
}

/* Wait up to ms for SIGTERM/SIGINT (blocked by ds_stop_signals_block()). @return true: one came */
static bool stop_signalled(int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	return sigtimedwait(&set, NULL, &ts) > 0;
}

int ds_target_check_identity(const char *cmd, ds_kube *kube, const ds_target_config *cfg,
			     const char *ledger, bool new_ledger, bool wait)
{
	ds_identity_check c = {.cmd = cmd, .ledger_path = ledger, .new_ledger = new_ledger};
	int64_t said = ds_clock_mono_ms() - 30000; /* the first wait is said at once */
	int rc, pause = 1000;

	while ((rc = ds_ledger_identity_check(kube, cfg, &c)) < 0) {
		if (!wait) {
			fprintf(stderr,
				"%s\n  (the ledger's identity is checked against the target "
				"cluster before the ledger is written: try again when its "
				"API server answers)\n",
				c.msg);
			return 1;
		}
		/* A new ledger waits for the API server: only it can tell a lost one. */
		if (ds_clock_mono_ms() - said >= 30000) {
			ds_target_log_identity(&c, rc);
			said = ds_clock_mono_ms();
		}
		if (stop_signalled(pause)) {
			ds_log(DS_LOG_INFO, "stopped",
			       "exit=0 detail=\"before the ledger was checked\"");
			return -1;
		}
		if (pause < 8000)
			pause *= 2;
	}
	ds_target_log_identity(&c, rc);
	if (rc == 1) {
		fprintf(stderr, "%s\n", c.msg);
		return 1;
	}
	return 0;
}

int ds_target_run_identity(ds_kube *kube, const ds_target_config *cfg, const char *ledger,
			   bool new_ledger, bool *deferred)
{
	ds_ledger_identity id;

	/* A ledger with an identity opens the link at once (the apply stage checks
	 * it); a new one waits for the API server to tell whether one was lost. */
	if (!new_ledger && ds_ledger_identity_read(ledger, &id, NULL) == 1) {
		*deferred = true;
		return 0;
	}
	return ds_target_check_identity("run", kube, cfg, ledger, new_ledger, true);
}
