/*
 * drasync-source park --config source.yaml --namespace NS: after a failover
 * to the other site, stop NS here as a planned relocation leaves it (the way
 * home, SPEC §5; docs/operations.md). Wiring only: export/relocation_run.c.
 */
#include "commands.h"

#include "drasync/cli.h"
#include "drasync/relocation_run.h"

#include <stdio.h>

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: drasync-source park --config FILE --namespace NS [OPTIONS]\n"
		"\n"
		"After a failover to the other site (drasync-target failover there), when this\n"
		"site comes back: stop NS here as a planned relocation would have left it,\n"
		"without asking the target. NS is recorded relocated (nothing of it is\n"
		"exported from now, `status` says so), its workloads are parked (replicas 0\n"
		"with the count in drasync.io/replicas, CronJobs suspended, DaemonSets on no\n"
		"node), every object gets the relocation's mark (drasync.io/relocated-to), so\n"
		"that this cluster's drasync-target may update it from the other site, and the\n"
		"bare Pods and Jobs are deleted. Run it before drasync-source run starts here\n"
		"again. Running it again finishes what is left.\n"
		"\n"
		"Options:\n"
		"  -c, --config FILE       the SourceConfig file (required)\n"
		"  -n, --namespace NS      the source namespace to park (required, one)\n"
		"      --kubeconfig PATH   use this kubeconfig instead of the file's\n"
		"      --context NAME      the kubeconfig context (default: current)\n"
		"  -h, --help              show this help\n"
		"\n"
		"Exit codes: 0 parked; 1 a step failed (run it again); 2 usage or configuration\n"
		"error.\n"
		"\n"
		"Example:\n"
		"  drasync-source park --config /etc/drasync/source.yaml --namespace ml-team\n");
}

int ds_cmd_park(int argc, char **argv)
{
	static const struct ds_cli_spec spec = {
	    .prog = "drasync-source",
	    .cmd = "park",
	    .takes = DS_CLI_CONFIG | DS_CLI_KUBECONFIG | DS_CLI_CONTEXT | DS_CLI_NAMESPACE |
		     DS_CLI_LOG_LEVEL | DS_CLI_CONFIG_REQUIRED,
	    .usage = usage,
	    .config_example = "/etc/drasync/source.yaml",
	    .max_namespaces = 1,
	};
	struct ds_cli_args a = {0};
	ds_source_config *cfg = NULL;
	ds_kube *kube = NULL;
	int rc = ds_cli_parse(&spec, argc, argv, &a);

	if (rc != DS_CLI_CONTINUE)
		return rc;
	if ((rc = ds_source_one_namespace("park", &a, &cfg)) != 0)
		return rc;
	rc = ds_source_connect(a.kubeconfig, a.context, cfg, &kube);
	if (rc == 0) {
		ds_relocation_run_opts o = {.cfg = cfg,
					    .config_path = a.config,
					    .kube = kube,
					    .ns = a.namespaces[0],
					    .out = stdout,
					    .errout = stderr};
		rc = ds_relocation_park_here(&o);
	}
	ds_kube_free(kube);
	ds_source_config_free(cfg);
	return rc;
}
