#ifndef DRASYNC_E2E_SESSION_H
#define DRASYNC_E2E_SESSION_H

/*
 * bench_e2e's sessions: one pair of agents as real processes (keys from
 * their own keygen, configurations, state), the fault proxy between them
 * when the phase is over a WAN, and the target's ledger read with SQLite.
 * Every function dies (bu_die) when it cannot do its job.
 */

#include <jansson.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define SOURCE_CLUSTER "bench-source"

/* bench_e2e's command line. */
struct opts {
	const char *source_agent, *target_agent, *loadgen, *kube_bin, *faultproxy, *sanitizer;
	const char *source_kc, *target_kc, *source_admin, *target_admin, *work, *log_level;
	const char *ceiling_workers, *phases, *velero_phase;
	unsigned objects, namespaces, rpo_changes, rpo_interval_ms, rss_objects;
	unsigned wan_latency_ms, wan_rate_kbit;
	unsigned wan_slow_latency_ms, wan_slow_rate_kbit; /* the wan-slow phase's link */
	double timeout;
};

struct keys {
	char target_dir[600], source_dir[600], auth[700], target_pub[64];
};

/* One pair of agents: configurations, state, processes, the proxy between them. */
struct session {
	const char *tag;
	char src_ns[4096]; /* the source's namespaces, comma-separated */
	char target_cfg[700], source_cfg[700], target_log[700], source_log[700], proxy_log[700];
	char target_state[600], source_state[600], ledger[700], endpoint[256];
	pid_t target, source, proxy;
	int proxy_control;
	sqlite3 *db;
	double committed_bytes;	   /* the proxy's bytes when the snapshot's end was committed */
	double committed_bytes_up; /* of which source to target */
};

void e2e_make_keys(const struct opts *o, struct keys *k);
void e2e_session_init(const struct opts *o, struct session *s, const struct keys *k,
		      const char *tag, const char *src_prefix, const char *dst_prefix, unsigned n);
void e2e_target_start(const struct opts *o, struct session *s);
/* The faultproxy's bytes both ways; *up (may be NULL): source to target alone. */
double e2e_proxy_bytes(const struct opts *o, const struct session *s, double *up);
void e2e_proxy_start(const struct opts *o, struct session *s);
void e2e_source_start(const struct opts *o, struct session *s, const struct keys *k);
void e2e_session_stop(struct session *s);
long long e2e_ledger_applied_seq(struct session *s, const char *name);
void e2e_check_alive(struct session *s);
/* Seconds from t0 until the target's ledger holds the snapshot's end: every
 * record of the first pass committed (the link's part, before the apply). */
double e2e_wait_committed(const struct opts *o, struct session *s, double t0);
double e2e_wait_applied(const struct opts *o, struct session *s, const char *prefix, long want,
			double t0);
double e2e_source_pushed(const struct opts *o, const struct session *s);

#endif
