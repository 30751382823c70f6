/*
 * The source's outbox file: every table, every version. A new version is a
 * new step at the end of steps[]; a step never changes once released.
 */
#include "drasync/schemas.h"

static const ds_store_migration steps[] = {
    {1, "the tables before versions were kept",
     /* The link's sender (outbox.c). */
     "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL);"
     "CREATE TABLE IF NOT EXISTS outbox(seq INTEGER PRIMARY KEY, op INTEGER NOT NULL,"
     " record BLOB NOT NULL);"
     /* The exporter's object index (object_index.c). */
     "CREATE TABLE IF NOT EXISTS export_meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL);"
     "CREATE TABLE IF NOT EXISTS export_objects(key TEXT PRIMARY KEY, api_version TEXT NOT NULL,"
     " grp TEXT NOT NULL, kind TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,"
     " uid TEXT NOT NULL DEFAULT '', hash BLOB, seq INTEGER NOT NULL, seen INTEGER NOT NULL,"
     " deleted INTEGER NOT NULL DEFAULT 0, result_status INTEGER, result_message TEXT,"
     " result_seq INTEGER);"
     "CREATE INDEX IF NOT EXISTS export_objects_by_seq ON export_objects(seq);"
     "CREATE INDEX IF NOT EXISTS export_objects_by_kind ON export_objects(kind, namespace);"
     "CREATE INDEX IF NOT EXISTS export_objects_by_ns ON export_objects(namespace);"},
    {2, "store_info: what the file is and which drasync wrote it",
     "CREATE TABLE IF NOT EXISTS store_info(key TEXT PRIMARY KEY, value TEXT NOT NULL);"},
    {3, "relocations: `relocate`'s intent and outcome per namespace (source_relocation.c)",
     /* state: parking (intent recorded: nothing of the namespace is exported
      * any more), sent (the relocation record is in the outbox at seq),
      * active (the target verified it), failed (the source's workloads were
      * brought back). */
     "CREATE TABLE IF NOT EXISTS relocations(namespace TEXT PRIMARY KEY, state TEXT NOT NULL,"
     " seq INTEGER, target TEXT NOT NULL, requested_at INTEGER NOT NULL, finished_at INTEGER,"
     " status INTEGER, message TEXT);"},
};

const ds_store_schema ds_outbox_schema = {
    .file = "outbox",
    .steps = steps,
    .n_steps = (int)(sizeof(steps) / sizeof(steps[0])),
};

int ds_outbox_file_open(ds_store **out, const char *path, unsigned flags, ds_err *err)
{
	return ds_store_open(out, path, &ds_outbox_schema, flags, err);
}
