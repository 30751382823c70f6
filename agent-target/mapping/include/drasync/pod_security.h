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
 *
 * The checks are version-aware as upstream's are: each Kubernetes minor
 * version since 1.0 has its own rules (sysctls allowed, user namespaces
 * relaxing procMount/runAsNonRoot/runAsUser from 1.35, Windows pods exempt
 * from some restricted checks from 1.25, ...). "latest" is
 * DS_PSS_VERSION_LATEST, the newest version whose rules changed; the fixtures
 * of upstream's pod-security-admission (tests/resources/pss/SOURCE.md names
 * the commit) pass at every version.
 *
 * The spec is read as JSON: a field that is absent or null is unset, a boolean
 * is set only by JSON true; a value of the wrong type (which the API server
 * would refuse to decode) counts against the pod where it could hide a
 * violation (a host port, a capability, a volume source).
 */

#include <jansson.h>
#include <stddef.h>

/* The newest Kubernetes minor version whose Pod Security Standards changed (1.37). */
#define DS_PSS_VERSION_LATEST 37

enum ds_pss_level { DS_PSS_PRIVILEGED, DS_PSS_BASELINE, DS_PSS_RESTRICTED, DS_PSS_LEVEL_MAX };

/** "privileged", "baseline", "restricted". @return 0, or -EINVAL */
int ds_pss_level_parse(const char *name, enum ds_pss_level *out);

/** The level's name ("baseline"), "unknown" outside the enum. */
const char *ds_pss_level_name(enum ds_pss_level level);

/**
 * Check one pod: its metadata (annotations; may be NULL) and its spec against
 * level. On a violation why holds every violated check, the first one first,
 * in the form "privileged container c violates podSecurity baseline"
 * (several joined by "; "), cut to size (always NUL-terminated; why may be
 * NULL); "" when allowed.
 * @return 0 allowed, 1 a violation, -EINVAL when spec is not an object or
 *         level is outside the enum
 */
int ds_pss_check_pod(const json_t *meta, const json_t *spec, enum ds_pss_level level, char *why,
		     size_t size);

/**
 * As ds_pss_check_pod(), at the standards of Kubernetes 1.<minor>: a negative
 * minor, or one newer than DS_PSS_VERSION_LATEST, is the latest.
 */
int ds_pss_check_pod_version(const json_t *meta, const json_t *spec, enum ds_pss_level level,
			     int minor, char *why, size_t size);

/**
 * Check every pod spec an object carries: a Pod's own, the template of a
 * Deployment, ReplicaSet, StatefulSet, DaemonSet or Job, a CronJob's
 * jobTemplate. Workload and PodGroup (scheduling.k8s.io v1alpha2, v1beta1)
 * carry no pod template (their templates are PodGroupTemplates: a name and
 * scheduling policies), so they have none, as has any other kind: allowed.
 * A kind is taken as the built-in one unless its apiVersion names another
 * group; a workload without a pod template has nothing to check.
 * (ReplicationController and PodTemplate carry pod templates too, but drasync
 * does not replicate them: kinds.h.)
 * @return 0 allowed, 1 a violation (why as ds_pss_check_pod()), -EINVAL for a
 *         level outside the enum
 */
int ds_pss_check_object(const json_t *obj, enum ds_pss_level level, char *why, size_t size);

#endif
