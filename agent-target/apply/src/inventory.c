#include "drasync/inventory.h"

#include "drasync/buf.h"
#include "drasync/dra_mapping.h"
#include "drasync/k8s_object.h"
#include "drasync/kinds.h"
#include "drasync/ledger_objects.h"
#include "drasync/object_state.h"
#include "drasync/record.h"
#include "drasync/string_table.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define MAX_YAML (64u << 20)

/* The claims and templates, by enum ds_target_kind. */
static const enum ds_kind_id target_kinds[DS_TARGET_KIND_MAX] = {DS_KIND_RESOURCE_CLAIM,
								 DS_KIND_RESOURCE_CLAIM_TEMPLATE};

static const char *const ds_inventory_type_table[DS_INVENTORY_TYPE_MAX] = {"reference", "attach",
									   "object", "broken"};
static const char *const ds_inventory_exists_table[DS_EXISTS_MAX] = {"unknown", "yes", "no"};
static const char *const ds_inventory_kind_key_table[DS_TARGET_KIND_MAX] = {
    "resourceClaim", "resourceClaimTemplate"};
DS_DEFINE_PRIVATE_STRING_TABLE_LOOKUP(ds_inventory_type, enum ds_inventory_type)
DS_DEFINE_PRIVATE_STRING_TABLE_LOOKUP(ds_inventory_exists, enum ds_inventory_exists)
DS_DEFINE_PRIVATE_STRING_TABLE_LOOKUP(ds_inventory_kind_key, enum ds_target_kind)

static const char *kind_name(enum ds_target_kind k)
{
	return ds_kind_get(target_kinds[k])->name;
}

const char *ds_inventory_type_name(enum ds_inventory_type t)
{
	const char *s = ds_inventory_type_to_string(t);

	return s ? s : "unknown";
}

const char *ds_inventory_exists_name(enum ds_inventory_exists e)
{
	const char *s = ds_inventory_exists_to_string(e);

	return s ? s : "unknown";
}

const char *ds_inventory_kind_key(enum ds_target_kind k)
{
	const char *s = ds_inventory_kind_key_to_string(k);

	return s ? s : "unknown";
}

struct reader {
	const ds_inventory_opts *o;
	ds_ledger_object *objs;
	size_t n_objs;
	json_t *replicated; /* "Kind\ntarget ns\nname" of the claims and templates sources send */
	ds_ledger_object *groups; /* the PodGroups of the ledger, whose claims members share */
	size_t n_groups;
	ds_inventory *inv;
	size_t cap_refs;
	/* the cluster, looked up once: */
	json_t *seen;  /* "Kind\nns\nname" -> [exists, reason] */
	int dra_state; /* 0 not looked, 1 served, -1 not served, -2 unreachable */
	char dra_api[128];
	char dra_why[800];
};

/* The order rows are sorted in: the workloads (enum ds_workload), then claims and templates. */
static int kind_rank(const char *kind)
{
	const ds_kind *k = ds_kind_from_name(kind);
	int i;

	if (k && k->workload >= 0)
		return k->workload;
	for (i = 0; k && i < DS_TARGET_KIND_MAX; i++)
		if (k->id == target_kinds[i])
			return DS_WORKLOAD_MAX + i;
	return 99;
}

static int cmp_str(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "");
}

static int cmp_obj(const void *pa, const void *pb)
{
	const ds_ledger_object *a = pa, *b = pb;
	int c;

	if ((c = cmp_str(a->ns, b->ns)) != 0)
		return c;
	if ((c = kind_rank(a->kind) - kind_rank(b->kind)) != 0)
		return c;
	if ((c = cmp_str(a->name, b->name)) != 0)
		return c;
	return cmp_str(a->source, b->source);
}

static int is_claim_kind(const char *kind, enum ds_target_kind *k)
{
	int id = ds_kind_id_from_name(kind);

	for (int i = 0; id >= 0 && i < DS_TARGET_KIND_MAX; i++)
		if ((enum ds_kind_id)id == target_kinds[i]) {
			*k = (enum ds_target_kind)i;
			return 1;
		}
	return 0;
}

static const char *target_ns(const struct reader *rd, const char *ns)
{
	return ns && ns[0] ? ds_target_config_map_namespace(rd->o->cfg, ns) : "";
}

