/*
 * drasync-target plan: the importer's pipeline, offline (plan.h). Reads
 * manifests, prints what the target would receive on stdout and the report
 * on stderr.
 */
#include "commands.h"

#include "drasync/manifest.h"
#include "drasync/plan.h"
#include "drasync/target_config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { EXIT_OK = 0, EXIT_SOME_FAILED = 1, EXIT_USAGE = 2 };

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: drasync-target plan --config FILE -f FILE [-f FILE ...] [OPTIONS]\n"
		"\n"
		"Show, without touching any cluster, what the importer would create on the\n"
		"target: selection, sanitizing, namespace and DRA mapping, resource.k8s.io\n"
		"conversion and the standby transformation, exactly as `run` applies them.\n"
		"Objects go to stdout in apply order; the report of every rewrite, skip and\n"
		"error goes to stderr.\n"
		"\n"
		"Options:\n"
		"  -c, --config FILE         target configuration (mode, namespaceMappings, dra)\n"
		"  -f, --filename FILE       manifests: multi-document YAML or JSON, a List\n"
		"                            included (kubectl get -o yaml); '-' reads stdin;\n"
		"                            may be repeated\n"
		"  -o, --output yaml|json    yaml: a multi-document stream (default);\n"
		"                            json: one List, as kubectl get -o json prints\n"
		"      --target-api VERSION  resource.k8s.io version the target serves:\n"
		"                            resource.k8s.io/v1 (default), v1beta2 or v1beta1\n"
		"      --target-scheduling-api VERSION\n"
		"                            scheduling.k8s.io version of Workload and PodGroup\n"
		"                            the target serves: scheduling.k8s.io/v1beta1\n"
		"                            (default, Kubernetes 1.37), v1alpha3 (1.37)\n"
		"                            or v1alpha2 (1.36)\n"
		"      --source-cluster NAME record NAME in annotation drasync.io/source-cluster\n"
		"  -q, --quiet               print only errors and the summary on stderr\n"
		"  -h, --help                show this help\n"
		"\n"
		"Exit status: 0 all objects planned, 1 some objects failed, 2 usage or\n"
		"configuration error.\n"
		"\n"
		"Example:\n"
		"  kubectl get deploy,pod,resourceclaimtemplate -n ml -o yaml |\n"
		"    drasync-target plan --config target.yaml -f - -o json\n");
}

/* What the command line asks for. */
struct args {
	const char *config, *source_cluster;
	const char **files; /* from argv */
	size_t n_files;
	int json_out, quiet;
	enum ds_dra_version api;
	enum ds_sched_version sched;
};

/* @return -1 to go on, or the exit code (after --help or a usage error, reported) */
static int parse_args(int argc, char **argv, struct args *a)
{
	static const struct option opts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"filename", required_argument, NULL, 'f'},
	    {"output", required_argument, NULL, 'o'},
	    {"target-api", required_argument, NULL, 'A'},
	    {"target-scheduling-api", required_argument, NULL, 'G'},
	    {"source-cluster", required_argument, NULL, 'S'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "c:f:o:qh", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			a->config = optarg;
			break;
		case 'f':
			a->files[a->n_files++] = optarg;
			break;
		case 'o':
			if (strcmp(optarg, "json") == 0)
				a->json_out = 1;
			else if (strcmp(optarg, "yaml") != 0) {
				fprintf(stderr, "plan: -o %s: expected yaml or json\n", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'A':
			if (ds_dra_version_parse(optarg, &a->api) < 0 ||
			    a->api == DS_DRA_V1ALPHA3) {
				fprintf(stderr,
					"plan: --target-api %s: expected resource.k8s.io/v1, "
					"resource.k8s.io/v1beta2 or resource.k8s.io/v1beta1\n",
					optarg);
				return EXIT_USAGE;
			}
			break;
		case 'G':
			if (ds_sched_version_parse(optarg, &a->sched) < 0) {
				fprintf(stderr,
					"plan: --target-scheduling-api %s: expected "
					"scheduling.k8s.io/v1beta1, v1alpha3 or v1alpha2\n",
					optarg);
				return EXIT_USAGE;
			}
			break;
		case 'S':
			a->source_cluster = optarg;
			break;
		case 'q':
			a->quiet = 1;
			break;
		case 'h':
			usage(stdout);
			return EXIT_OK;
		default:
			fprintf(stderr, "plan: try 'drasync-target plan --help'\n");
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "plan: unexpected argument '%s' (manifests are given with -f)\n",
			argv[optind]);
		return EXIT_USAGE;
	}
	if (!a->config || a->n_files == 0) {
		fprintf(stderr, "plan: %s is required (try 'drasync-target plan --help')\n",
			!a->config ? "--config FILE" : "-f FILE");
		return EXIT_USAGE;
	}
	return -1;
}

