/*
 * drasync-target plan: the importer's pipeline, offline. Reads manifests,
 * prints what the target would receive on stdout and the report on stderr.
 */
#include "commands.h"

#include "drasync/dra_convert.h"
#include "drasync/k8s_object.h"
#include "drasync/manifest.h"
#include "drasync/preflight.h"
#include "drasync/report.h"
#include "drasync/selection.h"
#include "drasync/target_config.h"
#include "drasync/transform.h"
#include "drasync/yaml.h"

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
		"      --source-cluster NAME record NAME in annotation drasync.io/source-cluster\n"
		"  -q, --quiet               print only errors and the summary on stderr\n"
		"  -h, --help                show this help\n"
		"\n"
		"Exit status: 0 all objects planned, 1 some objects failed, 2 usage or\n"
		"configuration error.\n");
}

struct key {
	const char *kind, *ns, *name;
};

struct plan {
	json_t *out;	  /* objects to apply */
	json_t *held;	  /* standby: kept in the ledger, still checked */
	struct key *keys; /* identity of each, for the preflight */
	size_t n_keys;
	ds_report *rep;
	const char *obj_desc;
	size_t n_required;
};

static int in_plan(const struct plan *p, const char *kind, const char *ns, const char *name)
{
	for (size_t i = 0; i < p->n_keys; i++) {
		const struct key *k = &p->keys[i];
		if (strcmp(k->kind, kind) == 0 && strcmp(k->name, name) == 0 &&
		    ((!k->ns && !ns) || (k->ns && ns && strcmp(k->ns, ns) == 0)))
			return 1;
	}
	return 0;
}

static int need(void *ud, const char *kind, const char *ns, const char *name)
{
	struct plan *p = ud;
	char msg[400];

	if (in_plan(p, kind, ns, name))
		return 0;
	/* One line per distinct missing object and needer. */
	for (size_t i = 0; i < ds_report_count(p->rep); i++) {
		const ds_report_entry *e = ds_report_get(p->rep, i);
		if (e->type == DS_REPORT_REQUIRE && e->message && e->object &&
		    strcmp(e->object, p->obj_desc) == 0 && strstr(e->message, name) &&
		    strstr(e->message, kind))
			return 0;
	}
	snprintf(msg, sizeof(msg),
		 "needs %s %s%s%s, which must exist on the target (it is not in "
		 "this plan)",
		 kind, ns ? ns : "", ns ? "/" : "", name);
	p->n_required++;
	return ds_report_add(p->rep, DS_REPORT_REQUIRE, p->obj_desc, NULL, NULL, NULL, NULL, msg);
}

static int cmp_rank(const void *a, const void *b)
{
	const json_t *const *x = a, *const *y = b;
	int ra = ds_selection_apply_rank(*x), rb = ds_selection_apply_rank(*y);

	return (ra > rb) - (ra < rb);
}

/* Sort stably by apply rank: decorate with the input index. */
static int order_output(json_t *arr)
{
	size_t n = json_array_size(arr);
	json_t **v = calloc(n + 1, sizeof(*v));
	int r = 0;

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		v[i] = json_incref(json_array_get(arr, i));
	/* Insertion sort keeps equal ranks in input order; plans are small. */
	for (size_t i = 1; i < n; i++) {
		json_t *x = v[i];
		size_t j = i;
		while (j > 0 && cmp_rank(&v[j - 1], &x) > 0) {
			v[j] = v[j - 1];
			j--;
		}
		v[j] = x;
	}
	json_array_clear(arr);
	for (size_t i = 0; i < n; i++)
		if (json_array_append_new(arr, v[i]) < 0)
			r = -ENOMEM;
	free(v);
	return r;
}

