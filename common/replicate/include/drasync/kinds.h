#ifndef DRASYNC_KINDS_H
#define DRASYNC_KINDS_H

/*
 * The one table of the kinds drasync replicates or maps (SPEC §2-§5): group,
 * the versions the source prefers, the resource, whether it is namespaced,
 * its rank in the target's apply order and its class. Every list of kinds and
 * every test of a kind name goes through it.
 */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* The kinds, in the table's order: the apply order of SPEC §5, workloads last. */
enum ds_kind_id {
	DS_KIND_NAMESPACE,
	DS_KIND_LIMIT_RANGE,
	DS_KIND_RESOURCE_QUOTA,
	DS_KIND_SERVICE_ACCOUNT,
	DS_KIND_CONFIG_MAP,
	DS_KIND_SECRET,
	DS_KIND_PERSISTENT_VOLUME_CLAIM,
	DS_KIND_SERVICE,
	DS_KIND_DEVICE_CLASS,
	DS_KIND_RESOURCE_CLAIM_TEMPLATE,
	DS_KIND_RESOURCE_CLAIM,
	DS_KIND_WORKLOAD,
	DS_KIND_POD_GROUP,
	DS_KIND_DEPLOYMENT,
	DS_KIND_REPLICA_SET,
	DS_KIND_STATEFUL_SET,
	DS_KIND_DAEMON_SET,
	DS_KIND_JOB,
	DS_KIND_CRON_JOB,
	DS_KIND_POD,
	DS_KIND_MAX
};

enum ds_kind_class {
	DS_KIND_CLASS_NAMESPACE, /* the Namespace itself */
	DS_KIND_CLASS_SUPPORT,	 /* what workloads need to start: ConfigMap, Secret, ... */
	DS_KIND_CLASS_DRA,	 /* resource.k8s.io: DeviceClass, ResourceClaim(Template) */
	DS_KIND_CLASS_GROUP,	 /* scheduling.k8s.io: Workload, PodGroup */
	DS_KIND_CLASS_WORKLOAD,	 /* Pod and its controllers */
	DS_KIND_CLASS_MAX
};

/* The rank ds_kind_rank() gives a kind the table does not hold: after everything. */
#define DS_KIND_RANK_UNKNOWN 14

typedef struct ds_kind {
	enum ds_kind_id id;
	const char *name;	     /* "Deployment", as in `kind:` */
	const char *group;	     /* "" for the core group */
	const char *const *versions; /* preferred first, NULL-terminated */
	const char *resource;	     /* "deployments" */
	bool namespaced;
	int rank; /* apply order (SPEC §5), lower first; workloads share one */
	enum ds_kind_class kind_class;
	int workload; /* its enum ds_workload, or -1 */
} ds_kind;

/** The kind of an id, borrowed from the table; NULL outside it. */
const ds_kind *ds_kind_get(enum ds_kind_id id);

/** The kind of a name ("Deployment", exact); NULL when unknown or NULL. */
const ds_kind *ds_kind_from_name(const char *name);

/** The id of a kind name. @return the id, or -EINVAL when unknown */
int ds_kind_id_from_name(const char *name);

/** The kind of a group ("" core) and resource ("deployments"); NULL when unknown. */
const ds_kind *ds_kind_from_resource(const char *group, const char *resource);

/** The kind of an object: its `kind` in its apiVersion's group; NULL when neither is in the table.
 */
const ds_kind *ds_kind_of(const json_t *obj);

/** Iteration: the number of kinds and the i-th in table order (NULL past the end). */
size_t ds_kind_count(void);
const ds_kind *ds_kind_at(size_t i);

/** Whether `name` names kind `id` (false for NULL). */
bool ds_kind_is(const char *name, enum ds_kind_id id);

/** Whether `name` is a workload kind: Pod, Deployment, ..., CronJob. */
bool ds_kind_is_workload(const char *name);

/** Whether `name` is a resource.k8s.io kind: DeviceClass, ResourceClaim, ResourceClaimTemplate. */
bool ds_kind_is_dra(const char *name);

/** Whether `name` is ResourceClaim or ResourceClaimTemplate (what a pod spec references). */
bool ds_kind_is_claim(const char *name);

/** Whether `name` is a scheduling group: Workload or PodGroup. */
bool ds_kind_is_group(const char *name);

/** Whether the kind is namespaced; a kind the table does not hold counts as namespaced. */
bool ds_kind_namespaced(const char *name);

/** Apply rank of a kind name (SPEC §5); DS_KIND_RANK_UNKNOWN when unknown or NULL. */
int ds_kind_rank(const char *name);

#endif
