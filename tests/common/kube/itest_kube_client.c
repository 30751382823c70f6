/*
 * The Kubernetes client against real control planes (tests/kube fixtures):
 * kube_v1 serves resource.k8s.io/v1, kube_v1beta1 serves resource.k8s.io/v1beta1.
 * Each test works in its own namespace and removes it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/clock.h"
#include "drasync/kube_client.h"
#include "testutil.h"
#include "tu_kube.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- helpers ---------------------------------------------------------------- */

static const char *meta(const json_t *obj, const char *key)
{
	return json_string_value(json_object_get(json_object_get(obj, "metadata"), key));
}

/* ---- discovery ------------------------------------------------------------------- */

static void test_itest_kube_client__discovery(void **state)
{
	ds_kube *k = tu_kube_connect(tu_env("DS_KUBECONFIG_V1")),
		*kb = tu_kube_connect(tu_env("DS_KUBECONFIG_V1BETA1"));
	struct ds_kube_resource r;
	char pref[64];
	json_t *served = NULL;
	ds_kube_error ke;

	(void)state;
	r = tu_kube_resource(k, "v1", "ConfigMap");
	assert_string_equal(r.resource, "configmaps");
	assert_string_equal(r.group, "");
	assert_true(r.namespaced);
	r = tu_kube_resource(k, "v1", "Namespace");
	assert_false(r.namespaced);
	assert_true(r.has_status);
	r = tu_kube_resource(k, "apps/v1", "Deployment");
	assert_string_equal(r.resource, "deployments");
	assert_true(r.has_status);
	r = tu_kube_resource(k, "resource.k8s.io/v1", "DeviceClass");
	assert_string_equal(r.resource, "deviceclasses");
	assert_false(r.namespaced);
	r = tu_kube_resource(k, "resource.k8s.io/v1", "ResourceClaim");
	assert_true(r.namespaced);
	assert_true(r.has_status);
	TU_KUBE_CHECK(
	    ds_kube_group_versions(k, "resource.k8s.io", pref, sizeof(pref), &served, &ke), ke);
	assert_string_equal(pref, "v1");
	json_decref(served);
	TU_KUBE_CHECK(ds_kube_group_versions(k, "", pref, sizeof(pref), NULL, &ke), ke);
	assert_string_equal(pref, "v1");

	/* the v1beta1 cluster serves resource.k8s.io/v1beta1 only */
	TU_KUBE_CHECK(
	    ds_kube_group_versions(kb, "resource.k8s.io", pref, sizeof(pref), &served, &ke), ke);
	assert_string_equal(pref, "v1beta1");
	for (size_t i = 0; i < json_array_size(served); i++)
		assert_string_not_equal(json_string_value(json_array_get(served, i)), "v1");
	json_decref(served);
	TU_KUBE_CHECK(ds_kube_version_to_use(kb, "resource.k8s.io", "v1", pref, sizeof(pref), &ke),
		      ke);
	assert_string_equal(pref, "v1beta1");
	TU_KUBE_CHECK(ds_kube_version_to_use(k, "resource.k8s.io", "v1", pref, sizeof(pref), &ke),
		      ke);
	assert_string_equal(pref, "v1");
	assert_int_equal(ds_kube_resource_find(kb, "resource.k8s.io/v1", "ResourceClaim", &r, &ke),
			 -ENOENT);
	assert_non_null(strstr(ke.message, "ResourceClaim"));
	assert_int_equal(ds_kube_group_versions(kb, "no.such.group", pref, sizeof(pref), NULL, &ke),
			 -ENOENT);
	ds_kube_free(k);
	ds_kube_free(kb);
}

/* ---- CRUD of every kind ------------------------------------------------------------- */

static const char POD_SPEC[] = "      containers: [{name: c, image: registry.k8s.io/pause:3.10}]\n";

/* Manifests of every kind drasync touches; %1$s the namespace, %2$u a suffix. */
static const char *const V1_KINDS[] = {
    "apiVersion: v1\nkind: Namespace\nmetadata: {name: 'itest-obj-%2$u'}\n",
    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: '%1$s'}\n"
    "data: {a: '1'}\n",
    "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: '%1$s'}\n"
    "type: Opaque\nstringData: {password: hunter2}\n",
    "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: sa, namespace: '%1$s'}\n",
    "apiVersion: v1\nkind: Service\nmetadata: {name: svc, namespace: '%1$s'}\n"
    "spec: {selector: {app: x}, ports: [{port: 80, targetPort: 8080}]}\n",
    "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: pvc, namespace: '%1$s'}\n"
    "spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}\n",
    "apiVersion: v1\nkind: Pod\nmetadata: {name: pod, namespace: '%1$s'}\n"
    "spec:\n  containers: [{name: c, image: registry.k8s.io/pause:3.10}]\n",
    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: dep, namespace: '%1$s'}\n"
    "spec:\n  replicas: 0\n  selector: {matchLabels: {app: dep}}\n"
    "  template:\n    metadata: {labels: {app: dep}}\n    spec:\n%3$s",
    "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: rs, namespace: '%1$s'}\n"
    "spec:\n  replicas: 0\n  selector: {matchLabels: {app: rs}}\n"
    "  template:\n    metadata: {labels: {app: rs}}\n    spec:\n%3$s",
    "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: sts, namespace: '%1$s'}\n"
    "spec:\n  replicas: 0\n  serviceName: svc\n  selector: {matchLabels: {app: sts}}\n"
    "  template:\n    metadata: {labels: {app: sts}}\n    spec:\n%3$s",
    "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: ds, namespace: '%1$s'}\n"
    "spec:\n  selector: {matchLabels: {app: ds}}\n"
    "  template:\n    metadata: {labels: {app: ds}}\n    spec:\n%3$s",
    "apiVersion: batch/v1\nkind: Job\nmetadata: {name: job, namespace: '%1$s'}\n"
    "spec:\n  suspend: true\n  template:\n    spec:\n      restartPolicy: Never\n%3$s",
    "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: cron, namespace: '%1$s'}\n"
    "spec:\n  schedule: '*/5 * * * *'\n  suspend: true\n  jobTemplate:\n    spec:\n"
    "      template:\n        spec:\n          restartPolicy: Never\n"
    "          containers: [{name: c, image: registry.k8s.io/pause:3.10}]\n",
    "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: 'itest-gpu-%2$u'}\n"
    "spec:\n  selectors: [{cel: {expression: 'device.driver == \"gpu.example.com\"'}}]\n",
    "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: rc, namespace: '%1$s'}\n"
    "spec:\n  devices:\n    requests:\n    - name: gpu\n      exactly: {deviceClassName: "
    "gpu.example.com}\n",
    "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\n"
    "metadata: {name: rct, namespace: '%1$s'}\n"
    "spec:\n  spec:\n    devices:\n      requests:\n      - name: gpu\n"
    "        exactly: {deviceClassName: gpu.example.com, count: 2}\n",
};

