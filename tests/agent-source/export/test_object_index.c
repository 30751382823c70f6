/*
 * The exporter's index with real SQLite files beside a real outbox: what it
 * remembers per object, that it commits with the outbox or not at all, mark
 * and sweep across passes, the snapshot manifest, results and counts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/object_index.h"
#include "drasync/outbox.h"
#include "testutil.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fx {
	char *dir;
	char path[1024];
	ds_outbox *ob;
	ds_object_index *idx;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	ds_err err = {0};

	f->dir = tu_mkdtemp("index");
	snprintf(f->path, sizeof(f->path), "%s/outbox.db", f->dir);
	assert_int_equal(ds_outbox_open(&f->ob, f->path, NULL, &err), 0);
	assert_int_equal(ds_object_index_open(&f->idx, f->path, &err), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	ds_object_index_free(f->idx);
	ds_outbox_free(f->ob);
	free(f->dir);
	free(f);
	return 0;
}

static ds_record upsert(const char *api, const char *kind, const char *ns, const char *name,
			const char *uid, const char *json)
{
	ds_record r;

	memset(&r, 0, sizeof(r));
	r.op = DS_RECORD_UPSERT;
	r.api_version = api;
	r.kind = kind;
	r.ns = ns;
	r.name = name;
	r.source_uid = uid;
	r.payload = (const uint8_t *)json;
	r.payload_len = strlen(json);
	return r;
}

static ds_record tombstone(const char *api, const char *kind, const char *ns, const char *name,
			   const char *uid)
{
	ds_record r = upsert(api, kind, ns, name, uid, "");

	r.op = DS_RECORD_DELETE;
	r.payload = NULL;
	r.payload_len = 0;
	return r;
}

static uint64_t last_seq(ds_outbox *ob)
{
	ds_outbox_state st;
	ds_err err = {0};

	assert_int_equal(ds_outbox_state_get(ob, &st, &err), 0);
	return st.last_seq;
}

struct keys {
	char got[16][128];
	int n;
};

static int collect(void *ud, const ds_index_row *row)
{
	struct keys *k = ud;

	if (k->n < 16)
		snprintf(k->got[k->n++], sizeof(k->got[0]), "%s", row->key);
	return 0;
}

static void test_object_index__keys_do_not_depend_on_the_version(void **state)
{
	char a[DS_OBJECT_KEY_MAX], b[DS_OBJECT_KEY_MAX];

	(void)state;
	assert_int_equal(
	    ds_object_key(a, sizeof(a), "resource.k8s.io/v1", "ResourceClaim", "ml", "rc"), 0);
	assert_int_equal(
	    ds_object_key(b, sizeof(b), "resource.k8s.io/v1beta1", "ResourceClaim", "ml", "rc"), 0);
	assert_string_equal(a, "resource.k8s.io/ResourceClaim/ml/rc");
	assert_string_equal(a, b);
	assert_int_equal(ds_object_key(a, sizeof(a), "v1", "ConfigMap", "ml", "c"), 0);
	assert_string_equal(a, "/ConfigMap/ml/c");
	assert_int_equal(ds_object_key(a, sizeof(a), "v1", "Namespace", NULL, "ml"), 0);
	assert_string_equal(a, "/Namespace//ml");
	assert_int_equal(ds_object_key(a, sizeof(a), "v1", "Namespace", NULL, ""), -EINVAL);
	assert_int_equal(ds_object_key(a, 8, "v1", "Namespace", NULL, "ml"), -ENAMETOOLONG);
}

static void test_object_index__push_remembers_hash_uid_and_seq(void **state)
{
	struct fx *f = *state;
	ds_record r[2] = {upsert("apps/v1", "Deployment", "ml", "trainer", "u1", "{\"a\":1}"),
			  upsert("v1", "ConfigMap", "ml", "cm", "u2", "{\"b\":2}")};
	uint8_t want[DS_HASH_LEN];
	ds_index_row row;
	uint64_t last = 0;
	ds_err err = {0};

	assert_int_equal(ds_object_index_begin_pass(f->idx, NULL, &err), 0);
	assert_int_equal(ds_object_index_push(f->idx, f->ob, r, 2, &last, &err), 0);
	assert_int_equal(last, 2);
	assert_int_equal(ds_object_index_get(f->idx, "apps/Deployment/ml/trainer", &row, &err), 0);
	ds_record_hash("{\"a\":1}", 7, want);
	assert_memory_equal(row.hash, want, DS_HASH_LEN);
	assert_string_equal(row.uid, "u1");
	assert_string_equal(row.api_version, "apps/v1");
	assert_int_equal(row.seq, 1);
	assert_int_equal(row.seen, 1);
	assert_false(row.deleted);
	assert_int_equal(row.result_status, 0);
	assert_int_equal(ds_object_index_get(f->idx, "/ConfigMap/ml/nope", &row, &err), -ENOENT);

	/* a tombstone keeps the row (for the target's result) as deleted */
	r[0] = tombstone("apps/v1", "Deployment", "ml", "trainer", "u1");
	assert_int_equal(ds_object_index_push(f->idx, f->ob, r, 1, &last, &err), 0);
	assert_int_equal(ds_object_index_get(f->idx, "apps/Deployment/ml/trainer", &row, &err), 0);
	assert_true(row.deleted);
	assert_int_equal(row.seq, 3);

	/* reopened from the file: the same */
	ds_object_index_free(f->idx);
	assert_int_equal(ds_object_index_open(&f->idx, f->path, &err), 0);
	assert_int_equal(ds_object_index_generation(f->idx), 1);
	assert_int_equal(ds_object_index_get(f->idx, "/ConfigMap/ml/cm", &row, &err), 0);
	assert_int_equal(row.seq, 2);
}

