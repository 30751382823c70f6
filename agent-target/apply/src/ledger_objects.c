#include "drasync/ledger_objects.h"

#include "drasync/buf.h"
#include "drasync/object_state.h"
#include "drasync/schemas.h"
#include "drasync/wire.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct reader {
	ds_store *store;
	sqlite3 *db; /* the store's connection */
	const char *const *kinds;
	ds_ledger_object *v;
	size_t n, cap;
	json_t *index; /* "source\nkey" -> position in v */
};

static int db_fail(sqlite3 *db, const char *what, ds_err *err)
{
	return ds_store_fail_db(db, sqlite3_errcode(db), what, err);
}

static char *col_dup(sqlite3_stmt *q, int i)
{
	const char *s = (const char *)sqlite3_column_text(q, i);

	return s ? strdup(s) : NULL;
}

static void dispose(ds_ledger_object *o)
{
	free(o->source);
	free(o->key);
	free(o->state);
	free(o->ns);
	free(o->kind);
	free(o->name);
	free(o->source_uid);
	free(o->source_cluster);
	free(o->payload);
	memset(o, 0, sizeof(*o));
}

void ds_ledger_objects_free(ds_ledger_object *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		dispose(&v[i]);
	free(v);
}

/*
 * Take (source, key)'s newest state from a row of columns source, key, op,
 * state, namespace, kind, name, payload, compression, source_uid,
 * cluster_name: a later row for the same object replaces an earlier one.
 */
static int fold(struct reader *rd, sqlite3_stmt *q, const char *key)
{
	const char *source = (const char *)sqlite3_column_text(q, 0);
	const char *ns = (const char *)sqlite3_column_text(q, 4);
	ds_ledger_object o = {0};
	char ikey[1200];
	int plen = sqlite3_column_bytes(q, 7);
	json_t *at;

	if (!source || !key)
		return 0;
	snprintf(ikey, sizeof(ikey), "%s\n%s", source, key);
	o.source = strdup(source);
	o.key = strdup(key);
	o.op = sqlite3_column_int(q, 2);
	o.state = col_dup(q, 3);
	o.ns = ns && ns[0] ? strdup(ns) : NULL;
	o.kind = col_dup(q, 5);
	o.name = col_dup(q, 6);
	o.zstd = sqlite3_column_int(q, 8);
	o.source_uid = col_dup(q, 9);
	o.source_cluster = col_dup(q, 10);
	if (plen > 0) {
		o.payload = malloc((size_t)plen);
		if (o.payload) {
			memcpy(o.payload, sqlite3_column_blob(q, 7), (size_t)plen);
			o.len = (size_t)plen;
		}
	}
	if (!o.source || !o.key || !o.state || !o.kind || !o.name || (ns && ns[0] && !o.ns) ||
	    (plen > 0 && !o.payload)) {
		dispose(&o);
		return -ENOMEM;
	}
	at = json_object_get(rd->index, ikey);
	if (at) {
		dispose(&rd->v[json_integer_value(at)]);
		rd->v[json_integer_value(at)] = o;
		return 0;
	}
	if (ds_grow((void **)&rd->v, &rd->cap, rd->n + 1, sizeof(*rd->v)) < 0 ||
	    json_object_set_new_nocheck(rd->index, ikey, json_integer((json_int_t)rd->n)) < 0) {
		dispose(&o);
		return -ENOMEM;
	}
	rd->v[rd->n++] = o;
	return 0;
}

/* " AND <col> IN (?, ...)" for the kinds, or "". */
static void kinds_clause(const char *const *kinds, const char *col, char *buf, size_t size)
{
	size_t used = 0;

	buf[0] = '\0';
	if (!kinds || !kinds[0])
		return;
	used = (size_t)snprintf(buf, size, " AND %s IN (", col);
	for (size_t i = 0; kinds[i] && used < size; i++)
		used += (size_t)snprintf(buf + used, size - used, "%s?", i ? ", " : "");
	if (used < size)
		snprintf(buf + used, size - used, ")");
}

static void bind_kinds(sqlite3_stmt *q, int first, const char *const *kinds)
{
	for (int i = 0; kinds && kinds[i]; i++)
		sqlite3_bind_text(q, first + i, kinds[i], -1, SQLITE_STATIC);
}

static int step_all(struct reader *rd, sqlite3_stmt *q, bool key_in_row, const char *what,
		    ds_err *err)
{
	int rc = 0;

	while (rc == 0 && (rc = sqlite3_step(q)) == SQLITE_ROW) {
		char key[1000];
		const char *k = (const char *)sqlite3_column_text(q, 1);

		if (!key_in_row) {
			const char *ns = (const char *)sqlite3_column_text(q, 4);
			ds_object_state_key(
			    (const char *)sqlite3_column_text(q, 1),
			    (const char *)sqlite3_column_text(q, 5), ns && ns[0] ? ns : NULL,
			    (const char *)sqlite3_column_text(q, 6), key, sizeof(key));
			k = key;
		}
		rc = fold(rd, q, k);
	}
	if (rc == SQLITE_DONE)
		return 0;
	return rc > 0 ? db_fail(rd->db, what, err) : rc;
}

