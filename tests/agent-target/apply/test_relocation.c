/* The target's decisions on a relocation (relocation.h): the grant, and the ledger's rows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/kube_client.h"
#include "drasync/object_state.h"
#include "drasync/relocation.h"
#include "drasync/relocator.h"
#include "testutil.h"
#include "tu_kube.h"
#include "tu_ledger.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static ds_target_config *cfg_of(const char *sources)
{
	char yaml[1024];
	ds_target_config *cfg = NULL;
	ds_err err = {0};

	snprintf(yaml, sizeof(yaml),
		 "apiVersion: drasync.io/v1alpha1\nkind: TargetConfig\n"
		 "namespaceMappings: {ml: ml-dr}\n%s",
		 sources);
	assert_int_equal(ds_target_config_parse(&cfg, yaml, strlen(yaml), "target.yaml", &err), 0);
	return cfg;
}

/* A ledger of source east holding relocation records of the namespaces nss, ingested. */
struct fx {
	char *dir, path[4096];
	tu_ledger l;
	ds_object_state *st;
};

static void fx_open(struct fx *f, const char *const *nss, size_t n)
{
	ds_record recs[4];
	ds_err err = {0};

	assert_true(n <= 4);
	f->dir = tu_mkdtemp("ds-treloc");
	snprintf(f->path, sizeof(f->path), "%s/ledger.db", f->dir);
	for (size_t i = 0; i < n; i++)
		recs[i] = (ds_record){.op = DS_RECORD_RELOCATE, .ns = nss[i]};
	tu_ledger_open(&f->l, f->path, "east");
	tu_ledger_commit(&f->l, recs, n, NULL, NULL);
	assert_int_equal(ds_object_state_open(&f->st, f->path, &err), 0);
	assert_int_equal(ds_object_state_ingest(f->st, &err), (int)n);
}

static void fx_close(struct fx *f)
{
	ds_object_state_free(f->st);
	tu_ledger_close(&f->l);
	free(f->dir);
}

static void test_relocation__granted_only_with_relocate_true(void **state)
{
	ds_target_config *yes =
	    cfg_of("sources: [{name: east, namespaces: [ml], relocate: true}]\n");
	ds_target_config *no = cfg_of("sources: [{name: east, namespaces: [ml]}]\n");
	ds_target_config *none = cfg_of("");
	char why[400];

	(void)state;
	assert_true(ds_relocation_granted(yes, "east", "ml", why, sizeof(why)));
	assert_false(ds_relocation_granted(yes, "east", "web", why, sizeof(why)));
	assert_false(ds_relocation_granted(yes, "west", "ml", why, sizeof(why)));
	assert_non_null(strstr(why, "no entry in sources[]"));
	assert_false(ds_relocation_granted(no, "east", "ml", why, sizeof(why)));
	assert_non_null(strstr(why, "sources[].relocate is false"));
	assert_false(ds_relocation_granted(none, "east", "ml", why, sizeof(why)));
	ds_target_config_free(yes);
	ds_target_config_free(no);
	ds_target_config_free(none);
}

