/*
 * drasync-target failover | failback --config target.yaml [--namespace NS]...
 *
 * SPEC §5, DR: the arguments, the ledger and the cluster's client; what
 * failover and failback do and decide is apply/failover.h.
 */
#include "commands.h"

#include "drasync/cli.h"
#include "drasync/clock.h"
#include "drasync/failover.h"
#include "drasync/target_agent.h"
#include "drasync/target_config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_TIMEOUT_MS 300000LL
#define MAX_TIMEOUT_MS (7 * 86400000LL)

struct dr {
	const char *verb; /* "failover" / "failback" */
	enum ds_mode to;
	struct ds_cli_args a;
	bool force;
};

static void usage(FILE *out, const char *verb)
{
	bool over = strcmp(verb, "failover") == 0;

	fprintf(out, "Usage: drasync-target %s --config FILE [--namespace NS]...%s\n", verb,
		over ? " [--force] [--timeout DUR]" : " [--timeout DUR]");
	if (over)
		fprintf(
		    out,
		    "\n"
		    "Activates the standby copy (SPEC §5): marks the target namespaces active\n"
		    "in the ledger and applies their objects in active form: Deployments,\n"
		    "StatefulSets and ReplicaSets get their source replica count back\n"
		    "(annotation drasync.io/replicas), CronJobs their source suspend value,\n"
		    "DaemonSets lose the node selector that parked them, and the bare Pods and\n"
		    "Jobs held in the ledger are created. A running `drasync-target run` keeps\n"
		    "the namespaces active: later records are applied in active form.\n"
		    "\n"
		    "Split brain: while a source of those namespaces is still connected to\n"
		    "this target, its site may still run the same workloads; failover refuses\n"
		    "and says which source. Stop drasync-source there (or cut the link) first,\n"
		    "or pass --force when you know the source site is down.\n");
	else
		fprintf(
		    out,
		    "\n"
		    "Returns target namespaces to standby (SPEC §5): marks them standby in the\n"
		    "ledger and applies the standby form again: replicas 0, CronJobs\n"
		    "suspended, DaemonSets parked, and the bare Pods and Jobs drasync created\n"
		    "at failover deleted (only those labelled app.kubernetes.io/managed-by=\n"
		    "drasync with the matching drasync.io/source-uid); they are held in the\n"
		    "ledger again until the next failover.\n");
	fprintf(
	    out,
	    "\n"
	    "Without --namespace: every target namespace the ledger holds objects for.\n"
	    "It works on the ledger in stateDir whether `drasync-target run` is running\n"
	    "or not, and applies the objects itself. Running it again changes nothing.\n"
	    "\n"
	    "Options:\n"
	    "  -c, --config FILE       the TargetConfig file (required)\n"
	    "  -n, --namespace NS      a target namespace (after namespaceMappings); repeat\n"
	    "                          for several\n"
	    "%s"
	    "  -t, --timeout DUR       how long to retry objects the API refuses for now\n"
	    "                          (e.g. 90s, 5m; default 5m)\n"
	    "      --kubeconfig PATH   use this kubeconfig instead of the file's\n"
	    "      --context NAME      the kubeconfig context (default: current)\n"
	    "  -h, --help              show this help\n"
	    "\n"
	    "Prints one line per namespace whose mode changed and per object that\n"
	    "changed on the cluster (e.g. \"Deployment ml-team-dr/trainer: replicas 0 -> 3\"),\n"
	    "the objects that failed, wait or are still retried with the API's reason,\n"
	    "those kept on the target because they are not drasync's to delete, and a\n"
	    "summary.\n"
	    "Exit codes: 0 done (or nothing to change); 1 something failed or was kept%s;\n"
	    "2 usage or configuration error.\n"
	    "\n"
	    "Examples:\n"
	    "  drasync-target %s --config /etc/drasync/target.yaml\n"
	    "  drasync-target %s --config target.yaml --namespace ml-team-dr "
	    "--namespace web-dr\n",
	    over ? "  -f, --force             fail over although a source is still connected\n"
		 : "",
	    over ? ",\nor a source of the namespaces is still connected (nothing changed)" : "",
	    verb, verb);
	if (over)
		fprintf(out,
			"  drasync-target failover --config target.yaml --namespace ml-team-dr "
			"--force\n");
}

static void usage_failover(FILE *out)
{
	usage(out, "failover");
}

static void usage_failback(FILE *out)
{
	usage(out, "failback");
}

static int on_option(void *ctx, int key, const char *arg, long long ms)
{
	struct dr *d = ctx;

	(void)ms;
	if (key == 'f') {
		d->force = true;
	} else if (key == DS_CLI_UNKNOWN && d->to == DS_MODE_STANDBY &&
		   (strcmp(arg, "-f") == 0 || strcmp(arg, "--force") == 0)) {
		fprintf(stderr, "drasync-target failback: --force is for failover only; failback "
				"needs none\n");
	}
	return 0;
}

