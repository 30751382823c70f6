/*
 * drasync-target run as an operator runs it, watched as a platform team
 * watches it: /metrics scraped with libcurl and checked by promtool while
 * objects from a real source link are applied to the v1beta1 cluster,
 * /healthz, /readyz (503 while its API server is unreachable: a TCP
 * forwarder in front of it is cut), 404 and 405, and the status page loaded
 * by headless Chromium, whose DOM shows an object named <script> as text. The
 * screenshot is kept at tests/artefacts/status-page.png in the build tree.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "testutil.h"
#include "tu_forward.h"
#include "tu_http.h"
#include "tu_kube.h"
#include "tu_site.h"

#include "drasync/keys.h"
#include "drasync/outbox.h"
#include "drasync/sender.h"

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static tu_site site;
static bool site_up;
static tu_forward *fwd;
static int api_port;	  /* the real API server's, behind fwd */
static char *kc_dir, *kc; /* the kubeconfig through fwd */

static int teardown(void **state)
{
	(void)state;
	tu_forward_stop(fwd);
	fwd = NULL;
	free(kc);
	free(kc_dir);
	kc = kc_dir = NULL;
	if (site_up)
		tu_site_dispose(&site);
	site_up = false;
	return 0;
}

/* The value of one series ("name{a=\"b\"}") in an exposition text; -1 when absent. */
static double series(const char *text, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, name, n) == 0 && p[n] == ' ')
			return strtod(p + n + 1, NULL);
	return -1;
}

static char *scrape(const char *base)
{
	char url[128];

	snprintf(url, sizeof(url), "%s/metrics", base);
	return tu_http_get(url, 200);
}

/* Scrape until the series reaches at least min; the last text (caller frees). */
static char *wait_series(const char *base, const char *name, double min, int timeout_ms)
{
	long long end = tu_now_ms() + timeout_ms;

	for (;;) {
		char *text = scrape(base);

		if (series(text, name) >= min)
			return text;
		if (tu_now_ms() > end) {
			char *log = tu_site_run_log(&site);

			fail_msg("%s never reached %g:\n%s\nlog:\n%s", name, min, text, log);
		}
		free(text);
		tu_msleep(300);
	}
}

static void wait_ready(const char *base, long want, int timeout_ms)
{
	char url[128];
	long long end = tu_now_ms() + timeout_ms;
	tu_http_reply r;

	snprintf(url, sizeof(url), "%s/readyz", base);
	for (;;) {
		tu_http(&r, "GET", url);
		if (r.code == want) {
			tu_http_dispose(&r);
			return;
		}
		if (tu_now_ms() > end)
			fail_msg("/readyz stayed %ld (%s), expected %ld", r.code, r.body, want);
		tu_http_dispose(&r);
		tu_msleep(200);
	}
}

/* The site's agent with metrics on a free port, through the forwarder to the API server. */
static void start_site(const char *prefix, char *base, size_t size, const char *extra)
{
	char cfg[600];
	int port = tu_free_port();
	tu_forward *probe;

	/* The forwarder's port first, then the kubeconfig that points at it. */
	probe = tu_forward_start(0, 1);
	kc_dir = tu_mkdtemp("kc");
	kc = tu_forward_kubeconfig(tu_env("DS_KUBECONFIG_V1BETA1"), kc_dir, "fwd.kubeconfig",
				   tu_forward_port(probe), &api_port);
	{
		int p = tu_forward_port(probe);

		tu_forward_stop(probe);
		fwd = tu_forward_start(p, api_port);
	}
	tu_site_init(&site, prefix, kc, "prod-east");
	site_up = true;
	snprintf(cfg, sizeof(cfg), "mode: migrate\nmetrics: {listen: \"127.0.0.1:%d\"}\n%s", port,
		 extra ? extra : "");
	tu_site_write_config(&site, cfg);
	tu_site_agent_start(&site);
	snprintf(base, size, "http://127.0.0.1:%d", port);
}

static json_t *configmap(const char *ns, const char *name)
{
	return json_pack("{s:s, s:s, s:{s:s, s:s, s:s}, s:{s:s}}", "apiVersion", "v1", "kind",
			 "ConfigMap", "metadata", "name", name, "namespace", ns, "uid", name,
			 "data", "k", "v");
}

