/*
 * drasync-target inventory --config target.yaml [--namespace NS]... [-o text|json|yaml]:
 * the seed's drop-downs as a command. Every claim reference the ledger holds
 * (object type, instance, container, pod-level entry -> claim or template),
 * the rule that maps it now or "unmapped", and whether its target exists on
 * this cluster; -o yaml prints a starting dra: block for the unmapped ones.
 * Read-only: the ledger on its own connection, the cluster by GETs.
 */
#include "commands.h"

#include "drasync/inventory.h"
#include "drasync/kube_client.h"
#include "drasync/kubeconfig.h"
#include "drasync/target_config.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_NAMESPACES 64

struct inventory {
	const char *config, *output, *kubeconfig, *context;
	const char *namespaces[MAX_NAMESPACES];
	size_t n_namespaces;
	bool offline;
};

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: drasync-target inventory --config FILE [--namespace NS]... "
		"[-o text|json|yaml]\n"
		"\n"
		"Lists every DRA claim reference the importer's ledger holds, as the sources\n"
		"sent them: per workload (Pod, Deployment, ReplicaSet, StatefulSet, DaemonSet,\n"
		"Job, CronJob) each container or init container and the pod-level\n"
		"spec.resourceClaims entry it uses, the ResourceClaim or ResourceClaimTemplate\n"
		"it names now and the one it lands on; the rule of the file's dra: block that\n"
		"maps it, or \"unmapped\"; and whether that claim or template exists on this\n"
		"cluster, in the namespace after namespaceMappings (yes, no, or unknown when\n"
		"the cluster cannot be asked). An entry no container lists shows container\n"
		"ALL, as the rules match it. The ResourceClaims and ResourceClaimTemplates\n"
		"the sources replicate as they are are listed too. Write the mapping rules\n"
		"from what the source really has: -o yaml prints a rule for each unmapped\n"
		"reference to start from.\n"
		"\n"
		"It reads the ledger in the file's stateDir (default /var/lib/drasync),\n"
		"whether `drasync-target run` is running or not, and changes nothing.\n"
		"\n"
		"Options:\n"
		"  -c, --config FILE      the TargetConfig file (required)\n"
		"  -n, --namespace NS     only objects of this namespace (the source's, or the\n"
		"                         target's after namespaceMappings); repeatable\n"
		"  -o, --output FMT       text (default): a table; json: every field;\n"
		"                         yaml: a dra: block with a rule per unmapped reference\n"
		"      --kubeconfig PATH  use this kubeconfig instead of the file's `kubeconfig`\n"
		"                         (empty there: in-cluster)\n"
		"      --context NAME     the kubeconfig context (default: current)\n"
		"      --offline          do not ask the cluster (the exists column says unknown)\n"
		"  -h, --help             show this help\n"
		"\n"
		"The rules in -o yaml name a target \"todo-<current name>\": replace it with the\n"
		"claim or template of this cluster, then merge the lists into the dra: block\n"
		"of the TargetConfig and check the result with `drasync-target plan`.\n"
		"\n"
		"Exit codes: 0 every reference's target exists here or is replicated; 1 some\n"
		"target is missing (or a reference cannot be resolved); 2 usage or\n"
		"configuration error, or no ledger yet in stateDir.\n"
		"\n"
		"Examples:\n"
		"  drasync-target inventory --config /etc/drasync/target.yaml\n"
		"  drasync-target inventory --config target.yaml --namespace ml-team -o json\n"
		"  drasync-target inventory --config target.yaml -o yaml > rules.yaml\n"
		"  drasync-target inventory --config target.yaml --kubeconfig ~/.kube/config "
		"--context dr\n");
}

