/*
 * ds_ledger_objects_read on real ledger files, committed as the receiver
 * commits (zstd payloads for the larger objects) and folded as the applier
 * folds: the newest state of each object, before and after the fold; a
 * tombstone; the kinds filter; the source's identity. And
 * ds_ledger_payload_json on payloads that are not objects (a compressed one
 * comes back whole in the first case).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/ledger_objects.h"
#include "drasync/object_state.h"
#include "drasync/record.h"
#include "testutil.h"
#include "tu_ledger.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SOURCE "prod-east"

struct env {
	char *dir;
	char path[1024];
	tu_ledger l;
};

static struct env *env_new(const char *name)
{
	struct env *e = calloc(1, sizeof(*e));

	assert_non_null(e);
	e->dir = tu_mkdtemp(name);
	snprintf(e->path, sizeof(e->path), "%s/ledger.db", e->dir);
	tu_ledger_open(&e->l, e->path, SOURCE);
	return e;
}

static void env_free(struct env *e)
{
	tu_ledger_close(&e->l);
	free(e->dir);
	free(e);
}

static json_t *cm(const char *ns, const char *name, const char *value)
{
	json_t *o = json_pack("{ss ss s{ss ss} s{ss}}", "apiVersion", "v1", "kind", "ConfigMap",
			      "metadata", "name", name, "namespace", ns, "data", "v", value);
	assert_non_null(o);
	return o;
}

static json_t *deploy(const char *ns, const char *name, int replicas)
{
	json_t *o =
	    json_pack("{ss ss s{ss ss} s{si}}", "apiVersion", "apps/v1", "kind", "Deployment",
		      "metadata", "name", name, "namespace", ns, "spec", "replicas", replicas);
	assert_non_null(o);
	return o;
}

static void commit_one(struct env *e, json_t *obj, const char *uid)
{
	char *payload = NULL;
	ds_record rec = tu_record_upsert(obj, uid, &payload);

	tu_ledger_commit(&e->l, &rec, 1, NULL, NULL);
	free(payload);
	json_decref(obj);
}

/* Fold what is committed into object_state, as the applier's pass begins. */
static void fold(struct env *e)
{
	ds_object_state *st = NULL;
	ds_err err = {0};

	assert_int_equal(ds_object_state_open(&st, e->path, &err), 0);
	assert_true(ds_object_state_ingest(st, &err) >= 0);
	ds_object_state_free(st);
}

static const ds_ledger_object *find(const ds_ledger_object *v, size_t n, const char *kind,
				    const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i].kind, kind) == 0 && strcmp(v[i].name, name) == 0)
			return &v[i];
	fail_msg("no %s %s among the %zu objects read", kind, name, n);
	abort(); /* not reached */
}

static json_t *doc_of(const ds_ledger_object *o)
{
	json_t *doc = NULL;
	char why[200] = "";

	if (ds_ledger_payload_json(o->payload, o->len, o->zstd, &doc, why, sizeof(why)) < 0)
		fail_msg("%s %s: %s", o->kind, o->name, why);
	return doc;
}

static void test_ledger_objects__newest_state_before_and_after_the_fold(void **state)
{
	struct env *e = env_new("ledger-objects");
	char big[4096];
	ds_ledger_object *v = NULL;
	ds_err err = {0};
	size_t n = 0;
	json_t *doc;

	(void)state;
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	commit_one(e, cm("ml", "a", "1"), "uid-a");
	commit_one(e, deploy("ml", "d", 3), "uid-d");
	fold(e);
	/* Committed after the fold: newer than the applier's rows. */
	commit_one(e, cm("ml", "a", big), "uid-a");
	commit_one(e, cm("other", "b", "2"), "uid-b");
	assert_int_equal(ds_ledger_objects_read(e->path, NULL, &v, &n, &err), 0);
	assert_int_equal(n, 3);

	{
		const ds_ledger_object *a = find(v, n, "ConfigMap", "a");
		assert_string_equal(a->source, SOURCE);
		assert_string_equal(a->ns, "ml");
		assert_string_equal(a->state, "pending");
		assert_int_equal(a->op, DS_RECORD_UPSERT);
		assert_string_equal(a->source_uid, "uid-a");
		assert_string_equal(a->source_cluster, SOURCE);
		assert_true(a->zstd); /* 4 KiB of data is stored compressed */
		doc = doc_of(a);
		assert_string_equal(
		    json_string_value(json_object_get(json_object_get(doc, "data"), "v")), big);
		json_decref(doc);
	}
	{
		const ds_ledger_object *d = find(v, n, "Deployment", "d");
		assert_string_equal(d->state, "pending"); /* folded, not applied yet */
		assert_false(d->zstd);
		doc = doc_of(d);
		assert_int_equal(
		    json_integer_value(json_object_get(json_object_get(doc, "spec"), "replicas")),
		    3);
		json_decref(doc);
	}
	assert_string_equal(find(v, n, "ConfigMap", "b")->ns, "other");
	ds_ledger_objects_free(v, n);

	/* Folded again: the same answer from object_state alone. */
	fold(e);
	assert_int_equal(ds_ledger_objects_read(e->path, NULL, &v, &n, &err), 0);
	assert_int_equal(n, 3);
	doc = doc_of(find(v, n, "ConfigMap", "a"));
	assert_string_equal(json_string_value(json_object_get(json_object_get(doc, "data"), "v")),
			    big);
	json_decref(doc);
	ds_ledger_objects_free(v, n);
	env_free(e);
}

