#ifndef DRASYNC_TU_RBAC_H
#define DRASYNC_TU_RBAC_H

/*
 * The agents' identities as an operator installs them (after cmocka.h): the
 * shipped RBAC of deploy/kustomize/source on the source cluster and of
 * deploy/kustomize/target on the target cluster, rendered with an overlay
 * naming the test's namespaces (tests/e2e/shipped_rbac.sh), and a kubeconfig
 * per agent holding a TokenRequest token of its ServiceAccount. The
 * cluster-scoped objects have the shipped, fixed names: a test using this
 * runs under ctest's RESOURCE_LOCK ds_deploy_namespaces.
 */

#include <stddef.h>

#define TU_RBAC_MAX_NS 8

typedef struct tu_rbac {
	char *dir;
	char source_kubeconfig[1100]; /* drasync-source's token, on the source cluster */
	char target_kubeconfig[1100]; /* drasync-target's token, on the target cluster */
	char src_admin[1100], dst_admin[1100];
	char dst_ns[TU_RBAC_MAX_NS][64]; /* the managed namespaces (each with NS-drill) */
	size_t n_dst;
} tu_rbac;

/**
 * Install the RBAC: the source may read the namespaces src_ns (NULL-terminated;
 * they exist on src_admin's cluster, the test made them), the target manages
 * dst_ns and dst_ns-drill (NULL-terminated; created here, on dst_admin's
 * cluster, as the shipped base does: the agent may not create namespaces).
 * Fails the test with the script's output.
 */
void tu_rbac_install(tu_rbac *r, const char *src_admin, const char *const src_ns[],
		     const char *dst_admin, const char *const dst_ns[]);

/* The shipped components an operator adds for an option (tu_rbac_install_with). */
#define TU_RBAC_SOURCE_CLUSTER_WIDE (1u << 0)  /* namespaceSelector: source-cluster-wide */
#define TU_RBAC_TARGET_DEVICECLASSES (1u << 1) /* replicateDeviceClasses: target-deviceclasses */

/** tu_rbac_install() with the components of `flags` (TU_RBAC_*). */
void tu_rbac_install_with(tu_rbac *r, unsigned flags, const char *src_admin,
			  const char *const src_ns[], const char *dst_admin,
			  const char *const dst_ns[]);

/** Delete what tu_rbac_install created (namespaces in the background); frees r->dir. */
void tu_rbac_remove(tu_rbac *r);

#endif
