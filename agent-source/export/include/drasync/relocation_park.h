#ifndef DRASYNC_RELOCATION_PARK_H
#define DRASYNC_RELOCATION_PARK_H

/*
 * The source cluster's side of a planned relocation (SPEC §5): park a
 * namespace's workloads as standby parks them (standby_form.h: replicas 0
 * with the count in drasync.io/replicas, CronJobs suspended, DaemonSets on
 * no node), bring them back when the relocation fails, and delete the bare
 * Pods and Jobs once the target runs them (the target's ledger holds them:
 * its failover created them). Objects owned by another (a ReplicaSet of a
 * Deployment, a Job of a CronJob, a controller's Pod) are left to their
 * owner. Every write is a PUT with the resourceVersion read (a conflict reads
 * again); what changed is said one line per object.
 */

#include "drasync/err.h"
#include "drasync/kube_client.h"

#include <jansson.h>
#include <stddef.h>

typedef void (*ds_relocation_say_fn)(void *ud, const char *line);

/** Park ns's workloads. @return how many changed (>= 0), or a negative errno (err says which) */
int ds_relocation_park(ds_kube *k, const char *ns, ds_relocation_say_fn say, void *ud, ds_err *err);

/** Bring ns's parked workloads back from the annotations. @return how many changed, or < 0 */
int ds_relocation_unpark(ds_kube *k, const char *ns, ds_relocation_say_fn say, void *ud,
			 ds_err *err);

/**
 * The relocation's mark: annotation drasync.io/relocated-to = to on every
 * object of ns of a kind drasync replicates (but bare Pods and Jobs, and
 * objects owned by another), a merge patch each, so that this cluster's
 * drasync-target may update them from the other site (reverse replication)
 * without adoptExisting. @return how many were marked, or < 0
 */
int ds_relocation_mark(ds_kube *k, const char *ns, const char *to, ds_relocation_say_fn say,
		       void *ud, ds_err *err);

/**
 * ds_relocation_park() and ds_relocation_mark() in one pass: a workload is
 * parked and marked in the same write. The objects are those of listed
 * (ds_relocation_listed_add(): what the final pass just listed, each kind
 * once; an object changed since is read again at its write's conflict), or
 * when listed is NULL each kind listed here. *marked (may be NULL) gets how
 * many objects were marked. @return how many were parked (>= 0), or a
 * negative errno (err says which; some may be parked and marked)
 */
int ds_relocation_park_mark(ds_kube *k, const char *ns, const char *to, const json_t *listed,
			    int *marked, ds_relocation_say_fn say, void *ud, ds_err *err);

/**
 * Keep a copy of item, an object of kind (its name in the kinds table)
 * served as api_version, in listed (a JSON object) for
 * ds_relocation_park_mark(). @return 0 or -ENOMEM
 */
int ds_relocation_listed_add(json_t *listed, const char *kind, const char *api_version,
			     const json_t *item);

/**
 * The mark taken off again (a relocation refused or failed: nothing of ns
 * went): annotation drasync.io/relocated-to removed, a merge patch each, from
 * the objects where it says to. @return how many were unmarked, or < 0
 */
int ds_relocation_unmark(ds_kube *k, const char *ns, const char *to, ds_relocation_say_fn say,
			 void *ud, ds_err *err);

/** Delete ns's bare Pods and Jobs. @return how many were deleted, or < 0 */
int ds_relocation_remove_bare(ds_kube *k, const char *ns, ds_relocation_say_fn say, void *ud,
			      ds_err *err);

#endif
