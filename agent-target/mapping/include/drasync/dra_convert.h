#ifndef DRASYNC_DRA_CONVERT_H
#define DRASYNC_DRA_CONVERT_H

/*
 * resource.k8s.io version conversion (SPEC §4) for ResourceClaim,
 * ResourceClaimTemplate and DeviceClass. v1beta1 (and the older v1alpha3)
 * keep a request's device selection flat on the request; v1beta2 and v1 put
 * it under `requests[].exactly`; `firstAvailable` has one shape everywhere.
 * A field the conversion does not know is an error naming it, never dropped.
 */

#include "drasync/err.h"

#include <jansson.h>

enum ds_dra_version {
	DS_DRA_V1ALPHA3, /* read only: 1.31 */
	DS_DRA_V1BETA1,
	DS_DRA_V1BETA2,
	DS_DRA_V1,
	DS_DRA_VERSION_MAX
};

/**
 * Parse "resource.k8s.io/v1", or just "v1".
 * @return 0 or -EINVAL
 */
int ds_dra_version_parse(const char *s, enum ds_dra_version *out);

/** "resource.k8s.io/v1" etc. */
const char *ds_dra_api_version(enum ds_dra_version v);

/** Whether the object is a ResourceClaim, ResourceClaimTemplate or DeviceClass of resource.k8s.io.
 */
int ds_dra_is_convertible(const json_t *obj);

/**
 * Convert obj in place to version `to`. On error obj is unchanged.
 * @return 1 converted, 0 nothing to do (not a DRA object, or already `to`),
 *         -EINVAL (err names the field), -ENOMEM
 */
int ds_dra_convert(json_t *obj, enum ds_dra_version to, ds_err *err);

#endif
