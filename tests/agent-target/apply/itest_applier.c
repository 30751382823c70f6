/*
 * The applier against the real v1 control plane (fixture kube_v1): records
 * committed in a real inbox, applied from the ledger. Each test maps its
 * source namespace to a fresh target namespace and removes it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/applier.h"
#include "drasync/clock.h"
#include "drasync/k8s_object.h"
#include "drasync/kube_client.h"
#include "dstest.h"
#include "testutil.h"
#include "tu_apply.h"
#include "tu_kube.h"
#include "tu_ledger.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SOURCE "prod-east"

static tu_apply *env_new_refresh(const char *src, int refresh_ms)
{
	tu_apply_opts o = {.discovery_refresh_ms = refresh_ms};

	return tu_apply_new(src, &o);
}

static void commit_namespace(tu_apply *e)
{
	tu_apply_commit1(
	    e, tu_objf("apiVersion: v1\nkind: Namespace\nmetadata: {name: '%s'}\n", e->src));
}

/* ---- tests -------------------------------------------------------------------------- */

static void
test_itest_applier__fixture_applies_mapped_and_converted_then_costs_nothing(void **state)
{
	tu_apply *e = tu_apply_new("basic-resourceclaimtemplate", NULL);
	json_t *docs =
	    dt_load_file(tu_fixture("dra-example-driver/v1/basic-resourceclaimtemplate.yaml"));
	json_t *objs[8], *pod, *claim, *tmpl;
	size_t n = 0, i;
	json_t *d;
	ds_applier_stats s0, s1;

	(void)state;
	/* the workloads first in the stream: the applier orders them */
	json_array_foreach (docs, i, d)
		if (ds_workload_from_kind(ds_obj_kind(d)) >= 0)
			objs[n++] = d;
	json_array_foreach (docs, i, d)
		if (ds_workload_from_kind(ds_obj_kind(d)) < 0)
			objs[n++] = d;
	objs[n++] = tu_objf("apiVersion: resource.k8s.io/v1beta1\nkind: ResourceClaim\n"
			    "metadata: {name: old-claim, namespace: '%s'}\n"
			    "spec:\n  devices:\n    requests:\n"
			    "    - {name: gpu, deviceClassName: gpu.nvidia.com}\n",
			    e->src);
	assert_int_equal(n, 5);
	tu_apply_commit(e, objs, n);
	json_decref(objs[4]);

	assert_int_equal(tu_apply_pass(e), 5);
	s0 = tu_apply_stats(e);
	assert_int_equal(s0.applied, 5);
	assert_int_equal(s0.api_writes, 5);
	assert_int_equal(s0.failed + s0.waiting, 0);

	pod = tu_apply_target_get(e, "v1", "Pod", "pod1");
	assert_non_null(pod);
	assert_string_equal(dt_str(pod, "/metadata/labels/app.kubernetes.io~1managed-by"),
			    "drasync");
	assert_string_equal(dt_str(pod, "/metadata/annotations/drasync.io~1source-uid"),
			    "uid-Pod-pod1");
	assert_string_equal(dt_str(pod, "/metadata/annotations/drasync.io~1source-cluster"),
			    SOURCE);
	assert_string_equal(dt_str(pod, "/spec/resourceClaims/0/resourceClaimTemplateName"),
			    "single-gpu");
	json_decref(pod);
	tmpl = tu_apply_target_get(e, "resource.k8s.io/v1", "ResourceClaimTemplate", "single-gpu");
	assert_non_null(tmpl);
	json_decref(tmpl);
	/* v1beta1 in, v1 on the target, with the DeviceClass mapped */
	claim = tu_apply_target_get(e, "resource.k8s.io/v1", "ResourceClaim", "old-claim");
	assert_non_null(claim);
	assert_string_equal(dt_str(claim, "/spec/devices/requests/0/exactly/deviceClassName"),
			    "gpu.example.com");
	json_decref(claim);
	tu_apply_assert_state(e, "v1", "Pod", "pod0", DS_APPLY_APPLIED, NULL);

	/* The same objects again: committed, and no API call at all. */
	objs[4] = tu_objf("apiVersion: resource.k8s.io/v1beta1\nkind: ResourceClaim\n"
			  "metadata: {name: old-claim, namespace: '%s'}\n"
			  "spec:\n  devices:\n    requests:\n"
			  "    - {name: gpu, deviceClassName: gpu.nvidia.com}\n",
			  e->src);
	tu_apply_commit(e, objs, n);
	json_decref(objs[4]);
	assert_int_equal(tu_apply_pass(e), 0);
	s1 = tu_apply_stats(e);
	assert_int_equal(s1.api_writes, s0.api_writes);
	assert_int_equal(s1.api_reads, s0.api_reads);
	json_decref(docs);
	tu_apply_free(e);
}

static void test_itest_applier__burst_of_50_updates_is_one_write_of_the_last(void **state)
{
	tu_apply *e = tu_apply_new("burst", NULL);
	ds_applier_stats s0, s1;
	long long w0, w1;
	char detail[400];
	json_t *cm;

	(void)state;
	commit_namespace(e);
	assert_int_equal(tu_apply_pass(e), 1);
	s0 = tu_apply_stats(e);
	for (int b = 0; b < 5; b++) {
		json_t *objs[10];
		for (int i = 0; i < 10; i++) {
			char text[300];
			snprintf(text, sizeof(text),
				 "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: hot, "
				 "namespace: '%s'}\ndata: {v: '%d'}\n",
				 e->src, b * 10 + i);
			objs[i] = dt_object(text);
		}
		tu_apply_commit(e, objs, 10);
		for (int i = 0; i < 10; i++)
			json_decref(objs[i]);
	}
	w0 = tu_kube_writes(e->k, "configmaps", NULL, 0);
	assert_int_equal(tu_apply_pass(e), 1);
	s1 = tu_apply_stats(e);
	assert_int_equal(s1.api_writes - s0.api_writes, 1);
	/* The API server's own count agrees: one write for the 50 updates. */
	w1 = tu_kube_writes(e->k, "configmaps", detail, sizeof(detail));
	if (w1 - w0 != 1)
		fail_msg("the API server counted %lld ConfigMap writes for the burst (%s)", w1 - w0,
			 detail);
	cm = tu_apply_target_get(e, "v1", "ConfigMap", "hot");
	assert_non_null(cm);
	assert_string_equal(dt_str(cm, "/data/v"), "49");
	json_decref(cm);
	tu_apply_assert_state(e, "v1", "ConfigMap", "hot", DS_APPLY_APPLIED, NULL);
	tu_apply_free(e);
}

