#ifndef DRASYNC_VERIFY_H
#define DRASYNC_VERIFY_H

/*
 * Verification (SPEC §5, the seed's step 7 automated): whether each workload
 * the ledger put on the target is what its namespace's form promises, judged
 * from the live cluster, and why not in the cluster's own words.
 *
 * Active form (migrate, after failover, a drill):
 *   - Deployment: the pods of its ReplicaSets (owner chain by uid: pods owned by
 *     a ReplicaSet the Deployment owns, selected by spec.selector), StatefulSet
 *     and ReplicaSet: the pods they own; not terminating, spec.replicas of them
 *     (default 1), each scheduled and Running with every container running.
 *     Readiness is not required: probes are the application's business (a model
 *     that loads for minutes), the question here is placement, devices, start.
 *   - DaemonSet: status.desiredNumberScheduled pods (0 is not verified: no node
 *     of the target takes it), as above; the standby node selector is "parked".
 *   - Job: complete, or its pods (owned, label batch.kubernetes.io/job-name)
 *     Running or Succeeded; a Failed condition is not verified.
 *   - CronJob: exists and is not suspended (unless the source suspended it:
 *     annotation drasync.io/suspend "true"). It has no pods until its schedule
 *     fires, so nothing more is checked.
 *   - bare Pod: scheduled and Running.
 *   For each pod, every ResourceClaim it uses (status.resourceClaimStatuses and
 *   spec.resourceClaims[].resourceClaimName) exists and has status.allocation.
 *   Not verified says why: the PodScheduled=False message (the scheduler's
 *   FailedScheduling text), the claim that is not allocated and a DeviceClass its
 *   requests name that does not exist, a container's waiting reason and message
 *   (ErrImagePull, CrashLoopBackOff), the controller's ReplicaFailure message.
 * Standby form: the object exists and is parked: Deployment, StatefulSet,
 *   ReplicaSet with replicas 0 and annotation drasync.io/replicas; CronJob
 *   suspended; DaemonSet with nodeSelector drasync.io/standby; a Pod or Job the
 *   ledger holds is not on the cluster.
 * In both forms the ResourceClaims and ResourceClaimTemplates the pod template
 * names directly exist (the seed: "the mapped claim or template is present").
 * A ResourceClaim or ResourceClaimTemplate the ledger has waiting for the
 * admin-access grant (its Namespace without resource.kubernetes.io/admin-access:
 * "true") is an item too: verified once it is on the target, else it says
 * whether the target's Namespace has the grant now.
 */

#include "drasync/err.h"
#include "drasync/kube_client.h"
#include "drasync/target_config.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum ds_verify_form {
	DS_VERIFY_ACTIVE,  /* workloads run */
	DS_VERIFY_STANDBY, /* workloads exist parked */
	DS_VERIFY_FORM_MAX
};

/** "active" or "standby". */
const char *ds_verify_form_name(enum ds_verify_form f);

#define DS_VERIFY_REASON_MAX 1024

/* One workload to verify, and its outcome. Strings owned (ds_verify_items_free). */
typedef struct ds_verify_item {
	char *kind, *ns, *name; /* on the target */
	enum ds_verify_form form;
	bool held; /* the ledger holds it (standby Pod/Job): it must not be on the cluster */
	/* The ledger's state and reason when the workload is not applied (else NULL):
	 * added to the reason when the cluster does not have it. */
	char *ledger_state, *ledger_reason;
	/* Outcome of the last check. */
	bool verified;
	char reason[DS_VERIFY_REASON_MAX]; /* not verified: why; verified: what was seen */
	double seconds; /* verified: seconds from the start until verified; else spent */
} ds_verify_item;

/*
 * The form of a target namespace. THE one place it is decided for `verify`
 * and the running importer's verifier: today the TargetConfig's mode for
 * every namespace; the ledger's per-namespace modes (failover, failback)
 * plug in here.
 */
typedef enum ds_verify_form (*ds_verify_form_fn)(void *ud, const char *target_ns);

struct ds_namespace_modes;

/* Where ds_verify_namespace_form() reads a namespace's mode. */
typedef struct ds_verify_modes {
	const ds_target_config *cfg; /* its `mode` for namespaces the ledger does not name */
	const char *ledger_path; /* the ledger's namespace_modes (failover, failback); NULL: none */
	struct ds_namespace_modes *nm; /* opened on first use, kept (ds_verify_modes_dispose) */
} ds_verify_modes;

/**
 * The ds_verify_form_fn for `verify`, drill and the running importer (ud: a
 * ds_verify_modes, used from one thread): the mode the ledger records for
 * target_ns (failover made it active, failback standby), else the
 * configuration's; standby is the standby form, migrate the active one. The
 * table is read on each call, so a failover made by another process counts at
 * once; the ledger is opened once.
 */
enum ds_verify_form ds_verify_namespace_form(void *modes, const char *target_ns);

/** Close what ds_verify_namespace_form() opened. */
void ds_verify_modes_dispose(ds_verify_modes *m);

