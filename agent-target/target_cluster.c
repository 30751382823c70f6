/*
 * The target cluster's client for the commands that talk to it (run,
 * failover, failback, verify, drill): one way to find the credentials and one
 * way to say what to pass when there are none.
 */
#include "commands.h"

#include "drasync/kubeconfig.h"

#include <stdio.h>

int ds_target_connect(const char *cmd, const char *kubeconfig, const char *context,
		      const ds_target_config *cfg, const struct ds_kube_transport_opts *topts,
		      ds_kube **out)
{
	ds_kubeconfig *kc = NULL;
	char msg[512];
	ds_err err = {0};
	int rc;

	rc = ds_kubeconfig_for_agent(&kc, kubeconfig, context, ds_target_config_kubeconfig(cfg),
				     &err);
	if (rc < 0) {
		fprintf(stderr,
			"drasync-target %s: %s\n"
			"  (outside a cluster, pass --kubeconfig PATH [--context NAME])\n",
			cmd, ds_err_format(&err, msg, sizeof(msg)));
		return 2;
	}
	rc = ds_kube_new(out, &kc, topts, &err);
	ds_kubeconfig_free(kc);
	if (rc < 0) {
		fprintf(stderr, "drasync-target %s: %s\n", cmd, err.msg);
		return 1;
	}
	return 0;
}
