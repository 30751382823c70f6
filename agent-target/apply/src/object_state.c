#include "object_state_internal.h"

#include "drasync/buf.h"
#include "drasync/clock.h"
#include "drasync/schemas.h"
#include "drasync/string_table.h"
#include "drasync/wire.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The state is stored by name so that operators can read the table with sqlite3. */
static const char *const ds_apply_state_table[DS_APPLY_STATE_MAX] = {
    [DS_APPLY_PENDING] = "pending", [DS_APPLY_APPLIED] = "applied", [DS_APPLY_WAITING] = "waiting",
    [DS_APPLY_FAILED] = "failed",   [DS_APPLY_HELD] = "held",	    [DS_APPLY_SKIPPED] = "skipped",
    [DS_APPLY_DELETED] = "deleted", [DS_APPLY_KEPT] = "kept",	    [DS_APPLY_REFUSED] = "refused",
};
DS_DEFINE_STRING_TABLE_LOOKUP(ds_apply_state, enum ds_apply_state)

/*
 * The statements of the per-object calls, by their explicit handle id: the
 * SQL parser took a sixth of the applier's CPU when every object prepared
 * its statements anew.
 */
int ds_object_state_keep(ds_object_state *st, enum ds_os_stmt id, const char *sql, sqlite3_stmt **q,
			 ds_err *err)
{
	return ds_store_stmt_lazy(st->store, &st->kept[id], sql, q, err);
}

/* Done with a statement of ds_object_state_keep(): reset, so that it lets its locks go. */
void ds_object_state_unkeep(int kept_rc, sqlite3_stmt *q)
{
	(void)kept_rc;
	sqlite3_reset(q);
}

void ds_object_state_bind_text(sqlite3_stmt *st, int i, const char *s)
{
	if (s)
		sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(st, i);
}

char *ds_object_state_col_dup(sqlite3_stmt *q, int i)
{
	const char *s = (const char *)sqlite3_column_text(q, i);

	return s ? strdup(s) : NULL;
}

const char *ds_apply_state_name(enum ds_apply_state s)
{
	const char *name = ds_apply_state_to_string(s);

	return name ? name : "unknown";
}

const char *ds_object_state_key(const char *api_version, const char *kind, const char *ns,
				const char *name, char *buf, size_t size)
{
	const char *slash = api_version ? strchr(api_version, '/') : NULL;
	int glen = slash ? (int)(slash - api_version) : 4;

	snprintf(buf, size, "%.*s/%s/%s/%s", glen, slash ? api_version : "core", kind ? kind : "",
		 ns ? ns : "", name ? name : "");
	return buf;
}

int ds_object_state_open(ds_object_state **out, const char *path, ds_err *err)
{
	ds_object_state *st = calloc(1, sizeof(*st));
	int rc;

	if (!st)
		return ds_err_fallback(err, -ENOMEM);
	rc = ds_ledger_open(&st->store, path, 0, err);
	if (rc == 0) {
		st->db = ds_store_db(st->store);
		rc = ds_ledger_records_new(st->store, &st->records, err);
	}
	if (rc < 0) {
		ds_object_state_free(st);
		return ds_err_fallback(err, rc);
	}
	*out = st;
	return 0;
}

void ds_object_state_free(ds_object_state *st)
{
	if (!st)
		return;
	ds_ledger_records_free(st->records);
	ds_store_free(st->store); /* finalizes the kept statements */
	free(st->messages);
	free(st);
}

/* The columns every row query selects, in this order. */
#define ROW_COLUMNS                                                                                \
	"o.id, o.source, o.key, o.api_version, o.kind, o.namespace, o.name, o.record_id, o.seq,"   \
	" o.op, o.content_hash, o.applied_hash, o.applied_record_id, o.target_api_version,"        \
	" o.target_namespace, o.target_name, o.state, o.reason, o.attempts, o.next_try_at"
#define ROW_NCOL 20

/*
 * A row of ROW_COLUMNS. A state this version does not know (a newer drasync
 * wrote it) is -EPROTO, never taken for pending: that would apply the object
 * again behind the back of whatever decided it.
 */
