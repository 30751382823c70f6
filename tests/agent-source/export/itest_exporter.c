/*
 * The exporter against the real source clusters (tests/kube fixtures), feeding
 * a real in-process target over CURVE on loopback (tu_target: a receiver that
 * records what arrives). Each test selects its own namespaces by a label unique to the run,
 * so the rest of the cluster is listed and filtered out, as in production.
 *
 * The same executable is the child process of the crash test:
 *   itest_exporter --pass STATE_DIR LABEL_VALUE   (one pass, then exit 0)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/buf.h"
#include "drasync/clock.h"
#include "drasync/export_log.h"
#include "drasync/exporter.h"
#include "drasync/export_status.h"
#include "drasync/k8s_object.h"
#include "drasync/keys.h"
#include "drasync/kube_client.h"
#include "drasync/log.h"
#include "drasync/sender.h"
#include "testutil.h"
#include "tu_export.h"
#include "tu_kube.h"
#include "tu_target.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Wait until a pod controlled by `owner` exists in ns. */
static void wait_owned_pod(ds_kube *k, const char *ns, const char *owner)
{
	struct ds_kube_resource r = tu_kube_resource(k, "v1", "Pod");
	struct ds_kube_list_opts lo = {0};
	long long end = ds_clock_mono_ms() + 60000;

	for (;;) {
		json_t *list = NULL, *item;
		ds_kube_error ke;
		size_t i;
		bool found = false;

		TU_KUBE_CHECK(ds_kube_list(k, &r, ns, &lo, &list, NULL, &ke), ke);
		json_array_foreach (json_object_get(list, "items"), i, item) {
			json_t *refs = ds_json_path(item, "metadata.ownerReferences");
			if (json_array_size(refs) &&
			    strcmp(ds_json_str(json_array_get(refs, 0), "name"), owner) == 0)
				found = true;
		}
		json_decref(list);
		if (found)
			return;
		if (ds_clock_mono_ms() > end)
			fail_msg("no pod of %s appeared", owner);
		tu_msleep(200);
	}
}

/* Wait until the ConfigMap kube-root-ca.crt exists in ns (the controller publishes it). */
static void wait_object(ds_kube *k, const char *api, const char *kind, const char *ns,
			const char *name)
{
	struct ds_kube_resource r = tu_kube_resource(k, api, kind);
	long long end = ds_clock_mono_ms() + 60000;

	for (;;) {
		json_t *obj = NULL;
		ds_kube_error ke;

		if (ds_kube_get(k, &r, ns, name, NULL, &obj, &ke) == 0) {
			json_decref(obj);
			return;
		}
		if (ds_clock_mono_ms() > end)
			fail_msg("%s %s/%s did not appear", kind, ns, name);
		tu_msleep(200);
	}
}

static const char POD_SPEC[] = "      containers: [{name: c, image: registry.k8s.io/pause:3.10}]\n";

/* ---- tests ------------------------------------------------------------------- */

/* The first pass (a snapshot) ships exactly the selected objects of every
 * kind, once each, and says why it skips the others. */
