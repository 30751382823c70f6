/*
 * drasync-target run --config target.yaml: the importer (target_agent.h runs
 * it: receiver, applier, verifier, SIGHUP reload). This command reads its
 * arguments and the file, checks what `run` needs before binding, connects to
 * the cluster, and wires the monitor (metrics.listen) to the agent.
 */
#include "commands.h"

#include "drasync/cli.h"
#include "drasync/duration.h"
#include "drasync/keys.h"
#include "drasync/kube_client.h"
#include "drasync/log.h"
#include "drasync/monitor_hooks.h"
#include "drasync/stop_signals.h"
#include "drasync/target_agent.h"
#include "drasync/target_config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct run {
	const char *config, *kubeconfig, *context;
	long long verify_timeout_ms; /* -1: the verifier's default; 0: no verifier */
	bool new_ledger;
	ds_target_config *cfg;
	ds_keypair keys;
	ds_kube *kube;
	char ledger[4096];
	ds_target_monitor *monitor; /* metrics, health, the status page (metrics.listen) */
	ds_target_agent *agent;
};

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: drasync-target run --config FILE [OPTIONS]\n"
		"\n"
		"Accepts the sources of keys.authorizedSources on `listen`, commits every\n"
		"record in the ledger (stateDir) before acknowledging it, and applies the\n"
		"objects from there: DRA mapping, conversion, standby, SPEC order, SSA.\n"
		"\n"
		"Options:\n"
		"  -c, --config FILE      the TargetConfig file (required)\n"
		"      --kubeconfig PATH  use this kubeconfig instead of the file's\n"
		"                         `kubeconfig` (empty there: in-cluster)\n"
		"      --context NAME     the kubeconfig context (default: current)\n"
		"      --log-level LEVEL  debug, info, warn or error (default info)\n"
		"      --verify-timeout DUR  how long a workload applied may take to verify\n"
		"                         (Go duration; default 5m; 0: do not verify)\n"
		"      --new-ledger       accept a new ledger where the cluster had one (modes\n"
		"                         read back from the Namespaces' drasync.io/mode)\n"
		"  -h, --help             show this help\n"
		"\n"
		"Signals: SIGTERM/SIGINT finish the pass in flight and exit 0; SIGHUP reads the\n"
		"file again (a bad one is refused with file:line:col, the rules in force kept).\n"
		"\n"
		"Each workload applied is verified for up to 5 minutes (event=verified or\n"
		"not_verified, kept for status); metrics.listen (e.g. 127.0.0.1:9450) serves\n"
		"/metrics, /healthz, /readyz and a status page at /.\n"
		"\n"
		"A new ledger where the cluster's ConfigMap drasync-ledger names one is refused\n"
		"(exit 1) unless --new-ledger; a new ledger waits for the API server first.\n"
		"Exit: 0 stopped (SIGTERM/SIGINT), 1 the run could not go on, 2 usage or\n"
		"configuration error. Example, against a kubeconfig:\n"
		"  drasync-target run --config target.yaml --kubeconfig ~/.kube/config\n");
}

static int on_option(void *ctx, int key, const char *arg, long long ms)
{
	struct run *r = ctx;
	ds_err err = {0};
	int64_t ns;

	(void)ms;
	r->new_ledger = r->new_ledger || key == 'n' + DS_CLI_LONG_ONLY;
	if (key != 'v' + DS_CLI_LONG_ONLY)
		return 0;
	/* Its own text: 0 turns the verifier off, which --timeout would refuse. */
	if (ds_duration_parse(arg, &ns, NULL, &err) < 0 || ns < 0) {
		fprintf(stderr,
			"drasync-target run: --verify-timeout: '%s': %s (a Go duration, e.g. 90s, "
			"5m; 0: do not verify)\n",
			arg, err.msg[0] ? err.msg : "negative");
		return 2;
	}
	r->verify_timeout_ms = ns / 1000000;
	return 0;
}

static int parse_args(int argc, char **argv, struct run *r)
{
	static const struct ds_cli_option own[] = {
	    {"verify-timeout", 'v' + DS_CLI_LONG_ONLY, DS_CLI_STRING},
	    {"new-ledger", 'n' + DS_CLI_LONG_ONLY, DS_CLI_FLAG},
	    {NULL, 0, 0}};
	const struct ds_cli_spec spec = {.prog = "drasync-target",
					 .cmd = "run",
					 .takes = DS_CLI_CONFIG | DS_CLI_KUBECONFIG |
						  DS_CLI_CONTEXT | DS_CLI_LOG_LEVEL |
						  DS_CLI_CONFIG_REQUIRED,
					 .usage = usage,
					 .config_example = "/etc/drasync/target.yaml",
					 .options = own,
					 .on_option = on_option,
					 .ctx = r};
	struct ds_cli_args args = {0};
	int rc = ds_cli_parse(&spec, argc, argv, &args);

	r->config = args.config;
	r->kubeconfig = args.kubeconfig;
	r->context = args.context;
	return rc;
}

