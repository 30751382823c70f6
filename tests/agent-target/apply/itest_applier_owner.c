/*
 * The apply stage against a real API server: whose object it is (SPEC §5, §6).
 * A second source may not write the first one's object; a field another
 * manager took on an object drasync made is taken back once, and said; an
 * object a person made is refused, and kept by its tombstone, unless
 * adoptExisting.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/applier.h"
#include "drasync/k8s_object.h"
#include "drasync/kube_client.h"
#include "dstest.h"
#include "testutil.h"
#include "tu_apply.h"
#include "tu_kube.h"
#include "tu_ledger.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void commit_namespace(tu_apply *e)
{
	tu_apply_commit1(
	    e, tu_objf("apiVersion: v1\nkind: Namespace\nmetadata: {name: '%s'}\n", e->src));
}

static void test_itest_applier__two_sources_writing_one_object_is_a_conflict(void **state)
{
	tu_apply *e = tu_apply_new("conflict", NULL);
	tu_ledger west;
	ds_record rec;
	char *payload = NULL;
	json_t *obj, *got;

	(void)state;
	commit_namespace(e);
	tu_apply_commit1(
	    e, tu_objf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shared, namespace: "
		       "'%s'}\ndata: {from: east}\n",
		       e->src));
	assert_int_equal(tu_apply_pass(e), 2);
	/* A second source sends an object that maps onto the same one. */
	tu_ledger_open(&west, e->path, "prod-west");
	obj = tu_objf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shared, namespace: "
		      "'%s'}\ndata: {from: west}\n",
		      e->src);
	rec = tu_record_upsert(obj, "uid-west", &payload);
	tu_ledger_commit(&west, &rec, 1, NULL, NULL);
	json_decref(obj);
	free(payload);
	assert_int_equal(tu_apply_pass(e), 1);
	{
		ds_object_state *st = NULL;
		ds_object_state_row r;
		char key[300];

		ds_object_state_key("v1", "ConfigMap", e->src, "shared", key, sizeof(key));
		assert_int_equal(ds_object_state_open(&st, e->path, NULL), 0);
		assert_int_equal(ds_object_state_get(st, "prod-west", key, &r, NULL), 0);
		if (r.state != DS_APPLY_REFUSED || !strstr(r.reason, "conflict") ||
		    !strstr(r.reason, "source prod-east"))
			fail_msg("second source: %s (%s)", ds_apply_state_name(r.state), r.reason);
		ds_object_state_row_dispose(&r);
		ds_object_state_free(st);
	}
	/* The first source's version is what the target holds. */
	got = tu_apply_target_get(e, "v1", "ConfigMap", "shared");
	assert_non_null(got);
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(got, "data"), "from")), "east");
	json_decref(got);
	tu_ledger_close(&west);
	tu_apply_free(e);
}

static void test_itest_applier__field_owned_by_another_manager_is_taken_over_once(void **state)
{
	tu_apply *e = tu_apply_new("takeover", NULL);
	struct ds_kube_resource cmr;
	ds_kube_error ke;
	json_t *theirs, *objs[2], *got;
	char b[800];
	uint64_t w0;

	(void)state;
	commit_namespace(e);
	assert_int_equal(tu_apply_pass(e), 1);
	/* drasync made the object; then someone on the target took data.v of it */
	tu_apply_commit1(e, tu_objf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shared, "
				    "namespace: '%s'}\ndata: {v: first}\n",
				    e->src));
	assert_int_equal(tu_apply_pass(e), 1);
	cmr = tu_kube_resource(e->k, "v1", "ConfigMap");
	theirs = json_pack("{s:s, s:s, s:{s:s}, s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
			   "metadata", "name", "shared", "data", "v", "theirs");
	if (ds_kube_apply(e->k, &cmr, e->dst, theirs, "other-team", true, NULL, NULL, &ke) < 0)
		fail_msg("apply as other-team: %s", ds_kube_error_format(&ke, b, sizeof(b)));
	json_decref(theirs);

	objs[0] = tu_objf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shared, namespace: "
			  "'%s'}\ndata: {v: ours}\n",
			  e->src);
	objs[1] = tu_objf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: plain, namespace: "
			  "'%s'}\ndata: {v: ours}\n",
			  e->src);
	tu_apply_commit(e, objs, 2);
	json_decref(objs[0]);
	json_decref(objs[1]);
	w0 = tu_apply_stats(e).api_writes;
	assert_int_equal(tu_apply_pass(e), 2);
	/* only the conflicted object paid a second request */
	assert_int_equal(tu_apply_stats(e).api_writes - w0, 3);
	tu_apply_assert_state(e, "v1", "ConfigMap", "shared", DS_APPLY_APPLIED,
			      "took over .data.v from field manager other-team");
	tu_apply_assert_state(e, "v1", "ConfigMap", "plain", DS_APPLY_APPLIED, NULL);
	assert_int_equal(e->takeovers, 1);
	assert_non_null(strstr(e->took_reason, "other-team"));
	assert_non_null(strstr(e->took_reason, ".data.v"));
	got = tu_apply_target_get(e, "v1", "ConfigMap", "shared");
	assert_non_null(got);
	assert_string_equal(dt_str(got, "/data/v"), "ours");
	json_decref(got);

	/* the same record again: nothing to do, nothing reported */
	tu_apply_commit1(
	    e, tu_objf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shared, namespace: "
		       "'%s'}\ndata: {v: ours}\n",
		       e->src));
	assert_int_equal(tu_apply_pass(e), 0);
	/* a new version: drasync owns the field now, one request, no takeover */
	w0 = tu_apply_stats(e).api_writes;
	tu_apply_commit1(
	    e, tu_objf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shared, namespace: "
		       "'%s'}\ndata: {v: ours, w: more}\n",
		       e->src));
	assert_int_equal(tu_apply_pass(e), 1);
	assert_int_equal(tu_apply_stats(e).api_writes - w0, 1);
	assert_int_equal(e->takeovers, 1);
	{
		ds_object_state_row r = tu_apply_row(e, "v1", "ConfigMap", "shared", false);
		assert_int_equal(r.state, DS_APPLY_APPLIED);
		assert_null(r.reason);
		ds_object_state_row_dispose(&r);
	}
	tu_apply_free(e);
}

