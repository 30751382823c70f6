#include "exporter_internal.h"

#include "drasync/buf.h"
#include "drasync/clock.h"
#include "drasync/change_queue.h"
#include "drasync/k8s_object.h"
#include "drasync/log.h"
#include "drasync/object_index.h"
#include "drasync/outbox.h"
#include "drasync/sanitize.h"
#include "drasync/selection.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static void msleep(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* ---- discovery ------------------------------------------------------------ */

static int find_kind(ds_exporter *ex, struct kind *k, const char *version, ds_kube_error *ke)
{
	if (k->def->group[0])
		snprintf(k->api_version, sizeof(k->api_version), "%s/%s", k->def->group, version);
	else
		snprintf(k->api_version, sizeof(k->api_version), "%s", version);
	return ds_kube_resource_find(ex->cfg.kube, k->api_version, k->def->name, &k->res, ke);
}

static int discover(ds_exporter *ex, ds_err *err)
{
	char e[600];
	int rc = 0;

	if (ex->discovered)
		return 0;
	for (size_t i = 0; i < DS_KIND_MAX; i++) {
		struct kind *k = &ex->kinds[i];
		ds_kube_error ke = {0};
		json_t *served = NULL;
		size_t v;

		k->served = false;
		if (k->def->id == DS_KIND_DEVICE_CLASS && !ex->cfg.replicate_device_classes) {
			ds_exporter_emit(
			    ex, DS_LOG_INFO, "kind_not_replicated",
			    "kind=DeviceClass reason=\"replicateDeviceClasses is off\"");
			continue;
		}
		if (!k->def->versions[1]) {
			rc = find_kind(ex, k, k->def->versions[0], &ke);
		} else {
			/* several versions (resource.k8s.io, scheduling.k8s.io): the first
			 * of the table's, preferred first, that the server serves */
			rc = ds_kube_group_versions(ex->cfg.kube, k->def->group, NULL, 0, &served,
						    &ke);
			if (rc == 0) {
				rc = -ENOENT;
				for (v = 0; rc == -ENOENT && k->def->versions[v]; v++) {
					const char *ver = k->def->versions[v];

					for (size_t s = 0; s < json_array_size(served); s++)
						if (strcmp(json_string_value(
							       json_array_get(served, s)),
							   ver) == 0) {
							rc = find_kind(ex, k, ver, &ke);
							break;
						}
				}
			}
			json_decref(served);
		}
		if (rc == -ENOENT) {
			ds_exporter_emit(ex, DS_LOG_INFO, "kind_not_served", "kind=%s group=%s",
					 k->def->name, k->def->group[0] ? k->def->group : "core");
			rc = 0;
			continue;
		}
		if (rc < 0) {
			ds_err_set(err, "discovery of %s: %s", k->def->name,
				   ds_kube_error_format(&ke, e, sizeof(e)));
			return rc;
		}
		k->served = true;
		ds_exporter_emit(ex, DS_LOG_DEBUG, "kind_served",
				 "kind=%s apiVersion=%s resource=%s", k->def->name, k->api_version,
				 k->res.resource);
	}
	ex->discovered = true;
	return 0;
}

/* ---- lists -------------------------------------------------------------------- */

static void progress(ds_exporter *ex, const struct kind *k)
{
	if (ex->cfg.on_progress)
		ex->cfg.on_progress(ex->cfg.progress_ud, k->def->name, &ex->counts);
}

/*
 * List one kind page by page (ns NULL: cluster-wide, filtered by the selected
 * namespaces) and process every object; the list's resourceVersion into rv.
 * Never more than a page in memory.
 */
