/*
 * The verdict of verification from what a cluster says (objects shaped as the
 * API server returns them), the workloads it reads from a real ledger file,
 * and the verifications it stores there.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/object_state.h"
#include "drasync/verify.h"
#include "dstest.h"
#include "testutil.h"
#include "tu_ledger.h"

#include <errno.h>
#include <jansson.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The scheduler's words for a claim no node can satisfy (kube-scheduler 1.34). */
#define UNSCHEDULABLE                                                                              \
	"0/2 nodes are available: 2 cannot allocate all claims. still not schedulable, "           \
	"preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."

static json_t *js(const char *text)
{
	json_error_t e;
	json_t *o = json_loads(text, 0, &e);

	if (!o)
		fail_msg("bad test JSON at %d: %s", e.column, e.text);
	return o;
}

static const char running_pod[] =
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"gpu-app-7d9c-abcde\","
    "\"namespace\":\"ml-dr\",\"uid\":\"p1\",\"ownerReferences\":[{\"apiVersion\":\"apps/v1\","
    "\"kind\":\"ReplicaSet\",\"name\":\"gpu-app-7d9c\",\"uid\":\"rs1\",\"controller\":true}]},"
    "\"spec\":{\"nodeName\":\"node-0\",\"containers\":[{\"name\":\"ctr\",\"image\":\"busybox\","
    "\"resources\":{\"claims\":[{\"name\":\"gpu\"}]}}],"
    "\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimTemplateName\":\"single-gpu\"}]},"
    "\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"PodScheduled\","
    "\"status\":\"True\"},{\"type\":\"Ready\",\"status\":\"True\"}],"
    "\"resourceClaimStatuses\":[{\"name\":\"gpu\",\"resourceClaimName\":"
    "\"gpu-app-7d9c-abcde-gpu-x7k2p\"}],"
    "\"containerStatuses\":[{\"name\":\"ctr\",\"ready\":true,\"restartCount\":0,"
    "\"state\":{\"running\":{\"startedAt\":\"2026-12-01T10:00:00Z\"}}}]}}";

static const char pending_pod[] =
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"gpu-app-7d9c-fghij\","
    "\"namespace\":\"ml-dr\",\"uid\":\"p2\"},"
    "\"spec\":{\"containers\":[{\"name\":\"ctr\",\"image\":\"busybox\"}],"
    "\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimTemplateName\":\"single-gpu\"}]},"
    "\"status\":{\"phase\":\"Pending\",\"conditions\":[{\"type\":\"PodScheduled\","
    "\"status\":\"False\",\"reason\":\"Unschedulable\",\"message\":\"" UNSCHEDULABLE "\"}],"
    "\"resourceClaimStatuses\":[{\"name\":\"gpu\",\"resourceClaimName\":"
    "\"gpu-app-7d9c-fghij-gpu-q9w8e\"}]}}";

static const char allocated_claim[] =
    "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\",\"metadata\":{\"name\":"
    "\"gpu-app-7d9c-abcde-gpu-x7k2p\",\"namespace\":\"ml-dr\"},\"spec\":{\"devices\":{"
    "\"requests\":[{\"name\":\"gpu\",\"exactly\":{\"deviceClassName\":\"gpu.example.com\","
    "\"allocationMode\":\"ExactCount\",\"count\":1}}]}},\"status\":{\"allocation\":{"
    "\"devices\":{\"results\":[{\"request\":\"gpu\",\"driver\":\"gpu.example.com\","
    "\"pool\":\"node-0\",\"device\":\"gpu-0\"}]},\"nodeSelector\":{}},"
    "\"reservedFor\":[{\"resource\":\"pods\",\"name\":\"gpu-app-7d9c-abcde\",\"uid\":\"p1\"}]}}";

/* A claim that asks for 9 devices of a class, never allocated. */
static const char unallocated_claim[] =
    "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\",\"metadata\":{\"name\":"
    "\"gpu-app-7d9c-fghij-gpu-q9w8e\",\"namespace\":\"ml-dr\"},\"spec\":{\"devices\":{"
    "\"requests\":[{\"name\":\"gpu\",\"exactly\":{\"deviceClassName\":\"%s\","
    "\"allocationMode\":\"ExactCount\",\"count\":9}}]}},\"status\":{}}";

