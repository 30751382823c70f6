#ifndef DRASYNC_KEYGEN_COMMAND_H
#define DRASYNC_KEYGEN_COMMAND_H

/*
 * The `keygen` subcommand both agents have: writes a CURVE key pair and tells
 * the user where the public key goes on the other side.
 */

enum ds_keygen_role {
	DS_KEYGEN_SOURCE, /* public key goes into the target's authorized-sources file */
	DS_KEYGEN_TARGET, /* public key goes into every source's target.serverPublicKey */
	DS_KEYGEN_ROLE_MAX
};

/**
 * Run `keygen --out DIR [--name NAME] [--force]`; argv[0] is "keygen".
 * @return the process exit code: 0, 1 (keys not written), 2 (usage)
 */
int ds_keygen_command(enum ds_keygen_role role, int argc, char **argv);

#endif
