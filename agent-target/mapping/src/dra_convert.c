#include "drasync/dra_convert.h"

#include "drasync/k8s_object.h"
#include "drasync/kinds.h"
#include "drasync/string_table.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define GROUP "resource.k8s.io"

static const char *const ds_dra_version_table[DS_DRA_VERSION_MAX] = {"v1alpha3", "v1beta1",
								     "v1beta2", "v1"};
DS_DEFINE_PRIVATE_STRING_TABLE_LOOKUP(ds_dra_version, enum ds_dra_version)
static const char *const api_versions[DS_DRA_VERSION_MAX] = {GROUP "/v1alpha3", GROUP "/v1beta1",
							     GROUP "/v1beta2", GROUP "/v1"};

/*
 * What selects devices for an exact request: flat in v1beta1, under `exactly` in v1.
 * tolerations (1.33+: v1alpha3, v1beta1, v1beta2; v1 from 1.34) and derivedAttributes
 * (1.37) are in every version k8s.io/api v0.37 serves; subrequests move unchanged.
 */
static const char *const exact_fields[] = {
    "deviceClassName", "selectors", "allocationMode",	 "count", "adminAccess",
    "tolerations",     "capacity",  "derivedAttributes", NULL,
};

static const char *const device_class_spec_fields[] = {
    "selectors",
    "config",
    "extendedResourceName",
    NULL,
};

int ds_dra_version_parse(const char *s, enum ds_dra_version *out)
{
	int v;

	if (!s)
		return -EINVAL;
	if (strncmp(s, GROUP "/", sizeof(GROUP)) == 0)
		s += sizeof(GROUP);
	if ((v = ds_dra_version_from_string(s)) < 0)
		return v;
	*out = (enum ds_dra_version)v;
	return 0;
}

const char *ds_dra_api_version(enum ds_dra_version v)
{
	return (unsigned)v < DS_DRA_VERSION_MAX ? api_versions[v] : "?";
}

static bool flat(enum ds_dra_version v)
{
	return v == DS_DRA_V1ALPHA3 || v == DS_DRA_V1BETA1;
}

int ds_dra_is_convertible(const json_t *obj)
{
	const char *kind = ds_obj_kind(obj);

	return kind && ds_obj_in_group(obj, GROUP) && ds_kind_is_dra(kind);
}

static bool in_list(const char *key, const char *const *list)
{
	for (; *list; list++)
		if (strcmp(key, *list) == 0)
			return true;
	return false;
}

/* One request from a flat version to a nested one. */
static int request_to_nested(json_t *rq, const char *path, enum ds_dra_version from, ds_err *err)
{
	json_t *exactly = NULL;
	const char *key;
	json_t *v, *tmp;

	json_object_foreach_safe (rq, tmp, key, v) {
		if (strcmp(key, "name") == 0 || strcmp(key, "firstAvailable") == 0)
			continue;
		if (!in_list(key, exact_fields)) {
			ds_err_set(err,
				   "%s.%s: field not known in %s, cannot be converted without "
				   "losing it",
				   path, key, api_versions[from]);
			json_decref(exactly);
			return -EINVAL;
		}
		if (!exactly && !(exactly = json_object()))
			return -ENOMEM;
		if (json_object_set(exactly, key, v) < 0) {
			json_decref(exactly);
			return -ENOMEM;
		}
		json_object_del(rq, key);
	}
	if (exactly && json_object_get(rq, "firstAvailable")) {
		ds_err_set(err,
			   "%s: both firstAvailable and %s are set; a request is either exact "
			   "or a list of alternatives",
			   path, json_object_iter_key(json_object_iter(exactly)));
		json_decref(exactly);
		return -EINVAL;
	}
	if (exactly && json_object_set_new(rq, "exactly", exactly) < 0)
		return -ENOMEM;
	return 0;
}

