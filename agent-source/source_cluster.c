/* drasync-source's cluster: the client `run` lists and watches with. */
#include "commands.h"

#include "drasync/log.h"

#include <stdio.h>

int ds_source_connect(const char *kubeconfig, const char *context, const ds_source_config *cfg,
		      ds_kube **out)
{
	ds_kubeconfig *kc = NULL;
	char msg[512];
	ds_err err = {0};
	int rc;

	rc = ds_kubeconfig_for_agent(&kc, kubeconfig, context, ds_source_config_kubeconfig(cfg),
				     &err);
	if (rc < 0) {
		fprintf(stderr,
			"drasync-source run: %s\n"
			"  (outside a cluster, pass --kubeconfig PATH [--context NAME])\n",
			ds_err_format(&err, msg, sizeof(msg)));
		return 2;
	}
	rc = ds_kube_new(out, &kc, NULL, &err);
	ds_kubeconfig_free(kc);
	if (rc < 0) {
		fprintf(stderr, "drasync-source run: %s\n", err.msg);
		return 1;
	}
	ds_log(DS_LOG_INFO, "source_cluster", "server=%s",
	       ds_kubeconfig_server(ds_kube_get_config(*out)));
	return 0;
}
