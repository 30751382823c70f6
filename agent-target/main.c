/* drasync-target: wires the subcommands together; the work is in common/ and cmd_*.c. */
#include "commands.h"

#include "drasync/cli.h"
#include "drasync/version.h"

static const struct ds_cli_command commands[] = {
    {"keygen", "write a CURVE key pair (--out DIR)", ds_cmd_keygen},
    {"run", "receive from the sources and apply to this cluster (--config FILE)", ds_cmd_run},
    {"retry", "apply failed objects again now, after fixing the cause (--config FILE)",
     ds_cmd_retry},
    {"failover", "activate the standby copy: namespaces active, workloads up (--config FILE)",
     ds_cmd_failover},
    {"failback", "return namespaces to standby: scaled down, suspended, held (--config FILE)",
     ds_cmd_failback},
    {"drill", "prove a failover into a scratch namespace, verified, standby untouched",
     ds_cmd_drill},
    {"plan", "show offline what the target would receive from manifests", ds_cmd_plan},
    {"status", "what the ledger holds: sources, lag, objects waiting or failed", ds_cmd_status},
    {"inventory", "every claim reference the sources sent, its rule, its target here",
     ds_cmd_inventory},
    {"verify", "check the workloads run (or are parked) on this cluster, and why not",
     ds_cmd_verify},
    {NULL, NULL, NULL},
};

static const struct ds_cli_program program = {
    .name = "drasync-target",
    .about = "The importer of drasync: accepts authenticated sources over CURVE ZeroMQ,\n"
	     "maps DRA references and creates the objects in this cluster.\n",
    .commands = commands,
    .width = 10,
};

int main(int argc, char **argv)
{
	return ds_cli_dispatch(&program, DS_VERSION, argc, argv);
}
