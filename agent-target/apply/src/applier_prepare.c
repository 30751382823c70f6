/*
 * Deciding an object's outcome and recording it, and preparing it for the
 * target: its payload through the mapping pipeline, its hash.
 */

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
#include "drasync/standby_form.h"
#include "drasync/selection.h"
#include "drasync/source_grants.h"
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

/* ---- deciding ---------------------------------------------------------------- */

void ds_applier_decide(struct item *it, enum ds_apply_state s, const char *fmt, ...)
{
	va_list ap;

	it->decided = true;
	it->out.state = s;
	it->out.attempts = 0;
	it->out.next_try_at = 0;
	it->reason[0] = '\0';
	if (fmt) {
		va_start(ap, fmt);
		vsnprintf(it->reason, sizeof(it->reason), fmt, ap);
		va_end(ap);
	}
	it->out.reason = it->reason[0] ? it->reason : NULL;
}

/* Failures the client already retried that may pass later: try again with backoff. */
static bool transient(int rc, const ds_kube_error *ke)
{
	if (ke && ds_kube_error_is_transient(ke->code))
		return true;
	return rc == -EAGAIN || rc == -EIO || rc == -ETIMEDOUT || rc == -ECONNREFUSED ||
	       rc == -ECONNRESET || rc == -EHOSTUNREACH || rc == -ENETUNREACH;
}

void ds_applier_decide_retry(ds_applier *a, struct item *it, const ds_kube_error *ke)
{
	char buf[600];
	long delay = a->cfg.backoff_ms;
	int attempts = it->row->attempts + 1;

	for (int i = 1; i < attempts && delay < a->cfg.backoff_max_ms; i++)
		delay *= 2;
	if (delay > a->cfg.backoff_max_ms)
		delay = a->cfg.backoff_max_ms;
	if (ke && ke->retry_after > 0 && (long)ke->retry_after * 1000 > delay)
		delay = (long)ke->retry_after * 1000;
	ds_applier_decide(it, DS_APPLY_PENDING, "attempt %d: %s; trying again in %ld ms", attempts,
			  ke ? ds_kube_error_format(ke, buf, sizeof(buf)) : "failed", delay);
	it->out.attempts = attempts;
	it->out.next_try_at = ds_clock_wall_ms() + delay;
	ds_applier_count(a, &a->stats.retried, 1);
}

void ds_applier_decide_kube_failure(ds_applier *a, struct item *it, const char *what, int rc,
				    const ds_kube_error *ke)
{
	char buf[600];

	if (transient(rc, ke)) {
		ds_applier_decide_retry(a, it, ke);
		return;
	}
	ds_applier_decide(it, DS_APPLY_FAILED, "%s: %s", what,
			  ds_kube_error_format(ke, buf, sizeof(buf)));
}

/* Write the item's result to the ledger, count it and tell the agent. */
static int record(ds_applier *a, struct item *it, ds_err *err)
{
	static const size_t offs[DS_APPLY_STATE_MAX] = {
	    [DS_APPLY_APPLIED] = offsetof(ds_applier_stats, applied),
	    [DS_APPLY_WAITING] = offsetof(ds_applier_stats, waiting),
	    [DS_APPLY_FAILED] = offsetof(ds_applier_stats, failed),
	    [DS_APPLY_HELD] = offsetof(ds_applier_stats, held),
	    [DS_APPLY_SKIPPED] = offsetof(ds_applier_stats, skipped),
	    [DS_APPLY_DELETED] = offsetof(ds_applier_stats, deleted),
	    [DS_APPLY_KEPT] = offsetof(ds_applier_stats, kept),
	    [DS_APPLY_REFUSED] = offsetof(ds_applier_stats, refused),
	};
	size_t off = offs[it->out.state];

	if (off && !it->unchanged)
		ds_applier_count(a, (uint64_t *)(void *)((char *)&a->stats + off), 1);
	return ds_object_state_set(a->st, it->row->id, it->row->record_id, &it->out, err);
}

