#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu_kube.h"

#include "drasync/yaml.h"
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

unsigned tu_rand(void)
{
	static unsigned seed;

	if (!seed)
		seed = (unsigned)time(NULL) ^ (unsigned)getpid();
	return (unsigned)rand_r(&seed) % 1000000u;
}

void tu_msleep(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

long long tu_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

ds_kube *tu_kube_connect(const char *kubeconfig)
{
	struct ds_kube_transport_opts o;
	ds_kubeconfig *kc = NULL;
	ds_kube *k = NULL;
	ds_err err = {0};

	ds_kube_transport_opts_init(&o);
	o.qps = 0;
	if (ds_kubeconfig_load(&kc, kubeconfig, NULL, &err) < 0)
		fail_msg("kubeconfig %s: %s", kubeconfig, err.msg);
	if (ds_kube_new(&k, &kc, &o, &err) < 0)
		fail_msg("client: %s", err.msg);
	return k;
}

ds_kube *tu_kube_refusing(const char *dir)
{
	struct ds_kube_transport_opts o;
	ds_kubeconfig *kc = NULL;
	ds_kube *k = NULL;
	ds_err err = {0};
	char path[4200];

	snprintf(path, sizeof(path), "%s/kubeconfig", dir);
	tu_write_file(path, "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
			    "clusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1', "
			    "insecure-skip-tls-verify: true}\n"
			    "users:\n- name: u\n  user: {token: t}\n"
			    "contexts:\n- name: c\n  context: {cluster: c, user: u}\n");
	ds_kube_transport_opts_init(&o);
	o.max_retries = 0;
	o.connect_timeout_ms = 500;
	if (ds_kubeconfig_load(&kc, path, NULL, &err) < 0)
		fail_msg("kubeconfig: %s", err.msg);
	if (ds_kube_new(&k, &kc, &o, &err) < 0)
		fail_msg("client: %s", err.msg);
	return k;
}

json_t *tu_kube_doc(const char *fmt, ...)
{
	va_list ap;
	char *text;
	json_t *docs = NULL, *d;
	ds_err err = {0};

	va_start(ap, fmt);
	if (vasprintf(&text, fmt, ap) < 0)
		fail_msg("out of memory");
	va_end(ap);
	if (ds_yaml_parse(text, strlen(text), "test", 0, &docs, NULL, &err) < 0)
		fail_msg("test manifest: %s\n%s", err.msg, text);
	free(text);
	d = json_incref(json_array_get(docs, 0));
	json_decref(docs);
	return d;
}

struct ds_kube_resource tu_kube_resource(ds_kube *k, const char *api, const char *kind)
{
	struct ds_kube_resource r;
	ds_kube_error ke;

	TU_KUBE_CHECK(ds_kube_resource_find(k, api, kind, &r, &ke), ke);
	return r;
}

void tu_kube_create(ds_kube *k, json_t *obj)
{
	struct ds_kube_resource r;
	ds_kube_error ke;

	TU_KUBE_CHECK(ds_kube_resource_of(k, obj, &r, &ke), ke);
	TU_KUBE_CHECK(ds_kube_create(k, &r, NULL, obj, NULL, &ke), ke);
	json_decref(obj);
}

void tu_kube_merge(ds_kube *k, const char *api, const char *kind, const char *ns, const char *name,
		   const char *sub, const char *patch_json)
{
	struct ds_kube_resource r = tu_kube_resource(k, api, kind);
	json_t *p = json_loads(patch_json, 0, NULL);
	ds_kube_error ke;

	assert_non_null(p);
	TU_KUBE_CHECK(ds_kube_merge_patch(k, &r, ns, name, p, sub, NULL, &ke), ke);
	json_decref(p);
}

void tu_kube_delete(ds_kube *k, const char *api, const char *kind, const char *ns, const char *name)
{
	struct ds_kube_resource r = tu_kube_resource(k, api, kind);
	ds_kube_error ke;

	TU_KUBE_CHECK(ds_kube_delete(k, &r, ns, name, NULL, &ke), ke);
}

char *tu_kube_new_namespace(ds_kube *k, const char *prefix, const char *labels)
{
	char *name;

	if (asprintf(&name, "%s-%u", prefix, tu_rand()) < 0)
		fail_msg("out of memory");
	tu_kube_create(k, tu_kube_doc("apiVersion: v1\nkind: Namespace\nmetadata: {name: %s, "
				      "labels: {%s}}\n",
				      name, labels ? labels : ""));
	return name;
}

void tu_kube_drop_namespace(ds_kube *k, char *name)
{
	struct ds_kube_resource r = tu_kube_resource(k, "v1", "Namespace");
	struct ds_kube_delete_opts d = {"Background", NULL, NULL, -1};

	ds_kube_delete(k, &r, NULL, name, &d, NULL);
	free(name);
}

void tu_kube_wait_devices_free(ds_kube *k, long timeout_ms)
{
	struct ds_kube_resource r = tu_kube_resource(k, "resource.k8s.io/v1", "ResourceClaim");
	long long until = tu_now_ms() + timeout_ms;
	char held[1024];

	for (;;) {
		json_t *list = NULL, *item;
		size_t i, off = 0;
		ds_kube_error ke;

		held[0] = '\0';
		TU_KUBE_CHECK(ds_kube_list(k, &r, NULL, NULL, &list, NULL, &ke), ke);
		json_array_foreach (json_object_get(list, "items"), i, item) {
			json_t *md = json_object_get(item, "metadata");
			int w;

			if (!json_object_get(json_object_get(item, "status"), "allocation") ||
			    off >= sizeof(held))
				continue;
			w = snprintf(held + off, sizeof(held) - off, " %s/%s",
				     json_string_value(json_object_get(md, "namespace")),
				     json_string_value(json_object_get(md, "name")));
			if (w > 0)
				off += (size_t)w;
		}
		json_decref(list);
		if (!held[0])
			return;
		if (tu_now_ms() > until)
			fail_msg("devices still allocated after %ld ms:%s", timeout_ms, held);
		tu_msleep(500);
	}
}

char *tu_kube_token(ds_kube *k, const char *ns, const char *sa)
{
	struct ds_kube_resource sa_r = tu_kube_resource(k, "v1", "ServiceAccount");
	struct ds_kube_request req = {"POST", NULL, NULL, NULL, 0};
	struct ds_kube_response resp = {0};
	json_t *tr, *answer;
	char *path, *body, *token;
	const char *got;
	ds_kube_error ke;

	tr = tu_kube_doc("apiVersion: authentication.k8s.io/v1\nkind: TokenRequest\n"
			 "spec: {expirationSeconds: 600}\n");
	assert_int_equal(ds_kube_path(&sa_r, ns, sa, "token", &path), 0);
	body = json_dumps(tr, JSON_COMPACT);
	req.path = path;
	req.body = body;
	req.body_len = strlen(body);
	TU_KUBE_CHECK(ds_kube_transport_request(ds_kube_get_transport(k), &req, &resp, &ke), ke);
	answer = json_loads(resp.body, 0, NULL);
	got = json_string_value(json_object_get(json_object_get(answer, "status"), "token"));
	assert_non_null(got);
	token = strdup(got);
	json_decref(answer);
	json_decref(tr);
	free(body);
	free(path);
	ds_kube_response_dispose(&resp);
	return token;
}

char *tu_kube_write_kubeconfig(const char *server_from, const char *dir, const char *name,
			       const char *ca_from, const char *cluster_extra,
			       const char *user_yaml)
{
	ds_kubeconfig *src = NULL;
	json_t *docs = NULL;
	char *path, *text, *b64 = NULL;
	ds_err err = {0};
	json_t *d;
	const char *cad;

	assert_int_equal(ds_kubeconfig_load(&src, server_from, NULL, &err), 0);
	if (ca_from) {
		assert_int_equal(ds_yaml_parse_file(ca_from, 0, &docs, NULL, &err), 0);
		d = json_array_get(docs, 0);
		cad = json_string_value(json_object_get(
		    json_object_get(json_array_get(json_object_get(d, "clusters"), 0), "cluster"),
		    "certificate-authority-data"));
		assert_non_null(cad);
		if (asprintf(&b64, "    certificate-authority-data: %s\n", cad) < 0)
			fail_msg("out of memory");
	} else {
		b64 = strdup("");
	}
	if (asprintf(&path, "%s/%s", dir, name) < 0 ||
	    asprintf(&text,
		     "current-context: t\n"
		     "clusters:\n- name: c\n  cluster:\n    server: %s\n%s%s"
		     "users:\n- name: u\n  user:\n%s"
		     "contexts: [{name: t, context: {cluster: c, user: u}}]\n",
		     ds_kubeconfig_server(src), b64, cluster_extra ? cluster_extra : "",
		     user_yaml ? user_yaml : "    {}\n") < 0)
		fail_msg("out of memory");
	tu_write_file(path, text);
	free(text);
	free(b64);
	json_decref(docs);
	ds_kubeconfig_free(src);
	return path;
}

void tu_kube_compact(const char *kubeconfig)
{
	char *dir = strdup(kubeconfig), *name, *state_dir;
	struct tu_run run;

	*strrchr(dir, '/') = '\0';
	name = strrchr(dir, '/') + 1;
	state_dir = strndup(dir, (size_t)(name - 1 - dir));
	setenv("DS_KUBE_STATE", state_dir, 1);
	{
		const char *argv[] = {tu_env("DS_CLUSTER_SH"), "compact", name, NULL};
		tu_run(&run, NULL, argv);
		if (run.status != 0)
			fail_msg("cluster.sh compact: %s", run.err);
		tu_run_dispose(&run);
	}
	free(state_dir);
	free(dir);
}

static bool is_verb_of(const char *line, const char *const verbs[])
{
	for (size_t i = 0; verbs[i]; i++) {
		char want[48];

		snprintf(want, sizeof(want), "verb=\"%s\"", verbs[i]);
		if (strstr(line, want))
			return true;
	}
	return false;
}

long long tu_kube_writes_of(ds_kube *k, const char *resource, const char *const verbs[],
			    char *detail, size_t size)
{
	struct ds_kube_request req = {.method = "GET", .path = "/metrics"};
	struct ds_kube_response resp;
	ds_kube_error ke;
	long long n = 0;
	size_t used = 0;

	char res[128];

	snprintf(res, sizeof(res), "resource=\"%s\"", resource);
	if (detail && size)
		detail[0] = '\0';
	TU_KUBE_CHECK(ds_kube_transport_request(ds_kube_get_transport(k), &req, &resp, &ke), ke);
	for (char *p = resp.body; p && *p;) {
		char *e = strchr(p, '\n');
		const char *close, *code, *verb;

		if (e)
			*e = '\0';
		if (strncmp(p, "apiserver_request_total{", 24) == 0 && strstr(p, res) &&
		    strstr(p, "subresource=\"\"") && is_verb_of(p, verbs) &&
		    (close = strchr(p, '}'))) {
			long long v = (long long)strtod(close + 1, NULL);

			n += v;
			code = strstr(p, "code=\"");
			verb = strstr(p, "verb=\"");
			if (detail && used + 1 < size && code && verb) {
				int w =
				    snprintf(detail + used, size - used, "%s%.*s %.*s: %lld",
					     used ? ", " : "", (int)strcspn(verb + 6, "\""),
					     verb + 6, (int)strcspn(code + 6, "\""), code + 6, v);
				if (w > 0)
					used += (size_t)w;
			}
		}
		p = e ? e + 1 : NULL;
	}
	ds_kube_response_dispose(&resp);
	return n;
}

/*
 * Writes to `resource` (e.g. "configmaps") the API server counted (its
 * /metrics, apiserver_request_total: APPLY is a server-side apply; PATCH,
 * UPDATE), whatever their answer. Not CREATE or DELETE: controllers make and
 * remove kube-root-ca.crt in every namespace. detail (may be NULL): the
 * counters by verb and code.
 */
long long tu_kube_writes(ds_kube *k, const char *resource, char *detail, size_t size)
{
	return tu_kube_writes_of(
	    k, resource, (const char *const[]){"APPLY", "PATCH", "UPDATE", NULL}, detail, size);
}
