#include "applier_internal.h"

#include "drasync/buf.h"
#include "drasync/clock.h"
#include "drasync/dra_convert.h"
#include "drasync/dra_mapping.h"
#include "drasync/field_loss.h"
#include "drasync/k8s_object.h"
#include "drasync/kinds.h"
#include "drasync/ledger_objects.h"
#include "drasync/namespace_mode.h"
#include "drasync/preflight.h"
#include "drasync/report.h"
#include "drasync/sched_convert.h"
#include "drasync/selection.h"
#include "drasync/standby_form.h"
#include "drasync/transform.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void msleep(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* ---- applying ----------------------------------------------------------------- */

/*
 * The object's namespace is not on the target (yet): its Namespace may be
 * further down the stream, past this pass, or made by someone else. The
 * object waits for it like a workload waits for its claims, and is looked at
 * again when something is applied.
 */
static void decide_wait_namespace(ds_applier *a, struct item *it, const char *ns)
{
	ds_applier_decide(it, DS_APPLY_WAITING, "waits for Namespace %s (not on the target yet)",
			  ns);
	it->out.next_try_at = ds_clock_wall_ms() + a->cfg.wait_retry_ms;
}

/* Read discovery again and try once more, at once; fail when it was read again already. */
static void not_served(ds_applier *a, struct item *it, const ds_kube_error *ke)
{
	char buf[600];

	ds_kube_error_format(ke, buf, sizeof(buf));
	if (ds_kube_discovery_refresh(a->cfg.kube, NULL) == 1 ||
	    ds_kube_discovery_generation(a->cfg.kube) != a->pass_gen) {
		ds_applier_follow_discovery(a);
		ds_applier_decide(it, DS_APPLY_PENDING,
				  "apply: %s; discovery read again, trying once more", buf);
		it->out.attempts = it->row->attempts + 1;
		return;
	}
	ds_applier_decide(it, DS_APPLY_FAILED, "the target does not serve %s %s: %s",
			  ds_obj_api_version(it->obj), ds_obj_kind(it->obj), buf);
}

/* Delete the object, wait until it is gone, apply it again. */
/*
 * What the server kept of what was sent: a field it dropped (a gate off, an
 * older version) fails the object, naming the paths and the likely cause,
 * unless dra.allowFieldLoss allows them. @return whether it was decided so
 */
static bool dropped(ds_applier *a, struct item *it, const json_t *kept)
{
	char paths[REASON_MAX / 2], first[256];
	size_t n;

	if (!kept || !it->obj)
		return false;
	n = ds_field_loss_find(it->obj, kept, ds_target_config_dra(a->cfg.cfg), paths,
			       sizeof(paths));
	if (n == 0)
		return false;
	snprintf(first, sizeof(first), "%.*s", (int)strcspn(paths, ","), paths);
	ds_applier_decide(
	    it, DS_APPLY_FAILED,
	    "the target dropped %s (likely cause: %s); the object is on the target without "
	    "%s: enable it there, or list the path%s in dra.allowFieldLoss",
	    paths, ds_field_loss_cause(first), n > 1 ? "them" : "it", n > 1 ? "s" : "");
	/* It is there: a tombstone must find it. No applied hash: tried again on a new version. */
	it->out.target_api_version = ds_obj_api_version(it->obj);
	it->out.target_ns = ds_obj_namespace(it->obj);
	it->out.target_name = ds_obj_name(it->obj);
	it->out.on_target = true;
	return true;
}

/* What a re-create does beyond the object itself, for the reason (and the log). */
static const char *recreate_effect(const json_t *obj)
{
	/* PodGroup spec.resourceClaims is immutable (KEP-5729): the claims it made go with it. */
	if (ds_kind_is(ds_obj_kind(obj), DS_KIND_POD_GROUP))
		return " (its spec.resourceClaims changed; the claims the old group made are "
		       "the target's to delete with it, and new member pods share the new group's "
		       "claims)";
	return "";
}

#define PODGROUP_FINALIZER "scheduling.k8s.io/podgroup-protection"

/* A PodGroup being deleted that the target keeps while pods reference it. */
static bool holds_podgroup(const json_t *got)
{
	size_t i;
	json_t *f;

	if (!ds_kind_is(ds_obj_kind(got), DS_KIND_POD_GROUP))
		return false;
	json_array_foreach (ds_json_path(got, "metadata.finalizers"), i, f)
		if (json_is_string(f) && strcmp(json_string_value(f), PODGROUP_FINALIZER) == 0)
			return true;
	return false;
}

