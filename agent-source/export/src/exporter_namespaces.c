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
#include "drasync/source_relocation.h"
#include "drasync/standby_form.h"

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

/* ---- namespaces ---------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool sel_has_locked(ds_exporter *ex, const char *ns)
{
	return ns && ex->nsel && bsearch(&ns, ex->sel, ex->nsel, sizeof(*ex->sel), cmp_str) != NULL;
}

bool ds_exporter_ns_selected(ds_exporter *ex, const char *ns)
{
	bool r;

	pthread_mutex_lock(&ex->mu);
	r = sel_has_locked(ex, ns);
	pthread_mutex_unlock(&ex->mu);
	return r;
}

int ds_exporter_sel_add(ds_exporter *ex, const char *ns)
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

void ds_exporter_sel_remove(ds_exporter *ex, const char *ns)
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

static bool configured(ds_exporter *ex, const json_t *ns_obj, const char *name)
{
	if (ex->cfg.n_namespaces) {
		for (size_t i = 0; i < ex->cfg.n_namespaces; i++)
			if (strcmp(ex->cfg.namespaces[i], name) == 0)
				return true;
		return false;
	}
	return ex->cfg.ns_match(ex->cfg.ns_match_ud, ns_obj);
}

/* "2026-12-07T01:30:00Z" in seconds since the epoch; 0 when it is not that. */
static int64_t rfc3339_seconds(const char *s)
{
	struct tm tm;
	const char *end;

	memset(&tm, 0, sizeof(tm));
	end = s ? strptime(s, "%Y-%m-%dT%H:%M:%SZ", &tm) : NULL;
	return end && !*end ? (int64_t)timegm(&tm) : 0;
}

/*
 * Reverse replication without loops (SPEC §5): a namespace this cluster's
 * drasync-target keeps as a standby copy (its Namespace says drasync.io/mode:
 * standby) is never exported; nor one relocated from here, until this
 * cluster's drasync-target made it active again after the relocation (the
 * way home: the relocation is then over, state returned).
 */
static bool active_here(ds_exporter *ex, const json_t *ns_obj, const char *name)
{
	const char *mode = ds_obj_annotation(ns_obj, DS_NS_ANNOTATION_MODE);
	ds_source_relocation row;
	char e[300];

	if (mode && strcmp(mode, "standby") == 0) {
		ds_exporter_emit(ex, DS_LOG_DEBUG, "namespace_not_exported",
				 "namespace=%s reason=\"a standby copy: drasync-target keeps it "
				 "standby here (drasync.io/mode)\"",
				 ds_exporter_quote(name, e, sizeof(e)));
		return false;
	}
	if (!ex->reloc || ds_source_relocation_get(ex->reloc, name, &row, NULL) != 1 ||
	    row.state != DS_SRC_RELOCATION_ACTIVE)
		return true;
	if (ds_source_relocation_came_back(
		&row, mode,
		rfc3339_seconds(ds_obj_annotation(ns_obj, DS_NS_ANNOTATION_MODE_SINCE)))) {
		if (ds_source_relocation_returned(ex->reloc, name, NULL) == 0) {
			ds_exporter_emit(ex, DS_LOG_INFO, "relocation_returned",
					 "namespace=%s target=%s",
					 ds_exporter_quote(name, e, sizeof(e)), row.target);
			return true;
		}
	}
	ds_exporter_emit(ex, DS_LOG_DEBUG, "namespace_not_exported",
			 "namespace=%s reason=\"relocated to %s\"",
			 ds_exporter_quote(name, e, sizeof(e)), row.target);
	return false;
}

static struct ns_mode *mode_entry(ds_exporter *ex, const char *ns)
{
	for (size_t i = 0; i < ex->nmodes; i++)
		if (strcmp(ex->modes[i].ns, ns) == 0)
			return &ex->modes[i];
	return NULL;
}

/* Note ns's mode; whether it turned active (it was noted, not active). */
static bool note_mode(ds_exporter *ex, const char *ns, const char *mode)
{
	struct ns_mode *e = mode_entry(ex, ns);
	bool turned;

	if (!e) {
		char *d = strdup(ns);

		if (!d || ds_grow((void **)&ex->modes, &ex->modecap, ex->nmodes + 1,
				  sizeof(*ex->modes)) < 0) {
			free(d);
			return false;
		}
		e = &ex->modes[ex->nmodes++];
		e->ns = d;
		snprintf(e->mode, sizeof(e->mode), "%s", mode ? mode : "");
		return false;
	}
	turned = mode && strcmp(mode, "active") == 0 && strcmp(e->mode, "active") != 0;
	snprintf(e->mode, sizeof(e->mode), "%s", mode ? mode : "");
	return turned;
}

