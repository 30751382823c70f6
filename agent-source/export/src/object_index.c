#include "drasync/object_index.h"

#include "drasync/buf.h"
#include "drasync/schemas.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MARK_CHUNK 512

struct ds_object_index {
	ds_store *store;
	sqlite3 *db; /* the store's connection */
	uint64_t gen;
	sqlite3_stmt *get;
	sqlite3_stmt *mark;
	sqlite3_stmt *res_get, *res_set; /* ds_object_index_result(), prepared once */
	ds_outbox_hook guard;		 /* ds_object_index_set_guard() */
	void *guard_ud;
	/* strings of the last row handed out by get/result */
	char buf[2048];
};

#define ROW_COLS                                                                                   \
	"key, api_version, kind, namespace, name, uid, hash, seq, seen, deleted, result_status, "  \
	"result_message, result_seq"

static int fail(sqlite3 *db, int rc, const char *what, ds_err *err)
{
	char w[sizeof(err->msg)];

	snprintf(w, sizeof(w), "object index: %s", what);
	return ds_store_fail_db(db, rc, w, err);
}

static int exec(sqlite3 *db, const char *sql, ds_err *err)
{
	int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);

	return rc == SQLITE_OK ? 0 : fail(db, rc, sql, err);
}

static const char *col_text(sqlite3_stmt *st, int i)
{
	const unsigned char *s = sqlite3_column_text(st, i);

	return s ? (const char *)s : "";
}

/* A row of ROW_COLS from st; the strings point into st (valid until its next step). */
static void row_of(sqlite3_stmt *st, ds_index_row *r)
{
	const void *h = sqlite3_column_blob(st, 6);

	memset(r, 0, sizeof(*r));
	r->key = col_text(st, 0);
	r->api_version = col_text(st, 1);
	r->kind = col_text(st, 2);
	r->ns = col_text(st, 3);
	r->name = col_text(st, 4);
	r->uid = col_text(st, 5);
	if (h && sqlite3_column_bytes(st, 6) == DS_HASH_LEN)
		memcpy(r->hash, h, DS_HASH_LEN);
	r->seq = (uint64_t)sqlite3_column_int64(st, 7);
	r->seen = (uint64_t)sqlite3_column_int64(st, 8);
	r->deleted = sqlite3_column_int(st, 9) != 0;
	r->result_status = sqlite3_column_int(st, 10);
	r->result_message = col_text(st, 11);
	r->result_seq = (uint64_t)sqlite3_column_int64(st, 12);
}

/* Copy a row's strings into idx->buf so it outlives the statement. */
static void row_keep(ds_object_index *idx, ds_index_row *r)
{
	const char **fields[] = {&r->key,  &r->api_version, &r->kind,	       &r->ns,
				 &r->name, &r->uid,	    &r->result_message};
	size_t off = 0;

	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		size_t len = strlen(*fields[i]) + 1;
		if (off + len > sizeof(idx->buf))
			len = 1; /* cannot happen for valid names: keep "" */
		memcpy(idx->buf + off, len == 1 ? "" : *fields[i], len);
		*fields[i] = idx->buf + off;
		off += len;
	}
}

int ds_object_key(char *buf, size_t size, const char *api_version, const char *kind, const char *ns,
		  const char *name)
{
	const char *slash = api_version ? strchr(api_version, '/') : NULL;
	int glen = slash ? (int)(slash - api_version) : 0, n;

	if (!kind || !kind[0] || !name || !name[0])
		return -EINVAL;
	n = snprintf(buf, size, "%.*s/%s/%s/%s", glen, slash ? api_version : "", kind, ns ? ns : "",
		     name);
	if (n < 0 || (size_t)n >= size)
		return -ENAMETOOLONG;
	return 0;
}

static int meta_get(sqlite3 *db, const char *key, int64_t *value, ds_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc =
	    sqlite3_prepare_v2(db, "SELECT value FROM export_meta WHERE key = ?", -1, &st, NULL);

	if (rc != SQLITE_OK)
		return fail(db, rc, "meta", err);
	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*value = sqlite3_column_int64(st, 0);
		rc = 0;
	} else if (rc == SQLITE_DONE) {
		rc = -ENOENT;
	} else {
		rc = fail(db, rc, "meta", err);
	}
	sqlite3_finalize(st);
	return rc;
}