static void recreate(ds_applier *a, struct item *it, const ds_kube_error *why)
{
	struct ds_kube_delete_opts dopts = {.propagation = "Background", .grace_seconds = -1};
	const char *ns = ds_obj_namespace(it->obj), *name = ds_obj_name(it->obj);
	char buf[600];
	ds_kube_error ke;
	json_t *got = NULL;
	int rc, waited = 0;
	bool held = false;

	ds_kube_error_clear(&ke);
	ds_applier_count(a, &a->stats.api_writes, 1);
	rc = ds_kube_delete(a->cfg.kube, &it->res, ns, name, &dopts, &ke);
	if (rc < 0 && rc != -ENOENT) {
		ds_applier_decide_kube_failure(a, it, "re-create: delete", rc, &ke);
		return;
	}
	for (;;) {
		ds_kube_error_clear(&ke);
		ds_applier_count(a, &a->stats.api_reads, 1);
		rc = ds_kube_get(a->cfg.kube, &it->res, ns, name, NULL, &got, &ke);
		held = rc == 0 && holds_podgroup(got);
		json_decref(got);
		got = NULL;
		if (rc == -ENOENT)
			break;
		if (waited >= a->cfg.delete_wait_ms) {
			ds_applier_decide_retry(a, it, NULL);
			if (held)
				snprintf(
				    it->reason, sizeof(it->reason),
				    "re-create: PodGroup %s/%s is deleted but kept by its "
				    "finalizer " PODGROUP_FINALIZER " while pods of its members "
				    "run (they keep running, with their devices); it is created "
				    "again once they have ended (retried)",
				    ns ? ns : "", name);
			else
				snprintf(it->reason, sizeof(it->reason),
					 "re-create: the old object is still there after %d ms",
					 waited);
			return;
		}
		msleep(200);
		waited += 200;
	}
	ds_kube_error_clear(&ke);
	ds_applier_count(a, &a->stats.api_writes, 1);
	rc = ds_kube_apply(a->cfg.kube, &it->res, ns, it->obj, a->cfg.field_manager, true, NULL,
			   &got, &ke);
	if (rc < 0) {
		json_decref(got);
		ds_applier_decide_kube_failure(a, it, "re-create: apply", rc, &ke);
		return;
	}
	ds_applier_count(a, &a->stats.recreated, 1);
	it->recreated = true;
	if (!dropped(a, it, got))
		ds_applier_decide(it, DS_APPLY_APPLIED, "deleted and re-created%s: %s",
				  recreate_effect(it->obj),
				  ds_kube_error_format(why, buf, sizeof(buf)));
	json_decref(got);
}

static void decide_applied(struct item *it, const char *note)
{
	ds_applier_decide(it, DS_APPLY_APPLIED, "%s", note ? note : "");
}

/* Fill the item's applied identity (after a successful write). */
static void mark_applied(struct item *it)
{
	if (it->out.state != DS_APPLY_APPLIED)
		return;
	it->out.applied_hash = it->hash;
	it->out.target_api_version = ds_obj_api_version(it->obj);
	it->out.target_ns = ds_obj_namespace(it->obj);
	it->out.target_name = ds_obj_name(it->obj);
}

/*
 * SPEC §6: a Namespace is deleted only if drasync created it. One that is not
 * on the target yet, or that drasync marked when it created it, is applied
 * with the mark (every apply carries it: server-side apply would drop a field
 * its manager stops sending). One that was there before keeps its labels and
 * annotations exactly (SPEC §5): it is not written, objects go into it.
 * @return 0, -ENOMEM
 */
static int mark_created_namespace(ds_applier *a, struct item *it)
{
	int foreign;

	if (!ds_kind_is(ds_obj_kind(it->obj), DS_KIND_NAMESPACE))
		return 0;
	foreign = ds_applier_namespace_foreign(a, ds_obj_name(it->obj));
	if (foreign == 1) {
		ds_applier_decide(it, DS_APPLY_APPLIED,
				  "Namespace %s exists on the target and was not created by "
				  "drasync: its labels and annotations are kept (nothing written; "
				  "objects go into it)",
				  ds_obj_name(it->obj));
		return 0;
	}
	if (foreign < 0) /* the API could not say: applied as it is, unmarked */
		return 0;
	return ds_obj_set_annotation(it->obj, DS_ANNOTATION_CREATED, "true") < 0 ? -ENOMEM : 0;
}

