/*
 * drasync-target verify --config target.yaml [--namespace NS]... [--timeout DUR]
 * [-o text|json]: the seed's step 7 on demand. Reads the workloads from the
 * ledger in stateDir (whether `run` runs or not), checks each against this
 * cluster until it verifies or the timeout passes, prints a line per workload
 * and a summary, and stores the outcome in the ledger for `status`.
 */
#include "commands.h"

#include "drasync/cli.h"
#include "drasync/kube_client.h"
#include "drasync/target_config.h"
#include "drasync/verify.h"
#include "drasync/verify_run.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NAMESPACES 64

enum { KEY_INTERVAL = DS_CLI_LONG_ONLY };

struct verify {
	struct ds_cli_args a;
	long long interval_ms;
	ds_target_config *cfg;
	bool json;
};

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "Usage: drasync-target verify --config FILE [--namespace NS]... [--timeout DUR]\n"
	    "                             [-o text|json]\n"
	    "\n"
	    "Checks that the workloads the importer put on this cluster are what their\n"
	    "namespace's form promises, as `kubectl get/describe` would show it:\n"
	    "  active (mode migrate, after failover): pods scheduled and Running, their\n"
	    "    ResourceClaims allocated, the claims and templates they name present;\n"
	    "    a CronJob exists and is not suspended (it has no pods until it fires);\n"
	    "  standby: every workload exists and is parked (replicas 0 with annotation\n"
	    "    drasync.io/replicas, CronJobs suspended, DaemonSets on no node), Pods\n"
	    "    and Jobs held in the ledger are not on the cluster.\n"
	    "Each workload is checked again every few seconds until it verifies or the\n"
	    "timeout passes; then it is NOT verified, with the cluster's own words: the\n"
	    "scheduler's FailedScheduling message, the claim left unallocated, the\n"
	    "DeviceClass that does not exist, a container's ErrImagePull...\n"
	    "\n"
	    "The workloads are those of the ledger in the file's stateDir (whether\n"
	    "`drasync-target run` runs or not); the outcome is stored there, and\n"
	    "`drasync-target status` shows the last one.\n"
	    "\n"
	    "Options:\n"
	    "  -c, --config FILE      the TargetConfig file (required)\n"
	    "  -n, --namespace NS     only workloads in this target namespace (after\n"
	    "                         namespaceMappings); repeat for several\n"
	    "  -t, --timeout DUR      how long to wait for the workloads, a Go duration\n"
	    "                         (300ms, 90s, 5m, 1h30m; default 5m; 0: check once)\n"
	    "      --interval DUR     between two checks of a workload (default 2s)\n"
	    "  -o, --output FMT       text (default: a line per workload as it settles)\n"
	    "                         or json (one object at the end)\n"
	    "      --kubeconfig PATH  use this kubeconfig instead of the file's\n"
	    "                         `kubeconfig` (empty there: in-cluster)\n"
	    "      --context NAME     the kubeconfig context (default: current)\n"
	    "  -h, --help             show this help\n"
	    "\n"
	    "Exit codes: 0 every workload verified; 1 some did not (or the cluster could\n"
	    "not be reached); 2 usage or configuration error, or no ledger in stateDir.\n"
	    "\n"
	    "Examples:\n"
	    "  drasync-target verify --config /etc/drasync/target.yaml\n"
	    "  drasync-target verify --config target.yaml --namespace ml-team-dr --timeout 10m\n"
	    "  drasync-target verify --config target.yaml --timeout 0 -o json\n");
}

static int on_option(void *ctx, int key, const char *arg, long long ms)
{
	struct verify *v = ctx;

	(void)arg;
	if (key == KEY_INTERVAL)
		v->interval_ms = ms;
	return 0;
}

static int parse_args(int argc, char **argv, struct verify *v)
{
	static const struct ds_cli_option own[] = {{"interval", KEY_INTERVAL, DS_CLI_DURATION},
						   {NULL}};
	const struct ds_cli_spec spec = {.prog = "drasync-target",
					 .cmd = "verify",
					 .takes = DS_CLI_CONFIG | DS_CLI_KUBECONFIG |
						  DS_CLI_CONTEXT | DS_CLI_OUTPUT |
						  DS_CLI_NAMESPACE | DS_CLI_TIMEOUT |
						  DS_CLI_ZERO_DURATION | DS_CLI_CONFIG_REQUIRED,
					 .usage = usage,
					 .config_example = "/etc/drasync/target.yaml",
					 .max_namespaces = MAX_NAMESPACES,
					 .ns_example = "ml-team-dr",
					 .ns_hint = "leave it out for every namespace",
					 .args_hint = "; name namespaces with --namespace NS",
					 .options = own,
					 .on_option = on_option,
					 .ctx = v};
	int rc = ds_cli_parse(&spec, argc, argv, &v->a);

	if (rc != DS_CLI_CONTINUE)
		return rc;
	v->json = strcmp(v->a.output, "json") == 0;
	return DS_CLI_CONTINUE;
}

