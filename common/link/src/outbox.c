#include "drasync/outbox.h"

#include "drasync/buf.h"
#include "drasync/schemas.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

/* Prune acked records in chunks, not on every ack: a DELETE per batch costs. */
#define PRUNE_CHUNK 1024

struct ds_outbox {
	ds_store *store;
	sqlite3 *db; /* the store's connection */
	char path[512];
	ds_outbox_options opt;
	ds_wire_encoder *enc;
	uint64_t epoch;
	sqlite3_stmt *ins;
	sqlite3_stmt *read;
	uint64_t pruned_through; /* cached: everything <= this is gone */
};

void ds_outbox_options_default(ds_outbox_options *opt)
{
	opt->zstd_level = 3;
	opt->compress_threshold = 512;
	opt->retain_acked = 0;
}

static int meta_get(ds_outbox *ob, const char *key, uint64_t *value, ds_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc;

	rc = sqlite3_prepare_v2(ob->db, "SELECT value FROM meta WHERE key = ?", -1, &st, NULL);
	if (rc != SQLITE_OK)
		return ds_store_fail_db(ob->db, rc, "outbox meta", err);
	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*value = (uint64_t)sqlite3_column_int64(st, 0);
		rc = 0;
	} else if (rc == SQLITE_DONE) {
		rc = -ENOENT;
	} else {
		rc = ds_store_fail_db(ob->db, rc, "outbox meta", err);
	}
	sqlite3_finalize(st);
	return rc;
}

static int meta_set(ds_outbox *ob, const char *key, uint64_t value, ds_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc;

	rc = sqlite3_prepare_v2(ob->db,
				"INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO "
				"UPDATE SET value = excluded.value",
				-1, &st, NULL);
	if (rc != SQLITE_OK)
		return ds_store_fail_db(ob->db, rc, "outbox meta", err);
	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)value);
	rc = sqlite3_step(st);
	rc = rc == SQLITE_DONE ? 0 : ds_store_fail_db(ob->db, rc, "outbox meta", err);
	sqlite3_finalize(st);
	return rc;
}

