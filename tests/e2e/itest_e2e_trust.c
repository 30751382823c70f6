/*
 * The scenario of issue 22's "Why", both agents as processes on their
 * ServiceAccounts' tokens bound by the shipped RBAC (tu_e2e.h):
 * drasync-source run (watch) on the v1 cluster, drasync-target run on the
 * v1beta1 cluster. The source is authorized, but its SourceConfig names one
 * namespace too many (e2etx-N, which the target's `sources` does not grant);
 * its own namespace is labelled PSA privileged and holds a privileged,
 * hostNetwork, hostPath: / Pod and a ConfigMap of the name a person gave one
 * on the target, which the source then deletes.
 *
 * Every point holds: the namespace not granted is neither created nor filled
 * on the target; the target namespace keeps the labels a person set, and no
 * privileged PSA label; the Pod is refused; the person's ConfigMap is neither
 * taken over nor deleted; drasync-target status lists the refusals per
 * source with their reasons, while the valid objects are replicated.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dstest.h"
#include "testutil.h"
#include "tu_e2e.h"
#include "tu_kube.h"
#include "tu_site.h"
#include "tu_trust.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SOURCE "prod-east"

static tu_pair P; /* disposed by teardown(), after a failure too */
static char *denied;

/* Wait until the ledger row of (kind, ns, name) has state `want`; its row as it last was. */
static tu_trust_row wait_row(const char *kind, const char *ns, const char *name, const char *want,
			     int timeout_ms)
{
	long long end = tu_now_ms() + timeout_ms;
	tu_trust_row row;

	for (;;) {
		row = tu_trust_ledger_row(P.site.ledger, SOURCE, kind, ns, name);
		if (strcmp(row.state, want) == 0 || tu_now_ms() > end)
			return row;
		tu_msleep(200);
	}
}

static void check_row(const char *kind, const char *ns, const char *name, const char *want,
		      const char *part)
{
	tu_trust_row row = wait_row(kind, ns, name, want, 60000);

	tu_trust_check(strcmp(row.state, want) == 0 && (!part || strstr(row.reason, part)),
		       "%s %s/%s: the target's ledger says '%s' (%s), want %s%s%s", kind, ns, name,
		       row.state[0] ? row.state : "(no row)", row.reason, want,
		       part ? " saying " : "", part ? part : "");
}

/* Whether the string at path of o is want (false when there is none). */
static bool str_is(const json_t *o, const char *path, const char *want)
{
	const char *v = dt_str(o, path);

	return v && strcmp(v, want) == 0;
}

/* A namespace's labels and annotations. */
static json_t *ns_meta(ds_kube *k, const char *name)
{
	json_t *o = tu_e2e_get(k, "v1", "Namespace", NULL, name), *m;

	assert_non_null(o);
	m = json_pack("{sO* sO*}", "labels", dt_get(o, "/metadata/labels"), "annotations",
		      dt_get(o, "/metadata/annotations"));
	json_decref(o);
	return m;
}

