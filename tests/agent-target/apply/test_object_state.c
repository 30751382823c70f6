/*
 * The apply state table on real SQLite files, fed by real inbox commits: what
 * the applier will pick, and what it keeps between passes and restarts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/object_state.h"
#include "testutil.h"
#include "tu_ledger.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SOURCE "prod-east"
#define FAR_FUTURE (INT64_C(1) << 50)

struct env {
	char *dir;
	char path[1024];
	tu_ledger l;
	ds_object_state *st;
};

static struct env *env_new(const char *name)
{
	struct env *e = calloc(1, sizeof(*e));
	ds_err err = {0};

	assert_non_null(e);
	e->dir = tu_mkdtemp(name);
	snprintf(e->path, sizeof(e->path), "%s/ledger.db", e->dir);
	tu_ledger_open(&e->l, e->path, SOURCE);
	if (ds_object_state_open(&e->st, e->path, &err) < 0)
		fail_msg("state: %s", err.msg);
	return e;
}

static void env_free(struct env *e)
{
	ds_object_state_free(e->st);
	tu_ledger_close(&e->l);
	free(e->dir);
	free(e);
}

/* Commit upserts of ConfigMap ml-team/<name> with data.v = values[i], one batch. */
static void commit_cm(struct env *e, const char *name, const int *values, size_t n)
{
	ds_record recs[64];
	char *payloads[64];

	assert_true(n <= 64);
	for (size_t i = 0; i < n; i++) {
		json_t *o = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:i}}", "apiVersion", "v1",
				      "kind", "ConfigMap", "metadata", "name", name, "namespace",
				      "ml-team", "data", "v", values[i]);
		assert_non_null(o);
		recs[i] = tu_record_upsert(o, "uid-1", &payloads[i]);
		/* the record's strings point into o: keep it until the commit */
		recs[i].api_version = "v1";
		recs[i].kind = "ConfigMap";
		recs[i].ns = "ml-team";
		recs[i].name = name;
		json_decref(o);
	}
	tu_ledger_commit(&e->l, recs, n, NULL, NULL);
	for (size_t i = 0; i < n; i++)
		free(payloads[i]);
}

static int ingest(struct env *e)
{
	ds_err err = {0};
	int n = ds_object_state_ingest(e->st, &err);

	if (n < 0)
		fail_msg("ingest: %s", err.msg);
	return n;
}

static size_t pick(struct env *e, ds_object_state_row **rows)
{
	ds_err err = {0};
	size_t n = 0;

	if (ds_object_state_pick(e->st, 1000, 100, rows, &n, &err) < 0)
		fail_msg("pick: %s", err.msg);
	return n;
}

static ds_object_state_row get(struct env *e, const char *key)
{
	ds_object_state_row r;
	ds_err err = {0};

	if (ds_object_state_get(e->st, SOURCE, key, &r, &err) < 0)
		fail_msg("get %s: %s", key, err.msg);
	return r;
}

static void set(struct env *e, const ds_object_state_row *r, enum ds_apply_state s,
		const uint8_t *hash, int64_t next_try_at)
{
	ds_object_state_result res = {.state = s,
				      .reason = ds_apply_state_name(s),
				      .applied_hash = hash,
				      .target_api_version = "v1",
				      .target_ns = "ml-team-dr",
				      .target_name = r->name,
				      .next_try_at = next_try_at};
	ds_err err = {0};

	if (ds_object_state_set(e->st, r->id, r->record_id, &res, &err) < 0)
		fail_msg("set: %s", err.msg);
}

static void test_object_state__burst_leaves_one_pending_row_at_the_newest(void **state)
{
	struct env *e = env_new("ostate-burst");
	ds_object_state_row *rows = NULL;
	int v[10];
	size_t n;

	(void)state;
	for (int b = 0; b < 5; b++) {
		for (int i = 0; i < 10; i++)
			v[i] = b * 10 + i;
		commit_cm(e, "cfg", v, 10);
	}
	assert_int_equal(ingest(e), 50);
	n = pick(e, &rows);
	assert_int_equal(n, 1);
	assert_string_equal(rows[0].key, "core/ConfigMap/ml-team/cfg");
	assert_int_equal(rows[0].seq, 50);
	assert_int_equal(rows[0].state, DS_APPLY_PENDING);
	assert_string_equal(rows[0].source_uid, "uid-1");
	assert_string_equal(rows[0].source_cluster, SOURCE);
	/* the payload is the newest record's */
	assert_non_null(rows[0].payload);
	assert_non_null(strstr((const char *)rows[0].payload, "\"v\":49"));
	ds_object_state_rows_free(rows, n);
	env_free(e);
}