void ds_exporter_modes_dispose(ds_exporter *ex)
{
	for (size_t i = 0; i < ex->nmodes; i++)
		free(ex->modes[i].ns);
	free(ex->modes);
	ex->modes = NULL;
	ex->nmodes = ex->modecap = 0;
}

bool ds_exporter_standby_copy(ds_exporter *ex, const json_t *obj)
{
	const char *m = ds_obj_label(obj, DS_SANITIZE_MANAGED_BY), *ns = ds_obj_namespace(obj);
	const struct ns_mode *e;

	if (ex->cfg.relocating_ns || !ns || !m || strcmp(m, "drasync") != 0 ||
	    !ds_obj_annotation(obj, DS_ANNOTATION_SOURCE_CLUSTER_MARK))
		return false;
	e = mode_entry(ex, ns);
	return !e || strcmp(e->mode, "active") != 0;
}

bool ds_exporter_ns_matches(ds_exporter *ex, const json_t *ns_obj)
{
	const char *name = ds_obj_name(ns_obj);

	ex->became_active = false;
	if (!name || !configured(ex, ns_obj, name))
		return false;
	ex->became_active = note_mode(ex, name, ds_obj_annotation(ns_obj, DS_NS_ANNOTATION_MODE));
	return active_here(ex, ns_obj, name);
}

/* ---- namespaces in a pass ------------------------------------------------------ */

int ds_exporter_names_add(struct names *s, const char *name)
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

void ds_exporter_names_dispose(struct names *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	memset(s, 0, sizeof(*s));
}

/* A namespace stopped matching: forget it, tombstone nothing. */
int ds_exporter_unselect_namespace(ds_exporter *ex, const char *ns, ds_err *err)
{
	size_t n = 0;
	char e[300];
	int rc;

	ds_exporter_sel_remove(ex, ns);
	rc = ds_object_index_forget_namespace(ex->idx, ns, &n, err);
	if (rc < 0)
		return rc;
	ds_exporter_emit(
	    ex, DS_LOG_INFO, "namespace_unselected",
	    "namespace=%s forgotten=%zu detail=\"no longer replicated; nothing is deleted on "
	    "the target\"",
	    ds_exporter_quote(ns, e, sizeof(e)), n);
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

	if (!ds_exporter_ns_selected(s->ex, ns))
		return ds_exporter_names_add(&s->gone, ns) < 0 ? -ENOMEM : 0;
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
	int rc =
	    ds_kube_get(ex->cfg.kube, &ex->kinds[DS_KIND_NAMESPACE].res, NULL, ns, NULL, &obj, &ke);

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
int ds_exporter_pass_namespaces(ds_exporter *ex, struct stream *only, struct names *fresh,
				ds_err *err)
{
	struct kind *k = &ex->kinds[DS_KIND_NAMESPACE];
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
		if (s->ns && (rc = ds_exporter_names_add(&asked, s->ns)) < 0)
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
				ds_exporter_set_type(item, k);
				rc = ds_exporter_names_add(&all, name);
				if (rc == 0 && ds_exporter_ns_matches(ex, item)) {
					rc = ds_exporter_names_add(&matched, name);
					if (rc == 0 && !ds_exporter_ns_selected(ex, name)) {
						ds_exporter_emit(
						    ex, DS_LOG_INFO, "namespace_selected",
						    "namespace=%s",
						    ds_exporter_quote(name, e, sizeof(e)));
						if (fresh)
							rc = ds_exporter_names_add(fresh, name);
						if (rc == 0)
							rc = ds_exporter_sel_add(ex, name);
					}
					if (rc == 0) {
						ex->counts.listed++;
						rc = ds_exporter_process_object(ex, k, item);
					}
					if (rc == 0)
						rc = ds_exporter_maybe_flush(ex, err);
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
	rc = ds_exporter_flush(ex, err);
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
			rc = ds_exporter_unselect_namespace(ex, ns, err);
			i--;
		} else if (!names_has(&all, ns)) {
			/* deleted: the sweeps tombstone what it held */
			ds_exporter_sel_remove(ex, ns);
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
			rc = ds_exporter_unselect_namespace(ex, scan.gone.v[i], err);
			if (rc < 0)
				goto out;
		}
	}
	/* namespaces that are gone: swept with the kinds (Namespace sweep below) */
	rc = 0;
out:
	ds_exporter_names_dispose(&all);
	ds_exporter_names_dispose(&matched);
	ds_exporter_names_dispose(&asked);
	ds_exporter_names_dispose(&scan.gone);
	return rc;
}