static int meta_set(sqlite3 *db, const char *key, int64_t value, ds_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(db,
				    "INSERT INTO export_meta(key, value) VALUES(?, ?) ON "
				    "CONFLICT(key) DO UPDATE SET value = excluded.value",
				    -1, &st, NULL);

	if (rc != SQLITE_OK)
		return fail(db, rc, "meta", err);
	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, value);
	rc = sqlite3_step(st);
	rc = rc == SQLITE_DONE ? 0 : fail(db, rc, "meta", err);
	sqlite3_finalize(st);
	return rc;
}

int ds_object_index_open(ds_object_index **out, const char *path, ds_err *err)
{
	ds_object_index *idx = calloc(1, sizeof(*idx));
	int64_t gen = 0;
	int rc;

	if (!idx)
		return ds_err_fallback(err, -ENOMEM);
	rc = ds_outbox_file_open(&idx->store, path, 0, err);
	if (rc == 0)
		idx->db = ds_store_db(idx->store);
	if (rc < 0)
		goto out;
	rc = meta_get(idx->db, "generation", &gen, err);
	if (rc == -ENOENT)
		rc = 0;
	if (rc < 0)
		goto out;
	idx->gen = (uint64_t)gen;
	rc = sqlite3_prepare_v2(idx->db, "SELECT " ROW_COLS " FROM export_objects WHERE key = ?",
				-1, &idx->get, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(idx->db,
					"UPDATE export_objects SET seen = ? WHERE key = ? AND "
					"seen < ?",
					-1, &idx->mark, NULL);
	rc = rc == SQLITE_OK ? 0 : fail(idx->db, rc, "statements", err);
out:
	if (rc < 0) {
		ds_object_index_free(idx);
		return ds_err_fallback(err, rc);
	}
	*out = idx;
	return 0;
}

void ds_object_index_free(ds_object_index *idx)
{
	if (!idx)
		return;
	sqlite3_finalize(idx->get);
	sqlite3_finalize(idx->mark);
	sqlite3_finalize(idx->res_get);
	sqlite3_finalize(idx->res_set);
	ds_store_free(idx->store);
	free(idx);
}

int ds_object_index_get(ds_object_index *idx, const char *key, ds_index_row *out, ds_err *err)
{
	int rc;

	sqlite3_reset(idx->get);
	sqlite3_bind_text(idx->get, 1, key, -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(idx->get);
	if (rc == SQLITE_ROW) {
		row_of(idx->get, out);
		row_keep(idx, out);
		rc = 0;
	} else if (rc == SQLITE_DONE) {
		rc = -ENOENT;
		ds_err_set(err, "object index: %s is not held", key);
	} else {
		rc = fail(idx->db, rc, "get", err);
	}
	sqlite3_reset(idx->get);
	return rc;
}

/* ---- the push hook: runs on the outbox's connection, inside its transaction ---- */

struct hook_ctx {
	uint64_t gen;
	ds_outbox_hook guard;
	void *guard_ud;
};

static int hook(void *ud, struct sqlite3 *db, const ds_record *recs, size_t n, ds_err *err)
{
	struct hook_ctx *h = ud;
	sqlite3_stmt *up = NULL;
	char key[DS_OBJECT_KEY_MAX], grp[256];
	int rc;

	if (h->guard && (rc = h->guard(h->guard_ud, db, recs, n, err)) < 0)
		return rc;
	rc = sqlite3_prepare_v2(
	    db,
	    "INSERT INTO export_objects(key, api_version, grp, kind, namespace, name, uid, hash, "
	    "seq, seen, deleted, result_status, result_message, result_seq) VALUES(?, ?, ?, ?, ?, "
	    "?, ?, ?, ?, ?, ?, NULL, NULL, NULL) ON CONFLICT(key) DO UPDATE SET api_version = "
	    "excluded.api_version, uid = excluded.uid, hash = excluded.hash, seq = excluded.seq, "
	    "seen = max(seen, excluded.seen), deleted = excluded.deleted, result_seq = NULL",
	    -1, &up, NULL);
	if (rc != SQLITE_OK)
		return fail(db, rc, "push", err);
	rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		const ds_record *r = &recs[i];
		const char *slash;
		int src;

		if (r->op == DS_RECORD_SNAPSHOT_BEGIN) {
			rc = meta_set(db, "snapshot_open", (int64_t)r->seq, err);
			continue;
		}
		if (r->op == DS_RECORD_SNAPSHOT_PART)
			continue; /* the end that follows closes the snapshot */
		if (r->op == DS_RECORD_SNAPSHOT_END) {
			rc = meta_set(db, "snapshot_open", 0, err);
			if (rc == 0)
				rc = meta_set(db, "snapshot_done", (int64_t)r->seq, err);
			continue;
		}
		rc = ds_object_key(key, sizeof(key), r->api_version, r->kind, r->ns, r->name);
		if (rc < 0) {
			ds_err_set(err, "object index: no key for %s %s", r->kind ? r->kind : "?",
				   r->name ? r->name : "?");
			break;
		}
		slash = r->api_version ? strchr(r->api_version, '/') : NULL;
		snprintf(grp, sizeof(grp), "%.*s", slash ? (int)(slash - r->api_version) : 0,
			 slash ? r->api_version : "");
		sqlite3_reset(up);
		sqlite3_bind_text(up, 1, key, -1, SQLITE_STATIC);
		sqlite3_bind_text(up, 2, r->api_version ? r->api_version : "", -1, SQLITE_STATIC);
		sqlite3_bind_text(up, 3, grp, -1, SQLITE_STATIC);
		sqlite3_bind_text(up, 4, r->kind, -1, SQLITE_STATIC);
		sqlite3_bind_text(up, 5, r->ns ? r->ns : "", -1, SQLITE_STATIC);
		sqlite3_bind_text(up, 6, r->name, -1, SQLITE_STATIC);
		sqlite3_bind_text(up, 7, r->source_uid ? r->source_uid : "", -1, SQLITE_STATIC);
		if (r->op == DS_RECORD_UPSERT)
			sqlite3_bind_blob(up, 8, r->content_hash, DS_HASH_LEN, SQLITE_STATIC);
		else
			sqlite3_bind_null(up, 8);
		sqlite3_bind_int64(up, 9, (sqlite3_int64)r->seq);
		/* a tombstone does not make the object seen: it is gone */
		sqlite3_bind_int64(up, 10, r->op == DS_RECORD_UPSERT ? (sqlite3_int64)h->gen : 0);
		sqlite3_bind_int(up, 11, r->op == DS_RECORD_DELETE);
		src = sqlite3_step(up);
		if (src != SQLITE_DONE)
			rc = fail(db, src, "push", err);
	}
	sqlite3_finalize(up);
	return rc;
}

int ds_object_index_push(ds_object_index *idx, ds_outbox *ob, const ds_record *recs, size_t n,
			 uint64_t *last_seq, ds_err *err)
{
	struct hook_ctx h = {idx->gen, idx->guard, idx->guard_ud};

	return ds_err_fallback(err, ds_outbox_push_with(ob, recs, n, hook, &h, last_seq, err));
}

int ds_object_index_push_each(ds_object_index *idx, ds_outbox *ob, ds_outbox_next next,
			      void *next_ud, uint64_t *last_seq, ds_err *err)
{
	struct hook_ctx h = {idx->gen, idx->guard, idx->guard_ud};

	return ds_err_fallback(err,
			       ds_outbox_push_each(ob, next, next_ud, hook, &h, last_seq, err));
}

void ds_object_index_set_guard(ds_object_index *idx, ds_outbox_hook guard, void *ud)
{
	idx->guard = guard;
	idx->guard_ud = ud;
}

/* ---- mark and sweep ---- */

int ds_object_index_begin_pass(ds_object_index *idx, uint64_t *gen, ds_err *err)
{
	int rc = meta_set(idx->db, "generation", (int64_t)(idx->gen + 1), err);

	if (rc < 0)
		return rc;
	idx->gen++;
	if (gen)
		*gen = idx->gen;
	return 0;
}

uint64_t ds_object_index_generation(const ds_object_index *idx)
{
	return idx->gen;
}

int ds_object_index_mark(ds_object_index *idx, const char *const *keys, size_t n, ds_err *err)
{
	int rc = 0;

	if (n == 0)
		return 0;
	rc = exec(idx->db, "BEGIN IMMEDIATE", err);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n && rc == 0; i++) {
		int src;

		sqlite3_reset(idx->mark);
		sqlite3_bind_int64(idx->mark, 1, (sqlite3_int64)idx->gen);
		sqlite3_bind_text(idx->mark, 2, keys[i], -1, SQLITE_STATIC);
		sqlite3_bind_int64(idx->mark, 3, (sqlite3_int64)idx->gen);
		src = sqlite3_step(idx->mark);
		if (src != SQLITE_DONE)
			rc = fail(idx->db, src, "mark", err);
	}
	sqlite3_reset(idx->mark);
	sqlite3_clear_bindings(idx->mark);
	if (rc < 0) {
		exec(idx->db, "ROLLBACK", NULL);
		return rc;
	}
	rc = exec(idx->db, "COMMIT", err);
	if (rc < 0)
		exec(idx->db, "ROLLBACK", NULL);
	return rc;
}