int ds_outbox_open(ds_outbox **out, const char *path, const ds_outbox_options *opt, ds_err *err)
{
	ds_outbox *ob = calloc(1, sizeof(*ob));
	uint64_t epoch = 0;
	int rc;

	if (!ob)
		return ds_err_fallback(err, -ENOMEM);
	if (opt)
		ob->opt = *opt;
	else
		ds_outbox_options_default(&ob->opt);
	snprintf(ob->path, sizeof(ob->path), "%s", path);
	rc = ds_outbox_file_open(&ob->store, path, 0, err);
	if (rc == 0)
		ob->db = ds_store_db(ob->store);
	if (rc < 0)
		goto out;
	rc = ds_store_exec(ob->store, "BEGIN IMMEDIATE", err);
	if (rc < 0)
		goto out;
	rc = meta_get(ob, "epoch", &epoch, err);
	if (rc == -ENOENT) {
		/* A new outbox is a new numbering: the target must not mistake its
		 * seq 1 for the seq 1 of an outbox that was lost. */
		do {
			if (getrandom(&epoch, sizeof(epoch), 0) != sizeof(epoch)) {
				rc = -errno;
				ds_err_set(err, "getrandom failed");
				ds_store_exec(ob->store, "ROLLBACK", NULL);
				goto out;
			}
			epoch &= INT64_MAX; /* SQLite integers are signed */
		} while (epoch == 0);
		rc = meta_set(ob, "epoch", epoch, err);
		if (rc == 0)
			rc = meta_set(ob, "last_seq", 0, err);
		if (rc == 0)
			rc = meta_set(ob, "acked_seq", 0, err);
	}
	if (rc < 0) {
		ds_store_exec(ob->store, "ROLLBACK", NULL);
		goto out;
	}
	rc = ds_store_exec(ob->store, "COMMIT", err);
	if (rc < 0)
		goto out;
	ob->epoch = epoch;
	rc = ds_wire_encoder_new(&ob->enc, ob->opt.zstd_level, ob->opt.compress_threshold);
	if (rc < 0)
		goto out;
	rc = sqlite3_prepare_v2(ob->db, "INSERT INTO outbox(seq, op, record) VALUES(?, ?, ?)", -1,
				&ob->ins, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(
		    ob->db,
		    "SELECT seq, record, op FROM outbox WHERE seq >= ? ORDER BY seq "
		    "LIMIT ?",
		    -1, &ob->read, NULL);
	rc = rc == SQLITE_OK ? 0 : ds_store_fail_db(ob->db, rc, "outbox statements", err);
out:
	if (rc < 0) {
		ds_outbox_free(ob);
		return ds_err_fallback(err, rc);
	}
	*out = ob;
	return 0;
}

void ds_outbox_free(ds_outbox *ob)
{
	if (!ob)
		return;
	sqlite3_finalize(ob->ins);
	sqlite3_finalize(ob->read);
	ds_store_free(ob->store);
	ds_wire_encoder_free(ob->enc);
	free(ob);
}

uint64_t ds_outbox_epoch(const ds_outbox *ob)
{
	return ob->epoch;
}

int ds_outbox_push(ds_outbox *ob, const ds_record *recs, size_t n, uint64_t *last_seq, ds_err *err)
{
	return ds_outbox_push_with(ob, recs, n, NULL, NULL, last_seq, err);
}

/* Records of one chunk numbered from *seq on, encoded, inserted; then the hook
 * (may be NULL) on them as stored. Inside the caller's transaction. */
static int push_chunk(ds_outbox *ob, const ds_record *recs, size_t n, ds_outbox_hook hook, void *ud,
		      uint64_t *seq, ds_err *err)
{
	ds_record *pushed = NULL;
	int rc = 0;

	if (hook) {
		pushed = calloc(n, sizeof(*pushed));
		if (!pushed)
			return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		ds_record r = recs[i];
		uint8_t *buf = NULL;
		size_t len = 0;
		int src;

		r.epoch = ob->epoch;
		r.seq = ++*seq;
		ds_record_hash(r.payload, r.payload_len, r.content_hash);
		if (pushed)
			pushed[i] = r;
		rc = ds_wire_record_encode(ob->enc, &r, &buf, &len, err);
		if (rc < 0)
			goto out;
		sqlite3_reset(ob->ins);
		sqlite3_bind_int64(ob->ins, 1, (sqlite3_int64)r.seq);
		sqlite3_bind_int(ob->ins, 2, (int)r.op);
		sqlite3_bind_blob(ob->ins, 3, buf, (int)len, free);
		src = sqlite3_step(ob->ins);
		if (src != SQLITE_DONE) {
			rc = ds_store_fail_db(ob->db, src, "outbox insert", err);
			goto out;
		}
	}
	if (hook) {
		rc = hook(ud, ob->db, pushed, n, err);
		if (rc < 0 && err && !err->msg[0])
			ds_err_set(err, "outbox push hook: %s", strerror(-rc));
	}
out:
	free(pushed);
	sqlite3_reset(ob->ins);
	sqlite3_clear_bindings(ob->ins);
	return rc;
}

/* A push's transaction: chunks from next (or the one chunk recs/n), last_seq. */
static int push_all(ds_outbox *ob, const ds_record *recs, size_t n, ds_outbox_next next,
		    void *next_ud, ds_outbox_hook hook, void *ud, uint64_t *last_seq, ds_err *err)
{
	uint64_t seq = 0;
	int rc = ds_store_exec(ob->store, "BEGIN IMMEDIATE", err);

	if (rc < 0)
		return ds_err_fallback(err, rc);
	rc = meta_get(ob, "last_seq", &seq, err);
	if (rc == 0 && !next)
		rc = push_chunk(ob, recs, n, hook, ud, &seq, err);
	while (rc == 0 && next) {
		rc = next(next_ud, &recs, &n, err);
		if (rc < 0 || n == 0)
			break;
		rc = push_chunk(ob, recs, n, hook, ud, &seq, err);
	}
	if (rc == 0)
		rc = meta_set(ob, "last_seq", seq, err);
	if (rc < 0) {
		ds_store_exec(ob->store, "ROLLBACK", NULL);
		return ds_err_fallback(err, rc);
	}
	rc = ds_store_exec(ob->store, "COMMIT", err);
	if (rc < 0) {
		ds_store_exec(ob->store, "ROLLBACK", NULL);
		return ds_err_fallback(err, rc);
	}
	if (last_seq)
		*last_seq = seq;
	return 0;
}

int ds_outbox_push_with(ds_outbox *ob, const ds_record *recs, size_t n, ds_outbox_hook hook,
			void *ud, uint64_t *last_seq, ds_err *err)
{
	if (n == 0)
		return 0;
	return push_all(ob, recs, n, NULL, NULL, hook, ud, last_seq, err);
}

int ds_outbox_push_each(ds_outbox *ob, ds_outbox_next next, void *next_ud, ds_outbox_hook hook,
			void *ud, uint64_t *last_seq, ds_err *err)
{
	return push_all(ob, NULL, 0, next, next_ud, hook, ud, last_seq, err);
}

int ds_outbox_state_get(ds_outbox *ob, ds_outbox_state *out, ds_err *err)
{
	ds_outbox_state s = {0, 0, 0};
	sqlite3_stmt *st = NULL;
	int rc;

	/* One read transaction so the three values agree. */
	rc = ds_store_exec(ob->store, "BEGIN", err);
	if (rc < 0)
		return ds_err_fallback(err, rc);
	rc = meta_get(ob, "last_seq", &s.last_seq, err);
	if (rc == 0)
		rc = meta_get(ob, "acked_seq", &s.acked_seq, err);
	if (rc < 0)
		goto out;
	rc = sqlite3_prepare_v2(ob->db, "SELECT min(seq) FROM outbox", -1, &st, NULL);
	if (rc != SQLITE_OK) {
		rc = ds_store_fail_db(ob->db, rc, "outbox state", err);
		goto out;
	}
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
		s.first_seq = (uint64_t)sqlite3_column_int64(st, 0);
	else
		s.first_seq = s.last_seq + 1;
	rc = 0;
out:
	sqlite3_finalize(st);
	ds_store_exec(ob->store, "COMMIT", NULL);
	if (rc == 0)
		*out = s;
	return ds_err_fallback(err, rc);
}

void ds_outbox_batch_dispose(ds_outbox_batch *b)
{
	if (!b)
		return;
	free(b->records);
	free(b->arena);
	memset(b, 0, sizeof(*b));
}

int ds_outbox_read(ds_outbox *ob, uint64_t from_seq, size_t max_records, size_t max_bytes,
		   ds_outbox_batch *out, ds_err *err)
{
	ds_outbox_batch b = {0};
	size_t cap = 0, *offs = NULL;
	int rc = 0, src;

	if (max_records == 0)
		max_records = 1;
	b.records = calloc(max_records, sizeof(*b.records));
	offs = calloc(max_records, sizeof(*offs));
	if (!b.records || !offs) {
		rc = -ENOMEM;
		goto out;
	}
	sqlite3_reset(ob->read);
	sqlite3_bind_int64(ob->read, 1, (sqlite3_int64)from_seq);
	sqlite3_bind_int64(ob->read, 2, (sqlite3_int64)max_records);
	while ((src = sqlite3_step(ob->read)) == SQLITE_ROW) {
		uint64_t seq = (uint64_t)sqlite3_column_int64(ob->read, 0);
		const void *blob = sqlite3_column_blob(ob->read, 1);
		size_t len = (size_t)sqlite3_column_bytes(ob->read, 1);

		/* Consecutive only: a hole would be a bug, never sent. */
		if (seq != from_seq + b.n)
			break;
		if (b.n > 0 && b.bytes + len > max_bytes)
			break;
		if (ds_grow((void **)&b.arena, &cap, b.bytes + len, 1) < 0) {
			rc = -ENOMEM;
			goto out;
		}
		if (len)
			memcpy(b.arena + b.bytes, blob, len);
		offs[b.n] = b.bytes;
		b.records[b.n].len = len;
		b.bytes += len;
		b.n++;
		if (sqlite3_column_int(ob->read, 2) == DS_RECORD_SNAPSHOT_PART)
			b.manifest_parts = true;
	}
	if (src != SQLITE_ROW && src != SQLITE_DONE) {
		rc = ds_store_fail_db(ob->db, src, "outbox read", err);
		goto out;
	}
	/* The arena may have moved while growing: point into it only now. */
	for (size_t i = 0; i < b.n; i++)
		b.records[i].data = b.arena + offs[i];
	b.first_seq = from_seq;
	b.last_seq = b.n ? from_seq + b.n - 1 : 0;
out:
	sqlite3_reset(ob->read);
	free(offs);
	if (rc < 0) {
		ds_outbox_batch_dispose(&b);
		return ds_err_fallback(err, rc);
	}
	*out = b;
	return 0;
}

int ds_outbox_resume_point(ds_outbox *ob, uint64_t committed, uint64_t *from, ds_err *err)
{
	ds_outbox_state s;
	sqlite3_stmt *st = NULL;
	int rc;

	rc = ds_outbox_state_get(ob, &s, err);
	if (rc < 0)
		return ds_err_fallback(err, rc);
	if (committed > s.last_seq) {
		ds_err_set(err, "the target committed seq %llu but this outbox only ever held %llu",
			   (unsigned long long)committed, (unsigned long long)s.last_seq);
		return -ERANGE;
	}
	if (committed + 1 >= s.first_seq) {
		*from = committed + 1;
		return 0;
	}
	rc = sqlite3_prepare_v2(ob->db, "SELECT min(seq) FROM outbox WHERE seq > ? AND op = ?", -1,
				&st, NULL);
	if (rc != SQLITE_OK)
		return ds_store_fail_db(ob->db, rc, "outbox resume", err);
	sqlite3_bind_int64(st, 1, (sqlite3_int64)committed);
	sqlite3_bind_int(st, 2, DS_RECORD_SNAPSHOT_BEGIN);
	rc = -ENOENT;
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) {
		*from = (uint64_t)sqlite3_column_int64(st, 0);
		rc = 0;
	} else {
		ds_err_set(err,
			   "the target committed seq %llu; the outbox holds %llu..%llu: a "
			   "snapshot is required",
			   (unsigned long long)committed, (unsigned long long)s.first_seq,
			   (unsigned long long)s.last_seq);
	}
	sqlite3_finalize(st);
	return ds_err_fallback(err, rc);
}

