/*
 * Ledger compaction on a real SQLite file, built as the agents build it: the
 * receiver's inbox commits (tu_ledger), the apply stage's object_state folds
 * them in and records outcomes. What goes and what stays, and that the file
 * shrinks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/ledger_compact.h"
#include "drasync/object_state.h"
#include "drasync/schemas.h"
#include "testutil.h"
#include "tu_ledger.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SOURCE "prod-east"
#define OBJECTS 20
#define VERSIONS 30
#define FAR_FUTURE (INT64_C(1) << 50)

struct env {
	char *dir;
	char path[1024];
	tu_ledger l;
	ds_object_state *st;
	ds_store *store;
	ds_ledger_compactor *c;
};

static void env_open(struct env *e)
{
	ds_err err = {0};

	tu_ledger_open(&e->l, e->path, SOURCE);
	if (ds_object_state_open(&e->st, e->path, &err) < 0)
		fail_msg("state: %s", err.msg);
	if (ds_ledger_open(&e->store, e->path, 0, &err) < 0 ||
	    ds_ledger_compactor_new(e->store, &e->c, &err) < 0)
		fail_msg("compactor: %s", err.msg);
}

/* Every connection closed: the log is copied into the file, which has its real size. */
static void env_close(struct env *e)
{
	ds_ledger_compactor_free(e->c);
	ds_store_free(e->store);
	ds_object_state_free(e->st);
	tu_ledger_close(&e->l);
	e->c = NULL;
	e->store = NULL;
	e->st = NULL;
}

static struct env *env_new(const char *name)
{
	struct env *e = calloc(1, sizeof(*e));

	assert_non_null(e);
	e->dir = tu_mkdtemp(name);
	snprintf(e->path, sizeof(e->path), "%s/ledger.db", e->dir);
	env_open(e);
	return e;
}

static void env_free(struct env *e)
{
	env_close(e);
	free(e->dir);
	free(e);
}

static long long file_size(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0 ? (long long)sb.st_size : -1;
}

/* An upsert of ConfigMap ml-team/<name> at version v, with 8 KiB of data that
 * zstd cannot make much smaller. */
static void commit_cm(struct env *e, const char *name, int v)
{
	static const char alphabet[] =
	    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/";
	uint64_t x = 0x9E3779B97F4A7C15ull ^ ((uint64_t)v << 32) ^ (uint64_t)strlen(name);
	char filler[8193];
	ds_record rec;
	char *payload = NULL;
	json_t *o;

	for (const char *p = name; *p; p++)
		x = x * 31 + (uint64_t)(unsigned char)*p;
	for (size_t i = 0; i < sizeof(filler) - 1; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		filler[i] = alphabet[x & 63];
	}
	filler[sizeof(filler) - 1] = '\0';
	o = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:i, s:s}}", "apiVersion", "v1", "kind",
		      "ConfigMap", "metadata", "name", name, "namespace", "ml-team", "data", "v", v,
		      "filler", filler);
	assert_non_null(o);
	rec = tu_record_upsert(o, "uid-1", &payload);
	rec.api_version = "v1";
	rec.kind = "ConfigMap";
	rec.ns = "ml-team";
	rec.name = name;
	tu_ledger_commit(&e->l, &rec, 1, NULL, NULL);
	json_decref(o);
	free(payload);
}

/* A snapshot (begin, end) whose manifest holds every cm-<i>. */
static void commit_snapshot(struct env *e, const char *id)
{
	ds_manifest_entry man[OBJECTS];
	char keys[OBJECTS][64];
	ds_record recs[2];

	for (int i = 0; i < OBJECTS; i++) {
		snprintf(keys[i], sizeof(keys[i]), "/ConfigMap/ml-team/cm-%d", i);
		memset(&man[i], 0, sizeof(man[i]));
		man[i].key = keys[i];
	}
	memset(recs, 0, sizeof(recs));
	recs[0].op = DS_RECORD_SNAPSHOT_BEGIN;
	recs[0].snapshot_id = id;
	recs[1].op = DS_RECORD_SNAPSHOT_END;
	recs[1].snapshot_id = id;
	recs[1].manifest = man;
	recs[1].manifest_len = OBJECTS;
	tu_ledger_commit(&e->l, recs, 2, NULL, NULL);
}