static void test_object_state__unchanged_recommit_keeps_state_new_version_is_pending(void **state)
{
	struct env *e = env_new("ostate-same");
	ds_object_state_row *rows = NULL, r;
	uint8_t h[DS_HASH_LEN] = {1, 2, 3};
	int one = 1, two = 2;

	(void)state;
	commit_cm(e, "a", &one, 1);
	commit_cm(e, "b", &one, 1);
	ingest(e);
	assert_int_equal(pick(e, &rows), 2);
	set(e, &rows[0], DS_APPLY_APPLIED, h, 0);
	set(e, &rows[1], DS_APPLY_FAILED, NULL, 0);
	ds_object_state_rows_free(rows, 2);
	assert_int_equal(pick(e, &rows), 0);
	ds_object_state_rows_free(rows, 0);

	/* The same content again: nothing to do, and a failure is not retried. */
	commit_cm(e, "a", &one, 1);
	commit_cm(e, "b", &one, 1);
	assert_int_equal(ingest(e), 2);
	assert_int_equal(pick(e, &rows), 0);
	ds_object_state_rows_free(rows, 0);
	r = get(e, "core/ConfigMap/ml-team/a");
	assert_int_equal(r.state, DS_APPLY_APPLIED);
	assert_true(r.has_applied_hash);
	assert_memory_equal(r.applied_hash, h, DS_HASH_LEN);
	assert_string_equal(r.target_ns, "ml-team-dr");
	ds_object_state_row_dispose(&r);
	r = get(e, "core/ConfigMap/ml-team/b");
	assert_int_equal(r.state, DS_APPLY_FAILED);
	ds_object_state_row_dispose(&r);

	/* A new version of the failed one is tried again. */
	commit_cm(e, "b", &two, 1);
	ingest(e);
	assert_int_equal(pick(e, &rows), 1);
	assert_string_equal(rows[0].name, "b");
	assert_int_equal(rows[0].attempts, 0);
	ds_object_state_rows_free(rows, 1);
	assert_int_equal(ds_object_state_count(e->st, DS_APPLY_APPLIED, NULL), 1);
	assert_int_equal(ds_object_state_count(e->st, DS_APPLY_PENDING, NULL), 1);
	env_free(e);
}

static void test_object_state__result_for_a_superseded_record_keeps_the_newer_pending(void **state)
{
	struct env *e = env_new("ostate-stale");
	ds_object_state_row *rows = NULL, r;
	uint8_t h[DS_HASH_LEN] = {9};
	int one = 1, two = 2;

	(void)state;
	commit_cm(e, "a", &one, 1);
	ingest(e);
	assert_int_equal(pick(e, &rows), 1);
	/* while record 1 is being applied, record 2 arrives */
	commit_cm(e, "a", &two, 1);
	ingest(e);
	set(e, &rows[0], DS_APPLY_APPLIED, h, 0);
	r = get(e, "core/ConfigMap/ml-team/a");
	assert_int_equal(r.state, DS_APPLY_PENDING);
	assert_int_equal(r.seq, 2);
	assert_true(r.record_id > rows[0].record_id);
	/* what was applied is still known, so the newer one is compared with it */
	assert_true(r.has_applied_hash);
	assert_memory_equal(r.applied_hash, h, DS_HASH_LEN);
	assert_int_equal(r.applied_record_id, rows[0].record_id);
	ds_object_state_row_dispose(&r);
	ds_object_state_rows_free(rows, 1);
	env_free(e);
}

static void test_object_state__cursor_survives_reopen(void **state)
{
	struct env *e = env_new("ostate-reopen");
	ds_err err = {0};
	int v[3] = {1, 2, 3};

	(void)state;
	commit_cm(e, "a", v, 3);
	assert_int_equal(ingest(e), 3);
	ds_object_state_free(e->st);
	if (ds_object_state_open(&e->st, e->path, &err) < 0)
		fail_msg("reopen: %s", err.msg);
	assert_int_equal(ingest(e), 0);
	commit_cm(e, "a", v, 2);
	assert_int_equal(ingest(e), 2);
	env_free(e);
}

static void test_object_state__tombstones_snapshot_markers_and_keys(void **state)
{
	struct env *e = env_new("ostate-ops");
	ds_object_state_row *rows = NULL;
	ds_record recs[4];
	char *p1 = NULL, *p2 = NULL;
	json_t *dc = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "resource.k8s.io/v1", "kind",
			       "DeviceClass", "metadata", "name", "gpu.example.com");
	json_t *dep = json_pack("{s:s, s:s, s:{s:s, s:s}}", "apiVersion", "apps/v1", "kind",
				"Deployment", "metadata", "name", "app", "namespace", "ml-team");
	size_t n;

	(void)state;
	memset(&recs[0], 0, sizeof(recs[0]));
	recs[0].op = DS_RECORD_SNAPSHOT_BEGIN;
	recs[0].snapshot_id = "s1";
	recs[1] = tu_record_upsert(dc, "uid-dc", &p1);
	recs[2] = tu_record_upsert(dep, "uid-dep", &p2);
	recs[3] = tu_record_tombstone("v1", "Secret", "ml-team", "gone", "uid-s");
	tu_ledger_commit(&e->l, recs, 4, NULL, NULL);
	assert_int_equal(ingest(e), 4);
	n = pick(e, &rows);
	assert_int_equal(n, 3);
	assert_string_equal(rows[0].key, "resource.k8s.io/DeviceClass//gpu.example.com");
	assert_null(rows[0].ns);
	assert_string_equal(rows[1].key, "apps/Deployment/ml-team/app");
	assert_string_equal(rows[2].key, "core/Secret/ml-team/gone");
	assert_int_equal(rows[2].op, DS_RECORD_DELETE);
	assert_null(rows[2].payload);
	assert_string_equal(rows[2].source_uid, "uid-s");
	ds_object_state_rows_free(rows, n);
	free(p1);
	free(p2);
	json_decref(dc);
	json_decref(dep);
	env_free(e);
}

