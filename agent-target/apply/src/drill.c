#include "drasync/drill.h"

#include "drasync/applier.h"
#include "drasync/buf.h"
#include "drasync/clock.h"
#include "drasync/k8s_object.h"
#include "drasync/ledger_objects.h"
#include "drasync/log.h"
#include "drasync/record.h"
#include "drasync/report.h"
#include "drasync/kinds.h"
#include "drasync/transform.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define NS_MAX 63 /* a namespace name is a DNS label */

/* One object of the copy. */
struct piece {
	const ds_ledger_object *from;
	json_t *obj; /* as applied into the scratch namespace */
	int rank;
	struct ds_kube_resource res;
};

struct drill {
	const ds_drill_opts *o;
	char into[NS_MAX + 1];
	struct piece *v;
	size_t n, cap;
	json_t *failed; /* [{object, reason}] */
	size_t applied, skipped;
};

static void say(const struct drill *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void say(const struct drill *d, const char *fmt, ...)
{
	char line[1600];
	va_list ap;

	if (!d->o->say)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	d->o->say(d->o->ud, line);
}

/*
 * "Kind ns/name" with each part quoted as a log value (ds_log_quote): a name
 * the ledger holds came from the wire, and one with a newline or a space in it
 * must not read as another line or another object. A valid name is unchanged.
 */
static const char *describe(char *buf, size_t size, const char *kind, const char *ns,
			    const char *name)
{
	char k[128], n[128], m[300];

	snprintf(buf, size, "%s %s/%s", ds_log_quote(kind, k, sizeof(k)),
		 ds_log_quote(ns, n, sizeof(n)), ds_log_quote(name, m, sizeof(m)));
	return buf;
}

static int fail_object(struct drill *d, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail_object(struct drill *d, const char *what, const char *fmt, ...)
{
	char reason[1200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	say(d, "  %s: FAILED: %s", what, reason);
	return json_array_append_new(d->failed,
				     json_pack("{ss ss}", "object", what, "reason", reason)) < 0
		   ? -ENOMEM
		   : 0;
}

/* Every object the drill copies is active, wherever its namespace stands. */
static enum ds_mode active(void *ud, const char *ns, enum ds_mode configured)
{
	(void)ud;
	(void)ns;
	(void)configured;
	return DS_MODE_MIGRATE;
}

/*
 * The scratch namespace: created with the drill label, or found with it for
 * the same namespace (a drill run again). @return 0, -EEXIST, or another
 * negative errno (err says)
 */
static int scratch_namespace(struct drill *d, ds_err *err)
{
	struct ds_kube_resource res;
	ds_kube_error ke;
	json_t *got = NULL, *ns = NULL;
	char buf[600];
	int rc;

	ds_kube_error_clear(&ke);
	rc = ds_kube_resource_find(d->o->kube, "v1", "Namespace", &res, &ke);
	if (rc == 0)
		rc = ds_kube_get(d->o->kube, &res, NULL, d->into, NULL, &got, &ke);
	if (rc == 0) {
		const char *of = ds_obj_label(got, DS_LABEL_DRILL);
		bool ours = of && strcmp(of, d->o->ns) == 0;

		json_decref(got);
		if (!ours) {
			ds_err_set(err,
				   "namespace %s exists and is not a drill copy of %s (it has no "
				   "label " DS_LABEL_DRILL "=%s): choose another with --into",
				   d->into, d->o->ns, d->o->ns);
			return -EEXIST;
		}
		say(d, "scratch namespace %s: there from an earlier drill of %s, reused", d->into,
		    d->o->ns);
		return 0;
	}
	if (rc != -ENOENT) {
		ds_err_set(err, "namespace %s: %s", d->into,
			   ds_kube_error_format(&ke, buf, sizeof(buf)));
		return rc;
	}
	ns = json_pack("{ss ss s{ss s{ss ss}}}", "apiVersion", "v1", "kind", "Namespace",
		       "metadata", "name", d->into, "labels", DS_LABEL_MANAGED_BY, "drasync",
		       DS_LABEL_DRILL, d->o->ns);
	if (!ns)
		return -ENOMEM;
	ds_kube_error_clear(&ke);
	rc = ds_kube_apply(d->o->kube, &res, NULL, ns, d->o->field_manager, true, NULL, NULL, &ke);
	json_decref(ns);
	if (rc < 0) {
		ds_err_set(err, "cannot create namespace %s: %s", d->into,
			   ds_kube_error_format(&ke, buf, sizeof(buf)));
		return rc;
	}
	say(d, "scratch namespace %s: created (label " DS_LABEL_DRILL "=%s)", d->into, d->o->ns);
	return 0;
}

/* The ledger's object, transformed into the copy, or skipped or failed with the reason. */
static int prepare(struct drill *d, const ds_ledger_object *lo, enum ds_dra_version dra,
		   ds_report *rep)
{
	ds_transform_opts topts = {.cfg = d->o->cfg,
				   .dra_version = dra,
				   .source_cluster = lo->source_cluster,
				   .source_uid = lo->source_uid,
				   .mode_of = active};
	char what[400], why[600];
	json_t *obj = NULL;
	ds_kube_error ke;
	struct piece *p;
	int rc, t;

	describe(what, sizeof(what), lo->kind, lo->ns, lo->name);
	rc = ds_ledger_payload_json(lo->payload, lo->len, lo->zstd, &obj, why, sizeof(why));
	if (rc == -ENOMEM)
		return rc;
	if (rc < 0)
		return fail_object(d, what, "%s", why);
	t = ds_transform_object(&topts, obj, rep);
	if (t < 0) {
		json_decref(obj);
		return t;
	}
	if (t == DS_TRANSFORM_SKIP) {
		d->skipped++;
		json_decref(obj);
		return 0;
	}
	if (t != DS_TRANSFORM_APPLY) {
		json_decref(obj);
		return fail_object(d, what, "the importer's pipeline refuses it (see plan)");
	}
	if (ds_obj_set_namespace(obj, d->into) < 0 ||
	    ds_obj_set_label(obj, DS_LABEL_DRILL, d->o->ns) < 0) {
		json_decref(obj);
		return -ENOMEM;
	}
	if (ds_grow((void **)&d->v, &d->cap, d->n + 1, sizeof(*d->v)) < 0) {
		json_decref(obj);
		return -ENOMEM;
	}
	p = &d->v[d->n];
	memset(p, 0, sizeof(*p));
	ds_kube_error_clear(&ke);
	rc = ds_kube_resource_of(d->o->kube, obj, &p->res, &ke);
	if (rc < 0) {
		json_decref(obj);
		if (rc == -ENOMEM)
			return rc;
		return fail_object(d, what, "%s", ds_kube_error_format(&ke, why, sizeof(why)));
	}
	p->from = lo;
	p->obj = obj;
	p->rank = ds_kind_rank(lo->kind);
	d->n++;
	return 0;
}

static int cmp_piece(const void *x, const void *y)
{
	const struct piece *a = x, *b = y;

	if (a->rank != b->rank)
		return a->rank < b->rank ? -1 : 1;
	return strcmp(ds_obj_name(a->obj), ds_obj_name(b->obj));
}

/* Apply the copy, one concurrent batch per SPEC rank. @return 0, -ENOMEM */
static int apply_all(struct drill *d, bool *ok)
{
	struct ds_kube_op *ops = calloc(d->n + 1, sizeof(*ops));
	int rc = 0;

	if (!ops)
		return -ENOMEM;
	qsort(d->v, d->n, sizeof(*d->v), cmp_piece);
	for (size_t i = 0; i < d->n && rc == 0;) {
		size_t j = i;
		while (j < d->n && d->v[j].rank == d->v[i].rank)
			j++;
		for (size_t k = i; k < j; k++)
			ops[k - i] = (struct ds_kube_op){.kind = DS_KUBE_OP_APPLY,
							 .res = &d->v[k].res,
							 .ns = d->into,
							 .obj = d->v[k].obj};
		if (ds_kube_batch(d->o->kube, ops, j - i, d->o->field_manager, true) < 0) {
			rc = -ENOMEM;
			break;
		}
		for (size_t k = i; k < j && rc == 0; k++) {
			char what[400], buf[800];
			json_decref(ops[k - i].result);
			describe(what, sizeof(what), ds_obj_kind(d->v[k].obj), d->into,
				 ds_obj_name(d->v[k].obj));
			if (ops[k - i].rc == 0) {
				d->applied++;
				continue;
			}
			*ok = false;
			rc = fail_object(d, what, "%s",
					 ds_kube_error_format(&ops[k - i].error, buf, sizeof(buf)));
		}
		i = j;
	}
	free(ops);
	return rc;
}

static void on_settled(void *ud, const ds_verify_item *it, size_t settled, size_t total)
{
	const struct drill *d = ud;
	char what[600];

	describe(what, sizeof(what), it->kind, it->ns, it->name);
	if (it->verified)
		say(d, "  [%zu/%zu] %s: verified in %.1f s (%s)", settled, total, what, it->seconds,
		    it->reason);
	else
		say(d, "  [%zu/%zu] %s: NOT verified: %s", settled, total, what, it->reason);
}

/* Verify the copy's workloads. @return 0, a negative errno */
static int verify_copy(struct drill *d, json_t *workloads, ds_verify_summary *sum, ds_err *err)
{
	ds_verify_opts vo = {.timeout_ms = d->o->timeout_ms,
			     .interval_ms = d->o->interval_ms,
			     .progress = on_settled,
			     .ud = d};
	ds_verify_item *items = calloc(d->n + 1, sizeof(*items));
	ds_verify *ver = NULL;
	size_t n = 0;
	int rc = items ? 0 : -ENOMEM;

	for (size_t i = 0; rc == 0 && i < d->n; i++)
		if (ds_workload_from_kind(ds_obj_kind(d->v[i].obj)) >= 0)
			rc = ds_verify_item_init(&items[n++], ds_obj_kind(d->v[i].obj), d->into,
						 ds_obj_name(d->v[i].obj), DS_VERIFY_ACTIVE, false);
	if (rc == 0 && n) {
		say(d, "verifying %zu workload%s in %s:", n, n == 1 ? "" : "s", d->into);
		rc = ds_verify_new(&ver, d->o->kube, err);
		if (rc == 0)
			rc = ds_verify_run(ver, items, n, &vo, sum, err);
		if (rc > 0)
			rc = 0; /* some not verified: the report says which and why */
	}
	for (size_t i = 0; rc == 0 && i < n; i++) {
		json_t *w = json_pack("{ss ss sb ss}", "kind", items[i].kind, "name", items[i].name,
				      "verified", items[i].verified, "reason", items[i].reason);
		if (!w || json_object_set_new(w, "seconds", json_real(items[i].seconds)) < 0 ||
		    json_array_append_new(workloads, w) < 0)
			rc = -ENOMEM;
	}
	ds_verify_free(ver);
	ds_verify_items_free(items, n);
	return rc;
}

/* Delete the scratch namespace (it carries the label: scratch_namespace() saw to it). */
static bool clean_up(struct drill *d)
{
	struct ds_kube_delete_opts dopts = {.propagation = "Background", .grace_seconds = -1};
	struct ds_kube_resource res;
	ds_kube_error ke;
	char buf[600];
	int rc;

	ds_kube_error_clear(&ke);
	rc = ds_kube_resource_find(d->o->kube, "v1", "Namespace", &res, &ke);
	if (rc == 0)
		rc = ds_kube_delete(d->o->kube, &res, NULL, d->into, &dopts, &ke);
	if (rc < 0 && rc != -ENOENT) {
		say(d,
		    "cleanup: namespace %s NOT deleted: %s (delete it with kubectl delete "
		    "namespace %s)",
		    d->into, ds_kube_error_format(&ke, buf, sizeof(buf)), d->into);
		return false;
	}
	say(d, "cleanup: namespace %s deleted (its objects go with it)", d->into);
	return true;
}

int ds_drill_run(const ds_drill_opts *o, json_t **report, ds_err *err)
{
	struct drill d = {.o = o};
	ds_ledger_object *objs = NULL;
	ds_verify_summary sum = {0};
	ds_report *rep = NULL;
	json_t *workloads = NULL;
	size_t n_objs = 0, mine = 0;
	double t0 = ds_clock_mono_s();
	time_t started = (time_t)(ds_clock_wall_ms() / 1000);
	char when[32];
	bool applied_ok = true, cleaned = false;
	struct tm tm;
	int rc;

	*report = NULL;
	if (o->into && (strcmp(o->into, o->ns) == 0 || !ds_dns_label_valid(o->into))) {
		ds_err_set(err, "--into %s: %s", o->into,
			   strcmp(o->into, o->ns) == 0
			       ? "the drill copies into another namespace than the standby"
			       : "not a namespace name (at most 63 of a-z, 0-9 and '-')");
		return -EINVAL;
	}
	if (o->into)
		snprintf(d.into, sizeof(d.into), "%s", o->into);
	else /* cut to fit a namespace name */
		snprintf(d.into, sizeof(d.into), "%.*s-drill", NS_MAX - 6, o->ns);
	d.failed = json_array();
	workloads = json_array();
	if (!d.failed || !workloads || ds_report_new(&rep) < 0) {
		rc = -ENOMEM;
		goto out;
	}
	rc = ds_ledger_objects_read(o->ledger_path, NULL, &objs, &n_objs, err);
	if (rc < 0)
		goto out;
	for (size_t i = 0; i < n_objs; i++) {
		const ds_ledger_object *lo = &objs[i];
		if (lo->op != DS_RECORD_UPSERT || !lo->ns || strcmp(lo->state, "skipped") == 0 ||
		    strcmp(ds_target_config_map_namespace(o->cfg, lo->ns), o->ns) != 0)
			continue;
		mine++;
	}
	if (!mine) {
		ds_err_set(err,
			   "the ledger holds no objects for namespace %s (drasync-target status "
			   "lists the namespaces)",
			   o->ns);
		rc = -ENOENT;
		goto out;
	}
	rc = scratch_namespace(&d, err);
	if (rc < 0)
		goto out;
	{
		enum ds_dra_version dra = ds_applier_served_dra(o->kube);
		for (size_t i = 0; i < n_objs && rc == 0; i++) {
			const ds_ledger_object *lo = &objs[i];
			if (lo->op != DS_RECORD_UPSERT || !lo->ns ||
			    strcmp(lo->state, "skipped") == 0 ||
			    strcmp(ds_target_config_map_namespace(o->cfg, lo->ns), o->ns) != 0)
				continue;
			/* SPEC §5: what the grant refused is written nowhere, a drill neither */
			if (strcmp(lo->state, "refused") == 0) {
				say(&d,
				    "%s %s/%s of source %s: refused by the target's grant, not "
				    "copied (drasync-target status says why)",
				    lo->kind, lo->ns, lo->name, lo->source);
				continue;
			}
			rc = prepare(&d, lo, dra, rep);
		}
	}
	if (rc < 0)
		goto out;
	say(&d, "copying %zu objects of %s into %s", d.n, o->ns, d.into);
	rc = apply_all(&d, &applied_ok);
	if (rc < 0)
		goto out;
	rc = verify_copy(&d, workloads, &sum, err);
	if (rc < 0)
		goto out;
	if (o->cleanup)
		cleaned = clean_up(&d);
	gmtime_r(&started, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	*report = json_pack("{ss ss ss sf s{sI sI sO} sO sb sb sb}", "namespace", o->ns, "into",
			    d.into, "startedAt", when, "seconds", ds_clock_mono_s() - t0, "objects",
			    "applied", (json_int_t)d.applied, "skipped", (json_int_t)d.skipped,
			    "failed", d.failed, "workloads", workloads, "verified",
			    applied_ok && !json_array_size(d.failed) && sum.not_verified == 0,
			    "cleanup", o->cleanup, "cleanedUp", cleaned);
	if (!*report)
		rc = -ENOMEM;
out:
	for (size_t i = 0; i < d.n; i++)
		json_decref(d.v[i].obj);
	free(d.v);
	json_decref(d.failed);
	json_decref(workloads);
	ds_report_free(rep);
	ds_ledger_objects_free(objs, n_objs);
	return ds_err_fallback(err, rc);
}

int ds_drill_report_keep(const char *state_dir, const json_t *report, char *path, size_t size,
			 ds_err *err)
{
	int64_t now = ds_clock_wall_ms();
	time_t secs = (time_t)(now / 1000);
	char dir[4096], when[48];
	struct tm tm;

	/* To the millisecond: two drills in one second keep two reports. */
	gmtime_r(&secs, &tm);
	strftime(when, sizeof(when), "%Y%m%dT%H%M%S", &tm);
	snprintf(when + strlen(when), sizeof(when) - strlen(when), ".%03dZ", (int)(now % 1000));
	snprintf(dir, sizeof(dir), "%s/drills", state_dir);
	if (mkdir(dir, 0750) < 0 && errno != EEXIST) {
		int rc = -errno;
		ds_err_set(err, "cannot keep the report in %s: %s", dir, strerror(errno));
		return rc;
	}
	snprintf(path, size, "%s/%s-%s.json", dir,
		 json_string_value(json_object_get(report, "namespace")), when);
	if (json_dump_file(report, path, JSON_INDENT(2) | JSON_SORT_KEYS) < 0) {
		ds_err_set(err, "cannot write the report %s", path);
		return -EIO;
	}
	return 0;
}
