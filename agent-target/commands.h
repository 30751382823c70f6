#ifndef DRASYNC_TARGET_COMMANDS_H
#define DRASYNC_TARGET_COMMANDS_H

/* Each subcommand of drasync-target: argv[0] is the subcommand name. Returns the exit code. */

#include "drasync/kube_client.h"
#include "drasync/target_config.h"

#include <stdbool.h>

int ds_cmd_drill(int argc, char **argv);
int ds_cmd_failback(int argc, char **argv);
int ds_cmd_failover(int argc, char **argv);
int ds_cmd_inventory(int argc, char **argv);
int ds_cmd_keygen(int argc, char **argv);
int ds_cmd_plan(int argc, char **argv);
int ds_cmd_retry(int argc, char **argv);
int ds_cmd_run(int argc, char **argv);
int ds_cmd_status(int argc, char **argv);
int ds_cmd_verify(int argc, char **argv);

/**
 * The target cluster's client for `drasync-target cmd`: --kubeconfig and
 * --context (NULL: not given), else the file's kubeconfig, else in-cluster;
 * topts NULL: the client's defaults. Says on stderr what went wrong and what
 * to pass. @return 0, 2 no credentials to be found, 1 the client cannot start
 */
int ds_target_connect(const char *cmd, const char *kubeconfig, const char *context,
		      const ds_target_config *cfg, const struct ds_kube_transport_opts *topts,
		      ds_kube **out);

/**
 * Check the ledger file (when there is one) before `cmd` uses it: a damaged
 * or unreadable file is said on stderr with what to do.
 * @return 0 sound or none yet, 1 it cannot be used (the command's exit code)
 */
int ds_target_check_ledger(const char *cmd, const char *ledger);

/**
 * Check the ledger's identity against the target cluster's before `cmd`
 * writes the ledger (ledger_identity.h): a lost ledger, or another one, is
 * refused on stderr with what to do; new_ledger (--new-ledger) accepts a new
 * one. wait: retry until the API server answers (SIGTERM/SIGINT, blocked by
 * then, end the wait); else its silence is an error.
 * @return 0 go on, 1 refused or failed (the exit code), -1 stopped by a signal
 */
int ds_target_check_identity(const char *cmd, ds_kube *kube, const ds_target_config *cfg,
			     const char *ledger, bool new_ledger, bool wait);

/**
 * `run`'s check: a ledger with an identity is checked by the apply stage
 * (*deferred set, ds_target_agent_config.check_identity); a new one here, waiting
 * for the API server. @return as ds_target_check_identity()
 */
int ds_target_run_identity(ds_kube *kube, const ds_target_config *cfg, const char *ledger,
			   bool new_ledger, bool *deferred);

#endif