static void test_e2e_trust__a_source_writes_only_what_the_target_grants(void **state)
{
	tu_pair *const p = &P;
	json_t *meta0, *meta, *o, *st;
	char *text, mine_rv[64];
	struct tu_run r;

	(void)state;
	memset(p, 0, sizeof(*p));
	p->src_admin = tu_env("DS_KUBECONFIG_V1");
	p->dst_admin = tu_env("DS_KUBECONFIG_V1BETA1");
	p->src = tu_kube_connect(p->src_admin);
	p->dst = tu_kube_connect(p->dst_admin);
	p->src_ns = tu_kube_new_namespace(p->src, "e2et",
					  "pod-security.kubernetes.io/enforce: privileged, "
					  "pod-security.kubernetes.io/warn: privileged");
	denied = tu_kube_new_namespace(p->src, "e2etx", "");
	snprintf(p->dst_ns, sizeof(p->dst_ns), "%s-dr", p->src_ns);
	tu_rbac_install(&p->rbac, p->src_admin, (const char *const[]){p->src_ns, denied, NULL},
			p->dst_admin, (const char *const[]){p->dst_ns, NULL});

	/* On the target, a person labels the namespace and makes a ConfigMap. */
	tu_kube_merge(p->dst, "v1", "Namespace", NULL, p->dst_ns, NULL,
		      "{\"metadata\":{\"labels\":{\"team\":\"ml\",\"pod-security.kubernetes.io/"
		      "enforce\":\"restricted\"},\"annotations\":{\"owner\":\"a-person\"}}}");
	tu_kube_create(p->dst, tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: "
					   "hand-made, namespace: %s}\ndata: {who: person}\n",
					   p->dst_ns));
	o = tu_e2e_get(p->dst, "v1", "ConfigMap", p->dst_ns, "hand-made");
	assert_non_null(o);
	snprintf(mine_rv, sizeof(mine_rv), "%s", dt_str(o, "/metadata/resourceVersion"));
	json_decref(o);
	meta0 = ns_meta(p->dst, p->dst_ns);

	/* On the source: what it may send, and what it may not. */
	tu_kube_create(p->src, tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: "
					   "settings, namespace: %s}\ndata: {mode: fast}\n",
					   p->src_ns));
	tu_kube_create(p->src, tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: "
					   "hand-made, namespace: %s}\ndata: {who: source}\n",
					   p->src_ns));
	tu_kube_create(p->src, tu_kube_doc("apiVersion: v1\nkind: Pod\nmetadata: {name: evil, "
					   "namespace: %s}\nspec:\n  hostNetwork: true\n"
					   "  volumes: [{name: root, hostPath: {path: /}}]\n"
					   "  containers:\n  - name: c\n"
					   "    image: registry.k8s.io/pause:3.10\n"
					   "    securityContext: {privileged: true}\n"
					   "    volumeMounts: [{name: root, mountPath: /host}]\n",
					   p->src_ns));
	tu_kube_create(p->src, tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: "
					   "leak, namespace: %s}\ndata: {who: denied}\n",
					   denied));

	tu_site_init(&p->site, "e2et", p->rbac.target_kubeconfig, SOURCE);
	assert_true(asprintf(&text,
			     "identity: {namespace: drasync}\nmode: migrate\n"
			     "namespaceMappings: {%s: %s}\n"
			     "sources:\n  - name: %s\n    namespaces: [%s]\n"
			     "    podSecurity: baseline\n",
			     p->src_ns, p->dst_ns, SOURCE, p->src_ns) > 0);
	tu_site_write_config(&p->site, text);
	free(text);
	/* One namespace too many: a typo, or a compromised source site. */
	assert_true(asprintf(&text, "namespaces: [%s, %s]\nschedule: {mode: watch}\n", p->src_ns,
			     denied) > 0);
	tu_site_write_source_config(&p->site, text);
	free(text);
	tu_pair_target_start(p);
	tu_pair_source_start(p, NULL);

	/* What is granted is replicated. */
	json_decref(
	    tu_e2e_wait_get(p->dst, "v1", "ConfigMap", p->dst_ns, "settings", 60000, &p->site));
	{
		char part[300];

		snprintf(part, sizeof(part), "namespace %s is not granted to source %s", denied,
			 SOURCE);
		check_row("ConfigMap", denied, "leak", "refused", part);
	}
	check_row("Pod", p->src_ns, "evil", "refused", "violates podSecurity baseline");
	check_row("ConfigMap", p->src_ns, "hand-made", "refused",
		  "exists on the target and was not created by drasync");

	/* The source deletes its hand-made: the person's is kept. */
	tu_kube_delete(p->src, "v1", "ConfigMap", p->src_ns, "hand-made");
	check_row("ConfigMap", p->src_ns, "hand-made", "kept", NULL);

	/* The namespace not granted: neither created nor filled, under either name. */
	o = tu_e2e_get(p->dst, "v1", "Namespace", NULL, denied);
	tu_trust_check(!o, "namespace %s (not granted) exists on the target", denied);
	json_decref(o);
	{
		char mapped[80];

		snprintf(mapped, sizeof(mapped), "%s-dr", denied);
		o = tu_e2e_get(p->dst, "v1", "Namespace", NULL, mapped);
		tu_trust_check(!o, "namespace %s exists on the target", mapped);
		json_decref(o);
	}
	/* The target namespace: exactly what the person set. */
	meta = ns_meta(p->dst, p->dst_ns);
	{
		char *want = json_dumps(meta0, JSON_SORT_KEYS | JSON_COMPACT);
		char *got = json_dumps(meta, JSON_SORT_KEYS | JSON_COMPACT);

		tu_trust_check(json_equal(meta, meta0),
			       "namespace %s: its labels and annotations changed from %s to %s",
			       p->dst_ns, want, got);
		tu_trust_check(!strstr(got, "privileged"),
			       "namespace %s: a privileged PSA label came from the source: %s",
			       p->dst_ns, got);
		free(want);
		free(got);
	}
	json_decref(meta);
	json_decref(meta0);
	/* The Pod: not on the target. */
	o = tu_e2e_get(p->dst, "v1", "Pod", p->dst_ns, "evil");
	tu_trust_check(!o, "the privileged hostNetwork hostPath:/ Pod runs on the target");
	json_decref(o);
	/* The person's ConfigMap: not taken over, not deleted. */
	o = tu_e2e_get(p->dst, "v1", "ConfigMap", p->dst_ns, "hand-made");
	tu_trust_check(o != NULL, "the person's ConfigMap was deleted with the source's");
	if (o) {
		tu_trust_check(str_is(o, "/metadata/resourceVersion", mine_rv) &&
				   str_is(o, "/data/who", "person"),
			       "the person's ConfigMap was written: resourceVersion %s (was %s), "
			       "data.who %s",
			       dt_str(o, "/metadata/resourceVersion"), mine_rv,
			       dt_str(o, "/data/who"));
	}
	json_decref(o);

	/* drasync-target status: the refused objects, per source, with reasons. */
	st = tu_pair_status(p);
	{
		const char *want[] = {"leak", "evil"};
		json_t *items = json_object_get(st, "needsLook"), *it;
		size_t i;

		for (size_t k = 0; k < 2; k++) {
			bool found = false;

			json_array_foreach (items, i, it)
				found = found || (str_is(it, "/name", want[k]) &&
						  str_is(it, "/state", "refused") &&
						  str_is(it, "/source", SOURCE) &&
						  !str_is(it, "/reason", ""));
			tu_trust_check(found,
				       "drasync-target status -o json does not list %s refused for "
				       "source %s with a reason",
				       want[k], SOURCE);
			found = false;
			json_array_foreach (json_object_get(json_object_get(st, "refused"), SOURCE),
					    i, it)
				found = found || (str_is(it, "/name", want[k]) &&
						  !str_is(it, "/reason", ""));
			tu_trust_check(found,
				       "drasync-target status -o json: refused.%s does not list %s "
				       "with a reason",
				       SOURCE, want[k]);
		}
	}
	json_decref(st);
	tu_run(&r, NULL,
	       (const char *[]){tu_env("DS_TARGET_BIN"), "status", "--config", p->site.cfg, NULL});
	tu_trust_check(strstr(r.out, "refused") && strstr(r.out, "violates podSecurity baseline"),
		       "drasync-target status does not show the refusals:\n%s", r.out);
	tu_run_dispose(&r);

	/* drasync-source status: the target's refusals, heard back in its Acks. */
	for (long long end = tu_now_ms() + 20000;; tu_msleep(500)) {
		bool seen;

		tu_run(&r, NULL,
		       (const char *[]){tu_env("DS_SOURCE_BIN"), "status", "--config",
					p->site.source_cfg, NULL});
		seen = strstr(r.out, "REFUSED") && strstr(r.out, "evil") &&
		       strstr(r.out, "violates podSecurity baseline");
		if (seen || tu_now_ms() > end) {
			tu_trust_check(seen,
				       "drasync-source status does not show the refused Pod "
				       "with its reason:\n%s%s",
				       r.out, r.err);
			tu_run_dispose(&r);
			break;
		}
		tu_run_dispose(&r);
	}

	tu_trust_check_done("the scenario of issue 22");

	tu_site_source_sigterm(&p->site);
	tu_site_agent_sigterm(&p->site);
}

static int teardown(void **state)
{
	(void)state;
	if (P.src) {
		if (denied)
			tu_kube_drop_namespace(P.src, denied);
		tu_pair_dispose(&P);
	}
	denied = NULL;
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_e2e_trust__a_source_writes_only_what_the_target_grants,
				      teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
