/*
 * What travels, as users run the pair (both agents as processes on their
 * ServiceAccount tokens bound by the shipped RBAC, with the component the
 * option needs: tu_e2e.h, tests/e2e/shipped_rbac.sh); v1 source cluster ->
 * v1beta1 target cluster.
 *   - namespaceSelector (SPEC §8, operations.md "Running the source agent"):
 *     only the labelled namespace travels; a namespace that gains the label
 *     is picked up with a full pass; one that loses it is no longer
 *     replicated (a change, a new object, a delete made there stay on the
 *     source) and nothing of it is deleted on the target; labelled again,
 *     what changed meanwhile arrives.
 *   - dra.replicateDeviceClasses (SPEC §2): on, the source's DeviceClasses
 *     are copied (converted to the target's version, drasync's marks on
 *     them) and the pods of Deployments whose templates ask for them run on
 *     the target with claims allocated through the copied class; a class
 *     that deviceClassMappings maps away is copied without its
 *     extendedResourceName, and the templates that asked for it ask for the
 *     mapping's class; the target's own class of a source's name is refused
 *     and left as it is; a class deleted on the source is deleted on the
 *     target. Off, no class is copied (the record is skipped with its
 *     reason) and a workload whose template needs one waits for it, then
 *     runs once the target's administrator made it.
 *   - PersistentVolumeClaims (SPEC §2 "spec only", §2 sanitizing): a claim
 *     bound on the source arrives without the source's volumeName and bind
 *     annotations, Pending, its spec and the user's metadata kept; it binds
 *     to a volume the target's administrator provides, the Deployment that
 *     mounts it runs, and a later change on the source neither unbinds it
 *     nor fights the target's binder.
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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DRIVER "gpu.example.com"
#define DST_API "resource.k8s.io/v1beta1"

static tu_pair P; /* disposed by teardown(), after a failure too */

static int teardown(void **state)
{
	(void)state;
	if (P.src)
		tu_pair_dispose(&P);
	return 0;
}

/* Lines of text holding needle. */
static size_t count(const char *text, const char *needle)
{
	size_t n = 0;

	for (const char *at = text; (at = strstr(at, needle)); at += strlen(needle))
		n++;
	return n;
}

/* Wait until the source's current run logged `needle`. */
static void wait_source_log(const tu_site *s, const char *needle, int timeout_ms)
{
	long long end = tu_now_ms() + timeout_ms;

	for (;;) {
		char *log = tu_site_source_run_log(s);
		bool got = count(log, needle) > 0;

		if (got) {
			free(log);
			return;
		}
		if (tu_now_ms() > end)
			fail_msg("the source did not log '%s' in %d ms:\n%s", needle, timeout_ms,
				 log);
		free(log);
		tu_msleep(100);
	}
}

/* Wait until the target's current run logged `needle`; the log (caller frees). */
static char *wait_target_log(const tu_site *s, const char *needle, int timeout_ms)
{
	long long end = tu_now_ms() + timeout_ms;

	for (;;) {
		char *log = tu_site_run_log(s);

		if (strstr(log, needle))
			return log;
		if (tu_now_ms() > end)
			fail_msg("the target did not log '%s' in %d ms:\n%s", needle, timeout_ms,
				 log);
		free(log);
		tu_msleep(200);
	}
}

/* A line of text holding both a and b; fails when none does. */
static void line_with_both(const char *text, const char *a, const char *b, char *out, size_t size)
{
	for (const char *at = text; (at = strstr(at, a)); at++) {
		const char *start = at, *end = strchr(at, '\n');

		while (start > text && start[-1] != '\n')
			start--;
		end = end ? end : at + strlen(at);
		snprintf(out, size, "%.*s", (int)(end - start), start);
		if (strstr(out, b))
			return;
	}
	fail_msg("no line with '%s' and '%s' in:\n%s", a, b, text);
}

/* ConfigMap ns/name's data.v on the cluster; NULL when absent (freed by the caller). */
static char *cm_value(ds_kube *k, const char *ns, const char *name)
{
	json_t *o = tu_e2e_get(k, "v1", "ConfigMap", ns, name);
	char *v = o && dt_str(o, "/data/v") ? strdup(dt_str(o, "/data/v")) : NULL;

	json_decref(o);
	return v;
}

