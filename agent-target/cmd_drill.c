/*
 * drasync-target drill --config target.yaml --namespace NS [--into SCRATCH]
 * [--cleanup] [--timeout DUR]: a failover copy of the standby namespace NS
 * into a scratch namespace, verified, the standby untouched (drill.h). The
 * report is printed and kept in stateDir/drills/NS-<UTC time>.json.
 */
#include "commands.h"

#include "drasync/cli.h"
#include "drasync/drill.h"
#include "drasync/target_config.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct drill_cmd {
	struct ds_cli_args a;
	const char *ns, *into;
	long long interval_ms;
	bool cleanup, json;
	ds_target_config *cfg;
};

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: drasync-target drill --config FILE --namespace NS [--into SCRATCH]\n"
		"                            [--cleanup] [--timeout DUR] [-o text|json]\n"
		"\n"
		"Proves that the standby namespace NS can fail over, without touching it:\n"
		"copies the newest state the ledger holds of NS into a scratch namespace\n"
		"(default NS-drill, created with the label " DS_LABEL_DRILL "=NS), in active\n"
		"form and with the same mapping as a failover, then verifies every\n"
		"workload of the copy: pods scheduled and Running, claims allocated. Each\n"
		"workload's time to verify is in the drill report, printed and kept in\n"
		"stateDir/drills/. The standby and the ledger are left as they are; `run`\n"
		"may be running or not.\n"
		"\n"
		"Options:\n"
		"  -c, --config FILE      the TargetConfig file (required)\n"
		"  -n, --namespace NS     the standby (target) namespace to drill (required)\n"
		"      --into SCRATCH     the scratch namespace (default NS-drill); one that\n"
		"                         exists without the drill label is refused\n"
		"      --cleanup          delete the scratch namespace at the end\n"
		"  -t, --timeout DUR      how long the copy may take to verify (Go duration;\n"
		"                         default 5m)\n"
		"      --interval DUR     between verification rounds (default 2s)\n"
		"  -o, --output FMT       text (default) or json (the report)\n"
		"      --kubeconfig PATH  use this kubeconfig instead of the file's\n"
		"                         `kubeconfig` (empty there: in-cluster)\n"
		"      --context NAME     the kubeconfig context (default: current)\n"
		"  -h, --help             show this help\n"
		"\n"
		"Exit codes: 0 the copy verified; 1 it did not (or objects failed to\n"
		"apply), the report says why; 2 usage or configuration error, no ledger,\n"
		"nothing in the ledger for NS, or a scratch namespace that is not a drill's.\n"
		"\n"
		"Examples:\n"
		"  drasync-target drill --config /etc/drasync/target.yaml --namespace ml-team-dr\n"
		"  drasync-target drill -c target.yaml -n ml-team-dr --into ml-drill-1 \\\n"
		"      --timeout 10m --cleanup\n");
}

enum { KEY_INTO = DS_CLI_LONG_ONLY, KEY_CLEANUP, KEY_INTERVAL };

static int on_option(void *ctx, int key, const char *arg, long long ms)
{
	struct drill_cmd *d = ctx;

	if (key == KEY_INTO)
		d->into = arg;
	else if (key == KEY_CLEANUP)
		d->cleanup = true;
	else if (key == KEY_INTERVAL)
		d->interval_ms = ms;
	return 0;
}

static int parse_args(int argc, char **argv, struct drill_cmd *d)
{
	static const struct ds_cli_option own[] = {
	    {"into", KEY_INTO, DS_CLI_STRING},
	    {"cleanup", KEY_CLEANUP, DS_CLI_FLAG},
	    {"interval", KEY_INTERVAL, DS_CLI_DURATION},
	    {NULL},
	};
	const struct ds_cli_spec spec = {
	    .prog = "drasync-target",
	    .cmd = "drill",
	    .takes = DS_CLI_CONFIG | DS_CLI_KUBECONFIG | DS_CLI_CONTEXT | DS_CLI_OUTPUT |
		     DS_CLI_NAMESPACE | DS_CLI_TIMEOUT | DS_CLI_ZERO_DURATION,
	    .usage = usage,
	    .max_namespaces = 1,
	    .ns_example = "ml-team-dr",
	    .ns_hint = "run a drill per namespace",
	    .args_hint = "; name the namespace with --namespace NS",
	    .options = own,
	    .on_option = on_option,
	    .ctx = d};
	int rc = ds_cli_parse(&spec, argc, argv, &d->a);

	if (rc != DS_CLI_CONTINUE)
		return rc;
	if (!d->a.config || !d->a.n_namespaces)
		return ds_cli_fail(&spec,
				   "--config FILE and --namespace NS are required, e.g.\n"
				   "  drasync-target drill --config /etc/drasync/target.yaml "
				   "--namespace ml-team-dr");
	if (d->into && !d->into[0])
		return ds_cli_fail(&spec,
				   "--into needs a namespace name (or leave it out for NS-drill)");
	d->ns = d->a.namespaces[0];
	d->json = strcmp(d->a.output, "json") == 0;
	return DS_CLI_CONTINUE;
}