static const char template_obj[] =
    "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaimTemplate\",\"metadata\":{"
    "\"name\":\"single-gpu\",\"namespace\":\"ml-dr\"},\"spec\":{\"spec\":{\"devices\":{"
    "\"requests\":[{\"name\":\"gpu\",\"exactly\":{\"deviceClassName\":\"gpu.example.com\"}}]}}}}";

static json_t *deployment(int replicas, const char *annotations)
{
	char text[2000];

	snprintf(text, sizeof(text),
		 "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":"
		 "\"gpu-app\",\"namespace\":\"ml-dr\",\"uid\":\"d1\",\"annotations\":{%s}},"
		 "\"spec\":{\"replicas\":%d,\"selector\":{\"matchLabels\":{\"app\":\"gpu-app\"}},"
		 "\"template\":{\"metadata\":{\"labels\":{\"app\":\"gpu-app\"}},\"spec\":{"
		 "\"containers\":[{\"name\":\"ctr\",\"image\":\"busybox\"}],"
		 "\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimTemplateName\":"
		 "\"single-gpu\"}]}}},"
		 "\"status\":{\"conditions\":[{\"type\":\"Progressing\",\"status\":\"True\"}]}}",
		 annotations, replicas);
	return js(text);
}

struct world {
	json_t *obj, *pods, *claims, *templates, *classes;
};

static void world_init(struct world *w, json_t *obj)
{
	w->obj = obj;
	w->pods = json_array();
	w->claims = json_object();
	w->templates = json_object();
	w->classes = json_object();
	json_object_set_new(w->templates, "single-gpu", js(template_obj));
	json_object_set_new(w->classes, "gpu.example.com", json_true());
}

static void world_dispose(struct world *w)
{
	json_decref(w->obj);
	json_decref(w->pods);
	json_decref(w->claims);
	json_decref(w->templates);
	json_decref(w->classes);
}

static int judge(ds_verify_item *it, struct world *w)
{
	ds_verify_view v = {w->obj, w->pods, w->claims, w->templates, w->classes};

	return ds_verify_judge(it, &v);
}

static void item(ds_verify_item *it, const char *kind, enum ds_verify_form form, bool held)
{
	assert_int_equal(ds_verify_item_init(it, kind, "ml-dr", "gpu-app", form, held), 0);
}

static void test_verify__deployment_with_pods_running_and_claims_allocated(void **state)
{
	struct world w;
	ds_verify_item it;

	(void)state;
	item(&it, "Deployment", DS_VERIFY_ACTIVE, false);
	world_init(&w, deployment(1, ""));
	json_array_append_new(w.pods, js(running_pod));
	json_object_set_new(w.claims, "gpu-app-7d9c-abcde-gpu-x7k2p", js(allocated_claim));
	assert_int_equal(judge(&it, &w), 1);
	assert_true(it.verified);
	assert_string_equal(it.reason, "1/1 pods Running, 1 claim allocated");
	world_dispose(&w);
	ds_verify_item_dispose(&it);
}

static void test_verify__unschedulable_pod_says_the_schedulers_words(void **state)
{
	struct world w;
	ds_verify_item it;
	char *claim = malloc(sizeof(unallocated_claim) + 64);

	(void)state;
	item(&it, "Deployment", DS_VERIFY_ACTIVE, false);
	world_init(&w, deployment(2, ""));
	json_array_append_new(w.pods, js(pending_pod));
	json_array_append_new(w.pods, js(running_pod));
	json_object_set_new(w.claims, "gpu-app-7d9c-abcde-gpu-x7k2p", js(allocated_claim));
	sprintf(claim, unallocated_claim, "gpu.example.com");
	json_object_set_new(w.claims, "gpu-app-7d9c-fghij-gpu-q9w8e", js(claim));
	assert_int_equal(judge(&it, &w), 0);
	assert_false(it.verified);
	assert_string_equal(it.reason, "pod gpu-app-7d9c-fghij is not scheduled: " UNSCHEDULABLE
				       "; ResourceClaim gpu-app-7d9c-fghij-gpu-q9w8e of pod "
				       "gpu-app-7d9c-fghij is not allocated");
	world_dispose(&w);
	ds_verify_item_dispose(&it);
	free(claim);
}

