#ifndef DRASYNC_AGENT_STATE_H
#define DRASYNC_AGENT_STATE_H

/*
 * What a running `drasync-source run` tells `status` beyond the outbox and
 * the index: its pid, the target endpoint and whether the link is up, in
 * STATE_DIR/agent.json, replaced atomically (write, fsync, rename) on every
 * change. `status` believes "running" only while that pid is alive.
 */

#include "drasync/link_stats.h"
#include "drasync/err.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct ds_agent_state {
	int64_t pid;
	char endpoint[256];
	bool connected;	       /* a session with the target is open */
	int64_t since_ms;      /* when `connected` last changed (ms since the epoch) */
	int64_t started_ms;    /* when the agent started */
	char last_event[64];   /* the link's last event, e.g. "session_open" */
	char last_detail[256]; /* its detail */
	char schedule[16];     /* watch, interval, cron, once */
	int64_t next_pass_ms;  /* interval/cron: the next slot; 0 otherwise */
	uint64_t bandwidth;    /* target.bandwidth, bytes per second; 0: no cap */
	char proxy[256];       /* target.proxy's host:port (never its credentials); "" none */
	ds_link_figures wire;  /* the link's bytes and the JSON they carried (link_stats.h) */
} ds_agent_state;

/** "STATE_DIR/agent.json" into buf. @return 0, -ENAMETOOLONG */
int ds_agent_state_path(const char *state_dir, char *buf, size_t size);

/** Replace the file atomically. @return 0 or a negative errno (err says which file) */
int ds_agent_state_write(const char *state_dir, const ds_agent_state *st, ds_err *err);

/**
 * Read the file.
 * @param running  set to whether st->pid is a live process
 * @return 0; -ENOENT when the agent never ran here; -EBADMSG for a damaged file
 */
int ds_agent_state_read(const char *state_dir, ds_agent_state *st, bool *running, ds_err *err);

#endif
