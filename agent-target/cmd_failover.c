/*
 * drasync-target failover | failback --config target.yaml [--namespace NS]...
 *
 * SPEC §5, DR: the arguments, the ledger and the cluster's client; what
 * failover and failback do and decide is apply/failover.h.
 */
#include "commands.h"

#include "drasync/clock.h"
#include "drasync/duration.h"
#include "drasync/failover.h"
#include "drasync/target_config.h"

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_TIMEOUT_MS 300000L

struct dr {
	const char *verb; /* "failover" / "failback" */
	enum ds_mode to;
	const char *config, *kubeconfig, *context;
	const char *ns[DS_FAILOVER_MAX_NAMESPACES];
	size_t n_ns;
	bool force;
	long timeout_ms;
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

/* A Go duration ("90s", "5m", "1h30m") into ms, as run and verify read it: a
 * bare number has no unit and is refused. At most a week. @return 0, -EINVAL */
static int parse_duration(const char *s, long *ms, ds_err *err)
{
	long long v = 0;
	int rc = ds_duration_parse_ms(s, &v, NULL, err);

	if (rc < 0)
		return rc;
	if (v > 86400000LL * 7) {
		ds_err_set(err, "longer than a week");
		return -EINVAL;
	}
	*ms = (long)v;
	return 0;
}

static int parse_args(int argc, char **argv, struct dr *d)
{
	static const struct option longopts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"namespace", required_argument, NULL, 'n'},
	    {"force", no_argument, NULL, 'f'},
	    {"timeout", required_argument, NULL, 't'},
	    {"kubeconfig", required_argument, NULL, 'k'},
	    {"context", required_argument, NULL, 'x'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	bool over = d->to == DS_MODE_MIGRATE;
	ds_err err = {0};
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, over ? "c:n:ft:h" : "c:n:t:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			d->config = optarg;
			break;
		case 'n':
			if (!optarg[0] || strchr(optarg, '/')) {
				fprintf(stderr,
					"drasync-target %s: --namespace needs a namespace name "
					"('%s' is not one), e.g. --namespace ml-team-dr\n",
					d->verb, optarg);
				return 2;
			}
			if (d->n_ns == DS_FAILOVER_MAX_NAMESPACES) {
				fprintf(stderr,
					"drasync-target %s: at most %d --namespace; leave them out "
					"for every namespace of the ledger\n",
					d->verb, DS_FAILOVER_MAX_NAMESPACES);
				return 2;
			}
			d->ns[d->n_ns++] = optarg;
			break;
		case 'f':
			if (!over) {
				fprintf(stderr, "drasync-target failback: --force is for failover "
						"only; failback needs none\n");
				return 2;
			}
			d->force = true;
			break;
		case 't':
			if (parse_duration(optarg, &d->timeout_ms, &err) < 0) {
				fprintf(stderr,
					"drasync-target %s: --timeout '%s' is not a duration (%s); "
					"write e.g. --timeout 90s or --timeout 5m\n",
					d->verb, optarg, err.msg);
				return 2;
			}
			break;
		case 'k':
			d->kubeconfig = optarg;
			break;
		case 'x':
			d->context = optarg;
			break;
		case 'h':
			usage(stdout, d->verb);
			return 0;
		default:
			if (!over && optind > 0 && optind <= argc &&
			    (strcmp(argv[optind - 1], "-f") == 0 ||
			     strcmp(argv[optind - 1], "--force") == 0))
				fprintf(stderr, "drasync-target failback: --force is for failover "
						"only; failback needs none\n");
			fprintf(stderr, "Try 'drasync-target %s --help'.\n", d->verb);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr,
			"drasync-target %s: unexpected argument '%s'; name namespaces with "
			"--namespace, e.g.\n"
			"  drasync-target %s --config %s --namespace %s\n",
			d->verb, argv[optind], d->verb, d->config ? d->config : "target.yaml",
			argv[optind]);
		return 2;
	}
	if (!d->config) {
		fprintf(stderr,
			"drasync-target %s: --config FILE is required, e.g.\n"
			"  drasync-target %s --config /etc/drasync/target.yaml%s%s\n",
			d->verb, d->verb, d->n_ns ? " --namespace " : "", d->n_ns ? d->ns[0] : "");
		return 2;
	}
	return -1;
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
			      .config_path = d->config,
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
			d->verb, ledger, strerror(errno), d->verb, d->config);
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
	struct dr d = {.verb = verb, .to = to, .timeout_ms = DEFAULT_TIMEOUT_MS};
	ds_target_config *cfg = NULL;
	ds_failover *f = NULL;
	ds_kube *kube = NULL;
	char ledger[4096], msg[512];
	ds_err err = {0};
	int64_t deadline;
	int rc;

	rc = parse_args(argc, argv, &d);
	if (rc >= 0)
		return rc;
	if (ds_target_config_load(&cfg, d.config, &err) < 0) {
		fprintf(stderr, "drasync-target %s: %s\n", verb,
			ds_err_format(&err, msg, sizeof(msg)));
		return 2;
	}
	deadline = ds_deadline_in(d.timeout_ms);
	if ((rc = open_ledger(&d, cfg, ledger, sizeof(ledger), &f)) == 0 &&
	    (rc = ds_failover_namespaces(f, d.ns, d.n_ns)) == 0 &&
	    (rc = ds_failover_guard(f)) == 0 &&
	    (rc = ds_target_connect(verb, d.kubeconfig, d.context, cfg, NULL, &kube)) == 0)
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