static void test_object_state__waiting_is_due_after_wake_and_applied_lookup(void **state)
{
	struct env *e = env_new("ostate-wait");
	ds_object_state_row *rows = NULL;
	uint8_t h[DS_HASH_LEN] = {7};
	int one = 1;
	ds_object_state_row w;

	(void)state;
	commit_cm(e, "tmpl", &one, 1);
	commit_cm(e, "pod", &one, 1);
	ingest(e);
	assert_int_equal(pick(e, &rows), 2);
	set(e, &rows[0], DS_APPLY_APPLIED, h, 0);
	set(e, &rows[1], DS_APPLY_WAITING, NULL, FAR_FUTURE);
	ds_object_state_rows_free(rows, 2);
	/* applied lookups are by target names */
	assert_int_equal(
	    ds_object_state_target_applied(e->st, "ConfigMap", "ml-team-dr", "tmpl", NULL), 1);
	assert_int_equal(
	    ds_object_state_target_applied(e->st, "ConfigMap", "ml-team", "tmpl", NULL), 0);
	assert_int_equal(
	    ds_object_state_target_applied(e->st, "ConfigMap", "ml-team-dr", "pod", NULL), 0);
	assert_int_equal(pick(e, &rows), 0);
	ds_object_state_rows_free(rows, 0);
	assert_int_equal(ds_object_state_wake_waiting(e->st, NULL), 0);
	assert_int_equal(pick(e, &rows), 1);
	assert_string_equal(rows[0].name, "pod");
	ds_object_state_rows_free(rows, 1);
	w = get(e, "core/ConfigMap/ml-team/pod");
	assert_string_equal(w.reason, "waiting");
	ds_object_state_row_dispose(&w);
	env_free(e);
}

/* The results queued for the source, in order, as "seq:status:message" lines. */
static void results_text(struct env *e, char *buf, size_t size, int64_t *token)
{
	ds_wire_result out[16];
	size_t n = 0, used = 0;
	ds_err err = {0};

	if (ds_object_state_results(e->st, SOURCE, e->l.epoch, out, 16, &n, token, &err) < 0)
		fail_msg("results: %s", err.msg);
	buf[0] = '\0';
	for (size_t i = 0; i < n; i++)
		used += (size_t)snprintf(buf + used, size - used, "%llu:%s:%s\n",
					 (unsigned long long)out[i].seq,
					 ds_result_status_name(out[i].status), out[i].message);
}

static uint64_t unapplied(struct env *e)
{
	uint64_t n = 0;
	ds_err err = {0};

	if (ds_object_state_unapplied(e->st, &n, &err) < 0)
		fail_msg("unapplied: %s", err.msg);
	return n;
}

static void test_object_state__decisions_queue_apply_results_once_per_news(void **state)
{
	struct env *e = env_new("ostate-results");
	ds_object_state_row *rows = NULL;
	uint8_t h[DS_HASH_LEN] = {7};
	char text[1024];
	int64_t token = 0;
	int v[3] = {1, 2, 3};

	(void)state;
	/* Committed, not folded in yet: all three are backlog. */
	commit_cm(e, "a", v, 3);
	commit_cm(e, "w", v, 1);
	assert_int_equal(unapplied(e), 4);
	ingest(e);
	/* Folded in: one pending row per object. */
	assert_int_equal(unapplied(e), 2);
	assert_int_equal(pick(e, &rows), 2);
	results_text(e, text, sizeof(text), &token);
	assert_string_equal(text, "");
	set(e, &rows[0], DS_APPLY_APPLIED, h, 0);
	set(e, &rows[1], DS_APPLY_WAITING, NULL, 0);
	/* The newest record of each object hears its decision; a workload that
	 * waits again for the same reason is not news. */
	set(e, &rows[1], DS_APPLY_WAITING, NULL, 0);
	ds_object_state_rows_free(rows, 2);
	assert_int_equal(unapplied(e), 0);
	results_text(e, text, sizeof(text), &token);
	assert_string_equal(text, "3:applied:applied\n4:waiting:waiting\n");
	/* Until they are sent they are offered again; then they are gone. */
	results_text(e, text, sizeof(text), &token);
	assert_string_equal(text, "3:applied:applied\n4:waiting:waiting\n");
	assert_int_equal(ds_object_state_results_sent(e->st, SOURCE, e->l.epoch, token, NULL), 0);
	results_text(e, text, sizeof(text), &token);
	assert_string_equal(text, "");
	/* The same content committed again is answered from the decision at once. */
	commit_cm(e, "a", &v[2], 1);
	ingest(e);
	results_text(e, text, sizeof(text), &token);
	assert_string_equal(text, "5:applied:applied\n");
	/* Results of another epoch of the source go when the new one's are sent. */
	assert_int_equal(ds_object_state_results_sent(e->st, SOURCE, e->l.epoch + 1, 0, NULL), 0);
	results_text(e, text, sizeof(text), &token);
	assert_string_equal(text, "");
	env_free(e);
}

