/*
 * The exporter's namespace selection and its results against the real source
 * clusters (tests/kube fixtures), feeding a real in-process target over CURVE
 * on loopback (tu_export, tu_target): namespaces labelled, unlabelled and
 * deleted while it watches; a kind it cannot list; results kept and a
 * requested snapshot; the DRA version the source serves.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/buf.h"
#include "drasync/clock.h"
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

/* A namespace labelled while the agent watches brings its objects; the label
 * removed stops them and deletes nothing on the target. */
static void test_itest_exporter__labelling_a_namespace_brings_it_unlabelling_stops_it(void **state)
{
	struct tu_export_site s;
	char *ns, *log, key[700], nskey[700], patch[200];
	size_t mark;

	(void)state;
	tu_export_site_start(&s, tu_env("DS_KUBECONFIG_V1"));
	ns = tu_export_new_ns(s.k, "label", s.label, false);
	tu_kube_create(
	    s.k,
	    tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: %s}\n"
			"data: {v: '0'}\n",
			ns));
	tu_kube_create(
	    s.k, tu_kube_doc("apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: %s}\n"
			     "stringData: {k: v}\n",
			     ns));
	tu_export_agent_start(&s, 0, 0, 0);
	tu_log_begin();
	tu_export_agent_watch(&s);
	tu_msleep(1500);
	tu_key_of(key, sizeof(key), "", "ConfigMap", ns, "cm");
	tu_key_of(nskey, sizeof(nskey), "", "Namespace", NULL, ns);
	assert_int_equal(tu_target_count_like(s.t, 0, 0, ns), 0);

	snprintf(patch, sizeof(patch),
		 "{\"metadata\":{\"labels\":{\"" TU_EXPORT_LABEL "\":\"%s\"}}}", s.label);
	tu_kube_merge(s.k, "v1", "Namespace", NULL, ns, NULL, patch);
	tu_target_wait(s.t, 0, DS_RECORD_UPSERT, key, 15000);
	tu_export_settle(&s, 1000);
	assert_int_equal(tu_target_count(s.t, 0, DS_RECORD_UPSERT, nskey), 1);
	tu_key_of(key, sizeof(key), "", "Secret", ns, "s");
	assert_int_equal(tu_target_count(s.t, 0, DS_RECORD_UPSERT, key), 1);

	/* unlabelled: nothing is deleted, later changes are not sent */
	mark = tu_target_len(s.t);
	tu_kube_merge(s.k, "v1", "Namespace", NULL, ns, NULL,
		      "{\"metadata\":{\"labels\":{\"" TU_EXPORT_LABEL "\":null}}}");
	tu_export_settle(&s, 1500);
	tu_kube_merge(s.k, "v1", "ConfigMap", ns, "cm", NULL, "{\"data\":{\"v\":\"after\"}}");
	tu_kube_delete(s.k, "v1", "Secret", ns, "s");
	tu_export_settle(&s, 1500);
	log = tu_log_end();
	assert_int_equal(tu_target_count(s.t, mark, 0, NULL), 0);
	assert_int_equal(tu_lines_with(log, "event=namespace_unselected", ns, NULL), 1);
	assert_int_equal(tu_lines_with(log, "event=namespace_selected", ns, NULL), 1);
	free(log);
	/* and a pass after a restart does not tombstone them either */
	tu_export_agent_stop(&s);
	tu_export_agent_start(&s, 0, 0, 0);
	tu_export_pass(&s);
	tu_export_wait_acked(&s, 30000);
	assert_int_equal(tu_target_count(s.t, mark, 0, NULL), 0);
	tu_kube_drop_namespace(s.k, ns);
	tu_export_site_stop(&s);
}

/* A selected namespace deleted while the agent watches: tombstones for its
 * objects and for the Namespace itself (a real deletion, unlike an unlabel). */
