#include "drasync/verify.h"

#include "drasync/buf.h"
#include "drasync/k8s_object.h"
#include "drasync/namespace_mode.h"
#include "drasync/standby.h"
#include "drasync/target_config.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct ds_verify {
	ds_kube *k;
	char dra_api[128]; /* "resource.k8s.io/v1"; "" until found */
	bool dra_missing;  /* the target serves no resource.k8s.io */
};

static const char *const form_names[DS_VERIFY_FORM_MAX] = {
    [DS_VERIFY_ACTIVE] = "active",
    [DS_VERIFY_STANDBY] = "standby",
};

const char *ds_verify_form_name(enum ds_verify_form f)
{
	return (int)f >= 0 && f < DS_VERIFY_FORM_MAX ? form_names[f] : "unknown";
}

enum ds_verify_form ds_verify_namespace_form(void *modes, const char *target_ns)
{
	ds_verify_modes *m = modes;
	enum ds_mode mode = ds_target_config_mode(m->cfg);

	/* A ledger that cannot be read leaves the configuration's mode (status says why). */
	if (m->ledger_path && target_ns && !m->nm &&
	    ds_namespace_modes_open(&m->nm, m->ledger_path, NULL) < 0)
		m->nm = NULL;
	if (m->nm && target_ns)
		ds_namespace_modes_get(m->nm, target_ns, &mode, NULL);
	return mode == DS_MODE_STANDBY ? DS_VERIFY_STANDBY : DS_VERIFY_ACTIVE;
}

void ds_verify_modes_dispose(ds_verify_modes *m)
{
	ds_namespace_modes_free(m->nm);
	m->nm = NULL;
}

/* ---- items ---------------------------------------------------------------------------- */

int ds_verify_item_init(ds_verify_item *it, const char *kind, const char *ns, const char *name,
			enum ds_verify_form form, bool held)
{
	memset(it, 0, sizeof(*it));
	it->kind = strdup(kind ? kind : "");
	it->ns = strdup(ns ? ns : "");
	it->name = strdup(name ? name : "");
	it->form = form;
	it->held = held;
	if (!it->kind || !it->ns || !it->name) {
		ds_verify_item_dispose(it);
		return -ENOMEM;
	}
	return 0;
}

void ds_verify_item_dispose(ds_verify_item *it)
{
	if (!it)
		return;
	free(it->kind);
	free(it->ns);
	free(it->name);
	free(it->ledger_state);
	free(it->ledger_reason);
	memset(it, 0, sizeof(*it));
}

void ds_verify_items_free(ds_verify_item *items, size_t n)
{
	for (size_t i = 0; items && i < n; i++)
		ds_verify_item_dispose(&items[i]);
	free(items);
}

static int item_cmp(const void *a, const void *b)
{
	const ds_verify_item *x = a, *y = b;
	int c = strcmp(x->ns, y->ns);

	if (!c)
		c = strcmp(x->kind, y->kind);
	return c ? c : strcmp(x->name, y->name);
}

static bool ns_selected(const ds_verify_select *sel, const char *ns)
{
	if (!sel || !sel->namespaces || !sel->n_namespaces)
		return true;
	for (size_t i = 0; i < sel->n_namespaces; i++)
		if (strcmp(sel->namespaces[i], ns) == 0)
			return true;
	return false;
}

/* Workload kinds, as the ledger stores them (the source's kind names). */
static const char workload_rows_sql[] =
    "SELECT kind, target_namespace, namespace, coalesce(target_name, name), state, reason"
    " FROM object_state WHERE op = 1"
    " AND state IN ('applied', 'held', 'pending', 'waiting', 'failed')"
    " AND kind IN ('Pod', 'Deployment', 'ReplicaSet', 'StatefulSet', 'DaemonSet', 'Job',"
    " 'CronJob')";

