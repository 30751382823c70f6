/*
 * drasync-target status as an operator runs it, on a real ledger file that
 * the test fills as the receiver and the applier would (real inbox commits,
 * real object_state decisions): no agent needs to run.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/namespace_mode.h"
#include "drasync/object_state.h"
#include "drasync/verify.h"
#include "testutil.h"
#include "tu_ledger.h"

#include <jansson.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct site {
	char *dir;
	char config[1100], ledger[1100];
};

static void site_new(struct site *s)
{
	char text[2400];

	memset(s, 0, sizeof(*s));
	s->dir = tu_mkdtemp("target-status");
	snprintf(s->config, sizeof(s->config), "%s/target.yaml", s->dir);
	snprintf(s->ledger, sizeof(s->ledger), "%s/ledger.db", s->dir);
	snprintf(text, sizeof(text),
		 "apiVersion: drasync.io/v1alpha1\nkind: TargetConfig\nmode: migrate\n"
		 "stateDir: %s\n",
		 s->dir);
	tu_write_file(s->config, text);
}

/* Commit ConfigMaps a, b, c from source and decide them: a applied, b failed, c waiting. */
static void fill(struct site *s, const char *source)
{
	tu_ledger l;
	ds_object_state *st = NULL;
	ds_object_state_row *rows = NULL;
	ds_record recs[4];
	char *payloads[4];
	const char *names[4] = {"a", "b", "c", "d"};
	uint8_t h[DS_HASH_LEN] = {3};
	size_t n = 0;
	ds_err err = {0};

	tu_ledger_open(&l, s->ledger, source);
	for (int i = 0; i < 4; i++) {
		json_t *o = json_pack("{s:s, s:s, s:{s:s, s:s}}", "apiVersion", "v1", "kind",
				      "ConfigMap", "metadata", "name", names[i], "namespace", "ml");
		recs[i] = tu_record_upsert(o, "uid", &payloads[i]);
		recs[i].api_version = "v1";
		recs[i].kind = "ConfigMap";
		recs[i].ns = "ml";
		recs[i].name = names[i];
		json_decref(o);
	}
	tu_ledger_commit(&l, recs, 4, NULL, NULL);
	for (int i = 0; i < 4; i++)
		free(payloads[i]);
	assert_int_equal(ds_object_state_open(&st, s->ledger, &err), 0);
	assert_true(ds_object_state_ingest(st, &err) >= 0);
	assert_int_equal(ds_object_state_pick(st, INT64_MAX, 10, &rows, &n, &err), 0);
	assert_int_equal(n, 4);
	for (size_t i = 0; i < 3; i++) {
		ds_object_state_result res = {0};
		res.state = i == 0 ? DS_APPLY_APPLIED : i == 1 ? DS_APPLY_FAILED : DS_APPLY_WAITING;
		res.reason = i == 1   ? "apply: 422 Invalid: data key 'x y' is not valid"
			     : i == 2 ? "waits for ResourceClaimTemplate ml/gpu"
				      : NULL;
		res.applied_hash = i == 0 ? h : NULL;
		res.target_ns = "ml-dr";
		res.target_name = rows[i].name;
		res.target_api_version = "v1";
		assert_int_equal(ds_object_state_set(st, rows[i].id, rows[i].record_id, &res, &err),
				 0);
	}
	ds_object_state_rows_free(rows, n);
	ds_object_state_free(st);
	tu_ledger_close(&l);
}

/* As failback records it: ml-dr standby. */
static void set_standby(struct site *s)
{
	ds_namespace_modes *nm = NULL;
	ds_err err = {0};

	assert_int_equal(ds_namespace_modes_open(&nm, s->ledger, &err), 0);
	assert_int_equal(ds_namespace_modes_set(nm, "ml-dr", DS_MODE_STANDBY, "failback", &err), 1);
	ds_namespace_modes_free(nm);
}

static void status(struct site *s, const char *output, struct tu_run *r)
{
	tu_run(r, NULL,
	       (const char *[]){tu_env("DS_TARGET_BIN"), "status", "--config", s->config, "-o",
				output, NULL});
}

