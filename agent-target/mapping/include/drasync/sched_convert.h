#ifndef DRASYNC_SCHED_CONVERT_H
#define DRASYNC_SCHED_CONVERT_H

/*
 * scheduling.k8s.io version conversion for the workload-level DRA objects,
 * Workload and PodGroup. Kubernetes 1.36 serves them as v1alpha2 (PodGroup
 * spec.podGroupTemplateRef.workload{workloadName, podGroupTemplateName},
 * disruptionMode a string "Pod" | "PodGroup"); 1.37 as v1beta1 (PodGroup
 * spec.workloadRef{workloadName, templateName}, disruptionMode a union
 * {single: {}} | {all: {}}), with no conversion between the two on the
 * server. 1.37 serves v1alpha3 as well (gate and runtime-config): its Workload
 * and PodGroup have v1beta1's fields and shapes (k8s.io/api v0.37.2), so
 * between those two only the fields are checked; v1alpha3's own
 * CompositePodGroup is not a kind drasync replicates. Field by field: a field the target version
 * cannot hold, or one the conversion does not know, is an error naming it, never dropped.
 */

#include "drasync/err.h"

#include <jansson.h>

enum ds_sched_version {
	DS_SCHED_AS_IS, /* no conversion (the target's version is not known) */
	/* in the order of preference: the last one the target serves is picked */
	DS_SCHED_V1ALPHA2,
	DS_SCHED_V1ALPHA3,
	DS_SCHED_V1BETA1,
	DS_SCHED_VERSION_MAX
};

/**
 * Parse "scheduling.k8s.io/v1beta1", or just "v1beta1".
 * @return 0 or -EINVAL
 */
int ds_sched_version_parse(const char *s, enum ds_sched_version *out);

/** "scheduling.k8s.io/v1beta1"; NULL for DS_SCHED_AS_IS. */
const char *ds_sched_api_version(enum ds_sched_version v);

/** Whether obj is a scheduling.k8s.io Workload or PodGroup. */
int ds_sched_is_group(const json_t *obj);

/**
 * Convert a Workload or PodGroup in place to version `to`. On error obj is
 * unchanged.
 * @return 1 converted, 0 nothing to do (another kind, already `to`, or
 *         DS_SCHED_AS_IS), -EINVAL (err names the field), -ENOMEM
 */
int ds_sched_convert(json_t *obj, enum ds_sched_version to, ds_err *err);

#endif