int ds_verify_items_from_ledger(const char *path, const ds_verify_select *sel,
				ds_verify_item **items, size_t *n, ds_err *err)
{
	ds_verify_item *list = NULL;
	size_t len = 0, cap = 0, w;
	sqlite3 *db = NULL;
	sqlite3_stmt *q = NULL;
	int rc;

	if (access(path, F_OK) != 0) {
		ds_err_set(err,
			   "no ledger at %s: drasync-target run has not started with this "
			   "stateDir yet",
			   path);
		return -ENOENT;
	}
	rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL);
	if (rc != SQLITE_OK) {
		ds_err_set(err, "cannot open the ledger %s: %s", path,
			   db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
		rc = -EIO;
		goto out;
	}
	sqlite3_busy_timeout(db, 5000);
	rc = sqlite3_prepare_v2(db, workload_rows_sql, -1, &q, NULL);
	if (rc != SQLITE_OK) {
		/* A ledger the applier has not opened yet has no object_state: no workloads. */
		rc = strstr(sqlite3_errmsg(db), "no such table") ? 0 : -EIO;
		if (rc < 0)
			ds_err_set(err, "ledger %s: %s", path, sqlite3_errmsg(db));
		goto out;
	}
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		const char *kind = (const char *)sqlite3_column_text(q, 0);
		const char *tns = (const char *)sqlite3_column_text(q, 1);
		const char *sns = (const char *)sqlite3_column_text(q, 2);
		const char *name = (const char *)sqlite3_column_text(q, 3);
		const char *state = (const char *)sqlite3_column_text(q, 4);
		const char *reason = (const char *)sqlite3_column_text(q, 5);
		const char *ns = tns;
		ds_verify_item *it;

		if (!ns && sns)
			ns = sel && sel->map_ns ? sel->map_ns(sel->map_ud, sns) : sns;
		if (!ns || !ns_selected(sel, ns))
			continue;
		if (ds_grow((void **)&list, &cap, len + 1, sizeof(*list)) < 0) {
			rc = -ENOMEM;
			goto out;
		}
		it = &list[len];
		if (ds_verify_item_init(it, kind, ns, name,
					sel && sel->form_of ? sel->form_of(sel->form_ud, ns)
							    : DS_VERIFY_ACTIVE,
					state && strcmp(state, "held") == 0) < 0) {
			rc = -ENOMEM;
			goto out;
		}
		len++;
		if (state && strcmp(state, "applied") != 0) {
			it->ledger_state = strdup(state);
			it->ledger_reason = reason ? strdup(reason) : NULL;
			if (!it->ledger_state || (reason && !it->ledger_reason)) {
				rc = -ENOMEM;
				goto out;
			}
		}
	}
	if (rc != SQLITE_DONE) {
		ds_err_set(err, "ledger %s: %s", path, sqlite3_errmsg(db));
		rc = -EIO;
		goto out;
	}
	rc = 0;
	/* Two sources may name one target object: verify it once. */
	if (len)
		qsort(list, len, sizeof(*list), item_cmp);
	for (size_t r = w = 0; r < len; r++) {
		if (w && item_cmp(&list[w - 1], &list[r]) == 0) {
			ds_verify_item_dispose(&list[r]);
			continue;
		}
		if (w != r) {
			list[w] = list[r];
			memset(&list[r], 0, sizeof(list[r]));
		}
		w++;
	}
	len = len ? w : 0;
out:
	sqlite3_finalize(q);
	sqlite3_close(db);
	if (rc < 0) {
		ds_verify_items_free(list, len);
		return ds_err_fallback(err, rc);
	}
	*items = list;
	*n = len;
	return 0;
}

/* ---- text ----------------------------------------------------------------------------- */

struct text {
	char *buf;
	size_t size, len;
};