/* A failure inside the index update (here a trigger refusing one name, a
 * real SQLite error in the hook) takes the outbox's records back too. */
static void test_object_index__a_failed_index_update_pushes_nothing(void **state)
{
	struct fx *f = *state;
	ds_record r[3] = {upsert("v1", "ConfigMap", "ml", "a", "u1", "{\"a\":1}"),
			  upsert("v1", "ConfigMap", "ml", "boom", "u2", "{\"b\":2}"),
			  upsert("v1", "ConfigMap", "ml", "c", "u3", "{\"c\":3}")};
	ds_index_row row;
	sqlite3 *db = NULL;
	uint64_t last = 0;
	ds_err err = {0};

	assert_int_equal(ds_object_index_push(f->idx, f->ob, r, 1, &last, &err), 0);
	assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db,
				      "CREATE TRIGGER refuse BEFORE INSERT ON export_objects WHEN "
				      "new.name = 'boom' BEGIN SELECT RAISE(ABORT, 'refused'); END",
				      NULL, NULL, NULL),
			 SQLITE_OK);
	sqlite3_close(db);
	r[0].payload = (const uint8_t *)"{\"a\":2}";
	assert_true(ds_object_index_push(f->idx, f->ob, r, 3, &last, &err) < 0);
	assert_non_null(strstr(err.msg, "refused"));
	assert_int_equal(last, 1);
	assert_int_equal(last_seq(f->ob), 1);
	/* neither the outbox nor the index moved: a's first version stands */
	assert_int_equal(ds_object_index_get(f->idx, "/ConfigMap/ml/a", &row, &err), 0);
	assert_int_equal(row.seq, 1);
	assert_int_equal(ds_object_index_get(f->idx, "/ConfigMap/ml/c", &row, &err), -ENOENT);
	{
		ds_outbox_batch b;
		assert_int_equal(ds_outbox_read(f->ob, 1, 10, 1 << 20, &b, &err), 0);
		assert_int_equal(b.n, 1);
		ds_outbox_batch_dispose(&b);
	}
	/* without the refused one, the push goes through on the next seqs */
	r[1] = r[2];
	assert_int_equal(ds_object_index_push(f->idx, f->ob, r, 2, &last, &err), 0);
	assert_int_equal(last, 3);
	assert_int_equal(ds_object_index_get(f->idx, "/ConfigMap/ml/c", &row, &err), 0);
	assert_int_equal(row.seq, 3);
}

/* An object no pass saw since the generation began is unseen; marks and
 * pushes see it; tombstones and other kinds or namespaces are out of scope. */