/* Tell the agent, once the outcome is durable. */
static void tell(ds_applier *a, const struct item *it, const ds_report *rep)
{
	char target[700];

	if (!a->cfg.on_event)
		return;
	if (it->obj)
		ds_obj_describe(it->obj, target, sizeof(target));
	a->cfg.on_event(
	    a->cfg.event_ud,
	    &(ds_applier_event){.source = it->row->source,
				.key = it->row->key,
				.target = it->obj ? target : NULL,
				.seq = it->row->seq,
				.op = it->row->op,
				.state = it->out.state,
				.reason = it->out.reason,
				.unchanged = it->unchanged,
				.takeover = it->takeover,
				.recreated = it->recreated,
				.refusal = it->out.state == DS_APPLY_REFUSED ? it->refusal : -1,
				.report = rep,
				.report_first = it->rep_first,
				.report_n = it->rep_n,
				.seconds = ds_clock_mono_s() - a->picked});
}

/*
 * Record a group's outcomes in one ledger transaction (one fsync for the
 * group, no API call while the receiver may wait for the lock), then tell the
 * agent: what is logged is what the ledger holds.
 */
int ds_applier_record_all(ds_applier *a, struct item **v, size_t n, const ds_report *rep,
			  ds_err *err)
{
	int rc;

	if (!n)
		return 0;
	rc = ds_object_state_begin(a->st, err);
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = record(a, v[i], err);
	if (rc == 0)
		rc = ds_object_state_commit(a->st, err);
	else
		ds_object_state_rollback(a->st);
	for (size_t i = 0; rc == 0 && i < n; i++)
		tell(a, v[i], rep);
	return rc;
}

/* ---- preparing: payload, pipeline, hash -------------------------------------- */

void ds_applier_hash_hex(const uint8_t hash[DS_HASH_LEN], char hex[2 * DS_HASH_LEN + 1])
{
	for (size_t i = 0; i < DS_HASH_LEN; i++)
		snprintf(hex + 2 * i, 3, "%02x", hash[i]);
}

static int hash_object(const json_t *obj, uint8_t out[DS_HASH_LEN])
{
	char *s = json_dumps(obj, JSON_COMPACT | JSON_SORT_KEYS);

	if (!s)
		return -ENOMEM;
	ds_record_hash(s, strlen(s), out);
	free(s);
	return 0;
}

bool ds_applier_parking_apart(const json_t *obj)
{
	const char *api = ds_obj_api_version(obj);

	return ds_kind_is(ds_obj_kind(obj), DS_KIND_DEPLOYMENT) && api &&
	       strncmp(api, "apps/", 5) == 0;
}

/*
 * The hash the applied-hash annotation carries: the object's own, but for a
 * Deployment that of its form apart from the parking (spec.replicas and
 * drasync.io/replicas), the same in standby and active form. The deployment
 * controller copies a Deployment's annotations onto its ReplicaSet: an
 * annotation that changed at each failover cost a ReplicaSet write per
 * Deployment (at that controller's 20 requests a second) before it scaled
 * any up. already_there compares the parking on its own.
 */
static int mark_hash(const json_t *obj, const uint8_t hash[DS_HASH_LEN], uint8_t out[DS_HASH_LEN])
{
	json_t *copy;
	int rc;

	if (!ds_applier_parking_apart(obj)) {
		memcpy(out, hash, DS_HASH_LEN);
		return 0;
	}
	copy = json_deep_copy(obj);
	if (!copy)
		return -ENOMEM;
	json_object_del(json_object_get(copy, "spec"), "replicas");
	json_object_del(json_object_get(json_object_get(copy, "metadata"), "annotations"),
			DS_ANNOTATION_REPLICAS);
	rc = hash_object(copy, out);
	json_decref(copy);
	return rc;
}

/* The report's entries from `first` on of one type, joined into buf. */
static const char *report_text(const ds_report *rep, size_t first, enum ds_report_type type,
			       char *buf, size_t size)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t k = first; k < ds_report_count(rep) && used + 1 < size; k++) {
		const ds_report_entry *e = ds_report_get(rep, k);
		int w;
		if (e->type != type)
			continue;
		w = snprintf(buf + used, size - used, "%s%s", used ? "; " : "",
			     e->message ? e->message : ds_report_type_name(e->type));
		if (w < 0)
			break;
		used += (size_t)w;
	}
	return buf;
}

/*
 * The mode of target namespace ns: the ledger's (failover, failback), read
 * once per pass so that another process's change is seen, else the
 * configuration's. A ledger that cannot be read keeps the last modes read.
 */
