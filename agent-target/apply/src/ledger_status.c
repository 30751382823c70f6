#include "drasync/ledger_status.h"

#include "drasync/buf.h"

#include "drasync/schemas.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fail(sqlite3 *db, const char *what, ds_err *err)
{
	return ds_store_fail_db(db, sqlite3_errcode(db), what, err);
}

static char *dup_col(sqlite3_stmt *q, int i)
{
	const char *s = (const char *)sqlite3_column_text(q, i);

	return strdup(s ? s : "");
}

static int read_sources(sqlite3 *db, ds_ledger_status *st, ds_err *err)
{
	size_t cap = 0;
	sqlite3_stmt *q = NULL;
	int rc;

	/* The backlog per source: records past the apply cursor, and pending objects. */
	rc = sqlite3_prepare_v2(
	    db,
	    "SELECT s.name, s.cluster_name, s.epoch, s.committed_seq, coalesce(s.updated_at, 0),"
	    " (SELECT count(*) FROM records r WHERE r.source = s.name AND r.op IN (1, 2) AND"
	    "  r.id > coalesce((SELECT record_id FROM apply_cursor WHERE id = 1), 0))"
	    " + (SELECT count(*) FROM object_state o WHERE o.source = s.name AND"
	    "  o.state = 'pending'),"
	    " (SELECT count(*) FROM object_state o WHERE o.source = s.name),"
	    /* The oldest of them: when it was committed. */
	    " coalesce(min((SELECT min(r.committed_at) FROM records r WHERE r.source = s.name"
	    "  AND r.op IN (1, 2) AND"
	    "  r.id > coalesce((SELECT record_id FROM apply_cursor WHERE id = 1), 0)),"
	    " (SELECT min(r.committed_at) FROM object_state o JOIN records r ON r.id = o.record_id"
	    "  WHERE o.source = s.name AND o.state = 'pending')),"
	    " (SELECT min(r.committed_at) FROM records r WHERE r.source = s.name"
	    "  AND r.op IN (1, 2) AND"
	    "  r.id > coalesce((SELECT record_id FROM apply_cursor WHERE id = 1), 0)),"
	    " (SELECT min(r.committed_at) FROM object_state o JOIN records r ON r.id = o.record_id"
	    "  WHERE o.source = s.name AND o.state = 'pending'), 0)"
	    " FROM sources s ORDER BY s.name",
	    -1, &q, NULL);
	if (rc != SQLITE_OK)
		return fail(db, "sources", err);
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		ds_ledger_source *s;

		if (ds_grow((void **)&st->sources, &cap, st->n_sources + 1, sizeof(*s)) < 0) {
			sqlite3_finalize(q);
			return ds_err_fallback(err, -ENOMEM);
		}
		s = &st->sources[st->n_sources++];
		s->name = dup_col(q, 0);
		s->cluster = dup_col(q, 1);
		s->epoch = (uint64_t)sqlite3_column_int64(q, 2);
		s->committed_seq = (uint64_t)sqlite3_column_int64(q, 3);
		s->last_contact = sqlite3_column_int64(q, 4);
		s->unapplied = (uint64_t)sqlite3_column_int64(q, 5);
		s->objects = (uint64_t)sqlite3_column_int64(q, 6);
		s->oldest_unapplied = sqlite3_column_int64(q, 7);
	}
	sqlite3_finalize(q);
	return rc == SQLITE_DONE ? 0 : fail(db, "sources", err);
}

static int read_states(sqlite3 *db, ds_ledger_status *st, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	int rc = sqlite3_prepare_v2(db, "SELECT state, count(*) FROM object_state GROUP BY state",
				    -1, &q, NULL);

	if (rc != SQLITE_OK)
		return fail(db, "states", err);
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(q, 0);
		for (int s = 1; name && s < DS_APPLY_STATE_MAX; s++)
			if (strcmp(name, ds_apply_state_name((enum ds_apply_state)s)) == 0)
				st->states[s] = (uint64_t)sqlite3_column_int64(q, 1);
	}
	sqlite3_finalize(q);
	return rc == SQLITE_DONE ? 0 : fail(db, "states", err);
}

