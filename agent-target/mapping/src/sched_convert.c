#include "drasync/sched_convert.h"

#include "drasync/k8s_object.h"
#include "drasync/kinds.h"
#include "drasync/string_table.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define GROUP "scheduling.k8s.io"

/* 0 is "no version" and has no name */
static const char *const ds_sched_version_table[DS_SCHED_VERSION_MAX] = {NULL, "v1alpha2",
									 "v1alpha3", "v1beta1"};
DS_DEFINE_PRIVATE_STRING_TABLE_LOOKUP(ds_sched_version, enum ds_sched_version)
static const char *const api_versions[DS_SCHED_VERSION_MAX] = {NULL, GROUP "/v1alpha2",
							       GROUP "/v1alpha3", GROUP "/v1beta1"};

/*
 * The spec fields each version holds (Kubernetes 1.36 v1alpha2; 1.37 v1beta1,
 * and v1alpha3 whose Workload and PodGroup have v1beta1's fields, one for one:
 * k8s.io/api v0.37.2 scheduling/v1alpha3 and v1beta1). Those in both with one
 * shape are copied; the renamed ones are converted below; anything else is an
 * error.
 */
static const char *const pg_alpha2[] = {"podGroupTemplateRef",
					"schedulingPolicy",
					"schedulingConstraints",
					"resourceClaims",
					"disruptionMode",
					"priorityClassName",
					"priority",
					NULL};
static const char *const pg_beta1[] = {"parentCompositePodGroupName",
				       "workloadRef",
				       "schedulingPolicy",
				       "schedulingConstraints",
				       "resourceClaims",
				       "disruptionMode",
				       "priorityClassName",
				       "priority",
				       "preemptionPolicy",
				       NULL};
static const char *const wl_alpha2[] = {"controllerRef", "podGroupTemplates", NULL};
static const char *const wl_beta1[] = {"controllerRef", "podGroupTemplates",
				       "compositePodGroupTemplates", NULL};
static const char *const tpl_alpha2[] = {"name",
					 "schedulingPolicy",
					 "schedulingConstraints",
					 "resourceClaims",
					 "disruptionMode",
					 "priorityClassName",
					 "priority",
					 NULL};
static const char *const tpl_beta1[] = {
    "name",	      "schedulingPolicy", "schedulingConstraints",
    "resourceClaims", "disruptionMode",	  "priorityClassName",
    "priority",	      "preemptionPolicy", NULL};

/* Indexed by enum ds_sched_version. */
static const char *const *const pg_fields[DS_SCHED_VERSION_MAX] = {NULL, pg_alpha2, pg_beta1,
								   pg_beta1};
static const char *const *const wl_fields[DS_SCHED_VERSION_MAX] = {NULL, wl_alpha2, wl_beta1,
								   wl_beta1};
static const char *const *const tpl_fields[DS_SCHED_VERSION_MAX] = {NULL, tpl_alpha2, tpl_beta1,
								    tpl_beta1};

/* v1alpha3 and v1beta1 have workloadRef and the disruptionMode union; v1alpha2 the older shape. */
static bool union_shape(enum ds_sched_version v)
{
	return v != DS_SCHED_V1ALPHA2;
}

int ds_sched_version_parse(const char *s, enum ds_sched_version *out)
{
	int v;

	if (!s)
		return -EINVAL;
	if (strncmp(s, GROUP "/", sizeof(GROUP)) == 0)
		s += sizeof(GROUP);
	if ((v = ds_sched_version_from_string(s)) < 0)
		return v;
	*out = (enum ds_sched_version)v;
	return 0;
}

const char *ds_sched_api_version(enum ds_sched_version v)
{
	return (unsigned)v < DS_SCHED_VERSION_MAX ? api_versions[v] : NULL;
}

int ds_sched_is_group(const json_t *obj)
{
	const char *kind = ds_obj_kind(obj);

	return kind && ds_obj_in_group(obj, GROUP) && ds_kind_is_group(kind);
}

