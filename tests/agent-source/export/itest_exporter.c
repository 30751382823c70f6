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
#include "drasync/export_log.h"
#include "drasync/exporter.h"
#include "drasync/export_status.h"
#include "drasync/k8s_object.h"
#include "drasync/keys.h"
#include "drasync/kube_client.h"
#include "drasync/log.h"
#include "drasync/sender.h"
#include "testutil.h"
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

#define LABEL "drasync-itest"

/* ---- helpers ------------------------------------------------------------------ */

/* The "_by_list" runs of a test (setup list_on): the agent selects the last
 * namespace new_ns() made `selected` by name, a fixed list, which it reads
 * namespace by namespace, instead of by the label, which it reads
 * cluster-wide. */
static bool by_list;
static char list_ns[128];

static int list_on(void **state)
{
	(void)state;
	by_list = true;
	list_ns[0] = '\0';
	return 0;
}

static int list_off(void **state)
{
	(void)state;
	by_list = false;
	list_ns[0] = '\0';
	return 0;
}

/* A namespace, labelled for this run's selector when `selected`. */
static char *new_ns(ds_kube *k, const char *prefix, const char *label, bool selected)
{
	char name[64], labels[128] = "", *ns;

	snprintf(name, sizeof(name), "itx-%s", prefix);
	if (selected)
		snprintf(labels, sizeof(labels), LABEL ": '%s'", label);
	ns = tu_kube_new_namespace(k, name, labels);
	if (selected)
		snprintf(list_ns, sizeof(list_ns), "%s", ns);
	return ns;
}

static bool by_label(void *ud, const json_t *ns)
{
	const char *want = ud;
	const char *v = ds_json_str(ds_json_path(ns, "metadata.labels"), LABEL);

	return v && strcmp(v, want) == 0;
}

/* ---- the target site and the source agent -------------------------------------- */

struct site {
	char *dir;
	char state[1024];
	char label[32];
	tu_target *t; /* the target site, in this process */
	/* the source agent */
	ds_kube *k;
	ds_exporter *ex;
	ds_sender *tx;
	pthread_t tx_thread, ex_thread;
	bool watching;
	int watch_rc;
	ds_err watch_err;
	const char *ns_list[1]; /* set: select by this list instead of the label */
	/* the expiry test: what to do once the templates are listed */
	const char *expire_ns;
	bool expire_done;
};

/* In the first pass, after the ResourceClaimTemplates were listed and before
 * their watch starts: change one, write elsewhere, compact etcd. The watch
 * then starts from a resourceVersion that has expired. */
static void site_progress(void *ud, const char *kind, const ds_export_counts *so_far)
{
	struct site *s = ud;

	(void)so_far;
	if (!s->expire_ns || s->expire_done || strcmp(kind, "ResourceClaim") != 0)
		return;
	s->expire_done = true;
	tu_kube_merge(s->k, "resource.k8s.io/v1", "ResourceClaimTemplate", s->expire_ns, "rct0",
		      NULL, "{\"metadata\":{\"labels\":{\"changed\":\"yes\"}}}");
	tu_kube_create(
	    s->k, tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: after, namespace: "
			      "%s}\n",
			      s->expire_ns));
	tu_kube_compact(tu_env("DS_KUBECONFIG_V1"));
}

static void site_start(struct site *s, const char *kubeconfig)
{
	memset(s, 0, sizeof(*s));
	s->dir = tu_mkdtemp("exporter");
	snprintf(s->state, sizeof(s->state), "%s/state", s->dir);
	snprintf(s->label, sizeof(s->label), "run-%u", tu_rand());
	s->t = tu_target_start(s->dir, tu_target_verdict_by_name, NULL);
	s->k = tu_kube_connect(kubeconfig);
}

static void *tx_main(void *arg)
{
	struct site *s = arg;
	ds_err err;

	ds_sender_run(s->tx, 0, 0, &err);
	return NULL;
}

static void wake(void *ud, uint64_t last)
{
	struct site *s = ud;

	(void)last;
	if (s->tx)
		ds_sender_wake(s->tx);
}

/* The source agent: an exporter on the state directory and its sender. */
static void agent_start(struct site *s, long page, size_t batch, int watch_timeout)
{
	ds_exporter_config cfg;
	ds_sender_config sc;
	char db[1100];
	ds_err err = {0};

	ds_exporter_config_default(&cfg);
	cfg.on_event = ds_export_log_event;
	cfg.kube = s->k;
	cfg.state_dir = s->state;
	if (!s->ns_list[0] && by_list && list_ns[0])
		s->ns_list[0] = list_ns;
	if (s->ns_list[0]) {
		cfg.namespaces = s->ns_list;
		cfg.n_namespaces = 1;
	} else {
		cfg.ns_match = by_label;
		cfg.ns_match_ud = s->label;
	}
	cfg.on_pushed = wake;
	cfg.pushed_ud = s;
	cfg.on_progress = site_progress;
	cfg.progress_ud = s;
	if (page)
		cfg.page_size = page;
	if (batch)
		cfg.batch_records = batch;
	if (watch_timeout)
		cfg.watch_timeout_seconds = watch_timeout;
	if (ds_exporter_new(&s->ex, &cfg, &err) < 0)
		fail_msg("exporter: %s", err.msg);
	assert_int_equal(ds_export_db_path(s->state, db, sizeof(db)), 0);
	ds_sender_config_default(&sc);
	sc.endpoint = tu_target_endpoint(s->t);
	sc.server_public_key = tu_target_server_keys(s->t)->public_z85;
	sc.keys = tu_target_source_keys(s->t);
	sc.outbox_path = db;
	sc.cluster_name = "itest-source";
	sc.on_results = ds_exporter_on_results;
	sc.on_snapshot_required = ds_exporter_on_snapshot_required;
	sc.ud = s->ex;
	if (ds_sender_new(&s->tx, &sc, &err) < 0)
		fail_msg("sender: %s", err.msg);
	assert_int_equal(pthread_create(&s->tx_thread, NULL, tx_main, s), 0);
}

