/*
 * drasync-target verify --config target.yaml [--namespace NS]... [--timeout DUR]
 * [-o text|json]: the seed's step 7 on demand. Reads the workloads from the
 * ledger in stateDir (whether `run` runs or not), checks each against this
 * cluster until it verifies or the timeout passes, prints a line per workload
 * and a summary, and stores the outcome in the ledger for `status`.
 */
#include "commands.h"

#include "drasync/duration.h"
#include "drasync/kube_client.h"
#include "drasync/target_config.h"
#include "drasync/verify.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NAMESPACES 64

struct verify {
	const char *config, *kubeconfig, *context, *output;
	const char *namespaces[MAX_NAMESPACES];
	size_t n_namespaces;
	long long timeout_ms, interval_ms;
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

static int parse_args(int argc, char **argv, struct verify *v)
{
	static const struct option longopts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"namespace", required_argument, NULL, 'n'},
	    {"timeout", required_argument, NULL, 't'},
	    {"output", required_argument, NULL, 'o'},
	    {"interval", required_argument, NULL, 'i'},
	    {"kubeconfig", required_argument, NULL, 'k'},
	    {"context", required_argument, NULL, 'x'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	ds_err err = {0};
	int64_t ns;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "c:n:t:o:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			v->config = optarg;
			break;
		case 'n':
			if (!optarg[0] || v->n_namespaces == MAX_NAMESPACES) {
				fprintf(stderr,
					"drasync-target verify: --namespace needs a name (at most "
					"%d of them); leave it out for every namespace\n",
					MAX_NAMESPACES);
				return 2;
			}
			v->namespaces[v->n_namespaces++] = optarg;
			break;
		case 't':
		case 'i':
			if (ds_duration_parse(optarg, &ns, NULL, &err) < 0 || ns < 0) {
				fprintf(stderr,
					"drasync-target verify: --%s: '%s': %s (a Go duration, "
					"e.g. 90s, 5m, 1h30m)\n",
					c == 't' ? "timeout" : "interval", optarg,
					err.msg[0] ? err.msg : "negative");
				return 2;
			}
			if (c == 't')
				v->timeout_ms = ns / 1000000;
			else
				v->interval_ms = ns / 1000000;
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
		case 'h':
			usage(stdout);
			return 0;
		default:
			fprintf(stderr, "Try 'drasync-target verify --help'.\n");
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr,
			"drasync-target verify: unexpected argument '%s'; name namespaces with "
			"--namespace NS (try --help)\n",
			argv[optind]);
		return 2;
	}
	if (!v->config) {
		fprintf(stderr, "drasync-target verify: --config FILE is required, e.g.\n"
				"  drasync-target verify --config /etc/drasync/target.yaml\n");
		return 2;
	}
	if (strcmp(v->output, "text") != 0 && strcmp(v->output, "json") != 0) {
		fprintf(stderr, "drasync-target verify: -o: '%s' is not text or json\n", v->output);
		return 2;
	}
	v->json = strcmp(v->output, "json") == 0;
	return -1;
}

static const char *map_ns(void *ud, const char *source_ns)
{
	return ds_target_config_map_namespace(ud, source_ns);
}

static void print_line(const ds_verify_item *it)
{
	if (it->verified)
		printf("%s %s/%s (%s): verified in %.1f s: %s\n", it->kind, it->ns, it->name,
		       ds_verify_form_name(it->form), it->seconds, it->reason);
	else
		printf("%s %s/%s (%s): NOT verified: %s\n", it->kind, it->ns, it->name,
		       ds_verify_form_name(it->form), it->reason);
	fflush(stdout);
}

static void on_settled(void *ud, const ds_verify_item *it, size_t settled, size_t total)
{
	const struct verify *v = ud;

	(void)settled;
	(void)total;
	if (!v->json)
		print_line(it);
}

static void print_json(const struct verify *v, const char *ledger, const ds_verify_item *items,
		       size_t n, const ds_verify_summary *sum)
{
	json_t *o = json_object(), *arr = json_array();
	char *text;

	(void)v;
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
	text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (text)
		printf("%s\n", text);
	free(text);
	json_decref(o);
}