static void addf(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void addf(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int w;

	if (t->len + 1 >= t->size)
		return;
	va_start(ap, fmt);
	w = vsnprintf(t->buf + t->len, t->size - t->len, fmt, ap);
	va_end(ap);
	if (w > 0)
		t->len = t->len + (size_t)w >= t->size ? t->size - 1 : t->len + (size_t)w;
}

/* A clause, separated from what came before by "; ". */
static void clause(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void clause(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int w;

	if (t->len)
		addf(t, "; ");
	if (t->len + 1 >= t->size)
		return;
	va_start(ap, fmt);
	w = vsnprintf(t->buf + t->len, t->size - t->len, fmt, ap);
	va_end(ap);
	if (w > 0)
		t->len = t->len + (size_t)w >= t->size ? t->size - 1 : t->len + (size_t)w;
}

/* ---- reading objects ------------------------------------------------------------------ */

static const char *str_at(const json_t *obj, const char *dotted)
{
	return json_string_value(ds_json_path(obj, dotted));
}

/* A condition of type `type` in status.conditions, or NULL. */
static const json_t *condition(const json_t *obj, const char *type)
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

static bool cond_is(const json_t *c, const char *status)
{
	const char *s = ds_json_str(c, "status");

	return c && s && strcmp(s, status) == 0;
}

/* The condition's message, else its reason, else "". */
static const char *cond_text(const json_t *c)
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
		const char *cls = str_at(r, "exactly.deviceClassName");

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
				addf(&t, "%s%s=%s", t.len ? "," : "", lk,
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
			addf(&t, "%s%s", t.len ? "," : "", key);
		} else if (strcmp(op, "DoesNotExist") == 0) {
			addf(&t, "%s!%s", t.len ? "," : "", key);
		} else if (strcmp(op, "In") == 0 || strcmp(op, "NotIn") == 0) {
			addf(&t, "%s%s %s (", t.len ? "," : "", key,
			     strcmp(op, "In") == 0 ? "in" : "notin");
			json_array_foreach (vals, j, x)
				addf(&t, "%s%s", j ? "," : "",
				     json_string_value(x) ? json_string_value(x) : "");
			addf(&t, ")");
		} else {
			return -EINVAL;
		}
	}
	if (t.len + 1 >= size)
		return -ENOSPC;
	return t.len ? 0 : -EINVAL;
}

/* ---- the judgement -------------------------------------------------------------------- */

static const char *ledger_note(const ds_verify_item *it, char *buf, size_t size)
{
	if (!it->ledger_state) {
		buf[0] = '\0';
		return buf;
	}
	snprintf(buf, size, " (the ledger says %s%s%s)", it->ledger_state,
		 it->ledger_reason && it->ledger_reason[0] ? ": " : "",
		 it->ledger_reason ? it->ledger_reason : "");
	return buf;
}

/* The DeviceClasses `obj` (a claim or template) names that the target lacks. */
static void missing_classes(const json_t *obj, const char *what, const ds_verify_view *v,
			    struct text *t)
{
	json_t *names = json_array();
	const json_t *n;
	size_t i;

	if (!names)
		return;
	ds_verify_device_classes(obj, names);
	json_array_foreach (names, i, n) {
		const json_t *have = json_object_get(v->classes, json_string_value(n));
		if (json_is_false(have))
			clause(t, "DeviceClass %s (requested by %s) does not exist on the target",
			       json_string_value(n), what);
	}
	json_decref(names);
}

/* The claims and templates the pod template names directly exist. @return true when so */
static bool refs_present(const json_t *obj, const ds_verify_view *v, struct text *t)
{
	const json_t *pod = ds_obj_pod_spec(obj, NULL), *e;
	size_t i;
	bool ok = true;

	json_array_foreach (json_object_get(pod, "resourceClaims"), i, e) {
		const char *c = ds_json_str(e, "resourceClaimName");
		const char *tm = ds_json_str(e, "resourceClaimTemplateName");
		char what[300];

		if (c && json_is_null(json_object_get(v->claims, c))) {
			clause(t, "ResourceClaim %s does not exist on the target", c);
			ok = false;
		}
		if (tm) {
			const json_t *tmpl = json_object_get(v->templates, tm);
			if (json_is_null(tmpl) || json_is_false(tmpl)) {
				clause(t, "ResourceClaimTemplate %s does not exist on the target",
				       tm);
				ok = false;
			} else if (json_is_object(tmpl)) {
				size_t before = t->len;
				snprintf(what, sizeof(what), "ResourceClaimTemplate %s", tm);
				missing_classes(tmpl, what, v, t);
				ok = ok && t->len == before;
			}
		}
	}
	return ok;
}

