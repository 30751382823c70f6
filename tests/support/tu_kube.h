#ifndef DRASYNC_TU_KUBE_H
#define DRASYNC_TU_KUBE_H

/*
 * Helpers for tests against the real clusters (after cmocka.h): a client
 * from a kubeconfig, objects from YAML, create/patch/delete that fail the
 * test with the API's own message.
 */

#include "drasync/kube_client.h"

#include <jansson.h>
#include <stdbool.h>

/** Run a ds_kube_* call filling `ke`; a negative result fails the test with the API's message. */
#define TU_KUBE_CHECK(call, ke)                                                                    \
	do {                                                                                       \
		int rc_ = (call);                                                                  \
		if (rc_ < 0) {                                                                     \
			char b_[800];                                                              \
			fail_msg("%s: %d %s", #call, rc_,                                          \
				 ds_kube_error_format(&(ke), b_, sizeof(b_)));                     \
		}                                                                                  \
	} while (0)

/** A client for the cluster of `kubeconfig`, without rate limit. */
ds_kube *tu_kube_connect(const char *kubeconfig);

/** A client of a server that refuses connections (127.0.0.1:1), without retries; its
 * kubeconfig is written in dir. */
ds_kube *tu_kube_refusing(const char *dir);

/** One object from a printf-formatted YAML document. Caller decrefs. */
json_t *tu_kube_doc(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/** Discovery of (apiVersion, kind). */
struct ds_kube_resource tu_kube_resource(ds_kube *k, const char *api, const char *kind);

/** Create obj where its apiVersion, kind and namespace say; takes the reference. */
void tu_kube_create(ds_kube *k, json_t *obj);

/** Merge-patch (JSON text) an object, or its subresource `sub` (NULL: none). */
void tu_kube_merge(ds_kube *k, const char *api, const char *kind, const char *ns, const char *name,
		   const char *sub, const char *patch_json);

/** Delete an object (foreground by default). */
void tu_kube_delete(ds_kube *k, const char *api, const char *kind, const char *ns,
		    const char *name);

/** A new namespace "PREFIX-<random>" with labels (a YAML flow map, "" for none). Caller frees. */
char *tu_kube_new_namespace(ds_kube *k, const char *prefix, const char *labels);

/** Delete a namespace in the background, and free `name`. */
void tu_kube_drop_namespace(ds_kube *k, char *name);

/**
 * Wait until no ResourceClaim of the cluster (resource.k8s.io/v1) holds an
 * allocation, so that a test needing most of the test cluster's devices does
 * not race the pods of the tests before it (their namespaces are deleted in
 * the background). Fails the test after timeout_ms, naming the claims still
 * allocated.
 */
void tu_kube_wait_devices_free(ds_kube *k, long timeout_ms);

/** A fresh token (600 s) of ServiceAccount `sa` in ns (a TokenRequest). Caller frees. */
char *tu_kube_token(ds_kube *k, const char *ns, const char *sa);

/**
 * Write DIR/NAME, a kubeconfig for the server of the kubeconfig `server_from`,
 * with the CA of the kubeconfig `ca_from` (NULL: none), `cluster_extra` lines
 * under its cluster and `user_yaml` lines under its user (NULL: none); returns
 * the path (caller frees).
 */
char *tu_kube_write_kubeconfig(const char *server_from, const char *dir, const char *name,
			       const char *ca_from, const char *cluster_extra,
			       const char *user_yaml);

/** Compact the etcd of the test cluster whose admin kubeconfig is .../STATE/NAME/admin.kubeconfig.
 */
void tu_kube_compact(const char *kubeconfig);

/** A random number below 1,000,000 for unique names. */
/**
 * Writes to `resource` ("configmaps") the API server counted in its own
 * /metrics (APPLY, PATCH, UPDATE; not CREATE or DELETE, which controllers
 * make); detail (may be NULL) gets them by verb and code.
 */
long long tu_kube_writes(ds_kube *k, const char *resource, char *detail, size_t size);

/**
 * As tu_kube_writes(), for the verbs of the NULL-terminated list (as the API
 * server names them: "POST", "PUT", "PATCH", "APPLY", "DELETE").
 */
long long tu_kube_writes_of(ds_kube *k, const char *resource, const char *const verbs[],
			    char *detail, size_t size);

unsigned tu_rand(void);

/** Sleep; monotonic milliseconds. */
void tu_msleep(long ms);
long long tu_now_ms(void);

#endif
