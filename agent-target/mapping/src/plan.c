/*
 * drasync-target plan: the importer's pipeline, offline. Reads manifests,
 * prints what the target would receive on stdout and the report on stderr.
 */
#include "commands.h"

#include "drasync/buf.h"
#include "drasync/dra_convert.h"
#include "drasync/dra_mapping.h"
#include "drasync/k8s_object.h"
#include "drasync/manifest.h"
#include "drasync/preflight.h"
#include "drasync/report.h"
#include "drasync/sched_convert.h"
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
		"      --target-scheduling-api VERSION\n"
		"                            scheduling.k8s.io version of Workload and PodGroup\n"
		"                            the target serves: scheduling.k8s.io/v1beta1\n"
		"                            (default, Kubernetes 1.37) or v1alpha2 (1.36)\n"
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

struct key {
	const char *kind, *ns, *name;
};

struct plan {
	json_t *out;	  /* objects to apply */
	json_t *held;	  /* standby: kept in the ledger, still checked */
	struct key *keys; /* identity of each, for the preflight */
	size_t n_keys;
	json_t *required;     /* set of the (needer, kind, namespace, name) already reported */
	json_t *groups;	      /* the manifests' PodGroups, untransformed */
	json_t *members;      /* the manifests' workloads that join a PodGroup, untransformed */
	json_t *member_lists; /* what members_of() handed out */
	ds_report *rep;
	const char *obj_desc; /* the object the preflight is at */
	size_t n_required;
	size_t n_apply, n_skip, n_hold, n_fail, n_bad_files;
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
					"scheduling.k8s.io/v1beta1 or scheduling.k8s.io/v1alpha2\n",
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
static int load_manifests(const struct args *a, ds_manifest *man, struct plan *p)
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
			p->n_bad_files++;
		}
	}
	return 0;
}

/* File the transformed object by the transform's verdict r. @return 0, -ENOMEM */
static int classify(struct plan *p, json_t *obj, int r)
{
	switch (r) {
	case DS_TRANSFORM_APPLY:
		p->n_apply++;
		if (json_array_append(p->out, obj) < 0)
			return -ENOMEM;
		p->keys[p->n_keys++] =
		    (struct key){ds_obj_kind(obj), ds_obj_namespace(obj), ds_obj_name(obj)};
		return 0;
	case DS_TRANSFORM_SKIP:
		p->n_skip++;
		return 0;
	case DS_TRANSFORM_HOLD:
		p->n_hold++;
		return json_array_append(p->held, obj) < 0 ? -ENOMEM : 0;
	default:
		p->n_fail++;
		return 0;
	}
}