static void *watch_main(void *arg)
{
	struct site *s = arg;

	s->watch_rc = ds_exporter_watch(s->ex, &s->watch_err);
	return NULL;
}

static void agent_watch(struct site *s)
{
	assert_int_equal(pthread_create(&s->ex_thread, NULL, watch_main, s), 0);
	s->watching = true;
}

/* Wait until the target acknowledged everything the exporter pushed. */
static void wait_acked(struct site *s, int timeout_ms)
{
	long long end = tu_now_ms() + timeout_ms;

	while (ds_sender_acked(s->tx) < ds_exporter_last_seq(s->ex)) {
		if (tu_now_ms() > end)
			fail_msg("the target acknowledged %llu of %llu",
				 (unsigned long long)ds_sender_acked(s->tx),
				 (unsigned long long)ds_exporter_last_seq(s->ex));
		tu_msleep(20);
	}
}

/* Wait until nothing more arrives for quiet_ms (watch mode). */
static void settle(struct site *s, int quiet_ms)
{
	size_t n = tu_target_len(s->t);
	long long last = tu_now_ms(), end = tu_now_ms() + 60000;

	while (tu_now_ms() - last < quiet_ms) {
		tu_msleep(50);
		if (tu_target_len(s->t) != n ||
		    ds_sender_acked(s->tx) < ds_exporter_last_seq(s->ex)) {
			n = tu_target_len(s->t);
			last = tu_now_ms();
		}
		if (tu_now_ms() > end)
			fail_msg("the stream does not settle");
	}
}

static void agent_stop(struct site *s)
{
	if (s->watching) {
		ds_exporter_stop(s->ex);
		pthread_join(s->ex_thread, NULL);
		s->watching = false;
		if (s->watch_rc < 0)
			fail_msg("watch: %d %s", s->watch_rc, s->watch_err.msg);
	}
	ds_sender_stop(s->tx);
	pthread_join(s->tx_thread, NULL);
	ds_sender_free(s->tx);
	ds_exporter_free(s->ex);
	s->tx = NULL;
	s->ex = NULL;
}

static void site_stop(struct site *s)
{
	if (s->ex)
		agent_stop(s);
	tu_target_stop(s->t);
	ds_kube_free(s->k);
	free(s->dir);
}

static ds_export_counts pass(struct site *s)
{
	ds_export_counts c;
	ds_err err = {0};

	if (ds_exporter_pass(s->ex, &c, &err) < 0)
		fail_msg("pass: %s", err.msg);
	return c;
}

/* stderr teed into memory while the exporter logs, for assertions on its
 * lines (and still shown, with cmocka's own messages). */
static struct {
	int saved, rd;
	pthread_t thread;
	pthread_mutex_t mu;
	char *text;
	size_t len, cap;
	bool on;
} cap = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void *tee_main(void *arg)
{
	char buf[4096];
	ssize_t n;

	(void)arg;
	while ((n = read(cap.rd, buf, sizeof(buf))) > 0) {
		if (write(cap.saved, buf, (size_t)n) < 0) {
			/* the real stderr is gone: keep capturing */
		}
		pthread_mutex_lock(&cap.mu);
		if (ds_grow((void **)&cap.text, &cap.cap, cap.len + (size_t)n + 1, 1) < 0)
			abort();
		memcpy(cap.text + cap.len, buf, (size_t)n);
		cap.len += (size_t)n;
		cap.text[cap.len] = '\0';
		pthread_mutex_unlock(&cap.mu);
	}
	return NULL;
}

static void log_begin(void)
{
	int p[2];

	if (cap.on) {
		/* a failed test left it on: start the text over */
		pthread_mutex_lock(&cap.mu);
		cap.len = 0;
		if (cap.text)
			cap.text[0] = '\0';
		pthread_mutex_unlock(&cap.mu);
		return;
	}
	assert_int_equal(pipe(p), 0);
	fflush(stderr);
	cap.saved = dup(2);
	cap.rd = p[0];
	dup2(p[1], 2);
	close(p[1]);
	cap.len = 0;
	cap.on = true;
	assert_int_equal(pthread_create(&cap.thread, NULL, tee_main, NULL), 0);
}

/* What was logged since log_begin() (to free). */
static char *log_text(void)
{
	char *t;

	fflush(stderr);
	pthread_mutex_lock(&cap.mu);
	t = strdup(cap.text ? cap.text : "");
	pthread_mutex_unlock(&cap.mu);
	return t;
}

