/* drasync-source: wires the subcommands together; the work is in common/ and cmd_*.c. */
#include "commands.h"

#include "drasync/cli.h"
#include "drasync/version.h"

static const struct ds_cli_command commands[] = {
    {"run", "replicate the selected namespaces to the target (--config FILE)", ds_cmd_run},
    {"status", "what was pushed, acknowledged and failed (--config FILE [-o json])", ds_cmd_status},
    {"relocate", "move a namespace to the target on purpose (--config FILE --namespace NS)",
     ds_cmd_relocate},
    {"park", "stop a namespace here after a failover elsewhere (--config FILE --namespace NS)",
     ds_cmd_park},
    {"keygen", "write a CURVE key pair (--out DIR)", ds_cmd_keygen},
    {NULL, NULL, NULL},
};

static const struct ds_cli_program program = {
    .name = "drasync-source",
    .about = "The exporter of drasync: lists and watches the selected namespaces and pushes\n"
	     "workloads and DRA objects over CURVE ZeroMQ to a drasync-target.\n",
    .example = "Example:\n"
	       "  drasync-source keygen --out /etc/drasync/keys\n"
	       "  drasync-source run --config /etc/drasync/source.yaml\n",
    .commands = commands,
};

int main(int argc, char **argv)
{
	return ds_cli_dispatch(&program, DS_VERSION, argc, argv);
}
