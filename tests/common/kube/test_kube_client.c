#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/kube_client.h"
#include "testutil.h"
#include "tu_httpd.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fx {
	struct tu_httpd h;
	char *dir, *kcpath;
	ds_kube *k;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	tu_httpd_start(&f->h);
	f->dir = tu_mkdtemp("client");
	*state = f;
	return 0;
}

static ds_kube *client(struct fx *f)
{
	struct ds_kube_transport_opts o;
	ds_kubeconfig *kc = NULL;
	ds_err err = {0};

	ds_kube_transport_opts_init(&o);
	o.max_parallel = 1; /* requests in script order */
	o.backoff_base_ms = 10;
	o.backoff_max_ms = 20;
	f->kcpath = tu_httpd_kubeconfig(&f->h, f->dir, "tok");
	assert_int_equal(ds_kubeconfig_load(&kc, f->kcpath, NULL, &err), 0);
	assert_int_equal(ds_kube_new(&f->k, &kc, &o, &err), 0);
	assert_null(kc);
	return f->k;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	ds_kube_free(f->k);
	tu_httpd_stop(&f->h);
	free(f->kcpath);
	free(f->dir);
	free(f);
	return 0;
}

static const struct ds_kube_resource CM = {"", "v1", "configmaps", "ConfigMap", true, false};

/* A request that cannot be built fails with a message, not a bare errno. */
static void test_kube_client__a_path_too_long_is_explained(void **state)
{
	struct fx *f = *state;
	struct ds_kube_list_opts lo = {0};
	ds_kube *k = client(f);
	ds_kube_error ke;
	json_t *out = NULL;
	char *name = malloc(70 * 1024);

	assert_non_null(name);
	memset(name, 'a', 70 * 1024 - 1);
	name[70 * 1024 - 1] = '\0';
	assert_int_equal(ds_kube_get(k, &CM, "ml-team", name, NULL, &out, &ke), -E2BIG);
	assert_non_null(strstr(ke.message, "request path longer than 64 KiB"));
	lo.label_selector = name;
	assert_int_equal(ds_kube_list_page(k, &CM, "ml-team", &lo, &out, &ke), -E2BIG);
	assert_non_null(strstr(ke.message, "list: request path"));
	free(name);
}

/* A name no API path can carry is refused before any request: the server would answer 404. */
static void test_kube_client__a_name_no_path_can_carry_is_refused(void **state)
{
	struct fx *f = *state;
	ds_kube *k = client(f);
	ds_kube_error ke;
	json_t *out = NULL, *obj;
	static const char *const bad[] = {"<script>x</script>", "50%", ".", ".."};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(ds_kube_get(k, &CM, "ml-team", bad[i], NULL, &out, &ke), -EINVAL);
		assert_non_null(strstr(ke.message, "cannot be named in an API path"));
		assert_non_null(strstr(ke.message, bad[i]));
	}
	obj = json_pack("{s:s, s:s, s:{s:s, s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
			"metadata", "name", "a/b", "namespace", "ml-team");
	assert_int_equal(ds_kube_apply(k, &CM, NULL, obj, "drasync", true, NULL, &out, &ke),
			 -EINVAL);
	assert_non_null(strstr(ke.message, "apply: metadata.name 'a/b'"));
	json_decref(obj);
	assert_int_equal(f->h.hits, 0);
}

static void test_kube_client__paths(void **state)
{
	struct ds_kube_resource dep = {"apps", "v1", "deployments", "Deployment", true, true};
	struct ds_kube_resource dc = {"resource.k8s.io", "v1",	"deviceclasses",
				      "DeviceClass",	 false, false};
	char *p;

	(void)state;
	assert_int_equal(ds_kube_path(&CM, "ml-team", "c1", NULL, &p), 0);
	assert_string_equal(p, "/api/v1/namespaces/ml-team/configmaps/c1");
	free(p);
	assert_int_equal(ds_kube_path(&CM, NULL, NULL, NULL, &p), 0);
	assert_string_equal(p, "/api/v1/configmaps");
	free(p);
	assert_int_equal(ds_kube_path(&dep, "a", "web", "status", &p), 0);
	assert_string_equal(p, "/apis/apps/v1/namespaces/a/deployments/web/status");
	free(p);
	/* cluster-scoped: a namespace is ignored */
	assert_int_equal(ds_kube_path(&dc, "a", "gpu.example.com", NULL, &p), 0);
	assert_string_equal(p, "/apis/resource.k8s.io/v1/deviceclasses/gpu.example.com");
	free(p);
	assert_int_equal(ds_kube_path(&CM, "a b", "x/y?z", NULL, &p), 0);
	assert_string_equal(p, "/api/v1/namespaces/a%20b/configmaps/x%2Fy%3Fz");
	free(p);
}