/* What the sources replicate: claims and templates, where they land on the target. */
static int note_replicated(struct reader *rd)
{
	for (size_t i = 0; i < rd->n_objs; i++) {
		const ds_ledger_object *o = &rd->objs[i];
		enum ds_target_kind k;
		char key[1200];

		if (o->op != DS_RECORD_UPSERT || !is_claim_kind(o->kind, &k) ||
		    (o->state && strcmp(o->state, "skipped") == 0))
			continue;
		snprintf(key, sizeof(key), "%s\n%s\n%s", o->kind, target_ns(rd, o->ns), o->name);
		if (json_object_set_new_nocheck(rd->replicated, key, json_true()) < 0)
			return -ENOMEM;
	}
	return 0;
}

static bool selected(const struct reader *rd, const ds_ledger_object *o)
{
	const char *tns = target_ns(rd, o->ns);

	if (!rd->o->n_namespaces)
		return true;
	for (size_t i = 0; i < rd->o->n_namespaces; i++) {
		const char *want = rd->o->namespaces[i];
		if (strcmp(want, o->ns ? o->ns : "") == 0 || strcmp(want, tns) == 0)
			return true;
	}
	return false;
}

static int dup_into(char **dst, const char *s)
{
	*dst = NULL;
	if (!s)
		return 0;
	*dst = strdup(s);
	return *dst ? 0 : -ENOMEM;
}

static void ref_dispose(ds_inventory_ref *r)
{
	free(r->source);
	free(r->ns);
	free(r->target_ns);
	free(r->object_type);
	free(r->instance);
	free(r->state);
	free(r->container);
	free(r->entry);
	free(r->from);
	free(r->target);
	free(r->rule);
	free(r->error);
	free(r->exists_reason);
}

/* A new row for object o, its identity filled in; NULL on ENOMEM. */
static ds_inventory_ref *new_row(struct reader *rd, const ds_ledger_object *o,
				 enum ds_inventory_type t)
{
	ds_inventory *inv = rd->inv;
	ds_inventory_ref *r;

	if (ds_grow((void **)&inv->refs, &rd->cap_refs, inv->n_refs + 1, sizeof(*inv->refs)) < 0)
		return NULL;
	r = &inv->refs[inv->n_refs];
	memset(r, 0, sizeof(*r));
	r->type = t;
	if (dup_into(&r->source, o->source) < 0 || dup_into(&r->ns, o->ns ? o->ns : "") < 0 ||
	    dup_into(&r->target_ns, target_ns(rd, o->ns)) < 0 ||
	    dup_into(&r->object_type, o->kind) < 0 || dup_into(&r->instance, o->name) < 0 ||
	    dup_into(&r->state, o->state) < 0) {
		ref_dispose(r);
		return NULL;
	}
	inv->n_refs++;
	return r;
}

static int broken(struct reader *rd, const ds_ledger_object *o, const char *why)
{
	ds_inventory_ref *r = new_row(rd, o, DS_INVENTORY_BROKEN);

	return r && dup_into(&r->error, why) == 0 ? 0 : -ENOMEM;
}

/* The PodGroup a workload's pods join, as the same source sent it (caller decrefs), or NULL. */
static json_t *group_of(const struct reader *rd, const ds_ledger_object *o, const json_t *doc)
{
	const char *name = ds_dra_group_of(doc);
	json_t *g = NULL;
	char why[300];

	for (size_t i = 0; name && i < rd->n_groups; i++) {
		const ds_ledger_object *pg = &rd->groups[i];

		if (pg->op == DS_RECORD_UPSERT && strcmp(pg->source, o->source) == 0 &&
		    strcmp(pg->name, name) == 0 && pg->ns && o->ns && strcmp(pg->ns, o->ns) == 0) {
			if (ds_ledger_payload_json(pg->payload, pg->len, pg->zstd, &g, why,
						   sizeof(why)) < 0)
				g = NULL;
			break;
		}
	}
	return g;
}