/* ConfigMaps of these names (NULL-terminated) committed, ingested and applied. */
static void applied_cms(struct env *e, const char *const *names)
{
	ds_object_state_row *rows = NULL;
	uint8_t h[DS_HASH_LEN] = {9};
	size_t want = 0, n;
	int one = 1;

	for (; names[want]; want++)
		commit_cm(e, names[want], &one, 1);
	ingest(e);
	n = pick(e, &rows);
	assert_int_equal(n, want);
	for (size_t i = 0; i < n; i++)
		set(e, &rows[i], DS_APPLY_APPLIED, h, 0);
	ds_object_state_rows_free(rows, n);
}

static void test_object_state__snapshot_end_prunes_what_its_manifest_lacks(void **state)
{
	struct env *e = env_new("ostate-prune");
	ds_object_state_row *rows = NULL, r;
	ds_manifest_entry manifest[1] = {{"/ConfigMap/ml-team/keep", {0}}};
	ds_record end;
	size_t n;

	(void)state;
	applied_cms(e, (const char *[]){"keep", "gone", NULL});

	/* A snapshot whose manifest holds only "keep" (core group as ""). */
	memset(&end, 0, sizeof(end));
	end.op = DS_RECORD_SNAPSHOT_END;
	end.snapshot_id = "snap-1";
	end.manifest = manifest;
	end.manifest_len = 1;
	tu_ledger_commit(&e->l, &end, 1, NULL, NULL);
	assert_int_equal(ingest(e), 1);
	n = pick(e, &rows);
	assert_int_equal(n, 1);
	/* "gone" is due as a tombstone of the upsert it was applied from. */
	assert_string_equal(rows[0].name, "gone");
	assert_int_equal(rows[0].op, DS_RECORD_DELETE);
	assert_string_equal(rows[0].source_uid, "uid-1");
	assert_non_null(strstr(rows[0].reason, "pruned"));
	ds_object_state_rows_free(rows, n);
	r = get(e, "core/ConfigMap/ml-team/keep");
	assert_int_equal(r.state, DS_APPLY_APPLIED);
	assert_int_equal(r.op, DS_RECORD_UPSERT);
	ds_object_state_row_dispose(&r);
	env_free(e);
}

/*
 * A manifest in parts: a SNAPSHOT_PART prunes nothing (its snapshot has not
 * ended), and the end's prune keeps what any part names, not only its own
 * entries.
 */
static void test_object_state__a_manifest_in_parts_prunes_once_with_all_its_parts(void **state)
{
	struct env *e = env_new("ostate-parts");
	ds_object_state_row *rows = NULL;
	ds_manifest_entry in_part[1] = {{"/ConfigMap/ml-team/a", {0}}};
	ds_manifest_entry in_end[1] = {{"/ConfigMap/ml-team/b", {0}}};
	ds_record part, end;
	size_t n;

	(void)state;
	applied_cms(e, (const char *[]){"a", "b", "c", NULL});

	memset(&part, 0, sizeof(part));
	part.op = DS_RECORD_SNAPSHOT_PART;
	part.snapshot_id = "snap-2";
	part.manifest = in_part;
	part.manifest_len = 1;
	part.parts_left = 1;
	tu_ledger_commit(&e->l, &part, 1, NULL, NULL);
	ingest(e);
	assert_int_equal(pick(e, &rows), 0); /* nothing pruned before the end */
	ds_object_state_rows_free(rows, 0);

	memset(&end, 0, sizeof(end));
	end.op = DS_RECORD_SNAPSHOT_END;
	end.snapshot_id = "snap-2";
	end.manifest = in_end;
	end.manifest_len = 1;
	tu_ledger_commit(&e->l, &end, 1, NULL, NULL);
	ingest(e);
	n = pick(e, &rows);
	assert_int_equal(n, 1);
	assert_string_equal(rows[0].name, "c");
	assert_int_equal(rows[0].op, DS_RECORD_DELETE);
	ds_object_state_rows_free(rows, n);
	for (size_t i = 0; i < 2; i++) {
		ds_object_state_row r =
		    get(e, i ? "core/ConfigMap/ml-team/b" : "core/ConfigMap/ml-team/a");

		assert_int_equal(r.state, DS_APPLY_APPLIED);
		assert_int_equal(r.op, DS_RECORD_UPSERT);
		ds_object_state_row_dispose(&r);
	}
	env_free(e);
}

