/*
 * The ledger checked before a command uses it (run, failover, failback,
 * drill): a damaged file is named, with what to do about it, instead of
 * failing later at some statement.
 */
#include "commands.h"

#include "drasync/store.h"

#include <errno.h>
#include <stdio.h>

int ds_target_check_ledger(const char *cmd, const char *ledger)
{
	ds_err err = {0};
	int rc = ds_store_check(ledger, &err);

	if (rc == 0)
		return 0;
	fprintf(stderr, "drasync-target %s: %s\n", cmd, err.msg);
	if (rc == -EBADMSG)
		fprintf(stderr,
			"  (the ledger cannot be used: stop drasync-target, move %s and its -wal "
			"and -shm files aside, e.g. to %s.damaged, and start again: with an empty "
			"ledger every source sends a full snapshot and the target is rebuilt "
			"from it)\n",
			ledger, ledger);
	else if (rc == -ENOSPC)
		fprintf(stderr, "  (free space on the filesystem that holds %s and start again)\n",
			ledger);
	return 1;
}