static const char *const V1BETA1_KINDS[] = {
    "apiVersion: resource.k8s.io/v1beta1\nkind: DeviceClass\nmetadata: {name: 'itest-gpu-%2$u'}\n"
    "spec:\n  selectors: [{cel: {expression: 'device.driver == \"gpu.example.com\"'}}]\n",
    "apiVersion: resource.k8s.io/v1beta1\nkind: ResourceClaim\n"
    "metadata: {name: rc, namespace: '%1$s'}\n"
    "spec:\n  devices:\n    requests:\n    - {name: gpu, deviceClassName: gpu.example.com}\n",
    "apiVersion: resource.k8s.io/v1beta1\nkind: ResourceClaimTemplate\n"
    "metadata: {name: rct, namespace: '%1$s'}\n"
    "spec:\n  spec:\n    devices:\n      requests:\n"
    "      - {name: gpu, deviceClassName: gpu.example.com, count: 2}\n",
};

/* create, get, merge patch, update (retrying a conflict as a controller may
 * write meanwhile), list by label, delete, and the object is gone or going */
static void crud_one(ds_kube *k, const char *ns, const char *tmpl)
{
	struct ds_kube_delete_opts del = {"Background", NULL, NULL, 0};
	struct ds_kube_list_opts lo = {"drasync.io/itest=patched", NULL, NULL, NULL, 0};
	struct ds_kube_resource r;
	json_t *obj, *created = NULL, *got = NULL, *patched = NULL, *updated = NULL, *list = NULL,
		     *patch;
	const char *kind, *name;
	char uid[64], rv[64];
	ds_kube_error ke;
	int rc, tries;

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
	/* the templates are the constant tables above */
	obj = tu_kube_doc(tmpl, ns, tu_rand(), POD_SPEC);
#pragma GCC diagnostic pop
	kind = json_string_value(json_object_get(obj, "kind"));
	name = meta(obj, "name");
	r = tu_kube_resource(k, json_string_value(json_object_get(obj, "apiVersion")), kind);
	rc = ds_kube_create(k, &r, ns, obj, &created, &ke);
	if (rc < 0) {
		char b[800];
		fail_msg("create %s: %s", kind, ds_kube_error_format(&ke, b, sizeof(b)));
	}
	assert_string_equal(meta(created, "name"), name);
	snprintf(uid, sizeof(uid), "%s", meta(created, "uid"));
	TU_KUBE_CHECK(ds_kube_get(k, &r, ns, name, NULL, &got, &ke), ke);
	assert_string_equal(meta(got, "uid"), uid);
	/* creating it again: 409 AlreadyExists */
	assert_int_equal(ds_kube_create(k, &r, ns, obj, NULL, &ke), -EEXIST);
	assert_int_equal(ke.code, 409);
	assert_string_equal(ke.reason, "AlreadyExists");

	patch = tu_kube_doc("metadata: {labels: {drasync.io/itest: patched}}\n");
	TU_KUBE_CHECK(ds_kube_merge_patch(k, &r, ns, name, patch, NULL, &patched, &ke), ke);
	json_decref(patch);
	assert_string_equal(json_string_value(json_object_get(
				json_object_get(json_object_get(patched, "metadata"), "labels"),
				"drasync.io/itest")),
			    "patched");
	for (tries = 0;; tries++) {
		json_t *cur = NULL;
		TU_KUBE_CHECK(ds_kube_get(k, &r, ns, name, NULL, &cur, &ke), ke);
		snprintf(rv, sizeof(rv), "%s", meta(cur, "resourceVersion"));
		json_object_set_new(json_object_get(cur, "metadata"), "annotations",
				    json_pack("{s:s}", "drasync.io/step", "update"));
		rc = ds_kube_update(k, &r, ns, cur, NULL, &updated, &ke);
		json_decref(cur);
		if (rc != -ESTALE || tries >= 5)
			break;
	}
	TU_KUBE_CHECK(rc, ke);
	assert_string_not_equal(meta(updated, "resourceVersion"), rv);
	TU_KUBE_CHECK(ds_kube_list(k, &r, ns, &lo, &list, NULL, &ke), ke);
	assert_int_equal(json_array_size(json_object_get(list, "items")), 1);
	assert_string_equal(meta(json_array_get(json_object_get(list, "items"), 0), "uid"), uid);

	TU_KUBE_CHECK(ds_kube_delete(k, &r, ns, name, &del, &ke), ke);
	json_decref(got);
	got = NULL;
	rc = ds_kube_get(k, &r, ns, name, NULL, &got, &ke);
	if (rc == 0) /* finalizers (namespace, pvc-protection) keep it a moment */
		assert_non_null(meta(got, "deletionTimestamp"));
	else
		assert_int_equal(rc, -ENOENT);
	json_decref(obj);
	json_decref(created);
	json_decref(got);
	json_decref(patched);
	json_decref(updated);
	json_decref(list);
}

static void test_itest_kube_client__crud_every_kind_v1(void **state)
{
	ds_kube *k = tu_kube_connect(tu_env("DS_KUBECONFIG_V1"));
	char *ns = tu_kube_new_namespace(k, "itest-crud", NULL);

	(void)state;
	for (size_t i = 0; i < sizeof(V1_KINDS) / sizeof(V1_KINDS[0]); i++)
		crud_one(k, ns, V1_KINDS[i]);
	tu_kube_drop_namespace(k, ns);
	ds_kube_free(k);
}

