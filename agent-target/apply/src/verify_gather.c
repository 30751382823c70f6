#include "verify_internal.h"

#include "drasync/clock.h"
#include "drasync/k8s_object.h"
#include "drasync/kinds.h"
#include "drasync/namespace_mode.h"
#include "drasync/preflight.h"
#include "drasync/standby.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How many ResourceClaimTemplates and DeviceClasses a verifier keeps read (see
 * ds_verify_keep_refs). */
#define REFS_MAX 256

/* One template or class as read at at_ms (obj NULL: it did not exist). */
struct ref {
	char key[600]; /* "kind ns/name" */
	json_t *obj;
	int64_t at_ms;
};

struct ds_verify {
	ds_kube *k;
	char dra_api[128]; /* "resource.k8s.io/v1"; "" until found */
	bool dra_missing;  /* the target serves no resource.k8s.io */
	int64_t refs_ms;   /* how long a read template or class is used again; 0: never */
	struct ref *refs;
	size_t n_refs;
};

/* ---- reading objects ------------------------------------------------------------------ */

const char *ds_verify_str_at(const json_t *obj, const char *dotted)
{
	return json_string_value(ds_json_path(obj, dotted));
}

/* A condition of type `type` in status.conditions, or NULL. */
const json_t *ds_verify_condition(const json_t *obj, const char *type)
{
	const json_t *c;
	size_t i;

	json_array_foreach (ds_json_path(obj, "status.conditions"), i, c) {
		const char *t = ds_json_str(c, "type");
		if (t && strcmp(t, type) == 0)
			return c;
	}
	return NULL;
}

bool ds_verify_cond_is(const json_t *c, const char *status)
{
	const char *s = ds_json_str(c, "status");

	return c && s && strcmp(s, status) == 0;
}

/* The condition's message, else its reason, else "". */
const char *ds_verify_cond_text(const json_t *c)
{
	const char *m = ds_json_str(c, "message");

	if (m && m[0])
		return m;
	m = ds_json_str(c, "reason");
	return m ? m : "";
}

static int add_name(json_t *names, const char *name)
{
	const json_t *v;
	size_t i;

	if (!name || !name[0])
		return 0;
	json_array_foreach (names, i, v)
		if (strcmp(json_string_value(v), name) == 0)
			return 0;
	return json_array_append_new(names, json_string(name)) < 0 ? -ENOMEM : 1;
}

int ds_verify_pod_claims(const json_t *pod, json_t *names)
{
	const json_t *e;
	size_t i;
	int n = 0, rc;

	json_array_foreach (ds_json_path(pod, "status.resourceClaimStatuses"), i, e) {
		if ((rc = add_name(names, ds_json_str(e, "resourceClaimName"))) < 0)
			return rc;
		n += rc;
	}
	json_array_foreach (ds_json_path(pod, "spec.resourceClaims"), i, e) {
		if ((rc = add_name(names, ds_json_str(e, "resourceClaimName"))) < 0)
			return rc;
		n += rc;
	}
	return n;
}

int ds_verify_device_classes(const json_t *obj, json_t *names)
{
	const json_t *spec = ds_json_path(obj, "spec.devices");
	const json_t *r, *sub;
	size_t i, j;
	int n = 0, rc;

	/* A template keeps the claim's spec under spec.spec. */
	if (!spec)
		spec = ds_json_path(obj, "spec.spec.devices");
	json_array_foreach (json_object_get(spec, "requests"), i, r) {
		/* v1 and v1beta2 under exactly, v1beta1 flat on the request */
		const char *cls = ds_verify_str_at(r, "exactly.deviceClassName");

		if (!cls)
			cls = ds_json_str(r, "deviceClassName");
		if ((rc = add_name(names, cls)) < 0)
			return rc;
		n += rc;
		json_array_foreach (json_object_get(r, "firstAvailable"), j, sub) {
			if ((rc = add_name(names, ds_json_str(sub, "deviceClassName"))) < 0)
				return rc;
			n += rc;
		}
	}
	return n;
}

