#ifndef DRASYNC_FIELD_LOSS_H
#define DRASYNC_FIELD_LOSS_H

/*
 * Fields a target drops. An API server whose feature gate is off, or that is
 * older than the field, accepts an object and silently drops what it does not
 * know (DRA capacity requests and tolerations, PodGroup resourceClaims, a pod's
 * schedulingGroup, a Job's scheduling): the copy looks right and is not. The
 * importer compares what it sent with what the server answered it kept.
 */

#include "drasync/target_config.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/**
 * The field paths of `sent` that `kept` lacks, e.g.
 * "spec.template.spec.schedulingGroup" ([] stands for any list item), except
 * those dra.allowFieldLoss allows (a path allows itself and what is under it)
 * and zero values (null, false, 0, "", {}, []) a server may leave out. status
 * is not compared (a subresource). Written comma-separated into buf, cut to
 * fit, each at most once.
 * @return the number of lost paths (0: nothing lost)
 */
size_t ds_field_loss_find(const json_t *sent, const json_t *kept, const ds_dra_config *dra,
			  char *buf, size_t size);

/**
 * The likely cause of losing a field path: the feature gate (and the
 * Kubernetes version) that serves it, or a general hint. Static string.
 */
const char *ds_field_loss_cause(const char *path);

/**
 * Whether dropping fields matters for obj, so that the server's answer is
 * worth reading: DRA and scheduling.k8s.io objects, and workloads whose pod
 * spec has claims, a scheduling group, or a Job's spec.scheduling.
 */
bool ds_field_loss_relevant(const json_t *obj);

#endif