/* Ingested once, pending until finished, the outcome queued for the source's Ack. */
static void test_relocation__ledger_rows_and_result(void **state)
{
	struct fx f;
	ds_relocation_row rows[4];
	ds_wire_result res[4];
	size_t n = 0;
	int64_t token = 0;
	ds_err err = {0};

	(void)state;
	fx_open(&f, (const char *[]){"ml"}, 1);
	assert_int_equal(ds_object_state_ingest(f.st, &err), 0); /* once */
	assert_int_equal(ds_relocation_pending(f.st, rows, 4, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(rows[0].source, "east");
	assert_string_equal(rows[0].ns, "ml");
	assert_int_equal(rows[0].seq, 1);
	/* no object of it: the backlog of records to apply stays empty */
	assert_int_equal(tu_ledger_int(f.path, "SELECT count(*) FROM object_state"), 0);

	assert_int_equal(ds_relocation_finish(f.st, &rows[0], "ml-dr", DS_RELOCATION_REFUSED,
					      "refused: no", &err),
			 0);
	assert_int_equal(ds_relocation_pending(f.st, rows, 4, &n, &err), 0);
	assert_int_equal(n, 0);
	assert_int_equal(
	    tu_ledger_int(f.path, "SELECT count(*) FROM relocations WHERE state = 'refused' AND "
				  "target_namespace = 'ml-dr'"),
	    1);
	assert_int_equal(ds_object_state_results(f.st, "east", f.l.epoch, res, 4, &n, &token, &err),
			 0);
	assert_int_equal(n, 1);
	assert_int_equal(res[0].seq, 1);
	assert_int_equal(res[0].status, DS_RESULT_REFUSED);
	assert_string_equal(res[0].message, "refused: no");
	assert_string_equal(ds_relocation_state_name(DS_RELOCATION_ACTIVE), "active");
	fx_close(&f);
}

/* The way home: a record of the namespace after the relocation record returns it (standby
 * here again), counted once its ingest committed, and once only. */
static void test_relocation__returned_is_counted_once(void **state)
{
	char *payload = NULL;
	struct fx f;
	ds_relocation_row rows[4];
	ds_record up;
	json_t *cm = json_pack("{ss ss s{ss ss}}", "apiVersion", "v1", "kind", "ConfigMap",
			       "metadata", "name", "c", "namespace", "ml");
	uint64_t before = ds_relocation_returned_total();
	size_t n = 0;
	ds_err err = {0};

	(void)state;
	fx_open(&f, (const char *[]){"ml"}, 1);
	assert_int_equal(ds_relocation_pending(f.st, rows, 4, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(ds_relocation_finish(f.st, &rows[0], "ml-dr", DS_RELOCATION_ACTIVE,
					      "verified active", &err),
			 0);
	assert_int_equal(ds_relocation_returned_total(), before);

	up = tu_record_upsert(cm, "u1", &payload);
	tu_ledger_commit(&f.l, &up, 1, NULL, NULL);
	assert_int_equal(ds_object_state_ingest(f.st, &err), 1);
	assert_int_equal(
	    tu_ledger_int(f.path, "SELECT count(*) FROM relocations WHERE state = 'returned'"), 1);
	assert_int_equal(tu_ledger_int(f.path,
				       "SELECT count(*) FROM namespace_modes WHERE namespace "
				       "= 'ml-dr' AND mode = 'standby'"),
			 1);
	assert_int_equal(ds_relocation_returned_total(), before + 1);
	/* another record of it: home already, not counted again */
	free(payload);
	up = tu_record_upsert(cm, "u1", &payload);
	tu_ledger_commit(&f.l, &up, 1, NULL, NULL);
	assert_int_equal(ds_object_state_ingest(f.st, &err), 1);
	assert_int_equal(ds_relocation_returned_total(), before + 1);
	assert_string_equal(ds_relocation_state_name(DS_RELOCATION_RETURNED), "returned");
	free(payload);
	json_decref(cm);
	fx_close(&f);
}

static void count_done(void *ud, const char *source, int state)
{
	int *counts = ud;

	assert_string_equal(source, "east");
	if (state >= 0 && state < DS_RELOCATION_STATE_MAX)
		counts[state]++;
}

/* The relocator takes every relocation pending at once: those not granted are refused in one
 * step, nothing stays pending, each outcome is said once. */
static void test_relocation__relocator_refuses_all_pending_in_one_step(void **state)
{
	ds_target_config *no = cfg_of("sources: [{name: east, namespaces: [ml, web]}]\n");
	struct fx f;
	ds_relocation_ctx c = {.config_path = "target.yaml", .cfg = no};
	ds_relocator *rel = NULL;
	ds_relocation_row rows[4];
	int counts[DS_RELOCATION_STATE_MAX] = {0};
	size_t n = 0;
	ds_err err = {0};

	(void)state;
	fx_open(&f, (const char *[]){"ml", "web"}, 2);
	c.ledger_path = f.path;
	assert_int_equal(ds_relocator_new(&rel, f.st), 0);
	assert_int_equal(ds_relocator_step(rel, &c, count_done, counts, &err), 0);
	assert_int_equal(counts[DS_RELOCATION_REFUSED], 2);
	assert_int_equal(ds_relocation_pending(f.st, rows, 4, &n, &err), 0);
	assert_int_equal(n, 0);
	assert_int_equal(
	    tu_ledger_int(f.path, "SELECT count(*) FROM relocations WHERE state = 'refused'"), 2);
	/* nothing more to do: a second step says nothing */
	assert_int_equal(ds_relocator_step(rel, &c, count_done, counts, &err), 0);
	assert_int_equal(counts[DS_RELOCATION_REFUSED], 2);
	ds_relocator_free(rel);
	ds_target_config_free(no);
	fx_close(&f);
}

/* Granted relocations fail over on a batch's thread: the steps go on while it runs, and once
 * it is done (here: the cluster refuses, so the failover fails) each outcome is recorded and
 * said once, the batch's reference to the configuration dropped, nothing left pending. */
static void test_relocation__relocator_batch_outcomes_once(void **state)
{
	ds_target_config *yes = cfg_of("sources: [{name: east, namespaces: [ml, web], "
				       "relocate: true}]\n");
	struct fx f;
	ds_kube *k;
	ds_relocation_ctx c = {.config_path = "target.yaml", .cfg = yes};
	ds_relocator *rel = NULL;
	ds_relocation_row rows[4];
	int counts[DS_RELOCATION_STATE_MAX] = {0}, rc = 1;
	size_t n = 0;
	ds_err err = {0};

	(void)state;
	fx_open(&f, (const char *[]){"ml", "web"}, 2);
	c.ledger_path = f.path;
	c.kube = k = tu_kube_refusing(f.dir);
	assert_int_equal(ds_relocator_new(&rel, f.st), 0);
	/* steps as the relocator's thread takes them, until nothing is in flight */
	for (int i = 0; i < 300 && rc > 0; i++) {
		rc = ds_relocator_step(rel, &c, count_done, counts, &err);
		assert_true(rc >= 0);
		if (rc > 0)
			nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
	}
	assert_int_equal(rc, 0);
	assert_int_equal(counts[DS_RELOCATION_FAILED], 2);
	assert_int_equal(counts[DS_RELOCATION_ACTIVE], 0);
	assert_int_equal(ds_relocation_pending(f.st, rows, 4, &n, &err), 0);
	assert_int_equal(n, 0);
	assert_int_equal(
	    tu_ledger_int(f.path, "SELECT count(*) FROM relocations WHERE state = 'failed'"), 2);
	assert_int_equal(ds_target_config_refs(yes), 1);
	/* nothing more to do: a second step says nothing */
	assert_int_equal(ds_relocator_step(rel, &c, count_done, counts, &err), 0);
	assert_int_equal(counts[DS_RELOCATION_FAILED], 2);
	ds_relocator_free(rel);
	ds_kube_free(k);
	ds_target_config_free(yes);
	fx_close(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_relocation__granted_only_with_relocate_true),
	    cmocka_unit_test(test_relocation__ledger_rows_and_result),
	    cmocka_unit_test(test_relocation__returned_is_counted_once),
	    cmocka_unit_test(test_relocation__relocator_refuses_all_pending_in_one_step),
	    cmocka_unit_test(test_relocation__relocator_batch_outcomes_once),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
