#ifndef DRASYNC_KUBE_TRANSPORT_H
#define DRASYNC_KUBE_TRANSPORT_H

/*
 * HTTP to one Kubernetes API server: libcurl over OpenSSL, TLS verified with the
 * kubeconfig's CA (unless it says insecure-skip-tls-verify), HTTP/2 when the
 * server offers it, connections kept and reused.
 *
 * Three paths:
 *  - ds_kube_transport_request(): one request, blocking; safe from several threads
 *    (each takes a pooled connection);
 *  - ds_kube_transport_request_many(): many requests at once over curl multi
 *    (multiplexed on HTTP/2), for bulk work; ds_kube_transport_request_stream()
 *    the same for calls the caller hands over one at a time;
 *  - ds_kube_transport_stream(): a long response read line by line (watches).
 *
 * Every request waits for the client-side rate limit (token bucket: qps, burst).
 * Retries, with exponential backoff and jitter (in [cap/2, cap], cap = base * 2^n),
 * or the server's Retry-After when it gives one:
 *  - could not connect (refused, DNS, proxy): any request;
 *  - 429 Too Many Requests: any request (the server rejected it unprocessed);
 *  - connection lost, timeout, 5xx: only idempotent requests (GET, HEAD, PUT,
 *    DELETE, and PATCH with apply/merge/strategic-merge patch bodies). A POST
 *    (create) is never resent blindly: its failure is returned.
 *  - 401 with exec-plugin or token-file credentials: fresh credentials, once.
 */

#include "drasync/kube_error.h"
#include "drasync/kubeconfig.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct ds_kube_transport ds_kube_transport;

/* HTTP/2 streams a connection of the concurrent path carries at once; it
 * opens max_parallel / this + 1 connections at most. */
#define DS_KUBE_STREAMS_PER_CONN 100

struct ds_kube_transport_opts {
	double qps;		 /* sustained requests per second; <= 0: unlimited (default 200) */
	int burst;		 /* bucket size (default 400) */
	long timeout_ms;	 /* whole request, not streams (default 60000) */
	long connect_timeout_ms; /* TCP + TLS (default 10000) */
	int max_retries;	 /* resends after the first attempt (default 6) */
	long backoff_base_ms;	 /* first backoff (default 200) */
	long backoff_max_ms;	 /* cap of one backoff (default 30000) */
	long retry_after_max_ms; /* cap on the server's Retry-After (default 60000) */
	int max_parallel;	 /* requests in flight on the concurrent path (default 64) */
	size_t max_body;	 /* largest response accepted (default 512 MiB) */
	const char *user_agent;	 /* default "drasync/<version>" */
};

/** Fill with the defaults above. */
void ds_kube_transport_opts_init(struct ds_kube_transport_opts *opts);

struct ds_kube_request {
	const char *method; /* GET, POST, PUT, PATCH, DELETE */
	const char *path;   /* "/api/v1/namespaces/a/configmaps?limit=2", appended to the server */
	const char *content_type; /* of the body; NULL: application/json */
	const char *body;	  /* NULL: none */
	size_t body_len;
};

struct ds_kube_response {
	int code;   /* HTTP status */
	char *body; /* NUL-terminated */
	size_t len;
};

void ds_kube_response_dispose(struct ds_kube_response *resp);

/**
 * New transport for `kc` (borrowed: must outlive the transport). opts NULL: defaults.
 * @return 0, -EINVAL (bad server URL), -ENOMEM
 */
int ds_kube_transport_new(ds_kube_transport **out, ds_kubeconfig *kc,
			  const struct ds_kube_transport_opts *opts, ds_err *err);

void ds_kube_transport_free(ds_kube_transport *t);

ds_kubeconfig *ds_kube_transport_config(ds_kube_transport *t);

/**
 * One request, with rate limit and retries.
 * @return 0 and `resp` filled for a 2xx answer (caller disposes); otherwise a
 *         negative errno (see kube_error.h) with `ke` describing it; ke may be NULL
 */
int ds_kube_transport_request(ds_kube_transport *t, const struct ds_kube_request *req,
			      struct ds_kube_response *resp, ds_kube_error *ke);

/* One request of a batch and, after ds_kube_transport_request_many(), its outcome. */
struct ds_kube_call {
	struct ds_kube_request req;   /* in */
	int rc;			      /* out: as ds_kube_transport_request() returns */
	struct ds_kube_response resp; /* out: on rc == 0 (caller disposes) */
	ds_kube_error error;	      /* out: on rc < 0 */
};

/**
 * Run `n` requests concurrently (up to max_parallel in flight), each with the
 * same rate limit and retry rules as ds_kube_transport_request().
 * @return the number of calls that failed (>= 0), or a negative errno when
 *         the batch could not run at all
 */
int ds_kube_transport_request_many(ds_kube_transport *t, struct ds_kube_call *calls, size_t n);

/*
 * Calls that come one at a time (ds_kube_transport_request_stream): next()
 * gives the next call to start, 1 with *out (it stays the caller's and valid
 * until done() has it), 0 when there is none now (it is asked again after a
 * call ends), or -1 when there are no more. done() gets each call once with
 * its outcome (rc, resp or error), also one that could not start. Both run on
 * the calling thread, between transfers; they may make blocking requests of
 * their own (ds_kube_transport_request), not concurrent ones.
 */
struct ds_kube_call_stream {
	int (*next)(void *ud, struct ds_kube_call **out);
	void (*done)(void *ud, struct ds_kube_call *call);
	void *ud;
};

/**
 * Keep up to max_parallel of the stream's calls in flight until next() has no
 * more and every call has ended: a caller can prepare a call while others are
 * in flight, and let one wait for others to end (next() returning 0). The
 * same rate limit and retry rules as ds_kube_transport_request().
 * @return the number of calls that failed (>= 0), or -ENOMEM when the stream
 *         could not run at all
 */
int ds_kube_transport_request_stream(ds_kube_transport *t, const struct ds_kube_call_stream *s);

/** Called with each complete line of a streamed response (without '\n'). Nonzero stops. */
typedef int (*ds_kube_line_fn)(void *user, const char *line, size_t len);

/**
 * A streamed GET (watch): `fn` gets each line as it arrives. Not retried: the
 * caller reconnects (see ds_kube_watch).
 * @param stop  when non-NULL and set (from any thread), the stream ends within ~1 s
 * @return 0 when the server ended the stream, 1 when `fn` or `stop` ended it,
 *         a negative errno on failure (non-2xx answers parsed into ke)
 */
int ds_kube_transport_stream(ds_kube_transport *t, const struct ds_kube_request *req,
			     ds_kube_line_fn fn, void *user, const atomic_bool *stop,
			     ds_kube_error *ke);

/** Counters since creation (for tests and metrics). */
struct ds_kube_transport_stats {
	unsigned long requests; /* attempts sent, retries included */
	unsigned long retries;
	unsigned long connections; /* new connections opened */
	unsigned long http2;	   /* answers received over HTTP/2 */
};
void ds_kube_transport_stats(ds_kube_transport *t, struct ds_kube_transport_stats *out);

/**
 * The delay before retry number `attempt` (0-based): `retry_after_s` seconds
 * (capped) when >= 0, else a jittered delay in [cap/2, cap] with
 * cap = min(backoff_max_ms, backoff_base_ms * 2^attempt).
 * `rnd` in [0,1). Exposed for tests.
 */
long ds_kube_backoff_ms(const struct ds_kube_transport_opts *opts, int attempt, int retry_after_s,
			double rnd);

#endif
