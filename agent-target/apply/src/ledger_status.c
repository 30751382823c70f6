#include "drasync/ledger_status.h"

#include "drasync/ledger_identity.h"

#include "drasync/buf.h"

#include "drasync/ledger_compact.h"
#include "drasync/ledger_records.h"
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

struct sources {
	ds_ledger_status *st;
	size_t cap;
};

static int add_source(void *ud, const ds_ledger_source_row *row)
{
	struct sources *c = ud;
	ds_ledger_source *s;

	if (ds_grow((void **)&c->st->sources, &c->cap, c->st->n_sources + 1, sizeof(*s)) < 0)
		return -ENOMEM;
	s = &c->st->sources[c->st->n_sources++];
	memset(s, 0, sizeof(*s));
	s->name = strdup(row->name ? row->name : "");
	s->cluster = strdup(row->cluster ? row->cluster : "");
	s->epoch = (uint64_t)row->epoch;
	s->committed_seq = (uint64_t)row->committed_seq;
	s->last_contact = row->updated_at;
	return s->name && s->cluster ? 0 : -ENOMEM;
}

static int committed_at(void *ud, const ds_ledger_record *rec)
{
	*(int64_t *)ud = rec->committed_at;
	return 0;
}

/* The earlier of two times, 0 meaning none. */
static int64_t earlier(int64_t a, int64_t b)
{
	return !a ? b : !b ? a : a < b ? a : b;
}

/*
 * The backlog per source: records past the apply cursor (read through the
 * store), and its pending objects; the oldest of them, when it was committed.
 */
static int read_sources(ds_store *store, ds_ledger_status *st, ds_err *err)
{
	struct sources c = {.st = st};
	ds_ledger_records *r = NULL;
	sqlite3 *db = ds_store_db(store);
	sqlite3_stmt *q = NULL, *objs = NULL;
	int64_t cursor = 0;
	int rc;

	rc = ds_ledger_records_new(store, &r, err);
	if (rc == 0)
		rc = ds_ledger_sources_each(r, add_source, &c, err);
	if (rc >= 0)
		rc = ds_store_prepare(store, "SELECT record_id FROM apply_cursor WHERE id = 1", &q,
				      err);
	if (rc >= 0 && sqlite3_step(q) == SQLITE_ROW)
		cursor = sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	if (rc >= 0)
		rc = ds_store_prepare(store,
				      "SELECT count(*), coalesce(sum(state = 'pending'), 0),"
				      " min(CASE WHEN state = 'pending' THEN record_id END),"
				      " (SELECT coalesce(sum(length(payload)), 0) FROM records"
				      "  WHERE source = ?1)"
				      " FROM object_state WHERE source = ?1",
				      &objs, err);
	if (rc >= 0)
		rc = ds_ledger_records_count(r, &st->records, err);
	for (size_t i = 0; rc >= 0 && i < st->n_sources; i++) {
		ds_ledger_source *s = &st->sources[i];
		uint64_t records = 0;
		int64_t oldest = 0, pending_at = 0;

		rc = ds_ledger_records_backlog(r, cursor, s->name, &records, &oldest, err);
		if (rc < 0)
			break;
		sqlite3_reset(objs);
		sqlite3_bind_text(objs, 1, s->name, -1, SQLITE_STATIC);
		rc = sqlite3_step(objs);
		if (rc != SQLITE_ROW) {
			rc = fail(db, "sources", err);
			break;
		}
		s->objects = (uint64_t)sqlite3_column_int64(objs, 0);
		s->ledger_bytes = (uint64_t)sqlite3_column_int64(objs, 3);
		s->unapplied = records + (uint64_t)sqlite3_column_int64(objs, 1);
		rc = 0;
		if (sqlite3_column_type(objs, 2) != SQLITE_NULL)
			rc = ds_ledger_record_get(r, sqlite3_column_int64(objs, 2), committed_at,
						  &pending_at, err);
		s->oldest_unapplied = earlier(oldest, pending_at);
	}
	sqlite3_finalize(objs);
	ds_ledger_records_free(r);
	return rc < 0 ? ds_err_fallback(err, rc) : 0;
}

