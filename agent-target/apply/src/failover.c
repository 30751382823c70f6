/*
 * drasync-target failover | failback --config target.yaml [--namespace NS]...
 *
 * SPEC §5, DR: failover marks target namespaces active in the ledger
 * (namespace_mode.h), makes their objects due again and applies them itself
 * through an applier restricted to those namespaces, so the standby form
 * (replicas 0, suspended CronJobs, parked DaemonSets, held Pods and Jobs)
 * becomes the active one; failback marks them standby and does the reverse.
 * It works whether `drasync-target run` runs on the same stateDir or not: a
 * running importer reads the modes every pass and keeps them, and both may
 * apply the same objects (server-side apply is idempotent; an object whose
 * form is applied already costs no call).
 *
 * What changed is read from the cluster (the workloads drasync manages, before
 * and after), so it is true whoever applied it. Failover refuses while a
 * source of the namespaces is still connected (split brain), unless --force.
 */
#include "commands.h"

#include "drasync/applier.h"
#include "drasync/clock.h"
#include "drasync/duration.h"
#include "drasync/inbox.h"
#include "drasync/k8s_object.h"
#include "drasync/kube_client.h"
#include "drasync/kubeconfig.h"
#include "drasync/namespace_mode.h"
#include "drasync/object_state.h"
#include "drasync/standby.h"
#include "drasync/target_config.h"
#include "drasync/transform.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_NAMESPACES 256
#define DEFAULT_TIMEOUT_MS 300000L
/* Rounds of mode, reconsider and apply: a running importer's pass that began
 * before the mode changed may write the old form once after ours. */
#define MAX_ROUNDS 3

struct dr {
	const char *verb; /* "failover" / "failback" */
	enum ds_mode to;
	const char *config, *kubeconfig, *context;
	const char *ns[MAX_NAMESPACES];
	size_t n_ns;
	char **ledger_ns; /* the ledger's namespaces, when none was given */
	size_t n_ledger_ns;
	bool force;
	long timeout_ms;
	ds_target_config *cfg;
	char ledger[4096];
	ds_kube *kube;
	ds_object_state *st;
	ds_namespace_modes *nm;
	ds_inbox *ib;
};