/* One request from a nested version to a flat one. */
static int request_to_flat(json_t *rq, const char *path, enum ds_dra_version from, ds_err *err)
{
	json_t *exactly = json_object_get(rq, "exactly");
	const char *key;
	json_t *v, *tmp;

	json_object_foreach_safe (rq, tmp, key, v) {
		if (strcmp(key, "name") != 0 && strcmp(key, "firstAvailable") != 0 &&
		    strcmp(key, "exactly") != 0) {
			ds_err_set(err,
				   "%s.%s: field not known in %s, cannot be converted without "
				   "losing it",
				   path, key, api_versions[from]);
			return -EINVAL;
		}
	}
	if (!exactly)
		return 0;
	if (!json_is_object(exactly)) {
		ds_err_set(err, "%s.exactly: expected a mapping", path);
		return -EINVAL;
	}
	if (json_object_get(rq, "firstAvailable")) {
		ds_err_set(err, "%s: both exactly and firstAvailable are set", path);
		return -EINVAL;
	}
	json_incref(exactly);
	json_object_del(rq, "exactly");
	json_object_foreach_safe (exactly, tmp, key, v) {
		if (!in_list(key, exact_fields)) {
			ds_err_set(err,
				   "%s.exactly.%s: field not known in %s, cannot be converted "
				   "without losing it",
				   path, key, api_versions[from]);
			json_decref(exactly);
			return -EINVAL;
		}
		if (json_object_set(rq, key, v) < 0) {
			json_decref(exactly);
			return -ENOMEM;
		}
	}
	json_decref(exactly);
	return 0;
}

static int convert_claim_spec(json_t *spec, const char *path, enum ds_dra_version from,
			      enum ds_dra_version to, ds_err *err)
{
	json_t *requests = ds_json_path(spec, "devices.requests");
	char rpath[256];
	size_t i;
	json_t *rq;
	int r;

	if (!requests || flat(from) == flat(to))
		return 0;
	if (!json_is_array(requests)) {
		ds_err_set(err, "%s.devices.requests: expected a list", path);
		return -EINVAL;
	}
	json_array_foreach (requests, i, rq) {
		snprintf(rpath, sizeof(rpath), "%s.devices.requests[%zu]", path, i);
		if (!json_is_object(rq)) {
			ds_err_set(err, "%s: expected a mapping", rpath);
			return -EINVAL;
		}
		r = flat(to) ? request_to_flat(rq, rpath, from, err)
			     : request_to_nested(rq, rpath, from, err);
		if (r < 0)
			return r;
	}
	return 0;
}

int ds_dra_convert(json_t *obj, enum ds_dra_version to, ds_err *err)
{
	enum ds_dra_version from;
	const char *kind;
	json_t *copy = NULL, *spec;
	int r = 0;

	if (!ds_dra_is_convertible(obj))
		return 0;
	if ((unsigned)to >= DS_DRA_VERSION_MAX || to == DS_DRA_V1ALPHA3) {
		ds_err_set(err, "cannot convert to %s", ds_dra_api_version(to));
		return -EINVAL;
	}
	if (ds_dra_version_parse(ds_obj_api_version(obj), &from) < 0) {
		ds_err_set(err,
			   "apiVersion %s is not a resource.k8s.io version drasync knows "
			   "(v1alpha3, v1beta1, v1beta2, v1)",
			   ds_obj_api_version(obj));
		return -EINVAL;
	}
	if (from == to)
		return 0;
	kind = ds_obj_kind(obj);
	/* Work on a copy so that a failure leaves the object as it was. */
	copy = json_deep_copy(obj);
	if (!copy)
		return ds_err_fallback(err, -ENOMEM);
	if (ds_kind_is(kind, DS_KIND_DEVICE_CLASS)) {
		const char *key;
		json_t *v;

		spec = json_object_get(copy, "spec");
		json_object_foreach (spec, key, v) {
			if (!in_list(key, device_class_spec_fields)) {
				ds_err_set(err,
					   "spec.%s: field not known in %s, cannot be converted "
					   "without losing it",
					   key, api_versions[from]);
				r = -EINVAL;
				goto out;
			}
		}
	} else if (ds_kind_is(kind, DS_KIND_RESOURCE_CLAIM)) {
		r = convert_claim_spec(json_object_get(copy, "spec"), "spec", from, to, err);
	} else {
		r = convert_claim_spec(ds_json_path(copy, "spec.spec"), "spec.spec", from, to, err);
	}
	if (r < 0)
		goto out;
	if (json_object_set_new(copy, "apiVersion", json_string(api_versions[to])) < 0 ||
	    json_object_update(obj, copy) < 0) {
		r = -ENOMEM;
		goto out;
	}
	r = 1;
out:
	json_decref(copy);
	return ds_err_fallback(err, r);
}