static void test_itest_applier__workload_waits_for_its_template_then_applies(void **state)
{
	tu_apply *e = tu_apply_new("late-template", NULL);
	json_t *pod;

	(void)state;
	commit_namespace(e);
	tu_apply_commit1(
	    e, tu_objf("apiVersion: v1\nkind: Pod\nmetadata: {name: early, namespace: '%s'}\n"
		       "spec:\n  containers:\n  - name: c\n    image: busybox\n"
		       "    resources: {claims: [{name: gpu}]}\n"
		       "  resourceClaims:\n  - {name: gpu, resourceClaimTemplateName: late}\n",
		       e->src));
	assert_int_equal(tu_apply_pass(e), 2);
	tu_apply_assert_state(e, "v1", "Pod", "early", DS_APPLY_WAITING, "ResourceClaimTemplate");
	pod = tu_apply_target_get(e, "v1", "Pod", "early");
	assert_null(pod);

	tu_apply_commit1(
	    e, tu_objf("apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\n"
		       "metadata: {name: late, namespace: '%s'}\n"
		       "spec:\n  spec:\n    devices:\n      requests:\n"
		       "      - {name: gpu, exactly: {deviceClassName: gpu.example.com}}\n",
		       e->src));
	assert_int_equal(tu_apply_pass(e), 2);
	tu_apply_assert_state(e, "resource.k8s.io/v1", "ResourceClaimTemplate", "late",
			      DS_APPLY_APPLIED, NULL);
	tu_apply_assert_state(e, "v1", "Pod", "early", DS_APPLY_APPLIED, NULL);
	pod = tu_apply_target_get(e, "v1", "Pod", "early");
	assert_non_null(pod);
	json_decref(pod);
	tu_apply_free(e);
}

static void test_itest_applier__workload_waits_for_the_device_class_its_template_needs(void **state)
{
	tu_apply *e = tu_apply_new("late-class", NULL);
	struct ds_kube_resource dcr;
	struct ds_kube_delete_opts d = {"Background", NULL, NULL, -1};
	ds_kube_error ke;
	char cls[80], b[800];
	json_t *dc, *pod;

	(void)state;
	snprintf(cls, sizeof(cls), "itest-late-%u.example.com", tu_rand());
	commit_namespace(e);
	tu_apply_commit1(e, tu_objf("apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\n"
				    "metadata: {name: t, namespace: '%s'}\n"
				    "spec:\n  spec:\n    devices:\n      requests:\n"
				    "      - {name: gpu, exactly: {deviceClassName: '%s'}}\n",
				    e->src, cls));
	tu_apply_commit1(
	    e, tu_objf("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: '%s'}\n"
		       "spec:\n  containers:\n  - name: c\n    image: busybox\n"
		       "    resources: {claims: [{name: gpu}]}\n"
		       "  resourceClaims:\n  - {name: gpu, resourceClaimTemplateName: t}\n",
		       e->src));
	assert_int_equal(tu_apply_pass(e), 3);
	/* the template is applied (nothing but workloads is held back) and says what it lacks */
	tu_apply_assert_state(e, "resource.k8s.io/v1", "ResourceClaimTemplate", "t",
			      DS_APPLY_APPLIED, cls);
	tu_apply_assert_state(e, "v1", "Pod", "p", DS_APPLY_WAITING, cls);
	assert_null(tu_apply_target_get(e, "v1", "Pod", "p"));

	/* the target's infrastructure team adds the DeviceClass */
	dcr = tu_kube_resource(e->k, "resource.k8s.io/v1", "DeviceClass");
	dc = json_pack("{s:s, s:s, s:{s:s}, s:{}}", "apiVersion", "resource.k8s.io/v1", "kind",
		       "DeviceClass", "metadata", "name", cls, "spec");
	if (ds_kube_create(e->k, &dcr, NULL, dc, NULL, &ke) < 0)
		fail_msg("create DeviceClass: %s", ds_kube_error_format(&ke, b, sizeof(b)));
	json_decref(dc);
	tu_msleep(400);
	assert_int_equal(tu_apply_pass(e), 1);
	tu_apply_assert_state(e, "v1", "Pod", "p", DS_APPLY_APPLIED, NULL);
	pod = tu_apply_target_get(e, "v1", "Pod", "p");
	assert_non_null(pod);
	json_decref(pod);
	ds_kube_delete(e->k, &dcr, NULL, cls, &d, NULL);
	tu_apply_free(e);
}

