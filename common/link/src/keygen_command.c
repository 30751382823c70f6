/* `keygen`, shared by drasync-source and drasync-target. */
#include "drasync/keygen_command.h"

#include "drasync/keys.h"

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static void keygen_usage(FILE *out, const char *agent, const char *dflt)
{
	fprintf(out,
		"Usage: %s keygen --out DIR [--name NAME] [--force]\n"
		"\n"
		"Writes a CURVE key pair in Z85: DIR/NAME.key (secret, mode 0600) and\n"
		"DIR/NAME.pub. NAME defaults to '%s'. Existing keys are kept unless --force.\n"
		"\n"
		"Example:\n"
		"  %s keygen --out /etc/drasync/keys\n",
		agent, dflt, agent);
}

int ds_keygen_command(enum ds_keygen_role role, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"out", required_argument, NULL, 'o'},
	    {"name", required_argument, NULL, 'n'},
	    {"force", no_argument, NULL, 'f'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *agent = role == DS_KEYGEN_SOURCE ? "drasync-source" : "drasync-target";
	const char *dflt = role == DS_KEYGEN_SOURCE ? "source" : "target";
	const char *dir = NULL, *name = dflt;
	bool force = false;
	ds_keypair kp;
	ds_err err = {0};
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
			keygen_usage(stdout, agent, dflt);
			return 0;
		default:
			keygen_usage(stderr, agent, dflt);
			return 2;
		}
	}
	if (!dir || optind != argc) {
		keygen_usage(stderr, agent, dflt);
		return 2;
	}
	if (!name[0] || strchr(name, '/')) {
		fprintf(stderr, "%s keygen: --name must be a plain file name\n", agent);
		return 2;
	}
	ds_err_clear(&err);
	rc = ds_keys_generate(&kp, &err);
	if (rc == 0)
		rc = ds_keys_write(dir, name, &kp, force, &err);
	if (rc < 0) {
		fprintf(stderr, "%s keygen: %s\n", agent, ds_err_format(&err, msg, sizeof(msg)));
		return 1;
	}
	printf("wrote %s/%s.key (secret, mode 0600) and %s/%s.pub\n", dir, name, dir, name);
	printf("public key: %s\n", kp.public_z85);
	if (role == DS_KEYGEN_SOURCE)
		printf("On the target, add this line to the authorized-sources file:\n  %s %s\n",
		       name, kp.public_z85);
	else
		printf("Give the sources this server public key (source.yaml "
		       "target.serverPublicKey):\n  %s\n",
		       kp.public_z85);
	return 0;
}
