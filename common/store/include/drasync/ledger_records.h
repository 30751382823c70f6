#ifndef DRASYNC_LEDGER_RECORDS_H
#define DRASYNC_LEDGER_RECORDS_H

/*
 * The ledger's link tables (sources, records, manifests: written by the
 * receiver, inbox.c) as every other module reads them. The apply stage, the
 * status and inventory readers never write SQL on these tables; they go
 * through this reader, which keeps its statements for the store's life.
 */

#include "drasync/store.h"

#include <stddef.h>
#include <stdint.h>

/* One committed record; strings and blobs are borrowed until the callback returns. */
typedef struct ds_ledger_record {
	int64_t id; /* the ledger's order of commits */
	const char *source;
	int64_t epoch, seq;
	int op;					    /* enum ds_record_op */
	const char *api_version, *kind, *ns, *name; /* NULL when the record has none */
	const void *hash;
	size_t hash_len;
	const void *payload; /* when read with payloads (ds_ledger_record_get) */
	size_t payload_len;
	int compression;
	const char *source_uid;
	const char *cluster;  /* the source's cluster name, NULL when not told */
	int64_t committed_at; /* seconds since the epoch */
} ds_ledger_record;

typedef int (*ds_ledger_record_fn)(void *ud, const ds_ledger_record *rec);

/* One source as the receiver knows it. */
typedef struct ds_ledger_source_row {
	const char *name, *cluster;
	int64_t epoch, committed_seq, updated_at;
} ds_ledger_source_row;

typedef struct ds_ledger_records ds_ledger_records;

/** A reader on st (a ledger); st must outlive it. */
int ds_ledger_records_new(ds_store *st, ds_ledger_records **out, ds_err *err);
void ds_ledger_records_free(ds_ledger_records *r);

/**
 * Up to limit records after id `after`, in commit order, without payloads.
 * fn returning < 0 stops the walk with that value.
 * @return the records handed to fn, or a negative errno
 */
int ds_ledger_records_after(ds_ledger_records *r, int64_t after, int limit, ds_ledger_record_fn fn,
			    void *ud, ds_err *err);

/**
 * Every upsert and delete after id `after` (what the apply stage has not
 * read yet), with payloads and the source's cluster name.
 * @return the records handed to fn, or a negative errno
 */
int ds_ledger_records_pending(ds_ledger_records *r, int64_t after, ds_ledger_record_fn fn, void *ud,
			      ds_err *err);

/** Record id with its payload and the source's cluster name. @return 1, 0 no such record, or < 0 */
int ds_ledger_record_get(ds_ledger_records *r, int64_t id, ds_ledger_record_fn fn, void *ud,
			 ds_err *err);

/** Where record id came from. @return 1, 0 no such record, or < 0 */
int ds_ledger_record_origin(ds_ledger_records *r, int64_t id, char *source, size_t size,
			    int64_t *epoch, int64_t *seq, ds_err *err);

/**
 * The upserts and deletes after id `after` of source (NULL: of all): how
 * many, and when the oldest was committed (s since the epoch, 0 when none).
 */
int ds_ledger_records_backlog(ds_ledger_records *r, int64_t after, const char *source, uint64_t *n,
			      int64_t *oldest_s, ds_err *err);

/** How many records the ledger holds (what compaction left). @return 0, or a negative errno */
int ds_ledger_records_count(ds_ledger_records *r, uint64_t *n, ds_err *err);

/**
 * The upserts and deletes after id `after`, per source (ds_store_sum_by_source:
 * fn may be told a source more than once, and adds); fn < 0 stops with that value.
 * @return 0, or a negative errno
 */
int ds_ledger_records_backlog_each(ds_ledger_records *r, int64_t after,
				   int (*fn)(void *ud, const char *source, uint64_t n), void *ud,
				   ds_err *err);

/**
 * Each key of the manifest of source's snapshot that ended at (epoch, seq).
 * @return the keys handed to fn, or a negative errno
 */
int ds_ledger_manifest_each(ds_ledger_records *r, const char *source, int64_t epoch, int64_t seq,
			    int (*fn)(void *ud, const char *key), void *ud, ds_err *err);

/** Each source, by name. @return the sources handed to fn, or a negative errno */
int ds_ledger_sources_each(ds_ledger_records *r,
			   int (*fn)(void *ud, const ds_ledger_source_row *row), void *ud,
			   ds_err *err);

#endif