/* Every segment is escaped, and a dot segment is written so that nothing folds it away. */
static void test_kube_client__path_segments_are_escaped(void **state)
{
	struct ds_kube_resource odd = {"x/y.io", "v1?", "a b", "Odd", true, false};
	char *p;

	(void)state;
	assert_int_equal(ds_kube_path(&CM, "..", "c1", NULL, &p), 0);
	assert_string_equal(p, "/api/v1/namespaces/%2E%2E/configmaps/c1");
	free(p);
	assert_int_equal(ds_kube_path(&CM, ".", "..", "..", &p), 0);
	assert_string_equal(p, "/api/v1/namespaces/%2E/configmaps/%2E%2E/%2E%2E");
	free(p);
	assert_int_equal(ds_kube_path(&CM, "...", "a.b", NULL, &p), 0);
	assert_string_equal(p, "/api/v1/namespaces/.../configmaps/a.b");
	free(p);
	assert_int_equal(ds_kube_path(&odd, "n", "m", "s/t", &p), 0);
	assert_string_equal(p, "/apis/x%2Fy.io/v1%3F/namespaces/n/a%20b/m/s%2Ft");
	free(p);
}

/*
 * A namespace no path can carry is refused before any request (libcurl folded
 * "/namespaces/../configmaps/x" into "/configmaps/x", a request across every
 * namespace), and a path with a dot segment is sent as it is
 * (CURLOPT_PATH_AS_IS): a DELETE of ConfigMap ".." was folded into a DELETE
 * of "/api/v1/namespaces/ml-team/".
 */
static void test_kube_client__dot_segments_reach_the_server_as_sent(void **state)
{
	struct fx *f = *state;
	struct ds_kube_request req = {"DELETE", "/api/v1/namespaces/ml-team/configmaps/..", NULL,
				      NULL, 0};
	struct ds_kube_response resp = {0};
	struct ds_kube_list_opts lo = {0};
	ds_kube *k;
	ds_kube_error ke;
	json_t *out = NULL;

	f->h.steps[0] =
	    (struct tu_httpd_step){.code = 404, .body = "{\"kind\":\"Status\",\"code\":404}"};
	f->h.nsteps = 1;
	k = client(f);
	assert_int_equal(ds_kube_get(k, &CM, "..", "x", NULL, &out, &ke), -EINVAL);
	assert_non_null(strstr(ke.message, "get: namespace '..' cannot be named in an API path"));
	assert_int_equal(ds_kube_list_page(k, &CM, ".", &lo, &out, &ke), -EINVAL);
	assert_int_equal(ds_kube_delete(k, &CM, "a/b", "x", NULL, &ke), -EINVAL);
	assert_int_equal(ds_kube_watch(k, &CM, "..", NULL, NULL, NULL, &ke), -EINVAL);
	assert_int_equal(f->h.hits, 0);
	assert_int_equal(ds_kube_transport_request(ds_kube_get_transport(k), &req, &resp, &ke),
			 -ENOENT);
	ds_kube_response_dispose(&resp);
	assert_int_equal(f->h.hits, 1);
	assert_string_equal(f->h.reqs[0].method, "DELETE");
	assert_string_equal(f->h.reqs[0].url, "/api/v1/namespaces/ml-team/configmaps/..");
}

static const char API[] = "{\"kind\":\"APIVersions\",\"versions\":[\"v1\"]}";
static const char APIS[] =
    "{\"kind\":\"APIGroupList\",\"groups\":["
    "{\"name\":\"apps\",\"versions\":[{\"groupVersion\":\"apps/v1\",\"version\":\"v1\"}],"
    "\"preferredVersion\":{\"groupVersion\":\"apps/v1\",\"version\":\"v1\"}},"
    "{\"name\":\"resource.k8s.io\",\"versions\":["
    "{\"groupVersion\":\"resource.k8s.io/v1\",\"version\":\"v1\"},"
    "{\"groupVersion\":\"resource.k8s.io/v1beta1\",\"version\":\"v1beta1\"}],"
    "\"preferredVersion\":{\"groupVersion\":\"resource.k8s.io/v1\",\"version\":\"v1\"}}]}";
