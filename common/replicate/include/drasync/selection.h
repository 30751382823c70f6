#ifndef DRASYNC_SELECTION_H
#define DRASYNC_SELECTION_H

/*
 * Which objects drasync replicates (SPEC §2): workloads, ResourceClaims and
 * templates, what workloads need to start, the Namespace itself; never objects
 * a controller owns, generated claims, slices, events, endpoints, the
 * kube-root-ca.crt ConfigMap or service-account token Secrets.
 */

#include "drasync/err.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/**
 * Decide whether `obj` is replicated. Skipping is not a failure: err (may be
 * NULL) then says why in one sentence.
 * @return 1 replicate, 0 skip
 */
int ds_selection_check(const json_t *obj, bool replicate_device_classes, ds_err *err);

/**
 * Why a kind outside the table is never replicated (ResourceSlice, Event,
 * DeviceTaintRule, ...), for `kind` in API group `group` ("" core); NULL when
 * the kind is simply not one drasync knows.
 */
const char *ds_selection_never_reason(const char *kind, const char *group);

/**
 * Rank of an object in the target's apply order (SPEC §5): Namespace,
 * ServiceAccount, ConfigMap, Secret, PVC, Service, DeviceClass,
 * ResourceClaimTemplate, ResourceClaim, Workload, PodGroup, then workloads
 * (lower first); ds_kind_rank() of its kind, after everything known when it has none.
 */
int ds_selection_apply_rank(const json_t *obj);

#endif