/* @return 0, or -1 after reporting a configuration error */
static int load_config(const struct args *a, ds_target_config **cfg)
{
	char buf[600];
	ds_err err = {0};
	int r = ds_target_config_load(cfg, a->config, &err);

	if (r < 0) {
		if (!err.msg[0])
			ds_err_set(&err, "%s", strerror(-r));
		fprintf(stderr, "plan: configuration error: %s\n",
			ds_err_format(&err, buf, sizeof(buf)));
		return -1;
	}
	return 0;
}

/* Every -f file into man; a file that cannot be read is reported and skipped. @return 0, -ENOMEM */
static int load_manifests(const struct args *a, ds_manifest *man, size_t *n_bad_files)
{
	char buf[600];
	ds_err err = {0};

	for (size_t i = 0; i < a->n_files; i++) {
		int r;

		ds_err_clear(&err);
		r = ds_manifest_load(man, a->files[i], &err);
		if (r == -ENOMEM)
			return r;
		if (r < 0) {
			if (!err.msg[0])
				ds_err_setloc(&err, a->files[i], 0, 0, "%s", strerror(-r));
			fprintf(stderr, "error       %s (file skipped)\n",
				ds_err_format(&err, buf, sizeof(buf)));
			(*n_bad_files)++;
		}
	}
	return 0;
}

int ds_cmd_plan(int argc, char **argv)
{
	struct args a = {.api = DS_DRA_V1, .sched = DS_SCHED_V1BETA1};
	ds_target_config *cfg = NULL;
	ds_manifest *man = NULL;
	ds_plan *p = NULL;
	ds_plan_opts po;
	size_t n_bad_files = 0;
	ds_err err = {0};
	int rc = EXIT_USAGE, r;

	a.files = calloc((size_t)argc + 1, sizeof(*a.files));
	if (!a.files)
		goto oom;
	if ((r = parse_args(argc, argv, &a)) >= 0) {
		rc = r;
		goto out;
	}
	if (load_config(&a, &cfg) < 0)
		goto out;
	if (ds_manifest_new(&man) < 0 || ds_plan_new(&p) < 0)
		goto oom;
	po = (ds_plan_opts){.cfg = cfg,
			    .api = a.api,
			    .sched = a.sched,
			    .source_cluster = a.source_cluster,
			    .report = stderr,
			    .quiet = a.quiet};
	if (load_manifests(&a, man, &n_bad_files) < 0 || ds_plan_run(p, man, &po) < 0)
		goto oom;
	r = ds_plan_write(p, stdout, a.json_out, &err);
	if (r == -ENOMEM)
		goto oom;
	if (r < 0) {
		if (r == -ECANCELED)
			fprintf(stderr, "plan: cannot write output: %s\n", err.msg);
		else
			fprintf(stderr, "plan: writing to stdout: %s\n", strerror(-r));
		rc = EXIT_SOME_FAILED;
		goto out;
	}
	ds_plan_summary(p, stderr, n_bad_files);
	rc = (ds_plan_count(p)->failed || n_bad_files) ? EXIT_SOME_FAILED : EXIT_OK;
	goto out;
oom:
	fprintf(stderr, "plan: out of memory\n");
	rc = EXIT_SOME_FAILED;
out:
	ds_plan_free(p);
	ds_manifest_free(man);
	ds_target_config_free(cfg);
	free(a.files);
	return rc;
}