/* Everything the file must say for `run` (plan needs less), checked before binding. */
static int load(struct run *r)
{
	const char *listen, *key, *auth, *state;
	char msg[512];
	ds_err err = {0};
	int rc;

	rc = ds_target_config_load(&r->cfg, r->config, &err);
	if (rc < 0) {
		fprintf(stderr, "drasync-target run: %s\n", ds_err_format(&err, msg, sizeof(msg)));
		return 2;
	}
	listen = ds_target_config_listen(r->cfg);
	key = ds_target_config_secret_key_file(r->cfg);
	auth = ds_target_config_authorized_sources(r->cfg);
	state = ds_target_config_state_dir(r->cfg);
	if (!listen || !key || !auth) {
		fprintf(stderr,
			"drasync-target run: %s: `%s` is required to run (e.g. listen: "
			"tcp://0.0.0.0:7450; keys: {secretKeyFile: ..., authorizedSources: ...})\n",
			r->config,
			!listen ? "listen"
			: !key	? "keys.secretKeyFile"
				: "keys.authorizedSources");
		return 2;
	}
	rc = ds_keys_load_secret(key, &r->keys, &err);
	if (rc < 0) {
		fprintf(stderr,
			"drasync-target run: %s\n"
			"  (make the target's key pair with: drasync-target keygen --out DIR)\n",
			err.msg);
		return 2;
	}
	if (access(auth, R_OK) != 0) {
		fprintf(stderr,
			"drasync-target run: keys.authorizedSources %s: %s\n"
			"  (one line per source: \"NAME PUBLIC-KEY\", the key from drasync-source "
			"keygen)\n",
			auth, strerror(errno));
		return 2;
	}
	rc = ds_target_agent_check_grants(r->cfg, &err);
	if (rc < 0) {
		fprintf(stderr, "drasync-target run: %s\n", ds_err_format(&err, msg, sizeof(msg)));
		return 2;
	}
	if (mkdir(state, 0700) < 0 && errno != EEXIST) {
		fprintf(stderr, "drasync-target run: stateDir %s: %s\n", state, strerror(errno));
		return 2;
	}
	ds_target_config_ledger(r->cfg, r->ledger, sizeof(r->ledger));
	return ds_target_check_ledger("run", r->ledger);
}

static int connect_cluster(struct run *r)
{
	struct ds_kube_transport_opts topts;
	int rc;

	ds_target_agent_transport_opts(&topts, ds_target_config_api_max_in_flight(r->cfg));
	rc = ds_target_connect("run", r->kubeconfig, r->context, r->cfg, &topts, &r->kube);
	if (rc)
		return rc;
	ds_log(DS_LOG_INFO, "target_cluster", "server=%s",
	       ds_kubeconfig_server(ds_kube_get_config(r->kube)));
	return 0;
}

/* The monitor first (it counts the agent's events; /healthz while a new ledger
 * waits for its identity check), then the agent, then the link. */
static int start(struct run *r)
{
	ds_target_monitor_config mc = {
	    .ledger_path = r->ledger, .config_path = r->config, .kube = r->kube, .cfg = r->cfg};
	ds_target_agent_config ac = {.config_path = r->config,
				     .cfg = r->cfg,
				     .keys = &r->keys,
				     .kube = r->kube,
				     .ledger_path = r->ledger,
				     .verify_timeout_ms = r->verify_timeout_ms};
	ds_err err = {0};
	int rc;

	if (ds_target_monitor_start(&r->monitor, &mc, ds_target_config_metrics_listen(r->cfg),
				    &err) < 0) {
		fprintf(stderr, "drasync-target run: %s\n", err.msg);
		return 1;
	}
	ds_target_monitor_hooks(r->monitor, &ac.hooks);
	rc = ds_target_run_identity(r->kube, r->cfg, r->ledger, r->new_ledger, &ac.check_identity);
	if (rc)
		return rc;
	if (ds_target_agent_new(&r->agent, &ac, &err) < 0) {
		fprintf(stderr, "drasync-target run: %s\n", err.msg);
		return 1;
	}
	if (ds_target_agent_listen(r->agent, &err) < 0) {
		fprintf(stderr, "drasync-target run: %s\n", err.msg);
		return 2;
	}
	return 0;
}

int ds_cmd_run(int argc, char **argv)
{
	struct run r;
	ds_err err = {0};
	int rc;

	memset(&r, 0, sizeof(r));
	r.verify_timeout_ms = -1;
	rc = parse_args(argc, argv, &r);
	if (rc >= 0)
		return rc;
	ds_stop_signals_block();
	if ((rc = load(&r)) != 0 || (rc = connect_cluster(&r)) != 0 || (rc = start(&r)) != 0)
		goto out;
	rc = ds_target_agent_run(r.agent, &err) < 0 ? 1 : 0;
out:
	rc = rc < 0 ? 0 : rc; /* a signal ended the wait for the API server */
	ds_target_monitor_stop_run(r.monitor, r.agent, rc);
	ds_kube_free(r.kube);
	ds_target_config_free(r.cfg);
	return rc;
}