/* The applier's rows, then what was committed after its cursor. */
static int read_all(struct reader *rd, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	int64_t cursor = 0;
	char in[1200], sql[2400];
	int rc;

	if (ds_store_has_table(rd->store, "object_state")) {
		kinds_clause(rd->kinds, "o.kind", in, sizeof(in));
		snprintf(sql, sizeof(sql),
			 "SELECT o.source, o.key, o.op, o.state, o.namespace, o.kind, o.name,"
			 " r.payload, r.compression, r.source_uid, s.cluster_name"
			 " FROM object_state o JOIN records r ON r.id = o.record_id"
			 " LEFT JOIN sources s ON s.name = o.source WHERE 1%s ORDER BY o.id",
			 in);
		if (sqlite3_prepare_v2(rd->db, sql, -1, &q, NULL) != SQLITE_OK)
			return db_fail(rd->db, "objects", err);
		bind_kinds(q, 1, rd->kinds);
		rc = step_all(rd, q, true, "objects", err);
		sqlite3_finalize(q);
		q = NULL;
		if (rc < 0)
			return rc;
		if (sqlite3_prepare_v2(rd->db, "SELECT record_id FROM apply_cursor WHERE id = 1",
				       -1, &q, NULL) == SQLITE_OK &&
		    sqlite3_step(q) == SQLITE_ROW)
			cursor = sqlite3_column_int64(q, 0);
		sqlite3_finalize(q);
		q = NULL;
	}
	kinds_clause(rd->kinds, "r.kind", in, sizeof(in));
	snprintf(sql, sizeof(sql),
		 "SELECT r.source, r.api_version, r.op, 'pending', r.namespace, r.kind, r.name,"
		 " r.payload, r.compression, r.source_uid, s.cluster_name FROM records r"
		 " LEFT JOIN sources s ON s.name = r.source"
		 " WHERE r.id > ? AND r.op IN (1, 2)%s ORDER BY r.id",
		 in);
	if (sqlite3_prepare_v2(rd->db, sql, -1, &q, NULL) != SQLITE_OK)
		return db_fail(rd->db, "records", err);
	sqlite3_bind_int64(q, 1, cursor);
	bind_kinds(q, 2, rd->kinds);
	rc = step_all(rd, q, false, "records", err);
	sqlite3_finalize(q);
	return rc;
}

int ds_ledger_objects_read(const char *path, const char *const *kinds, ds_ledger_object **out,
			   size_t *n, ds_err *err)
{
	struct reader rd = {.kinds = kinds};
	size_t nk = 0;
	int rc;

	*out = NULL;
	*n = 0;
	while (kinds && kinds[nk])
		nk++;
	if (nk > 64) {
		ds_err_set(err, "ledger: at most 64 kinds at once");
		return -EINVAL;
	}
	if (access(path, F_OK) != 0) {
		ds_err_set(err,
			   "no ledger at %s: drasync-target run has not started with this "
			   "stateDir yet",
			   path);
		return -ENOENT;
	}
	rd.index = json_object();
	if (!rd.index)
		return -ENOMEM;
	rc = ds_ledger_open(&rd.store, path, DS_STORE_READONLY, err);
	if (rc < 0)
		goto out;
	rd.db = ds_store_db(rd.store);
	if (!ds_store_has_table(rd.store, "records"))
		goto out; /* nothing received yet */
	/* One read transaction: the applier's rows and the records after its cursor agree. */
	if (sqlite3_exec(rd.db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) {
		rc = db_fail(rd.db, "begin", err);
		goto out;
	}
	rc = read_all(&rd, err);
	ds_store_rollback(rd.store); /* a read: nothing to commit */
out:
	ds_store_free(rd.store);
	json_decref(rd.index);
	if (rc < 0) {
		ds_ledger_objects_free(rd.v, rd.n);
		return ds_err_fallback(err, rc);
	}
	*out = rd.v;
	*n = rd.n;
	return 0;
}

int ds_ledger_payload_json(const uint8_t *payload, size_t len, int zstd, json_t **out, char *why,
			   size_t why_size)
{
	ds_wire_blob blob = {payload, len};
	uint8_t *plain = NULL;
	size_t plain_len = 0;
	json_error_t jerr;
	json_t *doc;
	int rc;

	*out = NULL;
	if (zstd) {
		rc = ds_wire_payload_inflate(&blob, 1, DS_LEDGER_OBJECT_MAX, &plain, &plain_len);
		if (rc == -ENOMEM)
			return rc;
		if (rc < 0) {
			snprintf(why, why_size, "payload cannot be decompressed: %s",
				 strerror(-rc));
			return -EINVAL;
		}
		blob.data = plain;
		blob.len = plain_len;
	}
	doc = blob.len
		  ? json_loadb((const char *)blob.data, blob.len, JSON_REJECT_DUPLICATES, &jerr)
		  : NULL;
	free(plain);
	if (!json_is_object(doc)) {
		snprintf(why, why_size, "payload is not a JSON object: %s",
			 doc	    ? "another JSON value"
			 : blob.len ? jerr.text
				    : "empty");
		json_decref(doc);
		return -EINVAL;
	}
	*out = doc;
	return 0;
}
