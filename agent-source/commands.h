#ifndef DRASYNC_SOURCE_COMMANDS_H
#define DRASYNC_SOURCE_COMMANDS_H

/* Each subcommand of drasync-source: argv[0] is the subcommand name. Returns the exit code. */

int ds_cmd_run(int argc, char **argv);
int ds_cmd_status(int argc, char **argv);
int ds_cmd_keygen(int argc, char **argv);

#endif