int ds_verify_label_selector(const json_t *selector, char *buf, size_t size)
{
	struct text t = {buf, size, 0};
	const char *k;
	const json_t *v, *e;
	size_t i;

	if (!json_is_object(selector) || !size)
		return -EINVAL;
	buf[0] = '\0';
	json_object_foreach ((json_t *)selector, k, v) {
		if (strcmp(k, "matchLabels") == 0) {
			const char *lk;
			json_t *lv;
			json_object_foreach ((json_t *)v, lk, lv)
				ds_verify_addf(&t, "%s%s=%s", t.len ? "," : "", lk,
					       json_string_value(lv) ? json_string_value(lv) : "");
		}
	}
	json_array_foreach (json_object_get(selector, "matchExpressions"), i, e) {
		const char *key = ds_json_str(e, "key"), *op = ds_json_str(e, "operator");
		const json_t *vals = json_object_get(e, "values"), *x;
		size_t j;

		if (!key || !op)
			return -EINVAL;
		if (strcmp(op, "Exists") == 0) {
			ds_verify_addf(&t, "%s%s", t.len ? "," : "", key);
		} else if (strcmp(op, "DoesNotExist") == 0) {
			ds_verify_addf(&t, "%s!%s", t.len ? "," : "", key);
		} else if (strcmp(op, "In") == 0 || strcmp(op, "NotIn") == 0) {
			ds_verify_addf(&t, "%s%s %s (", t.len ? "," : "", key,
				       strcmp(op, "In") == 0 ? "in" : "notin");
			json_array_foreach (vals, j, x)
				ds_verify_addf(&t, "%s%s", j ? "," : "",
					       json_string_value(x) ? json_string_value(x) : "");
			ds_verify_addf(&t, ")");
		} else {
			return -EINVAL;
		}
	}
	if (t.len + 1 >= size)
		return -ENOSPC;
	return t.len ? 0 : -EINVAL;
}

/* ---- against the cluster -------------------------------------------------------------- */

int ds_verify_new(ds_verify **out, ds_kube *k, ds_err *err)
{
	ds_verify *v = calloc(1, sizeof(*v));

	if (!v)
		return ds_err_fallback(err, -ENOMEM);
	v->k = k;
	*out = v;
	return 0;
}

void ds_verify_free(ds_verify *v)
{
	if (!v)
		return;
	for (size_t i = 0; i < v->n_refs; i++)
		json_decref(v->refs[i].obj);
	free(v->refs);
	free(v);
}

void ds_verify_keep_refs(ds_verify *v, int64_t ms)
{
	v->refs_ms = ms > 0 ? ms : 0;
}

/* What a template or class kept is (*out: a new reference, NULL when absent). @return 1 kept, 0 */
static int ref_get(ds_verify *v, const char *key, json_t **out)
{
	int64_t now = ds_clock_mono_ms();

	for (size_t i = 0; i < v->n_refs; i++) {
		if (strcmp(v->refs[i].key, key) != 0)
			continue;
		if (now - v->refs[i].at_ms >= v->refs_ms)
			return 0;
		*out = json_incref(v->refs[i].obj);
		return 1;
	}
	return 0;
}

/* Keep what was read of key (obj may be NULL: absent), in place of the oldest when full. */
static void ref_put(ds_verify *v, const char *key, json_t *obj)
{
	struct ref *r = NULL;

	for (size_t i = 0; i < v->n_refs && !r; i++)
		if (strcmp(v->refs[i].key, key) == 0)
			r = &v->refs[i];
	if (!r && !v->refs && !(v->refs = calloc(REFS_MAX, sizeof(*v->refs))))
		return; /* not kept: read again next time */
	if (!r && v->n_refs < REFS_MAX) {
		r = &v->refs[v->n_refs++];
	} else if (!r) {
		r = &v->refs[0];
		for (size_t i = 1; i < v->n_refs; i++)
			if (v->refs[i].at_ms < r->at_ms)
				r = &v->refs[i];
	}
	json_decref(r->obj);
	snprintf(r->key, sizeof(r->key), "%s", key);
	r->obj = json_incref(obj);
	r->at_ms = ds_clock_mono_ms();
}