/* Which workloads of the ledger ds_verify_items_from_ledger() reads. */
typedef struct ds_verify_select {
	const char *const *namespaces; /* target namespaces; NULL or n_namespaces 0: all */
	size_t n_namespaces;
	/* The target namespace of a source namespace, for rows never applied; NULL: same. */
	const char *(*map_ns)(void *ud, const char *source_ns);
	void *map_ud;
	ds_verify_form_fn form_of; /* NULL: active everywhere */
	void *form_ud;
} ds_verify_select;

/**
 * The workloads of the ledger at path (every workload upsert that is applied,
 * held, pending, waiting or failed; target names), ordered by namespace, kind
 * and name. *items is a new array (ds_verify_items_free).
 * @return 0, -ENOENT when there is no ledger (err says so), or a negative errno
 */
int ds_verify_items_from_ledger(const char *path, const ds_verify_select *sel,
				ds_verify_item **items, size_t *n, ds_err *err);

/** A new item (strings copied); for callers that build their own list. @return 0 or -ENOMEM */
int ds_verify_item_init(ds_verify_item *it, const char *kind, const char *ns, const char *name,
			enum ds_verify_form form, bool held);
void ds_verify_item_dispose(ds_verify_item *it);
void ds_verify_items_free(ds_verify_item *items, size_t n);

/* ---- the judgement, apart from the cluster (unit-tested) ---- */

/* What was read from the cluster about one workload (all borrowed). */
typedef struct ds_verify_view {
	const json_t *obj;	 /* the workload; NULL: not on the cluster */
	const json_t *pods;	 /* array of its pods (owned, not terminating); NULL: none */
	const json_t *claims;	 /* object: ResourceClaim name -> the claim, JSON null: absent */
	const json_t *templates; /* object: ResourceClaimTemplate name -> true / false: absent */
	const json_t *classes;	 /* object: DeviceClass name -> true / false: absent */
} ds_verify_view;

/**
 * Judge one workload from what was read. Fills it->verified and it->reason.
 * @return 1 verified, 0 not
 */
int ds_verify_judge(ds_verify_item *it, const ds_verify_view *v);

/**
 * The names of the ResourceClaims pod uses (status.resourceClaimStatuses and
 * spec.resourceClaims[].resourceClaimName), appended to the array names
 * (without duplicates). @return the number appended, or -ENOMEM
 */
int ds_verify_pod_claims(const json_t *pod, json_t *names);

/**
 * The DeviceClass names a ResourceClaim's or ResourceClaimTemplate's requests
 * name (v1 exactly / firstAvailable, v1beta1 flat), appended to names without
 * duplicates. @return the number appended, or -ENOMEM
 */
int ds_verify_device_classes(const json_t *claim_or_template, json_t *names);

/**
 * spec.selector (matchLabels, matchExpressions) as a labelSelector query into
 * buf. @return 0, -EINVAL (no selector or an operator it cannot say), -ENOSPC
 */
int ds_verify_label_selector(const json_t *selector, char *buf, size_t size);

/* ---- against the cluster ---- */

typedef struct ds_verify ds_verify;

/**
 * A verifier on client k (borrowed; lives as long as the verifier). It finds
 * the resource.k8s.io version the target serves (v1 preferred).
 */
int ds_verify_new(ds_verify **out, ds_kube *k, ds_err *err);
void ds_verify_free(ds_verify *v);

/**
 * Use the ResourceClaimTemplates and DeviceClasses read (or found absent)
 * again for ms, in place of a GET each check (0: read every time, the
 * default). For a caller that checks the same workloads every few hundred
 * milliseconds while their pods start: what the pods refer to changes
 * rarely, the pods and claims themselves are read every time.
 */
void ds_verify_keep_refs(ds_verify *v, int64_t ms);

/**
 * Read what it->kind ns/name is on the cluster now and judge it.
 * @return 1 verified, 0 not (it->reason says why; an API error that is not
 *         404 is a reason too), or -ENOMEM
 */
int ds_verify_check(ds_verify *v, ds_verify_item *it);

/* Called once per item when it is settled: verified, or not verified at the deadline. */
typedef void (*ds_verify_progress_fn)(void *ud, const ds_verify_item *it, size_t settled,
				      size_t total);

typedef struct ds_verify_opts {
	long long timeout_ms;  /* the deadline from the start; 0: check once */
	long long interval_ms; /* between rounds; 0: 2000 */
	ds_verify_progress_fn progress;
	void *ud;
	const atomic_bool *stop; /* set from another thread: end now (NULL: none) */
} ds_verify_opts;

typedef struct ds_verify_summary {
	size_t total, verified, not_verified;
	double seconds; /* the whole run */
} ds_verify_summary;

/**
 * Check every item, again each interval for those not verified yet, until
 * all are verified or the deadline passes (or stop is set). A verified item
 * is not checked again. sum may be NULL.
 * @return the number not verified (>= 0), or a negative errno
 */
int ds_verify_run(ds_verify *v, ds_verify_item *items, size_t n, const ds_verify_opts *o,
		  ds_verify_summary *sum, ds_err *err);

/* ---- in the ledger ---- */

/**
 * Store the outcomes in the ledger at path, table
 *   verifications(kind, namespace, name, form, verified, reason, checked_at, seconds)
 * one row per workload (the last verification), and drop the rows of
 * workloads the ledger no longer has. @return 0 or a negative errno
 */
int ds_verify_store(const char *path, const ds_verify_item *items, size_t n, ds_err *err);

#endif
