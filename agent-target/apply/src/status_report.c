/*
 * drasync-target status --config target.yaml [-o json]: what the importer's
 * ledger in stateDir says, with `run` running or stopped: each source, its
 * epoch, committed seq, last contact and unapplied backlog; the objects per
 * apply state; the objects waiting (and for what) and failed (and why); the
 * last verification of each workload (drasync-target verify).
 */
#include "commands.h"

#include "drasync/ledger_status.h"
#include "drasync/namespace_mode.h"
#include "drasync/target_config.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define MAX_ITEMS_SHOWN 50

static void usage(FILE *out)
{
	fprintf(out, "Usage: drasync-target status --config FILE [-o text|json]\n"
		     "\n"
		     "Shows the importer's ledger (stateDir/ledger.db), whether `run` runs or\n"
		     "not: every source (cluster, epoch, committed seq, last contact, records\n"
		     "not applied yet, and the lag: how long the oldest of them waits), every\n"
		     "target namespace with its mode (active or standby), since when and what\n"
		     "set it (failover, failback, or the configuration's mode), the objects\n"
		     "per state, and the objects that wait\n"
		     "(for what) or failed (why), and the last verification of the workloads\n"
		     "(drasync-target verify): how many verified, and why the others did not.\n"
		     "\n"
		     "Options:\n"
		     "  -c, --config FILE   the TargetConfig file (required)\n"
		     "  -o, --output FMT    text (default) or json\n"
		     "  -h, --help          show this help\n"
		     "\n"
		     "Exit codes: 0 healthy; 1 needs attention (objects failed or wait, or\n"
		     "workloads failed their last verification); 2 usage\n"
		     "or configuration error, or no ledger yet in stateDir.\n"
		     "\n"
		     "Example:\n"
		     "  drasync-target status --config /etc/drasync/target.yaml -o json\n");
}

static const char *when(int64_t t, char *buf, size_t size)
{
	struct tm tm;
	time_t tt = (time_t)t;

	if (t <= 0)
		return "never";
	gmtime_r(&tt, &tm);
	strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return buf;
}

/* Why the target needs an operator's attention, or NULL. */
static const char *attention(const ds_ledger_status *st)
{
	if (st->states[DS_APPLY_FAILED])
		return "objects failed to apply";
	if (st->states[DS_APPLY_WAITING])
		return "objects wait for objects they need";
	if (st->not_verified)
		return "workloads failed their last verification";
	return NULL;
}

/* The last verification: totals, and each workload NOT verified with its reason. */
static void print_verification_text(const ds_ledger_status *st)
{
	char b[40];

	if (!st->verified && !st->not_verified) {
		printf("\nverification: never (drasync-target verify --config FILE)\n");
		return;
	}
	printf("\nverification: %llu verified, %llu NOT verified (last checked %s)\n",
	       (unsigned long long)st->verified, (unsigned long long)st->not_verified,
	       when(st->last_checked, b, sizeof(b)));
	for (size_t i = 0; i < st->n_verifications; i++) {
		const ds_ledger_verification *v = &st->verifications[i];
		if (!v->verified)
			printf("  NOT verified %s %s/%s (%s, %s): %s\n", v->kind, v->ns, v->name,
			       v->form, when(v->checked_at, b, sizeof(b)), v->reason);
	}
}

static json_t *verification_json(const ds_ledger_status *st)
{
	json_t *arr = json_array();

	for (size_t i = 0; i < st->n_verifications; i++) {
		const ds_ledger_verification *v = &st->verifications[i];
		json_array_append_new(
		    arr, json_pack("{ss ss ss ss sb ss sI sf}", "kind", v->kind, "namespace", v->ns,
				   "name", v->name, "form", v->form, "verified", v->verified,
				   "reason", v->reason, "checkedAt", (json_int_t)v->checked_at,
				   "seconds", v->seconds));
	}
	return json_pack("{sI sI sI so}", "verified", (json_int_t)st->verified, "notVerified",
			 (json_int_t)st->not_verified, "lastChecked", (json_int_t)st->last_checked,
			 "workloads", arr);
}

