/*
 * `drasync-target inventory`'s report of an inventory (inventory.h): the
 * table with one row per claim reference, the notes on those that need a
 * look, why the cluster could not say, and the JSON document.
 */
#include "drasync/inventory_report.h"

#include "drasync/kubeconfig.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static const char *kind_word(enum ds_target_kind k)
{
	return k == DS_TARGET_CLAIM ? "claim" : "template";
}

/* The cells of one row of the table. */
struct cells {
	char c[8][600];
};

static void cells_of(const ds_inventory_ref *r, struct cells *t)
{
	bool moved = strcmp(r->ns, r->target_ns) != 0;

	snprintf(t->c[0], sizeof(t->c[0]), "%s", r->ns);
	snprintf(t->c[1], sizeof(t->c[1]), "%s", r->object_type);
	snprintf(t->c[2], sizeof(t->c[2]), "%s", r->instance);
	if (r->type == DS_INVENTORY_REFERENCE && !r->container)
		snprintf(t->c[3], sizeof(t->c[3]), "ALL");
	else
		snprintf(t->c[3], sizeof(t->c[3]), "%s%s", r->container ? r->container : "-",
			 r->init_container ? " (init)" : "");
	snprintf(t->c[4], sizeof(t->c[4]), "%s",
		 r->type == DS_INVENTORY_ATTACH ? "(attach)"
		 : r->entry			? r->entry
						: "-");
	if (r->target)
		snprintf(t->c[5], sizeof(t->c[5]), "%s %s%s%s", kind_word(r->target_kind),
			 moved ? r->target_ns : "", moved ? "/" : "", r->target);
	else
		snprintf(t->c[5], sizeof(t->c[5]), "-");
	if (r->type == DS_INVENTORY_BROKEN || r->error)
		snprintf(t->c[6], sizeof(t->c[6]), "error (below)");
	else if (r->type == DS_INVENTORY_OBJECT)
		snprintf(t->c[6], sizeof(t->c[6]), "(replicated)");
	else if (r->rule && r->rule_line)
		snprintf(t->c[6], sizeof(t->c[6]), "%s line %d", r->rule, r->rule_line);
	else
		snprintf(t->c[6], sizeof(t->c[6]), "%s", r->rule ? r->rule : "unmapped");
	if (r->type == DS_INVENTORY_BROKEN || r->error)
		snprintf(t->c[7], sizeof(t->c[7]), "-");
	else
		snprintf(t->c[7], sizeof(t->c[7]), "%s%s", ds_inventory_exists_name(r->exists),
			 r->exists != DS_EXISTS_YES && r->replicated &&
				 r->type != DS_INVENTORY_OBJECT
			     ? " (replicated)"
			     : "");
}

