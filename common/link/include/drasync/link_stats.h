#ifndef DRASYNC_LINK_STATS_H
#define DRASYNC_LINK_STATS_H

/*
 * What went over the link, for the metrics and `status` (docs/transport.md,
 * "Compression"): the frames' bytes each way and the JSON bytes of the records
 * they carried, in all and for the current session (the source's). Written by
 * the sender's or receiver's thread, read from any: every field is atomic.
 */

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct ds_link_stats {
	_Atomic uint64_t sent, received; /* frame bytes since the start (CURVE's framing aside) */
	_Atomic uint64_t json;		 /* JSON bytes of the records in those frames */
	_Atomic uint64_t session_sent, session_received, session_json; /* the current session */
	atomic_int zbatch; /* 1: the current session's batches are ZBatch frames */
} ds_link_stats;

typedef struct ds_link_figures {
	uint64_t sent, received, json;
	uint64_t session_sent, session_received, session_json;
	bool zbatch;
} ds_link_figures;

/** Add to the totals and the session's; st may be NULL. */
void ds_link_stats_add(ds_link_stats *st, uint64_t sent, uint64_t received, uint64_t json);
/** A session opened: its figures start again from 0; st may be NULL. */
void ds_link_stats_session(ds_link_stats *st, bool zbatch);
/** A consistent-enough copy (each field read once). */
void ds_link_stats_read(const ds_link_stats *st, ds_link_figures *out);
/** Wire bytes (both ways) per JSON byte; 0 before any JSON went over. */
double ds_link_figures_ratio(uint64_t sent, uint64_t received, uint64_t json);

#endif
