#include "drasync/exporter.h"

#include "drasync/buf.h"
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

#define RETRY_MS 1000	    /* first retry of a kind whose list or watch failed */
#define RETRY_MAX_MS 300000 /* backoff ceiling */

/* Every kind of SPEC §2, in the target's apply order (what a pass sends first
 * lands first). Namespace comes first: the others are filtered by it. */
struct kind_def {
	const char *group;
	const char *kind;
	bool namespaced;
};

static const struct kind_def KINDS[] = {
    {"", "Namespace", false},
    {"", "ServiceAccount", true},
    {"", "ConfigMap", true},
    {"", "Secret", true},
    {"", "PersistentVolumeClaim", true},
    {"", "Service", true},
    {"resource.k8s.io", "DeviceClass", false},
    {"resource.k8s.io", "ResourceClaimTemplate", true},
    {"resource.k8s.io", "ResourceClaim", true},
    {"scheduling.k8s.io", "Workload", true},
    {"scheduling.k8s.io", "PodGroup", true},
    {"apps", "Deployment", true},
    {"apps", "ReplicaSet", true},
    {"apps", "StatefulSet", true},
    {"apps", "DaemonSet", true},
    {"batch", "Job", true},
    {"batch", "CronJob", true},
    {"", "Pod", true},
};
#define NKINDS (sizeof(KINDS) / sizeof(KINDS[0]))
#define NS_KIND 0

struct ds_exporter;

struct kind {
	const struct kind_def *def;
	struct ds_exporter *ex;
	bool served; /* discovery found it and it is replicated */
	struct ds_kube_resource res;
	char api_version[200];
};

/*
 * One list and its watch: a kind cluster-wide (ns NULL), or, for a fixed
 * namespace list, a namespaced kind in one namespace, or the Namespace
 * object of one namespace (field selector metadata.name=NS).
 */
struct stream {
	struct kind *k;
	const char *ns;	   /* the exporter's copy of the namespace, or NULL */
	char field[300];   /* field selector, or "" */
	char list_rv[128]; /* resourceVersion of the last complete list */
	/* watch thread */
	pthread_t thread;
	bool running;
	atomic_bool done;
	int watch_rc;
	char watch_err[512];
	bool need_list;
	long long retry_at;
	unsigned failures;    /* consecutive failed lists or watches: the backoff */
	long long started_at; /* when the watch thread started */
};

/* Records being gathered for one outbox transaction, with the strings they own. */
struct batch {
	ds_record *recs;
	size_t n, cap;
	char **owned;
	size_t nown, owncap;
	const char **marks; /* keys of unchanged objects (strings in owned) */
	size_t nmarks, markcap;
};

struct ds_exporter {
	ds_exporter_config cfg;
	char db_path[1024];
	ds_outbox *ob;
	ds_object_index *idx; /* the pass/watch thread's */
	atomic_bool stop;
	atomic_bool watch_stop; /* ends the watch threads (stop, or a snapshot) */
	atomic_bool snapshot_wanted;
	_Atomic uint64_t last_seq;
	struct kind kinds[NKINDS];
	/* the lists and watches, grouped by kind in KINDS order */
	struct stream *streams;
	size_t nstreams, streamcap;
	bool scoped; /* namespaced reads per selected namespace, not cluster-wide */
	bool discovered;
	ds_change_queue *q;
	struct batch b;
	ds_export_counts counts;
	bool force;	      /* a snapshot: push every object not pushed since snap_begin */
	uint64_t snap_begin;  /* seq of the snapshot's SNAPSHOT_BEGIN */
	bool local_failed;    /* the outbox or the index failed: fatal, unlike the cluster */
	bool finish_snapshot; /* watch: a snapshot left open by a partial pass */

	/* the selected namespaces (sorted), read by the watch threads */
	pthread_mutex_t mu;
	char **sel;
	size_t nsel, selcap;

	/* objects whose skip was logged: hash of key and reason (open addressing) */
	uint64_t *skips;
	size_t nskips, skipcap;