static void say(void *ud, const char *line)
{
	const struct drill_cmd *d = ud;

	/* With -o json the report is stdout's; the progress goes to stderr. */
	fprintf(d->json ? stderr : stdout, "%s\n", line);
	fflush(d->json ? stderr : stdout);
}

static void summary(const json_t *r, const char *kept)
{
	const json_t *objs = json_object_get(r, "objects"), *w = json_object_get(r, "workloads"),
		     *x;
	size_t i, verified = 0;

	json_array_foreach (w, i, x)
		verified += json_is_true(json_object_get(x, "verified"));
	printf("\ndrill of %s into %s: %s\n", json_string_value(json_object_get(r, "namespace")),
	       json_string_value(json_object_get(r, "into")),
	       json_is_true(json_object_get(r, "verified")) ? "VERIFIED" : "NOT verified");
	printf("  objects: %lld applied, %lld skipped, %zu failed\n",
	       (long long)json_integer_value(json_object_get(objs, "applied")),
	       (long long)json_integer_value(json_object_get(objs, "skipped")),
	       json_array_size(json_object_get(objs, "failed")));
	printf("  workloads: %zu of %zu verified in %.1f s\n", verified, json_array_size(w),
	       json_real_value(json_object_get(r, "seconds")));
	if (json_is_true(json_object_get(r, "cleanup")))
		printf("  scratch namespace: %s\n",
		       json_is_true(json_object_get(r, "cleanedUp")) ? "deleted" : "NOT deleted");
	else
		printf("  scratch namespace: kept (drasync-target drill ... --cleanup, or kubectl "
		       "delete namespace %s)\n",
		       json_string_value(json_object_get(r, "into")));
	if (kept)
		printf("  report: %s\n", kept);
}

int ds_cmd_drill(int argc, char **argv)
{
	struct drill_cmd d = {.a = {.timeout_ms = 5 * 60 * 1000}};
	ds_drill_opts o = {0};
	json_t *report = NULL;
	ds_kube *k = NULL;
	char ledger[4096], kept[4200], msg[768];
	ds_err err = {0};
	int rc;

	rc = parse_args(argc, argv, &d);
	if (rc >= 0)
		return rc;
	if (ds_target_config_load(&d.cfg, d.a.config, &err) < 0) {
		fprintf(stderr, "drasync-target drill: %s\n",
			ds_err_format(&err, msg, sizeof(msg)));
		return 2;
	}
	rc = ds_target_connect("drill", d.a.kubeconfig, d.a.context, d.cfg, NULL, &k);
	if (rc)
		goto out;
	ds_target_config_ledger(d.cfg, ledger, sizeof(ledger));
	/* A lost ledger is refused here too (none at all: the drill says so). */
	if (access(ledger, F_OK) == 0 &&
	    (rc = ds_target_check_identity("drill", k, d.cfg, ledger, false, false)) != 0)
		goto out;
	o = (ds_drill_opts){.ledger_path = ledger,
			    .cfg = d.cfg,
			    .kube = k,
			    .ns = d.ns,
			    .into = d.into,
			    .timeout_ms = d.a.timeout_ms,
			    .interval_ms = d.interval_ms,
			    .cleanup = d.cleanup,
			    .say = say,
			    .ud = &d};
	rc = ds_drill_run(&o, &report, &err);
	if (rc < 0) {
		fprintf(stderr, "drasync-target drill: %s\n",
			ds_err_format(&err, msg, sizeof(msg)));
		rc = rc == -ENOENT || rc == -EEXIST || rc == -EINVAL ? 2 : 1;
		goto out;
	}
	if (ds_drill_report_keep(ds_target_config_state_dir(d.cfg), report, kept, sizeof(kept),
				 &err) < 0) {
		fprintf(stderr, "drasync-target drill: %s\n", err.msg);
		kept[0] = '\0';
	}
	if (d.json) {
		json_dumpf(report, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
		printf("\n");
	} else {
		summary(report, kept[0] ? kept : NULL);
	}
	rc = json_is_true(json_object_get(report, "verified")) ? 0 : 1;
out:
	json_decref(report);
	ds_kube_free(k);
	ds_target_config_free(d.cfg);
	return rc;
}
