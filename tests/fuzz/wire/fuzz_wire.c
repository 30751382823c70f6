/*
 * libFuzzer target: ds_wire_decode() on arbitrary bytes, as the receiver and
 * the sender do with every frame from the network. Whatever the input, the
 * decoder returns a validated message or an error, within its memory budget.
 * Batch and ZBatch frames (a Batch in one zstd frame: corpus/zbatch) both
 * decode to the records checked below.
 * Built with clang in its own tree (tests/fuzz/CMakeLists.txt, -DDS_FUZZ=ON);
 * seeds in tests/fuzz/wire/corpus.
 */
#include "drasync/wire.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static ds_wire_decoder *dec;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	ds_wire_msg *msg = NULL;
	ds_err err = {0};

	if (!dec) {
		ds_wire_limits lim;
		ds_wire_limits_default(&lim);
		lim.max_decoded = 8u << 20;
		lim.max_record = 1u << 20;
		if (ds_wire_decoder_new(&dec, &lim) < 0)
			abort();
	}
	if (ds_wire_decode(dec, data, size, &msg, &err) < 0) {
		if (!err.msg[0] && msg)
			abort();
		return 0;
	}
	/* Touch everything a caller would read. */
	switch (ds_wire_msg_kind(msg)) {
	case DS_WIRE_HELLO:
		if (strlen(ds_wire_msg_hello(msg)->cluster_name) == 0)
			abort(); /* validated non-empty */
		break;
	case DS_WIRE_ACK: {
		const ds_wire_ack *a = ds_wire_msg_ack(msg);
		for (size_t i = 0; i < a->n_results; i++)
			if (strlen(a->results[i].message) > size)
				abort();
		break;
	}
	case DS_WIRE_BATCH:
		for (size_t i = 0; i < ds_wire_msg_record_count(msg); i++) {
			const ds_record *r = ds_wire_msg_record(msg, i);
			uint8_t h[DS_HASH_LEN];
			int zstd;
			ds_wire_msg_record_wire_payload(msg, i, &zstd);
			/* Plain payloads are promised to match their SHA-256
			 * (compressed ones their zstd checksum, which zstd checked). */
			if (r->payload_len && !zstd) {
				ds_record_hash(r->payload, r->payload_len, h);
				if (memcmp(h, r->content_hash, DS_HASH_LEN) != 0)
					abort(); /* decode promised a verified payload */
			}
			for (size_t k = 0; k < r->manifest_len; k++)
				(void)strlen(r->manifest[k].key);
		}
		break;
	default:
		break;
	}
	ds_wire_msg_free(msg);
	return 0;
}