static void wait_cm_value(ds_kube *k, const char *ns, const char *name, const char *want,
			  int timeout_ms, const tu_site *log)
{
	long long end = tu_now_ms() + timeout_ms;

	for (;;) {
		char *v = cm_value(k, ns, name);
		bool ok = v && strcmp(v, want) == 0;

		if (ok) {
			free(v);
			return;
		}
		if (tu_now_ms() > end) {
			char *tl = tu_site_run_log(log), *sl = tu_site_source_run_log(log);

			fail_msg("ConfigMap %s/%s on the target has v=%s, not %s after %d ms\n"
				 "--- target log:\n%s\n--- source log:\n%s",
				 ns, name, v ? v : "(none)", want, timeout_ms, tl, sl);
		}
		free(v);
		tu_msleep(200);
	}
}

static void assert_cm_value(ds_kube *k, const char *ns, const char *name, const char *want)
{
	char *v = cm_value(k, ns, name);

	if (want ? !v || strcmp(v, want) != 0 : v != NULL)
		fail_msg("ConfigMap %s/%s on the target: v=%s, expected %s", ns, name,
			 v ? v : "(absent)", want ? want : "(absent)");
	free(v);
}

static void cm(ds_kube *k, const char *ns, const char *name, const char *v)
{
	tu_kube_create(k, tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, "
				      "namespace: %s}\ndata: {v: \"%s\"}\n",
				      name, ns, v));
}

static void cm_set(ds_kube *k, const char *ns, const char *name, const char *v)
{
	char patch[200];

	snprintf(patch, sizeof(patch), "{\"data\":{\"v\":\"%s\"}}", v);
	tu_kube_merge(k, "v1", "ConfigMap", ns, name, NULL, patch);
}

/* ---- namespaceSelector -------------------------------------------------------------- */

#define SEL_KEY "e2e.drasync.io/replicate"

static struct {
	ds_kube *src, *dst;
	char *ns[2];
	char dst_ns[2][64];
	tu_rbac rbac;
	tu_site site;
} S;

static void label_ns(const char *ns, const char *value)
{
	char patch[200];

	if (value)
		snprintf(patch, sizeof(patch),
			 "{\"metadata\":{\"labels\":{\"" SEL_KEY "\":\"%s\"}}}", value);
	else
		snprintf(patch, sizeof(patch),
			 "{\"metadata\":{\"labels\":{\"" SEL_KEY "\":null}}}");
	tu_kube_merge(S.src, "v1", "Namespace", NULL, ns, NULL, patch);
}