static int read_row(sqlite3_stmt *q, ds_object_state_row *r, ds_err *err)
{
	const char *state = (const char *)sqlite3_column_text(q, 16);
	int s = ds_apply_state_from_string(state);

	memset(r, 0, sizeof(*r));
	if (s < 0) {
		ds_err_set(err,
			   "object_state row %lld (%s) has the state '%s', which this drasync does "
			   "not know: was the ledger written by a newer version?",
			   (long long)sqlite3_column_int64(q, 0),
			   sqlite3_column_text(q, 2) ? (const char *)sqlite3_column_text(q, 2) : "",
			   state ? state : "(null)");
		return -EPROTO;
	}
	r->id = sqlite3_column_int64(q, 0);
	r->source = ds_object_state_col_dup(q, 1);
	r->key = ds_object_state_col_dup(q, 2);
	r->api_version = ds_object_state_col_dup(q, 3);
	r->kind = ds_object_state_col_dup(q, 4);
	r->ns = ds_object_state_col_dup(q, 5);
	r->name = ds_object_state_col_dup(q, 6);
	r->record_id = sqlite3_column_int64(q, 7);
	r->seq = (uint64_t)sqlite3_column_int64(q, 8);
	r->op = (enum ds_record_op)sqlite3_column_int(q, 9);
	if (sqlite3_column_bytes(q, 10) == DS_HASH_LEN)
		memcpy(r->content_hash, sqlite3_column_blob(q, 10), DS_HASH_LEN);
	if (sqlite3_column_bytes(q, 11) == DS_HASH_LEN) {
		memcpy(r->applied_hash, sqlite3_column_blob(q, 11), DS_HASH_LEN);
		r->has_applied_hash = true;
	}
	r->applied_record_id = sqlite3_column_int64(q, 12);
	r->target_api_version = ds_object_state_col_dup(q, 13);
	r->target_ns = ds_object_state_col_dup(q, 14);
	r->target_name = ds_object_state_col_dup(q, 15);
	r->state = (enum ds_apply_state)s;
	r->reason = ds_object_state_col_dup(q, 17);
	r->attempts = sqlite3_column_int(q, 18);
	r->next_try_at = sqlite3_column_int64(q, 19);
	if (!r->source || !r->key) {
		ds_object_state_row_dispose(r);
		return -ENOMEM;
	}
	return 0;
}

/* Where a row goes on the target: where it was applied, else its source namespace mapped. */
static const char *row_target_ns(const char *target_name, const char *target_ns, const char *ns,
				 const char *(*map_ns)(void *, const char *), void *ud)
{
	if (target_name)
		return target_ns && target_ns[0] ? target_ns : NULL;
	if (!ns || !ns[0])
		return NULL;
	return map_ns ? map_ns(ud, ns) : ns;
}

/* Whether the row q is on (ROW_COLUMNS first) is in scope (NULL: every row). */
static bool in_scope(const ds_object_state_scope *scope, sqlite3_stmt *q)
{
	const char *tns;

	if (!scope)
		return true;
	tns = row_target_ns((const char *)sqlite3_column_text(q, 15),
			    (const char *)sqlite3_column_text(q, 14),
			    (const char *)sqlite3_column_text(q, 5), scope->map_ns, scope->map_ud);
	for (size_t i = 0; tns && i < scope->n; i++)
		if (strcmp(scope->ns[i], tns) == 0)
			return true;
	return false;
}

/* A picked row's record: its payload, compression, source uid and cluster, copied. */
static int take_payload(void *ud, const ds_ledger_record *rec)
{
	ds_object_state_row *r = ud;

	if (rec->payload_len > 0) {
		r->payload = malloc(rec->payload_len);
		if (!r->payload)
			return -ENOMEM;
		memcpy(r->payload, rec->payload, rec->payload_len);
		r->payload_len = rec->payload_len;
	}
	r->zstd = rec->compression;
	r->source_uid = rec->source_uid ? strdup(rec->source_uid) : NULL;
	r->source_cluster = rec->cluster ? strdup(rec->cluster) : NULL;
	if ((rec->source_uid && !r->source_uid) || (rec->cluster && !r->source_cluster))
		return -ENOMEM;
	return 0;
}

