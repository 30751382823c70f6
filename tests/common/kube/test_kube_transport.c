#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/kube_transport.h"
#include "testutil.h"
#include "tu_httpd.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define STATUS(code, reason, msg)                                                                  \
	"{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":\"" msg     \
	"\",\"reason\":\"" reason "\",\"code\":" #code "}"

struct fx {
	struct tu_httpd h;
	char *dir, *kcpath;
	ds_kubeconfig *kc;
	ds_kube_transport *t;
	struct ds_kube_transport_opts opts;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	tu_httpd_start(&f->h);
	f->dir = tu_mkdtemp("transport");
	ds_kube_transport_opts_init(&f->opts);
	/* fast retries so the suite stays quick; the shape is what is tested */
	f->opts.backoff_base_ms = 20;
	f->opts.backoff_max_ms = 100;
	f->opts.max_retries = 3;
	*state = f;
	return 0;
}

/* Client created lazily so a test can adjust opts or the token first. */
static ds_kube_transport *client(struct fx *f, const char *token)
{
	ds_err err = {0};

	f->kcpath = tu_httpd_kubeconfig(&f->h, f->dir, token);
	assert_int_equal(ds_kubeconfig_load(&f->kc, f->kcpath, NULL, &err), 0);
	assert_int_equal(ds_kube_transport_new(&f->t, f->kc, &f->opts, &err), 0);
	return f->t;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	ds_kube_transport_free(f->t);
	ds_kubeconfig_free(f->kc);
	tu_httpd_stop(&f->h);
	free(f->kcpath);
	free(f->dir);
	free(f);
	return 0;
}

static const struct ds_kube_request GET_CM = {"GET", "/api/v1/namespaces/a/configmaps/x", NULL,
					      NULL, 0};

static void test_kube_transport__get_retried_on_503_until_it_succeeds(void **state)
{
	struct fx *f = *state;
	struct ds_kube_response resp = {0};
	ds_kube_error ke;

	f->h.steps[0] =
	    (struct tu_httpd_step){.code = 503, .body = STATUS(503, "ServiceUnavailable", "busy")};
	f->h.steps[1] =
	    (struct tu_httpd_step){.code = 500, .body = STATUS(500, "InternalError", "oops")};
	f->h.steps[2] = (struct tu_httpd_step){.code = 200, .body = "{\"kind\":\"ConfigMap\"}"};
	f->h.nsteps = 3;
	client(f, "secret-token");
	assert_int_equal(ds_kube_transport_request(f->t, &GET_CM, &resp, &ke), 0);
	assert_int_equal(resp.code, 200);
	assert_string_equal(resp.body, "{\"kind\":\"ConfigMap\"}");
	assert_int_equal(ke.attempts, 3);
	assert_int_equal(f->h.hits, 3);
	assert_string_equal(f->h.reqs[0].auth, "Bearer secret-token");
	assert_string_equal(f->h.reqs[2].url, "/api/v1/namespaces/a/configmaps/x");
	ds_kube_response_dispose(&resp);
}

static void test_kube_transport__retries_are_bounded_and_status_kept(void **state)
{
	struct fx *f = *state;
	struct ds_kube_response resp = {0};
	struct ds_kube_transport_stats st;
	ds_kube_error ke;

	f->h.steps[0] = (struct tu_httpd_step){
	    .code = 503, .body = STATUS(503, "ServiceUnavailable", "the server is shutting down")};
	f->h.nsteps = 1;
	client(f, NULL);
	assert_int_equal(ds_kube_transport_request(f->t, &GET_CM, &resp, &ke), -EAGAIN);
	assert_int_equal(f->h.hits, 4); /* first attempt + max_retries */
	assert_int_equal(ke.attempts, 4);
	assert_int_equal(ke.code, 503);
	assert_string_equal(ke.reason, "ServiceUnavailable");
	assert_string_equal(ke.message, "the server is shutting down");
	assert_string_equal(f->h.reqs[0].auth, "");
	ds_kube_transport_stats(f->t, &st);
	assert_int_equal(st.retries, 3);
	assert_int_equal(st.requests, 4);
}