static void
test_itest_exporter__first_pass_ships_the_selected_objects_and_reports_skips(void **state)
{
	struct tu_export_site s;
	char *ns, *other, *log, key[700];
	ds_export_counts c;
	static const char *const shipped[][3] = {
	    {"", "ServiceAccount", "sa"},
	    {"", "ConfigMap", "cm"},
	    {"", "Secret", "s"},
	    {"", "Service", "svc"},
	    {"", "PersistentVolumeClaim", "pvc"},
	    {"", "Pod", "pod"},
	    {"apps", "Deployment", "dep"},
	    {"apps", "ReplicaSet", "rs"},
	    {"apps", "StatefulSet", "sts"},
	    {"apps", "DaemonSet", "ds"},
	    {"batch", "Job", "job"},
	    {"batch", "CronJob", "cron"},
	    {"resource.k8s.io", "ResourceClaimTemplate", "rct"},
	    {"resource.k8s.io", "ResourceClaim", "rc"},
	};

	(void)state;
	tu_export_site_start(&s, tu_env("DS_KUBECONFIG_V1"));
	ns = tu_export_new_ns(s.k, "first", s.label, true);
	other = tu_export_new_ns(s.k, "other", s.label, false);
	tu_kube_create(
	    s.k,
	    tu_kube_doc("apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: sa, namespace: "
			"%s}\n",
			ns));
	tu_kube_create(
	    s.k,
	    tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: %s}\n"
			"data: {a: '1'}\n",
			ns));
	tu_kube_create(
	    s.k,
	    tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: %s}\n"
			"data: {a: 'not selected'}\n",
			other));
	tu_kube_create(
	    s.k, tu_kube_doc("apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: %s}\n"
			     "type: Opaque\nstringData: {password: hunter2}\n",
			     ns));
	tu_kube_create(
	    s.k, tu_kube_doc("apiVersion: v1\nkind: Secret\nmetadata: {name: tok, namespace: %s, "
			     "annotations: {kubernetes.io/service-account.name: sa}}\n"
			     "type: kubernetes.io/service-account-token\n",
			     ns));
	tu_kube_create(
	    s.k, tu_kube_doc("apiVersion: v1\nkind: Service\nmetadata: {name: svc, namespace: %s}\n"
			     "spec: {selector: {app: x}, ports: [{port: 80, targetPort: 8080}]}\n",
			     ns));
	tu_kube_create(
	    s.k, tu_kube_doc("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: pvc, "
			     "namespace: %s}\nspec: {accessModes: [ReadWriteOnce], resources: "
			     "{requests: {storage: 1Gi}}}\n",
			     ns));
	tu_kube_create(
	    s.k, tu_kube_doc("apiVersion: v1\nkind: Pod\nmetadata: {name: pod, namespace: %s}\n"
			     "spec:\n%s",
			     ns, POD_SPEC + 4));
	tu_kube_create(
	    s.k,
	    tu_kube_doc("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: dep, namespace: "
			"%s}\nspec:\n  replicas: 0\n  selector: {matchLabels: {app: dep}}\n"
			"  template:\n    metadata: {labels: {app: dep}}\n    spec:\n%s",
			ns, POD_SPEC));
	tu_kube_create(
	    s.k,
	    tu_kube_doc("apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: rs, namespace: "
			"%s}\nspec:\n  replicas: 1\n  selector: {matchLabels: {app: rs}}\n"
			"  template:\n    metadata: {labels: {app: rs}}\n    spec:\n%s",
			ns, POD_SPEC));
	tu_kube_create(
	    s.k,
	    tu_kube_doc("apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: sts, "
			"namespace: %s}\nspec:\n  replicas: 0\n  serviceName: svc\n  selector: "
			"{matchLabels: {app: sts}}\n  template:\n    metadata: {labels: {app: "
			"sts}}\n    spec:\n%s",
			ns, POD_SPEC));
	tu_kube_create(
	    s.k,
	    tu_kube_doc("apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: ds, namespace: "
			"%s}\nspec:\n  selector: {matchLabels: {app: ds}}\n  template:\n    "
			"metadata: {labels: {app: ds}}\n    spec:\n%s",
			ns, POD_SPEC));
	tu_kube_create(
	    s.k,
	    tu_kube_doc("apiVersion: batch/v1\nkind: Job\nmetadata: {name: job, namespace: %s}\n"
			"spec:\n  suspend: true\n  template:\n    spec:\n      restartPolicy: "
			"Never\n%s",
			ns, POD_SPEC));
	tu_kube_create(
	    s.k, tu_kube_doc(
		     "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: cron, namespace: "
		     "%s}\nspec:\n  schedule: '*/5 * * * *'\n  suspend: true\n  jobTemplate:\n"
		     "    spec:\n      template:\n        spec:\n          restartPolicy: Never\n"
		     "          containers: [{name: c, image: registry.k8s.io/pause:3.10}]\n",
		     ns));
	tu_kube_create(
	    s.k, tu_kube_doc(
		     "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: "
		     "{name: rct, namespace: %s}\nspec:\n  spec:\n    devices:\n      requests:\n"
		     "      - name: gpu\n        exactly: {deviceClassName: gpu.example.com}\n",
		     ns));
	tu_kube_create(
	    s.k,
	    tu_kube_doc("apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: "
			"rc, namespace: %s}\nspec:\n  devices:\n    requests:\n    - name: gpu\n"
			"      exactly: {deviceClassName: gpu.example.com}\n",
			ns));
	tu_kube_create(
	    s.k,
	    tu_kube_doc("apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: "
			"pod-gpu-x1, namespace: %s, annotations: "
			"{resource.kubernetes.io/pod-claim-name: gpu}}\nspec:\n  devices:\n"
			"    requests:\n    - name: gpu\n      exactly: {deviceClassName: "
			"gpu.example.com}\n",
			ns));
	wait_owned_pod(s.k, ns, "rs");
	wait_object(s.k, "v1", "ConfigMap", ns, "kube-root-ca.crt");

	tu_export_agent_start(&s, 0, 0, 0);
	tu_log_begin();
	c = tu_export_pass(&s);
	tu_export_wait_acked(&s, 30000);
	log = tu_log_end();

	/* a snapshot around the objects */
	assert_int_equal(tu_target_count(s.t, 0, DS_RECORD_SNAPSHOT_BEGIN, NULL), 1);
	assert_int_equal(tu_target_count(s.t, 0, DS_RECORD_SNAPSHOT_END, NULL), 1);
	assert_int_equal(tu_target_at(s.t, 0).op, DS_RECORD_SNAPSHOT_BEGIN);
	assert_int_equal(tu_target_at(s.t, tu_target_len(s.t) - 1).op, DS_RECORD_SNAPSHOT_END);
	/* every selected object once; the Namespace; nothing of the other namespace */
	tu_key_of(key, sizeof(key), "", "Namespace", NULL, ns);
	assert_int_equal(tu_target_count(s.t, 0, DS_RECORD_UPSERT, key), 1);
	for (size_t i = 0; i < sizeof(shipped) / sizeof(shipped[0]); i++) {
		tu_key_of(key, sizeof(key), shipped[i][0], shipped[i][1], ns, shipped[i][2]);
		if (tu_target_count(s.t, 0, DS_RECORD_UPSERT, key) != 1) {
			tu_target_dump(s.t, 0);
			fail_msg("%s arrived %d times", key,
				 tu_target_count(s.t, 0, DS_RECORD_UPSERT, key));
		}
	}
	assert_int_equal(tu_target_count_like(s.t, 0, 0, other), 0);
	/* only these (and the default ServiceAccount) */
	{
		char part[300];
		snprintf(part, sizeof(part), "/%s/", ns);
		tu_key_of(key, sizeof(key), "", "ServiceAccount", ns, "default");
		assert_int_equal(tu_target_count_like(s.t, 0, DS_RECORD_UPSERT, part),
				 (int)(sizeof(shipped) / sizeof(shipped[0])) +
				     tu_target_count(s.t, 0, DS_RECORD_UPSERT, key));
	}
	/* sanitized on the way: no status, no uid, no resourceVersion */
	tu_key_of(key, sizeof(key), "apps", "Deployment", ns, "dep");
	{
		char *p = tu_target_last_payload(s.t, key);
		assert_non_null(p);
		assert_null(strstr(p, "\"status\""));
		assert_null(strstr(p, "\"uid\""));
		assert_null(strstr(p, "\"resourceVersion\""));
		free(p);
	}
	/* the skips, each with its reason (and the owner) */
	assert_int_equal(
	    tu_lines_with(log, "event=skipped", "kube-root-ca.crt", "own kube-root-ca"), 1);
	assert_int_equal(tu_lines_with(log, "event=skipped", "Secret", "token Secrets"), 1);
	assert_int_equal(
	    tu_lines_with(log, "event=skipped", "pod-gpu-x1", "generated from a template"), 1);
	assert_true(tu_lines_with(log, "event=skipped", "Pod ", "controlled by ReplicaSet rs") >=
		    1);
	assert_int_equal(tu_lines_with(log, "event=skipped", other, NULL), 0);
	assert_true(c.skipped >= 4);
	assert_int_equal(c.tombstoned, 0);
	assert_true(c.pushed >= sizeof(shipped) / sizeof(shipped[0]) + 1);
	free(log);

	/* the status, from the files alone */
	{
		ds_export_status *st = NULL;
		ds_err err = {0};
		assert_int_equal(ds_export_status_read(s.state, 10, &st, &err), 0);
		assert_true(st->snapshot_done);
		assert_int_equal(st->last_pass.pushed, c.pushed);
		assert_true(st->last_pass_finished_ms > 0);
		assert_true(st->n_kinds >= 14);
		ds_export_status_free(st);
	}
	tu_kube_drop_namespace(s.k, ns);
	tu_kube_drop_namespace(s.k, other);
	tu_export_site_stop(&s);
}

