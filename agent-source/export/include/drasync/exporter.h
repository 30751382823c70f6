#ifndef DRASYNC_EXPORTER_H
#define DRASYNC_EXPORTER_H

/*
 * The engine of `drasync-source run`: it reads the source cluster and feeds
 * the outbox that the sender drains (SPEC §1, §2, §6, §7).
 *
 * What is read: every kind of SPEC §2 that discovery says the source serves
 * (a kind it does not serve is skipped with one log line), resource.k8s.io in
 * the version the source prefers (v1, else v1beta2, else v1beta1). The
 * namespaces are a list or a predicate on Namespace objects.
 *
 * A fixed list of at most DS_EXPORTER_SCOPED_NAMESPACES_MAX namespaces is
 * read namespace by namespace, so that the source's role needs no read
 * outside them (deploy/: RoleBindings per namespace): one list (paginated)
 * and one watch per namespaced kind and namespace, and per namespace one of
 * its Namespace object (field selector metadata.name=NS); DeviceClasses
 * (replicateDeviceClasses) cluster-wide. A predicate, or a longer list, reads
 * each kind cluster-wide and filters here: one list or one watch per kind.
 * A namespace that starts matching is picked up with a full pass of its
 * objects, one that stops matching is forgotten (logged; nothing is deleted
 * on the target). A namespace the index holds that is no longer in the list
 * is forgotten too, unless the source may read it and it is gone (then its
 * objects are tombstoned).
 *
 * Each object: selection (skips logged once per object and reason),
 * sanitizing, canonical JSON (sorted keys, compact), SHA-256. The object
 * index (object_index.h) remembers what was pushed, committed with the
 * outbox in one transaction; a record is pushed only when the hash or the
 * source uid changed. Objects the index holds that a pass no longer sees are
 * tombstoned; a re-created object (new uid) is a tombstone, then an upsert.
 *
 * Snapshots: the first pass against a target (no snapshot ever completed)
 * and the first pass after ds_exporter_request_snapshot() send
 * SNAPSHOT_BEGIN, every selected object, SNAPSHOT_END with the manifest (key
 * and hash of every object, from the index, never the objects themselves).
 * A snapshot cut short (a crash, a kind that could not be listed) stays open
 * and the next full pass goes on with it: what it already sent after its
 * SNAPSHOT_BEGIN is not sent again, and SNAPSHOT_END comes only once every
 * kind was listed.
 *
 * Files: STATE_DIR/outbox.db holds the outbox and the index (the sender's
 * outbox_path is ds_export_db_path()).
 *
 * Threads: ds_exporter_pass() and ds_exporter_watch() run on one thread;
 * ds_exporter_stop(), ds_exporter_request_snapshot() and the sender
 * callbacks (ds_exporter_on_results(), ds_exporter_on_snapshot_required())
 * may be called from any other.
 */

#include "drasync/err.h"
#include "drasync/kube_client.h"
#include "drasync/log.h"
#include "drasync/record.h"
#include "drasync/wire.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ds_exporter ds_exporter;

/* Longest namespace list read namespace by namespace: 16 namespaced kinds and
 * the Namespace object each, 17 watches per namespace. */
#define DS_EXPORTER_SCOPED_NAMESPACES_MAX 8

/* What a pass did (or has done so far, for the progress callback). */
typedef struct ds_export_counts {
	uint64_t listed;     /* objects read from the source in selected namespaces */
	uint64_t pushed;     /* upserts pushed (new or changed) */
	uint64_t unchanged;  /* same content and uid as last pushed: nothing sent */
	uint64_t skipped;    /* not replicated (selection, SPEC §2) */
	uint64_t tombstoned; /* tombstones pushed (deleted on the source) */
} ds_export_counts;

/* Whether a Namespace object is selected (e.g. a label selector). */
typedef bool (*ds_namespace_match_fn)(void *ud, const json_t *namespace_obj);

/*
 * Something the exporter noticed (a kind not served, a watch that failed, an
 * object skipped and why...), for the agent to log: the exporter does not log
 * by itself. Everything is borrowed for the call.
 */
typedef struct ds_exporter_event {
	enum ds_log_level level;
	const char *name;   /* "kind_not_served", "watch_failed", ... (docs/events.md) */
	const char *fields; /* logfmt "key=value ...", never NULL */
} ds_exporter_event;

/* Called on the exporter's threads (the pass, the watches, the sender's results):
 * it must be thread-safe (ds_export_log_event is). */
typedef void (*ds_exporter_event_fn)(void *ud, const ds_exporter_event *ev);

#define DS_EXPORTER_MANIFEST_PART 4096
/* The watch: a change goes out once its object has been unchanged this long
 * (at the latest debounce_ms after its first change). */
#define DS_EXPORTER_QUIET_MS 50