static void test_itest_applier__tombstones_delete_only_what_drasync_created(void **state)
{
	tu_apply *e = tu_apply_new("tombstones", NULL);
	struct ds_kube_resource cmr;
	ds_kube_error ke;
	ds_record recs[3];
	json_t *foreign, *got;
	char b[800];
	ds_applier_stats s;

	(void)state;
	commit_namespace(e);
	tu_apply_commit_configmaps(e, (const char *[]){"ours", "ours2"}, 2);
	assert_int_equal(tu_apply_pass(e), 3);
	/* made on the target by someone else, with the same name as a source object */
	cmr = tu_kube_resource(e->k, "v1", "ConfigMap");
	foreign = json_pack("{s:s, s:s, s:{s:s}, s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
			    "metadata", "name", "foreign", "data", "x", "y");
	if (ds_kube_create(e->k, &cmr, e->dst, foreign, NULL, &ke) < 0)
		fail_msg("create: %s", ds_kube_error_format(&ke, b, sizeof(b)));
	json_decref(foreign);

	recs[0] =
	    tu_record_tombstone("v1", "ConfigMap", e->src, "foreign", "uid-ConfigMap-foreign");
	recs[1] = tu_record_tombstone("v1", "ConfigMap", e->src, "ours", "uid-ConfigMap-ours");
	recs[2] = tu_record_tombstone("v1", "ConfigMap", e->src, "ours2", "uid-of-another-object");
	tu_ledger_commit(&e->l, recs, 3, NULL, NULL);
	assert_int_equal(tu_apply_pass(e), 3);
	s = tu_apply_stats(e);
	assert_int_equal(s.deleted, 1);
	assert_int_equal(s.kept, 2);

	got = tu_apply_target_get(e, "v1", "ConfigMap", "foreign");
	assert_non_null(got);
	json_decref(got);
	tu_apply_assert_state(e, "v1", "ConfigMap", "foreign", DS_APPLY_KEPT,
			      "not created by drasync");
	got = tu_apply_target_get(e, "v1", "ConfigMap", "ours2");
	assert_non_null(got);
	json_decref(got);
	tu_apply_assert_state(e, "v1", "ConfigMap", "ours2", DS_APPLY_KEPT,
			      "uid-of-another-object");
	got = tu_apply_target_get(e, "v1", "ConfigMap", "ours");
	assert_null(got);
	tu_apply_assert_state(e, "v1", "ConfigMap", "ours", DS_APPLY_DELETED, NULL);
	tu_apply_free(e);
}

/* Whether source's ledger row of the Namespace of the source namespace has `state`. */
static bool namespace_row_is(tu_apply *e, const char *source, const char *state)
{
	char sql[400];

	snprintf(sql, sizeof(sql),
		 "SELECT count(*) FROM object_state WHERE source = '%s' AND kind = 'Namespace' "
		 "AND name = '%s' AND state = '%s'",
		 source, e->src, state);
	return tu_ledger_int(e->path, sql) == 1;
}

/*
 * Two sources whose namespaces map to one target Namespace (here the same
 * source name from two sites). One a person made on the target: drasync
 * writes nothing on it for either, so neither holds it: both Namespace
 * records are applied, nothing written. One drasync created for the first:
 * the second's Namespace record is refused (reason owner), the Namespace
 * keeps the first's marks.
 */
static void
test_itest_applier__two_sources_share_a_namespace_only_if_drasync_did_not_make_it(void **state)
{
	static const char *const modes[] = {"a person's", "drasync's"};

	(void)state;
	for (int made_by_drasync = 0; made_by_drasync < 2; made_by_drasync++) {
		tu_apply *e = tu_apply_new("shared", NULL);
		struct ds_kube_resource nsr = tu_kube_resource(e->k, "v1", "Namespace");
		tu_ledger west;
		ds_record rec;
		char *payload = NULL;
		json_t *ns, *got = NULL;
		ds_kube_error ke;

		if (!made_by_drasync) {
			ns = json_pack("{s:s, s:s, s:{s:s, s:{s:s}}}", "apiVersion", "v1", "kind",
				       "Namespace", "metadata", "name", e->dst, "labels", "team",
				       "ops");
			assert_int_equal(ds_kube_create(e->k, &nsr, NULL, ns, NULL, &ke), 0);
			json_decref(ns);
		}
		commit_namespace(e);
		tu_apply_commit_configmaps(e, (const char *[]){"east"}, 1);
		tu_apply_settle(e);
		assert_true(namespace_row_is(e, SOURCE, "applied"));

		/* the second source, its Namespace mapped to the same target one */
		tu_ledger_open(&west, e->path, "lab-west");
		ns = tu_objf("apiVersion: v1\nkind: Namespace\nmetadata: {name: '%s', labels: "
			     "{site: west}}\n",
			     e->src);
		rec = tu_record_upsert(ns, "uid-west-ns", &payload);
		tu_ledger_commit(&west, &rec, 1, NULL, NULL);
		json_decref(ns);
		tu_apply_settle(e);
		if (!namespace_row_is(e, "lab-west", made_by_drasync ? "refused" : "applied"))
			fail_msg("%s Namespace: lab-west's record is not %s",
				 modes[made_by_drasync], made_by_drasync ? "refused" : "applied");
		assert_int_equal(ds_kube_get(e->k, &nsr, NULL, e->dst, NULL, &got, NULL), 0);
		/* neither wrote on a person's Namespace; drasync's keeps the first's marks */
		assert_null(dt_str(got, "/metadata/labels/site"));
		if (made_by_drasync)
			assert_string_equal(
			    dt_str(got, "/metadata/annotations/drasync.io~1source-cluster"),
			    SOURCE);
		else
			assert_string_equal(dt_str(got, "/metadata/labels/team"), "ops");
		json_decref(got);
		free(payload);
		tu_ledger_close(&west);
		tu_apply_free(e);
	}
}