static int add_refs(struct reader *rd, const ds_ledger_object *o, const json_t *doc)
{
	const ds_dra_config *dra = ds_target_config_dra(rd->o->cfg);
	ds_dra_ref *refs = NULL;
	size_t n = 0;
	ds_err why = {0};
	json_t *group = group_of(rd, o, doc);
	int rc = ds_dra_workload_refs_in(dra, doc, group, &refs, &n, &why);

	json_decref(group);
	if (rc == -EINVAL)
		return broken(rd, o, why.msg);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n && rc == 0; i++) {
		const ds_dra_ref *d = &refs[i];
		ds_inventory_ref *r =
		    new_row(rd, o, d->attach ? DS_INVENTORY_ATTACH : DS_INVENTORY_REFERENCE);
		char rule[200];

		if (!r) {
			rc = -ENOMEM;
			break;
		}
		r->init_container = d->init_container;
		r->kind = d->kind;
		r->target_kind = d->target_kind;
		if (d->rule) {
			snprintf(rule, sizeof(rule), "dra.%s[%zu]", d->rule->list, d->rule->index);
			r->rule_line = d->rule->line;
		}
		if (dup_into(&r->container, d->container) < 0 ||
		    dup_into(&r->entry, d->entry) < 0 || dup_into(&r->from, d->from) < 0 ||
		    dup_into(&r->target, d->target) < 0 ||
		    dup_into(&r->rule, d->rule ? rule : NULL) < 0 ||
		    dup_into(&r->error, d->error[0] ? d->error : NULL) < 0)
			rc = -ENOMEM;
	}
	free(refs);
	return rc;
}

static int add_object(struct reader *rd, const ds_ledger_object *o, enum ds_target_kind k)
{
	ds_inventory_ref *r = new_row(rd, o, DS_INVENTORY_OBJECT);

	if (!r)
		return -ENOMEM;
	r->kind = r->target_kind = k;
	r->replicated = true;
	return dup_into(&r->from, o->name) < 0 || dup_into(&r->target, o->name) < 0 ? -ENOMEM : 0;
}

/* The rows of one object: its payload read as the applier reads it. */
static int add_rows(struct reader *rd, const ds_ledger_object *o)
{
	json_t *doc = NULL;
	enum ds_target_kind k;
	char why[300];
	int rc;

	rc = ds_ledger_payload_json(o->payload, o->len, o->zstd, &doc, why, sizeof(why));
	if (rc == -ENOMEM)
		return rc;
	if (rc < 0)
		return broken(rd, o, why);
	if (is_claim_kind(o->kind, &k))
		rc = add_object(rd, o, k);
	else
		rc = add_refs(rd, o, doc);
	json_decref(doc);
	return rc;
}

/* ---- the target cluster ---------------------------------------------------------- */

/* Which resource.k8s.io version to ask in, once (ds_kube_version_to_use). */
static void look_dra(struct reader *rd)
{
	char version[64] = "";
	ds_kube_error ke;
	char b[600];
	int rc;

	if (rd->dra_state)
		return;
	ds_kube_error_clear(&ke);
	rc = ds_kube_version_to_use(rd->o->kube, "resource.k8s.io", "v1", version, sizeof(version),
				    &ke);
	if (rc == -ENOENT) {
		rd->dra_state = -1;
		snprintf(rd->dra_why, sizeof(rd->dra_why),
			 "this cluster does not serve resource.k8s.io");
		return;
	}
	if (rc < 0) {
		rd->dra_state = -2;
		snprintf(rd->dra_why, sizeof(rd->dra_why), "cannot reach the cluster: %s",
			 ds_kube_error_format(&ke, b, sizeof(b)));
		return;
	}
	snprintf(rd->dra_api, sizeof(rd->dra_api), "resource.k8s.io/%s", version);
	rd->dra_state = 1;
}