/* The report entries from `first` on, of manifest object i; errors are shown with --quiet too. */
static void print_entries(const struct plan *p, const ds_manifest *man, size_t i, size_t first,
			  int quiet)
{
	for (size_t k = first; k < ds_report_count(p->rep); k++) {
		const ds_report_entry *e = ds_report_get(p->rep, k);

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

static bool same_ns(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* A PodGroup of the manifests as the source has it (copies taken before any transform). */
static const json_t *group_of(void *ud, const char *ns, const char *name)
{
	const struct plan *p = ud;
	size_t i;
	json_t *g;

	json_array_foreach (p->groups, i, g) {
		const char *gns = ds_obj_namespace(g);
		if (strcmp(ds_obj_name(g), name) == 0 && same_ns(gns, ns))
			return g;
	}
	return NULL;
}

/* The workloads of the manifests whose pods join PodGroup ns/group, as the source has them. */
static const json_t *members_of(void *ud, const char *ns, const char *group)
{
	struct plan *p = ud;
	json_t *list = json_array(), *w;
	size_t i;

	if (!list || json_array_append_new(p->member_lists, list) < 0)
		return NULL;
	json_array_foreach (p->members, i, w)
		if (same_ns(ds_obj_namespace(w), ns) && strcmp(ds_dra_group_of(w), group) == 0 &&
		    json_array_append(list, w) < 0)
			return NULL;
	return list;
}

/* The importer's pipeline on every object read. @return 0, -ENOMEM */
static int transform_all(struct plan *p, ds_manifest *man, const struct args *a,
			 const ds_target_config *cfg)
{
	ds_transform_opts topts = {.cfg = cfg,
				   .dra_version = a->api,
				   .source_cluster = a->source_cluster,
				   .sched_version = a->sched,
				   .group_of = group_of,
				   .members_of = members_of,
				   .group_ud = p};

	p->keys = calloc(ds_manifest_count(man) + 1, sizeof(*p->keys));
	if (!p->keys)
		return -ENOMEM;
	/* Members are mapped against their group as the source has it, in any input order. */
	for (size_t i = 0; i < ds_manifest_count(man); i++) {
		json_t *obj = ds_manifest_object(man, i);
		const char *kind = ds_obj_kind(obj);

		if (kind && strcmp(kind, "PodGroup") == 0 && ds_obj_name(obj) &&
		    ds_obj_in_group(obj, "scheduling.k8s.io") &&
		    json_array_append_new(p->groups, json_deep_copy(obj)) < 0)
			return -ENOMEM;
		if (ds_dra_group_of(obj) &&
		    json_array_append_new(p->members, json_deep_copy(obj)) < 0)
			return -ENOMEM;
	}
	for (size_t i = 0; i < ds_manifest_count(man); i++) {
		json_t *obj = ds_manifest_object(man, i);
		size_t first = ds_report_count(p->rep);
		int r = ds_transform_object(&topts, obj, p->rep);

		if (r < 0 || classify(p, obj, r) < 0)
			return -ENOMEM;
		print_entries(p, man, i, first, a->quiet);
	}
	return 0;
}

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

/*
 * Remember that the current object needs (kind, ns, name): the four fields,
 * each length-prefixed, make one key of the set, so no two tuples share it.
 * @return 1 when new, 0 when already required, -ENOMEM
 */
static int required_add(struct plan *p, const char *kind, const char *ns, const char *name)
{
	const char *f[] = {p->obj_desc, kind, ns, name};
	ds_str k;
	char *key;
	int rc;

	/* No field is longer than the input it was read from. */
	ds_str_init(&k, 4 * (size_t)DS_YAML_MAX_INPUT);
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		if (f[i])
			ds_str_addf(&k, "%zu:%s;", strlen(f[i]), f[i]);
		else
			ds_str_adds(&k, "-;");
	}
	key = ds_str_take(&k, NULL);
	if (!key)
		return -ENOMEM;
	if (json_object_get(p->required, key))
		rc = 0;
	else /* names are not checked for UTF-8 here, and desc may be cut mid-character */
		rc = json_object_set_new_nocheck(p->required, key, json_null()) < 0 ? -ENOMEM : 1;
	free(key);
	return rc;
}

static int need(void *ud, const char *kind, const char *ns, const char *name)
{
	struct plan *p = ud;
	char msg[400];
	int r;

	if (in_plan(p, kind, ns, name))
		return 0;
	/* One line per distinct missing object and needer. */
	r = required_add(p, kind, ns, name);
	if (r <= 0)
		return r;
	snprintf(msg, sizeof(msg),
		 "needs %s %s%s%s, which must exist on the target (it is not in "
		 "this plan)",
		 kind, ns ? ns : "", ns ? "/" : "", name);
	p->n_required++;
	return ds_report_add(p->rep, DS_REPORT_REQUIRE, p->obj_desc, NULL, NULL, NULL, NULL, msg);
}

/*
 * KEP-5004: a container that keeps an extended resource (nvidia.com/gpu) in its
 * limits is served on the target by a DeviceClass whose extendedResourceName
 * it is (the target's scheduler makes the claim), or by a device plugin; the
 * other path is an attach rule with extendedResources. Say which applies.
 */
static int extended_need(void *ud, const char *container, const char *resource)
{
	struct plan *p = ud;
	const char *by = NULL;
	char msg[600];
	size_t i;
	json_t *o;

	json_array_foreach (p->out, i, o) {
		const char *kind = ds_obj_kind(o);
		if (kind && strcmp(kind, "DeviceClass") == 0 &&
		    ds_preflight_class_serves(o, resource))
			by = ds_obj_name(o);
	}
	if (by)
		snprintf(msg, sizeof(msg),
			 "keeps %s: DeviceClass %s of this plan serves it as a DRA extended "
			 "resource (the target's scheduler makes the claim; Kubernetes 1.34+, "
			 "gate DRAExtendedResource)",
			 resource, by);
	else
		snprintf(msg, sizeof(msg),
			 "keeps %s: the target needs a DeviceClass with extendedResourceName %s "
			 "(Kubernetes 1.34+, gate DRAExtendedResource, GA in 1.37) or a device "
			 "plugin that advertises it; a rule with attach: true and "
			 "extendedResources: [%s] moves it to a claim instead",
			 resource, resource, resource);
	return ds_report_add(p->rep, DS_REPORT_EXTENDED, p->obj_desc, container, NULL, NULL, NULL,
			     msg);
}

/* Preflight: what the planned objects reference but the plan does not contain. @return 0, -ENOMEM
 */
static int preflight_all(struct plan *p, int quiet)
{
	size_t n_out = json_array_size(p->out);

	for (size_t i = 0; i < n_out + json_array_size(p->held); i++) {
		json_t *obj =
		    i < n_out ? json_array_get(p->out, i) : json_array_get(p->held, i - n_out);
		size_t first = ds_report_count(p->rep);
		char desc[300];

		p->obj_desc = ds_obj_describe(obj, desc, sizeof(desc));
		if (ds_preflight_needs(obj, need, p) < 0 ||
		    ds_preflight_extended(obj, extended_need, p) < 0)
			return -ENOMEM;
		for (size_t k = first; !quiet && k < ds_report_count(p->rep); k++)
			ds_report_entry_print(stderr, ds_report_get(p->rep, k));
	}
	p->obj_desc = NULL;
	return 0;
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

/* @return 0, or the negative errno of the failed write */
static int put_stdout(const char *s, size_t len)
{
	if (len && fwrite(s, 1, len, stdout) != len)
		return errno ? -errno : -EIO;
	return 0;
}

/* One object as a YAML document. @return 0; -ENOMEM; a write's negative errno; -EINVAL/-E2BIG
 * reported */
static int put_yaml(const json_t *o)
{
	ds_err err = {0};
	char *s = NULL;
	int rc = ds_yaml_emit_string(o, &s, &err);

	if (rc == -ENOMEM)
		return rc;
	if (rc < 0) {
		/* Not a write error: the object cannot be written as YAML. */
		fprintf(stderr, "plan: cannot write output: %s\n", err.msg);
		return -ECANCELED;
	}
	rc = put_stdout(s, strlen(s));
	free(s);
	return rc;
}

/*
 * The planned objects on stdout, flushed, so that a full disk or a closed
 * pipe is known here. Nothing is reported for -ENOMEM and -ECANCELED.
 * @return 0; -ENOMEM; -ECANCELED (reported); a write's negative errno
 */
static int print_output(json_t *out, int json_out)
{
	size_t i;
	json_t *o;
	int rc = 0;

	if (json_out) {
		json_t *list = json_pack("{s:s, s:O, s:s, s:{s:s}}", "apiVersion", "v1", "items",
					 out, "kind", "List", "metadata", "resourceVersion", "");
		char *s = list ? json_dumps(list, JSON_INDENT(4) | JSON_PRESERVE_ORDER) : NULL;

		json_decref(list);
		if (!s)
			return -ENOMEM;
		rc = put_stdout(s, strlen(s));
		if (!rc)
			rc = put_stdout("\n", 1);
		free(s);
	} else {
		json_array_foreach (out, i, o) {
			if (i > 0 && (rc = put_stdout("---\n", 4)) < 0)
				break;
			if ((rc = put_yaml(o)) < 0)
				break;
		}
	}
	if (!rc && fflush(stdout) == EOF)
		rc = errno ? -errno : -EIO;
	return rc;
}

static void print_summary(const struct plan *p, const ds_target_config *cfg,
			  enum ds_dra_version api)
{
	fprintf(stderr,
		"plan: %zu to apply, %zu skipped, %zu held (standby), %zu failed; %zu DRA "
		"reference(s) rewritten, %zu split, %zu attached, %zu device class(es) renamed; "
		"%zu object(s) must already exist on the target; mode %s, %s\n",
		p->n_apply, p->n_skip, p->n_hold, p->n_fail + p->n_bad_files,
		ds_report_count_type(p->rep, DS_REPORT_REWRITE),
		ds_report_count_type(p->rep, DS_REPORT_SPLIT),
		ds_report_count_type(p->rep, DS_REPORT_ATTACH),
		ds_report_count_type(p->rep, DS_REPORT_DEVICE_CLASS), p->n_required,
		ds_mode_name(ds_target_config_mode(cfg)), ds_dra_api_version(api));
}

int ds_cmd_plan(int argc, char **argv)
{
	struct args a = {.api = DS_DRA_V1, .sched = DS_SCHED_V1BETA1};
	ds_target_config *cfg = NULL;
	ds_manifest *man = NULL;
	struct plan p = {0};
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
	if (ds_manifest_new(&man) < 0 || ds_report_new(&p.rep) < 0 || !(p.out = json_array()) ||
	    !(p.held = json_array()) || !(p.required = json_object()) ||
	    !(p.groups = json_array()) || !(p.members = json_array()) ||
	    !(p.member_lists = json_array()))
		goto oom;
	if (load_manifests(&a, man, &p) < 0 || transform_all(&p, man, &a, cfg) < 0 ||
	    preflight_all(&p, a.quiet) < 0 || order_output(p.out) < 0)
		goto oom;
	r = print_output(p.out, a.json_out);
	if (r == -ENOMEM)
		goto oom;
	if (r < 0) {
		if (r != -ECANCELED)
			fprintf(stderr, "plan: writing to stdout: %s\n", strerror(-r));
		rc = EXIT_SOME_FAILED;
		goto out;
	}
	print_summary(&p, cfg, a.api);
	rc = (p.n_fail || p.n_bad_files) ? EXIT_SOME_FAILED : EXIT_OK;
	goto out;
oom:
	fprintf(stderr, "plan: out of memory\n");
	rc = EXIT_SOME_FAILED;
out:
	json_decref(p.out);
	json_decref(p.held);
	json_decref(p.required);
	json_decref(p.groups);
	json_decref(p.members);
	json_decref(p.member_lists);
	free(p.keys);
	ds_report_free(p.rep);
	ds_manifest_free(man);
	ds_target_config_free(cfg);
	free(a.files);
	return rc;
}
