#include "drasync/transform.h"

#include "drasync/dra_mapping.h"
#include "drasync/dra_quota.h"
#include "drasync/k8s_object.h"
#include "drasync/kinds.h"
#include "drasync/sanitize.h"
#include "drasync/sched_convert.h"
#include "drasync/selection.h"
#include "drasync/standby.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int error(ds_report *rep, const char *what, const char *msg)
{
	return ds_report_add(rep, DS_REPORT_ERROR, what, NULL, NULL, NULL, NULL, msg) < 0
		   ? -ENOMEM
		   : DS_TRANSFORM_ERROR;
}

/* A Workload's PodGroups, each {"podGroup", "members"}, or NULL (none known). @return 0, -ENOMEM */
static int workload_groups(const ds_transform_opts *o, const json_t *obj, json_t **out)
{
	const json_t *pgs;
	json_t *v, *pg;
	size_t i;

	*out = NULL;
	if (!o->groups_from || !ds_sched_is_group(obj) ||
	    !ds_kind_is(ds_obj_kind(obj), DS_KIND_WORKLOAD))
		return 0;
	pgs = o->groups_from(o->group_ud, ds_obj_namespace(obj), ds_obj_name(obj));
	if (!pgs)
		return 0;
	if (!(v = json_array()))
		return -ENOMEM;
	json_array_foreach (pgs, i, pg) {
		const json_t *m = o->members_of ? o->members_of(o->group_ud, ds_obj_namespace(obj),
								ds_obj_name(pg))
						: NULL;

		if (json_array_append_new(
			v, json_pack("{s:O,s:O?}", "podGroup", pg, "members", m)) < 0) {
			json_decref(v);
			return -ENOMEM;
		}
	}
	*out = v;
	return 0;
}

static int map_namespace(const ds_transform_opts *o, json_t *obj, const char *what, ds_report *rep)
{
	const char *kind = ds_obj_kind(obj);
	json_t *meta = json_object_get(obj, "metadata");
	const char *from, *to;

	if (ds_kind_is(kind, DS_KIND_NAMESPACE)) {
		from = ds_obj_name(obj);
		to = ds_target_config_map_namespace(o->cfg, from);
		if (to == from)
			return 0;
		ds_report_add(rep, DS_REPORT_NAMESPACE, what, NULL, NULL, from, to, NULL);
		return json_object_set_new(meta, "name", json_string(to)) < 0 ? -ENOMEM : 0;
	}
	if (!ds_kind_namespaced(kind)) {
		json_object_del(meta, "namespace");
		return 0;
	}
	from = ds_obj_namespace(obj);
	if (!from)
		return 0; /* the importer places it in the namespace of the stream */
	to = ds_target_config_map_namespace(o->cfg, from);
	if (to == from)
		return 0;
	return json_object_set_new(meta, "namespace", json_string(to)) < 0 ? -ENOMEM : 0;
}

