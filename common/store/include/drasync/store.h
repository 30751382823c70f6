#ifndef DRASYNC_STORE_H
#define DRASYNC_STORE_H

/*
 * The owner of every SQLite file drasync keeps (libgit2's odb.c in front of
 * its backends): the target's ledger and the source's outbox. One open (WAL,
 * synchronous=FULL, one busy timeout), one error mapper that names the file,
 * statements held by explicit handles, and each file's schema as ordered
 * migrations in one schema module (ledger_schema.c, outbox_schema.c) with its
 * version in PRAGMA user_version. A file written by a newer drasync (a
 * version this one does not know) is refused, saying which version wrote it.
 *
 * Several modules of one agent may each hold a ds_store of the same file
 * (the receiver, the apply stage, the namespace modes): SQLite's locking
 * orders them, and the busy timeout waits for a commit in progress.
 */

#include "drasync/err.h"

#include <sqlite3.h>
#include <stdbool.h>

typedef struct ds_store ds_store;
typedef struct ds_store_stmt ds_store_stmt;

/* One step of a file's schema: the SQL that takes version-1 to version. */
typedef struct ds_store_migration {
	int version;	  /* steps[i].version == i + 1 */
	const char *what; /* for the error message when it fails */
	const char *sql;
} ds_store_migration;

typedef struct ds_store_schema {
	const char *file; /* what the file is, in messages: "ledger", "outbox" */
	const ds_store_migration *steps;
	int n_steps; /* the newest version this drasync writes */
	/* A new file is created with auto_vacuum=INCREMENTAL (pages freed by
	 * deletes can be given back with PRAGMA incremental_vacuum); a file
	 * created without it keeps its mode until a VACUUM. */
	bool incremental_vacuum;
} ds_store_schema;

/* ds_store_open() flags. */
enum {
	/* Read only: never migrates; a file older than the schema is read as it is
	 * (every reader copes with a table not created yet). */
	DS_STORE_READONLY = 1u << 0,
	/* A missing file is -ENOENT rather than created (read-write otherwise). */
	DS_STORE_MUST_EXIST = 1u << 1,
};

/** The busy timeout of every connection: a receiver's batch commit takes less. */
#define DS_STORE_BUSY_MS 10000
/* SQLite's memory in the whole process (every connection's page cache):
 * past this soft limit it recycles cached pages instead of growing, so an
 * agent's caches stay this size however large its files grow (2 MB a
 * connection before, five connections or more an agent). 8 MiB was reached
 * only past 10,000 objects: the importer's page caches grew 4 to 5 MB more by
 * 100,000 (its RSS sampled as the ledger grew); at 4 MiB they are full at
 * 10,000 already, and what is not cached is in the kernel's page cache. */
#define DS_STORE_HEAP_LIMIT (4 << 20)
/* A file's -wal at rest: each time the log starts over after a checkpoint it
 * is cut back to this size (journal_size_limit). Without it the -wal kept the
 * size of its largest burst (a ledger's 32-35 MB after a bulk load). */
#define DS_STORE_WAL_LIMIT (4 << 20)

/**
 * Open path with schema: created when missing (unless READONLY), in WAL mode
 * with synchronous=FULL, and migrated to the schema's newest version in one
 * transaction.
 * @return 0; -ENOENT no such file (READONLY or MUST_EXIST); -EPROTONOSUPPORT
 *         the file has a newer schema than this drasync knows (err names the
 *         version and the drasync that wrote it); -EBADMSG the file is not
 *         this schema's or is damaged; another negative errno as ds_store_fail()
 */
int ds_store_open(ds_store **out, const char *path, const ds_store_schema *schema, unsigned flags,
		  ds_err *err);

/** Close: finalizes every statement of ds_store_stmt_new(). NULL-safe. */
void ds_store_free(ds_store *st);

/** The connection, borrowed for as long as st lives. */
sqlite3 *ds_store_db(ds_store *st);

/** The file's path as opened. */
const char *ds_store_path(const ds_store *st);

/** The file's schema version (PRAGMA user_version; 0: before versions were kept). */
int ds_store_version(ds_store *st);

/**
 * The one mapping of an SQLite result code to a negative errno: fills err
 * with the file's name first, SQLite's message, then what was being done.
 * st may be NULL (then only rc and what are known).
 */
int ds_store_fail(ds_store *st, int rc, const char *what, ds_err *err);

/** ds_store_fail() of a connection the caller was handed (a hook inside another module's
 * transaction). */
int ds_store_fail_db(sqlite3 *db, int rc, const char *what, ds_err *err);

/** Run SQL without results. @return 0 or as ds_store_fail() */
int ds_store_exec(ds_store *st, const char *sql, ds_err *err);

/** BEGIN (immediate: take the write lock now), COMMIT, ROLLBACK (never fails). */
int ds_store_begin(ds_store *st, bool immediate, ds_err *err);
int ds_store_commit(ds_store *st, ds_err *err);
void ds_store_rollback(ds_store *st);

/** Whether the file has a table of that name. */
bool ds_store_has_table(ds_store *st, const char *name);

/**
 * A statement kept for st's life, prepared once: the handle is the caller's
 * to keep (in its own struct) and st's to finalize.
 */
int ds_store_stmt_new(ds_store *st, const char *sql, ds_store_stmt **out, ds_err *err);

/**
 * The statement of the handle *slot (a field of the caller's struct, NULL
 * until the first call), prepared at its first use, reset and unbound.
 */
int ds_store_stmt_lazy(ds_store *st, ds_store_stmt **slot, const char *sql, sqlite3_stmt **q,
		       ds_err *err);

/** A one-off statement, the caller's to sqlite3_finalize(). @return 0 or as ds_store_fail() */
int ds_store_prepare(ds_store *st, const char *sql, sqlite3_stmt **q, ds_err *err);

/** The handle's statement, reset and unbound, ready for binding and stepping. */
sqlite3_stmt *ds_store_stmt_use(ds_store_stmt *h);

/** Done with the statement for now: reset, so that it holds no lock. */
void ds_store_stmt_done(ds_store_stmt *h);

/**
 * store_info's value for key (what the file is, who wrote it, the ledger's
 * identity: ledger_id, ledger_created) into buf, "" when there is none.
 * @return 1 found, 0 none
 */
int ds_store_info_get(ds_store *st, const char *key, char *buf, size_t size);

/** Set store_info's key to value. @return 0, -ENOENT no store_info, or as ds_store_fail() */
int ds_store_info_set(ds_store *st, const char *key, const char *value, ds_err *err);

/**
 * Check an existing file before an agent uses it (SQLite's quick_check):
 * 0 when it is sound or does not exist yet; -EBADMSG, err "PATH is damaged:
 * ...", when it is not a database, truncated or corrupt; -ENOSPC when even
 * reading it needs space that is not there (a hot WAL to replay); another
 * negative errno when it cannot be read.
 */
int ds_store_check(const char *path, ds_err *err);

#endif
