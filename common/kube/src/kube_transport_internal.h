#ifndef DRASYNC_KUBE_TRANSPORT_INTERNAL_H
#define DRASYNC_KUBE_TRANSPORT_INTERNAL_H

/*
 * What the two parts of the transport share: kube_transport.c (setup, the
 * rate limit, one transfer and its retries) and kube_transport_concurrent.c
 * (the concurrent path: many calls on one curl multi handle).
 */

#include "drasync/buf.h"
#include "drasync/kube_transport.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

struct ds_kube_transport {
	ds_kubeconfig *kc;
	struct ds_kube_transport_opts opts;
	char *base;		       /* URL prefix the request paths are appended to */
	struct curl_slist *connect_to; /* tls-server-name: connect to the real host */
	char *ua;

	CURLSH *share; /* DNS cache and TLS sessions, across pooled handles */
	pthread_mutex_t share_locks[CURL_LOCK_DATA_LAST];

	/* Idle handles: those of the concurrent path (their connections are the
	 * multi's), and those of the calling threads' own transfers
	 * (curl_easy_perform), each keeping its one connection for the next. */
	pthread_mutex_t pool_lock;
	struct ds_kube_pool {
		CURL **h;
		size_t n, cap, max;
	} pools[2];

	pthread_mutex_t rl_lock; /* token bucket */
	double tokens;
	double last; /* monotonic seconds of the last refill */

	pthread_mutex_t multi_lock; /* one batch at a time keeps the multi's connections */
	CURLM *multi;

	atomic_ulong requests, retries, connections, http2;
};

struct xfer {
	ds_kube_transport *t;
	CURL *h;
	struct curl_slist *hdrs;
	ds_str body; /* the answer, bounded by opts.max_body */
	bool too_big;
	int retry_after;
	char phrase[64]; /* the status line's reason phrase (HTTP/1.1 only) */
	char errbuf[CURL_ERROR_SIZE];
	/* streams */
	ds_kube_line_fn fn;
	void *user;
	const atomic_bool *stop;
	bool stopped;
};

enum retry_kind {
	RETRY_NO,
	RETRY_ANY,	  /* the request was certainly not processed */
	RETRY_IDEMPOTENT, /* may have been processed */
	RETRY_AUTH,	  /* 401: fresh credentials */
};

/* Sleep ms milliseconds, through signals. */
void ds_kube_sleep_ms(long ms);

/* Take one token; @return how long to wait (ms) before the request may go. */
long ds_kube_rate_reserve(ds_kube_transport *t);

/* Which pool: the concurrent path's, or a calling thread's own transfer's. */
enum ds_kube_pool_kind { DS_KUBE_POOL_MULTI, DS_KUBE_POOL_OWN };

/* Idle handles kept: the concurrent path's (no connection of their own), and
 * the own transfers' (a TLS connection each: as many as threads call at once). */
#define DS_KUBE_POOL_MULTI_MAX 256
#define DS_KUBE_POOL_OWN_MAX 8

/* Give a handle back to its pool (NULL-safe). */
void ds_kube_pool_put(ds_kube_transport *t, CURL *h, enum ds_kube_pool_kind kind);

/* A transfer of t with a handle of the pool `kind`. @return 0 or -ENOMEM */
int ds_kube_xfer_init(struct xfer *x, ds_kube_transport *t, enum ds_kube_pool_kind kind);
void ds_kube_xfer_dispose(struct xfer *x);

/* Configure x->h (a pooled handle) for one attempt of `req`. */
int ds_kube_xfer_setup(struct xfer *x, const struct ds_kube_request *req, bool stream,
		       ds_kube_error *ke);

/* Turn the outcome of one attempt into rc/resp/ke and a retry decision. */
int ds_kube_xfer_finish(struct xfer *x, const struct ds_kube_request *req, CURLcode cc,
			struct ds_kube_response *resp, ds_kube_error *ke, enum retry_kind *retry);

/* Whether to try again, and after how long. */
bool ds_kube_retry_decide(ds_kube_transport *t, const struct ds_kube_request *req,
			  enum retry_kind kind, int attempt, bool *auth_retried, int retry_after,
			  long *delay_ms);

#endif