static enum ds_mode mode_of(void *ud, const char *ns, enum ds_mode configured)
{
	ds_applier *a = ud;

	if (a->modes_pass != a->stats.passes) {
		ds_namespace_mode *rows = NULL;
		size_t n = 0;
		if (ds_namespace_modes_list(a->nm, &rows, &n, NULL) == 0) {
			ds_namespace_mode_list_free(a->modes, a->n_modes);
			a->modes = rows;
			a->n_modes = n;
		}
		a->modes_pass = a->stats.passes;
	}
	return ds_namespace_mode_of(a->modes, a->n_modes, ns, configured);
}

/*
 * Standby holds a bare Pod or Job in the ledger. One drasync created before
 * (a failover made it) is taken off the target again, under the tombstones'
 * guard, and forgotten as applied so that the next failover creates it.
 */
static void hold(ds_applier *a, struct item *it, const char *why)
{
	ds_object_state_row *r = it->row;
	struct gone g;

	if (!r->target_name || !r->has_applied_hash) {
		ds_applier_decide(it, DS_APPLY_HELD, "%s", why);
		return;
	}
	ds_applier_guarded_delete(a, r,
				  r->target_api_version ? r->target_api_version : r->api_version,
				  r->target_ns, r->target_name, &g);
	if (g.state == DS_APPLY_DELETED) {
		ds_applier_decide(
		    it, DS_APPLY_HELD, "%s; %s %s%s%s %s", why, r->kind,
		    r->target_ns ? r->target_ns : "", r->target_ns ? "/" : "", r->target_name,
		    g.reason[0] ? "was already gone from the target"
				: "deleted from the target (drasync created it at failover)");
		it->out.forget_applied = true;
	} else if (g.state == DS_APPLY_KEPT) {
		ds_applier_decide(it, DS_APPLY_HELD, "%s; %s", why, g.reason);
	} else {
		ds_applier_decide_kube_failure(a, it, g.what, g.rc, &g.ke);
	}
}

struct group_lookup {
	ds_applier *a;
	const char *source;
};

/* The PodGroup a workload's pods join, as the same source sent it (the ledger's
 * desired record), read once per pass. @return borrowed, or NULL */
static const json_t *group_of(void *ud, const char *ns, const char *name)
{
	struct group_lookup *g = ud;
	char key[800];
	uint8_t *payload = NULL;
	size_t len = 0;
	int zstd = 0;
	json_t *obj = NULL, *seen;
	char why[200];

	snprintf(key, sizeof(key), "%s\nscheduling.k8s.io/PodGroup/%s/%s", g->source, ns ? ns : "",
		 name);
	seen = json_object_get(g->a->groups, key);
	if (seen)
		return json_is_object(seen) ? seen : NULL;
	if (ds_object_state_payload(g->a->st, g->source, strchr(key, '\n') + 1, &payload, &len,
				    &zstd, NULL) == 0 &&
	    ds_ledger_payload_json(payload, len, zstd, &obj, why, sizeof(why)) < 0)
		obj = NULL;
	free(payload);
	if (json_object_set_new(g->a->groups, key, obj ? obj : json_null()) < 0)
		return NULL;
	return obj;
}

struct member_scan {
	const char *group;
	json_t *list;
};

static int member_row(void *ud, const char *kind, const void *payload, size_t len, int zstd)
{
	struct member_scan *m = ud;
	json_t *obj = NULL;
	const char *g;
	char why[200];

	if (ds_workload_from_kind(kind) < 0 ||
	    ds_ledger_payload_json(payload, len, zstd, &obj, why, sizeof(why)) < 0)
		return 0;
	g = ds_dra_group_of(obj);
	if (g && strcmp(g, m->group) == 0 && json_array_append(m->list, obj) < 0) {
		json_decref(obj);
		return -ENOMEM;
	}
	json_decref(obj);
	return 0;
}

/* The workloads of the same source and source namespace whose pods join the
 * PodGroup, as the ledger holds them, read once per pass. @return borrowed, or NULL */