/*
 * SPEC §5: an object a person made on the target is not drasync's to take:
 * its first write is refused and a tombstone leaves it; with adoptExisting it
 * is taken over in one write, and said so.
 */
static void test_itest_applier__object_a_person_made_is_refused_unless_adopted(void **state)
{
	static const tu_apply_opts adopt = {.dra_yaml = "adoptExisting: true\n"};
	struct ds_kube_resource cmr;
	json_t *theirs, *got;
	uint64_t w0;

	(void)state;
	for (int pass = 0; pass < 2; pass++) {
		tu_apply *e = tu_apply_new(pass ? "adopt" : "refuse", pass ? &adopt : NULL);

		commit_namespace(e);
		assert_int_equal(tu_apply_pass(e), 1);
		cmr = tu_kube_resource(e->k, "v1", "ConfigMap");
		theirs = json_pack("{s:s, s:s, s:{s:s}, s:{s:s}}", "apiVersion", "v1", "kind",
				   "ConfigMap", "metadata", "name", "mine", "data", "v", "person");
		assert_int_equal(ds_kube_create(e->k, &cmr, e->dst, theirs, NULL, NULL), 0);
		json_decref(theirs);
		/* Refused: the only one (a read), or the last of five written first in one pass
		 * (the pass lists what is there instead); adopted: the only one. */
		if (!pass)
			tu_apply_commit_configmaps(e, (const char *[]){"a", "b", "c", "d"}, 4);
		w0 = tu_apply_stats(e).api_writes;
		tu_apply_commit1(e,
				 tu_objf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: mine, "
					 "namespace: '%s'}\ndata: {v: source}\n",
					 e->src));
		assert_int_equal(tu_apply_pass(e), pass ? 1 : 5);
		if (!pass)
			w0 += 4; /* a, b, c and d: one write each */
		got = tu_apply_target_get(e, "v1", "ConfigMap", "mine");
		assert_non_null(got);
		if (!pass) {
			tu_apply_assert_state(
			    e, "v1", "ConfigMap", "mine", DS_APPLY_REFUSED,
			    "exists on the target and was not created by drasync: "
			    "set adoptExisting: true to take it over");
			assert_int_equal(tu_apply_stats(e).api_writes - w0, 0);
			assert_string_equal(dt_str(got, "/data/v"), "person");
			json_decref(got);
			/* the source deletes its own: the person's stays */
			{
				ds_record t = tu_record_tombstone("v1", "ConfigMap", e->src, "mine",
								  "uid-ConfigMap-mine");
				tu_ledger_commit(&e->l, &t, 1, NULL, NULL);
			}
			assert_int_equal(tu_apply_pass(e), 1);
			tu_apply_assert_state(e, "v1", "ConfigMap", "mine", DS_APPLY_KEPT,
					      "not created by drasync");
			assert_int_equal(tu_apply_stats(e).api_writes - w0, 0);
			got = tu_apply_target_get(e, "v1", "ConfigMap", "mine");
			assert_non_null(got);
		} else {
			tu_apply_assert_state(e, "v1", "ConfigMap", "mine", DS_APPLY_APPLIED,
					      "adopted: ConfigMap");
			assert_int_equal(tu_apply_stats(e).api_writes - w0, 1);
			assert_int_equal(e->takeovers, 1);
			assert_string_equal(dt_str(got, "/data/v"), "source");
			assert_string_equal(ds_obj_label(got, "app.kubernetes.io/managed-by"),
					    "drasync");
		}
		json_decref(got);
		tu_apply_free(e);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_itest_applier__two_sources_writing_one_object_is_a_conflict),
	    cmocka_unit_test(test_itest_applier__field_owned_by_another_manager_is_taken_over_once),
	    cmocka_unit_test(test_itest_applier__object_a_person_made_is_refused_unless_adopted),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