static void chromium(const char *url, const char *extra, const char *out_path)
{
	char cmd[4096], *profile = tu_mkdtemp("chromium");
	int rc;

	snprintf(cmd, sizeof(cmd),
		 "timeout 120 chromium --headless --no-sandbox --disable-gpu "
		 "--disable-dev-shm-usage --no-first-run --user-data-dir='%s' %s '%s' "
		 "> '%s' 2> '%s.err'",
		 profile, extra, url, out_path, out_path);
	rc = system(cmd);
	if (rc != 0) {
		char err[1200], *said;

		snprintf(err, sizeof(err), "%s.err", out_path);
		said = tu_read_file(err, NULL);
		fail_msg("chromium exited %d:\n%s", rc, said);
	}
	free(profile);
}

static void test_itest_target_monitor__metrics_health_and_status_page(void **state)
{
	char base[64], url[160], artefacts[1100], shot[1200], dom_path[1200];
	ds_kube *k = tu_kube_connect(tu_env("DS_KUBECONFIG_V1BETA1"));
	char *ns = tu_kube_new_namespace(k, "mon", ""), *text, *body, *dom;
	char applied[200], failed[200];
	json_t *objs[5];
	tu_http_reply r;
	struct stat st;

	(void)state;
	start_site("target-monitor", base, sizeof(base),
		   "dra:\n  deviceClassMappings: [{from: gpu.nvidia.com, to: gpu.example.com}]\n");
	/* Health: the process works; ready: bound, ledger open, API reachable. */
	snprintf(url, sizeof(url), "%s/healthz", base);
	body = tu_http_get(url, 200);
	assert_string_equal(body, "ok\n");
	free(body);
	wait_ready(base, 200, 20000);
	/* Bad requests: 404, 405, and the agent goes on. */
	snprintf(url, sizeof(url), "%s/nope", base);
	tu_http(&r, "GET", url);
	assert_int_equal(r.code, 404);
	tu_http_dispose(&r);
	snprintf(url, sizeof(url), "%s/metrics", base);
	tu_http(&r, "POST", url);
	assert_int_equal(r.code, 405);
	assert_string_equal(r.allow, "GET, HEAD");
	tu_http_dispose(&r);
	tu_http(&r, "PUT", url);
	assert_int_equal(r.code, 405);
	tu_http_dispose(&r);
	/* Before anything arrives: valid, the build info there, nothing applied. */
	text = scrape(base);
	tu_promtool_check_metrics(text);
	assert_true(series(text, "drasync_build_info{agent=\"target\",version=\"" DS_TEST_VERSION
				 "\"}") == 1);
	snprintf(applied, sizeof(applied),
		 "drasync_target_objects_applied_total{kind=\"ConfigMap\",result=\"applied\"}");
	assert_true(series(text, applied) < 0);
	assert_true(series(text, "drasync_target_ready") == 1);
	free(text);

	/* Objects from the source: two ConfigMaps, and one whose name the API
	 * server would refuse (refused before it, with the reason, and shown on the page). */
	tu_site_sender_start(&site);
	objs[0] = configmap(ns, "settings");
	objs[1] = configmap(ns, "more-settings");
	objs[2] = configmap(ns, "<script>alert(1)</script>");
	/* DRA: a template whose device class the rules rename, and a workload
	 * (no replicas: it takes no device) that uses it. */
	objs[3] = tu_kube_doc("apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\n"
			      "metadata: {name: gpu, namespace: %s, uid: gpu}\n"
			      "spec: {spec: {devices: {requests: [{name: gpu, exactly: "
			      "{deviceClassName: gpu.nvidia.com}}]}}}\n",
			      ns);
	objs[4] = tu_kube_doc(
	    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: trainer, namespace: %s, uid: "
	    "trainer}\nspec:\n  replicas: 0\n  selector: {matchLabels: {app: trainer}}\n"
	    "  template:\n    metadata: {labels: {app: trainer}}\n    spec:\n"
	    "      resourceClaims: [{name: gpu, resourceClaimTemplateName: gpu}]\n"
	    "      containers: [{name: main, image: registry.example/trainer:1, resources: "
	    "{claims: [{name: gpu}]}}]\n",
	    ns);
	tu_site_wait_acked(&site, tu_site_push(&site, objs, 5), 30000);
	text = wait_series(base, applied, 2, 60000);
	free(text);
	snprintf(failed, sizeof(failed), "drasync_target_objects{state=\"refused\"}");
	text = wait_series(base, failed, 1, 60000);
	tu_promtool_check_metrics(text);
	assert_true(series(text, "drasync_target_objects_applied_total{kind=\"ConfigMap\",result="
				 "\"refused\"}") >= 1);
	assert_true(series(text, "drasync_target_refused_total{source=\"prod-east\",reason="
				 "\"name\"}") == 1);
	assert_true(series(text, "drasync_target_objects{state=\"applied\"}") >= 2);
	assert_true(series(text, "drasync_target_apply_duration_seconds_count") >= 3);
	assert_true(series(text, "drasync_target_apply_duration_seconds_bucket{le=\"+Inf\"}") >= 3);
	assert_true(series(text, "drasync_target_apply_api_writes_total") >= 3);
	assert_true(series(text, "drasync_target_source_committed_seq{source=\"prod-east\"}") >= 3);
	assert_true(series(text, "drasync_target_source_unapplied_records{source=\"prod-east\"}") ==
		    0);
	assert_true(series(text, "drasync_target_source_lag_seconds{source=\"prod-east\"}") == 0);
	assert_true(series(text, "drasync_target_ledger_unapplied_records") == 0);
	assert_true(series(text, "drasync_target_link_sessions_total") >= 1);
	assert_true(series(text, "drasync_target_link_events_total{event=\"session_open\"}") >= 1);
	assert_true(series(text, "drasync_target_namespaces{mode=\"active\"}") >= 1);
	free(text);
	text = wait_series(
	    base, "drasync_target_objects_applied_total{kind=\"Deployment\",result=\"applied\"}", 1,
	    60000);
	tu_promtool_check_metrics(text);
	assert_true(series(text, "drasync_target_objects_applied_total{kind="
				 "\"ResourceClaimTemplate\",result=\"applied\"}") >= 1);
	assert_true(series(text, "drasync_target_mapping_rewrites_total{type=\"deviceclass\",rule="
				 "\"dra.deviceClassMappings\"}") >= 1);
	free(text);
	/* The verifier looks at the workload applied. */
	text = wait_series(base, "drasync_target_verifier_checks_total", 1, 60000);
	/* Label values are bounded: no object name in any series. */
	assert_null(strstr(text, "settings"));
	assert_null(strstr(text, "script"));
	assert_null(strstr(text, "trainer"));
	free(text);
	/* An update moves the counter again. */
	objs[0] = json_pack("{s:s, s:s, s:{s:s, s:s, s:s}, s:{s:s}}", "apiVersion", "v1", "kind",
			    "ConfigMap", "metadata", "name", "settings", "namespace", ns, "uid",
			    "settings", "data", "k", "changed");
	tu_site_wait_acked(&site, tu_site_push(&site, objs, 1), 30000);
	free(wait_series(base, applied, 3, 60000));

	/* A peer whose key is not authorized: refused, and counted. */
	{
		ds_keypair bad;
		ds_sender_config sc;
		ds_sender *tx = NULL;
		ds_outbox *ob = NULL;
		char path[1200];
		ds_err err = {0};

		assert_int_equal(ds_keys_generate(&bad, &err), 0);
		snprintf(path, sizeof(path), "%s/intruder.db", site.dir);
		assert_int_equal(ds_outbox_open(&ob, path, NULL, &err), 0);
		ds_sender_config_default(&sc);
		sc.endpoint = site.endpoint;
		sc.server_public_key = site.tkeys.public_z85;
		sc.keys = &bad;
		sc.outbox_path = path;
		sc.cluster_name = "intruder";
		sc.hello_timeout_ms = 500;
		assert_int_equal(ds_sender_new(&tx, &sc, &err), 0);
		ds_sender_run(tx, 0, 1500, &err);
		ds_sender_free(tx);
		ds_outbox_free(ob);
		text = wait_series(
		    base, "drasync_target_link_refused_total{reason=\"zap_refused\"}", 1, 30000);
		tu_promtool_check_metrics(text);
		free(text);
	}

	/* The status page, as served. */
	body = tu_http_get(base, 200);
	assert_non_null(strstr(body, "<!DOCTYPE html>"));
	assert_non_null(strstr(body, "prod-east"));
	assert_non_null(strstr(body, "&lt;script&gt;alert(1)&lt;/script&gt;"));
	assert_null(strstr(body, "<script"));
	free(body);
	tu_http(&r, "GET", base);
	assert_string_equal(r.content_type, "text/html; charset=utf-8");
	tu_http_dispose(&r);

	/* In a browser: the DOM's text, and a screenshot kept as an artefact. */
	snprintf(artefacts, sizeof(artefacts), "%s", tu_env("DS_ARTEFACTS"));
	mkdir(artefacts, 0755);
	snprintf(dom_path, sizeof(dom_path), "%s/status-page.dom.html", artefacts);
	snprintf(url, sizeof(url), "%s/", base);
	chromium(url, "--dump-dom", dom_path);
	dom = tu_read_file(dom_path, NULL);
	/* The object's name is a text node (serialized escaped), never an element. */
	assert_non_null(strstr(dom, "&lt;script&gt;alert(1)&lt;/script&gt;"));
	assert_null(strstr(dom, "<script"));
	assert_non_null(strstr(dom, "Objects waiting or failed"));
	/* its reason is the name itself, refused before a request (SPEC §5, not "not served") */
	assert_non_null(strstr(dom, "&lt;/script&gt;\" may not contain '/'"));
	assert_non_null(strstr(dom, "<td>prod-east</td>"));
	assert_non_null(strstr(dom, ns));
	assert_non_null(strstr(dom, "Mapping inventory"));
	assert_non_null(strstr(dom, "<td>trainer</td>"));
	assert_non_null(strstr(dom, "resourceClaimTemplate gpu"));
	assert_non_null(strstr(dom, "Ready: <span class=\"ok\">yes</span>"));
	free(dom);
	snprintf(shot, sizeof(shot), "%s/status-page.png", artefacts);
	unlink(shot);
	{
		char opt[1400], log[1300];

		snprintf(opt, sizeof(opt), "--window-size=1400,1200 --screenshot='%s'", shot);
		snprintf(log, sizeof(log), "%s/status-page.screenshot.log", artefacts);
		chromium(url, opt, log);
	}
	assert_int_equal(stat(shot, &st), 0);
	assert_true(st.st_size > 5000);
	{
		size_t len;
		char *png = tu_read_file(shot, &len);

		assert_true(len > 8 && memcmp(png, "\x89PNG\r\n\x1a\n", 8) == 0);
		free(png);
	}

	/* The API server unreachable: not ready, and says why; back: ready again. */
	{
		int p = tu_forward_port(fwd);

		tu_forward_stop(fwd);
		fwd = NULL;
		tu_msleep(2500); /* past the probe's cached answer */
		wait_ready(base, 503, 20000);
		snprintf(url, sizeof(url), "%s/readyz", base);
		tu_http(&r, "GET", url);
		assert_int_equal(r.code, 503);
		assert_non_null(strstr(r.body, "API server https://127.0.0.1:"));
		tu_http_dispose(&r);
		text = scrape(base);
		assert_true(series(text, "drasync_target_ready") == 0);
		free(text);
		/* still alive */
		snprintf(url, sizeof(url), "%s/healthz", base);
		free(tu_http_get(url, 200));
		fwd = tu_forward_start(p, api_port);
		wait_ready(base, 200, 30000);
	}
	tu_site_sender_stop(&site);
	tu_site_agent_sigterm(&site);
	tu_kube_drop_namespace(k, ns);
	ds_kube_free(k);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_itest_target_monitor__metrics_health_and_status_page,
				      teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
