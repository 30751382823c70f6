/*
 * drasync-target retry --config target.yaml [--namespace NS] [KIND/NAME]: make
 * failed objects (and those waiting or in backoff) due now, after an operator
 * fixed what they failed on. It only changes the apply state in the ledger in
 * stateDir (SQLite WAL, so `run` may be running); the applier looks at the
 * ledger at least every second and applies them. No cluster is contacted.
 */
#include "commands.h"

#include "drasync/cli.h"
#include "drasync/object_state.h"
#include "drasync/target_config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct retry {
	const char *config, *ns, *object;
	char kind[256], name[512];
	ds_target_config *cfg;
};

static void usage(FILE *out)
{
	fprintf(out, "Usage: drasync-target retry --config FILE [--namespace NS] [KIND/NAME]\n"
		     "\n"
		     "Asks the importer to apply failed objects again now, after you fixed what\n"
		     "they failed on (a missing namespace, a quota, an admission policy...).\n"
		     "A failed object is otherwise only tried again when its source sends a new\n"
		     "version. Objects waiting for what they need or in backoff after transient\n"
		     "errors are made due at once as well.\n"
		     "\n"
		     "Objects are named as on this cluster: KIND/NAME in the namespace given by\n"
		     "--namespace (the target namespace, after namespaceMappings); without\n"
		     "--namespace, KIND/NAME names a cluster-scoped object (e.g. a DeviceClass).\n"
		     "KIND is the object's kind, in any case (ConfigMap, configmap). An object\n"
		     "never applied is matched by its source name and mapped namespace.\n"
		     "Without KIND/NAME: every failed or waiting object (in NS with --namespace).\n"
		     "\n"
		     "It works on the ledger in the file's stateDir (default /var/lib/drasync),\n"
		     "whether `drasync-target run` is running or not: a running importer applies\n"
		     "the objects within a second, a stopped one when it starts.\n"
		     "\n"
		     "Options:\n"
		     "  -c, --config FILE     the TargetConfig file (required)\n"
		     "  -n, --namespace NS    only objects in this target namespace\n"
		     "  -h, --help            show this help\n"
		     "\n"
		     "Prints each object marked with its last reason, then the count.\n"
		     "Exit codes: 0 something was marked, 1 nothing matched, 2 usage or\n"
		     "configuration error.\n"
		     "\n"
		     "Examples:\n"
		     "  drasync-target retry --config target.yaml --namespace ml-team-dr "
		     "ConfigMap/settings\n"
		     "  drasync-target retry --config target.yaml DeviceClass/gpu.example.com\n"
		     "  drasync-target retry --config target.yaml --namespace ml-team-dr\n");
}

static int parse_object(struct retry *r)
{
	const char *slash = strchr(r->object, '/');
	size_t klen = slash ? (size_t)(slash - r->object) : 0;

	if (!slash || klen == 0 || !slash[1] || strchr(slash + 1, '/')) {
		fprintf(stderr,
			"drasync-target retry: '%s' is not KIND/NAME; name the object as on this "
			"cluster, e.g.\n"
			"  drasync-target retry --config %s --namespace NS ConfigMap/settings\n",
			r->object, r->config ? r->config : "target.yaml");
		return 2;
	}
	if (klen >= sizeof(r->kind) || strlen(slash + 1) >= sizeof(r->name)) {
		fprintf(stderr, "drasync-target retry: '%s' is too long for KIND/NAME\n",
			r->object);
		return 2;
	}
	memcpy(r->kind, r->object, klen);
	r->kind[klen] = '\0';
	snprintf(r->name, sizeof(r->name), "%s", slash + 1);
	return -1;
}

static int on_option(void *ctx, int key, const char *arg, long long ms)
{
	struct retry *r = ctx;

	(void)ms;
	if (key != 'n')
		return 0;
	if (!arg[0]) {
		fprintf(stderr, "drasync-target retry: --namespace needs a name; "
				"leave it out for cluster-scoped objects\n");
		return 2;
	}
	r->ns = arg;
	return 0;
}

