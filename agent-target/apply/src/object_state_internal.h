#ifndef DRASYNC_OBJECT_STATE_INTERNAL_H
#define DRASYNC_OBJECT_STATE_INTERNAL_H

/*
 * What the three parts of object_state share: the connection and its kept
 * statements, the SQLite helpers (object_state.c), and the queueing of a
 * decision for its source (object_state_results.c), which the ingest
 * (object_state_ingest.c) does for an unchanged record already decided.
 */

#include "drasync/ledger_records.h"
#include "drasync/object_state.h"
#include "drasync/store.h"

#include <sqlite3.h>

/* The per-object statements, kept for the connection's life (ds_object_state_keep()). */
enum ds_os_stmt {
	OS_STMT_OWNER,
	OS_STMT_QUEUE_RESULT,
	OS_STMT_APPLIED,
	OS_STMT_TARGET,
	OS_STMT_FORGET,
	OS_STMT_READ,
	OS_STMT_RESULT,
	OS_STMT_UPSERT,
	OS_STMT_HOME,
	OS_STMT_MAX
};

struct ds_object_state {
	ds_store *store;
	sqlite3 *db;		    /* the store's connection */
	ds_ledger_records *records; /* the link's tables, read through the store */
	char *messages;		    /* the arena of the last ds_object_state_results() */
	size_t messages_cap;
	ds_store_stmt *kept[OS_STMT_MAX];
	unsigned returned_pending; /* relocations returned in the ingest's open transaction */
};

/*
 * The statement id (sql) kept for st's life, prepared at its first use.
 * @return 0 or a negative errno; hand it to ds_object_state_unkeep() when done.
 */
int ds_object_state_keep(ds_object_state *st, enum ds_os_stmt id, const char *sql, sqlite3_stmt **q,
			 ds_err *err);
void ds_object_state_unkeep(int kept_rc, sqlite3_stmt *q);

/* Bind s, or NULL when s is NULL. */
void ds_object_state_bind_text(sqlite3_stmt *st, int i, const char *s);

/* The state of its stored name, or -EINVAL for a name this version does not know. */
int ds_apply_state_from_string(const char *s);
const char *ds_apply_state_to_string(enum ds_apply_state s);

/* A copy of text column i, NULL when it is NULL or out of memory. */
char *ds_object_state_col_dup(sqlite3_stmt *q, int i);

/* Queue the apply result of records.id record_id for its source's next Ack. @return 0 or < 0 */
int ds_object_state_queue_result(ds_object_state *st, int64_t record_id, enum ds_apply_state s,
				 const char *reason, ds_err *err);

/* A relocation record into the `relocations` table (relocation_store.c), in the ingest's
 * transaction. @return 0 or < 0 */
int ds_object_state_note_relocation(ds_object_state *st, const ds_ledger_record *rec, ds_err *err);
/*
 * An object record from a source that relocated its namespace here, after its
 * relocation record: that source runs the namespace again (the way home), so
 * the target namespace goes back to standby here (relocation.h), in the
 * ingest's transaction, before the record is applied.
 */
int ds_object_state_note_home(ds_object_state *st, const ds_ledger_record *rec, ds_err *err);
/* The ingest's transaction committed: its returns count (ds_relocation_returned_total()). */
void ds_object_state_returned_committed(ds_object_state *st);

#endif
