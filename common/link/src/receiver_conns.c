#include "receiver_conns.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

struct conn {
	int fd; /* -1: free */
	char peer[64];
	char ip[64];
	int64_t accepted_ms;
	bool unauth; /* counted against the caps: no message yet, younger than unauth_ms */
	bool authed; /* a message came from it */
	bool capped; /* shut down by a cap: its disconnect says nothing */
};

struct ds_conns {
	pthread_mutex_t mu;
	ds_conns_limits lim;
	unsigned port;
	struct conn c[DS_CONNS_MAX];
};

int ds_conns_new(ds_conns **out, const ds_conns_limits *lim)
{
	ds_conns *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	pthread_mutex_init(&t->mu, NULL);
	t->lim = *lim;
	for (int i = 0; i < DS_CONNS_MAX; i++)
		t->c[i].fd = -1;
	*out = t;
	return 0;
}

void ds_conns_free(ds_conns *t)
{
	if (!t)
		return;
	pthread_mutex_destroy(&t->mu);
	free(t);
}

void ds_conns_set_port(ds_conns *t, unsigned port)
{
	pthread_mutex_lock(&t->mu);
	t->port = port;
	pthread_mutex_unlock(&t->mu);
}

static unsigned sockaddr_text(const struct sockaddr_storage *ss, char *host, size_t len)
{
	snprintf(host, len, "?");
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)ss;
		inet_ntop(AF_INET, &in->sin_addr, host, (socklen_t)len);
		return ntohs(in->sin_port);
	}
	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;
		inet_ntop(AF_INET6, &in6->sin6_addr, host, (socklen_t)len);
		return ntohs(in6->sin6_port);
	}
	return 0;
}

void ds_fd_peer(int fd, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[INET6_ADDRSTRLEN];
	unsigned port;

	buf[0] = '\0';
	if (fd < 0 || getpeername(fd, (struct sockaddr *)&ss, &sl) != 0)
		return;
	port = sockaddr_text(&ss, host, sizeof(host));
	snprintf(buf, len, "%s:%u", host, port);
}

/* Whether fd is a connection to our own port (never another socket of the process). */
static bool ours(const ds_conns *t, int fd)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[INET6_ADDRSTRLEN];

	if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
		return false;
	return t->port && sockaddr_text(&ss, host, sizeof(host)) == t->port;
}

static bool counts(const ds_conns *t, struct conn *c, int64_t now)
{
	if (c->fd < 0 || !c->unauth || c->capped)
		return false;
	if (now - c->accepted_ms >= t->lim.unauth_ms) {
		c->unauth = false; /* still open past the handshake timeout: it passed */
		return false;
	}
	return true;
}

/* With mu held: a free entry; when none, entries whose descriptor now has
 * another peer (their disconnect was missed) are freed first. */
static struct conn *slot(ds_conns *t, int fd)
{
	char peer[64];

	for (int i = 0; i < DS_CONNS_MAX; i++)
		if (t->c[i].fd == fd)
			return &t->c[i];
	for (int i = 0; i < DS_CONNS_MAX; i++)
		if (t->c[i].fd < 0)
			return &t->c[i];
	for (int i = 0; i < DS_CONNS_MAX; i++) {
		ds_fd_peer(t->c[i].fd, peer, sizeof(peer));
		if (strcmp(peer, t->c[i].peer) != 0)
			return &t->c[i];
	}
	return NULL;
}

enum ds_conns_verdict ds_conns_accepted(ds_conns *t, int fd, int64_t now_ms, char *peer,
					size_t peer_len, char *ip, size_t ip_len)
{
	enum ds_conns_verdict v = DS_CONNS_ADMITTED;
	unsigned total = 0, same = 0;
	struct conn *c;
	char *colon;

	pthread_mutex_lock(&t->mu);
	c = slot(t, fd);
	for (int i = 0; i < DS_CONNS_MAX; i++) {
		struct conn *o = &t->c[i];
		if (o == c || !counts(t, o, now_ms))
			continue;
		total++;
	}
	if (!c) {
		ds_fd_peer(fd, peer, peer_len);
		snprintf(ip, ip_len, "%s", peer);
		colon = strrchr(ip, ':');
		if (colon)
			*colon = '\0';
		v = DS_CONNS_OVER_TOTAL;
		if (peer[0] && ours(t, fd))
			shutdown(fd, SHUT_RDWR);
		pthread_mutex_unlock(&t->mu);
		return v;
	}
	memset(c, 0, sizeof(*c));
	c->fd = fd;
	c->accepted_ms = now_ms;
	ds_fd_peer(fd, c->peer, sizeof(c->peer));
	snprintf(c->ip, sizeof(c->ip), "%s", c->peer);
	colon = strrchr(c->ip, ':');
	if (colon)
		*colon = '\0';
	c->unauth = c->peer[0] != '\0'; /* gone already: its disconnect follows */
	for (int i = 0; c->unauth && i < DS_CONNS_MAX; i++) {
		struct conn *o = &t->c[i];
		if (o != c && o->fd >= 0 && o->unauth && !o->capped && strcmp(o->ip, c->ip) == 0)
			same++;
	}
	if (c->unauth && total >= t->lim.max_unauth)
		v = DS_CONNS_OVER_TOTAL;
	else if (c->unauth && same >= t->lim.max_unauth_per_address)
		v = DS_CONNS_OVER_PER_ADDRESS;
	if (v != DS_CONNS_ADMITTED) {
		c->capped = true;
		c->unauth = false;
		/* libzmq owns the descriptor: shut it down, never close it; it then
		 * sees the stream end and tears the connection down itself. */
		if (ours(t, fd))
			shutdown(fd, SHUT_RDWR);
	}
	snprintf(peer, peer_len, "%s", c->peer);
	snprintf(ip, ip_len, "%s", c->ip);
	pthread_mutex_unlock(&t->mu);
	return v;
}

bool ds_conns_closed(ds_conns *t, int fd, char *peer, size_t peer_len, bool *capped, bool *unauth)
{
	bool found = false;

	peer[0] = '\0';
	*capped = false;
	*unauth = false;
	pthread_mutex_lock(&t->mu);
	for (int i = 0; i < DS_CONNS_MAX && !found; i++) {
		struct conn *c = &t->c[i];
		if (c->fd != fd)
			continue;
		snprintf(peer, peer_len, "%s", c->peer);
		*capped = c->capped;
		*unauth = !c->capped && !c->authed;
		c->fd = -1;
		found = true;
	}
	pthread_mutex_unlock(&t->mu);
	return found;
}

void ds_conns_authenticated(ds_conns *t, int fd, const char *peer)
{
	pthread_mutex_lock(&t->mu);
	for (int i = 0; i < DS_CONNS_MAX; i++) {
		struct conn *c = &t->c[i];
		/* The same descriptor and peer: not a reused number. */
		if (c->fd == fd && !c->authed && strcmp(c->peer, peer) == 0) {
			c->unauth = false;
			c->authed = true;
			break;
		}
	}
	pthread_mutex_unlock(&t->mu);
}

unsigned ds_conns_unauthenticated(ds_conns *t, int64_t now_ms)
{
	unsigned n = 0;

	pthread_mutex_lock(&t->mu);
	for (int i = 0; i < DS_CONNS_MAX; i++)
		n += counts(t, &t->c[i], now_ms);
	pthread_mutex_unlock(&t->mu);
	return n;
}