	/* results, from the sender's thread */
	pthread_mutex_t rmu;
	ds_object_index *ridx;
	uint64_t results[DS_RESULT_STATUS_MAX];
};

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static long long wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void msleep(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static const char *q(const char *v, char *buf, size_t size)
{
	return ds_log_quote(v ? v : "", buf, size);
}

/* Keep the first error of a pass; later ones are logged where they happen. */
static void keep_err(int *first, ds_err *dst, int rc, const ds_err *src)
{
	if (*first == 0 && rc < 0) {
		*first = rc;
		if (dst && src)
			*dst = *src;
	}
}

static size_t kind_index(const ds_exporter *ex, const struct kind *k)
{
	return (size_t)(k - ex->kinds);
}

/* The first stream of the kind (NULL when none). */
static struct stream *first_stream(ds_exporter *ex, size_t kind)
{
	for (size_t i = 0; i < ex->nstreams; i++)
		if (kind_index(ex, ex->streams[i].k) == kind)
			return &ex->streams[i];
	return NULL;
}

/* Every stream of the kind has its list (its objects are all known). */
static bool kind_listed(const ds_exporter *ex, size_t kind)
{
	for (size_t i = 0; i < ex->nstreams; i++)
		if (kind_index(ex, ex->streams[i].k) == kind && ex->streams[i].need_list)
			return false;
	return true;
}

int ds_export_db_path(const char *state_dir, char *buf, size_t size)
{
	int n = snprintf(buf, size, "%s/outbox.db", state_dir && state_dir[0] ? state_dir : ".");

	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

void ds_exporter_config_default(ds_exporter_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->page_size = 500;
	cfg->batch_records = 256;
	cfg->debounce_ms = 200;
	cfg->watch_timeout_seconds = 300;
}

/* ---- namespaces ---------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool sel_has_locked(ds_exporter *ex, const char *ns)
{
	return ns && ex->nsel && bsearch(&ns, ex->sel, ex->nsel, sizeof(*ex->sel), cmp_str) != NULL;
}

static bool ns_selected(ds_exporter *ex, const char *ns)
{
	bool r;

	pthread_mutex_lock(&ex->mu);
	r = sel_has_locked(ex, ns);
	pthread_mutex_unlock(&ex->mu);
	return r;
}

static int sel_add(ds_exporter *ex, const char *ns)
{
	char *dup;
	int rc = 0;

	pthread_mutex_lock(&ex->mu);
	if (sel_has_locked(ex, ns))
		goto out;
	dup = strdup(ns);
	if (!dup || ds_grow((void **)&ex->sel, &ex->selcap, ex->nsel + 1, sizeof(*ex->sel)) < 0) {
		free(dup);
		rc = -ENOMEM;
		goto out;
	}
	ex->sel[ex->nsel++] = dup;
	qsort(ex->sel, ex->nsel, sizeof(*ex->sel), cmp_str);
out:
	pthread_mutex_unlock(&ex->mu);
	return rc;
}

static void sel_remove(ds_exporter *ex, const char *ns)
{
	char **hit;

	pthread_mutex_lock(&ex->mu);
	hit = ex->nsel ? bsearch(&ns, ex->sel, ex->nsel, sizeof(*ex->sel), cmp_str) : NULL;
	if (hit) {
		size_t i = (size_t)(hit - ex->sel);
		free(ex->sel[i]);
		memmove(&ex->sel[i], &ex->sel[i + 1], (ex->nsel - i - 1) * sizeof(*ex->sel));
		ex->nsel--;
	}
	pthread_mutex_unlock(&ex->mu);
}

static bool ns_matches(ds_exporter *ex, const json_t *ns_obj)
{
	const char *name = ds_obj_name(ns_obj);

	if (!name)
		return false;
	if (ex->cfg.n_namespaces) {
		for (size_t i = 0; i < ex->cfg.n_namespaces; i++)
			if (strcmp(ex->cfg.namespaces[i], name) == 0)
				return true;
		return false;
	}
	return ex->cfg.ns_match(ex->cfg.ns_match_ud, ns_obj);
}

/* ---- skips: logged once per object and reason ------------------------------ */

static uint64_t fnv(const char *s, uint64_t h)
{
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

/* true when this (key, reason) was not noted before */
static bool skip_note(ds_exporter *ex, const char *key, const char *why)
{
	uint64_t h = fnv(why, fnv("\n", fnv(key, 1469598103934665603ull)));
	size_t i;

	if (h == 0)
		h = 1;
	if (ex->nskips * 2 >= ex->skipcap) {
		/* Bounded: past a million remembered skips start over (some are logged again). */
		size_t ncap = ex->skipcap ? ex->skipcap * 2 : 1024;
		uint64_t *n;

		if (ncap > (1u << 21))
			ncap = 1u << 21;
		n = calloc(ncap, sizeof(*n));
		if (!n)
			return true;
		if (ncap > ex->skipcap)
			for (size_t k = 0; k < ex->skipcap; k++) {
				uint64_t v = ex->skips[k];
				if (!v)
					continue;
				for (i = v % ncap; n[i]; i = (i + 1) % ncap)
					;
				n[i] = v;
			}
		else
			ex->nskips = 0;
		free(ex->skips);
		ex->skips = n;
		ex->skipcap = ncap;
	}
	for (i = h % ex->skipcap; ex->skips[i]; i = (i + 1) % ex->skipcap)
		if (ex->skips[i] == h)
			return false;
	ex->skips[i] = h;
	ex->nskips++;
	return true;
}

/* ---- the batch ----------------------------------------------------------------- */

static const char *own(struct batch *b, const char *s)
{
	char *d;

	if (!s)
		return NULL;
	if (ds_grow((void **)&b->owned, &b->owncap, b->nown + 1, sizeof(*b->owned)) < 0)
		return NULL;
	d = strdup(s);
	if (d)
		b->owned[b->nown++] = d;
	return d;
}

static char *own_take(struct batch *b, char *s)
{
	if (!s || ds_grow((void **)&b->owned, &b->owncap, b->nown + 1, sizeof(*b->owned)) < 0) {
		free(s);
		return NULL;
	}
	b->owned[b->nown++] = s;
	return s;
}

static ds_record *add_record(struct batch *b)
{
	ds_record *r;

	if (ds_grow((void **)&b->recs, &b->cap, b->n + 1, sizeof(*b->recs)) < 0)
		return NULL;
	r = &b->recs[b->n++];
	memset(r, 0, sizeof(*r));
	return r;
}

static void batch_reset(struct batch *b)
{
	for (size_t i = 0; i < b->nown; i++)
		free(b->owned[i]);
	b->nown = 0;
	b->n = 0;
	b->nmarks = 0;
}

static void batch_dispose(struct batch *b)
{
	batch_reset(b);
	free(b->owned);
	free(b->recs);
	free(b->marks);
	memset(b, 0, sizeof(*b));
}

static int flush(ds_exporter *ex, ds_err *err)
{
	struct batch *b = &ex->b;
	uint64_t last = 0;
	int rc = 0;

	if (b->nmarks)
		rc = ds_object_index_mark(ex->idx, b->marks, b->nmarks, err);
	if (rc == 0 && b->n) {
		rc = ds_object_index_push(ex->idx, ex->ob, b->recs, b->n, &last, err);
		if (rc == 0) {
			atomic_store(&ex->last_seq, last);
			if (ex->cfg.on_pushed)
				ex->cfg.on_pushed(ex->cfg.pushed_ud, last);
		}
	}
	if (rc < 0) {
		char e[300];
		ex->local_failed = true;
		ds_log(DS_LOG_ERROR, "outbox_failed", "records=%zu error=%s", b->n,
		       q(err ? err->msg : strerror(-rc), e, sizeof(e)));
	}
	batch_reset(b);
	return rc;
}

static int maybe_flush(ds_exporter *ex, ds_err *err)
{
	if (ex->b.n + ex->b.nmarks >= ex->cfg.batch_records)
		return flush(ex, err);
	return 0;
}

static int add_tombstone(ds_exporter *ex, const ds_index_row *row)
{
	struct batch *b = &ex->b;
	ds_record *r = add_record(b);

	if (!r)
		return -ENOMEM;
	r->op = DS_RECORD_DELETE;
	r->api_version = own(b, row->api_version);
	r->kind = own(b, row->kind);
	r->ns = own(b, row->ns);
	r->name = own(b, row->name);
	r->source_uid = own(b, row->uid);
	if (!r->api_version || !r->kind || !r->ns || !r->name || !r->source_uid)
		return -ENOMEM;
	ex->counts.tombstoned++;
	return 0;
}

/* Items of a List carry neither apiVersion nor kind: give them the served ones. */
static void set_type(json_t *obj, const struct kind *k)
{
	if (!json_is_string(json_object_get(obj, "apiVersion")))
		json_object_set_new(obj, "apiVersion", json_string(k->api_version));
	if (!json_is_string(json_object_get(obj, "kind")))
		json_object_set_new(obj, "kind", json_string(k->def->kind));
}

static int object_key(const struct kind *k, const json_t *obj, char *key, size_t size)
{
	return ds_object_key(key, size, k->api_version, k->def->kind,
			     k->def->namespaced ? ds_obj_namespace(obj) : NULL, ds_obj_name(obj));
}

/*
 * One object as the source has it now: selection, sanitizing, canonical
 * JSON, hash; queued for the outbox when it differs from what the index
 * says was pushed (or always, in a snapshot).
 */
static int process_object(ds_exporter *ex, const struct kind *k, json_t *obj)
{
	struct batch *b = &ex->b;
	char key[DS_OBJECT_KEY_MAX], desc[300], e1[300], e2[400];
	ds_err why = {0};
	const char *uid, *rv;
	uint8_t hash[DS_HASH_LEN];
	ds_index_row row;
	json_t *copy = NULL;
	char *payload = NULL;
	ds_record *r;
	ds_err err = {0};
	int rc, have;

	set_type(obj, k);
	if (object_key(k, obj, key, sizeof(key)) < 0)
		return 0; /* nameless: nothing to replicate */
	have = ds_object_index_get(ex->idx, key, &row, &err);
	if (have < 0 && have != -ENOENT) {
		ex->local_failed = true;
		return have;
	}
	have = have == 0 && !row.deleted;
	if (!ds_selection_check(obj, ex->cfg.replicate_device_classes, &why)) {
		ex->counts.skipped++;
		if (skip_note(ex, key, why.msg))
			ds_log(DS_LOG_INFO, "skipped", "object=%s reason=%s",
			       q(ds_obj_describe(obj, desc, sizeof(desc)), e1, sizeof(e1)),
			       q(why.msg, e2, sizeof(e2)));
		/* replicated before, not any more (e.g. adopted by a controller) */
		return have ? add_tombstone(ex, &row) : 0;
	}
	uid = ds_json_str(json_object_get(obj, "metadata"), "uid");
	rv = ds_json_str(json_object_get(obj, "metadata"), "resourceVersion");
	copy = json_deep_copy(obj);
	if (!copy)
		return -ENOMEM;
	rc = ds_sanitize(copy);
	if (rc < 0)
		goto out;
	payload = json_dumps(copy, JSON_SORT_KEYS | JSON_COMPACT);
	if (!payload) {
		rc = -ENOMEM;
		goto out;
	}
	ds_record_hash(payload, strlen(payload), hash);
	/* In a snapshot, what was pushed after its SNAPSHOT_BEGIN (before a
	 * crash, when it resumes) is in it already. */
	if (have && !(ex->force && row.seq < ex->snap_begin) &&
	    strcmp(row.uid, uid ? uid : "") == 0 && memcmp(row.hash, hash, DS_HASH_LEN) == 0) {
		const char *kd = own(b, key);
		if (!kd || ds_grow((void **)&b->marks, &b->markcap, b->nmarks + 1,
				   sizeof(*b->marks)) < 0) {
			rc = -ENOMEM;
			goto out;
		}
		b->marks[b->nmarks++] = kd;
		ex->counts.unchanged++;
		goto out;
	}
	/* the same name under a new uid: the old object is gone, this is another one */
	if (have && row.uid[0] && uid && strcmp(row.uid, uid) != 0) {
		rc = add_tombstone(ex, &row);
		if (rc < 0)
			goto out;
	}
	r = add_record(b);
	if (!r) {
		rc = -ENOMEM;
		goto out;
	}
	r->op = DS_RECORD_UPSERT;
	r->api_version = own(b, ds_obj_api_version(obj));
	r->kind = own(b, k->def->kind);
	r->ns = own(b, k->def->namespaced && ds_obj_namespace(obj) ? ds_obj_namespace(obj) : "");
	r->name = own(b, ds_obj_name(obj));
	r->source_uid = own(b, uid ? uid : "");
	r->source_resource_version = own(b, rv ? rv : "");
	r->payload = (const uint8_t *)own_take(b, payload);
	r->payload_len = strlen(payload);
	payload = NULL;
	if (!r->api_version || !r->kind || !r->ns || !r->name || !r->source_uid ||
	    !r->source_resource_version || !r->payload) {
		rc = -ENOMEM;
		goto out;
	}
	ex->counts.pushed++;
out:
	free(payload);
	json_decref(copy);
	return rc;
}

/* The object was deleted on the source: a tombstone when the index holds it
 * (under that uid: a re-created object has its own). */
static int process_deletion(ds_exporter *ex, const struct kind *k, json_t *obj)
{
	const char *uid = ds_json_str(json_object_get(obj, "metadata"), "uid");
	char key[DS_OBJECT_KEY_MAX];
	ds_index_row row;
	ds_err err = {0};
	int rc;

	set_type(obj, k);
	if (object_key(k, obj, key, sizeof(key)) < 0)
		return 0;
	rc = ds_object_index_get(ex->idx, key, &row, &err);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0) {
		ex->local_failed = true;
		return rc;
	}
	if (row.deleted || (uid && row.uid[0] && strcmp(uid, row.uid) != 0))
		return 0;
	return add_tombstone(ex, &row);
}

/* ---- discovery ------------------------------------------------------------ */

static int find_kind(ds_exporter *ex, struct kind *k, const char *version, ds_kube_error *ke)
{
	if (k->def->group[0])
		snprintf(k->api_version, sizeof(k->api_version), "%s/%s", k->def->group, version);
	else
		snprintf(k->api_version, sizeof(k->api_version), "%s", version);
	return ds_kube_resource_find(ex->cfg.kube, k->api_version, k->def->kind, &k->res, ke);
}

static int discover(ds_exporter *ex, ds_err *err)
{
	char e[600];
	int rc = 0;

	if (ex->discovered)
		return 0;
	for (size_t i = 0; i < NKINDS; i++) {
		struct kind *k = &ex->kinds[i];
		ds_kube_error ke = {0};
		json_t *served = NULL;
		size_t v;

		k->served = false;
		if (strcmp(k->def->kind, "DeviceClass") == 0 && !ex->cfg.replicate_device_classes) {
			ds_log(DS_LOG_INFO, "kind_not_replicated",
			       "kind=DeviceClass reason=\"replicateDeviceClasses is off\"");
			continue;
		}
		if (!k->def->group[0] || strcmp(k->def->group, "apps") == 0 ||
		    strcmp(k->def->group, "batch") == 0) {
			rc = find_kind(ex, k, "v1", &ke);
		} else {
			/* resource.k8s.io: v1, else v1beta2, else v1beta1; scheduling.k8s.io
			 * (Workload, PodGroup): v1beta1 (1.37), else v1alpha2 (1.36), the
			 * versions the target converts between; others: the versions in
			 * the server's order, preferred first */
			static const char *const dra_versions[] = {"v1", "v1beta2", "v1beta1",
								   NULL};
			static const char *const sched_versions[] = {"v1", "v1beta1", "v1alpha2",
								     NULL};
			const char *const *dra = strcmp(k->def->group, "scheduling.k8s.io") == 0
						     ? sched_versions
						     : dra_versions;
			bool is_dra = strcmp(k->def->group, "resource.k8s.io") == 0 ||
				      strcmp(k->def->group, "scheduling.k8s.io") == 0;

			rc = ds_kube_group_versions(ex->cfg.kube, k->def->group, NULL, 0, &served,
						    &ke);
			if (rc == 0) {
				rc = -ENOENT;
				for (v = 0; rc == -ENOENT; v++) {
					const char *ver = NULL;
					if (is_dra) {
						if (!dra[v])
							break;
						for (size_t s = 0; s < json_array_size(served); s++)
							if (strcmp(json_string_value(
								       json_array_get(served, s)),
								   dra[v]) == 0)
								ver = dra[v];
						if (!ver)
							continue;
					} else {
						if (v >= json_array_size(served))
							break;
						ver = json_string_value(json_array_get(served, v));
					}
					if (ver)
						rc = find_kind(ex, k, ver, &ke);
				}
			}
			json_decref(served);
		}
		if (rc == -ENOENT) {
			ds_log(DS_LOG_INFO, "kind_not_served", "kind=%s group=%s", k->def->kind,
			       k->def->group[0] ? k->def->group : "core");
			rc = 0;
			continue;
		}
		if (rc < 0) {
			ds_err_set(err, "discovery of %s: %s", k->def->kind,
				   ds_kube_error_format(&ke, e, sizeof(e)));
			return rc;
		}
		k->served = true;
		ds_log(DS_LOG_DEBUG, "kind_served", "kind=%s apiVersion=%s resource=%s",
		       k->def->kind, k->api_version, k->res.resource);
	}
	ex->discovered = true;
	return 0;
}

/* ---- lists -------------------------------------------------------------------- */

static void progress(ds_exporter *ex, const struct kind *k)
{
	if (ex->cfg.on_progress)
		ex->cfg.on_progress(ex->cfg.progress_ud, k->def->kind, &ex->counts);
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
			ds_log(DS_LOG_WARN, "list_restarted", "kind=%s reason=\"continue expired\"",
			       k->def->kind);
			token[0] = '\0';
			restarted = true;
			continue;
		}
		if (rc < 0) {
			ds_err_set(err, "list %s: %s", k->def->kind,
				   ds_kube_error_format(&ke, e, sizeof(e)));
			return rc;
		}
		prv = ds_json_str(json_object_get(page, "metadata"), "resourceVersion");
		if (rv && prv && !rv[0])
			snprintf(rv, rvsize, "%s", prv);
		items = json_object_get(page, "items");
		json_array_foreach (items, i, item) {
			if (k->def->namespaced && !ns && !ns_selected(ex, ds_obj_namespace(item)))
				continue;
			ex->counts.listed++;
			rc = process_object(ex, k, item);
			if (rc == 0)
				rc = maybe_flush(ex, err);
			if (rc < 0)
				break;
		}
		cont = ds_json_str(json_object_get(page, "metadata"), "continue");
		snprintf(token, sizeof(token), "%s", cont ? cont : "");
		json_decref(page);
		if (rc == 0)
			rc = flush(ex, err);
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

	s->rc = add_tombstone(s->ex, row);
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

		rc = flush(ex, err);
		if (rc < 0)
			return rc;
		rc = ds_object_index_unseen(ex->idx, k->def->kind, ns, sweep_row, &s, err);
		if (rc < 0)
			return rc;
		if (s.rc < 0)
			return s.rc;
		if (s.added == 0)
			return 0;
		rc = flush(ex, err);
		if (rc < 0)
			return rc;
	}
}