/* Stop capturing; what was logged (to free). */
static char *log_end(void)
{
	char *t;

	fflush(stderr);
	dup2(cap.saved, 2); /* the pipe's last writer closes: the tee ends */
	pthread_join(cap.thread, NULL);
	close(cap.rd);
	close(cap.saved);
	cap.on = false;
	t = log_text();
	return t;
}

static int lines_with(const char *text, const char *a, const char *b, const char *c)
{
	int n = 0;

	for (const char *line = text; line && *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		char *l = strndup(line, len);

		if (strstr(l, a) && (!b || strstr(l, b)) && (!c || strstr(l, c)))
			n++;
		free(l);
		line = end ? end + 1 : NULL;
	}
	return n;
}

static void key_of(char *buf, size_t size, const char *group, const char *kind, const char *ns,
		   const char *name)
{
	snprintf(buf, size, "%s/%s/%s/%s", group, kind, ns ? ns : "", name);
}

/* Wait until a pod controlled by `owner` exists in ns. */
static void wait_owned_pod(ds_kube *k, const char *ns, const char *owner)
{
	struct ds_kube_resource r = tu_kube_resource(k, "v1", "Pod");
	struct ds_kube_list_opts lo = {0};
	long long end = tu_now_ms() + 60000;

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
		if (tu_now_ms() > end)
			fail_msg("no pod of %s appeared", owner);
		tu_msleep(200);
	}
}