static void test_cmd_status__text_and_json_field_by_field(void **state)
{
	struct site s;
	struct tu_run r;
	json_t *o, *src;
	json_error_t jerr;

	(void)state;
	site_new(&s);
	fill(&s, "prod-east");
	set_standby(&s);

	status(&s, "text", &r);
	/* a failed and a waiting object: attention, exit 1 */
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.out, "prod-east"));
	assert_non_null(strstr(r.out, "applied 1 waiting 1 failed 1"));
	assert_non_null(strstr(r.out, "pending 1"));
	assert_non_null(strstr(r.out, "failed  ConfigMap ml/b (source prod-east): apply: 422"));
	assert_non_null(strstr(r.out, "waiting ConfigMap ml/c (source prod-east): waits for "
				      "ResourceClaimTemplate ml/gpu"));
	assert_non_null(strstr(r.out, "needs attention: objects failed to apply"));
	/* committed a moment ago: no lag to speak of yet */
	assert_non_null(strstr(r.out, "LAG"));
	assert_true(strstr(r.out, " 0s ") || strstr(r.out, " 1s "));
	/* per target namespace: the mode failback set, and the configuration's for ml,
	 * where object d (never applied) goes */
	assert_non_null(strstr(r.out, "NAMESPACE"));
	{
		const char *dr = strstr(r.out, "\nml-dr "), *ml = strstr(r.out, "\nml ");
		assert_non_null(dr);
		assert_non_null(ml);
		assert_non_null(strstr(dr, "standby"));
		assert_true(strstr(dr, "standby") < strchr(dr + 1, '\n'));
		assert_true(strstr(dr, "failback") < strchr(dr + 1, '\n'));
		assert_true(strstr(dr, "Z ") < strchr(dr + 1, '\n')); /* since, ISO 8601 */
		assert_true(strstr(ml, "active") < strchr(ml + 1, '\n'));
		assert_true(strstr(ml, "config") < strchr(ml + 1, '\n'));
	}
	tu_run_dispose(&r);

	/* The records were committed two minutes ago: the one not applied yet is
	 * the lag, in seconds. */
	{
		sqlite3 *db = NULL;
		assert_int_equal(sqlite3_open(s.ledger, &db), SQLITE_OK);
		assert_int_equal(
		    sqlite3_exec(db, "UPDATE records SET committed_at = committed_at - 120", NULL,
				 NULL, NULL),
		    SQLITE_OK);
		sqlite3_close(db);
	}
	status(&s, "json", &r);
	assert_int_equal(r.status, 1);
	o = json_loads(r.out, 0, &jerr);
	if (!o)
		fail_msg("status -o json is not JSON (%s):\n%s", jerr.text, r.out);
	src = json_array_get(json_object_get(o, "sources"), 0);
	assert_string_equal(json_string_value(json_object_get(src, "name")), "prod-east");
	assert_string_equal(json_string_value(json_object_get(src, "cluster")), "prod-east");
	assert_int_equal(json_integer_value(json_object_get(src, "committedSeq")), 4);
	/* the pending one is the backlog */
	assert_int_equal(json_integer_value(json_object_get(src, "unapplied")), 1);
	assert_int_equal(json_integer_value(json_object_get(src, "objects")), 4);
	assert_true(json_integer_value(json_object_get(src, "lastContact")) > 0);
	assert_true(json_integer_value(json_object_get(src, "lagSeconds")) >= 120);
	assert_true(json_integer_value(json_object_get(src, "lagSeconds")) < 180);
	assert_int_equal(
	    json_integer_value(json_object_get(json_object_get(o, "objects"), "failed")), 1);
	assert_int_equal(json_array_size(json_object_get(o, "needsLook")), 2);
	assert_false(json_is_true(json_object_get(o, "healthy")));
	assert_string_equal(json_string_value(json_object_get(o, "mode")), "migrate");
	{
		json_t *nss = json_object_get(o, "namespaces"), *ml = json_array_get(nss, 0),
		       *dr = json_array_get(nss, 1);
		assert_int_equal(json_array_size(nss), 2);
		assert_string_equal(json_string_value(json_object_get(ml, "name")), "ml");
		assert_string_equal(json_string_value(json_object_get(ml, "mode")), "active");
		assert_true(json_is_null(json_object_get(ml, "since")));
		assert_string_equal(json_string_value(json_object_get(ml, "changedBy")), "config");
		/* b, c and d were never applied: in their source namespace, unmapped */
		assert_int_equal(json_integer_value(json_object_get(ml, "objects")), 3);
		assert_string_equal(json_string_value(json_object_get(dr, "name")), "ml-dr");
		assert_string_equal(json_string_value(json_object_get(dr, "mode")), "standby");
		assert_true(json_integer_value(json_object_get(dr, "since")) > 1700000000);
		assert_string_equal(json_string_value(json_object_get(dr, "changedBy")),
				    "failback");
		assert_int_equal(json_integer_value(json_object_get(dr, "objects")), 1);
		assert_int_equal(json_integer_value(json_object_get(dr, "held")), 0);
	}
	json_decref(o);
	tu_run_dispose(&r);
	free(s.dir);
}

static void test_cmd_status__no_ledger_and_bad_arguments_exit_2(void **state)
{
	struct site s;
	struct tu_run r;

	(void)state;
	site_new(&s);
	status(&s, "text", &r);
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "no ledger at"));
	assert_non_null(strstr(r.err, "has not started with this stateDir"));
	tu_run_dispose(&r);
	status(&s, "yaml", &r);
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "is not text or json"));
	tu_run_dispose(&r);
	tu_run(&r, NULL, (const char *[]){tu_env("DS_TARGET_BIN"), "status", NULL});
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "--config FILE is required"));
	tu_run_dispose(&r);
	free(s.dir);
}