/* Passes after a restart ship only what changed: nothing when nothing did; a
 * tombstone for what was deleted while the agent was stopped; a delete then
 * an upsert for an object re-created under its name. */
/* Manifest rows the target's inbox filed under seq (the snapshot's end). */
static long inbox_manifest_rows(const struct tu_export_site *s, unsigned long long seq)
{
	char path[1100];
	sqlite3 *h = NULL;
	sqlite3_stmt *st = NULL;
	long v = -1;

	snprintf(path, sizeof(path), "%s/inbox.db", s->dir);
	if (sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
	    sqlite3_prepare_v2(h, "SELECT count(*) FROM manifests WHERE seq = ?", -1, &st, NULL) ==
		SQLITE_OK) {
		sqlite3_bind_int64(st, 1, (sqlite3_int64)seq);
		if (sqlite3_step(st) == SQLITE_ROW)
			v = sqlite3_column_int64(st, 0);
	}
	sqlite3_finalize(st);
	sqlite3_close(h);
	return v;
}

/*
 * The first pass's snapshot with `part` entries a record: SNAPSHOT_PART records
 * of `part` entries, each naming how many records follow, right before the
 * SNAPSHOT_END with the rest; the target's inbox files every entry under the
 * end's seq, so the prune reads the whole manifest there.
 */