/* ---- namespaces in a pass ------------------------------------------------------ */

struct names {
	char **v;
	size_t n, cap;
};

static int names_add(struct names *s, const char *name)
{
	char *d = strdup(name);

	if (!d || ds_grow((void **)&s->v, &s->cap, s->n + 1, sizeof(*s->v)) < 0) {
		free(d);
		return -ENOMEM;
	}
	s->v[s->n++] = d;
	return 0;
}

static bool names_has(const struct names *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->v[i], name) == 0)
			return true;
	return false;
}

static void names_dispose(struct names *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	memset(s, 0, sizeof(*s));
}

/* A namespace stopped matching: forget it, tombstone nothing. */
static int unselect_namespace(ds_exporter *ex, const char *ns, ds_err *err)
{
	size_t n = 0;
	char e[300];
	int rc;

	sel_remove(ex, ns);
	rc = ds_object_index_forget_namespace(ex->idx, ns, &n, err);
	if (rc < 0)
		return rc;
	ds_log(DS_LOG_INFO, "namespace_unselected",
	       "namespace=%s forgotten=%zu detail=\"no longer replicated; nothing is deleted on "
	       "the target\"",
	       q(ns, e, sizeof(e)), n);
	return 0;
}

struct ns_scan {
	ds_exporter *ex;
	const struct names *all;
	struct names gone; /* held by the index, not selected now */
};

