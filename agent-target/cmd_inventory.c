/*
 * drasync-target inventory --config target.yaml [--namespace NS]... [-o text|json|yaml]:
 * the seed's drop-downs as a command. Every claim reference the ledger holds
 * (object type, instance, container, pod-level entry -> claim or template),
 * the rule that maps it now or "unmapped", and whether its target exists on
 * this cluster; -o yaml prints a starting dra: block for the unmapped ones.
 * Read-only: the ledger on its own connection, the cluster by GETs.
 */
#include "commands.h"

#include "drasync/cli.h"
#include "drasync/inventory.h"
#include "drasync/inventory_report.h"
#include "drasync/kube_client.h"
#include "drasync/target_config.h"

#include <errno.h>
#include <stdio.h>
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

/* -n, -o, --offline: their own texts, older than cli.h's. */
static int on_option(void *ctx, int key, const char *arg, long long ms)
{
	struct inventory *v = ctx;

	(void)ms;
	if (key == 'o')
		v->output = arg;
	else if (key == DS_CLI_LONG_ONLY)
		v->offline = true;
	if (key != 'n')
		return 0;
	if (!arg[0]) {
		fprintf(stderr,
			"drasync-target inventory: --namespace needs a name, e.g.\n"
			"  drasync-target inventory --config target.yaml --namespace ml-team\n");
		return 2;
	}
	if (v->n_namespaces == MAX_NAMESPACES) {
		fprintf(stderr,
			"drasync-target inventory: at most %d --namespace options; leave them out "
			"to list every namespace\n",
			MAX_NAMESPACES);
		return 2;
	}
	v->namespaces[v->n_namespaces++] = arg;
	return 0;
}

static int parse_args(int argc, char **argv, struct inventory *v)
{
	static const struct ds_cli_option own[] = {{"namespace", 'n', DS_CLI_STRING},
						   {"output", 'o', DS_CLI_STRING},
						   {"offline", DS_CLI_LONG_ONLY, DS_CLI_FLAG},
						   {NULL, 0, 0}};
	const struct ds_cli_spec spec = {.prog = "drasync-target",
					 .cmd = "inventory",
					 .takes = DS_CLI_CONFIG | DS_CLI_KUBECONFIG |
						  DS_CLI_CONTEXT | DS_CLI_CONFIG_REQUIRED,
					 .usage = usage,
					 .config_example = "/etc/drasync/target.yaml",
					 .args_hint = "; name namespaces with --namespace NS",
					 .options = own,
					 .on_option = on_option,
					 .ctx = v};
	struct ds_cli_args args = {0};
	int rc = ds_cli_parse(&spec, argc, argv, &args);

	if (rc != DS_CLI_CONTINUE)
		return rc;
	v->config = args.config;
	v->kubeconfig = args.kubeconfig;
	v->context = args.context;
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

/* The cluster to ask, or NULL with why; 2: the one named on the command line is unusable. */
static int connect_cluster(const struct inventory *v, const ds_target_config *cfg, ds_kube **out,
			   char *why, size_t size)
{
	char msg[512];
	ds_err err = {0};
	int rc;

	*out = NULL;
	if (v->offline) {
		snprintf(why, size, "not checked (--offline)");
		return 0;
	}
	rc = ds_inventory_kube(v->kubeconfig, v->context, cfg, out, why, size, &err);
	if (rc < 0) {
		fprintf(stderr,
			"drasync-target inventory: %s\n"
			"  (pass --kubeconfig PATH [--context NAME] of the target cluster, "
			"or --offline)\n",
			ds_err_format(&err, msg, sizeof(msg)));
		return 2;
	}
	if (rc > 0)
		fprintf(stderr,
			"drasync-target inventory: %s\n"
			"  (outside a cluster, pass --kubeconfig PATH [--context NAME]; --offline "
			"to not ask)\n",
			why);
	else if (!*out)
		fprintf(stderr, "drasync-target inventory: %s\n", why);
	return 0;
}

int ds_cmd_inventory(int argc, char **argv)
{
	struct inventory v = {.output = "text"};
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
	opts = (ds_inventory_opts){.ledger_path = ledger,
				   .cfg = cfg,
				   .namespaces = v.namespaces,
				   .n_namespaces = v.n_namespaces,
				   .kube = kube,
				   .no_kube_reason = why[0] ? why : NULL};
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
	rc = ds_inventory_report(stdout, inv, v.output, ledger, v.config);
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