static void test_ledger_objects__tombstone_and_kinds_filter(void **state)
{
	struct env *e = env_new("ledger-objects-kinds");
	static const char *const deployments[] = {"Deployment", NULL};
	static const char *const several[] = {"Secret", "ConfigMap", NULL};
	ds_record tomb = tu_record_tombstone("v1", "ConfigMap", "ml", "a", "uid-a");
	ds_ledger_object *v = NULL;
	ds_err err = {0};
	size_t n = 0;

	(void)state;
	commit_one(e, cm("ml", "a", "1"), "uid-a");
	commit_one(e, deploy("ml", "d", 1), "uid-d");
	fold(e);
	tu_ledger_commit(&e->l, &tomb, 1, NULL, NULL);

	assert_int_equal(ds_ledger_objects_read(e->path, deployments, &v, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(v[0].kind, "Deployment");
	ds_ledger_objects_free(v, n);

	/* The tombstone is the ConfigMap's newest state: it says so, with no payload. */
	assert_int_equal(ds_ledger_objects_read(e->path, several, &v, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(v[0].name, "a");
	assert_int_equal(v[0].op, DS_RECORD_DELETE);
	assert_int_equal(v[0].len, 0);
	ds_ledger_objects_free(v, n);
	env_free(e);
}

static void test_ledger_objects__no_ledger_and_an_empty_one(void **state)
{
	char *dir = tu_mkdtemp("ledger-objects-none");
	char path[1024];
	ds_ledger_object *v = NULL;
	ds_err err = {0};
	size_t n = 7;
	tu_ledger l;

	(void)state;
	snprintf(path, sizeof(path), "%s/ledger.db", dir);
	assert_int_equal(ds_ledger_objects_read(path, NULL, &v, &n, &err), -ENOENT);
	assert_non_null(strstr(err.msg, path));
	assert_non_null(strstr(err.msg, "drasync-target run has not started"));
	tu_ledger_open(&l, path, SOURCE);
	tu_ledger_close(&l);
	assert_int_equal(ds_ledger_objects_read(path, NULL, &v, &n, &err), 0);
	assert_int_equal(n, 0);
	assert_null(v);
	free(dir);
}

static void test_ledger_objects__payloads_that_are_not_objects_say_why(void **state)
{
	static const struct {
		const char *payload, *why;
	} cases[] = {
	    {"", "empty"},
	    {"[1, 2]", "another JSON value"},
	    {"{\"a\": ", "payload is not a JSON object: "},
	    {"{\"a\": 1, \"a\": 2}", "duplicate"},
	};
	json_t *doc = NULL;
	char why[200];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		why[0] = '\0';
		assert_int_equal(ds_ledger_payload_json((const uint8_t *)cases[i].payload,
							strlen(cases[i].payload), 0, &doc, why,
							sizeof(why)),
				 -EINVAL);
		assert_null(doc);
		if (!strstr(why, cases[i].why))
			fail_msg("case %zu: '%s' does not say '%s'", i, why, cases[i].why);
	}
	/* Not zstd at all, though the record says so. */
	assert_int_equal(
	    ds_ledger_payload_json((const uint8_t *)"{}", 2, 1, &doc, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "cannot be decompressed"));
	/* Issue 23: nested past the bound, refused before it is parsed. */
	{
		char deep[512];
		size_t n = 0;

		deep[n++] = '{';
		memcpy(deep + n, "\"a\":", 4);
		n += 4;
		for (int i = 0; i < 150; i++)
			deep[n++] = '[';
		for (int i = 0; i < 150; i++)
			deep[n++] = ']';
		deep[n++] = '}';
		assert_int_equal(
		    ds_ledger_payload_json((const uint8_t *)deep, n, 0, &doc, why, sizeof(why)),
		    -EINVAL);
		assert_null(doc);
		assert_non_null(strstr(why, "payload refused: JSON nested deeper than 100 levels"));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ledger_objects__newest_state_before_and_after_the_fold),
	    cmocka_unit_test(test_ledger_objects__tombstone_and_kinds_filter),
	    cmocka_unit_test(test_ledger_objects__no_ledger_and_an_empty_one),
	    cmocka_unit_test(test_ledger_objects__payloads_that_are_not_objects_say_why),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