static void test_verify__claim_naming_a_missing_device_class_names_it(void **state)
{
	struct world w;
	ds_verify_item it;
	char *claim = malloc(sizeof(unallocated_claim) + 64);

	(void)state;
	item(&it, "Pod", DS_VERIFY_ACTIVE, false);
	world_init(&w, js(pending_pod));
	sprintf(claim, unallocated_claim, "gpu.nowhere.example");
	json_object_set_new(w.claims, "gpu-app-7d9c-fghij-gpu-q9w8e", js(claim));
	json_object_set_new(w.classes, "gpu.nowhere.example", json_false());
	assert_int_equal(judge(&it, &w), 0);
	assert_non_null(strstr(it.reason, "DeviceClass gpu.nowhere.example (requested by "
					  "ResourceClaim gpu-app-7d9c-fghij-gpu-q9w8e) does not "
					  "exist on the target"));
	assert_non_null(strstr(it.reason, "is not scheduled: 0/2 nodes are available"));
	world_dispose(&w);
	ds_verify_item_dispose(&it);
	free(claim);
}

static void test_verify__missing_template_and_too_few_pods(void **state)
{
	struct world w;
	ds_verify_item it;

	(void)state;
	item(&it, "Deployment", DS_VERIFY_ACTIVE, false);
	world_init(&w, deployment(1, ""));
	json_object_set_new(w.templates, "single-gpu", json_false());
	assert_int_equal(judge(&it, &w), 0);
	assert_string_equal(it.reason, "ResourceClaimTemplate single-gpu does not exist on the "
				       "target");
	world_dispose(&w);

	/* No pods yet: the controller's ReplicaFailure message. */
	world_init(&w, deployment(3, ""));
	json_array_append_new(json_object_get(json_object_get(w.obj, "status"), "conditions"),
			      js("{\"type\":\"ReplicaFailure\",\"status\":\"True\",\"reason\":"
				 "\"FailedCreate\",\"message\":\"pods \\\"gpu-app-7d9c-\\\" is "
				 "forbidden: exceeded quota: gpu-quota\"}"));
	assert_int_equal(judge(&it, &w), 0);
	assert_string_equal(it.reason, "0 of 3 pods exist; pods \"gpu-app-7d9c-\" is forbidden: "
				       "exceeded quota: gpu-quota");
	world_dispose(&w);
	ds_verify_item_dispose(&it);
}

static void test_verify__container_reasons_image_pull_and_crash_loop(void **state)
{
	struct world w;
	ds_verify_item it;
	json_t *pod;

	(void)state;
	item(&it, "Pod", DS_VERIFY_ACTIVE, false);
	pod = js(running_pod);
	json_object_set_new(json_array_get(dt_get(pod, "/status/containerStatuses"), 0), "state",
			    js("{\"waiting\":{\"reason\":\"CrashLoopBackOff\",\"message\":"
			       "\"back-off 5m0s restarting failed container=ctr\"}}"));
	world_init(&w, pod);
	json_object_set_new(w.claims, "gpu-app-7d9c-abcde-gpu-x7k2p", js(allocated_claim));
	assert_int_equal(judge(&it, &w), 0);
	assert_string_equal(it.reason, "container ctr is waiting: CrashLoopBackOff: back-off 5m0s "
				       "restarting failed container=ctr");
	world_dispose(&w);

	pod = js(running_pod);
	json_object_set_new(json_object_get(pod, "status"), "phase", json_string("Pending"));
	json_object_set_new(json_array_get(dt_get(pod, "/status/containerStatuses"), 0), "state",
			    js("{\"waiting\":{\"reason\":\"ImagePullBackOff\",\"message\":"
			       "\"Back-off pulling image \\\"busybox:nope\\\"\"}}"));
	world_init(&w, pod);
	json_object_set_new(w.claims, "gpu-app-7d9c-abcde-gpu-x7k2p", js(allocated_claim));
	assert_int_equal(judge(&it, &w), 0);
	assert_string_equal(it.reason, "container ctr is waiting: ImagePullBackOff: Back-off "
				       "pulling image \"busybox:nope\"");
	world_dispose(&w);
	ds_verify_item_dispose(&it);
}