static int each_row(ds_object_index *idx, sqlite3_stmt *st, ds_index_row_fn fn, void *ud,
		    ds_err *err)
{
	int rc, stop = 0;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		ds_index_row r;

		row_of(st, &r);
		stop = fn(ud, &r);
		if (stop)
			break;
	}
	if (!stop && rc != SQLITE_DONE)
		stop = fail(idx->db, rc, "read", err);
	sqlite3_finalize(st);
	return stop;
}

int ds_object_index_unseen(ds_object_index *idx, const char *kind, const char *ns,
			   ds_index_row_fn fn, void *ud, ds_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc;

	rc = sqlite3_prepare_v2(idx->db,
				"SELECT " ROW_COLS " FROM export_objects WHERE kind = ?1 AND "
				"deleted = 0 AND seen < ?2 AND (?3 IS NULL OR namespace = ?3) "
				"ORDER BY key",
				-1, &st, NULL);
	if (rc != SQLITE_OK)
		return fail(idx->db, rc, "unseen", err);
	sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)idx->gen);
	if (ns)
		sqlite3_bind_text(st, 3, ns, -1, SQLITE_STATIC);
	return each_row(idx, st, fn, ud, err);
}

int ds_object_index_each(ds_object_index *idx, const char *ns, ds_index_row_fn fn, void *ud,
			 ds_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc;

	rc = sqlite3_prepare_v2(idx->db,
				"SELECT " ROW_COLS " FROM export_objects WHERE ?1 IS NULL OR "
				"namespace = ?1 ORDER BY key",
				-1, &st, NULL);
	if (rc != SQLITE_OK)
		return fail(idx->db, rc, "each", err);
	if (ns)
		sqlite3_bind_text(st, 1, ns, -1, SQLITE_STATIC);
	return each_row(idx, st, fn, ud, err);
}