static void test_kube_transport__retry_after_is_honoured(void **state)
{
	struct fx *f = *state;
	struct ds_kube_response resp = {0};
	ds_kube_error ke;
	double t0, dt;

	f->h.steps[0] = (struct tu_httpd_step){
	    .code = 429, .body = STATUS(429, "TooManyRequests", "slow down"), .retry_after = "1"};
	f->h.steps[1] = (struct tu_httpd_step){.code = 200, .body = "{}"};
	f->h.nsteps = 2;
	client(f, NULL);
	t0 = now_s();
	assert_int_equal(ds_kube_transport_request(f->t, &GET_CM, &resp, &ke), 0);
	dt = now_s() - t0;
	/* the backoff alone would be at most 100 ms */
	if (dt < 0.95 || dt > 3.0)
		fail_msg("took %.3f s, Retry-After said 1 s", dt);
	assert_int_equal(f->h.hits, 2);
	ds_kube_response_dispose(&resp);
}

static void test_kube_transport__create_is_not_resent_after_a_5xx(void **state)
{
	struct fx *f = *state;
	struct ds_kube_response resp = {0};
	struct ds_kube_request post = {"POST", "/api/v1/namespaces/a/configmaps", NULL,
				       "{\"metadata\":{\"name\":\"x\"}}", 26};
	ds_kube_error ke;

	f->h.steps[0] = (struct tu_httpd_step){
	    .code = 500, .body = STATUS(500, "InternalError", "etcd timeout")};
	f->h.steps[1] = (struct tu_httpd_step){.code = 201, .body = "{}"};
	f->h.nsteps = 2;
	client(f, NULL);
	assert_int_equal(ds_kube_transport_request(f->t, &post, &resp, &ke), -EIO);
	assert_int_equal(f->h.hits, 1);
	assert_string_equal(ke.message, "etcd timeout");
	assert_string_equal(f->h.reqs[0].method, "POST");
	assert_string_equal(f->h.reqs[0].ctype, "application/json");
	assert_string_equal(f->h.reqs[0].body, "{\"metadata\":{\"name\":\"x\"}}");
}

static void test_kube_transport__create_is_resent_after_429(void **state)
{
	struct fx *f = *state;
	struct ds_kube_response resp = {0};
	struct ds_kube_request post = {"POST", "/api/v1/namespaces/a/configmaps", NULL, "{}", 2};

	f->h.steps[0] =
	    (struct tu_httpd_step){.code = 429, .body = STATUS(429, "TooManyRequests", "later")};
	f->h.steps[1] = (struct tu_httpd_step){.code = 201, .body = "{\"ok\":1}"};
	f->h.nsteps = 2;
	client(f, NULL);
	assert_int_equal(ds_kube_transport_request(f->t, &post, &resp, NULL), 0);
	assert_int_equal(resp.code, 201);
	assert_int_equal(f->h.hits, 2);
	ds_kube_response_dispose(&resp);
}

static void test_kube_transport__apply_patch_is_idempotent_json_patch_is_not(void **state)
{
	struct fx *f = *state;
	struct ds_kube_response resp = {0};
	struct ds_kube_request apply = {"PATCH", "/api/v1/namespaces/a/configmaps/x?fieldManager=t",
					"application/apply-patch+yaml", "{}", 2};
	struct ds_kube_request jp = {"PATCH", "/api/v1/namespaces/a/configmaps/x",
				     "application/json-patch+json", "[]", 2};

	f->h.steps[0] = (struct tu_httpd_step){.code = 502, .body = "bad gateway"};
	f->h.steps[1] = (struct tu_httpd_step){.code = 200, .body = "{}"};
	f->h.steps[2] = (struct tu_httpd_step){.code = 502, .body = "bad gateway"};
	f->h.steps[3] = (struct tu_httpd_step){.code = 200, .body = "{}"};
	f->h.nsteps = 4;
	client(f, NULL);
	assert_int_equal(ds_kube_transport_request(f->t, &apply, &resp, NULL), 0);
	ds_kube_response_dispose(&resp);
	assert_int_equal(f->h.hits, 2);
	assert_string_equal(f->h.reqs[0].ctype, "application/apply-patch+yaml");
	assert_int_equal(ds_kube_transport_request(f->t, &jp, &resp, NULL), -EIO);
	assert_int_equal(f->h.hits, 3);
}

