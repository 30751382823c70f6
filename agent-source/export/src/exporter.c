#include "exporter_internal.h"

#include "drasync/schemas.h"

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
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void ds_exporter_emit(const ds_exporter *ex, enum ds_log_level level, const char *name,
		      const char *fmt, ...)
{
	char fields[2048];
	va_list ap;

	if (!ex->cfg.on_event)
		return;
	va_start(ap, fmt);
	vsnprintf(fields, sizeof(fields), fmt, ap);
	va_end(ap);
	ex->cfg.on_event(ex->cfg.event_ud, &(ds_exporter_event){level, name, fields});
}

const char *ds_exporter_quote(const char *v, char *buf, size_t size)
{
	return ds_log_quote(v ? v : "", buf, size);
}

/* Keep the first error of a pass; later ones are logged where they happen. */
void ds_exporter_keep_err(int *first, ds_err *dst, int rc, const ds_err *src)
{
	if (*first == 0 && rc < 0) {
		*first = rc;
		if (dst && src)
			*dst = *src;
	}
}

size_t ds_exporter_kind_index(const ds_exporter *ex, const struct kind *k)
{
	return (size_t)(k - ex->kinds);
}

/* The first stream of the kind (NULL when none). */
struct stream *ds_exporter_first_stream(ds_exporter *ex, size_t kind)
{
	for (size_t i = 0; i < ex->nstreams; i++)
		if (ds_exporter_kind_index(ex, ex->streams[i].k) == kind)
			return &ex->streams[i];
	return NULL;
}

/* Every stream of the kind has its list (its objects are all known). */
bool ds_exporter_kind_listed(const ds_exporter *ex, size_t kind)
{
	for (size_t i = 0; i < ex->nstreams; i++)
		if (ds_exporter_kind_index(ex, ex->streams[i].k) == kind &&
		    ex->streams[i].need_list)
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
	cfg->manifest_part_entries = DS_EXPORTER_MANIFEST_PART;
	cfg->debounce_ms = 200;
	cfg->quiet_ms = DS_EXPORTER_QUIET_MS;
	cfg->watch_timeout_seconds = 300;
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

	ds_exporter_emit(ex, DS_LOG_WARN, "snapshot_requested", "target_committed_seq=%llu",
			 (unsigned long long)target_committed_seq);
	ds_exporter_request_snapshot(ex);
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
	for (size_t i = 0; i < DS_KIND_MAX; i++) {
		bool per_ns = ex->scoped && (ds_kind_at(i)->namespaced || i == DS_KIND_NAMESPACE);

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
				if (i == DS_KIND_NAMESPACE)
					snprintf(s->field, sizeof(s->field), "metadata.name=%s",
						 ns);
			}
			ex->nstreams++;
		}
	}
	if (ex->scoped)
		ds_exporter_emit(ex, DS_LOG_INFO, "namespace_reads",
				 "scope=namespaced namespaces=%zu watches_max=%zu", nns,
				 ex->nstreams);
	else
		ds_exporter_emit(ex, DS_LOG_INFO, "namespace_reads",
				 "scope=cluster reason=%s watches_max=%zu",
				 ds_exporter_quote(nns ? "more namespaces than read one by one"
						       : "namespaceSelector",
						   e, sizeof(e)),
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
	if (ex->cfg.manifest_part_entries == 0)
		ex->cfg.manifest_part_entries = DS_EXPORTER_MANIFEST_PART;
	if (ex->cfg.batch_records == 0)
		ex->cfg.batch_records = 256;
	if (ex->cfg.debounce_ms < 0)
		ex->cfg.debounce_ms = 200;
	if (ex->cfg.watch_timeout_seconds <= 0)
		ex->cfg.watch_timeout_seconds = 300;
	pthread_mutex_init(&ex->mu, NULL);
	pthread_mutex_init(&ex->rmu, NULL);
	for (size_t i = 0; i < DS_KIND_MAX; i++) {
		/* in the table's order, the target's apply order: what a pass sends
		 * first lands first; Namespace first, the others are filtered by it */
		ex->kinds[i].def = ds_kind_at(i);
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
	if (rc == 0) {
		ds_exporter_batch_guard(ex);
		rc = ds_object_index_open(&ex->ridx, ex->db_path, err);
	}
	if (rc == 0)
		rc = ds_outbox_file_open(&ex->reloc, ex->db_path, 0, err);
	if (rc == 0)
		rc = ds_change_queue_new(&ex->q, ex->cfg.debounce_ms, ex->cfg.quiet_ms);
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
	ds_exporter_watches_stop(ex);
	ds_exporter_batch_dispose(&ex->b);
	ds_change_queue_free(ex->q);
	ds_object_index_free(ex->idx);
	ds_object_index_free(ex->ridx);
	ds_store_free(ex->reloc);
	ds_outbox_free(ex->ob);
	for (size_t i = 0; i < ex->nsel; i++)
		free(ex->sel[i]);
	free(ex->sel);
	for (size_t i = 0; i < ex->nstreams; i++)
		free((char *)ex->streams[i].ns);
	free(ex->streams);
	free(ex->skips);
	ds_exporter_modes_dispose(ex);
	pthread_mutex_destroy(&ex->mu);
	pthread_mutex_destroy(&ex->rmu);
	free(ex);
}
