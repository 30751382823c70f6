#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu_forward.h"

#include "testutil.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_CONNS 256

struct conn {
	tu_forward *f;
	int a, b;
	pthread_t th;
};

struct tu_forward {
	int lfd, port, to_port;
	int stop_pipe[2];
	pthread_t th;
	pthread_mutex_t mu;
	struct conn *conns[MAX_CONNS];
	size_t n;
	bool stopping;
};

static void *pump(void *arg)
{
	struct conn *c = arg;
	struct pollfd p[2] = {{.fd = c->a, .events = POLLIN}, {.fd = c->b, .events = POLLIN}};
	char buf[16384];

	for (;;) {
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		for (int i = 0; i < 2; i++) {
			ssize_t n;

			if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			n = read(p[i].fd, buf, sizeof(buf));
			if (n <= 0)
				goto out;
			for (ssize_t off = 0; off < n;) {
				ssize_t w = write(p[1 - i].fd, buf + off, (size_t)(n - off));
				if (w <= 0)
					goto out;
				off += w;
			}
		}
	}
out:
	shutdown(c->a, SHUT_RDWR);
	shutdown(c->b, SHUT_RDWR);
	return NULL;
}

static void *accept_loop(void *arg)
{
	tu_forward *f = arg;
	struct pollfd p[2] = {{.fd = f->lfd, .events = POLLIN},
			      {.fd = f->stop_pipe[0], .events = POLLIN}};

	for (;;) {
		struct sockaddr_in to = {.sin_family = AF_INET,
					 .sin_port = htons((uint16_t)f->to_port),
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		struct conn *c;
		int a, b;

		if (poll(p, 2, -1) < 0 && errno != EINTR)
			return NULL;
		if (p[1].revents)
			return NULL;
		if (!(p[0].revents & POLLIN))
			continue;
		a = accept(f->lfd, NULL, NULL);
		if (a < 0)
			continue;
		b = socket(AF_INET, SOCK_STREAM, 0);
		if (b < 0 || connect(b, (struct sockaddr *)&to, sizeof(to)) < 0) {
			close(a);
			if (b >= 0)
				close(b);
			continue;
		}
		c = calloc(1, sizeof(*c));
		pthread_mutex_lock(&f->mu);
		if (!c || f->n == MAX_CONNS || f->stopping) {
			pthread_mutex_unlock(&f->mu);
			close(a);
			close(b);
			free(c);
			continue;
		}
		c->f = f;
		c->a = a;
		c->b = b;
		if (pthread_create(&c->th, NULL, pump, c) != 0) {
			pthread_mutex_unlock(&f->mu);
			close(a);
			close(b);
			free(c);
			continue;
		}
		f->conns[f->n++] = c;
		pthread_mutex_unlock(&f->mu);
	}
}

tu_forward *tu_forward_start(int port, int to_port)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	tu_forward *f = calloc(1, sizeof(*f));
	int one = 1;

	assert_non_null(f);
	f->to_port = to_port;
	f->lfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(f->lfd >= 0);
	setsockopt(f->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(f->lfd, (struct sockaddr *)&a, sizeof(a)) < 0)
		fail_msg("forwarder: bind 127.0.0.1:%d: %s", port, strerror(errno));
	assert_int_equal(listen(f->lfd, 64), 0);
	assert_int_equal(getsockname(f->lfd, (struct sockaddr *)&a, &len), 0);
	f->port = ntohs(a.sin_port);
	assert_int_equal(pipe(f->stop_pipe), 0);
	pthread_mutex_init(&f->mu, NULL);
	assert_int_equal(pthread_create(&f->th, NULL, accept_loop, f), 0);
	return f;
}

int tu_forward_port(const tu_forward *f)
{
	return f->port;
}

void tu_forward_stop(tu_forward *f)
{
	if (!f)
		return;
	assert_true(write(f->stop_pipe[1], "x", 1) == 1);
	pthread_join(f->th, NULL);
	close(f->lfd);
	pthread_mutex_lock(&f->mu);
	f->stopping = true;
	pthread_mutex_unlock(&f->mu);
	for (size_t i = 0; i < f->n; i++) {
		shutdown(f->conns[i]->a, SHUT_RDWR);
		shutdown(f->conns[i]->b, SHUT_RDWR);
		pthread_join(f->conns[i]->th, NULL);
		close(f->conns[i]->a);
		close(f->conns[i]->b);
		free(f->conns[i]);
	}
	close(f->stop_pipe[0]);
	close(f->stop_pipe[1]);
	pthread_mutex_destroy(&f->mu);
	free(f);
}

char *tu_forward_kubeconfig(const char *from, const char *dir, const char *name, int port,
			    int *to_port)
{
	char *text = tu_read_file(from, NULL), *p, *out, *path;
	const char *key = "server: https://127.0.0.1:";
	int n = 0;

	p = strstr(text, key);
	if (!p)
		fail_msg("%s: no server https://127.0.0.1:PORT", from);
	p += strlen(key);
	assert_int_equal(sscanf(p, "%d%n", to_port, &n), 1);
	*p = '\0';
	assert_true(asprintf(&out, "%s%d%s", text, port, p + n) > 0);
	assert_true(asprintf(&path, "%s/%s", dir, name) > 0);
	tu_write_file(path, out);
	free(out);
	free(text);
	return path;
}