static void test_itest_applier__bad_objects_fail_with_a_reason_the_rest_apply(void **state)
{
	tu_apply *e = tu_apply_new("bad-objects", NULL);
	const char *garbage = "{\"apiVersion\": \"v1\", \"kind\": ";
	json_t *objs[3], *got;
	ds_record rec;

	(void)state;
	commit_namespace(e);
	memset(&rec, 0, sizeof(rec));
	rec.op = DS_RECORD_UPSERT;
	rec.api_version = "v1";
	rec.kind = "ConfigMap";
	rec.ns = e->src;
	rec.name = "garbage";
	rec.source_uid = "uid-garbage";
	rec.payload = (const uint8_t *)garbage;
	rec.payload_len = strlen(garbage);
	tu_ledger_commit(&e->l, &rec, 1, NULL, NULL);
	/* a key the API server refuses (422 Invalid) beside a good object */
	objs[0] = tu_objf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: rejected, "
			  "namespace: '%s'}\ndata: {'no spaces allowed': '1'}\n",
			  e->src);
	objs[1] = tu_objf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: good, namespace: "
			  "'%s'}\ndata: {a: '1'}\n",
			  e->src);
	/* a kind drasync does not replicate, sent all the same: refused (SPEC §5) */
	objs[2] = tu_objf("apiVersion: v1\nkind: Event\nmetadata: {name: noise, namespace: '%s'}\n"
			  "involvedObject: {kind: Pod, name: p}\nreason: Started\n",
			  e->src);
	tu_apply_commit(e, objs, 3);
	json_decref(objs[0]);
	json_decref(objs[1]);
	json_decref(objs[2]);
	assert_int_equal(tu_apply_pass(e), 5);
	tu_apply_assert_state(e, "v1", "Event", "noise", DS_APPLY_REFUSED,
			      "kind \"Event\" of \"v1\" is not replicated by drasync");
	assert_null(tu_apply_target_get(e, "v1", "Event", "noise"));
	tu_apply_assert_state(e, "v1", "ConfigMap", "garbage", DS_APPLY_FAILED,
			      "not a JSON object");
	tu_apply_assert_state(e, "v1", "ConfigMap", "rejected", DS_APPLY_FAILED, "422");
	tu_apply_assert_state(e, "v1", "ConfigMap", "rejected", DS_APPLY_FAILED,
			      "no spaces allowed");
	tu_apply_assert_state(e, "v1", "ConfigMap", "good", DS_APPLY_APPLIED, NULL);
	got = tu_apply_target_get(e, "v1", "ConfigMap", "good");
	assert_non_null(got);
	json_decref(got);
	assert_null(tu_apply_target_get(e, "v1", "ConfigMap", "rejected"));

	/* A failed object is not retried by itself, but a new version is applied. */
	assert_int_equal(tu_apply_pass(e), 0);
	tu_apply_commit1(e, tu_objf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: rejected, "
				    "namespace: '%s'}\ndata: {fixed: '1'}\n",
				    e->src));
	assert_int_equal(tu_apply_pass(e), 1);
	tu_apply_assert_state(e, "v1", "ConfigMap", "rejected", DS_APPLY_APPLIED, NULL);
	tu_apply_free(e);
}

static void test_itest_applier__immutable_change_deletes_and_recreates(void **state)
{
	tu_apply *e = tu_apply_new("immutable", NULL);
#define CLAIM                                                                                      \
	"apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\n"                                    \
	"metadata: {name: claim, namespace: '%s'}\n"                                               \
	"spec:\n  devices:\n    requests:\n"                                                       \
	"    - {name: %s, exactly: {deviceClassName: gpu.example.com}}\n"
	json_t *got;

	(void)state;
	commit_namespace(e);
	tu_apply_commit1(e, tu_objf(CLAIM, e->src, "first"));
	assert_int_equal(tu_apply_pass(e), 2);
	tu_apply_commit1(e, tu_objf(CLAIM, e->src, "second"));
	assert_int_equal(tu_apply_pass(e), 1);
	tu_apply_assert_state(e, "resource.k8s.io/v1", "ResourceClaim", "claim", DS_APPLY_APPLIED,
			      "re-created");
	assert_int_equal(tu_apply_stats(e).recreated, 1);
	got = tu_apply_target_get(e, "resource.k8s.io/v1", "ResourceClaim", "claim");
	assert_non_null(got);
	assert_string_equal(dt_str(got, "/spec/devices/requests/0/name"), "second");
	json_decref(got);
	tu_apply_free(e);
}

/* The snapshot's end: commit a SNAPSHOT_END whose manifest holds keys[0..n). */
static void commit_snapshot_end(tu_apply *e, const char *const *keys, size_t n)
{
	ds_manifest_entry m[8];
	ds_record end;

	assert_true(n <= 8);
	for (size_t i = 0; i < n; i++) {
		memset(&m[i], 0, sizeof(m[i]));
		m[i].key = keys[i];
	}
	memset(&end, 0, sizeof(end));
	end.op = DS_RECORD_SNAPSHOT_END;
	end.snapshot_id = "snap";
	end.manifest = m;
	end.manifest_len = n;
	tu_ledger_commit(&e->l, &end, 1, NULL, NULL);
}

