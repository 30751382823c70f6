#include "drasync/dra_mapping.h"

#include "dra_mapping_internal.h"

#include "drasync/buf.h"
#include "drasync/k8s_object.h"
#include "drasync/kinds.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int same_ref_target(const struct ref *a, const struct ref *b)
{
	return a->kind == b->kind && strcmp(a->target, b->target) == 0;
}

static void report_rewrite(struct ctx *c, const struct ref *rf, const char *entry_after)
{
	char from[300], to[300], msg[600];

	ds_dra_ref_text(rf->e->kind, rf->e->source, from, sizeof(from));
	ds_dra_ref_text(rf->kind, rf->target, to, sizeof(to));
	snprintf(msg, sizeof(msg), "(rule dra.%s[%zu]%s%s%s%s)", rf->winner->list,
		 rf->winner->index, strcmp(entry_after, rf->e->name) ? ", entry now " : "",
		 strcmp(entry_after, rf->e->name) ? entry_after : "",
		 rf->e->shared ? ", shared with " : "", rf->e->shared ? c->g_what : "");
	ds_report_add(c->rep, DS_REPORT_REWRITE, c->what, rf->cname ? rf->cname : "ALL",
		      rf->e->name, from, to, msg);
}

/*
 * KEP-5304 as Kubernetes v1.37.2 lays the files out (k8s.io/dynamic-resource-allocation
 * v0.37.2, api/metadata): a claim the pod names (resourceClaimName) under
 * resourceclaims/<claim>/, a claim made from a template, for the pod or for its PodGroup,
 * under resourceclaimtemplates/<entry>/ (the entry's name, the claim's pod-claim-name
 * annotation: a pod shares its group's claim only under the group entry's name), then
 * <request>/<driver>-metadata.json. A firstAvailable request's files are under its own
 * name whichever subrequest was allocated (the kubelet plugin strips the subrequest; the
 * file's requests[].name says which), and a container names requests only.
 */
#define DEVICE_ATTRIBUTES_DIR "/var/run/kubernetes.io/dra-device-attributes"

static void attr_prefix(enum ds_target_kind kind, const char *name, const char *entry,
			const char *request, char *buf, size_t size)
{
	snprintf(buf, size, DEVICE_ATTRIBUTES_DIR "/%s/%s/%s%s",
		 kind == DS_TARGET_CLAIM ? "resourceclaims" : "resourceclaimtemplates",
		 kind == DS_TARGET_CLAIM ? name : entry, request ? request : "",
		 request ? "/" : "");
}

static const char *attr_where(enum ds_target_kind kind)
{
	return kind == DS_TARGET_TEMPLATE ? "under the entry's name (the claim made from the "
					    "template is the pod's, or its PodGroup's)"
					  : "under the claim's name";
}

/* A reference whose claim (or entry, for a template) changes moves the files it reads. */
static int report_attr_paths(struct ctx *c, const struct ref *rf, const char *entry_after)
{
	const char *request = ds_json_str(rf->claim_item, "request");
	char from[400], to[400], msg[300];

	attr_prefix(rf->e->kind, rf->e->source, rf->e->name, request, from, sizeof(from));
	attr_prefix(rf->kind, rf->target, entry_after, request, to, sizeof(to));
	if (strcmp(from, to) == 0)
		return 0;
	snprintf(msg, sizeof(msg),
		 "(device attributes, KEP-5304: the application finds its devices' "
		 "<driver>-metadata.json %s)",
		 attr_where(rf->kind));
	return ds_report_add(c->rep, DS_REPORT_ATTRIBUTES, c->what, rf->cname, entry_after, from,
			     to, msg);
}

/*
 * Apply the decisions for one entry: a single target rewrites it in place;
 * several split it, the unchanged group (or else the first) keeping the name.
 */