static int list_kind(ds_exporter *ex, struct kind *k, const char *ns, char *rv, size_t rvsize,
		     ds_err *err)
{
	struct ds_kube_list_opts lo = {NULL, NULL, NULL, NULL, ex->cfg.page_size};
	char token[4096] = "", e[700];
	bool restarted = false;
	int rc = 0;

	if (rv)
		rv[0] = '\0';
	for (;;) {
		ds_kube_error ke = {0};
		json_t *page = NULL, *items, *item;
		const char *cont, *prv;
		size_t i;

		if (atomic_load(&ex->stop))
			return -ECANCELED;
		lo.continue_token = token[0] ? token : NULL;
		rc = ds_kube_list_page(ex->cfg.kube, &k->res, ns, &lo, &page, &ke);
		if (rc == -EIDRM && token[0] && !restarted) {
			/* the continue token expired midway: start over (the marks of
			 * what was seen stay; nothing is sent twice) */
			ds_exporter_emit(ex, DS_LOG_WARN, "list_restarted",
					 "kind=%s reason=\"continue expired\"", k->def->name);
			token[0] = '\0';
			restarted = true;
			continue;
		}
		if (rc < 0) {
			ds_err_set(err, "list %s: %s", k->def->name,
				   ds_kube_error_format(&ke, e, sizeof(e)));
			return rc;
		}
		prv = ds_json_str(json_object_get(page, "metadata"), "resourceVersion");
		if (rv && prv && !rv[0])
			snprintf(rv, rvsize, "%s", prv);
		items = json_object_get(page, "items");
		json_array_foreach (items, i, item) {
			/* a namespace not selected (a standby copy, relocated away): none of
			 * its objects, read one by one or cluster-wide */
			if (k->def->namespaced &&
			    !ds_exporter_ns_selected(ex, ns ? ns : ds_obj_namespace(item)))
				continue;
			ex->counts.listed++;
			if (ex->cfg.on_listed)
				ex->cfg.on_listed(ex->cfg.listed_ud, (int)k->def->id,
						  k->api_version, item);
			rc = ds_exporter_process_object(ex, k, item);
			if (rc == 0)
				rc = ds_exporter_maybe_flush(ex, err);
			if (rc < 0)
				break;
		}
		cont = ds_json_str(json_object_get(page, "metadata"), "continue");
		snprintf(token, sizeof(token), "%s", cont ? cont : "");
		json_decref(page);
		if (rc == 0)
			rc = ds_exporter_flush(ex, err);
		if (rc < 0)
			return rc;
		progress(ex, k);
		if (!token[0])
			return 0;
	}
}

struct sweep {
	ds_exporter *ex;
	size_t added;
	int rc;
};

static int sweep_row(void *ud, const ds_index_row *row)
{
	struct sweep *s = ud;

	s->rc = ds_exporter_add_tombstone(s->ex, row);
	if (s->rc < 0)
		return 1;
	/* a full batch is pushed before the next round of unseen rows is read */
	return ++s->added >= s->ex->cfg.batch_records ? 1 : 0;
}

/* Tombstones for what the index holds of a kind (in ns, or everywhere) and
 * the current generation did not see. */
static int sweep(ds_exporter *ex, const struct kind *k, const char *ns, ds_err *err)
{
	for (;;) {
		struct sweep s = {ex, 0, 0};
		int rc;

		rc = ds_exporter_flush(ex, err);
		if (rc < 0)
			return rc;
		rc = ds_object_index_unseen(ex->idx, k->def->name, ns, sweep_row, &s, err);
		if (rc < 0)
			return rc;
		if (s.rc < 0)
			return s.rc;
		if (s.added == 0)
			return 0;
		rc = ds_exporter_flush(ex, err);
		if (rc < 0)
			return rc;
	}
}

/* Deleted namespaces the index still holds objects of: tombstone them. */
static int sweep_gone_namespaces(ds_exporter *ex, ds_err *err);

/* ---- passes ----------------------------------------------------------------------- */

static int push_marker(ds_exporter *ex, enum ds_record_op op, const char *id, ds_err *err)
{
	size_t objects = 0, records = 1;
	ds_record *r;
	int rc;

	if (op == DS_RECORD_SNAPSHOT_END) {
		rc = ds_exporter_push_snapshot_end(ex, id, &objects, &records, err);
	} else {
		rc = ds_exporter_flush(ex, err);
		if (rc < 0)
			return rc;
		r = ds_exporter_add_record(&ex->b);
		if (!r)
			return -ENOMEM;
		r->op = op;
		r->snapshot_id = id;
		rc = ds_exporter_flush(ex, err);
	}
	if (rc == 0)
		ds_exporter_emit(ex, DS_LOG_INFO,
				 op == DS_RECORD_SNAPSHOT_BEGIN ? "snapshot_begin" : "snapshot_end",
				 "snapshot=%s objects=%zu records=%zu", id, objects, records);
	return rc;
}