static void test_e2e_scope__namespace_selector(void **state)
{
	char token[32], labels[80], needle[200], *text;
	size_t i;

	(void)state;
	/* The label's value is this run's: no other namespace of the cluster matches. */
	snprintf(token, sizeof(token), "t%u", tu_rand());
	snprintf(labels, sizeof(labels), "%s: %s", SEL_KEY, token);
	S.src = tu_kube_connect(tu_env("DS_KUBECONFIG_V1"));
	S.dst = tu_kube_connect(tu_env("DS_KUBECONFIG_V1BETA1"));
	S.ns[0] = tu_kube_new_namespace(S.src, "e2esela", labels);
	S.ns[1] = tu_kube_new_namespace(S.src, "e2eselb", "");
	for (i = 0; i < 2; i++) {
		snprintf(S.dst_ns[i], sizeof(S.dst_ns[i]), "%s-dr", S.ns[i]);
		cm(S.src, S.ns[i], "settings", "one");
		cm(S.src, S.ns[i], "extra", "one");
	}
	/* A selector reads cluster-wide: the shipped component for it. */
	tu_rbac_install_with(&S.rbac, TU_RBAC_SOURCE_CLUSTER_WIDE, tu_env("DS_KUBECONFIG_V1"),
			     (const char *const[]){S.ns[0], S.ns[1], NULL},
			     tu_env("DS_KUBECONFIG_V1BETA1"),
			     (const char *const[]){S.dst_ns[0], S.dst_ns[1], NULL});
	tu_site_init(&S.site, "e2esel", S.rbac.target_kubeconfig, "prod-east");
	assert_true(asprintf(&text,
			     "identity: {namespace: drasync}\nmode: migrate\n"
			     "namespaceMappings: {%s: %s, %s: %s}\n",
			     S.ns[0], S.dst_ns[0], S.ns[1], S.dst_ns[1]) > 0);
	tu_site_write_config(&S.site, text);
	free(text);
	assert_true(asprintf(&text, "namespaceSelector: \"%s=%s\"\n", SEL_KEY, token) > 0);
	tu_site_write_source_config(&S.site, text);
	free(text);
	tu_site_agent_start(&S.site);
	tu_site_source_start(&S.site, S.rbac.source_kubeconfig, NULL);
	wait_source_log(&S.site, "event=namespace_reads scope=cluster", 10000);

	/* Only the labelled namespace travels. */
	wait_cm_value(S.dst, S.dst_ns[0], "settings", "one", 60000, &S.site);
	wait_cm_value(S.dst, S.dst_ns[0], "extra", "one", 10000, &S.site);
	/* a change in it goes at once (watch): after that, B had its chance too */
	cm_set(S.src, S.ns[0], "settings", "two");
	wait_cm_value(S.dst, S.dst_ns[0], "settings", "two", 15000, &S.site);
	assert_cm_value(S.dst, S.dst_ns[1], "settings", NULL);
	assert_cm_value(S.dst, S.dst_ns[1], "extra", NULL);

	/* B gains the label: picked up with a full pass. */
	label_ns(S.ns[1], token);
	snprintf(needle, sizeof(needle), "event=namespace_selected namespace=%s", S.ns[1]);
	wait_source_log(&S.site, needle, 15000);
	wait_cm_value(S.dst, S.dst_ns[1], "settings", "one", 15000, &S.site);
	wait_cm_value(S.dst, S.dst_ns[1], "extra", "one", 10000, &S.site);

	/* A loses it: no longer replicated, nothing of it deleted on the target. */
	label_ns(S.ns[0], NULL);
	snprintf(needle, sizeof(needle), "event=namespace_unselected namespace=%s", S.ns[0]);
	wait_source_log(&S.site, needle, 15000);
	cm_set(S.src, S.ns[0], "settings", "three");
	cm(S.src, S.ns[0], "late", "one");
	tu_kube_delete(S.src, "v1", "ConfigMap", S.ns[0], "extra");
	/* B, still selected, goes on: once its change is there, A's would be too */
	cm_set(S.src, S.ns[1], "settings", "two");
	wait_cm_value(S.dst, S.dst_ns[1], "settings", "two", 15000, &S.site);
	tu_msleep(2000);
	assert_cm_value(S.dst, S.dst_ns[0], "settings", "two");
	assert_cm_value(S.dst, S.dst_ns[0], "late", NULL);
	assert_cm_value(S.dst, S.dst_ns[0], "extra", "one");

	/* Labelled again: what changed meanwhile arrives. */
	label_ns(S.ns[0], token);
	snprintf(needle, sizeof(needle), "event=namespace_selected namespace=%s", S.ns[0]);
	wait_source_log(&S.site, needle, 15000);
	wait_cm_value(S.dst, S.dst_ns[0], "settings", "three", 15000, &S.site);
	wait_cm_value(S.dst, S.dst_ns[0], "late", "one", 15000, &S.site);

	text = tu_site_run_log(&S.site);
	tu_e2e_assert_log("target log", text, "state=failed", false);
	tu_e2e_assert_log("target log", text, "state=refused", false);
	free(text);
	text = tu_site_source_run_log(&S.site);
	tu_e2e_assert_log("source log", text, "level=error", false);
	tu_e2e_assert_log("source log", text, "forbidden", false);
	free(text);
	tu_site_source_sigterm(&S.site);
	tu_site_agent_sigterm(&S.site);
}

static int teardown_selector(void **state)
{
	(void)state;
	if (S.site.dir)
		tu_site_dispose(&S.site);
	tu_rbac_remove(&S.rbac);
	for (size_t i = 0; i < 2; i++)
		if (S.ns[i])
			tu_kube_drop_namespace(S.src, S.ns[i]);
	ds_kube_free(S.src);
	ds_kube_free(S.dst);
	memset(&S, 0, sizeof(S));
	return 0;
}