static const char RES_V1BETA1[] =
    "{\"kind\":\"APIResourceList\",\"groupVersion\":\"resource.k8s.io/v1beta1\",\"resources\":["
    "{\"name\":\"deviceclasses\",\"namespaced\":false,\"kind\":\"DeviceClass\"},"
    "{\"name\":\"resourceclaims\",\"namespaced\":true,\"kind\":\"ResourceClaim\"},"
    "{\"name\":\"resourceclaims/status\",\"namespaced\":true,\"kind\":\"ResourceClaim\"}]}";

static void test_kube_client__discovery_is_cached_and_refreshed_on_a_miss(void **state)
{
	struct fx *f = *state;
	struct ds_kube_resource r;
	ds_kube_error ke;
	char pref[32];
	json_t *served = NULL;

	f->h.steps[0] = (struct tu_httpd_step){.code = 200, .body = API};
	f->h.steps[1] = (struct tu_httpd_step){.code = 200, .body = APIS};
	f->h.steps[2] = (struct tu_httpd_step){.code = 200, .body = RES_V1BETA1};
	f->h.steps[3] = (struct tu_httpd_step){.code = 200, .body = API};
	f->h.steps[4] = (struct tu_httpd_step){.code = 200, .body = APIS};
	f->h.steps[5] = (struct tu_httpd_step){.code = 200, .body = RES_V1BETA1};
	f->h.nsteps = 6;
	client(f);
	assert_int_equal(
	    ds_kube_resource_find(f->k, "resource.k8s.io/v1beta1", "ResourceClaim", &r, &ke), 0);
	assert_string_equal(r.group, "resource.k8s.io");
	assert_string_equal(r.version, "v1beta1");
	assert_string_equal(r.resource, "resourceclaims");
	assert_true(r.namespaced);
	assert_true(r.has_status);
	assert_int_equal(
	    ds_kube_resource_find(f->k, "resource.k8s.io/v1beta1", "DeviceClass", &r, &ke), 0);
	assert_false(r.namespaced);
	assert_false(r.has_status);
	{
		json_t *claim = json_pack("{s:s,s:s}", "apiVersion", "resource.k8s.io/v1beta1",
					  "kind", "ResourceClaim");
		json_t *bare = json_pack("{s:s}", "kind", "ResourceClaim");
		assert_int_equal(ds_kube_resource_of(f->k, claim, &r, &ke), 0);
		assert_string_equal(r.resource, "resourceclaims");
		assert_int_equal(ds_kube_resource_of(f->k, bare, &r, &ke), -EINVAL);
		assert_non_null(strstr(ke.message, "apiVersion"));
		json_decref(claim);
		json_decref(bare);
	}
	assert_int_equal(f->h.hits, 3); /* cached */
	assert_string_equal(f->h.reqs[0].url, "/api");
	assert_string_equal(f->h.reqs[1].url, "/apis");
	assert_string_equal(f->h.reqs[2].url, "/apis/resource.k8s.io/v1beta1");
	assert_string_equal(f->h.reqs[2].auth, "Bearer tok");
	assert_int_equal(
	    ds_kube_group_versions(f->k, "resource.k8s.io", pref, sizeof(pref), &served, &ke), 0);
	assert_string_equal(pref, "v1");
	assert_int_equal(json_array_size(served), 2);
	assert_string_equal(json_string_value(json_array_get(served, 1)), "v1beta1");
	json_decref(served);
	/* the version to use: the one wanted when served, else the preferred one */
	assert_int_equal(
	    ds_kube_version_to_use(f->k, "resource.k8s.io", "v1beta1", pref, sizeof(pref), &ke), 0);
	assert_string_equal(pref, "v1beta1");
	assert_int_equal(
	    ds_kube_version_to_use(f->k, "resource.k8s.io", "v9", pref, sizeof(pref), &ke), 0);
	assert_string_equal(pref, "v1");
	assert_int_equal(
	    ds_kube_version_to_use(f->k, "no.such.group", "v1", pref, sizeof(pref), &ke), -ENOENT);
	/* a kind nobody serves: discovery is read again once, then -ENOENT */
	assert_int_equal(ds_kube_resource_find(f->k, "resource.k8s.io/v1beta1", "Nope", &r, &ke),
			 -ENOENT);
	assert_int_equal(f->h.hits, 6);
	assert_int_equal(ke.code, 404);
	assert_non_null(strstr(ke.message, "Nope"));
	/* a version nobody serves: no resource list is fetched for it */
	assert_int_equal(
	    ds_kube_resource_find(f->k, "resource.k8s.io/v9", "ResourceClaim", &r, &ke), -ENOENT);
}

