#ifndef DRASYNC_HTTP_SERVER_H
#define DRASYNC_HTTP_SERVER_H

/*
 * The agents' small HTTP server (libmicrohttpd): a fixed set of GET routes
 * (/metrics, /healthz, /readyz, the status page). Anything else is answered
 * by the server: another path 404, a method other than GET or HEAD 405 (with
 * Allow); a request body is never read. Handlers run on the server's threads
 * (a small pool), so what they read must be thread-safe.
 */

#include "drasync/buf.h"
#include "drasync/err.h"

#include <stddef.h>

typedef struct ds_http_server ds_http_server;

/* Largest reply body a handler may build. */
#define DS_HTTP_REPLY_MAX (8u << 20)

/* What a handler fills; body starts empty (max DS_HTTP_REPLY_MAX). */
typedef struct ds_http_reply {
	int status;		  /* default 200 */
	const char *content_type; /* static string; default text/plain; charset=utf-8 */
	ds_str body;
} ds_http_reply;

typedef void (*ds_http_handler)(void *ud, ds_http_reply *reply);

typedef struct ds_http_route {
	const char *path; /* exact match, "/metrics" */
	ds_http_handler fn;
	void *ud;
} ds_http_route;

/**
 * Parse "host:port", "[v6]:port" or ":port" (host 127.0.0.1) into an
 * address libmicrohttpd binds; host is an IP literal or "localhost".
 * @return 0, -EINVAL (err says why)
 */
int ds_http_listen_parse(const char *listen, void *sockaddr_storage, ds_err *err);

/**
 * Bind `listen` and serve the routes (copied; their ud must outlive the
 * server) on threads of its own until ds_http_server_free().
 * @return 0, -EINVAL (bad address), -EADDRINUSE or another errno from bind (err says)
 */
int ds_http_server_start(ds_http_server **out, const char *listen, const ds_http_route *routes,
			 size_t n_routes, ds_err *err);

/** The port bound. */
int ds_http_server_port(const ds_http_server *s);

/** Stop serving (requests in flight finish) and free. NULL-safe. */
void ds_http_server_free(ds_http_server *s);

#endif