static void test_object_index__mark_and_sweep_across_passes(void **state)
{
	struct fx *f = *state;
	ds_record r[4] = {upsert("v1", "ConfigMap", "a", "x", "1", "{}"),
			  upsert("v1", "ConfigMap", "a", "y", "2", "{}"),
			  upsert("v1", "ConfigMap", "b", "z", "3", "{}"),
			  upsert("v1", "Secret", "a", "s", "4", "{}")};
	const char *seen[] = {"/ConfigMap/a/x"};
	struct keys k = {0};
	uint64_t gen = 0;
	ds_err err = {0};

	assert_int_equal(ds_object_index_begin_pass(f->idx, &gen, &err), 0);
	assert_int_equal(gen, 1);
	assert_int_equal(ds_object_index_push(f->idx, f->ob, r, 4, NULL, &err), 0);
	assert_int_equal(ds_object_index_unseen(f->idx, "ConfigMap", NULL, collect, &k, &err), 0);
	assert_int_equal(k.n, 0);

	assert_int_equal(ds_object_index_begin_pass(f->idx, &gen, &err), 0);
	assert_int_equal(gen, 2);
	assert_int_equal(ds_object_index_mark(f->idx, seen, 1, &err), 0);
	assert_int_equal(ds_object_index_unseen(f->idx, "ConfigMap", NULL, collect, &k, &err), 0);
	assert_int_equal(k.n, 2);
	assert_string_equal(k.got[0], "/ConfigMap/a/y");
	assert_string_equal(k.got[1], "/ConfigMap/b/z");
	k.n = 0;
	assert_int_equal(ds_object_index_unseen(f->idx, "ConfigMap", "a", collect, &k, &err), 0);
	assert_int_equal(k.n, 1);
	/* tombstoned: no longer unseen, and not in the manifest */
	r[0] = tombstone("v1", "ConfigMap", "a", "y", "2");
	assert_int_equal(ds_object_index_push(f->idx, f->ob, r, 1, NULL, &err), 0);
	k.n = 0;
	assert_int_equal(ds_object_index_unseen(f->idx, "ConfigMap", NULL, collect, &k, &err), 0);
	assert_int_equal(k.n, 1);
	assert_string_equal(k.got[0], "/ConfigMap/b/z");
	{
		ds_index_manifest m;
		assert_int_equal(ds_object_index_manifest(f->idx, &m, &err), 0);
		assert_int_equal(m.n, 3);
		assert_string_equal(m.entries[0].key, "/ConfigMap/a/x");
		assert_string_equal(m.entries[1].key, "/ConfigMap/b/z");
		assert_string_equal(m.entries[2].key, "/Secret/a/s");
		ds_index_manifest_dispose(&m);
	}
	/* the tombstone's row goes once the target has it */
	assert_int_equal(ds_object_index_prune_deleted(f->idx, last_seq(f->ob), &err), 0);
	k.n = 0;
	assert_int_equal(ds_object_index_each(f->idx, "a", collect, &k, &err), 0);
	assert_int_equal(k.n, 2);
}

static void test_object_index__forgetting_a_namespace_leaves_no_tombstones(void **state)
{
	struct fx *f = *state;
	ds_record r[3] = {upsert("v1", "Namespace", NULL, "a", "1", "{}"),
			  upsert("v1", "ConfigMap", "a", "x", "2", "{}"),
			  upsert("v1", "ConfigMap", "b", "y", "3", "{}")};
	struct keys k = {0};
	size_t n = 0;
	ds_err err = {0};

	assert_int_equal(ds_object_index_push(f->idx, f->ob, r, 3, NULL, &err), 0);
	assert_int_equal(ds_object_index_forget_namespace(f->idx, "a", &n, &err), 0);
	assert_int_equal(n, 2);
	assert_int_equal(last_seq(f->ob), 3);
	assert_int_equal(ds_object_index_each(f->idx, NULL, collect, &k, &err), 0);
	assert_int_equal(k.n, 1);
	assert_string_equal(k.got[0], "/ConfigMap/b/y");
}

