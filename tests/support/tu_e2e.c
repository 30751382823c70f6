#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu_e2e.h"

#include "dstest.h"
#include "testutil.h"
#include "tu_http.h"
#include "tu_kube.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void write_configs(tu_pair *p, const char *target_extra, const char *source_extra);

void tu_pair_init(tu_pair *p, const char *prefix, const char *src_env, const char *dst_env,
		  const char *source_name, const char *target_extra, const char *source_extra)
{
	tu_pair_init_with(p, 0, prefix, src_env, dst_env, source_name, target_extra, source_extra);
}

void tu_pair_init_with(tu_pair *p, unsigned rbac_flags, const char *prefix, const char *src_env,
		       const char *dst_env, const char *source_name, const char *target_extra,
		       const char *source_extra)
{
	memset(p, 0, sizeof(*p));
	p->src_admin = tu_env(src_env);
	p->dst_admin = tu_env(dst_env);
	p->src = tu_kube_connect(p->src_admin);
	p->dst = tu_kube_connect(p->dst_admin);
	p->src_ns = tu_kube_new_namespace(p->src, prefix, "");
	snprintf(p->dst_ns, sizeof(p->dst_ns), "%s-dr", p->src_ns);
	tu_rbac_install_with(&p->rbac, rbac_flags, p->src_admin,
			     (const char *const[]){p->src_ns, NULL}, p->dst_admin,
			     (const char *const[]){p->dst_ns, NULL});
	tu_site_init(&p->site, prefix, p->rbac.target_kubeconfig, source_name);
	write_configs(p, target_extra, source_extra);
}

/* The site's config files, as tu_pair_init writes them. */
static void write_configs(tu_pair *p, const char *target_extra, const char *source_extra)
{
	char *text;

	/* the shipped RBAC's namespace: the ledger's identity is written there */
	assert_true(asprintf(&text,
			     "identity: {namespace: drasync}\nnamespaceMappings: {%s: %s}\n%s",
			     p->src_ns, p->dst_ns, target_extra ? target_extra : "") > 0);
	tu_site_write_config(&p->site, text);
	free(text);
	assert_true(asprintf(&text, "namespaces: [%s]\n%s", p->src_ns,
			     source_extra ? source_extra : "") > 0);
	tu_site_write_source_config(&p->site, text);
	free(text);
}

void tu_pair_init_reverse(tu_pair *p, const tu_pair *fwd, const char *prefix,
			  const char *source_name, const char *target_extra,
			  const char *source_extra)
{
	memset(p, 0, sizeof(*p));
	p->src_admin = fwd->dst_admin;
	p->dst_admin = fwd->src_admin;
	p->src = tu_kube_connect(p->src_admin);
	p->dst = tu_kube_connect(p->dst_admin);
	p->src_ns = strdup(fwd->dst_ns);
	assert_non_null(p->src_ns);
	snprintf(p->dst_ns, sizeof(p->dst_ns), "%s", fwd->src_ns);
	tu_rbac_install(&p->rbac, p->src_admin, (const char *const[]){p->src_ns, NULL},
			p->dst_admin, (const char *const[]){p->dst_ns, NULL});
	tu_site_init(&p->site, prefix, p->rbac.target_kubeconfig, source_name);
	write_configs(p, target_extra, source_extra);
}

void tu_pair_dispose(tu_pair *p)
{
	if (p->site.dir)
		tu_site_dispose(&p->site);
	tu_rbac_remove(&p->rbac);
	if (p->src_ns)
		tu_kube_drop_namespace(p->src, p->src_ns);
	ds_kube_free(p->src);
	ds_kube_free(p->dst);
	memset(p, 0, sizeof(*p));
}

/* The opt-in Role of deploy/kustomize/source-relocate, for the source's ServiceAccount. */
void tu_pair_grant_relocate(tu_pair *p)
{
	tu_kube_create(p->src,
		       tu_kube_doc("apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\n"
				   "metadata: {name: drasync-source-relocate, namespace: "
				   "%s}\nrules:\n"
				   "- {apiGroups: [apps], resources: [deployments, "
				   "statefulsets, replicasets, daemonsets], verbs: [get, "
				   "list, update]}\n"
				   "- {apiGroups: [batch], resources: [cronjobs], verbs: "
				   "[get, list, update]}\n"
				   "- {apiGroups: [batch], resources: [jobs], verbs: [get, "
				   "list, delete]}\n"
				   "- {apiGroups: [''], resources: [pods], verbs: [get, "
				   "list, delete]}\n"
				   "- {apiGroups: ['', apps, batch, resource.k8s.io, "
				   "scheduling.k8s.io], resources: [limitranges, "
				   "resourcequotas, serviceaccounts, configmaps, secrets, "
				   "persistentvolumeclaims, services, resourceclaimtemplates, "
				   "resourceclaims, workloads, podgroups, deployments, "
				   "replicasets, statefulsets, daemonsets, cronjobs], verbs: "
				   "[list, patch]}\n",
				   p->src_ns));
	tu_kube_create(p->src, tu_kube_doc("apiVersion: rbac.authorization.k8s.io/v1\nkind: "
					   "RoleBinding\nmetadata: {name: drasync-source-relocate, "
					   "namespace: %s}\nroleRef: {apiGroup: "
					   "rbac.authorization.k8s.io, kind: Role, name: "
					   "drasync-source-relocate}\nsubjects: [{kind: "
					   "ServiceAccount, name: drasync-source, namespace: "
					   "drasync}]\n",
					   p->src_ns));
}

