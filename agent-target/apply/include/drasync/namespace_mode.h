#ifndef DRASYNC_NAMESPACE_MODE_H
#define DRASYNC_NAMESPACE_MODE_H

/*
 * The mode of each target namespace, as failover and failback set it (SPEC
 * §5), in the ledger file: the importer transforms an object for the mode of
 * its target namespace (after namespaceMappings) when this table names it,
 * else for the configuration's `mode`. The applier reads it once per pass on
 * its own connection, so a failover made by another process (the command) is
 * seen by a running importer within a pass.
 *
 * Table:
 *   namespace_modes(namespace TEXT PRIMARY KEY -- target namespace,
 *                   mode TEXT -- "migrate" (active) or "standby",
 *                   since INTEGER -- seconds since the epoch,
 *                   changed_by TEXT -- "failover", "failback", ...)
 */

#include "drasync/err.h"
#include "drasync/target_config.h"

#include <stddef.h>
#include <stdint.h>

typedef struct ds_namespace_modes ds_namespace_modes;

/* One namespace's mode (strings owned; ds_namespace_mode_list_free). */
typedef struct ds_namespace_mode {
	char *ns;
	enum ds_mode mode;
	int64_t since; /* seconds since the epoch */
	char *changed_by;
} ds_namespace_mode;

/** Open (and create when missing) the table in the ledger file at path. */
int ds_namespace_modes_open(ds_namespace_modes **out, const char *path, ds_err *err);
void ds_namespace_modes_free(ds_namespace_modes *nm);

/**
 * The mode the ledger records for target namespace ns into *mode (may be NULL).
 * @return 1 found, 0 none (the configuration's mode applies), or a negative errno
 */
int ds_namespace_modes_get(ds_namespace_modes *nm, const char *ns, enum ds_mode *mode, ds_err *err);

/**
 * Record mode for ns, changed by `by` ("failover", "failback"). An unchanged
 * mode keeps its since and changed_by.
 * @return 1 the mode changed (or was not recorded), 0 it was already so, or a negative errno
 */
int ds_namespace_modes_set(ds_namespace_modes *nm, const char *ns, enum ds_mode mode,
			   const char *by, ds_err *err);

/** Every namespace recorded, by name; *rows is new (ds_namespace_mode_list_free). */
int ds_namespace_modes_list(ds_namespace_modes *nm, ds_namespace_mode **rows, size_t *n,
			    ds_err *err);

void ds_namespace_mode_list_free(ds_namespace_mode *rows, size_t n);

/**
 * The mode of ns in rows (sorted by name, as ds_namespace_modes_list() gives
 * them), else dflt. ns NULL (cluster-scoped): dflt.
 */
enum ds_mode ds_namespace_mode_of(const ds_namespace_mode *rows, size_t n, const char *ns,
				  enum ds_mode dflt);

/** "active" for migrate, "standby" for standby: the word operators read. */
const char *ds_namespace_mode_word(enum ds_mode mode);

#endif
