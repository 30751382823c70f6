/* drasync-target: wires the subcommands together; the work is in common/ and cmd_*.c. */
#include "commands.h"

#include "drasync/version.h"

#include <stdio.h>
#include <string.h>

static const struct ds_command commands[] = {
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

static void usage(FILE *out)
{
	fprintf(out, "Usage: drasync-target COMMAND [OPTIONS]\n"
		     "\n"
		     "The importer of drasync: accepts authenticated sources over CURVE ZeroMQ,\n"
		     "maps DRA references and creates the objects in this cluster.\n"
		     "\n"
		     "Commands:\n");
	for (const struct ds_command *c = commands; c->name; c++)
		fprintf(out, "  %-10s %s\n", c->name, c->summary);
	fprintf(out, "\n"
		     "Options:\n"
		     "  -h, --help     show this help (COMMAND --help for a command's options)\n"
		     "  -V, --version  print the version\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "-V") == 0 || strcmp(argv[1], "--version") == 0) {
		printf("drasync-target %s\n", DS_VERSION);
		return 0;
	}
	for (const struct ds_command *c = commands; c->name; c++)
		if (strcmp(argv[1], c->name) == 0)
			return c->run(argc - 1, argv + 1);
	fprintf(stderr, "drasync-target: unknown command '%s' (try --help)\n", argv[1]);
	return 2;
}
