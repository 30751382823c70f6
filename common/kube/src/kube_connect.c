/* The agents' one way to find the credentials of their cluster and say what to pass without. */
#include "drasync/kube_client.h"

#include <errno.h>
#include <stdio.h>

int ds_kube_connect(ds_kube **out, const char *flag_path, const char *flag_context,
		    const char *file_path, const struct ds_kube_transport_opts *opts, ds_err *err)
{
	ds_kubeconfig *kc = NULL;
	char msg[sizeof(err->msg)];
	ds_err why = {0};
	int rc;

	rc = ds_kubeconfig_for_agent(&kc, flag_path, flag_context, file_path, &why);
	if (rc < 0) {
		ds_err_set(err,
			   "%s\n  (outside a cluster, pass --kubeconfig PATH [--context NAME])",
			   ds_err_format(&why, msg, sizeof(msg)));
		return -ENOKEY;
	}
	rc = ds_kube_new(out, &kc, opts, err);
	ds_kubeconfig_free(kc);
	return rc < 0 ? ds_err_fallback(err, rc) : 0;
}