static void ingest(struct env *e)
{
	ds_err err = {0};

	if (ds_object_state_ingest(e->st, &err) < 0)
		fail_msg("ingest: %s", err.msg);
}

/* Apply every row due as the applier would: applied (with a hash) or failed. */
static void decide_all(struct env *e, enum ds_apply_state s)
{
	uint8_t h[DS_HASH_LEN] = {7};
	ds_object_state_row *rows = NULL;
	ds_err err = {0};
	size_t n = 0;

	if (ds_object_state_pick(e->st, FAR_FUTURE, 1000, &rows, &n, &err) < 0)
		fail_msg("pick: %s", err.msg);
	for (size_t i = 0; i < n; i++) {
		ds_object_state_result res = {.state = s,
					      .reason = ds_apply_state_name(s),
					      .applied_hash = s == DS_APPLY_APPLIED ? h : NULL,
					      .target_api_version = "v1",
					      .target_ns = "ml-team",
					      .target_name = rows[i].name,
					      .next_try_at = FAR_FUTURE};
		if (ds_object_state_set(e->st, rows[i].id, rows[i].record_id, &res, &err) < 0)
			fail_msg("set: %s", err.msg);
	}
	ds_object_state_rows_free(rows, n);
}

/* The results queued for the source, read and sent as the receiver does. */
static size_t send_results(struct env *e)
{
	ds_wire_result out[1000];
	ds_err err = {0};
	size_t n = 0;
	int64_t token = 0;

	if (ds_object_state_results(e->st, SOURCE, e->l.epoch, out, 1000, &n, &token, &err) < 0 ||
	    ds_object_state_results_sent(e->st, SOURCE, e->l.epoch, token, &err) < 0)
		fail_msg("results: %s", err.msg);
	return n;
}

/* Compact until nothing is left to do, a step of each kind per call (budget 0). */
static ds_ledger_compact_stats compact(struct env *e)
{
	ds_ledger_compact_stats total = {0}, s;
	ds_err err = {0};
	int rc, rounds = 0;

	do {
		rc = ds_ledger_compact(e->c, 0, &s, &err);
		if (rc < 0)
			fail_msg("compact: %s", err.msg);
		total.records += s.records;
		total.manifests += s.manifests;
		total.bytes_freed += s.bytes_freed;
		if (s.ms > total.ms)
			total.ms = s.ms; /* the longest call: a figure, not a check */
	} while (rc == 1 && ++rounds < 1000);
	assert_int_equal(rc, 0);
	/* A sweep that reached the cursor starts again from the oldest. */
	rc = ds_ledger_compact(e->c, 1000, &s, &err);
	assert_true(rc >= 0);
	total.records += s.records;
	return total;
}

static long long q(struct env *e, const char *sql)
{
	return tu_ledger_int(e->path, sql);
}

static int64_t record_of(struct env *e, int i)
{
	ds_object_state_row r;
	ds_err err = {0};
	char key[64];
	int64_t id;

	snprintf(key, sizeof(key), "core/ConfigMap/ml-team/cm-%d", i);
	if (ds_object_state_get(e->st, SOURCE, key, &r, &err) < 0)
		fail_msg("get %s: %s", key, err.msg);
	id = r.record_id;
	ds_object_state_row_dispose(&r);
	return id;
}

/* Versions first..last of every object, each applied and reported, between two snapshots. */
static void history(struct env *e, int first, int last)
{
	char name[32];

	commit_snapshot(e, "snap-1");
	for (int v = first; v <= last; v++) {
		for (int i = 0; i < OBJECTS; i++) {
			snprintf(name, sizeof(name), "cm-%d", i);
			commit_cm(e, name, v);
		}
		ingest(e);
		decide_all(e, DS_APPLY_APPLIED);
		send_results(e);
	}
	commit_snapshot(e, "snap-2");
	ingest(e);
}