static void test_kube_client__discovery_is_read_again_at_most_once_per_interval(void **state)
{
	struct fx *f = *state;
	struct ds_kube_resource r;
	ds_kube_error ke;
	unsigned long g0;

	for (int i = 0; i < 6; i += 3) {
		f->h.steps[i] = (struct tu_httpd_step){.code = 200, .body = API};
		f->h.steps[i + 1] = (struct tu_httpd_step){.code = 200, .body = APIS};
		f->h.steps[i + 2] = (struct tu_httpd_step){.code = 200, .body = RES_V1BETA1};
	}
	f->h.nsteps = 6;
	client(f);
	ds_kube_discovery_set_refresh_interval(f->k, 60000);
	assert_int_equal(
	    ds_kube_resource_find(f->k, "resource.k8s.io/v1beta1", "ResourceClaim", &r, &ke), 0);
	assert_int_equal(f->h.hits, 3);
	g0 = ds_kube_discovery_generation(f->k);
	/* the first miss reads the groups again */
	assert_int_equal(ds_kube_resource_find(f->k, "resource.k8s.io/v1beta1", "Nope", &r, &ke),
			 -ENOENT);
	assert_int_equal(f->h.hits, 6);
	assert_int_equal(ds_kube_discovery_generation(f->k), g0 + 1);
	/* within the interval neither a miss nor an explicit refresh reads anything */
	assert_int_equal(ds_kube_resource_find(f->k, "resource.k8s.io/v1beta1", "Nope", &r, &ke),
			 -ENOENT);
	assert_int_equal(ds_kube_resource_find(f->k, "example.com/v1", "Widget", &r, &ke), -ENOENT);
	assert_int_equal(ds_kube_discovery_refresh(f->k, &ke), 0);
	assert_int_equal(f->h.hits, 6);
	assert_int_equal(ds_kube_discovery_generation(f->k), g0 + 1);
	/* what was cached is still found without a request */
	assert_int_equal(
	    ds_kube_resource_find(f->k, "resource.k8s.io/v1beta1", "DeviceClass", &r, &ke), 0);
	assert_int_equal(f->h.hits, 6);
	/* without a limit, an explicit refresh reads the groups again at once */
	ds_kube_discovery_set_refresh_interval(f->k, 0);
	f->h.steps[6] = (struct tu_httpd_step){.code = 200, .body = API};
	f->h.steps[7] = (struct tu_httpd_step){.code = 200, .body = APIS};
	f->h.nsteps = 8;
	assert_int_equal(ds_kube_discovery_refresh(f->k, &ke), 1);
	assert_int_equal(f->h.hits, 8);
	assert_int_equal(ds_kube_discovery_generation(f->k), g0 + 2);
}

static void test_kube_client__list_follows_continue_and_restarts_when_it_expires(void **state)
{
	struct fx *f = *state;
	struct ds_kube_list_opts lo = {"app=x", NULL, NULL, NULL, 2};
	json_t *list = NULL;
	unsigned pages = 0;
	ds_kube_error ke;

	f->h.steps[0] = (struct tu_httpd_step){
	    .code = 200,
	    .body = "{\"kind\":\"ConfigMapList\",\"metadata\":{\"resourceVersion\":\"10\","
		    "\"continue\":\"t1\",\"remainingItemCount\":1},"
		    "\"items\":[{\"metadata\":{\"name\":\"a\"}},{\"metadata\":{\"name\":\"b\"}}]}"};
	f->h.steps[1] = (struct tu_httpd_step){
	    .code = 200,
	    .body = "{\"kind\":\"ConfigMapList\",\"metadata\":{\"resourceVersion\":\"10\"},"
		    "\"items\":[{\"metadata\":{\"name\":\"c\"}}]}"};
	/* second list: the token expires between pages */
	f->h.steps[2] = f->h.steps[0];
	f->h.steps[3] = (struct tu_httpd_step){
	    .code = 410,
	    .body = "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Expired\","
		    "\"message\":\"The provided continue parameter is too old\",\"code\":410}"};
	f->h.steps[4] = (struct tu_httpd_step){
	    .code = 200,
	    .body = "{\"kind\":\"ConfigMapList\",\"metadata\":{\"resourceVersion\":\"12\"},"
		    "\"items\":[{\"metadata\":{\"name\":\"a\"}},{\"metadata\":{\"name\":\"b\"}},"
		    "{\"metadata\":{\"name\":\"c\"}},{\"metadata\":{\"name\":\"d\"}}]}"};
	f->h.nsteps = 5;
	client(f);
	assert_int_equal(ds_kube_list(f->k, &CM, "ns", &lo, &list, &pages, &ke), 0);
	assert_int_equal(pages, 2);
	assert_int_equal(json_array_size(json_object_get(list, "items")), 3);
	assert_null(json_object_get(json_object_get(list, "metadata"), "continue"));
	assert_null(json_object_get(json_object_get(list, "metadata"), "remainingItemCount"));
	assert_string_equal(f->h.reqs[0].url,
			    "/api/v1/namespaces/ns/configmaps?labelSelector=app=x&limit=2");
	assert_string_equal(
	    f->h.reqs[1].url,
	    "/api/v1/namespaces/ns/configmaps?labelSelector=app=x&continue=t1&limit=2");
	json_decref(list);
	assert_int_equal(ds_kube_list(f->k, &CM, "ns", &lo, &list, &pages, &ke), 0);
	assert_int_equal(pages, 3);
	assert_int_equal(json_array_size(json_object_get(list, "items")), 4);
	assert_string_equal(json_string_value(json_object_get(json_object_get(list, "metadata"),
							      "resourceVersion")),
			    "12");
	assert_string_equal(f->h.reqs[4].url,
			    "/api/v1/namespaces/ns/configmaps?labelSelector=app=x");
	json_decref(list);
}

