#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu_apply.h"

#include "drasync/k8s_object.h"
#include "dstest.h"
#include "testutil.h"
#include "tu_kube.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SOURCE "prod-east"

static void on_event(void *ud, const ds_applier_event *ev)
{
	tu_apply *e = ud;

	if (!ev->takeover)
		return;
	e->takeovers++;
	snprintf(e->took_reason, sizeof(e->took_reason), "%s", ev->reason ? ev->reason : "");
}

tu_apply *tu_apply_new(const char *src, const tu_apply_opts *o)
{
	tu_apply *e = calloc(1, sizeof(*e));
	ds_applier_config ac = {0};
	ds_err err = {0};
	char yaml[600], file[1800];

	assert_non_null(e);
	snprintf(e->src, sizeof(e->src), "%s", src);
	snprintf(e->dst, sizeof(e->dst), "itest-ap-%u", tu_rand());
	snprintf(
	    yaml, sizeof(yaml),
	    "apiVersion: drasync.io/v1alpha1\nkind: TargetConfig\nmode: %s\n"
	    "namespaceMappings: {%s: %s}\n"
	    "dra:\n  deviceClassMappings:\n  - {from: gpu.nvidia.com, to: gpu.example.com}\n%s",
	    o && o->mode ? o->mode : "migrate", e->src, e->dst,
	    o && o->dra_yaml ? o->dra_yaml : "");
	e->cfg = dt_config(yaml);
	e->dir = tu_mkdtemp("applier");
	snprintf(e->path, sizeof(e->path), "%s/ledger.db", e->dir);
	snprintf(e->config, sizeof(e->config), "%s/target.yaml", e->dir);
	snprintf(file, sizeof(file), "%sstateDir: '%s'\n", yaml, e->dir);
	tu_write_file(e->config, file);
	tu_ledger_open(&e->l, e->path, SOURCE);
	e->k = tu_kube_connect(
	    tu_env(o && o->kubeconfig_env ? o->kubeconfig_env : "DS_KUBECONFIG_V1"));
	ac.ledger_path = e->path;
	ac.kube = e->k;
	ac.cfg = e->cfg;
	ac.backoff_ms = 100;
	ac.wait_retry_ms = 300;
	ac.on_event = on_event;
	ac.event_ud = e;
	ac.discovery_refresh_ms = o ? o->discovery_refresh_ms : 0;
	if (ds_applier_new(&e->a, &ac, &err) < 0)
		fail_msg("applier: %s", err.msg);
	/* nothing asked of the API server before the first pass (the link opens first) */
	assert_false(ds_applier_discovered(e->a));
	return e;
}

void tu_apply_free(tu_apply *e)
{
	struct ds_kube_resource r = tu_kube_resource(e->k, "v1", "Namespace");
	struct ds_kube_delete_opts d = {"Background", NULL, NULL, -1};

	ds_kube_delete(e->k, &r, NULL, e->dst, &d, NULL);
	ds_applier_free(e->a);
	ds_kube_free(e->k);
	tu_ledger_close(&e->l);
	ds_target_config_free(e->cfg);
	for (size_t i = 0; i < e->n_payloads; i++)
		free(e->payloads[i]);
	free(e->dir);
	free(e);
}

void tu_apply_commit(tu_apply *e, json_t *const *objs, size_t n)
{
	ds_record recs[64];
	char uid[64][300];

	assert_true(n <= 64 && e->n_payloads + n <= 256);
	for (size_t i = 0; i < n; i++) {
		snprintf(uid[i], sizeof(uid[i]), "uid-%s-%s", ds_obj_kind(objs[i]),
			 ds_obj_name(objs[i]));
		recs[i] = tu_record_upsert(objs[i], uid[i], &e->payloads[e->n_payloads++]);
	}
	tu_ledger_commit(&e->l, recs, n, NULL, NULL);
}

void tu_apply_commit1(tu_apply *e, json_t *obj)
{
	tu_apply_commit(e, &obj, 1);
	json_decref(obj);
}

