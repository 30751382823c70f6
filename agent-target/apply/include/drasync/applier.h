#ifndef DRASYNC_APPLIER_H
#define DRASYNC_APPLIER_H

/*
 * The importer's apply stage (SPEC §5, §6): works from the ledger, apart from
 * the link. Each pass folds the newly committed records into the object state
 * table (object_state.h), takes the objects due, runs the per-object pipeline
 * (transform.h) and applies them through the Kubernetes client:
 *
 * - only the newest committed state of an object is applied, and an object
 *   whose transformed form hashes to what was last applied costs no API call;
 * - objects stream to the API server (HTTP/2, server-side apply, field
 *   manager "drasync"; ds_kube_stream), each prepared as others are in
 *   flight; they start in the SPEC order, and one waits for those before it
 *   to be done only where it depends on them (everything on its Namespace;
 *   claims and templates on DeviceClasses; Workloads, PodGroups and workloads
 *   on claims and templates); an object refused because
 *   another field manager owns fields it sets is applied again at once with
 *   force (the source is the truth) and its reason names the fields and the
 *   manager, so a takeover is reported once; a workload whose claims or
 *   templates (after mapping) are neither applied nor on the target waits, and
 *   is tried again when something is applied;
 * - a kind or version the target does not serve (discovery, or a 404 for the
 *   resource type) reads discovery and the resource.k8s.io version again (rate
 *   limited) and tries once more before the object fails, so a CRD created or
 *   an API upgraded on the target needs no restart;
 * - a change the API server refuses as immutable deletes and re-creates the
 *   object (the reason says so); 429, 5xx and timeouts (after the client's own
 *   retries) are tried again with backoff; another error fails that object
 *   with the API's Status message until a new version arrives;
 * - a tombstone deletes the target object only when it carries
 *   app.kubernetes.io/managed-by=drasync and a matching drasync.io/source-uid;
 *   otherwise the object is left and the row says why;
 * - the mode (migrate or standby) is the one the ledger records for the
 *   object's target namespace (namespace_mode.h: failover, failback), read
 *   once per pass, else the configuration's; a bare Pod or Job held in standby
 *   that drasync created before (at failover) is deleted from the target, with
 *   the tombstones' guard, and its reason says so.
 *
 * The receiver's handler (ds_applier_record_handler) only wakes the applier:
 * the records table is the log the applier reads on its own connection, so
 * the commit never waits for apply work or for the API server.
 */

#include "drasync/err.h"
#include "drasync/kube_client.h"
#include "drasync/ledger_compact.h"
#include "drasync/object_state.h"
#include "drasync/record.h"
#include "drasync/report.h"
#include "drasync/target_config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ds_applier ds_applier;

/* One object's outcome, for the agent to log and count. Everything is borrowed for the call. */
typedef struct ds_applier_event {
	const char *source, *key; /* the source and the object key (source names) */
	const char *target;	  /* "Kind ns/name" on the target, NULL when not known */
	uint64_t seq;		  /* of the record this is about */
	enum ds_record_op op;
	enum ds_apply_state state;
	const char *reason; /* NULL: none */
	bool unchanged;	    /* already applied: no API call was made */
	bool takeover;	    /* applied by taking over fields other field managers owned */
	bool recreated;	    /* deleted and created again (an immutable field changed) */
	int refusal;	    /* state refused: its enum ds_refusal (source_grants.h); else -1 */
	const ds_report *report;
	size_t report_first, report_n; /* the pipeline's entries for this object */
	double seconds; /* from the pass taking the object to its outcome being in the ledger */
} ds_applier_event;

/* Called on the applier's thread after the outcome is in the ledger. */
typedef void (*ds_applier_event_fn)(void *ud, const ds_applier_event *ev);

/*
 * Objects per pass: each holds 4.5 KiB of the pass's state while the pass
 * runs (its reasons and its call), so a pass of 1024 is 4.5 MiB; the client keeps
 * 256 writes in flight, which a pass of 1024 fills four times over.
 */
#define DS_APPLIER_PASS_MAX 1024