int ds_object_state_pick(ds_object_state *st, int64_t now_ms, size_t max,
			 ds_object_state_row **rows, size_t *n, ds_err *err)
{
	return ds_object_state_pick_in(st, now_ms, max, NULL, rows, n, err);
}

int ds_object_state_pick_in(ds_object_state *st, int64_t now_ms, size_t max,
			    const ds_object_state_scope *scope, ds_object_state_row **rows,
			    size_t *n, ds_err *err)
{
	ds_object_state_row *v = NULL;
	size_t cap = 0, len = 0, bytes = 0;
	sqlite3_stmt *q = NULL;
	int rc = SQLITE_DONE;

	rc = ds_store_prepare(st->store,
			      "SELECT " ROW_COLUMNS " FROM object_state o"
			      " WHERE o.state IN ('pending', 'waiting')"
			      " AND (o.next_try_at <= ?1 OR (?3 > 0 AND o.next_try_at = ?3))"
			      " ORDER BY o.id LIMIT ?2",
			      &q, err);
	if (rc < 0)
		goto out;
	sqlite3_bind_int64(q, 1, now_ms);
	sqlite3_bind_int64(q, 3, scope ? scope->held_at : 0);
	/* A scope is filtered here, by the mapping: every due row is looked at. */
	sqlite3_bind_int64(q, 2, scope ? -1 : (sqlite3_int64)max);
	while (len < max && bytes < DS_OBJECT_STATE_PICK_BYTES &&
	       (rc = sqlite3_step(q)) == SQLITE_ROW) {
		ds_object_state_row *r;
		int got;

		if (!in_scope(scope, q))
			continue;
		if (ds_grow((void **)&v, &cap, len + 1, sizeof(*v)) < 0) {
			rc = -ENOMEM;
			goto out;
		}
		r = &v[len];
		got = read_row(q, r, err);
		/* Its record's payload, through the store: a row whose record is
		 * gone has nothing to apply. */
		if (got >= 0)
			got = ds_ledger_record_get(st->records, r->record_id, take_payload, r, err);
		if (got <= 0) {
			ds_object_state_row_dispose(r);
			if (got < 0) {
				rc = got;
				goto out;
			}
			continue;
		}
		len++;
		bytes += ds_wire_payload_plain_len(
		    &(ds_wire_blob){.data = r->payload, .len = r->payload_len}, r->zstd);
	}
	/* rc is the last step's: a row (stopped at max or at the byte bound, the
	 * rest is for the next pick), the end, or an error; 0 when none ran. */
	rc = rc == SQLITE_OK || rc == SQLITE_DONE || rc == SQLITE_ROW
		 ? 0
		 : ds_store_fail(st->store, rc, "object_state pick", err);
out:
	sqlite3_finalize(q);
	if (rc < 0) {
		ds_object_state_rows_free(v, len);
		return ds_err_fallback(err, rc);
	}
	*rows = v;
	*n = len;
	return 0;
}

int ds_object_state_begin(ds_object_state *st, ds_err *err)
{
	return ds_err_fallback(err, ds_store_exec(st->store, "BEGIN IMMEDIATE", err));
}

int ds_object_state_commit(ds_object_state *st, ds_err *err)
{
	int rc = ds_store_exec(st->store, "COMMIT", err);

	if (rc < 0)
		ds_store_exec(st->store, "ROLLBACK", NULL);
	return ds_err_fallback(err, rc);
}

void ds_object_state_rollback(ds_object_state *st)
{
	if (sqlite3_get_autocommit(st->db) == 0)
		ds_store_exec(st->store, "ROLLBACK", NULL);
}

int ds_object_state_reconsider(ds_object_state *st, ds_err *err)
{
	return ds_err_fallback(
	    err,
	    ds_store_exec(
		st->store,
		"UPDATE object_state SET state = 'pending', attempts = 0, next_try_at = 0"
		" WHERE (op = 1 AND state IN ('applied', 'waiting', 'failed', 'held', 'skipped',"
		" 'refused')) OR (op = 2 AND state = 'refused')",
		err));
}