static void container_problems(const json_t *pod, const char *list, bool running, struct text *t)
{
	const json_t *cs;
	size_t i;
	char path[64];

	snprintf(path, sizeof(path), "status.%s", list);
	json_array_foreach (ds_json_path(pod, path), i, cs) {
		const char *name = ds_json_str(cs, "name");
		const json_t *wt = ds_json_path(cs, "state.waiting");
		const json_t *term = ds_json_path(cs, "state.terminated");

		if (wt) {
			const char *r = ds_json_str(wt, "reason"), *m = ds_json_str(wt, "message");
			/* ContainerCreating and PodInitializing are progress, not a problem. */
			if (!running && r &&
			    (strcmp(r, "ContainerCreating") == 0 ||
			     strcmp(r, "PodInitializing") == 0))
				continue;
			clause(t, "container %s is waiting: %s%s%s", name ? name : "?",
			       r ? r : "no reason", m && m[0] ? ": " : "", m ? m : "");
		} else if (term && running) {
			const char *r = ds_json_str(term, "reason");
			json_int_t code = json_integer_value(json_object_get(term, "exitCode"));
			clause(t, "container %s exited: %s (exit code %lld)", name ? name : "?",
			       r ? r : "terminated", (long long)code);
		}
	}
}

/*
 * Whether one pod is as it should be; why not into t. done_ok: Succeeded
 * counts (a Job's pod, a bare Pod that is not restarted); its claims are then
 * released, so they are not looked at.
 */
static bool pod_ok(const json_t *pod, const ds_verify_view *v, bool done_ok, size_t *claims,
		   struct text *t)
{
	const char *name = ds_obj_name(pod), *phase = str_at(pod, "status.phase");
	const json_t *sched = condition(pod, "PodScheduled"), *cn;
	json_t *names = json_array();
	size_t before = t->len, i;
	bool running = phase && strcmp(phase, "Running") == 0;

	if (!name)
		name = "?";
	if (phase && strcmp(phase, "Succeeded") == 0) {
		json_decref(names);
		if (!done_ok)
			clause(t, "pod %s has Succeeded: its containers exited", name);
		return done_ok;
	}
	if (phase && strcmp(phase, "Failed") == 0) {
		const char *r = str_at(pod, "status.reason"), *m = str_at(pod, "status.message");
		clause(t, "pod %s Failed%s%s%s%s", name, r ? ": " : "", r ? r : "",
		       m && m[0] ? ": " : "", m ? m : "");
		json_decref(names);
		return false;
	}
	if (cond_is(sched, "False"))
		clause(t, "pod %s is not scheduled: %s", name, cond_text(sched));
	else if (!str_at(pod, "spec.nodeName"))
		clause(t, "pod %s waits for the scheduler", name);
	/* Every claim it uses is allocated; a missing DeviceClass is the usual cause. */
	if (names)
		ds_verify_pod_claims(pod, names);
	json_array_foreach (names, i, cn) {
		const char *c = json_string_value(cn);
		const json_t *claim = json_object_get(v->claims, c);
		char what[300];

		if (!claim || json_is_null(claim)) {
			clause(t, "ResourceClaim %s of pod %s does not exist", c, name);
			continue;
		}
		if (ds_json_path(claim, "status.allocation")) {
			(*claims)++;
			continue;
		}
		clause(t, "ResourceClaim %s of pod %s is not allocated", c, name);
		snprintf(what, sizeof(what), "ResourceClaim %s", c);
		missing_classes(claim, what, v, t);
	}
	json_decref(names);
	container_problems(pod, "initContainerStatuses", false, t);
	container_problems(pod, "containerStatuses", running, t);
	if (!running && t->len == before)
		clause(t, "pod %s is %s", name, phase ? phase : "without a phase yet");
	return t->len == before;
}

