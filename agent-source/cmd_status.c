/*
 * drasync-source status --config source.yaml [-o json]: what the exporter has
 * sent and what the target made of it, read from stateDir alone (the outbox,
 * the object index and agent.json), with the agent running or stopped.
 */
#include "commands.h"

#include "drasync/agent_state.h"
#include "drasync/cli.h"
#include "drasync/export_status.h"
#include "drasync/schedule.h"
#include "drasync/source_config.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#define MAX_FAILURES_SHOWN 50

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: drasync-source status --config FILE [-o text|json]\n"
		"\n"
		"Shows the exporter's state from its stateDir, whether the agent runs or\n"
		"not: the link (connected, endpoint, epoch), records pushed and acknowledged,\n"
		"the backlog, objects per kind with the target's results, the last pass, and\n"
		"the objects the target failed with its reasons.\n"
		"\n"
		"Options:\n"
		"  -c, --config FILE   the SourceConfig file (required)\n"
		"  -o, --output FMT    text (default) or json\n"
		"  -h, --help          show this help\n"
		"\n"
		"Exit codes: 0 healthy; 1 needs attention (the agent is not running, the\n"
		"link is down, the last pass failed, or the target failed objects); 2 usage\n"
		"or configuration error, or the agent never ran with this stateDir.\n"
		"\n"
		"Example:\n"
		"  drasync-source status --config /etc/drasync/source.yaml -o json\n");
}

struct view {
	const ds_export_status *st;
	const ds_agent_state *as; /* NULL: the agent never wrote one */
	bool running;
	const char *attention; /* why it needs attention, NULL: healthy */
};

/* Why the source needs an operator's attention, or NULL when it does not. */
static const char *attention(const struct view *v)
{
	uint64_t failed = 0;

	for (size_t i = 0; i < v->st->n_kinds; i++)
		failed += v->st->kinds[i].failed;
	if (failed > 0)
		return "the target failed objects";
	if (v->st->last_pass_rc != 0)
		return "the last pass failed";
	if (!v->as)
		return "the agent never started here";
	/* A `once` run is meant to have ended; the others are meant to run, linked. */
	if (strcmp(v->as->schedule, "once") == 0)
		return v->st->backlog > 0 && !v->running ? "records the target has not acknowledged"
							 : NULL;
	if (!v->running)
		return "the agent is not running";
	if (!v->as->connected)
		return "the link to the target is down";
	return NULL;
}

static const char *when(int64_t ms, char *buf, size_t size)
{
	if (ms <= 0)
		return "never";
	return ds_schedule_format_time(ms, buf, size);
}

