#ifndef DRASYNC_DRA_QUOTA_H
#define DRASYNC_DRA_QUOTA_H

/*
 * deviceClassMappings in the objects that limit a namespace (SPEC §2): the
 * resource names of a ResourceQuota's spec.hard and of a LimitRange's limits
 * that name a DeviceClass. The forms, as the API server's quota evaluator
 * (Kubernetes 1.34-1.37) reads them:
 *   <class>.deviceclass.resource.k8s.io/devices     devices a namespace's
 *                                                   claims request of a class
 *   requests.deviceclass.resource.kubernetes.io/<class>
 *                                                   the same devices, counted
 *                                                   as KEP-5004's implicit
 *                                                   extended resource
 * and, in a LimitRange's max/min/default/defaultRequest/maxLimitRequestRatio,
 * the container resource deviceclass.resource.kubernetes.io/<class>. A
 * quota's scopes name no DeviceClass (they are pod or PVC properties), so
 * spec.scopeSelector is kept. Pure functions of (rules, object): no I/O.
 */

#include "drasync/preflight.h"
#include "drasync/report.h"
#include "drasync/target_config.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/**
 * The DeviceClass a resource name names, copied into buf: `quota` true for a
 * ResourceQuota's forms, false for a LimitRange's.
 * @return buf, or NULL when the name names no class (or does not fit)
 */
const char *ds_dra_quota_key_class(const char *key, bool quota, char *buf, size_t size);

/**
 * Apply deviceClassMappings to the DRA resource names of a ResourceQuota
 * (spec.hard) or LimitRange (spec.limits[]); anything else is left alone and
 * 0 returned. Every rename is a DS_REPORT_DEVICE_CLASS entry of `rep`. Two
 * names that become one (two source classes mapped to one target class) are
 * merged: a quota's integer device counts are added up, equal values kept;
 * other values are an error. On error obj is unchanged and one
 * DS_REPORT_ERROR entry says why.
 * @return number of names renamed (>= 0), -EINVAL (a merge that cannot be
 *         made), -ENOMEM
 */
int ds_dra_map_quota(const ds_dra_config *dra, json_t *obj, ds_report *rep);

/**
 * Enumerate the DeviceClasses the DRA resource names of a ResourceQuota or
 * LimitRange name (as ds_preflight_needs() does for claims: kind
 * "DeviceClass", namespace NULL), each once per map.
 * @return 0, or the callback's negative value
 */
int ds_dra_quota_needs(const json_t *obj, ds_preflight_need_fn fn, void *userdata);

#endif