static int ns_scan_one(void *ud, const char *ns)
{
	struct ns_scan *s = ud;

	if (!ns_selected(s->ex, ns))
		return names_add(&s->gone, ns) < 0 ? -ENOMEM : 0;
	return 0;
}

/*
 * Whether a namespace that is not selected still exists, for a fixed list
 * read namespace by namespace: the source's role may not read it (403), and
 * then it is taken as existing (forgotten, nothing deleted on the target).
 */
static int namespace_exists(ds_exporter *ex, const char *ns, bool *exists)
{
	ds_kube_error ke = {0};
	json_t *obj = NULL;
	int rc = ds_kube_get(ex->cfg.kube, &ex->kinds[NS_KIND].res, NULL, ns, NULL, &obj, &ke);

	json_decref(obj);
	*exists = rc != -ENOENT;
	return rc == 0 || rc == -ENOENT || ke.code == 403 ? 0 : rc;
}

/*
 * The Namespace list of a pass: which namespaces are selected now; their
 * Namespace objects processed. Cluster-wide, one list of every Namespace;
 * for a fixed list read namespace by namespace (ex->scoped), one list per
 * selected name (field selector metadata.name). Namespaces the index holds
 * that exist but no longer match are forgotten; those that no longer exist
 * stay for the sweeps to tombstone their objects. `only` (may be NULL: all)
 * is the stream whose resourceVersion is kept; the others' watches are
 * running and keep theirs. `fresh` (may be NULL) receives the namespaces
 * that were not selected before.
 */