static int apply_entry(struct ctx *c, struct entry *e, json_t *rcs, size_t *inserted)
{
	struct ref *groups[64];
	size_t n_groups = 0, keeper = SIZE_MAX;
	int r;

	for (size_t i = 0; i < c->n_refs; i++) {
		struct ref *rf = &c->refs[i];
		size_t g;

		if (rf->e != e)
			continue;
		for (g = 0; g < n_groups; g++)
			if (same_ref_target(groups[g], rf))
				break;
		if (g == n_groups) {
			if (n_groups == 64)
				return ds_dra_fail(c, "claim %s is used by too many containers",
						   e->name);
			groups[n_groups++] = rf;
		}
	}
	if (n_groups == 0)
		return 0;
	for (size_t g = 0; g < n_groups; g++)
		if (groups[g]->kind == e->kind && strcmp(groups[g]->target, e->source) == 0)
			keeper = g;
	if (keeper == SIZE_MAX)
		keeper = 0;

	for (size_t g = 0; g < n_groups; g++) {
		struct ref *lead = groups[g];
		const char *name = e->name;

		if (g != keeper) {
			char *nn;
			json_t *ne;

			if ((r = ds_dra_unique_name(&c->names, e->name, lead->target, &nn)) < 0)
				return r;
			ne = ds_dra_entry_json(nn, lead->kind, lead->target);
			if (!ne || json_array_insert_new(rcs, e->index + 1 + *inserted, ne) < 0)
				return -ENOMEM;
			(*inserted)++;
			name = nn;
		}
		for (size_t i = 0; i < c->n_refs; i++) {
			struct ref *rf = &c->refs[i];

			if (rf->e != e || !same_ref_target(rf, lead))
				continue;
			rf->new_name = name;
			if (rf->claim_item && name != e->name &&
			    json_object_set_new(rf->claim_item, "name", json_string(name)) < 0)
				return -ENOMEM;
			if (rf->winner &&
			    !(rf->kind == e->kind && strcmp(rf->target, e->source) == 0)) {
				report_rewrite(c, rf, name);
				c->changed++;
			}
			if (rf->claim_item && report_attr_paths(c, rf, name) < 0)
				return -ENOMEM;
		}
	}
	if (n_groups > 1) {
		char names[400];
		size_t o = 0;

		for (size_t g = 0; g < n_groups; g++)
			for (size_t i = 0; i < c->n_refs; i++)
				if (c->refs[i].e == e && same_ref_target(&c->refs[i], groups[g])) {
					o += (size_t)snprintf(
					    names + o, o < sizeof(names) ? sizeof(names) - o : 0,
					    "%s%s", g ? ", " : "", c->refs[i].new_name);
					break;
				}
		ds_report_addf(c->rep, DS_REPORT_SPLIT, c->what,
			       "claim entry %s is shared by containers that map to different "
			       "targets: split into %s",
			       e->name, names);
	}
	/* Last: the kept entry takes its group's target (e->source is read above). */
	if (!(groups[keeper]->kind == e->kind && strcmp(groups[keeper]->target, e->source) == 0))
		return ds_dra_retarget(e->json, groups[keeper]->kind, groups[keeper]->target);
	return 0;
}

static int remove_extended(struct ctx *c, const struct attach *a)
{
	static const char *const maps[] = {"limits", "requests"};

	for (size_t k = 0; k < a->rule->n_extended_resources; k++) {
		const char *res = a->rule->extended_resources[k];

		for (size_t m = 0; m < 2; m++) {
			json_t *map =
			    ds_json_path(json_object_get(a->container, "resources"), maps[m]);
			json_t *v = json_object_get(map, res);
			char from[300], msg[200];

			if (!v)
				continue;
			if (json_is_string(v))
				snprintf(from, sizeof(from), "%s.%s=%s", maps[m], res,
					 json_string_value(v));
			else if (json_is_integer(v))
				snprintf(from, sizeof(from), "%s.%s=%lld", maps[m], res,
					 (long long)json_integer_value(v));
			else
				snprintf(from, sizeof(from), "%s.%s", maps[m], res);
			snprintf(msg, sizeof(msg), "(replaced by DRA, rule dra.%s[%zu])",
				 a->rule->list, a->rule->index);
			ds_report_add(c->rep, DS_REPORT_RESOURCE, c->what, a->cname, NULL, from,
				      "(removed)", msg);
			json_object_del(map, res);
			c->changed++;
		}
	}
	return 0;
}