/* The rows of upserts (ROW_COLUMNS) in scope, one call of fn each; fn may stop with < 0. */
static int each_in(ds_object_state *st, const char *where, const ds_object_state_scope *scope,
		   int (*fn)(void *ud, sqlite3_stmt *q), void *ud, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	char sql[1024];
	int rc;

	snprintf(sql, sizeof(sql),
		 "SELECT " ROW_COLUMNS " FROM object_state o WHERE %s ORDER BY o.id", where);
	rc = ds_store_prepare(st->store, sql, &q, err);
	if (rc < 0)
		return rc;
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		if (!in_scope(scope, q))
			continue;
		rc = fn(ud, q);
		if (rc < 0)
			break;
	}
	if (rc == SQLITE_DONE)
		rc = 0;
	else if (rc > 0)
		rc = ds_store_fail(st->store, rc, "object_state scan", err);
	sqlite3_finalize(q);
	return rc;
}

struct id_list {
	int64_t *v;
	size_t n, cap;
};

static int collect_id(void *ud, sqlite3_stmt *q)
{
	struct id_list *l = ud;

	if (ds_grow((void **)&l->v, &l->cap, l->n + 1, sizeof(*l->v)) < 0)
		return -ENOMEM;
	l->v[l->n++] = sqlite3_column_int64(q, 0);
	return 0;
}

int ds_object_state_reconsider_in(ds_object_state *st, const ds_object_state_scope *scope,
				  ds_err *err)
{
	struct id_list ids = {0};
	sqlite3_stmt *up = NULL;
	int rc;

	/* IMMEDIATE: an applier cannot record a pass's outcome between our read and write. */
	rc = ds_store_exec(st->store, "BEGIN IMMEDIATE", err);
	if (rc < 0)
		return ds_err_fallback(err, rc);
	rc = each_in(st,
		     "o.op = 1 AND o.state IN ('applied', 'waiting', 'failed', 'held', 'skipped',"
		     " 'pending')",
		     scope, collect_id, &ids, err);
	if (rc == 0)
		rc = ds_store_prepare(
		    st->store,
		    "UPDATE object_state SET state = 'pending', attempts = 0, next_try_at = ?2"
		    " WHERE id = ?1",
		    &up, err);
	for (size_t i = 0; rc == 0 && i < ids.n; i++) {
		sqlite3_reset(up);
		sqlite3_bind_int64(up, 1, ids.v[i]);
		sqlite3_bind_int64(up, 2, scope ? scope->held_at : 0);
		rc = sqlite3_step(up);
		rc = rc == SQLITE_DONE
			 ? 0
			 : ds_store_fail(st->store, rc, "object_state reconsider", err);
	}
	sqlite3_finalize(up);
	free(ids.v);
	if (rc < 0) {
		ds_store_exec(st->store, "ROLLBACK", NULL);
		return ds_err_fallback(err, rc);
	}
	rc = ds_store_exec(st->store, "COMMIT", err);
	if (rc < 0) {
		ds_store_exec(st->store, "ROLLBACK", NULL);
		return ds_err_fallback(err, rc);
	}
	return (int)ids.n;
}

struct due {
	size_t pending, waiting;
	int64_t next_at;
	int64_t held_at; /* due now for the scope's applier */
};

static int count_due(void *ud, sqlite3_stmt *q)
{
	struct due *d = ud;
	int64_t at = sqlite3_column_int64(q, 19);

	if (ds_apply_state_from_string((const char *)sqlite3_column_text(q, 16)) ==
	    DS_APPLY_WAITING) {
		d->waiting++;
		return 0;
	}
	d->pending++;
	if (d->held_at && at == d->held_at)
		at = 0;
	if (!d->next_at || at < d->next_at)
		d->next_at = at ? at : 1;
	return 0;
}

