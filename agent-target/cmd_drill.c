/*
 * drasync-target drill --config target.yaml --namespace NS [--into SCRATCH]
 * [--cleanup] [--timeout DUR]: a failover copy of the standby namespace NS
 * into a scratch namespace, verified, the standby untouched (drill.h). The
 * report is printed and kept in stateDir/drills/NS-<UTC time>.json.
 */
#include "commands.h"

#include "drasync/drill.h"
#include "drasync/duration.h"
#include "drasync/target_config.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

struct drill_cmd {
	const char *config, *ns, *into, *kubeconfig, *context, *output;
	long long timeout_ms, interval_ms;
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

static int parse_duration(const char *opt, const char *arg, long long *ms)
{
	ds_err err = {0};
	int64_t ns;

	if (ds_duration_parse(arg, &ns, NULL, &err) < 0 || ns < 0) {
		fprintf(stderr,
			"drasync-target drill: --%s: '%s': %s (a Go duration, e.g. 90s, 5m, "
			"1h30m)\n",
			opt, arg, err.msg[0] ? err.msg : "negative");
		return 2;
	}
	*ms = ns / 1000000;
	return -1;
}

static int parse_args(int argc, char **argv, struct drill_cmd *d)
{
	static const struct option longopts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"namespace", required_argument, NULL, 'n'},
	    {"into", required_argument, NULL, 'I'},
	    {"cleanup", no_argument, NULL, 'C'},
	    {"timeout", required_argument, NULL, 't'},
	    {"interval", required_argument, NULL, 'i'},
	    {"output", required_argument, NULL, 'o'},
	    {"kubeconfig", required_argument, NULL, 'k'},
	    {"context", required_argument, NULL, 'x'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int c, rc;

	optind = 1;
	while ((c = getopt_long(argc, argv, "c:n:t:o:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			d->config = optarg;
			break;
		case 'n':
			if (d->ns) {
				fprintf(stderr, "drasync-target drill: one --namespace at a time; "
						"run a drill per namespace\n");
				return 2;
			}
			d->ns = optarg;
			break;
		case 'I':
			d->into = optarg;
			break;
		case 'C':
			d->cleanup = true;
			break;
		case 't':
			if ((rc = parse_duration("timeout", optarg, &d->timeout_ms)) >= 0)
				return rc;
			break;
		case 'i':
			if ((rc = parse_duration("interval", optarg, &d->interval_ms)) >= 0)
				return rc;
			break;
		case 'o':
			d->output = optarg;
			break;
		case 'k':
			d->kubeconfig = optarg;
			break;
		case 'x':
			d->context = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			fprintf(stderr, "Try 'drasync-target drill --help'.\n");
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr,
			"drasync-target drill: unexpected argument '%s'; name the namespace with "
			"--namespace NS (try --help)\n",
			argv[optind]);
		return 2;
	}
	if (!d->config || !d->ns || !d->ns[0]) {
		fprintf(stderr, "drasync-target drill: --config FILE and --namespace NS are "
				"required, e.g.\n"
				"  drasync-target drill --config /etc/drasync/target.yaml "
				"--namespace ml-team-dr\n");
		return 2;
	}
	if (d->into && !d->into[0]) {
		fprintf(stderr, "drasync-target drill: --into needs a namespace name (or leave it "
				"out for NS-drill)\n");
		return 2;
	}
	if (strcmp(d->output, "text") != 0 && strcmp(d->output, "json") != 0) {
		fprintf(stderr, "drasync-target drill: -o: '%s' is not text or json\n", d->output);
		return 2;
	}
	d->json = strcmp(d->output, "json") == 0;
	return -1;
}

static void say(void *ud, const char *line)
{
	const struct drill_cmd *d = ud;

	/* With -o json the report is stdout's; the progress goes to stderr. */
	fprintf(d->json ? stderr : stdout, "%s\n", line);
	fflush(d->json ? stderr : stdout);
}

/* Keep the report in stateDir/drills/NS-<time>.json. @return 0, -1 (said why) */
static int keep(const struct drill_cmd *d, const json_t *report, char *path, size_t size)
{
	const char *state = ds_target_config_state_dir(d->cfg);
	char dir[4096], when[48];
	struct timespec now;
	struct tm tm;

	/* To the millisecond: two drills in one second keep two reports. */
	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y%m%dT%H%M%S", &tm);
	snprintf(when + strlen(when), sizeof(when) - strlen(when), ".%03ldZ",
		 now.tv_nsec / 1000000L);
	snprintf(dir, sizeof(dir), "%s/drills", state);
	if (mkdir(dir, 0750) < 0 && errno != EEXIST) {
		fprintf(stderr, "drasync-target drill: cannot keep the report in %s: %s\n", dir,
			strerror(errno));
		return -1;
	}
	snprintf(path, size, "%s/%s-%s.json", dir, d->ns, when);
	if (json_dump_file(report, path, JSON_INDENT(2) | JSON_SORT_KEYS) < 0) {
		fprintf(stderr, "drasync-target drill: cannot write the report %s\n", path);
		return -1;
	}
	return 0;
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
	struct drill_cmd d = {.output = "text", .timeout_ms = 5 * 60 * 1000};
	ds_drill_opts o = {0};
	json_t *report = NULL;
	ds_kube *k = NULL;
	char ledger[4096], kept[4200], msg[768];
	ds_err err = {0};
	int rc;

	rc = parse_args(argc, argv, &d);
	if (rc >= 0)
		return rc;
	if (ds_target_config_load(&d.cfg, d.config, &err) < 0) {
		fprintf(stderr, "drasync-target drill: %s\n",
			ds_err_format(&err, msg, sizeof(msg)));
		return 2;
	}
	rc = ds_target_connect("drill", d.kubeconfig, d.context, d.cfg, NULL, &k);
	if (rc)
		goto out;
	ds_target_config_ledger(d.cfg, ledger, sizeof(ledger));
	o = (ds_drill_opts){.ledger_path = ledger,
			    .cfg = d.cfg,
			    .kube = k,
			    .ns = d.ns,
			    .into = d.into,
			    .timeout_ms = d.timeout_ms,
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
	if (keep(&d, report, kept, sizeof(kept)) < 0)
		kept[0] = '\0';
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