static void test_kube_transport__dropped_connection_retried_for_get_only(void **state)
{
	struct fx *f = *state;
	struct ds_kube_response resp = {0};
	struct ds_kube_request post = {"POST", "/api/v1/namespaces", NULL, "{}", 2};
	ds_kube_error ke;

	/* the server takes each request and drops the connection without an answer
	 * (each on a fresh connection: curl itself resends once when a kept-alive
	 * connection turns out closed, the stale keep-alive race) */
	f->h.steps[0] = (struct tu_httpd_step){.code = 201, .close = true};
	f->h.steps[1] = (struct tu_httpd_step){.code = 200, .close = true};
	f->h.steps[2] = (struct tu_httpd_step){.code = 200, .body = "{}"};
	f->h.nsteps = 3;
	client(f, NULL);
	assert_int_equal(ds_kube_transport_request(f->t, &post, &resp, &ke), -ECONNRESET);
	assert_int_equal(f->h.hits, 1);
	assert_int_equal(ke.code, 0);
	assert_int_equal(ke.attempts, 1);
	assert_non_null(strstr(ke.message, "POST"));
	assert_int_equal(ds_kube_transport_request(f->t, &GET_CM, &resp, &ke), 0);
	assert_int_equal(ke.attempts, 2);
	ds_kube_response_dispose(&resp);
	assert_int_equal(f->h.hits, 3);
}

static void test_kube_transport__connection_refused_backs_off_exponentially(void **state)
{
	struct fx *f = *state;
	struct ds_kube_response resp = {0};
	char *text, *path;
	ds_err err = {0};
	ds_kube_error ke;
	double t0, dt;

	(void)state;
	f->opts.backoff_base_ms = 100;
	f->opts.backoff_max_ms = 10000;
	f->opts.max_retries = 3;
	if (asprintf(&path, "%s/refused", f->dir) < 0 ||
	    asprintf(&text,
		     "current-context: t\n"
		     "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:%d'}}]\n"
		     "contexts: [{name: t, context: {cluster: c}}]\n",
		     tu_free_port()) < 0)
		fail_msg("oom");
	tu_write_file(path, text);
	assert_int_equal(ds_kubeconfig_load(&f->kc, path, NULL, &err), 0);
	assert_int_equal(ds_kube_transport_new(&f->t, f->kc, &f->opts, &err), 0);
	t0 = now_s();
	assert_int_equal(ds_kube_transport_request(f->t, &GET_CM, &resp, &ke), -ECONNREFUSED);
	dt = now_s() - t0;
	assert_int_equal(ke.attempts, 4);
	/* backoffs in [50,100] + [100,200] + [200,400] ms */
	if (dt < 0.35 || dt > 2.0)
		fail_msg("3 backoffs took %.3f s", dt);
	assert_non_null(strstr(ke.message, "127.0.0.1"));
	free(text);
	free(path);
}

static void test_kube_transport__backoff_grows_with_jitter_and_caps(void **state)
{
	struct ds_kube_transport_opts o;

	(void)state;
	ds_kube_transport_opts_init(&o);
	o.backoff_base_ms = 100;
	o.backoff_max_ms = 1000;
	o.retry_after_max_ms = 5000;
	assert_int_equal(ds_kube_backoff_ms(&o, 0, -1, 0.0), 50);
	assert_int_equal(ds_kube_backoff_ms(&o, 0, -1, 0.999999), 99);
	assert_int_equal(ds_kube_backoff_ms(&o, 2, -1, 0.0), 200);
	assert_int_equal(ds_kube_backoff_ms(&o, 2, -1, 0.5), 300);
	assert_int_equal(ds_kube_backoff_ms(&o, 10, -1, 0.0), 500);
	assert_int_equal(ds_kube_backoff_ms(&o, 60, -1, 0.999999), 999);
	assert_int_equal(ds_kube_backoff_ms(&o, 0, 2, 0.3), 2000);
	assert_int_equal(ds_kube_backoff_ms(&o, 0, 3600, 0.3), 5000);
	assert_int_equal(ds_kube_backoff_ms(&o, 0, 0, 0.3), 0);
}