static void test_itest_kube_client__crud_dra_kinds_v1beta1(void **state)
{
	ds_kube *k = tu_kube_connect(tu_env("DS_KUBECONFIG_V1BETA1"));
	char *ns = tu_kube_new_namespace(k, "itest-crudb", NULL);

	(void)state;
	for (size_t i = 0; i < sizeof(V1BETA1_KINDS) / sizeof(V1BETA1_KINDS[0]); i++)
		crud_one(k, ns, V1BETA1_KINDS[i]);
	/* and the core kinds work there as well */
	crud_one(k, ns, V1_KINDS[1]);
	crud_one(k, ns, V1_KINDS[7]);
	tu_kube_drop_namespace(k, ns);
	ds_kube_free(k);
}

/* ---- lists ----------------------------------------------------------------------------- */

static void test_itest_kube_client__pagination_limit_2_over_7(void **state)
{
	ds_kube *k = tu_kube_connect(tu_env("DS_KUBECONFIG_V1"));
	char *ns = tu_kube_new_namespace(k, "itest-page", NULL);
	struct ds_kube_resource r = tu_kube_resource(k, "v1", "ConfigMap");
	struct ds_kube_list_opts lo = {"set=seven", NULL, NULL, NULL, 2};
	json_t *list = NULL, *page = NULL;
	ds_kube_error ke;
	unsigned pages = 0;
	bool seen[7] = {false};

	(void)state;
	for (int i = 0; i < 7; i++) {
		json_t *cm = tu_kube_doc("apiVersion: v1\nkind: ConfigMap\n"
					 "metadata: {name: cm-%d, labels: {set: seven}}\n",
					 i);
		TU_KUBE_CHECK(ds_kube_create(k, &r, ns, cm, NULL, &ke), ke);
		json_decref(cm);
	}
	/* one page: two items and a continue token */
	TU_KUBE_CHECK(ds_kube_list_page(k, &r, ns, &lo, &page, &ke), ke);
	assert_int_equal(json_array_size(json_object_get(page, "items")), 2);
	assert_non_null(meta(page, "continue"));
	json_decref(page);
	/* all pages */
	TU_KUBE_CHECK(ds_kube_list(k, &r, ns, &lo, &list, &pages, &ke), ke);
	assert_int_equal(pages, 4);
	assert_int_equal(json_array_size(json_object_get(list, "items")), 7);
	assert_null(meta(list, "continue"));
	assert_non_null(meta(list, "resourceVersion"));
	for (size_t i = 0; i < 7; i++) {
		int n = -1;
		sscanf(meta(json_array_get(json_object_get(list, "items"), i), "name"), "cm-%d",
		       &n);
		assert_true(n >= 0 && n < 7);
		assert_false(seen[n]);
		seen[n] = true;
	}
	json_decref(list);
	/* a field selector */
	lo = (struct ds_kube_list_opts){NULL, "metadata.name=cm-3", NULL, NULL, 0};
	TU_KUBE_CHECK(ds_kube_list(k, &r, ns, &lo, &list, &pages, &ke), ke);
	assert_int_equal(json_array_size(json_object_get(list, "items")), 1);
	json_decref(list);
	tu_kube_drop_namespace(k, ns);
	ds_kube_free(k);
}

/* ---- watch ------------------------------------------------------------------------------- */

struct watch_log {
	pthread_mutex_t mu;
	char events[64][96]; /* "ADDED w1 data=..." */
	int n;
	int syncs;
	bool done;
	atomic_bool stop;
	ds_kube *k;
	const struct ds_kube_resource *r;
	const char *ns;
	const char *rv;
	unsigned reconnects, relists;
	char synced[512]; /* names in the last SYNC list, space-separated */
	int rc;
	ds_kube_error ke;
};

static int on_event(void *user, enum ds_kube_event_type type, json_t *obj)
{
	static const char *const names[] = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "SYNC"};
	struct watch_log *w = user;
	const char *v = json_string_value(json_object_get(json_object_get(obj, "data"), "v"));

	pthread_mutex_lock(&w->mu);
	if (type == DS_KUBE_SYNC) {
		json_t *item;
		size_t i;
		w->syncs++;
		w->synced[0] = '\0';
		json_array_foreach (json_object_get(obj, "items"), i, item) {
			size_t l = strlen(w->synced);
			snprintf(w->synced + l, sizeof(w->synced) - l, "%s ", meta(item, "name"));
		}
	} else if (type != DS_KUBE_BOOKMARK && w->n < 64) {
		snprintf(w->events[w->n++], sizeof(w->events[0]), "%s %s %s", names[type],
			 meta(obj, "name"), v ? v : "-");
		if (type == DS_KUBE_DELETED && strcmp(meta(obj, "name"), "w") == 0)
			w->done = true;
	}
	pthread_mutex_unlock(&w->mu);
	return 0;
}

static void *watch_thread(void *arg)
{
	struct watch_log *w = arg;
	struct ds_kube_watch_opts o = {0};

	o.timeout_seconds = 1; /* the server ends each stream after a second */
	o.bookmarks = true;
	o.stop = &w->stop;
	o.resource_version = w->rv;
	o.reconnects = &w->reconnects;
	o.relists = &w->relists;
	w->rc = ds_kube_watch(w->k, w->r, w->ns, &o, on_event, w, &w->ke);
	return NULL;
}

static bool wait_done(struct watch_log *w, double secs)
{
	long long end = ds_clock_mono_ms() + (long long)(secs * 1000);
	bool done;

	for (;;) {
		pthread_mutex_lock(&w->mu);
		done = w->done;
		pthread_mutex_unlock(&w->mu);
		if (done || ds_clock_mono_ms() > end)
			return done;
		tu_msleep(50);
	}
}

