/*
 * The target's ledger: every table, every version. A new version is a new
 * step at the end of steps[]; a step never changes once released, since the
 * files in the field were written by it.
 */
#include "drasync/schemas.h"

static const ds_store_migration steps[] = {
    {1, "the tables before versions were kept",
     /* The link's receiver (inbox.c). */
     "CREATE TABLE IF NOT EXISTS sources(name TEXT PRIMARY KEY, cluster_name TEXT,"
     " epoch INTEGER NOT NULL, committed_seq INTEGER NOT NULL, updated_at INTEGER);"
     "CREATE TABLE IF NOT EXISTS records(id INTEGER PRIMARY KEY, source TEXT NOT NULL,"
     " epoch INTEGER NOT NULL, seq INTEGER NOT NULL, op INTEGER NOT NULL, api_version TEXT,"
     " kind TEXT, namespace TEXT, name TEXT, source_uid TEXT, source_resource_version TEXT,"
     " content_hash BLOB, compression INTEGER NOT NULL DEFAULT 0, payload BLOB,"
     " snapshot_id TEXT, status INTEGER NOT NULL, message TEXT, committed_at INTEGER,"
     " UNIQUE(source, epoch, seq));"
     /* The key -> hash manifest of each snapshot-end, for pruning after the apply. */
     "CREATE TABLE IF NOT EXISTS manifests(source TEXT NOT NULL, epoch INTEGER NOT NULL,"
     " seq INTEGER NOT NULL, key TEXT NOT NULL, content_hash BLOB NOT NULL);"
     "CREATE INDEX IF NOT EXISTS manifests_by_seq ON manifests(source, epoch, seq);"
     "CREATE TABLE IF NOT EXISTS presence(source TEXT PRIMARY KEY, peer TEXT,"
     " since INTEGER NOT NULL, seen_at INTEGER NOT NULL, valid_until INTEGER NOT NULL,"
     " ended_at INTEGER, end_reason TEXT);"
     /* The apply stage (object_state): the state is stored by name so that
      * operators can read the table with sqlite3. */
     "CREATE TABLE IF NOT EXISTS object_state(id INTEGER PRIMARY KEY, source TEXT NOT NULL,"
     " key TEXT NOT NULL, api_version TEXT, kind TEXT, namespace TEXT, name TEXT,"
     " record_id INTEGER NOT NULL, seq INTEGER NOT NULL, op INTEGER NOT NULL,"
     " content_hash BLOB, applied_hash BLOB, applied_record_id INTEGER,"
     " target_api_version TEXT, target_namespace TEXT, target_name TEXT,"
     " state TEXT NOT NULL, reason TEXT, attempts INTEGER NOT NULL DEFAULT 0,"
     " next_try_at INTEGER NOT NULL DEFAULT 0, updated_at INTEGER, UNIQUE(source, key));"
     "CREATE INDEX IF NOT EXISTS object_state_due ON object_state(state, next_try_at);"
     "CREATE INDEX IF NOT EXISTS object_state_target ON object_state(kind, target_name);"
     "CREATE TABLE IF NOT EXISTS apply_cursor(id INTEGER PRIMARY KEY CHECK(id = 1),"
     " record_id INTEGER NOT NULL);"
     "INSERT OR IGNORE INTO apply_cursor(id, record_id) VALUES(1, 0);"
     "CREATE TABLE IF NOT EXISTS apply_results(id INTEGER PRIMARY KEY, source TEXT NOT NULL,"
     " epoch INTEGER NOT NULL, seq INTEGER NOT NULL, status INTEGER NOT NULL, message TEXT);"
     "CREATE INDEX IF NOT EXISTS apply_results_source ON apply_results(source, epoch, id);"
     /* Failover and failback (namespace_mode.c). */
     "CREATE TABLE IF NOT EXISTS namespace_modes(namespace TEXT PRIMARY KEY,"
     " mode TEXT NOT NULL, since INTEGER NOT NULL, changed_by TEXT);"
     /* Verify (the last verdict per workload). */
     "CREATE TABLE IF NOT EXISTS verifications(kind TEXT NOT NULL, namespace TEXT NOT NULL,"
     " name TEXT NOT NULL, form TEXT, verified INTEGER NOT NULL, reason TEXT,"
     " checked_at INTEGER NOT NULL, seconds REAL, PRIMARY KEY(kind, namespace, name));"},
    {2, "store_info: what the file is and which drasync wrote it",
     "CREATE TABLE IF NOT EXISTS store_info(key TEXT PRIMARY KEY, value TEXT NOT NULL);"},
    {3, "the indexes of compaction (ledger_compact.c)",
     /* Whether a record is still someone's: the desired or the applied state
      * of an object, or a result its source has not heard yet. */
     "CREATE INDEX IF NOT EXISTS object_state_record ON object_state(record_id);"
     "CREATE INDEX IF NOT EXISTS object_state_applied ON object_state(applied_record_id);"
     "CREATE INDEX IF NOT EXISTS apply_results_seq ON apply_results(source, epoch, seq);"},
    {4, "relocations: the planned relocations sources asked for (relocation.c)",
     /* One row per relocation record ingested; state pending, then active,
      * failed or refused, and the outcome the source was sent. */
     "CREATE TABLE IF NOT EXISTS relocations(id INTEGER PRIMARY KEY, source TEXT NOT NULL,"
     " epoch INTEGER NOT NULL, seq INTEGER NOT NULL, namespace TEXT NOT NULL,"
     " target_namespace TEXT, state TEXT NOT NULL, message TEXT,"
     " requested_at INTEGER NOT NULL, finished_at INTEGER, UNIQUE(source, epoch, seq));"},
};

const ds_store_schema ds_ledger_schema = {
    .file = "ledger",
    .steps = steps,
    .n_steps = (int)(sizeof(steps) / sizeof(steps[0])),
    .incremental_vacuum = true,
};

int ds_ledger_open(ds_store **out, const char *path, unsigned flags, ds_err *err)
{
	return ds_store_open(out, path, &ds_ledger_schema, flags, err);
}