static void test_kube_transport__401_refreshes_exec_credentials_once(void **state)
{
	struct fx *f = *state;
	struct ds_kube_response resp = {0};
	char *path, *text;
	ds_err err = {0};

	f->h.require_token = "tok-2";
	if (asprintf(&path, "%s/exec", f->dir) < 0 ||
	    asprintf(&text,
		     "current-context: t\n"
		     "clusters: [{name: c, cluster: {server: '%s'}}]\n"
		     "users:\n"
		     "- name: u\n"
		     "  user:\n"
		     "    exec:\n"
		     "      apiVersion: client.authentication.k8s.io/v1\n"
		     "      command: %s/kube/exec-plugin.sh\n"
		     "      args: [client.authentication.k8s.io/v1, token]\n"
		     "      env: [{name: PLUGIN_COUNT_FILE, value: '%s/count'}, "
		     "{name: PLUGIN_TOKEN, value: tok}]\n"
		     "contexts: [{name: t, context: {cluster: c, user: u}}]\n",
		     f->h.url, tu_env("DS_RESOURCES"), f->dir) < 0)
		fail_msg("oom");
	tu_write_file(path, text);
	assert_int_equal(ds_kubeconfig_load(&f->kc, path, NULL, &err), 0);
	assert_int_equal(ds_kube_transport_new(&f->t, f->kc, &f->opts, &err), 0);
	/* tok-1 is refused, the plugin runs again, tok-2 is accepted */
	assert_int_equal(ds_kube_transport_request(f->t, &GET_CM, &resp, NULL), 0);
	ds_kube_response_dispose(&resp);
	assert_int_equal(f->h.hits, 2);
	assert_string_equal(f->h.reqs[0].auth, "Bearer tok-1");
	assert_string_equal(f->h.reqs[1].auth, "Bearer tok-2");
	/* tok-3 from now on is refused: one fresh try, then the 401 is returned */
	f->h.require_token = "never";
	{
		ds_kube_error ke;
		assert_int_equal(ds_kube_transport_request(f->t, &GET_CM, &resp, &ke), -EACCES);
		assert_int_equal(ke.code, 401);
		assert_string_equal(ke.reason, "Unauthorized");
	}
	assert_int_equal(f->h.hits, 4);
	assert_int_equal(ds_kubeconfig_exec_runs(f->kc), 3);
	free(text);
	free(path);
}

static void test_kube_transport__rate_limit_spaces_requests(void **state)
{
	struct fx *f = *state;
	struct ds_kube_response resp = {0};
	double t0, dt;

	f->opts.qps = 20;
	f->opts.burst = 1;
	client(f, NULL);
	t0 = now_s();
	for (int i = 0; i < 11; i++) {
		assert_int_equal(ds_kube_transport_request(f->t, &GET_CM, &resp, NULL), 0);
		ds_kube_response_dispose(&resp);
	}
	dt = now_s() - t0;
	/* 10 tokens at 20/s after the burst */
	if (dt < 0.45 || dt > 2.0)
		fail_msg("11 requests at qps=20 burst=1 took %.3f s", dt);
}

static void test_kube_transport__connection_is_reused(void **state)
{
	struct fx *f = *state;
	struct ds_kube_response resp = {0};
	struct ds_kube_transport_stats st;

	client(f, NULL);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(ds_kube_transport_request(f->t, &GET_CM, &resp, NULL), 0);
		ds_kube_response_dispose(&resp);
	}
	assert_int_equal(f->h.hits, 5);
	assert_int_equal(f->h.connections, 1);
	ds_kube_transport_stats(f->t, &st);
	assert_int_equal(st.connections, 1);
	assert_int_equal(st.http2, 0); /* plain http: HTTP/1.1 */
}

static void test_kube_transport__many_in_parallel_with_retries(void **state)
{
	struct fx *f = *state;
	struct ds_kube_call calls[40];
	char paths[40][64];
	double t0, dt;
	int rc;

	memset(calls, 0, sizeof(calls));
	/* the first 3 answers are 503: three calls must be retried; the rest take 100 ms */
	for (int i = 0; i < 3; i++)
		f->h.steps[i] =
		    (struct tu_httpd_step){.code = 503,
					   .body = STATUS(503, "ServiceUnavailable", "x"),
					   .retry_after = NULL,
					   .delay_ms = 100};
	f->h.steps[3] = (struct tu_httpd_step){
	    .code = 200, .body = "{\"ok\":true}", .retry_after = NULL, .delay_ms = 100};
	f->h.nsteps = 4;
	f->opts.max_parallel = 10;
	client(f, "t");
	for (int i = 0; i < 40; i++) {
		snprintf(paths[i], sizeof(paths[i]), "/api/v1/namespaces/a/configmaps/c%d", i);
		calls[i].req = (struct ds_kube_request){"GET", paths[i], NULL, NULL, 0};
	}
	t0 = now_s();
	rc = ds_kube_transport_request_many(f->t, calls, 40);
	dt = now_s() - t0;
	assert_int_equal(rc, 0);
	for (int i = 0; i < 40; i++) {
		assert_int_equal(calls[i].rc, 0);
		assert_string_equal(calls[i].resp.body, "{\"ok\":true}");
		ds_kube_response_dispose(&calls[i].resp);
	}
	assert_int_equal(f->h.hits, 43);
	assert_true(f->h.max_inflight > 1);
	assert_true(f->h.max_inflight <= 10);
	/* serially this would be 4.3 s */
	if (dt > 2.0)
		fail_msg("40 requests of 100 ms with 10 in flight took %.3f s", dt);
}