static int apply_attach(struct ctx *c, const struct attach *a)
{
	json_t *rcs, *res, *claims, *item;
	const char *entry_name = NULL;
	char *nn = NULL;
	char to[300], msg[200];
	size_t i;
	json_t *v;
	int r;

	rcs = json_object_get(c->spec, "resourceClaims");
	if (!json_is_array(rcs)) {
		rcs = json_array();
		if (!rcs || json_object_set_new(c->spec, "resourceClaims", rcs) < 0)
			return -ENOMEM;
	}
	/* Reuse an entry that already points at the target. */
	json_array_foreach (rcs, i, v) {
		const char *t = ds_json_str(v, ds_dra_ref_field[a->rule->target_kind]);
		if (t && strcmp(t, a->rule->target) == 0) {
			entry_name = ds_json_str(v, "name");
			break;
		}
	}
	if (!entry_name) {
		json_t *ne;

		if ((r = ds_dra_unique_name(&c->names, a->rule->target, NULL, &nn)) < 0)
			return r;
		ne = ds_dra_entry_json(nn, a->rule->target_kind, a->rule->target);
		if (!ne || json_array_append_new(rcs, ne) < 0)
			return -ENOMEM;
		entry_name = nn;
	}
	res = ds_json_object_ensure(a->container, "resources");
	if (!res)
		return ds_dra_fail(c, "container %s: resources is not a mapping", a->cname);
	claims = json_object_get(res, "claims");
	if (!json_is_array(claims)) {
		claims = json_array();
		if (!claims || json_object_set_new(res, "claims", claims) < 0)
			return -ENOMEM;
	}
	item = json_object();
	if (!item || json_object_set_new(item, "name", json_string(entry_name)) < 0 ||
	    json_array_append_new(claims, item) < 0) {
		json_decref(item);
		return -ENOMEM;
	}
	ds_dra_ref_text(a->rule->target_kind, a->rule->target, to, sizeof(to));
	snprintf(msg, sizeof(msg), "(attach, rule dra.%s[%zu])", a->rule->list, a->rule->index);
	ds_report_add(c->rep, DS_REPORT_ATTACH, c->what, a->cname, entry_name, "(no claim)", to,
		      msg);
	c->changed++;
	return remove_extended(c, a);
}

/* The object whose "spec" is the pod spec (see ds_obj_pod_spec): where the mapped copy goes. */
static json_t *pod_spec_holder(json_t *obj, enum ds_workload w)
{
	switch (w) {
	case DS_WORKLOAD_POD:
		return obj;
	case DS_WORKLOAD_CRONJOB:
		return ds_json_path(obj, "spec.jobTemplate.spec.template");
	default:
		return ds_json_path(obj, "spec.template");
	}
}

/*
 * A group's entry whose claim changes moves the files of every container of its pods that
 * uses the entry (a template's claim is the group's, under the entry's name, which a rule
 * never changes: so only a claim renamed, or a template made a claim or back).
 */
static int report_group_attr_paths(const struct gentry *g, const char *what, const char *path,
				   ds_report *rep)
{
	char from[400], to[400], msg[400];

	attr_prefix(g->kind, g->source, g->name, NULL, from, sizeof(from));
	attr_prefix(g->tkind, g->target, g->name, NULL, to, sizeof(to));
	if (strcmp(from, to) == 0)
		return 0;
	snprintf(msg, sizeof(msg),
		 "(device attributes, KEP-5304, %s: the containers of the group's pods that use "
		 "entry %s find their devices' <driver>-metadata.json %s)",
		 path, g->name, attr_where(g->tkind));
	return ds_report_add(rep, DS_REPORT_ATTRIBUTES, what, "ALL", g->name, from, to, msg);
}

