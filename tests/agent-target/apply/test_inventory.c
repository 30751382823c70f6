/*
 * The inventory on real ledger files filled with the fixtures' workloads as
 * the receiver commits them (zstd payloads included) and the applier folds
 * them: every row, field by field; the newest state of an object; the rules
 * -o yaml starts from, loaded back as a TargetConfig. No cluster: the exists
 * column is checked by itest_inventory.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/inventory.h"
#include "drasync/manifest.h"
#include "drasync/object_state.h"
#include "dstest.h"
#include "testutil.h"
#include "tu_ledger.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SOURCE "prod-east"

/* The rules are on lines 6 and 8 (rule_line). */
static const char *const config_text =
    "apiVersion: drasync.io/v1alpha1\n"
    "kind: TargetConfig\n"
    "namespaceMappings: {basic-shared-claim-across-pods: across-pods-dr}\n"
    "dra:\n"
    "  resourceClaimMappings:\n"
    "    - {objectType: Pod, objectInstance: pod1, container: ctr0, resourceClaim: gpu-rc-claim1}\n"
    "  resourceClaimTemplateMappings:\n"
    "    - {objectType: Deployment, objectInstance: gpu-app, container: ALL, "
    "resourceClaimTemplate: gpu-rct2}\n";

struct env {
	char *dir;
	char path[1024];
	tu_ledger l;
	ds_target_config *cfg;
	json_t *keep; /* objects committed, alive as long as the env */
};

static struct env *env_new(const char *name)
{
	struct env *e = calloc(1, sizeof(*e));

	assert_non_null(e);
	e->dir = tu_mkdtemp(name);
	snprintf(e->path, sizeof(e->path), "%s/ledger.db", e->dir);
	tu_ledger_open(&e->l, e->path, SOURCE);
	e->cfg = dt_config(config_text);
	e->keep = json_array();
	return e;
}

static void env_free(struct env *e)
{
	tu_ledger_close(&e->l);
	ds_target_config_free(e->cfg);
	json_decref(e->keep);
	free(e->dir);
	free(e);
}

/* Commit upserts of objs (borrowed) in one batch. */
static void commit(struct env *e, json_t *const *objs, size_t n)
{
	ds_record recs[32];
	char *payloads[32];

	assert_true(n <= 32);
	for (size_t i = 0; i < n; i++)
		recs[i] = tu_record_upsert(objs[i], "uid", &payloads[i]);
	tu_ledger_commit(&e->l, recs, n, NULL, NULL);
	for (size_t i = 0; i < n; i++)
		free(payloads[i]);
}

/* Commit every object of a fixture file, one batch. */
static void commit_fixture(struct env *e, const char *rel)
{
	ds_manifest *m = NULL;
	json_t *objs[32];
	ds_err err = {0};
	size_t n;

	assert_int_equal(ds_manifest_new(&m), 0);
	if (ds_manifest_load(m, tu_fixture(rel), &err) < 0)
		fail_msg("%s: %s", rel, err.msg);
	n = ds_manifest_count(m);
	assert_true(n <= 32);
	for (size_t i = 0; i < n; i++) {
		objs[i] = ds_manifest_object(m, i);
		json_array_append(e->keep, objs[i]);
	}
	commit(e, objs, n);
	ds_manifest_free(m);
}

/* The Pod `name` of a fixture file, or its pod spec wrapped as another workload. */
static json_t *fixture_workload(const char *rel, const char *pod, const char *kind, const char *ns,
				const char *name)
{
	json_t *docs = dt_load_file(tu_fixture(rel));
	json_t *spec = json_deep_copy(json_object_get(dt_find(docs, "Pod", pod), "spec"));
	json_t *tmpl = json_pack("{s{s{ss}}so}", "metadata", "labels", "app", name, "spec", spec);
	json_t *o;

	if (strcmp(kind, "CronJob") == 0)
		o = json_pack("{ss ss s{ss ss} s{ss s{s{so}}}}", "apiVersion", "batch/v1", "kind",
			      kind, "metadata", "name", name, "namespace", ns, "spec", "schedule",
			      "0 3 * * *", "jobTemplate", "spec", "template", tmpl);
	else
		o = json_pack("{ss ss s{ss ss} s{so}}", "apiVersion", "apps/v1", "kind", kind,
			      "metadata", "name", name, "namespace", ns, "spec", "template", tmpl);
	assert_non_null(o);
	json_decref(docs);
	return o;
}

