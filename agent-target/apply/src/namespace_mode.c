#include "drasync/namespace_mode.h"

#include "drasync/buf.h"
#include "drasync/schemas.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct ds_namespace_modes {
	ds_store *store;
	sqlite3 *db; /* the store's connection */
};

int ds_namespace_modes_open(ds_namespace_modes **out, const char *path, ds_err *err)
{
	ds_namespace_modes *nm = calloc(1, sizeof(*nm));
	int rc;

	if (!nm)
		return ds_err_fallback(err, -ENOMEM);
	rc = ds_ledger_open(&nm->store, path, 0, err);
	if (rc == 0)
		nm->db = ds_store_db(nm->store);
	if (rc < 0) {
		ds_namespace_modes_free(nm);
		return ds_err_fallback(err, rc);
	}
	*out = nm;
	return 0;
}

void ds_namespace_modes_free(ds_namespace_modes *nm)
{
	if (!nm)
		return;
	ds_store_free(nm->store);
	free(nm);
}

static enum ds_mode mode_parse(const char *s)
{
	return s && strcmp(s, "standby") == 0 ? DS_MODE_STANDBY : DS_MODE_MIGRATE;
}

int ds_namespace_modes_get(ds_namespace_modes *nm, const char *ns, enum ds_mode *mode, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	int rc = sqlite3_prepare_v2(nm->db, "SELECT mode FROM namespace_modes WHERE namespace = ?",
				    -1, &q, NULL);

	if (rc != SQLITE_OK) {
		rc = ds_store_fail_db(nm->db, rc, "namespace mode", err);
		goto out;
	}
	sqlite3_bind_text(q, 1, ns, -1, SQLITE_STATIC);
	rc = sqlite3_step(q);
	if (rc == SQLITE_ROW) {
		if (mode)
			*mode = mode_parse((const char *)sqlite3_column_text(q, 0));
		rc = 1;
	} else {
		rc = rc == SQLITE_DONE ? 0 : ds_store_fail_db(nm->db, rc, "namespace mode", err);
	}
out:
	sqlite3_finalize(q);
	return ds_err_fallback(err, rc);
}

int ds_namespace_modes_set(ds_namespace_modes *nm, const char *ns, enum ds_mode mode,
			   const char *by, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	int rc;

	if (!ns || !ns[0] || (int)mode < 0 || mode >= DS_MODE_MAX) {
		ds_err_set(err, "namespace mode: a namespace and a mode are required");
		return -EINVAL;
	}
	rc = sqlite3_prepare_v2(
	    nm->db,
	    "INSERT INTO namespace_modes(namespace, mode, since, changed_by) VALUES(?1, ?2, ?3, ?4)"
	    " ON CONFLICT(namespace) DO UPDATE SET mode = ?2, since = ?3, changed_by = ?4"
	    " WHERE mode != ?2",
	    -1, &q, NULL);
	if (rc != SQLITE_OK) {
		rc = ds_store_fail_db(nm->db, rc, "namespace mode", err);
		goto out;
	}
	sqlite3_bind_text(q, 1, ns, -1, SQLITE_STATIC);
	sqlite3_bind_text(q, 2, ds_mode_name(mode), -1, SQLITE_STATIC);
	sqlite3_bind_int64(q, 3, (sqlite3_int64)time(NULL));
	sqlite3_bind_text(q, 4, by, -1, SQLITE_STATIC);
	rc = sqlite3_step(q);
	if (rc == SQLITE_DONE)
		rc = sqlite3_changes(nm->db) > 0 ? 1 : 0;
	else
		rc = ds_store_fail_db(nm->db, rc, "namespace mode", err);
out:
	sqlite3_finalize(q);
	return ds_err_fallback(err, rc);
}

int ds_namespace_modes_list(ds_namespace_modes *nm, ds_namespace_mode **rows, size_t *n,
			    ds_err *err)
{
	ds_namespace_mode *v = NULL;
	size_t cap = 0, len = 0;
	sqlite3_stmt *q = NULL;
	int rc = sqlite3_prepare_v2(
	    nm->db,
	    "SELECT namespace, mode, since, changed_by FROM namespace_modes ORDER BY namespace", -1,
	    &q, NULL);

	if (rc != SQLITE_OK) {
		rc = ds_store_fail_db(nm->db, rc, "namespace modes", err);
		goto out;
	}
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		const char *by = (const char *)sqlite3_column_text(q, 3);

		if (ds_grow((void **)&v, &cap, len + 1, sizeof(*v)) < 0) {
			rc = -ENOMEM;
			goto out;
		}
		v[len].ns = strdup((const char *)sqlite3_column_text(q, 0));
		v[len].mode = mode_parse((const char *)sqlite3_column_text(q, 1));
		v[len].since = sqlite3_column_int64(q, 2);
		v[len].changed_by = by ? strdup(by) : NULL;
		len++;
		if (!v[len - 1].ns || (by && !v[len - 1].changed_by)) {
			rc = -ENOMEM;
			goto out;
		}
	}
	rc = rc == SQLITE_DONE ? 0 : ds_store_fail_db(nm->db, rc, "namespace modes", err);
out:
	sqlite3_finalize(q);
	if (rc < 0) {
		ds_namespace_mode_list_free(v, len);
		return ds_err_fallback(err, rc);
	}
	*rows = v;
	*n = len;
	return 0;
}

void ds_namespace_mode_list_free(ds_namespace_mode *rows, size_t n)
{
	for (size_t i = 0; rows && i < n; i++) {
		free(rows[i].ns);
		free(rows[i].changed_by);
	}
	free(rows);
}

enum ds_mode ds_namespace_mode_of(const ds_namespace_mode *rows, size_t n, const char *ns,
				  enum ds_mode dflt)
{
	size_t lo = 0, hi = n;

	if (!ns)
		return dflt;
	/* Sorted by SQLite's BINARY collation, which is strcmp's order. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(rows[mid].ns, ns);
		if (c == 0)
			return rows[mid].mode;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return dflt;
}

const char *ds_namespace_mode_word(enum ds_mode mode)
{
	return mode == DS_MODE_STANDBY ? "standby" : "active";
}