/* Whether kind ns/name exists on the target, looked up once per object. */
static int check(struct reader *rd, ds_inventory_ref *r, const char *kind, const char *ns,
		 const char *name)
{
	struct ds_kube_resource res;
	enum ds_inventory_exists e = DS_EXISTS_UNKNOWN;
	const char *why = NULL;
	char key[1200], b[600], text[700];
	ds_kube_error ke;
	json_t *seen, *obj = NULL;
	int rc;

	if (!rd->o->kube) {
		r->exists = DS_EXISTS_UNKNOWN;
		return dup_into(&r->exists_reason,
				rd->o->no_kube_reason ? rd->o->no_kube_reason : "not checked");
	}
	snprintf(key, sizeof(key), "%s\n%s\n%s", kind, ns, name);
	seen = json_object_get(rd->seen, key);
	if (!seen) {
		look_dra(rd);
		ds_kube_error_clear(&ke);
		if (rd->dra_state == -1) {
			e = DS_EXISTS_NO;
			why = rd->dra_why;
		} else if (rd->dra_state == -2) {
			why = rd->dra_why;
		} else if ((rc = ds_kube_resource_find(rd->o->kube, rd->dra_api, kind, &res, &ke)) <
			   0) {
			e = rc == -ENOENT ? DS_EXISTS_NO : DS_EXISTS_UNKNOWN;
			snprintf(text, sizeof(text), "%s", ds_kube_error_format(&ke, b, sizeof(b)));
			why = text;
		} else {
			rc = ds_kube_get(rd->o->kube, &res, ns, name, NULL, &obj, &ke);
			json_decref(obj);
			if (rc == 0) {
				e = DS_EXISTS_YES;
			} else if (rc == -ENOENT) {
				e = DS_EXISTS_NO;
			} else {
				snprintf(text, sizeof(text), "%s%s",
					 ke.code ? "" : "cannot reach the cluster: ",
					 ds_kube_error_format(&ke, b, sizeof(b)));
				why = text;
				if (!ke.code) { /* no answer: the rest would not get one either */
					rd->dra_state = -2;
					snprintf(rd->dra_why, sizeof(rd->dra_why), "%s", text);
				}
			}
		}
		seen = json_pack("[is?]", (int)e, why);
		if (!seen || json_object_set_new_nocheck(rd->seen, key, seen) < 0)
			return -ENOMEM;
	}
	r->exists = (enum ds_inventory_exists)json_integer_value(json_array_get(seen, 0));
	return dup_into(&r->exists_reason, json_string_value(json_array_get(seen, 1)));
}

static int check_all(struct reader *rd)
{
	for (size_t i = 0; i < rd->inv->n_refs; i++) {
		ds_inventory_ref *r = &rd->inv->refs[i];
		const char *kind = kind_name(r->target_kind);
		char key[1200];
		int rc;

		if (r->type == DS_INVENTORY_BROKEN || !r->target || r->error)
			continue;
		snprintf(key, sizeof(key), "%s\n%s\n%s", kind, r->target_ns, r->target);
		if (json_object_get(rd->replicated, key))
			r->replicated = true;
		if ((rc = check(rd, r, kind, r->target_ns, r->target)) < 0)
			return rc;
	}
	return 0;
}

int ds_inventory_read(const ds_inventory_opts *o, ds_inventory **out, ds_err *err)
{
	struct reader rd = {.o = o};
	const char *kinds[DS_WORKLOAD_MAX + DS_TARGET_KIND_MAX + 1];
	int rc;

	if (!o || !o->ledger_path || !o->cfg) {
		ds_err_set(err, "inventory: the ledger path and the configuration are required");
		return -EINVAL;
	}
	rd.inv = calloc(1, sizeof(*rd.inv));
	rd.replicated = json_object();
	rd.seen = json_object();
	if (!rd.inv || !rd.replicated || !rd.seen) {
		rc = -ENOMEM;
		goto out;
	}
	/* the kinds whose claims the inventory reads, in the order rows are sorted */
	for (int w = 0; w < DS_WORKLOAD_MAX; w++)
		kinds[w] = ds_workload_name((enum ds_workload)w);
	for (int k = 0; k < DS_TARGET_KIND_MAX; k++)
		kinds[DS_WORKLOAD_MAX + k] = kind_name((enum ds_target_kind)k);
	kinds[DS_WORKLOAD_MAX + DS_TARGET_KIND_MAX] = NULL;
	rc = ds_ledger_objects_read(o->ledger_path, kinds, &rd.objs, &rd.n_objs, err);
	if (rc < 0)
		goto out;
	{
		const char *const group_kinds[] = {ds_kind_get(DS_KIND_POD_GROUP)->name, NULL};

		rc = ds_ledger_objects_read(o->ledger_path, group_kinds, &rd.groups, &rd.n_groups,
					    err);
		if (rc < 0)
			goto out;
	}
	if (rd.n_objs) /* qsort of NULL is undefined, even for none */
		qsort(rd.objs, rd.n_objs, sizeof(*rd.objs), cmp_obj);
	if ((rc = note_replicated(&rd)) < 0)
		goto out;
	for (size_t i = 0; i < rd.n_objs && rc == 0; i++) {
		const ds_ledger_object *ob = &rd.objs[i];

		if (ob->op != DS_RECORD_UPSERT || !selected(&rd, ob))
			continue;
		rd.inv->objects++;
		rc = add_rows(&rd, ob);
	}
	if (rc == 0)
		rc = check_all(&rd);
out:
	ds_ledger_objects_free(rd.objs, rd.n_objs);
	ds_ledger_objects_free(rd.groups, rd.n_groups);
	json_decref(rd.replicated);
	json_decref(rd.seen);
	if (rc < 0) {
		ds_inventory_free(rd.inv);
		return ds_err_fallback(err, rc);
	}
	*out = rd.inv;
	return 0;
}

