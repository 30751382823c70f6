#include "drasync/http_server.h"

#include "drasync/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

struct ds_http_server {
	struct MHD_Daemon *d;
	ds_http_route *routes;
	size_t n_routes;
	int port;
};

int ds_http_listen_parse(const char *listen, void *ss, ds_err *err)
{
	struct sockaddr_in *v4 = ss;
	struct sockaddr_in6 *v6 = ss;
	const char *colon = listen ? strrchr(listen, ':') : NULL;
	char host[64], *end;
	size_t hlen;
	long port;

	memset(ss, 0, sizeof(struct sockaddr_storage));
	if (!colon || !colon[1]) {
		ds_err_set(err, "'%s': expected host:port (e.g. 127.0.0.1:9450)",
			   listen ? listen : "");
		return -EINVAL;
	}
	errno = 0;
	port = strtol(colon + 1, &end, 10);
	if (errno || *end || port < 0 || port > 65535) {
		ds_err_set(err, "'%s': the port is not a number from 0 to 65535", listen);
		return -EINVAL;
	}
	hlen = (size_t)(colon - listen);
	if (hlen >= sizeof(host)) {
		ds_err_set(err, "'%s': host too long", listen);
		return -EINVAL;
	}
	memcpy(host, listen, hlen);
	host[hlen] = '\0';
	if (hlen == 0 || strcmp(host, "localhost") == 0)
		snprintf(host, sizeof(host), "127.0.0.1");
	if (host[0] == '[' && hlen > 2 && host[hlen - 1] == ']') {
		host[hlen - 1] = '\0';
		v6->sin6_family = AF_INET6;
		v6->sin6_port = htons((uint16_t)port);
		if (inet_pton(AF_INET6, host + 1, &v6->sin6_addr) == 1)
			return 0;
	} else {
		if (strcmp(host, "*") == 0)
			snprintf(host, sizeof(host), "0.0.0.0");
		v4->sin_family = AF_INET;
		v4->sin_port = htons((uint16_t)port);
		if (inet_pton(AF_INET, host, &v4->sin_addr) == 1)
			return 0;
	}
	ds_err_set(err, "'%s': the host is not an IP address (or localhost)", listen);
	return -EINVAL;
}

/* libmicrohttpd's complaints (a malformed request, a client gone) as one
 * logfmt line at debug: the agent's log stays one line per event. */
__attribute__((format(printf, 2, 0))) static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[512], q[600];
	size_t n;

	(void)cls;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
		msg[--n] = '\0';
	ds_log(DS_LOG_DEBUG, "http_error", "detail=%s", ds_log_quote(msg, q, sizeof(q)));
}

static enum MHD_Result send_reply(struct MHD_Connection *c, int status, const char *ctype,
				  const char *body, size_t len, bool head, const char *allow)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	/* HEAD: the headers GET would send, no body (libmicrohttpd drops it). */
	(void)head;
	r = MHD_create_response_from_buffer(len, (void *)(uintptr_t)body, MHD_RESPMEM_MUST_COPY);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", ctype);
	MHD_add_response_header(r, "Cache-Control", "no-store");
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	/* The status page loads nothing from anywhere: say so to the browser. */
	MHD_add_response_header(r, "Content-Security-Policy",
				"default-src 'none'; style-src 'unsafe-inline'");
	if (allow)
		MHD_add_response_header(r, "Allow", allow);
	ret = MHD_queue_response(c, (unsigned)status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result plain(struct MHD_Connection *c, int status, const char *text, bool head,
			     const char *allow)
{
	return send_reply(c, status, "text/plain; charset=utf-8", text, strlen(text), head, allow);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, const char *upload,
			      size_t *upload_size, void **con_cls)
{
	ds_http_server *s = cls;
	bool head = strcmp(method, "HEAD") == 0;
	ds_http_reply reply;
	enum MHD_Result ret;

	(void)version;
	(void)upload;
	(void)upload_size;
	(void)con_cls;
	/* Answered on the first call, with the headers: a body is never read
	 * (libmicrohttpd skips it once a reply is queued). */
	if (!head && strcmp(method, "GET") != 0)
		return plain(c, 405, "method not allowed: only GET and HEAD\n", false, "GET, HEAD");
	for (size_t i = 0; i < s->n_routes; i++) {
		if (strcmp(url, s->routes[i].path) != 0)
			continue;
		memset(&reply, 0, sizeof(reply));
		reply.status = 200;
		ds_str_init(&reply.body, DS_HTTP_REPLY_MAX);
		s->routes[i].fn(s->routes[i].ud, &reply);
		if (ds_str_error(&reply.body) < 0) {
			ds_str_dispose(&reply.body);
			return plain(c, 500, "the reply could not be built\n", head, NULL);
		}
		ret = send_reply(c, reply.status,
				 reply.content_type ? reply.content_type
						    : "text/plain; charset=utf-8",
				 ds_str_ptr(&reply.body) ? ds_str_ptr(&reply.body) : "",
				 ds_str_len(&reply.body), head, NULL);
		ds_str_dispose(&reply.body);
		return ret;
	}
	return plain(c, 404, "not found\n", head, NULL);
}

int ds_http_server_start(ds_http_server **out, const char *listen, const ds_http_route *routes,
			 size_t n_routes, ds_err *err)
{
	struct sockaddr_storage ss;
	const union MHD_DaemonInfo *info;
	ds_http_server *s = NULL;
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
	int rc;

	rc = ds_http_listen_parse(listen, &ss, err);
	if (rc < 0)
		return rc;
	s = calloc(1, sizeof(*s));
	if (!s || (n_routes && !(s->routes = calloc(n_routes, sizeof(*routes))))) {
		rc = -ENOMEM;
		goto out;
	}
	memcpy(s->routes, routes, n_routes * sizeof(*routes));
	s->n_routes = n_routes;
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	/* Two threads: a slow status page does not hold a scrape; connections
	 * bounded, idle ones closed, so a client cannot pin the server. */
	errno = 0;
	s->d = MHD_start_daemon(
	    flags, 0, NULL, NULL, handle, s, MHD_OPTION_SOCK_ADDR, &ss, MHD_OPTION_THREAD_POOL_SIZE,
	    2u, MHD_OPTION_CONNECTION_LIMIT, 64u, MHD_OPTION_PER_IP_CONNECTION_LIMIT, 16u,
	    MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)65536,
	    MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_END);
	if (!s->d) {
		rc = errno ? -errno : -EADDRINUSE;
		ds_err_set(err, "metrics.listen %s: cannot listen: %s", listen, strerror(-rc));
		goto out;
	}
	info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
	s->port = info ? (int)info->port : 0;
	*out = s;
	s = NULL;
out:
	ds_http_server_free(s);
	return ds_err_fallback(err, rc);
}

int ds_http_server_port(const ds_http_server *s)
{
	return s->port;
}

void ds_http_server_free(ds_http_server *s)
{
	if (!s)
		return;
	if (s->d)
		MHD_stop_daemon(s->d);
	free(s->routes);
	free(s);
}
