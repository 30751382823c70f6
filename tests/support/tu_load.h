#ifndef DRASYNC_TU_LOAD_H
#define DRASYNC_TU_LOAD_H

/*
 * Many objects on a real cluster, fast (after cmocka.h): the load of the
 * reliability tests. Object i of a namespace is, by i % 5, ConfigMap cm-i
 * (0, 1), Secret sec-i (2, 3) or Deployment dep-i (4, replicas 0, so no pod
 * runs), each carrying about `payload` bytes that do not compress. Requests go
 * concurrently (ds_kube_batch); every failure fails the test.
 */

#include "drasync/kube_client.h"

/** Create objects first .. first+n-1 of ns. */
void tu_load_create(ds_kube *k, const char *ns, int first, int n, int payload);

/**
 * Change objects first .. first+n-1 of ns (ConfigMaps and Secrets get new
 * data, Deployments a new annotation), `round` making the content unique.
 */
void tu_load_change(ds_kube *k, const char *ns, int first, int n, int round);

/** Delete objects first .. first+n-1 of ns. */
void tu_load_delete(ds_kube *k, const char *ns, int first, int n);

/**
 * The value of one series (`name` or `name{labels}` exactly as exposed) in
 * the Prometheus text at base/metrics; -1 when absent.
 */
double tu_metric(const char *base, const char *series);

/** DS_SOAK=1 in the environment: the full counts of scripts/soak.sh. */
int tu_soak(void);

#endif
