/*
 * The target cluster's client for the commands that talk to it (run,
 * failover, failback, verify, drill), by the agents' one rule (ds_kube_connect()).
 */
#include "commands.h"

#include <errno.h>
#include <stdio.h>

int ds_target_connect(const char *cmd, const char *kubeconfig, const char *context,
		      const ds_target_config *cfg, const struct ds_kube_transport_opts *topts,
		      ds_kube **out)
{
	char msg[512];
	ds_err err = {0};
	int rc = ds_kube_connect(out, kubeconfig, context, ds_target_config_kubeconfig(cfg), topts,
				 &err);

	if (rc < 0)
		fprintf(stderr, "drasync-target %s: %s\n%s", cmd,
			ds_err_format(&err, msg, sizeof(msg)),
			rc == -ENOKEY ? DS_KUBE_CONNECT_HINT : "");
	return rc == 0 ? 0 : rc == -ENOKEY ? 2 : 1;
}
