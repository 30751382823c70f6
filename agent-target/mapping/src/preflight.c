#include "drasync/preflight.h"

#include "drasync/dra_quota.h"
#include "drasync/k8s_object.h"
#include "drasync/kinds.h"

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

	if (ds_kind_is(kind, DS_KIND_POD_GROUP)) {
		const char *wl = ds_json_str(json_object_get(spec, "workloadRef"), "workloadName");

		if (!wl)
			wl = ds_json_str(ds_json_path(spec, "podGroupTemplateRef.workload"),
					 "workloadName");
		if ((r = claims(json_object_get(spec, "resourceClaims"), ns, fn, ud)) < 0)
			return r;
		return wl ? fn(ud, "Workload", ns, wl) : 0;
	}
	if (ds_kind_is(kind, DS_KIND_WORKLOAD))
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
		return ds_dra_quota_needs(obj, fn, ud); /* a ResourceQuota's, a LimitRange's */
	if (ds_kind_is(kind, DS_KIND_RESOURCE_CLAIM))
		return device_classes(ds_json_path(obj, "spec.devices.requests"), fn, ud);
	if (ds_kind_is(kind, DS_KIND_RESOURCE_CLAIM_TEMPLATE))
		return device_classes(ds_json_path(obj, "spec.spec.devices.requests"), fn, ud);
	return 0;
}

#define IMPLICIT_PREFIX "deviceclass.resource.kubernetes.io/"

/* An extended resource: a prefixed name outside kubernetes.io, or KEP-5004's implicit one. */
static int extended(const char *name)
{
	const char *slash = strchr(name, '/');
	size_t n;

	if (!slash)
		return 0; /* cpu, memory, hugepages-2Mi, ephemeral-storage */
	if (strncmp(name, IMPLICIT_PREFIX, sizeof(IMPLICIT_PREFIX) - 1) == 0)
		return 1;
	n = (size_t)(slash - name);
	if (n == strlen("kubernetes.io") && strncmp(name, "kubernetes.io", n) == 0)
		return 0;
	return !(n > strlen(".kubernetes.io") &&
		 strncmp(slash - strlen(".kubernetes.io"), ".kubernetes.io",
			 strlen(".kubernetes.io")) == 0);
}

int ds_preflight_extended(const json_t *obj, ds_preflight_ext_fn fn, void *ud)
{
	static const char *const lists[] = {"initContainers", "containers"};
	static const char *const maps[] = {"limits", "requests"};
	json_t *spec = ds_obj_pod_spec(obj, NULL);
	int r;

	for (size_t l = 0; spec && l < 2; l++) {
		size_t i;
		json_t *ctr;

		json_array_foreach (json_object_get(spec, lists[l]), i, ctr) {
			const char *cname = ds_json_str(ctr, "name");
			json_t *res = json_object_get(ctr, "resources");
			const char *key;
			json_t *v;

			for (size_t m = 0; cname && m < 2; m++)
				json_object_foreach (json_object_get(res, maps[m]), key, v) {
					/* requests repeat limits for extended resources: once */
					if (!extended(key) ||
					    (m == 1 &&
					     json_object_get(json_object_get(res, "limits"), key)))
						continue;
					if ((r = fn(ud, cname, key)) < 0)
						return r;
				}
		}
	}
	return 0;
}

int ds_preflight_class_serves(const json_t *dc, const char *resource)
{
	const char *name = ds_obj_name(dc);
	const char *ern = ds_json_str(json_object_get(dc, "spec"), "extendedResourceName");

	if (ern && strcmp(ern, resource) == 0)
		return 1;
	return name && strncmp(resource, IMPLICIT_PREFIX, sizeof(IMPLICIT_PREFIX) - 1) == 0 &&
	       strcmp(resource + sizeof(IMPLICIT_PREFIX) - 1, name) == 0;
}

const char *ds_preflight_admin_access(const json_t *obj)
{
	const char *kind = ds_obj_kind(obj);
	const json_t *requests;
	size_t i;
	json_t *rq;

	if (!kind || !ds_obj_in_group(obj, "resource.k8s.io"))
		return NULL;
	if (ds_kind_is(kind, DS_KIND_RESOURCE_CLAIM))
		requests = ds_json_path(obj, "spec.devices.requests");
	else if (ds_kind_is(kind, DS_KIND_RESOURCE_CLAIM_TEMPLATE))
		requests = ds_json_path(obj, "spec.spec.devices.requests");
	else
		return NULL;
	json_array_foreach (requests, i, rq) {
		const json_t *exactly = json_object_get(rq, "exactly");

		if (json_is_true(json_object_get(rq, "adminAccess")) ||
		    json_is_true(json_object_get(exactly, "adminAccess")))
			return ds_json_str(rq, "name") ? ds_json_str(rq, "name") : "";
	}
	return NULL;
}

int ds_preflight_admin_granted(const json_t *ns)
{
	const char *v = ds_json_str(ds_json_path(ns, "metadata.labels"), DS_ADMIN_ACCESS_LABEL);

	return v && strcmp(v, "true") == 0;
}
