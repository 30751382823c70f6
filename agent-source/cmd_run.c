/*
 * drasync-source run --config source.yaml: the exporter. Reads the
 * configuration, connects to the source cluster, starts the monitor and runs
 * the agent (export/source_agent.c: the schedule, the sender's thread, the
 * waits); a signal thread asks it to stop. Prints what once leaves.
 */
#include "commands.h"

#include "drasync/cli.h"
#include "drasync/export_status.h"
#include "drasync/log.h"
#include "drasync/source_agent.h"
#include "drasync/source_monitor.h"
#include "drasync/stop_signals.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct run {
	ds_source_agent_config ac;
	ds_source_config *cfg;
	ds_label_selector *selector;
	ds_keypair keys;
	ds_kube *kube;
	ds_source_monitor *monitor; /* metrics and health (metrics.listen) */
	ds_source_agent *agent;
	ds_stop_signals signals;
};

static void usage(FILE *out)
{
	fprintf(out, "Usage: drasync-source run --config FILE [OPTIONS]\n"
		     "\n"
		     "Replicates the selected namespaces of this cluster to a drasync-target:\n"
		     "lists and watches them, pushes every change once through the durable\n"
		     "outbox in stateDir, and follows the schedule of the configuration file:\n"
		     "  watch     stream changes as they happen (debounced)\n"
		     "  interval  an incremental pass every `every`\n"
		     "  cron      an incremental pass at each time of `expr`\n"
		     "  once      one full pass; wait for the target's results; exit 0 when\n"
		     "            all were applied, 1 when some failed\n"
		     "\n"
		     "Options:\n"
		     "  -c, --config FILE      the SourceConfig file (required)\n"
		     "      --kubeconfig PATH  use this kubeconfig instead of the file's\n"
		     "                         `kubeconfig` (empty there: in-cluster)\n"
		     "      --context NAME     the kubeconfig context (default: current)\n"
		     "      --log-level LEVEL  debug, info, warn or error (default info)\n"
		     "      --timeout DUR      once: stop waiting for the target after DUR\n"
		     "                         (Go duration, e.g. 10m; default: wait)\n"
		     "  -h, --help             show this help\n"
		     "\n"
		     "With metrics.listen in the file (e.g. 127.0.0.1:9451) it serves /metrics\n"
		     "(Prometheus), /healthz and /readyz.\n"
		     "\n"
		     "Exit codes: 0 done (or stopped by SIGTERM/SIGINT), 1 the target failed\n"
		     "objects or the run could not go on, 2 usage or configuration error.\n"
		     "\n"
		     "Example, outside a cluster against a kubeconfig:\n"
		     "  drasync-source run --config source.yaml --kubeconfig ~/.kube/config \\\n"
		     "      --context prod-east\n");
}

static int parse_args(int argc, char **argv, struct run *r, const char **kubeconfig,
		      const char **context)
{
	static const struct ds_cli_spec spec = {
	    .prog = "drasync-source",
	    .cmd = "run",
	    .takes = DS_CLI_CONFIG | DS_CLI_KUBECONFIG | DS_CLI_CONTEXT | DS_CLI_LOG_LEVEL |
		     DS_CLI_TIMEOUT | DS_CLI_CONFIG_REQUIRED,
	    .usage = usage,
	    .config_example = "/etc/drasync/source.yaml",
	};
	struct ds_cli_args a = {0};
	int rc = ds_cli_parse(&spec, argc, argv, &a);

	r->ac.config_path = a.config;
	r->ac.timeout_ms = a.timeout_ms;
	*kubeconfig = a.kubeconfig;
	*context = a.context;
	return rc;
}

static int load(struct run *r)
{
	const char *path = r->ac.config_path, *sel, *dir;
	char msg[512], hint[8448];
	ds_err err = {0};
	int rc;

	if (ds_source_config_load(&r->cfg, path, &err) < 0) {
		fprintf(stderr, "drasync-source run: %s\n", ds_err_format(&err, msg, sizeof(msg)));
		return 2;
	}
	dir = ds_source_config_state_dir(r->cfg);
	sel = ds_source_config_namespace_selector(r->cfg);
	if (sel && ds_label_selector_parse(&r->selector, sel, NULL, &err) < 0) {
		fprintf(stderr, "drasync-source run: %s: namespaceSelector: %s\n", path, err.msg);
		return 2;
	}
	if (ds_keys_load_secret(ds_source_config_secret_key_file(r->cfg), &r->keys, &err) < 0) {
		fprintf(stderr,
			"drasync-source run: %s\n"
			"  (make a key pair with: drasync-source keygen --out DIR, and list its "
			"public key in the target's authorized-sources file)\n",
			err.msg);
		return 2;
	}
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		fprintf(stderr, "drasync-source run: stateDir %s: %s\n", dir, strerror(errno));
		return 2;
	}
	/* A damaged outbox is named with what to do, before anything uses it. */
	rc = ds_source_agent_check_outbox(dir, hint, sizeof(hint), &err);
	if (rc < 0)
		fprintf(stderr, "drasync-source run: %s\n%s", err.msg, hint);
	return rc == 0 ? 0 : rc == -ENAMETOOLONG ? 2 : 1;
}