void ds_inventory_free(ds_inventory *inv)
{
	if (!inv)
		return;
	for (size_t i = 0; i < inv->n_refs; i++)
		ref_dispose(&inv->refs[i]);
	free(inv->refs);
	free(inv);
}

bool ds_inventory_ref_missing(const ds_inventory_ref *r)
{
	if (r->type == DS_INVENTORY_BROKEN || r->error)
		return true;
	if (r->type == DS_INVENTORY_OBJECT)
		return false;
	return r->exists == DS_EXISTS_NO && !r->replicated;
}

size_t ds_inventory_unmapped(const ds_inventory *inv)
{
	size_t n = 0;

	for (size_t i = 0; i < inv->n_refs; i++)
		n += inv->refs[i].type == DS_INVENTORY_REFERENCE && !inv->refs[i].rule &&
		     !inv->refs[i].error;
	return n;
}

size_t ds_inventory_missing(const ds_inventory *inv)
{
	size_t n = 0;

	for (size_t i = 0; i < inv->n_refs; i++)
		n += ds_inventory_ref_missing(&inv->refs[i]);
	return n;
}

/* ---- output ------------------------------------------------------------------------ */

static json_t *str_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

static json_t *ref_json(const ds_inventory_ref *r)
{
	json_t *o = json_object(), *from = NULL, *to = NULL, *rule = NULL;

	if (!o)
		return NULL;
	if (r->from)
		from =
		    json_pack("{ss ss}", "kind", ds_inventory_kind_key(r->kind), "name", r->from);
	if (r->target)
		to = json_pack("{ss ss ss}", "kind", ds_inventory_kind_key(r->target_kind),
			       "namespace", r->target_ns, "name", r->target);
	if (r->rule)
		rule = json_pack("{ss si}", "name", r->rule, "line", r->rule_line);
	if (json_object_set_new(o, "type", json_string(ds_inventory_type_name(r->type))) < 0 ||
	    json_object_set_new(o, "source", json_string(r->source)) < 0 ||
	    json_object_set_new(o, "namespace", json_string(r->ns)) < 0 ||
	    json_object_set_new(o, "targetNamespace", json_string(r->target_ns)) < 0 ||
	    json_object_set_new(o, "objectType", json_string(r->object_type)) < 0 ||
	    json_object_set_new(o, "objectInstance", json_string(r->instance)) < 0 ||
	    json_object_set_new(o, "state", str_or_null(r->state)) < 0 ||
	    json_object_set_new(o, "container",
				r->type == DS_INVENTORY_REFERENCE && !r->container
				    ? json_string("ALL")
				    : str_or_null(r->container)) < 0 ||
	    json_object_set_new(o, "initContainer", json_boolean(r->init_container)) < 0 ||
	    json_object_set_new(o, "entry", str_or_null(r->entry)) < 0 ||
	    json_object_set_new(o, "from", from ? from : json_null()) < 0 ||
	    json_object_set_new(o, "to", to ? to : json_null()) < 0 ||
	    json_object_set_new(o, "rule", rule ? rule : json_null()) < 0 ||
	    json_object_set_new(o, "mapped", json_boolean(r->rule != NULL)) < 0 ||
	    json_object_set_new(o, "error", str_or_null(r->error)) < 0 ||
	    json_object_set_new(o, "targetExists",
				json_string(r->target && !r->error
						? ds_inventory_exists_name(r->exists)
						: "unknown")) < 0 ||
	    json_object_set_new(o, "targetExistsReason", str_or_null(r->exists_reason)) < 0 ||
	    json_object_set_new(o, "replicated", json_boolean(r->replicated)) < 0 ||
	    json_object_set_new(o, "missing", json_boolean(ds_inventory_ref_missing(r))) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *ds_inventory_json(const ds_inventory *inv)
{
	json_t *o = json_object(), *rows = json_array();

	if (!o || !rows)
		goto fail;
	for (size_t i = 0; i < inv->n_refs; i++) {
		json_t *r = ref_json(&inv->refs[i]);
		if (!r || json_array_append_new(rows, r) < 0)
			goto fail;
	}
	if (json_object_set_new(o, "objects", json_integer((json_int_t)inv->objects)) < 0 ||
	    json_object_set_new(o, "unmapped",
				json_integer((json_int_t)ds_inventory_unmapped(inv))) < 0 ||
	    json_object_set_new(o, "missing", json_integer((json_int_t)ds_inventory_missing(inv))) <
		0 ||
	    json_object_set(o, "references", rows) < 0)
		goto fail;
	json_decref(rows);
	return o;
fail:
	json_decref(rows);
	json_decref(o);
	return NULL;
}

/* A plain YAML scalar that a resolver would read as something else needs quotes. */
static bool needs_quotes(const char *s)
{
	static const char *const words[] = {"y",  "yes", "n",	 "no", "true", "false",
					    "on", "off", "null", "~",  NULL};

	if (!s[0] || (s[0] >= '0' && s[0] <= '9') || s[0] == '.' || s[0] == '-')
		return true;
	for (int i = 0; words[i]; i++)
		if (strcasecmp(s, words[i]) == 0)
			return true;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' ||
		      *p == '.'))
			return true;
	return false;
}

