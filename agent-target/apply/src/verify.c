#include "verify_internal.h"

#include "drasync/kinds.h"
#include "drasync/schemas.h"
#include "drasync/string_table.h"

#include "drasync/buf.h"
#include "drasync/clock.h"
#include "drasync/k8s_object.h"
#include "drasync/namespace_mode.h"
#include "drasync/preflight.h"
#include "drasync/standby.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const ds_verify_form_table[DS_VERIFY_FORM_MAX] = {
    [DS_VERIFY_ACTIVE] = "active",
    [DS_VERIFY_STANDBY] = "standby",
};
DS_DEFINE_PRIVATE_STRING_TABLE_LOOKUP(ds_verify_form, enum ds_verify_form)

const char *ds_verify_form_name(enum ds_verify_form f)
{
	const char *name = ds_verify_form_to_string(f);

	return name ? name : "unknown";
}

enum ds_verify_form ds_verify_namespace_form(void *modes, const char *target_ns)
{
	ds_verify_modes *m = modes;
	enum ds_mode mode = ds_target_config_mode(m->cfg);

	/* A ledger that cannot be read leaves the configuration's mode (status says why). */
	if (m->ledger_path && target_ns && !m->nm &&
	    ds_namespace_modes_open(&m->nm, m->ledger_path, NULL) < 0)
		m->nm = NULL;
	if (m->nm && target_ns)
		ds_namespace_modes_get(m->nm, target_ns, &mode, NULL);
	return mode == DS_MODE_STANDBY ? DS_VERIFY_STANDBY : DS_VERIFY_ACTIVE;
}

void ds_verify_modes_dispose(ds_verify_modes *m)
{
	ds_namespace_modes_free(m->nm);
	m->nm = NULL;
}

/* ---- items ---------------------------------------------------------------------------- */

int ds_verify_item_init(ds_verify_item *it, const char *kind, const char *ns, const char *name,
			enum ds_verify_form form, bool held)
{
	memset(it, 0, sizeof(*it));
	it->kind = strdup(kind ? kind : "");
	it->ns = strdup(ns ? ns : "");
	it->name = strdup(name ? name : "");
	it->form = form;
	it->held = held;
	if (!it->kind || !it->ns || !it->name) {
		ds_verify_item_dispose(it);
		return -ENOMEM;
	}
	return 0;
}

void ds_verify_item_dispose(ds_verify_item *it)
{
	if (!it)
		return;
	free(it->kind);
	free(it->ns);
	free(it->name);
	free(it->ledger_state);
	free(it->ledger_reason);
	memset(it, 0, sizeof(*it));
}

void ds_verify_items_free(ds_verify_item *items, size_t n)
{
	for (size_t i = 0; items && i < n; i++)
		ds_verify_item_dispose(&items[i]);
	free(items);
}

static int item_cmp(const void *a, const void *b)
{
	const ds_verify_item *x = a, *y = b;
	int c = strcmp(x->ns, y->ns);

	if (!c)
		c = strcmp(x->kind, y->kind);
	return c ? c : strcmp(x->name, y->name);
}

static bool ns_selected(const ds_verify_select *sel, const char *ns)
{
	if (!sel || !sel->namespaces || !sel->n_namespaces)
		return true;
	for (size_t i = 0; i < sel->n_namespaces; i++)
		if (strcmp(sel->namespaces[i], ns) == 0)
			return true;
	return false;
}

/* The rows that may be workloads; the kinds table says which are (the source's kind names). */
static const char workload_rows_sql[] =
    "SELECT kind, target_namespace, namespace, coalesce(target_name, name), state, reason"
    " FROM object_state WHERE op = 1"
    " AND state IN ('applied', 'held', 'pending', 'waiting', 'failed')";