/* Rewrite the entries of a group list as decided; report each change. */
static size_t apply_group(struct gentry *g, size_t n, const char *what, const char *path,
			  ds_report *rep, int *rc)
{
	size_t changed = 0;

	for (size_t i = 0; i < n && *rc == 0; i++) {
		char from[300], to[300], msg[400];

		if (!g[i].rule ||
		    (g[i].tkind == g[i].kind && strcmp(g[i].target, g[i].source) == 0))
			continue;
		ds_dra_ref_text(g[i].kind, g[i].source, from, sizeof(from));
		ds_dra_ref_text(g[i].tkind, g[i].target, to, sizeof(to));
		snprintf(msg, sizeof(msg), "(rule dra.%s[%zu]%s%s, %s)", g[i].rule->list,
			 g[i].rule->index, g[i].follows[0] ? " of its member " : "", g[i].follows,
			 path);
		if (ds_report_add(rep, DS_REPORT_REWRITE, what, "ALL", g[i].name, from, to, msg) <
			0 ||
		    report_group_attr_paths(&g[i], what, path, rep) < 0 ||
		    ds_dra_retarget(g[i].json, g[i].tkind, g[i].target) < 0)
			*rc = -ENOMEM;
		changed++;
	}
	return changed;
}

static int map_workload(const ds_dra_config *dra, json_t *obj, const json_t *group,
			const json_t *members, ds_report *rep, bool *conflict)
{
	struct ctx c = {.dra = dra, .rep = rep};
	size_t rep_start = ds_report_count(rep), inserted = 0;
	enum ds_workload w;
	json_t *spec, *rcs;
	int r;

	spec = ds_obj_pod_spec(obj, &w);
	if (!spec)
		return 0;
	c.workload = (int)w;
	c.instance = ds_obj_name(obj);
	ds_obj_describe(obj, c.what, sizeof(c.what));

	/*
	 * Decide everything first, then apply to a copy of the pod spec that
	 * replaces the original only when all of it succeeded: a failure found
	 * while applying (after earlier entries were rewritten) leaves obj as it was.
	 */
	c.spec = json_deep_copy(spec);
	if (!c.spec) {
		r = -ENOMEM;
		goto out;
	}
	if (w == DS_WORKLOAD_JOB && ds_json_path(obj, "spec.scheduling.resourceClaims")) {
		/* The Job is its own group: its pods share spec.scheduling's claims. */
		c.g_rcs = json_deep_copy(ds_json_path(obj, "spec.scheduling.resourceClaims"));
		snprintf(c.g_what, sizeof(c.g_what), "%s spec.scheduling", c.what);
		c.g_name = c.instance;
		if (!c.g_rcs) {
			r = -ENOMEM;
			goto out;
		}
		if ((r = ds_dra_group_read(c.g_rcs, "spec.scheduling.resourceClaims", &c.g, &c.n_g,
					   c.why, sizeof(c.why))) < 0 ||
		    (r = ds_dra_group_decide(dra, c.workload, c.instance, c.g, c.n_g,
					     "spec.scheduling", c.why, sizeof(c.why))) < 0)
			goto out;
	} else if (group && ds_json_path(group, "spec.resourceClaims")) {
		char gwhat[340];

		c.g_firm = true;
		c.g_name = ds_obj_name(group);
		/* the group as the source has it, named where obj (mapped) goes */
		ds_obj_describe_in(group, ds_obj_namespace(obj), c.g_what, sizeof(c.g_what));
		snprintf(gwhat, sizeof(gwhat), "%s", c.g_what);
		if ((r = ds_dra_group_read(ds_json_path(group, "spec.resourceClaims"),
					   "the group's spec.resourceClaims", &c.g, &c.n_g, c.why,
					   sizeof(c.why))) < 0 ||
		    (r = ds_dra_group_decide(dra, DS_RULE_PODGROUP, c.g_name, c.g, c.n_g, gwhat,
					     c.why, sizeof(c.why))) < 0)
			goto out;
		/* What no rule naming the group decides follows its members, this one too. */
		r = ds_dra_group_follow(dra, c.g, c.n_g, gwhat, c.g_name, members, obj,
					ds_obj_namespace(obj), c.why, sizeof(c.why));
		if (r < 0) {
			c.g_conflict = r == -EINVAL;
			goto out;
		}
	}
	if ((r = ds_dra_collect_entries(&c)) < 0 || (r = ds_dra_collect_refs(&c)) < 0 ||
	    (r = ds_dra_resolve_refs(&c)) < 0)
		goto out;
	rcs = json_object_get(c.spec, "resourceClaims");
	for (size_t i = 0; i < c.n_entries; i++)
		if ((r = apply_entry(&c, &c.entries[i], rcs, &inserted)) < 0)
			goto out;
	for (size_t i = 0; i < c.n_attaches; i++)
		if (c.attaches[i].rule && (r = apply_attach(&c, &c.attaches[i])) < 0)
			goto out;
	if (c.g_rcs) {
		size_t n =
		    apply_group(c.g, c.n_g, c.what, "spec.scheduling.resourceClaims", rep, &r);
		if (r < 0)
			goto out;
		if (n && json_object_set(ds_json_path(obj, "spec.scheduling"), "resourceClaims",
					 c.g_rcs) < 0) {
			r = -ENOMEM;
			goto out;
		}
		c.changed += n;
	}
	/* "spec" exists in its holder: replacing the value allocates nothing */
	if (c.changed > 0 && json_object_set(pod_spec_holder(obj, w), "spec", c.spec) < 0) {
		r = -ENOMEM;
		goto out;
	}
	r = (int)c.changed;
out:
	if (r < 0) {
		/* nothing was done: only the error is reported */
		ds_report_truncate(rep, rep_start);
		ds_report_add(rep, DS_REPORT_ERROR, c.what, NULL, NULL, NULL, NULL,
			      r == -ENOMEM ? "out of memory"
			      : c.why[0]   ? c.why
					   : strerror(-r));
	}
	if (conflict)
		*conflict = c.g_conflict;
	json_decref(c.spec);
	json_decref(c.g_rcs);
	free(c.g);
	ds_dra_names_dispose(&c.names);
	free(c.entries);
	free(c.refs);
	free(c.attaches);
	return r;
}

