/* drasync-source keygen --out DIR: writes a CURVE key pair for this agent. */
#include "commands.h"

#include "drasync/keygen_command.h"

int ds_cmd_keygen(int argc, char **argv)
{
	return ds_keygen_command(DS_KEYGEN_SOURCE, argc, argv);
}