int ds_object_state_due_in(ds_object_state *st, const ds_object_state_scope *scope, size_t *pending,
			   size_t *waiting, int64_t *next_at, ds_err *err)
{
	struct due d = {.held_at = scope ? scope->held_at : 0};
	int rc = each_in(st, "o.state IN ('pending', 'waiting')", scope, count_due, &d, err);

	if (rc < 0)
		return ds_err_fallback(err, rc);
	if (pending)
		*pending = d.pending;
	if (waiting)
		*waiting = d.waiting;
	if (next_at)
		*next_at = d.next_at;
	return 0;
}

struct strings {
	char **v;
	size_t n, cap;
};

/* Add s to the sorted set l. @return 0, -ENOMEM */
static int strings_add(struct strings *l, const char *s)
{
	size_t at = 0;
	char *dup;

	while (at < l->n && strcmp(l->v[at], s) < 0)
		at++;
	if (at < l->n && strcmp(l->v[at], s) == 0)
		return 0;
	if (ds_grow((void **)&l->v, &l->cap, l->n + 1, sizeof(*l->v)) < 0 || !(dup = strdup(s)))
		return -ENOMEM;
	memmove(l->v + at + 1, l->v + at, (l->n - at) * sizeof(*l->v));
	l->v[at] = dup;
	l->n++;
	return 0;
}

