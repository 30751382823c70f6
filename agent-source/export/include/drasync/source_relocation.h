#ifndef DRASYNC_SOURCE_RELOCATION_H
#define DRASYNC_SOURCE_RELOCATION_H

/*
 * `drasync-source relocate`'s durable state (SPEC §5 "Planned relocation"):
 * one row per namespace in STATE_DIR/outbox.db, table
 *   relocations(namespace, state, seq, target, requested_at, finished_at, status, message)
 * state syncing: the intent is recorded; from here the exporter pushes
 *   nothing of the namespace (ds_source_relocation_excluded, and in every
 *   push's transaction ds_source_relocation_check_push), but the command's
 *   own final pass of it (exporter.h ds_exporter_pass_namespace): what the
 *   source has of the namespace is in the outbox before the parking;
 * state parking: the final pass is done; the command parks the workloads;
 * state sent: the relocation record is in the outbox at seq, pushed in the
 *   same transaction that wrote the state, so it is pushed once whatever
 *   crashes;
 * state active: the target said the namespace is failed over and verified
 *   (its apply result for seq, status APPLIED); the namespace stays excluded;
 * state failed: it refused or failed (status, message); the command brought
 *   the source's workloads back and the exporter exports them again;
 * state returned: relocated, and came back: this cluster's drasync-target
 *   made the namespace active again (its Namespace says drasync.io/mode:
 *   active since after the relocation finished, e.g. a relocation from the
 *   other site brought it home): it is exported again.
 * The results arrive on the sender's thread (ds_source_relocation_on_results),
 * from the running agent's sender or the command's own.
 */

#include "drasync/err.h"
#include "drasync/record.h"
#include "drasync/store.h"
#include "drasync/wire.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sqlite3;

enum ds_source_relocation_state {
	DS_SRC_RELOCATION_NONE = 0,
	DS_SRC_RELOCATION_SYNCING,
	DS_SRC_RELOCATION_PARKING,
	DS_SRC_RELOCATION_SENT,
	DS_SRC_RELOCATION_ACTIVE,
	DS_SRC_RELOCATION_FAILED,
	DS_SRC_RELOCATION_RETURNED,
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

/** "syncing", "parking", "sent", "active" (the word `status` prints: "relocated"), "failed". */
const char *ds_source_relocation_state_name(enum ds_source_relocation_state s);

/** Open STATE_DIR/outbox.db for the relocations (created when missing). */
int ds_source_relocation_open(ds_store **out, const char *state_dir, ds_err *err);

/** ns's row into out. @return 1 found, 0 none, or a negative errno */
int ds_source_relocation_get(ds_store *db, const char *ns, ds_source_relocation *out, ds_err *err);

/** Every row, by namespace, at most max. @return how many, or a negative errno */
int ds_source_relocation_list(ds_store *db, ds_source_relocation *out, size_t max, ds_err *err);

/**
 * What the command does next for a row (pure): the intent when there is
 * none or the last one failed, the final pass (syncing), park again
 * (parking), wait (sent), nothing (active: it is done, the outcome is
 * printed again).
 */
enum ds_source_relocation_step {
	DS_SRC_STEP_BEGIN,
	DS_SRC_STEP_SYNC,
	DS_SRC_STEP_PARK,
	DS_SRC_STEP_WAIT,
	DS_SRC_STEP_DONE,
};
enum ds_source_relocation_step ds_source_relocation_next(const ds_source_relocation *row,
							 bool found);

/** Record the intent for ns (state syncing), replacing a failed or returned row. @return 0 or < 0
 */
int ds_source_relocation_begin(ds_store *db, const char *ns, const char *target, ds_err *err);

/** The final pass of ns is in the outbox: syncing -> parking. @return 0 or < 0 */
int ds_source_relocation_synced(ds_store *db, const char *ns, ds_err *err);

/**
 * The exporter's push guard (object_index.h ds_object_index_set_guard), on
 * the push transaction's connection: -ESTALE (err says which) when a record
 * is of a namespace being relocated, unless it is relocating_ns (may be
 * NULL) and that relocation is syncing (the command's final pass); -ESTALE
 * too for a record of relocating_ns once its relocation is past syncing.
 * Decided on what is committed: a relocation's intent orders every push.
 * @return 0, -ESTALE, or another negative errno
 */
int ds_source_relocation_check_push(struct sqlite3 *db, const ds_record *recs, size_t n,
				    const char *relocating_ns, ds_err *err);

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

/** A relocated ns came back (state returned): exported again. @return 0 or < 0 */
int ds_source_relocation_returned(ds_store *db, const char *ns, ds_err *err);

/**
 * Whether a relocated namespace came back (pure): row is active and its
 * Namespace says mode (drasync.io/mode) "active" since mode_since (seconds),
 * after the relocation finished.
 */
bool ds_source_relocation_came_back(const ds_source_relocation *row, const char *mode,
				    int64_t mode_since);

/**
 * `drasync-source park` (the way home after a failover elsewhere): ns is
 * relocated to target (state active, no record sent: the other site's
 * failover made it active there) unless it is so already. @return 0 or < 0
 */
int ds_source_relocation_parked_by_operator(ds_store *db, const char *ns, const char *target,
					    ds_err *err);

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
