#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/outbox.h"
#include "testutil.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void push_n(ds_outbox *ob, size_t n, enum ds_record_op op)
{
	ds_record r;
	char json[128];
	ds_err err = {0};

	for (size_t i = 0; i < n; i++) {
		memset(&r, 0, sizeof(r));
		snprintf(json, sizeof(json), "{\"metadata\":{\"name\":\"cm-%zu\"}}", i);
		r.op = op;
		r.api_version = "v1";
		r.kind = "ConfigMap";
		r.ns = "ml-team";
		r.name = "cm";
		r.snapshot_id = "snap-1";
		if (op == DS_RECORD_UPSERT) {
			r.payload = (const uint8_t *)json;
			r.payload_len = strlen(json);
		}
		assert_int_equal(ds_outbox_push(ob, &r, 1, NULL, &err), 0);
	}
}

static void test_outbox__seqs_survive_reopen_and_read_in_order(void **state)
{
	char *dir = tu_mkdtemp("outbox");
	char path[1024];
	ds_outbox *ob;
	ds_outbox_state st;
	ds_outbox_batch b;
	uint64_t epoch, from;
	ds_err err = {0};

	(void)state;
	snprintf(path, sizeof(path), "%s/outbox.db", dir);
	assert_int_equal(ds_outbox_open(&ob, path, NULL, &err), 0);
	epoch = ds_outbox_epoch(ob);
	assert_true(epoch != 0);
	push_n(ob, 10, DS_RECORD_UPSERT);
	ds_outbox_free(ob);

	assert_int_equal(ds_outbox_open(&ob, path, NULL, &err), 0);
	assert_int_equal(ds_outbox_epoch(ob), epoch);
	push_n(ob, 5, DS_RECORD_UPSERT);
	assert_int_equal(ds_outbox_state_get(ob, &st, &err), 0);
	assert_int_equal(st.first_seq, 1);
	assert_int_equal(st.last_seq, 15);
	assert_int_equal(ds_outbox_read(ob, 4, 3, 1 << 20, &b, &err), 0);
	assert_int_equal(b.n, 3);
	assert_int_equal(b.first_seq, 4);
	assert_int_equal(b.last_seq, 6);
	ds_outbox_batch_dispose(&b);
	/* max_bytes: at least one record, then stop. */
	assert_int_equal(ds_outbox_read(ob, 1, 100, 1, &b, &err), 0);
	assert_int_equal(b.n, 1);
	ds_outbox_batch_dispose(&b);
	assert_int_equal(ds_outbox_read(ob, 16, 100, 1 << 20, &b, &err), 0);
	assert_int_equal(b.n, 0);
	ds_outbox_batch_dispose(&b);
	assert_int_equal(ds_outbox_resume_point(ob, 7, &from, &err), 0);
	assert_int_equal(from, 8);
	assert_int_equal(ds_outbox_resume_point(ob, 99, &from, &err), -ERANGE);
	ds_outbox_free(ob);
	free(dir);
}

static void test_outbox__pruned_seq_requires_a_snapshot(void **state)
{
	char *dir = tu_mkdtemp("outbox");
	char path[1024];
	ds_outbox *ob;
	ds_outbox_state st;
	uint64_t from;
	ds_err err = {0};

	(void)state;
	snprintf(path, sizeof(path), "%s/outbox.db", dir);
	assert_int_equal(ds_outbox_open(&ob, path, NULL, &err), 0);
	push_n(ob, 1100, DS_RECORD_UPSERT);
	assert_int_equal(ds_outbox_ack(ob, 1100, &err), 0);
	assert_int_equal(ds_outbox_state_get(ob, &st, &err), 0);
	assert_int_equal(st.acked_seq, 1100);
	assert_int_equal(st.first_seq, 1101); /* pruned */
	/* A target that committed everything resumes after it. */
	assert_int_equal(ds_outbox_resume_point(ob, 1100, &from, &err), 0);
	assert_int_equal(from, 1101);
	/* A target that lost its ledger: the records are gone, a snapshot is needed. */
	assert_int_equal(ds_outbox_resume_point(ob, 0, &from, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "snapshot is required"));
	push_n(ob, 3, DS_RECORD_UPSERT);
	push_n(ob, 1, DS_RECORD_SNAPSHOT_BEGIN);
	push_n(ob, 2, DS_RECORD_UPSERT);
	assert_int_equal(ds_outbox_resume_point(ob, 0, &from, &err), 0);
	assert_int_equal(from, 1104);
	ds_outbox_free(ob);
	free(dir);
}