static int pass_namespaces(ds_exporter *ex, struct stream *only, struct names *fresh, ds_err *err)
{
	struct kind *k = &ex->kinds[NS_KIND];
	struct names all = {0}, matched = {0}, asked = {0};
	struct ns_scan scan = {ex, &all, {0}};
	char e[700];
	int rc = 0;

	for (size_t si = 0; si < ex->nstreams; si++) {
		struct stream *s = &ex->streams[si];
		struct ds_kube_list_opts lo = {NULL, NULL, NULL, NULL, ex->cfg.page_size};
		char token[4096] = "";

		if (s->k != k)
			continue;
		if (s->ns && (rc = names_add(&asked, s->ns)) < 0)
			goto out;
		lo.field_selector = s->field[0] ? s->field : NULL;
		do {
			ds_kube_error ke = {0};
			json_t *page = NULL, *item;
			const char *cont, *prv;
			size_t i;

			lo.continue_token = token[0] ? token : NULL;
			rc = ds_kube_list_page(ex->cfg.kube, &k->res, NULL, &lo, &page, &ke);
			if (rc < 0) {
				ds_err_set(err, "list Namespace%s%s: %s", s->ns ? " " : "",
					   s->ns ? s->ns : "",
					   ds_kube_error_format(&ke, e, sizeof(e)));
				goto out;
			}
			prv = ds_json_str(json_object_get(page, "metadata"), "resourceVersion");
			if (!token[0] && prv && (!only || only == s))
				snprintf(s->list_rv, sizeof(s->list_rv), "%s", prv);
			json_array_foreach (json_object_get(page, "items"), i, item) {
				const char *name = ds_obj_name(item);

				if (!name)
					continue;
				set_type(item, k);
				rc = names_add(&all, name);
				if (rc == 0 && ns_matches(ex, item)) {
					rc = names_add(&matched, name);
					if (rc == 0 && !ns_selected(ex, name)) {
						ds_log(DS_LOG_INFO, "namespace_selected",
						       "namespace=%s", q(name, e, sizeof(e)));
						if (fresh)
							rc = names_add(fresh, name);
						if (rc == 0)
							rc = sel_add(ex, name);
					}
					if (rc == 0) {
						ex->counts.listed++;
						rc = process_object(ex, k, item);
					}
					if (rc == 0)
						rc = maybe_flush(ex, err);
				}
				if (rc < 0)
					break;
			}
			cont = ds_json_str(json_object_get(page, "metadata"), "continue");
			snprintf(token, sizeof(token), "%s", cont ? cont : "");
			json_decref(page);
			if (rc < 0)
				goto out;
		} while (token[0]);
	}
	rc = flush(ex, err);
	if (rc < 0)
		goto out;
	/* selected before, existing, not matching now: unselect (a fixed list
	 * read by name: only what was asked is known) */
	for (size_t i = 0; i < ex->nsel; i++) {
		pthread_mutex_lock(&ex->mu);
		char *ns = i < ex->nsel ? strdup(ex->sel[i]) : NULL;
		pthread_mutex_unlock(&ex->mu);

		if (!ns)
			break;
		if (ex->scoped && !names_has(&asked, ns)) {
			/* not in the list (cannot be: the list is fixed) */
		} else if (!names_has(&matched, ns) && names_has(&all, ns)) {
			rc = unselect_namespace(ex, ns, err);
			i--;
		} else if (!names_has(&all, ns)) {
			/* deleted: the sweeps tombstone what it held */
			sel_remove(ex, ns);
			i--;
		}
		free(ns);
		if (rc < 0)
			goto out;
	}
	/* what the index holds of namespaces not selected (a previous run) */
	rc = ds_object_index_namespaces(ex->idx, ns_scan_one, &scan, err);
	if (rc < 0)
		goto out;
	for (size_t i = 0; i < scan.gone.n; i++) {
		bool exists = names_has(&all, scan.gone.v[i]);

		if (ex->scoped && !exists && !names_has(&asked, scan.gone.v[i])) {
			rc = namespace_exists(ex, scan.gone.v[i], &exists);
			if (rc < 0) {
				ds_err_set(err, "get Namespace %s: %s", scan.gone.v[i],
					   strerror(-rc));
				goto out;
			}
		}
		if (exists) {
			rc = unselect_namespace(ex, scan.gone.v[i], err);
			if (rc < 0)
				goto out;
		}
	}
	/* namespaces that are gone: swept with the kinds (Namespace sweep below) */
	rc = 0;
out:
	names_dispose(&all);
	names_dispose(&matched);
	names_dispose(&asked);
	names_dispose(&scan.gone);
	return rc;
}

/* Deleted namespaces the index still holds objects of: tombstone them. */
static int sweep_gone_namespaces(ds_exporter *ex, ds_err *err);

/* ---- passes ----------------------------------------------------------------------- */

