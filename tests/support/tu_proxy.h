#ifndef DRASYNC_TU_PROXY_H
#define DRASYNC_TU_PROXY_H

/*
 * tests/kube/faultproxy as a process of the test (after cmocka.h): a TCP
 * proxy between the agents that can cut, delay, throttle and emulate loss,
 * or a TLS reverse proxy in front of a real API server that injects 429,
 * 503 and connection resets. The binary is $DS_FAULTPROXY; it listens and
 * is controlled on free loopback ports. Every failure fails the test with
 * the proxy's log.
 */

#include <stdbool.h>

typedef struct tu_proxy tu_proxy;

/**
 * faultproxy tcp forwarding 127.0.0.1:<listen> to 127.0.0.1:to_port, with
 * latency_ms added one way in each direction, a rate_kbit cap (0: none) and
 * loss_pct % of chunks held back 200 ms; returns once /stats answers.
 */
tu_proxy *tu_proxy_start_tcp(int to_port, int latency_ms, int rate_kbit, double loss_pct);

/**
 * faultproxy api in front of the API server of admin_kubeconfig; it writes
 * DIR/faultproxy-<port>.kubeconfig (tu_proxy_kubeconfig()), which points at
 * it; returns once /stats answers.
 */
tu_proxy *tu_proxy_start_api(const char *admin_kubeconfig, const char *dir);

/** The port clients connect to. */
int tu_proxy_port(const tu_proxy *p);

/** The api proxy's kubeconfig, borrowed; NULL for a tcp proxy. */
const char *tu_proxy_kubeconfig(const tu_proxy *p);

/** tcp: close every connection and refuse new ones, until tu_proxy_restore(). */
void tu_proxy_cut(tu_proxy *p);
void tu_proxy_restore(tu_proxy *p);

/** tcp: change the shaping of live and new connections; a negative value keeps it. */
void tu_proxy_set(tu_proxy *p, int latency_ms, int rate_kbit, double loss_pct);

/**
 * api: from now on, `ratio` of the matching requests get `kind` ("429",
 * "503", "reset", "none"); retry_after (seconds, 0: the proxy's default) goes
 * into Retry-After; methods a comma list (NULL: the writes, PATCH,POST,PUT,DELETE;
 * WATCH selects watches, which are otherwise never faulted).
 */
void tu_proxy_faults(tu_proxy *p, const char *kind, double ratio, int retry_after,
		     const char *methods);

/**
 * One integer of GET /stats: "bytes_up", "connections", "requests",
 * "injected.429" (a dot descends); for "cut", 1 or 0. Fails the test when the
 * key is not there.
 */
long long tu_proxy_stats_int(tu_proxy *p, const char *key);

/** The proxy's log so far (caller frees). */
char *tu_proxy_log(const tu_proxy *p);

/** SIGTERM, wait for the exit (it must be 0), free. NULL-safe. */
void tu_proxy_stop(tu_proxy *p);

#endif