/* Fold what was committed into object_state, as the applier's next pass would. */
static void ingest(struct env *e, const char *applied_name)
{
	ds_object_state *st = NULL;
	ds_object_state_row *rows = NULL;
	ds_err err = {0};
	size_t n = 0;

	assert_int_equal(ds_object_state_open(&st, e->path, &err), 0);
	assert_true(ds_object_state_ingest(st, &err) >= 0);
	assert_int_equal(ds_object_state_pick(st, INT64_MAX, 100, &rows, &n, &err), 0);
	for (size_t i = 0; applied_name && i < n; i++) {
		ds_object_state_result res = {.state = DS_APPLY_APPLIED};
		uint8_t h[DS_HASH_LEN] = {1};

		if (strcmp(rows[i].name, applied_name) != 0 || strcmp(rows[i].kind, "Pod") != 0)
			continue;
		res.applied_hash = h;
		assert_int_equal(ds_object_state_set(st, rows[i].id, rows[i].record_id, &res, &err),
				 0);
	}
	ds_object_state_rows_free(rows, n);
	ds_object_state_free(st);
}

static ds_inventory *read_inv(struct env *e, const ds_target_config *cfg, const char *const *ns,
			      size_t n_ns)
{
	ds_inventory_opts o = {.ledger_path = e->path,
			       .cfg = cfg ? cfg : e->cfg,
			       .namespaces = ns,
			       .n_namespaces = n_ns,
			       .no_kube_reason = "not checked (test)"};
	ds_inventory *inv = NULL;
	ds_err err = {0};

	if (ds_inventory_read(&o, &inv, &err) < 0)
		fail_msg("inventory: %s", err.msg);
	return inv;
}

/* What one row must say; NULL strings must be NULL. */
struct want {
	enum ds_inventory_type type;
	const char *ns, *target_ns, *object_type, *instance, *state, *container;
	bool init;
	const char *entry;
	enum ds_target_kind kind;
	const char *from;
	enum ds_target_kind target_kind;
	const char *target, *rule;
	int rule_line;
	bool replicated;
};

#define assert_str_or_null(a, b)                                                                   \
	do {                                                                                       \
		if (!(b))                                                                          \
			assert_null(a);                                                            \
		else {                                                                             \
			assert_non_null(a);                                                        \
			assert_string_equal(a, b);                                                 \
		}                                                                                  \
	} while (0)

static void check_row(const ds_inventory_ref *r, const struct want *w)
{
	assert_int_equal(r->type, w->type);
	assert_string_equal(r->source, SOURCE);
	assert_string_equal(r->ns, w->ns);
	assert_string_equal(r->target_ns, w->target_ns);
	assert_string_equal(r->object_type, w->object_type);
	assert_string_equal(r->instance, w->instance);
	assert_str_or_null(r->state, w->state);
	assert_str_or_null(r->container, w->container);
	assert_int_equal(r->init_container, w->init);
	assert_str_or_null(r->entry, w->entry);
	assert_int_equal(r->kind, w->kind);
	assert_str_or_null(r->from, w->from);
	assert_int_equal(r->target_kind, w->target_kind);
	assert_str_or_null(r->target, w->target);
	assert_str_or_null(r->rule, w->rule);
	assert_int_equal(r->rule_line, w->rule_line);
	assert_null(r->error);
	/* no cluster in unit tests: unknown, with the caller's reason */
	assert_int_equal(r->exists, DS_EXISTS_UNKNOWN);
	assert_string_equal(r->exists_reason, "not checked (test)");
	assert_int_equal(r->replicated, w->replicated);
	assert_false(ds_inventory_ref_missing(r));
}

