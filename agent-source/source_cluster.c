/* drasync-source's cluster: the client `run` lists and watches with (ds_kube_connect()). */
#include "commands.h"

#include "drasync/log.h"

#include <errno.h>
#include <stdio.h>

int ds_source_connect(const char *kubeconfig, const char *context, const ds_source_config *cfg,
		      ds_kube **out)
{
	char msg[512];
	ds_err err = {0};
	int rc =
	    ds_kube_connect(out, kubeconfig, context, ds_source_config_kubeconfig(cfg), NULL, &err);

	if (rc < 0) {
		fprintf(stderr, "drasync-source run: %s\n%s", ds_err_format(&err, msg, sizeof(msg)),
			rc == -ENOKEY ? DS_KUBE_CONNECT_HINT : "");
		return rc == -ENOKEY ? 2 : 1;
	}
	ds_log(DS_LOG_INFO, "source_cluster", "server=%s",
	       ds_kubeconfig_server(ds_kube_get_config(*out)));
	return 0;
}

int ds_source_one_namespace(const char *cmd, const struct ds_cli_args *a, ds_source_config **cfg)
{
	ds_err err = {0};
	char msg[512];

	if (a->n_namespaces != 1) {
		fprintf(stderr,
			"drasync-source %s: --namespace NS is required, e.g.\n"
			"  drasync-source %s --config %s --namespace ml-team\n",
			cmd, cmd, a->config);
		return 2;
	}
	if (ds_source_config_load(cfg, a->config, &err) < 0) {
		fprintf(stderr, "drasync-source %s: %s\n", cmd,
			ds_err_format(&err, msg, sizeof(msg)));
		return 2;
	}
	return 0;
}
