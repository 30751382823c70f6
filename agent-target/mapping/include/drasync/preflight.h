#ifndef DRASYNC_PREFLIGHT_H
#define DRASYNC_PREFLIGHT_H

/*
 * What an object needs on the target before it can work (SPEC §5): the
 * ResourceClaims and ResourceClaimTemplates a workload's pod spec and a Job's
 * spec.scheduling reference (after mapping), the PodGroup its pods join
 * (spec.schedulingGroup.podGroupName); a PodGroup's claims, templates and its
 * Workload, a Workload's templates' claims; and the DeviceClasses claims and
 * templates request.
 */

#include <jansson.h>

/** Called once per needed object; return < 0 to stop. */
typedef int (*ds_preflight_need_fn)(void *userdata, const char *kind, const char *namespace_,
				    const char *name);

/**
 * Enumerate what obj needs (namespace is obj's, NULL for DeviceClasses).
 * @return 0, or the callback's negative value
 */
int ds_preflight_needs(const json_t *obj, ds_preflight_need_fn fn, void *userdata);

#endif