static void test_itest_applier__snapshot_prunes_and_a_namespace_goes_only_if_ours(void **state)
{
	tu_apply *e = tu_apply_new("prune", NULL);
	struct ds_kube_resource nsr;
	char k_ns[200], k_keep[200];
	json_t *got;

	(void)state;
	commit_namespace(e);
	tu_apply_commit_configmaps(e, (const char *[]){"keep", "gone"}, 2);
	assert_int_equal(tu_apply_pass(e), 3);
	/* drasync created the namespace: it says so on it */
	nsr = tu_kube_resource(e->k, "v1", "Namespace");
	got = NULL;
	assert_int_equal(ds_kube_get(e->k, &nsr, NULL, e->dst, NULL, &got, NULL), 0);
	assert_string_equal(ds_obj_annotation(got, "drasync.io/created"), "true");
	json_decref(got);

	/* A snapshot that no longer holds "gone": it is deleted, the rest stays. */
	snprintf(k_ns, sizeof(k_ns), "/Namespace//%s", e->src);
	snprintf(k_keep, sizeof(k_keep), "/ConfigMap/%s/keep", e->src);
	commit_snapshot_end(e, (const char *[]){k_ns, k_keep}, 2);
	assert_int_equal(tu_apply_pass(e), 1);
	got = tu_apply_target_get(e, "v1", "ConfigMap", "gone");
	assert_null(got);
	/* its reason says it was pruned, not tombstoned by the source */
	tu_apply_assert_state(e, "v1", "ConfigMap", "gone", DS_APPLY_DELETED,
			      "pruned: not in the snapshot that ended at seq ");
	got = tu_apply_target_get(e, "v1", "ConfigMap", "keep");
	assert_non_null(got);
	json_decref(got);
	tu_apply_assert_state(e, "v1", "ConfigMap", "keep", DS_APPLY_APPLIED, NULL);

	/* A snapshot with nothing: the namespace drasync created goes too. */
	commit_snapshot_end(e, NULL, 0);
	assert_int_equal(tu_apply_pass(e), 2);
	tu_apply_assert_state(e, "v1", "ConfigMap", "keep", DS_APPLY_DELETED, NULL);
	{
		ds_object_state_row r = tu_apply_row(e, "v1", "Namespace", e->src, true);
		assert_int_equal(r.state, DS_APPLY_DELETED);
		ds_object_state_row_dispose(&r);
	}
	tu_apply_free(e);

	/* A namespace that was on the target before drasync applied it stays. */
	e = tu_apply_new("prune-kept", NULL);
	{
		json_t *ns = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "v1", "kind",
				       "Namespace", "metadata", "name", e->dst);
		nsr = tu_kube_resource(e->k, "v1", "Namespace");
		assert_int_equal(ds_kube_create(e->k, &nsr, NULL, ns, NULL, NULL), 0);
		json_decref(ns);
	}
	commit_namespace(e);
	assert_int_equal(tu_apply_pass(e), 1);
	commit_snapshot_end(e, NULL, 0);
	assert_int_equal(tu_apply_pass(e), 1);
	{
		ds_object_state_row r = tu_apply_row(e, "v1", "Namespace", e->src, true);
		if (r.state != DS_APPLY_KEPT || !strstr(r.reason, "was not created by drasync"))
			fail_msg("namespace: %s (%s)", ds_apply_state_name(r.state), r.reason);
		ds_object_state_row_dispose(&r);
	}
	/* SPEC §5: it kept its own metadata: drasync never wrote it */
	got = tu_apply_target_get(e, "v1", "Namespace", e->dst);
	assert_non_null(got);
	assert_null(ds_obj_label(got, "app.kubernetes.io/managed-by"));
	assert_null(ds_obj_label(got, "pod-security.kubernetes.io/enforce"));
	json_decref(got);
	got = NULL;
	assert_int_equal(ds_kube_get(e->k, &nsr, NULL, e->dst, NULL, &got, NULL), 0);
	assert_null(ds_obj_annotation(got, "drasync.io/created"));
	json_decref(got);
	tu_apply_free(e);
}

/*
 * Whether every pod of the target namespace is Running and each of its claims
 * allocated; why not in *why (the first thing that is not).
 */
static bool pods_run_with_claims(tu_apply *e, size_t want, char *why, size_t size)
{
	struct ds_kube_resource pr = tu_kube_resource(e->k, "v1", "Pod");
	struct ds_kube_resource cr = tu_kube_resource(e->k, "resource.k8s.io/v1", "ResourceClaim");
	json_t *list = NULL, *pod;
	size_t i, n;
	bool ok = true;

	snprintf(why, size, "no pods");
	if (ds_kube_list(e->k, &pr, e->dst, NULL, &list, NULL, NULL) < 0)
		return false;
	n = json_array_size(json_object_get(list, "items"));
	if (n < want) {
		snprintf(why, size, "%zu of %zu pods", n, want);
		ok = false;
	}
	json_array_foreach (json_object_get(list, "items"), i, pod) {
		const char *phase = dt_str(pod, "/status/phase");
		json_t *st, *claims = json_object_get(json_object_get(pod, "status"),
						      "resourceClaimStatuses");
		size_t j;

		if (!ok)
			break;
		if (!phase || strcmp(phase, "Running") != 0) {
			snprintf(why, size, "pod %s is %s", ds_obj_name(pod), phase ? phase : "-");
			ok = false;
			break;
		}
		json_array_foreach (claims, j, st) {
			const char *cname =
			    json_string_value(json_object_get(st, "resourceClaimName"));
			json_t *c = NULL;
			bool alloc;

			if (!cname)
				continue;
			alloc = ds_kube_get(e->k, &cr, e->dst, cname, NULL, &c, NULL) == 0 &&
				json_object_get(json_object_get(c, "status"), "allocation");
			json_decref(c);
			if (!alloc) {
				snprintf(why, size, "claim %s of pod %s is not allocated", cname,
					 ds_obj_name(pod));
				ok = false;
				break;
			}
		}
		/* A claim named directly in the spec (not generated) must be allocated too. */
		json_array_foreach (json_object_get(json_object_get(pod, "spec"), "resourceClaims"),
				    j, st) {
			const char *cname =
			    json_string_value(json_object_get(st, "resourceClaimName"));
			json_t *c = NULL;
			bool alloc;

			if (!ok || !cname)
				continue;
			alloc = ds_kube_get(e->k, &cr, e->dst, cname, NULL, &c, NULL) == 0 &&
				json_object_get(json_object_get(c, "status"), "allocation");
			json_decref(c);
			if (!alloc) {
				snprintf(why, size, "claim %s of pod %s is not allocated", cname,
					 ds_obj_name(pod));
				ok = false;
			}
		}
	}
	json_decref(list);
	return ok;
}

/*
 * Every fixture (v1 and v1beta1) through the apply stage in migrate mode:
 * mapped to its own target namespace, converted to v1, and its pods run on the
 * target with their claims allocated. extended-resource-request needs the
 * extended-resource path of DeviceClasses (issue 13) and
 * gpu-allow-multiple-allocations a gated API field: both must apply, and are
 * not required to run.
 */