static void scalar(ds_str *s, const char *v)
{
	if (needs_quotes(v))
		ds_str_addf(s, "\"%s\"", v);
	else
		ds_str_adds(s, v);
}

/* "todo-<name>", still a valid object name (at most 253, ends alphanumeric). */
static void todo_name(const char *name, char *buf, size_t size)
{
	size_t n;

	snprintf(buf, size, "todo-%.248s", name);
	n = strlen(buf);
	while (n > 5 && (buf[n - 1] == '-' || buf[n - 1] == '.'))
		buf[--n] = '\0';
}

/* Whether an earlier unmapped reference than i has the selectors of i. @return its index or -1 */
static long same_selectors(const ds_inventory *inv, size_t i)
{
	const ds_inventory_ref *b = &inv->refs[i];

	for (size_t j = 0; j < i; j++) {
		const ds_inventory_ref *a = &inv->refs[j];

		if (a->type != DS_INVENTORY_REFERENCE || a->rule || a->error)
			continue;
		if (a->kind == b->kind && strcmp(a->object_type, b->object_type) == 0 &&
		    strcmp(a->instance, b->instance) == 0 &&
		    cmp_str(a->container, b->container) == 0 && strcmp(a->entry, b->entry) == 0)
			return (long)j;
	}
	return -1;
}

/* Whether the rule written for row i (type, instance, container, source = entry) matches row j. */
static bool rule_matches(const ds_inventory_ref *i, const ds_inventory_ref *j)
{
	if (j->type != DS_INVENTORY_REFERENCE || j->error ||
	    strcmp(i->object_type, j->object_type) != 0 || strcmp(i->instance, j->instance) != 0)
		return false;
	if (i->container && (!j->container || strcmp(i->container, j->container) != 0))
		return false;
	return strcmp(j->entry, i->entry) == 0 || strcmp(j->from, i->entry) == 0;
}

/*
 * A reference the rule for row i would take from the rule that maps it now,
 * or one written above that it would tie with (another target of its kind):
 * rules have no namespace selector. @return its index or -1
 */
static long clash(const ds_inventory *inv, size_t i)
{
	const ds_inventory_ref *r = &inv->refs[i];

	for (size_t j = 0; j < inv->n_refs; j++) {
		const ds_inventory_ref *o = &inv->refs[j];

		if (j == i || !rule_matches(r, o))
			continue;
		if (o->rule)
			return (long)j;
		if (j < i && o->kind == r->kind && strcmp(o->from, r->from) != 0)
			return (long)j;
	}
	return -1;
}