/* Start watching r in ns (from rv when not NULL) in a thread of its own. */
static pthread_t watch_start(struct watch_log *w, ds_kube *k, const struct ds_kube_resource *r,
			     const char *ns, const char *rv)
{
	pthread_t th;

	w->k = k;
	w->r = r;
	w->ns = ns;
	w->rv = rv;
	if (pthread_create(&th, NULL, watch_thread, w) != 0)
		fail_msg("cannot start the watch thread");
	return th;
}

/* Wait for the DELETED of "w", stop the watch; it must have ended cleanly. */
static void watch_finish(struct watch_log *w, pthread_t th)
{
	assert_true(wait_done(w, 20));
	atomic_store(&w->stop, true);
	pthread_join(th, NULL);
	assert_int_equal(w->rc, 0);
}

static void test_itest_kube_client__watch_add_modify_delete_across_stream_ends(void **state)
{
	ds_kube *k = tu_kube_connect(tu_env("DS_KUBECONFIG_V1"));
	char *ns = tu_kube_new_namespace(k, "itest-watch", NULL);
	struct ds_kube_resource r = tu_kube_resource(k, "v1", "ConfigMap");
	struct watch_log *w = calloc(1, sizeof(*w));
	json_t *cm, *patch;
	ds_kube_error ke;
	pthread_t th;

	(void)state;
	pthread_mutex_init(&w->mu, NULL);
	th = watch_start(w, k, &r, ns, NULL);
	tu_msleep(500);
	cm = tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: w}\ndata: {v: one}\n");
	TU_KUBE_CHECK(ds_kube_create(k, &r, ns, cm, NULL, &ke), ke);
	tu_msleep(1600); /* the stream the ADDED came on has ended by now */
	patch = tu_kube_doc("data: {v: two}\n");
	TU_KUBE_CHECK(ds_kube_merge_patch(k, &r, ns, "w", patch, NULL, NULL, &ke), ke);
	tu_msleep(1600);
	TU_KUBE_CHECK(ds_kube_delete(k, &r, ns, "w", NULL, &ke), ke);
	watch_finish(w, th);
	/* the namespace's kube-root-ca.crt may come and go; keep ours */
	{
		char got[3][96];
		int n = 0;
		for (int i = 0; i < w->n; i++)
			if (strstr(w->events[i], " w ") && n < 3)
				snprintf(got[n++], sizeof(got[0]), "%s", w->events[i]);
		assert_int_equal(n, 3);
		assert_string_equal(got[0], "ADDED w one");
		assert_string_equal(got[1], "MODIFIED w two");
		assert_string_equal(got[2], "DELETED w two");
	}
	assert_int_equal(w->syncs, 1);
	assert_true(w->reconnects >= 2);
	json_decref(cm);
	json_decref(patch);
	pthread_mutex_destroy(&w->mu);
	free(w);
	tu_kube_drop_namespace(k, ns);
	ds_kube_free(k);
}

static void test_itest_kube_client__watch_resumes_from_a_resource_version(void **state)
{
	ds_kube *k = tu_kube_connect(tu_env("DS_KUBECONFIG_V1"));
	char *ns = tu_kube_new_namespace(k, "itest-resume", NULL);
	struct ds_kube_resource r = tu_kube_resource(k, "v1", "ConfigMap");
	struct ds_kube_list_opts lo = {0};
	struct watch_log *w = calloc(1, sizeof(*w));
	json_t *cm, *list = NULL;
	ds_kube_error ke;
	pthread_t th;
	char rv[64];

	(void)state;
	pthread_mutex_init(&w->mu, NULL);
	cm = tu_kube_doc(
	    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: before}\ndata: {v: b}\n");
	TU_KUBE_CHECK(ds_kube_create(k, &r, ns, cm, NULL, &ke), ke);
	json_decref(cm);
	TU_KUBE_CHECK(ds_kube_list(k, &r, ns, &lo, &list, NULL, &ke), ke);
	snprintf(rv, sizeof(rv), "%s", meta(list, "resourceVersion"));
	json_decref(list);
	/* written before the watch starts, after the resourceVersion: must be seen */
	cm = tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: w}\ndata: {v: x}\n");
	TU_KUBE_CHECK(ds_kube_create(k, &r, ns, cm, NULL, &ke), ke);
	th = watch_start(w, k, &r, ns, rv);
	tu_msleep(300);
	TU_KUBE_CHECK(ds_kube_delete(k, &r, ns, "w", NULL, &ke), ke);
	watch_finish(w, th);
	assert_int_equal(w->syncs, 0); /* resumed: no list */
	assert_int_equal(w->relists, 0);
	for (int i = 0; i < w->n; i++)
		assert_null(strstr(w->events[i], " before "));
	{
		int n = 0;
		for (int i = 0; i < w->n; i++)
			if (strstr(w->events[i], " w "))
				n++;
		assert_int_equal(n, 2);
	}
	json_decref(cm);
	pthread_mutex_destroy(&w->mu);
	free(w);
	tu_kube_drop_namespace(k, ns);
	ds_kube_free(k);
}

/* The real server's answer to a watch from a resourceVersion etcd has
 * compacted away (an ERROR event, 410 Expired): the watch lists again (SYNC
 * with what exists now), then goes on from the list's resourceVersion.
 * PodTemplates have no watch cache on the test clusters, so etcd answers. */
#define EXPIRING_TEMPLATE                                                                          \
	"apiVersion: v1\nkind: PodTemplate\nmetadata: {name: %s}\n"                                \
	"template: {spec: {containers: [{name: c, image: x}]}}\n"