/* Wait until the ConfigMap kube-root-ca.crt exists in ns (the controller publishes it). */
static void wait_object(ds_kube *k, const char *api, const char *kind, const char *ns,
			const char *name)
{
	struct ds_kube_resource r = tu_kube_resource(k, api, kind);
	long long end = tu_now_ms() + 60000;

	for (;;) {
		json_t *obj = NULL;
		ds_kube_error ke;

		if (ds_kube_get(k, &r, ns, name, NULL, &obj, &ke) == 0) {
			json_decref(obj);
			return;
		}
		if (tu_now_ms() > end)
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
	struct site s;
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
	site_start(&s, tu_env("DS_KUBECONFIG_V1"));
	ns = new_ns(s.k, "first", s.label, true);
	other = new_ns(s.k, "other", s.label, false);
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

	agent_start(&s, 0, 0, 0);
	log_begin();
	c = pass(&s);
	wait_acked(&s, 30000);
	log = log_end();

	/* a snapshot around the objects */
	assert_int_equal(tu_target_count(s.t, 0, DS_RECORD_SNAPSHOT_BEGIN, NULL), 1);
	assert_int_equal(tu_target_count(s.t, 0, DS_RECORD_SNAPSHOT_END, NULL), 1);
	assert_int_equal(tu_target_at(s.t, 0).op, DS_RECORD_SNAPSHOT_BEGIN);
	assert_int_equal(tu_target_at(s.t, tu_target_len(s.t) - 1).op, DS_RECORD_SNAPSHOT_END);
	/* every selected object once; the Namespace; nothing of the other namespace */
	key_of(key, sizeof(key), "", "Namespace", NULL, ns);
	assert_int_equal(tu_target_count(s.t, 0, DS_RECORD_UPSERT, key), 1);
	for (size_t i = 0; i < sizeof(shipped) / sizeof(shipped[0]); i++) {
		key_of(key, sizeof(key), shipped[i][0], shipped[i][1], ns, shipped[i][2]);
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
		key_of(key, sizeof(key), "", "ServiceAccount", ns, "default");
		assert_int_equal(tu_target_count_like(s.t, 0, DS_RECORD_UPSERT, part),
				 (int)(sizeof(shipped) / sizeof(shipped[0])) +
				     tu_target_count(s.t, 0, DS_RECORD_UPSERT, key));
	}
	/* sanitized on the way: no status, no uid, no resourceVersion */
	key_of(key, sizeof(key), "apps", "Deployment", ns, "dep");
	{
		char *p = tu_target_last_payload(s.t, key);
		assert_non_null(p);
		assert_null(strstr(p, "\"status\""));
		assert_null(strstr(p, "\"uid\""));
		assert_null(strstr(p, "\"resourceVersion\""));
		free(p);
	}
	/* the skips, each with its reason (and the owner) */
	assert_int_equal(lines_with(log, "event=skipped", "kube-root-ca.crt", "own kube-root-ca"),
			 1);
	assert_int_equal(lines_with(log, "event=skipped", "Secret", "token Secrets"), 1);
	assert_int_equal(
	    lines_with(log, "event=skipped", "pod-gpu-x1", "generated from a template"), 1);
	assert_true(lines_with(log, "event=skipped", "Pod ", "controlled by ReplicaSet rs") >= 1);
	assert_int_equal(lines_with(log, "event=skipped", other, NULL), 0);
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
	site_stop(&s);
}

/* Passes after a restart ship only what changed: nothing when nothing did; a
 * tombstone for what was deleted while the agent was stopped; a delete then
 * an upsert for an object re-created under its name. */
static void test_itest_exporter__a_restart_ships_only_what_changed(void **state)
{
	struct site s;
	char *ns, key[700], keyb[700];
	ds_export_counts c;
	size_t mark;
	ds_kube *k;

	(void)state;
	site_start(&s, tu_env("DS_KUBECONFIG_V1"));
	k = s.k;
	ns = new_ns(k, "restart", s.label, true);
	for (int i = 0; i < 5; i++)
		tu_kube_create(
		    k, tu_kube_doc(
			   "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm%d, namespace: "
			   "%s}\ndata: {a: '%d'}\n",
			   i, ns, i));
	agent_start(&s, 2, 3, 0); /* small pages and batches: many of both */
	c = pass(&s);
	wait_acked(&s, 30000);
	assert_true(c.pushed >= 6);
	agent_stop(&s);

	/* restarted: nothing changed, nothing sent */
	mark = tu_target_len(s.t);
	agent_start(&s, 2, 3, 0);
	c = pass(&s);
	wait_acked(&s, 30000);
	assert_int_equal(c.pushed, 0);
	assert_int_equal(c.tombstoned, 0);
	assert_true(c.unchanged >= 6);
	assert_int_equal(tu_target_len(s.t), mark);
	agent_stop(&s);

	/* deleted while stopped; another re-created under its name */
	tu_kube_delete(k, "v1", "ConfigMap", ns, "cm1");
	tu_kube_delete(k, "v1", "ConfigMap", ns, "cm2");
	tu_kube_create(
	    k, tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm2, namespace: %s}\n"
			   "data: {a: '2'}\n",
			   ns));
	agent_start(&s, 2, 3, 0);
	c = pass(&s);
	wait_acked(&s, 30000);
	key_of(key, sizeof(key), "", "ConfigMap", ns, "cm1");
	key_of(keyb, sizeof(keyb), "", "ConfigMap", ns, "cm2");
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
	site_stop(&s);
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
	cfg.on_event = ds_export_log_event;
	cfg.kube = k;
	cfg.state_dir = state_dir;
	cfg.ns_match = by_label;
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
	struct site s;
	char *ns, db[1100], key[700];
	char self[1024];
	ssize_t n;
	pid_t pid;
	int status;
	const int N = 120;

	(void)state;
	site_start(&s, tu_env("DS_KUBECONFIG_V1"));
	ns = new_ns(s.k, "crash", s.label, true);
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
		long long end = tu_now_ms() + 60000;
		while (outbox_last_seq(db) < 20) {
			if (tu_now_ms() > end || waitpid(pid, &status, WNOHANG) == pid)
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

	agent_start(&s, 0, 0, 0);
	pass(&s);
	wait_acked(&s, 60000);
	for (int i = 0; i < N; i++) {
		char name[16];
		snprintf(name, sizeof(name), "cm%03d", i);
		key_of(key, sizeof(key), "", "ConfigMap", ns, name);
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
	site_stop(&s);
}

/* Watch mode: an update ships one record, a status-only change none, a
 * delete a tombstone; a burst of 100 updates a few records, the last current. */
static void test_itest_exporter__watch_ships_changes_once_and_debounces_bursts(void **state)
{
	struct site s;
	char *ns, key[700], nskey[700], *p;
	size_t mark;
	long long t0, took;
	int n;

	(void)state;
	site_start(&s, tu_env("DS_KUBECONFIG_V1"));
	ns = new_ns(s.k, "watch", s.label, true);
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
	agent_start(&s, 0, 0, 0);
	agent_watch(&s);
	key_of(key, sizeof(key), "", "ConfigMap", ns, "cm");
	key_of(nskey, sizeof(nskey), "", "Namespace", NULL, ns);
	tu_target_wait(s.t, 0, DS_RECORD_UPSERT, key, 30000);
	settle(&s, 1500);

	/* one update, one record */
	mark = tu_target_len(s.t);
	tu_kube_merge(s.k, "v1", "ConfigMap", ns, "cm", NULL, "{\"data\":{\"v\":\"1\"}}");
	tu_target_wait(s.t, mark, DS_RECORD_UPSERT, key, 10000);
	settle(&s, 1000);
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
	settle(&s, 1500);
	assert_int_equal(tu_target_count(s.t, mark, 0, NULL), 0);

	/* a delete, a tombstone */
	mark = tu_target_len(s.t);
	tu_kube_delete(s.k, "v1", "ConfigMap", ns, "gone");
	key_of(key, sizeof(key), "", "ConfigMap", ns, "gone");
	tu_target_wait(s.t, mark, DS_RECORD_DELETE, key, 10000);
	settle(&s, 1000);
	assert_int_equal(tu_target_count(s.t, mark, 0, NULL), 1);

	/* 100 updates in a burst: a few records, the last one current */
	mark = tu_target_len(s.t);
	key_of(key, sizeof(key), "", "ConfigMap", ns, "cm");
	t0 = tu_now_ms();
	for (int i = 0; i < 100; i++) {
		char patch[64];
		snprintf(patch, sizeof(patch), "{\"data\":{\"v\":\"burst-%d\"}}", i);
		tu_kube_merge(s.k, "v1", "ConfigMap", ns, "cm", NULL, patch);
	}
	took = tu_now_ms() - t0;
	settle(&s, 1500);
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
	settle(&s, 1000);
	mark = tu_target_len(s.t);
	tu_kube_merge(s.k, "v1", "ConfigMap", ns, "cm", NULL,
		      "{\"data\":{\"v\":\"after-snapshot\"}}");
	tu_target_wait(s.t, mark, DS_RECORD_UPSERT, key, 15000);
	tu_kube_drop_namespace(s.k, ns);
	site_stop(&s);
}

/* ResourceClaimTemplates have no watch cache on the test clusters: their
 * watch, started from a resourceVersion etcd has compacted away, gets 410;
 * the kind is relisted page by page against the index and only the
 * difference is shipped (no blind resend of the kind). */
static void
test_itest_exporter__an_expired_watch_relists_and_ships_only_the_difference(void **state)
{
	struct site s;
	char *ns, *log, key[700];
	long long end;

	(void)state;
	site_start(&s, tu_env("DS_KUBECONFIG_V1"));
	ns = new_ns(s.k, "expire", s.label, true);
	for (int i = 0; i < 6; i++)
		tu_kube_create(
		    s.k,
		    tu_kube_doc("apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\n"
				"metadata: {name: rct%d, namespace: %s}\nspec:\n  spec:\n    "
				"devices:\n      requests:\n      - name: gpu\n        exactly: "
				"{deviceClassName: gpu.example.com, count: %d}\n",
				i, ns, i + 1));
	s.expire_ns = ns;
	agent_start(&s, 2, 0, 0);
	log_begin();
	agent_watch(&s);
	key_of(key, sizeof(key), "resource.k8s.io", "ResourceClaimTemplate", ns, "rct0");
	end = tu_now_ms() + 30000;
	while (tu_target_count(s.t, 0, DS_RECORD_UPSERT, key) < 2) {
		if (tu_now_ms() > end) {
			tu_target_dump(s.t, 0);
			fail_msg("the changed template did not arrive again");
		}
		tu_msleep(50);
	}
	settle(&s, 1500);
	log = log_end();
	assert_true(s.expire_done);
	assert_int_equal(lines_with(log, "event=watch_expired", "kind=ResourceClaimTemplate", NULL),
			 1);
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
		key_of(key, sizeof(key), "resource.k8s.io", "ResourceClaimTemplate", ns, name);
		assert_int_equal(tu_target_count(s.t, 0, DS_RECORD_UPSERT, key), 1);
	}
	/* a kind with a watch cache went on from its list without a relist */
	key_of(key, sizeof(key), "", "ConfigMap", ns, "after");
	assert_int_equal(tu_target_count(s.t, 0, DS_RECORD_UPSERT, key), 1);
	tu_kube_drop_namespace(s.k, ns);
	site_stop(&s);
}