static void assert_manifest_in_parts(struct tu_export_site *s, size_t part)
{
	size_t n = tu_target_len(s->t), end = n, first = n, entries = 0, parts;
	tu_arrival e;

	for (size_t i = 0; i < n; i++)
		if (tu_target_at(s->t, i).op == DS_RECORD_SNAPSHOT_END) {
			end = i;
			break;
		}
	assert_true(end < n);
	for (first = end; first > 0 && tu_target_at(s->t, first - 1).op == DS_RECORD_SNAPSHOT_PART;)
		first--;
	parts = end - first;
	if (parts < 2) {
		tu_target_dump(s->t, 0);
		fail_msg("%zu snapshot-part records before the end: at least 2 expected", parts);
	}
	for (size_t i = first; i < end; i++) {
		tu_arrival a = tu_target_at(s->t, i);

		assert_int_equal(a.manifest_len, part);
		assert_int_equal(a.parts_left, end - i);
		entries += a.manifest_len;
	}
	e = tu_target_at(s->t, end);
	assert_int_equal(e.parts_left, 0);
	assert_true(e.manifest_len >= 1 && e.manifest_len <= part);
	entries += e.manifest_len;
	/* every object of the snapshot once: its upserts since the begin */
	assert_int_equal(entries, tu_target_count(s->t, 0, DS_RECORD_UPSERT, NULL));
	assert_int_equal(inbox_manifest_rows(s, e.seq), (long)entries);
	assert_int_equal(tu_target_count(s->t, 0, DS_RECORD_SNAPSHOT_END, NULL), 1);
}

