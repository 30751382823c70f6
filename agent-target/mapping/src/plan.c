/*
 * The importer's pipeline, offline (`drasync-target plan`): every manifest
 * object through ds_transform_object() as `run` applies it, the preflight of
 * what the planned objects need but the plan lacks, and the objects in apply
 * order.
 */
#include "drasync/plan.h"

#include "drasync/buf.h"
#include "drasync/dra_mapping.h"
#include "drasync/k8s_object.h"
#include "drasync/kinds.h"
#include "drasync/preflight.h"
#include "drasync/selection.h"
#include "drasync/transform.h"
#include "drasync/yaml.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct key {
	const char *kind, *ns, *name;
};

struct ds_plan {
	json_t *out;	  /* objects to apply */
	json_t *held;	  /* standby: kept in the ledger, still checked */
	struct key *keys; /* identity of each, for the preflight */
	size_t n_keys;
	json_t *required;     /* set of the (needer, kind, namespace, name) already reported */
	json_t *groups;	      /* the manifests' PodGroups, untransformed */
	json_t *members;      /* the manifests' workloads that join a PodGroup, untransformed */
	json_t *member_lists; /* what members_of() handed out */
	ds_report *rep;
	const char *obj_desc; /* the object the preflight is at */
	ds_plan_counts n;
	enum ds_mode mode;	 /* of the configuration planned with, for the summary */
	enum ds_dra_version api; /* the same */
};

/* File the transformed object by the transform's verdict r. @return 0, -ENOMEM */
static int classify(ds_plan *p, json_t *obj, int r)
{
	switch (r) {
	case DS_TRANSFORM_APPLY:
		p->n.apply++;
		if (json_array_append(p->out, obj) < 0)
			return -ENOMEM;
		p->keys[p->n_keys++] =
		    (struct key){ds_obj_kind(obj), ds_obj_namespace(obj), ds_obj_name(obj)};
		return 0;
	case DS_TRANSFORM_SKIP:
		p->n.skip++;
		return 0;
	case DS_TRANSFORM_HOLD:
		p->n.held++;
		return json_array_append(p->held, obj) < 0 ? -ENOMEM : 0;
	default:
		p->n.failed++;
		return 0;
	}
}

/* The report entries from `first` on, of manifest object i; errors are shown with --quiet too. */
static void print_entries(const ds_plan *p, const ds_manifest *man, size_t i, size_t first,
			  FILE *out, bool quiet)
{
	for (size_t k = first; k < ds_report_count(p->rep); k++) {
		const ds_report_entry *e = ds_report_get(p->rep, k);

		if (e->type == DS_REPORT_ERROR) {
			char origin[300];
			fprintf(out, "error       %s: %s: %s\n",
				ds_manifest_origin(man, i, origin, sizeof(origin)),
				e->object ? e->object : "-", e->message ? e->message : "");
		} else if (!quiet) {
			ds_report_entry_print(out, e);
		}
	}
}

