#include "drasync/applier.h"

#include "drasync/buf.h"
#include "drasync/dra_convert.h"
#include "drasync/dra_mapping.h"
#include "drasync/field_loss.h"
#include "drasync/k8s_object.h"
#include "drasync/ledger_objects.h"
#include "drasync/namespace_mode.h"
#include "drasync/preflight.h"
#include "drasync/report.h"
#include "drasync/sched_convert.h"
#include "drasync/selection.h"
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

#define REASON_MAX 768

struct ds_applier {
	ds_applier_config cfg;
	ds_object_state *st;
	enum ds_dra_version dra;
	unsigned long dra_gen;	/* the discovery generation dra was picked from */
	unsigned long pass_gen; /* the discovery generation when the pass began */
	struct timespec picked; /* when the pass took its objects (monotonic) */
	pthread_mutex_t mu;	/* guards stats, notified, stopping, next_cfg */
	pthread_cond_t cond;
	bool notified, stopping;
	atomic_bool applying; /* a pass is applying objects it picked */
	bool ingested;	      /* settle() folded records in: the pass wakes the waiting */
	const ds_target_config *next_cfg; /* taken at the start of the next pass */
	ds_applier_stats stats;
	json_t *present; /* per pass: "kind/ns/name" -> whether it exists on the target */
	json_t *objs;	 /* per pass: "kind/ns/name" -> a claim or template as on the target */
	/* scheduling.k8s.io version the target serves (Workload, PodGroup) */
	enum ds_sched_version sched;
	json_t *groups;	 /* per pass: "source\nkey" -> a PodGroup as its source has it, or null */
	json_t *classes; /* per pass, when asked: the target's DeviceClasses */
	json_t *members; /* per pass: "source\nns\ngroup" -> the workloads that join it */
	ds_object_state_scope scope; /* cfg.namespaces, when set */
	ds_namespace_modes *nm;
	ds_namespace_mode *modes; /* the ledger's namespace modes, read once per pass */
	size_t n_modes;
	uint64_t modes_pass; /* the pass they were read for; 0: never */
	/* Rows desiring records up to this one were there when the applier
	 * started: a run before it (killed) may have written them without
	 * recording it. Before such a row is written, the object on the target
	 * is looked at: with the annotation of the same hash, it is applied
	 * already. 0 once a pass had no such row. */
	int64_t verify_upto;
	bool verify_seen; /* per pass: a row up to verify_upto came to be written */
	json_t *live;	  /* per pass: "api|kind|ns" -> name -> its applied-hash annotation */
};

/* What guarded_delete() did: DELETED (reason empty: deleted, else why it was not there),
 * KEPT (reason says why), or 0: the call `what` failed with rc and ke. */
struct gone {
	enum ds_apply_state state;
	const char *what;
	int rc;
	ds_kube_error ke;
	char reason[REASON_MAX];
};

