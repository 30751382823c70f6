#include "applier_internal.h"

#include "drasync/buf.h"
#include "drasync/clock.h"
#include "drasync/dra_convert.h"
#include "drasync/dra_mapping.h"
#include "drasync/field_loss.h"
#include "drasync/k8s_object.h"
#include "drasync/kinds.h"
#include "drasync/ledger_objects.h"
#include "drasync/log.h"
#include "drasync/schemas.h"
#include "drasync/namespace_mode.h"
#include "drasync/preflight.h"
#include "drasync/report.h"
#include "drasync/sched_convert.h"
#include "drasync/transform.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void ds_applier_count(ds_applier *a, uint64_t *field, uint64_t n)
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
bool ds_applier_follow_discovery(ds_applier *a)
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

bool ds_applier_discovered(const ds_applier *a)
{
	return a->dra_gen != DRA_UNKNOWN;
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
		a->cfg.pass_max = DS_APPLIER_PASS_MAX;
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
	ds_cond_init_monotonic(&a->cond);
	rc = ds_object_state_open(&a->st, cfg->ledger_path, err);
	if (rc == 0)
		rc = ds_namespace_modes_open(&a->nm, cfg->ledger_path, err);
	if (rc < 0) {
		ds_applier_free(a);
		return ds_err_fallback(err, rc);
	}
	a->scope = (ds_object_state_scope){.ns = cfg->namespaces,
					   .n = cfg->n_namespaces,
					   .map_ns = scope_map_ns,
					   .map_ud = a,
					   .held_at = cfg->held_at};
	ds_kube_discovery_set_refresh_interval(cfg->kube, a->cfg.discovery_refresh_ms);
	rc = ds_object_state_last_record_id(a->st, &a->verify_upto, err);
	if (rc < 0) {
		ds_applier_free(a);
		return ds_err_fallback(err, rc);
	}
	if (cfg->no_restart_check)
		a->verify_upto = 0;
	/* What the target serves is read at the first pass, not here: the link opens
	 * (and commits) while the target's API server does not answer yet. */
	a->dra = DS_DRA_V1;
	a->sched = DS_SCHED_AS_IS;
	a->dra_gen = DRA_UNKNOWN;
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
	json_decref(a->regroup);
	json_decref(a->prepared);
	json_decref(a->group_seen);
	json_decref(a->live);
	json_decref(a->exists);
	ds_ledger_compactor_free(a->compactor);
	ds_store_free(a->compact_store);
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

/* ---- the pass ----------------------------------------------------------------- */

static int cmp_rank(const void *x, const void *y)
{
	const struct item *const *p = x, *const *q = y;

	if ((*p)->rank != (*q)->rank)
		return (*p)->rank < (*q)->rank ? -1 : 1;
	return ((*p)->row->id > (*q)->row->id) - ((*p)->row->id < (*q)->row->id);
}

/*
 * Where a pass's time went (debug): ingest and pick; preparing and sending
 * (to its last write); the drain (its last writes answered); the outcomes,
 * tombstones and regrouping after the stream. Between two passes of a bulk
 * load the API server sees fewer writes in flight: drain and pick say how long.
 */
static void pass_timing(const ds_applier *a, size_t n, size_t n_up, size_t n_del, double t_start,
			double t_upserts)
{
	double now = ds_clock_mono_s(), sent = a->last_sent > 0 ? a->last_sent : a->picked;
	sqlite3_int64 sql_now = 0, sql_hi = 0;

	if (t_upserts <= 0)
		t_upserts = now;
	/* SQLite's memory in the process (its page caches, under DS_STORE_HEAP_LIMIT) */
	sqlite3_status64(SQLITE_STATUS_MEMORY_USED, &sql_now, &sql_hi, 0);
	ds_log(DS_LOG_DEBUG, "apply_pass",
	       "objects=%zu upserts=%zu deletes=%zu pick_ms=%.0f send_ms=%.0f drain_ms=%.0f "
	       "after_ms=%.0f ms=%.0f sqlite_kb=%lld sqlite_peak_kb=%lld",
	       n, n_up, n_del, (a->picked - t_start) * 1000.0, (sent - a->picked) * 1000.0,
	       (t_upserts - sent) * 1000.0, (now - t_upserts) * 1000.0, (now - t_start) * 1000.0,
	       (long long)(sql_now / 1024), (long long)(sql_hi / 1024));
}

int ds_applier_pass(ds_applier *a, ds_err *err)
{
	ds_object_state_row *rows = NULL;
	struct item *items = NULL, **up = NULL, **del = NULL;
	size_t n = 0, n_up = 0, n_del = 0;
	ds_report *rep = NULL;
	const ds_target_config *reload;
	bool applied_any = false;
	double t_start = ds_clock_mono_s(), t_upserts = 0;
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
	/* The versions to convert to: read at the first pass, again when discovery changed. */
	ds_applier_follow_discovery(a);
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
	json_decref(a->exists);
	a->exists = NULL;
	a->picked = ds_clock_mono_s();
	rc = ds_object_state_pick_in(a->st, ds_clock_wall_ms(), a->cfg.pass_max,
				     a->cfg.n_namespaces ? &a->scope : NULL, &rows, &n, err);
	if (rc < 0 || n == 0)
		goto out;
	atomic_store(&a->applying, true);
	a->last_sent = 0;
	json_decref(a->present);
	json_decref(a->objs);
	json_decref(a->groups);
	json_decref(a->classes);
	json_decref(a->members);
	json_decref(a->regroup);
	json_decref(a->prepared);
	a->objs = json_object();
	a->groups = json_object();
	a->members = json_object();
	a->regroup = json_object();
	a->prepared = json_object();
	a->classes = NULL;
	items = calloc(n, sizeof(*items));
	up = calloc(n, sizeof(*up));
	del = calloc(n, sizeof(*del));
	a->present = json_object();
	if (!items || !up || !del || !a->present || !a->objs || !a->groups || !a->members ||
	    !a->regroup || !a->prepared || ds_report_new(&rep) < 0) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		struct item *it = &items[i];
		it->row = &rows[i];
		it->rank = ds_kind_rank(it->row->kind);
		if (it->row->op == DS_RECORD_DELETE)
			del[n_del++] = it;
		else
			up[n_up++] = it;
	}
	/* SPEC §5 order: lower ranks start first, and what a later one needs is
	 * applied before it is looked at. */
	qsort(up, n_up, sizeof(*up), cmp_rank);
	rc = ds_applier_apply_upserts(a, up, n_up, rep, &applied_any, err);
	t_upserts = ds_clock_mono_s();
	if (rc < 0)
		goto out;
	/* Tombstones in the reverse order: workloads before what they use. */
	qsort(del, n_del, sizeof(*del), cmp_rank);
	for (size_t i = n_del; i-- > 0;)
		ds_applier_tombstone(a, del[i]);
	for (size_t i = 0; i < n_del / 2; i++) {
		struct item *t = del[i];
		del[i] = del[n_del - 1 - i];
		del[n_del - 1 - i] = t;
	}
	rc = ds_applier_record_all(a, del, n_del, rep, err);
	if (rc < 0)
		goto out;
	/* A member that changed may change what its group's claims follow. */
	if ((rc = ds_applier_regroup(a, err)) < 0)
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
	if (n)
		pass_timing(a, n, n_up, n_del, t_start, t_upserts);
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
	int64_t start = ds_clock_mono_ms();

	int64_t looked = start;
	int due_prev = ds_object_state_count_due(a->st, ds_clock_wall_ms(), NULL);

	for (;;) {
		bool more;

		pthread_mutex_lock(&a->mu);
		more = a->notified && !a->stopping && ds_clock_mono_ms() - start < SETTLE_MAX_MS;
		if (more) {
			a->notified = false;
			ds_cond_wait_until(&a->cond, &a->mu, ds_deadline_in(SETTLE_QUIET_MS));
		}
		pthread_mutex_unlock(&a->mu);
		if (!more)
			return;
		/* A bulk load, not a burst: a full pass of distinct objects is due
		 * already, and waiting would only idle the API server. */
		if (ds_clock_mono_ms() - looked >= SETTLE_LOOK_MS) {
			int n = ds_object_state_ingest(a->st, NULL);

			looked = ds_clock_mono_ms();
			if (n > 0)
				a->ingested = true;
			if (n >= 0) {
				int due =
				    ds_object_state_count_due(a->st, ds_clock_wall_ms(), NULL);
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
	int64_t until;

	ds_applier_count(a, &a->stats.ledger_full, 1);
	if (a->cfg.on_ledger_full)
		a->cfg.on_ledger_full(a->cfg.event_ud, err->msg, ms);
	until = ds_deadline_in(ms);
	pthread_mutex_lock(&a->mu);
	if (!a->stopping)
		ds_cond_wait_until(&a->cond, &a->mu, until);
	pthread_mutex_unlock(&a->mu);
}

/*
 * Compaction between passes, never inside one: every COMPACT_EVERY_MS, or
 * sooner again while a backlog is left (a burst of history), each run at
 * most about COMPACT_BUDGET_MS of the applier's time in transactions of a few
 * hundred rows, so the receiver committing meanwhile waits a few ms at most.
 */
#define COMPACT_EVERY_MS 5000
#define COMPACT_AGAIN_MS 200
#define COMPACT_BUDGET_MS 100
#define COMPACT_SAY_MS 60000 /* at most one on_compacted a minute */

static void compact_due(ds_applier *a)
{
	int64_t now = ds_clock_mono_ms();
	ds_ledger_compact_stats s = {0};
	ds_ledger_compact_stats *u = &a->unlogged;
	ds_err err = {0};
	bool say;
	int rc = 0;

	if (now < a->compact_at)
		return;
	if (!a->compactor) {
		rc = ds_ledger_open(&a->compact_store, a->cfg.ledger_path, 0, &err);
		if (rc == 0)
			rc = ds_ledger_compactor_new(a->compact_store, &a->compactor, &err);
		if (rc < 0) {
			ds_store_free(a->compact_store);
			a->compact_store = NULL;
		}
	}
	if (rc == 0)
		rc = ds_ledger_compact(a->compactor, COMPACT_BUDGET_MS, &s, &err);
	a->compact_at = ds_clock_mono_ms() + (rc == 1 ? COMPACT_AGAIN_MS : COMPACT_EVERY_MS);
	pthread_mutex_lock(&a->mu);
	a->stats.compacted_records += s.records;
	a->stats.compacted_manifests += s.manifests;
	a->stats.compacted_bytes += s.bytes_freed;
	pthread_mutex_unlock(&a->mu);
	u->records += s.records;
	u->manifests += s.manifests;
	u->bytes_freed += s.bytes_freed;
	u->ms += s.ms;
	say = !a->compact_said || now - a->compact_said >= COMPACT_SAY_MS;
	if (!say || !a->cfg.on_compacted)
		return;
	if (rc < 0) {
		a->cfg.on_compacted(a->cfg.event_ud, NULL, err.msg);
		a->compact_said = now;
	} else if (u->records || u->manifests || u->bytes_freed) {
		a->cfg.on_compacted(a->cfg.event_ud, u, NULL);
		memset(u, 0, sizeof(*u));
		a->compact_said = now;
	}
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
		compact_due(a);
		/* A pass's objects and calls were freed in the middle of the heaps
		 * of several threads: give their pages back, so the agent's memory
		 * is its working set, not the sum of every pass's holes. */
		if (rc > 0)
			malloc_trim(0);
		if ((size_t)rc >= a->cfg.pass_max)
			continue; /* a full pass: more is due at once, no burst to wait for */
		if (rc > 0) {
			/* What arrived during a small pass may be the rest of a burst. */
			settle(a);
			continue;
		}
		pthread_mutex_lock(&a->mu);
		if (!a->notified && !a->stopping) {
			ds_cond_wait_until(&a->cond, &a->mu, ds_deadline_in(1000));
		}
		pthread_mutex_unlock(&a->mu);
		settle(a);
	}
}
