#ifndef DRASYNC_SOURCE_COMMANDS_H
#define DRASYNC_SOURCE_COMMANDS_H

#include "drasync/cli.h"
#include "drasync/kube_client.h"
#include "drasync/source_config.h"

/* Each subcommand of drasync-source: argv[0] is the subcommand name. Returns the exit code. */

int ds_cmd_run(int argc, char **argv);
int ds_cmd_status(int argc, char **argv);
int ds_cmd_keygen(int argc, char **argv);
int ds_cmd_relocate(int argc, char **argv);
int ds_cmd_park(int argc, char **argv);

/**
 * The source cluster's client for `drasync-source run`: --kubeconfig and
 * --context (NULL: not given), else the file's kubeconfig, else in-cluster.
 * Says on stderr what went wrong and what to pass.
 * @return 0, 2 no credentials to be found, 1 the client cannot start
 */
int ds_source_connect(const char *kubeconfig, const char *context, const ds_source_config *cfg,
		      ds_kube **out);

/**
 * What a command about one namespace (`park`, `relocate`) needs first: exactly
 * one --namespace, and the source's file loaded into *cfg. Says on stderr what
 * is wrong. @return 0, or 2 (the exit code)
 */
int ds_source_one_namespace(const char *cmd, const struct ds_cli_args *a, ds_source_config **cfg);

#endif
