#ifndef DRASYNC_SOURCE_STATUS_H
#define DRASYNC_SOURCE_STATUS_H

/*
 * `drasync-source status`'s view of a source: the outbox's status (the
 * outbox, the object index) and agent.json together, read from stateDir with
 * the agent running or stopped; whether it needs an operator, and its JSON.
 */

#include "drasync/agent_state.h"
#include "drasync/export_status.h"
#include "drasync/source_relocation.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

typedef struct ds_source_status {
	const ds_export_status *st;
	const ds_agent_state *as;		 /* NULL: the agent never wrote one */
	bool running;				 /* as->pid is alive */
	const ds_source_relocation *relocations; /* `relocate`'s rows, by namespace */
	size_t n_relocations;
} ds_source_status;

/* The most relocations status shows. */
#define DS_SOURCE_STATUS_RELOCATIONS_MAX 64

/**
 * The relocations of STATE_DIR into out (at most max).
 * @return how many, or a negative errno (err says why)
 */
int ds_source_status_read_relocations(const char *state_dir, ds_source_relocation *out, size_t max,
				      ds_err *err);

/** The relocations as `status` prints them ("relocated: NS to T at WHEN: ..."); none: nothing. */
void ds_source_status_print_relocations(FILE *out, const ds_source_status *v);

/**
 * Why the source needs an operator's attention: the target failed objects,
 * the target refused objects, the last pass failed, the agent never started, is not running (a
 * `once` run: has stopped with records not acknowledged) or its link is down.
 * @return the reason (static), or NULL when it is healthy
 */
const char *ds_source_status_attention(const ds_source_status *v);

/**
 * The status as `status -o json` prints it (the agent, the outbox, the last
 * pass, the kinds, the failures, needsAttention and attention).
 * @return a new reference; NULL out of memory
 */
json_t *ds_source_status_json(const ds_source_status *v);

#endif