/* One object of a pass. */
struct item {
	ds_object_state_row *row;
	json_t *obj; /* the transformed object to apply */
	int rank;
	struct ds_kube_resource res;
	uint8_t hash[DS_HASH_LEN];
	bool decided, unchanged;
	bool takeover; /* fields other managers owned were taken (the reason names them) */
	size_t rep_first, rep_n; /* its entries in the pass's report */
	ds_object_state_result out;
	char reason[REASON_MAX];
	/* while it is applied (the pass's stream) */
	struct ds_kube_op op;
	bool forced;		  /* sent again with force after a conflict */
	char note[REASON_MAX];	  /* preflight's note (what a claim's DeviceClass lacks) */
	char took[REASON_MAX];	  /* what a forced apply took over */
	bool sent;		  /* handed to the client */
	struct item **dependents; /* of the pass, waiting for it to be decided */
	size_t n_dependents, cap_dependents;
	size_t blockers; /* of the pass it waits for */
	bool finished;	 /* decided (and on its way to the ledger) */
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void msleep(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static void count(ds_applier *a, uint64_t *field, uint64_t n)
{
	pthread_mutex_lock(&a->mu);
	*field += n;
	pthread_mutex_unlock(&a->mu);
}

enum ds_dra_version ds_applier_served_dra(ds_kube *k)
{
	char version[64] = "";
	enum ds_dra_version out = DS_DRA_V1;

	if (ds_kube_version_to_use(k, "resource.k8s.io", "v1", version, sizeof(version), NULL) <
		0 ||
	    ds_dra_version_parse(version, &out) < 0)
		return DS_DRA_V1;
	return out;
}

/* The scheduling.k8s.io version of Workload and PodGroup the target serves (v1beta1 first). */
static enum ds_sched_version served_sched(ds_kube *k)
{
	enum ds_sched_version out = DS_SCHED_AS_IS, v;
	char preferred[64] = "";
	json_t *served = NULL, *e;
	size_t i;

	if (ds_kube_group_versions(k, "scheduling.k8s.io", preferred, sizeof(preferred), &served,
				   NULL) < 0)
		return DS_SCHED_AS_IS;
	json_array_foreach (served, i, e)
		if (ds_sched_version_parse(json_string_value(e), &v) == 0 && v > out)
			out = v;
	json_decref(served);
	return out;
}

/*
 * After discovery was read again: the target may serve another resource.k8s.io
 * or scheduling.k8s.io version now (an upgrade, a gate turned on). @return
 * whether a version to convert to changed
 */
static bool follow_discovery(ds_applier *a)
{
	enum ds_dra_version v;
	enum ds_sched_version sv;

	if (ds_kube_discovery_generation(a->cfg.kube) == a->dra_gen)
		return false;
	v = ds_applier_served_dra(a->cfg.kube);
	sv = served_sched(a->cfg.kube);
	a->dra_gen = ds_kube_discovery_generation(a->cfg.kube);
	if (v == a->dra && sv == a->sched)
		return false;
	a->dra = v;
	a->sched = sv;
	return true;
}

static const char *scope_map_ns(void *ud, const char *ns)
{
	const ds_applier *a = ud;

	return ds_target_config_map_namespace(a->cfg.cfg, ns);
}

int ds_applier_new(ds_applier **out, const ds_applier_config *cfg, ds_err *err)
{
	ds_applier *a;
	int rc;

	if (!cfg || !cfg->ledger_path || !cfg->kube || !cfg->cfg) {
		ds_err_set(err, "applier: ledger path, client and configuration are required");
		return -EINVAL;
	}
	a = calloc(1, sizeof(*a));
	if (!a)
		return ds_err_fallback(err, -ENOMEM);
	a->cfg = *cfg;
	atomic_init(&a->applying, false);
	if (!a->cfg.field_manager)
		a->cfg.field_manager = "drasync";
	if (!a->cfg.pass_max)
		a->cfg.pass_max = 2048;
	if (a->cfg.wait_retry_ms <= 0)
		a->cfg.wait_retry_ms = 5000;
	if (a->cfg.backoff_ms <= 0)
		a->cfg.backoff_ms = 1000;
	if (a->cfg.backoff_max_ms <= 0)
		a->cfg.backoff_max_ms = 60000;
	if (a->cfg.delete_wait_ms <= 0)
		a->cfg.delete_wait_ms = 30000;
	if (a->cfg.discovery_refresh_ms <= 0)
		a->cfg.discovery_refresh_ms = 30000;
	pthread_mutex_init(&a->mu, NULL);
	pthread_cond_init(&a->cond, NULL);
	rc = ds_object_state_open(&a->st, cfg->ledger_path, err);
	if (rc == 0)
		rc = ds_namespace_modes_open(&a->nm, cfg->ledger_path, err);
	if (rc < 0) {
		ds_applier_free(a);
		return ds_err_fallback(err, rc);
	}
	a->scope = (ds_object_state_scope){
	    .ns = cfg->namespaces, .n = cfg->n_namespaces, .map_ns = scope_map_ns, .map_ud = a};
	ds_kube_discovery_set_refresh_interval(cfg->kube, a->cfg.discovery_refresh_ms);
	rc = ds_object_state_last_record_id(a->st, &a->verify_upto, err);
	if (rc < 0) {
		ds_applier_free(a);
		return ds_err_fallback(err, rc);
	}
	a->dra = ds_applier_served_dra(cfg->kube);
	a->sched = served_sched(cfg->kube);
	a->dra_gen = ds_kube_discovery_generation(cfg->kube);
	*out = a;
	return 0;
}

void ds_applier_free(ds_applier *a)
{
	if (!a)
		return;
	ds_object_state_free(a->st);
	ds_namespace_modes_free(a->nm);
	ds_namespace_mode_list_free(a->modes, a->n_modes);
	json_decref(a->present);
	json_decref(a->objs);
	json_decref(a->groups);
	json_decref(a->classes);
	json_decref(a->members);
	json_decref(a->live);
	pthread_cond_destroy(&a->cond);
	pthread_mutex_destroy(&a->mu);
	free(a);
}

const char *ds_applier_dra_api_version(const ds_applier *a)
{
	return ds_dra_api_version(a->dra);
}

void ds_applier_notify(ds_applier *a)
{
	pthread_mutex_lock(&a->mu);
	a->notified = true;
	pthread_cond_signal(&a->cond);
	pthread_mutex_unlock(&a->mu);
}

void ds_applier_stop(ds_applier *a)
{
	pthread_mutex_lock(&a->mu);
	a->stopping = true;
	pthread_cond_signal(&a->cond);
	pthread_mutex_unlock(&a->mu);
}

void ds_applier_set_config(ds_applier *a, const ds_target_config *cfg)
{
	pthread_mutex_lock(&a->mu);
	a->next_cfg = cfg;
	a->notified = true;
	pthread_cond_signal(&a->cond);
	pthread_mutex_unlock(&a->mu);
}

bool ds_applier_busy(ds_applier *a)
{
	return atomic_load(&a->applying);
}

void ds_applier_stats_get(ds_applier *a, ds_applier_stats *out)
{
	pthread_mutex_lock(&a->mu);
	*out = a->stats;
	pthread_mutex_unlock(&a->mu);
}

void ds_applier_record_handler(void *ud, const char *source, const ds_record *rec,
			       ds_record_result *res)
{
	(void)source;
	(void)rec;
	(void)res;
	ds_applier_notify(ud);
}

/* ---- deciding ---------------------------------------------------------------- */

static void decide(struct item *it, enum ds_apply_state s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void decide(struct item *it, enum ds_apply_state s, const char *fmt, ...)
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

static void decide_retry(ds_applier *a, struct item *it, const ds_kube_error *ke)
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
	decide(it, DS_APPLY_PENDING, "attempt %d: %s; trying again in %ld ms", attempts,
	       ke ? ds_kube_error_format(ke, buf, sizeof(buf)) : "failed", delay);
	it->out.attempts = attempts;
	it->out.next_try_at = now_ms() + delay;
	count(a, &a->stats.retried, 1);
}

static void decide_kube_failure(ds_applier *a, struct item *it, const char *what, int rc,
				const ds_kube_error *ke)
{
	char buf[600];

	if (transient(rc, ke)) {
		decide_retry(a, it, ke);
		return;
	}
	decide(it, DS_APPLY_FAILED, "%s: %s", what, ds_kube_error_format(ke, buf, sizeof(buf)));
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
	};
	size_t off = offs[it->out.state];

	if (off && !it->unchanged)
		count(a, (uint64_t *)(void *)((char *)&a->stats + off), 1);
	return ds_object_state_set(a->st, it->row->id, it->row->record_id, &it->out, err);
}

/* Tell the agent, once the outcome is durable. */
static void tell(ds_applier *a, const struct item *it, const ds_report *rep)
{
	char target[700];
	struct timespec now;

	if (!a->cfg.on_event)
		return;
	clock_gettime(CLOCK_MONOTONIC, &now);
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
				.report = rep,
				.report_first = it->rep_first,
				.report_n = it->rep_n,
				.seconds = (double)(now.tv_sec - a->picked.tv_sec) +
					   (double)(now.tv_nsec - a->picked.tv_nsec) / 1e9});
}