void ds_object_state_strings_free(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

struct ns_walk {
	struct strings out;
	const char *(*map_ns)(void *, const char *);
	void *map_ud;
};

static int add_namespace(void *ud, sqlite3_stmt *q)
{
	struct ns_walk *w = ud;
	const char *tns = row_target_ns(
	    (const char *)sqlite3_column_text(q, 15), (const char *)sqlite3_column_text(q, 14),
	    (const char *)sqlite3_column_text(q, 5), w->map_ns, w->map_ud);

	return tns ? strings_add(&w->out, tns) : 0;
}

int ds_object_state_namespaces(ds_object_state *st, const char *(*map_ns)(void *, const char *),
			       void *map_ud, char ***out, size_t *n, ds_err *err)
{
	struct ns_walk w = {.map_ns = map_ns, .map_ud = map_ud};
	int rc = each_in(st, "o.op = 1", NULL, add_namespace, &w, err);

	if (rc < 0) {
		ds_object_state_strings_free(w.out.v, w.out.n);
		return ds_err_fallback(err, rc);
	}
	*out = w.out.v;
	*n = w.out.n;
	return 0;
}

static int add_source(void *ud, sqlite3_stmt *q)
{
	return strings_add(ud, (const char *)sqlite3_column_text(q, 1));
}

int ds_object_state_sources_in(ds_object_state *st, const ds_object_state_scope *scope, char ***out,
			       size_t *n, ds_err *err)
{
	struct strings l = {0};
	int rc = each_in(st, "o.op = 1", scope, add_source, &l, err);

	if (rc < 0) {
		ds_object_state_strings_free(l.v, l.n);
		return ds_err_fallback(err, rc);
	}
	*out = l.v;
	*n = l.n;
	return 0;
}

struct row_list {
	ds_object_state_row *v;
	size_t n, cap;
};

static int collect_row(void *ud, sqlite3_stmt *q)
{
	struct row_list *l = ud;
	int rc;

	if (ds_grow((void **)&l->v, &l->cap, l->n + 1, sizeof(*l->v)) < 0)
		return -ENOMEM;
	rc = read_row(q, &l->v[l->n], NULL);
	if (rc == 0)
		l->n++;
	return rc;
}

int ds_object_state_list_in(ds_object_state *st, const ds_object_state_scope *scope,
			    ds_object_state_row **rows, size_t *n, ds_err *err)
{
	struct row_list l = {0};
	int rc = each_in(st, "o.op = 1", scope, collect_row, &l, err);

	if (rc < 0) {
		ds_object_state_rows_free(l.v, l.n);
		return ds_err_fallback(err, rc);
	}
	*rows = l.v;
	*n = l.n;
	return 0;
}

int ds_object_state_wake_waiting(ds_object_state *st, ds_err *err)
{
	return ds_err_fallback(
	    err,
	    ds_store_exec(st->store,
			  "UPDATE object_state SET next_try_at = 0 WHERE state = 'waiting'", err));
}

int ds_object_state_target_owner(ds_object_state *st, const char *source, const char *kind,
				 const char *ns, const char *name, char *owner, size_t size,
				 ds_err *err)
{
	sqlite3_stmt *q = NULL;
	int k = ds_object_state_keep(
		st, OS_STMT_OWNER,
		"SELECT source FROM object_state WHERE kind = ? AND target_name = ?"
		" AND target_namespace IS ? AND (?4 IS NULL OR source != ?4)"
		" AND applied_hash IS NOT NULL"
		" AND op = 1 ORDER BY id LIMIT 1",
		&q, err),
	    rc = k < 0 ? k : 0;

	if (rc == 0) {
		ds_object_state_bind_text(q, 1, kind);
		ds_object_state_bind_text(q, 2, name);
		ds_object_state_bind_text(q, 3, ns);
		ds_object_state_bind_text(q, 4, source);
		rc = sqlite3_step(q);
		if (rc == SQLITE_ROW) {
			if (owner && size)
				snprintf(owner, size, "%s",
					 (const char *)sqlite3_column_text(q, 0));
			rc = 1;
		} else {
			rc = rc == SQLITE_DONE
				 ? 0
				 : ds_store_fail(st->store, rc, "object_state owner", err);
		}
	}
	if (q)
		ds_object_state_unkeep(k, q);
	return ds_err_fallback(err, rc);
}

int ds_object_state_last_record_id(ds_object_state *st, int64_t *out, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	int rc = ds_store_prepare(st->store, "SELECT coalesce(max(record_id), 0) FROM object_state",
				  &q, err);

	if (rc == 0) {
		rc = sqlite3_step(q);
		if (rc == SQLITE_ROW) {
			*out = sqlite3_column_int64(q, 0);
			rc = 0;
		} else {
			rc = ds_store_fail(st->store, rc, "object_state last record", err);
		}
	}
	sqlite3_finalize(q);
	return ds_err_fallback(err, rc);
}

/* The namespace a row goes to on the target: where it was applied, else its source's mapped. */
static const char *target_ns_of(const ds_object_state_row *r, const ds_object_state_match *m)
{
	if (r->target_name)
		return r->target_ns;
	if (!r->ns)
		return NULL;
	return m->map_ns ? m->map_ns(m->map_ud, r->ns) : r->ns;
}

static bool ns_matches(const char *want, const char *have)
{
	if (!want)
		return true;
	if (!want[0])
		return !have;
	return have && strcmp(want, have) == 0;
}

int ds_object_state_retry(ds_object_state *st, const ds_object_state_match *m,
			  ds_object_state_retry_fn fn, void *ud, ds_err *err)
{
	sqlite3_stmt *q = NULL, *up = NULL;
	int rc, marked = 0;

	/* IMMEDIATE: the applier cannot pick or set a row between our read and write. */
	rc = ds_store_exec(st->store, "BEGIN IMMEDIATE", err);
	if (rc < 0)
		return ds_err_fallback(err, rc);
	rc = ds_store_prepare(
	    st->store,
	    "SELECT " ROW_COLUMNS " FROM object_state o WHERE (o.state = 'failed'"
	    " OR (o.state IN ('pending', 'waiting') AND o.next_try_at > 0))"
	    " AND (?1 IS NULL OR o.kind = ?1 COLLATE NOCASE)"
	    " AND (?2 IS NULL OR coalesce(o.target_name, o.name) = ?2) ORDER BY o.id",
	    &q, err);
	if (rc == 0)
		rc = ds_store_prepare(
		    st->store,
		    "UPDATE object_state SET state = CASE WHEN state = 'failed'"
		    " THEN 'pending' ELSE state END, attempts = 0, next_try_at = 0,"
		    " updated_at = ? WHERE id = ?",
		    &up, err);
	if (rc < 0)
		goto out;
	ds_object_state_bind_text(q, 1, m->kind);
	ds_object_state_bind_text(q, 2, m->name);
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		ds_object_state_row r;
		const char *tns;

		rc = read_row(q, &r, err);
		if (rc < 0)
			goto out;
		tns = target_ns_of(&r, m);
		if (!ns_matches(m->ns, tns)) {
			ds_object_state_row_dispose(&r);
			continue;
		}
		if (fn)
			fn(ud, &r, tns);
		ds_object_state_row_dispose(&r);
		marked++;
		if (m->dry_run)
			continue;
		sqlite3_reset(up);
		sqlite3_bind_int64(up, 1, (ds_clock_wall_ms() / 1000));
		sqlite3_bind_int64(up, 2, sqlite3_column_int64(q, 0));
		rc = sqlite3_step(up);
		if (rc != SQLITE_DONE) {
			rc = ds_store_fail(st->store, rc, "object_state retry", err);
			goto out;
		}
	}
	rc = rc == SQLITE_DONE ? 0 : ds_store_fail(st->store, rc, "object_state retry", err);
out:
	sqlite3_finalize(q);
	sqlite3_finalize(up);
	if (rc < 0) {
		ds_store_exec(st->store, "ROLLBACK", NULL);
		return ds_err_fallback(err, rc);
	}
	rc = ds_store_exec(st->store, "COMMIT", err);
	if (rc < 0) {
		ds_store_exec(st->store, "ROLLBACK", NULL);
		return ds_err_fallback(err, rc);
	}
	return marked;
}

