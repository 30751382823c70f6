#ifndef DRASYNC_KUBE_CLIENT_INTERNAL_H
#define DRASYNC_KUBE_CLIENT_INTERNAL_H

/*
 * What the parts of the client share: kube_client.c (lifecycle, requests,
 * paths, objects, batch), kube_discovery.c (the group and resource caches)
 * and kube_watch.c (list then watch).
 */

#include "drasync/buf.h"
#include "drasync/kube_client.h"

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>

/* Longest request path built here (the API server's own limit on a request line is larger). */
#define KUBE_MAX_PATH (64u * 1024u)

struct ds_kube {
	ds_kubeconfig *kc;
	ds_kube_transport *t;

	pthread_mutex_t disc_lock; /* guards the two caches */
	json_t *groups;	   /* {group: {"preferred": v, "versions": [v...]}}, NULL: not loaded */
	json_t *resources; /* {"group/version": APIResourceList.resources} */
	unsigned long generation; /* counts group list loads */
	int refresh_interval_ms;  /* at most one reload per interval by a miss or refresh */
	int64_t refreshed_at_ms;  /* monotonic time of that last reload; 0: none */

	pthread_mutex_t jitter_lock; /* guards jitter */
	uint64_t jitter;	     /* xorshift64* state, never 0 */
};

/* Whether ns can be a path segment (not ".", "..", no '/' or '%'). @return 0, -EINVAL (ke says) */
int ds_kube_need_ns(const struct ds_kube_resource *res, const char *ns, const char *what,
		    ds_kube_error *ke);

/* Append one path segment, percent-encoded; "." and ".." as %2E and %2E%2E. */
void ds_kube_sb_seg(ds_str *b, const char *s);

/* Append "/api/VERSION" (group "") or "/apis/GROUP/VERSION", each segment escaped. */
void ds_kube_sb_group_version(ds_str *b, const char *group, const char *version);

/* Append "?k=v" or "&k=v" (v escaped) when v is set. */
void ds_kube_sb_q(ds_str *b, const char *k, const char *v);

/* Hand the path over. @return 0, -E2BIG (longer than the bound), -ENOMEM */
int ds_kube_sb_done(ds_str *b, char **out);

/*
 * Append the path of res in ns (NULL: every namespace), of name and sub when
 * set; every segment is escaped (ds_kube_sb_seg()).
 */
void ds_kube_sb_path(ds_str *b, const struct ds_kube_resource *res, const char *ns,
		     const char *name, const char *sub);

/* One request whose 2xx answer is a JSON value (out may be NULL). */
int ds_kube_call_json(ds_kube *k, const char *method, const char *path, const char *ctype,
		      const char *body, json_t **out, ds_kube_error *ke);

#endif
