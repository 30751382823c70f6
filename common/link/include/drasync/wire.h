#ifndef DRASYNC_WIRE_H
#define DRASYNC_WIRE_H

/*
 * The frames of the replication protocol (proto/drasync.proto): one ZeroMQ
 * frame is one protobuf Envelope. Encoding is for our own messages; decoding
 * takes untrusted bytes and either returns a fully validated message or
 * -EBADMSG with the reason, never more memory than the limits allow.
 */

#include "drasync/err.h"
#include "drasync/record.h"

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#define DS_PROTOCOL_VERSION 1

typedef struct ds_wire_limits {
	size_t max_frame;   /* largest frame (also ZMQ_MAXMSGSIZE); default 8 MiB */
	size_t max_record;  /* largest uncompressed payload; default 16 MiB */
	size_t max_decoded; /* memory one decoded frame may take, payloads included; 128 MiB */
	size_t max_batch;   /* records in one batch; default 4096 */
	size_t max_zbatch;  /* a ZBatch's decompressed Batch; default 32 MiB */
} ds_wire_limits;

/** Fill the defaults above. */
void ds_wire_limits_default(ds_wire_limits *lim);

enum ds_wire_kind {
	DS_WIRE_HELLO = 1,
	DS_WIRE_WELCOME,
	DS_WIRE_BATCH,
	DS_WIRE_ACK,
	DS_WIRE_GOODBYE,
	DS_WIRE_KIND_MAX
};

typedef struct ds_wire_hello {
	uint32_t protocol_version;
	const char *cluster_name;
	const char *agent_version;
	uint64_t epoch;
	bool zbatch; /* capability "zbatch": the source can send ZBatch frames */
} ds_wire_hello;

#define DS_CAP_APPLY_RESULTS "apply-results"
/* A batch's records in one zstd frame (Envelope.zbatch): sent only to a target
 * whose Welcome lists it; an older target's does not, and gets Batch frames. */
#define DS_CAP_ZBATCH "zbatch"
/* A large snapshot's manifest in SNAPSHOT_PART records before its SNAPSHOT_END:
 * sent only to a target whose Welcome lists it (an older target would take the
 * end's entries for the whole manifest and prune the rest). */
#define DS_CAP_MANIFEST_PARTS "manifest-parts"

typedef struct ds_wire_welcome {
	uint32_t protocol_version;
	const char *agent_version;
	uint64_t epoch;
	uint64_t committed_seq;
	uint32_t credit;
	const char *source_name;
	bool apply_results;  /* capability "apply-results": apply results follow in later Acks */
	bool zbatch;	     /* capability "zbatch": the target takes ZBatch frames */
	bool manifest_parts; /* capability "manifest-parts": the target takes SNAPSHOT_PART */
} ds_wire_welcome;

typedef struct ds_wire_result {
	uint64_t seq;
	enum ds_result_status status;
	const char *message;
} ds_wire_result;

typedef struct ds_wire_ack {
	uint64_t epoch;
	uint64_t committed_seq;
	uint32_t credit;
	const ds_wire_result *results; /* of the records this Ack commits */
	size_t n_results;
	const ds_wire_result *applied; /* apply results of records committed earlier */
	size_t n_applied;
	uint64_t unapplied; /* the target's backlog of committed, unapplied records */
} ds_wire_ack;

/* A borrowed byte range. */
typedef struct ds_wire_blob {
	const uint8_t *data;
	size_t len;
} ds_wire_blob;

/*
 * Encoders: *out is malloc'ed and owned by the caller (free()).
 * @return 0 or -ENOMEM / -EINVAL
 */
int ds_wire_hello_encode(const ds_wire_hello *h, uint8_t **out, size_t *len);
int ds_wire_welcome_encode(const ds_wire_welcome *w, uint8_t **out, size_t *len);
int ds_wire_ack_encode(const ds_wire_ack *a, uint8_t **out, size_t *len);
int ds_wire_goodbye_encode(const char *reason, uint8_t **out, size_t *len);

/**
 * A batch frame from records already encoded by ds_wire_record_encode(): the
 * bytes are concatenated, never re-encoded.
 */
int ds_wire_batch_encode(const ds_wire_blob *records, size_t n, uint8_t **out, size_t *len);

/** Bytes a record of `record_len` adds to a batch frame (its length prefix included). */
size_t ds_wire_batch_cost(size_t record_len);

/*
 * ZBatch frames: the records of one batch (as the outbox holds them, payloads
 * compressed one by one) with their payloads plain, as one Batch compressed
 * in one zstd frame (content size and XXH64 checksum), so what records share
 * (keys, labels, images, namespaces) is paid for once a batch.
 */
typedef struct ds_wire_zbatcher ds_wire_zbatcher;