static void print_text(const struct view *v)
{
	const ds_export_status *st = v->st;
	char b1[40], b2[40];

	printf("agent:        %s", v->running ? "running" : "not running");
	if (v->as)
		printf(" (pid %lld, schedule %s, started %s)", (long long)v->as->pid,
		       v->as->schedule, when(v->as->started_ms, b1, sizeof(b1)));
	printf("\n");
	if (v->as) {
		printf("target:       %s\n", v->as->endpoint);
		printf("link:         %s since %s (last event %s%s%s)\n",
		       v->running && v->as->connected ? "connected" : "not connected",
		       when(v->as->since_ms, b1, sizeof(b1)), v->as->last_event,
		       v->as->last_detail[0] ? ": " : "", v->as->last_detail);
		if (v->as->next_pass_ms > 0 && v->running)
			printf("next pass:    %s\n", when(v->as->next_pass_ms, b1, sizeof(b1)));
	}
	printf("epoch:        %llu\n", (unsigned long long)st->epoch);
	printf("pushed seq:   %llu\n", (unsigned long long)st->outbox.last_seq);
	printf("acked seq:    %llu\n", (unsigned long long)st->outbox.acked_seq);
	printf("backlog:      %llu records\n", (unsigned long long)st->backlog);
	printf("snapshot:     %s\n", st->snapshot_done ? "done" : "not yet completed");
	printf("last pass:    started %s, finished %s",
	       when(st->last_pass_started_ms, b1, sizeof(b1)),
	       when(st->last_pass_finished_ms, b2, sizeof(b2)));
	if (st->last_pass_finished_ms > 0)
		printf(", listed %llu pushed %llu unchanged %llu skipped %llu tombstoned %llu%s",
		       (unsigned long long)st->last_pass.listed,
		       (unsigned long long)st->last_pass.pushed,
		       (unsigned long long)st->last_pass.unchanged,
		       (unsigned long long)st->last_pass.skipped,
		       (unsigned long long)st->last_pass.tombstoned,
		       st->last_pass_rc ? " (with errors)" : "");
	/* COMMITTED: in the target's ledger, its apply result not back yet;
	 * AWAITING: not acknowledged yet. */
	printf("\n\n%-24s %8s %9s %8s %8s %8s %8s %8s %8s\n", "KIND", "OBJECTS", "COMMITTED",
	       "APPLIED", "WAITING", "HELD", "FAILED", "SKIPPED", "AWAITING");
	for (size_t i = 0; i < st->n_kinds; i++) {
		const ds_index_kind_count *k = &st->kinds[i];

		printf("%-24s %8llu %9llu %8llu %8llu %8llu %8llu %8llu %8llu\n", k->kind,
		       (unsigned long long)k->objects, (unsigned long long)k->ok,
		       (unsigned long long)k->applied, (unsigned long long)k->waiting,
		       (unsigned long long)k->held, (unsigned long long)k->failed,
		       (unsigned long long)k->skipped, (unsigned long long)k->awaiting);
	}
	if (st->n_failures) {
		printf("\nobjects the target did not apply:\n");
		for (size_t i = 0; i < st->n_failures; i++) {
			const ds_export_failure *f = &st->failures[i];

			printf("  %-7s %s %s%s%s (seq %llu): %s\n",
			       ds_result_status_name((enum ds_result_status)f->status), f->kind,
			       f->ns, f->ns[0] ? "/" : "", f->name, (unsigned long long)f->seq,
			       f->message);
		}
		if (st->more_failures)
			printf("  ... and %zu more\n", st->more_failures);
	}
}