static void test_itest_applier__every_fixture_applies_and_its_pods_run(void **state)
{
	static const char *const fixtures[] = {
	    "dra-example-driver/v1/basic-multiple-requests.yaml",
	    "dra-example-driver/v1/basic-resourceclaim-opaque-config.yaml",
	    "dra-example-driver/v1/basic-resourceclaimtemplate.yaml",
	    "dra-example-driver/v1/basic-shared-claim-across-containers.yaml",
	    "dra-example-driver/v1/basic-shared-claim-across-pods.yaml",
	    "dra-example-driver/v1/cel-selector.yaml",
	    "dra-example-driver/v1/extended-resource-request.yaml",
	    "dra-example-driver/v1/gpu-allow-multiple-allocations.yaml",
	    "dra-example-driver/v1/initcontainer-shared-gpu.yaml",
	    "dra-example-driver/v1/prioritized-alternatives.yaml",
	    "dra-example-driver/v1beta1/gpu-test1.yaml",
	    "dra-example-driver/v1beta1/gpu-test2.yaml",
	    "dra-example-driver/v1beta1/gpu-test3.yaml",
	    "dra-example-driver/v1beta1/gpu-test4.yaml",
	};

	(void)state;
	for (size_t f = 0; f < sizeof(fixtures) / sizeof(fixtures[0]); f++) {
		json_t *docs = dt_load_file(tu_fixture(fixtures[f])), *d, *objs[16];
		const char *ns = NULL;
		size_t i, n = 0, pods = 0;
		bool must_run = !strstr(fixtures[f], "extended-resource") &&
				!strstr(fixtures[f], "multiple-allocations");
		tu_apply *e;
		char why[400] = "";
		long long end;
		ds_applier_stats s;

		json_array_foreach (docs, i, d) {
			if (!ns && ds_obj_namespace(d))
				ns = ds_obj_namespace(d);
			pods += strcmp(ds_obj_kind(d), "Pod") == 0;
			assert_true(n < 16);
			objs[n++] = d;
		}
		assert_non_null(ns);
		e = tu_apply_new(ns, NULL);
		tu_apply_commit(e, objs, n);
		while (tu_apply_pass(e) > 0)
			;
		s = tu_apply_stats(e);
		if (s.applied != n || s.failed || s.waiting) {
			json_decref(docs);
			fail_msg("%s: %llu of %zu applied, %llu failed, %llu waiting", fixtures[f],
				 (unsigned long long)s.applied, n, (unsigned long long)s.failed,
				 (unsigned long long)s.waiting);
		}
		end = ds_clock_mono_ms() + 60000;
		while (must_run && !pods_run_with_claims(e, pods, why, sizeof(why))) {
			if (ds_clock_mono_ms() > end) {
				json_decref(docs);
				fail_msg("%s on the target: %s", fixtures[f], why);
			}
			tu_msleep(250);
		}
		fprintf(stderr, "%s: %zu objects applied%s\n", fixtures[f], n,
			must_run ? ", pods Running with claims allocated" : "");
		json_decref(docs);
		tu_apply_free(e);
	}
}

static void test_itest_applier__object_waits_for_its_namespace_further_down_the_stream(void **state)
{
	tu_apply *e = tu_apply_new("late-ns", NULL);
	char want[200];
	json_t *got;

	(void)state;
	tu_apply_commit1(
	    e, tu_objf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: early, namespace: "
		       "'%s'}\ndata: {a: '1'}\n",
		       e->src));
	assert_int_equal(tu_apply_pass(e), 1);
	snprintf(want, sizeof(want), "waits for Namespace %s", e->dst);
	tu_apply_assert_state(e, "v1", "ConfigMap", "early", DS_APPLY_WAITING, want);
	/* The namespace arrives: the object follows it without a new version. */
	commit_namespace(e);
	while (tu_apply_pass(e) > 0)
		;
	tu_msleep(400); /* past wait_retry_ms */
	while (tu_apply_pass(e) > 0)
		;
	tu_apply_assert_state(e, "v1", "ConfigMap", "early", DS_APPLY_APPLIED, NULL);
	got = tu_apply_target_get(e, "v1", "ConfigMap", "early");
	assert_non_null(got);
	json_decref(got);
	tu_apply_free(e);
}

/* drasync-target retry --config <the env's file> args... */
static void retry_cmd(tu_apply *e, struct tu_run *r, const char *const *args)
{
	const char *argv[12] = {tu_env("DS_TARGET_BIN"), "retry", "--config", e->config};
	size_t n = 4;

	for (; args[n - 4] && n < 11; n++)
		argv[n] = args[n - 4];
	argv[n] = NULL;
	tu_run(r, NULL, argv);
}

static void test_itest_applier__retry_command_applies_a_failed_object_once_fixed(void **state)
{
	tu_apply *e = tu_apply_new("retry-cmd", NULL);
	struct ds_kube_resource qr;
	struct ds_kube_delete_opts d = {"Background", NULL, NULL, -1};
	struct tu_run r;
	ds_kube_error ke;
	json_t *quota, *got;
	char b[800];

	(void)state;
	commit_namespace(e);
	assert_int_equal(tu_apply_pass(e), 1);
	/* the target's team allows no ConfigMaps in the namespace */
	qr = tu_kube_resource(e->k, "v1", "ResourceQuota");
	quota = json_pack("{s:s, s:s, s:{s:s}, s:{s:{s:s}}}", "apiVersion", "v1", "kind",
			  "ResourceQuota", "metadata", "name", "no-configmaps", "spec", "hard",
			  "count/configmaps", "0");
	if (ds_kube_create(e->k, &qr, e->dst, quota, NULL, &ke) < 0)
		fail_msg("create quota: %s", ds_kube_error_format(&ke, b, sizeof(b)));
	json_decref(quota);
	for (int i = 0; i < 50; i++) {
		json_t *q = NULL;
		const char *used;
		if (ds_kube_get(e->k, &qr, e->dst, "no-configmaps", NULL, &q, &ke) == 0 &&
		    (used = dt_str(q, "/status/hard/count~1configmaps")) && used[0]) {
			json_decref(q);
			break;
		}
		json_decref(q);
		tu_msleep(200);
	}
	tu_apply_commit1(
	    e, tu_objf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: "
		       "'%s'}\ndata: {a: '1'}\n",
		       e->src));
	assert_int_equal(tu_apply_pass(e), 1);
	tu_apply_assert_state(e, "v1", "ConfigMap", "settings", DS_APPLY_FAILED, "exceeded quota");
	assert_int_equal(tu_apply_pass(e), 0); /* not tried again by itself */

	/* the quota is lifted; the operator asks for the object again */
	ds_kube_delete(e->k, &qr, e->dst, "no-configmaps", &d, NULL);
	retry_cmd(e, &r, (const char *[]){"--namespace", e->src, "ConfigMap/settings", NULL});
	if (r.status != 1 || !strstr(r.err, "nothing to retry"))
		fail_msg("retry by source namespace: exit %d\n%s%s", r.status, r.out, r.err);
	tu_run_dispose(&r);
	retry_cmd(e, &r, (const char *[]){"--namespace", e->dst, "ConfigMap/settings", NULL});
	if (r.status != 0 || !strstr(r.out, "settings: was failed: apply: 403") ||
	    !strstr(r.out, "1 object marked"))
		fail_msg("retry: exit %d\nstdout:\n%s\nstderr:\n%s", r.status, r.out, r.err);
	tu_run_dispose(&r);
	assert_int_equal(tu_apply_pass(e), 1);
	tu_apply_assert_state(e, "v1", "ConfigMap", "settings", DS_APPLY_APPLIED, NULL);
	got = tu_apply_target_get(e, "v1", "ConfigMap", "settings");
	assert_non_null(got);
	json_decref(got);
	tu_apply_free(e);
}