static int parse_args(int argc, char **argv, struct inventory *v)
{
	static const struct option longopts[] = {
	    {"config", required_argument, NULL, 'c'},  {"namespace", required_argument, NULL, 'n'},
	    {"output", required_argument, NULL, 'o'},  {"kubeconfig", required_argument, NULL, 'k'},
	    {"context", required_argument, NULL, 'x'}, {"offline", no_argument, NULL, 'f'},
	    {"help", no_argument, NULL, 'h'},	       {NULL, 0, NULL, 0},
	};
	int c;

	optind = 1;
	v->output = "text";
	while ((c = getopt_long(argc, argv, "c:n:o:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			v->config = optarg;
			break;
		case 'n':
			if (!optarg[0]) {
				fprintf(stderr,
					"drasync-target inventory: --namespace needs a name, e.g.\n"
					"  drasync-target inventory --config target.yaml "
					"--namespace ml-team\n");
				return 2;
			}
			if (v->n_namespaces == MAX_NAMESPACES) {
				fprintf(stderr,
					"drasync-target inventory: at most %d --namespace options; "
					"leave them out to list every namespace\n",
					MAX_NAMESPACES);
				return 2;
			}
			v->namespaces[v->n_namespaces++] = optarg;
			break;
		case 'o':
			v->output = optarg;
			break;
		case 'k':
			v->kubeconfig = optarg;
			break;
		case 'x':
			v->context = optarg;
			break;
		case 'f':
			v->offline = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			fprintf(stderr, "Try 'drasync-target inventory --help'.\n");
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr,
			"drasync-target inventory: unexpected argument '%s'; name namespaces with "
			"--namespace NS (try --help)\n",
			argv[optind]);
		return 2;
	}
	if (!v->config) {
		fprintf(stderr, "drasync-target inventory: --config FILE is required, e.g.\n"
				"  drasync-target inventory --config /etc/drasync/target.yaml\n");
		return 2;
	}
	if (strcmp(v->output, "text") != 0 && strcmp(v->output, "json") != 0 &&
	    strcmp(v->output, "yaml") != 0) {
		fprintf(stderr,
			"drasync-target inventory: -o: '%s' is not text, json or yaml, e.g.\n"
			"  drasync-target inventory --config %s -o yaml\n",
			v->output, v->config);
		return 2;
	}
	if (v->offline && (v->kubeconfig || v->context)) {
		fprintf(stderr, "drasync-target inventory: --offline asks no cluster: leave out "
				"--kubeconfig and --context, or --offline\n");
		return 2;
	}
	return -1;
}

/*
 * The target cluster, or NULL with the reason in why. A kubeconfig named on
 * the command line that cannot be used is the operator's error (2); one the
 * file or the environment gives only makes the exists column unknown.
 */
static int connect_cluster(const struct inventory *v, const ds_target_config *cfg, ds_kube **out,
			   char *why, size_t size)
{
	struct ds_kube_transport_opts topts;
	ds_kubeconfig *kc = NULL;
	char msg[512];
	ds_err err = {0};
	int rc;

	*out = NULL;
	if (v->offline) {
		snprintf(why, size, "not checked (--offline)");
		return 0;
	}
	rc = ds_kubeconfig_for_agent(&kc, v->kubeconfig, v->context,
				     ds_target_config_kubeconfig(cfg), &err);
	if (rc < 0) {
		ds_err_format(&err, msg, sizeof(msg));
		if (v->kubeconfig || v->context) {
			fprintf(stderr,
				"drasync-target inventory: %s\n"
				"  (pass --kubeconfig PATH [--context NAME] of the target cluster, "
				"or --offline)\n",
				msg);
			return 2;
		}
		snprintf(why, size, "no cluster to ask: %s", msg);
		fprintf(stderr,
			"drasync-target inventory: %s\n"
			"  (outside a cluster, pass --kubeconfig PATH [--context NAME]; --offline "
			"to not ask)\n",
			why);
		return 0;
	}
	/* An operator waits for the answer: a cluster that does not answer is
	 * "unknown" after a short wait, not after the importer's patient retries. */
	ds_kube_transport_opts_init(&topts);
	topts.connect_timeout_ms = 5000;
	topts.timeout_ms = 15000;
	topts.max_retries = 1;
	rc = ds_kube_new(out, &kc, &topts, &err);
	ds_kubeconfig_free(kc);
	if (rc < 0) {
		snprintf(why, size, "no cluster to ask: %s", err.msg);
		fprintf(stderr, "drasync-target inventory: %s\n", why);
		*out = NULL;
	}
	return 0;
}

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

static int print_text(const ds_inventory *inv, const char *ledger, const char *config)
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
	printf("ledger: %s\n\n", ledger);
	if (inv->n_refs) {
		for (int c = 0; c < 8; c++)
			printf("%-*s%s", c < 7 ? (int)w[c] : 0, heads[c], c < 7 ? "  " : "\n");
		for (size_t i = 0; i < inv->n_refs; i++)
			for (int c = 0; c < 8; c++)
				printf("%-*s%s", c < 7 ? (int)w[c] : 0, rows[i].c[c],
				       c < 7 ? "  " : "\n");
	} else {
		printf("(the ledger holds no workload with claims, and no claim or template)\n");
	}
	free(rows);
	printf("\n%zu objects, %zu claim references: %zu unmapped, %zu need a look\n", inv->objects,
	       refs, ds_inventory_unmapped(inv), ds_inventory_missing(inv));
	for (size_t i = 0; i < inv->n_refs; i++) {
		const ds_inventory_ref *r = &inv->refs[i];
		const char *note = r->error;

		if (!note && ds_inventory_ref_missing(r))
			note = "the target has no such object and no source replicates it";
		if (!note)
			continue;
		if (!notes)
			printf("\n");
		notes = true;
		printf("  %s %s/%s", r->object_type, r->ns, r->instance);
		if (r->container || r->type == DS_INVENTORY_REFERENCE)
			printf(", container %s", r->container ? r->container : "ALL");
		if (r->entry)
			printf(", entry %s", r->entry);
		printf(": %s\n", note);
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
		printf("\n%s: %zu %s unknown: %s\n", n == 1 ? "target" : "targets", n,
		       n == 1 ? "is" : "are", r->exists_reason);
	}
	if (ds_inventory_unmapped(inv))
		printf("\nrules to start from: drasync-target inventory --config %s -o yaml\n",
		       config);
	return 0;
}

