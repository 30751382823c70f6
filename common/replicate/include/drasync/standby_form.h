#ifndef DRASYNC_STANDBY_FORM_H
#define DRASYNC_STANDBY_FORM_H

/*
 * The standby form of a workload (SPEC §5), shared by the target's standby
 * mode (agent-target/mapping standby.h, which reports it) and the source's
 * planned relocation (which parks its own workloads so): Deployments,
 * StatefulSets and ReplicaSets get replicas 0 with the count in annotation
 * drasync.io/replicas; CronJobs are suspended (the value before in
 * drasync.io/suspend); DaemonSets get a node selector no node matches
 * (drasync.io/standby: "true", also an annotation). Bare Pods and Jobs have no
 * standby form: they are held (target) or deleted once relocated (source).
 * ds_standby_form_unpark() is the way back, from the annotations.
 */

#include <jansson.h>
#include <stddef.h>

#define DS_ANNOTATION_REPLICAS "drasync.io/replicas"
#define DS_ANNOTATION_SUSPEND "drasync.io/suspend"
#define DS_ANNOTATION_STANDBY "drasync.io/standby"
#define DS_STANDBY_NODE_LABEL "drasync.io/standby"
/* A target namespace's mode, as drasync-target writes it on the Namespace
 * ("active" or "standby"), and since when (RFC 3339, UTC). */
#define DS_NS_ANNOTATION_MODE "drasync.io/mode"
#define DS_NS_ANNOTATION_MODE_SINCE "drasync.io/mode-since"
/* What a drasync-target writes on each object it applies: the source cluster. */
#define DS_ANNOTATION_SOURCE_CLUSTER_MARK "drasync.io/source-cluster"
/* The relocation's mark: on what `relocate` (or `park`) parked on the cluster
 * it left, the target it went to; that cluster's drasync-target may update it
 * (reverse replication) without adoptExisting. */
#define DS_ANNOTATION_RELOCATED_TO "drasync.io/relocated-to"

enum ds_standby_form {
	DS_STANDBY_FORM_NONE,	   /* not a workload with a standby form */
	DS_STANDBY_FORM_SCALED,	   /* replicas 0; was: the count before */
	DS_STANDBY_FORM_SUSPENDED, /* suspend true; was: "true" or "false" */
	DS_STANDBY_FORM_PARKED,	   /* the node selector no node matches */
	DS_STANDBY_FORM_HOLD,	   /* a bare Pod or Job */
};

/**
 * Put obj in its standby form in place; was (may be NULL) gets the value
 * before ("3", "false"), "" when there is none.
 * @return enum ds_standby_form, or -ENOMEM
 */
int ds_standby_form_park(json_t *obj, char *was, size_t size);

/**
 * Whether obj is in the standby form ds_standby_form_park() gives it (its
 * annotation is there and the spec says so): parking it again would lose
 * the value kept.
 */
int ds_standby_form_is_parked(const json_t *obj);

/**
 * Bring obj back from its standby form, in place, from the annotations (which
 * are removed). @return 1 changed, 0 it was not parked, -ENOMEM
 */
int ds_standby_form_unpark(json_t *obj);

#endif