/* Three fixture files and a Deployment and CronJob made of their pod specs. */
static void fill(struct env *e)
{
	json_t *more[2];

	commit_fixture(e, "dra-example-driver/v1/basic-shared-claim-across-pods.yaml");
	commit_fixture(e, "dra-example-driver/v1/initcontainer-shared-gpu.yaml");
	ingest(e, "pod0"); /* folded in; both pod0 applied */
	more[0] = fixture_workload("dra-example-driver/v1/initcontainer-shared-gpu.yaml", "pod0",
				   "Deployment", "basic-shared-claim-across-pods", "gpu-app");
	more[1] = fixture_workload("dra-example-driver/v1/basic-multiple-requests.yaml", "pod0",
				   "CronJob", "basic-shared-claim-across-pods", "nightly");
	/* an entry no container lists */
	json_array_append_new(
	    ds_json_path(more[1], "spec.jobTemplate.spec.template.spec.resourceClaims"),
	    json_pack("{ss ss}", "name", "spare", "resourceClaimName", "spare-claim"));
	commit(e, more, 2); /* after the cursor: not folded in yet */
	json_decref(more[0]);
	json_decref(more[1]);
}

static void test_inventory__fixtures_field_by_field(void **state)
{
	struct env *e = env_new("inventory-fields");
	const char *A = "basic-shared-claim-across-pods", *ADR = "across-pods-dr",
		   *I = "initcontainer-shared-gpu";
	const struct want want[] = {
	    {DS_INVENTORY_REFERENCE, A, ADR, "Pod", "pod0", "applied", "ctr0", false, "shared-gpu",
	     DS_TARGET_CLAIM, "single-gpu", DS_TARGET_CLAIM, "single-gpu", NULL, 0, true},
	    {DS_INVENTORY_REFERENCE, A, ADR, "Pod", "pod1", "pending", "ctr0", false, "shared-gpu",
	     DS_TARGET_CLAIM, "single-gpu", DS_TARGET_CLAIM, "gpu-rc-claim1",
	     "dra.resourceClaimMappings[0]", 6, false},
	    {DS_INVENTORY_REFERENCE, A, ADR, "Deployment", "gpu-app", "pending", "init0", true,
	     "shared-gpu", DS_TARGET_TEMPLATE, "single-gpu", DS_TARGET_TEMPLATE, "gpu-rct2",
	     "dra.resourceClaimTemplateMappings[0]", 8, false},
	    {DS_INVENTORY_REFERENCE, A, ADR, "Deployment", "gpu-app", "pending", "ctr0", false,
	     "shared-gpu", DS_TARGET_TEMPLATE, "single-gpu", DS_TARGET_TEMPLATE, "gpu-rct2",
	     "dra.resourceClaimTemplateMappings[0]", 8, false},
	    {DS_INVENTORY_REFERENCE, A, ADR, "CronJob", "nightly", "pending", "ctr0", false, "gpus",
	     DS_TARGET_TEMPLATE, "multiple-gpus", DS_TARGET_TEMPLATE, "multiple-gpus", NULL, 0,
	     false},
	    {DS_INVENTORY_REFERENCE, A, ADR, "CronJob", "nightly", "pending", NULL, false, "spare",
	     DS_TARGET_CLAIM, "spare-claim", DS_TARGET_CLAIM, "spare-claim", NULL, 0, false},
	    {DS_INVENTORY_OBJECT, A, ADR, "ResourceClaim", "single-gpu", "pending", NULL, false,
	     NULL, DS_TARGET_CLAIM, "single-gpu", DS_TARGET_CLAIM, "single-gpu", NULL, 0, true},
	    {DS_INVENTORY_REFERENCE, I, I, "Pod", "pod0", "applied", "init0", true, "shared-gpu",
	     DS_TARGET_TEMPLATE, "single-gpu", DS_TARGET_TEMPLATE, "single-gpu", NULL, 0, true},
	    {DS_INVENTORY_REFERENCE, I, I, "Pod", "pod0", "applied", "ctr0", false, "shared-gpu",
	     DS_TARGET_TEMPLATE, "single-gpu", DS_TARGET_TEMPLATE, "single-gpu", NULL, 0, true},
	    {DS_INVENTORY_OBJECT, I, I, "ResourceClaimTemplate", "single-gpu", "pending", NULL,
	     false, NULL, DS_TARGET_TEMPLATE, "single-gpu", DS_TARGET_TEMPLATE, "single-gpu", NULL,
	     0, true},
	};
	ds_inventory *inv;
	sqlite3 *db = NULL;
	sqlite3_stmt *q = NULL;

	(void)state;
	fill(e);
	/* the receiver stored the larger payloads as zstd: the inventory inflates them */
	assert_int_equal(sqlite3_open_v2(e->path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(
			     db,
			     "SELECT count(*) FROM records WHERE compression = 1 AND kind = 'Pod'",
			     -1, &q, NULL),
			 SQLITE_OK);
	assert_int_equal(sqlite3_step(q), SQLITE_ROW);
	assert_true(sqlite3_column_int(q, 0) >= 2);
	sqlite3_finalize(q);
	sqlite3_close(db);

	inv = read_inv(e, NULL, NULL, 0);
	/* 3 Pods, a Deployment, a CronJob, a claim, a template; no Namespace */
	assert_int_equal(inv->objects, 7);
	assert_int_equal(inv->n_refs, sizeof(want) / sizeof(want[0]));
	for (size_t i = 0; i < inv->n_refs; i++) {
		print_message("row %zu\n", i);
		check_row(&inv->refs[i], &want[i]);
	}
	assert_int_equal(ds_inventory_unmapped(inv), 5);
	assert_int_equal(ds_inventory_missing(inv), 0);
	ds_inventory_free(inv);
	env_free(e);
}

/* The JSON document has every field, with the names of the TargetConfig's rules. */
static void test_inventory__json_every_field(void **state)
{
	struct env *e = env_new("inventory-json");
	ds_inventory *inv;
	json_t *o, *refs, *r;

	(void)state;
	fill(e);
	inv = read_inv(e, NULL, NULL, 0);
	o = ds_inventory_json(inv);
	assert_non_null(o);
	assert_int_equal(json_integer_value(json_object_get(o, "objects")), 7);
	assert_int_equal(json_integer_value(json_object_get(o, "unmapped")), 5);
	assert_int_equal(json_integer_value(json_object_get(o, "missing")), 0);
	refs = json_object_get(o, "references");
	assert_int_equal(json_array_size(refs), 10);

	r = json_array_get(refs, 2); /* Deployment gpu-app, init0 */
	assert_int_equal(json_object_size(r), 19);
	assert_string_equal(dt_str(r, "/type"), "reference");
	assert_string_equal(dt_str(r, "/source"), SOURCE);
	assert_string_equal(dt_str(r, "/namespace"), "basic-shared-claim-across-pods");
	assert_string_equal(dt_str(r, "/targetNamespace"), "across-pods-dr");
	assert_string_equal(dt_str(r, "/objectType"), "Deployment");
	assert_string_equal(dt_str(r, "/objectInstance"), "gpu-app");
	assert_string_equal(dt_str(r, "/state"), "pending");
	assert_string_equal(dt_str(r, "/container"), "init0");
	assert_true(json_is_true(json_object_get(r, "initContainer")));
	assert_string_equal(dt_str(r, "/entry"), "shared-gpu");
	assert_string_equal(dt_str(r, "/from/kind"), "resourceClaimTemplate");
	assert_string_equal(dt_str(r, "/from/name"), "single-gpu");
	assert_string_equal(dt_str(r, "/to/kind"), "resourceClaimTemplate");
	assert_string_equal(dt_str(r, "/to/namespace"), "across-pods-dr");
	assert_string_equal(dt_str(r, "/to/name"), "gpu-rct2");
	assert_string_equal(dt_str(r, "/rule/name"), "dra.resourceClaimTemplateMappings[0]");
	assert_int_equal(json_integer_value(dt_get(r, "/rule/line")), 8);
	assert_true(json_is_true(json_object_get(r, "mapped")));
	assert_true(json_is_null(json_object_get(r, "error")));
	assert_string_equal(dt_str(r, "/targetExists"), "unknown");
	assert_string_equal(dt_str(r, "/targetExistsReason"), "not checked (test)");
	assert_true(json_is_false(json_object_get(r, "replicated")));
	assert_true(json_is_false(json_object_get(r, "missing")));

	r = json_array_get(refs, 5); /* CronJob nightly, the entry no container lists */
	assert_string_equal(dt_str(r, "/container"), "ALL");
	assert_true(json_is_false(json_object_get(r, "initContainer")));
	assert_string_equal(dt_str(r, "/from/kind"), "resourceClaim");
	assert_string_equal(dt_str(r, "/to/name"), "spare-claim");
	assert_true(json_is_null(json_object_get(r, "rule")));
	assert_true(json_is_false(json_object_get(r, "mapped")));

	r = json_array_get(refs, 6); /* the ResourceClaim itself */
	assert_string_equal(dt_str(r, "/type"), "object");
	assert_true(json_is_null(json_object_get(r, "container")));
	assert_true(json_is_null(json_object_get(r, "entry")));
	assert_true(json_is_true(json_object_get(r, "replicated")));
	json_decref(o);
	ds_inventory_free(inv);
	env_free(e);
}

/* A newer record not folded in yet wins over the row; a tombstone removes the object. */
static void test_inventory__newest_state_and_tombstones(void **state)
{
	struct env *e = env_new("inventory-newest");
	json_t *pods[3];
	ds_record tomb[2];
	ds_inventory *inv;

	(void)state;
	for (int i = 0; i < 3; i++) {
		char y[600];
		snprintf(y, sizeof(y),
			 "apiVersion: v1\nkind: Pod\nmetadata: {name: p%d, namespace: ml}\n"
			 "spec:\n  containers: [{name: c, resources: {claims: [{name: g}]}}]\n"
			 "  resourceClaims: [{name: g, resourceClaimTemplateName: old}]\n",
			 i);
		pods[i] = dt_object(y);
	}
	commit(e, pods, 3);
	ingest(e, NULL);
	/* p0 changes after the fold; p1 is deleted and folded; p2 deleted, not folded */
	json_object_set_new(json_array_get(dt_get(pods[0], "/spec/resourceClaims"), 0),
			    "resourceClaimTemplateName", json_string("new"));
	commit(e, pods, 1);
	tomb[0] = tu_record_tombstone("v1", "Pod", "ml", "p1", "uid");
	tu_ledger_commit(&e->l, tomb, 1, NULL, NULL);
	ingest(e, NULL);
	tomb[1] = tu_record_tombstone("v1", "Pod", "ml", "p2", "uid");
	tu_ledger_commit(&e->l, &tomb[1], 1, NULL, NULL);

	inv = read_inv(e, NULL, NULL, 0);
	assert_int_equal(inv->objects, 1);
	assert_int_equal(inv->n_refs, 1);
	assert_string_equal(inv->refs[0].instance, "p0");
	assert_string_equal(inv->refs[0].from, "new");
	assert_string_equal(inv->refs[0].state, "pending");
	ds_inventory_free(inv);
	for (int i = 0; i < 3; i++)
		json_decref(pods[i]);
	env_free(e);
}

/* --namespace: the source's name or the target's, several; the rest is left out. */
static void test_inventory__namespaces(void **state)
{
	struct env *e = env_new("inventory-ns");
	const char *by_source[] = {"initcontainer-shared-gpu"};
	const char *by_target[] = {"across-pods-dr", "nowhere"};
	const char *both[] = {"basic-shared-claim-across-pods", "initcontainer-shared-gpu"};
	ds_inventory *inv;

	(void)state;
	fill(e);
	inv = read_inv(e, NULL, by_source, 1);
	assert_int_equal(inv->objects, 2);
	assert_int_equal(inv->n_refs, 3);
	for (size_t i = 0; i < inv->n_refs; i++)
		assert_string_equal(inv->refs[i].ns, "initcontainer-shared-gpu");
	ds_inventory_free(inv);
	inv = read_inv(e, NULL, by_target, 2);
	assert_int_equal(inv->objects, 5);
	assert_int_equal(inv->n_refs, 7);
	for (size_t i = 0; i < inv->n_refs; i++)
		assert_string_equal(inv->refs[i].target_ns, "across-pods-dr");
	/* the claim another namespace's filter leaves out still counts as replicated */
	ds_inventory_free(inv);
	inv = read_inv(e, NULL, both, 2);
	assert_int_equal(inv->n_refs, 10);
	ds_inventory_free(inv);
	env_free(e);
}

/* Rules that tie and a pod spec that cannot be read need a look; an attach is a row. */
static void test_inventory__ties_attach_and_broken_objects(void **state)
{
	struct env *e = env_new("inventory-broken");
	ds_target_config *tie = dt_config("dra:\n  resourceClaimMappings:\n"
					  "  - {objectType: Pod, objectInstance: ALL, container: "
					  "ALL, source: g, resourceClaim: t1}\n"
					  "  - {objectType: Pod, objectInstance: ALL, container: "
					  "ALL, source: src, resourceClaim: t2}\n"
					  "  - {objectType: Pod, objectInstance: ALL, container: "
					  "side, resourceClaim: shared, attach: true}\n");
	json_t *objs[2];
	ds_inventory *inv;

	(void)state;
	objs[0] = dt_object("apiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: ml}\n"
			    "spec:\n  containers: [{name: c, resources: {claims: [{name: g}]}}, "
			    "{name: side}]\n"
			    "  resourceClaims: [{name: g, resourceClaimName: src}]\n");
	objs[1] = dt_object("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: b, "
			    "namespace: ml}\nspec:\n  template:\n    spec:\n      containers:\n"
			    "      - {name: c, resources: {claims: [{name: nowhere}]}}\n");
	commit(e, objs, 2);
	inv = read_inv(e, tie, NULL, 0);
	assert_int_equal(inv->n_refs, 3);
	assert_string_equal(inv->refs[0].object_type, "Pod");
	assert_int_equal(inv->refs[0].type, DS_INVENTORY_REFERENCE);
	assert_null(inv->refs[0].rule);
	assert_non_null(strstr(inv->refs[0].error, "same specificity"));
	assert_true(ds_inventory_ref_missing(&inv->refs[0]));
	/* the container an attach rule gives a claim */
	assert_int_equal(inv->refs[1].type, DS_INVENTORY_ATTACH);
	assert_string_equal(inv->refs[1].container, "side");
	assert_null(inv->refs[1].entry);
	assert_null(inv->refs[1].from);
	assert_int_equal(inv->refs[1].target_kind, DS_TARGET_CLAIM);
	assert_string_equal(inv->refs[1].target, "shared");
	assert_string_equal(inv->refs[1].rule, "dra.resourceClaimMappings[2]");
	assert_null(inv->refs[1].error);
	assert_false(ds_inventory_ref_missing(&inv->refs[1]));
	assert_int_equal(inv->refs[2].type, DS_INVENTORY_BROKEN);
	assert_string_equal(inv->refs[2].object_type, "Deployment");
	assert_string_equal(inv->refs[2].instance, "b");
	assert_null(inv->refs[2].entry);
	assert_null(inv->refs[2].target);
	assert_non_null(strstr(inv->refs[2].error, "uses claim 'nowhere'"));
	assert_int_equal(ds_inventory_missing(inv), 2);
	assert_int_equal(ds_inventory_unmapped(inv), 0);
	ds_inventory_free(inv);
	json_decref(objs[0]);
	json_decref(objs[1]);
	ds_target_config_free(tie);
	env_free(e);
}

/* Insert line after the first marker of text (size bytes). */
static void insert_after(char *text, size_t size, const char *marker, const char *line)
{
	char *at = strstr(text, marker);
	size_t n = strlen(line);

	assert_non_null(at);
	at += strlen(marker);
	assert_true(strlen(text) + n < size);
	memmove(at + n, at, strlen(at) + 1);
	memcpy(at, line, n);
}

/* The -o yaml block, pasted into a TargetConfig, loads and maps every unmapped reference. */
static void test_inventory__yaml_rules_load_and_map_the_unmapped(void **state)
{
	struct env *e = env_new("inventory-yaml");
	ds_inventory *inv, *after;
	ds_target_config *cfg;
	char *yaml = NULL, *text;
	ds_err err = {0};
	char msg[600];
	size_t len;

	(void)state;
	fill(e);
	inv = read_inv(e, NULL, NULL, 0);
	assert_int_equal(ds_inventory_rules_yaml(inv, &yaml), 0);
	fputs(yaml, stderr);
	assert_non_null(strstr(yaml, "5 unmapped claim references"));
	assert_non_null(strstr(yaml,
			       "    # Pod basic-shared-claim-across-pods/pod0 (source "
			       "prod-east), container ctr0, entry shared-gpu -> "
			       "resourceClaimName single-gpu\n"
			       "    #   ResourceClaim across-pods-dr/single-gpu is replicated "
			       "from the source as it is\n"
			       "    #   TODO: the ResourceClaim on the target, in namespace "
			       "across-pods-dr\n"
			       "    - {objectType: Pod, objectInstance: pod0, container: ctr0, "
			       "source: shared-gpu, resourceClaim: todo-single-gpu}\n"));
	assert_non_null(strstr(yaml, "- {objectType: CronJob, objectInstance: nightly, "
				     "container: ALL, source: spare, resourceClaim: "
				     "todo-spare-claim}\n"));
	assert_non_null(strstr(yaml, "container init0 (init), entry shared-gpu"));
	assert_non_null(strstr(yaml,
			       "- {objectType: Pod, objectInstance: pod0, container: init0, "
			       "source: shared-gpu, resourceClaimTemplate: todo-single-gpu}"));
	/* mapped references get no rule */
	assert_null(strstr(yaml, "pod1"));
	assert_null(strstr(yaml, "gpu-app"));

	/* merged into the TargetConfig's lists, as the operator does, it loads */
	len = strlen(yaml) + 1000;
	text = malloc(len);
	assert_non_null(text);
	snprintf(text, len,
		 "apiVersion: drasync.io/v1alpha1\nkind: TargetConfig\n"
		 "namespaceMappings: {basic-shared-claim-across-pods: across-pods-dr}\n%s",
		 yaml);
	insert_after(
	    text, len, "  resourceClaimMappings:\n",
	    "    - {objectType: Pod, objectInstance: pod1, container: ctr0, resourceClaim: "
	    "gpu-rc-claim1}\n");
	insert_after(text, len, "  resourceClaimTemplateMappings:\n",
		     "    - {objectType: Deployment, objectInstance: gpu-app, container: ALL, "
		     "resourceClaimTemplate: gpu-rct2}\n");
	if (ds_target_config_parse(&cfg, text, strlen(text), "rules.yaml", &err) < 0)
		fail_msg("the rules do not load: %s", ds_err_format(&err, msg, sizeof(msg)));
	assert_int_equal(ds_target_config_dra(cfg)->n_rules, 7);
	/* and maps exactly the references that were unmapped, to their todo- names */
	after = read_inv(e, cfg, NULL, 0);
	assert_int_equal(after->n_refs, inv->n_refs);
	assert_int_equal(ds_inventory_unmapped(after), 0);
	for (size_t i = 0; i < inv->n_refs; i++) {
		const ds_inventory_ref *a = &inv->refs[i], *b = &after->refs[i];
		char todo[300];

		if (a->type != DS_INVENTORY_REFERENCE || a->rule) {
			/* what was mapped stays mapped alike */
			assert_str_or_null(b->target, a->target);
			assert_int_equal(b->target_kind, a->target_kind);
			continue;
		}
		snprintf(todo, sizeof(todo), "todo-%s", a->from);
		assert_non_null(b->rule);
		assert_int_equal(b->target_kind, a->kind);
		assert_string_equal(b->target, todo);
	}
	ds_inventory_free(after);
	ds_target_config_free(cfg);
	free(text);
	free(yaml);
	ds_inventory_free(inv);
	env_free(e);
}

#define SAME_POD                                                                                   \
	"apiVersion: v1\nkind: Pod\nmetadata: {name: \"%s\", namespace: %s}\n"                     \
	"spec:\n  containers: [{name: \"%s\", resources: {claims: [{name: "                        \
	"g}]}}]\n  resourceClaims: [{name: g, resourceClaimTemplateName: %s}]\n"

/*
 * One workload name in two namespaces: rules have no namespace selector, so
 * the same reference to the same claim shares a rule and one to another claim
 * is commented out; names a YAML resolver would misread are quoted.
 */
static void test_inventory__yaml_same_selectors_and_quoting(void **state)
{
	struct env *e = env_new("inventory-yaml-same");
	const char *rows[4][4] = {{"web", "a", "c", "t1"},
				  {"web", "b", "c", "t1"},
				  {"web", "c", "c", "t2"},
				  {"1234", "a", "no", "t3"}};
	json_t *objs[4];
	ds_inventory *inv;
	ds_target_config *cfg;
	char *yaml = NULL, text[8000], y[600], msg[600];
	ds_err err = {0};

	(void)state;
	for (int i = 0; i < 4; i++) {
		snprintf(y, sizeof(y), SAME_POD, rows[i][0], rows[i][1], rows[i][2], rows[i][3]);
		objs[i] = dt_object(y);
	}
	commit(e, objs, 4);
	inv = read_inv(e, NULL, NULL, 0);
	assert_int_equal(ds_inventory_unmapped(inv), 4);
	assert_int_equal(ds_inventory_rules_yaml(inv, &yaml), 0);
	fputs(yaml, stderr);
	assert_non_null(strstr(yaml, "    # also Pod b/web (source prod-east): the rule above maps "
				     "it\n"));
	assert_non_null(strstr(yaml, "    # - {objectType: Pod, objectInstance: web, container: "
				     "c, source: g, resourceClaimTemplate: todo-t2}\n"));
	assert_non_null(strstr(yaml, "- {objectType: Pod, objectInstance: \"1234\", container: "
				     "\"no\", source: g, resourceClaimTemplate: todo-t3}\n"));
	assert_non_null(strstr(yaml, "  resourceClaimMappings: []\n"));
	snprintf(text, sizeof(text), "apiVersion: drasync.io/v1alpha1\nkind: TargetConfig\n%s",
		 yaml);
	if (ds_target_config_parse(&cfg, text, strlen(text), "rules.yaml", &err) < 0)
		fail_msg("the rules do not load: %s", ds_err_format(&err, msg, sizeof(msg)));
	assert_int_equal(ds_target_config_dra(cfg)->n_rules, 2);
	ds_target_config_free(cfg);
	free(yaml);
	ds_inventory_free(inv);
	for (int i = 0; i < 4; i++)
		json_decref(objs[i]);
	env_free(e);
}

/* Every reference mapped: the block says so and still loads. No ledger: -ENOENT. */
static void test_inventory__nothing_unmapped_and_no_ledger(void **state)
{
	struct env *e = env_new("inventory-none");
	ds_target_config *all =
	    dt_config("dra:\n  resourceClaimTemplateMappings:\n"
		      "  - {objectType: All, objectInstance: ALL, container: ALL, "
		      "resourceClaimTemplate: gpu}\n");
	ds_inventory_opts o = {.cfg = all};
	ds_inventory *inv = NULL;
	ds_target_config *cfg = NULL;
	char *yaml = NULL, text[2000], path[1200];
	ds_err err = {0};

	(void)state;
	commit_fixture(e, "dra-example-driver/v1/basic-resourceclaimtemplate.yaml");
	inv = read_inv(e, all, NULL, 0);
	assert_int_equal(inv->n_refs, 3);
	assert_int_equal(ds_inventory_unmapped(inv), 0);
	assert_int_equal(ds_inventory_rules_yaml(inv, &yaml), 0);
	assert_string_equal(yaml, "# drasync-target inventory: every claim reference is mapped.\n"
				  "dra:\n  resourceClaimMappings: []\n"
				  "  resourceClaimTemplateMappings: []\n");
	snprintf(text, sizeof(text), "apiVersion: drasync.io/v1alpha1\nkind: TargetConfig\n%s",
		 yaml);
	assert_int_equal(ds_target_config_parse(&cfg, text, strlen(text), "r.yaml", &err), 0);
	ds_target_config_free(cfg);
	free(yaml);
	ds_inventory_free(inv);

	snprintf(path, sizeof(path), "%s/none.db", e->dir);
	o.ledger_path = path;
	inv = NULL;
	assert_int_equal(ds_inventory_read(&o, &inv, &err), -ENOENT);
	assert_null(inv);
	assert_non_null(strstr(err.msg, "no ledger at"));
	ds_target_config_free(all);
	env_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_inventory__fixtures_field_by_field),
	    cmocka_unit_test(test_inventory__json_every_field),
	    cmocka_unit_test(test_inventory__newest_state_and_tombstones),
	    cmocka_unit_test(test_inventory__namespaces),
	    cmocka_unit_test(test_inventory__ties_attach_and_broken_objects),
	    cmocka_unit_test(test_inventory__yaml_rules_load_and_map_the_unmapped),
	    cmocka_unit_test(test_inventory__yaml_same_selectors_and_quoting),
	    cmocka_unit_test(test_inventory__nothing_unmapped_and_no_ledger),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
