#include "drasync/ledger_objects.h"

#include "drasync/buf.h"
#include "drasync/json_limits.h"
#include "drasync/object_state.h"
#include "drasync/ledger_records.h"
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

/* One object's newest state as the ledger tells it (borrowed strings). */
struct seen {
	const char *source, *key, *state, *ns, *kind, *name, *source_uid, *cluster;
	int op, zstd;
	const void *payload;
	size_t len;
};

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

/* Take (source, key)'s newest state: a later one for the same object replaces an earlier one. */
static int fold(struct reader *rd, const struct seen *in)
{
	ds_ledger_object o = {0};
	char ikey[1200];
	json_t *at;

	if (!in->source || !in->key)
		return 0;
	snprintf(ikey, sizeof(ikey), "%s\n%s", in->source, in->key);
	o.source = strdup(in->source);
	o.key = strdup(in->key);
	o.op = in->op;
	o.state = dup_or_null(in->state);
	o.ns = in->ns && in->ns[0] ? strdup(in->ns) : NULL;
	o.kind = dup_or_null(in->kind);
	o.name = dup_or_null(in->name);
	o.zstd = in->zstd;
	o.source_uid = dup_or_null(in->source_uid);
	o.source_cluster = dup_or_null(in->cluster);
	if (in->len > 0) {
		o.payload = malloc(in->len);
		if (o.payload) {
			memcpy(o.payload, in->payload, in->len);
			o.len = in->len;
		}
	}
	if (!o.source || !o.key || !o.state || !o.kind || !o.name ||
	    (in->ns && in->ns[0] && !o.ns) || (in->len > 0 && !o.payload)) {
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

static bool wanted(const struct reader *rd, const char *kind)
{
	if (!rd->kinds || !rd->kinds[0])
		return true;
	for (size_t i = 0; kind && rd->kinds[i]; i++)
		if (strcmp(rd->kinds[i], kind) == 0)
			return true;
	return false;
}

struct row_record {
	struct reader *rd;
	struct seen in;
};

/* An applier row's record: its payload, uid and cluster complete what the row says
 * (folded here: the record's strings live only as long as this call). */
static int with_record(void *ud, const ds_ledger_record *rec)
{
	struct row_record *rr = ud;

	rr->in.payload = rec->payload;
	rr->in.len = rec->payload_len;
	rr->in.zstd = rec->compression;
	rr->in.source_uid = rec->source_uid;
	rr->in.cluster = rec->cluster;
	return fold(rr->rd, &rr->in);
}

/* A record after the applier's cursor: pending, its key made as the applier makes it. */
static int fold_record(void *ud, const ds_ledger_record *rec)
{
	struct reader *rd = ud;
	const char *ns = rec->ns && rec->ns[0] ? rec->ns : NULL;
	char key[1000];
	struct seen in = {
	    .source = rec->source,
	    .state = "pending",
	    .ns = rec->ns,
	    .kind = rec->kind,
	    .name = rec->name,
	    .source_uid = rec->source_uid,
	    .cluster = rec->cluster,
	    .op = rec->op,
	    .zstd = rec->compression,
	    .payload = rec->payload,
	    .len = rec->payload_len,
	};

	if (!wanted(rd, rec->kind))
		return 0;
	in.key = ds_object_state_key(rec->api_version, rec->kind, ns, rec->name, key, sizeof(key));
	return fold(rd, &in);
}

/* The applier's rows, then what was committed after its cursor. */
static int read_all(struct reader *rd, ds_err *err)
{
	ds_ledger_records *recs = NULL;
	sqlite3_stmt *q = NULL;
	int64_t cursor = 0;
	int rc;

	rc = ds_ledger_records_new(rd->store, &recs, err);
	if (rc < 0)
		return rc;
	if (ds_store_has_table(rd->store, "object_state")) {
		rc = ds_store_prepare(
		    rd->store,
		    "SELECT source, key, op, state, namespace, kind, name, record_id"
		    " FROM object_state ORDER BY id",
		    &q, err);
		while (rc == 0 && (rc = sqlite3_step(q)) == SQLITE_ROW) {
			struct row_record rr = {.rd = rd};
			struct seen in = {
			    .source = (const char *)sqlite3_column_text(q, 0),
			    .key = (const char *)sqlite3_column_text(q, 1),
			    .op = sqlite3_column_int(q, 2),
			    .state = (const char *)sqlite3_column_text(q, 3),
			    .ns = (const char *)sqlite3_column_text(q, 4),
			    .kind = (const char *)sqlite3_column_text(q, 5),
			    .name = (const char *)sqlite3_column_text(q, 6),
			};

			if (!wanted(rd, in.kind)) {
				rc = 0;
				continue;
			}
			/* an inner join: a row whose record is gone is not shown */
			rr.in = in;
			rc = ds_ledger_record_get(recs, sqlite3_column_int64(q, 7), with_record,
						  &rr, err);
			rc = rc < 0 ? rc : 0;
		}
		if (rc == SQLITE_DONE)
			rc = 0;
		else if (rc > 0)
			rc = db_fail(rd->db, "objects", err);
		sqlite3_finalize(q);
		q = NULL;
		if (rc == 0 &&
		    ds_store_prepare(rd->store, "SELECT record_id FROM apply_cursor WHERE id = 1",
				     &q, NULL) == 0 &&
		    sqlite3_step(q) == SQLITE_ROW)
			cursor = sqlite3_column_int64(q, 0);
		sqlite3_finalize(q);
	}
	if (rc == 0)
		rc = ds_ledger_records_pending(recs, cursor, fold_record, rd, err);
	ds_ledger_records_free(recs);
	return rc < 0 ? rc : 0;
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
	ds_json_limits lim;
	char text[200];
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
	/* From another site: bounded before jansson builds anything (issue 23) */
	ds_json_limits_default(&lim);
	if (ds_json_check_limits((const char *)blob.data, blob.len, &lim, text, sizeof(text)) < 0) {
		free(plain);
		snprintf(why, why_size, "payload refused: %s", text);
		return -EINVAL;
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