static void test_itest_exporter__a_restart_ships_only_what_changed(void **state)
{
	struct tu_export_site s;
	char *ns, key[700], keyb[700];
	ds_export_counts c;
	size_t mark;
	ds_kube *k;

	(void)state;
	tu_export_site_start(&s, tu_env("DS_KUBECONFIG_V1"));
	k = s.k;
	ns = tu_export_new_ns(k, "restart", s.label, true);
	for (int i = 0; i < 5; i++)
		tu_kube_create(
		    k, tu_kube_doc(
			   "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm%d, namespace: "
			   "%s}\ndata: {a: '%d'}\n",
			   i, ns, i));
	s.manifest_part = 2;		    /* the snapshot's manifest in parts of 2 entries */
	tu_export_agent_start(&s, 2, 3, 0); /* small pages and batches: many of both */
	c = tu_export_pass(&s);
	tu_export_wait_acked(&s, 30000);
	assert_true(c.pushed >= 6);
	tu_export_agent_stop(&s);
	assert_manifest_in_parts(&s, 2);
	s.manifest_part = 0;

	/* restarted: nothing changed, nothing sent */
	mark = tu_target_len(s.t);
	tu_export_agent_start(&s, 2, 3, 0);
	c = tu_export_pass(&s);
	tu_export_wait_acked(&s, 30000);
	assert_int_equal(c.pushed, 0);
	assert_int_equal(c.tombstoned, 0);
	assert_true(c.unchanged >= 6);
	assert_int_equal(tu_target_len(s.t), mark);
	tu_export_agent_stop(&s);

	/* deleted while stopped; another re-created under its name */
	tu_kube_delete(k, "v1", "ConfigMap", ns, "cm1");
	tu_kube_delete(k, "v1", "ConfigMap", ns, "cm2");
	tu_kube_create(
	    k, tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm2, namespace: %s}\n"
			   "data: {a: '2'}\n",
			   ns));
	tu_export_agent_start(&s, 2, 3, 0);
	c = tu_export_pass(&s);
	tu_export_wait_acked(&s, 30000);
	tu_key_of(key, sizeof(key), "", "ConfigMap", ns, "cm1");
	tu_key_of(keyb, sizeof(keyb), "", "ConfigMap", ns, "cm2");
	assert_int_equal(tu_target_count(s.t, mark, DS_RECORD_DELETE, key), 1);
	assert_int_equal(tu_target_count(s.t, mark, DS_RECORD_UPSERT, key), 0);
	assert_int_equal(tu_target_count(s.t, mark, DS_RECORD_DELETE, keyb), 1);
	assert_int_equal(tu_target_count(s.t, mark, DS_RECORD_UPSERT, keyb), 1);
	assert_int_equal(tu_target_count(s.t, mark, 0, NULL), 3);
	assert_int_equal(c.tombstoned, 2);
	assert_int_equal(c.pushed, 1);
	/* the re-created one's delete comes before its upsert */
	for (size_t i = mark; i < tu_target_len(s.t); i++) {
		tu_arrival a = tu_target_at(s.t, i);

		if (strcmp(a.key, keyb) == 0) {
			assert_int_equal(a.op, DS_RECORD_DELETE);
			break;
		}
	}
	tu_kube_drop_namespace(s.k, ns);
	tu_export_site_stop(&s);
}

/* The child of the crash test: one pass, slowly (tiny pages and batches). */
static int child_pass(const char *state_dir, const char *label)
{
	ds_exporter_config cfg;
	ds_exporter *ex = NULL;
	ds_kube *k;
	struct ds_kube_transport_opts o;
	ds_kubeconfig *kc = NULL;
	ds_err err = {0};
	int rc;

	ds_kube_transport_opts_init(&o);
	o.qps = 0;
	if (ds_kubeconfig_load(&kc, getenv("DS_KUBECONFIG_V1"), NULL, &err) < 0 ||
	    ds_kube_new(&k, &kc, &o, &err) < 0) {
		fprintf(stderr, "child: %s\n", err.msg);
		return 2;
	}
	ds_exporter_config_default(&cfg);
	cfg.on_event = ds_export_log_event; /* its lines are what the tests read */
	cfg.kube = k;
	cfg.state_dir = state_dir;
	cfg.ns_match = tu_export_by_label;
	cfg.ns_match_ud = (void *)label;
	cfg.page_size = 5;
	cfg.batch_records = 2;
	rc = ds_exporter_new(&ex, &cfg, &err);
	if (rc == 0)
		rc = ds_exporter_pass(ex, NULL, &err);
	if (rc < 0)
		fprintf(stderr, "child: %s\n", err.msg);
	ds_exporter_free(ex);
	ds_kube_free(k);
	return rc < 0 ? 1 : 0;
}

static uint64_t outbox_last_seq(const char *db)
{
	sqlite3 *h = NULL;
	sqlite3_stmt *st = NULL;
	uint64_t v = 0;

	if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
	    sqlite3_prepare_v2(h, "SELECT value FROM meta WHERE key = 'last_seq'", -1, &st, NULL) ==
		SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		v = (uint64_t)sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(h);
	return v;
}

/* A pass SIGKILLed midway, then run again: the target receives every object
 * exactly once, in its final state, inside one snapshot. */