/* Deployments web and big applied, then verified: web verified, big not. */
static void fill_verified(struct site *s)
{
	tu_ledger l;
	ds_object_state *st = NULL;
	ds_object_state_row *rows = NULL;
	ds_record recs[2];
	char *payloads[2];
	json_t *objs[2];
	const char *names[2] = {"big", "web"};
	ds_verify_item items[2];
	uint8_t h[DS_HASH_LEN] = {5};
	size_t n = 0;
	ds_err err = {0};

	tu_ledger_open(&l, s->ledger, "prod-east");
	for (int i = 0; i < 2; i++) {
		objs[i] = json_pack("{s:s, s:s, s:{s:s, s:s}}", "apiVersion", "apps/v1", "kind",
				    "Deployment", "metadata", "name", names[i], "namespace", "ml");
		recs[i] = tu_record_upsert(objs[i], "uid", &payloads[i]);
	}
	tu_ledger_commit(&l, recs, 2, NULL, NULL);
	for (int i = 0; i < 2; i++) {
		free(payloads[i]);
		json_decref(objs[i]);
	}
	assert_int_equal(ds_object_state_open(&st, s->ledger, &err), 0);
	assert_true(ds_object_state_ingest(st, &err) >= 0);
	assert_int_equal(ds_object_state_pick(st, INT64_MAX, 10, &rows, &n, &err), 0);
	for (size_t i = 0; i < n; i++) {
		ds_object_state_result res = {.state = DS_APPLY_APPLIED,
					      .applied_hash = h,
					      .target_ns = "ml-dr",
					      .target_name = rows[i].name,
					      .target_api_version = "apps/v1"};
		assert_int_equal(ds_object_state_set(st, rows[i].id, rows[i].record_id, &res, &err),
				 0);
	}
	ds_object_state_rows_free(rows, n);
	ds_object_state_free(st);
	tu_ledger_close(&l);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(ds_verify_item_init(&items[i], "Deployment", "ml-dr", names[i],
						     DS_VERIFY_ACTIVE, false),
				 0);
		items[i].verified = i == 1;
		items[i].seconds = 2.5;
		snprintf(items[i].reason, sizeof(items[i].reason), "%s",
			 i == 1 ? "2/2 pods Running"
				: "pod big-1 is not scheduled: 0/2 nodes are available: 2 cannot "
				  "allocate all claims");
	}
	assert_int_equal(ds_verify_store(s->ledger, items, 2, &err), 0);
	for (int i = 0; i < 2; i++)
		ds_verify_item_dispose(&items[i]);
}

static void test_cmd_status__last_verification_needs_attention_when_not_verified(void **state)
{
	struct site s;
	struct tu_run r;
	json_t *o, *ver, *first;
	json_error_t jerr;

	(void)state;
	site_new(&s);
	fill_verified(&s);
	status(&s, "text", &r);
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.out, "verification: 1 verified, 1 NOT verified (last checked 20"));
	assert_non_null(strstr(r.out, "NOT verified Deployment ml-dr/big (active, 20"));
	assert_non_null(strstr(r.out, "): pod big-1 is not scheduled: 0/2 nodes are available"));
	assert_null(strstr(r.out, "ml-dr/web"));
	assert_non_null(strstr(r.out, "needs attention: workloads failed their last verification"));
	tu_run_dispose(&r);

	/* The records were committed two minutes ago: the one not applied yet is
	 * the lag, in seconds. */
	{
		sqlite3 *db = NULL;
		assert_int_equal(sqlite3_open(s.ledger, &db), SQLITE_OK);
		assert_int_equal(
		    sqlite3_exec(db, "UPDATE records SET committed_at = committed_at - 120", NULL,
				 NULL, NULL),
		    SQLITE_OK);
		sqlite3_close(db);
	}
	status(&s, "json", &r);
	assert_int_equal(r.status, 1);
	o = json_loads(r.out, 0, &jerr);
	if (!o)
		fail_msg("status -o json is not JSON (%s):\n%s", jerr.text, r.out);
	ver = json_object_get(o, "verification");
	assert_int_equal(json_integer_value(json_object_get(ver, "verified")), 1);
	assert_int_equal(json_integer_value(json_object_get(ver, "notVerified")), 1);
	assert_true(json_integer_value(json_object_get(ver, "lastChecked")) > 0);
	assert_int_equal(json_array_size(json_object_get(ver, "workloads")), 2);
	first = json_array_get(json_object_get(ver, "workloads"), 0);
	assert_string_equal(json_string_value(json_object_get(first, "name")), "big");
	assert_false(json_is_true(json_object_get(first, "verified")));
	assert_string_equal(json_string_value(json_object_get(first, "form")), "active");
	assert_string_equal(json_string_value(json_object_get(o, "attention")),
			    "workloads failed their last verification");
	json_decref(o);
	tu_run_dispose(&r);
	free(s.dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cmd_status__text_and_json_field_by_field),
	    cmocka_unit_test(test_cmd_status__no_ledger_and_bad_arguments_exit_2),
	    cmocka_unit_test(test_cmd_status__last_verification_needs_attention_when_not_verified),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