void tu_pair_target_start(tu_pair *p)
{
	tu_site_agent_start(&p->site);
}

void tu_pair_source_start(tu_pair *p, const char *const *args)
{
	tu_site_source_start(&p->site, p->rbac.source_kubeconfig, args);
}

void tu_pair_target_cmd(tu_pair *p, struct tu_run *r, const char *const args[])
{
	const char *argv[32] = {
	    tu_env("DS_TARGET_BIN"),  args[0], "--config", p->site.cfg, "--kubeconfig",
	    p->rbac.target_kubeconfig};
	size_t n = 6;

	for (size_t i = 1; args[i]; i++) {
		assert_true(n + 1 < sizeof(argv) / sizeof(argv[0]));
		argv[n++] = args[i];
	}
	argv[n] = NULL;
	tu_run(r, NULL, argv);
}

json_t *tu_pair_status(tu_pair *p)
{
	struct tu_run r;
	json_error_t je;
	json_t *st;

	/* status reads only stateDir: no --kubeconfig */
	tu_run(&r, NULL,
	       (const char *[]){tu_env("DS_TARGET_BIN"), "status", "--config", p->site.cfg, "-o",
				"json", NULL});
	st = json_loads(r.out, 0, &je);
	if (!st)
		fail_msg("drasync-target status -o json (exit %d): %s\n%s%s", r.status, je.text,
			 r.out, r.err);
	tu_run_dispose(&r);
	return st;
}

json_t *tu_e2e_source_status(const tu_site *s)
{
	struct tu_run r;
	json_error_t je;
	json_t *st;

	/* status reads only stateDir; it exits 1 when something needs attention */
	tu_run(&r, NULL,
	       (const char *[]){tu_env("DS_SOURCE_BIN"), "status", "--config", s->source_cfg, "-o",
				"json", NULL});
	st = json_loads(r.out, 0, &je);
	if (!st)
		fail_msg("drasync-source status -o json (exit %d): %s\n%s%s", r.status, je.text,
			 r.out, r.err);
	tu_run_dispose(&r);
	return st;
}

double tu_e2e_metric(int port, const char *series)
{
	char url[128], *text;
	size_t n = strlen(series);
	double v = -1;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/metrics", port);
	text = tu_http_get(url, 200);
	for (const char *at = text; at && *at; at = strchr(at, '\n'), at = at ? at + 1 : NULL)
		if (strncmp(at, series, n) == 0 && at[n] == ' ')
			v = strtod(at + n + 1, NULL);
	free(text);
	return v;
}

json_t *tu_e2e_get(ds_kube *k, const char *api, const char *kind, const char *ns, const char *name)
{
	struct ds_kube_resource r = tu_kube_resource(k, api, kind);
	ds_kube_error ke;
	json_t *o = NULL;

	if (ds_kube_get(k, &r, ns, name, NULL, &o, &ke) < 0)
		return NULL;
	if (dt_get(o, "/metadata/deletionTimestamp")) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static void fail_with_log(const tu_site *log, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));
static void fail_with_log(const tu_site *log, const char *fmt, ...)
{
	char what[2000];
	char *tlog = log ? tu_site_run_log(log) : NULL,
	     *slog = log ? tu_site_source_run_log(log) : NULL;
	size_t tl = tlog ? strlen(tlog) : 0, sl = slog ? strlen(slog) : 0;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	/* the logs' last 6000 characters */
	fail_msg("%s\n--- target log (end):\n%s\n--- source log (end):\n%s", what,
		 tlog ? tlog + (tl > 6000 ? tl - 6000 : 0) : "",
		 slog ? slog + (sl > 6000 ? sl - 6000 : 0) : "");
	abort();
}

json_t *tu_e2e_wait_get(ds_kube *k, const char *api, const char *kind, const char *ns,
			const char *name, int timeout_ms, const tu_site *log)
{
	long long end = tu_now_ms() + timeout_ms;
	json_t *o;

	while (!(o = tu_e2e_get(k, api, kind, ns, name))) {
		if (tu_now_ms() > end)
			fail_with_log(log, "%s %s/%s did not appear in %d ms", kind, ns, name,
				      timeout_ms);
		tu_msleep(200);
	}
	return o;
}

