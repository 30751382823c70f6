/*
 * The applier when the target's API server cannot be reached (a real socket
 * that refuses): nothing is lost, objects wait in the ledger with a backoff,
 * and what can be decided without the API (a garbage payload) is decided.
 * The behaviour against a real API server is in itest_applier.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/applier.h"
#include "dstest.h"
#include "testutil.h"
#include "tu_ledger.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define SOURCE "prod-east"

/* A loopback port nobody listens on: bound, then closed. */
static int dead_port(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	int port;

	assert_true(fd >= 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	port = ntohs(sa.sin_port);
	close(fd);
	return port;
}

static ds_kube *unreachable(const char *dir)
{
	struct ds_kube_transport_opts o;
	ds_kubeconfig *kc = NULL;
	ds_kube *k = NULL;
	ds_err err = {0};
	char path[1024], text[600];

	snprintf(path, sizeof(path), "%s/kubeconfig", dir);
	snprintf(text, sizeof(text),
		 "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
		 "clusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:%d', "
		 "insecure-skip-tls-verify: true}\n"
		 "users:\n- name: u\n  user: {token: t0k}\n"
		 "contexts:\n- name: t\n  context: {cluster: c, user: u}\n",
		 dead_port());
	tu_write_file(path, text);
	ds_kube_transport_opts_init(&o);
	o.max_retries = 0;
	o.qps = 0;
	if (ds_kubeconfig_load(&kc, path, NULL, &err) < 0)
		fail_msg("kubeconfig: %s", err.msg);
	if (ds_kube_new(&k, &kc, &o, &err) < 0)
		fail_msg("client: %s", err.msg);
	return k;
}

static void test_applier__unreachable_api_keeps_objects_pending_with_backoff(void **state)
{
	char *dir = tu_mkdtemp("applier-down");
	char path[1024], *p1 = NULL;
	const char *garbage = "not json at all";
	ds_target_config *cfg = dt_config("apiVersion: drasync.io/v1alpha1\nkind: TargetConfig\n"
					  "mode: migrate\n"
					  "sources: [{name: " SOURCE ", namespaces: [ml-team]}]\n");
	ds_applier_config ac = {0};
	ds_object_state *st = NULL;
	ds_object_state_row r;
	ds_applier_stats s;
	ds_applier *a = NULL;
	ds_record recs[2];
	ds_err err = {0};
	tu_ledger l;
	ds_kube *k;
	json_t *cm = dt_object("apiVersion: v1\nkind: ConfigMap\n"
			       "metadata: {name: cfg, namespace: ml-team}\ndata: {a: '1'}\n");

	(void)state;
	snprintf(path, sizeof(path), "%s/ledger.db", dir);
	tu_ledger_open(&l, path, SOURCE);
	k = unreachable(dir);
	ac.ledger_path = path;
	ac.kube = k;
	ac.cfg = cfg;
	ac.backoff_ms = 60000;
	assert_int_equal(ds_applier_new(&a, &ac, &err), 0);

	recs[0] = tu_record_upsert(cm, "uid-cfg", &p1);
	memset(&recs[1], 0, sizeof(recs[1]));
	recs[1].op = DS_RECORD_UPSERT;
	recs[1].api_version = "v1";
	recs[1].kind = "ConfigMap";
	recs[1].ns = "ml-team";
	recs[1].name = "garbage";
	recs[1].payload = (const uint8_t *)garbage;
	recs[1].payload_len = strlen(garbage);
	tu_ledger_commit(&l, recs, 2, ds_applier_record_handler, a);

	assert_int_equal(ds_applier_pass(a, &err), 2);
	ds_applier_stats_get(a, &s);
	assert_int_equal(s.failed, 1);
	assert_int_equal(s.retried, 1);
	assert_int_equal(s.applied, 0);
	/* backing off: the next pass has nothing due */
	assert_int_equal(ds_applier_pass(a, &err), 0);

	assert_int_equal(ds_object_state_open(&st, path, &err), 0);
	assert_int_equal(ds_object_state_get(st, SOURCE, "core/ConfigMap/ml-team/cfg", &r, &err),
			 0);
	assert_int_equal(r.state, DS_APPLY_PENDING);
	assert_int_equal(r.attempts, 1);
	assert_non_null(r.reason);
	assert_non_null(strstr(r.reason, "trying again"));
	assert_false(r.has_applied_hash);
	ds_object_state_row_dispose(&r);
	assert_int_equal(
	    ds_object_state_get(st, SOURCE, "core/ConfigMap/ml-team/garbage", &r, &err), 0);
	assert_int_equal(r.state, DS_APPLY_FAILED);
	assert_non_null(strstr(r.reason, "not a JSON object"));
	ds_object_state_row_dispose(&r);

	ds_object_state_free(st);
	ds_applier_free(a);
	ds_kube_free(k);
	tu_ledger_close(&l);
	ds_target_config_free(cfg);
	json_decref(cm);
	free(p1);
	free(dir);
}

struct events {
	int n, held, with_hold_entry;
	char last_reason[300];
};

static void on_event(void *ud, const ds_applier_event *ev)
{
	struct events *e = ud;

	e->n++;
	snprintf(e->last_reason, sizeof(e->last_reason), "%s", ev->reason ? ev->reason : "");
	if (ev->state != DS_APPLY_HELD)
		return;
	e->held++;
	assert_string_equal(ev->key, "core/Pod/ml-team/standby-pod");
	for (size_t i = ev->report_first; i < ev->report_first + ev->report_n; i++)
		if (ds_report_get(ev->report, i)->type == DS_REPORT_HOLD)
			e->with_hold_entry++;
}

static void test_applier__standby_pod_is_held_in_the_ledger_without_an_api_call(void **state)
{
	char *dir = tu_mkdtemp("applier-standby");
	char path[1024], *p1 = NULL;
	ds_target_config *cfg = dt_config("apiVersion: drasync.io/v1alpha1\nkind: TargetConfig\n"
					  "mode: standby\n"
					  "sources: [{name: " SOURCE ", namespaces: [ml-team]}]\n");
	ds_applier_config ac = {0};
	struct events ev = {0};
	ds_object_state *st = NULL;
	ds_object_state_row r;
	ds_applier_stats s;
	ds_applier *a = NULL;
	ds_record rec;
	ds_err err = {0};
	tu_ledger l;
	ds_kube *k;
	json_t *pod = dt_object("apiVersion: v1\nkind: Pod\n"
				"metadata: {name: standby-pod, namespace: ml-team}\n"
				"spec:\n  containers:\n  - {name: c, image: busybox}\n");

	(void)state;
	snprintf(path, sizeof(path), "%s/ledger.db", dir);
	tu_ledger_open(&l, path, SOURCE);
	k = unreachable(dir);
	ac.ledger_path = path;
	ac.kube = k;
	ac.cfg = cfg;
	ac.on_event = on_event;
	ac.event_ud = &ev;
	assert_int_equal(ds_applier_new(&a, &ac, &err), 0);
	rec = tu_record_upsert(pod, "uid-pod", &p1);
	tu_ledger_commit(&l, &rec, 1, NULL, NULL);
	assert_int_equal(ds_applier_pass(a, &err), 1);
	ds_applier_stats_get(a, &s);
	assert_int_equal(s.held, 1);
	assert_int_equal(s.api_writes + s.api_reads, 0);
	assert_int_equal(ev.n, 1);
	assert_int_equal(ev.held, 1);
	assert_int_equal(ev.with_hold_entry, 1);
	assert_int_equal(ds_object_state_open(&st, path, &err), 0);
	assert_int_equal(ds_object_state_get(st, SOURCE, "core/Pod/ml-team/standby-pod", &r, &err),
			 0);
	assert_int_equal(r.state, DS_APPLY_HELD);
	assert_non_null(r.reason);
	ds_object_state_row_dispose(&r);
	/* held stays held: not picked again */
	assert_int_equal(ds_applier_pass(a, &err), 0);

	ds_object_state_free(st);
	ds_applier_free(a);
	ds_kube_free(k);
	tu_ledger_close(&l);
	ds_target_config_free(cfg);
	json_decref(pod);
	free(p1);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_applier__unreachable_api_keeps_objects_pending_with_backoff),
	    cmocka_unit_test(test_applier__standby_pod_is_held_in_the_ledger_without_an_api_call),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
