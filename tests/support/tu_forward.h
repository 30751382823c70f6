#ifndef DRASYNC_TU_FORWARD_H
#define DRASYNC_TU_FORWARD_H

/*
 * A TCP forwarder on loopback (after cmocka.h): bytes pass unchanged between
 * a client and a real server (an API server: TLS goes through), until it is
 * stopped, which closes its port and every connection, as a network outage
 * would. Started again on the same port, the server is back.
 */

typedef struct tu_forward tu_forward;

/** Listen on 127.0.0.1:port (0: a free one) and forward to 127.0.0.1:to_port. */
tu_forward *tu_forward_start(int port, int to_port);

int tu_forward_port(const tu_forward *f);

/** Close the port and every connection; free. NULL-safe. */
void tu_forward_stop(tu_forward *f);

/**
 * Write DIR/NAME: the kubeconfig at `from` with its server's port replaced by
 * `port` (the server must be https://127.0.0.1:P); *to_port gets P. Caller frees.
 */
char *tu_forward_kubeconfig(const char *from, const char *dir, const char *name, int port,
			    int *to_port);

#endif
