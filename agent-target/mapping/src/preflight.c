#include "drasync/preflight.h"

#include "drasync/k8s_object.h"

#include <string.h>

static int device_classes(const json_t *requests, ds_preflight_need_fn fn, void *ud)
{
	size_t i, k;
	json_t *rq, *sub;
	int r;

	json_array_foreach (requests, i, rq) {
		const char *dc = ds_json_str(rq, "deviceClassName");

		if (!dc)
			dc = ds_json_str(json_object_get(rq, "exactly"), "deviceClassName");
		if (dc && (r = fn(ud, "DeviceClass", NULL, dc)) < 0)
			return r;
		json_array_foreach (json_object_get(rq, "firstAvailable"), k, sub) {
			dc = ds_json_str(sub, "deviceClassName");
			if (dc && (r = fn(ud, "DeviceClass", NULL, dc)) < 0)
				return r;
		}
	}
	return 0;
}

/* The claims and templates a resourceClaims list (pod, group or Job scheduling) names. */
static int claims(const json_t *list, const char *ns, ds_preflight_need_fn fn, void *ud)
{
	size_t i;
	json_t *e;
	int r;

	json_array_foreach (list, i, e) {
		const char *c = ds_json_str(e, "resourceClaimName");
		const char *t = ds_json_str(e, "resourceClaimTemplateName");

		if (c && (r = fn(ud, "ResourceClaim", ns, c)) < 0)
			return r;
		if (t && (r = fn(ud, "ResourceClaimTemplate", ns, t)) < 0)
			return r;
	}
	return 0;
}

/* A PodGroup needs its claims and templates and the Workload it was made from; a
 * Workload the claims and templates of its podGroupTemplates. */
static int group_needs(const json_t *obj, const char *kind, const char *ns, ds_preflight_need_fn fn,
		       void *ud)
{
	const json_t *spec = json_object_get(obj, "spec");
	size_t i;
	json_t *t;
	int r;

	if (strcmp(kind, "PodGroup") == 0) {
		const char *wl = ds_json_str(json_object_get(spec, "workloadRef"), "workloadName");

		if (!wl)
			wl = ds_json_str(ds_json_path(spec, "podGroupTemplateRef.workload"),
					 "workloadName");
		if ((r = claims(json_object_get(spec, "resourceClaims"), ns, fn, ud)) < 0)
			return r;
		return wl ? fn(ud, "Workload", ns, wl) : 0;
	}
	if (strcmp(kind, "Workload") == 0)
		json_array_foreach (json_object_get(spec, "podGroupTemplates"), i, t)
			if ((r = claims(json_object_get(t, "resourceClaims"), ns, fn, ud)) < 0)
				return r;
	return 0;
}

int ds_preflight_needs(const json_t *obj, ds_preflight_need_fn fn, void *ud)
{
	const char *kind = ds_obj_kind(obj), *ns = ds_obj_namespace(obj);
	json_t *spec = ds_obj_pod_spec(obj, NULL);
	int r;

	if (!kind)
		return 0;
	if (spec) {
		const char *group =
		    ds_json_str(json_object_get(spec, "schedulingGroup"), "podGroupName");

		if ((r = claims(json_object_get(spec, "resourceClaims"), ns, fn, ud)) < 0 ||
		    (r = claims(ds_json_path(obj, "spec.scheduling.resourceClaims"), ns, fn, ud)) <
			0)
			return r;
		/* The group whose claims the pods share must be there before them. */
		return group ? fn(ud, "PodGroup", ns, group) : 0;
	}
	if (ds_obj_in_group(obj, "scheduling.k8s.io"))
		return group_needs(obj, kind, ns, fn, ud);
	if (!ds_obj_in_group(obj, "resource.k8s.io"))
		return 0;
	if (strcmp(kind, "ResourceClaim") == 0)
		return device_classes(ds_json_path(obj, "spec.devices.requests"), fn, ud);
	if (strcmp(kind, "ResourceClaimTemplate") == 0)
		return device_classes(ds_json_path(obj, "spec.spec.devices.requests"), fn, ud);
	return 0;
}