void tu_e2e_wait_gone(ds_kube *k, const char *api, const char *kind, const char *ns,
		      const char *name, int timeout_ms, const tu_site *log)
{
	long long end = tu_now_ms() + timeout_ms;
	json_t *o;

	while ((o = tu_e2e_get(k, api, kind, ns, name))) {
		json_decref(o);
		if (tu_now_ms() > end)
			fail_with_log(log, "%s %s/%s is still there after %d ms", kind, ns, name,
				      timeout_ms);
		tu_msleep(200);
	}
}

json_t *tu_e2e_list(ds_kube *k, const char *api, const char *kind, const char *ns,
		    const char *selector)
{
	struct ds_kube_resource r = tu_kube_resource(k, api, kind);
	struct ds_kube_list_opts lo = {.label_selector = selector};
	ds_kube_error ke;
	json_t *list = NULL, *items;

	TU_KUBE_CHECK(ds_kube_list(k, &r, ns, &lo, &list, NULL, &ke), ke);
	items = json_incref(json_object_get(list, "items"));
	json_decref(list);
	return items;
}

json_t *tu_e2e_wait_running(ds_kube *k, const char *ns, const char *selector, size_t n,
			    int timeout_ms, const tu_site *log)
{
	long long end = tu_now_ms() + timeout_ms;

	for (;;) {
		json_t *pods = tu_e2e_list(k, "v1", "Pod", ns, selector), *pod;
		char phases[1500] = "";
		size_t running = 0, i, len = 0;

		json_array_foreach (pods, i, pod) {
			const char *ph = dt_str(pod, "/status/phase");
			int w;

			if (ph && strcmp(ph, "Running") == 0 &&
			    !dt_get(pod, "/metadata/deletionTimestamp"))
				running++;
			w = snprintf(phases + len, sizeof(phases) - len, " %s=%s",
				     dt_str(pod, "/metadata/name"), ph ? ph : "?");
			if (w > 0 && (size_t)w < sizeof(phases) - len)
				len += (size_t)w;
		}
		if (running == n && json_array_size(pods) == n)
			return pods;
		if (tu_now_ms() > end)
			fail_with_log(log, "pods %s in %s: %zu of %zu Running after %d ms:%s",
				      selector ? selector : "(all)", ns, running, n, timeout_ms,
				      phases);
		json_decref(pods);
		tu_msleep(300);
	}
}

/* Claim `name` in the pod's namespace is allocated by driver on the pod's node and reserved for it.
 */
static void assert_claim(ds_kube *k, const char *api, const json_t *pod, const char *name,
			 const char *driver)
{
	const char *ns = dt_str(pod, "/metadata/namespace"), *node = dt_str(pod, "/spec/nodeName");
	const char *uid = dt_str(pod, "/metadata/uid");
	json_t *claim = tu_e2e_get(k, api, "ResourceClaim", ns, name), *res, *v;
	bool reserved = false;
	size_t i;

	if (!claim)
		fail_msg("ResourceClaim %s/%s of pod %s is missing", ns, name,
			 dt_str(pod, "/metadata/name"));
	res = dt_get(claim, "/status/allocation/devices/results");
	if (json_array_size(res) == 0)
		fail_msg("ResourceClaim %s/%s of pod %s is not allocated", ns, name,
			 dt_str(pod, "/metadata/name"));
	json_array_foreach (res, i, v) {
		const char *d = dt_str(v, "/driver"), *pool = dt_str(v, "/pool");

		if (!d || strcmp(d, driver) != 0 || !pool || !node || strcmp(pool, node) != 0)
			fail_msg("ResourceClaim %s/%s: device %s of driver %s in pool %s, not on "
				 "%s's node %s",
				 ns, name, dt_str(v, "/device"), d, pool, driver, node);
	}
	json_array_foreach (dt_get(claim, "/status/reservedFor"), i, v) {
		const char *u = dt_str(v, "/uid");

		if (u && uid && strcmp(u, uid) == 0)
			reserved = true;
	}
	if (!reserved)
		fail_msg("ResourceClaim %s/%s is not reserved for pod %s", ns, name,
			 dt_str(pod, "/metadata/name"));
	json_decref(claim);
}

size_t tu_e2e_assert_pod_claims(ds_kube *k, const char *api, const json_t *pod, const char *driver)
{
	size_t n = 0, i;
	json_t *v;

	json_array_foreach (dt_get(pod, "/spec/resourceClaims"), i, v) {
		const char *name = dt_str(v, "/resourceClaimName");

		if (name) {
			assert_claim(k, api, pod, name, driver);
			n++;
		}
	}
	json_array_foreach (dt_get(pod, "/status/resourceClaimStatuses"), i, v) {
		const char *name = dt_str(v, "/resourceClaimName");

		if (name) {
			assert_claim(k, api, pod, name, driver);
			n++;
		}
	}
	return n;
}

void tu_e2e_assert_log(const char *what, const char *text, const char *needle, bool want)
{
	bool has = strstr(text, needle) != NULL;

	if (has != want)
		fail_msg("%s: %s '%s' in:\n%s", what, want ? "no" : "unexpected", needle, text);
}
