#ifndef DRASYNC_SOURCE_AGENT_H
#define DRASYNC_SOURCE_AGENT_H

/*
 * The running exporter of `drasync-source run`: the exporter (passes and
 * watches that fill the outbox) and the sender (which drains it to the
 * target) on their threads, driven by the configuration's schedule: watch,
 * interval, cron or once. It keeps STATE_DIR/agent.json current for `status`.
 *
 * Threads: ds_source_agent_run() runs the passes or the watch on the caller's
 * thread and the sender on one of its own, started and joined within the
 * call; ds_source_agent_stop() from any thread (a signal thread) makes it
 * return soon, the batch in flight finished (an outbox push is one
 * transaction). Waits between passes and for the target are deadlines on the
 * monotonic clock; schedule slots are wall-clock times.
 */

#include "drasync/err.h"
#include "drasync/export_status.h"
#include "drasync/exporter.h"
#include "drasync/keys.h"
#include "drasync/kube_client.h"
#include "drasync/label_selector.h"
#include "drasync/sender.h"
#include "drasync/source_config.h"
#include "drasync/store.h"
#include "drasync/transport.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct ds_source_agent ds_source_agent;

/* What ds_source_agent_new() wires; everything borrowed outlives the agent. */
typedef struct ds_source_agent_config {
	const ds_source_config *cfg;	   /* schedule, stateDir, namespaces, target */
	const char *config_path;	   /* the file, named in messages */
	ds_kube *kube;			   /* the source cluster */
	const ds_label_selector *selector; /* NULL: every namespace the file names */
	const ds_keypair *keys;		   /* copied */
	long long timeout_ms;		   /* once: give up waiting for the target; 0: wait */
	bool progress;			   /* the first pass's progress on stderr (a terminal) */
	/* The observer (the monitor), each optional; called from the agent's threads. */
	void (*on_link_event)(void *ud, const ds_transport_event *ev);
	void (*on_pushed)(void *ud, uint64_t last_seq);
	void (*on_pass)(void *ud, const ds_export_counts *c, int rc, double secs);
	void *ud;
} ds_source_agent_config;

/* ds_source_agent_run(): once has finished; the target's results are in the state. */
#define DS_SOURCE_AGENT_ONCE_DONE 1

/**
 * Make the exporter and the sender and write agent.json ("started").
 * @return 0, or a negative errno (err says why)
 */
int ds_source_agent_new(ds_source_agent **out, const ds_source_agent_config *cfg, ds_err *err);

/** The agent's sender (borrowed), for the monitor to read. */
ds_sender *ds_source_agent_sender(ds_source_agent *a);

/**
 * Run the schedule until it ends or ds_source_agent_stop(); the sender runs
 * beside it from the start (once included: records go out while it lists).
 * Ends with agent.json saying "stopped".
 * @return 0 stopped, or a watch/interval/cron schedule ended cleanly;
 *         DS_SOURCE_AGENT_ONCE_DONE once: every record acknowledged and, from a
 *         target that sends them, each object's apply result (read them with
 *         ds_export_status_read()); -EINVAL the schedule is invalid;
 *         -ETIMEDOUT once: the target did not answer within timeout_ms;
 *         another negative errno: the run could not go on (err says why)
 */
int ds_source_agent_run(ds_source_agent *a, ds_err *err);

/** Make ds_source_agent_run() return soon. Any thread; NULL-safe. */
void ds_source_agent_stop(ds_source_agent *a);

/** NULL-safe; after ds_source_agent_run() has returned. */
void ds_source_agent_free(ds_source_agent *a);

/**
 * Check STATE_DIR's outbox (and the object index in its file) before anything
 * uses it; hint: what to do about a damaged or full one ("" else), a line.
 * @return 0 sound or none yet; -ENAMETOOLONG; or the check's negative errno
 *         (-EBADMSG damaged, -ENOSPC full; err names the file)
 */
int ds_source_agent_check_outbox(const char *state_dir, char *hint, size_t size, ds_err *err);

/* What the target made of the records, summed over the kinds. */
typedef struct ds_source_agent_tally {
	uint64_t acknowledged; /* records the target acknowledged */
	uint64_t committed;    /* committed on the target, no apply result yet */
	uint64_t applied;
	uint64_t held;
	uint64_t waiting;
	size_t failed;	  /* listed and beyond the list */
	uint64_t refused; /* outside what the target grants this source: nothing written */
} ds_source_agent_tally;

/**
 * Sum st (read with its failures listed) into out.
 * @return 1 when once needs attention (objects failed, refused or wait on the target), else 0
 */
int ds_source_agent_tally_of(const ds_export_status *st, ds_source_agent_tally *out);

/**
 * once's report on out: each object the target failed, refused, skipped or keeps
 * waiting (st read with its failures listed), then the tally in one line.
 * @return 1 when once needs attention (its exit code), else 0
 */
int ds_source_agent_report(FILE *out, const ds_export_status *st, const char *config_path);

/**
 * The sender's on_results for relocations (source_relocation.h): the outcome of
 * a sent relocation recorded and logged (relocation_result). reloc may be NULL.
 */
void ds_source_agent_relocation_results(ds_store *reloc, const ds_wire_result *v, size_t n);

/**
 * What a link event says of the session, for agent.json.
 * @return 1 the session is open, 0 it is down, -1 the event says neither
 */
int ds_source_agent_link_change(const char *event);

#endif