int ds_object_index_namespaces(ds_object_index *idx, int (*fn)(void *ud, const char *ns), void *ud,
			       ds_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc, stop = 0;

	rc = sqlite3_prepare_v2(idx->db,
				"SELECT namespace FROM export_objects WHERE namespace != '' UNION "
				"SELECT name FROM export_objects WHERE grp = '' AND kind = "
				"'Namespace' ORDER BY 1",
				-1, &st, NULL);
	if (rc != SQLITE_OK)
		return fail(idx->db, rc, "namespaces", err);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		if ((stop = fn(ud, col_text(st, 0))) != 0)
			break;
	if (!stop && rc != SQLITE_DONE)
		stop = fail(idx->db, rc, "namespaces", err);
	sqlite3_finalize(st);
	return stop;
}

int ds_object_index_forget_namespace(ds_object_index *idx, const char *ns, size_t *n, ds_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc;

	rc = sqlite3_prepare_v2(idx->db,
				"DELETE FROM export_objects WHERE namespace = ?1 OR (grp = '' AND "
				"kind = 'Namespace' AND name = ?1)",
				-1, &st, NULL);
	if (rc != SQLITE_OK)
		return fail(idx->db, rc, "forget", err);
	sqlite3_bind_text(st, 1, ns, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	rc = rc == SQLITE_DONE ? 0 : fail(idx->db, rc, "forget", err);
	if (rc == 0 && n)
		*n = (size_t)sqlite3_changes(idx->db);
	sqlite3_finalize(st);
	return rc;
}

int ds_object_index_prune_deleted(ds_object_index *idx, uint64_t seq, ds_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc;

	rc = sqlite3_prepare_v2(
	    idx->db,
	    "DELETE FROM export_objects WHERE deleted = 1 AND seq <= ?1 AND NOT "
	    "(coalesce(result_seq, 0) = seq AND coalesce(result_status, 0) IN (?2, "
	    "?3))",
	    -1, &st, NULL);
	if (rc != SQLITE_OK)
		return fail(idx->db, rc, "prune", err);
	sqlite3_bind_int64(st, 1, (sqlite3_int64)seq);
	sqlite3_bind_int(st, 2, DS_RESULT_FAILED);
	/* a refused tombstone deleted nothing there: status keeps showing it */
	sqlite3_bind_int(st, 3, DS_RESULT_REFUSED);
	rc = sqlite3_step(st);
	rc = rc == SQLITE_DONE ? 0 : fail(idx->db, rc, "prune", err);
	sqlite3_finalize(st);
	return rc;
}

/* ---- snapshot ---- */

void ds_index_manifest_dispose(ds_index_manifest *m)
{
	if (!m)
		return;
	free(m->entries);
	free(m->keys);
	memset(m, 0, sizeof(*m));
}

int ds_object_index_manifest(ds_object_index *idx, ds_index_manifest *out, ds_err *err)
{
	return ds_object_index_manifest_page(idx, NULL, 0, out, err);
}

int ds_object_index_manifest_count(ds_object_index *idx, size_t *n, ds_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(
	    idx->db, "SELECT count(*) FROM export_objects WHERE deleted = 0", -1, &st, NULL);

	if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		*n = (size_t)sqlite3_column_int64(st, 0);
		rc = 0;
	} else {
		rc = fail(idx->db, rc, "manifest count", err);
	}
	sqlite3_finalize(st);
	return rc;
}

