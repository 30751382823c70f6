#ifndef DRASYNC_SANITIZE_H
#define DRASYNC_SANITIZE_H

/*
 * Strip what belongs to the source cluster before a record is built (SPEC §2):
 * status, server-set metadata, owner references, the pod's node, allocated
 * Service IPs and node ports, PVC bindings, ResourceClaim allocation and its
 * delete-protection finalizer, a PodGroup's podgroup-protection finalizer, a Job's generated
 * selector and the source Job's uid in its pod template's labels.
 */

#include <jansson.h>

/**
 * Sanitize obj in place.
 * @return 0, -ENOMEM
 */
int ds_sanitize(json_t *obj);

#endif
