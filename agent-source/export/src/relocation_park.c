/* Parking a namespace on the source cluster for a planned relocation (relocation_park.h). */
#include "drasync/relocation_park.h"

#include "drasync/k8s_object.h"
#include "drasync/kinds.h"
#include "drasync/kube_error.h"
#include "drasync/standby_form.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct kind {
	const char *api_version, *kind;
};

static const struct kind parked_kinds[] = {
    {"apps/v1", "Deployment"}, {"apps/v1", "StatefulSet"}, {"apps/v1", "ReplicaSet"},
    {"apps/v1", "DaemonSet"},  {"batch/v1", "CronJob"},
};

static const struct kind bare_kinds[] = {{"batch/v1", "Job"}, {"v1", "Pod"}};

enum action { PARK, UNPARK };

static void sayf(ds_relocation_say_fn say, void *ud, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void sayf(ds_relocation_say_fn say, void *ud, const char *fmt, ...)
{
	char line[700];
	va_list ap;

	if (!say)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	say(ud, line);
}

/* Left to its owner, or going away. */
static bool skip(const json_t *obj)
{
	const json_t *meta = json_object_get(obj, "metadata");

	return json_object_get(meta, "deletionTimestamp") ||
	       json_array_size(json_object_get(meta, "ownerReferences")) > 0;
}

static int list(ds_kube *k, const struct kind *kd, const char *ns, struct ds_kube_resource *res,
		json_t **out, ds_err *err)
{
	ds_kube_error ke = {0};
	char m[600];
	int rc = ds_kube_resource_find(k, kd->api_version, kd->kind, res, &ke);

	if (rc == -ENOENT)
		return 1; /* not served: nothing of it to park */
	if (rc == 0)
		rc = ds_kube_list(k, res, ns, &(struct ds_kube_list_opts){.limit = 500}, out, NULL,
				  &ke);
	if (rc < 0)
		ds_err_set(err, "listing %ss in %s: %s", kd->kind, ns,
			   ds_kube_error_format(&ke, m, sizeof(m)));
	return rc;
}

/*
 * obj put in the form act asks; parking, mark_to (may be NULL) is set as its
 * relocation mark too (*mark: the mark is new). *f: what parking or
 * unparking did (enum in standby_form.h; 0 nothing), was: what it was.
 * @return 1 to write, 0 nothing to write, < 0
 */
static int change_form(json_t *obj, enum action act, const char *mark_to, int *f, bool *mark,
		       char *was, size_t was_size)
{
	const char *m_was = ds_obj_annotation(obj, DS_ANNOTATION_RELOCATED_TO);
	bool parked = act == PARK && ds_standby_form_is_parked(obj);

	*f = 0;
	*mark = act == PARK && mark_to && !(m_was && strcmp(m_was, mark_to) == 0);
	if (parked && !*mark)
		return 0;
	if (*mark && ds_obj_set_annotation(obj, DS_ANNOTATION_RELOCATED_TO, mark_to) < 0)
		return -ENOMEM;
	if (!parked)
		*f = act == PARK ? ds_standby_form_park(obj, was, was_size)
				 : ds_standby_form_unpark(obj);
	if (*f < 0)
		return *f;
	if (act == PARK && *f == DS_STANDBY_FORM_HOLD)
		*f = 0;
	return *f || *mark ? 1 : 0;
}

/* What a write of change_form()'s did, said. */
static void say_change(ds_relocation_say_fn say, void *ud, enum action act, int f, const char *kind,
		       const char *ns, const char *name, const char *was)
{
	if (!f)
		return;
	if (act == UNPARK)
		sayf(say, ud, "%s %s/%s: back from standby", kind, ns, name);
	else if (f == DS_STANDBY_FORM_SCALED)
		sayf(say, ud, "%s %s/%s: replicas %s -> 0 (kept in %s)", kind, ns, name, was,
		     DS_ANNOTATION_REPLICAS);
	else if (f == DS_STANDBY_FORM_SUSPENDED)
		sayf(say, ud, "%s %s/%s: suspended (was suspend=%s)", kind, ns, name, was);
	else
		sayf(say, ud, "%s %s/%s: parked (nodeSelector %s=true)", kind, ns, name,
		     DS_STANDBY_NODE_LABEL);
}

/*
 * One object parked or unparked, read again on a conflict; parking, mark_to
 * (may be NULL) is set as its relocation mark in the same write (*marked set
 * when that changed it). @return 1 parked or unparked, 0 not, < 0
 */
static int change_one(ds_kube *k, const struct ds_kube_resource *res, const char *ns,
		      const json_t *item, enum action act, const char *mark_to, bool *marked,
		      ds_relocation_say_fn say, void *ud, ds_err *err)
{
	json_t *obj = json_deep_copy(item), *fresh = NULL;
	const char *name = ds_obj_name(item), *kind = ds_obj_kind(item);
	ds_kube_error ke = {0};
	char was[32] = "", m[600];
	int rc = 0;

	if (marked)
		*marked = false;
	for (int attempt = 0; obj && attempt < 3; attempt++) {
		bool mark;
		int f;

		rc = change_form(obj, act, mark_to, &f, &mark, was, sizeof(was));
		if (rc <= 0)
			break;
		rc = ds_kube_update(k, res, ns, obj, NULL, NULL, &ke);
		if (rc == -ESTALE) {
			json_decref(obj);
			obj = NULL;
			rc = ds_kube_get(k, res, ns, name, NULL, &fresh, &ke);
			if (rc < 0)
				break;
			obj = fresh;
			fresh = NULL;
			continue;
		}
		if (rc < 0)
			break;
		if (marked)
			*marked = mark;
		say_change(say, ud, act, f, kind, ns, name, was);
		rc = f ? 1 : 0;
		break;
	}
	if (!obj && rc == 0)
		rc = -ENOMEM;
	if (rc < 0)
		ds_err_set(err, "%s %s/%s: %s", kind, ns, name,
			   ke.message[0] ? ds_kube_error_format(&ke, m, sizeof(m)) : strerror(-rc));
	json_decref(obj);
	return rc;
}

static int each_workload(ds_kube *k, const char *ns, enum action act, ds_relocation_say_fn say,
			 void *ud, ds_err *err)
{
	int changed = 0;

	for (size_t i = 0; i < sizeof(parked_kinds) / sizeof(parked_kinds[0]); i++) {
		struct ds_kube_resource res;
		json_t *lst = NULL, *item;
		size_t j;
		int rc = list(k, &parked_kinds[i], ns, &res, &lst, err);

		if (rc < 0)
			return rc;
		if (rc == 1)
			continue;
		json_array_foreach (json_object_get(lst, "items"), j, item) {
			if (skip(item))
				continue;
			json_object_set_new(item, "apiVersion",
					    json_string(parked_kinds[i].api_version));
			json_object_set_new(item, "kind", json_string(parked_kinds[i].kind));
			rc = change_one(k, &res, ns, item, act, NULL, NULL, say, ud, err);
			if (rc < 0) {
				json_decref(lst);
				return rc;
			}
			changed += rc;
		}
		json_decref(lst);
	}
	return changed;
}

int ds_relocation_park(ds_kube *k, const char *ns, ds_relocation_say_fn say, void *ud, ds_err *err)
{
	return each_workload(k, ns, PARK, say, ud, err);
}

int ds_relocation_unpark(ds_kube *k, const char *ns, ds_relocation_say_fn say, void *ud,
			 ds_err *err)
{
	return each_workload(k, ns, UNPARK, say, ud, err);
}

int ds_relocation_remove_bare(ds_kube *k, const char *ns, ds_relocation_say_fn say, void *ud,
			      ds_err *err)
{
	int removed = 0;

	for (size_t i = 0; i < sizeof(bare_kinds) / sizeof(bare_kinds[0]); i++) {
		struct ds_kube_resource res;
		json_t *lst = NULL, *item;
		size_t j;
		int rc = list(k, &bare_kinds[i], ns, &res, &lst, err);

		if (rc < 0)
			return rc;
		if (rc == 1)
			continue;
		json_array_foreach (json_object_get(lst, "items"), j, item) {
			struct ds_kube_delete_opts o = {.propagation = "Background",
							.grace_seconds = -1};
			ds_kube_error ke = {0};
			char m[600];

			if (skip(item))
				continue;
			rc = ds_kube_delete(k, &res, ns, ds_obj_name(item), &o, &ke);
			if (rc < 0 && rc != -ENOENT) {
				ds_err_set(err, "deleting %s %s/%s: %s", bare_kinds[i].kind, ns,
					   ds_obj_name(item),
					   ds_kube_error_format(&ke, m, sizeof(m)));
				json_decref(lst);
				return rc;
			}
			sayf(say, ud, "%s %s/%s: deleted (it runs on the target now)",
			     bare_kinds[i].kind, ns, ds_obj_name(item));
			removed++;
		}
		json_decref(lst);
	}
	return removed;
}

/* The resource of a table kind in the first of its versions the cluster serves. @return 0, 1 none
 */
static int find_served(ds_kube *k, const ds_kind *kd, struct ds_kube_resource *res, char *api,
		       size_t size, ds_err *err)
{
	for (size_t v = 0; kd->versions[v]; v++) {
		ds_kube_error ke = {0};
		int rc;

		if (kd->group[0])
			snprintf(api, size, "%s/%s", kd->group, kd->versions[v]);
		else
			snprintf(api, size, "%s", kd->versions[v]);
		rc = ds_kube_resource_find(k, api, kd->name, res, &ke);
		if (rc == 0)
			return 0;
		if (rc != -ENOENT) {
			char m[600];
			ds_err_set(err, "discovery of %s: %s", kd->name,
				   ds_kube_error_format(&ke, m, sizeof(m)));
			return rc;
		}
	}
	return 1;
}

/* Whether objects of kind id are parked (parked_kinds). */
static bool parked_kind(int id)
{
	return id == DS_KIND_DEPLOYMENT || id == DS_KIND_STATEFUL_SET ||
	       id == DS_KIND_REPLICA_SET || id == DS_KIND_DAEMON_SET || id == DS_KIND_CRON_JOB;
}

/* A kind's objects in ns, from listed when given (*lst a new reference; NULL: none). @return 0,
 * 1 not served, < 0 */
static int kind_items(ds_kube *k, const ds_kind *kd, const char *ns, const json_t *listed,
		      struct ds_kube_resource *res, char *api, size_t size, json_t **lst,
		      ds_err *err)
{
	ds_kube_error ke = {0};
	char m[600];
	int rc;

	*lst = NULL;
	if (listed) {
		const json_t *got = json_object_get(listed, kd->name);

		if (!got)
			return 1; /* none of it listed (or not served) */
		snprintf(api, size, "%s", json_string_value(json_object_get(got, "apiVersion")));
		rc = ds_kube_resource_find(k, api, kd->name, res, &ke);
		if (rc == 0)
			*lst = json_incref(json_object_get(got, "list"));
	} else {
		rc = find_served(k, kd, res, api, size, err);
		if (rc == 1)
			return 1;
		if (rc == 0)
			rc = ds_kube_list(k, res, ns, &(struct ds_kube_list_opts){.limit = 500},
					  lst, NULL, &ke);
	}
	if (rc < 0 && err && !err->msg[0])
		ds_err_set(err, "listing %ss in %s: %s", kd->name, ns,
			   ds_kube_error_format(&ke, m, sizeof(m)));
	return rc;
}

/* What the walk over ns's markable objects does with each (markable_fn). */
struct marking {
	ds_kube *k;
	const char *ns, *to;
	bool mark, park; /* mark or unmark; park the parked kinds in the same write */
	json_t *patch; /* during each_markable(): the merge patch that sets or takes off the mark */
	int changed, parked;
	ds_relocation_say_fn say;
	void *ud;
	ds_err *err;
};

/* One write of a kind's batch (mark_writes): the op beside what it is for. */
struct pend {
	const json_t *item; /* as listed */
	json_t *obj;	    /* a parked kind: the object written, parked and marked */
	int f;		    /* what parking did (change_form) */
	bool mark;	    /* its mark is new */
	char was[32];
};

/* A listed item with its kind (a list's items lack it). NULL: no memory. */
static json_t *with_kind(const json_t *item, const char *api, const char *kind)
{
	json_t *one = json_deep_copy(item);

	if (one && (json_object_set_new(one, "apiVersion", json_string(api)) < 0 ||
		    json_object_set_new(one, "kind", json_string(kind)) < 0)) {
		json_decref(one);
		one = NULL;
	}
	return one;
}

/* The write item needs, if any: a parked kind (parking) parked and marked by an update, else
 * the mark set or taken off by a merge patch where it is not so already. @return 1 planned,
 * 0 none, < 0 */
static int plan(struct marking *mk, int id, const ds_kind *kd, const struct ds_kube_resource *res,
		const char *api, const json_t *item, struct ds_kube_op *op, struct pend *p)
{
	const char *was = ds_obj_annotation(item, DS_ANNOTATION_RELOCATED_TO);
	bool same = was && strcmp(was, mk->to) == 0;
	int rc;

	*p = (struct pend){.item = item};
	if (mk->park && parked_kind(id)) {
		if (!(p->obj = with_kind(item, api, kd->name)))
			return -ENOMEM;
		rc = change_form(p->obj, PARK, mk->to, &p->f, &p->mark, p->was, sizeof(p->was));
		if (rc <= 0) {
			json_decref(p->obj);
			p->obj = NULL;
			return rc;
		}
		*op = (struct ds_kube_op){
		    .kind = DS_KUBE_OP_UPDATE, .res = res, .ns = mk->ns, .obj = p->obj};
		return 1;
	}
	if (mk->mark ? same : !same)
		return 0;
	*op = (struct ds_kube_op){.kind = DS_KUBE_OP_MERGE_PATCH,
				  .res = res,
				  .ns = mk->ns,
				  .name = ds_obj_name(item),
				  .obj = mk->patch};
	return 1;
}

/* What a planned write did: counted and said; a parked kind in conflict parked again one at a
 * time (read again); a mark on an object gone is not needed. @return 0 or < 0 */
static int wrote(struct marking *mk, const ds_kind *kd, const struct ds_kube_resource *res,
		 const char *api, struct ds_kube_op *op, struct pend *p)
{
	const char *name = ds_obj_name(p->item);
	char m[600];
	json_t *one;
	bool m_now = false;
	int rc = op->rc;

	json_decref(op->result);
	op->result = NULL;
	if (p->obj && rc == -ESTALE) {
		one = with_kind(p->item, api, kd->name);
		rc = one ? change_one(mk->k, res, mk->ns, one, PARK, mk->to, &m_now, mk->say,
				      mk->ud, mk->err)
			 : -ENOMEM;
		json_decref(one);
		if (rc < 0)
			return rc;
		mk->parked += rc;
		mk->changed += m_now;
		return 0;
	}
	if (rc == -ENOENT && !p->obj)
		return 0;
	if (rc < 0) {
		ds_err_set(mk->err, "%s %s %s/%s: %s",
			   p->obj     ? "parking"
			   : mk->mark ? "marking"
				      : "unmarking",
			   kd->name, mk->ns, name, ds_kube_error_format(&op->error, m, sizeof(m)));
		return rc;
	}
	if (p->obj) {
		say_change(mk->say, mk->ud, PARK, p->f, kd->name, mk->ns, name, p->was);
		mk->parked += p->f ? 1 : 0;
		mk->changed += p->mark;
	} else {
		mk->changed++;
	}
	return 0;
}

/* The writes one kind's objects need, side by side (one batch). @return 0 or < 0 */
static int mark_kind(struct marking *mk, int id, const ds_kind *kd,
		     const struct ds_kube_resource *res, const char *api, const json_t *items)
{
	size_t n = json_array_size(items), m = 0, j;
	struct ds_kube_op *ops = calloc(n ? n : 1, sizeof(*ops));
	struct pend *ps = calloc(n ? n : 1, sizeof(*ps));
	const json_t *item;
	int rc = ops && ps ? 0 : -ENOMEM;

	json_array_foreach (items, j, item) {
		if (rc < 0)
			break;
		if (skip(item))
			continue;
		rc = plan(mk, id, kd, res, api, item, &ops[m], &ps[m]);
		if (rc > 0)
			m++;
	}
	if (rc >= 0 && m) {
		int b = ds_kube_batch(mk->k, ops, m, NULL, false);

		if (b < 0) { /* the batch could not run */
			ds_err_set(mk->err, "writing %ss in %s: %s", kd->name, mk->ns,
				   strerror(-b));
			rc = b;
		}
	}
	for (size_t i = 0; i < m; i++) {
		if (rc >= 0)
			rc = wrote(mk, kd, res, api, &ops[i], &ps[i]);
		else
			json_decref(ops[i].result);
		json_decref(ps[i].obj);
	}
	free(ops);
	free(ps);
	return rc < 0 ? rc : 0;
}

/*
 * Every object of ns that may carry the mark (from listed when given, else
 * listed here), kind by kind, each kind's writes side by side (mark_kind);
 * the bare Pods and Jobs are not marked (they go once the target runs them).
 * @return 0 or < 0
 */
static int each_markable(struct marking *mk, const json_t *listed)
{
	int rc = 0;

	mk->patch = mk->mark ? json_pack("{s{s{ss}}}", "metadata", "annotations",
					 DS_ANNOTATION_RELOCATED_TO, mk->to)
			     : json_pack("{s{s{sn}}}", "metadata", "annotations",
					 DS_ANNOTATION_RELOCATED_TO);
	if (!mk->patch)
		return -ENOMEM;
	for (int id = 0; rc >= 0 && id < DS_KIND_MAX; id++) {
		const ds_kind *kd = ds_kind_get((enum ds_kind_id)id);
		struct ds_kube_resource res;
		json_t *lst = NULL;
		char api[200];

		if (!kd || !kd->namespaced || id == DS_KIND_POD || id == DS_KIND_JOB)
			continue;
		rc = kind_items(mk->k, kd, mk->ns, listed, &res, api, sizeof(api), &lst, mk->err);
		if (rc == 1) {
			rc = 0;
			continue;
		}
		if (rc == 0)
			rc = mark_kind(mk, id, kd, &res, api, json_object_get(lst, "items"));
		json_decref(lst);
	}
	json_decref(mk->patch);
	mk->patch = NULL;
	return rc;
}

/* The mark on every object of ns that may carry it: set to `to` (mark), or
 * taken off where it says `to` (unmark). @return how many changed, or < 0 */
static int each_mark(ds_kube *k, const char *ns, const char *to, bool mark, ds_err *err)
{
	struct marking mk = {.k = k, .ns = ns, .to = to, .mark = mark, .err = err};
	int rc = each_markable(&mk, NULL);

	return rc < 0 ? rc : mk.changed;
}

int ds_relocation_mark(ds_kube *k, const char *ns, const char *to, ds_relocation_say_fn say,
		       void *ud, ds_err *err)
{
	int marked = each_mark(k, ns, to, true, err);

	if (marked >= 0)
		sayf(say, ud, "%d object%s of %s marked %s=%s", marked, marked == 1 ? "" : "s", ns,
		     DS_ANNOTATION_RELOCATED_TO, to);
	return marked;
}

int ds_relocation_unmark(ds_kube *k, const char *ns, const char *to, ds_relocation_say_fn say,
			 void *ud, ds_err *err)
{
	int n = each_mark(k, ns, to, false, err);

	if (n >= 0)
		sayf(say, ud, "%d object%s of %s: mark %s=%s taken off", n, n == 1 ? "" : "s", ns,
		     DS_ANNOTATION_RELOCATED_TO, to);
	return n;
}

int ds_relocation_listed_add(json_t *listed, const char *kind, const char *api_version,
			     const json_t *item)
{
	json_t *got = json_object_get(listed, kind), *items;

	if (!got) {
		got = json_pack("{ss s{s[]}}", "apiVersion", api_version, "list", "items");
		if (!got || json_object_set_new(listed, kind, got) < 0)
			return -ENOMEM;
	}
	items = json_object_get(json_object_get(got, "list"), "items");
	return json_array_append_new(items, json_deep_copy(item)) < 0 ? -ENOMEM : 0;
}

int ds_relocation_park_mark(ds_kube *k, const char *ns, const char *to, const json_t *listed,
			    int *marked, ds_relocation_say_fn say, void *ud, ds_err *err)
{
	struct marking mk = {.k = k,
			     .ns = ns,
			     .to = to,
			     .mark = true,
			     .park = true,
			     .say = say,
			     .ud = ud,
			     .err = err};
	int rc = each_markable(&mk, listed);

	if (rc < 0)
		return rc;
	if (marked)
		*marked = mk.changed;
	return mk.parked;
}
