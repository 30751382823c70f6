/*
 * `drasync-target verify`'s side of the verifier (verify_run.h): which
 * workloads, which namespaces asked hold none, the report.
 */
#include "drasync/verify_run.h"

#include "drasync/buf.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

static const char *map_ns(void *ud, const char *source_ns)
{
	return ds_target_config_map_namespace(ud, source_ns);
}

int ds_verify_run_items(const char *ledger, const ds_target_config *cfg, const char *const *ns,
			size_t n_ns, ds_verify_item **items, size_t *n, ds_err *err)
{
	/* The forms are decided while the items are read: the modes are needed no longer. */
	ds_verify_modes modes = {cfg, ledger, NULL};
	ds_verify_select sel = {.namespaces = ns,
				.n_namespaces = n_ns,
				.map_ns = map_ns,
				.map_ud = (void *)cfg,
				.form_of = ds_verify_namespace_form,
				.form_ud = &modes};
	int rc = ds_verify_items_from_ledger(ledger, &sel, items, n, err);

	ds_verify_modes_dispose(&modes);
	return rc;
}

/* "; namespaces with workloads: a, b": one name per run of items (ordered by namespace). */
static void add_namespaces(ds_str *s, const ds_verify_item *items, size_t n)
{
	for (size_t j = 0; j < n; j++)
		if (j == 0 || strcmp(items[j].ns, items[j - 1].ns) != 0)
			ds_str_addf(s, "%s%s",
				    j ? ", " : "; namespaces with workloads: ", items[j].ns);
}

int ds_verify_run_missing(const ds_verify_item *items, size_t n, const char *const *ns, size_t n_ns,
			  json_t **lines)
{
	json_t *out = json_array();
	size_t count = 0;
	int rc = out ? 0 : -ENOMEM;

	for (size_t i = 0; rc == 0 && i < n_ns; i++) {
		bool found = false;
		ds_str s;

		for (size_t j = 0; j < n && !found; j++)
			found = strcmp(items[j].ns, ns[i]) == 0;
		if (found)
			continue;
		ds_str_init(&s, 1 << 20);
		ds_str_addf(&s,
			    "the ledger has no workload in namespace %s (name the target "
			    "namespace, after namespaceMappings)",
			    ns[i]);
		add_namespaces(&s, items, n);
		rc = ds_str_error(&s);
		if (rc == 0 && json_array_append_new(out, json_string(ds_str_ptr(&s))) < 0)
			rc = -ENOMEM;
		ds_str_dispose(&s);
		count++;
	}
	if (rc < 0) {
		json_decref(out);
		return rc;
	}
	*lines = out;
	return (int)count;
}

int ds_verify_run_check(ds_kube *k, const char *ledger, ds_verify_item *items, size_t n,
			const ds_verify_opts *o, ds_verify_summary *sum, int *stored,
			ds_err *store_err, ds_err *err)
{
	ds_verify *ver = NULL;
	int rc = ds_verify_new(&ver, k, err);

	if (rc == 0)
		rc = ds_verify_run(ver, items, n, o, sum, err);
	ds_verify_free(ver);
	if (rc < 0)
		return rc;
	*stored = ds_verify_store(ledger, items, n, store_err);
	return 0;
}

json_t *ds_verify_run_report(const char *ledger, const ds_verify_item *items, size_t n,
			     const ds_verify_summary *sum)
{
	json_t *o = json_object(), *arr = json_array();

	if (!o || !arr) {
		json_decref(o);
		json_decref(arr);
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		const ds_verify_item *it = &items[i];
		json_array_append_new(arr, json_pack("{ss ss ss ss sb ss sf}", "kind", it->kind,
						     "namespace", it->ns, "name", it->name, "form",
						     ds_verify_form_name(it->form), "verified",
						     it->verified, "reason", it->reason, "seconds",
						     it->seconds));
	}
	json_object_set_new(o, "ledger", json_string(ledger));
	json_object_set_new(o, "workloads", arr);
	json_object_set_new(o, "summary",
			    json_pack("{sI sI sI sf}", "total", (json_int_t)sum->total, "verified",
				      (json_int_t)sum->verified, "notVerified",
				      (json_int_t)sum->not_verified, "seconds", sum->seconds));
	json_object_set_new(o, "verified", json_boolean(sum->not_verified == 0));
	return o;
}
