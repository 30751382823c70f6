/*
 * A hostile source (SPEC §5 "Trust boundary", issue 22): drasync-target run
 * as a process on the v1 cluster's kube-apiserver (its admin kubeconfig: the
 * API server's RBAC would let it do anything, so every refusal here is the
 * importer's), with a TargetConfig granting source prod-east the namespaces
 * hzok-N and hzown-N at podSecurity baseline and prod-west hzok-N. Two real
 * CURVE clients with authorized keys speak the protocol by hand
 * (tu_rawsource.h), not through drasync-source: they send what no real
 * source would, mixed with valid records in the same batches.
 *
 * For each hostile record: the ledger's state (refused, or kept for a
 * tombstone) with its reason, the apply result the client hears in a later
 * Ack (RESULT_REFUSED), nothing written to the API server (its own
 * apiserver_request_total, before and after; the objects absent, a person's
 * unchanged), the session still up (the valid records of the same batch
 * applied), drasync_target_refused_total{source,reason}, and `status`.
 *
 * The API server's write counters are the whole cluster's: ctest runs this
 * test alone (RUN_SERIAL).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/k8s_object.h"
#include "drasync/keys.h"
#include "dstest.h"
#include "testutil.h"
#include "tu_e2e.h"
#include "tu_kube.h"
#include "tu_ledger.h"
#include "tu_rawsource.h"
#include "tu_site.h"
#include "tu_trust.h"

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EAST "prod-east"
#define WEST "prod-west"
#define APPLY_MS 60000
#define MAX_RECS 48

/* The resources whose writes are counted. */
enum { W_CONFIGMAPS, W_PODS, W_NAMESPACES, W_CLUSTERROLES, W_DEPLOYMENTS, W_MAX };
static const char *const counted[W_MAX] = {"configmaps", "pods", "namespaces", "clusterroles",
					   "deployments"};

static const char *const refusal_reasons[] = {"namespace", "pod_security", "name",  "reference",
					      "kind",	   "exists",	   "owner", NULL};

static struct fx {
	tu_site s;
	ds_kube *k;
	ds_keypair west;
	tu_raw *east;
	char ok[64], own[64], denied[64], clusterrole[64], rid[64];
	char metrics[64];
	json_t *own_meta; /* hzown's labels and annotations as the person set them */
	char mine_rv[64]; /* the person's ConfigMap's resourceVersion */
	char s1_rv[64];	  /* prod-east's Secret s1 as applied */
} F;

static bool has_ci(const char *text, const char *part)
{
	size_t n = strlen(part);

	for (; text && *text; text++) {
		size_t i = 0;

		while (i < n && text[i] &&
		       tolower((unsigned char)text[i]) == tolower((unsigned char)part[i]))
			i++;
		if (i == n)
			return true;
	}
	return false;
}

/* ---- batches of hand-built records ---- */

struct batch {
	ds_record recs[MAX_RECS];
	uint64_t seqs[MAX_RECS];
	json_t *objs[MAX_RECS];
	char *payloads[MAX_RECS];
	char uids[MAX_RECS][48];
	size_t n;
};

static size_t add(struct batch *b, ds_record r)
{
	assert_true(b->n < MAX_RECS);
	snprintf(b->uids[b->n], sizeof(b->uids[b->n]), "uid-%u-%zu", tu_rand(), b->n);
	r.source_uid = b->uids[b->n];
	b->recs[b->n] = r;
	return b->n++;
}

/* An upsert of obj (taken) as its apiVersion/kind/metadata say. */
static size_t add_upsert(struct batch *b, json_t *obj)
{
	size_t i = b->n;
	ds_record r;

	assert_true(i < MAX_RECS);
	json_object_set_new(json_object_get(obj, "metadata"), "uid", json_sprintf("src-%zu", i));
	r = tu_record_upsert(obj, NULL, &b->payloads[i]);
	b->objs[i] = obj;
	return add(b, r);
}

static size_t add_tombstone(struct batch *b, const char *api, const char *kind, const char *ns,
			    const char *name)
{
	return add(b, tu_record_tombstone(api, kind, ns, name, NULL));
}

static void batch_dispose(struct batch *b)
{
	for (size_t i = 0; i < b->n; i++) {
		free(b->payloads[i]);
		json_decref(b->objs[i]);
	}
	memset(b, 0, sizeof(*b));
}

static json_t *configmap(const char *ns, const char *name, const char *who)
{
	json_t *o = json_pack("{ss ss s{ss ss} s{ss}}", "apiVersion", "v1", "kind", "ConfigMap",
			      "metadata", "name", name, "namespace", ns, "data", "who", who);

	assert_non_null(o);
	return o;
}

static json_t *secret(const char *ns, const char *name, const char *value)
{
	json_t *o =
	    json_pack("{ss ss s{ss ss} ss s{ss}}", "apiVersion", "v1", "kind", "Secret", "metadata",
		      "name", name, "namespace", ns, "type", "Opaque", "stringData", "k", value);

	assert_non_null(o);
	return o;
}

/* A Pod of one container c (pause) in F.ok; spec_extra and container_extra are YAML lines. */
static json_t *pod(const char *name, const char *meta_extra, const char *spec_extra,
		   const char *container_extra)
{
	return tu_kube_doc("apiVersion: v1\nkind: Pod\n"
			   "metadata:\n  name: %s\n  namespace: %s\n%s"
			   "spec:\n%s"
			   "  containers:\n  - name: c\n    image: registry.k8s.io/pause:3.10\n%s",
			   name, F.ok, meta_extra ? meta_extra : "", spec_extra ? spec_extra : "",
			   container_extra ? container_extra : "");
}