static void test_itest_applier__object_too_large_fails_before_it_is_parsed(void **state)
{
	tu_apply *e = tu_apply_new("too-large", NULL);
	uint64_t w0;
	size_t big = (size_t)3584 * 1024; /* over the API server's 3 MiB request limit */
	char *data = malloc(big + 1);
	json_t *objs[2], *got;

	(void)state;
	assert_non_null(data);
	memset(data, 'x', big);
	data[big] = '\0';
	commit_namespace(e);
	objs[0] =
	    json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
		      "metadata", "name", "huge", "namespace", e->src, "data", "blob", data);
	objs[1] = tu_objf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: small, namespace: "
			  "'%s'}\ndata: {a: '1'}\n",
			  e->src);
	assert_non_null(objs[0]);
	free(data);
	tu_apply_commit(e, objs, 2);
	json_decref(objs[0]);
	json_decref(objs[1]);
	w0 = tu_apply_stats(e).api_writes;
	assert_int_equal(tu_apply_pass(e), 3);
	/*
	 * Over the API server's request limit: refused before it is parsed (issue 23),
	 * with the limit it crossed, never sent (the API server would answer 413);
	 * final, not retried until a new version arrives.
	 */
	tu_apply_assert_state(e, "v1", "ConfigMap", "huge", DS_APPLY_FAILED,
			      "over the 3145728 bytes the API server accepts in one request");
	tu_apply_assert_state(e, "v1", "ConfigMap", "small", DS_APPLY_APPLIED, NULL);
	/* the Namespace and small: one write each, none for huge */
	assert_int_equal(tu_apply_stats(e).api_writes - w0, 2);
	assert_null(tu_apply_target_get(e, "v1", "ConfigMap", "huge"));
	got = tu_apply_target_get(e, "v1", "ConfigMap", "small");
	assert_non_null(got);
	json_decref(got);

	/* Within the bytes, past the count of values: refused by the scan as well. */
	{
		size_t n_args = 600000, len = n_args * 3;
		char *args = malloc(len + 64);
		size_t at = 0;
		json_t *pod;

		assert_non_null(args);
		args[at++] = '[';
		for (size_t i = 0; i < n_args; i++) {
			memcpy(args + at, i ? ",\"\"" : "\"\"", i ? 3 : 2);
			at += i ? 3 : 2;
		}
		args[at++] = ']';
		args[at] = '\0';
		pod = tu_objf("apiVersion: v1\nkind: Pod\nmetadata: {name: many, namespace: '%s'}\n"
			      "spec: {containers: [{name: c, image: pause}]}\n",
			      e->src);
		json_object_set_new(
		    json_array_get(json_object_get(json_object_get(pod, "spec"), "containers"), 0),
		    "args", json_loads(args, 0, NULL));
		free(args);
		assert_int_equal(
		    json_array_size(json_object_get(
			json_array_get(json_object_get(json_object_get(pod, "spec"), "containers"),
				       0),
			"args")),
		    n_args);
		tu_apply_commit1(e, pod);
	}
	assert_int_equal(tu_apply_pass(e), 1);
	tu_apply_assert_state(e, "v1", "Pod", "many", DS_APPLY_FAILED,
			      "JSON with more than 500000 values");
	assert_null(tu_apply_target_get(e, "v1", "Pod", "many"));

	/* Final, in the ledger: later passes never look at them again... */
	{
		ds_object_state_row row = tu_apply_row(e, "v1", "ConfigMap", "huge", false);
		int attempts = row.attempts;

		ds_object_state_row_dispose(&row);
		assert_int_equal(tu_apply_pass(e), 0);
		assert_int_equal(tu_apply_stats(e).api_writes - w0, 2);
		row = tu_apply_row(e, "v1", "ConfigMap", "huge", false);
		assert_int_equal(row.attempts, attempts);
		ds_object_state_row_dispose(&row);
	}
	/* ...until a new version arrives, which applies. */
	tu_apply_commit1(e, tu_objf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: huge, "
				    "namespace: '%s'}\ndata: {a: '2'}\n",
				    e->src));
	assert_int_equal(tu_apply_pass(e), 1);
	tu_apply_assert_state(e, "v1", "ConfigMap", "huge", DS_APPLY_APPLIED, NULL);
	got = tu_apply_target_get(e, "v1", "ConfigMap", "huge");
	assert_non_null(got);
	json_decref(got);
	tu_apply_free(e);
}

/*
 * A version of a replicated kind the target does not serve. (A CRD cannot
 * serve it later: every replicated kind is in a built-in group, and the API
 * server answers 404 for a CRD's version in a built-in group although its
 * discovery lists it.)
 */
#define LATE_API "scheduling.k8s.io/v9alpha1"