/* ---- replicateDeviceClasses --------------------------------------------------------- */

static char dc_source[64];  /* the source's cluster name: the copies' drasync.io/source-cluster */
static char dc_fast[64];    /* a class of the source, which a template asks for */
static char dc_legacy[64];  /* one that deviceClassMappings maps to dc_fast */
static bool dc_target_made; /* dc_fast made on the target by its administrator */

static void device_class(ds_kube *k, const char *api, const char *name, const char *extended)
{
	char ern[200] = "";

	if (extended)
		snprintf(ern, sizeof(ern), ", extendedResourceName: %s", extended);
	tu_kube_create(k, tu_kube_doc("apiVersion: %s\nkind: DeviceClass\n"
				      "metadata: {name: %s, labels: {tier: fast}}\n"
				      "spec: {selectors: [{cel: {expression: 'device.driver == "
				      "\"" DRIVER "\"'}}]%s}\n",
				      api, name, ern));
}

/* A template of one device of `cls` and a Deployment of one pod using it, in ns. */
static void workload(ds_kube *k, const char *ns, const char *name, const char *cls)
{
	tu_kube_create(k,
		       tu_kube_doc("apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\n"
				   "metadata: {name: %s, namespace: %s}\n"
				   "spec: {spec: {devices: {requests: [{name: gpu, exactly: "
				   "{deviceClassName: %s}}]}}}\n",
				   name, ns, cls));
	tu_kube_create(
	    k, tu_kube_doc("apiVersion: apps/v1\nkind: Deployment\n"
			   "metadata: {name: %s, namespace: %s}\n"
			   "spec:\n  replicas: 1\n  selector: {matchLabels: {app: %s}}\n"
			   "  template:\n    metadata: {labels: {app: %s}}\n"
			   "    spec:\n"
			   "      resourceClaims: [{name: gpu, resourceClaimTemplateName: %s}]\n"
			   "      containers: [{name: main, image: registry.k8s.io/pause:3.10, "
			   "resources: {claims: [{name: gpu}]}}]\n",
			   name, ns, name, name, name));
}

/* The pod of Deployment app on the target Running with its claim allocated there. */
static void assert_runs(tu_pair *p, const char *app)
{
	char sel[100];
	json_t *pods;

	snprintf(sel, sizeof(sel), "app=%s", app);
	pods = tu_e2e_wait_running(p->dst, p->dst_ns, sel, 1, 90000, &p->site);
	assert_int_equal(tu_e2e_assert_pod_claims(p->dst, DST_API, json_array_get(pods, 0), DRIVER),
			 1);
	json_decref(pods);
}

static void dc_names(void)
{
	unsigned r = tu_rand();

	snprintf(dc_source, sizeof(dc_source), "e2edc-%u", r);
	snprintf(dc_fast, sizeof(dc_fast), "fast-%u.example.com", r);
	snprintf(dc_legacy, sizeof(dc_legacy), "legacy-%u.example.com", r);
	dc_target_made = false;
}