static void print_json(const struct view *v)
{
	const ds_export_status *st = v->st;
	json_t *o = json_object(), *kinds = json_array(), *fails = json_array(), *link;

	for (size_t i = 0; i < st->n_kinds; i++) {
		const ds_index_kind_count *k = &st->kinds[i];

		json_array_append_new(
		    kinds,
		    json_pack("{ss sI sI sI sI sI sI sI sI}", "kind", k->kind, "objects",
			      (json_int_t)k->objects, "ok", (json_int_t)k->ok, "applied",
			      (json_int_t)k->applied, "waiting", (json_int_t)k->waiting, "held",
			      (json_int_t)k->held, "failed", (json_int_t)k->failed, "skipped",
			      (json_int_t)k->skipped, "awaiting", (json_int_t)k->awaiting));
	}
	for (size_t i = 0; i < st->n_failures; i++) {
		const ds_export_failure *f = &st->failures[i];

		json_array_append_new(
		    fails, json_pack("{ss ss ss ss ss sI ss}", "key", f->key, "status",
				     ds_result_status_name((enum ds_result_status)f->status),
				     "kind", f->kind, "namespace", f->ns, "name", f->name, "seq",
				     (json_int_t)f->seq, "message", f->message));
	}
	link = json_pack("{sb sb}", "running", v->running, "connected",
			 v->running && v->as && v->as->connected);
	if (v->as) {
		json_object_set_new(link, "pid", json_integer((json_int_t)v->as->pid));
		json_object_set_new(link, "endpoint", json_string(v->as->endpoint));
		json_object_set_new(link, "schedule", json_string(v->as->schedule));
		json_object_set_new(link, "sinceMs", json_integer((json_int_t)v->as->since_ms));
		json_object_set_new(link, "lastEvent", json_string(v->as->last_event));
		json_object_set_new(link, "lastDetail", json_string(v->as->last_detail));
		json_object_set_new(link, "nextPassMs",
				    json_integer((json_int_t)v->as->next_pass_ms));
	}
	json_object_set_new(o, "agent", link);
	json_object_set_new(o, "epoch", json_integer((json_int_t)st->epoch));
	json_object_set_new(o, "pushedSeq", json_integer((json_int_t)st->outbox.last_seq));
	json_object_set_new(o, "ackedSeq", json_integer((json_int_t)st->outbox.acked_seq));
	json_object_set_new(o, "backlog", json_integer((json_int_t)st->backlog));
	json_object_set_new(o, "snapshotDone", json_boolean(st->snapshot_done));
	json_object_set_new(o, "lastPass",
			    json_pack("{sI sI si sI sI sI sI sI}", "startedMs",
				      (json_int_t)st->last_pass_started_ms, "finishedMs",
				      (json_int_t)st->last_pass_finished_ms, "rc", st->last_pass_rc,
				      "listed", (json_int_t)st->last_pass.listed, "pushed",
				      (json_int_t)st->last_pass.pushed, "unchanged",
				      (json_int_t)st->last_pass.unchanged, "skipped",
				      (json_int_t)st->last_pass.skipped, "tombstoned",
				      (json_int_t)st->last_pass.tombstoned));
	json_object_set_new(o, "kinds", kinds);
	json_object_set_new(o, "failures", fails);
	json_object_set_new(o, "moreFailures", json_integer((json_int_t)st->more_failures));
	json_object_set_new(o, "needsAttention", json_boolean(v->attention != NULL));
	if (v->attention)
		json_object_set_new(o, "attention", json_string(v->attention));
	/* A failed write shows in the final fflush(). */
	json_dumpf(o, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	fputc('\n', stdout);
	json_decref(o);
}

int ds_cmd_status(int argc, char **argv)
{
	static const struct ds_cli_spec spec = {
	    .prog = "drasync-source",
	    .cmd = "status",
	    .takes = DS_CLI_CONFIG | DS_CLI_OUTPUT | DS_CLI_CONFIG_REQUIRED,
	    .usage = usage,
	    .config_example = "/etc/drasync/source.yaml",
	};
	struct ds_cli_args a = {0};
	const char *config, *output;
	ds_source_config *cfg = NULL;
	ds_export_status *st = NULL;
	ds_agent_state as;
	struct view v = {0};
	char msg[512];
	ds_err err = {0};
	int rc;

	rc = ds_cli_parse(&spec, argc, argv, &a);
	if (rc != DS_CLI_CONTINUE)
		return rc;
	config = a.config;
	output = a.output;
	rc = ds_source_config_load(&cfg, config, &err);
	if (rc < 0) {
		fprintf(stderr, "drasync-source status: %s\n",
			ds_err_format(&err, msg, sizeof(msg)));
		return 2;
	}
	rc = ds_export_status_read(ds_source_config_state_dir(cfg), MAX_FAILURES_SHOWN, &st, &err);
	if (rc == -ENOENT) {
		fprintf(stderr,
			"drasync-source status: nothing in stateDir %s yet: the agent has not run "
			"with this configuration (drasync-source run --config %s)\n",
			ds_source_config_state_dir(cfg), config);
		ds_source_config_free(cfg);
		return 2;
	}
	if (rc < 0) {
		fprintf(stderr, "drasync-source status: %s\n", err.msg);
		ds_source_config_free(cfg);
		return 1;
	}
	v.st = st;
	ds_err_clear(&err);
	if (ds_agent_state_read(ds_source_config_state_dir(cfg), &as, &v.running, &err) == 0)
		v.as = &as;
	v.attention = attention(&v);
	if (strcmp(output, "json") == 0)
		print_json(&v);
	else
		print_text(&v);
	rc = v.attention ? 1 : 0;
	if (rc && strcmp(output, "text") == 0)
		printf("\nneeds attention: %s\n", v.attention);
	ds_export_status_free(st);
	ds_source_config_free(cfg);
	if (fflush(stdout) != 0) {
		fprintf(stderr, "drasync-source status: writing to stdout: %s\n", strerror(errno));
		return 1;
	}
	return rc;
}
