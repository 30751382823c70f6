#include "drasync/selection.h"

#include "drasync/k8s_object.h"

#include <stdio.h>
#include <string.h>

struct kind_rule {
	const char *group; /* "" = core */
	const char *kind;
	bool namespaced;
};

/* Everything that is replicated; anything else is skipped and said so. */
static const struct kind_rule replicated[] = {
    {"", "Pod", true},
    {"apps", "Deployment", true},
    {"apps", "ReplicaSet", true},
    {"apps", "StatefulSet", true},
    {"apps", "DaemonSet", true},
    {"batch", "Job", true},
    {"batch", "CronJob", true},
    {"resource.k8s.io", "ResourceClaim", true},
    {"resource.k8s.io", "ResourceClaimTemplate", true},
    {"resource.k8s.io", "DeviceClass", false},
    /* workload-level DRA (Kubernetes 1.36+): their claims are shared by member pods */
    {"scheduling.k8s.io", "Workload", true},
    {"scheduling.k8s.io", "PodGroup", true},
    {"", "ConfigMap", true},
    {"", "Secret", true},
    {"", "ServiceAccount", true},
    {"", "Service", true},
    {"", "PersistentVolumeClaim", true},
    {"", "Namespace", false},
};

bool ds_selection_namespaced(const char *kind)
{
	for (size_t i = 0; kind && i < sizeof(replicated) / sizeof(replicated[0]); i++)
		if (strcmp(replicated[i].kind, kind) == 0)
			return replicated[i].namespaced;
	return true;
}

static const json_t *controller_of(const json_t *obj)
{
	const json_t *refs = ds_json_path(obj, "metadata.ownerReferences");
	size_t i;
	json_t *ref;

	json_array_foreach (refs, i, ref)
		if (json_is_true(json_object_get(ref, "controller")))
			return ref;
	return NULL;
}

static const json_t *owner_of_kind(const json_t *obj, const char *kind)
{
	const json_t *refs = ds_json_path(obj, "metadata.ownerReferences");
	size_t i;
	json_t *ref;

	json_array_foreach (refs, i, ref) {
		const char *k = ds_json_str(ref, "kind");
		if (k && strcmp(k, kind) == 0)
			return ref;
	}
	return NULL;
}

int ds_selection_check(const json_t *obj, bool replicate_device_classes, ds_err *err)
{
	const char *kind = ds_obj_kind(obj), *name = ds_obj_name(obj);
	const json_t *ctl, *pod;
	char group[128];
	size_t i, n = sizeof(replicated) / sizeof(replicated[0]);

	if (!ds_obj_group(obj, group, sizeof(group)) || !kind) {
		ds_err_set(err, "not a Kubernetes object (no apiVersion or kind)");
		return 0;
	}
	for (i = 0; i < n; i++)
		if (strcmp(replicated[i].kind, kind) == 0 &&
		    strcmp(replicated[i].group, group) == 0)
			break;
	if (i == n) {
		if (strcmp(kind, "ResourceSlice") == 0)
			ds_err_set(err, "ResourceSlices describe the source's devices; the "
					"target's drivers publish their own");
		else if (strcmp(kind, "Event") == 0 || strcmp(kind, "Endpoints") == 0 ||
			 strcmp(kind, "EndpointSlice") == 0)
			ds_err_set(err, "%ss are made by the target cluster itself", kind);
		else
			ds_err_set(err, "kind %s (%s) is not replicated", kind,
				   group[0] ? group : "core");
		return 0;
	}
	if (strcmp(kind, "ResourceClaim") == 0 &&
	    ds_obj_annotation(obj, "resource.kubernetes.io/extended-resource-claim")) {
		/* KEP-5004: the scheduler made it for a pod's extended-resource limits. */
		ds_err_set(err, "made by the scheduler for a pod's extended resources (annotation "
				"resource.kubernetes.io/extended-resource-claim); the target's "
				"scheduler makes its own");
		return 0;
	}
	if ((ctl = controller_of(obj))) {
		ds_err_set(err, "controlled by %s %s, which recreates it on the target",
			   ds_json_str(ctl, "kind") ? ds_json_str(ctl, "kind") : "?",
			   ds_json_str(ctl, "name") ? ds_json_str(ctl, "name") : "?");
		return 0;
	}
	if (strcmp(kind, "ResourceClaim") == 0) {
		const char *pcn = ds_obj_annotation(obj, "resource.kubernetes.io/pod-claim-name");

		if (pcn || (pod = owner_of_kind(obj, "Pod"))) {
			ds_err_set(err,
				   "generated from a template for a pod (%s); the target "
				   "generates its own",
				   pcn			      ? pcn
				   : ds_json_str(pod, "name") ? ds_json_str(pod, "name")
							      : "?");
			return 0;
		}
	}
	if (strcmp(kind, "DeviceClass") == 0 && !replicate_device_classes) {
		ds_err_set(err, "DeviceClasses belong to the target's infrastructure (set "
				"dra.replicateDeviceClasses to copy them)");
		return 0;
	}
	if (strcmp(kind, "ConfigMap") == 0 && name && strcmp(name, "kube-root-ca.crt") == 0) {
		ds_err_set(err, "every namespace of the target has its own kube-root-ca.crt");
		return 0;
	}
	if (strcmp(kind, "Secret") == 0) {
		const char *type = ds_json_str(obj, "type");

		if (type && strcmp(type, "kubernetes.io/service-account-token") == 0) {
			ds_err_set(err, "service-account token Secrets are issued by the target");
			return 0;
		}
	}
	return 1;
}

int ds_selection_kind_rank(const char *kind)
{
	static const char *const order[] = {
	    "Namespace",
	    "ServiceAccount",
	    "ConfigMap",
	    "Secret",
	    "PersistentVolumeClaim",
	    "Service",
	    "DeviceClass",
	    "ResourceClaimTemplate",
	    "ResourceClaim",
	    "Workload",
	    "PodGroup",
	    NULL,
	};
	int i;

	for (i = 0; kind && order[i]; i++)
		if (strcmp(order[i], kind) == 0)
			return i;
	return i + (ds_workload_from_kind(kind) >= 0 ? 0 : 1);
}

int ds_selection_apply_rank(const json_t *obj)
{
	return ds_selection_kind_rank(ds_obj_kind(obj));
}