static void save_pass(ds_exporter *ex, long long started, int rc)
{
	static const struct {
		const char *key;
		size_t off;
	} fields[] = {
	    {"last_pass_listed", offsetof(ds_export_counts, listed)},
	    {"last_pass_pushed", offsetof(ds_export_counts, pushed)},
	    {"last_pass_unchanged", offsetof(ds_export_counts, unchanged)},
	    {"last_pass_skipped", offsetof(ds_export_counts, skipped)},
	    {"last_pass_tombstoned", offsetof(ds_export_counts, tombstoned)},
	};
	ds_err err = {0};

	ds_object_index_meta_set(ex->idx, "last_pass_started_ms", started, &err);
	ds_object_index_meta_set(ex->idx, "last_pass_finished_ms", ds_clock_wall_ms(), &err);
	ds_object_index_meta_set(ex->idx, "last_pass_rc", rc, &err);
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		uint64_t v;
		memcpy(&v, (const char *)&ex->counts + fields[i].off, sizeof(v));
		ds_object_index_meta_set(ex->idx, fields[i].key, (int64_t)v, &err);
	}
}

/* A full pass; the kinds' list resourceVersions are kept for the watches. */
static int run_pass(ds_exporter *ex, ds_export_counts *out, ds_err *err)
{
	long long started = ds_clock_wall_ms();
	bool done = false, snapshot, wanted;
	int64_t open_seq = 0, open_gen = 0;
	char snap_id[64] = "";
	ds_err kerr = {0};
	int rc, first = 0;

	memset(&ex->counts, 0, sizeof(ex->counts));
	ex->local_failed = false;
	rc = discover(ex, err);
	if (rc < 0)
		goto out;
	if (!ex->kinds[DS_KIND_NAMESPACE].served) {
		ds_err_set(err, "the source serves no Namespaces");
		rc = -ENOENT;
		goto out;
	}
	rc = ds_object_index_snapshot_done(ex->idx, &done, err);
	if (rc < 0)
		goto out;
	wanted = atomic_exchange(&ex->snapshot_wanted, false);
	snapshot = wanted || !done;
	rc = ds_object_index_begin_pass(ex->idx, NULL, err);
	if (rc < 0)
		goto out;
	if (ds_object_index_meta_get(ex->idx, "snapshot_open", &open_seq, NULL) < 0)
		open_seq = 0;
	if (ds_object_index_meta_get(ex->idx, "snapshot_gen", &open_gen, NULL) < 0)
		open_gen = 0;
	if (snapshot && !wanted && open_seq > 0 && open_gen > 0) {
		/* a snapshot was cut short (a crash): go on with it, so what it
		 * already sent is not sent twice */
		snprintf(snap_id, sizeof(snap_id), "%llx-%llu",
			 (unsigned long long)ds_outbox_epoch(ex->ob), (unsigned long long)open_gen);
		ex->snap_begin = (uint64_t)open_seq;
		ds_exporter_emit(ex, DS_LOG_INFO, "snapshot_resumed", "snapshot=%s", snap_id);
		ex->force = true;
	} else if (snapshot) {
		uint64_t gen = ds_object_index_generation(ex->idx);

		snprintf(snap_id, sizeof(snap_id), "%llx-%llu",
			 (unsigned long long)ds_outbox_epoch(ex->ob), (unsigned long long)gen);
		rc = ds_object_index_meta_set(ex->idx, "snapshot_gen", (int64_t)gen, err);
		if (rc == 0)
			rc = push_marker(ex, DS_RECORD_SNAPSHOT_BEGIN, snap_id, err);
		if (rc < 0)
			goto out;
		ex->snap_begin = atomic_load(&ex->last_seq);
		ex->force = true;
	}
	ds_exporter_emit(ex, DS_LOG_INFO, "pass_started", "snapshot=%s",
			 snapshot ? snap_id : "none");
	rc = ds_exporter_pass_namespaces(ex, NULL, NULL, err);
	if (rc < 0)
		goto out;
	for (size_t i = 0; i < ex->nstreams; i++) {
		struct stream *s = &ex->streams[i];
		struct kind *k = s->k;

		if (!k->served)
			continue;
		if (ds_exporter_kind_index(ex, k) != DS_KIND_NAMESPACE) {
			ds_err_clear(&kerr);
			rc = list_kind(ex, k, s->ns, s->list_rv, sizeof(s->list_rv), &kerr);
			if (rc == -ECANCELED || rc == -ENOMEM || ex->local_failed) {
				*err = kerr;
				goto out;
			}
			if (rc < 0) {
				char e[300], nsq[300];
				/* not listed: nothing of it is tombstoned */
				ds_exporter_emit(
				    ex, DS_LOG_ERROR, "list_failed", "kind=%s%s%s error=%s",
				    k->def->name, s->ns ? " namespace=" : "",
				    s->ns ? ds_exporter_quote(s->ns, nsq, sizeof(nsq)) : "",
				    ds_exporter_quote(kerr.msg, e, sizeof(e)));
				ds_exporter_keep_err(&first, err, rc, &kerr);
				s->need_list = true;
				continue;
			}
		}
		s->need_list = false;
		/* the Namespace objects: all of them were listed above */
		if (ds_exporter_kind_index(ex, k) == DS_KIND_NAMESPACE &&
		    s != ds_exporter_first_stream(ex, DS_KIND_NAMESPACE))
			continue;
		rc = sweep(ex, k, ds_exporter_kind_index(ex, k) == DS_KIND_NAMESPACE ? NULL : s->ns,
			   err);
		if (rc < 0)
			goto out;
	}
	rc = sweep_gone_namespaces(ex, err);
	if (rc < 0)
		goto out;
	if (snapshot && first == 0) {
		rc = push_marker(ex, DS_RECORD_SNAPSHOT_END, snap_id, err);
		if (rc < 0)
			goto out;
	} else if (snapshot) {
		/* a kind is missing from it: the next full pass goes on with it */
		ds_exporter_emit(ex, DS_LOG_WARN, "snapshot_incomplete", "snapshot=%s", snap_id);
	}
	{
		ds_outbox_state st;
		ds_err e2 = {0};
		if (ds_outbox_state_get(ex->ob, &st, &e2) == 0)
			ds_object_index_prune_deleted(ex->idx, st.acked_seq, &e2);
	}
	rc = first;
out:
	ex->force = false;
	ex->snap_begin = 0;
	ds_exporter_batch_reset(&ex->b);
	save_pass(ex, started, rc);
	ds_exporter_emit(
	    ex, rc < 0 ? DS_LOG_WARN : DS_LOG_INFO, "pass_finished",
	    "listed=%llu pushed=%llu unchanged=%llu skipped=%llu tombstoned=%llu rc=%d",
	    (unsigned long long)ex->counts.listed, (unsigned long long)ex->counts.pushed,
	    (unsigned long long)ex->counts.unchanged, (unsigned long long)ex->counts.skipped,
	    (unsigned long long)ex->counts.tombstoned, rc);
	if (out)
		*out = ex->counts;
	if (rc == -ECANCELED)
		ds_err_set(err, "stopped");
	return rc;
}