static void rule_comment(ds_str *s, const ds_inventory_ref *r)
{
	ds_str_addf(s, "    # %s %s/%s (source %s), container %s%s, entry %s -> %s %s\n",
		    r->object_type, r->ns, r->instance, r->source,
		    r->container ? r->container : "ALL (no container lists it)",
		    r->init_container ? " (init)" : "", r->entry,
		    r->kind == DS_TARGET_CLAIM ? "resourceClaimName" : "resourceClaimTemplateName",
		    r->from);
	if (r->exists == DS_EXISTS_YES)
		ds_str_addf(s, "    #   the target has %s %s/%s: the name may stay\n",
			    kind_name(r->kind), r->target_ns, r->from);
	else if (r->replicated)
		ds_str_addf(s, "    #   %s %s/%s is replicated from the source as it is\n",
			    kind_name(r->kind), r->target_ns, r->from);
	else if (r->exists == DS_EXISTS_NO)
		ds_str_addf(s, "    #   the target has no %s %s/%s\n", kind_name(r->kind),
			    r->target_ns, r->from);
	else
		ds_str_addf(s, "    #   not known whether the target has %s %s/%s%s%s\n",
			    kind_name(r->kind), r->target_ns, r->from, r->exists_reason ? ": " : "",
			    r->exists_reason ? r->exists_reason : "");
	ds_str_addf(s, "    #   TODO: the %s on the target, in namespace %s\n", kind_name(r->kind),
		    r->target_ns);
}

static void rules_of(ds_str *s, const ds_inventory *inv, enum ds_target_kind kind)
{
	size_t n = 0;

	ds_str_addf(s, "  %sMappings:", ds_inventory_kind_key(kind));
	for (size_t i = 0; i < inv->n_refs; i++) {
		const ds_inventory_ref *r = &inv->refs[i];
		char todo[300];
		long same, c;

		if (r->type != DS_INVENTORY_REFERENCE || r->rule || r->error || r->kind != kind)
			continue;
		same = same_selectors(inv, i);
		todo_name(r->from, todo, sizeof(todo));
		if (same >= 0 && strcmp(inv->refs[same].from, r->from) == 0) {
			if (!n++)
				ds_str_adds(s, "\n");
			ds_str_addf(s, "    # also %s %s/%s (source %s): the rule above maps it\n",
				    r->object_type, r->ns, r->instance, r->source);
			continue;
		}
		if (!n++)
			ds_str_adds(s, "\n");
		rule_comment(s, r);
		if ((c = clash(inv, i)) >= 0) {
			const ds_inventory_ref *o = &inv->refs[c];

			ds_str_addf(
			    s,
			    "    #   left out: it would also match %s %s/%s, container %s, "
			    "entry %s, which %s%s%s\n"
			    "    #   (rules have no namespace selector): rename an entry or "
			    "map both alike\n"
			    "    # ",
			    o->object_type, o->ns, o->instance, o->container ? o->container : "ALL",
			    o->entry, o->rule ? o->rule : "references ",
			    o->rule ? " maps now" : o->from,
			    o->rule ? "" : ", its rule written above");
		} else {
			ds_str_adds(s, "    ");
		}
		ds_str_addf(s, "- {objectType: %s, objectInstance: ", r->object_type);
		scalar(s, r->instance);
		ds_str_adds(s, ", container: ");
		if (r->container)
			scalar(s, r->container);
		else
			ds_str_adds(s, "ALL");
		ds_str_adds(s, ", source: ");
		scalar(s, r->entry);
		ds_str_addf(s, ", %s: ", ds_inventory_kind_key(kind));
		scalar(s, todo);
		ds_str_adds(s, "}\n");
	}
	if (!n)
		ds_str_adds(s, " []\n");
}

int ds_inventory_rules_yaml(const ds_inventory *inv, char **out)
{
	ds_str s;
	size_t unmapped = ds_inventory_unmapped(inv);

	ds_str_init(&s, MAX_YAML);
	if (unmapped)
		ds_str_addf(&s,
			    "# drasync-target inventory: a rule for each of the %zu unmapped "
			    "claim references.\n"
			    "# Replace every todo- target with the claim or template of the target "
			    "cluster, delete\n"
			    "# the rules you do not want, and merge the lists into the "
			    "TargetConfig's dra: block.\n",
			    unmapped);
	else
		ds_str_adds(&s, "# drasync-target inventory: every claim reference is mapped.\n");
	ds_str_adds(&s, "dra:\n");
	rules_of(&s, inv, DS_TARGET_CLAIM);
	rules_of(&s, inv, DS_TARGET_TEMPLATE);
	*out = ds_str_take(&s, NULL);
	return *out ? 0 : -ENOMEM;
}