static void test_object_index__snapshot_done_only_after_its_end(void **state)
{
	struct fx *f = *state;
	ds_record r;
	bool done = true;
	ds_err err = {0};

	assert_int_equal(ds_object_index_snapshot_done(f->idx, &done, &err), 0);
	assert_false(done);
	memset(&r, 0, sizeof(r));
	r.op = DS_RECORD_SNAPSHOT_BEGIN;
	r.snapshot_id = "s1";
	assert_int_equal(ds_object_index_push(f->idx, f->ob, &r, 1, NULL, &err), 0);
	assert_int_equal(ds_object_index_snapshot_done(f->idx, &done, &err), 0);
	assert_false(done);
	r.op = DS_RECORD_SNAPSHOT_END;
	assert_int_equal(ds_object_index_push(f->idx, f->ob, &r, 1, NULL, &err), 0);
	assert_int_equal(ds_object_index_snapshot_done(f->idx, &done, &err), 0);
	assert_true(done);
	/* a later snapshot begun and never ended: not done (a crash midway) */
	r.op = DS_RECORD_SNAPSHOT_BEGIN;
	r.snapshot_id = "s2";
	assert_int_equal(ds_object_index_push(f->idx, f->ob, &r, 1, NULL, &err), 0);
	ds_object_index_free(f->idx);
	assert_int_equal(ds_object_index_open(&f->idx, f->path, &err), 0);
	assert_int_equal(ds_object_index_snapshot_done(f->idx, &done, &err), 0);
	assert_false(done);
}

