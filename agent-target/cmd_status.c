/*
 * drasync-target status --config target.yaml [-o json]: what the importer's
 * ledger in stateDir says, with `run` running or stopped: each source, its
 * epoch, committed seq, last contact and unapplied backlog; the objects per
 * apply state; the objects waiting (and for what) and failed (and why); the
 * last verification of each workload (drasync-target verify). The report is
 * status_report.h's.
 */
#include "commands.h"

#include "drasync/cli.h"
#include "drasync/ledger_status.h"
#include "drasync/status_report.h"
#include "drasync/target_config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define MAX_ITEMS_SHOWN 50

static void usage(FILE *out)
{
	fprintf(out, "Usage: drasync-target status --config FILE [-o text|json]\n"
		     "\n"
		     "Shows the importer's ledger (stateDir/ledger.db), whether `run` runs or\n"
		     "not: every source (cluster, epoch, committed seq, last contact, records\n"
		     "not applied yet, and the lag: how long the oldest of them waits), its\n"
		     "quotas (backlog and ledger bytes against their limits, and which one\n"
		     "throttles it, if any), every\n"
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

static const char *map_ns(void *ud, const char *source_ns)
{
	return ds_target_config_map_namespace(ud, source_ns);
}

/* Its own text for -o, older than cli.h's. */
static int on_option(void *ctx, int key, const char *arg, long long ms)
{
	const char **output = ctx;

	(void)ms;
	if (key != 'o')
		return 0;
	if (strcmp(arg, "text") != 0 && strcmp(arg, "json") != 0) {
		fprintf(stderr, "drasync-target status: -o: '%s' is not text or json\n", arg);
		return 2;
	}
	*output = arg;
	return 0;
}

int ds_cmd_status(int argc, char **argv)
{
	static const struct ds_cli_option own[] = {{"output", 'o', DS_CLI_STRING}, {NULL, 0, 0}};
	const char *output = "text";
	const struct ds_cli_spec spec = {.prog = "drasync-target",
					 .cmd = "status",
					 .takes = DS_CLI_CONFIG | DS_CLI_CONFIG_REQUIRED,
					 .usage = usage,
					 .config_example = "/etc/drasync/target.yaml",
					 .options = own,
					 .on_option = on_option,
					 .ctx = &output};
	struct ds_cli_args args = {0};
	ds_target_config *cfg = NULL;
	ds_ledger_status *st = NULL;
	char ledger[4096], msg[512];
	ds_err err = {0};
	int rc;

	rc = ds_cli_parse(&spec, argc, argv, &args);
	if (rc != DS_CLI_CONTINUE)
		return rc;
	if (ds_target_config_load(&cfg, args.config, &err) < 0) {
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
	ds_ledger_status_quotas(st, cfg);
	if (strcmp(output, "json") == 0)
		ds_status_report_json(stdout, st, ledger, ds_target_config_mode(cfg));
	else
		ds_status_report_text(stdout, st, ledger, ds_target_config_mode(cfg));
	rc = ds_status_report_attention(st) ? 1 : 0;
	if (rc && strcmp(output, "text") == 0)
		printf("\nneeds attention: %s\n", ds_status_report_attention(st));
	ds_ledger_status_free(st);
	ds_target_config_free(cfg);
	return rc;
}