/* Send b from c, every record acknowledged; then wait for each one's apply result. */
static void send_and_wait(tu_raw *c, struct batch *b)
{
	long long end;

	tu_raw_send(c, b->recs, b->n, b->seqs, 30000);
	end = tu_now_ms() + APPLY_MS;
	for (size_t i = 0; i < b->n; i++) {
		while (!tu_raw_result_of(c, b->seqs[i])->apply && tu_now_ms() < end)
			tu_raw_pump(c, 100);
	}
}

/* The refusals the target's metrics counted, by reason, for source. */
static void refusals(const char *source, double out[])
{
	for (size_t i = 0; refusal_reasons[i]; i++)
		out[i] = tu_trust_metric(
		    F.metrics, "drasync_target_refused_total",
		    (const char *const[]){"source", source, "reason", refusal_reasons[i], NULL});
}

static size_t reason_index(const char *reason)
{
	for (size_t i = 0; refusal_reasons[i]; i++)
		if (strcmp(refusal_reasons[i], reason) == 0)
			return i;
	fail_msg("unknown refusal reason %s", reason);
	return 0;
}

static void writes(long long out[W_MAX])
{
	for (int i = 0; i < W_MAX; i++)
		out[i] = tu_trust_writes(F.k, counted[i], NULL, 0);
}

/* Nothing written to the resources of mask (1 << W_*) since before. */
static void check_no_writes(const long long before[W_MAX], unsigned mask, const char *what)
{
	for (int i = 0; i < W_MAX; i++) {
		char detail[1000];
		long long now;

		if (!(mask & (1u << i)))
			continue;
		now = tu_trust_writes(F.k, counted[i], detail, sizeof(detail));
		tu_trust_check(
		    now == before[i],
		    "%s: the API server counted %lld write(s) to %s (now %s); the refused "
		    "records must write nothing",
		    what, now - before[i], counted[i], detail);
	}
}

/*
 * Record i of b, sent by source: its apply result REFUSED with `part` in its
 * message (NULL: any), its ledger row refused with the same, its reason
 * counted under `metric` (checked by the caller through want[]).
 */
static void expect_refused(tu_raw *c, const struct batch *b, size_t i, const char *source,
			   const char *part, const char *metric, double want[])
{
	const ds_record *r = &b->recs[i];
	const tu_raw_result *res = tu_raw_result_of(c, b->seqs[i]);
	tu_trust_row row =
	    tu_trust_ledger_row(F.s.ledger, source, r->kind, r->ns ? r->ns : "", r->name);
	char nm[64];

	tu_trust_shown(r->name, nm, sizeof(nm));
	tu_trust_check(res->apply == DS_RESULT_REFUSED,
		       "%s %s/%s (seq %llu): apply result %s '%s' in the Acks, want refused",
		       r->kind, r->ns ? r->ns : "", nm, (unsigned long long)b->seqs[i],
		       res->apply ? ds_result_status_name(res->apply) : "none (never sent)",
		       res->apply_msg);
	tu_trust_check(!part || strstr(res->apply_msg, part),
		       "%s %s/%s: the Ack's message '%s' does not say '%s'", r->kind,
		       r->ns ? r->ns : "", nm, res->apply_msg, part);
	tu_trust_check(strcmp(row.state, "refused") == 0,
		       "%s %s/%s: ledger state '%s' (reason '%s'), want refused", r->kind,
		       r->ns ? r->ns : "", nm, row.state[0] ? row.state : "(no row)", row.reason);
	tu_trust_check(row.reason[0] && (!part || strstr(row.reason, part)),
		       "%s %s/%s: ledger reason '%s' does not say '%s'", r->kind,
		       r->ns ? r->ns : "", nm, row.reason, part ? part : "why");
	if (metric)
		want[reason_index(metric)] += 1;
}

/* Record i of b applied (the session went on past the hostile records). */
static void expect_applied(tu_raw *c, const struct batch *b, size_t i)
{
	const tu_raw_result *res = tu_raw_result_of(c, b->seqs[i]);
	const ds_record *r = &b->recs[i];

	tu_trust_check(
	    res->apply == DS_RESULT_APPLIED,
	    "valid %s %s/%s (seq %llu) in the same batch: apply result %s '%s', want applied",
	    r->kind, r->ns, r->name, (unsigned long long)b->seqs[i],
	    res->apply ? ds_result_status_name(res->apply) : "none", res->apply_msg);
}

static void check_refusals_counted(const char *source, const double before[], const double want[])
{
	double now[8];

	refusals(source, now);
	for (size_t i = 0; refusal_reasons[i]; i++)
		tu_trust_check(
		    now[i] - before[i] >= want[i],
		    "drasync_target_refused_total{source=\"%s\",reason=\"%s\"} rose by %.0f, "
		    "want %.0f",
		    source, refusal_reasons[i], now[i] - before[i], want[i]);
}

static void check_absent(const char *api, const char *kind, const char *ns, const char *name)
{
	json_t *o = tu_e2e_get(F.k, api, kind, ns, name);

	tu_trust_check(!o, "%s %s/%s exists on the target", kind, ns ? ns : "", name);
	json_decref(o);
}

