#ifndef DRASYNC_PREFLIGHT_H
#define DRASYNC_PREFLIGHT_H

/*
 * What an object needs on the target before it can work (SPEC §5): the
 * ResourceClaims and ResourceClaimTemplates a workload's pod spec and a Job's
 * spec.scheduling reference (after mapping), the PodGroup its pods join
 * (spec.schedulingGroup.podGroupName); a PodGroup's claims, templates and its
 * Workload, a Workload's templates' claims; the DeviceClasses claims and
 * templates request, and those the DRA resource names of a ResourceQuota or
 * LimitRange name (dra_quota.h).
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

/** Called once per (container, extended resource); return < 0 to stop. */
typedef int (*ds_preflight_ext_fn)(void *userdata, const char *container, const char *resource);

/**
 * Enumerate the extended resources (nvidia.com/gpu, and KEP-5004's implicit
 * deviceclass.resource.kubernetes.io/<class>) that obj's containers and init
 * containers keep in their limits or requests, each once per container.
 * @return 0, or the callback's negative value
 */
int ds_preflight_extended(const json_t *obj, ds_preflight_ext_fn fn, void *userdata);

/**
 * Whether DeviceClass dc serves extended resource `resource` (KEP-5004): its
 * spec.extendedResourceName, or the implicit deviceclass.resource.kubernetes.io/<name>.
 */
int ds_preflight_class_serves(const json_t *dc, const char *resource);

/* The namespace label that grants admin access to devices (Kubernetes 1.36 GA,
 * DRAAdminNamespaceLabelKey): a claim or template with adminAccess: true is
 * refused (422) in a namespace without it, value "true" exactly. A grant of
 * the target's admins: drasync never sets it, nor copies it from the source. */
#define DS_ADMIN_ACCESS_LABEL "resource.kubernetes.io/admin-access"

/**
 * The first request of a ResourceClaim or ResourceClaimTemplate that asks for
 * admin access: requests[].exactly.adminAccess in resource.k8s.io v1 and
 * v1beta2, requests[].adminAccess in v1beta1 (subrequests cannot ask for it).
 * @return its name (borrowed from obj), or NULL (none, or another kind)
 */
const char *ds_preflight_admin_access(const json_t *obj);

/** Whether Namespace ns carries DS_ADMIN_ACCESS_LABEL: "true". */
int ds_preflight_admin_granted(const json_t *ns);

#endif
