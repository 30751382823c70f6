#ifndef DRASYNC_TU_HTTPD_H
#define DRASYNC_TU_HTTPD_H

/*
 * A real HTTP server on 127.0.0.1 (libmicrohttpd, a thread per connection) that
 * answers from a script, for tests of retry, backoff, rate limits and streams.
 * Must be included after cmocka.h.
 */

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#define TU_HTTPD_STEPS 64

struct tu_httpd_step {
	int code;		   /* 0: the end of the script */
	const char *body;	   /* NULL: "" */
	const char *retry_after;   /* Retry-After header, or NULL */
	int delay_ms;		   /* wait before answering */
	bool close;		   /* drop the connection without an answer */
	const char *const *chunks; /* a streamed answer: these chunks, then the end */
};

struct tu_httpd_req {
	char method[16];
	char url[512]; /* path and query, as sent */
	char auth[256];
	char ctype[128];
	char body[1024];
};

struct tu_httpd {
	struct MHD_Daemon *d;
	int port;
	char url[64]; /* "http://127.0.0.1:PORT" */
	pthread_mutex_t mu;
	/* the script: one step per request, the last one repeats */
	struct tu_httpd_step steps[TU_HTTPD_STEPS];
	size_t nsteps;
	/* answer 401 unless "Authorization: Bearer <require_token>" */
	const char *require_token;
	/* a streamed answer: these chunks, delay_ms apart, then the end */
	const char *const *stream_chunks;
	int stream_delay_ms;
	/* what happened */
	unsigned hits;
	unsigned connections;
	int inflight, max_inflight;
	struct tu_httpd_req reqs[TU_HTTPD_STEPS]; /* the first requests */
};

/** Start on a free loopback port. */
void tu_httpd_start(struct tu_httpd *h);
void tu_httpd_stop(struct tu_httpd *h);

/** A kubeconfig file pointing at the server (token auth when token != NULL). Caller frees path. */
char *tu_httpd_kubeconfig(const struct tu_httpd *h, const char *dir, const char *token);

/** A loopback port nothing listens on. */
int tu_free_port(void);

#endif