static void test_ledger_compact__history_goes_live_objects_stay_file_shrinks(void **state)
{
	struct env *e = env_new("compact-history"), *f;
	ds_ledger_compact_stats s;
	long long before, after, fresh, live;
	char sql[200];

	(void)state;
	assert_int_equal(q(e, "PRAGMA auto_vacuum"), 2); /* a new ledger: incremental */
	assert_int_equal(q(e, "PRAGMA page_size"), 32768);
	history(e, 0, VERSIONS - 1);
	env_close(e);
	before = file_size(e->path);
	env_open(e);
	assert_int_equal(q(e, "SELECT count(*) FROM records"), OBJECTS * VERSIONS + 4);
	assert_int_equal(q(e, "SELECT count(*) FROM manifests"), 2 * OBJECTS);

	s = compact(e);
	/* Every superseded version went, and the first snapshot's markers and manifest;
	 * the second snapshot's end stays with its manifest (the prune reads it). */
	assert_int_equal(s.records, OBJECTS * (VERSIONS - 1) + 3);
	assert_int_equal(s.manifests, OBJECTS);
	assert_int_equal(q(e, "SELECT count(*) FROM records"), OBJECTS + 1);
	assert_int_equal(q(e, "SELECT count(*) FROM records WHERE op = 4"), 1);
	assert_int_equal(q(e, "SELECT count(DISTINCT seq) FROM manifests"), 1);
	assert_int_equal(q(e, "SELECT count(*) FROM manifests m JOIN records r ON r.source = "
			      "m.source AND r.epoch = m.epoch AND r.seq = m.seq AND r.op = 4"),
			 OBJECTS);
	/* The desired record of every key is there, with its last version. */
	for (int i = 0; i < OBJECTS; i++) {
		uint8_t *payload = NULL;
		size_t len = 0;
		int zstd = 0;
		ds_err err = {0};
		char key[64];

		snprintf(sql, sizeof(sql), "SELECT count(*) FROM records WHERE id = %lld",
			 (long long)record_of(e, i));
		assert_int_equal(q(e, sql), 1);
		snprintf(key, sizeof(key), "core/ConfigMap/ml-team/cm-%d", i);
		if (ds_object_state_payload(e->st, SOURCE, key, &payload, &len, &zstd, &err) < 0)
			fail_msg("payload %s: %s", key, err.msg);
		assert_true(len > 0);
		free(payload);
	}
	assert_true(s.bytes_freed > 0);
	assert_int_equal(q(e, "PRAGMA freelist_count"), 0);
	live = q(e, "SELECT sum(length(payload)) FROM records");
	env_close(e);
	after = file_size(e->path);
	/* The same objects at their last version in a ledger that never held more. */
	f = env_new("compact-fresh");
	history(f, VERSIONS - 1, VERSIONS - 1);
	env_close(f);
	fresh = file_size(f->path);
	print_message("ledger %lld bytes before, %lld after, %lld fresh (live payloads %lld); "
		      "longest call (one step of each kind) %lld ms\n",
		      before, after, fresh, live, (long long)s.ms);
	assert_true(after * 3 < before);
	assert_true(after * 2 <= fresh * 3);
	env_open(f);
	env_free(f);
	env_open(e);
	env_free(e);
}

static void test_ledger_compact__unapplied_and_unreported_records_stay(void **state)
{
	struct env *e = env_new("compact-keep");
	int64_t failed_v0, pending_new, kept_applied;
	char sql[200];

	(void)state;
	/* cm-0: applied at v0, then v1 fails: v0 stays (what is on the target), v1 too. */
	commit_cm(e, "cm-0", 0);
	ingest(e);
	decide_all(e, DS_APPLY_APPLIED);
	kept_applied = record_of(e, 0);
	send_results(e);
	commit_cm(e, "cm-0", 1);
	ingest(e);
	decide_all(e, DS_APPLY_FAILED);
	/* cm-1: v0 fails (never applied) and its result is not sent yet; v1 supersedes it. */
	commit_cm(e, "cm-1", 0);
	ingest(e);
	decide_all(e, DS_APPLY_FAILED);
	failed_v0 = record_of(e, 1);
	commit_cm(e, "cm-1", 1);
	ingest(e);
	/* cm-2: committed, not ingested yet (after the apply cursor). */
	commit_cm(e, "cm-2", 0);
	commit_cm(e, "cm-2", 1);
	pending_new = q(e, "SELECT max(id) FROM records");

	compact(e);
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM records WHERE id = %lld",
		 (long long)kept_applied);
	assert_int_equal(q(e, sql), 1); /* object_state.applied_record_id */
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM records WHERE id = %lld",
		 (long long)failed_v0);
	assert_int_equal(q(e, sql), 1); /* its result waits for the next Ack */
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM records WHERE id >= %lld",
		 (long long)pending_new - 1);
	assert_int_equal(q(e, sql), 2); /* not ingested: both versions */
	assert_int_equal(q(e, "SELECT count(*) FROM records"), 6);

	/* The results reach the source: the superseded failure may go now. */
	assert_true(send_results(e) > 0);
	compact(e);
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM records WHERE id = %lld",
		 (long long)failed_v0);
	assert_int_equal(q(e, sql), 0);
	assert_int_equal(q(e, "SELECT count(*) FROM records"), 5);
	/* Once ingested, cm-2's first version goes; cm-0 keeps both (v1 failed, v0 is
	 * what is on the target). */
	ingest(e);
	decide_all(e, DS_APPLY_APPLIED);
	send_results(e);
	compact(e);
	assert_int_equal(q(e, "SELECT count(*) FROM records"), 4);
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM records WHERE id = %lld",
		 (long long)kept_applied);
	assert_int_equal(q(e, sql), 1);
	env_free(e);
}