static void test_itest_exporter__a_deleted_namespace_is_tombstoned_with_its_objects(void **state)
{
	struct tu_export_site s;
	char *ns, key[700], nskey[700];
	struct ds_kube_resource r;
	struct ds_kube_delete_opts d = {"Background", NULL, NULL, -1};
	ds_kube_error ke;
	size_t mark;

	(void)state;
	tu_export_site_start(&s, tu_env("DS_KUBECONFIG_V1"));
	ns = tu_export_new_ns(s.k, "delete", s.label, true);
	tu_kube_create(
	    s.k, tu_kube_doc(
		     "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: %s}\n", ns));
	tu_kube_create(
	    s.k, tu_kube_doc("apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: %s}\n"
			     "stringData: {k: v}\n",
			     ns));
	tu_export_agent_start(&s, 0, 0, 0);
	tu_export_agent_watch(&s);
	tu_key_of(key, sizeof(key), "", "ConfigMap", ns, "cm");
	tu_key_of(nskey, sizeof(nskey), "", "Namespace", NULL, ns);
	tu_target_wait(s.t, 0, DS_RECORD_UPSERT, key, 30000);
	tu_export_settle(&s, 1000);
	mark = tu_target_len(s.t);
	r = tu_kube_resource(s.k, "v1", "Namespace");
	TU_KUBE_CHECK(ds_kube_delete(s.k, &r, NULL, ns, &d, &ke), ke);
	tu_target_wait(s.t, mark, DS_RECORD_DELETE, nskey, 60000);
	tu_export_settle(&s, 1000);
	assert_int_equal(tu_target_count(s.t, mark, DS_RECORD_DELETE, key), 1);
	tu_key_of(key, sizeof(key), "", "Secret", ns, "s");
	assert_int_equal(tu_target_count(s.t, mark, DS_RECORD_DELETE, key), 1);
	assert_int_equal(tu_target_count(s.t, mark, DS_RECORD_UPSERT, nskey) <= 1,
			 1); /* Terminating */
	free(ns);
	tu_export_site_stop(&s);
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
	struct tu_export_site s;
	char *ns, *kc, role[64], key[700], cmkey[700];
	ds_kube *admin;
	ds_export_counts c;
	ds_err err = {0};
	size_t mark;

	(void)state;
	tu_export_site_start(&s, tu_env("DS_KUBECONFIG_V1"));
	admin = s.k;
	ns = tu_export_new_ns(admin, "rbac", s.label, true);
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
		"services, persistentvolumeclaims, resourcequotas, limitranges, pods, "
		"deployments, replicasets, statefulsets, "
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
	tu_key_of(key, sizeof(key), "", "Secret", ns, "s");
	tu_key_of(cmkey, sizeof(cmkey), "", "ConfigMap", ns, "cm");

	/* as the restricted agent: everything but the Secrets, and no SNAPSHOT_END */
	tu_msleep(1000); /* the binding reaches the authorizer's cache */
	s.k = tu_kube_connect(kc);
	tu_export_agent_start(&s, 0, 0, 0);
	assert_int_equal(ds_exporter_pass(s.ex, &c, &err), -EPERM);
	assert_non_null(strstr(err.msg, "Secret"));
	tu_export_wait_acked(&s, 30000);
	assert_int_equal(tu_target_count(s.t, 0, DS_RECORD_UPSERT, cmkey), 1);
	assert_int_equal(tu_target_count(s.t, 0, DS_RECORD_UPSERT, key), 0);
	assert_int_equal(tu_target_count(s.t, 0, DS_RECORD_SNAPSHOT_BEGIN, NULL), 1);
	assert_int_equal(tu_target_count(s.t, 0, DS_RECORD_SNAPSHOT_END, NULL), 0);
	tu_export_agent_stop(&s);
	ds_kube_free(s.k);

	/* with the rights: the same snapshot goes on, only the Secret is new */
	s.k = admin;
	mark = tu_target_len(s.t);
	tu_export_agent_start(&s, 0, 0, 0);
	c = tu_export_pass(&s);
	tu_export_wait_acked(&s, 30000);
	assert_int_equal(tu_target_count(s.t, mark, DS_RECORD_UPSERT, key), 1);
	assert_int_equal(tu_target_count(s.t, mark, DS_RECORD_UPSERT, cmkey), 0);
	assert_int_equal(tu_target_count(s.t, mark, DS_RECORD_SNAPSHOT_BEGIN, NULL), 0);
	assert_int_equal(tu_target_count(s.t, mark, DS_RECORD_SNAPSHOT_END, NULL), 1);
	assert_int_equal(tu_target_at(s.t, tu_target_len(s.t) - 1).op, DS_RECORD_SNAPSHOT_END);
	tu_export_agent_stop(&s);

	/* restricted again: the Secret it cannot see is not tombstoned */
	mark = tu_target_len(s.t);
	s.k = tu_kube_connect(kc);
	tu_export_agent_start(&s, 0, 0, 0);
	assert_int_equal(ds_exporter_pass(s.ex, &c, &err), -EPERM);
	tu_export_wait_acked(&s, 30000);
	assert_int_equal(c.tombstoned, 0);
	assert_int_equal(tu_target_count(s.t, mark, 0, NULL), 0);
	tu_export_agent_stop(&s);
	ds_kube_free(s.k);
	s.k = admin;
	tu_kube_delete(admin, "rbac.authorization.k8s.io/v1", "ClusterRoleBinding", NULL, role);
	tu_kube_delete(admin, "rbac.authorization.k8s.io/v1", "ClusterRole", NULL, role);
	free(kc);
	tu_kube_drop_namespace(s.k, ns);
	tu_export_site_stop(&s);
}

