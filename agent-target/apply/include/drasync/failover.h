#ifndef DRASYNC_FAILOVER_H
#define DRASYNC_FAILOVER_H

/*
 * `drasync-target failover` and `failback` (SPEC §5, DR). Failover marks
 * target namespaces active in the ledger (namespace_mode.h), makes their
 * objects due again and applies them through an applier restricted to those
 * namespaces, so the standby form (replicas 0, suspended CronJobs, parked
 * DaemonSets, held Pods and Jobs) becomes the active one; failback marks them
 * standby and does the reverse. It works whether `drasync-target run` runs on
 * the same stateDir or not: a running importer reads the modes every pass and
 * keeps them, and both may apply the same objects (server-side apply is
 * idempotent).
 *
 * What changed is read from the cluster (the workloads drasync manages, before
 * and after), so it is true whoever applied it. Failover refuses while a
 * source of the namespaces is still connected (split brain), unless forced.
 *
 * The decisions are pure functions on JSON (ds_failover_snapshot_add,
 * ds_failover_settled, ds_failover_diff, ds_failover_guard_verdict) and on
 * ledger rows (ds_failover_problem), tested without a cluster; ds_failover
 * does the I/O: the ledger, the cluster's lists, the applier.
 */

#include "drasync/err.h"
#include "drasync/kube_client.h"
#include "drasync/object_state.h"
#include "drasync/target_config.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most namespaces one failover or failback takes. */
#define DS_FAILOVER_MAX_NAMESPACES 256

/* ---- the decisions -------------------------------------------------------------- */

/**
 * Add to snap what the mode changes of each workload of a list of `kind` in
 * namespace ns (list: the API's list object, {"items": [...]}):
 * "Kind ns/name" -> {replicas, suspend (CronJob), standby, parked (DaemonSet)}.
 * Objects being deleted and objects owned by another are left out.
 * @return 0, -ENOMEM
 */
int ds_failover_snapshot_add(json_t *snap, const char *kind, const char *ns, const json_t *list);

/**
 * Whether every workload of a snapshot has the form of mode `to`: none marked
 * standby after a failover; every one marked and no bare Pod or Job after a
 * failback.
 */
bool ds_failover_settled(const json_t *snap, enum ds_mode to);

/**
 * The changes between two snapshots as the lines an operator reads
 * ("Deployment ml-dr/trainer: replicas 0 -> 3", "Pod ml-dr/p: created (was
 * held)"). *lines (new reference) is an array of strings; *unchanged the
 * workloads that did not change.
 * @return how many workloads changed, -ENOMEM
 */
int ds_failover_diff(const json_t *before, const json_t *after, json_t **lines, size_t *unchanged);

/** What the split-brain guard decides. */
enum ds_failover_verdict {
	DS_FAILOVER_GO,	     /* no source of the namespaces is connected */
	DS_FAILOVER_FORCED,  /* one is, and --force was given */
	DS_FAILOVER_REFUSED, /* one is: nothing may change */
	DS_FAILOVER_VERDICT_MAX,
};

/**
 * The split-brain guard on the sources of the namespaces:
 * sources is an array of {source, connected, peer, since, seenAt} (times in
 * ms on the wall clock), now_ms the wall clock. One line per connected source
 * is appended to lines (an array; may be NULL) with what the operator reads.
 */
enum ds_failover_verdict ds_failover_guard_verdict(const json_t *sources, bool force,
						   int64_t now_ms, json_t *lines);

/**
 * What a ledger row says did not go as the mode wants: "FAILED", "NOT APPLIED
 * (waits)", "NOT APPLIED (still retrying)", "KEPT on the target" (held, not
 * drasync's to delete). @return the word, NULL when the row is as it should be
 */
const char *ds_failover_problem(const ds_object_state_row *r);

/* ---- the run ------------------------------------------------------------------ */

typedef struct ds_failover ds_failover;

/* What failover says: a line of text without its newline; problem lines are the
 * operator's errors and warnings (stderr), the others the result (stdout). */
typedef void (*ds_failover_say_fn)(void *ud, bool problem, const char *line);

typedef struct ds_failover_opts {
	const char *verb; /* "failover" or "failback": starts what is said */
	enum ds_mode to;  /* DS_MODE_MIGRATE or DS_MODE_STANDBY */
	const char *ledger_path;
	const char *config_path; /* in the command line the guard suggests */
	const ds_target_config *cfg;
	bool force;
	/* The source that asked for it (a planned relocation, relocation.h): its own
	 * session does not stop the split-brain guard, the others' do. NULL: none. */
	const char *requester;
	ds_failover_say_fn say;
	void *ud;
} ds_failover_opts;

/**
 * Open the ledger's object states, namespace modes and presence for a
 * failover or failback; o is copied, its strings and cfg outlive *out.
 * @return 0, a negative errno (err says which file and why)
 */
int ds_failover_open(ds_failover **out, const ds_failover_opts *o, ds_err *err);

void ds_failover_free(ds_failover *f);

/**
 * Choose the namespaces: those given (each one the ledger holds nothing for
 * is said), else every target namespace the ledger holds objects for. The
 * strings given outlive f. @return 0, 1 nothing to do or the ledger failed (said)
 */
int ds_failover_namespaces(ds_failover *f, const char *const *ns, size_t n);

/**
 * The split-brain guard (failover only) on the ledger's presence rows.
 * @return 0 go on, 1 refused (said, with the command to type)
 */
int ds_failover_guard(ds_failover *f);

/**
 * Fail over or back through kube until the monotonic deadline for objects
 * the API refuses for now: snapshot, modes, rounds of reconsider and apply,
 * then the changes, the objects not done and a summary are said.
 * @return the exit code: 0 done or nothing to change, 1 something failed
 */
int ds_failover_run(ds_failover *f, ds_kube *kube, int64_t deadline);

#endif
