/*
 * A lost state directory (docs/operations.md) on the real v1 cluster, with
 * drasync-target as processes fed over a real link (tu_site): a namespace is
 * synced in standby and failed over; the target is stopped and its ledger
 * truncated to 0 bytes. `run` then refuses (exit 1, the cluster's ledger id
 * and --new-ledger in the message) and writes nothing; with a ledger of another
 * identity its apply stage stops, naming both ids; `run --new-ledger` starts, reads the
 * namespace's mode back from its drasync.io/mode annotation, and the source's
 * records applied again leave the Deployment active (its replicas, not 0).
 * DS_SOAK=1 (scripts/soak.sh) adds 50 namespaces of the same shape beside it:
 * every one's mode is read back, every Deployment stays active.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/ledger_identity.h"
#include "dstest.h"
#include "testutil.h"
#include "tu_kube.h"
#include "tu_load.h"
#include "tu_site.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SOURCE "prod-east"
#define SRC_NS "ml-team"
#define MAX_EXTRA 50

static struct {
	tu_site s;
	ds_kube *k;
	char *dst;   /* the target namespace (SRC_NS mapped there) */
	char *idns;  /* the agent's own namespace, where the ConfigMap is */
	int n_extra; /* namespaces beside dst (DS_SOAK=1): source src_extra[i] to extra[i] */
	char extra[MAX_EXTRA][300], src_extra[MAX_EXTRA][32];
} F;

static int setup(void **state)
{
	char *maps = NULL;
	size_t maps_len = 0;
	FILE *mf = open_memstream(&maps, &maps_len);

	(void)state;
	assert_non_null(mf);
	memset(&F, 0, sizeof(F));
	tu_site_init(&F.s, "ledgerid", tu_env("DS_KUBECONFIG_V1"), SOURCE);
	F.k = tu_kube_connect(F.s.kubeconfig);
	F.dst = tu_kube_new_namespace(F.k, "itid", "");
	F.idns = tu_kube_new_namespace(F.k, "itidagent", "");
	F.n_extra = tu_soak() ? MAX_EXTRA : 0;
	for (int i = 0; i < F.n_extra; i++) {
		snprintf(F.extra[i], sizeof(F.extra[i]), "%s-x%02d", F.dst, i);
		snprintf(F.src_extra[i], sizeof(F.src_extra[i]), SRC_NS "-x%02d", i);
		fprintf(mf, ", %s: %s", F.src_extra[i], F.extra[i]);
	}
	assert_int_equal(fclose(mf), 0);
	{
		char *cfg = NULL;

		assert_true(asprintf(&cfg,
				     "mode: standby\n"
				     "namespaceMappings: {%s: %s%s}\n"
				     "identity: {namespace: %s}\n",
				     SRC_NS, F.dst, maps, F.idns) > 0);
		tu_site_write_config(&F.s, cfg);
		free(cfg);
	}
	free(maps);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	tu_site_dispose(&F.s);
	for (int i = 0; i < F.n_extra; i++)
		tu_kube_drop_namespace(F.k, strdup(F.extra[i])); /* takes the name */
	tu_kube_drop_namespace(F.k, F.dst);
	tu_kube_drop_namespace(F.k, F.idns);
	ds_kube_free(F.k);
	memset(&F, 0, sizeof(F));
	return 0;
}

static json_t *deployment(const char *ns, int replicas)
{
	return json_pack(
	    "{s:s, s:s, s:{s:s, s:s, s:s}, s:{s:i, s:{s:{s:s}}, s:{s:{s:{s:s}}, s:{s:[{s:s, "
	    "s:s}]}}}}",
	    "apiVersion", "apps/v1", "kind", "Deployment", "metadata", "name", "trainer",
	    "namespace", ns, "uid", "uid-trainer", "spec", "replicas", replicas, "selector",
	    "matchLabels", "app", "trainer", "template", "metadata", "labels", "app", "trainer",
	    "spec", "containers", "name", "main", "image", "registry.k8s.io/pause:3.10");
}