struct gone_ns {
	ds_exporter *ex;
	struct names v;
};

static int gone_one(void *ud, const char *ns)
{
	struct gone_ns *g = ud;

	if (!ds_exporter_ns_selected(g->ex, ns))
		return ds_exporter_names_add(&g->v, ns) < 0 ? -ENOMEM : 0;
	return 0;
}

static int sweep_gone_namespaces(ds_exporter *ex, ds_err *err)
{
	struct gone_ns g = {ex, {0}};
	int rc;

	/* the namespaces the index still holds and that are not selected now
	 * are the ones deleted (the unmatched ones were forgotten) */
	rc = ds_object_index_namespaces(ex->idx, gone_one, &g, err);
	for (size_t i = 0; rc == 0 && i < g.v.n; i++)
		for (size_t k = 0; rc == 0 && k < DS_KIND_MAX; k++)
			if (ex->kinds[k].served && ds_exporter_kind_listed(ex, k))
				rc = sweep(ex, &ex->kinds[k],
					   k == DS_KIND_NAMESPACE ? NULL : g.v.v[i], err);
	ds_exporter_names_dispose(&g.v);
	return rc;
}

int ds_exporter_pass(ds_exporter *ex, ds_export_counts *out, ds_err *err)
{
	return ds_err_fallback(err, run_pass(ex, out, err));
}