int ds_inventory_report_text(FILE *out, const ds_inventory *inv, const char *ledger,
			     const char *config)
{
	static const char *const heads[8] = {"NAMESPACE", "OBJECT TYPE", "INSTANCE",
					     "CONTAINER", "ENTRY",	 "-> CLAIM/TEMPLATE",
					     "RULE",	  "EXISTS"};
	struct cells *rows = calloc(inv->n_refs + 1, sizeof(*rows));
	size_t w[8], refs = 0;
	bool notes = false;

	if (!rows)
		return -ENOMEM;
	for (int c = 0; c < 8; c++)
		w[c] = strlen(heads[c]);
	for (size_t i = 0; i < inv->n_refs; i++) {
		cells_of(&inv->refs[i], &rows[i]);
		for (int c = 0; c < 8; c++)
			if (strlen(rows[i].c[c]) > w[c])
				w[c] = strlen(rows[i].c[c]);
		refs += inv->refs[i].type == DS_INVENTORY_REFERENCE ||
			inv->refs[i].type == DS_INVENTORY_ATTACH;
	}
	fprintf(out, "ledger: %s\n\n", ledger);
	if (inv->n_refs) {
		for (int c = 0; c < 8; c++)
			fprintf(out, "%-*s%s", c < 7 ? (int)w[c] : 0, heads[c],
				c < 7 ? "  " : "\n");
		for (size_t i = 0; i < inv->n_refs; i++)
			for (int c = 0; c < 8; c++)
				fprintf(out, "%-*s%s", c < 7 ? (int)w[c] : 0, rows[i].c[c],
					c < 7 ? "  " : "\n");
	} else {
		fprintf(out,
			"(the ledger holds no workload with claims, and no claim or template)\n");
	}
	free(rows);
	fprintf(out, "\n%zu objects, %zu claim references: %zu unmapped, %zu need a look\n",
		inv->objects, refs, ds_inventory_unmapped(inv), ds_inventory_missing(inv));
	for (size_t i = 0; i < inv->n_refs; i++) {
		const ds_inventory_ref *r = &inv->refs[i];
		const char *note = r->error;

		if (!note && ds_inventory_ref_missing(r))
			note = "the target has no such object and no source replicates it";
		if (!note)
			continue;
		if (!notes)
			fprintf(out, "\n");
		notes = true;
		fprintf(out, "  %s %s/%s", r->object_type, r->ns, r->instance);
		if (r->container || r->type == DS_INVENTORY_REFERENCE)
			fprintf(out, ", container %s", r->container ? r->container : "ALL");
		if (r->entry)
			fprintf(out, ", entry %s", r->entry);
		fprintf(out, ": %s\n", note);
	}
	/* Why the cluster did not say, once per reason (offline: one line for all). */
	for (size_t i = 0; i < inv->n_refs; i++) {
		const ds_inventory_ref *r = &inv->refs[i];
		size_t n = 0;
		bool before = false;

		if (r->exists != DS_EXISTS_UNKNOWN || !r->exists_reason || r->error)
			continue;
		for (size_t j = 0; j < inv->n_refs && !before; j++) {
			const ds_inventory_ref *o = &inv->refs[j];
			bool same = o->exists == DS_EXISTS_UNKNOWN && o->exists_reason &&
				    !o->error && strcmp(o->exists_reason, r->exists_reason) == 0;

			if (same && j < i)
				before = true;
			n += same;
		}
		if (before)
			continue;
		fprintf(out, "\n%s: %zu %s unknown: %s\n", n == 1 ? "target" : "targets", n,
			n == 1 ? "is" : "are", r->exists_reason);
	}
	if (ds_inventory_unmapped(inv))
		fprintf(out,
			"\nrules to start from: drasync-target inventory --config %s -o yaml\n",
			config);
	return 0;
}

int ds_inventory_report_json(FILE *out, const ds_inventory *inv, const char *ledger)
{
	json_t *o = ds_inventory_json(inv);
	char *text = NULL;

	if (o && json_object_set_new(o, "ledger", json_string(ledger)) == 0)
		text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (!text)
		return -ENOMEM;
	fprintf(out, "%s\n", text);
	free(text);
	return 0;
}

int ds_inventory_report(FILE *out, const ds_inventory *inv, const char *format, const char *ledger,
			const char *config)
{
	char *text = NULL;
	int rc;

	if (strcmp(format, "json") == 0)
		return ds_inventory_report_json(out, inv, ledger);
	if (strcmp(format, "text") == 0)
		return ds_inventory_report_text(out, inv, ledger, config);
	if (strcmp(format, "yaml") != 0)
		return -EINVAL;
	rc = ds_inventory_rules_yaml(inv, &text);
	if (rc == 0)
		fputs(text, out);
	free(text);
	return rc;
}

int ds_inventory_kube(const char *kubeconfig, const char *context, const ds_target_config *cfg,
		      ds_kube **out, char *why, size_t size, ds_err *err)
{
	struct ds_kube_transport_opts topts;
	ds_kubeconfig *kc = NULL;
	char msg[512];
	ds_err e = {0};
	int rc;

	*out = NULL;
	rc =
	    ds_kubeconfig_for_agent(&kc, kubeconfig, context, ds_target_config_kubeconfig(cfg), &e);
	if (rc < 0) {
		/* Named on the command line: the operator's error; else the column is unknown. */
		if (kubeconfig || context) {
			if (err)
				*err = e;
			return rc;
		}
		snprintf(why, size, "no cluster to ask: %s", ds_err_format(&e, msg, sizeof(msg)));
		return 1;
	}
	/* An operator waits for the answer: a cluster that does not answer is
	 * "unknown" after a short wait, not after the importer's patient retries. */
	ds_kube_transport_opts_init(&topts);
	topts.connect_timeout_ms = 5000;
	topts.timeout_ms = 15000;
	topts.max_retries = 1;
	rc = ds_kube_new(out, &kc, &topts, &e);
	ds_kubeconfig_free(kc);
	if (rc < 0) {
		snprintf(why, size, "no cluster to ask: %s", e.msg);
		*out = NULL;
	}
	return 0;
}
