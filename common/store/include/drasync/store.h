#ifndef DRASYNC_SQLITE_UTIL_H
#define DRASYNC_SQLITE_UTIL_H

/*
 * The link's SQLite files (outbox, inbox) and the exporter's object index
 * (in the outbox's file): open a WAL database, run plain SQL, map errors.
 */

#include "drasync/err.h"

#include <sqlite3.h>
#include <stdbool.h>

/** Open path (created when missing) in WAL mode with synchronous=FULL. */
int ds_sqlite_open(sqlite3 **out, const char *path, ds_err *err);

/** Run SQL without results. @return 0 or -EIO with err set. */
int ds_sqlite_exec(sqlite3 *db, const char *sql, ds_err *err);

/** Whether the database has a table of that name (a ledger some component has not opened yet may
 * not). */
bool ds_sqlite_has_table(sqlite3 *db, const char *name);

/**
 * Map an SQLite result code to a negative errno and fill err with the message,
 * which names db's file first when it has one.
 */
int ds_sqlite_fail(sqlite3 *db, int rc, const char *what, ds_err *err);

/**
 * Check an existing database file before an agent uses it (SQLite's
 * quick_check): 0 when it is sound or does not exist yet; -EBADMSG, err
 * "PATH is damaged: ...", when it is not a database, truncated or corrupt;
 * -ENOSPC when even reading it needs space that is not there (a hot WAL to
 * replay); another negative errno when it cannot be read.
 */
int ds_sqlite_check(const char *path, ds_err *err);

#endif