static json_t *wait_exists(const char *api, const char *kind, const char *ns, const char *name)
{
	return tu_e2e_wait_get(F.k, api, kind, ns, name, APPLY_MS, &F.s);
}

/* ---- the fixture ---- */

static int group_setup(void **state)
{
	unsigned n = tu_rand();
	char *extra, auth[1200], *text;
	int port = tu_free_port();
	ds_err err = {0};
	struct batch b = {0};
	json_t *o;

	(void)state;
	memset(&F, 0, sizeof(F));
	F.k = tu_kube_connect(tu_env("DS_KUBECONFIG_V1"));
	/* The cluster's writes are counted: the namespace controller must be done with
	 * what the tests before this one dropped (it deletes their objects). */
	for (long long end = tu_now_ms() + 120000;; tu_msleep(500)) {
		json_t *nss = tu_e2e_list(F.k, "v1", "Namespace", NULL, NULL), *e;
		size_t i, terminating = 0;

		json_array_foreach (nss, i, e)
			terminating += dt_str(e, "/status/phase") &&
				       strcmp(dt_str(e, "/status/phase"), "Terminating") == 0;
		json_decref(nss);
		if (!terminating)
			break;
		if (tu_now_ms() > end)
			fail_msg("%zu namespaces still terminating after 120 s", terminating);
	}
	snprintf(F.ok, sizeof(F.ok), "hzok-%u", n);
	snprintf(F.own, sizeof(F.own), "hzown-%u", n);
	snprintf(F.denied, sizeof(F.denied), "hzdenied-%u", n);
	snprintf(F.clusterrole, sizeof(F.clusterrole), "hz-evil-%u", n);
	snprintf(F.rid, sizeof(F.rid), "hzrid-%u", n);
	snprintf(F.metrics, sizeof(F.metrics), "http://127.0.0.1:%d", port);

	/* A namespace a person made on the target, their labels and a ConfigMap in it. */
	tu_kube_create(F.k,
		       tu_kube_doc("apiVersion: v1\nkind: Namespace\nmetadata:\n"
				   "  name: %s\n"
				   "  labels: {team: person, pod-security.kubernetes.io/enforce: "
				   "restricted}\n"
				   "  annotations: {owner: a-person}\n",
				   F.own));
	tu_kube_create(F.k, configmap(F.own, "mine", "person"));
	o = wait_exists("v1", "ConfigMap", F.own, "mine");
	snprintf(F.mine_rv, sizeof(F.mine_rv), "%s", dt_str(o, "/metadata/resourceVersion"));
	json_decref(o);
	o = wait_exists("v1", "Namespace", NULL, F.own);
	F.own_meta = json_pack("{sO sO}", "labels", dt_get(o, "/metadata/labels"), "annotations",
			       dt_get(o, "/metadata/annotations"));
	json_decref(o);

	tu_site_init(&F.s, "hostile", tu_env("DS_KUBECONFIG_V1"), EAST);
	assert_int_equal(ds_keys_generate(&F.west, &err), 0);
	assert_true(asprintf(&extra,
			     "mode: migrate\n"
			     "sources:\n"
			     "  - name: %s\n    namespaces: [%s, %s]\n    podSecurity: baseline\n"
			     "  - name: %s\n    namespaces: [%s]\n"
			     "adoptExisting: false\n"
			     "metrics: {listen: \"127.0.0.1:%d\"}\n",
			     EAST, F.ok, F.own, WEST, F.ok, port) > 0);
	tu_site_write_config(&F.s, extra);
	free(extra);
	snprintf(auth, sizeof(auth), "%s/authorized_sources", F.s.dir);
	assert_true(asprintf(&text, "%s %s\n%s %s\n", EAST, F.s.skeys.public_z85, WEST,
			     F.west.public_z85) > 0);
	tu_write_file(auth, text);
	free(text);
	tu_site_agent_start(&F.s);
	F.east = tu_raw_connect(F.s.endpoint, &F.s.tkeys, &F.s.skeys, EAST, F.rid, 15000, true);
	assert_string_equal(tu_raw_source_name(F.east), EAST);

	/* What a source sends first: its namespaces (PSA privileged, as the source
	 * cluster has them), then a Secret and a Pod that baseline allows. */
	add_upsert(&b, tu_kube_doc("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n"
				   "  labels: {app: web, pod-security.kubernetes.io/enforce: "
				   "privileged, pod-security.kubernetes.io/warn: privileged, "
				   "pod-security.kubernetes.io/audit: privileged}\n",
				   F.ok));
	add_upsert(&b, tu_kube_doc("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n"
				   "  labels: {team: source, pod-security.kubernetes.io/enforce: "
				   "privileged}\n  annotations: {owner: the-source}\n",
				   F.own));
	add_upsert(&b, secret(F.ok, "s0", "zero"));
	add_upsert(&b, secret(F.ok, "s1", "east-one"));
	add_upsert(&b, secret(F.ok, "s2", "east-two"));
	tu_raw_send(F.east, b.recs, b.n, b.seqs, 30000);
	json_decref(wait_exists("v1", "Secret", F.ok, "s2"));
	o = wait_exists("v1", "Secret", F.ok, "s1");
	snprintf(F.s1_rv, sizeof(F.s1_rv), "%s", dt_str(o, "/metadata/resourceVersion"));
	json_decref(o);
	/* The namespace's own controllers have written what they write in a new one. */
	json_decref(wait_exists("v1", "ConfigMap", F.ok, "kube-root-ca.crt"));
	json_decref(wait_exists("v1", "ServiceAccount", F.ok, "default"));
	json_decref(wait_exists("v1", "ConfigMap", F.own, "kube-root-ca.crt"));
	json_decref(wait_exists("v1", "ServiceAccount", F.own, "default"));
	batch_dispose(&b);
	/* A Pod that baseline allows is written: the checks are not a blanket refusal. */
	add_upsert(&b, pod("good", NULL, NULL, NULL));
	send_and_wait(F.east, &b);
	json_decref(wait_exists("v1", "Pod", F.ok, "good"));
	batch_dispose(&b);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	tu_raw_free(F.east);
	tu_site_dispose(&F.s);
	if (F.k) {
		json_t *cr = tu_e2e_get(F.k, "rbac.authorization.k8s.io/v1", "ClusterRole", NULL,
					F.clusterrole);

		if (cr)
			tu_kube_delete(F.k, "rbac.authorization.k8s.io/v1", "ClusterRole", NULL,
				       F.clusterrole);
		json_decref(cr);
		tu_kube_drop_namespace(F.k, strdup(F.ok));
		tu_kube_drop_namespace(F.k, strdup(F.own));
		if ((cr = tu_e2e_get(F.k, "v1", "Namespace", NULL, F.denied))) {
			json_decref(cr);
			tu_kube_drop_namespace(F.k, strdup(F.denied));
		}
	}
	ds_kube_free(F.k);
	json_decref(F.own_meta);
	memset(&F, 0, sizeof(F));
	return 0;
}