static const char *api_of(int w)
{
	switch ((enum ds_workload)w) {
	case DS_WORKLOAD_POD:
		return "v1";
	case DS_WORKLOAD_JOB:
	case DS_WORKLOAD_CRONJOB:
		return "batch/v1";
	default:
		return "apps/v1";
	}
}

/* The resource.k8s.io version the target serves, v1 preferred. @return 0 or -ENOENT */
static int dra_api(ds_verify *v)
{
	char version[64] = "";

	if (v->dra_api[0])
		return 0;
	if (ds_kube_version_to_use(v->k, "resource.k8s.io", "v1", version, sizeof(version), NULL) <
	    0)
		return -ENOENT;
	snprintf(v->dra_api, sizeof(v->dra_api), "resource.k8s.io/%s", version);
	return 0;
}

/*
 * GET one object into *out (NULL when it does not exist).
 * @return 0 (found or not), or a negative errno with the API's words in t
 */
static int get(ds_verify *v, const char *api, const char *kind, const char *ns, const char *name,
	       json_t **out, struct text *t)
{
	struct ds_kube_resource r;
	ds_kube_error ke;
	char b[700];
	int rc;

	bool keep = v->refs_ms > 0 && (strcmp(kind, "ResourceClaimTemplate") == 0 ||
				       strcmp(kind, "DeviceClass") == 0);
	char key[600];

	*out = NULL;
	snprintf(key, sizeof(key), "%s %s/%s", kind, ns ? ns : "", name);
	if (keep && ref_get(v, key, out))
		return 0;
	memset(&ke, 0, sizeof(ke));
	rc = ds_kube_resource_find(v->k, api, kind, &r, &ke);
	if (rc == 0)
		rc = ds_kube_get(v->k, &r, r.namespaced ? ns : NULL, name, NULL, out, &ke);
	if (rc == -ENOENT)
		rc = 0;
	if (rc == 0 && keep)
		ref_put(v, key, *out);
	if (rc == 0)
		return 0;
	if (rc < 0)
		ds_verify_clause(t, "cannot read %s %s: %s", kind, name,
				 ds_kube_error_format(&ke, b, sizeof(b)));
	return rc;
}

static bool owned_by(const json_t *obj, const json_t *uids)
{
	const json_t *o, *u;
	size_t i, j;

	json_array_foreach (ds_json_path(obj, "metadata.ownerReferences"), i, o) {
		const char *uid = ds_json_str(o, "uid");
		json_array_foreach (uids, j, u)
			if (uid && strcmp(uid, json_string_value(u)) == 0)
				return true;
	}
	return false;
}

/* The objects of kind in ns matching the selector and owned by one of uids (not terminating). */
static int list_owned(ds_verify *v, const char *api, const char *kind, const char *ns,
		      const char *selector, const json_t *uids, json_t *into, struct text *t)
{
	struct ds_kube_list_opts lo = {.label_selector = selector, .limit = 500};
	struct ds_kube_resource r;
	ds_kube_error ke;
	json_t *list = NULL, *o;
	char b[700];
	size_t i;
	int rc;

	memset(&ke, 0, sizeof(ke));
	rc = ds_kube_resource_find(v->k, api, kind, &r, &ke);
	if (rc == 0)
		rc = ds_kube_list(v->k, &r, ns, &lo, &list, NULL, &ke);
	if (rc < 0) {
		ds_verify_clause(t, "cannot list %ss: %s", kind,
				 ds_kube_error_format(&ke, b, sizeof(b)));
		return rc;
	}
	json_array_foreach (json_object_get(list, "items"), i, o)
		if (owned_by(o, uids) && !ds_json_path(o, "metadata.deletionTimestamp") &&
		    json_array_append(into, o) < 0) {
			json_decref(list);
			return -ENOMEM;
		}
	json_decref(list);
	return 0;
}