static void test_itest_kube_client__watch_from_a_compacted_resource_version_relists(void **state)
{
	const char *kubeconfig = tu_env("DS_KUBECONFIG_V1");
	ds_kube *k = tu_kube_connect(tu_env("DS_KUBECONFIG_V1"));
	char *ns = tu_kube_new_namespace(k, "itest-expired", NULL);
	struct ds_kube_resource r = tu_kube_resource(k, "v1", "PodTemplate");
	struct ds_kube_list_opts lo = {0};
	struct watch_log *w = calloc(1, sizeof(*w));
	char rv[64];
	json_t *obj, *list = NULL;
	ds_kube_error ke;
	pthread_t th;

	(void)state;
	pthread_mutex_init(&w->mu, NULL);
	obj = tu_kube_doc(EXPIRING_TEMPLATE, "old");
	TU_KUBE_CHECK(ds_kube_create(k, &r, ns, obj, NULL, &ke), ke);
	json_decref(obj);
	TU_KUBE_CHECK(ds_kube_list(k, &r, ns, &lo, &list, NULL, &ke), ke);
	snprintf(rv, sizeof(rv), "%s", meta(list, "resourceVersion"));
	json_decref(list);
	/* After rv: a watch from rv needs mid's revision. etcd keeps the
	 * revision it compacts to, so one more write puts mid's before it. */
	obj = tu_kube_doc(EXPIRING_TEMPLATE, "mid");
	TU_KUBE_CHECK(ds_kube_create(k, &r, ns, obj, NULL, &ke), ke);
	json_decref(obj);
	obj = tu_kube_doc(EXPIRING_TEMPLATE, "late");
	TU_KUBE_CHECK(ds_kube_create(k, &r, ns, obj, NULL, &ke), ke);
	json_decref(obj);

	tu_kube_compact(kubeconfig);

	th = watch_start(w, k, &r, ns, rv);
	tu_msleep(500);
	obj = tu_kube_doc(EXPIRING_TEMPLATE, "w");
	TU_KUBE_CHECK(ds_kube_create(k, &r, ns, obj, NULL, &ke), ke);
	json_decref(obj);
	TU_KUBE_CHECK(ds_kube_delete(k, &r, ns, "w", NULL, &ke), ke);
	watch_finish(w, th);
	assert_int_equal(w->relists, 1);
	assert_int_equal(w->syncs, 1);
	/* what the expired stretch held arrives in the list, not as events */
	assert_non_null(strstr(w->synced, "old "));
	assert_non_null(strstr(w->synced, "mid "));
	assert_non_null(strstr(w->synced, "late "));
	{
		int n = 0;
		for (int i = 0; i < w->n; i++) {
			assert_null(strstr(w->events[i], " mid "));
			if (strstr(w->events[i], " w "))
				n++;
		}
		assert_int_equal(n, 2); /* ADDED and DELETED */
	}
	pthread_mutex_destroy(&w->mu);
	free(w);
	tu_kube_drop_namespace(k, ns);
	ds_kube_free(k);
}

/* ---- writes -------------------------------------------------------------------------------- */

static void test_itest_kube_client__server_side_apply_twice_is_a_no_op(void **state)
{
	ds_kube *k = tu_kube_connect(tu_env("DS_KUBECONFIG_V1"));
	char *ns = tu_kube_new_namespace(k, "itest-ssa", NULL);
	struct ds_kube_resource r = tu_kube_resource(k, "v1", "ConfigMap");
	json_t *cm, *a = NULL, *b = NULL, *other, *c = NULL;
	ds_kube_error ke;

	(void)state;
	cm = tu_kube_doc(
	    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: applied, labels: {x: z}}\n"
	    "data: {k: v}\n");
	TU_KUBE_CHECK(ds_kube_apply(k, &r, ns, cm, "drasync", false, NULL, &a, &ke), ke);
	TU_KUBE_CHECK(ds_kube_apply(k, &r, ns, cm, "drasync", false, NULL, &b, &ke), ke);
	assert_string_equal(meta(a, "resourceVersion"), meta(b, "resourceVersion"));
	{
		json_t *mf = json_object_get(json_object_get(b, "metadata"), "managedFields"), *e;
		size_t i;
		bool ours = false;

		json_array_foreach (mf, i, e) {
			const char *m = json_string_value(json_object_get(e, "manager"));
			const char *op = json_string_value(json_object_get(e, "operation"));
			if (m && op && strcmp(m, "drasync") == 0 && strcmp(op, "Apply") == 0)
				ours = true;
		}
		assert_true(ours);
	}
	/* another manager wanting the same field: 409 Conflict unless forced */
	other = tu_kube_doc(
	    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: applied}\ndata: {k: w}\n");
	assert_int_equal(ds_kube_apply(k, &r, ns, other, "someone-else", false, NULL, NULL, &ke),
			 -ESTALE);
	assert_int_equal(ke.code, 409);
	assert_string_equal(ke.reason, "Conflict");
	assert_non_null(strstr(ke.message, "drasync"));
	TU_KUBE_CHECK(ds_kube_apply(k, &r, ns, other, "someone-else", true, NULL, &c, &ke), ke);
	assert_string_equal(json_string_value(json_object_get(json_object_get(c, "data"), "k")),
			    "w");
	json_decref(cm);
	json_decref(other);
	json_decref(a);
	json_decref(b);
	json_decref(c);
	tu_kube_drop_namespace(k, ns);
	ds_kube_free(k);
}

static void test_itest_kube_client__stale_update_is_a_409(void **state)
{
	ds_kube *k = tu_kube_connect(tu_env("DS_KUBECONFIG_V1"));
	char *ns = tu_kube_new_namespace(k, "itest-stale", NULL);
	struct ds_kube_resource r = tu_kube_resource(k, "v1", "ConfigMap");
	json_t *cm, *v1 = NULL, *v2 = NULL;
	ds_kube_error ke;

	(void)state;
	cm = tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {n: '1'}\n");
	TU_KUBE_CHECK(ds_kube_create(k, &r, ns, cm, &v1, &ke), ke);
	json_object_set_new(json_object_get(v1, "data"), "n", json_string("2"));
	TU_KUBE_CHECK(ds_kube_update(k, &r, ns, v1, NULL, &v2, &ke), ke);
	/* v1 still carries the old resourceVersion */
	json_object_set_new(json_object_get(v1, "data"), "n", json_string("3"));
	assert_int_equal(ds_kube_update(k, &r, ns, v1, NULL, NULL, &ke), -ESTALE);
	assert_int_equal(ke.code, 409);
	assert_string_equal(ke.reason, "Conflict");
	assert_non_null(strstr(ke.message, "the object has been modified"));
	assert_string_equal(ke.details_name, "c");
	assert_string_equal(ke.details_kind, "configmaps");
	json_decref(cm);
	json_decref(v1);
	json_decref(v2);
	tu_kube_drop_namespace(k, ns);
	ds_kube_free(k);
}