struct events {
	char got[16][64];
	int n;
	int stop_after;
};

static int on_event(void *user, enum ds_kube_event_type type, json_t *obj)
{
	static const char *const names[] = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "SYNC"};
	struct events *e = user;
	const char *name =
	    json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));

	if (e->n < 16)
		snprintf(e->got[e->n++], sizeof(e->got[0]), "%s %s", names[type],
			 type == DS_KUBE_SYNC ? "-" : (name ? name : "?"));
	return e->n >= e->stop_after;
}

static void test_kube_client__watch_resumes_and_relists_on_410(void **state)
{
	struct fx *f = *state;
	static const char *const stream1[] = {
	    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":"
	    "\"6\"}}}\n",
	    "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"9\"}}}\n"
	    "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":"
	    "\"7\"}}}\n",
	    NULL};
	static const char *const stream2[] = {
	    "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"reason\":"
	    "\"Expired\","
	    "\"message\":\"too old resource version: 7 (15)\"}}\n",
	    NULL};
	static const char *const stream3[] = {"not json at all\n",
					      "{\"type\":\"DELETED\",\"object\":{\"metadata\":{"
					      "\"name\":\"b\",\"resourceVersion\":\"21\"}}}\n",
					      NULL};
	struct ds_kube_watch_opts o = {0};
	struct events e = {.stop_after = 6};
	unsigned reconnects = 0, relists = 0;
	ds_kube_error ke;

	f->h.steps[0] = (struct tu_httpd_step){
	    .code = 200, .body = "{\"metadata\":{\"resourceVersion\":\"5\"},\"items\":[]}"};
	f->h.steps[1] = (struct tu_httpd_step){.code = 200, .chunks = stream1};
	f->h.steps[2] = (struct tu_httpd_step){.code = 200, .chunks = stream2};
	f->h.steps[3] =
	    (struct tu_httpd_step){.code = 200,
				   .body = "{\"metadata\":{\"resourceVersion\":\"20\"},"
					   "\"items\":[{\"metadata\":{\"name\":\"b\"}}]}"};
	f->h.steps[4] = (struct tu_httpd_step){.code = 200, .chunks = stream3};
	f->h.nsteps = 5;
	client(f);
	o.bookmarks = true;
	o.timeout_seconds = 30;
	o.reconnects = &reconnects;
	o.relists = &relists;
	assert_int_equal(ds_kube_watch(f->k, &CM, "ns", &o, on_event, &e, &ke), 0);
	assert_int_equal(e.n, 6);
	assert_string_equal(e.got[0], "SYNC -");
	assert_string_equal(e.got[1], "ADDED a");
	assert_string_equal(e.got[2], "BOOKMARK ?");
	assert_string_equal(e.got[3], "MODIFIED a");
	assert_string_equal(e.got[4], "SYNC -");
	assert_string_equal(e.got[5], "DELETED b");
	assert_string_equal(f->h.reqs[0].url, "/api/v1/namespaces/ns/configmaps?limit=500");
	assert_string_equal(f->h.reqs[1].url,
			    "/api/v1/namespaces/ns/configmaps?watch=true&resourceVersion=5"
			    "&allowWatchBookmarks=true&timeoutSeconds=30");
	/* resumed from the last resourceVersion seen (the MODIFIED after the bookmark) */
	assert_non_null(strstr(f->h.reqs[2].url, "resourceVersion=7&"));
	assert_non_null(strstr(f->h.reqs[4].url, "resourceVersion=20&"));
	assert_int_equal(reconnects, 2);
	assert_int_equal(relists, 1);
}

