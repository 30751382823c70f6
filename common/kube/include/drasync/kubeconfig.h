#ifndef DRASYNC_KUBECONFIG_H
#define DRASYNC_KUBECONFIG_H

/*
 * Where a Kubernetes API server is and how to authenticate to it, resolved the
 * way kubectl resolves it:
 *
 *  - an explicit file (--kubeconfig), else $KUBECONFIG (several files joined by
 *    ':', merged: the first file that defines a cluster/user/context name or
 *    current-context wins; missing files in the list are skipped), else
 *    in-cluster configuration when KUBERNETES_SERVICE_HOST is set, else
 *    ~/.kube/config;
 *  - the context named by --context, else current-context;
 *  - cluster: server, certificate-authority[-data], insecure-skip-tls-verify,
 *    tls-server-name, proxy-url;
 *  - user: client-certificate[-data], client-key[-data], token, tokenFile, and
 *    exec credential plugins (client.authentication.k8s.io/v1 and v1beta1).
 *
 * Relative file paths are taken relative to the kubeconfig file that names them.
 * Credentials are produced on demand (ds_kubeconfig_credentials): a tokenFile and
 * the in-cluster token are re-read when the file changes (token rotation); an
 * exec plugin's answer is cached until its expirationTimestamp.
 * A ds_kubeconfig may be used from several threads.
 */

#include "drasync/err.h"

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

typedef struct ds_kubeconfig ds_kubeconfig;

/* Files used by in-cluster configuration. */
#define DS_KUBE_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

/** What to authenticate with right now. Strings are owned by the struct. */
typedef struct ds_kube_credentials {
	char *token;	/* bearer token, NULL when none */
	char *cert_pem; /* client certificate (PEM), NULL when none */
	char *key_pem;	/* client key (PEM), NULL when none */
} ds_kube_credentials;

/** Release what a ds_kube_credentials holds (not the struct). NULL-safe. */
void ds_kube_credentials_dispose(ds_kube_credentials *c);

/**
 * Load from kubeconfig files.
 * @param path     --kubeconfig (may hold ':'-joined files); NULL or "" to use
 *                 $KUBECONFIG, then ~/.kube/config
 * @param context  --context; NULL or "" for current-context
 * @return 0, -ENOENT (no file / context / cluster / user), -EBADMSG (malformed,
 *         err names file and field), -EINVAL, -ENOMEM
 */
int ds_kubeconfig_load(ds_kubeconfig **out, const char *path, const char *context, ds_err *err);

/**
 * In-cluster configuration: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT,
 * CA and token from `sa_dir` (NULL: DS_KUBE_SA_DIR), namespace from sa_dir/namespace.
 * @return 0, -ENOENT (not in a cluster), -ENOMEM
 */
int ds_kubeconfig_in_cluster(ds_kubeconfig **out, const char *sa_dir, ds_err *err);

/**
 * What the agents use: `path` when given, else $KUBECONFIG, else in-cluster
 * when KUBERNETES_SERVICE_HOST is set (an agent in a pod with `kubeconfig: ""`),
 * else ~/.kube/config.
 */
int ds_kubeconfig_auto(ds_kubeconfig **out, const char *path, const char *context, ds_err *err);

/**
 * The agents' rule: --kubeconfig (flag_path), else the configuration file's
 * `kubeconfig` (file_path), else $KUBECONFIG; an empty one of each, and no
 * --context, means in-cluster (the file's `kubeconfig: ""`).
 */
int ds_kubeconfig_for_agent(ds_kubeconfig **out, const char *flag_path, const char *flag_context,
			    const char *file_path, ds_err *err);

void ds_kubeconfig_free(ds_kubeconfig *kc);

/** "https://host:port[/prefix]" without a trailing '/'. */
const char *ds_kubeconfig_server(const ds_kubeconfig *kc);
/** The context's namespace, "default" when unset. */
const char *ds_kubeconfig_namespace(const ds_kubeconfig *kc);
/** Name of the context used ("" for in-cluster). */
const char *ds_kubeconfig_context(const ds_kubeconfig *kc);
/** CA bundle in PEM (from certificate-authority or -data), NULL: system trust store. */
const char *ds_kubeconfig_ca_pem(const ds_kubeconfig *kc);
bool ds_kubeconfig_insecure(const ds_kubeconfig *kc);
/** tls-server-name, NULL when unset. */
const char *ds_kubeconfig_tls_server_name(const ds_kubeconfig *kc);
/** proxy-url, NULL when unset. */
const char *ds_kubeconfig_proxy_url(const ds_kubeconfig *kc);
/** A description of the auth form for logs: "token", "tokenFile", "exec", "client-certificate",
 * "none". */
const char *ds_kubeconfig_auth_kind(const ds_kubeconfig *kc);

/**
 * The credentials to send now: static token/certificate, tokenFile re-read
 * when it changed, or the exec plugin's answer (run again when expired or
 * after ds_kubeconfig_invalidate()).
 * @return 0 (out filled; free with ds_kube_credentials_dispose), -EACCES/-EIO/
 *         -EBADMSG from an exec plugin or token file (err says which), -ENOMEM
 */
int ds_kubeconfig_credentials(ds_kubeconfig *kc, ds_kube_credentials *out, ds_err *err);

/**
 * The server answered 401 with these credentials: forget a cached exec answer
 * and token file contents so the next call gets fresh ones.
 * @return true when fresh credentials may differ (worth one retry)
 */
bool ds_kubeconfig_invalidate(ds_kubeconfig *kc);

/** How many times the exec plugin has been run (for tests and metrics). */
unsigned ds_kubeconfig_exec_runs(const ds_kubeconfig *kc);

/**
 * Parse an RFC 3339 timestamp ("2026-11-30T08:00:00Z", fractions and offsets
 * accepted) into seconds since the epoch. @return 0 or -EINVAL
 */
int ds_kube_time_parse(const char *s, time_t *out);

#endif