/* ---- watch ----------------------------------------------------------------------- */

static int on_event(void *user, enum ds_kube_event_type type, json_t *obj)
{
	struct stream *s = user;
	struct kind *k = s->k;
	ds_exporter *ex = k->ex;
	char key[DS_OBJECT_KEY_MAX];

	if (atomic_load(&ex->watch_stop))
		return 1;
	if (type != DS_KUBE_ADDED && type != DS_KUBE_MODIFIED && type != DS_KUBE_DELETED)
		return 0; /* bookmarks: the watch keeps their resourceVersion */
	if (k->def->namespaced && !ds_exporter_ns_selected(ex, ds_obj_namespace(obj)))
		return 0;
	ds_exporter_set_type(obj, k);
	if (ds_exporter_object_key(k, obj, key, sizeof(key)) < 0)
		return 0;
	if (ds_change_queue_put(ex->q, key, (int)(k - ex->kinds), type == DS_KUBE_DELETED, obj,
				ds_clock_mono_ms()) < 0)
		ds_exporter_emit(ex, DS_LOG_ERROR, "watch_dropped",
				 "kind=%s reason=\"out of memory\"", k->def->name);
	return 0;
}

static void *watch_main(void *arg)
{
	struct stream *k = arg;
	ds_exporter *ex = k->k->ex;
	struct ds_kube_watch_opts o = {0};
	ds_kube_error ke = {0};

	o.resource_version = k->list_rv;
	o.field_selector = k->field[0] ? k->field : NULL;
	o.timeout_seconds = ex->cfg.watch_timeout_seconds;
	o.bookmarks = true;
	o.stop = &ex->watch_stop;
	o.fail_on_gone = true;
	k->watch_rc = ds_kube_watch(ex->cfg.kube, &k->k->res, k->k->def->namespaced ? k->ns : NULL,
				    &o, on_event, k, &ke);
	if (k->watch_rc < 0)
		ds_kube_error_format(&ke, k->watch_err, sizeof(k->watch_err));
	atomic_store(&k->done, true);
	return NULL;
}

static int watch_start(ds_exporter *ex, struct stream *k)
{
	k->k->ex = ex;
	atomic_store(&k->done, false);
	k->watch_rc = 0;
	k->watch_err[0] = '\0';
	k->started_at = ds_clock_mono_ms();
	if (pthread_create(&k->thread, NULL, watch_main, k) != 0)
		return -EAGAIN;
	k->running = true;
	return 0;
}

void ds_exporter_watches_stop(ds_exporter *ex)
{
	atomic_store(&ex->watch_stop, true);
	for (size_t i = 0; i < ex->nstreams; i++)
		if (ex->streams[i].running) {
			pthread_join(ex->streams[i].thread, NULL);
			ex->streams[i].running = false;
		}
	atomic_store(&ex->watch_stop, false);
}

struct drop_ctx {
	int tag;
	const char *ns;
};

static bool drop_match(void *ud, const char *key, int tag, const json_t *obj)
{
	struct drop_ctx *d = ud;
	const char *ns = ds_obj_namespace(obj);

	(void)key;
	if (d->tag >= 0)
		return tag == d->tag && (!d->ns || (ns && strcmp(ns, d->ns) == 0));
	return tag != DS_KIND_NAMESPACE && ns && strcmp(ns, d->ns) == 0;
}

/* A namespace began to match: all its objects, kind by kind, against the index. */
static int namespace_pass(ds_exporter *ex, const char *ns, ds_err *err)
{
	int rc = ds_object_index_begin_pass(ex->idx, NULL, err);

	for (size_t i = 1; rc == 0 && i < DS_KIND_MAX; i++) {
		struct kind *k = &ex->kinds[i];

		if (!k->served || !k->def->namespaced)
			continue;
		rc = list_kind(ex, k, ns, NULL, 0, err);
		if (rc == 0)
			rc = sweep(ex, k, ns, err);
	}
	return rc;
}