/* With fail_on_gone the caller relists itself: 410 ends the watch with -EIDRM,
 * after the events before it, and nothing is listed. */
static void test_kube_client__watch_returns_on_410_when_asked(void **state)
{
	struct fx *f = *state;
	static const char *const stream[] = {
	    "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":"
	    "\"8\"}}}\n",
	    "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"reason\":"
	    "\"Expired\",\"message\":\"too old resource version: 8 (15)\"}}\n",
	    NULL};
	struct ds_kube_watch_opts o = {0};
	struct events e = {.stop_after = 100};
	unsigned relists = 0;
	ds_kube_error ke;

	f->h.steps[0] = (struct tu_httpd_step){.code = 200, .chunks = stream};
	f->h.nsteps = 1;
	client(f);
	o.resource_version = "5";
	o.fail_on_gone = true;
	o.relists = &relists;
	assert_int_equal(ds_kube_watch(f->k, &CM, "ns", &o, on_event, &e, &ke), -EIDRM);
	assert_int_equal(f->h.hits, 1);
	assert_int_equal(e.n, 1);
	assert_string_equal(e.got[0], "MODIFIED a");
	assert_int_equal(ke.code, 410);
	assert_int_equal(relists, 0);
}

static void test_kube_client__watch_gives_up_on_forbidden(void **state)
{
	struct fx *f = *state;
	struct ds_kube_watch_opts o = {0};
	struct events e = {.stop_after = 100};
	ds_kube_error ke;

	f->h.steps[0] = (struct tu_httpd_step){
	    .code = 403,
	    .body = "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Forbidden\","
		    "\"message\":\"configmaps is forbidden\",\"code\":403}"};
	f->h.nsteps = 1;
	client(f);
	o.resource_version = "3";
	assert_int_equal(ds_kube_watch(f->k, &CM, "ns", &o, on_event, &e, &ke), -EPERM);
	assert_int_equal(f->h.hits, 1);
	assert_string_equal(ke.message, "configmaps is forbidden");
	assert_int_equal(e.n, 0);
}

/* A list that fails once, then a list and a stream: the watch retries after a backoff. */
static int watch_after_a_failed_list(struct fx *f, unsigned *reconnects, struct events *e)
{
	static const char *const stream[] = {
	    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\","
	    "\"resourceVersion\":\"6\"}}}\n",
	    NULL};
	struct ds_kube_watch_opts o = {0};
	ds_kube_error ke = {0};

	f->h.steps[0] = (struct tu_httpd_step){.code = 200, .body = "not json"};
	f->h.steps[1] = (struct tu_httpd_step){
	    .code = 200, .body = "{\"metadata\":{\"resourceVersion\":\"5\"},\"items\":[]}"};
	f->h.steps[2] = (struct tu_httpd_step){.code = 200, .chunks = stream};
	f->h.nsteps = 3;
	client(f);
	e->stop_after = 2;
	o.timeout_seconds = 30;
	o.reconnects = reconnects;
	return ds_kube_watch(f->k, &CM, "ns", &o, on_event, e, &ke);
}

/* No stream was open when the list failed: the first stream is not a reconnect. */
static void test_kube_client__watch_retry_after_a_failed_list_is_no_reconnect(void **state)
{
	struct fx *f = *state;
	struct events e = {0};
	unsigned reconnects = 99;

	assert_int_equal(watch_after_a_failed_list(f, &reconnects, &e), 0);
	assert_int_equal(f->h.hits, 3);
	assert_int_equal(e.n, 2);
	assert_string_equal(e.got[0], "SYNC -");
	assert_string_equal(e.got[1], "ADDED a");
	assert_int_equal(reconnects, 0);
}

/* The backoff's jitter is the client's own: the application's rand() sequence is untouched. */
static void test_kube_client__watch_backoff_leaves_rand_alone(void **state)
{
	struct fx *f = *state;
	struct events e = {0};
	unsigned reconnects = 0;
	int want;

	srand(7);
	want = rand();
	srand(7);
	assert_int_equal(watch_after_a_failed_list(f, &reconnects, &e), 0);
	assert_int_equal(f->h.hits, 3);
	assert_int_equal(rand(), want);
}