/* The pods of a controller: owned by it (a Deployment: by its ReplicaSets). */
static int gather_pods(ds_verify *v, const ds_verify_item *it, int w, const json_t *obj,
		       json_t *pods, struct text *t)
{
	json_t *uids = json_array(), *rs = NULL, *o;
	const char *uid = ds_verify_str_at(obj, "metadata.uid");
	char sel[2048];
	size_t i;
	int rc;

	if (!uids || !uid || json_array_append_new(uids, json_string(uid)) < 0) {
		json_decref(uids);
		return -ENOMEM;
	}
	rc = ds_verify_label_selector(ds_json_path(obj, "spec.selector"), sel, sizeof(sel));
	if (rc < 0 && w == DS_WORKLOAD_JOB) {
		snprintf(sel, sizeof(sel), "batch.kubernetes.io/job-name=%s", it->name);
		rc = 0;
	}
	if (rc < 0) {
		ds_verify_clause(t, "cannot read its spec.selector");
		goto out;
	}
	if (w == DS_WORKLOAD_DEPLOYMENT) {
		rs = json_array();
		rc =
		    rs ? list_owned(v, "apps/v1", "ReplicaSet", it->ns, sel, uids, rs, t) : -ENOMEM;
		if (rc < 0)
			goto out;
		json_array_clear(uids);
		json_array_foreach (rs, i, o)
			if (ds_verify_str_at(o, "metadata.uid"))
				json_array_append_new(
				    uids, json_string(ds_verify_str_at(o, "metadata.uid")));
	}
	rc = list_owned(v, "v1", "Pod", it->ns, sel, uids, pods, t);
out:
	json_decref(rs);
	json_decref(uids);
	return rc;
}

/* Claims (by name) into claims, and the DeviceClasses of those not allocated into classes. */
static int gather_claims(ds_verify *v, const ds_verify_item *it, json_t *names, json_t *claims,
			 json_t *classes_wanted, struct text *t)
{
	const json_t *n;
	size_t i;

	json_array_foreach (names, i, n) {
		const char *c = json_string_value(n);
		json_t *claim = NULL;
		int rc;

		if (json_object_get(claims, c))
			continue;
		if (dra_api(v) < 0) {
			ds_verify_clause(
			    t, "the target serves no resource.k8s.io API for ResourceClaim %s", c);
			return -ENOENT;
		}
		rc = get(v, v->dra_api, "ResourceClaim", it->ns, c, &claim, t);
		if (rc < 0)
			return rc;
		if (claim && !ds_json_path(claim, "status.allocation") &&
		    ds_verify_device_classes(claim, classes_wanted) < 0) {
			json_decref(claim);
			return -ENOMEM;
		}
		json_object_set_new(claims, c, claim ? claim : json_null());
	}
	return 0;
}

/*
 * A claim or template the importer holds back until its Namespace carries the
 * admin-access grant: verified once it is on the target; else why not, from
 * the target's Namespace as it is now.
 */
static void check_admin_wait(ds_verify *v, ds_verify_item *it)
{
	char errs[DS_VERIFY_REASON_MAX] = "";
	struct text t = {errs, sizeof(errs), 0};
	json_t *obj = NULL, *ns = NULL;

	it->verified = false;
	if (dra_api(v) < 0) {
		snprintf(it->reason, sizeof(it->reason),
			 "the target serves no resource.k8s.io API for %s %s", it->kind, it->name);
		return;
	}
	if (get(v, v->dra_api, it->kind, it->ns, it->name, &obj, &t) < 0 ||
	    get(v, "v1", "Namespace", NULL, it->ns, &ns, &t) < 0) {
		snprintf(it->reason, sizeof(it->reason), "%s", errs);
	} else if (obj) {
		it->verified = true;
		snprintf(it->reason, sizeof(it->reason),
			 "on the target: Namespace %s grants admin access", it->ns);
	} else if (ds_preflight_admin_granted(ns)) {
		snprintf(
		    it->reason, sizeof(it->reason),
		    "asks for admin access to devices and is not on the target yet: Namespace "
		    "%s grants it now (%s: \"true\"), the importer applies it at its next look",
		    it->ns, DS_ADMIN_ACCESS_LABEL);
	} else {
		snprintf(it->reason, sizeof(it->reason),
			 "asks for admin access to devices and waits: Namespace %s on the target "
			 "%s label %s: \"true\", a grant of the target's admins (drasync never "
			 "sets it)",
			 it->ns, ns ? "lacks" : "is not there, with", DS_ADMIN_ACCESS_LABEL);
	}
	json_decref(obj);
	json_decref(ns);
}