static bool same_ns(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* A PodGroup of the manifests as the source has it (copies taken before any transform). */
static const json_t *group_of(void *ud, const char *ns, const char *name)
{
	const ds_plan *p = ud;
	size_t i;
	json_t *g;

	json_array_foreach (p->groups, i, g) {
		const char *gns = ds_obj_namespace(g);
		if (strcmp(ds_obj_name(g), name) == 0 && same_ns(gns, ns))
			return g;
	}
	return NULL;
}

/* The workloads of the manifests whose pods join PodGroup ns/group, as the source has them. */
static const json_t *members_of(void *ud, const char *ns, const char *group)
{
	ds_plan *p = ud;
	json_t *list = json_array(), *w;
	size_t i;

	if (!list || json_array_append_new(p->member_lists, list) < 0)
		return NULL;
	json_array_foreach (p->members, i, w)
		if (same_ns(ds_obj_namespace(w), ns) && strcmp(ds_dra_group_of(w), group) == 0 &&
		    json_array_append(list, w) < 0)
			return NULL;
	return list;
}

/* The PodGroups of the manifests in ns made from a template of Workload `workload`. */
static const json_t *groups_from(void *ud, const char *ns, const char *workload)
{
	ds_plan *p = ud;
	json_t *list = json_array(), *g;
	size_t i;

	if (!list || json_array_append_new(p->member_lists, list) < 0)
		return NULL;
	json_array_foreach (p->groups, i, g) {
		const char *w = ds_dra_group_workload(g);

		if (same_ns(ds_obj_namespace(g), ns) && w && strcmp(w, workload) == 0 &&
		    json_array_append(list, g) < 0)
			return NULL;
	}
	return list;
}

/* The importer's pipeline on every object read. @return 0, -ENOMEM */
static int transform_all(ds_plan *p, ds_manifest *man, const ds_plan_opts *o)
{
	ds_transform_opts topts = {.cfg = o->cfg,
				   .dra_version = o->api,
				   .source_cluster = o->source_cluster,
				   .sched_version = o->sched,
				   .group_of = group_of,
				   .members_of = members_of,
				   .groups_from = groups_from,
				   .group_ud = p};

	p->keys = calloc(ds_manifest_count(man) + 1, sizeof(*p->keys));
	if (!p->keys)
		return -ENOMEM;
	/* Members are mapped against their group as the source has it, in any input order. */
	for (size_t i = 0; i < ds_manifest_count(man); i++) {
		json_t *obj = ds_manifest_object(man, i);
		const char *kind = ds_obj_kind(obj);

		if (ds_kind_is(kind, DS_KIND_POD_GROUP) && ds_obj_name(obj) &&
		    ds_obj_in_group(obj, "scheduling.k8s.io") &&
		    json_array_append_new(p->groups, json_deep_copy(obj)) < 0)
			return -ENOMEM;
		if (ds_dra_group_of(obj) &&
		    json_array_append_new(p->members, json_deep_copy(obj)) < 0)
			return -ENOMEM;
	}
	for (size_t i = 0; i < ds_manifest_count(man); i++) {
		json_t *obj = ds_manifest_object(man, i);
		size_t first = ds_report_count(p->rep);
		int r = ds_transform_object(&topts, obj, p->rep);

		if (r < 0 || classify(p, obj, r) < 0)
			return -ENOMEM;
		if (o->report)
			print_entries(p, man, i, first, o->report, o->quiet);
	}
	return 0;
}

static int in_plan(const ds_plan *p, const char *kind, const char *ns, const char *name)
{
	for (size_t i = 0; i < p->n_keys; i++) {
		const struct key *k = &p->keys[i];
		if (strcmp(k->kind, kind) == 0 && strcmp(k->name, name) == 0 &&
		    ((!k->ns && !ns) || (k->ns && ns && strcmp(k->ns, ns) == 0)))
			return 1;
	}
	return 0;
}

/*
 * Remember that the current object needs (kind, ns, name): the four fields,
 * each length-prefixed, make one key of the set, so no two tuples share it.
 * @return 1 when new, 0 when already required, -ENOMEM
 */
static int required_add(ds_plan *p, const char *kind, const char *ns, const char *name)
{
	const char *f[] = {p->obj_desc, kind, ns, name};
	ds_str k;
	char *key;
	int rc;

	/* No field is longer than the input it was read from. */
	ds_str_init(&k, 4 * (size_t)DS_YAML_MAX_INPUT);
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		if (f[i])
			ds_str_addf(&k, "%zu:%s;", strlen(f[i]), f[i]);
		else
			ds_str_adds(&k, "-;");
	}
	key = ds_str_take(&k, NULL);
	if (!key)
		return -ENOMEM;
	if (json_object_get(p->required, key))
		rc = 0;
	else /* names are not checked for UTF-8 here, and desc may be cut mid-character */
		rc = json_object_set_new_nocheck(p->required, key, json_null()) < 0 ? -ENOMEM : 1;
	free(key);
	return rc;
}

static int need(void *ud, const char *kind, const char *ns, const char *name)
{
	ds_plan *p = ud;
	char msg[400];
	int r;

	if (in_plan(p, kind, ns, name))
		return 0;
	/* One line per distinct missing object and needer. */
	r = required_add(p, kind, ns, name);
	if (r <= 0)
		return r;
	snprintf(msg, sizeof(msg),
		 "needs %s %s%s%s, which must exist on the target (it is not in "
		 "this plan)",
		 kind, ns ? ns : "", ns ? "/" : "", name);
	p->n.required++;
	return ds_report_add(p->rep, DS_REPORT_REQUIRE, p->obj_desc, NULL, NULL, NULL, NULL, msg);
}

/*
 * KEP-5004: a container that keeps an extended resource (nvidia.com/gpu) in its
 * limits is served on the target by a DeviceClass whose extendedResourceName
 * it is (the target's scheduler makes the claim), or by a device plugin; the
 * other path is an attach rule with extendedResources. Say which applies.
 */
