#ifndef DRASYNC_POD_SECURITY_H
#define DRASYNC_POD_SECURITY_H

/*
 * The Kubernetes Pod Security Standards (latest version), as the importer
 * checks a source's pod specs against the level its `sources[]` entry grants
 * (SPEC §5 "Trust boundary"). The checks are upstream's: host namespaces,
 * privileged, capabilities, hostPath, host ports, AppArmor, SELinux, /proc
 * mount, seccomp, sysctls, Windows HostProcess at baseline; and at restricted
 * also volume types, privilege escalation, running as non-root, the non-root
 * user, seccomp required and capabilities dropped. `privileged` allows all.
 * Pure logic: no cluster, no I/O.
 */

#include <jansson.h>
#include <stddef.h>

enum ds_pss_level { DS_PSS_PRIVILEGED, DS_PSS_BASELINE, DS_PSS_RESTRICTED, DS_PSS_LEVEL_MAX };

/** "privileged", "baseline", "restricted". @return 0, or -EINVAL */
int ds_pss_level_parse(const char *name, enum ds_pss_level *out);

/** The level's name ("baseline"), "unknown" outside the enum. */
const char *ds_pss_level_name(enum ds_pss_level level);

/**
 * Check one pod: its metadata (annotations; may be NULL) and its spec against
 * level. On a violation why holds every violated check, the first one first,
 * in the form "privileged container c violates podSecurity baseline"
 * (several joined by "; ").
 * @return 0 allowed, 1 a violation, -EINVAL when spec is not an object, -ENOMEM
 */
int ds_pss_check_pod(const json_t *meta, const json_t *spec, enum ds_pss_level level, char *why,
		     size_t size);

/**
 * Check every pod spec an object carries: a Pod's own, the template of a
 * Deployment, ReplicaSet, StatefulSet, DaemonSet or Job, a CronJob's
 * jobTemplate, and the pod templates of a Workload or PodGroup if they have
 * any. An object of another kind has none and is allowed.
 * @return 0 allowed, 1 a violation (why as ds_pss_check_pod()), -ENOMEM
 */
int ds_pss_check_object(const json_t *obj, enum ds_pss_level level, char *why, size_t size);

#endif
