#ifndef DRASYNC_EXPORT_STATUS_H
#define DRASYNC_EXPORT_STATUS_H

/*
 * What `drasync-source status` shows, read from STATE_DIR/outbox.db alone:
 * it works with the agent running or stopped.
 */

#include "drasync/err.h"
#include "drasync/exporter.h"
#include "drasync/object_index.h"
#include "drasync/outbox.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One object whose current version the target failed, refused, keeps waiting or skipped. */
typedef struct ds_export_failure {
	char key[DS_OBJECT_KEY_MAX]; /* "group/Kind/namespace/name" */
	char kind[64];
	char ns[254];
	char name[254];
	int status; /* DS_RESULT_FAILED, _REFUSED, _WAITING or _SKIPPED */
	uint64_t seq;
	char message[256]; /* the target's reason */
} ds_export_failure;

typedef struct ds_export_status {
	ds_outbox_state outbox;
	uint64_t epoch;	  /* the outbox's epoch: what the target numbers this source by */
	uint64_t backlog; /* pushed and not yet acknowledged by the target */
	int64_t last_pass_started_ms; /* wall clock (ms since the epoch); 0: never */
	int64_t last_pass_finished_ms;
	int last_pass_rc; /* 0, or the pass's negative errno */
	ds_export_counts last_pass;
	bool snapshot_done;	    /* a snapshot has been completed for this outbox */
	ds_index_kind_count *kinds; /* live objects per kind with their results */
	size_t n_kinds;
	ds_export_failure
	    *failures; /* failed, refused, waiting, then skipped; at most max_failures */
	size_t n_failures;
	size_t more_failures; /* beyond max_failures, not listed */
} ds_export_status;

/**
 * Read the status from the state directory.
 * @return 0; -ENOENT when STATE_DIR/outbox.db does not exist (never run)
 */
int ds_export_status_read(const char *state_dir, size_t max_failures, ds_export_status **out,
			  ds_err *err);
void ds_export_status_free(ds_export_status *st);

#endif