/* The controller's own account of why it has not made its pods. */
static void controller_says(const json_t *obj, struct text *t)
{
	const json_t *c = condition(obj, "ReplicaFailure");

	if (cond_is(c, "True")) {
		clause(t, "%s", cond_text(c));
		return;
	}
	c = condition(obj, "Progressing");
	if (cond_is(c, "False"))
		clause(t, "%s", cond_text(c));
}

static int pod_cmp(const void *a, const void *b)
{
	const char *x = ds_obj_name(*(json_t *const *)a), *y = ds_obj_name(*(json_t *const *)b);

	return strcmp(x ? x : "", y ? y : "");
}

/*
 * The pods against what is wanted: want of them, each ok. On success the
 * summary ("2/2 pods Running, 2 claims allocated"), else the first pod that is
 * not and how many more are not.
 */
static bool pods_ok(const ds_verify_view *v, json_int_t want, bool job, struct text *t)
{
	size_t n = json_array_size(v->pods), bad = 0, claims = 0, i, ok = 0;
	const json_t **sorted = n ? calloc(n, sizeof(*sorted)) : NULL;
	char first[DS_VERIFY_REASON_MAX] = "";

	if (n && !sorted) {
		clause(t, "out of memory");
		return false;
	}
	for (i = 0; i < n; i++)
		sorted[i] = json_array_get(v->pods, i);
	if (n)
		qsort(sorted, n, sizeof(*sorted), pod_cmp);
	for (i = 0; i < n; i++) {
		struct text pt = {first, sizeof(first), 0};
		char scratch[DS_VERIFY_REASON_MAX];
		struct text st = {scratch, sizeof(scratch), 0};

		if (pod_ok(sorted[i], v, job, &claims, bad ? &st : &pt))
			ok++;
		else
			bad++;
	}
	free(sorted);
	if (bad) {
		clause(t, "%s", first);
		if (bad > 1)
			addf(t, " (and %zu more pod%s not running)", bad - 1, bad == 2 ? "" : "s");
		return false;
	}
	if ((json_int_t)n < want) {
		clause(t, "%zu of %lld pods exist", n, (long long)want);
		controller_says(v->obj, t);
		return false;
	}
	addf(t, "%zu/%lld pods %s", ok, (long long)want, job ? "Running or Succeeded" : "Running");
	if (claims)
		addf(t, ", %zu claim%s allocated", claims, claims == 1 ? "" : "s");
	return true;
}

static bool judge_standby(ds_verify_item *it, const ds_verify_view *v, int w, struct text *t)
{
	const json_t *obj = v->obj;

	if (it->held) {
		if (!obj) {
			addf(t, "held in the ledger, not on the cluster");
			return true;
		}
		clause(t, "%s %s/%s is on the cluster though the ledger holds it (standby)",
		       it->kind, it->ns, it->name);
		return false;
	}
	switch ((enum ds_workload)w) {
	case DS_WORKLOAD_DEPLOYMENT:
	case DS_WORKLOAD_STATEFULSET:
	case DS_WORKLOAD_REPLICASET: {
		json_t *r = ds_json_path(obj, "spec.replicas");
		json_int_t n = json_is_integer(r) ? json_integer_value(r) : 1;
		const char *src = ds_obj_annotation(obj, DS_ANNOTATION_REPLICAS);
		if (n != 0) {
			clause(t, "not parked: spec.replicas is %lld, standby wants 0",
			       (long long)n);
			return false;
		}
		if (!src) {
			clause(t, "replicas 0 but no annotation " DS_ANNOTATION_REPLICAS
				  ": failover would not know the source count");
			return false;
		}
		addf(t, "parked: replicas 0 (source count %s in " DS_ANNOTATION_REPLICAS ")", src);
		return true;
	}
	case DS_WORKLOAD_CRONJOB:
		if (!json_is_true(ds_json_path(obj, "spec.suspend"))) {
			clause(t, "not parked: the CronJob is not suspended");
			return false;
		}
		addf(t, "parked: suspended");
		return true;
	case DS_WORKLOAD_DAEMONSET: {
		const json_t *sel = json_object_get(ds_obj_pod_spec(obj, NULL), "nodeSelector");
		if (!json_object_get(sel, DS_STANDBY_NODE_LABEL)) {
			clause(t, "not parked: no nodeSelector " DS_STANDBY_NODE_LABEL);
			return false;
		}
		addf(t, "parked: nodeSelector " DS_STANDBY_NODE_LABEL "=%s",
		     json_string_value(json_object_get(sel, DS_STANDBY_NODE_LABEL)));
		return true;
	}
	default:
		clause(t, "%s %s/%s runs on the cluster; standby holds Pods and Jobs in the ledger",
		       it->kind, it->ns, it->name);
		return false;
	}
}