static void test_e2e_scope__device_classes_copied(void **state)
{
	tu_pair *const p = &P;
	char extra[400], needle[300];
	json_t *o, *st, *v;
	bool refused = false;
	size_t i;
	char *log;

	(void)state;
	dc_names();
	snprintf(extra, sizeof(extra),
		 "mode: migrate\ndra:\n  replicateDeviceClasses: true\n"
		 "  deviceClassMappings: [{from: %s, to: %s}]\n",
		 dc_legacy, dc_fast);
	tu_pair_init_with(p, TU_RBAC_TARGET_DEVICECLASSES, "e2edc", "DS_KUBECONFIG_V1",
			  "DS_KUBECONFIG_V1BETA1", dc_source, extra, NULL);
	device_class(p->src, "resource.k8s.io/v1", dc_fast, NULL);
	device_class(p->src, "resource.k8s.io/v1", dc_legacy, "example.com/legacy-gpu");
	workload(p->src, p->src_ns, "trainer", dc_fast);
	workload(p->src, p->src_ns, "old", dc_legacy);
	tu_pair_target_start(p);
	tu_pair_source_start(p, NULL);

	/* Both classes copied in the target's version, with drasync's marks. */
	o = tu_e2e_wait_get(p->dst, DST_API, "DeviceClass", NULL, dc_fast, 60000, &p->site);
	assert_string_equal(dt_str(o, "/apiVersion"), DST_API);
	assert_string_equal(dt_str(o, "/metadata/labels/app.kubernetes.io~1managed-by"), "drasync");
	assert_string_equal(dt_str(o, "/metadata/labels/tier"), "fast");
	assert_string_equal(dt_str(o, "/metadata/annotations/drasync.io~1source-cluster"),
			    dc_source);
	assert_string_equal(dt_str(o, "/spec/selectors/0/cel/expression"),
			    "device.driver == \"" DRIVER "\"");
	json_decref(o);
	/* the one mapped away loses extendedResourceName (configuration.md) */
	o = tu_e2e_wait_get(p->dst, DST_API, "DeviceClass", NULL, dc_legacy, 30000, &p->site);
	assert_null(dt_get(o, "/spec/extendedResourceName"));
	assert_string_equal(dt_str(o, "/spec/selectors/0/cel/expression"),
			    "device.driver == \"" DRIVER "\"");
	json_decref(o);

	/* The templates ask for the copied class (the mapped one renamed), and the pods run. */
	o = tu_e2e_wait_get(p->dst, DST_API, "ResourceClaimTemplate", p->dst_ns, "old", 30000,
			    &p->site);
	assert_string_equal(dt_str(o, "/spec/spec/devices/requests/0/deviceClassName"), dc_fast);
	json_decref(o);
	o = tu_e2e_wait_get(p->dst, DST_API, "ResourceClaimTemplate", p->dst_ns, "trainer", 30000,
			    &p->site);
	assert_string_equal(dt_str(o, "/spec/spec/devices/requests/0/deviceClassName"), dc_fast);
	json_decref(o);
	assert_runs(p, "trainer");
	assert_runs(p, "old");

	/* The target's own class of a source's name: refused, left as it is. */
	o = tu_e2e_get(p->dst, DST_API, "DeviceClass", NULL, DRIVER);
	assert_non_null(o);
	assert_null(dt_str(o, "/metadata/labels/app.kubernetes.io~1managed-by"));
	assert_null(dt_str(o, "/metadata/annotations/drasync.io~1source-cluster"));
	json_decref(o);
	st = tu_pair_status(p);
	json_array_foreach (json_object_get(json_object_get(st, "refused"), dc_source), i, v) {
		if (strcmp(dt_str(v, "/kind"), "DeviceClass") == 0 &&
		    strcmp(dt_str(v, "/name"), DRIVER) == 0 &&
		    strstr(dt_str(v, "/reason"), "was not created by drasync"))
			refused = true;
	}
	if (!refused)
		fail_msg("status does not show DeviceClass %s refused: %s", DRIVER,
			 json_dumps(st, JSON_INDENT(1)));
	json_decref(st);

	/* The report says what the mapping did to the class. */
	snprintf(
	    needle, sizeof(needle),
	    "event=mapping type=deviceclass object=\"DeviceClass %s\" container=\"\" entry=\"\" "
	    "from=\"extendedResourceName=example.com/legacy-gpu\" to=(removed)",
	    dc_legacy);
	log = wait_target_log(&p->site, "event=mapping type=deviceclass", 10000);
	tu_e2e_assert_log("target log", log, needle, true);
	tu_e2e_assert_log("target log", log, "state=failed", false);
	free(log);

	/* A class deleted on the source is deleted on the target. */
	tu_kube_delete(p->src, "resource.k8s.io/v1", "DeviceClass", NULL, dc_legacy);
	tu_e2e_wait_gone(p->dst, DST_API, "DeviceClass", NULL, dc_legacy, 20000, &p->site);
	o = tu_e2e_get(p->dst, DST_API, "DeviceClass", NULL, dc_fast);
	assert_non_null(o);
	json_decref(o);
	tu_site_source_sigterm(&p->site);
	tu_site_agent_sigterm(&p->site);
}