typedef struct ds_applier_config {
	const char *ledger_path;	/* the inbox's SQLite file */
	ds_kube *kube;			/* borrowed; the target cluster */
	const ds_target_config *cfg;	/* borrowed: mode, namespaceMappings, dra */
	const char *field_manager;	/* NULL: "drasync" */
	size_t pass_max;		/* objects per pass; 0: DS_APPLIER_PASS_MAX */
	int wait_retry_ms;		/* a waiting workload is looked at again after; 0: 5000 */
	int backoff_ms, backoff_max_ms; /* transient failures; 0: 1000, 60000 */
	ds_applier_event_fn on_event;	/* may be NULL */
	void *event_ud;
	int delete_wait_ms; /* re-create: how long to wait for the old object; 0: 30000 */
	/* When the target does not serve an object's kind or version, discovery and the
	 * resource.k8s.io version are read again, at most this often; 0: 30000. Set on the
	 * client (ds_kube_discovery_set_refresh_interval). */
	int discovery_refresh_ms;
	/* The ledger's filesystem full (-ENOSPC): ds_applier_run() does not return but
	 * calls this (may be NULL) and tries again after ledger_full_retry_ms (0: 5000);
	 * the pass's outcomes were rolled back, its objects are applied again. */
	void (*on_ledger_full)(void *ud, const char *msg, int retry_ms);
	int ledger_full_retry_ms;
	/* Only objects that go to these target namespaces (failover, failback); n 0: all. */
	const char *const *namespaces;
	size_t n_namespaces;
	/* Write every due object whose result differs from the ledger's applied hash,
	 * without first listing the target for one a killed run may have written
	 * already (failover, failback: their rows are due because the form changed). */
	bool no_restart_check;
	/* The namespaces' rows reconsidered with this hold (ds_object_state_scope's
	 * held_at): due now for this applier, not for a running importer's. 0: none. */
	int64_t held_at;
	/* ds_applier_run() compacts the ledger between passes (ledger_compact.h): what
	 * it did, at most once a minute (s NULL and error set when it failed). May be NULL. */
	void (*on_compacted)(void *ud, const ds_ledger_compact_stats *s, const char *error);
} ds_applier_config;

/* What the applier did (since ds_applier_new). API calls are those it made itself. */
typedef struct ds_applier_stats {
	uint64_t passes;
	uint64_t api_writes; /* apply, delete */
	uint64_t api_reads;  /* get: preflight, tombstones, re-create */
	uint64_t applied, unchanged, recreated, failed, waiting, retried, held, skipped;
	uint64_t deleted, kept, refused;
	uint64_t ledger_full; /* passes whose outcomes the full ledger could not keep */
	/* ds_applier_run()'s compaction: rows deleted, bytes the file shrank by */
	uint64_t compacted_records, compacted_manifests, compacted_bytes;
} ds_applier_stats;

/** Open the ledger's state tables and ask discovery which resource.k8s.io version to use. */
int ds_applier_new(ds_applier **out, const ds_applier_config *cfg, ds_err *err);
void ds_applier_free(ds_applier *a);

/**
 * One pass: ingest, then apply every object due.
 * @return the number of objects handled (>= 0), or a negative errno when the
 *         ledger cannot be used (object failures are not errors)
 */
int ds_applier_pass(ds_applier *a, ds_err *err);

/**
 * Pass after pass until ds_applier_stop(); sleeps when idle until notified or
 * 1 s. A full ledger filesystem is waited out (on_ledger_full); other ledger
 * errors end it. @return 0 once stopped, or the negative errno of the ledger
 */
int ds_applier_run(ds_applier *a, ds_err *err);

/** Wake the loop: records were committed. Safe from any thread. */
void ds_applier_notify(ds_applier *a);

/** Make ds_applier_run() return after the current pass. Safe from any thread. */
void ds_applier_stop(ds_applier *a);

/**
 * Use cfg (mapping rules, mode, namespaces) from the next pass on; the one in
 * use until then must stay valid until that pass starts (the caller keeps
 * both). Safe from any thread.
 */
void ds_applier_set_config(ds_applier *a, const ds_target_config *cfg);

/**
 * Whether a pass is applying the objects it picked now (not between passes,
 * nor when idle). Safe from any thread.
 */
bool ds_applier_busy(ds_applier *a);

/** A copy of the counters. Safe from any thread. */
void ds_applier_stats_get(ds_applier *a, ds_applier_stats *out);

/**
 * The resource.k8s.io version to convert to for the cluster k: v1 when it
 * serves it, else its preferred one (v1 when discovery cannot be read).
 */
enum ds_dra_version ds_applier_served_dra(ds_kube *k);

/** Whether the applier has looked at the target's discovery yet (its first pass does). */
bool ds_applier_discovered(const ds_applier *a);

/** The resource.k8s.io version the applier converts to. */
const char *ds_applier_dra_api_version(const ds_applier *a);

/**
 * A ds_record_handler for the receiver (ud: the ds_applier): wakes the
 * applier and leaves the result OK. It runs inside the inbox's commit and does
 * no I/O.
 */
void ds_applier_record_handler(void *ud, const char *source, const ds_record *rec,
			       ds_record_result *res);

#endif