static void test_itest_exporter__a_crash_mid_pass_loses_and_duplicates_nothing(void **state)
{
	struct tu_export_site s;
	char *ns, db[1100], key[700];
	char self[1024];
	ssize_t n;
	pid_t pid;
	int status;
	const int N = 120;

	(void)state;
	tu_export_site_start(&s, tu_env("DS_KUBECONFIG_V1"));
	ns = tu_export_new_ns(s.k, "crash", s.label, true);
	for (int i = 0; i < N; i++)
		tu_kube_create(
		    s.k, tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm%03d, "
				     "namespace: %s}\ndata: {v: 'first-%d'}\n",
				     i, ns, i));
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	assert_true(n > 0);
	self[n] = '\0';
	assert_int_equal(ds_export_db_path(s.state, db, sizeof(db)), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		execl(self, self, "--pass", s.state, s.label, (char *)NULL);
		_exit(127);
	}
	/* kill it once part of the objects are in the outbox */
	{
		long long end = ds_clock_mono_ms() + 60000;
		while (outbox_last_seq(db) < 20) {
			if (ds_clock_mono_ms() > end || waitpid(pid, &status, WNOHANG) == pid)
				fail_msg(
				    "the child pass ended or stalled before the kill (seq %llu)",
				    (unsigned long long)outbox_last_seq(db));
			tu_msleep(5);
		}
	}
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_true(outbox_last_seq(db) < (uint64_t)N);
	/* changed meanwhile: the final state is what arrives */
	tu_kube_merge(s.k, "v1", "ConfigMap", ns, "cm000", NULL, "{\"data\":{\"v\":\"final\"}}");
	tu_kube_merge(s.k, "v1", "ConfigMap", ns, "cm119", NULL, "{\"data\":{\"v\":\"final\"}}");

	tu_export_agent_start(&s, 0, 0, 0);
	tu_export_pass(&s);
	tu_export_wait_acked(&s, 60000);
	for (int i = 0; i < N; i++) {
		char name[16];
		snprintf(name, sizeof(name), "cm%03d", i);
		tu_key_of(key, sizeof(key), "", "ConfigMap", ns, name);
		if (tu_target_count(s.t, 0, DS_RECORD_UPSERT, key) != 1 &&
		    !(i == 0 && tu_target_count(s.t, 0, DS_RECORD_UPSERT, key) == 2)) {
			tu_target_dump(s.t, 0);
			fail_msg("%s arrived %d times", key,
				 tu_target_count(s.t, 0, DS_RECORD_UPSERT, key));
		}
		if (i == 0 || i == N - 1) {
			char *p = tu_target_last_payload(s.t, key);
			assert_non_null(strstr(p, "\"final\""));
			free(p);
		}
	}
	assert_int_equal(tu_target_count(s.t, 0, DS_RECORD_DELETE, NULL), 0);
	/* one snapshot, resumed: one begin, one end, the end last */
	assert_int_equal(tu_target_count(s.t, 0, DS_RECORD_SNAPSHOT_BEGIN, NULL), 1);
	assert_int_equal(tu_target_count(s.t, 0, DS_RECORD_SNAPSHOT_END, NULL), 1);
	assert_int_equal(tu_target_at(s.t, tu_target_len(s.t) - 1).op, DS_RECORD_SNAPSHOT_END);
	tu_kube_drop_namespace(s.k, ns);
	tu_export_site_stop(&s);
}

/* Watch mode: an update ships one record, a status-only change none, a
 * delete a tombstone; a burst of 100 updates a few records, the last current. */