/*
 * More concurrent calls than the burst: the ones that wait for a token start
 * when it is theirs, at the sustained rate. (A parked call that took a second
 * token when its turn came kept the bucket in debt: the batch crawled or never
 * ended; SIGALRM ends the test then.)
 */
static void test_kube_transport__many_beyond_the_burst_keep_the_rate(void **state)
{
	enum { N = 120 };
	struct fx *f = *state;
	static struct ds_kube_call calls[N];
	static char paths[N][64];
	double t0, dt;

	memset(calls, 0, sizeof(calls));
	f->h.steps[0] = (struct tu_httpd_step){.code = 200, .body = "{\"ok\":true}"};
	f->h.nsteps = 1;
	f->opts.qps = 100;
	f->opts.burst = 20;
	f->opts.max_parallel = 16;
	client(f, NULL);
	for (int i = 0; i < N; i++) {
		snprintf(paths[i], sizeof(paths[i]), "/api/v1/namespaces/a/configmaps/c%d", i);
		calls[i].req = (struct ds_kube_request){"GET", paths[i], NULL, NULL, 0};
	}
	alarm(20);
	t0 = now_s();
	assert_int_equal(ds_kube_transport_request_many(f->t, calls, N), 0);
	dt = now_s() - t0;
	alarm(0);
	for (int i = 0; i < N; i++) {
		assert_int_equal(calls[i].rc, 0);
		ds_kube_response_dispose(&calls[i].resp);
	}
	assert_int_equal(f->h.hits, N);
	/* 100 tokens at 100/s after the burst of 20 */
	if (dt < 0.9 || dt > 3.0)
		fail_msg("%d requests at qps=100 burst=20, 16 in flight, took %.3f s", N, dt);
}

static void test_kube_transport__many_reports_each_failure(void **state)
{
	struct fx *f = *state;
	struct ds_kube_call calls[3];

	memset(calls, 0, sizeof(calls));
	f->h.steps[0] = (struct tu_httpd_step){.code = 201, .body = "{}"};
	f->h.steps[1] =
	    (struct tu_httpd_step){.code = 409, .body = STATUS(409, "AlreadyExists", "exists")};
	f->h.steps[2] = (struct tu_httpd_step){.code = 201, .body = "{}"};
	f->h.nsteps = 3;
	f->opts.max_parallel = 1; /* keep the script order */
	client(f, NULL);
	for (int i = 0; i < 3; i++)
		calls[i].req =
		    (struct ds_kube_request){"POST", "/api/v1/namespaces", NULL, "{}", 2};
	assert_int_equal(ds_kube_transport_request_many(f->t, calls, 3), 1);
	assert_int_equal(calls[0].rc, 0);
	assert_int_equal(calls[1].rc, -EEXIST);
	assert_string_equal(calls[1].error.reason, "AlreadyExists");
	assert_int_equal(calls[2].rc, 0);
	for (int i = 0; i < 3; i++)
		ds_kube_response_dispose(&calls[i].resp);
}

struct lines {
	char got[8][128];
	int n;
};

static int on_line(void *user, const char *line, size_t len)
{
	struct lines *l = user;

	if (l->n < 8)
		snprintf(l->got[l->n++], sizeof(l->got[0]), "%.*s", (int)len, line);
	return 0;
}

static void test_kube_transport__stream_delivers_lines_across_chunks(void **state)
{
	struct fx *f = *state;
	static const char *const chunks[] = {"{\"type\":\"ADDED\"}\n{\"type\":", "\"MODIFIED\"}\n",
					     "{\"type\":\"DELETED\"}", NULL};
	struct ds_kube_request req = {"GET", "/api/v1/configmaps?watch=true", NULL, NULL, 0};
	struct lines l = {0};

	f->h.stream_chunks = chunks;
	f->h.stream_delay_ms = 50;
	client(f, NULL);
	assert_int_equal(ds_kube_transport_stream(f->t, &req, on_line, &l, NULL, NULL), 0);
	assert_int_equal(l.n, 3);
	assert_string_equal(l.got[0], "{\"type\":\"ADDED\"}");
	assert_string_equal(l.got[1], "{\"type\":\"MODIFIED\"}");
	assert_string_equal(l.got[2], "{\"type\":\"DELETED\"}");
}

