#include "drasync/kinds.h"

#include "drasync/k8s_object.h"

#include <errno.h>
#include <string.h>

static const char *const v1[] = {"v1", NULL};
/* SPEC §4: v1 (1.34+), else v1beta2 (1.33), else v1beta1 (1.32) */
static const char *const dra_versions[] = {"v1", "v1beta2", "v1beta1", NULL};
/* v1beta1 (1.37), v1alpha3 (1.37), else v1alpha2 (1.36): the versions the target converts
 * between */
static const char *const sched_versions[] = {"v1", "v1beta1", "v1alpha3", "v1alpha2", NULL};

#define CORE(id, name, res, ns, rank, cls)                                                         \
	{                                                                                          \
		id, name, "", v1, res, ns, rank, cls, -1                                           \
	}
#define WORKLOAD(id, name, group, res, w)                                                          \
	{                                                                                          \
		id, name, group, v1, res, true, 13, DS_KIND_CLASS_WORKLOAD, w                      \
	}

/*
 * Indexed by enum ds_kind_id; ranks follow SPEC §5, every workload after the rest.
 * LimitRange and ResourceQuota come right after the Namespace: they govern what
 * is created after them (quota counts ConfigMaps, Secrets, PVCs, Services and
 * claims as well as pods; a LimitRange defaults and bounds pods and PVCs), and
 * the LimitRange first, so that its defaults fill the requests a quota counts.
 */
static const ds_kind table[DS_KIND_MAX] = {
    CORE(DS_KIND_NAMESPACE, "Namespace", "namespaces", false, 0, DS_KIND_CLASS_NAMESPACE),
    CORE(DS_KIND_LIMIT_RANGE, "LimitRange", "limitranges", true, 1, DS_KIND_CLASS_SUPPORT),
    CORE(DS_KIND_RESOURCE_QUOTA, "ResourceQuota", "resourcequotas", true, 2, DS_KIND_CLASS_SUPPORT),
    CORE(DS_KIND_SERVICE_ACCOUNT, "ServiceAccount", "serviceaccounts", true, 3,
	 DS_KIND_CLASS_SUPPORT),
    CORE(DS_KIND_CONFIG_MAP, "ConfigMap", "configmaps", true, 4, DS_KIND_CLASS_SUPPORT),
    CORE(DS_KIND_SECRET, "Secret", "secrets", true, 5, DS_KIND_CLASS_SUPPORT),
    CORE(DS_KIND_PERSISTENT_VOLUME_CLAIM, "PersistentVolumeClaim", "persistentvolumeclaims", true,
	 6, DS_KIND_CLASS_SUPPORT),
    CORE(DS_KIND_SERVICE, "Service", "services", true, 7, DS_KIND_CLASS_SUPPORT),
    {DS_KIND_DEVICE_CLASS, "DeviceClass", "resource.k8s.io", dra_versions, "deviceclasses", false,
     8, DS_KIND_CLASS_DRA, -1},
    {DS_KIND_RESOURCE_CLAIM_TEMPLATE, "ResourceClaimTemplate", "resource.k8s.io", dra_versions,
     "resourceclaimtemplates", true, 9, DS_KIND_CLASS_DRA, -1},
    {DS_KIND_RESOURCE_CLAIM, "ResourceClaim", "resource.k8s.io", dra_versions, "resourceclaims",
     true, 10, DS_KIND_CLASS_DRA, -1},
    {DS_KIND_WORKLOAD, "Workload", "scheduling.k8s.io", sched_versions, "workloads", true, 11,
     DS_KIND_CLASS_GROUP, -1},
    {DS_KIND_POD_GROUP, "PodGroup", "scheduling.k8s.io", sched_versions, "podgroups", true, 12,
     DS_KIND_CLASS_GROUP, -1},
    WORKLOAD(DS_KIND_DEPLOYMENT, "Deployment", "apps", "deployments", DS_WORKLOAD_DEPLOYMENT),
    WORKLOAD(DS_KIND_REPLICA_SET, "ReplicaSet", "apps", "replicasets", DS_WORKLOAD_REPLICASET),
    WORKLOAD(DS_KIND_STATEFUL_SET, "StatefulSet", "apps", "statefulsets", DS_WORKLOAD_STATEFULSET),
    WORKLOAD(DS_KIND_DAEMON_SET, "DaemonSet", "apps", "daemonsets", DS_WORKLOAD_DAEMONSET),
    WORKLOAD(DS_KIND_JOB, "Job", "batch", "jobs", DS_WORKLOAD_JOB),
    WORKLOAD(DS_KIND_CRON_JOB, "CronJob", "batch", "cronjobs", DS_WORKLOAD_CRONJOB),
    WORKLOAD(DS_KIND_POD, "Pod", "", "pods", DS_WORKLOAD_POD),
};

const ds_kind *ds_kind_get(enum ds_kind_id id)
{
	return (size_t)id < DS_KIND_MAX ? &table[id] : NULL;
}

const ds_kind *ds_kind_from_name(const char *name)
{
	for (size_t i = 0; name && i < DS_KIND_MAX; i++)
		if (strcmp(table[i].name, name) == 0)
			return &table[i];
	return NULL;
}

int ds_kind_id_from_name(const char *name)
{
	const ds_kind *k = ds_kind_from_name(name);

	return k ? (int)k->id : -EINVAL;
}

const ds_kind *ds_kind_from_resource(const char *group, const char *resource)
{
	for (size_t i = 0; group && resource && i < DS_KIND_MAX; i++)
		if (strcmp(table[i].group, group) == 0 && strcmp(table[i].resource, resource) == 0)
			return &table[i];
	return NULL;
}

const ds_kind *ds_kind_of(const json_t *obj)
{
	const ds_kind *k = ds_kind_from_name(ds_obj_kind(obj));
	char group[128];

	if (!k || !ds_obj_group(obj, group, sizeof(group)) || strcmp(k->group, group) != 0)
		return NULL;
	return k;
}

size_t ds_kind_count(void)
{
	return DS_KIND_MAX;
}

const ds_kind *ds_kind_at(size_t i)
{
	return i < DS_KIND_MAX ? &table[i] : NULL;
}

bool ds_kind_is(const char *name, enum ds_kind_id id)
{
	const ds_kind *k = ds_kind_from_name(name);

	return k && k->id == id;
}

static bool in_class(const char *name, enum ds_kind_class c)
{
	const ds_kind *k = ds_kind_from_name(name);

	return k && k->kind_class == c;
}

bool ds_kind_is_workload(const char *name)
{
	return in_class(name, DS_KIND_CLASS_WORKLOAD);
}

bool ds_kind_is_dra(const char *name)
{
	return in_class(name, DS_KIND_CLASS_DRA);
}

bool ds_kind_is_claim(const char *name)
{
	return ds_kind_is(name, DS_KIND_RESOURCE_CLAIM) ||
	       ds_kind_is(name, DS_KIND_RESOURCE_CLAIM_TEMPLATE);
}

bool ds_kind_is_group(const char *name)
{
	return in_class(name, DS_KIND_CLASS_GROUP);
}

bool ds_kind_namespaced(const char *name)
{
	const ds_kind *k = ds_kind_from_name(name);

	return k ? k->namespaced : true;
}

int ds_kind_rank(const char *name)
{
	const ds_kind *k = ds_kind_from_name(name);

	return k ? k->rank : DS_KIND_RANK_UNKNOWN;
}