int ds_dra_map_workload_members(const ds_dra_config *dra, json_t *obj, const json_t *group,
				const json_t *members, ds_report *rep)
{
	return map_workload(dra, obj, group, members, rep, NULL);
}

int ds_dra_map_workload_in(const ds_dra_config *dra, json_t *obj, const json_t *group,
			   ds_report *rep)
{
	return map_workload(dra, obj, group, NULL, rep, NULL);
}

int ds_dra_map_workload(const ds_dra_config *dra, json_t *obj, ds_report *rep)
{
	return map_workload(dra, obj, NULL, NULL, rep, NULL);
}

/* The group's entries as the rules naming it and its members decide. @return as follow */
static int decide_podgroup(const ds_dra_config *dra, json_t *rcs, const char *path,
			   const json_t *group, const json_t *members, struct gentry **g, size_t *n,
			   char *why, size_t size)
{
	char what[300];
	int r;

	ds_obj_describe(group, what, sizeof(what));
	if ((r = ds_dra_group_read(rcs, path, g, n, why, size)) < 0 ||
	    (r = ds_dra_group_decide(dra, DS_RULE_PODGROUP, ds_obj_name(group), *g, *n, what, why,
				     size)) < 0)
		return r;
	return ds_dra_group_follow(dra, *g, *n, what, ds_obj_name(group), members, NULL,
				   ds_obj_namespace(group), why, size);
}