/* The Deployment in SRC_NS, and each extra namespace with its own; the last seq. */
static uint64_t push_deployment(int replicas)
{
	json_t *objs[1 + 2 * MAX_EXTRA];
	size_t n = 0;

	objs[n++] = deployment(SRC_NS, replicas);
	for (int i = 0; i < F.n_extra; i++) {
		objs[n++] =
		    json_pack("{s:s, s:s, s:{s:s, s:s}}", "apiVersion", "v1", "kind", "Namespace",
			      "metadata", "name", F.src_extra[i], "uid", F.src_extra[i]);
		objs[n++] = deployment(F.src_extra[i], replicas);
	}
	return tu_site_push(&F.s, objs, n);
}

static json_t *get(const char *api, const char *kind, const char *ns, const char *name)
{
	struct ds_kube_resource r = tu_kube_resource(F.k, api, kind);
	ds_kube_error ke;
	json_t *o = NULL;

	if (ds_kube_get(F.k, &r, ns, name, NULL, &o, &ke) < 0)
		return NULL;
	return o;
}

static long long replicas_in(const char *ns)
{
	json_t *o = get("apps/v1", "Deployment", ns, "trainer");
	json_t *v = o ? dt_get(o, "/spec/replicas") : NULL;
	long long n = json_is_integer(v) ? (long long)json_integer_value(v) : -1;

	json_decref(o);
	return n;
}

static long long replicas(void)
{
	return replicas_in(F.dst);
}

/* Deployment trainer at `want` replicas in dst and every extra namespace. */
static void wait_replicas(long long want, int timeout_ms)
{
	long long end = tu_now_ms() + timeout_ms;

	for (int i = -1; i < F.n_extra; i++) {
		const char *ns = i < 0 ? F.dst : F.extra[i];

		while (replicas_in(ns) != want) {
			if (tu_now_ms() > end) {
				char *log = tu_site_run_log(&F.s);
				size_t len = strlen(log);

				fail_msg("Deployment %s/trainer has replicas %lld, not %lld, after "
					 "%d ms:\n...%s",
					 ns, replicas_in(ns), want, timeout_ms,
					 len > 6000 ? log + len - 6000 : log);
			}
			tu_msleep(200);
		}
	}
}

/* The ConfigMap's data.ledgerId ("" when none). */
static void cluster_id(char *buf, size_t size)
{
	json_t *cm = get("v1", "ConfigMap", F.idns, DS_LEDGER_CONFIGMAP);
	const char *id = cm ? dt_str(cm, "/data/ledgerId") : NULL;

	snprintf(buf, size, "%s", id ? id : "");
	json_decref(cm);
}

static void ledger_id(char *buf, size_t size)
{
	ds_ledger_identity id;
	ds_err err = {0};

	assert_true(ds_ledger_identity_read(F.s.ledger, &id, &err) >= 0);
	snprintf(buf, size, "%s", id.id);
}

static void run_once(struct tu_run *r, const char *extra)
{
	tu_run(r, NULL,
	       (const char *[]){tu_env("DS_TARGET_BIN"), "run", "--config", F.s.cfg, "--kubeconfig",
				F.s.kubeconfig, extra, NULL});
}

/* The ledger and its -wal and -shm: a 0-byte ledger.db is what a lost volume leaves. */
static void lose_ledger(void)
{
	char p[1200];

	snprintf(p, sizeof(p), "%s-wal", F.s.ledger);
	unlink(p);
	snprintf(p, sizeof(p), "%s-shm", F.s.ledger);
	unlink(p);
	assert_int_equal(truncate(F.s.ledger, 0), 0);
}

static void assert_in(const char *what, const char *text, const char *want)
{
	if (!strstr(text, want))
		fail_msg("%s has no '%s':\n%s", what, want, text);
}