static void test_e2e_scope__device_classes_not_copied_by_default(void **state)
{
	tu_pair *const p = &P;
	char needle[300], line[2000];
	json_t *st, *v;
	bool waits = false;
	size_t i;
	char *log;

	(void)state;
	dc_names();
	tu_pair_init(p, "e2edn", "DS_KUBECONFIG_V1", "DS_KUBECONFIG_V1BETA1", dc_source,
		     "mode: migrate\n", NULL);
	device_class(p->src, "resource.k8s.io/v1", dc_fast, NULL);
	workload(p->src, p->src_ns, "trainer", dc_fast);
	tu_pair_target_start(p);
	tu_pair_source_start(p, NULL);

	/* The template arrives; the class does not, and the Deployment waits for it. */
	json_decref(tu_e2e_wait_get(p->dst, DST_API, "ResourceClaimTemplate", p->dst_ns, "trainer",
				    60000, &p->site));
	/* the class's record, skipped with its reason */
	snprintf(needle, sizeof(needle), "object=resource.k8s.io/DeviceClass//%s ", dc_fast);
	log = wait_target_log(&p->site, needle, 30000);
	line_with_both(log, needle, "state=skipped", line, sizeof(line));
	tu_e2e_assert_log("the class's line", line,
			  "reason=\"DeviceClasses belong to the target's infrastructure (set "
			  "dra.replicateDeviceClasses to copy them)\"",
			  true);
	free(log);
	log = wait_target_log(&p->site, "needs DeviceClass", 30000);
	free(log);
	assert_null(tu_e2e_get(p->dst, DST_API, "DeviceClass", NULL, dc_fast));
	assert_null(tu_e2e_get(p->dst, "apps/v1", "Deployment", p->dst_ns, "trainer"));
	st = tu_pair_status(p);
	json_array_foreach (json_object_get(st, "needsLook"), i, v) {
		if (strcmp(dt_str(v, "/kind"), "Deployment") == 0 &&
		    strcmp(dt_str(v, "/name"), "trainer") == 0 &&
		    strcmp(dt_str(v, "/state"), "waiting") == 0 &&
		    strstr(dt_str(v, "/reason"), dc_fast))
			waits = true;
	}
	if (!waits)
		fail_msg("status does not show Deployment trainer waiting for DeviceClass %s: %s",
			 dc_fast, json_dumps(st, JSON_INDENT(1)));
	json_decref(st);

	/* The target's administrator makes the class: the workload goes on, and runs. */
	device_class(p->dst, DST_API, dc_fast, NULL);
	dc_target_made = true;
	json_decref(tu_e2e_wait_get(p->dst, "apps/v1", "Deployment", p->dst_ns, "trainer", 60000,
				    &p->site));
	assert_runs(p, "trainer");
	/* the administrator's class stays the administrator's */
	st = tu_e2e_get(p->dst, DST_API, "DeviceClass", NULL, dc_fast);
	assert_null(dt_str(st, "/metadata/labels/app.kubernetes.io~1managed-by"));
	json_decref(st);
	log = tu_site_run_log(&p->site);
	tu_e2e_assert_log("target log", log, "state=failed", false);
	free(log);
	tu_site_source_sigterm(&p->site);
	tu_site_agent_sigterm(&p->site);
}

/* Delete, ignoring "not found" (a teardown after a failure midway). */
static void drop(ds_kube *k, const char *api, const char *kind, const char *name)
{
	struct ds_kube_resource r = tu_kube_resource(k, api, kind);

	ds_kube_delete(k, &r, NULL, name, NULL, NULL);
}

/* What the device-class cases made: their classes on both clusters, and what
 * drasync copied for their source (the source offers every class of its cluster). */
static int teardown_device_classes(void **state)
{
	json_t *items, *o;
	size_t i;

	if (P.src) {
		drop(P.src, "resource.k8s.io/v1", "DeviceClass", dc_fast);
		drop(P.src, "resource.k8s.io/v1", "DeviceClass", dc_legacy);
	}
	if (P.dst) {
		if (dc_target_made)
			drop(P.dst, DST_API, "DeviceClass", dc_fast);
		items = tu_e2e_list(P.dst, DST_API, "DeviceClass", NULL,
				    "app.kubernetes.io/managed-by=drasync");
		json_array_foreach (items, i, o) {
			const char *by =
			    dt_str(o, "/metadata/annotations/drasync.io~1source-cluster");

			if (by && strcmp(by, dc_source) == 0)
				drop(P.dst, DST_API, "DeviceClass", dt_str(o, "/metadata/name"));
		}
		json_decref(items);
	}
	return teardown(state);
}