static bool in_list(const char *key, const char *const *list)
{
	for (; *list; list++)
		if (strcmp(key, *list) == 0)
			return true;
	return false;
}

/* Every field of obj must be one `to` can hold (after the renames done before). */
static int check_fields(const json_t *obj, const char *const *from_fields,
			const char *const *to_fields, const char *path, const char *what,
			enum ds_sched_version to, ds_err *err)
{
	const char *key;
	json_t *v;

	json_object_foreach ((json_t *)obj, key, v) {
		if (in_list(key, to_fields))
			continue;
		if (in_list(key, from_fields))
			ds_err_set(err, "%s.%s: %s %s cannot hold it", path, key, api_versions[to],
				   what);
		else
			ds_err_set(err, "%s.%s: unknown field of %s (not converted)", path, key,
				   what);
		return -EINVAL;
	}
	return 0;
}

/* "Pod" | "PodGroup" (v1alpha2) <-> {single: {}} | {all: {}} (v1alpha3, v1beta1), in holder. */
static int disruption_mode(json_t *holder, const char *path, enum ds_sched_version to, ds_err *err)
{
	json_t *v = json_object_get(holder, "disruptionMode");
	json_t *nv = NULL;

	if (!v || json_is_null(v))
		return 0;
	if (union_shape(to)) {
		const char *s = json_string_value(v);
		if (s && strcmp(s, "Pod") == 0)
			nv = json_pack("{s:{}}", "single");
		else if (s && strcmp(s, "PodGroup") == 0)
			nv = json_pack("{s:{}}", "all");
		else if (json_is_object(v))
			return 0; /* already the union */
		else {
			ds_err_set(err, "%s.disruptionMode: '%s' is neither Pod nor PodGroup", path,
				   s ? s : "(not a string)");
			return -EINVAL;
		}
	} else {
		const char *key;
		json_t *m;
		size_t n = json_is_object(v) ? json_object_size(v) : 0;

		if (json_is_string(v))
			return 0;
		if (n != 1) {
			ds_err_set(err, "%s.disruptionMode: expected exactly one of single, all",
				   path);
			return -EINVAL;
		}
		json_object_foreach (v, key, m) {
			if (json_object_size(m) != 0) {
				ds_err_set(err, "%s.disruptionMode.%s: %s cannot hold its fields",
					   path, key, api_versions[to]);
				return -EINVAL;
			}
			if (strcmp(key, "single") == 0)
				nv = json_string("Pod");
			else if (strcmp(key, "all") == 0)
				nv = json_string("PodGroup");
			else {
				ds_err_set(err, "%s.disruptionMode.%s: %s cannot hold it", path,
					   key, api_versions[to]);
				return -EINVAL;
			}
		}
	}
	if (!nv)
		return -ENOMEM;
	return json_object_set_new(holder, "disruptionMode", nv) < 0 ? -ENOMEM : 0;
}

/* PodGroup spec.podGroupTemplateRef.workload{workloadName, podGroupTemplateName}
 * <-> spec.workloadRef{workloadName, templateName}. */