/* The workloads whose standby form differs from the active one. */
static const struct kind {
	const char *api, *kind;
} kinds[] = {
    {"apps/v1", "Deployment"},
    {"apps/v1", "StatefulSet"},
    {"apps/v1", "ReplicaSet"},
    {"apps/v1", "DaemonSet"},
    {"batch/v1", "CronJob"},
    {"batch/v1", "Job"},
    {"v1", "Pod"},
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
			if (d->n_ns == MAX_NAMESPACES) {
				fprintf(stderr,
					"drasync-target %s: at most %d --namespace; leave them out "
					"for every namespace of the ledger\n",
					d->verb, MAX_NAMESPACES);
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

static const char *when(int64_t t_s, char *buf, size_t size)
{
	struct tm tm;
	time_t tt = (time_t)t_s;

	gmtime_r(&tt, &tm);
	strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return buf;
}

static const char *map_ns(void *ud, const char *source_ns)
{
	return ds_target_config_map_namespace(ud, source_ns);
}

static ds_object_state_scope scope_of(const struct dr *d)
{
	return (ds_object_state_scope){
	    .ns = d->ns, .n = d->n_ns, .map_ns = map_ns, .map_ud = d->cfg};
}

/* ---- the cluster, before and after -------------------------------------------- */

/*
 * What the mode changes of one workload, as the cluster has it: "Kind ns/name"
 * -> {replicas, suspend, parked}. An object being deleted counts as gone.
 */
static int snapshot(struct dr *d, json_t **out)
{
	json_t *snap = json_object();
	struct ds_kube_list_opts lo = {.label_selector = DS_LABEL_MANAGED_BY "=drasync",
				       .limit = 500};
	int rc = 0;

	if (!snap)
		return -ENOMEM;
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		struct ds_kube_resource res;
		ds_kube_error ke;

		ds_kube_error_clear(&ke);
		if (ds_kube_resource_find(d->kube, kinds[k].api, kinds[k].kind, &res, &ke) < 0)
			continue;
		for (size_t i = 0; i < d->n_ns; i++) {
			json_t *list = NULL, *item;
			size_t j;

			ds_kube_error_clear(&ke);
			rc = ds_kube_list(d->kube, &res, d->ns[i], &lo, &list, NULL, &ke);
			if (rc < 0) {
				char buf[600];
				fprintf(stderr, "drasync-target %s: list %s in %s: %s\n", d->verb,
					kinds[k].kind, d->ns[i],
					ds_kube_error_format(&ke, buf, sizeof(buf)));
				json_decref(snap);
				return rc;
			}
			json_array_foreach (json_object_get(list, "items"), j, item) {
				json_t *meta = json_object_get(item, "metadata");
				json_t *spec = json_object_get(item, "spec"), *sel, *v;
				char key[700];

				if (json_object_get(meta, "deletionTimestamp") ||
				    json_array_size(json_object_get(meta, "ownerReferences")))
					continue;
				snprintf(key, sizeof(key), "%s %s/%s", kinds[k].kind, d->ns[i],
					 ds_json_str(meta, "name"));
				v = json_object();
				if (!v) {
					rc = -ENOMEM;
					break;
				}
				if (json_is_integer(json_object_get(spec, "replicas")))
					json_object_set(v, "replicas",
							json_object_get(spec, "replicas"));
				if (strcmp(kinds[k].kind, "CronJob") == 0)
					json_object_set_new(v, "suspend",
							    json_boolean(json_is_true(
								json_object_get(spec, "suspend"))));
				/* The standby form's own marks (SSA drops them in the active one).
				 */
				json_object_set_new(
				    v, "standby",
				    json_boolean(ds_obj_annotation(item, DS_ANNOTATION_REPLICAS) ||
						 ds_obj_annotation(item, DS_ANNOTATION_SUSPEND) ||
						 ds_obj_annotation(item, DS_ANNOTATION_STANDBY)));
				/* List items carry no kind: the DaemonSet's pod spec by its path.
				 */
				sel = ds_json_path(item, "spec.template.spec.nodeSelector");
				if (strcmp(kinds[k].kind, "DaemonSet") == 0)
					json_object_set_new(
					    v, "parked",
					    json_boolean(json_object_get(
							     sel, DS_STANDBY_NODE_LABEL) != NULL));
				json_object_set_new(snap, key, v);
			}
			json_decref(list);
			if (rc < 0)
				break;
		}
		if (rc < 0)
			break;
	}
	if (rc < 0) {
		json_decref(snap);
		return rc;
	}
	*out = snap;
	return 0;
}

static bool bare(const char *key)
{
	return strncmp(key, "Pod ", 4) == 0 || strncmp(key, "Job ", 4) == 0;
}

/* Whether every workload of `after` has the form of the mode (none left in the other's). */
static bool settled(const struct dr *d, json_t *after)
{
	const char *key;
	json_t *v;

	json_object_foreach (after, key, v) {
		bool marked = json_is_true(json_object_get(v, "standby"));

		if (d->to == DS_MODE_MIGRATE && marked)
			return false;
		if (d->to == DS_MODE_STANDBY && (bare(key) || !marked))
			return false;
	}
	return true;
}

/* Equal values, or both absent (json_equal() says no to two NULLs). */
static bool eq(json_t *a, json_t *b)
{
	return (!a && !b) || json_equal(a, b);
}

/* The snapshot values compared for the lines: what an operator sees change. */
static bool same(json_t *a, json_t *b)
{
	static const char *const fields[] = {"replicas", "suspend", "parked"};

	for (size_t i = 0; i < 3; i++)
		if (!eq(json_object_get(a, fields[i]), json_object_get(b, fields[i])))
			return false;
	return true;
}

static const char *int_text(json_t *v, char *buf, size_t size)
{
	if (!v)
		return "unset";
	snprintf(buf, size, "%lld", (long long)json_integer_value(v));
	return buf;
}

/* One line per workload that changed between the snapshots. @return how many */
static size_t print_changes(json_t *before, json_t *after, size_t *unchanged)
{
	const char *key;
	json_t *b, *a;
	size_t changed = 0;
	char x[32], y[32];

	*unchanged = 0;
	json_object_foreach (after, key, a) {
		b = json_object_get(before, key);
		if (!b) {
			printf("%s: created%s\n", key, bare(key) ? " (was held)" : "");
			changed++;
			continue;
		}
		if (same(a, b)) {
			(*unchanged)++;
			continue;
		}
		if (!eq(json_object_get(b, "replicas"), json_object_get(a, "replicas")))
			printf("%s: replicas %s -> %s\n", key,
			       int_text(json_object_get(b, "replicas"), x, sizeof(x)),
			       int_text(json_object_get(a, "replicas"), y, sizeof(y)));
		if (!eq(json_object_get(b, "suspend"), json_object_get(a, "suspend")))
			printf("%s: suspend %s -> %s\n", key,
			       json_is_true(json_object_get(b, "suspend")) ? "true" : "false",
			       json_is_true(json_object_get(a, "suspend")) ? "true" : "false");
		if (!eq(json_object_get(b, "parked"), json_object_get(a, "parked")))
			printf("%s: %s\n", key,
			       json_is_true(json_object_get(a, "parked")) ? "parked" : "unparked");
		changed++;
	}
	json_object_foreach (before, key, b) {
		if (!json_object_get(after, key)) {
			printf("%s: deleted%s\n", key,
			       bare(key) ? " (held in the ledger again)" : "");
			changed++;
		}
	}
	return changed;
}

/* ---- applying ------------------------------------------------------------------- */

/*
 * What did not go as the mode wants, from the ledger (whichever applier
 * decided it, this command's or a running importer's): objects that failed,
 * wait, are still retried, or are held but left on the target because they are
 * not drasync's to delete. One line each. @return how many, or < 0
 */
static int report_problems(struct dr *d, const ds_object_state_scope *scope)
{
	ds_object_state_row *rows = NULL;
	size_t n = 0, bad = 0;
	ds_err err = {0};
	int rc = ds_object_state_list_in(d->st, scope, &rows, &n, &err);

	if (rc < 0) {
		fprintf(stderr, "drasync-target %s: %s: %s\n", d->verb, d->ledger, err.msg);
		return rc;
	}
	for (size_t i = 0; i < n; i++) {
		const ds_object_state_row *r = &rows[i];
		const char *what = NULL, *ns;

		if (r->state == DS_APPLY_FAILED)
			what = "FAILED";
		else if (r->state == DS_APPLY_WAITING)
			what = "NOT APPLIED (waits)";
		else if (r->state == DS_APPLY_PENDING)
			what = "NOT APPLIED (still retrying)";
		else if (r->state == DS_APPLY_HELD && r->reason &&
			 strstr(r->reason, "not deleted:"))
			what = "KEPT on the target";
		if (!what)
			continue;
		ns = r->target_name ? r->target_ns : map_ns(d->cfg, r->ns ? r->ns : "");
		printf("%s %s/%s: %s: %s\n", r->kind ? r->kind : "?", ns ? ns : "",
		       r->target_name ? r->target_name : r->name, what,
		       r->reason ? r->reason : "no reason given");
		bad++;
	}
	ds_object_state_rows_free(rows, n);
	return (int)bad;
}

/*
 * Apply what is due in the namespaces until nothing is, retrying objects in
 * backoff until the deadline. @return 0, or a negative errno (ledger)
 */
static int apply_all(struct dr *d, ds_applier *a, int64_t deadline, size_t *pending_left)
{
	ds_object_state_scope scope = scope_of(d);
	ds_err err = {0};
	int rc;

	for (;;) {
		size_t pending = 0, waiting = 0;
		int64_t next_at = 0;

		rc = ds_applier_pass(a, &err);
		if (rc == -EBUSY)
			continue;
		if (rc < 0) {
			fprintf(stderr, "drasync-target %s: %s: %s\n", d->verb, d->ledger, err.msg);
			return rc;
		}
		if (rc > 0)
			continue;
		rc = ds_object_state_due_in(d->st, &scope, &pending, &waiting, &next_at, &err);
		if (rc < 0) {
			fprintf(stderr, "drasync-target %s: %s: %s\n", d->verb, d->ledger, err.msg);
			return rc;
		}
		*pending_left = pending;
		if (!pending || ds_deadline_passed(deadline))
			return 0;
		{
			/* next_at is a ledger time, on the wall clock */
			int64_t wait = next_at - ds_clock_wall_ms();
			struct timespec ts;
			if (wait > 500)
				wait = 500;
			if (wait < 20)
				wait = 20;
			ts.tv_sec = 0;
			ts.tv_nsec = (long)wait * 1000000L;
			nanosleep(&ts, NULL);
		}
	}
}

/* ---- the steps ------------------------------------------------------------------ */

static int open_ledger(struct dr *d)
{
	char msg[512];
	ds_err err = {0};
	int rc;

	ds_target_config_ledger(d->cfg, d->ledger, sizeof(d->ledger));
	if (access(d->ledger, F_OK) != 0) {
		fprintf(stderr,
			"drasync-target %s: no ledger at %s (%s): nothing to %s; is stateDir in "
			"%s the one `drasync-target run` uses?\n",
			d->verb, d->ledger, strerror(errno), d->verb, d->config);
		return 2;
	}
	if (ds_target_check_ledger(d->verb, d->ledger) != 0)
		return 1;
	rc = ds_object_state_open(&d->st, d->ledger, &err);
	if (rc == 0)
		rc = ds_namespace_modes_open(&d->nm, d->ledger, &err);
	if (rc == 0)
		rc = ds_inbox_open(&d->ib, d->ledger, &err);
	if (rc < 0) {
		fprintf(stderr, "drasync-target %s: %s: %s\n", d->verb, d->ledger,
			ds_err_format(&err, msg, sizeof(msg)));
		return 1;
	}
	return 0;
}

/* The namespaces: those given (said when the ledger has nothing there), else the ledger's. */
static int pick_namespaces(struct dr *d)
{
	ds_err err = {0};
	int rc =
	    ds_object_state_namespaces(d->st, map_ns, d->cfg, &d->ledger_ns, &d->n_ledger_ns, &err);

	if (rc < 0) {
		fprintf(stderr, "drasync-target %s: %s: %s\n", d->verb, d->ledger, err.msg);
		return 1;
	}
	if (!d->n_ns) {
		if (!d->n_ledger_ns) {
			fprintf(stderr,
				"drasync-target %s: the ledger %s holds no namespaced objects yet: "
				"nothing to %s\n",
				d->verb, d->ledger, d->verb);
			return 1;
		}
		for (size_t i = 0; i < d->n_ledger_ns && d->n_ns < MAX_NAMESPACES; i++)
			d->ns[d->n_ns++] = d->ledger_ns[i];
		return 0;
	}
	for (size_t i = 0; i < d->n_ns; i++) {
		bool known = false;
		for (size_t j = 0; j < d->n_ledger_ns && !known; j++)
			known = strcmp(d->ns[i], d->ledger_ns[j]) == 0;
		if (!known) {
			fprintf(stderr,
				"drasync-target %s: the ledger holds no objects for namespace %s "
				"(a target namespace, after namespaceMappings); it has:",
				d->verb, d->ns[i]);
			for (size_t j = 0; j < d->n_ledger_ns; j++)
				fprintf(stderr, " %s", d->ledger_ns[j]);
			fprintf(stderr, "%s\n", d->n_ledger_ns ? "" : " none");
		}
	}
	return 0;
}

/* Split brain: a source of these namespaces still connected. @return 0 go on, 1 refused */
static int guard(struct dr *d)
{
	ds_object_state_scope scope = scope_of(d);
	char **sources = NULL, t1[64];
	size_t n = 0, connected = 0;
	ds_err err = {0};
	int rc;

	if (d->to != DS_MODE_MIGRATE)
		return 0;
	rc = ds_object_state_sources_in(d->st, &scope, &sources, &n, &err);
	if (rc < 0) {
		fprintf(stderr, "drasync-target failover: %s: %s\n", d->ledger, err.msg);
		return 1;
	}
	for (size_t i = 0; i < n; i++) {
		ds_inbox_presence p;
		if (ds_inbox_presence_get(d->ib, sources[i], ds_clock_wall_ms(), &p, NULL) != 1 ||
		    !p.connected)
			continue;
		connected++;
		fprintf(stderr,
			"drasync-target failover: %s source %s is still connected to this "
			"target (session from %s since %s, seen %lld s ago)%s\n",
			d->force ? "warning:" : "refused:", sources[i], p.peer,
			when(p.since / 1000, t1, sizeof(t1)),
			(long long)((ds_clock_wall_ms() - p.seen_at) / 1000),
			d->force ? "; --force given" : "");
	}
	ds_object_state_strings_free(sources, n);
	if (!connected || d->force)
		return 0;
	fprintf(stderr,
		"  Its site may still run these workloads: failing over now would run them\n"
		"  twice (split brain). Stop drasync-source on the source site (or cut the\n"
		"  link) and run failover again, or, if you know the source site is down,\n"
		"  add --force:\n"
		"    drasync-target failover --config %s",
		d->config);
	for (size_t i = 0; i < d->n_ns; i++)
		fprintf(stderr, " --namespace %s", d->ns[i]);
	fprintf(stderr, " --force\nNothing was changed.\n");
	return 1;
}

/* Record the mode of each namespace, saying which changed. @return how many, or < 0 */
static int set_modes(struct dr *d)
{
	enum ds_mode conf = ds_target_config_mode(d->cfg);
	int changed = 0;

	for (size_t i = 0; i < d->n_ns; i++) {
		enum ds_mode was = conf;
		ds_err err = {0};
		int rc = ds_namespace_modes_get(d->nm, d->ns[i], &was, &err);

		if (rc >= 0)
			rc = ds_namespace_modes_set(d->nm, d->ns[i], d->to, d->verb, &err);
		if (rc < 0) {
			fprintf(stderr, "drasync-target %s: %s: %s\n", d->verb, d->ledger, err.msg);
			return rc;
		}
		if (rc == 1 && was != d->to) {
			printf("namespace %s: %s -> %s\n", d->ns[i], ds_namespace_mode_word(was),
			       ds_namespace_mode_word(d->to));
			changed++;
		}
	}
	return changed;
}

static int run(struct dr *d)
{
	ds_object_state_scope scope;
	ds_applier_config ac;
	ds_applier *a = NULL;
	json_t *before = NULL, *after = NULL;
	size_t pending_left = 0, changed = 0, unchanged = 0, failed;
	int64_t deadline = ds_deadline_in(d->timeout_ms);
	ds_err err = {0};
	int rc, modes, rounds = 0;

	if ((rc = open_ledger(d)) != 0 || (rc = pick_namespaces(d)) != 0 || (rc = guard(d)) != 0 ||
	    (rc = ds_target_connect(d->verb, d->kubeconfig, d->context, d->cfg, NULL, &d->kube)) !=
		0)
		return rc;
	scope = scope_of(d); /* the namespaces are known now */
	if (snapshot(d, &before) < 0)
		return 1;
	modes = set_modes(d);
	if (modes < 0) {
		rc = 1;
		goto out;
	}
	memset(&ac, 0, sizeof(ac));
	ac.ledger_path = d->ledger;
	ac.kube = d->kube;
	ac.cfg = d->cfg;
	ac.namespaces = d->ns;
	ac.n_namespaces = d->n_ns;
	rc = ds_applier_new(&a, &ac, &err);
	if (rc < 0) {
		fprintf(stderr, "drasync-target %s: %s\n", d->verb, err.msg);
		rc = 1;
		goto out;
	}
	do {
		json_decref(after);
		after = NULL;
		rc = ds_object_state_reconsider_in(d->st, &scope, &err);
		if (rc < 0) {
			fprintf(stderr, "drasync-target %s: %s: %s\n", d->verb, d->ledger, err.msg);
			rc = 1;
			goto out;
		}
		if (apply_all(d, a, deadline, &pending_left) < 0 || snapshot(d, &after) < 0) {
			rc = 1;
			goto out;
		}
	} while (!settled(d, after) && ++rounds < MAX_ROUNDS);

	changed = print_changes(before, after, &unchanged);
	rc = report_problems(d, &scope);
	if (rc < 0) {
		rc = 1;
		goto out;
	}
	failed = (size_t)rc;
	if (pending_left)
		printf("%zu object%s still to be retried after --timeout (a running importer "
		       "goes on; see drasync-target status)\n",
		       pending_left, pending_left == 1 ? "" : "s");
	if (!changed && !modes && !failed && !pending_left) {
		printf("%s: nothing to change: namespace%s", d->verb, d->n_ns == 1 ? "" : "s");
		for (size_t i = 0; i < d->n_ns; i++)
			printf("%s %s", i ? "," : "", d->ns[i]);
		printf(" already %s (%zu workload%s as they should be)\n",
		       ds_namespace_mode_word(d->to), unchanged, unchanged == 1 ? "" : "s");
	} else {
		printf("%s: %zu namespace%s %s, %zu workload%s changed, %zu unchanged, %zu "
		       "not done%s\n",
		       d->verb, d->n_ns, d->n_ns == 1 ? "" : "s", ds_namespace_mode_word(d->to),
		       changed, changed == 1 ? "" : "s", unchanged, failed,
		       failed ? " (see above)" : "");
	}
	rc = failed || pending_left ? 1 : 0;
out:
	ds_applier_free(a);
	json_decref(before);
	json_decref(after);
	return rc;
}

static int dr_main(int argc, char **argv, const char *verb, enum ds_mode to)
{
	struct dr d;
	char msg[512];
	ds_err err = {0};
	int rc;

	memset(&d, 0, sizeof(d));
	d.verb = verb;
	d.to = to;
	d.timeout_ms = DEFAULT_TIMEOUT_MS;
	rc = parse_args(argc, argv, &d);
	if (rc >= 0)
		return rc;
	if (ds_target_config_load(&d.cfg, d.config, &err) < 0) {
		fprintf(stderr, "drasync-target %s: %s\n", verb,
			ds_err_format(&err, msg, sizeof(msg)));
		return 2;
	}
	rc = run(&d);
	ds_inbox_free(d.ib);
	ds_namespace_modes_free(d.nm);
	ds_object_state_free(d.st);
	ds_object_state_strings_free(d.ledger_ns, d.n_ledger_ns);
	ds_kube_free(d.kube);
	ds_target_config_free(d.cfg);
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
