#ifndef DRASYNC_SCHEMAS_H
#define DRASYNC_SCHEMAS_H

/*
 * The two files drasync keeps, each with its schema in one module
 * (ledger_schema.c, outbox_schema.c) as ordered migrations:
 *
 * the target's ledger (stateDir/ledger.db), tables by who writes them:
 *   the link's receiver (inbox.c): sources, records, manifests, presence
 *   the apply stage (object_state*.c): object_state, apply_cursor, apply_results
 *   failover and failback (namespace_mode.c): namespace_modes
 *   verify (verify_store.c): verifications
 *   the store itself: store_info (what the file is, which drasync wrote it)
 * the source's outbox (stateDir/outbox.db):
 *   the link's sender (outbox.c): meta, outbox
 *   the exporter (object_index.c): export_meta, export_objects
 *   the store itself: store_info
 *
 * Versions: 1 is the schema as it was before versions were kept (such a file
 * has user_version 0 and is migrated in place); 2 adds store_info.
 */

#include "drasync/store.h"

extern const ds_store_schema ds_ledger_schema;
extern const ds_store_schema ds_outbox_schema;

/** ds_store_open() of a ledger. */
int ds_ledger_open(ds_store **out, const char *path, unsigned flags, ds_err *err);

/** ds_store_open() of an outbox. */
int ds_outbox_file_open(ds_store **out, const char *path, unsigned flags, ds_err *err);

#endif