static int print_output(json_t *out, int json_out)
{
	size_t i;
	json_t *o;
	ds_err err;

	if (json_out) {
		json_t *list = json_pack("{s:s, s:O, s:s, s:{s:s}}", "apiVersion", "v1", "items",
					 out, "kind", "List", "metadata", "resourceVersion", "");
		int r;

		if (!list)
			return -ENOMEM;
		r = json_dumpf(list, stdout, JSON_INDENT(4) | JSON_PRESERVE_ORDER);
		json_decref(list);
		fputc('\n', stdout);
		return r < 0 ? -EIO : 0;
	}
	json_array_foreach (out, i, o) {
		if (i > 0)
			fputs("---\n", stdout);
		if (ds_yaml_emit(stdout, o, &err) < 0) {
			fprintf(stderr, "plan: cannot write output: %s\n", err.msg);
			return -EIO;
		}
	}
	return 0;
}

int ds_cmd_plan(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"filename", required_argument, NULL, 'f'},
	    {"output", required_argument, NULL, 'o'},
	    {"target-api", required_argument, NULL, 'A'},
	    {"source-cluster", required_argument, NULL, 'S'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *config = NULL, *source_cluster = NULL;
	const char **files = NULL;
	size_t n_files = 0;
	int json_out = 0, quiet = 0, c, rc = EXIT_USAGE, r;
	enum ds_dra_version api = DS_DRA_V1;
	ds_target_config *cfg = NULL;
	ds_manifest *man = NULL;
	struct plan p = {0};
	size_t n_apply = 0, n_skip = 0, n_hold = 0, n_fail = 0, n_bad_files = 0;
	char buf[600];
	ds_err err;

	files = calloc((size_t)argc + 1, sizeof(*files));
	if (!files)
		goto oom;
	optind = 1;
	while ((c = getopt_long(argc, argv, "c:f:o:qh", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			config = optarg;
			break;
		case 'f':
			files[n_files++] = optarg;
			break;
		case 'o':
			if (strcmp(optarg, "json") == 0)
				json_out = 1;
			else if (strcmp(optarg, "yaml") != 0) {
				fprintf(stderr, "plan: -o %s: expected yaml or json\n", optarg);
				goto out;
			}
			break;
		case 'A':
			if (ds_dra_version_parse(optarg, &api) < 0 || api == DS_DRA_V1ALPHA3) {
				fprintf(stderr,
					"plan: --target-api %s: expected resource.k8s.io/v1, "
					"resource.k8s.io/v1beta2 or resource.k8s.io/v1beta1\n",
					optarg);
				goto out;
			}
			break;
		case 'S':
			source_cluster = optarg;
			break;
		case 'q':
			quiet = 1;
			break;
		case 'h':
			usage(stdout);
			rc = EXIT_OK;
			goto out;
		default:
			fprintf(stderr, "plan: try 'drasync-target plan --help'\n");
			goto out;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "plan: unexpected argument '%s' (manifests are given with -f)\n",
			argv[optind]);
		goto out;
	}
	if (!config || n_files == 0) {
		fprintf(stderr, "plan: %s is required (try 'drasync-target plan --help')\n",
			!config ? "--config FILE" : "-f FILE");
		goto out;
	}
	r = ds_target_config_load(&cfg, config, &err);
	if (r < 0) {
		if (!err.msg[0])
			ds_err_set(&err, "%s", strerror(-r));
		fprintf(stderr, "plan: configuration error: %s\n",
			ds_err_format(&err, buf, sizeof(buf)));
		goto out;
	}
	if (ds_manifest_new(&man) < 0 || ds_report_new(&p.rep) < 0 || !(p.out = json_array()) ||
	    !(p.held = json_array()))
		goto oom;
	for (size_t i = 0; i < n_files; i++) {
		ds_err_clear(&err);
		r = ds_manifest_load(man, files[i], &err);
		if (r == -ENOMEM)
			goto oom;
		if (r < 0) {
			if (!err.msg[0])
				ds_err_setloc(&err, files[i], 0, 0, "%s", strerror(-r));
			fprintf(stderr, "error       %s (file skipped)\n",
				ds_err_format(&err, buf, sizeof(buf)));
			n_bad_files++;
		}
	}

	p.keys = calloc(ds_manifest_count(man) + 1, sizeof(*p.keys));
	if (!p.keys)
		goto oom;
	ds_transform_opts topts = {
	    .cfg = cfg, .dra_version = api, .source_cluster = source_cluster};
	for (size_t i = 0; i < ds_manifest_count(man); i++) {
		json_t *obj = ds_manifest_object(man, i);
		size_t first = ds_report_count(p.rep);

		r = ds_transform_object(&topts, obj, p.rep);
		if (r < 0)
			goto oom;
		switch (r) {
		case DS_TRANSFORM_APPLY:
			n_apply++;
			if (json_array_append(p.out, obj) < 0)
				goto oom;
			p.keys[p.n_keys++] =
			    (struct key){ds_obj_kind(obj), ds_obj_namespace(obj), ds_obj_name(obj)};
			break;
		case DS_TRANSFORM_SKIP:
			n_skip++;
			break;
		case DS_TRANSFORM_HOLD:
			n_hold++;
			if (json_array_append(p.held, obj) < 0)
				goto oom;
			break;
		default:
			n_fail++;
			break;
		}
		for (size_t k = first; k < ds_report_count(p.rep); k++) {
			const ds_report_entry *e = ds_report_get(p.rep, k);

			if (e->type == DS_REPORT_ERROR) {
				char origin[300];
				fprintf(stderr, "error       %s: %s: %s\n",
					ds_manifest_origin(man, i, origin, sizeof(origin)),
					e->object ? e->object : "-", e->message ? e->message : "");
			} else if (!quiet) {
				ds_report_entry_print(stderr, e);
			}
		}
	}
	/* Preflight: what the planned objects reference but the plan does not contain. */
	for (size_t i = 0; i < json_array_size(p.out) + json_array_size(p.held); i++) {
		size_t n_out = json_array_size(p.out);
		json_t *obj =
		    i < n_out ? json_array_get(p.out, i) : json_array_get(p.held, i - n_out);
		size_t first = ds_report_count(p.rep);
		char desc[300];

		p.obj_desc = ds_obj_describe(obj, desc, sizeof(desc));
		if (ds_preflight_needs(obj, need, &p) < 0)
			goto oom;
		for (size_t k = first; !quiet && k < ds_report_count(p.rep); k++)
			ds_report_entry_print(stderr, ds_report_get(p.rep, k));
	}
	if (order_output(p.out) < 0 || print_output(p.out, json_out) < 0)
		goto oom;
	fflush(stdout);
	fprintf(stderr,
		"plan: %zu to apply, %zu skipped, %zu held (standby), %zu failed; %zu DRA "
		"reference(s) rewritten, %zu split, %zu attached, %zu device class(es) renamed; "
		"%zu object(s) must already exist on the target; mode %s, %s\n",
		n_apply, n_skip, n_hold, n_fail + n_bad_files,
		ds_report_count_type(p.rep, DS_REPORT_REWRITE),
		ds_report_count_type(p.rep, DS_REPORT_SPLIT),
		ds_report_count_type(p.rep, DS_REPORT_ATTACH),
		ds_report_count_type(p.rep, DS_REPORT_DEVICE_CLASS), p.n_required,
		ds_mode_name(ds_target_config_mode(cfg)), ds_dra_api_version(api));
	rc = (n_fail || n_bad_files) ? EXIT_SOME_FAILED : EXIT_OK;
	goto out;
oom:
	fprintf(stderr, "plan: out of memory\n");
	rc = EXIT_SOME_FAILED;
out:
	json_decref(p.out);
	json_decref(p.held);
	free(p.keys);
	ds_report_free(p.rep);
	ds_manifest_free(man);
	ds_target_config_free(cfg);
	free(files);
	return rc;
}