int tu_apply_pass(tu_apply *e)
{
	ds_err err = {0};
	int n = ds_applier_pass(e->a, &err);

	if (n < 0)
		fail_msg("pass: %s", err.msg);
	return n;
}

void tu_apply_settle(tu_apply *e)
{
	while (tu_apply_pass(e) > 0)
		;
}

json_t *tu_apply_target_get(tu_apply *e, const char *api, const char *kind, const char *name)
{
	struct ds_kube_resource r = tu_kube_resource(e->k, api, kind);
	ds_kube_error ke;
	json_t *obj = NULL;
	char b[800];
	int rc = ds_kube_get(e->k, &r, r.namespaced ? e->dst : NULL, name, NULL, &obj, &ke);

	if (rc == -ENOENT)
		return NULL;
	if (rc < 0)
		fail_msg("get %s %s: %s", kind, name, ds_kube_error_format(&ke, b, sizeof(b)));
	return obj;
}

json_t *tu_objf(const char *fmt, ...)
{
	char text[2000];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	return dt_object(text);
}

void tu_apply_commit_configmaps(tu_apply *e, const char *const *names, size_t n)
{
	json_t *objs[8] = {0};

	assert_true(n <= 8);
	for (size_t i = 0; i < n; i++)
		objs[i] =
		    tu_objf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: "
			    "'%s'}\ndata: {a: '1'}\n",
			    names[i], e->src);
	tu_apply_commit(e, objs, n);
	for (size_t i = 0; i < n; i++)
		json_decref(objs[i]);
}

ds_applier_stats tu_apply_stats(tu_apply *e)
{
	ds_applier_stats s;

	ds_applier_stats_get(e->a, &s);
	return s;
}

ds_object_state_row tu_apply_row(tu_apply *e, const char *api, const char *kind, const char *name,
				 bool cluster_scoped)
{
	ds_object_state *st = NULL;
	ds_object_state_row r;
	ds_err err = {0};
	char key[600];

	ds_object_state_key(api, kind, cluster_scoped ? NULL : e->src, name, key, sizeof(key));
	assert_int_equal(ds_object_state_open(&st, e->path, &err), 0);
	if (ds_object_state_get(st, SOURCE, key, &r, &err) < 0)
		fail_msg("row %s: %s", key, err.msg);
	ds_object_state_free(st);
	return r;
}

void tu_apply_assert_state(tu_apply *e, const char *api, const char *kind, const char *name,
			   enum ds_apply_state want, const char *reason_part)
{
	ds_object_state_row r = tu_apply_row(e, api, kind, name, false);

	if (r.state != want || (reason_part && (!r.reason || !strcasestr(r.reason, reason_part))))
		fail_msg("%s %s: state %s (%s), want %s with reason containing '%s'", kind, name,
			 ds_apply_state_name(r.state), r.reason ? r.reason : "no reason",
			 ds_apply_state_name(want), reason_part ? reason_part : "");
	ds_object_state_row_dispose(&r);
}

size_t tu_apply_mark_applied(ds_object_state *st, size_t max)
{
	ds_object_state_row *rows = NULL;
	uint8_t h[DS_HASH_LEN] = {1};
	size_t n = 0;
	ds_err err = {0};

	if (ds_object_state_ingest(st, &err) < 0 ||
	    ds_object_state_pick(st, INT64_MAX, max, &rows, &n, &err) < 0)
		fail_msg("ledger: %s", err.msg);
	for (size_t i = 0; i < n; i++) {
		ds_object_state_result res = {.state = DS_APPLY_APPLIED,
					      .applied_hash = h,
					      .target_api_version = "v1",
					      .target_ns = "ml-team",
					      .target_name = rows[i].name};
		if (ds_object_state_set(st, rows[i].id, rows[i].record_id, &res, &err) < 0)
			fail_msg("set: %s", err.msg);
	}
	ds_object_state_rows_free(rows, n);
	return n;
}
