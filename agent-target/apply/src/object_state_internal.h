#ifndef DRASYNC_OBJECT_STATE_INTERNAL_H
#define DRASYNC_OBJECT_STATE_INTERNAL_H

/*
 * What the three parts of object_state share: the connection and its kept
 * statements, the SQLite helpers (object_state.c), and the queueing of a
 * decision for its source (object_state_results.c), which the ingest
 * (object_state_ingest.c) does for an unchanged record already decided.
 */

#include "drasync/object_state.h"

#include <sqlite3.h>

#define KEPT_MAX 16

struct ds_object_state {
	sqlite3 *db;
	char *messages; /* the arena of the last ds_object_state_results() */
	size_t messages_cap;
	/* The statements of the per-object calls, prepared once (ds_object_state_keep()) */
	struct {
		const char *sql;
		sqlite3_stmt *q;
	} kept[KEPT_MAX];
};

/* Set err to what failed and map the SQLite code rc to a negative errno. */
int ds_object_state_fail(sqlite3 *db, int rc, const char *what, ds_err *err);

/* sqlite3_exec() of sql without rows. @return 0 or a negative errno */
int ds_object_state_exec(sqlite3 *db, const char *sql, ds_err *err);

/* A statement to finalize. @return 0 or a negative errno */
int ds_object_state_prepare(sqlite3 *db, const char *sql, sqlite3_stmt **st, ds_err *err);

/*
 * The statement of sql (a string literal: its address is the key) kept for
 * st's life. @return 0 when kept, 1 when not (the caller finalizes), or a
 * negative errno; hand the result to ds_object_state_unkeep() when done.
 */
int ds_object_state_keep(ds_object_state *st, const char *sql, sqlite3_stmt **q, ds_err *err);
void ds_object_state_unkeep(int kept_rc, sqlite3_stmt *q);

/* Bind s, or NULL when s is NULL. */
void ds_object_state_bind_text(sqlite3_stmt *st, int i, const char *s);

/* The state of its stored name. */
enum ds_apply_state ds_apply_state_parse(const char *s);

/* A copy of text column i, NULL when it is NULL or out of memory. */
char *ds_object_state_col_dup(sqlite3_stmt *q, int i);

/* @return 1 when the inbox has created its records table, 0 before, or a negative errno */
int ds_object_state_have_records(ds_object_state *st, ds_err *err);

/* Queue the apply result of records.id record_id for its source's next Ack. @return 0 or < 0 */
int ds_object_state_queue_result(ds_object_state *st, int64_t record_id, enum ds_apply_state s,
				 const char *reason, ds_err *err);

#endif