/* A namespace labelled while the agent watches brings its objects; the label
 * removed stops them and deletes nothing on the target. */
static void test_itest_exporter__labelling_a_namespace_brings_it_unlabelling_stops_it(void **state)
{
	struct site s;
	char *ns, *log, key[700], nskey[700], patch[200];
	size_t mark;

	(void)state;
	site_start(&s, tu_env("DS_KUBECONFIG_V1"));
	ns = new_ns(s.k, "label", s.label, false);
	tu_kube_create(
	    s.k,
	    tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: %s}\n"
			"data: {v: '0'}\n",
			ns));
	tu_kube_create(
	    s.k, tu_kube_doc("apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: %s}\n"
			     "stringData: {k: v}\n",
			     ns));
	agent_start(&s, 0, 0, 0);
	log_begin();
	agent_watch(&s);
	tu_msleep(1500);
	key_of(key, sizeof(key), "", "ConfigMap", ns, "cm");
	key_of(nskey, sizeof(nskey), "", "Namespace", NULL, ns);
	assert_int_equal(tu_target_count_like(s.t, 0, 0, ns), 0);

	snprintf(patch, sizeof(patch), "{\"metadata\":{\"labels\":{\"" LABEL "\":\"%s\"}}}",
		 s.label);
	tu_kube_merge(s.k, "v1", "Namespace", NULL, ns, NULL, patch);
	tu_target_wait(s.t, 0, DS_RECORD_UPSERT, key, 15000);
	settle(&s, 1000);
	assert_int_equal(tu_target_count(s.t, 0, DS_RECORD_UPSERT, nskey), 1);
	key_of(key, sizeof(key), "", "Secret", ns, "s");
	assert_int_equal(tu_target_count(s.t, 0, DS_RECORD_UPSERT, key), 1);

	/* unlabelled: nothing is deleted, later changes are not sent */
	mark = tu_target_len(s.t);
	tu_kube_merge(s.k, "v1", "Namespace", NULL, ns, NULL,
		      "{\"metadata\":{\"labels\":{\"" LABEL "\":null}}}");
	settle(&s, 1500);
	tu_kube_merge(s.k, "v1", "ConfigMap", ns, "cm", NULL, "{\"data\":{\"v\":\"after\"}}");
	tu_kube_delete(s.k, "v1", "Secret", ns, "s");
	settle(&s, 1500);
	log = log_end();
	assert_int_equal(tu_target_count(s.t, mark, 0, NULL), 0);
	assert_int_equal(lines_with(log, "event=namespace_unselected", ns, NULL), 1);
	assert_int_equal(lines_with(log, "event=namespace_selected", ns, NULL), 1);
	free(log);
	/* and a pass after a restart does not tombstone them either */
	agent_stop(&s);
	agent_start(&s, 0, 0, 0);
	pass(&s);
	wait_acked(&s, 30000);
	assert_int_equal(tu_target_count(s.t, mark, 0, NULL), 0);
	tu_kube_drop_namespace(s.k, ns);
	site_stop(&s);
}

/* A selected namespace deleted while the agent watches: tombstones for its
 * objects and for the Namespace itself (a real deletion, unlike an unlabel). */