static const json_t *members_of(void *ud, const char *ns, const char *group)
{
	struct group_lookup *g = ud;
	struct member_scan m = {.group = group, .list = NULL};
	char key[800];
	json_t *seen;

	if (!ns)
		return NULL;
	snprintf(key, sizeof(key), "%s\n%s\n%s", g->source, ns, group);
	seen = json_object_get(g->a->members, key);
	if (seen)
		return seen;
	m.list = json_array();
	if (!m.list || ds_object_state_each_in(g->a->st, g->source, ns, member_row, &m, NULL) < 0 ||
	    json_object_set_new(g->a->members, key, m.list) < 0) {
		/* Unknown: the member is still checked against its group alone. */
		return NULL;
	}
	return m.list;
}

/* A PodGroup made from a Workload's template: the Workload's claims follow it. */
static int regroup_workload(ds_applier *a, const ds_object_state_row *r, const json_t *obj)
{
	const char *wl = ds_dra_group_workload(obj);
	char key[800];

	if (!ds_kind_is(ds_obj_kind(obj), DS_KIND_POD_GROUP) || !ds_sched_is_group(obj))
		return 0;
	if (!wl || !r->ns)
		return 0;
	snprintf(key, sizeof(key), "%s\nscheduling.k8s.io/Workload/%s/%s", r->source, r->ns, wl);
	return json_object_set_new(a->regroup, key, json_true()) < 0 ? -ENOMEM : 0;
}

/*
 * A member whose PodGroup this pass did not decide: the group's claims follow
 * its members, so the group is decided again first (made due now) and the
 * member waits for it; both go in the next pass, the group before it, so that
 * no pod of the member starts against the group's old claims.
 * @return 1 (it waits), 0, -ENOMEM
 */
static int wait_for_group(ds_applier *a, struct item *it, bool hold)
{
	const char *name = ds_dra_group_of(it->obj);
	char key[800];
	int rc;

	if (!name || !it->row->ns)
		return 0;
	snprintf(key, sizeof(key), "%s\nscheduling.k8s.io/PodGroup/%s/%s", it->row->source,
		 it->row->ns, name);
	if (!json_is_object(json_object_get(a->groups, key)) || json_object_get(a->prepared, key))
		return 0;
	/* The group was decided after this record of the member came: it followed it. */
	if (it->row->record_id <= json_integer_value(json_object_get(a->group_seen, key)))
		return 0;
	/* false: made due by a member of this pass, whose other members wait too */
	if (!json_is_false(json_object_get(a->regroup, key))) {
		rc = ds_object_state_reconsider_key(a->st, it->row->source, strchr(key, '\n') + 1,
						    NULL);
		if (rc == -ENOMEM)
			return rc;
		if (rc <= 0)
			return 0; /* due already (it goes first in a pass), or the ledger said no */
		if (json_object_set_new(a->regroup, key, json_false()) < 0)
			return -ENOMEM;
		a->regrouped = true;
	}
	if (!hold)
		return 0; /* decided already (failed, skipped): the group is decided again */
	/* named where it goes, as the waiting object is */
	ds_applier_decide(it, DS_APPLY_WAITING,
			  "waits for PodGroup %s/%s to be decided again with it (a group's claims "
			  "follow its members)",
			  ds_target_config_map_namespace(a->cfg.cfg, it->row->ns), name);
	return 1;
}

int ds_applier_regroup(ds_applier *a, ds_err *err)
{
	const char *key;
	json_t *v;
	int rc;

	json_object_foreach (a->regroup, key, v) {
		const char *nl = strchr(key, '\n');
		char source[300];

		/* Prepared in this pass: it was decided with the members the ledger has now;
		 * false: made due already (its members wait for it). */
		if (!nl || json_object_get(a->prepared, key) || json_is_false(v))
			continue;
		snprintf(source, sizeof(source), "%.*s", (int)(nl - key), key);
		rc = ds_object_state_reconsider_key(a->st, source, nl + 1, err);
		if (rc < 0)
			return rc;
		a->regrouped = a->regrouped || rc > 0;
	}
	/* A member waits for its group: both are due now. */
	if (a->regrouped) {
		a->regrouped = false;
		return ds_object_state_wake_waiting(a->st, err);
	}
	return 0;
}

struct group_scan {
	const char *workload;
	json_t *list;
};