/*
 * "took over .data.v, .data.w from field manager other-team" from a 409's
 * causes ("FIELD: conflict with \"MANAGER\" using v1; ..."), grouped by
 * manager; the API's message when the causes do not say.
 */
static void takeover_text(const ds_kube_error *ke, char *buf, size_t size)
{
	struct {
		char field[128], manager[128];
	} c[16];
	size_t n = 0, used = 0;
	const char *p = ke->causes;

	while (p && *p && n < 16) {
		const char *end = strstr(p, "; "), *colon = strstr(p, ": "), *q;
		size_t len = end ? (size_t)(end - p) : strlen(p);

		if (colon && (size_t)(colon - p) < len && (q = strstr(colon, "conflict with \"")) &&
		    (size_t)(q - p) < len) {
			const char *m = q + strlen("conflict with \"");
			const char *mq = strchr(m, '"');
			if (mq && (size_t)(mq - p) < len) {
				snprintf(c[n].field, sizeof(c[n].field), "%.*s", (int)(colon - p),
					 p);
				snprintf(c[n].manager, sizeof(c[n].manager), "%.*s", (int)(mq - m),
					 m);
				n++;
			}
		}
		p = end ? end + 2 : NULL;
	}
	buf[0] = '\0';
	if (!n) {
		snprintf(buf, size, "took over fields other managers owned (%s)", ke->message);
		return;
	}
	for (size_t i = 0; i < n && used + 1 < size; i++) {
		bool first = true;
		int w;
		for (size_t j = 0; j < i; j++)
			if (strcmp(c[j].manager, c[i].manager) == 0)
				first = false;
		if (!first)
			continue; /* listed with the first field of its manager */
		w = snprintf(buf + used, size - used, "%s", used ? "; took over " : "took over ");
		for (size_t j = i, k = 0; j < n && w >= 0 && used + (size_t)w + 1 < size; j++) {
			int x;
			if (strcmp(c[j].manager, c[i].manager) != 0)
				continue;
			x = snprintf(buf + used + (size_t)w, size - used - (size_t)w, "%s%s",
				     k++ ? ", " : "", c[j].field);
			if (x < 0)
				break;
			w += x;
		}
		if (w < 0 || used + (size_t)w >= size)
			break;
		used += (size_t)w;
		w = snprintf(buf + used, size - used, " from field manager %s", c[i].manager);
		if (w < 0)
			break;
		used += (size_t)w;
	}
}

/*
 * The pass's upserts stream through the client (ds_kube_stream): up to the
 * client's max_parallel are in flight, the next one is preflighted and sent
 * as one returns, and each outcome is decided as it comes back. They start in
 * the SPEC order; one that depends on another of the pass waits until that
 * one is done, and no longer: an object for its Namespace, a claim or
 * template for its DeviceClass, a workload for the claims and templates it
 * references (what preflight looks at). Outcomes go to the ledger in groups
 * of RECORD_EVERY, one transaction each.
 */
#define RECORD_EVERY 64

struct stream {
	ds_applier *a;
	ds_report *rep;
	struct item **v; /* the pass's upserts in the SPEC order, prepared as they come */
	size_t n_items, next_prep;
	json_t *by_key;	     /* "kind/ns/name" -> index in v, of those prepared */
	struct item **ready; /* may start, in order: a ring of n */
	size_t n, head, tail;
	size_t in_flight;
	struct item **again; /* refused for a conflict: sent again with force, first */
	size_t n_again;
	struct item **done; /* decided, not yet in the ledger */
	size_t n_done;
	struct item **later; /* to re-create, or not served: after the stream */
	size_t n_later;
	bool applied_any;
	int rc; /* the first ledger or memory error: nothing more starts */
	ds_err *err;
};

/* Record what is decided: in the ledger, then the agent hears of it. */
static void flush(struct stream *s)
{
	if (s->rc == 0 && s->n_done) {
		s->rc = ds_applier_record_all(s->a, s->done, s->n_done, s->rep, s->err);
		s->n_done = 0;
	}
}

static void ready(struct stream *s, struct item *it)
{
	s->ready[s->tail++ % s->n] = it;
}