void ds_ledger_status_quotas(ds_ledger_status *st, const ds_target_config *cfg)
{
	ds_quota_total t = {.max_unapplied = ds_target_config_max_unapplied(cfg),
			    .sources = st->n_sources};

	for (size_t i = 0; i < st->n_sources; i++)
		t.backlog += st->sources[i].unapplied;
	for (size_t i = 0; i < st->n_sources; i++) {
		ds_ledger_source *s = &st->sources[i];
		ds_quota_usage u = {.backlog = s->unapplied, .ledger_bytes = s->ledger_bytes};

		ds_target_config_source_limits(cfg, s->name, &u.limits.max_unapplied,
					       &u.limits.max_ledger_bytes);
		s->max_unapplied = u.limits.max_unapplied;
		s->max_ledger_bytes = u.limits.max_ledger_bytes;
		s->throttled = ds_quota_state(&u, &t, DS_QUOTA_NONE);
	}
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
	    " WHERE state IN ('waiting', 'failed', 'refused') ORDER BY updated_at DESC, id DESC",
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
		it->state = DS_APPLY_FAILED;
		for (int s = 1; s < DS_APPLY_STATE_MAX; s++)
			if (strcmp((const char *)sqlite3_column_text(q, 4),
				   ds_apply_state_name((enum ds_apply_state)s)) == 0)
				it->state = (enum ds_apply_state)s;
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

/* The relocations table (relocation.c): newest first, at most max. */
static int read_relocations(sqlite3 *db, ds_ledger_status *st, size_t max, ds_err *err)
{
	size_t cap = 0;
	sqlite3_stmt *q = NULL;
	int rc =
	    sqlite3_prepare_v2(db,
			       "SELECT source, namespace, coalesce(target_namespace, ''), state,"
			       " coalesce(message, ''), requested_at, coalesce(finished_at, 0)"
			       " FROM relocations ORDER BY id DESC LIMIT ?",
			       -1, &q, NULL);

	if (rc != SQLITE_OK)
		return fail(db, "relocations", err);
	sqlite3_bind_int64(q, 1, (sqlite3_int64)max);
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		ds_ledger_relocation *r;

		if (ds_grow((void **)&st->relocations, &cap, st->n_relocations + 1, sizeof(*r)) <
		    0) {
			sqlite3_finalize(q);
			return ds_err_fallback(err, -ENOMEM);
		}
		r = &st->relocations[st->n_relocations++];
		r->source = dup_col(q, 0);
		r->ns = dup_col(q, 1);
		r->target_ns = dup_col(q, 2);
		r->state = dup_col(q, 3);
		r->message = dup_col(q, 4);
		r->requested_at = sqlite3_column_int64(q, 5);
		r->finished_at = sqlite3_column_int64(q, 6);
		if (!r->source || !r->ns || !r->target_ns || !r->state || !r->message) {
			sqlite3_finalize(q);
			return ds_err_fallback(err, -ENOMEM);
		}
	}
	sqlite3_finalize(q);
	return rc == SQLITE_DONE ? 0 : fail(db, "relocations", err);
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
	st->bytes = ds_ledger_file_bytes(path);
	rc = ds_ledger_open(&store, path, DS_STORE_READONLY, err);
	if (rc < 0)
		goto out;
	db = ds_store_db(store);
	ds_store_info_get(store, DS_LEDGER_INFO_ID, st->ledger_id, sizeof(st->ledger_id));
	ds_store_info_get(store, DS_LEDGER_INFO_CREATED, st->ledger_created,
			  sizeof(st->ledger_created));
	if (!ds_store_has_table(store, "sources") || !ds_store_has_table(store, "object_state"))
		goto out; /* nothing received or applied yet */
	rc = sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) == SQLITE_OK ? 0 : fail(db, "begin", err);
	if (rc == 0)
		rc = read_sources(store, st, err);
	if (rc == 0)
		rc = read_states(db, st, err);
	if (rc == 0)
		rc = read_items(db, st, max_items, err);
	if (rc == 0)
		rc = read_namespaces(db, st, map_ns, map_ud,
				     ds_store_has_table(store, "namespace_modes"), err);
	if (rc == 0 && ds_store_has_table(store, "verifications"))
		rc = read_verifications(db, st, max_items, err);
	if (rc == 0 && ds_store_has_table(store, "relocations"))
		rc = read_relocations(db, st, max_items, err);
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
	for (size_t i = 0; i < st->n_relocations; i++) {
		free(st->relocations[i].source);
		free(st->relocations[i].ns);
		free(st->relocations[i].target_ns);
		free(st->relocations[i].state);
		free(st->relocations[i].message);
	}
	free(st->relocations);
	free(st->namespaces);
	free(st->sources);
	free(st->items);
	free(st->verifications);
	free(st);
}
