#ifndef DRASYNC_RECORD_H
#define DRASYNC_RECORD_H

/*
 * One replication record as the exporter builds it and the importer receives
 * it: an object change (upsert or tombstone) or a snapshot marker, numbered
 * (epoch, seq) by the source's outbox. All pointers are borrowed.
 */

#include <stddef.h>
#include <stdint.h>

#define DS_HASH_LEN 32 /* SHA-256 */

enum ds_record_op {
	DS_RECORD_UPSERT = 1,
	DS_RECORD_DELETE = 2,	      /* tombstone: no payload */
	DS_RECORD_SNAPSHOT_BEGIN = 3, /* snapshot_id set */
	DS_RECORD_SNAPSHOT_END = 4,   /* snapshot_id and the manifest set */
	DS_RECORD_RELOCATE = 5,	      /* ns: fail it over once applied up to here (SPEC §5) */
	/* snapshot_id, a part of the manifest, parts_left: the SNAPSHOT_END at seq +
	 * parts_left ends the snapshot with the union of its parts' manifests */
	DS_RECORD_SNAPSHOT_PART = 6,
	DS_RECORD_OP_MAX
};

/* What the target did with a record; travels back in the Ack. */
enum ds_result_status {
	DS_RESULT_OK = 1,
	DS_RESULT_DUPLICATE = 2, /* already committed earlier: acknowledged, not handed on */
	DS_RESULT_FAILED = 3,	 /* committed; the handler failed (message says why) */
	DS_RESULT_SKIPPED = 4,	 /* committed; the handler chose not to act */
	/* Apply results, in a later Ack (SPEC §6); FAILED and SKIPPED serve there too. */
	DS_RESULT_APPLIED = 5, /* the object is on the target as the record says, or deleted */
	DS_RESULT_WAITING = 6, /* a workload waits for objects it needs (message names them) */
	DS_RESULT_HELD = 7,    /* standby: held in the target's ledger until failover */
	/* outside what the target grants the source (SPEC §5 trust boundary): nothing written */
	DS_RESULT_REFUSED = 8,
	DS_RESULT_STATUS_MAX
};

/*
 * One line of a snapshot manifest: the object's key "group/Kind/namespace/name"
 * (group "" for the core group, namespace "" for cluster-scoped objects; no
 * version, so an object keeps its key when the source serves another version)
 * and its content hash.
 */
typedef struct ds_manifest_entry {
	const char *key;
	uint8_t content_hash[DS_HASH_LEN];
} ds_manifest_entry;

typedef struct ds_record {
	uint64_t epoch; /* set by the outbox on push */
	uint64_t seq;	/* set by the outbox on push */
	enum ds_record_op op;
	const char *api_version;
	const char *kind;
	const char *ns; /* "" or NULL for cluster-scoped objects */
	const char *name;
	const char *source_uid;
	const char *source_resource_version;
	/* SHA-256 of the payload; the outbox computes it on push. */
	uint8_t content_hash[DS_HASH_LEN];
	const uint8_t *payload; /* the object as canonical JSON, uncompressed */
	size_t payload_len;
	const char *snapshot_id;	   /* SNAPSHOT_BEGIN / _PART / _END */
	const ds_manifest_entry *manifest; /* SNAPSHOT_PART / SNAPSHOT_END */
	size_t manifest_len;
	uint32_t parts_left; /* SNAPSHOT_PART: 1..DS_MANIFEST_MAX_PARTS; 0 otherwise */
} ds_record;

/* A snapshot's manifest in at most this many records (parts and the end). */
#define DS_MANIFEST_MAX_PARTS 65536u

/* The handler's verdict on one record; message is copied into the ledger and the Ack. */
typedef struct ds_record_result {
	enum ds_result_status status;
	char message[256];
} ds_record_result;

/** Name of an op ("upsert", ...) or "unknown". */
const char *ds_record_op_name(enum ds_record_op op);

/** Name of a result status ("ok", ...) or "unknown". */
const char *ds_result_status_name(enum ds_result_status status);

/** SHA-256 of data into out. */
void ds_record_hash(const void *data, size_t len, uint8_t out[DS_HASH_LEN]);

#endif