static void test_itest_kube_client__delete_preconditions_and_propagation(void **state)
{
	ds_kube *k = tu_kube_connect(tu_env("DS_KUBECONFIG_V1"));
	char *ns = tu_kube_new_namespace(k, "itest-del", NULL);
	struct ds_kube_resource r = tu_kube_resource(k, "v1", "ConfigMap");
	struct ds_kube_resource dr = tu_kube_resource(k, "apps/v1", "Deployment");
	struct ds_kube_delete_opts wrong = {NULL, "00000000-0000-0000-0000-000000000000", NULL, -1};
	struct ds_kube_delete_opts fg = {"Foreground", NULL, NULL, -1};
	struct ds_kube_delete_opts right = {NULL, NULL, NULL, -1};
	json_t *cm, *made = NULL, *dep, *got = NULL, *fin, *child;
	ds_kube_error ke;
	bool foreground = false;

	(void)state;
	cm = tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n");
	TU_KUBE_CHECK(ds_kube_create(k, &r, ns, cm, &made, &ke), ke);
	assert_int_equal(ds_kube_delete(k, &r, ns, "c", &wrong, &ke), -ESTALE);
	assert_int_equal(ke.code, 409);
	if (!strstr(ke.message, "recondition"))
		fail_msg("message: %s", ke.message);
	right.uid = meta(made, "uid");
	right.resource_version = meta(made, "resourceVersion");
	TU_KUBE_CHECK(ds_kube_delete(k, &r, ns, "c", &right, &ke), ke);
	assert_int_equal(ds_kube_delete(k, &r, ns, "c", NULL, &ke), -ENOENT);
	assert_string_equal(ke.reason, "NotFound");

	/* Foreground: the owner stays, with the foregroundDeletion finalizer, while a
	 * dependent that blocks owner deletion exists (this one cannot go: it has a
	 * finalizer); once the dependent is gone the garbage collector removes it */
	dep = tu_kube_doc("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n"
			  "spec:\n  replicas: 0\n  selector: {matchLabels: {a: b}}\n"
			  "  template:\n    metadata: {labels: {a: b}}\n    spec:\n%s",
			  POD_SPEC);
	TU_KUBE_CHECK(ds_kube_create(k, &dr, ns, dep, &got, &ke), ke);
	child = tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: child\n"
			    "  finalizers: [drasync.io/hold]\n  ownerReferences:\n"
			    "  - {apiVersion: apps/v1, kind: Deployment, name: d, uid: '%s', "
			    "blockOwnerDeletion: true}\n",
			    meta(got, "uid"));
	json_decref(got);
	got = NULL;
	TU_KUBE_CHECK(ds_kube_create(k, &r, ns, child, NULL, &ke), ke);
	TU_KUBE_CHECK(ds_kube_delete(k, &dr, ns, "d", &fg, &ke), ke);
	tu_msleep(300);
	TU_KUBE_CHECK(ds_kube_get(k, &dr, ns, "d", NULL, &got, &ke), ke);
	assert_non_null(meta(got, "deletionTimestamp"));
	fin = json_object_get(json_object_get(got, "metadata"), "finalizers");
	for (size_t i = 0; i < json_array_size(fin); i++)
		if (strcmp(json_string_value(json_array_get(fin, i)), "foregroundDeletion") == 0)
			foreground = true;
	assert_true(foreground);
	/* release the dependent: the owner goes */
	{
		json_t *p = tu_kube_doc("metadata: {finalizers: null}\n");
		int rc = 0;
		TU_KUBE_CHECK(ds_kube_merge_patch(k, &r, ns, "child", p, NULL, NULL, &ke), ke);
		json_decref(p);
		for (int i = 0; i < 100; i++) {
			json_t *g = NULL;
			rc = ds_kube_get(k, &dr, ns, "d", NULL, &g, &ke);
			json_decref(g);
			if (rc == -ENOENT)
				break;
			tu_msleep(100);
		}
		assert_int_equal(rc, -ENOENT);
	}
	json_decref(child);
	json_decref(cm);
	json_decref(made);
	json_decref(dep);
	json_decref(got);
	tu_kube_drop_namespace(k, ns);
	ds_kube_free(k);
}

static void test_itest_kube_client__status_subresource(void **state)
{
	ds_kube *k = tu_kube_connect(tu_env("DS_KUBECONFIG_V1"));
	char *ns = tu_kube_new_namespace(k, "itest-status", NULL);
	struct ds_kube_resource r = tu_kube_resource(k, "v1", "Service");
	json_t *svc, *main_patch, *st_patch, *got = NULL, *ing;
	ds_kube_error ke;

	(void)state;
	svc = tu_kube_doc("apiVersion: v1\nkind: Service\nmetadata: {name: lb}\n"
			  "spec: {type: LoadBalancer, selector: {a: b}, ports: [{port: 80}]}\n");
	TU_KUBE_CHECK(ds_kube_create(k, &r, ns, svc, NULL, &ke), ke);
	/* status written through the main resource is ignored ... */
	main_patch = tu_kube_doc("status: {loadBalancer: {ingress: [{ip: 192.0.2.7}]}}\n");
	TU_KUBE_CHECK(ds_kube_merge_patch(k, &r, ns, "lb", main_patch, NULL, &got, &ke), ke);
	assert_null(json_object_get(json_object_get(json_object_get(got, "status"), "loadBalancer"),
				    "ingress"));
	json_decref(got);
	/* ... and taken through /status */
	TU_KUBE_CHECK(ds_kube_merge_patch(k, &r, ns, "lb", main_patch, "status", NULL, &ke), ke);
	TU_KUBE_CHECK(ds_kube_get(k, &r, ns, "lb", "status", &got, &ke), ke);
	ing = json_object_get(json_object_get(json_object_get(got, "status"), "loadBalancer"),
			      "ingress");
	assert_string_equal(json_string_value(json_object_get(json_array_get(ing, 0), "ip")),
			    "192.0.2.7");
	json_decref(got);
	/* server-side apply of status */
	st_patch = tu_kube_doc("apiVersion: v1\nkind: Service\nmetadata: {name: lb}\n"
			       "status: {loadBalancer: {ingress: [{ip: 192.0.2.8}]}}\n");
	TU_KUBE_CHECK(ds_kube_apply(k, &r, ns, st_patch, "drasync", true, "status", &got, &ke), ke);
	ing = json_object_get(json_object_get(json_object_get(got, "status"), "loadBalancer"),
			      "ingress");
	assert_string_equal(json_string_value(json_object_get(json_array_get(ing, 0), "ip")),
			    "192.0.2.8");
	json_decref(got);
	json_decref(svc);
	json_decref(main_patch);
	json_decref(st_patch);
	tu_kube_drop_namespace(k, ns);
	ds_kube_free(k);
}