/* ---- the cases ---- */

/*
 * The source's Namespace records: the one drasync created enforces the
 * grant's level, never the source's privileged; the one a person made keeps
 * its labels and annotations exactly.
 */
static void test_hostile_source__namespaces_get_the_grants_level_not_the_sources(void **state)
{
	json_t *ok = wait_exists("v1", "Namespace", NULL, F.ok);
	json_t *own = wait_exists("v1", "Namespace", NULL, F.own);
	json_t *labels = dt_get(ok, "/metadata/labels"), *now;
	const char *key;
	json_t *v;
	tu_trust_row row;

	(void)state;
	tu_trust_check(
	    dt_str(ok, "/metadata/labels/pod-security.kubernetes.io~1enforce") &&
		strcmp(dt_str(ok, "/metadata/labels/pod-security.kubernetes.io~1enforce"),
		       "baseline") == 0,
	    "namespace %s that drasync created: pod-security.kubernetes.io/enforce is '%s', "
	    "want baseline (the grant's podSecurity)",
	    F.ok, dt_str(ok, "/metadata/labels/pod-security.kubernetes.io~1enforce"));
	tu_trust_check(
	    dt_str(ok, "/metadata/labels/pod-security.kubernetes.io~1enforce-version") &&
		strcmp(dt_str(ok, "/metadata/labels/pod-security.kubernetes.io~1enforce-version"),
		       "latest") == 0,
	    "namespace %s: pod-security.kubernetes.io/enforce-version is '%s', want latest", F.ok,
	    dt_str(ok, "/metadata/labels/pod-security.kubernetes.io~1enforce-version"));
	json_object_foreach (labels, key, v)
		tu_trust_check(strncmp(key, "pod-security.kubernetes.io/", 27) != 0 ||
				   strcmp(json_string_value(v), "privileged") != 0,
			       "namespace %s: label %s=privileged came from the source", F.ok, key);

	now = json_pack("{sO sO}", "labels", dt_get(own, "/metadata/labels"), "annotations",
			dt_get(own, "/metadata/annotations"));
	{
		char *want = json_dumps(F.own_meta, JSON_SORT_KEYS | JSON_COMPACT);
		char *got = json_dumps(now, JSON_SORT_KEYS | JSON_COMPACT);

		tu_trust_check(
		    json_equal(now, F.own_meta),
		    "namespace %s that a person made: its metadata changed from %s to %s", F.own,
		    want, got);
		free(want);
		free(got);
	}
	row = tu_trust_ledger_row(F.s.ledger, EAST, "Namespace", "", F.own);
	print_message("the source's Namespace %s (made by a person on the target): ledger state "
		      "'%s' reason '%s'\n",
		      F.own, row.state, row.reason);
	json_decref(now);
	json_decref(ok);
	json_decref(own);
	tu_trust_check_done("namespaces");
}

/*
 * Names the API server would not take, a reference that disagrees with its
 * payload, a namespace not granted, a kind drasync does not replicate: all
 * refused, nothing written, the valid Secrets between them applied.
 */
