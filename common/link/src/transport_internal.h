#ifndef DRASYNC_TRANSPORT_INTERNAL_H
#define DRASYNC_TRANSPORT_INTERNAL_H

/* Socket plumbing shared by sender.c and receiver.c. */

#include "drasync/transport.h"

#include <stddef.h>
#include <stdint.h>

/* Apply heartbeats, linger, max message size and reconnect backoff. @return 0 or -errno */
int ds_sock_tune(void *sock, const ds_transport_tuning *t);

/* A socket monitor: a PAIR socket receiving the events of one socket. */
struct ds_monitor {
	void *pair;
	char endpoint[64];
};

int ds_monitor_start(struct ds_monitor *m, void *zctx, void *sock);

/**
 * Read one pending event without blocking.
 * @return 1 with the event, 0 when none is pending
 */
int ds_monitor_read(struct ds_monitor *m, uint16_t *event, uint32_t *value, char *addr,
		    size_t addrlen);

/* Stop monitoring sock (may be NULL when already closed) and close the PAIR. */
void ds_monitor_stop(struct ds_monitor *m, void *sock);

/* The IP of "ip:port" (the refusals are grouped by address, without the port). */
void ds_peer_ip(const char *peer, char *ip, size_t len);

/* Why a handshake failed, in words. */
const char *ds_handshake_reason(uint16_t event, uint32_t value, char *buf, size_t len);

#endif