int ds_object_index_manifest_page(ds_object_index *idx, const char *after, size_t limit,
				  ds_index_manifest *out, ds_err *err)
{
	ds_index_manifest m = {0};
	size_t cap = 0, kcap = 0, klen = 0, *offs = NULL, ocap = 0;
	sqlite3_stmt *st = NULL;
	int rc;

	/* Keys go into one arena (offsets first: it moves while it grows). */
	rc =
	    sqlite3_prepare_v2(idx->db,
			       "SELECT key, hash FROM export_objects WHERE deleted = 0 AND key > ?1"
			       " ORDER BY key LIMIT ?2",
			       -1, &st, NULL);
	if (rc != SQLITE_OK)
		return fail(idx->db, rc, "manifest", err);
	sqlite3_bind_text(st, 1, after ? after : "", -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, limit ? (sqlite3_int64)limit : -1);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *key = col_text(st, 0);
		const void *h = sqlite3_column_blob(st, 1);
		size_t len = strlen(key) + 1;

		if (ds_grow((void **)&m.entries, &cap, m.n + 1, sizeof(*m.entries)) < 0 ||
		    ds_grow((void **)&offs, &ocap, m.n + 1, sizeof(*offs)) < 0 ||
		    ds_grow((void **)&m.keys, &kcap, klen + len, 1) < 0) {
			rc = -ENOMEM;
			goto out;
		}
		memcpy(m.keys + klen, key, len);
		offs[m.n] = klen;
		klen += len;
		memset(m.entries[m.n].content_hash, 0, DS_HASH_LEN);
		if (h && sqlite3_column_bytes(st, 1) == DS_HASH_LEN)
			memcpy(m.entries[m.n].content_hash, h, DS_HASH_LEN);
		m.n++;
	}
	if (rc != SQLITE_DONE) {
		rc = fail(idx->db, rc, "manifest", err);
		goto out;
	}
	rc = 0;
	for (size_t i = 0; i < m.n; i++)
		m.entries[i].key = m.keys + offs[i];
out:
	sqlite3_finalize(st);
	free(offs);
	if (rc < 0) {
		if (rc == -ENOMEM)
			ds_err_set(err, "object index: manifest: out of memory");
		ds_index_manifest_dispose(&m);
		return rc;
	}
	*out = m;
	return 0;
}

