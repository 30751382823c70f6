#ifndef DRASYNC_RELOCATION_H
#define DRASYNC_RELOCATION_H

/*
 * A planned relocation on the target (SPEC §5): a source sends a relocation
 * record for one of its namespaces behind every change it has for it. The
 * ingest notes it in the ledger's `relocations` table (object_state.h's
 * connection, in the cursor's transaction: once per record). The relocator
 * (the target agent's thread) then takes each pending one: a source without
 * `relocate: true` in sources[], or a namespace outside its grant, is refused;
 * else the mapped namespace is failed over through failover.h (the asking
 * source's own session does not stop the split-brain guard), verified through
 * verify_run.h (pods Running, claims allocated), and the outcome is queued as
 * the relocation record's apply result for the source's next Ack: APPLIED
 * "verified active ...", FAILED or REFUSED, with the reason.
 */

#include "drasync/err.h"
#include "drasync/kube_client.h"
#include "drasync/object_state.h"
#include "drasync/record.h"
#include "drasync/target_config.h"

#include <stddef.h>
#include <stdint.h>

/* One relocation a source asked for, as the ledger holds it. */
typedef struct ds_relocation_row {
	int64_t id;
	char source[256];
	int64_t epoch, seq;
	char ns[64]; /* the source namespace */
} ds_relocation_row;

/* What became of one (the `relocations` row's state). */
enum ds_relocation_state {
	DS_RELOCATION_PENDING = 0,
	DS_RELOCATION_ACTIVE, /* failed over and verified */
	DS_RELOCATION_FAILED,
	DS_RELOCATION_REFUSED,	/* not granted: nothing changed */
	DS_RELOCATION_RETURNED, /* active, then its source ran the namespace again (the way home) */
	DS_RELOCATION_STATE_MAX
};

/** "pending", "active", "failed", "refused", "returned". */
const char *ds_relocation_state_name(enum ds_relocation_state s);

/**
 * Relocations that came home (state returned, event=relocation_returned) in
 * this process's ingests, counted once their transaction committed: the
 * monitor's drasync_target_relocations_total{outcome="returned"}. Whichever
 * ledger connection ingested them (the applier's, the relocator's failover).
 */
uint64_t ds_relocation_returned_total(void);

/** The pending relocations, oldest first, at most max into out. @return 0, or < 0 */
int ds_relocation_pending(ds_object_state *st, ds_relocation_row *out, size_t max, size_t *n,
			  ds_err *err);

/**
 * Record r's outcome and queue it as its apply result, in one transaction.
 * @return 0, or a negative errno
 */
int ds_relocation_finish(ds_object_state *st, const ds_relocation_row *r, const char *target_ns,
			 enum ds_relocation_state state, const char *message, ds_err *err);

/**
 * The decision on the grant (pure): whether source may relocate source
 * namespace ns under cfg; why says what refuses it (the file's key to change).
 * @return true when granted
 */
bool ds_relocation_granted(const ds_target_config *cfg, const char *source, const char *ns,
			   char *why, size_t size);

/* What the relocator needs; all borrowed. */
typedef struct ds_relocation_ctx {
	const char *ledger_path;
	const char *config_path;
	const ds_target_config *cfg;
	ds_kube *kube;
	long long failover_timeout_ms; /* 0: 5 minutes */
	long long verify_timeout_ms;   /* 0: 2 minutes */
} ds_relocation_ctx;

/**
 * Fail the target namespaces tns (n of them) over for source, together, as
 * `drasync-target failover` does (the requester's own session does not stop
 * the split-brain guard); what names them in the log (relocate_step). On
 * failure problem gets the first problem failover said.
 * @return 0 done, 1 not
 */
int ds_relocation_fail_over(const ds_relocation_ctx *c, const char *source, const char *const *tns,
			    size_t n, const char *what, char *problem, size_t size);

#endif