static void test_outbox__invalid_record_pushes_nothing(void **state)
{
	char *dir = tu_mkdtemp("outbox");
	char path[1024];
	ds_outbox *ob;
	ds_outbox_state st;
	ds_record r[2];
	ds_err err = {0};

	(void)state;
	snprintf(path, sizeof(path), "%s/outbox.db", dir);
	assert_int_equal(ds_outbox_open(&ob, path, NULL, &err), 0);
	memset(r, 0, sizeof(r));
	r[0].op = DS_RECORD_DELETE;
	r[0].api_version = "v1";
	r[0].kind = "Secret";
	r[0].name = "s";
	r[1].op = DS_RECORD_DELETE; /* no kind */
	assert_int_equal(ds_outbox_push(ob, r, 2, NULL, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "kind"));
	assert_int_equal(ds_outbox_state_get(ob, &st, &err), 0);
	assert_int_equal(st.last_seq, 0);
	ds_outbox_free(ob);
	free(dir);
}

/* The hook writes its own table in the push's transaction: it sees the seqs
 * and hashes assigned, and its failure takes the records back with it. */
struct hook_ud {
	int fail;
	uint64_t seqs[4];
	uint8_t hash0[DS_HASH_LEN];
	size_t n;
};

static int note_seqs(void *ud, struct sqlite3 *db, const ds_record *pushed, size_t n, ds_err *err)
{
	struct hook_ud *h = ud;
	char sql[128];

	for (size_t i = 0; i < n && i < 4; i++) {
		h->seqs[i] = pushed[i].seq;
		snprintf(sql, sizeof(sql), "INSERT INTO side(seq) VALUES(%llu)",
			 (unsigned long long)pushed[i].seq);
		if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
			return -EIO;
	}
	memcpy(h->hash0, pushed[0].content_hash, DS_HASH_LEN);
	h->n = n;
	if (h->fail) {
		ds_err_set(err, "hook refused");
		return -ECANCELED;
	}
	return 0;
}