int ds_cmd_inventory(int argc, char **argv)
{
	struct inventory v = {0};
	ds_inventory_opts opts = {0};
	ds_target_config *cfg = NULL;
	ds_inventory *inv = NULL;
	ds_kube *kube = NULL;
	char ledger[4096], msg[512], why[700] = "";
	ds_err err = {0};
	int rc;

	rc = parse_args(argc, argv, &v);
	if (rc >= 0)
		return rc;
	if (ds_target_config_load(&cfg, v.config, &err) < 0) {
		fprintf(stderr, "drasync-target inventory: %s\n",
			ds_err_format(&err, msg, sizeof(msg)));
		return 2;
	}
	ds_target_config_ledger(cfg, ledger, sizeof(ledger));
	if (access(ledger, F_OK) != 0) {
		fprintf(stderr,
			"drasync-target inventory: no ledger at %s: drasync-target run has not "
			"started with this stateDir yet\n"
			"  (the ledger is stateDir/ledger.db; check stateDir in %s, or start "
			"`drasync-target run --config %s` first)\n",
			ledger, v.config, v.config);
		rc = 2;
		goto out;
	}
	rc = connect_cluster(&v, cfg, &kube, why, sizeof(why));
	if (rc > 0)
		goto out;
	opts.ledger_path = ledger;
	opts.cfg = cfg;
	opts.namespaces = v.namespaces;
	opts.n_namespaces = v.n_namespaces;
	opts.kube = kube;
	opts.no_kube_reason = why[0] ? why : NULL;
	rc = ds_inventory_read(&opts, &inv, &err);
	if (rc < 0) {
		fprintf(stderr, "drasync-target inventory: %s\n", err.msg);
		if (rc == -ENOENT)
			fprintf(stderr,
				"  (the ledger is stateDir/ledger.db; check stateDir in %s, or "
				"start `drasync-target run --config %s` first)\n",
				v.config, v.config);
		rc = rc == -ENOENT ? 2 : 1;
		goto out;
	}
	if (strcmp(v.output, "json") == 0) {
		json_t *o = ds_inventory_json(inv);
		char *text = NULL;

		if (o && json_object_set_new(o, "ledger", json_string(ledger)) == 0)
			text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		json_decref(o);
		if (!text) {
			rc = -ENOMEM;
		} else {
			printf("%s\n", text);
			free(text);
			rc = 0;
		}
	} else if (strcmp(v.output, "yaml") == 0) {
		char *text = NULL;

		rc = ds_inventory_rules_yaml(inv, &text);
		if (rc == 0)
			fputs(text, stdout);
		free(text);
	} else {
		rc = print_text(inv, ledger, v.config);
	}
	if (rc < 0) {
		fprintf(stderr, "drasync-target inventory: %s\n", strerror(-rc));
		rc = 1;
		goto out;
	}
	rc = ds_inventory_missing(inv) ? 1 : 0;
	if (rc && strcmp(v.output, "text") != 0)
		fprintf(stderr,
			"drasync-target inventory: %zu claim references need a look (a target "
			"missing on this cluster, or rules that cannot resolve them)\n",
			ds_inventory_missing(inv));
out:
	ds_inventory_free(inv);
	ds_kube_free(kube);
	ds_target_config_free(cfg);
	return rc;
}