static bool judge_active(ds_verify_item *it, const ds_verify_view *v, int w, struct text *t)
{
	const json_t *obj = v->obj;

	switch ((enum ds_workload)w) {
	case DS_WORKLOAD_DEPLOYMENT:
	case DS_WORKLOAD_STATEFULSET:
	case DS_WORKLOAD_REPLICASET: {
		json_t *r = ds_json_path(obj, "spec.replicas");
		json_int_t n = json_is_integer(r) ? json_integer_value(r) : 1;
		const char *src = ds_obj_annotation(obj, DS_ANNOTATION_REPLICAS);
		if (n == 0 && src && strcmp(src, "0") != 0) {
			clause(
			    t,
			    "still parked: replicas 0 (source count %s in " DS_ANNOTATION_REPLICAS
			    ")",
			    src);
			return false;
		}
		if (n == 0 && !json_array_size(v->pods)) {
			addf(t, "0 replicas wanted");
			return true;
		}
		return pods_ok(v, n, false, t);
	}
	case DS_WORKLOAD_DAEMONSET: {
		const json_t *sel = json_object_get(ds_obj_pod_spec(obj, NULL), "nodeSelector");
		const json_t *d = ds_json_path(obj, "status.desiredNumberScheduled");
		if (json_object_get(sel, DS_STANDBY_NODE_LABEL)) {
			clause(t, "still parked: nodeSelector " DS_STANDBY_NODE_LABEL);
			return false;
		}
		if (!json_is_integer(d)) {
			clause(t, "the DaemonSet controller has not counted its nodes yet");
			return false;
		}
		if (json_integer_value(d) == 0) {
			clause(t, "no node of the target takes it (desiredNumberScheduled 0): "
				  "see its nodeSelector, affinity and tolerations");
			return false;
		}
		return pods_ok(v, json_integer_value(d), false, t);
	}
	case DS_WORKLOAD_JOB: {
		const json_t *c = condition(obj, "Complete");
		if (cond_is(c, "True")) {
			addf(t, "complete");
			return true;
		}
		c = condition(obj, "Failed");
		if (cond_is(c, "True")) {
			clause(t, "the Job failed: %s", cond_text(c));
			return false;
		}
		if (json_is_true(ds_json_path(obj, "spec.suspend"))) {
			clause(t, "the Job is suspended");
			return false;
		}
		if (!json_array_size(v->pods)) {
			clause(t, "the Job has no pod yet");
			return false;
		}
		return pods_ok(v, 1, true, t);
	}
	case DS_WORKLOAD_CRONJOB: {
		const char *was = ds_obj_annotation(obj, DS_ANNOTATION_SUSPEND);
		if (!json_is_true(ds_json_path(obj, "spec.suspend"))) {
			addf(t, "exists, not suspended (no pods until its schedule fires)");
			return true;
		}
		if (was && strcmp(was, "true") == 0) {
			addf(t, "exists, suspended as on the source");
			return true;
		}
		clause(t, "%s: the CronJob is suspended", was ? "still parked" : "suspended");
		return false;
	}
	case DS_WORKLOAD_POD: {
		const char *restart = str_at(obj, "spec.restartPolicy");
		const char *phase = str_at(obj, "status.phase");
		size_t claims = 0;
		size_t before = t->len;
		if (!pod_ok(obj, v, restart && strcmp(restart, "Always") != 0, &claims, t))
			return false;
		t->len = before;
		addf(t, "%s", phase ? phase : "Running");
		if (claims)
			addf(t, ", %zu claim%s allocated", claims, claims == 1 ? "" : "s");
		return true;
	}
	default:
		clause(t, "%s is not a workload kind drasync verifies", it->kind);
		return false;
	}
}