static long long side_rows(const char *path)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	long long v = -1;

	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	if (sqlite3_prepare_v2(db, "SELECT count(*) FROM side", -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return v;
}

static void test_outbox__push_hook_commits_or_rolls_back_with_the_records(void **state)
{
	char *dir = tu_mkdtemp("outbox");
	char path[1024];
	const char *json = "{\"a\":1}";
	struct hook_ud h = {0};
	uint8_t want[DS_HASH_LEN];
	ds_outbox *ob;
	ds_outbox_state st;
	ds_record r[2];
	uint64_t last = 0;
	ds_err err = {0};

	(void)state;
	snprintf(path, sizeof(path), "%s/outbox.db", dir);
	assert_int_equal(ds_outbox_open(&ob, path, NULL, &err), 0);
	{
		sqlite3 *db = NULL;
		assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
		assert_int_equal(
		    sqlite3_exec(db, "CREATE TABLE side(seq INTEGER)", NULL, NULL, NULL),
		    SQLITE_OK);
		sqlite3_close(db);
	}
	memset(r, 0, sizeof(r));
	for (int i = 0; i < 2; i++) {
		r[i].op = DS_RECORD_UPSERT;
		r[i].api_version = "v1";
		r[i].kind = "ConfigMap";
		r[i].ns = "ns";
		r[i].name = i ? "b" : "a";
		r[i].payload = (const uint8_t *)json;
		r[i].payload_len = strlen(json);
	}
	assert_int_equal(ds_outbox_push_with(ob, r, 2, note_seqs, &h, &last, &err), 0);
	assert_int_equal(h.n, 2);
	assert_int_equal(h.seqs[0], 1);
	assert_int_equal(h.seqs[1], 2);
	assert_int_equal(last, 2);
	ds_record_hash(json, strlen(json), want);
	assert_memory_equal(h.hash0, want, DS_HASH_LEN);
	assert_int_equal(side_rows(path), 2);

	h.fail = 1;
	last = 0;
	assert_int_equal(ds_outbox_push_with(ob, r, 2, note_seqs, &h, &last, &err), -ECANCELED);
	assert_string_equal(err.msg, "hook refused");
	assert_int_equal(last, 0);
	assert_int_equal(h.seqs[0], 3); /* the hook saw the seqs it would have had */
	assert_int_equal(side_rows(path), 2);
	assert_int_equal(ds_outbox_state_get(ob, &st, &err), 0);
	assert_int_equal(st.last_seq, 2);

	/* the seqs are not burnt: the next push takes them */
	h.fail = 0;
	assert_int_equal(ds_outbox_push_with(ob, r, 1, note_seqs, &h, &last, &err), 0);
	assert_int_equal(last, 3);
	assert_int_equal(side_rows(path), 3);
	ds_outbox_free(ob);
	free(dir);
}

/* Parts of a manifest, one record a call; fail_at: the call that fails (0: none). */
struct parts {
	ds_manifest_entry e[3];
	ds_record rec;
	int calls, fail_at;
	size_t hooked;
};

static int next_part(void *ud, const ds_record **recs, size_t *n, ds_err *err)
{
	struct parts *p = ud;

	(void)err;
	*n = 0;
	if (++p->calls == p->fail_at)
		return -EIO;
	if (p->calls > 3)
		return 0;
	memset(&p->rec, 0, sizeof(p->rec));
	p->rec.op = p->calls < 3 ? DS_RECORD_SNAPSHOT_PART : DS_RECORD_SNAPSHOT_END;
	p->rec.parts_left = (uint32_t)(3 - p->calls);
	p->rec.snapshot_id = "snap-1";
	p->rec.manifest = &p->e[p->calls - 1];
	p->rec.manifest_len = 1;
	*recs = &p->rec;
	*n = 1;
	return 0;
}

static int count_hooked(void *ud, struct sqlite3 *db, const ds_record *pushed, size_t n,
			ds_err *err)
{
	struct parts *p = ud;

	(void)db;
	(void)pushed;
	(void)err;
	p->hooked += n;
	return 0;
}

/*
 * A push a chunk at a time is one transaction: a failure at the last chunk
 * leaves nothing of the earlier ones; a whole one numbers the records in
 * order and runs the hook on every chunk.
 */
static void test_outbox__push_each_is_all_or_nothing(void **state)
{
	char *dir = tu_mkdtemp("outbox-each");
	char path[1024];
	struct parts p = {
	    .e = {{.key = "/ConfigMap/a/x"}, {.key = "/ConfigMap/a/y"}, {.key = "/ConfigMap/a/z"}}};
	ds_outbox *ob;
	ds_outbox_state st;
	ds_outbox_batch b;
	uint64_t last = 0;
	ds_err err = {0};

	(void)state;
	snprintf(path, sizeof(path), "%s/outbox.db", dir);
	assert_int_equal(ds_outbox_open(&ob, path, NULL, &err), 0);
	push_n(ob, 2, DS_RECORD_UPSERT);
	p.fail_at = 3;
	assert_int_equal(ds_outbox_push_each(ob, next_part, &p, count_hooked, &p, &last, &err),
			 -EIO);
	assert_int_equal(ds_outbox_state_get(ob, &st, &err), 0);
	assert_int_equal(st.last_seq, 2);
	assert_int_equal(ds_outbox_read(ob, 3, 10, 1u << 20, &b, &err), 0);
	assert_int_equal(b.n, 0);
	ds_outbox_batch_dispose(&b);

	p.calls = 0;
	p.fail_at = 0;
	p.hooked = 0;
	assert_int_equal(ds_outbox_push_each(ob, next_part, &p, count_hooked, &p, &last, &err), 0);
	assert_int_equal(last, 5);
	assert_int_equal(p.hooked, 3);
	assert_int_equal(ds_outbox_read(ob, 3, 10, 1u << 20, &b, &err), 0);
	assert_int_equal(b.n, 3);
	assert_true(b.manifest_parts);
	ds_outbox_batch_dispose(&b);
	assert_int_equal(ds_outbox_read(ob, 5, 10, 1u << 20, &b, &err), 0);
	assert_int_equal(b.n, 1);
	assert_false(b.manifest_parts); /* the end alone */
	ds_outbox_batch_dispose(&b);
	ds_outbox_free(ob);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_outbox__seqs_survive_reopen_and_read_in_order),
	    cmocka_unit_test(test_outbox__pruned_seq_requires_a_snapshot),
	    cmocka_unit_test(test_outbox__invalid_record_pushes_nothing),
	    cmocka_unit_test(test_outbox__push_hook_commits_or_rolls_back_with_the_records),
	    cmocka_unit_test(test_outbox__push_each_is_all_or_nothing),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
