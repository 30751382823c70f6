#ifndef DRASYNC_TU_COMPARE_H
#define DRASYNC_TU_COMPARE_H

/*
 * What a user checks after a sync (after cmocka.h): the target holds the
 * source's objects. Each object is reduced to what replication promises to
 * carry (ds_sanitize, then name, labels, annotations and everything outside
 * metadata and status), without what drasync adds on the target
 * (drasync.io/ annotations and labels, app.kubernetes.io/managed-by) and
 * without what each cluster's controllers write (deployment.kubernetes.io/
 * annotations); the two sides are compared by the SHA-256 of that content.
 * ConfigMap kube-root-ca.crt, which every namespace of every cluster holds
 * with its own CA, is left out.
 */

#include "drasync/kube_client.h"

#include <stddef.h>

/* What a comparison found. */
typedef struct tu_compare_result {
	size_t source;	   /* objects on the source */
	size_t same;	   /* on the target with the same content */
	size_t missing;	   /* not on the target */
	size_t differ;	   /* on the target with other content */
	size_t extra;	   /* on the target, managed by drasync, not on the source */
	char report[4096]; /* the first differences, one per line */
} tu_compare_result;

/**
 * Compare every object of `kinds` ("v1/ConfigMap", "apps/v1/Deployment";
 * NULL-terminated) in src_ns on src with dst_ns on dst. Fails the test
 * when a list fails.
 */
void tu_compare_namespaces(ds_kube *src, const char *src_ns, ds_kube *dst, const char *dst_ns,
			   const char *const kinds[], tu_compare_result *out);

/**
 * Wait up to timeout_ms until the comparison finds nothing missing,
 * different or extra; fails the test with the last report then.
 */
void tu_assert_same_objects(ds_kube *src, const char *src_ns, ds_kube *dst, const char *dst_ns,
			    const char *const kinds[], int timeout_ms);

/** The SHA-256 (hex) of obj's compared content, as above. */
void tu_compare_digest(const json_t *obj, char hex[65]);

#endif