/* ---- PersistentVolumeClaims --------------------------------------------------------- */

static char pv_src[80], pv_dst[80]; /* the volumes (cluster-scoped) made here */

/* A hostPath volume of class cls, 1Gi, for whoever claims it. */
static void volume(ds_kube *k, const char *name, const char *cls)
{
	tu_kube_create(k,
		       tu_kube_doc("apiVersion: v1\nkind: PersistentVolume\n"
				   "metadata: {name: %s}\n"
				   "spec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], "
				   "persistentVolumeReclaimPolicy: Retain, storageClassName: %s, "
				   "hostPath: {path: /tmp/%s}}\n",
				   name, cls, name));
}

/* The claim ns/data once its phase is `phase`. */
static json_t *wait_claim(ds_kube *k, const char *ns, const char *phase, int timeout_ms,
			  const tu_site *log)
{
	long long end = tu_now_ms() + timeout_ms;

	for (;;) {
		json_t *o = tu_e2e_get(k, "v1", "PersistentVolumeClaim", ns, "data");
		const char *ph = o ? dt_str(o, "/status/phase") : NULL;

		if (ph && strcmp(ph, phase) == 0)
			return o;
		if (tu_now_ms() > end) {
			char *t = o ? json_dumps(o, JSON_INDENT(1)) : NULL,
			     *tl = log ? tu_site_run_log(log) : NULL;

			fail_msg("claim %s/data is not %s after %d ms: %s\n--- target log:\n%s", ns,
				 phase, timeout_ms, t ? t : "(absent)", tl ? tl : "");
		}
		json_decref(o);
		tu_msleep(300);
	}
}