static void test_itest_exporter__watch_ships_changes_once_and_debounces_bursts(void **state)
{
	struct tu_export_site s;
	char *ns, key[700], nskey[700], *p;
	size_t mark;
	long long t0, took;
	int n;

	(void)state;
	tu_export_site_start(&s, tu_env("DS_KUBECONFIG_V1"));
	ns = tu_export_new_ns(s.k, "watch", s.label, true);
	tu_kube_create(
	    s.k,
	    tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: %s}\n"
			"data: {v: '0'}\n",
			ns));
	tu_kube_create(
	    s.k,
	    tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: gone, namespace: %s}\n"
			"data: {v: '0'}\n",
			ns));
	tu_export_agent_start(&s, 0, 0, 0);
	tu_export_agent_watch(&s);
	tu_key_of(key, sizeof(key), "", "ConfigMap", ns, "cm");
	tu_key_of(nskey, sizeof(nskey), "", "Namespace", NULL, ns);
	tu_target_wait(s.t, 0, DS_RECORD_UPSERT, key, 30000);
	tu_export_settle(&s, 1500);

	/* one update, one record */
	mark = tu_target_len(s.t);
	tu_kube_merge(s.k, "v1", "ConfigMap", ns, "cm", NULL, "{\"data\":{\"v\":\"1\"}}");
	tu_target_wait(s.t, mark, DS_RECORD_UPSERT, key, 10000);
	tu_export_settle(&s, 1000);
	assert_int_equal(tu_target_count(s.t, mark, 0, NULL), 1);
	p = tu_target_last_payload(s.t, key);
	assert_non_null(strstr(p, "\"v\":\"1\""));
	free(p);

	/* a change the sanitizer removes (the Namespace's status): nothing */
	mark = tu_target_len(s.t);
	tu_kube_merge(
	    s.k, "v1", "Namespace", NULL, ns, "status",
	    "{\"status\":{\"conditions\":[{\"type\":\"NamespaceDeletionDiscoveryFailure\","
	    "\"status\":\"False\",\"reason\":\"ItestOnly\",\"message\":\"status only\"}]}}");
	tu_export_settle(&s, 1500);
	assert_int_equal(tu_target_count(s.t, mark, 0, NULL), 0);

	/* a delete, a tombstone */
	mark = tu_target_len(s.t);
	tu_kube_delete(s.k, "v1", "ConfigMap", ns, "gone");
	tu_key_of(key, sizeof(key), "", "ConfigMap", ns, "gone");
	tu_target_wait(s.t, mark, DS_RECORD_DELETE, key, 10000);
	tu_export_settle(&s, 1000);
	assert_int_equal(tu_target_count(s.t, mark, 0, NULL), 1);

	/* 100 updates in a burst: a few records, the last one current */
	mark = tu_target_len(s.t);
	tu_key_of(key, sizeof(key), "", "ConfigMap", ns, "cm");
	t0 = ds_clock_mono_ms();
	for (int i = 0; i < 100; i++) {
		char patch[64];
		snprintf(patch, sizeof(patch), "{\"data\":{\"v\":\"burst-%d\"}}", i);
		tu_kube_merge(s.k, "v1", "ConfigMap", ns, "cm", NULL, patch);
	}
	took = ds_clock_mono_ms() - t0;
	tu_export_settle(&s, 1500);
	n = tu_target_count(s.t, mark, DS_RECORD_UPSERT, key);
	fprintf(stderr, "burst: 100 updates in %lld ms -> %d records\n", took, n);
	assert_true(n >= 1);
	/* at most one per 200 ms window (and the one that closes the burst) */
	assert_true(n <= took / 200 + 2);
	assert_true(n < 50);
	assert_int_equal(tu_target_count(s.t, mark, 0, NULL), n);
	p = tu_target_last_payload(s.t, key);
	assert_non_null(strstr(p, "\"burst-99\""));
	free(p);
	assert_int_equal(tu_target_count(s.t, 0, DS_RECORD_UPSERT, nskey), 1);

	/* the target asks for a snapshot while the watch runs: one arrives with
	 * every object, and the watch goes on after it */
	mark = tu_target_len(s.t);
	ds_exporter_on_snapshot_required(s.ex, 0);
	tu_target_wait(s.t, mark, DS_RECORD_SNAPSHOT_END, NULL, 30000);
	assert_int_equal(tu_target_count(s.t, mark, DS_RECORD_SNAPSHOT_BEGIN, NULL), 1);
	assert_int_equal(tu_target_count(s.t, mark, DS_RECORD_UPSERT, key), 1);
	assert_int_equal(tu_target_count(s.t, mark, DS_RECORD_UPSERT, nskey), 1);
	tu_export_settle(&s, 1000);
	mark = tu_target_len(s.t);
	tu_kube_merge(s.k, "v1", "ConfigMap", ns, "cm", NULL,
		      "{\"data\":{\"v\":\"after-snapshot\"}}");
	tu_target_wait(s.t, mark, DS_RECORD_UPSERT, key, 15000);
	tu_kube_drop_namespace(s.k, ns);
	tu_export_site_stop(&s);
}