int ds_object_index_snapshot_done(ds_object_index *idx, bool *done, ds_err *err)
{
	int64_t d = 0, open = 0;
	int rc = meta_get(idx->db, "snapshot_done", &d, err);

	if (rc == -ENOENT)
		d = 0;
	else if (rc < 0)
		return rc;
	rc = meta_get(idx->db, "snapshot_open", &open, err);
	if (rc == -ENOENT)
		open = 0;
	else if (rc < 0)
		return rc;
	*done = d > 0 && open == 0;
	return 0;
}

/* ---- results ---- */

/* A statement of idx kept for its life: prepared the first time, reset after. */
static int kept(ds_object_index *idx, sqlite3_stmt **st, const char *sql, ds_err *err)
{
	int rc;

	if (*st) {
		sqlite3_reset(*st);
		sqlite3_clear_bindings(*st);
		return 0;
	}
	rc = sqlite3_prepare_v3(idx->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL);
	return rc == SQLITE_OK ? 0 : fail(idx->db, rc, "result", err);
}

int ds_object_index_begin(ds_object_index *idx, ds_err *err)
{
	return exec(idx->db, "BEGIN IMMEDIATE", err);
}

int ds_object_index_commit(ds_object_index *idx, ds_err *err)
{
	int rc = exec(idx->db, "COMMIT", err);

	if (rc < 0)
		exec(idx->db, "ROLLBACK", NULL);
	return rc;
}

void ds_object_index_rollback(ds_object_index *idx)
{
	if (!sqlite3_get_autocommit(idx->db))
		exec(idx->db, "ROLLBACK", NULL);
}

int ds_object_index_result(ds_object_index *idx, uint64_t seq, enum ds_result_status status,
			   const char *message, ds_index_row *row, bool *changed, ds_err *err)
{
	/* Inside ds_object_index_begin()'s transaction when the caller records a batch. */
	bool own_txn = sqlite3_get_autocommit(idx->db) != 0;
	sqlite3_stmt *st, *up;
	ds_index_row r;
	bool diff;
	int rc;

	if (!message)
		message = "";
	rc = own_txn ? exec(idx->db, "BEGIN IMMEDIATE", err) : 0;
	if (rc < 0)
		return rc;
	rc = kept(idx, &idx->res_get, "SELECT " ROW_COLS " FROM export_objects WHERE seq = ?", err);
	if (rc < 0)
		goto out;
	st = idx->res_get;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)seq);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE) {
		rc = -ENOENT;
		ds_err_set(err, "seq %llu is no object's latest record", (unsigned long long)seq);
		goto out;
	}
	if (rc != SQLITE_ROW) {
		rc = fail(idx->db, rc, "result", err);
		goto out;
	}
	row_of(st, &r);
	/* A commit result that comes again (a record resent after a reconnect) does
	 * not hide the apply result the same record already has. */
	if (r.result_seq == seq && r.result_status > 0 && r.result_status != DS_RESULT_OK &&
	    r.result_status != DS_RESULT_DUPLICATE &&
	    (status == DS_RESULT_OK || status == DS_RESULT_DUPLICATE)) {
		rc = 0;
		row_keep(idx, &r);
		if (row)
			*row = r;
		if (changed)
			*changed = false;
		goto out;
	}
	diff = r.result_status != (int)status || strcmp(r.result_message, message) != 0;
	row_keep(idx, &r);
	sqlite3_reset(st);
	rc = kept(idx, &idx->res_set,
		  "UPDATE export_objects SET result_status = ?, result_message = ?, "
		  "result_seq = ? WHERE key = ?",
		  err);
	if (rc < 0)
		goto out;
	up = idx->res_set;
	sqlite3_bind_int(up, 1, (int)status);
	sqlite3_bind_text(up, 2, message, -1, SQLITE_STATIC);
	sqlite3_bind_int64(up, 3, (sqlite3_int64)seq);
	sqlite3_bind_text(up, 4, r.key, -1, SQLITE_STATIC);
	rc = sqlite3_step(up);
	rc = rc == SQLITE_DONE ? 0 : fail(idx->db, rc, "result", err);
	sqlite3_reset(up);
	if (rc == 0) {
		r.result_status = (int)status;
		if (row)
			*row = r;
		if (changed)
			*changed = diff;
	}
out:
	if (idx->res_get)
		sqlite3_reset(idx->res_get);
	if (!own_txn)
		return rc; /* the batch's commit or rollback decides */
	if (rc < 0) {
		ds_object_index_rollback(idx);
		return rc;
	}
	return ds_object_index_commit(idx, err);
}