/* Applied once and not deleted since: a newer version pending or refused does
 * not take the applied one off the target. */
int ds_object_state_target_applied(ds_object_state *st, const char *kind, const char *ns,
				   const char *name, ds_err *err)
{
	return ds_object_state_target_owner(st, NULL, kind, ns, name, NULL, 0, err);
}

int ds_object_state_get(ds_object_state *st, const char *source, const char *key,
			ds_object_state_row *out, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	ds_object_state_row r;
	int rc = ds_store_prepare(
	    st->store,
	    "SELECT " ROW_COLUMNS " FROM object_state o WHERE o.source = ? AND o.key = ?", &q, err);

	if (rc < 0)
		goto out;
	ds_object_state_bind_text(q, 1, source);
	ds_object_state_bind_text(q, 2, key);
	rc = sqlite3_step(q);
	if (rc == SQLITE_ROW) {
		rc = read_row(q, &r, err);
		if (rc == 0)
			*out = r;
	} else if (rc == SQLITE_DONE) {
		ds_err_set(err, "no state for %s of source %s", key, source);
		rc = -ENOENT;
	} else {
		rc = ds_store_fail(st->store, rc, "object_state get", err);
	}
out:
	sqlite3_finalize(q);
	return ds_err_fallback(err, rc);
}

struct payload_copy {
	uint8_t *p;
	size_t len;
	int zstd, op;
};

static int copy_payload(void *ud, const ds_ledger_record *rec)
{
	struct payload_copy *c = ud;

	c->op = rec->op;
	c->p = malloc(rec->payload_len ? rec->payload_len : 1);
	if (!c->p)
		return -ENOMEM;
	if (rec->payload_len)
		memcpy(c->p, rec->payload, rec->payload_len);
	c->len = rec->payload_len;
	c->zstd = rec->compression;
	return 0;
}

int ds_object_state_payload(ds_object_state *st, const char *source, const char *key,
			    uint8_t **payload, size_t *len, int *zstd, ds_err *err)
{
	struct payload_copy c = {0};
	sqlite3_stmt *q = NULL;
	int64_t record_id = 0;
	int rc = ds_store_prepare(
	    st->store, "SELECT record_id FROM object_state WHERE source = ? AND key = ?", &q, err);

	if (rc < 0)
		goto out;
	ds_object_state_bind_text(q, 1, source);
	ds_object_state_bind_text(q, 2, key);
	rc = sqlite3_step(q);
	if (rc == SQLITE_ROW) {
		record_id = sqlite3_column_int64(q, 0);
		rc = ds_ledger_record_get(st->records, record_id, copy_payload, &c, err);
		if (rc == 1 && c.op == DS_RECORD_DELETE)
			rc = 0;
	} else if (rc == SQLITE_DONE) {
		rc = 0;
	} else {
		rc = ds_store_fail(st->store, rc, "object_state payload", err);
	}
	if (rc == 1) {
		*payload = c.p;
		*len = c.len;
		*zstd = c.zstd;
		c.p = NULL;
		rc = 0;
	} else if (rc == 0) {
		ds_err_set(err, "no live record for %s of source %s", key, source);
		rc = -ENOENT;
	}
out:
	free(c.p);
	sqlite3_finalize(q);
	return ds_err_fallback(err, rc);
}