static int extended_need(void *ud, const char *container, const char *resource)
{
	ds_plan *p = ud;
	const char *by = NULL;
	char msg[600];
	size_t i;
	json_t *o;

	json_array_foreach (p->out, i, o) {
		const char *kind = ds_obj_kind(o);
		if (ds_kind_is(kind, DS_KIND_DEVICE_CLASS) &&
		    ds_preflight_class_serves(o, resource))
			by = ds_obj_name(o);
	}
	if (by)
		snprintf(msg, sizeof(msg),
			 "keeps %s: DeviceClass %s of this plan serves it as a DRA extended "
			 "resource (the target's scheduler makes the claim; Kubernetes 1.34+, "
			 "gate DRAExtendedResource)",
			 resource, by);
	else if (strncmp(resource, "deviceclass.resource.kubernetes.io/", 35) == 0)
		/* the implicit name of a class: only that class serves it */
		snprintf(msg, sizeof(msg),
			 "keeps %s: the target needs DeviceClass %s, whose implicit extended "
			 "resource it is (Kubernetes 1.34+, gate DRAExtendedResource, GA in "
			 "1.37); a rule with attach: true and extendedResources: [%s] moves it "
			 "to a claim instead",
			 resource, resource + 35, resource);
	else
		snprintf(msg, sizeof(msg),
			 "keeps %s: the target needs a DeviceClass with extendedResourceName %s "
			 "(Kubernetes 1.34+, gate DRAExtendedResource, GA in 1.37) or a device "
			 "plugin that advertises it; a rule with attach: true and "
			 "extendedResources: [%s] moves it to a claim instead",
			 resource, resource, resource);
	return ds_report_add(p->rep, DS_REPORT_EXTENDED, p->obj_desc, container, NULL, NULL, NULL,
			     msg);
}

/*
 * A claim or template that asks for admin access is admitted only in a
 * Namespace the target's admins labelled: a Namespace of this plan never
 * carries the label (drasync drops it), so the plan says it waits for it.
 */
static int admin_need(ds_plan *p, const json_t *obj)
{
	const char *req = ds_preflight_admin_access(obj);
	const char *ns = ds_obj_namespace(obj);
	char msg[600];

	if (!req)
		return 0;
	snprintf(msg, sizeof(msg),
		 "request %s asks for adminAccess: the target admits it only in a Namespace "
		 "labelled %s: \"true\"; Namespace %s needs that label on the target, set by "
		 "the target's admins (drasync never sets it, nor copies it from the source); "
		 "until then it waits, and so do the workloads that use it",
		 req[0] ? req : "(unnamed)", DS_ADMIN_ACCESS_LABEL, ns ? ns : "");
	p->n.admin++;
	return ds_report_add(p->rep, DS_REPORT_REQUIRE, p->obj_desc, NULL, NULL, NULL, NULL, msg);
}

/* Preflight: what the planned objects reference but the plan does not contain. @return 0, -ENOMEM
 */
static int preflight_all(ds_plan *p, FILE *out, bool quiet)
{
	size_t n_out = json_array_size(p->out);

	for (size_t i = 0; i < n_out + json_array_size(p->held); i++) {
		json_t *obj =
		    i < n_out ? json_array_get(p->out, i) : json_array_get(p->held, i - n_out);
		size_t first = ds_report_count(p->rep);
		char desc[300];

		p->obj_desc = ds_obj_describe(obj, desc, sizeof(desc));
		if (ds_preflight_needs(obj, need, p) < 0 ||
		    ds_preflight_extended(obj, extended_need, p) < 0 || admin_need(p, obj) < 0)
			return -ENOMEM;
		for (size_t k = first; out && !quiet && k < ds_report_count(p->rep); k++)
			ds_report_entry_print(out, ds_report_get(p->rep, k));
	}
	p->obj_desc = NULL;
	return 0;
}

static int cmp_rank(const void *a, const void *b)
{
	const json_t *const *x = a, *const *y = b;
	int ra = ds_selection_apply_rank(*x), rb = ds_selection_apply_rank(*y);

	return (ra > rb) - (ra < rb);
}

/* Sort stably by apply rank: decorate with the input index. */
static int order_output(json_t *arr)
{
	size_t n = json_array_size(arr);
	json_t **v = calloc(n + 1, sizeof(*v));
	int r = 0;

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		v[i] = json_incref(json_array_get(arr, i));
	/* Insertion sort keeps equal ranks in input order; plans are small. */
	for (size_t i = 1; i < n; i++) {
		json_t *x = v[i];
		size_t j = i;
		while (j > 0 && cmp_rank(&v[j - 1], &x) > 0) {
			v[j] = v[j - 1];
			j--;
		}
		v[j] = x;
	}
	json_array_clear(arr);
	for (size_t i = 0; i < n; i++)
		if (json_array_append_new(arr, v[i]) < 0)
			r = -ENOMEM;
	free(v);
	return r;
}