static void test_verify__standby_parked_and_held(void **state)
{
	struct world w;
	ds_verify_item it;

	(void)state;
	item(&it, "Deployment", DS_VERIFY_STANDBY, false);
	world_init(&w, deployment(0, "\"drasync.io/replicas\":\"3\""));
	assert_int_equal(judge(&it, &w), 1);
	assert_string_equal(it.reason,
			    "parked: replicas 0 (source count 3 in drasync.io/replicas)");
	world_dispose(&w);
	world_init(&w, deployment(3, ""));
	assert_int_equal(judge(&it, &w), 0);
	assert_string_equal(it.reason, "not parked: spec.replicas is 3, standby wants 0");
	world_dispose(&w);
	/* active again, but still parked: failover has not reached it */
	it.form = DS_VERIFY_ACTIVE;
	world_init(&w, deployment(0, "\"drasync.io/replicas\":\"3\""));
	assert_int_equal(judge(&it, &w), 0);
	assert_string_equal(it.reason,
			    "still parked: replicas 0 (source count 3 in drasync.io/replicas)");
	world_dispose(&w);
	ds_verify_item_dispose(&it);

	/* A held Job is verified by its absence. */
	item(&it, "Job", DS_VERIFY_STANDBY, true);
	world_init(&w, NULL);
	assert_int_equal(judge(&it, &w), 1);
	assert_string_equal(it.reason, "held in the ledger, not on the cluster");
	world_dispose(&w);
	world_init(&w, js("{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"metadata\":{\"name\":"
			  "\"gpu-app\",\"namespace\":\"ml-dr\"},\"spec\":{}}"));
	assert_int_equal(judge(&it, &w), 0);
	assert_non_null(strstr(it.reason, "is on the cluster though the ledger holds it"));
	world_dispose(&w);
	ds_verify_item_dispose(&it);

	/* CronJob and DaemonSet */
	item(&it, "CronJob", DS_VERIFY_STANDBY, false);
	world_init(&w, js("{\"apiVersion\":\"batch/v1\",\"kind\":\"CronJob\",\"metadata\":{"
			  "\"name\":\"gpu-app\",\"annotations\":{\"drasync.io/suspend\":"
			  "\"false\"}},\"spec\":{\"suspend\":true,\"schedule\":\"*/5 * * * *\"}}"));
	assert_int_equal(judge(&it, &w), 1);
	it.form = DS_VERIFY_ACTIVE;
	assert_int_equal(judge(&it, &w), 0);
	assert_string_equal(it.reason, "still parked: the CronJob is suspended");
	world_dispose(&w);
	ds_verify_item_dispose(&it);
	item(&it, "DaemonSet", DS_VERIFY_STANDBY, false);
	world_init(&w, js("{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\",\"metadata\":{"
			  "\"name\":\"gpu-app\"},\"spec\":{\"template\":{\"spec\":{"
			  "\"nodeSelector\":{\"drasync.io/standby\":\"true\"},\"containers\":[]}}},"
			  "\"status\":{\"desiredNumberScheduled\":0}}"));
	assert_int_equal(judge(&it, &w), 1);
	assert_string_equal(it.reason, "parked: nodeSelector drasync.io/standby=true");
	it.form = DS_VERIFY_ACTIVE;
	assert_int_equal(judge(&it, &w), 0);
	assert_string_equal(it.reason, "still parked: nodeSelector drasync.io/standby");
	world_dispose(&w);
	ds_verify_item_dispose(&it);
}