static void test_itest_kube_client__batch_creates_concurrently(void **state)
{
	ds_kube *k = tu_kube_connect(tu_env("DS_KUBECONFIG_V1"));
	char *ns = tu_kube_new_namespace(k, "itest-batch", NULL);
	struct ds_kube_resource r = tu_kube_resource(k, "v1", "ConfigMap");
	struct ds_kube_op ops[41];
	json_t *objs[41], *list = NULL;
	struct ds_kube_list_opts lo = {"batch=yes", NULL, NULL, NULL, 0};
	ds_kube_error ke;

	(void)state;
	memset(ops, 0, sizeof(ops));
	for (int i = 0; i < 41; i++) {
		objs[i] =
		    tu_kube_doc("apiVersion: v1\nkind: ConfigMap\n"
				"metadata: {name: b-%d, labels: {batch: 'yes'}}\ndata: {i: '%d'}\n",
				i == 40 ? 0 : i, i);
		ops[i] = (struct ds_kube_op){.kind = i < 20 ? DS_KUBE_OP_CREATE : DS_KUBE_OP_APPLY,
					     .res = &r,
					     .ns = ns,
					     .obj = objs[i]};
	}
	/* b-0 twice: one create must fail with AlreadyExists, the rest go through */
	ops[40].kind = DS_KUBE_OP_CREATE;
	assert_int_equal(ds_kube_batch(k, ops, 41, "drasync", true), 1);
	{
		int already = 0;
		for (int i = 0; i < 41; i++) {
			if (ops[i].rc == -EEXIST) {
				already++;
				assert_string_equal(ops[i].error.reason, "AlreadyExists");
			} else {
				TU_KUBE_CHECK(ops[i].rc, ops[i].error);
				assert_non_null(meta(ops[i].result, "uid"));
			}
			json_decref(ops[i].result);
			json_decref(objs[i]);
		}
		assert_int_equal(already, 1);
	}
	/* HTTP/2, offered by the API server over TLS: all of it multiplexed on the
	 * connections opened for discovery and the namespace (at most a couple) */
	{
		struct ds_kube_transport_stats st;
		ds_kube_transport_stats(ds_kube_get_transport(k), &st);
		assert_true(st.http2 >= 43);
		assert_int_equal(st.http2, st.requests);
		if (st.connections > 3)
			fail_msg("%lu connections for %lu requests", st.connections, st.requests);
	}
	TU_KUBE_CHECK(ds_kube_list(k, &r, ns, &lo, &list, NULL, &ke), ke);
	assert_int_equal(json_array_size(json_object_get(list, "items")), 40);
	json_decref(list);
	tu_kube_drop_namespace(k, ns);
	ds_kube_free(k);
}

/* ---- connections (issue 23: the importer's memory) ------------------------------ */

struct own_calls {
	ds_kube_transport *t;
	const char *path;
	int failed;
};

static void *own_calls_thread(void *arg)
{
	struct own_calls *c = arg;

	for (int i = 0; i < 25; i++) {
		struct ds_kube_request req = {.method = "GET", .path = c->path};
		struct ds_kube_response resp = {0};

		if (ds_kube_transport_request(c->t, &req, &resp, NULL) != 0 || resp.code != 200)
			c->failed++;
		ds_kube_response_dispose(&resp);
	}
	return NULL;
}

/*
 * Each connection is a TLS and an HTTP/2 session (about 100 KB): 600 calls
 * at 256 in flight go on a few connections (100 streams each), and calls of
 * the threads' own (4 threads, 25 each, then 4 more rounds) reuse the
 * connections their handles kept, instead of opening one per handle as
 * before (157 connections in a 10,000-object sync, 180 left open).
 */
static void test_itest_kube_client__a_few_connections_for_many_calls(void **state)
{
	struct ds_kube_transport_opts o;
	ds_kubeconfig *kc = NULL;
	ds_kube *k = NULL;
	ds_err err = {0};
	struct ds_kube_call *calls = calloc(600, sizeof(*calls));
	struct ds_kube_transport_stats st;
	ds_kube_transport *t;
	const char *path = "/api/v1/namespaces/default";

	(void)state;
	assert_non_null(calls);
	ds_kube_transport_opts_init(&o);
	o.qps = 0;
	o.max_parallel = 256;
	if (ds_kubeconfig_load(&kc, tu_env("DS_KUBECONFIG_V1"), NULL, &err) < 0 ||
	    ds_kube_new(&k, &kc, &o, &err) < 0)
		fail_msg("client: %s", err.msg);
	t = ds_kube_get_transport(k);
	/* one call first: the server is known to speak HTTP/2 */
	for (int round = 0; round < 2; round++) {
		size_t n = round == 0 ? 1 : 600;
		for (size_t i = 0; i < n; i++)
			calls[i].req = (struct ds_kube_request){"GET", path, NULL, NULL, 0};
		assert_int_equal(ds_kube_transport_request_many(t, calls, n), 0);
		for (size_t i = 0; i < n; i++) {
			assert_int_equal(calls[i].rc, 0);
			ds_kube_response_dispose(&calls[i].resp);
		}
	}
	ds_kube_transport_stats(t, &st);
	assert_int_equal(st.http2, st.requests);
	if (st.connections > 4)
		fail_msg("%lu connections for %lu calls at 256 in flight", st.connections,
			 st.requests);
	for (int round = 0; round < 5; round++) {
		struct own_calls c[4];
		pthread_t th[4];

		for (int i = 0; i < 4; i++) {
			c[i] = (struct own_calls){t, path, 0};
			assert_int_equal(pthread_create(&th[i], NULL, own_calls_thread, &c[i]), 0);
		}
		for (int i = 0; i < 4; i++) {
			pthread_join(th[i], NULL);
			assert_int_equal(c[i].failed, 0);
		}
	}
	ds_kube_transport_stats(t, &st);
	/* the 500 own calls: at most one connection per thread, kept across rounds */
	if (st.connections > 4 + 4)
		fail_msg("%lu connections after 500 calls of 4 threads' own", st.connections);
	free(calls);
	ds_kube_free(k);
}