static void test_e2e_scope__persistent_volume_claims(void **state)
{
	tu_pair *const p = &P;
	char cls[80];
	json_t *o, *pods;
	char *log;

	(void)state;
	tu_pair_init(p, "e2epvc", "DS_KUBECONFIG_V1", "DS_KUBECONFIG_V1BETA1", "prod-east",
		     "mode: migrate\n", NULL);
	/* the class is this run's: only its volumes can bind its claims */
	snprintf(cls, sizeof(cls), "e2e-%s", p->src_ns);
	snprintf(pv_src, sizeof(pv_src), "%s", p->src_ns);
	snprintf(pv_dst, sizeof(pv_dst), "%s", p->dst_ns);
	volume(p->src, pv_src, cls);
	tu_kube_create(p->src,
		       tu_kube_doc("apiVersion: v1\nkind: PersistentVolumeClaim\n"
				   "metadata: {name: data, namespace: %s, labels: {app: db}, "
				   "annotations: {backup.example.com/policy: nightly}}\n"
				   "spec: {accessModes: [ReadWriteOnce], storageClassName: %s, "
				   "volumeMode: Filesystem, resources: {requests: {storage: "
				   "1Gi}}}\n",
				   p->src_ns, cls));
	tu_kube_create(
	    p->src, tu_kube_doc("apiVersion: apps/v1\nkind: Deployment\n"
				"metadata: {name: db, namespace: %s}\n"
				"spec:\n  replicas: 1\n  selector: {matchLabels: {app: db}}\n"
				"  template:\n    metadata: {labels: {app: db}}\n"
				"    spec:\n"
				"      volumes: [{name: data, persistentVolumeClaim: "
				"{claimName: data}}]\n"
				"      containers: [{name: db, image: registry.k8s.io/pause:3.10, "
				"volumeMounts: [{name: data, mountPath: /data}]}]\n",
				p->src_ns));
	/* Bound on the source: the binder wrote volumeName and its annotations. */
	o = wait_claim(p->src, p->src_ns, "Bound", 60000, NULL);
	assert_string_equal(dt_str(o, "/spec/volumeName"), pv_src);
	assert_non_null(dt_str(o, "/metadata/annotations/pv.kubernetes.io~1bind-completed"));
	json_decref(o);

	tu_pair_target_start(p);
	tu_pair_source_start(p, NULL);

	/* Spec only: Pending on the target, none of the source's binding. */
	o = wait_claim(p->dst, p->dst_ns, "Pending", 60000, &p->site);
	assert_null(dt_get(o, "/spec/volumeName"));
	assert_null(dt_get(o, "/metadata/annotations/pv.kubernetes.io~1bind-completed"));
	assert_null(dt_get(o, "/metadata/annotations/pv.kubernetes.io~1bound-by-controller"));
	assert_string_equal(dt_str(o, "/spec/storageClassName"), cls);
	assert_string_equal(dt_str(o, "/spec/accessModes/0"), "ReadWriteOnce");
	assert_string_equal(dt_str(o, "/spec/volumeMode"), "Filesystem");
	assert_string_equal(dt_str(o, "/spec/resources/requests/storage"), "1Gi");
	assert_string_equal(dt_str(o, "/metadata/labels/app"), "db");
	assert_string_equal(dt_str(o, "/metadata/annotations/backup.example.com~1policy"),
			    "nightly");
	assert_string_equal(dt_str(o, "/metadata/labels/app.kubernetes.io~1managed-by"), "drasync");
	json_decref(o);
	/* the Deployment is there; its pod cannot start without a volume */
	json_decref(
	    tu_e2e_wait_get(p->dst, "apps/v1", "Deployment", p->dst_ns, "db", 30000, &p->site));

	/* The target's administrator provides a volume: the claim binds to it, the pod runs. */
	volume(p->dst, pv_dst, cls);
	o = wait_claim(p->dst, p->dst_ns, "Bound", 60000, &p->site);
	assert_string_equal(dt_str(o, "/spec/volumeName"), pv_dst);
	json_decref(o);
	pods = tu_e2e_wait_running(p->dst, p->dst_ns, "app=db", 1, 90000, &p->site);
	assert_string_equal(
	    dt_str(json_array_get(pods, 0), "/spec/volumes/0/persistentVolumeClaim/claimName"),
	    "data");
	json_decref(pods);

	/* A change on the source arrives, and the claim stays bound to the target's volume. */
	tu_kube_merge(
	    p->src, "v1", "PersistentVolumeClaim", p->src_ns, "data", NULL,
	    "{\"metadata\":{\"annotations\":{\"backup.example.com/policy\":\"hourly\"}}}");
	for (long long end = tu_now_ms() + 15000;; tu_msleep(200)) {
		const char *v;

		o = tu_e2e_get(p->dst, "v1", "PersistentVolumeClaim", p->dst_ns, "data");
		v = o ? dt_str(o, "/metadata/annotations/backup.example.com~1policy") : NULL;
		if (v && strcmp(v, "hourly") == 0)
			break;
		if (tu_now_ms() > end)
			fail_msg("the claim's change did not arrive: %s",
				 o ? json_dumps(o, JSON_INDENT(1)) : "(absent)");
		json_decref(o);
	}
	assert_string_equal(dt_str(o, "/spec/volumeName"), pv_dst);
	assert_string_equal(dt_str(o, "/status/phase"), "Bound");
	json_decref(o);
	log = tu_site_run_log(&p->site);
	tu_e2e_assert_log("target log", log, "state=failed", false);
	tu_e2e_assert_log("target log", log, "Conflict", false);
	free(log);
	tu_site_source_sigterm(&p->site);
	tu_site_agent_sigterm(&p->site);
}

static int teardown_volumes(void **state)
{
	if (P.src && pv_src[0])
		drop(P.src, "v1", "PersistentVolume", pv_src);
	if (P.dst && pv_dst[0])
		drop(P.dst, "v1", "PersistentVolume", pv_dst);
	pv_src[0] = pv_dst[0] = '\0';
	return teardown(state);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_e2e_scope__namespace_selector, teardown_selector),
	    cmocka_unit_test_teardown(test_e2e_scope__device_classes_copied,
				      teardown_device_classes),
	    cmocka_unit_test_teardown(test_e2e_scope__device_classes_not_copied_by_default,
				      teardown_device_classes),
	    cmocka_unit_test_teardown(test_e2e_scope__persistent_volume_claims, teardown_volumes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