static void wait_results(struct tu_export_site *s, enum ds_result_status st, uint64_t n)
{
	uint64_t c[DS_RESULT_STATUS_MAX];
	long long end = ds_clock_mono_ms() + 20000;

	for (;;) {
		ds_exporter_result_counts(s->ex, c);
		if (c[st] >= n)
			return;
		if (ds_clock_mono_ms() > end)
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
	struct tu_export_site s;
	char *ns, *log, key[700], part[300];
	ds_export_status *st = NULL;
	ds_err err = {0};
	size_t mark;
	int objects;

	(void)state;
	tu_export_site_start(&s, tu_env("DS_KUBECONFIG_V1"));
	ns = tu_export_new_ns(s.k, "results", s.label, true);
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
	tu_export_agent_start(&s, 0, 0, 0);
	tu_log_begin();
	tu_export_pass(&s);
	tu_export_wait_acked(&s, 30000);
	wait_results(&s, DS_RESULT_FAILED, 1);
	wait_results(&s, DS_RESULT_SKIPPED, 1);

	/* changed, failed again for the same reason: not logged again */
	tu_kube_merge(s.k, "v1", "ConfigMap", ns, "bad1", NULL, "{\"data\":{\"v\":\"2\"}}");
	tu_export_pass(&s);
	tu_export_wait_acked(&s, 30000);
	wait_results(&s, DS_RESULT_FAILED, 2);

	/* the target needs a snapshot: every object again, between its markers */
	mark = tu_target_len(s.t);
	ds_exporter_on_snapshot_required(s.ex, 0);
	assert_true(ds_exporter_snapshot_wanted(s.ex));
	tu_export_pass(&s);
	assert_false(ds_exporter_snapshot_wanted(s.ex));
	tu_export_wait_acked(&s, 30000);
	wait_results(&s, DS_RESULT_FAILED, 3);
	log = tu_log_end();
	assert_int_equal(tu_lines_with(log, "event=target_failed", "bad1", "gpu.nowhere.example"),
			 1);
	assert_int_equal(tu_lines_with(log, "event=target_skipped", "skip1", "standby"), 1);
	assert_int_equal(tu_lines_with(log, "event=target_", "good", NULL), 0);
	free(log);
	assert_int_equal(tu_target_at(s.t, mark).op, DS_RECORD_SNAPSHOT_BEGIN);
	assert_int_equal(tu_target_at(s.t, tu_target_len(s.t) - 1).op, DS_RECORD_SNAPSHOT_END);
	snprintf(part, sizeof(part), "/%s/", ns);
	objects = tu_target_count_like(s.t, mark, DS_RECORD_UPSERT, part);
	assert_true(objects >=
		    3); /* the 3 ConfigMaps (the default ServiceAccount is the target's) */
	tu_key_of(key, sizeof(key), "", "ConfigMap", ns, "good");
	assert_int_equal(tu_target_count(s.t, mark, DS_RECORD_UPSERT, key), 1);
	/* the manifest: every object the index holds (the Namespace too) */
	assert_int_equal(tu_target_at(s.t, tu_target_len(s.t) - 1).manifest_len,
			 (size_t)objects + 1);

	/* what `status` shows, with the agent stopped */
	tu_export_agent_stop(&s);
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
	tu_export_site_stop(&s);
}

/* A source serving resource.k8s.io/v1beta1 only: its claims as served; the
 * namespaces given as a list. */
static void test_itest_exporter__the_dra_version_the_source_serves(void **state)
{
	struct tu_export_site s;
	char *ns, *other, key[700];

	(void)state;
	tu_export_site_start(&s, tu_env("DS_KUBECONFIG_V1BETA1"));
	ns = tu_export_new_ns(s.k, "beta", s.label, false);
	other = tu_export_new_ns(s.k, "beta-other", s.label, true);
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
	tu_export_agent_start(&s, 0, 0, 0);
	tu_export_pass(&s);
	tu_export_wait_acked(&s, 30000);
	tu_key_of(key, sizeof(key), "resource.k8s.io", "ResourceClaim", ns, "rc");
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
	tu_export_site_stop(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(
		test_itest_exporter__labelling_a_namespace_brings_it_unlabelling_stops_it),
	    cmocka_unit_test(
		test_itest_exporter__a_deleted_namespace_is_tombstoned_with_its_objects),
	    cmocka_unit_test(test_itest_exporter__a_kind_that_cannot_be_listed_is_left_alone),
	    cmocka_unit_test(
		test_itest_exporter__results_are_kept_and_a_requested_snapshot_resends_all),
	    cmocka_unit_test(test_itest_exporter__the_dra_version_the_source_serves),
	/* again with the namespace selected by name: read namespace by namespace */
#define BY_LIST(f) {#f "__by_list", f, tu_export_list_on, tu_export_list_off, NULL}
	    BY_LIST(test_itest_exporter__a_deleted_namespace_is_tombstoned_with_its_objects),
	    BY_LIST(test_itest_exporter__results_are_kept_and_a_requested_snapshot_resends_all),
#undef BY_LIST
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