static void test_itest_applier__kind_not_served_reads_discovery_again_rate_limited(void **state)
{
	tu_apply *e = env_new_refresh("late-kind", 1500);
	ds_object_state *st = NULL;
	ds_object_state_match all = {0};
	json_t *objs[2];
	ds_err err = {0};
	unsigned long g0;

	(void)state;
	commit_namespace(e);
	assert_int_equal(tu_apply_pass(e), 1);
	objs[0] = tu_objf("apiVersion: " LATE_API "\nkind: PodGroup\n"
			  "metadata: {name: pg, namespace: '%s'}\nspec: {minMember: 1}\n",
			  e->src);
	objs[1] = tu_objf("apiVersion: " LATE_API "\nkind: Workload\n"
			  "metadata: {name: wl, namespace: '%s'}\nspec: {}\n",
			  e->src);
	tu_apply_commit(e, objs, 2);
	json_decref(objs[0]);
	json_decref(objs[1]);
	g0 = ds_kube_discovery_generation(e->k);
	assert_int_equal(tu_apply_pass(e), 2);
	tu_apply_assert_state(e, LATE_API, "PodGroup", "pg", DS_APPLY_FAILED,
			      "the target does not serve " LATE_API " PodGroup");
	tu_apply_assert_state(e, LATE_API, "Workload", "wl", DS_APPLY_FAILED, "does not serve");
	/* read again for the first, not again for the second within the interval */
	assert_int_equal(ds_kube_discovery_generation(e->k) - g0, 1);

	assert_int_equal(ds_object_state_open(&st, e->path, &err), 0);
	assert_int_equal(ds_object_state_retry(st, &all, NULL, NULL, &err), 2);
	assert_int_equal(tu_apply_pass(e), 2);
	assert_int_equal(ds_kube_discovery_generation(e->k) - g0, 1);
	/* after the interval a new attempt reads it again, once */
	tu_msleep(1600);
	assert_int_equal(ds_object_state_retry(st, &all, NULL, NULL, &err), 2);
	assert_int_equal(tu_apply_pass(e), 2);
	assert_int_equal(ds_kube_discovery_generation(e->k) - g0, 2);
	tu_apply_assert_state(e, LATE_API, "PodGroup", "pg", DS_APPLY_FAILED, "does not serve");
	ds_object_state_free(st);
	tu_apply_free(e);
}

static void *run_thread(void *arg)
{
	ds_err err = {0};

	if (ds_applier_run(arg, &err) < 0)
		fprintf(stderr, "run: %s\n", err.msg);
	return NULL;
}

static void test_itest_applier__run_loop_applies_what_commits_wake_it_for(void **state)
{
	tu_apply *e = tu_apply_new("run-loop", NULL);
	pthread_t th;
	json_t *cm = NULL;

	(void)state;
	assert_int_equal(pthread_create(&th, NULL, run_thread, e->a), 0);
	{
		json_t *ns =
		    tu_objf("apiVersion: v1\nkind: Namespace\nmetadata: {name: '%s'}\n", e->src);
		ds_record rec = tu_record_upsert(ns, "uid-ns", &e->payloads[e->n_payloads++]);
		tu_ledger_commit(&e->l, &rec, 1, ds_applier_record_handler, e->a);
		json_decref(ns);
	}
	for (int i = 0; i < 20; i++) {
		char text[300];
		json_t *o;
		ds_record rec;
		snprintf(text, sizeof(text),
			 "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: live, namespace: "
			 "'%s'}\ndata: {v: '%d'}\n",
			 e->src, i);
		o = dt_object(text);
		rec = tu_record_upsert(o, "uid-live", &e->payloads[e->n_payloads++]);
		tu_ledger_commit(&e->l, &rec, 1, ds_applier_record_handler, e->a);
		json_decref(o);
	}
	for (int t = 0; t < 100; t++) {
		const char *v;
		json_decref(cm);
		cm = tu_apply_target_get(e, "v1", "ConfigMap", "live");
		v = cm ? dt_str(cm, "/data/v") : NULL;
		if (v && strcmp(v, "19") == 0)
			break;
		tu_msleep(100);
	}
	ds_applier_stop(e->a);
	pthread_join(th, NULL);
	assert_non_null(cm);
	assert_string_equal(dt_str(cm, "/data/v"), "19");
	json_decref(cm);
	/* never more writes than versions; usually far fewer */
	assert_true(tu_apply_stats(e).api_writes <= 21);
	tu_apply_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(
		test_itest_applier__fixture_applies_mapped_and_converted_then_costs_nothing),
	    cmocka_unit_test(test_itest_applier__burst_of_50_updates_is_one_write_of_the_last),
	    cmocka_unit_test(test_itest_applier__workload_waits_for_its_template_then_applies),
	    cmocka_unit_test(
		test_itest_applier__workload_waits_for_the_device_class_its_template_needs),
	    cmocka_unit_test(test_itest_applier__tombstones_delete_only_what_drasync_created),
	    cmocka_unit_test(test_itest_applier__bad_objects_fail_with_a_reason_the_rest_apply),
	    cmocka_unit_test(test_itest_applier__immutable_change_deletes_and_recreates),
	    cmocka_unit_test(test_itest_applier__run_loop_applies_what_commits_wake_it_for),
	    cmocka_unit_test(test_itest_applier__snapshot_prunes_and_a_namespace_goes_only_if_ours),
	    cmocka_unit_test(
		test_itest_applier__two_sources_share_a_namespace_only_if_drasync_did_not_make_it),
	    cmocka_unit_test(test_itest_applier__every_fixture_applies_and_its_pods_run),
	    cmocka_unit_test(
		test_itest_applier__object_waits_for_its_namespace_further_down_the_stream),
	    cmocka_unit_test(test_itest_applier__retry_command_applies_a_failed_object_once_fixed),
	    cmocka_unit_test(test_itest_applier__object_too_large_fails_before_it_is_parsed),
	    cmocka_unit_test(
		test_itest_applier__kind_not_served_reads_discovery_again_rate_limited),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