static void test_itest_exporter__a_deleted_namespace_is_tombstoned_with_its_objects(void **state)
{
	struct site s;
	char *ns, key[700], nskey[700];
	struct ds_kube_resource r;
	struct ds_kube_delete_opts d = {"Background", NULL, NULL, -1};
	ds_kube_error ke;
	size_t mark;

	(void)state;
	site_start(&s, tu_env("DS_KUBECONFIG_V1"));
	ns = new_ns(s.k, "delete", s.label, true);
	tu_kube_create(
	    s.k, tu_kube_doc(
		     "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: %s}\n", ns));
	tu_kube_create(
	    s.k, tu_kube_doc("apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: %s}\n"
			     "stringData: {k: v}\n",
			     ns));
	agent_start(&s, 0, 0, 0);
	agent_watch(&s);
	key_of(key, sizeof(key), "", "ConfigMap", ns, "cm");
	key_of(nskey, sizeof(nskey), "", "Namespace", NULL, ns);
	tu_target_wait(s.t, 0, DS_RECORD_UPSERT, key, 30000);
	settle(&s, 1000);
	mark = tu_target_len(s.t);
	r = tu_kube_resource(s.k, "v1", "Namespace");
	TU_KUBE_CHECK(ds_kube_delete(s.k, &r, NULL, ns, &d, &ke), ke);
	tu_target_wait(s.t, mark, DS_RECORD_DELETE, nskey, 60000);
	settle(&s, 1000);
	assert_int_equal(tu_target_count(s.t, mark, DS_RECORD_DELETE, key), 1);
	key_of(key, sizeof(key), "", "Secret", ns, "s");
	assert_int_equal(tu_target_count(s.t, mark, DS_RECORD_DELETE, key), 1);
	assert_int_equal(tu_target_count(s.t, mark, DS_RECORD_UPSERT, nskey) <= 1,
			 1); /* Terminating */
	free(ns);
	site_stop(&s);
}

/* A kubeconfig for ServiceAccount `sa` of ns (a fresh token), beside the admin's CA. */
static char *sa_kubeconfig(ds_kube *k, const char *dir, const char *ns, const char *sa)
{
	const char *admin = tu_env("DS_KUBECONFIG_V1");
	char *token = tu_kube_token(k, ns, sa), *user, *name, *out;

	if (asprintf(&user, "    token: %s\n", token) < 0 ||
	    asprintf(&name, "%s.kubeconfig", sa) < 0)
		fail_msg("oom");
	out = tu_kube_write_kubeconfig(admin, dir, name, admin, NULL, user);
	free(name);
	free(user);
	free(token);
	return out;
}

/* A source whose RBAC does not let the agent list Secrets: the pass reports
 * it and goes on with the other kinds; the snapshot stays open (no
 * SNAPSHOT_END without Secrets) and the next pass that can list them finishes
 * it without resending the rest; later, a Secret the agent cannot list is
 * never tombstoned. */