static void test_verify__missing_workload_says_what_the_ledger_says(void **state)
{
	struct world w;
	ds_verify_item it;

	(void)state;
	item(&it, "Deployment", DS_VERIFY_ACTIVE, false);
	it.ledger_state = strdup("waiting");
	it.ledger_reason = strdup("waits for ResourceClaimTemplate ml-dr/single-gpu");
	world_init(&w, NULL);
	assert_int_equal(judge(&it, &w), 0);
	assert_string_equal(it.reason, "Deployment ml-dr/gpu-app does not exist on the target (the "
				       "ledger says waiting: waits for ResourceClaimTemplate "
				       "ml-dr/single-gpu)");
	world_dispose(&w);
	ds_verify_item_dispose(&it);
}

static void test_verify__job_complete_failed_and_running(void **state)
{
	struct world w;
	ds_verify_item it;
	json_t *pod;

	(void)state;
	item(&it, "Job", DS_VERIFY_ACTIVE, false);
	world_init(&w, js("{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"metadata\":{\"name\":"
			  "\"gpu-app\"},\"spec\":{},\"status\":{\"conditions\":[{\"type\":"
			  "\"Failed\",\"status\":\"True\",\"reason\":\"BackoffLimitExceeded\","
			  "\"message\":\"Job has reached the specified backoff limit\"}]}}"));
	assert_int_equal(judge(&it, &w), 0);
	assert_string_equal(it.reason,
			    "the Job failed: Job has reached the specified backoff limit");
	json_object_set_new(json_array_get(dt_get(w.obj, "/status/conditions"), 0), "type",
			    json_string("Complete"));
	assert_int_equal(judge(&it, &w), 1);
	assert_string_equal(it.reason, "complete");
	json_object_del(w.obj, "status");
	pod = js(running_pod);
	json_object_set_new(json_object_get(pod, "status"), "phase", json_string("Succeeded"));
	json_object_del(json_object_get(pod, "status"), "containerStatuses");
	json_array_append_new(w.pods, pod);
	json_object_set_new(w.claims, "gpu-app-7d9c-abcde-gpu-x7k2p", js(allocated_claim));
	assert_int_equal(judge(&it, &w), 1);
	assert_string_equal(it.reason, "1/1 pods Running or Succeeded");
	world_dispose(&w);
	ds_verify_item_dispose(&it);

	/* A bare Pod that ran to completion: verified unless it is restarted (Always). */
	item(&it, "Pod", DS_VERIFY_ACTIVE, false);
	pod = js(running_pod);
	json_object_set_new(json_object_get(pod, "status"), "phase", json_string("Succeeded"));
	json_object_set_new(json_object_get(pod, "spec"), "restartPolicy", json_string("Never"));
	world_init(&w, pod);
	assert_int_equal(judge(&it, &w), 1);
	assert_string_equal(it.reason, "Succeeded");
	json_object_set_new(json_object_get(pod, "spec"), "restartPolicy", json_string("Always"));
	assert_int_equal(judge(&it, &w), 0);
	assert_string_equal(it.reason,
			    "pod gpu-app-7d9c-abcde has Succeeded: its containers exited");
	world_dispose(&w);
	ds_verify_item_dispose(&it);
}