static void test_object_index__results_map_to_the_latest_record(void **state)
{
	struct fx *f = *state;
	ds_record r[3] = {upsert("apps/v1", "Deployment", "ml", "a", "1", "{\"v\":1}"),
			  upsert("apps/v1", "Deployment", "ml", "b", "2", "{}"),
			  upsert("v1", "ConfigMap", "ml", "c", "3", "{}")};
	ds_index_kind_count *c = NULL;
	ds_index_row row;
	struct keys k = {0};
	bool changed = false;
	size_t n = 0;
	ds_err err = {0};

	assert_int_equal(ds_object_index_push(f->idx, f->ob, r, 3, NULL, &err), 0);
	assert_int_equal(ds_object_index_result(f->idx, 1, DS_RESULT_FAILED, "no such class", &row,
						&changed, &err),
			 0);
	assert_true(changed);
	assert_string_equal(row.key, "apps/Deployment/ml/a");
	assert_string_equal(row.kind, "Deployment");
	assert_int_equal(row.result_status, DS_RESULT_FAILED);
	/* the same reason again is no news */
	assert_int_equal(ds_object_index_result(f->idx, 1, DS_RESULT_FAILED, "no such class", &row,
						&changed, &err),
			 0);
	assert_false(changed);
	assert_int_equal(ds_object_index_result(f->idx, 2, DS_RESULT_OK, "", NULL, NULL, &err), 0);
	assert_int_equal(ds_object_index_result(f->idx, 99, DS_RESULT_OK, "", NULL, NULL, &err),
			 -ENOENT);
	assert_int_equal(ds_object_index_kind_counts(f->idx, &c, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_string_equal(c[0].kind, "ConfigMap");
	assert_int_equal(c[0].objects, 1);
	assert_int_equal(c[0].awaiting, 1);
	assert_string_equal(c[1].kind, "Deployment");
	assert_int_equal(c[1].objects, 2);
	assert_int_equal(c[1].ok, 1);
	assert_int_equal(c[1].failed, 1);
	free(c);
	assert_int_equal(ds_object_index_with_result(f->idx, DS_RESULT_FAILED, collect, &k, &err),
			 0);
	assert_int_equal(k.n, 1);
	/* a's next version clears the result; a result for the old seq is stale */
	r[0].payload = (const uint8_t *)"{\"v\":2}";
	assert_int_equal(ds_object_index_push(f->idx, f->ob, r, 1, NULL, &err), 0);
	assert_int_equal(ds_object_index_result(f->idx, 1, DS_RESULT_OK, "", NULL, NULL, &err),
			 -ENOENT);
	assert_int_equal(ds_object_index_get(f->idx, "apps/Deployment/ml/a", &row, &err), 0);
	assert_int_equal(row.result_seq, 0);
	assert_int_equal(row.result_status, DS_RESULT_FAILED); /* the previous version's */
	assert_int_equal(row.seq, 4);
	/* the new version fails for the same reason: not news */
	assert_int_equal(ds_object_index_result(f->idx, 4, DS_RESULT_FAILED, "no such class", &row,
						&changed, &err),
			 0);
	assert_false(changed);
	assert_int_equal(ds_object_index_get(f->idx, "apps/Deployment/ml/a", &row, &err), 0);
	assert_int_equal(row.result_seq, 4);
	{
		int64_t v = 0;
		assert_int_equal(ds_object_index_meta_get(f->idx, "last_pass", &v, &err), -ENOENT);
		assert_int_equal(ds_object_index_meta_set(f->idx, "last_pass", 42, &err), 0);
		assert_int_equal(ds_object_index_meta_get(f->idx, "last_pass", &v, &err), 0);
		assert_int_equal(v, 42);
	}
}

/* An Ack's results in one transaction: all of them kept on commit, none on rollback. */
static void test_object_index__results_in_a_batch(void **state)
{
	struct fx *f = *state;
	ds_record r[2] = {upsert("v1", "ConfigMap", "ml", "a", "1", "{}"),
			  upsert("v1", "ConfigMap", "ml", "b", "2", "{}")};
	ds_index_row row;
	ds_err err = {0};

	assert_int_equal(ds_object_index_push(f->idx, f->ob, r, 2, NULL, &err), 0);
	assert_int_equal(ds_object_index_begin(f->idx, &err), 0);
	assert_int_equal(ds_object_index_result(f->idx, 1, DS_RESULT_APPLIED, "", NULL, NULL, &err),
			 0);
	assert_int_equal(ds_object_index_result(f->idx, 99, DS_RESULT_OK, "", NULL, NULL, &err),
			 -ENOENT); /* no object's: the batch goes on */
	assert_int_equal(
	    ds_object_index_result(f->idx, 2, DS_RESULT_WAITING, "claim", NULL, NULL, &err), 0);
	assert_int_equal(ds_object_index_commit(f->idx, &err), 0);
	/* reopened: what the commit kept is on disk */
	ds_object_index_free(f->idx);
	assert_int_equal(ds_object_index_open(&f->idx, f->path, &err), 0);
	assert_int_equal(ds_object_index_get(f->idx, "/ConfigMap/ml/a", &row, &err), 0);
	assert_int_equal(row.result_status, DS_RESULT_APPLIED);
	assert_int_equal(ds_object_index_get(f->idx, "/ConfigMap/ml/b", &row, &err), 0);
	assert_int_equal(row.result_status, DS_RESULT_WAITING);
	assert_string_equal(row.result_message, "claim");

	assert_int_equal(ds_object_index_begin(f->idx, &err), 0);
	assert_int_equal(ds_object_index_result(f->idx, 1, DS_RESULT_FAILED, "x", NULL, NULL, &err),
			 0);
	ds_object_index_rollback(f->idx);
	ds_object_index_rollback(f->idx); /* outside a transaction: nothing */
	assert_int_equal(ds_object_index_get(f->idx, "/ConfigMap/ml/a", &row, &err), 0);
	assert_int_equal(row.result_status, DS_RESULT_APPLIED);
}

/*
 * A refusal (issue 22) is a result of its own: stored with its reason, news
 * once per object and reason, counted apart from failures, listed, and a
 * refused tombstone (it deleted nothing on the target) is kept by the prune.
 */
static void test_object_index__refusals_are_stored_counted_and_kept(void **state)
{
	struct fx *f = *state;
	static const char why[] = "namespace hz-denied is not granted to source prod-east "
				  "(sources[0].namespaces)";
	ds_record r[3] = {upsert("v1", "ConfigMap", "hz-denied", "a", "1", "{}"),
			  upsert("v1", "ConfigMap", "hz-ok", "b", "2", "{}"),
			  upsert("v1", "Pod", "hz-ok", "evil", "3", "{}")};
	ds_index_kind_count *c = NULL;
	ds_index_row row;
	struct keys k = {0};
	bool changed = false;
	size_t n = 0;
	ds_err err = {0};

	assert_int_equal(ds_object_index_push(f->idx, f->ob, r, 3, NULL, &err), 0);
	assert_int_equal(
	    ds_object_index_result(f->idx, 1, DS_RESULT_REFUSED, why, &row, &changed, &err), 0);
	assert_true(changed);
	assert_int_equal(row.result_status, DS_RESULT_REFUSED);
	/* the same refusal again (the next Ack) is no news; another reason is */
	assert_int_equal(
	    ds_object_index_result(f->idx, 1, DS_RESULT_REFUSED, why, &row, &changed, &err), 0);
	assert_false(changed);
	/* a commit result resent after a reconnect does not hide the refusal */
	assert_int_equal(ds_object_index_result(f->idx, 1, DS_RESULT_OK, "", &row, &changed, &err),
			 0);
	assert_false(changed);
	assert_int_equal(ds_object_index_get(f->idx, "/ConfigMap/hz-denied/a", &row, &err), 0);
	assert_int_equal(row.result_status, DS_RESULT_REFUSED);
	assert_string_equal(row.result_message, why);
	assert_int_equal(ds_object_index_result(f->idx, 2, DS_RESULT_APPLIED, "", NULL, NULL, &err),
			 0);
	assert_int_equal(ds_object_index_result(
			     f->idx, 3, DS_RESULT_REFUSED,
			     "Pod hz-ok/evil: privileged container c violates podSecurity baseline",
			     NULL, &changed, &err),
			 0);
	assert_true(changed);

	assert_int_equal(ds_object_index_kind_counts(f->idx, &c, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_string_equal(c[0].kind, "ConfigMap");
	assert_int_equal(c[0].objects, 2);
	assert_int_equal(c[0].refused, 1);
	assert_int_equal(c[0].applied, 1);
	assert_int_equal(c[0].failed, 0);
	assert_string_equal(c[1].kind, "Pod");
	assert_int_equal(c[1].refused, 1);
	free(c);
	assert_int_equal(ds_object_index_with_result(f->idx, DS_RESULT_REFUSED, collect, &k, &err),
			 0);
	assert_int_equal(k.n, 2);
	assert_string_equal(k.got[0], "/ConfigMap/hz-denied/a");
	assert_string_equal(k.got[1], "/Pod/hz-ok/evil");

	/* tombstones: the refused one stays after the prune, the applied one goes */
	r[0] = tombstone("v1", "ConfigMap", "hz-denied", "a", "1");
	r[1] = tombstone("v1", "ConfigMap", "hz-ok", "b", "2");
	assert_int_equal(ds_object_index_push(f->idx, f->ob, r, 2, NULL, &err), 0);
	assert_int_equal(
	    ds_object_index_result(f->idx, 4, DS_RESULT_REFUSED, why, NULL, NULL, &err), 0);
	assert_int_equal(ds_object_index_result(f->idx, 5, DS_RESULT_APPLIED, "", NULL, NULL, &err),
			 0);
	assert_int_equal(ds_object_index_prune_deleted(f->idx, last_seq(f->ob), &err), 0);
	assert_int_equal(ds_object_index_get(f->idx, "/ConfigMap/hz-denied/a", &row, &err), 0);
	assert_true(row.deleted);
	assert_int_equal(row.result_status, DS_RESULT_REFUSED);
	assert_int_equal(ds_object_index_get(f->idx, "/ConfigMap/hz-ok/b", &row, &err), -ENOENT);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_object_index__keys_do_not_depend_on_the_version),
	    T(test_object_index__push_remembers_hash_uid_and_seq),
	    T(test_object_index__results_in_a_batch),
	    T(test_object_index__a_failed_index_update_pushes_nothing),
	    T(test_object_index__mark_and_sweep_across_passes),
	    T(test_object_index__forgetting_a_namespace_leaves_no_tombstones),
	    T(test_object_index__snapshot_done_only_after_its_end),
	    T(test_object_index__results_map_to_the_latest_record),
	    T(test_object_index__refusals_are_stored_counted_and_kept),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