static void test_object_state__another_source_owns_an_applied_target_object(void **state)
{
	struct env *e = env_new("ostate-owner");
	ds_object_state_row *rows = NULL;
	uint8_t h[DS_HASH_LEN] = {5};
	char owner[64] = "";
	int one = 1;

	(void)state;
	commit_cm(e, "shared", &one, 1);
	ingest(e);
	assert_int_equal(pick(e, &rows), 1);
	/* Not applied yet: nobody owns it. */
	assert_int_equal(ds_object_state_target_owner(e->st, "prod-west", "ConfigMap", "ml-team-dr",
						      "shared", owner, sizeof(owner), NULL),
			 0);
	set(e, &rows[0], DS_APPLY_APPLIED, h, 0);
	ds_object_state_rows_free(rows, 1);
	assert_int_equal(ds_object_state_target_owner(e->st, "prod-west", "ConfigMap", "ml-team-dr",
						      "shared", owner, sizeof(owner), NULL),
			 1);
	assert_string_equal(owner, SOURCE);
	/* Its own source is no conflict. */
	assert_int_equal(ds_object_state_target_owner(e->st, SOURCE, "ConfigMap", "ml-team-dr",
						      "shared", owner, sizeof(owner), NULL),
			 0);
	env_free(e);
}

static void test_object_state__before_the_inbox_exists_nothing_to_ingest(void **state)
{
	char *dir = tu_mkdtemp("ostate-empty");
	char path[1024];
	ds_object_state *st = NULL;
	ds_err err = {0};

	(void)state;
	snprintf(path, sizeof(path), "%s/ledger.db", dir);
	assert_int_equal(ds_object_state_open(&st, path, &err), 0);
	assert_int_equal(ds_object_state_ingest(st, &err), 0);
	ds_object_state_free(st);
	free(dir);
}

/*
 * A state this version does not know (written by a newer one, or by hand) is
 * refused with the row and the name, never read as pending: before, it came
 * back as DS_APPLY_PENDING and the object was applied again.
 */