/* It is decided: what waited for it may start; what it is goes to the ledger. */
static void finish(struct stream *s, struct item *it)
{
	it->finished = true;
	mark_applied(it);
	if (it->obj && it->out.state == DS_APPLY_APPLIED) {
		char key[800];
		ds_applier_obj_key(ds_obj_kind(it->obj), ds_obj_namespace(it->obj),
				   ds_obj_name(it->obj), key, sizeof(key));
		/* Preflight of what follows needs no read for it, nor the ledger. */
		if (json_object_set_new(s->a->present, key, json_true()) < 0 ||
		    (ds_applier_is_claim_or_template(ds_obj_kind(it->obj)) &&
		     json_object_set(s->a->objs, key, it->obj) < 0))
			s->rc = s->rc ? s->rc : -ENOMEM;
		/* Only what a workload may need can end another's wait. */
		if (ds_workload_from_kind(ds_obj_kind(it->obj)) < 0)
			s->applied_any = true;
	}
	for (size_t i = 0; i < it->n_dependents; i++)
		if (--it->dependents[i]->blockers == 0)
			ready(s, it->dependents[i]);
	s->done[s->n_done++] = it;
	if (s->n_done >= RECORD_EVERY)
		flush(s);
}

/* What of the pass an object needs (see preflight), found in the stream's prepared items. */
struct deps {
	struct stream *s;
	struct item *it;
	int rc;
};

static void depend(struct deps *d, const char *kind, const char *ns, const char *name)
{
	char key[800];
	struct item *on;
	json_t *idx;

	ds_applier_obj_key(kind, ns, name, key, sizeof(key));
	idx = json_object_get(d->s->by_key, key);
	if (!json_is_integer(idx))
		return;
	on = d->s->v[json_integer_value(idx)];
	/* Only on what comes before it in the SPEC order (no cycle can form) and
	 * is not decided yet. */
	if (on == d->it || on->finished || on->rank >= d->it->rank)
		return;
	for (size_t i = 0; i < on->n_dependents; i++)
		if (on->dependents[i] == d->it)
			return;
	if (ds_grow((void **)&on->dependents, &on->cap_dependents, on->n_dependents + 1,
		    sizeof(*on->dependents)) < 0) {
		d->rc = -ENOMEM;
		return;
	}
	on->dependents[on->n_dependents++] = d->it;
	d->it->blockers++;
}

static int depend_need(void *ud, const char *kind, const char *ns, const char *name)
{
	struct deps *d = ud;

	depend(d, kind, ns, name);
	return d->rc;
}

/*
 * Prepare the next item of the pass (payload, pipeline, hash) while others
 * are in flight. Decided at once (unchanged, held, skipped, failed): it is
 * done. Else it is linked to the prepared items it waits for (everything
 * before it in the SPEC order is prepared already) and ready when none.
 * @return 0, or a negative errno (memory)
 */
static int prepare_next(struct stream *s)
{
	struct item *it = s->v[s->next_prep];
	struct deps d = {.s = s, .it = it};
	char key[800];
	const char *ns;
	int rc;

	rc = ds_applier_prepare(s->a, it, s->rep);
	if (rc < 0)
		return rc;
	s->next_prep++;
	if (it->decided) {
		finish(s, it);
		return 0;
	}
	ds_applier_obj_key(ds_obj_kind(it->obj), ds_obj_namespace(it->obj), ds_obj_name(it->obj),
			   key, sizeof(key));
	if (json_object_set_new(s->by_key, key, json_integer((json_int_t)(s->next_prep - 1))) < 0)
		return -ENOMEM;
	ns = ds_obj_namespace(it->obj);
	if (ns)
		depend(&d, "Namespace", NULL, ns);
	if (d.rc == 0)
		ds_preflight_needs(it->obj, depend_need, &d);
	if (d.rc < 0)
		return d.rc;
	if (!it->blockers)
		ready(s, it);
	return 0;
}

/*
 * What already_there compares of obj: {"h": its applied-hash annotation} and,
 * where that leaves the parking out (parking_apart), the parking too:
 * "r" spec.replicas (null: unset) and "p" drasync.io/replicas (null: none).
 */
static json_t *fingerprint(const json_t *obj, bool parking_apart)
{
	const char *h = ds_obj_annotation(obj, DS_ANNOTATION_APPLIED_HASH);
	const char *parked = ds_obj_annotation(obj, DS_ANNOTATION_REPLICAS);

	if (!parking_apart)
		return json_pack("{ss}", "h", h ? h : "");
	return json_pack("{ss sO* ss*}", "h", h ? h : "", "r", ds_json_path(obj, "spec.replicas"),
			 "p", parked);
}

/* The fingerprints of drasync's objects of res in ns on the target ({} when the list
 * fails: they are written as before). */