static int parse_args(int argc, char **argv, struct dr *d)
{
	static const struct ds_cli_option force[] = {{"force", 'f', DS_CLI_FLAG}, {NULL}};
	bool over = d->to == DS_MODE_MIGRATE;
	struct ds_cli_spec spec = {.prog = "drasync-target",
				   .cmd = d->verb,
				   .takes = DS_CLI_CONFIG | DS_CLI_KUBECONFIG | DS_CLI_CONTEXT |
					    DS_CLI_NAMESPACE | DS_CLI_TIMEOUT,
				   .usage = over ? usage_failover : usage_failback,
				   .max_namespaces = DS_FAILOVER_MAX_NAMESPACES,
				   .ns_example = "ml-team-dr",
				   .ns_hint = "leave them out for every namespace of the ledger",
				   .max_args = DS_CLI_ANY_ARGS,
				   .options = over ? force : NULL,
				   .on_option = on_option,
				   .ctx = d};
	int rc = ds_cli_parse(&spec, argc, argv, &d->a);

	if (rc != DS_CLI_CONTINUE)
		return rc;
	if (d->a.argc)
		return ds_cli_fail(&spec,
				   "unexpected argument '%s'; name namespaces with --namespace, "
				   "e.g.\n  drasync-target %s --config %s --namespace %s",
				   d->a.argv[0], d->verb, d->a.config ? d->a.config : "target.yaml",
				   d->a.argv[0]);
	if (!d->a.config)
		return ds_cli_fail(&spec,
				   "--config FILE is required, e.g.\n"
				   "  drasync-target %s --config /etc/drasync/target.yaml%s%s",
				   d->verb, d->a.n_namespaces ? " --namespace " : "",
				   d->a.n_namespaces ? d->a.namespaces[0] : "");
	if (d->a.timeout_ms > MAX_TIMEOUT_MS)
		return ds_cli_fail(&spec, "--timeout: at most a week (168h)");
	return DS_CLI_CONTINUE;
}

static void say(void *ud, bool problem, const char *line)
{
	(void)ud;
	fprintf(problem ? stderr : stdout, "%s\n", line);
}

/* The ledger in stateDir, checked and opened. @return 0, or the exit code */
static int open_ledger(const struct dr *d, const ds_target_config *cfg, char *ledger, size_t size,
		       ds_failover **out)
{
	ds_failover_opts o = {.verb = d->verb,
			      .to = d->to,
			      .ledger_path = ledger,
			      .config_path = d->a.config,
			      .cfg = cfg,
			      .force = d->force,
			      .say = say};
	char msg[512];
	ds_err err = {0};

	ds_target_config_ledger(cfg, ledger, size);
	if (access(ledger, F_OK) != 0) {
		fprintf(stderr,
			"drasync-target %s: no ledger at %s (%s): nothing to %s; is stateDir in "
			"%s the one `drasync-target run` uses?\n",
			d->verb, ledger, strerror(errno), d->verb, d->a.config);
		return 2;
	}
	if (ds_target_check_ledger(d->verb, ledger) != 0)
		return 1;
	if (ds_failover_open(out, &o, &err) < 0) {
		fprintf(stderr, "drasync-target %s: %s: %s\n", d->verb, ledger,
			ds_err_format(&err, msg, sizeof(msg)));
		return 1;
	}
	return 0;
}

static int dr_main(int argc, char **argv, const char *verb, enum ds_mode to)
{
	struct dr d = {.verb = verb, .to = to, .a = {.timeout_ms = DEFAULT_TIMEOUT_MS}};
	ds_target_config *cfg = NULL;
	struct ds_kube_transport_opts topts;
	ds_failover *f = NULL;
	ds_kube *kube = NULL;
	char ledger[4096], msg[512];
	ds_err err = {0};
	int64_t deadline;
	int rc;

	rc = parse_args(argc, argv, &d);
	if (rc >= 0)
		return rc;
	if (ds_target_config_load(&cfg, d.a.config, &err) < 0) {
		fprintf(stderr, "drasync-target %s: %s\n", verb,
			ds_err_format(&err, msg, sizeof(msg)));
		return 2;
	}
	deadline = ds_deadline_in(d.a.timeout_ms);
	/* The importer's client: its writes are a bulk of them at once, as run's are. */
	ds_target_agent_transport_opts(&topts, ds_target_config_api_max_in_flight(cfg));
	if ((rc = open_ledger(&d, cfg, ledger, sizeof(ledger), &f)) == 0 &&
	    (rc = ds_failover_namespaces(f, d.a.namespaces, d.a.n_namespaces)) == 0 &&
	    (rc = ds_failover_guard(f)) == 0 &&
	    (rc = ds_target_connect(verb, d.a.kubeconfig, d.a.context, cfg, &topts, &kube)) == 0 &&
	    (rc = ds_target_check_identity(verb, kube, cfg, ledger, false, false)) == 0)
		rc = ds_failover_run(f, kube, deadline);
	ds_failover_free(f);
	ds_kube_free(kube);
	ds_target_config_free(cfg);
	return rc;
}

int ds_cmd_failover(int argc, char **argv)
{
	return dr_main(argc, argv, "failover", DS_MODE_MIGRATE);
}

int ds_cmd_failback(int argc, char **argv)
{
	return dr_main(argc, argv, "failback", DS_MODE_STANDBY);
}