/* ---- dot segments (issue 22) ------------------------------------------------------ */

/* The server's answer to method on path: its HTTP code (the request must fail). */
static int raw_code(ds_kube *k, const char *method, const char *path, ds_kube_error *ke)
{
	struct ds_kube_request req = {.method = method, .path = path};
	struct ds_kube_response resp = {0};
	int rc = ds_kube_transport_request(ds_kube_get_transport(k), &req, &resp, ke);

	if (rc == 0)
		fail_msg("%s %s answered %d: %.300s", method, path, resp.code, resp.body);
	ds_kube_response_dispose(&resp);
	return ke->code;
}

/*
 * A name ".." is a name, never the collection or the namespace above it:
 * libcurl folded "/api/v1/namespaces/NS/configmaps/.." into
 * "/api/v1/namespaces/NS/", so a tombstone for a ConfigMap ".." was a DELETE
 * of the namespace. The client refuses such a name before any request, and a
 * path that holds one anyway reaches the server as it was built.
 */
static void test_itest_kube_client__dot_segments_stay_names(void **state)
{
	ds_kube *k = tu_kube_connect(tu_env("DS_KUBECONFIG_V1"));
	char *ns = tu_kube_new_namespace(k, "itest-dots", NULL);
	struct ds_kube_resource r = tu_kube_resource(k, "v1", "ConfigMap");
	struct ds_kube_resource nr = tu_kube_resource(k, "v1", "Namespace");
	struct ds_kube_list_opts lo = {0};
	json_t *cm, *out = NULL;
	ds_kube_error ke;
	char *path = NULL, raw[256];
	int code;

	(void)state;
	cm = tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n");
	TU_KUBE_CHECK(ds_kube_create(k, &r, ns, cm, NULL, &ke), ke);

	/* the client's own calls refuse the name */
	assert_int_equal(ds_kube_get(k, &r, ns, "..", NULL, &out, &ke), -EINVAL);
	assert_int_equal(ds_kube_delete(k, &r, ns, "..", NULL, &ke), -EINVAL);

	/* the escaped path and the literal one: the server answers for a ConfigMap ".." */
	assert_int_equal(ds_kube_path(&r, ns, "..", NULL, &path), 0);
	code = raw_code(k, "GET", path, &ke);
	assert_true(code == 400 || code == 404);
	assert_null(strstr(ke.message, "namespaces \""));
	snprintf(raw, sizeof(raw), "/api/v1/namespaces/%s/configmaps/..", ns);
	code = raw_code(k, "GET", raw, &ke);
	assert_true(code == 400 || code == 404);
	code = raw_code(k, "DELETE", raw, &ke);
	assert_true(code == 400 || code == 404);
	code = raw_code(k, "DELETE", path, &ke);
	assert_true(code == 400 || code == 404);
	free(path);

	/* the namespace is untouched: no DELETE reached /api/v1/namespaces/NS/ */
	TU_KUBE_CHECK(ds_kube_get(k, &nr, NULL, ns, NULL, &out, &ke), ke);
	assert_null(json_object_get(json_object_get(out, "metadata"), "deletionTimestamp"));
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(out, "status"), "phase")), "Active");
	json_decref(out);
	out = NULL;

	/*
	 * A list in namespace ".." is not a list across every namespace (folded,
	 * it was GET /api/v1/configmaps): the client refuses it, and the path sent
	 * anyway is refused by the server (500 "invalid key" in 1.35).
	 */
	assert_int_equal(ds_kube_list_page(k, &r, "..", &lo, &out, &ke), -EINVAL);
	code = raw_code(k, "GET", "/api/v1/namespaces/../configmaps", &ke);
	assert_true(code >= 400);
	assert_non_null(strstr(ke.message, ".."));
	json_decref(out);
	json_decref(cm);
	tu_kube_drop_namespace(k, ns);
	ds_kube_free(k);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_itest_kube_client__discovery),
	    cmocka_unit_test(test_itest_kube_client__crud_every_kind_v1),
	    cmocka_unit_test(test_itest_kube_client__crud_dra_kinds_v1beta1),
	    cmocka_unit_test(test_itest_kube_client__pagination_limit_2_over_7),
	    cmocka_unit_test(test_itest_kube_client__watch_add_modify_delete_across_stream_ends),
	    cmocka_unit_test(test_itest_kube_client__watch_resumes_from_a_resource_version),
	    cmocka_unit_test(
		test_itest_kube_client__watch_from_a_compacted_resource_version_relists),
	    cmocka_unit_test(test_itest_kube_client__server_side_apply_twice_is_a_no_op),
	    cmocka_unit_test(test_itest_kube_client__stale_update_is_a_409),
	    cmocka_unit_test(test_itest_kube_client__delete_preconditions_and_propagation),
	    cmocka_unit_test(test_itest_kube_client__status_subresource),
	    cmocka_unit_test(test_itest_kube_client__batch_creates_concurrently),
	    cmocka_unit_test(test_itest_kube_client__a_few_connections_for_many_calls),
	    cmocka_unit_test(test_itest_kube_client__dot_segments_stay_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