/* A --namespace that holds no workload is a typo more often than not: say which do. */
static int check_namespaces(const struct verify *v, const char *ledger)
{
	ds_verify_select all = {.map_ns = map_ns, .map_ud = v->cfg};
	ds_verify_item *items = NULL;
	size_t n = 0;
	int rc = 0;

	if (ds_verify_items_from_ledger(ledger, &all, &items, &n, NULL) < 0)
		return 0;
	for (size_t i = 0; i < v->n_namespaces; i++) {
		bool found = false;
		for (size_t j = 0; j < n && !found; j++)
			found = strcmp(items[j].ns, v->namespaces[i]) == 0;
		if (found)
			continue;
		fprintf(stderr,
			"drasync-target verify: the ledger has no workload in namespace %s (name "
			"the target namespace, after namespaceMappings)",
			v->namespaces[i]);
		for (size_t j = 0; j < n; j++)
			if (j == 0 || strcmp(items[j].ns, items[j - 1].ns) != 0)
				fprintf(stderr, "%s%s",
					j ? ", " : "; namespaces with workloads: ", items[j].ns);
		fprintf(stderr, "\n");
		rc = 2;
	}
	ds_verify_items_free(items, n);
	return rc;
}

static int verify(struct verify *v)
{
	ds_verify_modes modes = {v->cfg, NULL, NULL};
	ds_verify_select sel = {.namespaces = v->namespaces,
				.n_namespaces = v->n_namespaces,
				.map_ns = map_ns,
				.map_ud = v->cfg,
				.form_of = ds_verify_namespace_form,
				.form_ud = &modes};
	ds_verify_opts o = {.timeout_ms = v->timeout_ms,
			    .interval_ms = v->interval_ms,
			    .progress = on_settled,
			    .ud = v};
	ds_verify_summary sum = {0};
	ds_verify_item *items = NULL;
	ds_verify *ver = NULL;
	ds_kube *k = NULL;
	char ledger[4096];
	ds_err err = {0};
	size_t n = 0;
	int rc;

	ds_target_config_ledger(v->cfg, ledger, sizeof(ledger));
	modes.ledger_path = ledger;
	rc = ds_verify_items_from_ledger(ledger, &sel, &items, &n, &err);
	if (rc == -ENOENT) {
		fprintf(stderr,
			"drasync-target verify: %s\n"
			"  nothing to verify yet: start the importer with\n"
			"  drasync-target run --config %s, or check stateDir in %s\n",
			err.msg, v->config, v->config);
		ds_verify_modes_dispose(&modes);
		return 2;
	}
	if (rc < 0) {
		fprintf(stderr, "drasync-target verify: %s\n", err.msg);
		ds_verify_modes_dispose(&modes);
		return 1;
	}
	if (v->n_namespaces && (rc = check_namespaces(v, ledger)) != 0)
		goto out;
	if (!n) {
		if (v->json)
			print_json(v, ledger, items, n, &sum);
		else
			printf("no workloads in the ledger %s to verify\n", ledger);
		rc = 0;
		goto out;
	}
	rc = ds_target_connect("verify", v->kubeconfig, v->context, v->cfg, NULL, &k);
	if (rc)
		goto out;
	rc = ds_verify_new(&ver, k, &err);
	if (rc == 0)
		rc = ds_verify_run(ver, items, n, &o, &sum, &err);
	if (rc < 0) {
		fprintf(stderr, "drasync-target verify: %s\n", err.msg);
		rc = 1;
		goto out;
	}
	if (ds_verify_store(ledger, items, n, &err) < 0)
		fprintf(stderr,
			"drasync-target verify: the outcome is not in the ledger (status will not "
			"show it): %s\n",
			err.msg);
	if (v->json) {
		print_json(v, ledger, items, n, &sum);
	} else {
		printf("\nsummary: %zu workload%s, %zu verified, %zu NOT verified (%.1f s)\n",
		       sum.total, sum.total == 1 ? "" : "s", sum.verified, sum.not_verified,
		       sum.seconds);
	}
	rc = sum.not_verified ? 1 : 0;
out:
	ds_verify_modes_dispose(&modes);
	ds_verify_free(ver);
	ds_kube_free(k);
	ds_verify_items_free(items, n);
	return rc;
}

int ds_cmd_verify(int argc, char **argv)
{
	struct verify v;
	char msg[512];
	ds_err err = {0};
	int rc;

	memset(&v, 0, sizeof(v));
	v.output = "text";
	v.timeout_ms = 5 * 60 * 1000;
	rc = parse_args(argc, argv, &v);
	if (rc >= 0)
		return rc;
	if (ds_target_config_load(&v.cfg, v.config, &err) < 0) {
		fprintf(stderr, "drasync-target verify: %s\n",
			ds_err_format(&err, msg, sizeof(msg)));
		return 2;
	}
	rc = verify(&v);
	ds_target_config_free(v.cfg);
	return rc;
}