int ds_exporter_pass_namespace(ds_exporter *ex, const char *ns, ds_export_counts *out, ds_err *err)
{
	struct kind *k = &ex->kinds[DS_KIND_NAMESPACE];
	ds_kube_error ke = {0};
	json_t *obj = NULL;
	char e[600], q[700];
	int rc;

	memset(&ex->counts, 0, sizeof(ex->counts));
	rc = discover(ex, err);
	if (rc == 0)
		rc = ds_exporter_sel_add(ex, ns);
	if (rc == 0 && k->served) {
		/* the Namespace object itself; a role that may not read it leaves it */
		rc = ds_kube_get(ex->cfg.kube, &k->res, NULL, ns, NULL, &obj, &ke);
		if (rc == 0) {
			ex->counts.listed++;
			rc = ds_exporter_process_object(ex, k, obj);
		} else {
			ds_exporter_emit(ex, DS_LOG_WARN, "namespace_not_read",
					 "namespace=%s error=%s", ns,
					 ds_exporter_quote(ds_kube_error_format(&ke, e, sizeof(e)),
							   q, sizeof(q)));
			rc = 0;
		}
		json_decref(obj);
	}
	if (rc == 0)
		rc = namespace_pass(ex, ns, err);
	if (rc == 0)
		rc = ds_exporter_flush(ex, err);
	if (out)
		*out = ex->counts;
	return rc;
}

/* One stream again from a list, page by page, against the index. The
 * Namespace objects are listed all again, whichever stream's watch ended. */
static int relist(ds_exporter *ex, struct stream *s, ds_err *err)
{
	struct kind *k = s->k;
	struct drop_ctx d = {(int)(k - ex->kinds),
			     k - ex->kinds == DS_KIND_NAMESPACE ? NULL : s->ns};
	struct names fresh = {0};
	int rc;

	/* the list supersedes what its watch queued */
	ds_change_queue_drop(ex->q, drop_match, &d);
	rc = ds_object_index_begin_pass(ex->idx, NULL, err);
	if (rc < 0)
		return rc;
	if (k - ex->kinds == DS_KIND_NAMESPACE) {
		rc = ds_exporter_pass_namespaces(ex, s, &fresh, err);
		for (size_t i = 0; rc == 0 && i < fresh.n; i++)
			rc = namespace_pass(ex, fresh.v[i], err);
		ds_exporter_names_dispose(&fresh);
	} else {
		rc = list_kind(ex, k, s->ns, s->list_rv, sizeof(s->list_rv), err);
	}
	if (rc == 0)
		rc = sweep(ex, k, k - ex->kinds == DS_KIND_NAMESPACE ? NULL : s->ns, err);
	if (rc == 0 && k - ex->kinds == DS_KIND_NAMESPACE)
		rc = sweep_gone_namespaces(ex, err);
	return rc;
}