static int group_row(void *ud, const char *kind, const void *payload, size_t len, int zstd)
{
	struct group_scan *m = ud;
	json_t *obj = NULL;
	const char *w;
	char why[200];

	if (!ds_kind_is(kind, DS_KIND_POD_GROUP) ||
	    ds_ledger_payload_json(payload, len, zstd, &obj, why, sizeof(why)) < 0)
		return 0;
	w = ds_dra_group_workload(obj);
	if (w && strcmp(w, m->workload) == 0 && json_array_append(m->list, obj) < 0) {
		json_decref(obj);
		return -ENOMEM;
	}
	json_decref(obj);
	return 0;
}

/* The PodGroups of the same source and source namespace made from a template of the
 * Workload, as the ledger holds them, read once per pass. @return borrowed, or NULL */
static const json_t *groups_from(void *ud, const char *ns, const char *workload)
{
	struct group_lookup *g = ud;
	struct group_scan m = {.workload = workload, .list = NULL};
	char key[800];
	json_t *seen;

	if (!ns)
		return NULL;
	/* "\n\n" before the name: no PodGroup's key of members_of() looks so */
	snprintf(key, sizeof(key), "%s\n%s\n\n%s", g->source, ns, workload);
	seen = json_object_get(g->a->members, key);
	if (seen)
		return seen;
	m.list = json_array();
	if (!m.list || ds_object_state_each_in(g->a->st, g->source, ns, group_row, &m, NULL) < 0 ||
	    json_object_set_new(g->a->members, key, m.list) < 0)
		return NULL;
	return m.list;
}

/*
 * Decode the payload and run the pipeline. Decides the item unless it is to be
 * applied. *again (when not NULL) is set instead when discovery, read again
 * because the target did not serve the object's kind, changed the
 * resource.k8s.io version to convert to: the object is to be prepared again.
 */