/* ---- meta and counts ---- */

int ds_object_index_meta_get(ds_object_index *idx, const char *key, int64_t *value, ds_err *err)
{
	int rc = meta_get(idx->db, key, value, err);

	if (rc == -ENOENT)
		ds_err_set(err, "object index: no value %s", key);
	return rc;
}

int ds_object_index_meta_set(ds_object_index *idx, const char *key, int64_t value, ds_err *err)
{
	return meta_set(idx->db, key, value, err);
}

int ds_object_index_kind_counts(ds_object_index *idx, ds_index_kind_count **out, size_t *n,
				ds_err *err)
{
	ds_index_kind_count *v = NULL;
	size_t cap = 0, len = 0;
	sqlite3_stmt *st = NULL;
	int rc;

	rc = sqlite3_prepare_v2(
	    idx->db,
	    "SELECT kind, count(*), sum(result_seq = seq AND result_status IN (?1, ?2)), "
	    "sum(result_seq = seq AND result_status = ?3), sum(result_seq = seq AND "
	    "result_status = ?4), sum(coalesce(result_seq, 0) != seq), "
	    "sum(result_seq = seq AND result_status = ?5), sum(result_seq = seq AND "
	    "result_status = ?6), sum(result_seq = seq AND result_status = ?7), "
	    "sum(result_seq = seq AND result_status = ?8) FROM "
	    "export_objects WHERE deleted = 0 GROUP BY kind ORDER BY kind",
	    -1, &st, NULL);
	if (rc != SQLITE_OK)
		return fail(idx->db, rc, "counts", err);
	sqlite3_bind_int(st, 1, DS_RESULT_OK);
	sqlite3_bind_int(st, 2, DS_RESULT_DUPLICATE);
	sqlite3_bind_int(st, 3, DS_RESULT_FAILED);
	sqlite3_bind_int(st, 4, DS_RESULT_SKIPPED);
	sqlite3_bind_int(st, 5, DS_RESULT_APPLIED);
	sqlite3_bind_int(st, 6, DS_RESULT_WAITING);
	sqlite3_bind_int(st, 7, DS_RESULT_HELD);
	sqlite3_bind_int(st, 8, DS_RESULT_REFUSED);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		ds_index_kind_count *c;

		if (ds_grow((void **)&v, &cap, len + 1, sizeof(*v)) < 0) {
			rc = -ENOMEM;
			ds_err_set(err, "object index: counts: out of memory");
			goto out;
		}
		c = &v[len++];
		memset(c, 0, sizeof(*c));
		snprintf(c->kind, sizeof(c->kind), "%s", col_text(st, 0));
		c->objects = (uint64_t)sqlite3_column_int64(st, 1);
		c->ok = (uint64_t)sqlite3_column_int64(st, 2);
		c->failed = (uint64_t)sqlite3_column_int64(st, 3);
		c->skipped = (uint64_t)sqlite3_column_int64(st, 4);
		c->awaiting = (uint64_t)sqlite3_column_int64(st, 5);
		c->applied = (uint64_t)sqlite3_column_int64(st, 6);
		c->waiting = (uint64_t)sqlite3_column_int64(st, 7);
		c->held = (uint64_t)sqlite3_column_int64(st, 8);
		c->refused = (uint64_t)sqlite3_column_int64(st, 9);
	}
	rc = rc == SQLITE_DONE ? 0 : fail(idx->db, rc, "counts", err);
out:
	sqlite3_finalize(st);
	if (rc < 0) {
		free(v);
		return rc;
	}
	*out = v;
	*n = len;
	return 0;
}

int ds_object_index_with_result(ds_object_index *idx, enum ds_result_status status,
				ds_index_row_fn fn, void *ud, ds_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc;

	rc = sqlite3_prepare_v2(idx->db,
				"SELECT " ROW_COLS " FROM export_objects WHERE result_status = ? "
				"AND result_seq = seq ORDER BY key",
				-1, &st, NULL);
	if (rc != SQLITE_OK)
		return fail(idx->db, rc, "results", err);
	sqlite3_bind_int(st, 1, (int)status);
	return each_row(idx, st, fn, ud, err);
}
