#ifndef DRASYNC_STANDBY_H
#define DRASYNC_STANDBY_H

/*
 * Standby mode (SPEC §5): the DR copy exists but runs nothing. Deployments,
 * StatefulSets and ReplicaSets get replicas 0 with the source count in
 * annotation drasync.io/replicas; CronJobs are suspended (the source value in
 * drasync.io/suspend); DaemonSets get a node selector no node matches
 * (drasync.io/standby: "true", also set as an annotation); bare Pods and Jobs
 * are held in the target's ledger until failover.
 */

#include "drasync/report.h"
#include "drasync/standby_form.h" /* the form and its annotations, shared with the source */

#include <jansson.h>

enum ds_standby_result {
	DS_STANDBY_UNCHANGED, /* not a workload */
	DS_STANDBY_CHANGED,   /* transformed in place */
	DS_STANDBY_HOLD,      /* a bare Pod or Job: keep it in the ledger, do not create */
};

/**
 * Apply the standby transformation to obj in place, reporting what changed.
 * @return enum ds_standby_result, or -ENOMEM
 */
int ds_standby_apply(json_t *obj, ds_report *rep);

#endif