int ds_dra_check_group(const ds_dra_config *dra, const json_t *group, const json_t *members,
		       char *why, size_t size)
{
	ds_report *rep = NULL;
	struct gentry *g = NULL;
	size_t i, n = 0;
	json_t *m;
	int r;

	/* Members that disagree among themselves, or with the group's rule. */
	r = decide_podgroup(dra, ds_json_path(group, "spec.resourceClaims"),
			    "the group's spec.resourceClaims", group, members, &g, &n, why, size);
	free(g);
	if (r < 0)
		return r;
	if ((r = ds_report_new(&rep)) < 0)
		return r;
	json_array_foreach (members, i, m) {
		json_t *copy = json_deep_copy(m);
		bool conflict = false;

		if (!copy) {
			r = -ENOMEM;
			break;
		}
		r = map_workload(dra, copy, group, members, rep, &conflict);
		json_decref(copy);
		if (r == -ENOMEM)
			break;
		if (r == -EINVAL && conflict) {
			const ds_report_entry *e = ds_report_get(rep, ds_report_count(rep) - 1);
			snprintf(why, size, "%s: %s", e->object, e->message);
			break;
		}
		r = 0;
	}
	ds_report_free(rep);
	return r;
}

const char *ds_dra_group_of(const json_t *obj)
{
	return ds_json_str(ds_json_path(ds_obj_pod_spec(obj, NULL), "schedulingGroup"),
			   "podGroupName");
}

int ds_dra_map_group(const ds_dra_config *dra, json_t *obj, ds_report *rep)
{
	return ds_dra_map_group_members(dra, obj, NULL, rep);
}

int ds_dra_map_group_members(const ds_dra_config *dra, json_t *obj, const json_t *members,
			     ds_report *rep)
{
	const char *kind = ds_obj_kind(obj);
	size_t rep_start = ds_report_count(rep), changed = 0;
	bool podgroup;
	json_t *copy = NULL, *tpls, *t;
	struct gentry *g = NULL;
	char what[300], why[512] = "", path[80];
	size_t n = 0, i;
	int r = 0;

	if (!kind || !ds_obj_in_group(obj, "scheduling.k8s.io") || !ds_kind_is_group(kind))
		return 0;
	podgroup = ds_kind_is(kind, DS_KIND_POD_GROUP);
	ds_obj_describe(obj, what, sizeof(what));
	/* On a copy of the spec: it replaces the original only when all of it succeeded. */
	copy = json_deep_copy(json_object_get(obj, "spec"));
	if (!copy)
		return json_object_get(obj, "spec") ? -ENOMEM : 0;
	if (podgroup) {
		if ((r = decide_podgroup(dra, json_object_get(copy, "resourceClaims"),
					 "spec.resourceClaims", obj, members, &g, &n, why,
					 sizeof(why))) < 0)
			goto out;
		changed += apply_group(g, n, what, "spec.resourceClaims", rep, &r);
		goto out;
	}
	/* A Workload: the claims of each PodGroup template; PodGroups made from one share them. */
	tpls = json_object_get(copy, "podGroupTemplates");
	json_array_foreach (tpls, i, t) {
		const char *tn = ds_json_str(t, "name");

		snprintf(path, sizeof(path), "spec.podGroupTemplates[%zu].resourceClaims", i);
		free(g);
		g = NULL;
		if ((r = ds_dra_group_read(json_object_get(t, "resourceClaims"), path, &g, &n, why,
					   sizeof(why))) < 0 ||
		    (r = ds_dra_group_decide(dra, DS_RULE_WORKLOAD, ds_obj_name(obj), g, n, what,
					     why, sizeof(why))) < 0 ||
		    (r = ds_dra_template_follow(dra, g, n, what, ds_obj_name(obj), tn ? tn : "",
						members, ds_obj_namespace(obj), why, sizeof(why))) <
			0)
			goto out;
		snprintf(path, sizeof(path), "podGroupTemplates %s", tn ? tn : "?");
		changed += apply_group(g, n, what, path, rep, &r);
		if (r < 0)
			goto out;
	}
out:
	if (r == 0 && changed && json_object_set(obj, "spec", copy) < 0)
		r = -ENOMEM;
	if (r < 0) {
		ds_report_truncate(rep, rep_start);
		ds_report_add(rep, DS_REPORT_ERROR, what, NULL, NULL, NULL, NULL,
			      r == -ENOMEM ? "out of memory"
			      : why[0]	   ? why
					   : strerror(-r));
	}
	json_decref(copy);
	free(g);
	return r < 0 ? r : (int)changed;
}