static void
test_itest_ledger_identity__lost_ledger_refused_then_new_ledger_keeps_active(void **state)
{
	char first[80], now[80], other_id[80], want[300];
	int wait_ms = tu_soak() ? 300000 : 60000;
	long long t, refused_ms, adopted_ms, resynced_ms;
	struct tu_run r;
	json_t *ns;
	char *log;
	struct stat sb;

	(void)state;
	/* A first start: the identity made, in the ledger and in the cluster. */
	tu_site_agent_start(&F.s);
	tu_site_sender_start(&F.s);
	tu_site_wait_acked(&F.s, push_deployment(2), 30000);
	wait_replicas(0, wait_ms); /* standby */
	ledger_id(first, sizeof(first));
	assert_int_equal(strlen(first), 32);
	cluster_id(now, sizeof(now));
	assert_string_equal(now, first);
	log = tu_site_run_log(&F.s);
	assert_in("run's log", log, "event=ledger_identity verdict=first");
	free(log);

	/* Failover: active, and the mode on the Namespace too. */
	tu_site_sender_stop(&F.s);
	tu_run(&r, NULL,
	       (const char *[]){tu_env("DS_TARGET_BIN"), "failover", "--config", F.s.cfg,
				"--kubeconfig", F.s.kubeconfig, "--timeout", "60s", "--force",
				NULL});
	if (r.status != 0)
		fail_msg("failover: exit %d\n%s\n%s", r.status, r.out, r.err);
	tu_run_dispose(&r);
	wait_replicas(2, wait_ms);
	ns = get("v1", "Namespace", NULL, F.dst);
	assert_non_null(ns);
	assert_string_equal(dt_str(ns, "/metadata/annotations/drasync.io~1mode"), "active");
	assert_string_equal(dt_str(ns, "/metadata/annotations/drasync.io~1mode-by"), "failover");
	assert_non_null(dt_str(ns, "/metadata/annotations/drasync.io~1mode-since"));
	json_decref(ns);

	/* The volume lost: a 0-byte ledger is refused, and left as it is. */
	tu_site_agent_sigterm(&F.s);
	lose_ledger();
	t = tu_now_ms();
	run_once(&r, NULL);
	refused_ms = tu_now_ms() - t;
	if (r.status != 1)
		fail_msg("run on a lost ledger: exit %d, not 1\n%s\n%s", r.status, r.out, r.err);
	snprintf(want, sizeof(want), "the target cluster had ledger %s", first);
	assert_in("run's stderr", r.err, want);
	snprintf(want, sizeof(want), "ConfigMap %s/" DS_LEDGER_CONFIGMAP, F.idns);
	assert_in("run's stderr", r.err, want);
	assert_in("run's stderr", r.err, "is new: restore the state directory");
	assert_in("run's stderr", r.err, "--new-ledger");
	assert_in("run's stderr", r.err, "event=ledger_identity_refused verdict=lost");
	tu_run_dispose(&r);
	assert_int_equal(stat(F.s.ledger, &sb), 0);
	assert_int_equal(sb.st_size, 0);
	cluster_id(now, sizeof(now));
	assert_string_equal(now, first);

	/* failover on it is refused too, before it changes anything. */
	tu_run(&r, NULL,
	       (const char *[]){tu_env("DS_TARGET_BIN"), "failback", "--config", F.s.cfg,
				"--kubeconfig", F.s.kubeconfig, NULL});
	assert_int_not_equal(r.status, 0);
	tu_run_dispose(&r);
	assert_int_equal(replicas(), 2);

	/* A ledger of another identity: refused, both ids said. */
	{
		ds_ledger_identity other;
		ds_err err = {0};

		assert_int_equal(ds_ledger_identity_ensure(F.s.ledger, &other, &err), 1);
		snprintf(other_id, sizeof(other_id), "%s", other.id);
	}
	/* It has an identity: the link opens at once, the apply stage refuses it. */
	tu_site_agent_start(&F.s);
	{
		long long end = tu_now_ms() + 30000;

		for (;;) {
			log = tu_site_run_log(&F.s);
			if (strstr(log, "event=apply_stopped"))
				break;
			if (tu_now_ms() > end)
				fail_msg("no apply_stopped on another ledger:\n%s", log);
			free(log);
			tu_msleep(200);
		}
	}
	assert_in("run's log", log, "event=ledger_identity_refused verdict=other");
	assert_in("run's log", log, other_id);
	assert_in("run's log", log, first);
	assert_in("run's log", log, "another ledger");
	free(log);
	tu_site_agent_sigterm(&F.s);
	assert_int_equal(replicas(), 2);
	lose_ledger();

	/* --new-ledger: accepted, the mode read back, the new identity in the cluster. */
	t = tu_now_ms();
	tu_site_agent_start_args(&F.s, (const char *[]){"--new-ledger", NULL});
	adopted_ms = tu_now_ms() - t;
	log = tu_site_run_log(&F.s);
	assert_in("run's log", log, "event=ledger_identity verdict=adopt");
	assert_in("run's log", log, "event=namespace_modes_read_back");
	snprintf(want, sizeof(want), "modes=%d ", 1 + F.n_extra);
	assert_in("run's log", log, want);
	free(log);
	snprintf(want, sizeof(want), "SELECT count(*) FROM namespace_modes WHERE mode = 'migrate'");
	assert_int_equal(tu_site_ledger_int(&F.s, want), 1 + F.n_extra);
	snprintf(want, sizeof(want),
		 "SELECT count(*) FROM namespace_modes WHERE namespace = '%s' AND mode = 'migrate'",
		 F.dst);
	assert_int_equal(tu_site_ledger_int(&F.s, want), 1);
	ledger_id(now, sizeof(now));
	assert_int_equal(strlen(now), 32);
	assert_string_not_equal(now, first);
	cluster_id(want, sizeof(want));
	assert_string_equal(want, now);

	/* The source resyncs into the new ledger: applied active, not scaled to 0. */
	t = tu_now_ms();
	tu_site_sender_start(&F.s);
	tu_site_wait_acked(&F.s, push_deployment(2), 30000);
	{
		long long end = tu_now_ms() + wait_ms;

		while (tu_site_ledger_int(&F.s, "SELECT count(*) FROM object_state WHERE state = "
						"'applied'") < 1 + 2 * F.n_extra) {
			if (tu_now_ms() > end) {
				log = tu_site_run_log(&F.s);
				fail_msg("the record was not applied into the new ledger:\n%s",
					 log);
			}
			tu_msleep(200);
		}
	}
	resynced_ms = tu_now_ms() - t;
	tu_msleep(1500); /* a pass or two more: nothing puts standby back */
	for (int i = -1; i < F.n_extra; i++)
		if (replicas_in(i < 0 ? F.dst : F.extra[i]) != 2)
			fail_msg(
			    "Deployment %s/trainer is at %lld replicas after the resync, not 2",
			    i < 0 ? F.dst : F.extra[i], replicas_in(i < 0 ? F.dst : F.extra[i]));
	print_message("SOAK test=ledger_identity namespaces=%d refused_ms=%lld adopted_ms=%lld "
		      "resynced_active_ms=%lld\n",
		      1 + F.n_extra, refused_ms, adopted_ms, resynced_ms);
	ns = get("apps/v1", "Deployment", F.dst, "trainer");
	assert_null(dt_get(ns, "/metadata/annotations/drasync.io~1replicas"));
	json_decref(ns);
	/* A restart now: the ledger has its identity, the same as the cluster's. */
	tu_site_agent_sigterm(&F.s);
	tu_site_agent_start(&F.s);
	{
		long long end = tu_now_ms() + 30000;

		for (;;) {
			log = tu_site_run_log(&F.s);
			if (strstr(log, "event=ledger_identity verdict=same"))
				break;
			if (tu_now_ms() > end)
				fail_msg("no ledger_identity verdict=same after a restart:\n%s",
					 log);
			free(log);
			tu_msleep(200);
		}
		free(log);
	}
	tu_site_sender_stop(&F.s);
	tu_site_agent_sigterm(&F.s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(
		test_itest_ledger_identity__lost_ledger_refused_then_new_ledger_keeps_active, setup,
		teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