static int push_marker(ds_exporter *ex, enum ds_record_op op, const char *id, ds_err *err)
{
	ds_index_manifest m = {0};
	ds_record *r;
	int rc = flush(ex, err);

	if (rc < 0)
		return rc;
	if (op == DS_RECORD_SNAPSHOT_END) {
		rc = ds_object_index_manifest(ex->idx, &m, err);
		if (rc < 0)
			return rc;
	}
	r = add_record(&ex->b);
	if (!r) {
		ds_index_manifest_dispose(&m);
		return -ENOMEM;
	}
	r->op = op;
	r->snapshot_id = id;
	r->manifest = m.entries;
	r->manifest_len = m.n;
	rc = flush(ex, err);
	if (rc == 0)
		ds_log(DS_LOG_INFO,
		       op == DS_RECORD_SNAPSHOT_BEGIN ? "snapshot_begin" : "snapshot_end",
		       "snapshot=%s objects=%zu", id, m.n);
	ds_index_manifest_dispose(&m);
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
	ds_object_index_meta_set(ex->idx, "last_pass_finished_ms", wall_ms(), &err);
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
	long long started = wall_ms();
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
	if (!ex->kinds[NS_KIND].served) {
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
		ds_log(DS_LOG_INFO, "snapshot_resumed", "snapshot=%s", snap_id);
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
	ds_log(DS_LOG_INFO, "pass_started", "snapshot=%s", snapshot ? snap_id : "none");
	rc = pass_namespaces(ex, NULL, NULL, err);
	if (rc < 0)
		goto out;
	for (size_t i = 0; i < ex->nstreams; i++) {
		struct stream *s = &ex->streams[i];
		struct kind *k = s->k;

		if (!k->served)
			continue;
		if (kind_index(ex, k) != NS_KIND) {
			ds_err_clear(&kerr);
			rc = list_kind(ex, k, s->ns, s->list_rv, sizeof(s->list_rv), &kerr);
			if (rc == -ECANCELED || rc == -ENOMEM || ex->local_failed) {
				*err = kerr;
				goto out;
			}
			if (rc < 0) {
				char e[300];
				/* not listed: nothing of it is tombstoned */
				ds_log(DS_LOG_ERROR, "list_failed", "kind=%s%s%s error=%s",
				       k->def->kind, s->ns ? " namespace=" : "", s->ns ? s->ns : "",
				       q(kerr.msg, e, sizeof(e)));
				keep_err(&first, err, rc, &kerr);
				s->need_list = true;
				continue;
			}
		}
		s->need_list = false;
		/* the Namespace objects: all of them were listed above */
		if (kind_index(ex, k) == NS_KIND && s != first_stream(ex, NS_KIND))
			continue;
		rc = sweep(ex, k, kind_index(ex, k) == NS_KIND ? NULL : s->ns, err);
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
		ds_log(DS_LOG_WARN, "snapshot_incomplete", "snapshot=%s", snap_id);
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
	batch_reset(&ex->b);
	save_pass(ex, started, rc);
	ds_log(rc < 0 ? DS_LOG_WARN : DS_LOG_INFO, "pass_finished",
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

	if (!ns_selected(g->ex, ns))
		return names_add(&g->v, ns) < 0 ? -ENOMEM : 0;
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
		for (size_t k = 0; rc == 0 && k < NKINDS; k++)
			if (ex->kinds[k].served && kind_listed(ex, k))
				rc = sweep(ex, &ex->kinds[k], k == NS_KIND ? NULL : g.v.v[i], err);
	names_dispose(&g.v);
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
	if (k->def->namespaced && !ns_selected(ex, ds_obj_namespace(obj)))
		return 0;
	set_type(obj, k);
	if (object_key(k, obj, key, sizeof(key)) < 0)
		return 0;
	if (ds_change_queue_put(ex->q, key, (int)(k - ex->kinds), type == DS_KUBE_DELETED, obj,
				now_ms()) < 0)
		ds_log(DS_LOG_ERROR, "watch_dropped", "kind=%s reason=\"out of memory\"",
		       k->def->kind);
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
	k->started_at = now_ms();
	if (pthread_create(&k->thread, NULL, watch_main, k) != 0)
		return -EAGAIN;
	k->running = true;
	return 0;
}

static void watches_stop(ds_exporter *ex)
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
	return tag != NS_KIND && ns && strcmp(ns, d->ns) == 0;
}

/* A namespace began to match: all its objects, kind by kind, against the index. */
static int namespace_pass(ds_exporter *ex, const char *ns, ds_err *err)
{
	int rc = ds_object_index_begin_pass(ex->idx, NULL, err);

	for (size_t i = 1; rc == 0 && i < NKINDS; i++) {
		struct kind *k = &ex->kinds[i];

		if (!k->served || !k->def->namespaced)
			continue;
		rc = list_kind(ex, k, ns, NULL, 0, err);
		if (rc == 0)
			rc = sweep(ex, k, ns, err);
	}
	return rc;
}

/* One stream again from a list, page by page, against the index. The
 * Namespace objects are listed all again, whichever stream's watch ended. */
static int relist(ds_exporter *ex, struct stream *s, ds_err *err)
{
	struct kind *k = s->k;
	struct drop_ctx d = {(int)(k - ex->kinds), k - ex->kinds == NS_KIND ? NULL : s->ns};
	struct names fresh = {0};
	int rc;

	/* the list supersedes what its watch queued */
	ds_change_queue_drop(ex->q, drop_match, &d);
	rc = ds_object_index_begin_pass(ex->idx, NULL, err);
	if (rc < 0)
		return rc;
	if (k - ex->kinds == NS_KIND) {
		rc = pass_namespaces(ex, s, &fresh, err);
		for (size_t i = 0; rc == 0 && i < fresh.n; i++)
			rc = namespace_pass(ex, fresh.v[i], err);
		names_dispose(&fresh);
	} else {
		rc = list_kind(ex, k, s->ns, s->list_rv, sizeof(s->list_rv), err);
	}
	if (rc == 0)
		rc = sweep(ex, k, k - ex->kinds == NS_KIND ? NULL : s->ns, err);
	if (rc == 0 && k - ex->kinds == NS_KIND)
		rc = sweep_gone_namespaces(ex, err);
	return rc;
}

static int namespace_change(ds_exporter *ex, ds_change *c, ds_err *err)
{
	struct kind *k = &ex->kinds[NS_KIND];
	const char *name = ds_obj_name(c->obj);
	bool was, now;
	char e[300];
	int rc = 0;

	if (!name)
		return 0;
	was = ns_selected(ex, name);
	now = !c->deleted && ns_matches(ex, c->obj);
	if (c->deleted) {
		if (!was)
			return 0;
		/* gone with everything in it */
		struct drop_ctx d = {-1, name};
		sel_remove(ex, name);
		ds_change_queue_drop(ex->q, drop_match, &d);
		rc = process_deletion(ex, k, c->obj);
		if (rc == 0)
			rc = ds_object_index_begin_pass(ex->idx, NULL, err);
		for (size_t i = 1; rc == 0 && i < NKINDS; i++)
			if (ex->kinds[i].served && ex->kinds[i].def->namespaced)
				rc = sweep(ex, &ex->kinds[i], name, err);
		ds_log(DS_LOG_INFO, "namespace_deleted", "namespace=%s", q(name, e, sizeof(e)));
		return rc;
	}
	if (was && !now) {
		struct drop_ctx d = {-1, name};
		rc = flush(ex, err);
		ds_change_queue_drop(ex->q, drop_match, &d);
		return rc == 0 ? unselect_namespace(ex, name, err) : rc;
	}
	if (!now)
		return 0;
	rc = process_object(ex, k, c->obj);
	if (rc == 0 && !was) {
		ds_log(DS_LOG_INFO, "namespace_selected", "namespace=%s", q(name, e, sizeof(e)));
		rc = sel_add(ex, name);
		if (rc == 0)
			rc = flush(ex, err);
		if (rc == 0)
			rc = namespace_pass(ex, name, err);
	}
	return rc;
}

/* Push what the debounce windows let out (everything, when `all`). */
static int drain(ds_exporter *ex, bool all, ds_err *err)
{
	long long now = all ? LLONG_MAX : now_ms();
	ds_change c;
	int rc = 0;

	while (rc == 0 && ds_change_queue_take(ex->q, now, &c) == 1) {
		struct kind *k = &ex->kinds[c.tag];

		if (c.tag == NS_KIND)
			rc = namespace_change(ex, &c, err);
		else if (k->def->namespaced && !ns_selected(ex, ds_obj_namespace(c.obj)))
			rc = 0; /* unselected since it was queued */
		else if (c.deleted)
			rc = process_deletion(ex, k, c.obj);
		else
			rc = process_object(ex, k, c.obj);
		if (rc == 0)
			rc = maybe_flush(ex, err);
		ds_change_dispose(&c);
	}
	if (rc == 0)
		rc = flush(ex, err);
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
		if (ex->discovered && ex->kinds[NS_KIND].served && kind_listed(ex, NS_KIND))
			break;
		wait = backoff(&start);
		ds_log(DS_LOG_ERROR, "pass_failed", "error=%s retry_ms=%lld",
		       q(perr.msg, e, sizeof(e)), wait);
		for (long long until = now_ms() + wait;
		     now_ms() < until && !atomic_load(&ex->stop);)
			msleep(50);
		if (atomic_load(&ex->stop))
			return 0;
	}
	while (!atomic_load(&ex->stop)) {
		long long now;

		if (atomic_load(&ex->snapshot_wanted) || (ex->finish_snapshot && all_listed(ex))) {
			ex->finish_snapshot = false;
			watches_stop(ex);
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
		now = now_ms();
		for (size_t i = 0; i < ex->nstreams; i++) {
			struct stream *k = &ex->streams[i];
			const struct kind_def *def = k->k->def;

			if (!k->k->served)
				continue;
			if (k->running && atomic_load(&k->done)) {
				pthread_join(k->thread, NULL);
				k->running = false;
				k->need_list = true;
				if (k->watch_rc == -EIDRM) {
					ds_log(
					    DS_LOG_INFO, "watch_expired",
					    "kind=%s detail=\"resourceVersion too old: relisting\"",
					    def->kind);
				} else if (k->watch_rc < 0) {
					/* a watch that served a while is not failing over and over
					 */
					if (now - k->started_at > 60000)
						k->failures = 0;
					ds_log(DS_LOG_ERROR, "watch_failed", "kind=%s error=%s",
					       def->kind, q(k->watch_err, e, sizeof(e)));
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
						watches_stop(ex);
						return rc == -ECANCELED ? 0 : rc;
					}
					ds_log(DS_LOG_ERROR, "list_failed", "kind=%s error=%s",
					       def->kind, q(perr.msg, e, sizeof(e)));
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
			watches_stop(ex);
			return rc == -ECANCELED ? 0 : rc;
		}
		msleep(20);
	}
	watches_stop(ex);
	/* what is still queued goes out before returning */
	ds_err_clear(&perr);
	rc = drain(ex, true, &perr);
	if (rc == -ECANCELED)
		rc = 0;
	if (rc < 0 && err)
		*err = perr;
	return rc;
}

void ds_exporter_stop(ds_exporter *ex)
{
	atomic_store(&ex->stop, true);
	atomic_store(&ex->watch_stop, true);
}

void ds_exporter_request_snapshot(ds_exporter *ex)
{
	atomic_store(&ex->snapshot_wanted, true);
}

bool ds_exporter_snapshot_wanted(ds_exporter *ex)
{
	return atomic_load(&ex->snapshot_wanted);
}

void ds_exporter_on_snapshot_required(void *ud, uint64_t target_committed_seq)
{
	ds_exporter *ex = ud;

	ds_log(DS_LOG_WARN, "snapshot_requested", "target_committed_seq=%llu",
	       (unsigned long long)target_committed_seq);
	ds_exporter_request_snapshot(ex);
}

/* ---- results ---------------------------------------------------------------------- */

/* One result, ex->rmu held: stored on the object; news logged once per object and reason. */
static int result_locked(ds_exporter *ex, uint64_t seq, enum ds_result_status status,
			 const char *message)
{
	ds_index_row row;
	bool changed = false;
	ds_err err = {0};
	char e1[700], e2[400];
	int rc;

	if (status > 0 && status < DS_RESULT_STATUS_MAX)
		ex->results[status]++;
	rc = ds_object_index_result(ex->ridx, seq, status, message, &row, &changed, &err);
	if (rc == 0 && changed && (status == DS_RESULT_FAILED || status == DS_RESULT_SKIPPED))
		ds_log(DS_LOG_WARN, status == DS_RESULT_FAILED ? "target_failed" : "target_skipped",
		       "object=%s seq=%llu reason=%s", q(row.key, e2, sizeof(e2)),
		       (unsigned long long)seq, q(message, e1, sizeof(e1)));
	else if (rc == 0 && changed && status == DS_RESULT_WAITING)
		ds_log(DS_LOG_INFO, "target_waiting", "object=%s seq=%llu reason=%s",
		       q(row.key, e2, sizeof(e2)), (unsigned long long)seq,
		       q(message, e1, sizeof(e1)));
	else if (rc == 0 && changed && (status == DS_RESULT_APPLIED || status == DS_RESULT_HELD))
		ds_log(DS_LOG_DEBUG, status == DS_RESULT_APPLIED ? "target_applied" : "target_held",
		       "object=%s seq=%llu", q(row.key, e2, sizeof(e2)), (unsigned long long)seq);
	else if (rc < 0 && rc != -ENOENT)
		ds_log(DS_LOG_ERROR, "result_not_recorded", "seq=%llu error=%s",
		       (unsigned long long)seq, q(err.msg, e1, sizeof(e1)));
	return rc == -ENOENT ? 0 : rc;
}

void ds_exporter_on_results(void *ud, const ds_wire_result *v, size_t n)
{
	ds_exporter *ex = ud;
	ds_err err = {0};
	char e[400];
	bool batch;
	int rc = 0;

	pthread_mutex_lock(&ex->rmu);
	/* One transaction for the Ack's results: without it, each is a commit of
	 * its own (two per object, an fsync each), as when begin fails. */
	batch = n > 1 && ds_object_index_begin(ex->ridx, &err) == 0;
	if (n > 1 && !batch)
		ds_log(DS_LOG_WARN, "result_batch", "error=%s detail=\"one result at a time\"",
		       q(err.msg, e, sizeof(e)));
	for (size_t i = 0; i < n && (rc == 0 || !batch); i++)
		rc = result_locked(ex, v[i].seq, v[i].status, v[i].message);
	if (batch) {
		if (rc == 0)
			rc = ds_object_index_commit(ex->ridx, &err);
		else
			ds_object_index_rollback(ex->ridx);
		if (rc < 0)
			ds_log(DS_LOG_ERROR, "result_not_recorded", "results=%zu error=%s", n,
			       q(err.msg[0] ? err.msg : strerror(-rc), e, sizeof(e)));
	}
	pthread_mutex_unlock(&ex->rmu);
}

void ds_exporter_result_counts(ds_exporter *ex, uint64_t counts[DS_RESULT_STATUS_MAX])
{
	pthread_mutex_lock(&ex->rmu);
	memcpy(counts, ex->results, sizeof(ex->results));
	pthread_mutex_unlock(&ex->rmu);
}

uint64_t ds_exporter_last_seq(ds_exporter *ex)
{
	return atomic_load(&ex->last_seq);
}

/* ---- lifecycle --------------------------------------------------------------------- */

/*
 * The lists and watches. A fixed list of at most
 * DS_EXPORTER_SCOPED_NAMESPACES_MAX namespaces is read namespace by
 * namespace (each namespaced kind in each one, the Namespace objects by
 * name), so the source's role needs no read outside them; a selector, or a
 * longer list, reads each kind cluster-wide and filters here.
 */
static int make_streams(ds_exporter *ex, ds_err *err)
{
	size_t nns = ex->cfg.n_namespaces;
	char e[300];

	ex->scoped = nns > 0 && nns <= DS_EXPORTER_SCOPED_NAMESPACES_MAX;
	for (size_t i = 0; i < NKINDS; i++) {
		bool per_ns = ex->scoped && (KINDS[i].namespaced || i == NS_KIND);

		for (size_t n = 0; n < (per_ns ? nns : 1); n++) {
			struct stream *s;

			if (ds_grow((void **)&ex->streams, &ex->streamcap, ex->nstreams + 1,
				    sizeof(*ex->streams)) < 0)
				return -ENOMEM;
			s = &ex->streams[ex->nstreams];
			memset(s, 0, sizeof(*s));
			s->k = &ex->kinds[i];
			s->need_list = true;
			if (per_ns) {
				const char *ns = ex->cfg.namespaces[n];

				if (!ns || !ns[0] || strlen(ns) > 253) {
					ds_err_set(err, "exporter: bad namespace name");
					return -EINVAL;
				}
				s->ns = strdup(ns);
				if (!s->ns)
					return -ENOMEM;
				if (i == NS_KIND)
					snprintf(s->field, sizeof(s->field), "metadata.name=%s",
						 ns);
			}
			ex->nstreams++;
		}
	}
	if (ex->scoped)
		ds_log(DS_LOG_INFO, "namespace_reads",
		       "scope=namespaced namespaces=%zu watches_max=%zu", nns, ex->nstreams);
	else
		ds_log(DS_LOG_INFO, "namespace_reads", "scope=cluster reason=%s watches_max=%zu",
		       q(nns ? "more namespaces than read one by one" : "namespaceSelector", e,
			 sizeof(e)),
		       ex->nstreams);
	return 0;
}

int ds_exporter_new(ds_exporter **out, const ds_exporter_config *cfg, ds_err *err)
{
	ds_exporter *ex = NULL;
	ds_outbox_state st;
	int rc;

	if (!cfg->kube || (cfg->n_namespaces == 0) == (cfg->ns_match == NULL)) {
		ds_err_set(err, "exporter: a cluster and either a namespace list or a namespace "
				"selector are required");
		return -EINVAL;
	}
	ex = calloc(1, sizeof(*ex));
	if (!ex)
		return ds_err_fallback(err, -ENOMEM);
	ex->cfg = *cfg;
	if (ex->cfg.page_size <= 0)
		ex->cfg.page_size = 500;
	if (ex->cfg.batch_records == 0)
		ex->cfg.batch_records = 256;
	if (ex->cfg.debounce_ms < 0)
		ex->cfg.debounce_ms = 200;
	if (ex->cfg.watch_timeout_seconds <= 0)
		ex->cfg.watch_timeout_seconds = 300;
	pthread_mutex_init(&ex->mu, NULL);
	pthread_mutex_init(&ex->rmu, NULL);
	for (size_t i = 0; i < NKINDS; i++) {
		ex->kinds[i].def = &KINDS[i];
		ex->kinds[i].ex = ex;
	}
	rc = make_streams(ex, err);
	if (rc < 0)
		goto out;
	rc = ds_export_db_path(cfg->state_dir, ex->db_path, sizeof(ex->db_path));
	if (rc < 0) {
		ds_err_set(err, "exporter: state directory path too long");
		goto out;
	}
	if (cfg->state_dir && cfg->state_dir[0] && mkdir(cfg->state_dir, 0700) < 0 &&
	    errno != EEXIST) {
		rc = -errno;
		ds_err_set(err, "cannot create %s: %s", cfg->state_dir, strerror(errno));
		goto out;
	}
	rc = ds_outbox_open(&ex->ob, ex->db_path, NULL, err);
	if (rc == 0)
		rc = ds_object_index_open(&ex->idx, ex->db_path, err);
	if (rc == 0)
		rc = ds_object_index_open(&ex->ridx, ex->db_path, err);
	if (rc == 0)
		rc = ds_change_queue_new(&ex->q, ex->cfg.debounce_ms);
	if (rc == 0 && ds_outbox_state_get(ex->ob, &st, err) == 0)
		atomic_store(&ex->last_seq, st.last_seq);
out:
	if (rc < 0) {
		ds_exporter_free(ex);
		return ds_err_fallback(err, rc);
	}
	*out = ex;
	return 0;
}

void ds_exporter_free(ds_exporter *ex)
{
	if (!ex)
		return;
	watches_stop(ex);
	batch_dispose(&ex->b);
	ds_change_queue_free(ex->q);
	ds_object_index_free(ex->idx);
	ds_object_index_free(ex->ridx);
	ds_outbox_free(ex->ob);
	for (size_t i = 0; i < ex->nsel; i++)
		free(ex->sel[i]);
	free(ex->sel);
	for (size_t i = 0; i < ex->nstreams; i++)
		free((char *)ex->streams[i].ns);
	free(ex->streams);
	free(ex->skips);
	pthread_mutex_destroy(&ex->mu);
	pthread_mutex_destroy(&ex->rmu);
	free(ex);
}