/*
 * Record a group's outcomes in one ledger transaction (one fsync for the
 * group, no API call while the receiver may wait for the lock), then tell the
 * agent: what is logged is what the ledger holds.
 */
static int record_all(ds_applier *a, struct item **v, size_t n, const ds_report *rep, ds_err *err)
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

static void hash_hex(const uint8_t hash[DS_HASH_LEN], char hex[2 * DS_HASH_LEN + 1])
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

static void guarded_delete(ds_applier *a, const ds_object_state_row *r, const char *api,
			   const char *ns, const char *name, struct gone *g);

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
		decide(it, DS_APPLY_HELD, "%s", why);
		return;
	}
	guarded_delete(a, r, r->target_api_version ? r->target_api_version : r->api_version,
		       r->target_ns, r->target_name, &g);
	if (g.state == DS_APPLY_DELETED) {
		decide(it, DS_APPLY_HELD, "%s; %s %s%s%s %s", why, r->kind,
		       r->target_ns ? r->target_ns : "", r->target_ns ? "/" : "", r->target_name,
		       g.reason[0] ? "was already gone from the target"
				   : "deleted from the target (drasync created it at failover)");
		it->out.forget_applied = true;
	} else if (g.state == DS_APPLY_KEPT) {
		decide(it, DS_APPLY_HELD, "%s; %s", why, g.reason);
	} else {
		decide_kube_failure(a, it, g.what, g.rc, &g.ke);
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
				   .source_uid = r->source_uid,
				   .mode_of = mode_of,
				   .mode_ud = a,
				   .sched_version = a->sched,
				   .group_of = group_of,
				   .members_of = members_of,
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
		decide(it, DS_APPLY_FAILED, "%s", text);
		return 0;
	}
	it->rep_first = first;
	t = ds_transform_object(&topts, it->obj, rep);
	if (t < 0)
		return t;
	it->rep_n = ds_report_count(rep) - first;
	switch (t) {
	case DS_TRANSFORM_SKIP:
		decide(it, DS_APPLY_SKIPPED, "%s",
		       report_text(rep, first, DS_REPORT_SKIP, text, sizeof(text)));
		return 0;
	case DS_TRANSFORM_HOLD:
		hold(a, it, report_text(rep, first, DS_REPORT_HOLD, text, sizeof(text)));
		return 0;
	case DS_TRANSFORM_APPLY:
		break;
	default:
		decide(it, DS_APPLY_FAILED, "%s",
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
		if (c > 0) {
			ds_obj_describe(it->obj, text, sizeof(text));
			decide(it, DS_APPLY_FAILED,
			       "conflict: %s on the target is replicated from source %s; source "
			       "%s may not write it too (map its namespace elsewhere)",
			       text, owner, r->source);
			return 0;
		}
	}
	rc = hash_object(it->obj, it->hash);
	if (rc < 0)
		return rc;
	if (r->has_applied_hash && memcmp(r->applied_hash, it->hash, DS_HASH_LEN) == 0) {
		decide(it, DS_APPLY_APPLIED, NULL);
		it->unchanged = true;
		count(a, &a->stats.unchanged, 1);
		return 0;
	}
	{
		/* What the object on the target was applied from (see already_there). */
		char hex[2 * DS_HASH_LEN + 1];

		hash_hex(it->hash, hex);
		if (ds_obj_set_annotation(it->obj, DS_ANNOTATION_APPLIED_HASH, hex) < 0)
			return -ENOMEM;
	}
	ds_kube_error_clear(&ke);
	rc = ds_kube_resource_of(a->cfg.kube, it->obj, &it->res, &ke);
	if (rc == -ENOENT) {
		/* Maybe new on the target (a CRD, an upgrade): read discovery again
		 * (at most once per discovery_refresh_ms) and look once more. */
		ds_kube_discovery_refresh(a->cfg.kube, NULL);
		if (follow_discovery(a) && again &&
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
			decide(it, DS_APPLY_FAILED,
			       "the target does not serve %s %s (drasync-target retry once it "
			       "does)",
			       ds_obj_api_version(it->obj), ds_obj_kind(it->obj));
		else if (transient(rc, &ke))
			decide_retry(a, it, &ke);
		else
			decide(it, DS_APPLY_FAILED, "discovery: %s",
			       ds_kube_error_format(&ke, buf, sizeof(buf)));
	}
	return 0;
}

static int prepare(ds_applier *a, struct item *it, ds_report *rep)
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

/* ---- preflight ---------------------------------------------------------------- */

/* The apiVersion the target serves kind under, for the kinds preflight names. */
static const char *need_api(const ds_applier *a, const char *kind)
{
	if (strcmp(kind, "ResourceClaim") == 0 || strcmp(kind, "ResourceClaimTemplate") == 0 ||
	    strcmp(kind, "DeviceClass") == 0)
		return ds_dra_api_version(a->dra);
	if (strcmp(kind, "PodGroup") == 0 || strcmp(kind, "Workload") == 0)
		return ds_sched_api_version(a->sched);
	return NULL;
}

/*
 * Whether kind ns/name is applied by us or exists on the target. Lookups on
 * the target are remembered for the pass.
 * @return 1, 0, or -ENOMEM
 */
static int present(ds_applier *a, const char *kind, const char *ns, const char *name)
{
	struct ds_kube_resource res;
	ds_kube_error ke;
	char key[800];
	json_t *seen;
	const char *api = need_api(a, kind);
	int rc;

	rc = ds_object_state_target_applied(a->st, kind, ns, name, NULL);
	if (rc != 0)
		return rc > 0 ? 1 : 0;
	snprintf(key, sizeof(key), "%s/%s/%s", kind, ns ? ns : "", name);
	seen = json_object_get(a->present, key);
	if (seen)
		return json_is_true(seen);
	ds_kube_error_clear(&ke);
	if (!api || ds_kube_resource_find(a->cfg.kube, api, kind, &res, &ke) < 0) {
		rc = 0;
	} else {
		json_t *obj = NULL;
		count(a, &a->stats.api_reads, 1);
		rc = ds_kube_get(a->cfg.kube, &res, ns, name, NULL, &obj, &ke) == 0;
		json_decref(obj);
	}
	if (json_object_set_new(a->present, key, json_boolean(rc)) < 0)
		return -ENOMEM;
	return rc;
}

struct missing {
	ds_applier *a;
	char text[REASON_MAX];
	size_t used, n;
	bool device_classes; /* report DeviceClasses (else ignore them) */
};

static bool is_claim_or_template(const char *kind)
{
	return strcmp(kind, "ResourceClaim") == 0 || strcmp(kind, "ResourceClaimTemplate") == 0;
}

static void obj_key(const char *kind, const char *ns, const char *name, char *buf, size_t size)
{
	snprintf(buf, size, "%s/%s/%s", kind, ns ? ns : "", name);
}

/*
 * The claim or template as the target has it: applied in this pass, else read
 * (once per pass). @return borrowed, or NULL when it cannot be read
 */
static json_t *dra_object(ds_applier *a, const char *kind, const char *ns, const char *name)
{
	struct ds_kube_resource res;
	ds_kube_error ke;
	json_t *o = NULL;
	char key[800];

	obj_key(kind, ns, name, key, sizeof(key));
	o = json_object_get(a->objs, key);
	if (o)
		return json_is_object(o) ? o : NULL;
	ds_kube_error_clear(&ke);
	if (ds_kube_resource_find(a->cfg.kube, need_api(a, kind), kind, &res, &ke) == 0) {
		count(a, &a->stats.api_reads, 1);
		if (ds_kube_get(a->cfg.kube, &res, ns, name, NULL, &o, &ke) < 0)
			o = NULL;
	}
	if (json_object_set_new(a->objs, key, o ? o : json_null()) < 0)
		return NULL;
	return o;
}

static int need(void *ud, const char *kind, const char *ns, const char *name)
{
	struct missing *m = ud;
	int p;

	if (!m->device_classes && strcmp(kind, "DeviceClass") == 0)
		return 0;
	p = present(m->a, kind, ns, name);
	if (p < 0)
		return p;
	if (p && !m->device_classes && is_claim_or_template(kind)) {
		/* A workload also waits for the DeviceClasses its claims and templates
		 * request: without them its pods cannot be scheduled either. */
		json_t *o = dra_object(m->a, kind, ns, name);
		if (o) {
			m->device_classes = true;
			p = ds_preflight_needs(o, need, m);
			m->device_classes = false;
			if (p < 0)
				return p;
		}
		return 0;
	}
	if (!p) {
		int w = snprintf(m->text + m->used, sizeof(m->text) - m->used, "%s%s %s%s%s",
				 m->n ? ", " : "", kind, ns ? ns : "", ns ? "/" : "", name);
		if (w > 0 && (size_t)w < sizeof(m->text) - m->used)
			m->used += (size_t)w;
		m->n++;
	}
	return 0;
}

/* The target's DeviceClasses, listed once per pass (for extended resources). @return borrowed */
static const json_t *device_classes(ds_applier *a)
{
	struct ds_kube_resource res;
	ds_kube_error ke;
	json_t *list = NULL;

	if (a->classes)
		return a->classes;
	ds_kube_error_clear(&ke);
	if (ds_kube_resource_find(a->cfg.kube, ds_dra_api_version(a->dra), "DeviceClass", &res,
				  &ke) == 0) {
		count(a, &a->stats.api_reads, 1);
		if (ds_kube_list(a->cfg.kube, &res, NULL, NULL, &list, NULL, &ke) < 0)
			list = NULL;
	}
	a->classes = list ? json_incref(json_object_get(list, "items")) : json_array();
	json_decref(list);
	return a->classes;
}

struct ext_note {
	ds_applier *a;
	char *note;
	size_t size, used;
};

/* KEP-5004: what on the target serves an extended resource a container keeps. */
static int ext_note(void *ud, const char *container, const char *resource)
{
	struct ext_note *x = ud;
	const json_t *classes = device_classes(x->a);
	const char *by = NULL;
	size_t i;
	json_t *dc;
	int w;

	json_array_foreach (classes, i, dc)
		if (ds_preflight_class_serves(dc, resource))
			by = ds_obj_name(dc);
	if (x->used + 1 >= x->size)
		return 0;
	if (by)
		w = snprintf(x->note + x->used, x->size - x->used,
			     "%scontainer %s keeps %s: DeviceClass %s serves it (DRA extended "
			     "resource)",
			     x->used ? "; " : "", container, resource, by);
	else
		w = snprintf(
		    x->note + x->used, x->size - x->used,
		    "%scontainer %s keeps %s: no DeviceClass of the target serves it, only "
		    "a device plugin can",
		    x->used ? "; " : "", container, resource);
	if (w > 0)
		x->used = (size_t)w < x->size - x->used ? x->used + (size_t)w : x->size - 1;
	return 0;
}

/*
 * SPEC §5: a workload waits for the claims and templates it references and
 * the DeviceClasses they request; a claim or template is applied even when
 * its DeviceClass is missing (nothing else is held back), and its reason says
 * which is missing.
 * @return 0, -ENOMEM
 */
static int preflight(ds_applier *a, struct item *it, char *note, size_t note_size)
{
	bool workload = ds_workload_from_kind(ds_obj_kind(it->obj)) >= 0 ||
			ds_obj_in_group(it->obj, "scheduling.k8s.io");
	struct missing m = {.a = a, .device_classes = !workload};
	const ds_dra_config *dra = ds_target_config_dra(a->cfg.cfg);
	int rc;

	note[0] = '\0';
	if (workload && dra && !dra->require_target_objects)
		return 0;
	rc = ds_preflight_needs(it->obj, need, &m);
	if (rc < 0)
		return rc;
	if (!m.n) {
		struct ext_note x = {.a = a, .note = note, .size = note_size};
		return workload ? ds_preflight_extended(it->obj, ext_note, &x) : 0;
	}
	if (workload) {
		decide(it, DS_APPLY_WAITING,
		       "waits for %s (neither applied by drasync nor on the "
		       "target)",
		       m.text);
		it->out.next_try_at = now_ms() + a->cfg.wait_retry_ms;
	} else {
		/* The list of what is missing is cut to fit the note. */
		int room = note_size > 48 ? (int)(note_size - 48) : 0;
		snprintf(note, note_size, "needs %.*s, which the target does not have", room,
			 m.text);
	}
	return 0;
}

/* ---- applying ----------------------------------------------------------------- */

/* Whether the API server refused the change because fields cannot change in place. */
static bool immutable(int rc, const ds_kube_error *ke)
{
	if (rc != -EINVAL || ke->code != 422)
		return false;
	return strstr(ke->message, "immutable") || strstr(ke->causes, "immutable") ||
	       strstr(ke->message, "may not change fields") ||
	       strstr(ke->message, "updates to") /* "updates to statefulset spec ... are
						     forbidden" */
	    ;
}

/*
 * The object's namespace is not on the target (yet): its Namespace may be
 * further down the stream, past this pass, or made by someone else. The
 * object waits for it like a workload waits for its claims, and is looked at
 * again when something is applied.
 */
static bool namespace_missing(const ds_kube_error *ke)
{
	return ke->code == 404 && strcmp(ke->details_kind, "namespaces") == 0 &&
	       ke->details_name[0];
}

static void decide_wait_namespace(ds_applier *a, struct item *it, const char *ns)
{
	decide(it, DS_APPLY_WAITING, "waits for Namespace %s (not on the target yet)", ns);
	it->out.next_try_at = now_ms() + a->cfg.wait_retry_ms;
}

/*
 * A 404 for the resource type itself: discovery said it is served, the server
 * does not serve it (a CRD or a version removed). A missing namespace or
 * object names itself in the Status details; this does not.
 */
static bool type_not_served(int rc, const ds_kube_error *ke)
{
	return rc == -ENOENT && ke->code == 404 && !ke->details_name[0];
}

/* Read discovery again and try once more, at once; fail when it was read again already. */
static void not_served(ds_applier *a, struct item *it, const ds_kube_error *ke)
{
	char buf[600];

	ds_kube_error_format(ke, buf, sizeof(buf));
	if (ds_kube_discovery_refresh(a->cfg.kube, NULL) == 1 ||
	    ds_kube_discovery_generation(a->cfg.kube) != a->pass_gen) {
		follow_discovery(a);
		decide(it, DS_APPLY_PENDING, "apply: %s; discovery read again, trying once more",
		       buf);
		it->out.attempts = it->row->attempts + 1;
		return;
	}
	decide(it, DS_APPLY_FAILED, "the target does not serve %s %s: %s",
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
	decide(it, DS_APPLY_FAILED,
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

static void recreate(ds_applier *a, struct item *it, const ds_kube_error *why)
{
	struct ds_kube_delete_opts dopts = {.propagation = "Background", .grace_seconds = -1};
	const char *ns = ds_obj_namespace(it->obj), *name = ds_obj_name(it->obj);
	char buf[600];
	ds_kube_error ke;
	json_t *got = NULL;
	int rc, waited = 0;

	ds_kube_error_clear(&ke);
	count(a, &a->stats.api_writes, 1);
	rc = ds_kube_delete(a->cfg.kube, &it->res, ns, name, &dopts, &ke);
	if (rc < 0 && rc != -ENOENT) {
		decide_kube_failure(a, it, "re-create: delete", rc, &ke);
		return;
	}
	for (;;) {
		ds_kube_error_clear(&ke);
		count(a, &a->stats.api_reads, 1);
		rc = ds_kube_get(a->cfg.kube, &it->res, ns, name, NULL, &got, &ke);
		json_decref(got);
		got = NULL;
		if (rc == -ENOENT)
			break;
		if (waited >= a->cfg.delete_wait_ms) {
			decide_retry(a, it, NULL);
			snprintf(it->reason, sizeof(it->reason),
				 "re-create: the old object is still there after %d ms", waited);
			return;
		}
		msleep(200);
		waited += 200;
	}
	ds_kube_error_clear(&ke);
	count(a, &a->stats.api_writes, 1);
	rc = ds_kube_apply(a->cfg.kube, &it->res, ns, it->obj, a->cfg.field_manager, true, NULL,
			   &got, &ke);
	if (rc < 0) {
		json_decref(got);
		decide_kube_failure(a, it, "re-create: apply", rc, &ke);
		return;
	}
	count(a, &a->stats.recreated, 1);
	if (!dropped(a, it, got))
		decide(it, DS_APPLY_APPLIED, "deleted and re-created: %s",
		       ds_kube_error_format(why, buf, sizeof(buf)));
	json_decref(got);
}

static void decide_applied(struct item *it, const char *note)
{
	decide(it, DS_APPLY_APPLIED, "%s", note ? note : "");
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
 * its manager stops sending); one that was there before is left unmarked.
 * @return 0, -ENOMEM
 */
static int mark_created_namespace(ds_applier *a, struct item *it)
{
	struct ds_kube_resource res;
	ds_kube_error ke;
	json_t *got = NULL;
	bool ours;
	int rc;

	if (strcmp(ds_obj_kind(it->obj), "Namespace") != 0)
		return 0;
	ds_kube_error_clear(&ke);
	if (ds_kube_resource_find(a->cfg.kube, "v1", "Namespace", &res, &ke) < 0)
		return 0;
	count(a, &a->stats.api_reads, 1);
	rc = ds_kube_get(a->cfg.kube, &res, NULL, ds_obj_name(it->obj), NULL, &got, &ke);
	ours = rc == -ENOENT || (rc == 0 && ds_obj_annotation(got, DS_ANNOTATION_CREATED));
	json_decref(got);
	if (!ours)
		return 0;
	return ds_obj_set_annotation(it->obj, DS_ANNOTATION_CREATED, "true") < 0 ? -ENOMEM : 0;
}

/* Whether the server-side apply was refused because other managers own fields we set. */
static bool apply_conflict(int rc, const ds_kube_error *ke)
{
	return rc == -ESTALE && ke->code == 409;
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
		s->rc = record_all(s->a, s->done, s->n_done, s->rep, s->err);
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
		obj_key(ds_obj_kind(it->obj), ds_obj_namespace(it->obj), ds_obj_name(it->obj), key,
			sizeof(key));
		/* Preflight of what follows needs no read for it, nor the ledger. */
		if (json_object_set_new(s->a->present, key, json_true()) < 0 ||
		    (is_claim_or_template(ds_obj_kind(it->obj)) &&
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

	obj_key(kind, ns, name, key, sizeof(key));
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

	rc = prepare(s->a, it, s->rep);
	if (rc < 0)
		return rc;
	s->next_prep++;
	if (it->decided) {
		finish(s, it);
		return 0;
	}
	obj_key(ds_obj_kind(it->obj), ds_obj_namespace(it->obj), ds_obj_name(it->obj), key,
		sizeof(key));
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

/* The applied-hash annotations of drasync's objects of res in ns on the target ({} when the list
 * fails: they are written as before). */
static json_t *live_hashes(ds_applier *a, const struct ds_kube_resource *res, const char *ns)
{
	struct ds_kube_list_opts lo = {.label_selector = DS_LABEL_MANAGED_BY "=drasync",
				       .limit = 500};
	json_t *list = NULL, *out = json_object(), *item;
	ds_kube_error ke;
	size_t i;

	if (!out || ds_kube_list(a->cfg.kube, res, ns, &lo, &list, NULL, &ke) < 0)
		return out;
	json_array_foreach (json_object_get(list, "items"), i, item) {
		json_t *md = json_object_get(item, "metadata");
		const char *name = json_string_value(json_object_get(md, "name"));
		json_t *h =
		    json_object_get(json_object_get(md, "annotations"), DS_ANNOTATION_APPLIED_HASH);

		if (name && json_is_string(h))
			json_object_set(out, name, h);
	}
	json_decref(list);
	return out;
}

/*
 * Whether the item, of a row that was there when the applier started, is on
 * the target already as it would write it: a run killed after the write and
 * before it recorded the outcome wrote it. Then it is not written again.
 */
static bool already_there(ds_applier *a, struct item *it)
{
	char key[800], hex[2 * DS_HASH_LEN + 1];
	const char *ns = ds_obj_namespace(it->obj);
	json_t *names, *got;

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
		names = live_hashes(a, &it->res, ns);
		if (!names || json_object_set_new(a->live, key, names) < 0)
			return false;
	}
	got = json_object_get(names, ds_obj_name(it->obj));
	hash_hex(it->hash, hex);
	return json_is_string(got) && strcmp(json_string_value(got), hex) == 0;
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
		count(a, &a->stats.api_writes, 1);
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
		rc = preflight(a, it, it->note, sizeof(it->note));

		if (rc == 0 && !it->decided)
			rc = mark_created_namespace(a, it);
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
		s->in_flight++;
		count(a, &a->stats.api_writes, 1);
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
		decide(it, DS_APPLY_APPLIED, "%s%s%s", it->took, it->note[0] ? "; " : "", it->note);
		it->takeover = true;
	} else if (op->rc == 0) {
		decide_applied(it, it->note[0] ? it->note : NULL);
	} else if (!it->forced && apply_conflict(op->rc, &op->error)) {
		/* Without force first: a field another manager owns is a conflict
		 * we report, then take over (the source is the truth). */
		takeover_text(&op->error, it->took, sizeof(it->took));
		s->again[s->n_again++] = it;
		return;
	} else if (namespace_missing(&op->error)) {
		decide_wait_namespace(a, it, op->error.details_name);
	} else if (immutable(op->rc, &op->error) || type_not_served(op->rc, &op->error)) {
		s->later[s->n_later++] = it;
		return;
	} else {
		decide_kube_failure(a, it, "apply", op->rc, &op->error);
	}
	finish(s, it);
}

/*
 * Prepare and apply the pass's upserts (in the SPEC order).
 * @return 0, or a negative errno (ledger, memory)
 */
static int apply_upserts(ds_applier *a, struct item **v, size_t n, const ds_report *rep,
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
		if (immutable(it->op.rc, &it->op.error))
			recreate(a, it, &it->op.error);
		else
			not_served(a, it, &it->op.error);
		finish(&s, it);
	}
	/* What could not be sent (the stream could not run, or the ledger failed):
	 * sent ones try again; the others stay due in the ledger as they are. */
	for (size_t i = 0; i < n; i++)
		if (v[i]->sent && !v[i]->decided) {
			decide_retry(a, v[i], NULL);
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

/* ---- tombstones --------------------------------------------------------------- */

/*
 * SPEC §5/§6: delete kind ns/name (as r's row names it) only when drasync
 * created it for this very source object: label managed-by=drasync, the
 * source uid of r's record, and for a Namespace the mark of one drasync made.
 */
static void guarded_delete(ds_applier *a, const ds_object_state_row *r, const char *api,
			   const char *ns, const char *name, struct gone *g)
{
	struct ds_kube_resource res;
	const char *dra = need_api(a, r->kind ? r->kind : "");
	const char *managed, *uid_ann;
	json_t *obj = NULL, *labels;
	int rc;

	memset(g, 0, sizeof(*g));
	if (dra && r->api_version && strncmp(r->api_version, "resource.k8s.io/", 16) == 0)
		api = dra;
	ds_kube_error_clear(&g->ke);
	rc = ds_kube_resource_find(a->cfg.kube, api, r->kind, &res, &g->ke);
	if (rc == -ENOENT) {
		g->state = DS_APPLY_DELETED;
		snprintf(g->reason, sizeof(g->reason), "not on the target (%s %s is not served)",
			 api, r->kind);
		return;
	}
	if (rc < 0) {
		g->what = "discovery";
		g->rc = rc;
		return;
	}
	count(a, &a->stats.api_reads, 1);
	rc = ds_kube_get(a->cfg.kube, &res, ns, name, NULL, &obj, &g->ke);
	if (rc == -ENOENT) {
		g->state = DS_APPLY_DELETED;
		snprintf(g->reason, sizeof(g->reason), "already gone from the target");
		return;
	}
	if (rc < 0) {
		g->what = "get";
		g->rc = rc;
		return;
	}
	labels = ds_json_path(obj, "metadata.labels");
	managed = labels ? ds_json_str(labels, DS_LABEL_MANAGED_BY) : NULL;
	uid_ann = ds_obj_annotation(obj, DS_ANNOTATION_SOURCE_UID);
	if (!managed || strcmp(managed, "drasync") != 0) {
		g->state = DS_APPLY_KEPT;
		snprintf(g->reason, sizeof(g->reason),
			 "not deleted: %s %s%s%s was not created by drasync (no label %s=drasync)",
			 r->kind, ns ? ns : "", ns ? "/" : "", name, DS_LABEL_MANAGED_BY);
	} else if (strcmp(r->kind, "Namespace") == 0 &&
		   !ds_obj_annotation(obj, DS_ANNOTATION_CREATED)) {
		g->state = DS_APPLY_KEPT;
		snprintf(g->reason, sizeof(g->reason),
			 "not deleted: Namespace %s was on the target before drasync applied it "
			 "(no annotation %s)",
			 name, DS_ANNOTATION_CREATED);
	} else if (!r->source_uid || !uid_ann || strcmp(uid_ann, r->source_uid) != 0) {
		g->state = DS_APPLY_KEPT;
		snprintf(g->reason, sizeof(g->reason),
			 "not deleted: %s %s%s%s has %s=%s, the tombstone is for source uid %s",
			 r->kind, ns ? ns : "", ns ? "/" : "", name, DS_ANNOTATION_SOURCE_UID,
			 uid_ann ? uid_ann : "(none)", r->source_uid ? r->source_uid : "(none)");
	} else {
		struct ds_kube_delete_opts dopts = {
		    .propagation = "Background",
		    .uid = ds_json_str(ds_json_path(obj, "metadata"), "uid"),
		    .grace_seconds = -1};
		ds_kube_error_clear(&g->ke);
		count(a, &a->stats.api_writes, 1);
		rc = ds_kube_delete(a->cfg.kube, &res, ns, name, &dopts, &g->ke);
		if (rc == 0 || rc == -ENOENT) {
			g->state = DS_APPLY_DELETED;
		} else {
			g->what = "delete";
			g->rc = rc;
		}
	}
	json_decref(obj);
}

/*
 * A tombstone: the target identity is where the object was applied, else the
 * mapping of the source's.
 */
static void tombstone(ds_applier *a, struct item *it)
{
	ds_object_state_row *r = it->row;
	const char *api = r->target_api_version ? r->target_api_version : r->api_version;
	const char *ns = r->target_ns ? r->target_ns
			 : r->ns      ? ds_target_config_map_namespace(a->cfg.cfg, r->ns)
				      : NULL;
	const char *name = r->target_name ? r->target_name : r->name;
	struct gone g;

	guarded_delete(a, r, api, ns, name, &g);
	/* A prune says so (SPEC §6): the source sent no tombstone for it. */
	if (g.state == DS_APPLY_DELETED && !g.reason[0] && r->reason &&
	    strncmp(r->reason, "pruned: ", 8) == 0)
		decide(it, g.state, "%s", r->reason);
	else if (g.state)
		decide(it, g.state, "%s", g.reason);
	else
		decide_kube_failure(a, it, g.what, g.rc, &g.ke);
}

/* ---- the pass ----------------------------------------------------------------- */

static int cmp_rank(const void *x, const void *y)
{
	const struct item *const *p = x, *const *q = y;

	if ((*p)->rank != (*q)->rank)
		return (*p)->rank < (*q)->rank ? -1 : 1;
	return ((*p)->row->id > (*q)->row->id) - ((*p)->row->id < (*q)->row->id);
}

int ds_applier_pass(ds_applier *a, ds_err *err)
{
	ds_object_state_row *rows = NULL;
	struct item *items = NULL, **up = NULL, **del = NULL;
	size_t n = 0, n_up = 0, n_del = 0;
	ds_report *rep = NULL;
	const ds_target_config *reload;
	bool applied_any = false;
	int rc;

	pthread_mutex_lock(&a->mu);
	a->stats.passes++;
	reload = a->next_cfg;
	a->next_cfg = NULL;
	pthread_mutex_unlock(&a->mu);
	if (reload) {
		/* New rules may map what is on the target otherwise: every object is
		 * looked at again; those whose result hashes the same cost no call. */
		a->cfg.cfg = reload;
		rc = ds_object_state_reconsider(a->st, err);
		if (rc < 0)
			goto out;
	}
	a->pass_gen = ds_kube_discovery_generation(a->cfg.kube);
	rc = ds_object_state_ingest(a->st, err);
	if (rc < 0)
		goto out;
	/* New records (here or while it settled) may be what a waiting workload needs. */
	if ((rc > 0 || a->ingested) && (rc = ds_object_state_wake_waiting(a->st, err)) < 0)
		goto out;
	a->ingested = false;
	a->verify_seen = false;
	json_decref(a->live);
	a->live = NULL;
	clock_gettime(CLOCK_MONOTONIC, &a->picked);
	rc = ds_object_state_pick_in(a->st, now_ms(), a->cfg.pass_max,
				     a->cfg.n_namespaces ? &a->scope : NULL, &rows, &n, err);
	if (rc < 0 || n == 0)
		goto out;
	atomic_store(&a->applying, true);
	json_decref(a->present);
	json_decref(a->objs);
	json_decref(a->groups);
	json_decref(a->classes);
	json_decref(a->members);
	a->objs = json_object();
	a->groups = json_object();
	a->members = json_object();
	a->classes = NULL;
	items = calloc(n, sizeof(*items));
	up = calloc(n, sizeof(*up));
	del = calloc(n, sizeof(*del));
	a->present = json_object();
	if (!items || !up || !del || !a->present || !a->objs || !a->groups || !a->members ||
	    ds_report_new(&rep) < 0) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		struct item *it = &items[i];
		it->row = &rows[i];
		it->rank = ds_selection_kind_rank(it->row->kind);
		if (it->row->op == DS_RECORD_DELETE)
			del[n_del++] = it;
		else
			up[n_up++] = it;
	}
	/* SPEC §5 order: lower ranks start first, and what a later one needs is
	 * applied before it is looked at. */
	qsort(up, n_up, sizeof(*up), cmp_rank);
	rc = apply_upserts(a, up, n_up, rep, &applied_any, err);
	if (rc < 0)
		goto out;
	/* Tombstones in the reverse order: workloads before what they use. */
	qsort(del, n_del, sizeof(*del), cmp_rank);
	for (size_t i = n_del; i-- > 0;)
		tombstone(a, del[i]);
	for (size_t i = 0; i < n_del / 2; i++) {
		struct item *t = del[i];
		del[i] = del[n_del - 1 - i];
		del[n_del - 1 - i] = t;
	}
	rc = record_all(a, del, n_del, rep, err);
	if (rc < 0)
		goto out;
	if (applied_any && (rc = ds_object_state_wake_waiting(a->st, err)) < 0)
		goto out;
	rc = (int)n;
out:
	/* Every row that was there at the start has been looked at once (a
	 * full pass may have left some for the next). */
	if (rc >= 0 && !a->verify_seen && n < (size_t)a->cfg.pass_max)
		a->verify_upto = 0;
	json_decref(a->live);
	a->live = NULL;
	atomic_store(&a->applying, false);
	for (size_t i = 0; items && i < n; i++)
		json_decref(items[i].obj);
	free(items);
	free(up);
	free(del);
	ds_report_free(rep);
	ds_object_state_rows_free(rows, n);
	return ds_err_fallback(err, rc);
}

/*
 * Records arriving in a burst: wait until none has been committed for
 * SETTLE_QUIET_MS (at most SETTLE_MAX_MS after the first), so the pass sees
 * the burst's last state and writes each object once, not once per batch.
 * A stream of changes to distinct objects (watch mode: one change every
 * 50 ms, never 100 ms quiet) has nothing to coalesce: settle returns at the
 * first look that finds every record since the last one made another object
 * due, instead of holding each change up to SETTLE_MAX_MS.
 */
#define SETTLE_QUIET_MS 100
#define SETTLE_MAX_MS 1000
#define SETTLE_LOOK_MS 50 /* how often it looks whether a full pass is due */

static void settle(ds_applier *a)
{
	int64_t start = now_ms();

	int64_t looked = start;
	int due_prev = ds_object_state_count_due(a->st, now_ms(), NULL);

	for (;;) {
		bool more;

		pthread_mutex_lock(&a->mu);
		more = a->notified && !a->stopping && now_ms() - start < SETTLE_MAX_MS;
		if (more) {
			struct timespec until;
			a->notified = false;
			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_nsec += SETTLE_QUIET_MS * 1000000L;
			if (until.tv_nsec >= 1000000000L) {
				until.tv_sec++;
				until.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&a->cond, &a->mu, &until);
		}
		pthread_mutex_unlock(&a->mu);
		if (!more)
			return;
		/* A bulk load, not a burst: a full pass of distinct objects is due
		 * already, and waiting would only idle the API server. */
		if (now_ms() - looked >= SETTLE_LOOK_MS) {
			int n = ds_object_state_ingest(a->st, NULL);

			looked = now_ms();
			if (n > 0)
				a->ingested = true;
			if (n >= 0) {
				int due = ds_object_state_count_due(a->st, now_ms(), NULL);
				if (due >= (int)a->cfg.pass_max)
					return;
				/* Every record since the last look made another object due:
				 * no object changed twice, nothing to coalesce by waiting. */
				if (n > 0 && due_prev >= 0 && due - due_prev >= n)
					return;
				due_prev = due;
			}
		}
	}
}

/*
 * The ledger's filesystem is full: the pass was rolled back. Say so and wait
 * (until stopped) before the next pass tries again; freeing space is the
 * operator's, and nothing is lost meanwhile: the records are in the ledger.
 */
static void ledger_full_wait(ds_applier *a, const ds_err *err)
{
	int ms = a->cfg.ledger_full_retry_ms > 0 ? a->cfg.ledger_full_retry_ms : 5000;
	struct timespec until;

	count(a, &a->stats.ledger_full, 1);
	if (a->cfg.on_ledger_full)
		a->cfg.on_ledger_full(a->cfg.event_ud, err->msg, ms);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&a->mu);
	if (!a->stopping)
		pthread_cond_timedwait(&a->cond, &a->mu, &until);
	pthread_mutex_unlock(&a->mu);
}

int ds_applier_run(ds_applier *a, ds_err *err)
{
	for (;;) {
		bool stop;
		int rc;

		pthread_mutex_lock(&a->mu);
		a->notified = false;
		stop = a->stopping;
		pthread_mutex_unlock(&a->mu);
		if (stop)
			return 0;
		rc = ds_applier_pass(a, err);
		if (rc == -ENOSPC) {
			ledger_full_wait(a, err);
			continue;
		}
		if (rc < 0 && rc != -EBUSY)
			return rc;
		if ((size_t)rc >= a->cfg.pass_max)
			continue; /* a full pass: more is due at once, no burst to wait for */
		if (rc > 0) {
			/* What arrived during a small pass may be the rest of a burst. */
			settle(a);
			continue;
		}
		pthread_mutex_lock(&a->mu);
		if (!a->notified && !a->stopping) {
			struct timespec until;
			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_sec += 1;
			pthread_cond_timedwait(&a->cond, &a->mu, &until);
		}
		pthread_mutex_unlock(&a->mu);
		settle(a);
	}
}