/* ResourceClaimTemplates have no watch cache on the test clusters: their
 * watch, started from a resourceVersion etcd has compacted away, gets 410;
 * the kind is relisted page by page against the index and only the
 * difference is shipped (no blind resend of the kind). */
static void
test_itest_exporter__an_expired_watch_relists_and_ships_only_the_difference(void **state)
{
	struct tu_export_site s;
	char *ns, *log, key[700];
	long long end;

	(void)state;
	tu_export_site_start(&s, tu_env("DS_KUBECONFIG_V1"));
	ns = tu_export_new_ns(s.k, "expire", s.label, true);
	for (int i = 0; i < 6; i++)
		tu_kube_create(
		    s.k,
		    tu_kube_doc("apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\n"
				"metadata: {name: rct%d, namespace: %s}\nspec:\n  spec:\n    "
				"devices:\n      requests:\n      - name: gpu\n        exactly: "
				"{deviceClassName: gpu.example.com, count: %d}\n",
				i, ns, i + 1));
	s.expire_ns = ns;
	tu_export_agent_start(&s, 2, 0, 0);
	tu_log_begin();
	tu_export_agent_watch(&s);
	tu_key_of(key, sizeof(key), "resource.k8s.io", "ResourceClaimTemplate", ns, "rct0");
	end = ds_clock_mono_ms() + 30000;
	while (tu_target_count(s.t, 0, DS_RECORD_UPSERT, key) < 2) {
		if (ds_clock_mono_ms() > end) {
			tu_target_dump(s.t, 0);
			fail_msg("the changed template did not arrive again");
		}
		tu_msleep(50);
	}
	tu_export_settle(&s, 1500);
	log = tu_log_end();
	assert_true(s.expire_done);
	assert_int_equal(
	    tu_lines_with(log, "event=watch_expired", "kind=ResourceClaimTemplate", NULL), 1);
	free(log);
	/* the first list's state, then the change, found by the relist */
	{
		char *p = tu_target_last_payload(s.t, key);
		assert_non_null(strstr(p, "\"changed\":\"yes\""));
		free(p);
	}
	/* the others once: not sent again by the relist */
	for (int i = 1; i < 6; i++) {
		char name[16];
		snprintf(name, sizeof(name), "rct%d", i);
		tu_key_of(key, sizeof(key), "resource.k8s.io", "ResourceClaimTemplate", ns, name);
		assert_int_equal(tu_target_count(s.t, 0, DS_RECORD_UPSERT, key), 1);
	}
	/* a kind with a watch cache went on from its list without a relist */
	tu_key_of(key, sizeof(key), "", "ConfigMap", ns, "after");
	assert_int_equal(tu_target_count(s.t, 0, DS_RECORD_UPSERT, key), 1);
	tu_kube_drop_namespace(s.k, ns);
	tu_export_site_stop(&s);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(
		test_itest_exporter__first_pass_ships_the_selected_objects_and_reports_skips),
	    cmocka_unit_test(test_itest_exporter__a_restart_ships_only_what_changed),
	    cmocka_unit_test(test_itest_exporter__a_crash_mid_pass_loses_and_duplicates_nothing),
	    cmocka_unit_test(test_itest_exporter__watch_ships_changes_once_and_debounces_bursts),
	    cmocka_unit_test(
		test_itest_exporter__an_expired_watch_relists_and_ships_only_the_difference),
	/* again with the namespace selected by name: read namespace by namespace */
#define BY_LIST(f) {#f "__by_list", f, tu_export_list_on, tu_export_list_off, NULL}
	    BY_LIST(test_itest_exporter__first_pass_ships_the_selected_objects_and_reports_skips),
	    BY_LIST(test_itest_exporter__a_restart_ships_only_what_changed),
	    BY_LIST(test_itest_exporter__watch_ships_changes_once_and_debounces_bursts),
	    BY_LIST(test_itest_exporter__an_expired_watch_relists_and_ships_only_the_difference),
#undef BY_LIST
	};

	if (argc == 4 && strcmp(argv[1], "--pass") == 0)
		return child_pass(argv[2], argv[3]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
