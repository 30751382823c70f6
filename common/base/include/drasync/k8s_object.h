#ifndef DRASYNC_K8S_OBJECT_H
#define DRASYNC_K8S_OBJECT_H

/*
 * Identity of Kubernetes objects held as jansson values: apiVersion split into
 * group and version, kind, namespace, name, and where each workload kind keeps
 * its pod spec. Every accessor tolerates malformed objects (returns NULL / -1).
 */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The workload kinds drasync replicates and maps. */
enum ds_workload {
	DS_WORKLOAD_POD,
	DS_WORKLOAD_DEPLOYMENT,
	DS_WORKLOAD_REPLICASET,
	DS_WORKLOAD_STATEFULSET,
	DS_WORKLOAD_DAEMONSET,
	DS_WORKLOAD_JOB,
	DS_WORKLOAD_CRONJOB,
	DS_WORKLOAD_MAX
};

/** The kind name of a workload ("Deployment"). */
const char *ds_workload_name(enum ds_workload w);

/** Workload of a kind name (exact, as in `kind:`), or -1 when it is not one. */
int ds_workload_from_kind(const char *kind);

/** String member `key` of object `obj`, or NULL when absent or not a string. */
const char *ds_json_str(const json_t *obj, const char *key);

/** Follow a dotted path of object members ("spec.template.spec"); NULL when absent. */
json_t *ds_json_path(const json_t *obj, const char *dotted);

/**
 * Get object member `key` of `obj`, creating an empty object there when it is
 * absent. NULL when `obj` is not an object, the member is not an object, or
 * out of memory.
 */
json_t *ds_json_object_ensure(json_t *obj, const char *key);

const char *ds_obj_api_version(const json_t *obj);
const char *ds_obj_kind(const json_t *obj);
const char *ds_obj_name(const json_t *obj);
const char *ds_obj_namespace(const json_t *obj);

/**
 * Group of the object's apiVersion into buf ("" for the core group "v1",
 * "apps" for "apps/v1"). @return buf, or NULL when apiVersion is missing
 */
const char *ds_obj_group(const json_t *obj, char *buf, size_t size);

/** Version part of the apiVersion ("v1" of "apps/v1"), or NULL. */
const char *ds_obj_version(const json_t *obj);

/** Whether the object's apiVersion is in group `group` ("" = core). */
bool ds_obj_in_group(const json_t *obj, const char *group);

/**
 * The pod spec of a workload (Pod `spec`, controllers `spec.template.spec`,
 * CronJob `spec.jobTemplate.spec.template.spec`), borrowed. NULL when the
 * object is not a workload or has no pod spec.
 */
json_t *ds_obj_pod_spec(const json_t *obj, enum ds_workload *kind_out);

/** "Kind namespace/name" (or "Kind name") for messages, into buf. @return buf */
const char *ds_obj_describe(const json_t *obj, char *buf, size_t size);

/**
 * As ds_obj_describe(), naming a namespaced object in namespace ns (NULL: its
 * own): an object as the source has it, named where the one being mapped goes.
 */
const char *ds_obj_describe_in(const json_t *obj, const char *ns, char *buf, size_t size);

/** Annotation value, or NULL. */
const char *ds_obj_annotation(const json_t *obj, const char *key);

/** Label value, or NULL. */
const char *ds_obj_label(const json_t *obj, const char *key);

/** Set metadata.namespace. @return 0, -EINVAL (no object), -ENOMEM */
int ds_obj_set_namespace(json_t *obj, const char *ns);

/** Set an annotation (creating metadata.annotations). @return 0, -EINVAL, -ENOMEM */
int ds_obj_set_annotation(json_t *obj, const char *key, const char *value);

/** Set a label (creating metadata.labels). @return 0, -EINVAL, -ENOMEM */
int ds_obj_set_label(json_t *obj, const char *key, const char *value);

/** RFC 1123 DNS label: 1-63 of [a-z0-9-], alphanumeric at both ends. */
bool ds_dns_label_valid(const char *s);

/** RFC 1123 DNS subdomain: at most 253, dot-separated DNS labels. */
bool ds_dns_subdomain_valid(const char *s);

#endif
