/*
 * drasync-source status --config source.yaml [-o json]: what the exporter has
 * sent and what the target made of it, read from stateDir alone (the outbox,
 * the object index and agent.json), with the agent running or stopped.
 */
#include "commands.h"

#include "drasync/cli.h"
#include "drasync/schedule.h"
#include "drasync/source_status.h"
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
		"the objects the target failed or refused with its reasons.\n"
		"\n"
		"Options:\n"
		"  -c, --config FILE   the SourceConfig file (required)\n"
		"  -o, --output FMT    text (default) or json\n"
		"  -h, --help          show this help\n"
		"\n"
		"Exit codes: 0 healthy; 1 needs attention (the agent is not running, the\n"
		"link is down, the last pass failed, or the target failed or refused\n"
		"objects); 2 usage\n"
		"or configuration error, or the agent never ran with this stateDir.\n"
		"\n"
		"Example:\n"
		"  drasync-source status --config /etc/drasync/source.yaml -o json\n");
}

static const char *when(int64_t ms, char *buf, size_t size)
{
	if (ms <= 0)
		return "never";
	return ds_schedule_format_time(ms, buf, size);
}

/* The link's bytes against the JSON they carried, in all and this session. */
static void print_wire(const ds_link_figures *w)
{
	printf("wire:         %llu bytes sent, %llu received for %llu of JSON (%.2f of it); "
	       "this session %llu/%llu for %llu; batches %s\n",
	       (unsigned long long)w->sent, (unsigned long long)w->received,
	       (unsigned long long)w->json, ds_link_figures_ratio(w->sent, w->received, w->json),
	       (unsigned long long)w->session_sent, (unsigned long long)w->session_received,
	       (unsigned long long)w->session_json, w->zbatch ? "zbatch" : "per-record zstd");
}

static void print_text(const ds_source_status *v)
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
		if (v->as->bandwidth > 0)
			printf("bandwidth:    capped at %llu bytes/s (target.bandwidth)\n",
			       (unsigned long long)v->as->bandwidth);
		if (v->as->proxy[0])
			printf("proxy:        SOCKS5 %s (target.proxy)\n", v->as->proxy);
		print_wire(&v->as->wire);
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
	printf("\n\n%-24s %8s %9s %8s %8s %8s %8s %8s %8s %8s\n", "KIND", "OBJECTS", "COMMITTED",
	       "APPLIED", "WAITING", "HELD", "FAILED", "REFUSED", "SKIPPED", "AWAITING");
	for (size_t i = 0; i < st->n_kinds; i++) {
		const ds_index_kind_count *k = &st->kinds[i];

		printf("%-24s %8llu %9llu %8llu %8llu %8llu %8llu %8llu %8llu %8llu\n", k->kind,
		       (unsigned long long)k->objects, (unsigned long long)k->ok,
		       (unsigned long long)k->applied, (unsigned long long)k->waiting,
		       (unsigned long long)k->held, (unsigned long long)k->failed,
		       (unsigned long long)k->refused, (unsigned long long)k->skipped,
		       (unsigned long long)k->awaiting);
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
	ds_source_status_print_relocations(stdout, v);
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
	static ds_source_relocation relocations[DS_SOURCE_STATUS_RELOCATIONS_MAX];
	ds_source_status v = {0};
	const char *why;
	json_t *doc;
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
	rc = ds_source_status_read_relocations(ds_source_config_state_dir(cfg), relocations,
					       DS_SOURCE_STATUS_RELOCATIONS_MAX, &err);
	v.relocations = relocations;
	v.n_relocations = rc > 0 ? (size_t)rc : 0;
	ds_err_clear(&err);
	if (ds_agent_state_read(ds_source_config_state_dir(cfg), &as, &v.running, &err) == 0)
		v.as = &as;
	why = ds_source_status_attention(&v);
	if (strcmp(output, "json") == 0) {
		/* A failed write shows in the final fflush(). */
		doc = ds_source_status_json(&v);
		json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		fputc('\n', stdout);
		json_decref(doc);
	} else {
		print_text(&v);
		if (why)
			printf("\nneeds attention: %s\n", why);
	}
	rc = why ? 1 : 0;
	ds_export_status_free(st);
	ds_source_config_free(cfg);
	if (fflush(stdout) != 0) {
		fprintf(stderr, "drasync-source status: writing to stdout: %s\n", strerror(errno));
		return 1;
	}
	return rc;
}
