#ifndef DRASYNC_SANITIZE_H
#define DRASYNC_SANITIZE_H

/*
 * Strip what belongs to the source cluster before a record is built (SPEC §2):
 * status, server-set metadata, owner references, the pod's node, allocated
 * Service IPs and node ports, PVC bindings, ResourceClaim allocation and its
 * delete-protection finalizer, a PodGroup's podgroup-protection finalizer, a Job's generated
 * selector and the source Job's uid in its pod template's labels; and
 * drasync's own marks (a copy's drasync.io/ annotations and managed-by
 * label: what another site's target wrote never travels back), a copy in
 * standby form brought back to the form it stands for.
 */

#include <jansson.h>

/* The prefix of every annotation drasync writes, and the label it marks its objects with. */
#define DS_DRASYNC_PREFIX "drasync.io/"
#define DS_SANITIZE_MANAGED_BY "app.kubernetes.io/managed-by"

/**
 * Sanitize obj in place.
 * @return 0, -ENOMEM
 */
int ds_sanitize(json_t *obj);

#endif
