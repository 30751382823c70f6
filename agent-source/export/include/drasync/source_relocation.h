#ifndef DRASYNC_SOURCE_RELOCATION_H
#define DRASYNC_SOURCE_RELOCATION_H

/*
 * `drasync-source relocate`'s durable state (SPEC §5 "Planned relocation"):
 * one row per namespace in STATE_DIR/outbox.db, table
 *   relocations(namespace, state, seq, target, requested_at, finished_at, status, message)
 * state parking: the intent is recorded; from here the exporter pushes
 *   nothing of the namespace (ds_source_relocation_excluded), and the
 *   command parks its workloads;
 * state sent: the relocation record is in the outbox at seq, pushed in the
 *   same transaction that wrote the state, so it is pushed once whatever
 *   crashes;
 * state active: the target said the namespace is failed over and verified
 *   (its apply result for seq, status APPLIED); the namespace stays excluded;
 * state failed: it refused or failed (status, message); the command brought
 *   the source's workloads back and the exporter exports them again.
 * The results arrive on the sender's thread (ds_source_relocation_on_results),
 * from the running agent's sender or the command's own.
 */

#include "drasync/err.h"
#include "drasync/store.h"
#include "drasync/wire.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum ds_source_relocation_state {
	DS_SRC_RELOCATION_NONE = 0,
	DS_SRC_RELOCATION_PARKING,
	DS_SRC_RELOCATION_SENT,
	DS_SRC_RELOCATION_ACTIVE,
	DS_SRC_RELOCATION_FAILED,
	DS_SRC_RELOCATION_STATE_MAX
};

typedef struct ds_source_relocation {
	char ns[64];
	enum ds_source_relocation_state state;
	uint64_t seq; /* the relocation record's; 0 before it is pushed */
	char target[512];
	int64_t requested_at, finished_at; /* seconds since the epoch; 0: not yet */
	int status;			   /* enum ds_result_status of the outcome; 0: none yet */
	char message[512];
} ds_source_relocation;

/** "parking", "sent", "active" (the word `status` prints: "relocated"), "failed". */
const char *ds_source_relocation_state_name(enum ds_source_relocation_state s);

/** Open STATE_DIR/outbox.db for the relocations (created when missing). */
int ds_source_relocation_open(ds_store **out, const char *state_dir, ds_err *err);

/** ns's row into out. @return 1 found, 0 none, or a negative errno */
int ds_source_relocation_get(ds_store *db, const char *ns, ds_source_relocation *out, ds_err *err);

/** Every row, by namespace, at most max. @return how many, or a negative errno */
int ds_source_relocation_list(ds_store *db, ds_source_relocation *out, size_t max, ds_err *err);

/**
 * What the command does next for a row (pure): the intent when there is
 * none or the last one failed, park again (parking), wait (sent), nothing
 * (active: it is done, the outcome is printed again).
 */
enum ds_source_relocation_step {
	DS_SRC_STEP_BEGIN,
	DS_SRC_STEP_PARK,
	DS_SRC_STEP_WAIT,
	DS_SRC_STEP_DONE,
};
enum ds_source_relocation_step ds_source_relocation_next(const ds_source_relocation *row,
							 bool found);

/** Record the intent for ns (state parking), replacing a failed row. @return 0 or < 0 */
int ds_source_relocation_begin(ds_store *db, const char *ns, const char *target, ds_err *err);

/**
 * Push the relocation record for ns into the outbox at outbox_path and mark
 * the row sent with its seq, in one transaction; a row already sent keeps its
 * seq (nothing is pushed). @return 0 with *seq, or a negative errno
 */
int ds_source_relocation_push(const char *outbox_path, const char *ns, uint64_t *seq, ds_err *err);

/**
 * The outcome of the sent relocations among results (an Ack's): an apply
 * result APPLIED makes its row active, FAILED or REFUSED failed (a commit
 * result FAILED too). @return rows finished (>= 0), or a negative errno
 */
int ds_source_relocation_on_results(ds_store *db, const ds_wire_result *v, size_t n, ds_err *err);

/** Mark ns failed with message (the command gave up, e.g. its timeout). */
int ds_source_relocation_fail(ds_store *db, const char *ns, const char *message, ds_err *err);

/**
 * Whether records of ns may be exported: false while a relocation of it is
 * parking, sent or active. names (sorted, n) is what
 * ds_source_relocation_excluded() read.
 */
bool ds_source_relocation_exports(const char *const *names, size_t n, const char *ns);

/**
 * The namespaces not to export (parking, sent, active) into names (new
 * strings, sorted; free each and the array). @return 0 or < 0
 */
int ds_source_relocation_excluded(ds_store *db, char ***names, size_t *n, ds_err *err);

#endif