typedef struct ds_exporter_config {
	ds_kube *kube;	       /* the source cluster (borrowed) */
	const char *state_dir; /* where outbox.db lives (created when missing) */
	/* The namespaces: a list (n_namespaces > 0) or a predicate; exactly one. */
	const char *const *namespaces;
	size_t n_namespaces;
	ds_namespace_match_fn ns_match;
	void *ns_match_ud;
	bool replicate_device_classes; /* list DeviceClasses too (default false) */
	long page_size;		       /* list page; default 500 */
	size_t batch_records;	       /* records per outbox transaction; default 256 */
	/* A snapshot's manifest: at most this many entries a record, the rest in
	 * SNAPSHOT_PART records before the end (DS_CAP_MANIFEST_PARTS); default
	 * DS_EXPORTER_MANIFEST_PART (4,096 entries, about 0.5 MB) */
	size_t manifest_part_entries;
	long long debounce_ms;	   /* watch: coalescing window; default 200 */
	long long quiet_ms;	   /* watch: quiet time before a change goes; default 50 */
	int watch_timeout_seconds; /* per watch request; default 300 */
	/* Called during a pass after each page listed, with the kind being
	 * listed and the counts so far (may be NULL). */
	void (*on_progress)(void *ud, const char *kind, const ds_export_counts *so_far);
	void *progress_ud;
	/* Records were pushed (may be NULL): e.g. ds_sender_wake(). */
	void (*on_pushed)(void *ud, uint64_t last_seq);
	void *pushed_ud;
	ds_exporter_event_fn on_event; /* may be NULL: the events are dropped */
	void *event_ud;
	/* `relocate`'s final pass (ds_exporter_pass_namespace()): this namespace
	 * is exported while its relocation is syncing, though relocations
	 * exclude it (source_relocation.h); NULL: none. */
	const char *relocating_ns;
	/* Called for each object a pass lists in a selected namespace, before
	 * the exporter reads it (may be NULL): kind is enum ds_kind_id, item as
	 * the server sent it (borrowed: copy what is kept). `relocate` parks and
	 * marks from its final pass's lists instead of listing again. */
	void (*on_listed)(void *ud, int kind, const char *api_version, const json_t *item);
	void *listed_ud;
} ds_exporter_config;

/** Defaults; kube, state_dir and the namespaces stay unset. */
void ds_exporter_config_default(ds_exporter_config *cfg);

/** "STATE_DIR/outbox.db" into buf. @return 0, -ENAMETOOLONG */
int ds_export_db_path(const char *state_dir, char *buf, size_t size);

/**
 * Open the outbox and the index in cfg->state_dir (no cluster access yet).
 * @return 0, -EINVAL for a bad configuration, or the error opening the files
 */
int ds_exporter_new(ds_exporter **out, const ds_exporter_config *cfg, ds_err *err);
void ds_exporter_free(ds_exporter *ex);

/**
 * One pass (interval, cron, once, and the start of watch): list every
 * selected object page by page, push what differs from the index, tombstone
 * what the source no longer has; a snapshot when one is due. A kind that
 * cannot be listed is reported in err and left untouched (no tombstones for
 * it); the others are still passed.
 * @param out  the pass's counts (may be NULL), also on a partial failure
 * @return 0, -ECANCELED when stopped, or the first error (after the pass)
 */
int ds_exporter_pass(ds_exporter *ex, ds_export_counts *out, ds_err *err);

/**
 * One namespace's objects, kind by kind, against the index (and its
 * Namespace object): what differs pushed, what the index holds and the
 * source no longer has tombstoned. Nothing else is touched: no snapshot, no
 * other namespace forgotten. `relocate`'s final pass uses it, with
 * cfg.relocating_ns = ns.
 * @return 0, -ECANCELED when stopped, or the first error
 */
int ds_exporter_pass_namespace(ds_exporter *ex, const char *ns, ds_export_counts *out, ds_err *err);

/**
 * Watch mode: a pass, then one watch per kind from the resourceVersion of
 * its list; changes are debounced and pushed, namespaces picked up and
 * dropped as they start and stop matching; a watch whose resourceVersion
 * expired (410) relists its kind page by page against the index.
 * Runs until ds_exporter_stop().
 * @return 0 when stopped, or a fatal error (the outbox cannot be written)
 */
int ds_exporter_watch(ds_exporter *ex, ds_err *err);

/** Make ds_exporter_pass() or ds_exporter_watch() return soon. Any thread. */
void ds_exporter_stop(ds_exporter *ex);

/** Make the next pass (or the watch, at once) a full snapshot. Any thread. */
void ds_exporter_request_snapshot(ds_exporter *ex);

/**
 * ds_sender_config.on_results with ud = the exporter: the target's results
 * for an Ack's records are stored on the objects in the index, in one
 * transaction; failed and skipped ones are logged as warnings once per
 * object and reason. Any thread.
 */
void ds_exporter_on_results(void *ud, const ds_wire_result *v, size_t n);

/**
 * Whether a snapshot was asked for and no pass has sent it yet: interval and
 * cron schedules should run a pass now rather than at the next slot (the
 * sender waits for it). Any thread.
 */
bool ds_exporter_snapshot_wanted(ds_exporter *ex);

/** ds_sender_config.on_snapshot_required with ud = the exporter. */
void ds_exporter_on_snapshot_required(void *ud, uint64_t target_committed_seq);

/** The highest seq pushed so far (0 when none): what `once` waits for. */
uint64_t ds_exporter_last_seq(ds_exporter *ex);

/** Results received since ds_exporter_new(), per enum ds_result_status. Any thread. */
void ds_exporter_result_counts(ds_exporter *ex, uint64_t counts[DS_RESULT_STATUS_MAX]);

#endif