int ds_outbox_ack(ds_outbox *ob, uint64_t seq, ds_err *err)
{
	uint64_t acked = 0;
	int rc;

	rc = ds_store_exec(ob->store, "BEGIN IMMEDIATE", err);
	if (rc < 0)
		return ds_err_fallback(err, rc);
	rc = meta_get(ob, "acked_seq", &acked, err);
	if (rc < 0 || seq <= acked)
		goto out;
	rc = meta_set(ob, "acked_seq", seq, err);
	if (rc < 0)
		goto out;
	if (seq > ob->opt.retain_acked + ob->pruned_through + PRUNE_CHUNK) {
		uint64_t upto = seq - ob->opt.retain_acked;
		sqlite3_stmt *st = NULL;
		int src =
		    sqlite3_prepare_v2(ob->db, "DELETE FROM outbox WHERE seq <= ?", -1, &st, NULL);
		if (src == SQLITE_OK) {
			sqlite3_bind_int64(st, 1, (sqlite3_int64)upto);
			src = sqlite3_step(st);
		}
		sqlite3_finalize(st);
		if (src != SQLITE_DONE) {
			rc = ds_store_fail_db(ob->db, src, "outbox prune", err);
			goto out;
		}
		ob->pruned_through = upto;
	}
out:
	if (rc < 0) {
		ds_store_exec(ob->store, "ROLLBACK", NULL);
		return ds_err_fallback(err, rc);
	}
	return ds_store_exec(ob->store, "COMMIT", err);
}
