#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu_ledger.h"

#include "drasync/k8s_object.h"
#include "drasync/wire.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

void tu_ledger_open(tu_ledger *l, const char *path, const char *source)
{
	ds_err err = {0};
	uint64_t committed = 0;

	memset(l, 0, sizeof(*l));
	l->source = source;
	l->epoch = 1;
	if (ds_inbox_open(&l->ib, path, &err) < 0)
		fail_msg("inbox %s: %s", path, err.msg);
	if (ds_inbox_session(l->ib, source, source, l->epoch, &committed, &err) < 0)
		fail_msg("session: %s", err.msg);
	l->next_seq = committed + 1;
}

void tu_ledger_close(tu_ledger *l)
{
	ds_inbox_free(l->ib);
	l->ib = NULL;
}

void tu_ledger_commit(tu_ledger *l, ds_record *recs, size_t n, ds_record_handler handler, void *ud)
{
	ds_wire_encoder *enc = NULL;
	ds_wire_decoder *dec = NULL;
	ds_wire_blob *blobs = calloc(n + 1, sizeof(*blobs));
	uint8_t **bufs = calloc(n + 1, sizeof(*bufs)), *frame = NULL;
	ds_wire_result *results = calloc(n + 1, sizeof(*results));
	ds_wire_limits lim;
	ds_wire_msg *msg = NULL;
	ds_err err = {0};
	uint64_t committed = 0;
	size_t len = 0;

	assert_non_null(blobs);
	assert_non_null(bufs);
	assert_non_null(results);
	ds_wire_limits_default(&lim);
	assert_int_equal(ds_wire_encoder_new(&enc, 1, 256), 0);
	assert_int_equal(ds_wire_decoder_new(&dec, &lim), 0);
	for (size_t i = 0; i < n; i++) {
		recs[i].epoch = l->epoch;
		recs[i].seq = l->next_seq + i;
		if (recs[i].payload)
			ds_record_hash(recs[i].payload, recs[i].payload_len, recs[i].content_hash);
		if (ds_wire_record_encode(enc, &recs[i], &bufs[i], &blobs[i].len, &err) < 0)
			fail_msg("encode: %s", err.msg);
		blobs[i].data = bufs[i];
	}
	assert_int_equal(ds_wire_batch_encode(blobs, n, &frame, &len), 0);
	if (ds_wire_decode(dec, frame, len, &msg, &err) < 0)
		fail_msg("decode: %s", err.msg);
	if (ds_inbox_commit(l->ib, l->source, l->epoch, msg, handler, ud, results, &committed,
			    &err) < 0)
		fail_msg("commit: %s", err.msg);
	assert_int_equal(committed, l->next_seq + n - 1);
	l->next_seq += n;
	ds_wire_msg_free(msg);
	for (size_t i = 0; i < n; i++)
		free(bufs[i]);
	free(bufs);
	free(blobs);
	free(results);
	free(frame);
	ds_wire_encoder_free(enc);
	ds_wire_decoder_free(dec);
}

ds_record tu_record_upsert(const json_t *obj, const char *source_uid, char **payload)
{
	ds_record r;

	memset(&r, 0, sizeof(r));
	*payload = json_dumps(obj, JSON_COMPACT | JSON_SORT_KEYS);
	assert_non_null(*payload);
	r.op = DS_RECORD_UPSERT;
	r.api_version = ds_obj_api_version(obj);
	r.kind = ds_obj_kind(obj);
	r.ns = ds_obj_namespace(obj);
	r.name = ds_obj_name(obj);
	r.source_uid = source_uid;
	r.source_resource_version = "1";
	r.payload = (const uint8_t *)*payload;
	r.payload_len = strlen(*payload);
	return r;
}

ds_record tu_record_tombstone(const char *api_version, const char *kind, const char *ns,
			      const char *name, const char *source_uid)
{
	ds_record r;

	memset(&r, 0, sizeof(r));
	r.op = DS_RECORD_DELETE;
	r.api_version = api_version;
	r.kind = kind;
	r.ns = ns;
	r.name = name;
	r.source_uid = source_uid;
	return r;
}

long long tu_ledger_int(const char *path, const char *sql)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	long long v = -1;

	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
		fail_msg("ledger %s: %s", path, db ? sqlite3_errmsg(db) : "cannot open");
	sqlite3_busy_timeout(db, 10000);
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		fail_msg("ledger: %s: %s", sql, sqlite3_errmsg(db));
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return v;
}