static void test_verify__claims_classes_and_selectors_are_read(void **state)
{
	json_t *names = json_array(), *pod = js(pending_pod), *sel;
	json_t *beta = js("{\"spec\":{\"devices\":{\"requests\":[{\"name\":\"a\","
			  "\"deviceClassName\":\"old.example.com\"},{\"name\":\"b\","
			  "\"firstAvailable\":[{\"name\":\"x\",\"deviceClassName\":\"big.example."
			  "com\"},{\"name\":\"y\",\"deviceClassName\":\"old.example.com\"}]}]}}}");
	char buf[300];

	(void)state;
	json_array_append_new(json_object_get(json_object_get(pod, "spec"), "resourceClaims"),
			      js("{\"name\":\"shared\",\"resourceClaimName\":\"shared-gpu\"}"));
	assert_int_equal(ds_verify_pod_claims(pod, names), 2);
	assert_int_equal(ds_verify_pod_claims(pod, names), 0); /* no duplicates */
	assert_string_equal(json_string_value(json_array_get(names, 0)),
			    "gpu-app-7d9c-fghij-gpu-q9w8e");
	assert_string_equal(json_string_value(json_array_get(names, 1)), "shared-gpu");
	json_array_clear(names);
	assert_int_equal(ds_verify_device_classes(beta, names), 2);
	assert_string_equal(json_string_value(json_array_get(names, 1)), "big.example.com");

	sel = js("{\"matchLabels\":{\"app\":\"gpu\"},\"matchExpressions\":[{\"key\":\"tier\","
		 "\"operator\":\"In\",\"values\":[\"a\",\"b\"]},{\"key\":\"canary\","
		 "\"operator\":\"DoesNotExist\"}]}");
	assert_int_equal(ds_verify_label_selector(sel, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "app=gpu,tier in (a,b),!canary");
	assert_int_equal(ds_verify_label_selector(sel, buf, 10), -ENOSPC);
	json_decref(sel);
	sel = js("{}");
	assert_int_equal(ds_verify_label_selector(sel, buf, sizeof(buf)), -EINVAL);
	json_decref(sel);
	json_decref(names);
	json_decref(pod);
	json_decref(beta);
}

/* ---- the ledger ---- */

static enum ds_verify_form standby_in_dr(void *ud, const char *ns)
{
	(void)ud;
	return strcmp(ns, "ml-dr") == 0 ? DS_VERIFY_STANDBY : DS_VERIFY_ACTIVE;
}

static const char *map_ml(void *ud, const char *ns)
{
	(void)ud;
	return strcmp(ns, "ml") == 0 ? "ml-dr" : ns;
}

/* A Deployment applied to ml-dr, a Job held, a ConfigMap applied, a Pod failed (source ns ml). */
static void fill(const char *path)
{
	static const char *const kinds[] = {"Deployment", "Job", "ConfigMap", "Pod"};
	static const char *const apis[] = {"apps/v1", "batch/v1", "v1", "v1"};
	tu_ledger l;
	ds_object_state *st = NULL;
	ds_object_state_row *rows = NULL;
	ds_record recs[4];
	char *payloads[4];
	json_t *objs[4];
	uint8_t h[DS_HASH_LEN] = {7};
	size_t n = 0;
	ds_err err = {0};

	tu_ledger_open(&l, path, "prod-east");
	for (int i = 0; i < 4; i++) {
		/* the records point into the objects: kept until committed */
		objs[i] = json_pack("{s:s, s:s, s:{s:s, s:s}}", "apiVersion", apis[i], "kind",
				    kinds[i], "metadata", "name", "w", "namespace", "ml");
		recs[i] = tu_record_upsert(objs[i], "uid", &payloads[i]);
	}
	tu_ledger_commit(&l, recs, 4, NULL, NULL);
	for (int i = 0; i < 4; i++) {
		free(payloads[i]);
		json_decref(objs[i]);
	}
	assert_int_equal(ds_object_state_open(&st, path, &err), 0);
	assert_true(ds_object_state_ingest(st, &err) >= 0);
	assert_int_equal(ds_object_state_pick(st, INT64_MAX, 10, &rows, &n, &err), 0);
	assert_int_equal(n, 4);
	for (size_t i = 0; i < n; i++) {
		ds_object_state_result res = {0};
		bool applied = strcmp(rows[i].kind, "Deployment") == 0 ||
			       strcmp(rows[i].kind, "ConfigMap") == 0;
		res.state = applied			       ? DS_APPLY_APPLIED
			    : strcmp(rows[i].kind, "Job") == 0 ? DS_APPLY_HELD
							       : DS_APPLY_FAILED;
		res.reason = res.state == DS_APPLY_FAILED ? "apply: 422 Invalid: spec" : NULL;
		res.applied_hash = applied ? h : NULL;
		res.target_ns = applied ? "ml-dr" : NULL;
		res.target_name = applied ? "w" : NULL;
		res.target_api_version = applied ? rows[i].api_version : NULL;
		assert_int_equal(ds_object_state_set(st, rows[i].id, rows[i].record_id, &res, &err),
				 0);
	}
	ds_object_state_rows_free(rows, n);
	ds_object_state_free(st);
	tu_ledger_close(&l);
}

static void test_verify__workloads_from_the_ledger_and_stored_back(void **state)
{
	char *dir = tu_mkdtemp("verify");
	char path[1100];
	ds_verify_select sel = {.map_ns = map_ml, .form_of = standby_in_dr};
	const char *only_other[] = {"other"};
	ds_verify_item *items = NULL;
	size_t n = 0;
	ds_err err = {0};
	sqlite3 *db;
	sqlite3_stmt *q;

	(void)state;
	snprintf(path, sizeof(path), "%s/ledger.db", dir);
	assert_int_equal(ds_verify_items_from_ledger(path, &sel, &items, &n, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "no ledger at"));
	fill(path);
	assert_int_equal(ds_verify_items_from_ledger(path, &sel, &items, &n, &err), 0);
	/* Workloads only, in target namespaces, ordered by namespace, kind, name. */
	assert_int_equal(n, 3);
	assert_string_equal(items[0].kind, "Deployment");
	assert_string_equal(items[0].ns, "ml-dr");
	assert_int_equal(items[0].form, DS_VERIFY_STANDBY);
	assert_false(items[0].held);
	assert_null(items[0].ledger_state);
	assert_string_equal(items[1].kind, "Job");
	assert_true(items[1].held);
	assert_string_equal(items[2].kind, "Pod");
	assert_string_equal(items[2].ledger_state, "failed");
	assert_string_equal(items[2].ledger_reason, "apply: 422 Invalid: spec");

	items[0].verified = true;
	snprintf(items[0].reason, sizeof(items[0].reason), "parked");
	items[0].seconds = 1.5;
	snprintf(items[2].reason, sizeof(items[2].reason), "does not exist");
	assert_int_equal(ds_verify_store(path, items, n, &err), 0);
	assert_int_equal(ds_verify_store(path, items, n, &err), 0); /* one row each */
	ds_verify_items_free(items, n);

	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db,
					    "SELECT kind, verified, reason, seconds, form FROM "
					    "verifications ORDER BY kind",
					    -1, &q, NULL),
			 SQLITE_OK);
	assert_int_equal(sqlite3_step(q), SQLITE_ROW);
	assert_string_equal((const char *)sqlite3_column_text(q, 0), "Deployment");
	assert_int_equal(sqlite3_column_int(q, 1), 1);
	assert_string_equal((const char *)sqlite3_column_text(q, 2), "parked");
	assert_true(sqlite3_column_double(q, 3) > 1.4);
	assert_string_equal((const char *)sqlite3_column_text(q, 4), "standby");
	assert_int_equal(sqlite3_step(q), SQLITE_ROW);
	assert_int_equal(sqlite3_step(q), SQLITE_ROW);
	assert_string_equal((const char *)sqlite3_column_text(q, 0), "Pod");
	assert_int_equal(sqlite3_column_int(q, 1), 0);
	assert_int_equal(sqlite3_step(q), SQLITE_DONE);
	sqlite3_finalize(q);
	sqlite3_close(db);

	sel.namespaces = only_other;
	sel.n_namespaces = 1;
	assert_int_equal(ds_verify_items_from_ledger(path, &sel, &items, &n, &err), 0);
	assert_int_equal(n, 0);
	ds_verify_items_free(items, n);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_verify__deployment_with_pods_running_and_claims_allocated),
	    cmocka_unit_test(test_verify__unschedulable_pod_says_the_schedulers_words),
	    cmocka_unit_test(test_verify__claim_naming_a_missing_device_class_names_it),
	    cmocka_unit_test(test_verify__missing_template_and_too_few_pods),
	    cmocka_unit_test(test_verify__container_reasons_image_pull_and_crash_loop),
	    cmocka_unit_test(test_verify__standby_parked_and_held),
	    cmocka_unit_test(test_verify__missing_workload_says_what_the_ledger_says),
	    cmocka_unit_test(test_verify__job_complete_failed_and_running),
	    cmocka_unit_test(test_verify__claims_classes_and_selectors_are_read),
	    cmocka_unit_test(test_verify__workloads_from_the_ledger_and_stored_back),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