int ds_verify_check(ds_verify *v, ds_verify_item *it)
{
	int w = ds_workload_from_kind(it->kind);
	json_t *obj = NULL, *pods = json_array(), *claims = json_object(),
	       *templates = json_object(), *classes = json_object(), *names = json_array(),
	       *wanted = json_array(), *p, *e;
	char errs[DS_VERIFY_REASON_MAX] = "";
	struct text t = {errs, sizeof(errs), 0};
	ds_verify_view view = {0};
	const json_t *podspec;
	size_t i;
	int rc = -ENOMEM;

	if (!pods || !claims || !templates || !classes || !names || !wanted)
		goto out;
	if (ds_kind_is_claim(it->kind)) {
		check_admin_wait(v, it);
		rc = it->verified ? 1 : 0;
		goto out;
	}
	if (w < 0) {
		snprintf(it->reason, sizeof(it->reason), "%s is not a workload kind", it->kind);
		it->verified = false;
		rc = 0;
		goto out;
	}
	if (get(v, api_of(w), it->kind, it->ns, it->name, &obj, &t) < 0)
		goto api_error;
	if (obj && it->form == DS_VERIFY_ACTIVE && w != DS_WORKLOAD_CRONJOB) {
		if (w == DS_WORKLOAD_POD)
			rc = json_array_append(pods, obj) < 0 ? -ENOMEM : 0;
		else
			rc = gather_pods(v, it, w, obj, pods, &t);
		if (rc == -ENOMEM)
			goto out;
		if (rc < 0)
			goto api_error;
	}
	/* The claims the pods use and the pod template names, and its templates. */
	podspec = obj ? ds_obj_pod_spec(obj, NULL) : NULL;
	json_array_foreach (json_object_get(podspec, "resourceClaims"), i, e) {
		const char *c = ds_json_str(e, "resourceClaimName");
		const char *tm = ds_json_str(e, "resourceClaimTemplateName");
		json_t *tmpl = NULL;

		if (c && json_array_append_new(names, json_string(c)) < 0)
			goto out;
		if (!tm || json_object_get(templates, tm))
			continue;
		if (dra_api(v) < 0) {
			ds_verify_clause(&t,
					 "the target serves no resource.k8s.io API for "
					 "ResourceClaimTemplate %s",
					 tm);
			goto api_error;
		}
		if (get(v, v->dra_api, "ResourceClaimTemplate", it->ns, tm, &tmpl, &t) < 0)
			goto api_error;
		if (tmpl && ds_verify_device_classes(tmpl, wanted) < 0) {
			json_decref(tmpl);
			goto out;
		}
		json_object_set_new(templates, tm, tmpl ? tmpl : json_false());
	}
	json_array_foreach (pods, i, p)
		if (ds_verify_pod_claims(p, names) < 0)
			goto out;
	if (gather_claims(v, it, names, claims, wanted, &t) < 0)
		goto api_error;
	json_array_foreach (wanted, i, e) {
		json_t *cls = NULL;
		const char *name = json_string_value(e);

		if (get(v, v->dra_api, "DeviceClass", NULL, name, &cls, &t) < 0)
			goto api_error;
		json_object_set_new(classes, name, json_boolean(cls != NULL));
		json_decref(cls);
	}
	view.obj = obj;
	view.pods = pods;
	view.claims = claims;
	view.templates = templates;
	view.classes = classes;
	rc = ds_verify_judge(it, &view);
	goto out;
api_error:
	/* The cluster could not be read: that is the reason (a retry may do better). */
	snprintf(it->reason, sizeof(it->reason), "%s", errs);
	it->verified = false;
	rc = 0;
out:
	if (rc == -ENOMEM) {
		snprintf(it->reason, sizeof(it->reason), "out of memory");
		it->verified = false;
	}
	json_decref(obj);
	json_decref(pods);
	json_decref(claims);
	json_decref(templates);
	json_decref(classes);
	json_decref(names);
	json_decref(wanted);
	return rc;
}