static void test_kube_transport__stream_error_answer_is_a_status(void **state)
{
	struct fx *f = *state;
	static const char *const chunks[] = {"never\n", NULL};
	struct ds_kube_request req = {"GET", "/api/v1/configmaps?watch=true", NULL, NULL, 0};
	struct lines l = {0};
	ds_kube_error ke;

	f->h.stream_chunks = chunks;
	f->h.steps[0] = (struct tu_httpd_step){
	    .code = 403, .body = STATUS(403, "Forbidden", "no watch for you")};
	f->h.nsteps = 1;
	client(f, NULL);
	assert_int_equal(ds_kube_transport_stream(f->t, &req, on_line, &l, NULL, &ke), -EPERM);
	assert_int_equal(l.n, 0);
	assert_string_equal(ke.reason, "Forbidden");
	assert_string_equal(ke.message, "no watch for you");
}

static void test_kube_transport__oversized_answer_refused(void **state)
{
	struct fx *f = *state;
	struct ds_kube_response resp = {0};
	ds_kube_error ke;

	f->h.steps[0] = (struct tu_httpd_step){
	    .code = 200, .body = "{\"data\":\"0123456789012345678901234567890\"}"};
	f->h.nsteps = 1;
	f->opts.max_body = 16;
	client(f, NULL);
	assert_int_equal(ds_kube_transport_request(f->t, &GET_CM, &resp, &ke), -E2BIG);
	assert_non_null(strstr(ke.message, "larger than 16 bytes"));
}

static void test_kube_transport__proxy_url_is_used(void **state)
{
	struct fx *f = *state;
	struct ds_kube_response resp = {0};
	char *path, *text;
	ds_err err = {0};

	/* the test server plays an HTTP proxy for a server name that does not resolve */
	if (asprintf(&path, "%s/proxied", f->dir) < 0 ||
	    asprintf(&text,
		     "current-context: t\n"
		     "clusters: [{name: c, cluster: {server: 'http://api.cluster.invalid:6443', "
		     "proxy-url: '%s'}}]\n"
		     "users: [{name: u, user: {token: via-proxy}}]\n"
		     "contexts: [{name: t, context: {cluster: c, user: u}}]\n",
		     f->h.url) < 0)
		fail_msg("oom");
	tu_write_file(path, text);
	assert_int_equal(ds_kubeconfig_load(&f->kc, path, NULL, &err), 0);
	assert_string_equal(ds_kubeconfig_proxy_url(f->kc), f->h.url);
	assert_int_equal(ds_kube_transport_new(&f->t, f->kc, &f->opts, &err), 0);
	assert_int_equal(ds_kube_transport_request(f->t, &GET_CM, &resp, NULL), 0);
	ds_kube_response_dispose(&resp);
	assert_int_equal(f->h.hits, 1);
	assert_string_equal(f->h.reqs[0].url,
			    "http://api.cluster.invalid:6443/api/v1/namespaces/a/configmaps/x");
	assert_string_equal(f->h.reqs[0].auth, "Bearer via-proxy");
	free(text);
	free(path);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
	    T(test_kube_transport__get_retried_on_503_until_it_succeeds),
	    T(test_kube_transport__retries_are_bounded_and_status_kept),
	    T(test_kube_transport__retry_after_is_honoured),
	    T(test_kube_transport__create_is_not_resent_after_a_5xx),
	    T(test_kube_transport__create_is_resent_after_429),
	    T(test_kube_transport__apply_patch_is_idempotent_json_patch_is_not),
	    T(test_kube_transport__dropped_connection_retried_for_get_only),
	    T(test_kube_transport__connection_refused_backs_off_exponentially),
	    T(test_kube_transport__backoff_grows_with_jitter_and_caps),
	    T(test_kube_transport__401_refreshes_exec_credentials_once),
	    T(test_kube_transport__rate_limit_spaces_requests),
	    T(test_kube_transport__connection_is_reused),
	    T(test_kube_transport__many_in_parallel_with_retries),
	    T(test_kube_transport__many_beyond_the_burst_keep_the_rate),
	    T(test_kube_transport__many_reports_each_failure),
	    T(test_kube_transport__stream_delivers_lines_across_chunks),
	    T(test_kube_transport__stream_error_answer_is_a_status),
	    T(test_kube_transport__oversized_answer_refused),
	    T(test_kube_transport__proxy_url_is_used),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