/** @return 0, -ENOMEM or -EINVAL (a bad level). max_plain: the largest Batch it compresses */
int ds_wire_zbatcher_new(ds_wire_zbatcher **out, int zstd_level, size_t max_plain);
void ds_wire_zbatcher_free(ds_wire_zbatcher *z);

/**
 * An Envelope{zbatch} of records[0..n) (each from ds_wire_record_encode()).
 * *plain_bytes: the payloads' JSON bytes (what compression is measured against).
 * @return 0; -E2BIG when the plain Batch is over max_plain or the frame would
 * not be smaller than ds_wire_batch_encode()'s (send that one then);
 * -EBADMSG for a record that does not decode; -ENOMEM
 */
int ds_wire_zbatch_encode(ds_wire_zbatcher *z, const ds_wire_blob *records, size_t n, uint8_t **out,
			  size_t *len, uint64_t *plain_bytes);

/** The payloads' JSON bytes of records[0..n) (their raw sizes), for a Batch frame's figures. */
uint64_t ds_wire_records_plain_bytes(const ds_wire_blob *records, size_t n);

/* Encodes records, compressing payloads with zstd above a threshold. */
typedef struct ds_wire_encoder ds_wire_encoder;

/** @return 0 or -ENOMEM. level: zstd level (1..19); threshold: bytes below which no compression */
int ds_wire_encoder_new(ds_wire_encoder **out, int zstd_level, size_t threshold);
void ds_wire_encoder_free(ds_wire_encoder *enc);

/**
 * Encode one protobuf Record. rec->content_hash is sent as given (the outbox
 * fills it); the payload is compressed when that makes it smaller.
 * @return 0, -EINVAL for an invalid record (err says why), -ENOMEM
 */
int ds_wire_record_encode(ds_wire_encoder *enc, const ds_record *rec, uint8_t **out, size_t *len,
			  ds_err *err);

/* Decodes untrusted frames; owns a zstd context, so one per thread. */
typedef struct ds_wire_decoder ds_wire_decoder;
typedef struct ds_wire_msg ds_wire_msg;

/** @return 0 or -ENOMEM. lim NULL: defaults. */
int ds_wire_decoder_new(ds_wire_decoder **out, const ds_wire_limits *lim);
void ds_wire_decoder_free(ds_wire_decoder *dec);

/**
 * Decode and validate one frame. For a batch: records carry one epoch, seq
 * ascend by one (a SNAPSHOT_BEGIN may jump ahead), every payload decompresses
 * to its declared size within the limits; a compressed payload must pass its
 * zstd content checksum, a plain one must match its SHA-256.
 * @return 0, -EBADMSG (err says why), -E2BIG (over a limit), -ENOMEM
 */
int ds_wire_decode(ds_wire_decoder *dec, const void *frame, size_t len, ds_wire_msg **out,
		   ds_err *err);
void ds_wire_msg_free(ds_wire_msg *msg);

enum ds_wire_kind ds_wire_msg_kind(const ds_wire_msg *msg);
/* Views into msg (NULL when msg is of another kind); they live as long as msg. */
const ds_wire_hello *ds_wire_msg_hello(const ds_wire_msg *msg);
const ds_wire_welcome *ds_wire_msg_welcome(const ds_wire_msg *msg);
const ds_wire_ack *ds_wire_msg_ack(const ds_wire_msg *msg);
const char *ds_wire_msg_goodbye(const ds_wire_msg *msg);
size_t ds_wire_msg_record_count(const ds_wire_msg *msg);
/** The JSON bytes (uncompressed payloads) of a batch's records. */
uint64_t ds_wire_msg_json_bytes(const ds_wire_msg *msg);
/** Record i of a batch, payload uncompressed. */
const ds_record *ds_wire_msg_record(const ds_wire_msg *msg, size_t i);
/**
 * Record i's payload as a store keeps it; *zstd set when it is one zstd frame
 * (with its content size and checksum): as it came in a Batch, or, from a
 * ZBatch, re-compressed on its own (payloads of 512 bytes or more, when that
 * makes them smaller), so the ledger holds the same per-record frames either way.
 */
ds_wire_blob ds_wire_msg_record_wire_payload(const ds_wire_msg *msg, size_t i, int *zstd);

/**
 * The bytes a stored payload holds once decompressed (its JSON's size), read
 * from the zstd frame's header without decompressing; a frame that does not
 * say (ds_wire_payload_inflate() refuses it) counts as its stored length.
 */
size_t ds_wire_payload_plain_len(const ds_wire_blob *in, int zstd);
/** Decompress a payload stored as given by ds_wire_msg_record_wire_payload(). *out malloc'ed. */
int ds_wire_payload_inflate(const ds_wire_blob *in, int zstd, size_t max, uint8_t **out,
			    size_t *len);

#endif