static void test_hostile_source__names_references_namespaces_kinds_refused(void **state)
{
	char long_name[301], forged[200];
	long long before[W_MAX];
	double m0[8], want[8] = {0};
	struct batch b = {0};
	size_t dot, slash, dotdot, longn, newline, ref, denied, denied_ns, cr, v1, v2, v3;
	json_t *o;
	char *log;

	(void)state;
	memset(long_name, 'x', 300);
	long_name[300] = '\0';
	snprintf(forged, sizeof(forged),
		 "evil\nts=2026-01-01T00:00:00.000Z level=info event=apply state=applied "
		 "forged=%u",
		 tu_rand());
	writes(before);
	refusals(EAST, m0);

	dot = add_upsert(&b, configmap(F.ok, ".", "dot"));
	v1 = add_upsert(&b, secret(F.ok, "v1", "valid-one"));
	slash = add_upsert(&b, configmap(F.ok, "a/b", "slash"));
	/* The tombstone that became DELETE /api/v1/namespaces/NS/ once libcurl
	 * collapsed its path. */
	dotdot = add_tombstone(&b, "v1", "ConfigMap", F.ok, "..");
	longn = add_upsert(&b, configmap(F.ok, long_name, "long"));
	newline = add_upsert(&b, configmap(F.ok, forged, "newline"));
	v2 = add_upsert(&b, secret(F.ok, "v2", "valid-two"));
	ref = add_upsert(&b, configmap(F.ok, "ref-b", "payload"));
	b.recs[ref].name = "ref-a"; /* the record says ref-a, its payload ref-b */
	denied = add_upsert(&b, configmap(F.denied, "leak", "denied"));
	denied_ns = add_upsert(&b, tu_kube_doc("apiVersion: v1\nkind: Namespace\nmetadata: "
					       "{name: %s}\n",
					       F.denied));
	cr = add_upsert(&b,
			tu_kube_doc("apiVersion: rbac.authorization.k8s.io/v1\n"
				    "kind: ClusterRole\nmetadata: {name: %s}\n"
				    "rules: [{apiGroups: ['*'], resources: ['*'], verbs: ['*']}]\n",
				    F.clusterrole));
	v3 = add_upsert(&b, secret(F.ok, "v3", "valid-three"));
	send_and_wait(F.east, &b);

	expect_refused(F.east, &b, dot, EAST, NULL, "name", want);
	expect_refused(F.east, &b, slash, EAST, NULL, "name", want);
	expect_refused(F.east, &b, dotdot, EAST, NULL, "name", want);
	expect_refused(F.east, &b, longn, EAST, NULL, "name", want);
	expect_refused(F.east, &b, newline, EAST, NULL, "name", want);
	{
		char part[300];

		/* The wording may add the versions: the names are what counts. */
		snprintf(part, sizeof(part), "the record names ConfigMap %s/ref-a", F.ok);
		expect_refused(F.east, &b, ref, EAST, part, "reference", want);
		snprintf(part, sizeof(part), "its payload is ConfigMap %s/ref-b", F.ok);
		expect_refused(F.east, &b, ref, EAST, part, NULL, want);
		snprintf(part, sizeof(part),
			 "namespace %s is not granted to source %s (sources[0].namespaces)",
			 F.denied, EAST);
		expect_refused(F.east, &b, denied, EAST, part, "namespace", want);
		expect_refused(F.east, &b, denied_ns, EAST, F.denied, "namespace", want);
	}
	expect_refused(F.east, &b, cr, EAST, "ClusterRole", "kind", want);
	expect_refused(F.east, &b, cr, EAST, "is not replicated by drasync", NULL, want);
	expect_applied(F.east, &b, v1);
	expect_applied(F.east, &b, v2);
	expect_applied(F.east, &b, v3);
	tu_trust_check(!tu_raw_dropped(F.east, NULL), "the session was dropped");

	check_no_writes(before, 1u << W_CONFIGMAPS | 1u << W_NAMESPACES | 1u << W_CLUSTERROLES,
			"names, references, namespaces, kinds");
	check_absent("v1", "Namespace", NULL, F.denied);
	check_absent("v1", "ConfigMap", F.ok, "ref-a");
	check_absent("v1", "ConfigMap", F.ok, "ref-b");
	check_absent("v1", "ConfigMap", F.ok, "a");
	check_absent("rbac.authorization.k8s.io/v1", "ClusterRole", NULL, F.clusterrole);
	o = tu_e2e_get(F.k, "v1", "Namespace", NULL, F.ok);
	tu_trust_check(o != NULL, "the tombstone of ConfigMap '..' deleted namespace %s", F.ok);
	json_decref(o);
	check_refusals_counted(EAST, m0, want);

	/* A name with a newline forges no log line. */
	log = tu_site_run_log(&F.s);
	tu_trust_check(!strstr(log, strchr(forged, '\n')),
		       "a name with a newline forged a log line of its own in the target's log");
	tu_trust_check(strstr(log, "event=apply") && strstr(log, "state=refused") &&
			   strstr(log, "level=warn"),
		       "the target's log has no event=apply state=refused line at level warn");
	free(log);
	batch_dispose(&b);
	tu_trust_check_done("names, references, namespaces, kinds");
}