static void test_object_state__an_unknown_state_is_refused_not_pending(void **state)
{
	struct env *e = env_new("ostate-unknown");
	const int v[] = {1};
	ds_object_state_row r, *rows = NULL;
	sqlite3 *db = NULL;
	ds_err err = {0};
	size_t n = 0;

	(void)state;
	commit_cm(e, "frozen", v, 1);
	assert_int_equal(ingest(e), 1);
	assert_int_equal(sqlite3_open(e->path, &db), SQLITE_OK);
	assert_int_equal(
	    sqlite3_exec(db, "UPDATE object_state SET state = 'frozen'", NULL, NULL, NULL),
	    SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(
	    ds_object_state_get(e->st, SOURCE, "core/ConfigMap/ml-team/frozen", &r, &err), -EPROTO);
	assert_non_null(strstr(err.msg, "'frozen'"));
	assert_non_null(strstr(err.msg, "core/ConfigMap/ml-team/frozen"));
	/* Not due either: the pick applies nothing. */
	assert_int_equal(ds_object_state_pick(e->st, 1000, 100, &rows, &n, &err), 0);
	assert_int_equal(n, 0);
	ds_object_state_rows_free(rows, n);
	env_free(e);
}

static const char *map_ml_team(void *ud, const char *source_ns)
{
	(void)ud;
	return strcmp(source_ns, "ml-team") == 0 ? "ml-team-dr" : source_ns;
}

struct marked {
	char names[8][64];
	char ns[8][64];
	size_t n;
};

static void on_marked(void *ud, const ds_object_state_row *row, const char *target_ns)
{
	struct marked *m = ud;

	assert_true(m->n < 8);
	snprintf(m->names[m->n], sizeof(m->names[0]), "%s", row->name);
	snprintf(m->ns[m->n], sizeof(m->ns[0]), "%s", target_ns ? target_ns : "-");
	m->n++;
}

static int retry(struct env *e, const char *kind, const char *ns, const char *name, bool dry,
		 struct marked *out)
{
	ds_object_state_match m = {
	    .kind = kind, .name = name, .ns = ns, .map_ns = map_ml_team, .dry_run = dry};
	ds_err err = {0};
	int n;

	memset(out, 0, sizeof(*out));
	n = ds_object_state_retry(e->st, &m, on_marked, out, &err);
	if (n < 0)
		fail_msg("retry: %s", err.msg);
	assert_int_equal((size_t)n, out->n);
	return n;
}

static void test_object_state__retry_marks_failed_and_backed_off_rows_by_target_name(void **state)
{
	struct env *e = env_new("ostate-retry");
	ds_object_state_row *rows = NULL, r;
	uint8_t h[DS_HASH_LEN] = {5};
	json_t *dc = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "resource.k8s.io/v1", "kind",
			       "DeviceClass", "metadata", "name", "gpu.example.com");
	struct marked mk;
	ds_record rec;
	char *payload = NULL;
	int one = 1;
	size_t n;

	(void)state;
	commit_cm(e, "broken", &one, 1);
	commit_cm(e, "later", &one, 1);
	commit_cm(e, "fine", &one, 1);
	rec = tu_record_upsert(dc, "uid-dc", &payload);
	tu_ledger_commit(&e->l, &rec, 1, NULL, NULL);
	ingest(e);
	n = pick(e, &rows);
	assert_int_equal(n, 4);
	set(e, &rows[0], DS_APPLY_FAILED, NULL, 0);			/* broken */
	set(e, &rows[1], DS_APPLY_PENDING, NULL, FAR_FUTURE);		/* later: in backoff */
	assert_int_equal(ds_object_state_count_due(e->st, 1, NULL), 2); /* fine, the DeviceClass */
	set(e, &rows[2], DS_APPLY_APPLIED, h, 0);			/* fine */
	set(e, &rows[3], DS_APPLY_FAILED, NULL, 0);			/* the DeviceClass */
	ds_object_state_rows_free(rows, n);
	assert_int_equal(pick(e, &rows), 0);
	ds_object_state_rows_free(rows, 0);
	/* what a pick would take: neither the failed nor the one in backoff */
	assert_int_equal(ds_object_state_count_due(e->st, 1, NULL), 0);
	assert_int_equal(ds_object_state_count_due(e->st, FAR_FUTURE, NULL), 1);

	/* by target names: the source namespace does not match, the mapped one does */
	assert_int_equal(retry(e, "ConfigMap", "ml-team", "broken", false, &mk), 0);
	assert_int_equal(retry(e, "ConfigMap", "", "broken", false, &mk), 0);
	/* applied objects are not marked */
	assert_int_equal(retry(e, "ConfigMap", "ml-team-dr", "fine", false, &mk), 0);
	/* a dry run reports and changes nothing */
	assert_int_equal(retry(e, NULL, "ml-team-dr", NULL, true, &mk), 2);
	assert_string_equal(mk.names[0], "broken");
	assert_string_equal(mk.names[1], "later");
	assert_string_equal(mk.ns[0], "ml-team-dr");
	assert_int_equal(pick(e, &rows), 0);
	ds_object_state_rows_free(rows, 0);

	/* the kind as a user types it */
	assert_int_equal(retry(e, "configmap", "ml-team-dr", "broken", false, &mk), 1);
	assert_string_equal(mk.names[0], "broken");
	n = pick(e, &rows);
	assert_int_equal(n, 1);
	assert_string_equal(rows[0].name, "broken");
	assert_int_equal(rows[0].state, DS_APPLY_PENDING);
	assert_int_equal(rows[0].attempts, 0);
	ds_object_state_rows_free(rows, n);
	/* marked once: it is due, so not marked again */
	assert_int_equal(retry(e, "ConfigMap", "ml-team-dr", "broken", false, &mk), 0);

	/* cluster-scoped only */
	assert_int_equal(retry(e, "DeviceClass", "", "gpu.example.com", false, &mk), 1);
	assert_string_equal(mk.ns[0], "-");
	/* everything left: the backed-off one */
	assert_int_equal(retry(e, NULL, NULL, NULL, false, &mk), 1);
	assert_string_equal(mk.names[0], "later");
	n = pick(e, &rows);
	assert_int_equal(n, 3);
	ds_object_state_rows_free(rows, n);
	r = get(e, "core/ConfigMap/ml-team/fine");
	assert_int_equal(r.state, DS_APPLY_APPLIED);
	ds_object_state_row_dispose(&r);
	free(payload);
	json_decref(dc);
	env_free(e);
}

/* An upsert of ConfigMap ns/name. */
static void commit_in(struct env *e, const char *ns, const char *name)
{
	json_t *o = json_pack("{s:s, s:s, s:{s:s, s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
			      "metadata", "name", name, "namespace", ns);
	ds_record rec;
	char *payload;

	rec = tu_record_upsert(o, "uid-1", &payload);
	tu_ledger_commit(&e->l, &rec, 1, NULL, NULL);
	free(payload);
	json_decref(o);
}

