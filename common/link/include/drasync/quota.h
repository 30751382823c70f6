#ifndef DRASYNC_QUOTA_H
#define DRASYNC_QUOTA_H

/*
 * The receiver's per-source quotas: for each source its unapplied backlog
 * (records committed and not applied yet) and its ledger bytes (the payload
 * bytes of its records held in the ledger), each against a limit of its own,
 * with the total backlog of all sources against a ceiling. A source over a
 * quota gets no credit until it is back under the quota's low-water mark
 * (three quarters of the limit), so a throttled source resumes with room
 * for a batch or more instead of flapping at every applied record; the
 * others keep their credit. Transitions are reported as events
 * (source_throttled, source_resumed), one per transition, never per record.
 *
 * The decisions are pure functions (ds_quota_state, ds_quota_credit) the
 * table calls; the table is used on the receiver's thread and read by
 * ds_quota_each() from any thread.
 */

#include "drasync/transport.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Why a source gets no credit. */
enum ds_quota_kind {
	DS_QUOTA_NONE = 0,
	DS_QUOTA_BACKLOG,	/* its unapplied backlog is at its maxUnappliedRecords */
	DS_QUOTA_LEDGER_BYTES,	/* its ledger bytes are at its maxLedgerBytes */
	DS_QUOTA_TOTAL_BACKLOG, /* all backlogs at the ceiling, and it holds its share or more */
	DS_QUOTA_KIND_MAX,
};

/** "none", "backlog", "ledger_bytes", "total_backlog". */
const char *ds_quota_kind_name(enum ds_quota_kind k);

typedef struct ds_quota_limits {
	uint64_t max_unapplied;	   /* its backlog bound; 0: the ceiling's value */
	uint64_t max_ledger_bytes; /* 0: unlimited */
} ds_quota_limits;

/* One source's usage and what it may hold. */
typedef struct ds_quota_usage {
	uint64_t backlog, ledger_bytes;
	ds_quota_limits limits;
} ds_quota_usage;

/* The sum of every source's backlog against the ceiling (maxUnappliedRecords). */
typedef struct ds_quota_total {
	uint64_t backlog, max_unapplied;
	size_t sources; /* the sources with a session: the ceiling's share is max / sources */
} ds_quota_total;

/**
 * Whether a source over a quota (or still above its low-water mark after
 * one, when `was` is not DS_QUOTA_NONE) gets no credit, and which quota
 * decides: ledger bytes first, then its backlog, then the ceiling. Pure.
 */
enum ds_quota_kind ds_quota_state(const ds_quota_usage *u, const ds_quota_total *t,
				  enum ds_quota_kind was);

/**
 * The credit of a source in `state` (ds_quota_state): 0 when throttled, else
 * `credit` shrunk to the room left under its own backlog bound, and under
 * the ceiling, or its share of the ceiling, whichever is larger. Pure.
 */
uint32_t ds_quota_credit(uint32_t credit, const ds_quota_usage *u, const ds_quota_total *t,
			 enum ds_quota_kind state);

/** The value and limit that `kind` compares (the backlog, the bytes, or the totals). */
void ds_quota_measure(const ds_quota_usage *u, const ds_quota_total *t, enum ds_quota_kind kind,
		      uint64_t *value, uint64_t *limit);

typedef struct ds_quota ds_quota;

/* A source's limits, asked for at each ds_quota_judge() (a reload applies then). */
typedef void (*ds_quota_limits_fn)(void *ud, const char *source, ds_quota_limits *out);

/**
 * A table for the ceiling max_unapplied; limits_fn may be NULL (each source:
 * max_unapplied records, unlimited bytes); events go to on_event (may be NULL).
 */
int ds_quota_new(ds_quota **out, uint64_t max_unapplied, ds_quota_limits_fn limits_fn,
		 void *limits_ud, ds_transport_event_fn on_event, void *event_ud);
void ds_quota_free(ds_quota *q);

/**
 * Every source's backlog is counted again: from 0, adding each part with
 * ds_quota_count_backlog() (a source may come more than once), then judge,
 * which publishes the new counts at once (readers meanwhile see the old).
 */
void ds_quota_backlog_begin(ds_quota *q);
int ds_quota_count_backlog(ds_quota *q, const char *source, uint64_t n);
/** The same for ledger bytes (the recount that sees records deleted by compaction). */
void ds_quota_bytes_begin(ds_quota *q);
int ds_quota_set_bytes(ds_quota *q, const char *source, uint64_t bytes);
/** A commit of source added records and bytes (counted again at the next recount). */
int ds_quota_add(ds_quota *q, const char *source, uint64_t records, uint64_t bytes);

/**
 * Refresh every source's limits, decide who is throttled (`sessions`: the
 * sources with a session), and emit source_throttled / source_resumed for
 * the transitions.
 */
void ds_quota_judge(ds_quota *q, size_t sessions);

/** The credit source gets now (out of `credit`), by its state at the last judge. */
uint32_t ds_quota_credit_for(ds_quota *q, const char *source, uint32_t credit);

/** Whether any source has a ledger bytes quota (at the last judge): a recount matters then. */
bool ds_quota_bytes_limited(ds_quota *q);

/** The sum of the backlogs as last counted, plus what was committed since. */
uint64_t ds_quota_total_backlog(const ds_quota *q);

/* One source as ds_quota_each() reports it; source borrowed for the call. */
typedef struct ds_quota_row {
	const char *source;
	ds_quota_usage usage;
	enum ds_quota_kind throttled;
} ds_quota_row;

/** Each source known (by name order of arrival), under the table's lock. */
void ds_quota_each(ds_quota *q, void (*fn)(void *ud, const ds_quota_row *row), void *ud);

#endif
