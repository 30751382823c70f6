#ifndef DRASYNC_TARGET_COMMANDS_H
#define DRASYNC_TARGET_COMMANDS_H

/* Each subcommand of drasync-target: argv[0] is the subcommand name. Returns the exit code. */

struct ds_command {
	const char *name;
	const char *summary;
	int (*run)(int argc, char **argv);
};

int ds_cmd_failback(int argc, char **argv);
int ds_cmd_failover(int argc, char **argv);
int ds_cmd_inventory(int argc, char **argv);
int ds_cmd_keygen(int argc, char **argv);
int ds_cmd_plan(int argc, char **argv);
int ds_cmd_retry(int argc, char **argv);
int ds_cmd_run(int argc, char **argv);
int ds_cmd_status(int argc, char **argv);
int ds_cmd_verify(int argc, char **argv);

#endif
