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

int ds_preflight_needs(const json_t *obj, ds_preflight_need_fn fn, void *ud)
{
	const char *kind = ds_obj_kind(obj), *ns = ds_obj_namespace(obj);
	json_t *spec = ds_obj_pod_spec(obj, NULL);
	size_t i;
	json_t *e;
	int r;

	if (!kind)
		return 0;
	if (spec) {
		json_array_foreach (json_object_get(spec, "resourceClaims"), i, e) {
			const char *c = ds_json_str(e, "resourceClaimName");
			const char *t = ds_json_str(e, "resourceClaimTemplateName");

			if (c && (r = fn(ud, "ResourceClaim", ns, c)) < 0)
				return r;
			if (t && (r = fn(ud, "ResourceClaimTemplate", ns, t)) < 0)
				return r;
		}
		return 0;
	}
	if (!ds_obj_in_group(obj, "resource.k8s.io"))
		return 0;
	if (strcmp(kind, "ResourceClaim") == 0)
		return device_classes(ds_json_path(obj, "spec.devices.requests"), fn, ud);
	if (strcmp(kind, "ResourceClaimTemplate") == 0)
		return device_classes(ds_json_path(obj, "spec.spec.devices.requests"), fn, ud);
	return 0;
}