static void test_itest_exporter__a_kind_that_cannot_be_listed_is_left_alone(void **state)
{
	struct site s;
	char *ns, *kc, role[64], key[700], cmkey[700];
	ds_kube *admin;
	ds_export_counts c;
	ds_err err = {0};
	size_t mark;

	(void)state;
	site_start(&s, tu_env("DS_KUBECONFIG_V1"));
	admin = s.k;
	ns = new_ns(admin, "rbac", s.label, true);
	snprintf(role, sizeof(role), "itx-no-secrets-%s", s.label);
	tu_kube_create(
	    admin, tu_kube_doc("apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: exporter, "
			       "namespace: %s}\n",
			       ns));
	tu_kube_create(
	    admin,
	    tu_kube_doc(
		"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: "
		"%s}\nrules:\n- apiGroups: ['', apps, batch, resource.k8s.io, "
		"scheduling.k8s.io]\n  resources: [namespaces, serviceaccounts, configmaps, "
		"services, persistentvolumeclaims, pods, deployments, replicasets, statefulsets, "
		"daemonsets, jobs, cronjobs, resourceclaims, resourceclaimtemplates, workloads, "
		"podgroups]\n  verbs: [get, list, watch]\n",
		role));
	tu_kube_create(
	    admin,
	    tu_kube_doc("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\n"
			"metadata: {name: %s}\nroleRef: {apiGroup: rbac.authorization.k8s.io, "
			"kind: ClusterRole, name: %s}\nsubjects: [{kind: ServiceAccount, name: "
			"exporter, namespace: %s}]\n",
			role, role, ns));
	tu_kube_create(
	    admin,
	    tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: %s}\n",
			ns));
	tu_kube_create(
	    admin, tu_kube_doc("apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: %s}\n"
			       "stringData: {k: v}\n",
			       ns));
	kc = sa_kubeconfig(admin, s.dir, ns, "exporter");
	key_of(key, sizeof(key), "", "Secret", ns, "s");
	key_of(cmkey, sizeof(cmkey), "", "ConfigMap", ns, "cm");

	/* as the restricted agent: everything but the Secrets, and no SNAPSHOT_END */
	tu_msleep(1000); /* the binding reaches the authorizer's cache */
	s.k = tu_kube_connect(kc);
	agent_start(&s, 0, 0, 0);
	assert_int_equal(ds_exporter_pass(s.ex, &c, &err), -EPERM);
	assert_non_null(strstr(err.msg, "Secret"));
	wait_acked(&s, 30000);
	assert_int_equal(tu_target_count(s.t, 0, DS_RECORD_UPSERT, cmkey), 1);
	assert_int_equal(tu_target_count(s.t, 0, DS_RECORD_UPSERT, key), 0);
	assert_int_equal(tu_target_count(s.t, 0, DS_RECORD_SNAPSHOT_BEGIN, NULL), 1);
	assert_int_equal(tu_target_count(s.t, 0, DS_RECORD_SNAPSHOT_END, NULL), 0);
	agent_stop(&s);
	ds_kube_free(s.k);

	/* with the rights: the same snapshot goes on, only the Secret is new */
	s.k = admin;
	mark = tu_target_len(s.t);
	agent_start(&s, 0, 0, 0);
	c = pass(&s);
	wait_acked(&s, 30000);
	assert_int_equal(tu_target_count(s.t, mark, DS_RECORD_UPSERT, key), 1);
	assert_int_equal(tu_target_count(s.t, mark, DS_RECORD_UPSERT, cmkey), 0);
	assert_int_equal(tu_target_count(s.t, mark, DS_RECORD_SNAPSHOT_BEGIN, NULL), 0);
	assert_int_equal(tu_target_count(s.t, mark, DS_RECORD_SNAPSHOT_END, NULL), 1);
	assert_int_equal(tu_target_at(s.t, tu_target_len(s.t) - 1).op, DS_RECORD_SNAPSHOT_END);
	agent_stop(&s);

	/* restricted again: the Secret it cannot see is not tombstoned */
	mark = tu_target_len(s.t);
	s.k = tu_kube_connect(kc);
	agent_start(&s, 0, 0, 0);
	assert_int_equal(ds_exporter_pass(s.ex, &c, &err), -EPERM);
	wait_acked(&s, 30000);
	assert_int_equal(c.tombstoned, 0);
	assert_int_equal(tu_target_count(s.t, mark, 0, NULL), 0);
	agent_stop(&s);
	ds_kube_free(s.k);
	s.k = admin;
	tu_kube_delete(admin, "rbac.authorization.k8s.io/v1", "ClusterRoleBinding", NULL, role);
	tu_kube_delete(admin, "rbac.authorization.k8s.io/v1", "ClusterRole", NULL, role);
	free(kc);
	tu_kube_drop_namespace(s.k, ns);
	site_stop(&s);
}

static void wait_results(struct site *s, enum ds_result_status st, uint64_t n)
{
	uint64_t c[DS_RESULT_STATUS_MAX];
	long long end = tu_now_ms() + 20000;

	for (;;) {
		ds_exporter_result_counts(s->ex, c);
		if (c[st] >= n)
			return;
		if (tu_now_ms() > end)
			fail_msg("%llu %s results, not %llu", (unsigned long long)c[st],
				 ds_result_status_name(st), (unsigned long long)n);
		tu_msleep(20);
	}
}

/* The target's results: failures and skips logged once per object and
 * reason, kept per object, shown by the status from the files; a snapshot
 * the target asks for re-sends every object between its markers. */
static void test_itest_exporter__results_are_kept_and_a_requested_snapshot_resends_all(void **state)
{
	struct site s;
	char *ns, *log, key[700], part[300];
	ds_export_status *st = NULL;
	ds_err err = {0};
	size_t mark;
	int objects;

	(void)state;
	site_start(&s, tu_env("DS_KUBECONFIG_V1"));
	ns = new_ns(s.k, "results", s.label, true);
	tu_kube_create(
	    s.k,
	    tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: good, namespace: %s}\n",
			ns));
	tu_kube_create(
	    s.k,
	    tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bad1, namespace: %s}\n",
			ns));
	tu_kube_create(
	    s.k, tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: skip1, namespace: "
			     "%s}\n",
			     ns));
	agent_start(&s, 0, 0, 0);
	log_begin();
	pass(&s);
	wait_acked(&s, 30000);
	wait_results(&s, DS_RESULT_FAILED, 1);
	wait_results(&s, DS_RESULT_SKIPPED, 1);

	/* changed, failed again for the same reason: not logged again */
	tu_kube_merge(s.k, "v1", "ConfigMap", ns, "bad1", NULL, "{\"data\":{\"v\":\"2\"}}");
	pass(&s);
	wait_acked(&s, 30000);
	wait_results(&s, DS_RESULT_FAILED, 2);

	/* the target needs a snapshot: every object again, between its markers */
	mark = tu_target_len(s.t);
	ds_exporter_on_snapshot_required(s.ex, 0);
	assert_true(ds_exporter_snapshot_wanted(s.ex));
	pass(&s);
	assert_false(ds_exporter_snapshot_wanted(s.ex));
	wait_acked(&s, 30000);
	wait_results(&s, DS_RESULT_FAILED, 3);
	log = log_end();
	assert_int_equal(lines_with(log, "event=target_failed", "bad1", "gpu.nowhere.example"), 1);
	assert_int_equal(lines_with(log, "event=target_skipped", "skip1", "standby"), 1);
	assert_int_equal(lines_with(log, "event=target_", "good", NULL), 0);
	free(log);
	assert_int_equal(tu_target_at(s.t, mark).op, DS_RECORD_SNAPSHOT_BEGIN);
	assert_int_equal(tu_target_at(s.t, tu_target_len(s.t) - 1).op, DS_RECORD_SNAPSHOT_END);
	snprintf(part, sizeof(part), "/%s/", ns);
	objects = tu_target_count_like(s.t, mark, DS_RECORD_UPSERT, part);
	assert_true(objects >= 4); /* 3 ConfigMaps, the default ServiceAccount, ... */
	key_of(key, sizeof(key), "", "ConfigMap", ns, "good");
	assert_int_equal(tu_target_count(s.t, mark, DS_RECORD_UPSERT, key), 1);
	/* the manifest: every object the index holds (the Namespace too) */
	assert_int_equal(tu_target_at(s.t, tu_target_len(s.t) - 1).manifest_len,
			 (size_t)objects + 1);

	/* what `status` shows, with the agent stopped */
	agent_stop(&s);
	assert_int_equal(ds_export_status_read(s.state, 10, &st, &err), 0);
	assert_int_equal(st->backlog, 0);
	assert_int_equal(st->n_failures, 2);
	assert_int_equal(st->failures[0].status, DS_RESULT_FAILED);
	assert_string_equal(st->failures[0].name, "bad1");
	assert_non_null(strstr(st->failures[0].message, "gpu.nowhere.example"));
	assert_int_equal(st->failures[1].status, DS_RESULT_SKIPPED);
	assert_string_equal(st->failures[1].name, "skip1");
	for (size_t i = 0; i < st->n_kinds; i++)
		if (strcmp(st->kinds[i].kind, "ConfigMap") == 0) {
			assert_int_equal(st->kinds[i].objects, 3);
			assert_int_equal(st->kinds[i].failed, 1);
			assert_int_equal(st->kinds[i].skipped, 1);
			assert_int_equal(st->kinds[i].ok, 1);
		}
	ds_export_status_free(st);
	tu_kube_drop_namespace(s.k, ns);
	site_stop(&s);
}