static void test_kube_client__batch_builds_each_kind_of_request(void **state)
{
	struct fx *f = *state;
	json_t *obj = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
				"metadata", "name", "c");
	struct ds_kube_op ops[4] = {
	    {.kind = DS_KUBE_OP_CREATE, .res = &CM, .ns = "a", .obj = obj},
	    {.kind = DS_KUBE_OP_APPLY, .res = &CM, .ns = "a", .obj = obj},
	    {.kind = DS_KUBE_OP_DELETE, .res = &CM, .ns = "a", .name = "c"},
	    {.kind = DS_KUBE_OP_APPLY, .res = &CM, .ns = "a", .obj = NULL},
	};

	f->h.steps[0] =
	    (struct tu_httpd_step){.code = 201, .body = "{\"metadata\":{\"uid\":\"u\"}}"};
	f->h.steps[1] = (struct tu_httpd_step){.code = 200, .body = "{}"};
	f->h.steps[2] = (struct tu_httpd_step){.code = 200, .body = "not json"};
	f->h.nsteps = 3;
	client(f);
	/* the last op has no object: refused before sending; the delete's answer is not JSON */
	assert_int_equal(ds_kube_batch(f->k, ops, 4, "drasync", true), 2);
	assert_int_equal(ops[0].rc, 0);
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(ops[0].result, "metadata"), "uid")),
	    "u");
	assert_int_equal(ops[1].rc, 0);
	assert_int_equal(ops[2].rc, -EBADMSG);
	assert_int_equal(ops[3].rc, -EINVAL);
	assert_non_null(strstr(ops[3].error.message, "metadata.name"));
	assert_int_equal(f->h.hits, 3);
	assert_string_equal(f->h.reqs[0].method, "POST");
	assert_string_equal(f->h.reqs[0].url, "/api/v1/namespaces/a/configmaps");
	assert_string_equal(f->h.reqs[1].method, "PATCH");
	assert_string_equal(f->h.reqs[1].url,
			    "/api/v1/namespaces/a/configmaps/c?fieldManager=drasync&force=true");
	assert_string_equal(f->h.reqs[1].ctype, "application/apply-patch+yaml");
	assert_string_equal(f->h.reqs[2].method, "DELETE");
	assert_string_equal(f->h.reqs[2].url, "/api/v1/namespaces/a/configmaps/c");
	assert_string_equal(f->h.reqs[2].body,
			    "{\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\"}");
	for (int i = 0; i < 4; i++)
		json_decref(ops[i].result);
	json_decref(obj);
}

static void test_kube_client__batch_forces_only_the_ops_that_ask(void **state)
{
	struct fx *f = *state;
	json_t *a = json_pack("{s:{s:s}}", "metadata", "name", "a");
	json_t *b = json_pack("{s:{s:s}}", "metadata", "name", "b");
	struct ds_kube_op ops[2] = {
	    {.kind = DS_KUBE_OP_APPLY, .res = &CM, .ns = "n", .obj = a},
	    {.kind = DS_KUBE_OP_APPLY, .res = &CM, .ns = "n", .obj = b, .force = true},
	};
	bool forced[2] = {false, false};

	f->h.steps[0] = (struct tu_httpd_step){.code = 200, .body = "{}"};
	f->h.steps[1] = (struct tu_httpd_step){.code = 200, .body = "{}"};
	f->h.nsteps = 2;
	client(f);
	assert_int_equal(ds_kube_batch(f->k, ops, 2, "drasync", false), 0);
	assert_int_equal(f->h.hits, 2);
	/* concurrent: either may arrive first */
	for (int i = 0; i < 2; i++) {
		const char *url = f->h.reqs[i].url;
		int which = strstr(url, "/configmaps/b?") ? 1 : 0;
		forced[which] = strstr(url, "force=true") != NULL;
		assert_non_null(strstr(url, "fieldManager=drasync"));
	}
	assert_false(forced[0]);
	assert_true(forced[1]);
	for (int i = 0; i < 2; i++)
		json_decref(ops[i].result);
	json_decref(a);
	json_decref(b);
}

/* A stream hands ops over one at a time; with no_result the answers are not parsed. */
struct one_by_one {
	struct ds_kube_op *ops;
	size_t n, next, done;
};

static int obo_next(void *ud, struct ds_kube_op **out)
{
	struct one_by_one *o = ud;

	if (o->next >= o->n)
		return -1;
	*out = &o->ops[o->next++];
	return 1;
}

static void obo_done(void *ud, struct ds_kube_op *op)
{
	struct one_by_one *o = ud;

	(void)op;
	o->done++;
}