/* Every class of the Pod Security Standards' baseline: refused, no Pod written. */
static void test_hostile_source__every_baseline_violation_refused(void **state)
{
	static const struct {
		const char *name, *meta, *spec, *container, *says;
	} cases[] = {
	    {"p-privileged", NULL, NULL, "    securityContext: {privileged: true}\n", "privileged"},
	    {"p-hostnetwork", NULL, "  hostNetwork: true\n", NULL, "hostNetwork"},
	    {"p-hostpid", NULL, "  hostPID: true\n", NULL, "hostPID"},
	    {"p-hostipc", NULL, "  hostIPC: true\n", NULL, "hostIPC"},
	    {"p-hostpath", NULL, "  volumes: [{name: root, hostPath: {path: /}}]\n", NULL,
	     "hostPath"},
	    {"p-hostport", NULL, NULL, "    ports: [{containerPort: 80, hostPort: 8080}]\n",
	     "hostPort"},
	    {"p-capabilities", NULL, NULL,
	     "    securityContext: {capabilities: {add: [NET_ADMIN, SYS_ADMIN]}}\n", "capabilit"},
	    {"p-apparmor", NULL, "  securityContext: {appArmorProfile: {type: Unconfined}}\n", NULL,
	     "apparmor"},
	    {"p-apparmor-annotation",
	     "  annotations: {container.apparmor.security.beta.kubernetes.io/c: unconfined}\n",
	     NULL, NULL, "apparmor"},
	    {"p-selinux", NULL, NULL,
	     "    securityContext: {seLinuxOptions: {type: spc_t, user: system_u}}\n", "selinux"},
	    /* Without a user namespace (with hostUsers: false upstream allows it). */
	    {"p-procmount", NULL, NULL, "    securityContext: {procMount: Unmasked}\n",
	     "procmount"},
	    {"p-seccomp", NULL, "  securityContext: {seccompProfile: {type: Unconfined}}\n", NULL,
	     "seccomp"},
	    {"p-sysctl", NULL,
	     "  securityContext: {sysctls: [{name: kernel.msgmax, value: \"65536\"}]}\n", NULL,
	     "sysctl"},
	};
	size_t n = sizeof(cases) / sizeof(cases[0]), idx[16], deploy, valid = 0;
	long long before[W_MAX];
	double m0[8], want[8] = {0};
	struct batch b = {0};

	(void)state;
	writes(before);
	refusals(EAST, m0);
	for (size_t i = 0; i < n; i++) {
		idx[i] = add_upsert(
		    &b, pod(cases[i].name, cases[i].meta, cases[i].spec, cases[i].container));
		if (i == n / 2)
			valid = add_upsert(&b, secret(F.ok, "v-pss", "valid"));
	}
	/* A controller's template is a pod spec too. */
	deploy = add_upsert(&b, tu_kube_doc("apiVersion: apps/v1\nkind: Deployment\n"
					    "metadata: {name: d-privileged, namespace: %s}\n"
					    "spec:\n  replicas: 1\n"
					    "  selector: {matchLabels: {app: d}}\n"
					    "  template:\n    metadata: {labels: {app: d}}\n"
					    "    spec:\n      hostNetwork: true\n"
					    "      containers: [{name: c, image: "
					    "registry.k8s.io/pause:3.10, securityContext: "
					    "{privileged: true}}]\n",
					    F.ok));
	send_and_wait(F.east, &b);

	for (size_t i = 0; i < n; i++) {
		const tu_raw_result *res = tu_raw_result_of(F.east, b.seqs[idx[i]]);
		char part[200];

		snprintf(part, sizeof(part), "Pod %s/%s: ", F.ok, cases[i].name);
		expect_refused(F.east, &b, idx[i], EAST, part, "pod_security", want);
		tu_trust_check(
		    strstr(res->apply_msg, "violates podSecurity baseline") &&
			has_ci(res->apply_msg, cases[i].says),
		    "Pod %s: the refusal '%s' does not name the check (%s) and the level "
		    "(violates podSecurity baseline)",
		    cases[i].name, res->apply_msg, cases[i].says);
		check_absent("v1", "Pod", F.ok, cases[i].name);
	}
	{
		char part[200];

		snprintf(part, sizeof(part),
			 "privileged container c violates podSecurity baseline");
		expect_refused(F.east, &b, idx[0], EAST, part, NULL, want);
	}
	expect_refused(F.east, &b, deploy, EAST, "violates podSecurity baseline", "pod_security",
		       want);
	check_absent("apps/v1", "Deployment", F.ok, "d-privileged");
	expect_applied(F.east, &b, valid);
	tu_trust_check(!tu_raw_dropped(F.east, NULL), "the session was dropped");
	check_no_writes(before, 1u << W_PODS | 1u << W_DEPLOYMENTS, "Pod Security");
	check_refusals_counted(EAST, m0, want);
	batch_dispose(&b);
	tu_trust_check_done("Pod Security baseline");
}

/*
 * A ConfigMap a person made on the target: the source's of the same name is
 * refused (no adoption by default), its tombstone deletes nothing (kept);
 * objects are still written into the person's namespace.
 */