static int read_items(sqlite3 *db, ds_ledger_status *st, size_t max, ds_err *err)
{
	size_t cap = 0;
	sqlite3_stmt *q = NULL;
	int rc = sqlite3_prepare_v2(
	    db,
	    "SELECT source, kind, coalesce(target_namespace, namespace), coalesce(target_name, "
	    "name),"
	    " state, coalesce(reason, ''), coalesce(updated_at, 0) FROM object_state"
	    " WHERE state IN ('waiting', 'failed') ORDER BY updated_at DESC, id DESC",
	    -1, &q, NULL);

	if (rc != SQLITE_OK)
		return fail(db, "objects", err);
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		ds_ledger_item *it;

		if (st->n_items >= max) {
			st->more_items++;
			continue;
		}
		if (ds_grow((void **)&st->items, &cap, st->n_items + 1, sizeof(*it)) < 0) {
			sqlite3_finalize(q);
			return ds_err_fallback(err, -ENOMEM);
		}
		it = &st->items[st->n_items++];
		it->source = dup_col(q, 0);
		it->kind = dup_col(q, 1);
		it->ns = dup_col(q, 2);
		it->name = dup_col(q, 3);
		it->state = strcmp((const char *)sqlite3_column_text(q, 4), "failed") == 0
				? DS_APPLY_FAILED
				: DS_APPLY_WAITING;
		it->reason = dup_col(q, 5);
		it->updated_at = sqlite3_column_int64(q, 6);
	}
	sqlite3_finalize(q);
	return rc == SQLITE_DONE ? 0 : fail(db, "objects", err);
}

/* The verifications table (verify.c writes it): totals, then the rows, NOT verified first. */
static int read_verifications(sqlite3 *db, ds_ledger_status *st, size_t max, ds_err *err)
{
	size_t cap = 0;
	sqlite3_stmt *q = NULL;
	int rc = sqlite3_prepare_v2(
	    db,
	    "SELECT kind, namespace, name, coalesce(form, ''), verified, coalesce(reason, ''),"
	    " checked_at, coalesce(seconds, 0) FROM verifications"
	    " ORDER BY verified, namespace, kind, name",
	    -1, &q, NULL);

	if (rc != SQLITE_OK)
		return fail(db, "verifications", err);
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		ds_ledger_verification *v;
		bool ok = sqlite3_column_int(q, 4) != 0;
		int64_t at = sqlite3_column_int64(q, 6);

		if (ok)
			st->verified++;
		else
			st->not_verified++;
		if (at > st->last_checked)
			st->last_checked = at;
		if (st->n_verifications >= max)
			continue;
		if (ds_grow((void **)&st->verifications, &cap, st->n_verifications + 1,
			    sizeof(*v)) < 0) {
			sqlite3_finalize(q);
			return ds_err_fallback(err, -ENOMEM);
		}
		v = &st->verifications[st->n_verifications++];
		v->kind = dup_col(q, 0);
		v->ns = dup_col(q, 1);
		v->name = dup_col(q, 2);
		v->form = dup_col(q, 3);
		v->verified = ok;
		v->reason = dup_col(q, 5);
		v->checked_at = at;
		v->seconds = sqlite3_column_double(q, 7);
	}
	sqlite3_finalize(q);
	return rc == SQLITE_DONE ? 0 : fail(db, "verifications", err);
}

/* The namespace entry of name in st (added, sorted, when missing), or NULL on ENOMEM. */
static ds_ledger_namespace *ns_entry(ds_ledger_status *st, size_t *cap, const char *name)
{
	size_t at = 0;
	ds_ledger_namespace *e;

	while (at < st->n_namespaces && strcmp(st->namespaces[at].name, name) < 0)
		at++;
	if (at < st->n_namespaces && strcmp(st->namespaces[at].name, name) == 0)
		return &st->namespaces[at];
	if (ds_grow((void **)&st->namespaces, cap, st->n_namespaces + 1, sizeof(*e)) < 0)
		return NULL;
	memmove(st->namespaces + at + 1, st->namespaces + at, (st->n_namespaces - at) * sizeof(*e));
	e = &st->namespaces[at];
	memset(e, 0, sizeof(*e));
	e->name = strdup(name);
	e->changed_by = strdup("");
	st->n_namespaces++;
	if (!e->name || !e->changed_by)
		return NULL;
	return e;
}