static int namespace_change(ds_exporter *ex, ds_change *c, ds_err *err)
{
	struct kind *k = &ex->kinds[DS_KIND_NAMESPACE];
	const char *name = ds_obj_name(c->obj);
	bool was, now;
	char e[300];
	int rc = 0;

	if (!name)
		return 0;
	was = ds_exporter_ns_selected(ex, name);
	now = !c->deleted && ds_exporter_ns_matches(ex, c->obj);
	if (c->deleted) {
		if (!was)
			return 0;
		/* gone with everything in it */
		struct drop_ctx d = {-1, name};
		ds_exporter_sel_remove(ex, name);
		ds_change_queue_drop(ex->q, drop_match, &d);
		rc = ds_exporter_process_deletion(ex, k, c->obj);
		if (rc == 0)
			rc = ds_object_index_begin_pass(ex->idx, NULL, err);
		for (size_t i = 1; rc == 0 && i < DS_KIND_MAX; i++)
			if (ex->kinds[i].served && ex->kinds[i].def->namespaced)
				rc = sweep(ex, &ex->kinds[i], name, err);
		ds_exporter_emit(ex, DS_LOG_INFO, "namespace_deleted", "namespace=%s",
				 ds_exporter_quote(name, e, sizeof(e)));
		return rc;
	}
	if (was && !now) {
		struct drop_ctx d = {-1, name};
		rc = ds_exporter_flush(ex, err);
		ds_change_queue_drop(ex->q, drop_match, &d);
		return rc == 0 ? ds_exporter_unselect_namespace(ex, name, err) : rc;
	}
	if (!now)
		return 0;
	rc = ds_exporter_process_object(ex, k, c->obj);
	if (rc == 0 && was && ex->became_active) {
		/* failed over here: the standby copies it held are exported now */
		ds_exporter_emit(ex, DS_LOG_INFO, "namespace_active", "namespace=%s",
				 ds_exporter_quote(name, e, sizeof(e)));
		rc = ds_exporter_flush(ex, err);
		if (rc == 0)
			rc = namespace_pass(ex, name, err);
	}
	if (rc == 0 && !was) {
		ds_exporter_emit(ex, DS_LOG_INFO, "namespace_selected", "namespace=%s",
				 ds_exporter_quote(name, e, sizeof(e)));
		rc = ds_exporter_sel_add(ex, name);
		if (rc == 0)
			rc = ds_exporter_flush(ex, err);
		if (rc == 0)
			rc = namespace_pass(ex, name, err);
	}
	return rc;
}

/* Push what the debounce windows let out (everything, when `all`). */
static int drain(ds_exporter *ex, bool all, ds_err *err)
{
	long long now = all ? LLONG_MAX : ds_clock_mono_ms();
	ds_change c;
	int rc = 0;

	while (rc == 0 && ds_change_queue_take(ex->q, now, &c) == 1) {
		struct kind *k = &ex->kinds[c.tag];

		if (c.tag == DS_KIND_NAMESPACE)
			rc = namespace_change(ex, &c, err);
		else if (k->def->namespaced &&
			 !ds_exporter_ns_selected(ex, ds_obj_namespace(c.obj)))
			rc = 0; /* unselected since it was queued */
		else if (c.deleted)
			rc = ds_exporter_process_deletion(ex, k, c.obj);
		else
			rc = ds_exporter_process_object(ex, k, c.obj);
		if (rc == 0)
			rc = ds_exporter_maybe_flush(ex, err);
		ds_change_dispose(&c);
	}
	if (rc == 0)
		rc = ds_exporter_flush(ex, err);
	return rc;
}

/* Doubling from RETRY_MS to RETRY_MAX_MS with each consecutive failure. */
static long long backoff(struct stream *k)
{
	long long ms = RETRY_MS;

	for (unsigned i = 0; i < k->failures && ms < RETRY_MAX_MS; i++)
		ms *= 2;
	k->failures++;
	return ms < RETRY_MAX_MS ? ms : RETRY_MAX_MS;
}

/* Errors of the outbox and the index end the watch; the cluster's are retried. */
static bool fatal(ds_exporter *ex, int rc)
{
	return rc == -ENOMEM || rc == -ECANCELED || ex->local_failed;
}

static int watch(ds_exporter *ex, ds_err *err);

int ds_exporter_watch(ds_exporter *ex, ds_err *err)
{
	return ds_err_fallback(err, watch(ex, err));
}

/* Every served kind has a list behind its watch. */
static bool all_listed(const ds_exporter *ex)
{
	for (size_t i = 0; i < ex->nstreams; i++)
		if (ex->streams[i].k->served && ex->streams[i].need_list)
			return false;
	return true;
}

/* A full pass in watch mode. A snapshot it leaves open (a kind could not be
 * listed) is finished by another full pass once every kind has listed. */
static int watch_pass(ds_exporter *ex, ds_err *err)
{
	bool done = true;
	int rc = run_pass(ex, NULL, err);

	if (rc < 0 && !fatal(ex, rc) && ex->discovered &&
	    ds_object_index_snapshot_done(ex->idx, &done, NULL) == 0 && !done)
		ex->finish_snapshot = true;
	return rc;
}