int ds_transform_object(const ds_transform_opts *o, json_t *obj, ds_report *rep)
{
	const ds_dra_config *dra = ds_target_config_dra(o->cfg);
	char what[300], from_api[128];
	char *uid = NULL;
	const json_t *group = NULL, *members = NULL;
	json_t *wl_groups = NULL;
	ds_err err = {0};
	enum ds_mode mode;
	int r;

	ds_obj_describe(obj, what, sizeof(what));
	if (!json_is_object(obj))
		return error(rep, "(document)", "not a mapping: expected a Kubernetes object");
	if (!ds_obj_api_version(obj) || !ds_obj_kind(obj))
		return error(rep, what, "missing apiVersion or kind");
	if (!json_is_object(json_object_get(obj, "metadata")) || !ds_obj_name(obj))
		return error(rep, what, "missing metadata.name");
	if (!ds_selection_check(obj, dra->replicate_device_classes, &err)) {
		if (ds_report_add(rep, DS_REPORT_SKIP, what, NULL, NULL, NULL, NULL, err.msg) < 0)
			return -ENOMEM;
		return DS_TRANSFORM_SKIP;
	}
	if (!o->source_uid && ds_json_str(json_object_get(obj, "metadata"), "uid")) {
		uid = strdup(ds_json_str(json_object_get(obj, "metadata"), "uid"));
		if (!uid)
			return -ENOMEM;
	}
	if ((r = ds_sanitize(obj)) < 0)
		goto out;
	/* The group a workload's pods join, looked up where the source has it. */
	if (o->group_of && ds_dra_group_of(obj))
		group = o->group_of(o->group_ud, ds_obj_namespace(obj), ds_dra_group_of(obj));
	/* A group and its members are applied only when all of them agree. */
	if (o->members_of) {
		const json_t *g = group;
		const char *kind = ds_obj_kind(obj);

		if (ds_sched_is_group(obj) && ds_kind_is(kind, DS_KIND_POD_GROUP))
			g = obj;
		if (g) {
			char why[600], msg[1000], gwhat[300];

			members = o->members_of(o->group_ud, ds_obj_namespace(obj), ds_obj_name(g));

			r = ds_dra_check_group(dra, g, members, why, sizeof(why));
			if (r == -EINVAL) {
				ds_obj_describe(g, gwhat, sizeof(gwhat));
				snprintf(msg, sizeof(msg),
					 "nothing of %s and its members is applied: %s", gwhat,
					 why);
				r = error(rep, what, msg);
				goto out;
			}
			if (r < 0)
				goto out;
		}
	}
	if ((r = workload_groups(o, obj, &wl_groups)) < 0)
		goto out;
	if (wl_groups)
		members = wl_groups;
	if ((r = map_namespace(o, obj, what, rep)) < 0)
		goto out;
	ds_obj_describe(obj, what, sizeof(what));

	/* A group's claims follow its members, the members' the group. */
	r = ds_dra_map_workload_members(dra, obj, group, members, rep);
	if (r >= 0)
		r = ds_dra_map_group_members(dra, obj, members, rep);
	if (r == -EINVAL) {
		r = DS_TRANSFORM_ERROR;
		goto out;
	}
	if (r < 0 || (r = ds_dra_map_device_classes(dra, obj, rep)) < 0) {
		if (r == -EINVAL)
			r = DS_TRANSFORM_ERROR; /* reported */
		goto out;
	}
	r = ds_dra_map_quota(dra, obj, rep);
	if (r == -EINVAL) {
		r = DS_TRANSFORM_ERROR;
		goto out;
	}
	if (r < 0)
		goto out;
	snprintf(from_api, sizeof(from_api), "%s", ds_obj_api_version(obj));
	r = ds_dra_convert(obj, o->dra_version, &err);
	if (r == -EINVAL) {
		r = error(rep, what, err.msg);
		goto out;
	}
	if (r < 0)
		goto out;
	if (r == 1)
		ds_report_add(rep, DS_REPORT_CONVERT, what, NULL, NULL, from_api,
			      ds_dra_api_version(o->dra_version), NULL);
	r = ds_sched_convert(obj, o->sched_version, &err);
	if (r == -EINVAL) {
		r = error(rep, what, err.msg);
		goto out;
	}
	if (r < 0)
		goto out;
	if (r == 1)
		ds_report_add(rep, DS_REPORT_CONVERT, what, NULL, NULL, from_api,
			      ds_sched_api_version(o->sched_version), NULL);

	if (ds_obj_set_label(obj, DS_LABEL_MANAGED_BY, "drasync") < 0 ||
	    (o->source_cluster &&
	     ds_obj_set_annotation(obj, DS_ANNOTATION_SOURCE_CLUSTER, o->source_cluster) < 0) ||
	    (o->source && ds_obj_set_annotation(obj, DS_ANNOTATION_SOURCE, o->source) < 0) ||
	    ((o->source_uid || uid) &&
	     ds_obj_set_annotation(obj, DS_ANNOTATION_SOURCE_UID,
				   o->source_uid ? o->source_uid : uid) < 0)) {
		r = -ENOMEM;
		goto out;
	}
	r = DS_TRANSFORM_APPLY;
	mode = ds_target_config_mode(o->cfg);
	if (o->mode_of)
		mode = o->mode_of(o->mode_ud, ds_obj_namespace(obj), mode);
	if (mode == DS_MODE_STANDBY) {
		int s = ds_standby_apply(obj, rep);
		if (s < 0)
			r = s;
		else if (s == DS_STANDBY_HOLD)
			r = DS_TRANSFORM_HOLD;
	}
out:
	json_decref(wl_groups);
	free(uid);
	return r;
}