int ds_verify_judge(ds_verify_item *it, const ds_verify_view *v)
{
	struct text t = {it->reason, sizeof(it->reason), 0};
	char problems[DS_VERIFY_REASON_MAX] = "", note[600];
	struct text refs = {problems, sizeof(problems), 0};
	int w = ds_workload_from_kind(it->kind);
	bool ok;

	it->reason[0] = '\0';
	if (!v->obj && !(it->form == DS_VERIFY_STANDBY && it->held)) {
		addf(&t, "%s %s/%s does not exist on the target%s", it->kind, it->ns, it->name,
		     ledger_note(it, note, sizeof(note)));
		it->verified = false;
		return 0;
	}
	if (v->obj && !refs_present(v->obj, v, &refs)) {
		/* What the pods need is missing: that is the reason, whatever else. */
		addf(&t, "%s", problems);
		it->verified = false;
		return 0;
	}
	ok = it->form == DS_VERIFY_STANDBY ? judge_standby(it, v, w, &t)
					   : judge_active(it, v, w, &t);
	it->verified = ok;
	return ok ? 1 : 0;
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
	free(v);
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

	*out = NULL;
	memset(&ke, 0, sizeof(ke));
	rc = ds_kube_resource_find(v->k, api, kind, &r, &ke);
	if (rc == 0)
		rc = ds_kube_get(v->k, &r, r.namespaced ? ns : NULL, name, NULL, out, &ke);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		clause(t, "cannot read %s %s: %s", kind, name,
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
		clause(t, "cannot list %ss: %s", kind, ds_kube_error_format(&ke, b, sizeof(b)));
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
	const char *uid = str_at(obj, "metadata.uid");
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
		clause(t, "cannot read its spec.selector");
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
			if (str_at(o, "metadata.uid"))
				json_array_append_new(uids, json_string(str_at(o, "metadata.uid")));
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
			clause(t, "the target serves no resource.k8s.io API for ResourceClaim %s",
			       c);
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
			clause(&t,
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

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool stopped(const ds_verify_opts *o)
{
	return o && o->stop && atomic_load(o->stop);
}

int ds_verify_run(ds_verify *v, ds_verify_item *items, size_t n, const ds_verify_opts *o,
		  ds_verify_summary *sum, ds_err *err)
{
	long long t0 = now_ms(), timeout = o ? o->timeout_ms : 0;
	long long interval = o && o->interval_ms > 0 ? o->interval_ms : 2000;
	bool *settled = n ? calloc(n, sizeof(*settled)) : NULL;
	size_t done = 0, verified = 0;

	if (n && !settled)
		return ds_err_fallback(err, -ENOMEM);
	for (;;) {
		for (size_t i = 0; i < n && !stopped(o); i++) {
			if (settled[i])
				continue;
			if (ds_verify_check(v, &items[i]) == -ENOMEM) {
				free(settled);
				return ds_err_fallback(err, -ENOMEM);
			}
			items[i].seconds = (double)(now_ms() - t0) / 1000.0;
			if (items[i].verified) {
				settled[i] = true;
				done++;
				verified++;
				if (o && o->progress)
					o->progress(o->ud, &items[i], done, n);
			}
		}
		if (done == n || stopped(o) || now_ms() - t0 >= timeout)
			break;
		/* Sleep to the next round, or to the deadline (one last round there). */
		for (long long until = now_ms() + interval;
		     now_ms() < until && now_ms() - t0 < timeout && !stopped(o);) {
			long long left = until - now_ms();
			struct timespec ts = {0, (left > 100 ? 100 : left) * 1000000L};
			nanosleep(&ts, NULL);
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (settled[i])
			continue;
		items[i].seconds = (double)(now_ms() - t0) / 1000.0;
		done++;
		if (o && o->progress)
			o->progress(o->ud, &items[i], done, n);
	}
	free(settled);
	if (sum) {
		sum->total = n;
		sum->verified = verified;
		sum->not_verified = n - verified;
		sum->seconds = (double)(now_ms() - t0) / 1000.0;
	}
	return (int)(n - verified);
}

/* ---- in the ledger -------------------------------------------------------------------- */

static const char verify_schema[] =
    "CREATE TABLE IF NOT EXISTS verifications(kind TEXT NOT NULL, namespace TEXT NOT NULL,"
    " name TEXT NOT NULL, form TEXT, verified INTEGER NOT NULL, reason TEXT,"
    " checked_at INTEGER NOT NULL, seconds REAL, PRIMARY KEY(kind, namespace, name));";

/* Rows of workloads the ledger no longer has (deleted, or never there). */
static const char verify_prune[] =
    "DELETE FROM verifications WHERE NOT EXISTS (SELECT 1 FROM object_state o"
    " WHERE o.kind = verifications.kind AND coalesce(o.target_name, o.name) ="
    " verifications.name AND o.op = 1"
    " AND o.state IN ('applied', 'held', 'pending', 'waiting', 'failed'))";

int ds_verify_store(const char *path, const ds_verify_item *items, size_t n, ds_err *err)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *q = NULL;
	int rc;

	rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL);
	if (rc != SQLITE_OK) {
		ds_err_set(err, "cannot open the ledger %s: %s", path,
			   db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
		rc = -EIO;
		goto out;
	}
	/* `run` may hold the write lock for a batch; wait for it. */
	sqlite3_busy_timeout(db, 10000);
	if (sqlite3_exec(db, verify_schema, NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(
		db,
		"INSERT OR REPLACE INTO verifications(kind, namespace, name, form,"
		" verified, reason, checked_at, seconds) VALUES(?, ?, ?, ?, ?, ?, ?, ?)",
		-1, &q, NULL) != SQLITE_OK)
		goto sql_error;
	for (size_t i = 0; i < n; i++) {
		const ds_verify_item *it = &items[i];
		sqlite3_bind_text(q, 1, it->kind, -1, SQLITE_STATIC);
		sqlite3_bind_text(q, 2, it->ns, -1, SQLITE_STATIC);
		sqlite3_bind_text(q, 3, it->name, -1, SQLITE_STATIC);
		sqlite3_bind_text(q, 4, ds_verify_form_name(it->form), -1, SQLITE_STATIC);
		sqlite3_bind_int(q, 5, it->verified ? 1 : 0);
		sqlite3_bind_text(q, 6, it->reason, -1, SQLITE_STATIC);
		sqlite3_bind_int64(q, 7, (sqlite3_int64)time(NULL));
		sqlite3_bind_double(q, 8, it->seconds);
		if (sqlite3_step(q) != SQLITE_DONE)
			goto sql_error;
		sqlite3_reset(q);
	}
	if (sqlite3_exec(db, verify_prune, NULL, NULL, NULL) != SQLITE_OK &&
	    !strstr(sqlite3_errmsg(db), "no such table"))
		goto sql_error;
	if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
		goto sql_error;
	rc = 0;
	goto out;
sql_error:
	ds_err_set(err, "ledger %s: verifications: %s", path, sqlite3_errmsg(db));
	sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	rc = -EIO;
out:
	sqlite3_finalize(q);
	sqlite3_close(db);
	return rc < 0 ? ds_err_fallback(err, rc) : 0;
}