static int prepare_once(ds_applier *a, struct item *it, ds_report *rep, bool *again)
{
	ds_object_state_row *r = it->row;
	struct group_lookup gl = {.a = a, .source = r->source};
	ds_transform_opts topts = {.cfg = a->cfg.cfg,
				   .dra_version = a->dra,
				   .source_cluster = r->source_cluster,
				   .source = r->source,
				   .source_uid = r->source_uid,
				   .mode_of = mode_of,
				   .mode_ud = a,
				   .sched_version = a->sched,
				   .group_of = group_of,
				   .members_of = members_of,
				   .groups_from = groups_from,
				   .group_ud = &gl};
	size_t first = ds_report_count(rep);
	ds_kube_error ke;
	char text[REASON_MAX];
	int t, rc;

	rc = ds_ledger_payload_json(r->payload, r->payload_len, r->zstd, &it->obj, text,
				    sizeof(text));
	if (rc == -ENOMEM)
		return rc;
	if (rc < 0) {
		ds_applier_decide(it, DS_APPLY_FAILED, "%s", text);
		return 0;
	}
	/* SPEC §5 trust boundary: before the pipeline, before any call */
	if (!ds_applier_trust_check(a, it))
		return 0;
	{
		char key[800];

		int64_t seen = 0;

		snprintf(key, sizeof(key), "%s\n%s", r->source, r->key);
		if (json_object_set_new(a->prepared, key, json_true()) < 0 ||
		    regroup_workload(a, r, it->obj) < 0)
			return -ENOMEM;
		/* A PodGroup is decided with the members of the ledger as it is now. */
		if (ds_kind_is(r->kind, DS_KIND_POD_GROUP) &&
		    ds_object_state_last_record_id(a->st, &seen, NULL) == 0) {
			if (!a->group_seen && !(a->group_seen = json_object()))
				return -ENOMEM;
			if (json_object_set_new(a->group_seen, key, json_integer(seen)) < 0)
				return -ENOMEM;
		}
	}
	it->rep_first = first;
	t = ds_transform_object(&topts, it->obj, rep);
	if (t < 0)
		return t;
	it->rep_n = ds_report_count(rep) - first;
	/* A member that changed: its group is decided again first; an applicable one waits. */
	if ((rc = wait_for_group(a, it, t == DS_TRANSFORM_APPLY)) != 0)
		return rc < 0 ? rc : 0;
	switch (t) {
	case DS_TRANSFORM_SKIP:
		ds_applier_decide(it, DS_APPLY_SKIPPED, "%s",
				  report_text(rep, first, DS_REPORT_SKIP, text, sizeof(text)));
		return 0;
	case DS_TRANSFORM_HOLD:
		hold(a, it, report_text(rep, first, DS_REPORT_HOLD, text, sizeof(text)));
		return 0;
	case DS_TRANSFORM_APPLY:
		break;
	default:
		ds_applier_decide(it, DS_APPLY_FAILED, "%s",
				  report_text(rep, first, DS_REPORT_ERROR, text, sizeof(text)));
		return 0;
	}
	it->rank = ds_selection_apply_rank(it->obj);
	/* Two sources writing one object would overwrite each other: the first
	 * keeps it, the second is refused and told why. */
	{
		char owner[256];
		int c = ds_object_state_target_owner(
		    a->st, r->source, ds_obj_kind(it->obj), ds_obj_namespace(it->obj),
		    ds_obj_name(it->obj), owner, sizeof(owner), NULL);
		if (c < 0)
			return c;
		/* A Namespace on the target that drasync did not create is written by
		 * no source (mark_created_namespace): several may map into it. */
		if (c > 0 && ds_kind_is(ds_obj_kind(it->obj), DS_KIND_NAMESPACE) &&
		    ds_applier_namespace_foreign(a, ds_obj_name(it->obj)) == 1)
			c = 0;
		if (c > 0) {
			ds_obj_describe(it->obj, text, sizeof(text));
			ds_applier_refuse(
			    it, DS_REFUSAL_OWNER,
			    "conflict: %s on the target is replicated from source %s; source "
			    "%s may not write it too (map its namespace elsewhere)",
			    text, owner, r->source);
			return 0;
		}
	}
	rc = ds_applier_namespace_labels(a, it);
	if (rc < 0)
		return rc;
	rc = hash_object(it->obj, it->hash);
	if (rc < 0)
		return rc;
	if (r->has_applied_hash && memcmp(r->applied_hash, it->hash, DS_HASH_LEN) == 0) {
		ds_applier_decide(it, DS_APPLY_APPLIED, NULL);
		it->unchanged = true;
		ds_applier_count(a, &a->stats.unchanged, 1);
		return 0;
	}
	{
		/* What the object on the target was applied from (see already_there). */
		char hex[2 * DS_HASH_LEN + 1];
		uint8_t mark[DS_HASH_LEN];

		if (mark_hash(it->obj, it->hash, mark) < 0)
			return -ENOMEM;
		ds_applier_hash_hex(mark, hex);
		if (ds_obj_set_annotation(it->obj, DS_ANNOTATION_APPLIED_HASH, hex) < 0)
			return -ENOMEM;
	}
	ds_kube_error_clear(&ke);
	rc = ds_kube_resource_of(a->cfg.kube, it->obj, &it->res, &ke);
	if (rc == -ENOENT) {
		/* Maybe new on the target (a CRD, an upgrade): read discovery again
		 * (at most once per discovery_refresh_ms) and look once more. */
		ds_kube_discovery_refresh(a->cfg.kube, NULL);
		if (ds_applier_follow_discovery(a) && again &&
		    (ds_obj_in_group(it->obj, "resource.k8s.io") || ds_sched_is_group(it->obj))) {
			*again = true;
			return 0;
		}
		ds_kube_error_clear(&ke);
		rc = ds_kube_resource_of(a->cfg.kube, it->obj, &it->res, &ke);
	}
	if (rc < 0) {
		char buf[600];
		if (rc == -ENOENT)
			ds_applier_decide(
			    it, DS_APPLY_FAILED,
			    "the target does not serve %s %s (drasync-target retry once it "
			    "does)",
			    ds_obj_api_version(it->obj), ds_obj_kind(it->obj));
		else if (transient(rc, &ke))
			ds_applier_decide_retry(a, it, &ke);
		else
			ds_applier_decide(it, DS_APPLY_FAILED, "discovery: %s",
					  ds_kube_error_format(&ke, buf, sizeof(buf)));
	}
	return 0;
}

int ds_applier_prepare(ds_applier *a, struct item *it, ds_report *rep)
{
	bool again = false;
	int rc = prepare_once(a, it, rep, &again);

	if (rc < 0 || !again)
		return rc;
	/* Converted for a version the target no longer serves: for the one it does. */
	json_decref(it->obj);
	it->obj = NULL;
	return prepare_once(a, it, rep, NULL);
}
