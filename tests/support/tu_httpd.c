#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu_httpd.h"
#include "testutil.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct conn_state {
	char body[1024];
	size_t len;
};

struct stream_state {
	struct tu_httpd *h;
	const char *const *chunks;
	size_t next;
};

static void msleep(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct stream_state *s = cls;
	const char *chunk;
	size_t n;

	(void)pos;
	if (!s->chunks[s->next])
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (s->next > 0 && s->h->stream_delay_ms)
		msleep(s->h->stream_delay_ms);
	chunk = s->chunks[s->next++];
	n = strlen(chunk);
	if (n > max)
		n = max;
	memcpy(buf, chunk, n);
	return (ssize_t)n;
}

static enum MHD_Result add_arg(void *cls, enum MHD_ValueKind kind, const char *key,
			       const char *value)
{
	char *url = cls;
	size_t n = strlen(url);

	(void)kind;
	snprintf(url + n, 512 - n, "%s%s=%s", strchr(url, '?') ? "&" : "?", key,
		 value ? value : "");
	return MHD_YES;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, const char *upload,
			      size_t *upload_size, void **con_cls)
{
	struct tu_httpd *h = cls;
	struct conn_state *st = *con_cls;
	struct tu_httpd_step step;
	struct MHD_Response *r;
	const char *auth;
	unsigned idx;
	enum MHD_Result ret;

	(void)version;
	if (!st) {
		st = calloc(1, sizeof(*st));
		*con_cls = st;
		return MHD_YES;
	}
	if (*upload_size) {
		size_t n = *upload_size;
		if (st->len + n >= sizeof(st->body))
			n = sizeof(st->body) - st->len - 1;
		memcpy(st->body + st->len, upload, n);
		st->len += n;
		*upload_size = 0;
		return MHD_YES;
	}
	auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	pthread_mutex_lock(&h->mu);
	idx = h->hits++;
	if (idx < TU_HTTPD_STEPS) {
		struct tu_httpd_req *q = &h->reqs[idx];
		const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
		snprintf(q->method, sizeof(q->method), "%s", method);
		snprintf(q->url, sizeof(q->url), "%s", url);
		MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, add_arg, q->url);
		snprintf(q->auth, sizeof(q->auth), "%s", auth ? auth : "");
		snprintf(q->ctype, sizeof(q->ctype), "%s", ct ? ct : "");
		snprintf(q->body, sizeof(q->body), "%.*s", (int)st->len, st->body);
	}
	step = h->steps[idx < h->nsteps ? idx : (h->nsteps ? h->nsteps - 1 : 0)];
	if (h->nsteps == 0)
		step = (struct tu_httpd_step){.code = 200, .body = "{}"};
	h->inflight++;
	if (h->inflight > h->max_inflight)
		h->max_inflight = h->inflight;
	pthread_mutex_unlock(&h->mu);
	if (step.delay_ms)
		msleep(step.delay_ms);
	pthread_mutex_lock(&h->mu);
	h->inflight--;
	pthread_mutex_unlock(&h->mu);
	if (step.close)
		return MHD_NO; /* drops the connection */
	if (h->require_token) {
		char want[300];
		snprintf(want, sizeof(want), "Bearer %s", h->require_token);
		if (!auth || strcmp(auth, want) != 0)
			step = (struct tu_httpd_step){
			    .code = 401,
			    .body = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":"
				    "\"Failure\",\"message\":\"Unauthorized\",\"reason\":"
				    "\"Unauthorized\",\"code\":401}"};
	}
	if ((step.chunks || h->stream_chunks) && step.code == 200) {
		struct stream_state *s = calloc(1, sizeof(*s));
		s->h = h;
		s->chunks = step.chunks ? step.chunks : h->stream_chunks;
		r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 1024, stream_read, s, free);
	} else {
		const char *body = step.body ? step.body : "";
		r = MHD_create_response_from_buffer(strlen(body), (void *)(uintptr_t)body,
						    MHD_RESPMEM_MUST_COPY);
	}
	MHD_add_response_header(r, "Content-Type", "application/json");
	if (step.retry_after)
		MHD_add_response_header(r, "Retry-After", step.retry_after);
	ret = MHD_queue_response(c, (unsigned)step.code, r);
	MHD_destroy_response(r);
	return ret;
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
		      enum MHD_RequestTerminationCode toe)
{
	(void)cls;
	(void)c;
	(void)toe;
	free(*con_cls);
	*con_cls = NULL;
}

static void notify(void *cls, struct MHD_Connection *c, void **socket_ctx,
		   enum MHD_ConnectionNotificationCode code)
{
	struct tu_httpd *h = cls;

	(void)c;
	(void)socket_ctx;
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		pthread_mutex_lock(&h->mu);
		h->connections++;
		pthread_mutex_unlock(&h->mu);
	}
}

void tu_httpd_start(struct tu_httpd *h)
{
	struct sockaddr_in sa;
	const union MHD_DaemonInfo *info;

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	pthread_mutex_init(&h->mu, NULL);
	h->d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD, 0,
				NULL, NULL, handle, h, MHD_OPTION_SOCK_ADDR, &sa,
				MHD_OPTION_NOTIFY_COMPLETED, completed, h,
				MHD_OPTION_NOTIFY_CONNECTION, notify, h,
				MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
	if (!h->d)
		fail_msg("cannot start the test HTTP server");
	info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
	h->port = info->port;
	snprintf(h->url, sizeof(h->url), "http://127.0.0.1:%d", h->port);
}

void tu_httpd_stop(struct tu_httpd *h)
{
	if (h->d)
		MHD_stop_daemon(h->d);
	h->d = NULL;
	pthread_mutex_destroy(&h->mu);
}

char *tu_httpd_kubeconfig(const struct tu_httpd *h, const char *dir, const char *token)
{
	char *path, *text;

	if (asprintf(&path, "%s/kubeconfig", dir) < 0 ||
	    asprintf(&text,
		     "current-context: t\n"
		     "clusters: [{name: c, cluster: {server: '%s'}}]\n"
		     "users: [{name: u, user: {%s%s}}]\n"
		     "contexts: [{name: t, context: {cluster: c, user: u}}]\n",
		     h->url, token ? "token: " : "", token ? token : "") < 0)
		fail_msg("oom");
	tu_write_file(path, text);
	free(text);
	return path;
}

int tu_free_port(void)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
		fail_msg("no free port");
	port = ntohs(sa.sin_port);
	close(fd);
	return port;
}
