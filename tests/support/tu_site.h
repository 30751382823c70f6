#ifndef DRASYNC_TU_SITE_H
#define DRASYNC_TU_SITE_H

/*
 * A target site as an operator runs it, fed by a real source link (after
 * cmocka.h): `drasync-target run` as a process on a fixed loopback port (so a
 * restarted agent is found where it was), its TargetConfig, and the source's
 * end in the test process: a ds_outbox and a ds_sender with CURVE keys, over
 * loopback. Every failure fails the test with the agent's log.
 */

#include "drasync/keys.h"
#include "drasync/outbox.h"
#include "drasync/sender.h"

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct tu_site {
	char *dir;
	char cfg[1100], log[1100], outbox[1100], ledger[1100];
	char endpoint[64];
	/* The source agent (tu_site_source_*): its files, and where it connects
	 * ("" until tu_site_write_source_config: the target's endpoint; set it to
	 * a proxy's before). */
	char source_cfg[1100], source_log[1100], source_outbox[1100];
	char source_endpoint[64];
	/* More of the source's target: mapping (", bandwidth: 1Mi, proxy: ..."), or "". */
	char source_target_extra[1024];
	int source_pid;
	long source_log_from;
	const char *kubeconfig;
	const char *source; /* the source's name in the authorized-sources file */
	ds_keypair tkeys, skeys;
	int agent_pid;
	long log_from; /* where the current run's lines start in the log */
	ds_outbox *ob;
	ds_sender *tx;
	pthread_t tx_thread;
	bool tx_running;
} tu_site;

/**
 * A new site under a fresh directory: keys, a free port, an open outbox;
 * the ledger is DIR/target-state/ledger.db. Nothing runs yet.
 */
void tu_site_init(tu_site *s, const char *prefix, const char *kubeconfig, const char *source);

/** Stop the sender and the agent (SIGKILL), close the outbox, free the directory name. */
void tu_site_dispose(tu_site *s);

/**
 * Write the TargetConfig (listen, keys, stateDir) and the authorized-sources
 * file; `extra` is appended (YAML lines: mode, namespaceMappings...).
 * Without `identity:` in extra the ledger's identity goes to a namespace that
 * does not exist (ds-noid-PORT): it is not written, and no other test's
 * ConfigMap is read.
 */
void tu_site_write_config(tu_site *s, const char *extra);

/** drasync-target run, until it logged `started`. */
void tu_site_agent_start(tu_site *s);
/** As tu_site_agent_start(), extra arguments (NULL-terminated, may be NULL) after the config's. */
void tu_site_agent_start_args(tu_site *s, const char *const *args);
void tu_site_agent_sigkill(tu_site *s);
/** SIGTERM; the agent must exit 0. */
void tu_site_agent_sigterm(tu_site *s);

/** The lines of the log written by the current run (caller frees). */
char *tu_site_run_log(const tu_site *s);

/** The source's sender, on a thread of its own, until tu_site_sender_stop(). */
void tu_site_sender_start(tu_site *s);
void tu_site_sender_stop(tu_site *s);

/** Wait until the target acknowledged seq; the milliseconds it took. */
long long tu_site_wait_acked(tu_site *s, uint64_t seq, int timeout_ms);

/** Push objs as upserts (uid: metadata.uid) into the outbox, taking the references; last seq. */
uint64_t tu_site_push(tu_site *s, json_t **objs, size_t n);

/*
 * The source agent as an operator runs it: drasync-source run as a process,
 * reading its own cluster, pushing to this site's target with the site's
 * source keys (s->skeys, named s->source), its state in DIR/source-state.
 */

/**
 * Write DIR/source.yaml (clusterName, target endpoint and key, keys,
 * stateDir); `extra` is appended (YAML lines: namespaces:, schedule:...;
 * without schedule: the source runs in watch mode).
 */
void tu_site_write_source_config(tu_site *s, const char *extra);

/**
 * drasync-source run on the cluster of `kubeconfig`, logging to
 * DIR/source.log, until it logged `started`. Extra arguments (NULL-terminated,
 * may be NULL) follow the config's.
 */
void tu_site_source_start(tu_site *s, const char *kubeconfig, const char *const *args);

/** Wait for the source agent to exit (once mode): its exit code; fails the test on a timeout. */
int tu_site_source_wait(tu_site *s, int timeout_ms);
void tu_site_source_sigkill(tu_site *s);
/** SIGTERM; the agent must exit 0. */
void tu_site_source_sigterm(tu_site *s);

/** The lines of the source's log written by its current run (caller frees). */
char *tu_site_source_run_log(const tu_site *s);

/** One integer from the source's outbox database (DIR/source-state/outbox.db, read-only); -1 when
 * the query has no row. */
long long tu_site_source_outbox_int(const tu_site *s, const char *sql);

/** One integer from the ledger (read-only); -1 when the query has no row. */
long long tu_site_ledger_int(const tu_site *s, const char *sql);

/** A free loopback TCP port. */
int tu_free_port(void);

#endif