int ds_verify_items_from_ledger(const char *path, const ds_verify_select *sel,
				ds_verify_item **items, size_t *n, ds_err *err)
{
	ds_verify_item *list = NULL;
	size_t len = 0, cap = 0, w;
	ds_store *store = NULL;
	sqlite3_stmt *q = NULL;
	int rc;

	if (access(path, F_OK) != 0) {
		ds_err_set(err,
			   "no ledger at %s: drasync-target run has not started with this "
			   "stateDir yet",
			   path);
		return -ENOENT;
	}
	rc = ds_ledger_open(&store, path, DS_STORE_READONLY, err);
	if (rc < 0)
		goto out;
	/* A ledger the applier has not opened yet has no object_state: no workloads. */
	if (!ds_store_has_table(store, "object_state"))
		goto out;
	rc = ds_store_prepare(store, workload_rows_sql, &q, err);
	if (rc < 0)
		goto out;
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		const char *kind = (const char *)sqlite3_column_text(q, 0);
		const char *tns = (const char *)sqlite3_column_text(q, 1);
		const char *sns = (const char *)sqlite3_column_text(q, 2);
		const char *name = (const char *)sqlite3_column_text(q, 3);
		const char *state = (const char *)sqlite3_column_text(q, 4);
		const char *reason = (const char *)sqlite3_column_text(q, 5);
		const char *ns = tns;
		ds_verify_item *it;

		/* and the claims and templates that wait for the admin-access grant */
		if (!ds_kind_is_workload(kind) &&
		    !(ds_kind_is_claim(kind) && state && strcmp(state, "waiting") == 0 && reason &&
		      strstr(reason, DS_ADMIN_ACCESS_LABEL)))
			continue;
		if (!ns && sns)
			ns = sel && sel->map_ns ? sel->map_ns(sel->map_ud, sns) : sns;
		if (!ns || !ns_selected(sel, ns))
			continue;
		if (ds_grow((void **)&list, &cap, len + 1, sizeof(*list)) < 0) {
			rc = -ENOMEM;
			goto out;
		}
		it = &list[len];
		if (ds_verify_item_init(it, kind, ns, name,
					sel && sel->form_of ? sel->form_of(sel->form_ud, ns)
							    : DS_VERIFY_ACTIVE,
					state && strcmp(state, "held") == 0) < 0) {
			rc = -ENOMEM;
			goto out;
		}
		len++;
		if (state && strcmp(state, "applied") != 0) {
			it->ledger_state = strdup(state);
			it->ledger_reason = reason ? strdup(reason) : NULL;
			if (!it->ledger_state || (reason && !it->ledger_reason)) {
				rc = -ENOMEM;
				goto out;
			}
		}
	}
	if (rc != SQLITE_DONE) {
		rc = ds_store_fail(store, rc, "workloads", err);
		goto out;
	}
	rc = 0;
	/* Two sources may name one target object: verify it once. */
	if (len)
		qsort(list, len, sizeof(*list), item_cmp);
	for (size_t r = w = 0; r < len; r++) {
		if (w && item_cmp(&list[w - 1], &list[r]) == 0) {
			ds_verify_item_dispose(&list[r]);
			continue;
		}
		if (w != r) {
			list[w] = list[r];
			memset(&list[r], 0, sizeof(list[r]));
		}
		w++;
	}
	len = len ? w : 0;
out:
	sqlite3_finalize(q);
	ds_store_free(store);
	if (rc < 0) {
		ds_verify_items_free(list, len);
		return ds_err_fallback(err, rc);
	}
	*items = list;
	*n = len;
	return 0;
}

/* ---- text ----------------------------------------------------------------------------- */

void ds_verify_addf(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int w;

	if (t->len + 1 >= t->size)
		return;
	va_start(ap, fmt);
	w = vsnprintf(t->buf + t->len, t->size - t->len, fmt, ap);
	va_end(ap);
	if (w > 0)
		t->len = t->len + (size_t)w >= t->size ? t->size - 1 : t->len + (size_t)w;
}

/* A clause, separated from what came before by "; ". */
void ds_verify_clause(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int w;

	if (t->len)
		ds_verify_addf(t, "; ");
	if (t->len + 1 >= t->size)
		return;
	va_start(ap, fmt);
	w = vsnprintf(t->buf + t->len, t->size - t->len, fmt, ap);
	va_end(ap);
	if (w > 0)
		t->len = t->len + (size_t)w >= t->size ? t->size - 1 : t->len + (size_t)w;
}

/* ---- the loop ------------------------------------------------------------------------- */

static bool stopped(const ds_verify_opts *o)
{
	return o && o->stop && atomic_load(o->stop);
}

int ds_verify_run(ds_verify *v, ds_verify_item *items, size_t n, const ds_verify_opts *o,
		  ds_verify_summary *sum, ds_err *err)
{
	long long t0 = ds_clock_mono_ms(), timeout = o ? o->timeout_ms : 0;
	long long interval = o && o->interval_ms > 0 ? o->interval_ms : 2000;
	bool *settled = n ? calloc(n, sizeof(*settled)) : NULL;
	size_t done = 0, verified = 0;

	if (n && !settled)
		return ds_err_fallback(err, -ENOMEM);
	for (;;) {
		for (size_t i = 0; i < n && !stopped(o); i++) {
			if (settled[i])
				continue;
			if (ds_verify_check(v, &items[i]) == -ENOMEM) {
				free(settled);
				return ds_err_fallback(err, -ENOMEM);
			}
			items[i].seconds = (double)(ds_clock_mono_ms() - t0) / 1000.0;
			if (items[i].verified) {
				settled[i] = true;
				done++;
				verified++;
				if (o && o->progress)
					o->progress(o->ud, &items[i], done, n);
			}
		}
		if (done == n || stopped(o) || ds_clock_mono_ms() - t0 >= timeout)
			break;
		/* Sleep to the next round, or to the deadline (one last round there). */
		for (long long until = ds_clock_mono_ms() + interval;
		     ds_clock_mono_ms() < until && ds_clock_mono_ms() - t0 < timeout &&
		     !stopped(o);) {
			long long left = until - ds_clock_mono_ms();
			struct timespec ts = {0, (left > 100 ? 100 : left) * 1000000L};
			nanosleep(&ts, NULL);
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (settled[i])
			continue;
		items[i].seconds = (double)(ds_clock_mono_ms() - t0) / 1000.0;
		done++;
		if (o && o->progress)
			o->progress(o->ud, &items[i], done, n);
	}
	free(settled);
	if (sum) {
		sum->total = n;
		sum->verified = verified;
		sum->not_verified = n - verified;
		sum->seconds = (double)(ds_clock_mono_ms() - t0) / 1000.0;
	}
	return (int)(n - verified);
}