/* @return 0, or the negative errno of the failed write */
static int put(FILE *out, const char *s, size_t len)
{
	if (len && fwrite(s, 1, len, out) != len)
		return errno ? -errno : -EIO;
	return 0;
}

/* One object as a YAML document. @return 0; -ENOMEM; a write's negative errno; -ECANCELED (err) */
static int put_yaml(FILE *out, const json_t *o, ds_err *err)
{
	char *s = NULL;
	int rc = ds_yaml_emit_string(o, &s, err);

	if (rc == -ENOMEM)
		return rc;
	if (rc < 0) /* not a write error: the object cannot be written as YAML */
		return -ECANCELED;
	rc = put(out, s, strlen(s));
	free(s);
	return rc;
}

int ds_plan_write(const ds_plan *p, FILE *out, bool json, ds_err *err)
{
	size_t i;
	json_t *o;
	int rc = 0;

	if (json) {
		json_t *list = json_pack("{s:s, s:O, s:s, s:{s:s}}", "apiVersion", "v1", "items",
					 p->out, "kind", "List", "metadata", "resourceVersion", "");
		char *s = list ? json_dumps(list, JSON_INDENT(4) | JSON_PRESERVE_ORDER) : NULL;

		json_decref(list);
		if (!s)
			return -ENOMEM;
		rc = put(out, s, strlen(s));
		if (!rc)
			rc = put(out, "\n", 1);
		free(s);
	} else {
		json_array_foreach (p->out, i, o) {
			if (i > 0 && (rc = put(out, "---\n", 4)) < 0)
				break;
			if ((rc = put_yaml(out, o, err)) < 0)
				break;
		}
	}
	/* Flushed, so that a full disk or a closed pipe is known here. */
	if (!rc && fflush(out) == EOF)
		rc = errno ? -errno : -EIO;
	return rc;
}

int ds_plan_new(ds_plan **out)
{
	ds_plan *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	if (ds_report_new(&p->rep) < 0 || !(p->out = json_array()) || !(p->held = json_array()) ||
	    !(p->required = json_object()) || !(p->groups = json_array()) ||
	    !(p->members = json_array()) || !(p->member_lists = json_array())) {
		ds_plan_free(p);
		return -ENOMEM;
	}
	*out = p;
	return 0;
}

void ds_plan_free(ds_plan *p)
{
	if (!p)
		return;
	json_decref(p->out);
	json_decref(p->held);
	json_decref(p->required);
	json_decref(p->groups);
	json_decref(p->members);
	json_decref(p->member_lists);
	free(p->keys);
	ds_report_free(p->rep);
	free(p);
}

int ds_plan_run(ds_plan *p, ds_manifest *man, const ds_plan_opts *o)
{
	int rc = transform_all(p, man, o);

	p->mode = ds_target_config_mode(o->cfg);
	p->api = o->api;
	if (rc == 0)
		rc = preflight_all(p, o->report, o->quiet);
	if (rc == 0)
		rc = order_output(p->out);
	return rc;
}

const json_t *ds_plan_objects(const ds_plan *p)
{
	return p->out;
}

const ds_report *ds_plan_report(const ds_plan *p)
{
	return p->rep;
}

const ds_plan_counts *ds_plan_count(const ds_plan *p)
{
	return &p->n;
}

void ds_plan_summary(const ds_plan *p, FILE *out, size_t n_bad_files)
{
	char admin[120] = "";

	if (p->n.admin)
		snprintf(admin, sizeof(admin),
			 "%zu claim(s) or template(s) wait for the admin-access label; ",
			 p->n.admin);
	fprintf(out,
		"plan: %zu to apply, %zu skipped, %zu held (standby), %zu failed; %zu DRA "
		"reference(s) rewritten, %zu split, %zu attached, %zu device class(es) renamed; "
		"%zu object(s) must already exist on the target; %smode %s, %s\n",
		p->n.apply, p->n.skip, p->n.held, p->n.failed + n_bad_files,
		ds_report_count_type(p->rep, DS_REPORT_REWRITE),
		ds_report_count_type(p->rep, DS_REPORT_SPLIT),
		ds_report_count_type(p->rep, DS_REPORT_ATTACH),
		ds_report_count_type(p->rep, DS_REPORT_DEVICE_CLASS), p->n.required, admin,
		ds_mode_name(p->mode), ds_dra_api_version(p->api));
}