static int read_namespaces(sqlite3 *db, ds_ledger_status *st,
			   const char *(*map_ns)(void *, const char *), void *ud, bool modes,
			   ds_err *err)
{
	size_t cap = 0;
	sqlite3_stmt *q = NULL;
	int rc = sqlite3_prepare_v2(
	    db,
	    "SELECT target_name IS NULL, CASE WHEN target_name IS NOT NULL THEN"
	    " target_namespace ELSE namespace END AS ns, count(*), sum(state = 'held')"
	    " FROM object_state WHERE op = 1 AND ns IS NOT NULL AND ns != '' GROUP BY 1, 2",
	    -1, &q, NULL);

	if (rc != SQLITE_OK)
		return fail(db, "namespaces", err);
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		const char *ns = (const char *)sqlite3_column_text(q, 1);
		ds_ledger_namespace *e;

		if (sqlite3_column_int(q, 0) && map_ns)
			ns = map_ns(ud, ns);
		e = ns_entry(st, &cap, ns);
		if (!e) {
			sqlite3_finalize(q);
			return ds_err_fallback(err, -ENOMEM);
		}
		e->objects += (uint64_t)sqlite3_column_int64(q, 2);
		e->held += (uint64_t)sqlite3_column_int64(q, 3);
	}
	sqlite3_finalize(q);
	if (rc != SQLITE_DONE)
		return fail(db, "namespaces", err);
	if (!modes)
		return 0;
	rc = sqlite3_prepare_v2(db,
				"SELECT namespace, mode, since, coalesce(changed_by, '')"
				" FROM namespace_modes",
				-1, &q, NULL);
	if (rc != SQLITE_OK)
		return fail(db, "namespace modes", err);
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		ds_ledger_namespace *e =
		    ns_entry(st, &cap, (const char *)sqlite3_column_text(q, 0));
		const char *mode = (const char *)sqlite3_column_text(q, 1);

		if (!e) {
			sqlite3_finalize(q);
			return ds_err_fallback(err, -ENOMEM);
		}
		e->recorded = true;
		e->mode = mode && strcmp(mode, "standby") == 0 ? DS_MODE_STANDBY : DS_MODE_MIGRATE;
		e->since = sqlite3_column_int64(q, 2);
		free(e->changed_by);
		e->changed_by = dup_col(q, 3);
		if (!e->changed_by) {
			sqlite3_finalize(q);
			return ds_err_fallback(err, -ENOMEM);
		}
	}
	sqlite3_finalize(q);
	return rc == SQLITE_DONE ? 0 : fail(db, "namespace modes", err);
}

int ds_ledger_status_read(const char *path, size_t max_items, ds_ledger_status **out, ds_err *err)
{
	return ds_ledger_status_read_mapped(path, max_items, NULL, NULL, out, err);
}

int ds_ledger_status_read_mapped(const char *path, size_t max_items,
				 const char *(*map_ns)(void *ud, const char *source_ns),
				 void *map_ud, ds_ledger_status **out, ds_err *err)
{
	ds_ledger_status *st;
	ds_store *store = NULL;
	sqlite3 *db = NULL;
	int rc;

	if (access(path, F_OK) != 0) {
		ds_err_set(err,
			   "no ledger at %s: drasync-target run has not started with this "
			   "stateDir yet",
			   path);
		return -ENOENT;
	}
	st = calloc(1, sizeof(*st));
	if (!st)
		return ds_err_fallback(err, -ENOMEM);
	rc = ds_ledger_open(&store, path, DS_STORE_READONLY, err);
	if (rc < 0)
		goto out;
	db = ds_store_db(store);
	if (!ds_store_has_table(store, "sources") || !ds_store_has_table(store, "object_state"))
		goto out; /* nothing received or applied yet */
	rc = sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) == SQLITE_OK ? 0 : fail(db, "begin", err);
	if (rc == 0)
		rc = read_sources(db, st, err);
	if (rc == 0)
		rc = read_states(db, st, err);
	if (rc == 0)
		rc = read_items(db, st, max_items, err);
	if (rc == 0)
		rc = read_namespaces(db, st, map_ns, map_ud,
				     ds_store_has_table(store, "namespace_modes"), err);
	if (rc == 0 && ds_store_has_table(store, "verifications"))
		rc = read_verifications(db, st, max_items, err);
	ds_store_rollback(store); /* a read: nothing to commit */
out:
	ds_store_free(store);
	if (rc < 0) {
		ds_ledger_status_free(st);
		return ds_err_fallback(err, rc);
	}
	*out = st;
	return 0;
}

void ds_ledger_status_free(ds_ledger_status *st)
{
	if (!st)
		return;
	for (size_t i = 0; i < st->n_sources; i++) {
		free(st->sources[i].name);
		free(st->sources[i].cluster);
	}
	for (size_t i = 0; i < st->n_items; i++) {
		free(st->items[i].source);
		free(st->items[i].kind);
		free(st->items[i].ns);
		free(st->items[i].name);
		free(st->items[i].reason);
	}
	for (size_t i = 0; i < st->n_verifications; i++) {
		free(st->verifications[i].kind);
		free(st->verifications[i].ns);
		free(st->verifications[i].name);
		free(st->verifications[i].form);
		free(st->verifications[i].reason);
	}
	for (size_t i = 0; i < st->n_namespaces; i++) {
		free(st->namespaces[i].name);
		free(st->namespaces[i].changed_by);
	}
	free(st->namespaces);
	free(st->sources);
	free(st->items);
	free(st->verifications);
	free(st);
}