static int watch(ds_exporter *ex, ds_err *err)
{
	ds_err perr = {0};
	struct stream start = {0};
	char e[700];
	int rc;

	/* the source may not answer yet: try again, backing off, until it does */
	for (;;) {
		long long wait;

		ds_err_clear(&perr);
		rc = watch_pass(ex, &perr);
		if (rc < 0 && fatal(ex, rc)) {
			*err = perr;
			return rc == -ECANCELED ? 0 : rc;
		}
		if (ex->discovered && ex->kinds[DS_KIND_NAMESPACE].served &&
		    ds_exporter_kind_listed(ex, DS_KIND_NAMESPACE))
			break;
		wait = backoff(&start);
		ds_exporter_emit(ex, DS_LOG_ERROR, "pass_failed", "error=%s retry_ms=%lld",
				 ds_exporter_quote(perr.msg, e, sizeof(e)), wait);
		for (long long until = ds_clock_mono_ms() + wait;
		     ds_clock_mono_ms() < until && !atomic_load(&ex->stop);)
			msleep(50);
		if (atomic_load(&ex->stop))
			return 0;
	}
	while (!atomic_load(&ex->stop)) {
		long long now;

		if (atomic_load(&ex->snapshot_wanted) || (ex->finish_snapshot && all_listed(ex))) {
			ex->finish_snapshot = false;
			ds_exporter_watches_stop(ex);
			/* what was queued is in the snapshot's lists */
			for (ds_change c; ds_change_queue_take(ex->q, LLONG_MAX, &c) == 1;)
				ds_change_dispose(&c);
			ds_err_clear(&perr);
			rc = watch_pass(ex, &perr);
			if (rc < 0 && fatal(ex, rc)) {
				*err = perr;
				return rc == -ECANCELED ? 0 : rc;
			}
		}
		now = ds_clock_mono_ms();
		for (size_t i = 0; i < ex->nstreams; i++) {
			struct stream *k = &ex->streams[i];
			const ds_kind *def = k->k->def;

			if (!k->k->served)
				continue;
			if (k->running && atomic_load(&k->done)) {
				pthread_join(k->thread, NULL);
				k->running = false;
				k->need_list = true;
				if (k->watch_rc == -EIDRM) {
					ds_exporter_emit(
					    ex, DS_LOG_INFO, "watch_expired",
					    "kind=%s detail=\"resourceVersion too old: relisting\"",
					    def->name);
				} else if (k->watch_rc < 0) {
					/* a watch that served a while is not failing over and over
					 */
					if (now - k->started_at > 60000)
						k->failures = 0;
					ds_exporter_emit(
					    ex, DS_LOG_ERROR, "watch_failed", "kind=%s error=%s",
					    def->name,
					    ds_exporter_quote(k->watch_err, e, sizeof(e)));
					k->retry_at = now + backoff(k);
				}
			}
			if (k->running || atomic_load(&ex->stop))
				continue;
			if (!k->list_rv[0])
				k->need_list = true; /* never a watch without its list */
			if (k->need_list) {
				if (now < k->retry_at)
					continue;
				ds_err_clear(&perr);
				rc = relist(ex, k, &perr);
				if (rc < 0) {
					if (fatal(ex, rc)) {
						*err = perr;
						ds_exporter_watches_stop(ex);
						return rc == -ECANCELED ? 0 : rc;
					}
					ds_exporter_emit(ex, DS_LOG_ERROR, "list_failed",
							 "kind=%s error=%s", def->name,
							 ds_exporter_quote(perr.msg, e, sizeof(e)));
					k->retry_at = now + backoff(k);
					continue;
				}
				k->need_list = false;
			}
			if (watch_start(ex, k) < 0)
				k->retry_at = now + backoff(k);
		}
		ds_err_clear(&perr);
		rc = drain(ex, false, &perr);
		if (rc < 0 && fatal(ex, rc)) {
			*err = perr;
			ds_exporter_watches_stop(ex);
			return rc == -ECANCELED ? 0 : rc;
		}
		msleep(20);
	}
	ds_exporter_watches_stop(ex);
	/* what is still queued goes out before returning */
	ds_err_clear(&perr);
	rc = drain(ex, true, &perr);
	if (rc == -ECANCELED)
		rc = 0;
	if (rc < 0 && err)
		*err = perr;
	return rc;
}
