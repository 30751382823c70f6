#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/kubeconfig.h"
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char *path_in(const char *dir, const char *name)
{
	char *p;

	if (asprintf(&p, "%s/%s", dir, name) < 0)
		fail_msg("out of memory");
	return p;
}

static int count_lines(const char *path)
{
	FILE *f = fopen(path, "r");
	int n = 0, c;

	if (!f)
		return 0;
	while ((c = fgetc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

static void test_kubeconfig__token_context_and_namespace(void **state)
{
	char *dir = tu_mkdtemp("kc"), *f = path_in(dir, "config");
	ds_kubeconfig *kc = NULL;
	ds_kube_credentials c = {0};
	ds_err err = {0};

	(void)state;
	tu_write_file(f, "apiVersion: v1\n"
			 "kind: Config\n"
			 "current-context: dev\n"
			 "clusters:\n"
			 "- name: c1\n"
			 "  cluster:\n"
			 "    server: https://10.0.0.1:6443/\n"
			 "    insecure-skip-tls-verify: true\n"
			 "    tls-server-name: kubernetes.default\n"
			 "    proxy-url: http://proxy.corp:3128\n"
			 "users:\n"
			 "- name: u1\n"
			 "  user:\n"
			 "    token: abc.def\n"
			 "contexts:\n"
			 "- name: dev\n"
			 "  context: {cluster: c1, user: u1, namespace: ml-team}\n"
			 "- name: other\n"
			 "  context: {cluster: c1, user: u1}\n");
	assert_int_equal(ds_kubeconfig_load(&kc, f, NULL, &err), 0);
	assert_string_equal(ds_kubeconfig_server(kc), "https://10.0.0.1:6443");
	assert_string_equal(ds_kubeconfig_context(kc), "dev");
	assert_string_equal(ds_kubeconfig_namespace(kc), "ml-team");
	assert_true(ds_kubeconfig_insecure(kc));
	assert_string_equal(ds_kubeconfig_tls_server_name(kc), "kubernetes.default");
	assert_string_equal(ds_kubeconfig_proxy_url(kc), "http://proxy.corp:3128");
	assert_null(ds_kubeconfig_ca_pem(kc));
	assert_string_equal(ds_kubeconfig_auth_kind(kc), "token");
	assert_int_equal(ds_kubeconfig_credentials(kc, &c, &err), 0);
	assert_string_equal(c.token, "abc.def");
	assert_null(c.cert_pem);
	ds_kube_credentials_dispose(&c);
	ds_kubeconfig_free(kc);

	/* --context picks another one; its namespace defaults */
	assert_int_equal(ds_kubeconfig_load(&kc, f, "other", &err), 0);
	assert_string_equal(ds_kubeconfig_namespace(kc), "default");
	ds_kubeconfig_free(kc);

	assert_int_equal(ds_kubeconfig_load(&kc, f, "nope", &err), -ENOENT);
	assert_non_null(strstr(err.msg, "context 'nope' not found"));
	free(f);
	free(dir);
}

static void test_kubeconfig__kubeconfig_env_merges_files_first_wins(void **state)
{
	char *dir = tu_mkdtemp("kc"), *a = path_in(dir, "a.yaml"), *sub = path_in(dir, "sub");
	char *b, *env, *ca;
	ds_kubeconfig *kc = NULL;
	ds_kube_credentials c = {0};
	ds_err err = {0};

	(void)state;
	assert_int_equal(mkdir(sub, 0755), 0);
	b = path_in(sub, "b.yaml");
	ca = path_in(sub, "ca.pem");
	tu_write_file(ca, "-----BEGIN CERTIFICATE-----\nB\n-----END CERTIFICATE-----\n");
	/* a: no current-context, defines user "u" and cluster "shared" */
	tu_write_file(a, "clusters:\n"
			 "- name: shared\n"
			 "  cluster: {server: 'https://first:6443'}\n"
			 "users:\n"
			 "- name: u\n"
			 "  user: {token: from-a}\n");
	/* b: current-context, a "shared" cluster that loses, CA file relative to b */
	tu_write_file(b, "current-context: ctx\n"
			 "clusters:\n"
			 "- name: shared\n"
			 "  cluster: {server: 'https://second:6443'}\n"
			 "- name: own\n"
			 "  cluster: {server: 'https://own:6443', certificate-authority: ca.pem}\n"
			 "users:\n"
			 "- name: u\n"
			 "  user: {token: from-b}\n"
			 "contexts:\n"
			 "- name: ctx\n"
			 "  context: {cluster: shared, user: u}\n"
			 "- name: own\n"
			 "  context: {cluster: own, user: u}\n");
	if (asprintf(&env, "%s/missing.yaml:%s::%s", dir, a, b) < 0)
		fail_msg("oom");
	setenv("KUBECONFIG", env, 1);
	assert_int_equal(ds_kubeconfig_load(&kc, NULL, NULL, &err), 0);
	assert_string_equal(ds_kubeconfig_server(kc), "https://first:6443");
	assert_int_equal(ds_kubeconfig_credentials(kc, &c, &err), 0);
	assert_string_equal(c.token, "from-a");
	ds_kube_credentials_dispose(&c);
	ds_kubeconfig_free(kc);

	assert_int_equal(ds_kubeconfig_load(&kc, NULL, "own", &err), 0);
	assert_string_equal(ds_kubeconfig_server(kc), "https://own:6443");
	assert_non_null(strstr(ds_kubeconfig_ca_pem(kc), "\nB\n"));
	ds_kubeconfig_free(kc);

	/* an explicit --kubeconfig that does not exist is an error, not skipped */
	assert_int_equal(ds_kubeconfig_load(&kc, "/nonexistent/kubeconfig", NULL, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "/nonexistent/kubeconfig"));
	unsetenv("KUBECONFIG");
	free(env);
	free(ca);
	free(a);
	free(b);
	free(sub);
	free(dir);
}

static void test_kubeconfig__certificates_inline_and_from_files(void **state)
{
	char *dir = tu_mkdtemp("kc"), *f = path_in(dir, "config"), *crt = path_in(dir, "c.crt"),
	     *key = path_in(dir, "c.key");
	ds_kubeconfig *kc = NULL;
	ds_kube_credentials c = {0};
	ds_err err = {0};

	(void)state;
	tu_write_file(crt, "CLIENT-CERT-FILE\n");
	tu_write_file(key, "CLIENT-KEY-FILE\n");
	/* base64("CA-PEM") = Q0EtUEVN, base64("CERT") = Q0VSVA==, base64("KEY") = S0VZ */
	tu_write_file(f, "current-context: inline\n"
			 "clusters:\n"
			 "- name: c\n"
			 "  cluster:\n"
			 "    server: https://127.0.0.1:6443\n"
			 "    certificate-authority-data: Q0EtUEVN\n"
			 "users:\n"
			 "- name: inline\n"
			 "  user:\n"
			 "    client-certificate-data: Q0VSVA==\n"
			 "    client-key-data: S0VZ\n"
			 "- name: files\n"
			 "  user:\n"
			 "    client-certificate: c.crt\n"
			 "    client-key: c.key\n"
			 "- name: half\n"
			 "  user:\n"
			 "    client-certificate: c.crt\n"
			 "- name: bad64\n"
			 "  user:\n"
			 "    client-certificate-data: '***'\n"
			 "    client-key-data: S0VZ\n"
			 "contexts:\n"
			 "- {name: inline, context: {cluster: c, user: inline}}\n"
			 "- {name: files, context: {cluster: c, user: files}}\n"
			 "- {name: half, context: {cluster: c, user: half}}\n"
			 "- {name: bad64, context: {cluster: c, user: bad64}}\n");
	assert_int_equal(ds_kubeconfig_load(&kc, f, NULL, &err), 0);
	assert_string_equal(ds_kubeconfig_ca_pem(kc), "CA-PEM");
	assert_string_equal(ds_kubeconfig_auth_kind(kc), "client-certificate");
	assert_false(ds_kubeconfig_insecure(kc));
	assert_int_equal(ds_kubeconfig_credentials(kc, &c, &err), 0);
	assert_string_equal(c.cert_pem, "CERT");
	assert_string_equal(c.key_pem, "KEY");
	assert_null(c.token);
	ds_kube_credentials_dispose(&c);
	ds_kubeconfig_free(kc);

	assert_int_equal(ds_kubeconfig_load(&kc, f, "files", &err), 0);
	assert_int_equal(ds_kubeconfig_credentials(kc, &c, &err), 0);
	assert_string_equal(c.cert_pem, "CLIENT-CERT-FILE\n");
	assert_string_equal(c.key_pem, "CLIENT-KEY-FILE\n");
	ds_kube_credentials_dispose(&c);
	ds_kubeconfig_free(kc);

	assert_int_equal(ds_kubeconfig_load(&kc, f, "half", &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "client-certificate and client-key go together"));
	assert_int_equal(ds_kubeconfig_load(&kc, f, "bad64", &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "client-certificate-data"));
	free(crt);
	free(key);
	free(f);
	free(dir);
}

static void test_kubeconfig__token_file_is_reread_when_rotated(void **state)
{
	char *dir = tu_mkdtemp("kc"), *f = path_in(dir, "config"), *tok = path_in(dir, "token");
	ds_kubeconfig *kc = NULL;
	ds_kube_credentials c = {0};
	ds_err err = {0};

	(void)state;
	tu_write_file(tok, "first-token\n");
	tu_write_file(f, "current-context: x\n"
			 "clusters: [{name: c, cluster: {server: 'https://h:1'}}]\n"
			 "users: [{name: u, user: {tokenFile: token}}]\n"
			 "contexts: [{name: x, context: {cluster: c, user: u}}]\n");
	assert_int_equal(ds_kubeconfig_load(&kc, f, NULL, &err), 0);
	assert_string_equal(ds_kubeconfig_auth_kind(kc), "tokenFile");
	assert_int_equal(ds_kubeconfig_credentials(kc, &c, &err), 0);
	assert_string_equal(c.token, "first-token");
	ds_kube_credentials_dispose(&c);
	/* rotation as the kubelet does it: a new file renamed over the old one */
	{
		char *tmp = path_in(dir, "token.new");
		tu_write_file(tmp, "second-token-longer\n");
		assert_int_equal(rename(tmp, tok), 0);
		free(tmp);
	}
	assert_int_equal(ds_kubeconfig_credentials(kc, &c, &err), 0);
	assert_string_equal(c.token, "second-token-longer");
	ds_kube_credentials_dispose(&c);
	/* a file that disappears: the last token read stays in use */
	unlink(tok);
	assert_int_equal(ds_kubeconfig_credentials(kc, &c, &err), 0);
	assert_string_equal(c.token, "second-token-longer");
	ds_kube_credentials_dispose(&c);
	ds_kubeconfig_free(kc);
	/* never readable and no `token`: an error naming the file */
	assert_int_equal(ds_kubeconfig_load(&kc, f, NULL, &err), 0);
	assert_int_equal(ds_kubeconfig_credentials(kc, &c, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "token"));
	ds_kubeconfig_free(kc);
	/* both: the file wins; `token` when the file cannot be read */
	tu_write_file(f, "current-context: x\n"
			 "clusters: [{name: c, cluster: {server: 'https://h:1'}}]\n"
			 "users: [{name: u, user: {token: inline, tokenFile: token}}]\n"
			 "contexts: [{name: x, context: {cluster: c, user: u}}]\n");
	assert_int_equal(ds_kubeconfig_load(&kc, f, NULL, &err), 0);
	assert_int_equal(ds_kubeconfig_credentials(kc, &c, &err), 0);
	assert_string_equal(c.token, "inline");
	ds_kube_credentials_dispose(&c);
	tu_write_file(tok, "from-file\n");
	assert_int_equal(ds_kubeconfig_credentials(kc, &c, &err), 0);
	assert_string_equal(c.token, "from-file");
	ds_kube_credentials_dispose(&c);
	ds_kubeconfig_free(kc);
	free(tok);
	free(f);
	free(dir);
}

static char *exec_config(const char *dir, const char *api, const char *mode, const char *extra)
{
	char *f = path_in(dir, "config"), *text;

	if (asprintf(&text,
		     "current-context: x\n"
		     "clusters:\n"
		     "- name: c\n"
		     "  cluster: {server: 'https://api.example:6443', certificate-authority-data: "
		     "Q0EtUEVN}\n"
		     "users:\n"
		     "- name: u\n"
		     "  user:\n"
		     "    exec:\n"
		     "      apiVersion: %s\n"
		     "      command: %s/kube/exec-plugin.sh\n"
		     "      args: [%s, %s]\n"
		     "      env:\n"
		     "      - {name: PLUGIN_COUNT_FILE, value: '%s/count'}\n"
		     "      - {name: PLUGIN_TOKEN, value: tok}\n"
		     "      installHint: install corp-sso from the portal\n"
		     "%s"
		     "contexts: [{name: x, context: {cluster: c, user: u}}]\n",
		     api, tu_env("DS_RESOURCES"), api, mode, dir, extra ? extra : "") < 0)
		fail_msg("oom");
	tu_write_file(f, text);
	free(text);
	return f;
}

static void test_kubeconfig__exec_plugin_v1_token_cached_until_expiry(void **state)
{
	char *dir = tu_mkdtemp("kc"), *count = path_in(dir, "count"), *info_path, *info;
	char *f = exec_config(dir, "client.authentication.k8s.io/v1", "token",
			      "      provideClusterInfo: true\n"
			      "      interactiveMode: Never\n");
	ds_kubeconfig *kc = NULL;
	ds_kube_credentials c = {0};
	char future[64];
	time_t t = time(NULL) + 3600;
	ds_err err = {0};

	(void)state;
	strftime(future, sizeof(future), "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
	setenv("PLUGIN_EXPIRY", future, 1);
	assert_int_equal(ds_kubeconfig_load(&kc, f, NULL, &err), 0);
	assert_string_equal(ds_kubeconfig_auth_kind(kc), "exec");
	assert_int_equal(ds_kubeconfig_credentials(kc, &c, &err), 0);
	assert_string_equal(c.token, "tok-1");
	ds_kube_credentials_dispose(&c);
	/* not expired: no second run */
	assert_int_equal(ds_kubeconfig_credentials(kc, &c, &err), 0);
	assert_string_equal(c.token, "tok-1");
	ds_kube_credentials_dispose(&c);
	assert_int_equal(count_lines(count), 1);
	/* the server said 401: the next call runs the plugin again */
	assert_true(ds_kubeconfig_invalidate(kc));
	assert_int_equal(ds_kubeconfig_credentials(kc, &c, &err), 0);
	assert_string_equal(c.token, "tok-2");
	ds_kube_credentials_dispose(&c);
	assert_int_equal(count_lines(count), 2);
	assert_int_equal(ds_kubeconfig_exec_runs(kc), 2);
	/* the plugin got KUBERNETES_EXEC_INFO with the cluster (provideClusterInfo) */
	info_path = path_in(dir, "count.info");
	info = tu_read_file(info_path, NULL);
	assert_non_null(strstr(info, "\"apiVersion\":\"client.authentication.k8s.io/v1\""));
	assert_non_null(strstr(info, "\"kind\":\"ExecCredential\""));
	assert_non_null(strstr(info, "\"interactive\":false"));
	assert_non_null(strstr(info, "\"server\":\"https://api.example:6443\""));
	assert_non_null(strstr(info, "\"certificate-authority-data\":\"Q0EtUEVN\""));
	free(info);
	free(info_path);
	ds_kubeconfig_free(kc);
	unsetenv("PLUGIN_EXPIRY");
	free(count);
	free(f);
	free(dir);
}

static void test_kubeconfig__exec_plugin_v1beta1_expired_runs_again(void **state)
{
	char *dir = tu_mkdtemp("kc"), *count = path_in(dir, "count");
	char *f = exec_config(dir, "client.authentication.k8s.io/v1beta1", "token", NULL);
	ds_kubeconfig *kc = NULL;
	ds_kube_credentials c = {0};
	ds_err err = {0};

	(void)state;
	setenv("PLUGIN_EXPIRY", "2020-01-01T00:00:00Z", 1);
	assert_int_equal(ds_kubeconfig_load(&kc, f, NULL, &err), 0);
	assert_int_equal(ds_kubeconfig_credentials(kc, &c, &err), 0);
	assert_string_equal(c.token, "tok-1");
	ds_kube_credentials_dispose(&c);
	assert_int_equal(ds_kubeconfig_credentials(kc, &c, &err), 0);
	assert_string_equal(c.token, "tok-2");
	ds_kube_credentials_dispose(&c);
	assert_int_equal(count_lines(count), 2);
	ds_kubeconfig_free(kc);
	unsetenv("PLUGIN_EXPIRY");
	free(count);
	free(f);
	free(dir);
}

static void test_kubeconfig__exec_plugin_client_certificate(void **state)
{
	char *dir = tu_mkdtemp("kc");
	char *f = exec_config(dir, "client.authentication.k8s.io/v1", "cert", NULL);
	ds_kubeconfig *kc = NULL;
	ds_kube_credentials c = {0};
	ds_err err = {0};

	(void)state;
	assert_int_equal(ds_kubeconfig_load(&kc, f, NULL, &err), 0);
	assert_int_equal(ds_kubeconfig_credentials(kc, &c, &err), 0);
	assert_null(c.token);
	assert_string_equal(c.cert_pem, "CERT-PEM");
	assert_string_equal(c.key_pem, "KEY-PEM");
	ds_kube_credentials_dispose(&c);
	ds_kubeconfig_free(kc);
	free(f);
	free(dir);
}

static void test_kubeconfig__exec_plugin_failures_are_explained(void **state)
{
	static const struct {
		const char *mode;
		int rc;
		const char *msg;
	} cases[] = {
	    {"fail", -EACCES,
	     "exited with 3: error: not logged in; run 'corp-sso login'; "
	     "install corp-sso from the portal"},
	    {"wrong", -EBADMSG, "answered apiVersion 'client.authentication.k8s.io/v1alpha1'"},
	    {"junk", -EBADMSG, "not an ExecCredential JSON object"},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *dir = tu_mkdtemp("kc");
		char *f = exec_config(dir, "client.authentication.k8s.io/v1", cases[i].mode, NULL);
		ds_kubeconfig *kc = NULL;
		ds_kube_credentials c = {0};
		ds_err err = {0};

		assert_int_equal(ds_kubeconfig_load(&kc, f, NULL, &err), 0);
		assert_int_equal(ds_kubeconfig_credentials(kc, &c, &err), cases[i].rc);
		if (!strstr(err.msg, cases[i].msg))
			fail_msg("mode %s: '%s' does not contain '%s'", cases[i].mode, err.msg,
				 cases[i].msg);
		ds_kubeconfig_free(kc);
		free(f);
		free(dir);
	}
}

static void test_kubeconfig__exec_plugin_config_errors(void **state)
{
	char *dir = tu_mkdtemp("kc"), *f = path_in(dir, "config");
	ds_kubeconfig *kc = NULL;
	ds_err err = {0};

	(void)state;
	tu_write_file(f, "current-context: x\n"
			 "clusters: [{name: c, cluster: {server: 'https://h:1'}}]\n"
			 "users:\n"
			 "- name: u\n"
			 "  user: {exec: {apiVersion: client.authentication.k8s.io/v1alpha1, "
			 "command: x}}\n"
			 "- name: missing\n"
			 "  user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: "
			 "/nonexistent/plugin, installHint: 'see the wiki'}}\n"
			 "contexts:\n"
			 "- {name: x, context: {cluster: c, user: u}}\n"
			 "- {name: m, context: {cluster: c, user: missing}}\n");
	assert_int_equal(ds_kubeconfig_load(&kc, f, NULL, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "apiVersion 'client.authentication.k8s.io/v1alpha1'"));
	assert_int_equal(ds_kubeconfig_load(&kc, f, "m", &err), 0);
	{
		ds_kube_credentials c = {0};
		assert_int_equal(ds_kubeconfig_credentials(kc, &c, &err), -ENOENT);
		assert_non_null(strstr(err.msg, "/nonexistent/plugin"));
		assert_non_null(strstr(err.msg, "see the wiki"));
	}
	ds_kubeconfig_free(kc);
	free(f);
	free(dir);
}

static void test_kubeconfig__in_cluster_service_account(void **state)
{
	char *dir = tu_mkdtemp("sa"), *tok = path_in(dir, "token"), *ca = path_in(dir, "ca.crt"),
	     *ns = path_in(dir, "namespace");
	ds_kubeconfig *kc = NULL;
	ds_kube_credentials c = {0};
	ds_err err = {0};

	(void)state;
	unsetenv("KUBERNETES_SERVICE_HOST");
	assert_int_equal(ds_kubeconfig_in_cluster(&kc, dir, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "KUBERNETES_SERVICE_HOST"));
	tu_write_file(tok, "sa-token-1");
	tu_write_file(ca, "CLUSTER-CA");
	tu_write_file(ns, "drasync-system\n");
	setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "443", 1);
	assert_int_equal(ds_kubeconfig_in_cluster(&kc, dir, &err), 0);
	assert_string_equal(ds_kubeconfig_server(kc), "https://10.96.0.1:443");
	assert_string_equal(ds_kubeconfig_ca_pem(kc), "CLUSTER-CA");
	assert_string_equal(ds_kubeconfig_namespace(kc), "drasync-system");
	assert_int_equal(ds_kubeconfig_credentials(kc, &c, &err), 0);
	assert_string_equal(c.token, "sa-token-1");
	ds_kube_credentials_dispose(&c);
	/* the kubelet rotates the projected token */
	{
		char *tmp = path_in(dir, "..token.tmp");
		tu_write_file(tmp, "sa-token-2");
		assert_int_equal(rename(tmp, tok), 0);
		free(tmp);
	}
	assert_int_equal(ds_kubeconfig_credentials(kc, &c, &err), 0);
	assert_string_equal(c.token, "sa-token-2");
	ds_kube_credentials_dispose(&c);
	ds_kubeconfig_free(kc);
	setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
	assert_int_equal(ds_kubeconfig_in_cluster(&kc, dir, &err), 0);
	assert_string_equal(ds_kubeconfig_server(kc), "https://[fd00::1]:443");
	ds_kubeconfig_free(kc);
	unsetenv("KUBERNETES_SERVICE_HOST");
	unsetenv("KUBERNETES_SERVICE_PORT");
	free(tok);
	free(ca);
	free(ns);
	free(dir);
}

static void test_kubeconfig__malformed_files_name_the_place(void **state)
{
	char *dir = tu_mkdtemp("kc"), *f = path_in(dir, "config");
	ds_kubeconfig *kc = NULL;
	ds_err err = {0};
	char buf[512];

	(void)state;
	tu_write_file(f, "clusters:\n- name: c\n  cluster: {server: [unclosed\n");
	assert_int_equal(ds_kubeconfig_load(&kc, f, NULL, &err), -EBADMSG);
	ds_err_format(&err, buf, sizeof(buf));
	assert_non_null(strstr(buf, f));
	assert_true(err.line >= 3);
	tu_write_file(f, "current-context: x\n"
			 "clusters: [{name: c, cluster: {}}]\n"
			 "contexts: [{name: x, context: {cluster: c}}]\n");
	assert_int_equal(ds_kubeconfig_load(&kc, f, NULL, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "cluster 'c' has no server"));
	tu_write_file(f, "current-context: x\n"
			 "clusters: [{name: c, cluster: {server: 'h:6443', "
			 "insecure-skip-tls-verify: maybe}}]\n"
			 "contexts: [{name: x, context: {cluster: c}}]\n");
	assert_int_equal(ds_kubeconfig_load(&kc, f, NULL, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "insecure-skip-tls-verify"));
	tu_write_file(f, "current-context: x\n"
			 "clusters: [{name: c, cluster: {server: 'h:6443'}}]\n"
			 "contexts: [{name: x, context: {cluster: c, user: ghost}}]\n");
	assert_int_equal(ds_kubeconfig_load(&kc, f, NULL, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "user 'ghost' not found"));
	tu_write_file(f, "current-context: x\n"
			 "clusters: [{name: c, cluster: {server: 'h:6443', "
			 "insecure-skip-tls-verify: true, certificate-authority-data: Q0EtUEVN}}]\n"
			 "contexts: [{name: x, context: {cluster: c}}]\n");
	assert_int_equal(ds_kubeconfig_load(&kc, f, NULL, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "cannot both be set"));
	/* kubectl accepts a server without a scheme and means https */
	tu_write_file(f, "current-context: x\n"
			 "clusters: [{name: c, cluster: {server: 'h:6443'}}]\n"
			 "contexts: [{name: x, context: {cluster: c}}]\n");
	assert_int_equal(ds_kubeconfig_load(&kc, f, NULL, &err), 0);
	assert_string_equal(ds_kubeconfig_server(kc), "https://h:6443");
	assert_string_equal(ds_kubeconfig_auth_kind(kc), "none");
	ds_kubeconfig_free(kc);
	free(f);
	free(dir);
}

static void test_kubeconfig__rfc3339_times(void **state)
{
	time_t t;

	(void)state;
	assert_int_equal(ds_kube_time_parse("1970-01-01T00:01:00Z", &t), 0);
	assert_int_equal((long)t, 60);
	assert_int_equal(ds_kube_time_parse("2026-11-30T08:00:00.123456Z", &t), 0);
	assert_int_equal(ds_kube_time_parse("1970-01-01T02:00:00+02:00", &t), 0);
	assert_int_equal((long)t, 0);
	assert_int_equal(ds_kube_time_parse("1970-01-01T00:00:00-01:30", &t), 0);
	assert_int_equal((long)t, 5400);
	assert_int_equal(ds_kube_time_parse("yesterday", &t), -EINVAL);
	assert_int_equal(ds_kube_time_parse("2026-11-30T08:00:00", &t), -EINVAL);
	assert_int_equal(ds_kube_time_parse("2026-11-30T08:00:00Zjunk", &t), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_kubeconfig__token_context_and_namespace),
	    cmocka_unit_test(test_kubeconfig__kubeconfig_env_merges_files_first_wins),
	    cmocka_unit_test(test_kubeconfig__certificates_inline_and_from_files),
	    cmocka_unit_test(test_kubeconfig__token_file_is_reread_when_rotated),
	    cmocka_unit_test(test_kubeconfig__exec_plugin_v1_token_cached_until_expiry),
	    cmocka_unit_test(test_kubeconfig__exec_plugin_v1beta1_expired_runs_again),
	    cmocka_unit_test(test_kubeconfig__exec_plugin_client_certificate),
	    cmocka_unit_test(test_kubeconfig__exec_plugin_failures_are_explained),
	    cmocka_unit_test(test_kubeconfig__exec_plugin_config_errors),
	    cmocka_unit_test(test_kubeconfig__in_cluster_service_account),
	    cmocka_unit_test(test_kubeconfig__malformed_files_name_the_place),
	    cmocka_unit_test(test_kubeconfig__rfc3339_times),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
