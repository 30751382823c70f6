/* drasync-target keygen --out DIR: writes a CURVE key pair for this agent. */
#include "commands.h"

#include "drasync/keys.h"

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static void keygen_usage(FILE *out)
{
	fprintf(
	    out,
	    "Usage: drasync-target keygen --out DIR [--name NAME] [--force]\n"
	    "\n"
	    "Writes a CURVE key pair in Z85: DIR/NAME.key (secret, mode 0600) and\n"
	    "DIR/NAME.pub. NAME defaults to 'target'. Existing keys are kept unless --force.\n");
}

int ds_cmd_keygen(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"out", required_argument, NULL, 'o'},
	    {"name", required_argument, NULL, 'n'},
	    {"force", no_argument, NULL, 'f'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *dir = NULL, *name = "target";
	bool force = false;
	ds_keypair kp;
	ds_err err;
	char msg[512];
	int c, rc;

	optind = 1;
	while ((c = getopt_long(argc, argv, "o:n:fh", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			dir = optarg;
			break;
		case 'n':
			name = optarg;
			break;
		case 'f':
			force = true;
			break;
		case 'h':
			keygen_usage(stdout);
			return 0;
		default:
			keygen_usage(stderr);
			return 2;
		}
	}
	if (!dir || optind != argc) {
		keygen_usage(stderr);
		return 2;
	}
	if (!name[0] || strchr(name, '/')) {
		fprintf(stderr, "drasync-target keygen: --name must be a plain file name\n");
		return 2;
	}
	ds_err_clear(&err);
	rc = ds_keys_generate(&kp, &err);
	if (rc == 0)
		rc = ds_keys_write(dir, name, &kp, force, &err);
	if (rc < 0) {
		fprintf(stderr, "drasync-target keygen: %s\n",
			ds_err_format(&err, msg, sizeof(msg)));
		return 1;
	}
	printf("wrote %s/%s.key (secret, mode 0600) and %s/%s.pub\n", dir, name, dir, name);
	printf("public key: %s\n", kp.public_z85);
	printf(
	    "Give the sources this server public key (source.yaml target.serverPublicKey):\n  %s\n",
	    kp.public_z85);
	return 0;
}