static void test_hostile_source__a_persons_object_neither_taken_over_nor_deleted(void **state)
{
	long long before[W_MAX];
	double m0[8], want[8] = {0};
	struct batch b = {0};
	size_t up, valid, tomb;
	tu_trust_row row;
	const tu_raw_result *res;
	json_t *o;
	char part[300];

	(void)state;
	writes(before);
	refusals(EAST, m0);
	up = add_upsert(&b, configmap(F.own, "mine", "the-source"));
	valid = add_upsert(&b, secret(F.own, "s-own", "valid"));
	send_and_wait(F.east, &b);
	snprintf(part, sizeof(part),
		 "ConfigMap %s/mine exists on the target and was not created by drasync: set "
		 "adoptExisting: true to take it over",
		 F.own);
	expect_refused(F.east, &b, up, EAST, part, "exists", want);
	expect_applied(F.east, &b, valid);
	json_decref(wait_exists("v1", "Secret", F.own, "s-own"));
	batch_dispose(&b);

	/* Its tombstone, once the upsert was decided. */
	tomb = add_tombstone(&b, "v1", "ConfigMap", F.own, "mine");
	valid = add_upsert(&b, secret(F.own, "s-own-2", "valid"));
	send_and_wait(F.east, &b);
	row = tu_trust_ledger_row(F.s.ledger, EAST, "ConfigMap", F.own, "mine");
	res = tu_raw_result_of(F.east, b.seqs[tomb]);
	tu_trust_check(
	    strcmp(row.state, "kept") == 0,
	    "the tombstone of the person's ConfigMap: ledger state '%s' (reason '%s'), want kept",
	    row.state, row.reason);
	tu_trust_check(
	    res->apply == DS_RESULT_SKIPPED || res->apply == DS_RESULT_REFUSED,
	    "the tombstone of the person's ConfigMap: apply result %s '%s', want skipped "
	    "(kept) or refused",
	    res->apply ? ds_result_status_name(res->apply) : "none", res->apply_msg);
	expect_applied(F.east, &b, valid);

	o = tu_e2e_get(F.k, "v1", "ConfigMap", F.own, "mine");
	tu_trust_check(o != NULL,
		       "the person's ConfigMap %s/mine was deleted by the source's tombstone",
		       F.own);
	if (o) {
		tu_trust_check(
		    strcmp(dt_str(o, "/metadata/resourceVersion"), F.mine_rv) == 0 &&
			strcmp(dt_str(o, "/data/who"), "person") == 0,
		    "the person's ConfigMap changed: resourceVersion %s (was %s), data.who %s",
		    dt_str(o, "/metadata/resourceVersion"), F.mine_rv, dt_str(o, "/data/who"));
		tu_trust_check(!dt_get(o, "/metadata/annotations/drasync.io~1source-cluster"),
			       "the person's ConfigMap got drasync's marks");
	}
	json_decref(o);
	check_no_writes(before, 1u << W_CONFIGMAPS, "a person's ConfigMap");
	check_refusals_counted(EAST, m0, want);
	batch_dispose(&b);
	tu_trust_check_done("a person's object");
}

/*
 * A second authorized source, whose Hello even claims to be the first:
 * its session is its own (the key's name), its records are its own in the
 * ledger, it may not overwrite nor delete what drasync writes for the first,
 * and its key cannot take over the first one's routing id.
 */
static void test_hostile_source__a_second_source_cannot_act_for_the_first(void **state)
{
	double m0[8], want[8] = {0};
	struct batch b = {0};
	size_t over, tomb, valid;
	long long last_id = tu_trust_ledger_last_id(F.s.ledger);
	tu_trust_row row;
	tu_raw *west, *thief;
	json_t *o;

	(void)state;
	refusals(WEST, m0);
	west =
	    tu_raw_connect(F.s.endpoint, &F.s.tkeys, &F.west, EAST /* a lie */, NULL, 15000, true);
	tu_trust_check(
	    strcmp(tu_raw_source_name(west), WEST) == 0,
	    "the Welcome names the key's source '%s', want %s (whatever the Hello claims)",
	    tu_raw_source_name(west), WEST);
	over = add_upsert(&b, secret(F.ok, "s1", "west-took-it"));
	tomb = add_tombstone(&b, "v1", "Secret", F.ok, "s2");
	valid = add_upsert(&b, secret(F.ok, "w1", "west-own"));
	send_and_wait(west, &b);

	expect_refused(west, &b, over, WEST, NULL, "owner", want);
	row = tu_trust_ledger_row(F.s.ledger, WEST, "Secret", F.ok, "s2");
	tu_trust_check(
	    strcmp(row.state, "kept") == 0 || strcmp(row.state, "refused") == 0,
	    "prod-west's tombstone of prod-east's Secret s2: ledger state '%s' (reason '%s'), "
	    "want kept or refused",
	    row.state, row.reason);
	(void)tomb;
	expect_applied(west, &b, valid);
	o = tu_e2e_get(F.k, "v1", "Secret", F.ok, "w1");
	print_message("prod-west's Secret w1 (its Hello claimed cluster prod-east): "
		      "drasync.io/source-cluster %s\n",
		      o ? dt_str(o, "/metadata/annotations/drasync.io~1source-cluster")
			: "(absent)");
	json_decref(o);
	o = tu_e2e_get(F.k, "v1", "Secret", F.ok, "s1");
	tu_trust_check(
	    o && strcmp(dt_str(o, "/metadata/resourceVersion"), F.s1_rv) == 0,
	    "prod-east's Secret s1 was written by prod-west (resourceVersion %s, was %s)",
	    o ? dt_str(o, "/metadata/resourceVersion") : "(gone)", F.s1_rv);
	json_decref(o);
	o = tu_e2e_get(F.k, "v1", "Secret", F.ok, "s2");
	tu_trust_check(o != NULL, "prod-west's tombstone deleted prod-east's Secret s2");
	json_decref(o);
	row = tu_trust_ledger_row(F.s.ledger, EAST, "Secret", F.ok, "s1");
	tu_trust_check(strcmp(row.state, "applied") == 0, "prod-east's row of s1 is now '%s' (%s)",
		       row.state, row.reason);
	/* (by id: compaction may delete superseded records of prod-east meanwhile) */
	tu_trust_check(tu_trust_ledger_records(F.s.ledger, EAST, last_id) == 0,
		       "prod-west's records were committed as prod-east's (%lld since record %lld)",
		       tu_trust_ledger_records(F.s.ledger, EAST, last_id), last_id);
	tu_trust_check(tu_trust_ledger_records(F.s.ledger, WEST, last_id) >= 3,
		       "the ledger holds %lld records of prod-west since record %lld, want its 3",
		       tu_trust_ledger_records(F.s.ledger, WEST, last_id), last_id);
	check_refusals_counted(WEST, m0, want);
	batch_dispose(&b);
	tu_raw_free(west);

	/* prod-west's key with prod-east's routing id: not prod-east's session. */
	thief = tu_raw_connect(F.s.endpoint, &F.s.tkeys, &F.west, EAST, F.rid, 5000, false);
	add_upsert(&b, secret(F.ok, "hijack", "stolen"));
	if (thief) {
		tu_trust_check(
		    strcmp(tu_raw_source_name(thief), WEST) == 0,
		    "a client of prod-west's key with prod-east's routing id was welcomed as "
		    "'%s'",
		    tu_raw_source_name(thief));
		/* A Batch in prod-east's epoch, under prod-east's routing id. */
		tu_raw_send_nowait(thief, b.recs, b.n, tu_raw_epoch(F.east),
				   tu_raw_next_seq(F.east));
		tu_raw_pump(thief, 3000);
		tu_raw_free(thief);
	}
	batch_dispose(&b);
	check_absent("v1", "Secret", F.ok, "hijack");
	tu_trust_check(tu_trust_ledger_row(F.s.ledger, EAST, "Secret", F.ok, "hijack").state[0] ==
			   '\0',
		       "prod-west's Batch was committed as prod-east's");
	/* prod-east's own session goes on. */
	valid = add_upsert(&b, secret(F.ok, "after-thief", "east"));
	send_and_wait(F.east, &b);
	expect_applied(F.east, &b, valid);
	batch_dispose(&b);
	tu_trust_check_done("a second source");
}