static void test_ledger_compact__an_old_file_is_left_without_vacuum(void **state)
{
	struct env *e = calloc(1, sizeof(*e));
	ds_ledger_compact_stats s;
	sqlite3 *db = NULL;
	char sql[32];

	(void)state;
	assert_non_null(e);
	e->dir = tu_mkdtemp("compact-old");
	snprintf(e->path, sizeof(e->path), "%s/ledger.db", e->dir);
	/* A ledger created before auto_vacuum: a table exists before drasync opens it. */
	assert_int_equal(sqlite3_open(e->path, &db), SQLITE_OK);
	assert_int_equal(
	    sqlite3_exec(db, "PRAGMA page_size=32768; CREATE TABLE early(x);", NULL, NULL, NULL),
	    SQLITE_OK);
	sqlite3_close(db);
	env_open(e);
	assert_int_equal(q(e, "PRAGMA auto_vacuum"), 0);
	for (int v = 0; v < VERSIONS; v++) {
		snprintf(sql, sizeof(sql), "cm-%d", 0);
		commit_cm(e, sql, v);
		ingest(e);
		decide_all(e, DS_APPLY_APPLIED);
		send_results(e);
	}
	s = compact(e);
	/* Rows go; pages stay in the file, free for the next records. */
	assert_int_equal(s.records, VERSIONS - 1);
	assert_int_equal(s.bytes_freed, 0);
	assert_true(q(e, "PRAGMA freelist_count") > 0);
	env_free(e);
}

/* The newest record stays, whatever it is: the next one committed gets a larger id than the
 * apply cursor, so the ingest sees it (relocation records have no object row: every one
 * ingested may go, but not the last, or the next id is one the cursor passed). */
static void test_ledger_compact__the_newest_record_stays_ids_never_go_back(void **state)
{
	struct env *e = env_new("compact-tail");
	ds_record rec = {.op = DS_RECORD_RELOCATE, .ns = "ml-team"};
	int64_t newest;
	ds_err err = {0};

	(void)state;
	for (int i = 0; i < 3; i++)
		tu_ledger_commit(&e->l, &rec, 1, NULL, NULL);
	assert_int_equal(ds_object_state_ingest(e->st, &err), 3);
	newest = q(e, "SELECT max(id) FROM records");
	compact(e);
	assert_int_equal(q(e, "SELECT count(*) FROM records"), 1);
	assert_int_equal(q(e, "SELECT max(id) FROM records"), newest);
	rec.ns = "web";
	tu_ledger_commit(&e->l, &rec, 1, NULL, NULL);
	assert_true(q(e, "SELECT max(id) FROM records") > newest);
	assert_int_equal(ds_object_state_ingest(e->st, &err), 1);
	assert_int_equal(q(e, "SELECT count(*) FROM relocations WHERE namespace = 'web'"), 1);
	env_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ledger_compact__history_goes_live_objects_stay_file_shrinks),
	    cmocka_unit_test(test_ledger_compact__unapplied_and_unreported_records_stay),
	    cmocka_unit_test(test_ledger_compact__an_old_file_is_left_without_vacuum),
	    cmocka_unit_test(test_ledger_compact__the_newest_record_stays_ids_never_go_back),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