static json_t *live_hashes(ds_applier *a, const struct ds_kube_resource *res, const char *ns,
			   bool parking_apart)
{
	struct ds_kube_list_opts lo = {.label_selector = DS_LABEL_MANAGED_BY "=drasync",
				       .limit = 500};
	json_t *list = NULL, *out = json_object(), *item;
	ds_kube_error ke;
	size_t i;

	if (!out || ds_kube_list(a->cfg.kube, res, ns, &lo, &list, NULL, &ke) < 0)
		return out;
	json_array_foreach (json_object_get(list, "items"), i, item) {
		const char *name = json_string_value(ds_json_path(item, "metadata.name"));

		if (name && ds_obj_annotation(item, DS_ANNOTATION_APPLIED_HASH))
			json_object_set_new(out, name, fingerprint(item, parking_apart));
	}
	json_decref(list);
	return out;
}

/* Whether the live fingerprint is the item's: the same hash and parking; replicas the
 * item leaves unset (an autoscaler's) are not compared. */
static bool same_fingerprint(const json_t *live, const json_t *mine)
{
	const char *const keys[] = {"h", "r", "p"};

	if (!live || !mine)
		return false;
	for (size_t k = 0; k < 3; k++) {
		const json_t *a = json_object_get(live, keys[k]),
			     *b = json_object_get(mine, keys[k]);

		if (k == 1 && !b)
			continue;
		if ((a || b) && !json_equal(a, b))
			return false;
	}
	return true;
}

/*
 * Whether the item, of a row that was there when the applier started, is on
 * the target already as it would write it: a run killed after the write and
 * before it recorded the outcome wrote it. Then it is not written again.
 */
static bool already_there(ds_applier *a, struct item *it)
{
	char key[800];
	const char *ns = ds_obj_namespace(it->obj);
	json_t *names, *got, *mine;
	bool same;

	/* Only what may have been in flight: due, not a decided failure. */
	if (!a->verify_upto || it->row->record_id > a->verify_upto ||
	    it->row->state != DS_APPLY_PENDING)
		return false;
	a->verify_seen = true;
	if (!a->live && !(a->live = json_object()))
		return false;
	snprintf(key, sizeof(key), "%s|%s|%s", ds_obj_api_version(it->obj), ds_obj_kind(it->obj),
		 ns ? ns : "");
	names = json_object_get(a->live, key);
	if (!names) {
		names = live_hashes(a, &it->res, ns, ds_applier_parking_apart(it->obj));
		if (!names || json_object_set_new(a->live, key, names) < 0)
			return false;
	}
	got = json_object_get(names, ds_obj_name(it->obj));
	/* it->obj carries the annotation it is written with (applier_prepare.c) */
	mine = fingerprint(it->obj, ds_applier_parking_apart(it->obj));
	same = same_fingerprint(got, mine);
	json_decref(mine);
	return same;
}

static int stream_next(void *ud, struct ds_kube_op **out)
{
	struct stream *s = ud;
	ds_applier *a = s->a;

	if (s->n_again && s->rc == 0) {
		struct item *it = s->again[--s->n_again];
		it->op.force = true;
		it->forced = true;
		s->in_flight++;
		ds_applier_count(a, &a->stats.api_writes, 1);
		a->last_sent = ds_clock_mono_s();
		*out = &it->op;
		return 1;
	}
	while (s->rc == 0 && (s->head < s->tail || s->next_prep < s->n_items)) {
		struct item *it;
		int rc;

		if (s->head == s->tail) {
			/* Nothing ready: prepare the next (it may be ready, or wait). */
			rc = prepare_next(s);
			if (rc < 0) {
				s->rc = rc;
				ds_err_set(s->err, "%s", strerror(-rc));
			}
			continue;
		}
		it = s->ready[s->head++ % s->n];
		rc = ds_applier_preflight(a, it, it->note, sizeof(it->note));

		if (rc == 0 && !it->decided)
			rc = mark_created_namespace(a, it);
		if (rc == 0 && !it->decided)
			rc = ds_applier_check_first_write(a, it);
		if (rc < 0) {
			s->rc = rc;
			ds_err_set(s->err, "%s", strerror(-rc));
			break;
		}
		if (!it->decided && already_there(a, it))
			decide_applied(it, "on the target already (written before the agent "
					   "restarted)");
		if (it->decided) {
			finish(s, it);
			continue;
		}
		it->sent = true;
		it->op = (struct ds_kube_op){.kind = DS_KUBE_OP_APPLY,
					     .res = &it->res,
					     .ns = ds_obj_namespace(it->obj),
					     .obj = it->obj,
					     /* to see what the server dropped */
					     .want_result = ds_field_loss_relevant(it->obj)};
		if (it->takeover) {
			/* adoptExisting: taken over in one write, as said in it->took */
			it->op.force = true;
			it->forced = true;
		}
		s->in_flight++;
		ds_applier_count(a, &a->stats.api_writes, 1);
		a->last_sent = ds_clock_mono_s();
		*out = &it->op;
		return 1;
	}
	return s->in_flight ? 0 : -1;
}

