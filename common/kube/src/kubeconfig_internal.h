#ifndef DRASYNC_KUBECONFIG_INTERNAL_H
#define DRASYNC_KUBECONFIG_INTERNAL_H

/*
 * What the two parts of the kubeconfig module share: kubeconfig.c reads,
 * merges and resolves the configuration (files, in-cluster, the accessors);
 * kubeconfig_credentials.c turns it into credentials (the token file, the
 * exec plugin and its cached answer) and parses Kubernetes times.
 */

#include "drasync/err.h"
#include "drasync/kubeconfig.h"

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <time.h>

struct exec_plugin {
	char *command;	   /* as resolved (absolute when it had a '/') */
	char **argv;	   /* argv[0] = command, NULL-terminated */
	char **env;	   /* "NAME=value", NULL-terminated */
	char *api_version; /* client.authentication.k8s.io/v1 or v1beta1 */
	char *install_hint;
	char *exec_info; /* KUBERNETES_EXEC_INFO value */
};

struct ds_kubeconfig {
	char *server, *ns, *context, *ca_pem, *tls_server_name, *proxy_url;
	bool insecure;
	char *token, *token_file, *cert_pem, *key_pem;
	struct exec_plugin *exec;
	const char *auth_kind;

	pthread_mutex_t lock; /* guards everything below */
	char *file_token;     /* token file contents as last read */
	struct stat file_stat;
	bool file_valid;
	ds_kube_credentials cached; /* exec plugin answer */
	time_t cached_expiry;	    /* 0: no expiry given */
	bool cached_valid;
	unsigned exec_runs;
};
/* *dst = a copy of s (NULL stays NULL). @return 0, -ENOMEM */
int ds_kubeconfig_dupstr(char **dst, const char *s);

/* Read a whole file of at most max bytes, NUL-terminated. @return 0, negative errno (err set) */
int ds_kubeconfig_read_file(const char *path, size_t max, char **out, size_t *len_out, ds_err *err);

/* The string member key of o, NULL when absent, empty or not a string. */
const char *ds_kubeconfig_str_field(const json_t *o, const char *key);

#endif