/* The monitor counts in any case; it serves only when metrics.listen is set. */
static int start_monitor(struct run *r)
{
	ds_source_monitor_config mc = {.state_dir = ds_source_config_state_dir(r->cfg),
				       .kube = r->kube};
	const char *listen = ds_source_config_metrics_listen(r->cfg);
	ds_err err = {0};

	if (ds_source_monitor_new(&r->monitor, &mc, &err) < 0) {
		fprintf(stderr, "drasync-source run: %s\n", err.msg);
		return 1;
	}
	if (!listen) {
		ds_log(
		    DS_LOG_INFO, "metrics_off",
		    "detail=\"no metrics.listen in the file: no /metrics, /healthz or /readyz\"");
		return 0;
	}
	if (ds_source_monitor_serve(r->monitor, listen, &err) < 0) {
		fprintf(stderr, "drasync-source run: %s: %s\n", r->ac.config_path, err.msg);
		return 1;
	}
	ds_log(DS_LOG_INFO, "metrics_listening", "listen=%s paths=\"/metrics /healthz /readyz\"",
	       listen);
	return 0;
}

static void on_pushed(void *ud, uint64_t last_seq)
{
	ds_source_monitor_on_pushed(ud, last_seq);
}

static void on_pass(void *ud, const ds_export_counts *c, int rc, double secs)
{
	ds_source_monitor_on_pass(ud, c, rc, secs);
}

static int start(struct run *r)
{
	ds_err err = {0};
	int rc;

	if ((rc = start_monitor(r)) != 0)
		return rc;
	r->ac.cfg = r->cfg;
	r->ac.kube = r->kube;
	r->ac.selector = r->selector;
	r->ac.keys = &r->keys;
	r->ac.progress = isatty(STDERR_FILENO) == 1;
	r->ac.on_link_event = ds_source_monitor_on_link_event;
	r->ac.on_pushed = on_pushed;
	r->ac.on_pass = on_pass;
	r->ac.ud = r->monitor;
	if (ds_source_agent_new(&r->agent, &r->ac, &err) < 0) {
		fprintf(stderr, "drasync-source run: %s\n", err.msg);
		return 1;
	}
	ds_source_monitor_attach(r->monitor, ds_source_agent_sender(r->agent));
	return 0;
}

/* once has finished: what the target failed, and the tally. @return the exit code */
static int print_once(const struct run *r)
{
	ds_export_status *st = NULL;
	ds_err err = {0};
	int rc;

	if (ds_export_status_read(ds_source_config_state_dir(r->cfg), 100, &st, &err) < 0) {
		fprintf(stderr, "drasync-source run: reading the results: %s\n", err.msg);
		return 1;
	}
	rc = ds_source_agent_report(stdout, st, r->ac.config_path);
	ds_export_status_free(st);
	return rc;
}

static void on_stop_signal(void *ud, int sig)
{
	(void)sig;
	ds_source_agent_stop(ud);
}

int ds_cmd_run(int argc, char **argv)
{
	struct run r;
	const char *kubeconfig = NULL, *context = NULL;
	ds_err err = {0};
	int rc;

	memset(&r, 0, sizeof(r));
	rc = parse_args(argc, argv, &r, &kubeconfig, &context);
	if (rc != DS_CLI_CONTINUE)
		return rc;
	/* Signals go to the signal thread only (every thread inherits the mask). */
	ds_stop_signals_block();
	if ((rc = load(&r)) != 0 ||
	    (rc = ds_source_connect(kubeconfig, context, r.cfg, &r.kube)) != 0 ||
	    (rc = start(&r)) != 0)
		goto out;
	if (ds_stop_signals_start(&r.signals, on_stop_signal, NULL, r.agent) < 0)
		ds_log(DS_LOG_WARN, "no_signal_thread", "detail=\"SIGTERM will not stop cleanly\"");
	rc = ds_source_agent_run(r.agent, &err);
	ds_stop_signals_end(&r.signals);
	if (rc == DS_SOURCE_AGENT_ONCE_DONE) {
		rc = print_once(&r);
	} else if (rc < 0) {
		fprintf(stderr, "drasync-source run: %s\n", err.msg);
		rc = rc == -EINVAL ? 2 : 1;
	}
	ds_log(DS_LOG_INFO, "stopped", "exit=%d", rc);
out:
	/* The HTTP server reads the sender: it stops first; the monitor itself
	 * goes after the agent, whose sender reports link events to it. */
	ds_source_monitor_stop(r.monitor);
	ds_source_agent_free(r.agent);
	ds_source_monitor_free(r.monitor);
	ds_kube_free(r.kube);
	ds_label_selector_free(r.selector);
	ds_source_config_free(r.cfg);
	return rc;
}