/* A namespace's mode: the ledger's (failover, failback), else the configuration's. */
/* How long the oldest record not applied yet has waited; 0 when none waits. */
static int64_t lag_seconds(const ds_ledger_source *s)
{
	int64_t now = (int64_t)time(NULL);

	return s->unapplied && s->oldest_unapplied && now > s->oldest_unapplied
		   ? now - s->oldest_unapplied
		   : 0;
}

static const char *ns_mode(const ds_ledger_namespace *n, enum ds_mode conf)
{
	return ds_namespace_mode_word(n->recorded ? n->mode : conf);
}

static void print_text(const ds_ledger_status *st, const char *ledger, const char *mode,
		       enum ds_mode conf)
{
	char b[40];

	printf("ledger:  %s\nmode:    %s\n", ledger, mode);
	printf("\n%-20s %-20s %20s %12s %-21s %10s %8s %9s\n", "SOURCE", "CLUSTER", "EPOCH",
	       "COMMITTED", "LAST CONTACT", "UNAPPLIED", "LAG", "OBJECTS");
	for (size_t i = 0; i < st->n_sources; i++) {
		const ds_ledger_source *s = &st->sources[i];
		char lag[24];
		snprintf(lag, sizeof(lag), "%llds", (long long)lag_seconds(s));
		printf("%-20s %-20s %20llu %12llu %-21s %10llu %8s %9llu\n", s->name, s->cluster,
		       (unsigned long long)s->epoch, (unsigned long long)s->committed_seq,
		       when(s->last_contact, b, sizeof(b)), (unsigned long long)s->unapplied, lag,
		       (unsigned long long)s->objects);
	}
	if (!st->n_sources)
		printf("(no source has connected yet)\n");
	if (st->n_namespaces) {
		printf("\n%-32s %-8s %-21s %-11s %9s %6s\n", "NAMESPACE", "MODE", "SINCE",
		       "CHANGED BY", "OBJECTS", "HELD");
		for (size_t i = 0; i < st->n_namespaces; i++) {
			const ds_ledger_namespace *n = &st->namespaces[i];
			printf("%-32s %-8s %-21s %-11s %9llu %6llu\n", n->name, ns_mode(n, conf),
			       n->recorded ? when(n->since, b, sizeof(b)) : "-",
			       n->recorded ? n->changed_by : "config",
			       (unsigned long long)n->objects, (unsigned long long)n->held);
		}
	}
	printf("\nobjects:");
	for (int s = 1; s < DS_APPLY_STATE_MAX; s++)
		printf(" %s %llu", ds_apply_state_name((enum ds_apply_state)s),
		       (unsigned long long)st->states[s]);
	printf("\n");
	if (st->n_items) {
		printf("\nobjects that need a look:\n");
		for (size_t i = 0; i < st->n_items; i++) {
			const ds_ledger_item *it = &st->items[i];
			printf("  %-7s %s %s%s%s (source %s): %s\n", ds_apply_state_name(it->state),
			       it->kind, it->ns, it->ns[0] ? "/" : "", it->name, it->source,
			       it->reason);
		}
		if (st->more_items)
			printf("  ... and %llu more\n", (unsigned long long)st->more_items);
	}
	print_verification_text(st);
}

static void print_json(const ds_ledger_status *st, const char *ledger, const char *mode,
		       enum ds_mode conf)
{
	json_t *o = json_object(), *srcs = json_array(), *states = json_object(),
	       *items = json_array(), *nss = json_array();
	const char *why = attention(st);
	char *text;

