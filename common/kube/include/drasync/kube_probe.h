#ifndef DRASYNC_KUBE_PROBE_H
#define DRASYNC_KUBE_PROBE_H

/*
 * Is the API server reachable, for an agent's /readyz: GET /version on a
 * transport of its own (short timeouts, no retries, so a probe never waits
 * behind the agent's own requests or their backoff). The answer is kept for a
 * moment so that frequent probes cost one request. Safe from any thread.
 */

#include "drasync/err.h"
#include "drasync/kube_client.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct ds_kube_probe ds_kube_probe;

/**
 * A probe of k's API server (k borrowed: must outlive the probe), each
 * request bounded by timeout_ms, an answer reused for cache_ms.
 * @return 0, -ENOMEM, -EINVAL (bad server URL)
 */
int ds_kube_probe_new(ds_kube_probe **out, ds_kube *k, long timeout_ms, long cache_ms, ds_err *err);
void ds_kube_probe_free(ds_kube_probe *p);

/**
 * Whether the API server answered (any HTTP status but a 5xx counts: it is
 * up, whoever we are). When not, why (one line) goes into why.
 */
bool ds_kube_probe_reachable(ds_kube_probe *p, char *why, size_t why_size);

#endif