static void test_kube_client__stream_without_results(void **state)
{
	struct fx *f = *state;
	json_t *a = json_pack("{s:{s:s}}", "metadata", "name", "a");
	struct ds_kube_op ops[2] = {
	    {.kind = DS_KUBE_OP_APPLY, .res = &CM, .ns = "n", .obj = a},
	    {.kind = DS_KUBE_OP_APPLY, .res = &CM, .ns = "n", .obj = a},
	};
	struct one_by_one o = {ops, 2, 0, 0};
	struct ds_kube_op_stream st = {.next = obo_next,
				       .done = obo_done,
				       .ud = &o,
				       .field_manager = "drasync",
				       .no_result = true};

	f->h.steps[0] = (struct tu_httpd_step){.code = 200, .body = "{\"kind\":\"ConfigMap\"}"};
	f->h.steps[1] = (struct tu_httpd_step){.code = 409,
					       .body = "{\"kind\":\"Status\","
						       "\"code\":409,\"message\":\"conflict\"}"};
	f->h.nsteps = 2;
	client(f);
	assert_int_equal(ds_kube_stream(f->k, &st), 1);
	assert_int_equal(o.done, 2);
	assert_int_equal(f->h.hits, 2);
	/* one succeeded, its answer not read; the other failed with the Status */
	assert_true((ops[0].rc == 0) != (ops[1].rc == 0));
	for (int i = 0; i < 2; i++) {
		assert_null(ops[i].result);
		if (ops[i].rc != 0)
			assert_int_equal(ops[i].error.code, 409);
	}
	json_decref(a);
}

static void test_kube_client__delete_options_and_update(void **state)
{
	struct fx *f = *state;
	struct ds_kube_delete_opts d = {"Foreground", "uid-1", "42", 0};
	json_t *obj = json_pack("{s:{s:s,s:s,s:s}}", "metadata", "name", "c", "namespace",
				"meta-ns", "resourceVersion", "41");
	ds_kube_error ke;

	f->h.steps[0] = (struct tu_httpd_step){.code = 200, .body = "{}"};
	f->h.steps[1] = (struct tu_httpd_step){
	    .code = 409,
	    .body = "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Conflict\","
		    "\"message\":\"the object has been modified\",\"code\":409,"
		    "\"details\":{\"name\":\"c\",\"kind\":\"configmaps\"}}"};
	f->h.nsteps = 2;
	client(f);
	assert_int_equal(ds_kube_delete(f->k, &CM, "a", "c", &d, &ke), 0);
	assert_string_equal(
	    f->h.reqs[0].body,
	    "{\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\",\"propagationPolicy\":"
	    "\"Foreground\",\"gracePeriodSeconds\":0,\"preconditions\":{\"uid\":"
	    "\"uid-1\",\"resourceVersion\":\"42\"}}");
	/* namespace from the object when none is given; a 409 is not retried */
	assert_int_equal(ds_kube_update(f->k, &CM, NULL, obj, NULL, NULL, &ke), -ESTALE);
	assert_int_equal(f->h.hits, 2);
	assert_string_equal(f->h.reqs[1].method, "PUT");
	assert_string_equal(f->h.reqs[1].url, "/api/v1/namespaces/meta-ns/configmaps/c");
	assert_string_equal(ke.details_name, "c");
	json_decref(obj);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_kube_client__paths),
	    cmocka_unit_test(test_kube_client__path_segments_are_escaped),
	    T(test_kube_client__dot_segments_reach_the_server_as_sent),
	    T(test_kube_client__a_path_too_long_is_explained),
	    T(test_kube_client__a_name_no_path_can_carry_is_refused),
	    T(test_kube_client__discovery_is_cached_and_refreshed_on_a_miss),
	    T(test_kube_client__discovery_is_read_again_at_most_once_per_interval),
	    T(test_kube_client__list_follows_continue_and_restarts_when_it_expires),
	    T(test_kube_client__watch_resumes_and_relists_on_410),
	    T(test_kube_client__watch_returns_on_410_when_asked),
	    T(test_kube_client__watch_gives_up_on_forbidden),
	    T(test_kube_client__watch_retry_after_a_failed_list_is_no_reconnect),
	    T(test_kube_client__watch_backoff_leaves_rand_alone),
	    T(test_kube_client__batch_builds_each_kind_of_request),
	    T(test_kube_client__batch_forces_only_the_ops_that_ask),
	    T(test_kube_client__stream_without_results),
	    T(test_kube_client__delete_options_and_update),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