static void on_settled(void *ud, const ds_verify_item *it, size_t settled, size_t total)
{
	const struct verify *v = ud;

	(void)settled;
	(void)total;
	if (v->json)
		return;
	if (it->verified)
		printf("%s %s/%s (%s): verified in %.1f s: %s\n", it->kind, it->ns, it->name,
		       ds_verify_form_name(it->form), it->seconds, it->reason);
	else
		printf("%s %s/%s (%s): NOT verified: %s\n", it->kind, it->ns, it->name,
		       ds_verify_form_name(it->form), it->reason);
	fflush(stdout);
}

static void print_json(const char *ledger, const ds_verify_item *items, size_t n,
		       const ds_verify_summary *sum)
{
	json_t *o = ds_verify_run_report(ledger, items, n, sum);
	char *text = o ? json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;

	if (text)
		printf("%s\n", text);
	free(text);
	json_decref(o);
}

/* A --namespace that holds no workload is a typo more often than not: say which do. */
static int check_namespaces(const struct verify *v, const char *ledger)
{
	ds_verify_item *all = NULL;
	json_t *lines = NULL, *line;
	size_t n = 0, i;
	int rc;

	if (ds_verify_run_items(ledger, v->cfg, NULL, 0, &all, &n, NULL) < 0)
		return 0;
	rc = ds_verify_run_missing(all, n, v->a.namespaces, v->a.n_namespaces, &lines);
	json_array_foreach (lines, i, line)
		fprintf(stderr, "drasync-target verify: %s\n", json_string_value(line));
	json_decref(lines);
	ds_verify_items_free(all, n);
	return rc > 0 ? 2 : 0;
}

static int verify(struct verify *v)
{
	ds_verify_opts o = {.timeout_ms = v->a.timeout_ms,
			    .interval_ms = v->interval_ms,
			    .progress = on_settled,
			    .ud = v};
	ds_verify_summary sum = {0};
	ds_verify_item *items = NULL;
	ds_kube *k = NULL;
	char ledger[4096];
	ds_err err = {0}, store_err = {0};
	size_t n = 0;
	int rc, stored = 0;

	ds_target_config_ledger(v->cfg, ledger, sizeof(ledger));
	rc = ds_verify_run_items(ledger, v->cfg, v->a.namespaces, v->a.n_namespaces, &items, &n,
				 &err);
	if (rc == -ENOENT) {
		fprintf(stderr,
			"drasync-target verify: %s\n"
			"  nothing to verify yet: start the importer with\n"
			"  drasync-target run --config %s, or check stateDir in %s\n",
			err.msg, v->a.config, v->a.config);
		return 2;
	}
	if (rc < 0) {
		fprintf(stderr, "drasync-target verify: %s\n", err.msg);
		return 1;
	}
	if (v->a.n_namespaces && (rc = check_namespaces(v, ledger)) != 0)
		goto out;
	if (!n) {
		if (v->json)
			print_json(ledger, items, n, &sum);
		else
			printf("no workloads in the ledger %s to verify\n", ledger);
		rc = 0;
		goto out;
	}
	rc = ds_target_connect("verify", v->a.kubeconfig, v->a.context, v->cfg, NULL, &k);
	if (rc)
		goto out;
	rc = ds_verify_run_check(k, ledger, items, n, &o, &sum, &stored, &store_err, &err);
	if (rc < 0) {
		fprintf(stderr, "drasync-target verify: %s\n", err.msg);
		rc = 1;
		goto out;
	}
	if (stored < 0)
		fprintf(stderr,
			"drasync-target verify: the outcome is not in the ledger (status will not "
			"show it): %s\n",
			store_err.msg);
	if (v->json) {
		print_json(ledger, items, n, &sum);
	} else {
		printf("\nsummary: %zu workload%s, %zu verified, %zu NOT verified (%.1f s)\n",
		       sum.total, sum.total == 1 ? "" : "s", sum.verified, sum.not_verified,
		       sum.seconds);
	}
	rc = sum.not_verified ? 1 : 0;
out:
	ds_kube_free(k);
	ds_verify_items_free(items, n);
	return rc;
}

int ds_cmd_verify(int argc, char **argv)
{
	struct verify v = {.a = {.timeout_ms = 5 * 60 * 1000}};
	char msg[512];
	ds_err err = {0};
	int rc;

	rc = parse_args(argc, argv, &v);
	if (rc >= 0)
		return rc;
	if (ds_target_config_load(&v.cfg, v.a.config, &err) < 0) {
		fprintf(stderr, "drasync-target verify: %s\n",
			ds_err_format(&err, msg, sizeof(msg)));
		return 2;
	}
	rc = verify(&v);
	ds_target_config_free(v.cfg);
	return rc;
}