static const char *map_class(const ds_dra_config *dra, const char *name)
{
	for (size_t i = 0; name && i < dra->n_device_classes; i++)
		if (strcmp(dra->device_classes[i].from, name) == 0)
			return dra->device_classes[i].to;
	return NULL;
}

static int rename_class(const ds_dra_config *dra, json_t *holder, const char *what,
			const char *request, ds_report *rep)
{
	const char *from = ds_json_str(holder, "deviceClassName");
	const char *to = map_class(dra, from);
	char f[300], msg[100];

	if (!to)
		return 0;
	snprintf(f, sizeof(f), "deviceClassName=%s", from);
	snprintf(msg, sizeof(msg), "(deviceClassMappings)");
	if (ds_report_add(rep, DS_REPORT_DEVICE_CLASS, what, NULL, request, f, to, msg) < 0)
		return -ENOMEM;
	/* `from` dies with the old string: report first, then replace. */
	return json_object_set_new(holder, "deviceClassName", json_string(to)) < 0 ? -ENOMEM : 1;
}

int ds_dra_map_device_classes(const ds_dra_config *dra, json_t *obj, ds_report *rep)
{
	const char *kind = ds_obj_kind(obj);
	json_t *requests;
	char what[300], req[200];
	int changed = 0, r;
	size_t i;
	json_t *rq;

	if (!kind || dra->n_device_classes == 0)
		return 0;
	if ((r = ds_dra_map_extended(dra, obj, rep)) != 0 ||
	    !ds_obj_in_group(obj, "resource.k8s.io"))
		return r;
	if (ds_kind_is(kind, DS_KIND_RESOURCE_CLAIM))
		requests = ds_json_path(obj, "spec.devices.requests");
	else if (ds_kind_is(kind, DS_KIND_RESOURCE_CLAIM_TEMPLATE))
		requests = ds_json_path(obj, "spec.spec.devices.requests");
	else
		return 0;
	if (!json_is_array(requests))
		return 0;
	ds_obj_describe(obj, what, sizeof(what));
	json_array_foreach (requests, i, rq) {
		const char *rname = ds_json_str(rq, "name");
		json_t *subs = json_object_get(rq, "firstAvailable");
		size_t k;
		json_t *sub;

		snprintf(req, sizeof(req), "%s", rname ? rname : "?");
		if ((r = rename_class(dra, rq, what, req, rep)) < 0)
			return r;
		changed += r;
		if ((r = rename_class(dra, json_object_get(rq, "exactly"), what, req, rep)) < 0)
			return r;
		changed += r;
		json_array_foreach (subs, k, sub) {
			const char *sname = ds_json_str(sub, "name");

			snprintf(req, sizeof(req), "%s/%s", rname ? rname : "?",
				 sname ? sname : "?");
			if ((r = rename_class(dra, sub, what, req, rep)) < 0)
				return r;
			changed += r;
		}
	}
	return changed;
}
