#ifndef DRASYNC_TU_E2E_H
#define DRASYNC_TU_E2E_H

/*
 * The pair as users run it, for tests/e2e (after cmocka.h): the shipped RBAC
 * installed for the test's namespaces (tu_rbac.h), drasync-target run on the
 * target cluster and drasync-source run on the source cluster as processes
 * (tu_site.h), each on its own ServiceAccount token; and what a user looks
 * at afterwards: objects on the target, pods, claims, the agents' commands.
 */

#include "drasync/kube_client.h"
#include "testutil.h"
#include "tu_rbac.h"
#include "tu_site.h"

#include <jansson.h>
#include <stdbool.h>

typedef struct tu_pair {
	ds_kube *src, *dst; /* admin clients: what the user sees on each cluster */
	const char *src_admin, *dst_admin;
	char *src_ns;	 /* the source namespace, made here */
	char dst_ns[64]; /* where it is mapped (managed by the target's RBAC) */
	tu_rbac rbac;
	tu_site site;
} tu_pair;

/**
 * A source namespace PREFIX-<random> on the cluster of env src_env
 * ("DS_KUBECONFIG_V1"), mapped to PREFIX-<random>-dr on that of dst_env;
 * the shipped RBAC for both; the site's config files written (target:
 * namespaceMappings plus target_extra; source: namespaces plus source_extra).
 * Nothing runs yet.
 */
void tu_pair_init(tu_pair *p, const char *prefix, const char *src_env, const char *dst_env,
		  const char *source_name, const char *target_extra, const char *source_extra);

/**
 * The reverse of fwd (reverse replication, SPEC §5): the source is fwd's
 * target cluster and namespace (fwd->dst_ns), the target fwd's source cluster
 * and namespace (fwd->src_ns, which exists: the shipped target RBAC is
 * applied to it). Its own site (keys, port, files, source_name in its
 * authorized sources), the shipped RBAC for both ends, the config files
 * written as tu_pair_init() writes them. Nothing runs yet. Dispose it before
 * fwd.
 */
void tu_pair_init_reverse(tu_pair *p, const tu_pair *fwd, const char *prefix,
			  const char *source_name, const char *target_extra,
			  const char *source_extra);

/** tu_pair_init() with the shipped RBAC's components of rbac_flags (TU_RBAC_*, tu_rbac.h). */
void tu_pair_init_with(tu_pair *p, unsigned rbac_flags, const char *prefix, const char *src_env,
		       const char *dst_env, const char *source_name, const char *target_extra,
		       const char *source_extra);

/** Stop what runs, remove the RBAC and both namespaces (also after a failure midway: a teardown).
 */
void tu_pair_dispose(tu_pair *p);

/**
 * The opt-in Role of deploy/kustomize/source-relocate (relocate and park) in
 * p->src_ns for drasync-source's ServiceAccount.
 */
void tu_pair_grant_relocate(tu_pair *p);

/** Start drasync-target run on the target's token. */
void tu_pair_target_start(tu_pair *p);
/** Start drasync-source run on the source's token (extra arguments may be NULL). */
void tu_pair_source_start(tu_pair *p, const char *const *args);

/**
 * A drasync-target command (args after the command name; --config added)
 * on the target's token: its result (caller disposes).
 */
void tu_pair_target_cmd(tu_pair *p, struct tu_run *r, const char *const args[]);

/** drasync-target status -o json (parsed; caller decrefs). */
json_t *tu_pair_status(tu_pair *p);

/** drasync-source status -o json of the site's source (parsed; caller decrefs). */
json_t *tu_e2e_source_status(const tu_site *s);

/**
 * The value of one series ("name{labels}" as the agent prints it) on the
 * metrics port 127.0.0.1:port; -1 when absent.
 */
double tu_e2e_metric(int port, const char *series);

/** The object, NULL when absent or being deleted (caller decrefs). */
json_t *tu_e2e_get(ds_kube *k, const char *api, const char *kind, const char *ns, const char *name);

/** Wait until the object exists, fails the test after timeout_ms with `log` (may be NULL). */
json_t *tu_e2e_wait_get(ds_kube *k, const char *api, const char *kind, const char *ns,
			const char *name, int timeout_ms, const tu_site *log);

/** Wait until the object is gone (or being deleted). */
void tu_e2e_wait_gone(ds_kube *k, const char *api, const char *kind, const char *ns,
		      const char *name, int timeout_ms, const tu_site *log);

/** The items of a list of kind in ns, filtered by label selector (may be NULL); caller decrefs. */
json_t *tu_e2e_list(ds_kube *k, const char *api, const char *kind, const char *ns,
		    const char *selector);

/**
 * Wait until `n` pods matching selector in ns are Running; returns them
 * (caller decrefs). Fails with their phases after timeout_ms.
 */
json_t *tu_e2e_wait_running(ds_kube *k, const char *ns, const char *selector, size_t n,
			    int timeout_ms, const tu_site *log);

/**
 * The claims of a running pod allocated on this cluster's devices: for each
 * entry of status.resourceClaimStatuses (generated from a template) and each
 * spec.resourceClaims[].resourceClaimName, the ResourceClaim (resource API
 * `api`) is allocated by `driver` on a pool of the pod's node and reserved
 * for the pod. Fails the test otherwise. Returns how many claims it checked.
 */
size_t tu_e2e_assert_pod_claims(ds_kube *k, const char *api, const json_t *pod, const char *driver);

/** Whether text holds needle; fails the test with text when `want` differs. */
void tu_e2e_assert_log(const char *what, const char *text, const char *needle, bool want);

#endif