static int parse_args(int argc, char **argv, struct retry *r)
{
	static const struct ds_cli_option own[] = {
	    {"namespace", 'n', DS_CLI_STRING},
	    {NULL, 0, DS_CLI_FLAG},
	};
	const struct ds_cli_spec spec = {.prog = "drasync-target",
					 .cmd = "retry",
					 .takes = DS_CLI_CONFIG,
					 .usage = usage,
					 .max_args = DS_CLI_ANY_ARGS,
					 .options = own,
					 .on_option = on_option,
					 .ctx = r};
	struct ds_cli_args args = {0};
	int rc = ds_cli_parse(&spec, argc, argv, &args);

	if (rc != DS_CLI_CONTINUE)
		return rc;
	r->config = args.config;
	if (args.argc > 1) {
		fprintf(stderr,
			"drasync-target retry: one KIND/NAME at most ('%s' is extra); run it once "
			"per object, or without KIND/NAME for every failed object\n",
			args.argv[1]);
		return 2;
	}
	if (args.argc == 1)
		r->object = args.argv[0];
	if (!r->config) {
		fprintf(stderr,
			"drasync-target retry: --config FILE is required, e.g.\n"
			"  drasync-target retry --config /etc/drasync/target.yaml%s%s\n",
			r->object ? " " : "", r->object ? r->object : "");
		return 2;
	}
	return r->object ? parse_object(r) : -1;
}

static const char *map_ns(void *ud, const char *source_ns)
{
	return ds_target_config_map_namespace(ud, source_ns);
}

static void on_marked(void *ud, const ds_object_state_row *row, const char *target_ns)
{
	(void)ud;
	printf("%s %s%s%s: was %s%s%s\n", row->kind ? row->kind : "?", target_ns ? target_ns : "",
	       target_ns ? "/" : "", row->target_name ? row->target_name : row->name,
	       ds_apply_state_name(row->state), row->reason ? ": " : "",
	       row->reason ? row->reason : "");
}

static void on_elsewhere(void *ud, const ds_object_state_row *row, const char *target_ns)
{
	(void)ud;
	if (target_ns)
		fprintf(stderr, "  %s/%s is in namespace %s: add --namespace %s\n",
			row->kind ? row->kind : "?",
			row->target_name ? row->target_name : row->name, target_ns, target_ns);
}

static int retry(struct retry *r)
{
	ds_object_state_match m = {.kind = r->object ? r->kind : NULL,
				   .name = r->object ? r->name : NULL,
				   .ns = r->ns	     ? r->ns
					 : r->object ? ""
						     : NULL,
				   .map_ns = map_ns,
				   .map_ud = r->cfg};
	ds_object_state *st = NULL;
	char ledger[4096], msg[512];
	ds_err err = {0};
	int n;

	ds_target_config_ledger(r->cfg, ledger, sizeof(ledger));
	if (access(ledger, F_OK) != 0) {
		fprintf(stderr,
			"drasync-target retry: no ledger at %s (%s): nothing to retry; is stateDir "
			"in %s the one `drasync-target run` uses?\n",
			ledger, strerror(errno), r->config);
		return 1;
	}
	n = ds_object_state_open(&st, ledger, &err);
	if (n == 0)
		n = ds_object_state_retry(st, &m, on_marked, r, &err);
	if (n < 0) {
		fprintf(stderr, "drasync-target retry: %s: %s\n", ledger,
			ds_err_format(&err, msg, sizeof(msg)));
		ds_object_state_free(st);
		return 1;
	}
	if (n > 0) {
		printf("%d object%s marked to be applied again (a running `drasync-target run` "
		       "does within a second, else it does when it starts)\n",
		       n, n == 1 ? "" : "s");
	} else {
		fprintf(stderr,
			"drasync-target retry: nothing to retry: no failed, waiting or backed-off "
			"object%s%s%s%s%s\n",
			r->object ? " " : "", r->object ? r->object : "",
			r->ns ? " in namespace " : "", r->ns ? r->ns : "",
			r->object && !r->ns ? " (cluster-scoped)" : "");
		if (r->object && !r->ns) {
			/* A namespaced object named without --namespace: say where it is. */
			m.ns = NULL;
			m.dry_run = true;
			ds_object_state_retry(st, &m, on_elsewhere, r, NULL);
		}
	}
	ds_object_state_free(st);
	return n > 0 ? 0 : 1;
}

int ds_cmd_retry(int argc, char **argv)
{
	struct retry r;
	char msg[512];
	ds_err err = {0};
	int rc;

	memset(&r, 0, sizeof(r));
	rc = parse_args(argc, argv, &r);
	if (rc >= 0)
		return rc;
	if (ds_target_config_load(&r.cfg, r.config, &err) < 0) {
		fprintf(stderr, "drasync-target retry: %s\n",
			ds_err_format(&err, msg, sizeof(msg)));
		return 2;
	}
	rc = retry(&r);
	ds_target_config_free(r.cfg);
	return rc;
}