struct each_payload {
	const char *kind;
	ds_object_state_payload_fn fn;
	void *ud;
};

static int each_payload(void *ud, const ds_ledger_record *rec)
{
	struct each_payload *e = ud;

	if (rec->op == DS_RECORD_DELETE)
		return 0;
	return e->fn(e->ud, e->kind, rec->payload, rec->payload_len, rec->compression);
}

int ds_object_state_each_in(ds_object_state *st, const char *source, const char *ns,
			    ds_object_state_payload_fn fn, void *ud, ds_err *err)
{
	struct each_payload e = {.fn = fn, .ud = ud};
	sqlite3_stmt *q = NULL;
	int rc = ds_store_prepare(st->store,
				  "SELECT kind, record_id FROM object_state WHERE source = ?"
				  " AND namespace = ? ORDER BY id",
				  &q, err);

	if (rc < 0)
		goto out;
	ds_object_state_bind_text(q, 1, source);
	ds_object_state_bind_text(q, 2, ns);
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		e.kind = (const char *)sqlite3_column_text(q, 0);
		rc = ds_ledger_record_get(st->records, sqlite3_column_int64(q, 1), each_payload, &e,
					  err);
		if (rc < 0)
			goto out;
	}
	rc = rc == SQLITE_DONE ? 0 : ds_store_fail(st->store, rc, "object_state each", err);
out:
	sqlite3_finalize(q);
	return ds_err_fallback(err, rc);
}

int ds_object_state_count(ds_object_state *st, enum ds_apply_state s, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	int rc = ds_store_prepare(st->store, "SELECT count(*) FROM object_state WHERE state = ?",
				  &q, err);

	if (rc == 0) {
		ds_object_state_bind_text(q, 1, ds_apply_state_name(s));
		rc = sqlite3_step(q);
		rc = rc == SQLITE_ROW ? sqlite3_column_int(q, 0)
				      : ds_store_fail(st->store, rc, "object_state count", err);
	}
	sqlite3_finalize(q);
	return ds_err_fallback(err, rc);
}

int ds_object_state_count_due(ds_object_state *st, int64_t now_ms, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	int rc = ds_store_prepare(st->store,
				  "SELECT count(*) FROM object_state"
				  " WHERE state IN ('pending', 'waiting') AND next_try_at <= ?",
				  &q, err);

	if (rc == 0) {
		sqlite3_bind_int64(q, 1, now_ms);
		rc = sqlite3_step(q);
		rc = rc == SQLITE_ROW ? sqlite3_column_int(q, 0)
				      : ds_store_fail(st->store, rc, "object_state count due", err);
	}
	sqlite3_finalize(q);
	return ds_err_fallback(err, rc);
}

void ds_object_state_row_dispose(ds_object_state_row *r)
{
	if (!r)
		return;
	free(r->source);
	free(r->key);
	free(r->api_version);
	free(r->kind);
	free(r->ns);
	free(r->name);
	free(r->target_api_version);
	free(r->target_ns);
	free(r->target_name);
	free(r->reason);
	free(r->payload);
	free(r->source_uid);
	free(r->source_cluster);
	memset(r, 0, sizeof(*r));
}

void ds_object_state_rows_free(ds_object_state_row *rows, size_t n)
{
	for (size_t i = 0; rows && i < n; i++)
		ds_object_state_row_dispose(&rows[i]);
	free(rows);
}