	for (size_t i = 0; i < st->n_sources; i++) {
		const ds_ledger_source *s = &st->sources[i];
		json_array_append_new(
		    srcs, json_pack("{ss ss sI sI sI sI sI sI}", "name", s->name, "cluster",
				    s->cluster, "epoch", (json_int_t)s->epoch, "committedSeq",
				    (json_int_t)s->committed_seq, "lastContact",
				    (json_int_t)s->last_contact, "unapplied",
				    (json_int_t)s->unapplied, "lagSeconds",
				    (json_int_t)lag_seconds(s), "objects", (json_int_t)s->objects));
	}
	for (int s = 1; s < DS_APPLY_STATE_MAX; s++)
		json_object_set_new(states, ds_apply_state_name((enum ds_apply_state)s),
				    json_integer((json_int_t)st->states[s]));
	for (size_t i = 0; i < st->n_items; i++) {
		const ds_ledger_item *it = &st->items[i];
		json_array_append_new(
		    items, json_pack("{ss ss ss ss ss ss}", "state", ds_apply_state_name(it->state),
				     "source", it->source, "kind", it->kind, "namespace", it->ns,
				     "name", it->name, "reason", it->reason));
	}
	for (size_t i = 0; i < st->n_namespaces; i++) {
		const ds_ledger_namespace *n = &st->namespaces[i];
		json_array_append_new(
		    nss, json_pack("{ss ss so ss sI sI}", "name", n->name, "mode", ns_mode(n, conf),
				   "since", n->recorded ? json_integer(n->since) : json_null(),
				   "changedBy", n->recorded ? n->changed_by : "config", "objects",
				   (json_int_t)n->objects, "held", (json_int_t)n->held));
	}
	json_object_set_new(o, "ledger", json_string(ledger));
	json_object_set_new(o, "mode", json_string(mode));
	json_object_set_new(o, "sources", srcs);
	json_object_set_new(o, "namespaces", nss);
	json_object_set_new(o, "objects", states);
	json_object_set_new(o, "needsLook", items);
	json_object_set_new(o, "moreNeedLook", json_integer((json_int_t)st->more_items));
	json_object_set_new(o, "verification", verification_json(st));
	json_object_set_new(o, "healthy", json_boolean(!why));
	json_object_set_new(o, "attention", why ? json_string(why) : json_null());
	text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (text)
		printf("%s\n", text);
	free(text);
	json_decref(o);
}

static const char *map_ns(void *ud, const char *source_ns)
{
	return ds_target_config_map_namespace(ud, source_ns);
}

int ds_cmd_status(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"output", required_argument, NULL, 'o'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *config = NULL, *output = "text";
	ds_target_config *cfg = NULL;
	ds_ledger_status *st = NULL;
	char ledger[4096], msg[512];
	ds_err err = {0};
	int c, rc;

	optind = 1;
	while ((c = getopt_long(argc, argv, "c:o:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			config = optarg;
			break;
		case 'o':
			output = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			fprintf(stderr, "Try 'drasync-target status --help'.\n");
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "drasync-target status: unexpected argument '%s' (try --help)\n",
			argv[optind]);
		return 2;
	}
	if (!config) {
		fprintf(stderr, "drasync-target status: --config FILE is required, e.g.\n"
				"  drasync-target status --config /etc/drasync/target.yaml\n");
		return 2;
	}
	if (strcmp(output, "text") != 0 && strcmp(output, "json") != 0) {
		fprintf(stderr, "drasync-target status: -o: '%s' is not text or json\n", output);
		return 2;
	}
	if (ds_target_config_load(&cfg, config, &err) < 0) {
		fprintf(stderr, "drasync-target status: %s\n",
			ds_err_format(&err, msg, sizeof(msg)));
		return 2;
	}
	ds_target_config_ledger(cfg, ledger, sizeof(ledger));
	rc = ds_ledger_status_read_mapped(ledger, MAX_ITEMS_SHOWN, map_ns, cfg, &st, &err);
	if (rc < 0) {
		fprintf(stderr, "drasync-target status: %s\n", err.msg);
		ds_target_config_free(cfg);
		return rc == -ENOENT ? 2 : 1;
	}
	if (strcmp(output, "json") == 0)
		print_json(st, ledger, ds_mode_name(ds_target_config_mode(cfg)),
			   ds_target_config_mode(cfg));
	else
		print_text(st, ledger, ds_mode_name(ds_target_config_mode(cfg)),
			   ds_target_config_mode(cfg));
	rc = attention(st) ? 1 : 0;
	if (rc && strcmp(output, "text") == 0)
		printf("\nneeds attention: %s\n", attention(st));
	ds_ledger_status_free(st);
	ds_target_config_free(cfg);
	return rc;
}
