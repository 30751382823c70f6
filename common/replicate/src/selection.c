#include "drasync/selection.h"

#include "drasync/k8s_object.h"
#include "drasync/kinds.h"

#include <stdio.h>
#include <string.h>

/* Kinds that are never replicated, and why a user is told so; group NULL: any group. */
static const struct {
	const char *kind;
	const char *group;
	const char *why;
} never[] = {
    {"ResourceSlice", NULL,
     "ResourceSlices describe the source's devices; the target's drivers publish "
     "their own"},
    {"Event", NULL, "Events are made by the target cluster itself"},
    {"Endpoints", NULL, "Endpoints are made by the target cluster itself"},
    {"EndpointSlice", NULL, "EndpointSlices are made by the target cluster itself"},
    /* resource.k8s.io since 1.33 (v1alpha3), v1beta2 and v1 (GA in 1.37) */
    {"DeviceTaintRule", "resource.k8s.io",
     "describes one cluster's hardware: a DeviceTaintRule taints the source's devices "
     "(by driver, pool, device name); the target's administrators taint their own"},
    /* resource.k8s.io/v1alpha3 since 1.36 (gate DRAResourcePoolStatus) */
    {"ResourcePoolStatusRequest", "resource.k8s.io",
     "describes one cluster's hardware: a ResourcePoolStatusRequest asks the source's "
     "control plane for the state of its own device pools"},
};

const char *ds_selection_never_reason(const char *kind, const char *group)
{
	for (size_t i = 0; kind && i < sizeof(never) / sizeof(never[0]); i++)
		if (strcmp(never[i].kind, kind) == 0 &&
		    (!never[i].group || (group && strcmp(never[i].group, group) == 0)))
			return never[i].why;
	return NULL;
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

static const json_t *owner_of_kind(const json_t *obj, enum ds_kind_id kind)
{
	const json_t *refs = ds_json_path(obj, "metadata.ownerReferences");
	size_t i;
	json_t *ref;

	json_array_foreach (refs, i, ref) {
		if (ds_kind_is(ds_json_str(ref, "kind"), kind))
			return ref;
	}
	return NULL;
}

int ds_selection_check(const json_t *obj, bool replicate_device_classes, ds_err *err)
{
	const char *kind = ds_obj_kind(obj), *name = ds_obj_name(obj);
	const ds_kind *k;
	const json_t *ctl, *pod;
	char group[128];

	if (!ds_obj_group(obj, group, sizeof(group)) || !kind) {
		ds_err_set(err, "not a Kubernetes object (no apiVersion or kind)");
		return 0;
	}
	if (!(k = ds_kind_of(obj))) {
		const char *why = ds_selection_never_reason(kind, group);

		if (why) {
			ds_err_set(err, "%s", why);
			return 0;
		}
		ds_err_set(err, "kind %s (%s) is not replicated", kind, group[0] ? group : "core");
		return 0;
	}
	if (k->id == DS_KIND_RESOURCE_CLAIM &&
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
	if (k->id == DS_KIND_RESOURCE_CLAIM) {
		const char *pcn = ds_obj_annotation(obj, "resource.kubernetes.io/pod-claim-name");

		if (pcn || (pod = owner_of_kind(obj, DS_KIND_POD))) {
			ds_err_set(err,
				   "generated from a template for a pod (%s); the target "
				   "generates its own",
				   pcn			      ? pcn
				   : ds_json_str(pod, "name") ? ds_json_str(pod, "name")
							      : "?");
			return 0;
		}
	}
	if (k->id == DS_KIND_DEVICE_CLASS && !replicate_device_classes) {
		ds_err_set(err, "DeviceClasses belong to the target's infrastructure (set "
				"dra.replicateDeviceClasses to copy them)");
		return 0;
	}
	/* Made in every namespace by the target's own controllers: drasync must not take
	 * them over (SPEC §5), and the target's are what its pods need. */
	if (k->id == DS_KIND_SERVICE_ACCOUNT && name && strcmp(name, "default") == 0) {
		ds_err_set(err, "every namespace of the target has its own default ServiceAccount");
		return 0;
	}
	if (k->id == DS_KIND_CONFIG_MAP && name && strcmp(name, "kube-root-ca.crt") == 0) {
		ds_err_set(err, "every namespace of the target has its own kube-root-ca.crt");
		return 0;
	}
	if (k->id == DS_KIND_SECRET) {
		const char *type = ds_json_str(obj, "type");

		if (type && strcmp(type, "kubernetes.io/service-account-token") == 0) {
			ds_err_set(err, "service-account token Secrets are issued by the target");
			return 0;
		}
	}
	return 1;
}

int ds_selection_apply_rank(const json_t *obj)
{
	return ds_kind_rank(ds_obj_kind(obj));
}