/* A source serving resource.k8s.io/v1beta1 only: its claims as served; the
 * namespaces given as a list. */
static void test_itest_exporter__the_dra_version_the_source_serves(void **state)
{
	struct site s;
	char *ns, *other, key[700];

	(void)state;
	site_start(&s, tu_env("DS_KUBECONFIG_V1BETA1"));
	ns = new_ns(s.k, "beta", s.label, false);
	other = new_ns(s.k, "beta-other", s.label, true);
	tu_kube_create(
	    s.k, tu_kube_doc("apiVersion: resource.k8s.io/v1beta1\nkind: ResourceClaim\nmetadata: "
			     "{name: rc, namespace: %s}\nspec:\n  devices:\n    requests:\n"
			     "    - {name: gpu, deviceClassName: gpu.example.com}\n",
			     ns));
	tu_kube_create(
	    s.k,
	    tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: %s}\n",
			other));
	/* selected by name this time (the label is on the other one) */
	s.ns_list[0] = ns;
	agent_start(&s, 0, 0, 0);
	pass(&s);
	wait_acked(&s, 30000);
	key_of(key, sizeof(key), "resource.k8s.io", "ResourceClaim", ns, "rc");
	assert_int_equal(tu_target_count(s.t, 0, DS_RECORD_UPSERT, key), 1);
	for (size_t i = 0; i < tu_target_len(s.t); i++) {
		tu_arrival a = tu_target_at(s.t, i);

		if (strcmp(a.key, key) == 0) {
			assert_string_equal(a.api_version, "resource.k8s.io/v1beta1");
			assert_non_null(strstr(a.payload, "\"deviceClassName\""));
		}
	}
	assert_int_equal(tu_target_count_like(s.t, 0, 0, other), 0);
	tu_kube_drop_namespace(s.k, other);
	tu_kube_drop_namespace(s.k, ns);
	site_stop(&s);
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
	    cmocka_unit_test(
		test_itest_exporter__labelling_a_namespace_brings_it_unlabelling_stops_it),
	    cmocka_unit_test(
		test_itest_exporter__a_deleted_namespace_is_tombstoned_with_its_objects),
	    cmocka_unit_test(test_itest_exporter__a_kind_that_cannot_be_listed_is_left_alone),
	    cmocka_unit_test(
		test_itest_exporter__results_are_kept_and_a_requested_snapshot_resends_all),
	    cmocka_unit_test(test_itest_exporter__the_dra_version_the_source_serves),
	/* again with the namespace selected by name: read namespace by namespace */
#define BY_LIST(f) {#f "__by_list", f, list_on, list_off, NULL}
	    BY_LIST(test_itest_exporter__first_pass_ships_the_selected_objects_and_reports_skips),
	    BY_LIST(test_itest_exporter__a_restart_ships_only_what_changed),
	    BY_LIST(test_itest_exporter__watch_ships_changes_once_and_debounces_bursts),
	    BY_LIST(test_itest_exporter__an_expired_watch_relists_and_ships_only_the_difference),
	    BY_LIST(test_itest_exporter__a_deleted_namespace_is_tombstoned_with_its_objects),
	    BY_LIST(test_itest_exporter__results_are_kept_and_a_requested_snapshot_resends_all),
#undef BY_LIST
	};

	if (argc == 4 && strcmp(argv[1], "--pass") == 0)
		return child_pass(argv[2], argv[3]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