static void stream_done(void *ud, struct ds_kube_op *op)
{
	struct stream *s = ud;
	struct item *it = (struct item *)(void *)((char *)op - offsetof(struct item, op));
	ds_applier *a = s->a;

	s->in_flight--;
	if (op->rc == 0 && dropped(a, it, op->result)) {
		json_decref(op->result);
		op->result = NULL;
		finish(s, it);
		return;
	}
	json_decref(op->result);
	op->result = NULL;
	if (op->rc == 0 && it->forced) {
		ds_applier_decide(it, DS_APPLY_APPLIED, "%s%s%s", it->took, it->note[0] ? "; " : "",
				  it->note);
		it->takeover = true;
	} else if (op->rc == 0) {
		decide_applied(it, it->note[0] ? it->note : NULL);
	} else if (!it->forced && ds_kube_error_is_conflict(&op->error)) {
		/* Without force first: a field another manager owns is a conflict
		 * we report, then take over (the source is the truth). */
		takeover_text(&op->error, it->took, sizeof(it->took));
		s->again[s->n_again++] = it;
		return;
	} else if (ds_kube_error_is_namespace_missing(&op->error)) {
		decide_wait_namespace(a, it, op->error.details_name);
	} else if (op->error.code == 422 && ds_preflight_admin_access(it->obj) &&
		   strstr(op->error.message, DS_ADMIN_ACCESS_LABEL)) {
		/* The grant went between the preflight and the write (or was cached). */
		ds_applier_decide_wait_admin(a, it, ds_preflight_admin_access(it->obj));
	} else if (ds_kube_error_is_immutable(&op->error) ||
		   ds_kube_error_is_type_not_served(&op->error)) {
		s->later[s->n_later++] = it;
		return;
	} else {
		ds_applier_decide_kube_failure(a, it, "apply", op->rc, &op->error);
	}
	finish(s, it);
}

/*
 * Prepare and apply the pass's upserts (in the SPEC order).
 * @return 0, or a negative errno (ledger, memory)
 */
int ds_applier_apply_upserts(ds_applier *a, struct item **v, size_t n, const ds_report *rep,
			     bool *applied_any, ds_err *err)
{
	struct stream s = {.a = a,
			   .rep = (ds_report *)rep,
			   .v = v,
			   .n_items = n,
			   .by_key = json_object(),
			   .ready = calloc(n + 1, sizeof(struct item *)),
			   .n = n + 1,
			   .again = calloc(n + 1, sizeof(struct item *)),
			   .done = calloc(n + 1, sizeof(struct item *)),
			   .later = calloc(n + 1, sizeof(struct item *)),
			   .err = err};
	struct ds_kube_op_stream ks = {.next = stream_next,
				       .done = stream_done,
				       .ud = &s,
				       .field_manager = a->cfg.field_manager,
				       .no_result = true};
	int rc;

	if (!s.by_key || !s.ready || !s.again || !s.done || !s.later) {
		rc = -ENOMEM;
		goto out;
	}
	rc = ds_kube_stream(a->cfg.kube, &ks);
	/* Synchronous follow-ups, after the stream: re-create, discovery read again. */
	for (size_t i = 0; i < s.n_later; i++) {
		struct item *it = s.later[i];
		if (ds_kube_error_is_immutable(&it->op.error))
			recreate(a, it, &it->op.error);
		else
			not_served(a, it, &it->op.error);
		finish(&s, it);
	}
	/* What could not be sent (the stream could not run, or the ledger failed):
	 * sent ones try again; the others stay due in the ledger as they are. */
	for (size_t i = 0; i < n; i++)
		if (v[i]->sent && !v[i]->decided) {
			ds_applier_decide_retry(a, v[i], NULL);
			finish(&s, v[i]);
		}
	flush(&s);
	*applied_any = s.applied_any;
	rc = rc < 0 ? rc : s.rc;
out:
	for (size_t i = 0; i < n; i++)
		free(v[i]->dependents);
	json_decref(s.by_key);
	free(s.ready);
	free(s.again);
	free(s.done);
	free(s.later);
	return ds_err_fallback(err, rc);
}