/* drasync-target status lists every refused object with its source and reason. */
static void test_hostile_source__status_lists_the_refusals(void **state)
{
	struct tu_run r;
	json_error_t je;
	json_t *st, *items, *it;
	size_t i, refused = 0, east = 0, west = 0;
	const char *names[] = {"ref-a", "leak", "p-privileged", "p-sysctl", "s1"};

	(void)state;
	tu_run(&r, NULL,
	       (const char *[]){tu_env("DS_TARGET_BIN"), "status", "--config", F.s.cfg, "-o",
				"json", NULL});
	st = json_loads(r.out, 0, &je);
	if (!st)
		fail_msg("status -o json (exit %d): %s\n%s%s", r.status, je.text, r.out, r.err);
	tu_run_dispose(&r);
	items = json_object_get(st, "needsLook");
	json_array_foreach (items, i, it) {
		if (strcmp(dt_str(it, "/state"), "refused") != 0)
			continue;
		refused++;
		east += strcmp(dt_str(it, "/source"), EAST) == 0;
		west += strcmp(dt_str(it, "/source"), WEST) == 0;
		tu_trust_check(dt_str(it, "/reason") && dt_str(it, "/reason")[0],
			       "status lists %s %s refused without a reason", dt_str(it, "/kind"),
			       dt_str(it, "/name"));
	}
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
		bool found = false;

		json_array_foreach (items, i, it)
			found = found || (strcmp(dt_str(it, "/name"), names[k]) == 0 &&
					  strcmp(dt_str(it, "/state"), "refused") == 0);
		tu_trust_check(found, "status -o json does not list %s as refused", names[k]);
	}
	{
		json_t *per = json_object_get(st, "refused");

		tu_trust_check(json_array_size(json_object_get(per, EAST)) == east &&
				   json_array_size(json_object_get(per, WEST)) == west,
			       "status -o json: refused per source lists %zu of prod-east and %zu "
			       "of prod-west; needsLook %zu and %zu",
			       json_array_size(json_object_get(per, EAST)),
			       json_array_size(json_object_get(per, WEST)), east, west);
	}
	tu_trust_check(east >= 20, "status lists %zu refused objects of prod-east, want 20 or more",
		       east);
	tu_trust_check(west >= 1, "status lists %zu refused objects of prod-west, want 1 or more",
		       west);
	tu_trust_check(json_integer_value(json_object_get(json_object_get(st, "objects"),
							  "refused")) >= (json_int_t)refused,
		       "status counts %lld objects refused, lists %zu",
		       (long long)json_integer_value(
			   json_object_get(json_object_get(st, "objects"), "refused")),
		       refused);
	json_decref(st);

	tu_run(&r, NULL,
	       (const char *[]){tu_env("DS_TARGET_BIN"), "status", "--config", F.s.cfg, NULL});
	tu_trust_check(strstr(r.out, "refused") && strstr(r.out, "is not granted to source"),
		       "status (text) does not show the refusals:\n%s", r.out);
	tu_run_dispose(&r);
	tu_trust_check_done("status");
	tu_site_agent_sigterm(&F.s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_hostile_source__namespaces_get_the_grants_level_not_the_sources),
	    cmocka_unit_test(test_hostile_source__names_references_namespaces_kinds_refused),
	    cmocka_unit_test(test_hostile_source__every_baseline_violation_refused),
	    cmocka_unit_test(test_hostile_source__a_persons_object_neither_taken_over_nor_deleted),
	    cmocka_unit_test(test_hostile_source__a_second_source_cannot_act_for_the_first),
	    cmocka_unit_test(test_hostile_source__status_lists_the_refusals),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