/* Failover and failback work on the rows of target namespaces only. */
static void test_object_state__scope_by_target_namespace_and_forget_applied(void **state)
{
	struct env *e = env_new("ostate-scope");
	const char *const in[] = {"ml-team-dr"};
	ds_object_state_scope scope = {.ns = in, .n = 1, .map_ns = map_ml_team};
	ds_object_state_row *rows = NULL, r;
	uint8_t h[DS_HASH_LEN] = {7};
	char **names = NULL;
	size_t n = 0, pending = 9, waiting = 9;
	int64_t next_at = 0;
	ds_err err = {0};

	(void)state;
	commit_in(e, "ml-team", "a");
	commit_in(e, "ml-team", "b");
	commit_in(e, "ml-team", "c");
	commit_in(e, "web", "w");
	ingest(e);
	assert_int_equal(pick(e, &rows), 4);
	/* a applied (in ml-team-dr), b held (never applied), c in backoff; w stays due */
	set(e, &rows[0], DS_APPLY_APPLIED, h, 0);
	set(e, &rows[1], DS_APPLY_HELD, NULL, 0);
	set(e, &rows[2], DS_APPLY_PENDING, NULL, FAR_FUTURE);
	ds_object_state_rows_free(rows, 4);

	assert_int_equal(ds_object_state_namespaces(e->st, map_ml_team, NULL, &names, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_string_equal(names[0], "ml-team-dr");
	assert_string_equal(names[1], "web");
	ds_object_state_strings_free(names, n);
	assert_int_equal(ds_object_state_sources_in(e->st, &scope, &names, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(names[0], SOURCE);
	ds_object_state_strings_free(names, n);

	/* Nothing due in the scope (w is, elsewhere); c waits for its retry. */
	assert_int_equal(ds_object_state_pick_in(e->st, 1000, 100, &scope, &rows, &n, &err), 0);
	assert_int_equal(n, 0);
	ds_object_state_rows_free(rows, n);
	assert_int_equal(ds_object_state_due_in(e->st, &scope, &pending, &waiting, &next_at, &err),
			 0);
	assert_int_equal(pending, 1);
	assert_int_equal(waiting, 0);
	assert_int_equal(next_at, FAR_FUTURE);

	/* The mode changed: every upsert of the scope is due again, the others untouched. */
	assert_int_equal(ds_object_state_reconsider_in(e->st, &scope, &err), 3);
	assert_int_equal(ds_object_state_pick_in(e->st, 1000, 100, &scope, &rows, &n, &err), 0);
	assert_int_equal(n, 3);
	for (size_t i = 0; i < n; i++)
		assert_string_not_equal(rows[i].name, "w");
	ds_object_state_rows_free(rows, n);
	/* At most max, still in scope. */
	assert_int_equal(ds_object_state_pick_in(e->st, 1000, 2, &scope, &rows, &n, &err), 0);
	assert_int_equal(n, 2);
	ds_object_state_rows_free(rows, n);

	/* Reconsidered with a hold (failover's own applier): due for the scope that holds
	 * them, not for an applier without it (a running importer) until the hold's time. */
	scope.held_at = FAR_FUTURE - 1;
	assert_int_equal(ds_object_state_reconsider_in(e->st, &scope, &err), 3);
	assert_int_equal(ds_object_state_pick(e->st, 1000, 100, &rows, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(rows[0].name, "w");
	ds_object_state_rows_free(rows, n);
	assert_int_equal(ds_object_state_pick_in(e->st, 1000, 100, &scope, &rows, &n, &err), 0);
	assert_int_equal(n, 3);
	ds_object_state_rows_free(rows, n);
	assert_int_equal(ds_object_state_due_in(e->st, &scope, &pending, &waiting, &next_at, &err),
			 0);
	assert_int_equal(pending, 3);
	assert_int_equal(next_at, 1); /* now */
	assert_int_equal(ds_object_state_pick(e->st, FAR_FUTURE - 1, 100, &rows, &n, &err), 0);
	assert_int_equal(n, 4); /* the hold over: due for anyone */
	ds_object_state_rows_free(rows, n);
	scope.held_at = 0;

	/* A held object taken off the target forgets where it was applied. */
	r = get(e, "core/ConfigMap/ml-team/a");
	assert_true(r.has_applied_hash);
	{
		ds_object_state_result res = {.state = DS_APPLY_HELD, .forget_applied = true};
		assert_int_equal(ds_object_state_set(e->st, r.id, r.record_id, &res, &err), 0);
	}
	ds_object_state_row_dispose(&r);
	r = get(e, "core/ConfigMap/ml-team/a");
	assert_false(r.has_applied_hash);
	assert_null(r.target_name);
	assert_null(r.target_ns);
	assert_int_equal(r.state, DS_APPLY_HELD);
	ds_object_state_row_dispose(&r);
	assert_int_equal(
	    ds_object_state_target_applied(e->st, "ConfigMap", "ml-team-dr", "a", &err), 0);
	env_free(e);
}

static void test_object_state__last_record_id_is_the_newest_folded_in(void **state)
{
	struct env *e = env_new("ostate-last");
	ds_object_state_row a, b;
	int64_t last = -1;
	ds_err err = {0};
	const int v1[] = {1}, v2[] = {2, 3};

	(void)state;
	assert_int_equal(ds_object_state_last_record_id(e->st, &last, &err), 0);
	assert_int_equal(last, 0);
	commit_cm(e, "a", v1, 1);
	commit_cm(e, "b", v2, 2);
	/* Committed, not folded in yet: not counted. */
	assert_int_equal(ds_object_state_last_record_id(e->st, &last, &err), 0);
	assert_int_equal(last, 0);
	ingest(e);
	a = get(e, "core/ConfigMap/ml-team/a");
	b = get(e, "core/ConfigMap/ml-team/b");
	assert_int_equal(ds_object_state_last_record_id(e->st, &last, &err), 0);
	assert_int_equal(last, a.record_id > b.record_id ? a.record_id : b.record_id);
	assert_true(b.record_id > a.record_id);
	ds_object_state_row_dispose(&a);
	ds_object_state_row_dispose(&b);
	env_free(e);
}

/*
 * A pick is bounded by the JSON its payloads hold once decompressed (what the
 * pass parses), not by what the ledger stores: 1 MiB ConfigMaps that zstd
 * stores in a few hundred bytes each, 8 of them to a pick.
 */
static void test_object_state__pick_bounded_by_decompressed_json_bytes(void **state)
{
	struct env *e = env_new("ostate-pick-bytes");
	size_t big = (size_t)1 << 20, n = 0;
	char *blob = malloc(big + 1);
	ds_object_state_row *rows = NULL;
	ds_record recs[20];
	char *payloads[20], names[20][16];
	ds_err err = {0};

	(void)state;
	assert_non_null(blob);
	memset(blob, 'x', big);
	blob[big] = '\0';
	for (size_t i = 0; i < 20; i++) {
		json_t *o;

		snprintf(names[i], sizeof(names[i]), "big-%zu", i);
		o = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s}}", "apiVersion", "v1", "kind",
			      "ConfigMap", "metadata", "name", names[i], "namespace", "ml-team",
			      "data", "blob", blob);
		assert_non_null(o);
		recs[i] = tu_record_upsert(o, "uid-1", &payloads[i]);
		recs[i].api_version = "v1";
		recs[i].kind = "ConfigMap";
		recs[i].ns = "ml-team";
		recs[i].name = names[i];
		json_decref(o);
	}
	tu_ledger_commit(&e->l, recs, 20, NULL, NULL);
	for (size_t i = 0; i < 20; i++)
		free(payloads[i]);
	free(blob);
	ingest(e);
	if (ds_object_state_pick(e->st, FAR_FUTURE, 2048, &rows, &n, &err) < 0)
		fail_msg("pick: %s", err.msg);
	/* 8 MiB of JSON: the eighth row crosses it */
	assert_int_equal(n, DS_OBJECT_STATE_PICK_BYTES / big);
	for (size_t i = 0; i < n; i++) {
		assert_true(rows[i].zstd);
		assert_true(rows[i].payload_len < 64 * 1024);
	}
	ds_object_state_rows_free(rows, n);
	env_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_object_state__an_unknown_state_is_refused_not_pending),
	    cmocka_unit_test(test_object_state__burst_leaves_one_pending_row_at_the_newest),
	    cmocka_unit_test(test_object_state__scope_by_target_namespace_and_forget_applied),
	    cmocka_unit_test(
		test_object_state__unchanged_recommit_keeps_state_new_version_is_pending),
	    cmocka_unit_test(
		test_object_state__result_for_a_superseded_record_keeps_the_newer_pending),
	    cmocka_unit_test(test_object_state__cursor_survives_reopen),
	    cmocka_unit_test(test_object_state__last_record_id_is_the_newest_folded_in),
	    cmocka_unit_test(test_object_state__pick_bounded_by_decompressed_json_bytes),
	    cmocka_unit_test(test_object_state__tombstones_snapshot_markers_and_keys),
	    cmocka_unit_test(test_object_state__waiting_is_due_after_wake_and_applied_lookup),
	    cmocka_unit_test(test_object_state__decisions_queue_apply_results_once_per_news),
	    cmocka_unit_test(test_object_state__snapshot_end_prunes_what_its_manifest_lacks),
	    cmocka_unit_test(test_object_state__a_manifest_in_parts_prunes_once_with_all_its_parts),
	    cmocka_unit_test(test_object_state__another_source_owns_an_applied_target_object),
	    cmocka_unit_test(test_object_state__before_the_inbox_exists_nothing_to_ingest),
	    cmocka_unit_test(
		test_object_state__retry_marks_failed_and_backed_off_rows_by_target_name),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