static int template_ref(json_t *spec, enum ds_sched_version to, ds_err *err)
{
	const char *from_key = union_shape(to) ? "podGroupTemplateRef" : "workloadRef";
	json_t *ref = json_object_get(spec, from_key), *nv;
	const char *wl, *tpl;

	if (!ref || json_is_null(ref)) {
		json_object_del(spec, from_key);
		return 0;
	}
	if (union_shape(to)) {
		json_t *w = json_object_get(ref, "workload");
		if (json_object_size(ref) != 1 || !json_is_object(w) || json_object_size(w) > 2) {
			ds_err_set(err, "spec.podGroupTemplateRef: only workload{workloadName, "
					"podGroupTemplateName} converts to workloadRef");
			return -EINVAL;
		}
		wl = ds_json_str(w, "workloadName");
		tpl = ds_json_str(w, "podGroupTemplateName");
		if (!wl || !tpl) {
			ds_err_set(err, "spec.podGroupTemplateRef.workload: needs workloadName and "
					"podGroupTemplateName");
			return -EINVAL;
		}
		nv = json_pack("{s:s, s:s}", "workloadName", wl, "templateName", tpl);
		if (!nv || json_object_set_new(spec, "workloadRef", nv) < 0)
			return -ENOMEM;
	} else {
		wl = ds_json_str(ref, "workloadName");
		tpl = ds_json_str(ref, "templateName");
		if (!wl || !tpl || json_object_size(ref) != 2) {
			ds_err_set(err, "spec.workloadRef: only {workloadName, templateName} "
					"converts to podGroupTemplateRef");
			return -EINVAL;
		}
		nv = json_pack("{s:{s:s, s:s}}", "workload", "workloadName", wl,
			       "podGroupTemplateName", tpl);
		if (!nv || json_object_set_new(spec, "podGroupTemplateRef", nv) < 0)
			return -ENOMEM;
	}
	json_object_del(spec, from_key);
	return 0;
}

static int convert_spec(json_t *spec, bool podgroup, enum ds_sched_version from,
			enum ds_sched_version to, ds_err *err)
{
	/* v1alpha3 <-> v1beta1: one shape, only the fields are checked */
	const bool reshape = union_shape(from) != union_shape(to);
	int r;

	if (podgroup) {
		if (reshape && ((r = template_ref(spec, to, err)) < 0 ||
				(r = disruption_mode(spec, "spec", to, err)) < 0))
			return r;
		return check_fields(spec, pg_fields[from], pg_fields[to], "spec", "PodGroup", to,
				    err);
	}
	if ((r = check_fields(spec, wl_fields[from], wl_fields[to], "spec", "Workload", to, err)) <
	    0)
		return r;
	{
		json_t *tpls = json_object_get(spec, "podGroupTemplates"), *t;
		size_t i;

		json_array_foreach (tpls, i, t) {
			char path[64];

			snprintf(path, sizeof(path), "spec.podGroupTemplates[%zu]", i);
			if ((reshape && (r = disruption_mode(t, path, to, err)) < 0) ||
			    (r = check_fields(t, tpl_fields[from], tpl_fields[to], path,
					      "PodGroupTemplate", to, err)) < 0)
				return r;
		}
	}
	return 0;
}

int ds_sched_convert(json_t *obj, enum ds_sched_version to, ds_err *err)
{
	enum ds_sched_version from;
	json_t *copy = NULL, *spec;
	char api[64];
	int r;

	if (to == DS_SCHED_AS_IS || (unsigned)to >= DS_SCHED_VERSION_MAX || !ds_sched_is_group(obj))
		return 0;
	if (ds_sched_version_parse(ds_obj_version(obj), &from) < 0) {
		ds_err_set(
		    err,
		    "%s %s cannot be converted to %s (only v1alpha2, v1alpha3 and v1beta1 can)",
		    ds_obj_api_version(obj), ds_obj_kind(obj), api_versions[to]);
		return -EINVAL;
	}
	if (from == to)
		return 0;
	/* Work on a copy: a failure half-way leaves obj as it was. */
	copy = json_deep_copy(obj);
	if (!copy)
		return -ENOMEM;
	spec = json_object_get(copy, "spec");
	if (json_is_object(spec) &&
	    (r = convert_spec(spec, ds_kind_is(ds_obj_kind(obj), DS_KIND_POD_GROUP), from, to,
			      err)) < 0)
		goto out;
	snprintf(api, sizeof(api), "%s", api_versions[to]);
	if (json_object_set_new(copy, "apiVersion", json_string(api)) < 0 ||
	    json_object_update(obj, copy) < 0) {
		r = -ENOMEM;
		goto out;
	}
	/* update() replaced obj's spec by the converted one as a whole. */
	r = 1;
out:
	json_decref(copy);
	return r < 0 ? ds_err_fallback(err, r) : r;
}
