/*
 * drasync-source relocate --config source.yaml --namespace NS [--timeout D]:
 * a planned relocation of NS to the target (SPEC §5). Wiring only: the steps
 * are export/relocation_run.c's.
 */
#include "commands.h"

#include "drasync/cli.h"
#include "drasync/log.h"
#include "drasync/relocation_run.h"

#include <stdio.h>

static void usage(FILE *out)
{
	fprintf(
	    out,
	    "Usage: drasync-source relocate --config FILE --namespace NS [OPTIONS]\n"
	    "\n"
	    "Move NS to the target on purpose, with nothing lost (a planned relocation):\n"
	    "record the intent (from then on nothing of NS is exported), park NS's\n"
	    "workloads on this cluster as standby parks them (replicas 0 with the count\n"
	    "in annotation drasync.io/replicas, CronJobs suspended, DaemonSets on no\n"
	    "node), send a relocation record behind every change, and wait until the\n"
	    "target has applied them all, failed the namespace over and verified it\n"
	    "(pods Running, claims allocated). Then the bare Pods and Jobs of NS are\n"
	    "deleted here (the target runs them) and `status` says NS is relocated.\n"
	    "The target does it only for a source with relocate: true in its sources[];\n"
	    "when it refuses or fails, NS's workloads are brought back here.\n"
	    "\n"
	    "It hands the relocation to `drasync-source run` when it runs on this\n"
	    "stateDir, and sends it itself otherwise. Interrupted (a crash, a timeout),\n"
	    "the same command goes on where it stopped and never does a step twice.\n"
	    "\n"
	    "Options:\n"
	    "  -c, --config FILE       the SourceConfig file (required)\n"
	    "  -n, --namespace NS      the source namespace to relocate (required, one)\n"
	    "  -t, --timeout DUR       how long to wait for the target (e.g. 90s, 5m;\n"
	    "                          default 10m)\n"
	    "      --kubeconfig PATH   use this kubeconfig instead of the file's\n"
	    "      --context NAME      the kubeconfig context (default: current)\n"
	    "  -h, --help              show this help\n"
	    "\n"
	    "Exit codes: 0 the target's namespace is verified active; 1 refused, failed\n"
	    "or no outcome within the timeout (run it again to keep waiting); 2 usage or\n"
	    "configuration error.\n"
	    "\n"
	    "Example:\n"
	    "  drasync-source relocate --config /etc/drasync/source.yaml --namespace ml-team\n");
}

int ds_cmd_relocate(int argc, char **argv)
{
	static const struct ds_cli_spec spec = {
	    .prog = "drasync-source",
	    .cmd = "relocate",
	    .takes = DS_CLI_CONFIG | DS_CLI_KUBECONFIG | DS_CLI_CONTEXT | DS_CLI_NAMESPACE |
		     DS_CLI_TIMEOUT | DS_CLI_LOG_LEVEL | DS_CLI_CONFIG_REQUIRED,
	    .usage = usage,
	    .config_example = "/etc/drasync/source.yaml",
	    .max_namespaces = 1,
	};
	struct ds_cli_args a = {0};
	ds_source_config *cfg = NULL;
	ds_keypair keys;
	ds_kube *kube = NULL;
	ds_err err = {0};
	int rc = ds_cli_parse(&spec, argc, argv, &a);

	if (rc != DS_CLI_CONTINUE)
		return rc;
	if ((rc = ds_source_one_namespace("relocate", &a, &cfg)) != 0)
		return rc;
	if (ds_keys_load_secret(ds_source_config_secret_key_file(cfg), &keys, &err) < 0) {
		fprintf(stderr, "drasync-source relocate: %s\n", err.msg);
		ds_source_config_free(cfg);
		return 2;
	}
	rc = ds_source_connect(a.kubeconfig, a.context, cfg, &kube);
	if (rc == 0) {
		ds_relocation_run_opts o = {.cfg = cfg,
					    .config_path = a.config,
					    .kube = kube,
					    .keys = &keys,
					    .ns = a.namespaces[0],
					    .timeout_ms = a.timeout_given ? a.timeout_ms : 0,
					    .out = stdout,
					    .errout = stderr};
		rc = ds_relocation_run(&o);
	}
	ds_kube_free(kube);
	ds_source_config_free(cfg);
	return rc;
}
