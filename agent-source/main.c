/* drasync-source: wires the subcommands together; the work is in common/ and cmd_*.c. */
#include "commands.h"

#include "drasync/version.h"

#include <stdio.h>
#include <string.h>

static const struct ds_command commands[] = {
    {"run", "replicate the selected namespaces to the target (--config FILE)", ds_cmd_run},
    {"status", "what was pushed, acknowledged and failed (--config FILE [-o json])", ds_cmd_status},
    {"keygen", "write a CURVE key pair (--out DIR)", ds_cmd_keygen},
    {NULL, NULL, NULL},
};

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: drasync-source COMMAND [OPTIONS]\n"
		"\n"
		"The exporter of drasync: lists and watches the selected namespaces and pushes\n"
		"workloads and DRA objects over CURVE ZeroMQ to a drasync-target.\n"
		"\n"
		"Commands:\n");
	for (const struct ds_command *c = commands; c->name; c++)
		fprintf(out, "  %-8s %s\n", c->name, c->summary);
	fprintf(out, "\n"
		     "Options:\n"
		     "  -h, --help     show this help (COMMAND --help for a command's options)\n"
		     "  -V, --version  print the version\n"
		     "\n"
		     "Example:\n"
		     "  drasync-source keygen --out /etc/drasync/keys\n"
		     "  drasync-source run --config /etc/drasync/source.yaml\n");
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
		printf("drasync-source %s\n", DS_VERSION);
		return 0;
	}
	for (const struct ds_command *c = commands; c->name; c++)
		if (strcmp(argv[1], c->name) == 0)
			return c->run(argc - 1, argv + 1);
	fprintf(stderr, "drasync-source: unknown command '%s' (try --help)\n", argv[1]);
	return 2;
}
