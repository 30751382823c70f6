#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu_export.h"

#include "drasync/export_log.h"

#include "drasync/buf.h"
#include "drasync/clock.h"
#include "drasync/k8s_object.h"
#include "testutil.h"
#include "tu_kube.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The "_by_list" runs of a test (setup tu_export_list_on): the agent selects the last
 * namespace tu_export_new_ns() made `selected` by name, a fixed list, which it reads
 * namespace by namespace, instead of by the label, which it reads
 * cluster-wide. */
static bool by_list;
static char list_ns[128];

int tu_export_list_on(void **state)
{
	(void)state;
	by_list = true;
	list_ns[0] = '\0';
	return 0;
}

int tu_export_list_off(void **state)
{
	(void)state;
	by_list = false;
	list_ns[0] = '\0';
	return 0;
}

char *tu_export_new_ns(ds_kube *k, const char *prefix, const char *label, bool selected)
{
	char name[64], labels[128] = "", *ns;

	snprintf(name, sizeof(name), "itx-%s", prefix);
	if (selected)
		snprintf(labels, sizeof(labels), TU_EXPORT_LABEL ": '%s'", label);
	ns = tu_kube_new_namespace(k, name, labels);
	if (selected)
		snprintf(list_ns, sizeof(list_ns), "%s", ns);
	return ns;
}

bool tu_export_by_label(void *ud, const json_t *ns)
{
	const char *want = ud;
	const char *v = ds_json_str(ds_json_path(ns, "metadata.labels"), TU_EXPORT_LABEL);

	return v && strcmp(v, want) == 0;
}

/* ---- the target site and the source agent ---- */

/* In the first pass, after the ResourceClaimTemplates were listed and before
 * their watch starts: change one, write elsewhere, compact etcd. The watch
 * then starts from a resourceVersion that has expired. */
static void site_progress(void *ud, const char *kind, const ds_export_counts *so_far)
{
	struct tu_export_site *s = ud;

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

void tu_export_site_start(struct tu_export_site *s, const char *kubeconfig)
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
	struct tu_export_site *s = arg;
	ds_err err;

	ds_sender_run(s->tx, 0, 0, &err);
	return NULL;
}

static void wake(void *ud, uint64_t last)
{
	struct tu_export_site *s = ud;

	(void)last;
	if (s->tx)
		ds_sender_wake(s->tx);
}

void tu_export_agent_start(struct tu_export_site *s, long page, size_t batch, int watch_timeout)
{
	ds_exporter_config cfg;
	ds_sender_config sc;
	char db[1100];
	ds_err err = {0};

	ds_exporter_config_default(&cfg);
	cfg.on_event = ds_export_log_event; /* its lines are what the tests read */
	cfg.kube = s->k;
	cfg.state_dir = s->state;
	if (!s->ns_list[0] && by_list && list_ns[0])
		s->ns_list[0] = list_ns;
	if (s->ns_list[0]) {
		cfg.namespaces = s->ns_list;
		cfg.n_namespaces = 1;
	} else {
		cfg.ns_match = tu_export_by_label;
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
	if (s->manifest_part)
		cfg.manifest_part_entries = s->manifest_part;
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
	struct tu_export_site *s = arg;

	s->watch_rc = ds_exporter_watch(s->ex, &s->watch_err);
	return NULL;
}

void tu_export_agent_watch(struct tu_export_site *s)
{
	assert_int_equal(pthread_create(&s->ex_thread, NULL, watch_main, s), 0);
	s->watching = true;
}

void tu_export_wait_acked(struct tu_export_site *s, int timeout_ms)
{
	long long end = ds_clock_mono_ms() + timeout_ms;

	while (ds_sender_acked(s->tx) < ds_exporter_last_seq(s->ex)) {
		if (ds_clock_mono_ms() > end)
			fail_msg("the target acknowledged %llu of %llu",
				 (unsigned long long)ds_sender_acked(s->tx),
				 (unsigned long long)ds_exporter_last_seq(s->ex));
		tu_msleep(20);
	}
}

void tu_export_settle(struct tu_export_site *s, int quiet_ms)
{
	size_t n = tu_target_len(s->t);
	long long last = ds_clock_mono_ms(), end = ds_clock_mono_ms() + 60000;

	while (ds_clock_mono_ms() - last < quiet_ms) {
		tu_msleep(50);
		if (tu_target_len(s->t) != n ||
		    ds_sender_acked(s->tx) < ds_exporter_last_seq(s->ex)) {
			n = tu_target_len(s->t);
			last = ds_clock_mono_ms();
		}
		if (ds_clock_mono_ms() > end)
			fail_msg("the stream does not settle");
	}
}

void tu_export_agent_stop(struct tu_export_site *s)
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

void tu_export_site_stop(struct tu_export_site *s)
{
	if (s->ex)
		tu_export_agent_stop(s);
	tu_target_stop(s->t);
	ds_kube_free(s->k);
	free(s->dir);
}

ds_export_counts tu_export_pass(struct tu_export_site *s)
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

void tu_log_begin(void)
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

char *tu_log_text(void)
{
	char *t;

	fflush(stderr);
	pthread_mutex_lock(&cap.mu);
	t = strdup(cap.text ? cap.text : "");
	pthread_mutex_unlock(&cap.mu);
	return t;
}

char *tu_log_end(void)
{
	char *t;

	fflush(stderr);
	dup2(cap.saved, 2); /* the pipe's last writer closes: the tee ends */
	pthread_join(cap.thread, NULL);
	close(cap.rd);
	close(cap.saved);
	cap.on = false;
	t = tu_log_text();
	return t;
}

int tu_lines_with(const char *text, const char *a, const char *b, const char *c)
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

void tu_key_of(char *buf, size_t size, const char *group, const char *kind, const char *ns,
	       const char *name)
{
	snprintf(buf, size, "%s/%s/%s/%s", group, kind, ns ? ns : "", name);
}
