#ifndef DRASYNC_RECEIVER_CONNS_H
#define DRASYNC_RECEIVER_CONNS_H

/*
 * The receiver's TCP connections, by file descriptor, as its socket monitor
 * sees them: each accepted connection counts as unauthenticated until a
 * message arrives from it (only a completed CURVE handshake delivers one), it
 * disconnects, or it outlives the handshake timeout (libzmq closes a
 * connection whose handshake is not done by then, so one still open has
 * passed it). A connection that would put the unauthenticated ones over a cap,
 * in total or from its IP address, is shut down at once. The monitor thread
 * calls everything but ds_conns_authenticated(), which the receiver's thread
 * calls; a mutex keeps the two apart.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ds_conns ds_conns;

enum ds_conns_verdict {
	DS_CONNS_ADMITTED = 0,
	DS_CONNS_OVER_TOTAL,	   /* max_unauth reached */
	DS_CONNS_OVER_PER_ADDRESS, /* max_unauth_per_address reached for its IP */
	DS_CONNS_VERDICT_MAX,
};

typedef struct ds_conns_limits {
	unsigned max_unauth;		 /* all addresses together */
	unsigned max_unauth_per_address; /* one IP address */
	int unauth_ms;			 /* how long a connection may stay unauthenticated */
} ds_conns_limits;

/* The most connections tracked at once (and so the highest max_unauth). */
#define DS_CONNS_MAX 1024

int ds_conns_new(ds_conns **out, const ds_conns_limits *lim);
void ds_conns_free(ds_conns *t);

/** The port the receiver listens on: only connections to it are ever shut down. */
void ds_conns_set_port(ds_conns *t, unsigned port);

/**
 * A connection was accepted on descriptor fd (ZMQ_EVENT_ACCEPTED): track it,
 * and shut it down when it is over a cap. Its "ip:port" goes into peer, its IP
 * into ip (both "" when it is already gone).
 * @return the verdict
 */
enum ds_conns_verdict ds_conns_accepted(ds_conns *t, int fd, int64_t now_ms, char *peer,
					size_t peer_len, char *ip, size_t ip_len);

/**
 * Descriptor fd was closed (ZMQ_EVENT_DISCONNECTED): forget it.
 * @return whether it was tracked; its peer into peer ("" if not), *capped
 *         whether the caps shut it down, *unauth whether no message ever came
 *         from it (it never finished its handshake, or its session never began)
 */
bool ds_conns_closed(ds_conns *t, int fd, char *peer, size_t peer_len, bool *capped, bool *unauth);

/** A message came from fd whose peer is "ip:port" `peer`: it is authenticated. */
void ds_conns_authenticated(ds_conns *t, int fd, const char *peer);

/** Unauthenticated connections now (those past unauth_ms count no more). */
unsigned ds_conns_unauthenticated(ds_conns *t, int64_t now_ms);

/** "ip:port" of the peer of socket fd, "" when it has none (closed, not a socket). */
void ds_fd_peer(int fd, char *buf, size_t len);

#endif
