/*
 * The Kubernetes client's authentication and TLS against the real v1 control
 * plane (tests/kube fixtures): a rotated in-cluster token, an exec plugin's
 * client certificate, a token without rights, a wrong CA and a wrong name.
 * Each test works in its own namespace and removes it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/kube_client.h"
#include "testutil.h"
#include "tu_kube.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void test_itest_kube_client__in_cluster_config_rereads_a_rotated_token(void **state)
{
	ds_kube *k = tu_kube_connect(tu_env("DS_KUBECONFIG_V1")), *pod = NULL;
	char *ns = tu_kube_new_namespace(k, "itest-incluster", NULL),
	     *dir = tu_mkdtemp("itest-sa-dir"), *p, *tok;
	struct ds_kube_resource sa_r = tu_kube_resource(k, "v1", "ServiceAccount");
	struct ds_kube_resource cm_r = tu_kube_resource(k, "v1", "ConfigMap");
	const char *server = ds_kubeconfig_server(ds_kube_get_config(k));
	ds_kubeconfig *kc = NULL;
	json_t *list = NULL;
	ds_kube_error ke;
	ds_err err = {0};

	(void)state;
	for (int i = 0; i < 2; i++) {
		json_t *sa =
		    tu_kube_doc("apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: %s}\n",
				i ? "second" : "first");
		TU_KUBE_CHECK(ds_kube_create(k, &sa_r, ns, sa, NULL, &ke), ke);
		json_decref(sa);
	}
	/* what the kubelet mounts into a pod */
	if (asprintf(&p, "%s/ca.crt", dir) < 0)
		fail_msg("oom");
	tu_write_file(p, ds_kubeconfig_ca_pem(ds_kube_get_config(k)));
	free(p);
	if (asprintf(&p, "%s/namespace", dir) < 0)
		fail_msg("oom");
	tu_write_file(p, ns);
	free(p);
	if (asprintf(&p, "%s/token", dir) < 0)
		fail_msg("oom");
	tok = tu_kube_token(k, ns, "first");
	tu_write_file(p, tok);
	free(tok);
	assert_non_null(strstr(server, "https://127.0.0.1:"));
	setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);
	setenv("KUBERNETES_SERVICE_PORT", strrchr(server, ':') + 1, 1);
	assert_int_equal(ds_kubeconfig_in_cluster(&kc, dir, &err), 0);
	assert_string_equal(ds_kubeconfig_namespace(kc), ns);
	assert_int_equal(ds_kube_new(&pod, &kc, NULL, &err), 0);
	assert_int_equal(ds_kube_list(pod, &cm_r, ns, NULL, &list, NULL, &ke), -EPERM);
	assert_non_null(strstr(ke.message, ":first\""));
	/* rotation: a new token file renamed over the old one (the second account) */
	{
		char *tmp;
		if (asprintf(&tmp, "%s/..token.new", dir) < 0)
			fail_msg("oom");
		tok = tu_kube_token(k, ns, "second");
		tu_write_file(tmp, tok);
		assert_int_equal(rename(tmp, p), 0);
		free(tok);
		free(tmp);
	}
	assert_int_equal(ds_kube_list(pod, &cm_r, ns, NULL, &list, NULL, &ke), -EPERM);
	assert_non_null(strstr(ke.message, ":second\""));
	unsetenv("KUBERNETES_SERVICE_HOST");
	unsetenv("KUBERNETES_SERVICE_PORT");
	ds_kube_free(pod);
	free(p);
	free(dir);
	tu_kube_drop_namespace(k, ns);
	ds_kube_free(k);
}

static void test_itest_kube_client__exec_plugin_client_certificate(void **state)
{
	char *dir = tu_mkdtemp("itest-exec-cert"), *cred, *user, *kcpath, *text;
	ds_kubeconfig *admin = NULL;
	ds_kube_credentials c = {0};
	struct ds_kube_resource r;
	json_t *answer;
	ds_kube *k;
	ds_kube_error ke;
	ds_err err = {0};

	(void)state;
	/* the admin's certificate, handed out by a plugin instead of the kubeconfig */
	assert_int_equal(ds_kubeconfig_load(&admin, tu_env("DS_KUBECONFIG_V1"), NULL, &err), 0);
	assert_int_equal(ds_kubeconfig_credentials(admin, &c, &err), 0);
	assert_non_null(c.cert_pem);
	answer = json_pack("{s:s,s:s,s:{s:s,s:s}}", "apiVersion", "client.authentication.k8s.io/v1",
			   "kind", "ExecCredential", "status", "clientCertificateData", c.cert_pem,
			   "clientKeyData", c.key_pem);
	text = json_dumps(answer, JSON_COMPACT);
	if (asprintf(&cred, "%s/cred.json", dir) < 0)
		fail_msg("oom");
	tu_write_file(cred, text);
	if (asprintf(&user,
		     "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
		     "      interactiveMode: Never\n"
		     "      command: /bin/cat\n      args: ['%s']\n",
		     cred) < 0)
		fail_msg("oom");
	kcpath = tu_kube_write_kubeconfig(tu_env("DS_KUBECONFIG_V1"), dir, "exec-cert",
					  tu_env("DS_KUBECONFIG_V1"), NULL, user);
	k = tu_kube_connect(kcpath);
	TU_KUBE_CHECK(ds_kube_resource_find(k, "v1", "Namespace", &r, &ke), ke);
	{
		json_t *got = NULL;
		TU_KUBE_CHECK(ds_kube_get(k, &r, NULL, "default", NULL, &got, &ke), ke);
		json_decref(got);
	}
	assert_int_equal(ds_kubeconfig_exec_runs(ds_kube_get_config(k)), 1);
	ds_kube_free(k);
	ds_kube_credentials_dispose(&c);
	ds_kubeconfig_free(admin);
	json_decref(answer);
	free(text);
	free(cred);
	free(user);
	free(kcpath);
	free(dir);
}

static void test_itest_kube_client__service_account_token_without_rights_gets_403(void **state)
{
	ds_kube *k = tu_kube_connect(tu_env("DS_KUBECONFIG_V1")), *sa_client;
	char *ns = tu_kube_new_namespace(k, "itest-authz", NULL), *dir = tu_mkdtemp("itest-sa"),
	     *kcpath, *user, *tokpath;
	struct ds_kube_resource sa_r = tu_kube_resource(k, "v1", "ServiceAccount");
	struct ds_kube_resource cm_r = tu_kube_resource(k, "v1", "ConfigMap");
	struct ds_kube_resource role_r =
	    tu_kube_resource(k, "rbac.authorization.k8s.io/v1", "Role");
	struct ds_kube_resource rb_r =
	    tu_kube_resource(k, "rbac.authorization.k8s.io/v1", "RoleBinding");
	json_t *sa, *list = NULL, *role, *rb;
	char *token;
	ds_kube_error ke;

	(void)state;
	sa = tu_kube_doc("apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: nobody}\n");
	TU_KUBE_CHECK(ds_kube_create(k, &sa_r, ns, sa, NULL, &ke), ke);
	token = tu_kube_token(k, ns, "nobody");
	assert_non_null(token);

	/* as a bearer token */
	if (asprintf(&user, "    token: %s\n", token) < 0)
		fail_msg("oom");
	kcpath = tu_kube_write_kubeconfig(tu_env("DS_KUBECONFIG_V1"), dir, "token.kubeconfig",
					  tu_env("DS_KUBECONFIG_V1"), NULL, user);
	sa_client = tu_kube_connect(kcpath);
	assert_int_equal(ds_kube_list(sa_client, &cm_r, ns, NULL, &list, NULL, &ke), -EPERM);
	assert_int_equal(ke.code, 403);
	assert_string_equal(ke.reason, "Forbidden");
	assert_non_null(strstr(ke.message, "system:serviceaccount:"));
	assert_non_null(strstr(ke.message, ":nobody"));
	assert_non_null(strstr(ke.message, "cannot list resource \"configmaps\""));
	ds_kube_free(sa_client);
	free(kcpath);
	free(user);

	/* the same token from a tokenFile, and from an exec plugin */
	if (asprintf(&tokpath, "%s/token", dir) < 0)
		fail_msg("oom");
	tu_write_file(tokpath, token);
	if (asprintf(&user, "    tokenFile: %s\n", tokpath) < 0)
		fail_msg("oom");
	kcpath = tu_kube_write_kubeconfig(tu_env("DS_KUBECONFIG_V1"), dir, "file.kubeconfig",
					  tu_env("DS_KUBECONFIG_V1"), NULL, user);
	sa_client = tu_kube_connect(kcpath);
	assert_int_equal(ds_kube_list(sa_client, &cm_r, ns, NULL, &list, NULL, &ke), -EPERM);
	ds_kube_free(sa_client);
	free(kcpath);
	free(user);
	if (asprintf(&user,
		     "    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n"
		     "      command: /bin/sh\n"
		     "      args: ['-c', 'printf \"{\\\"apiVersion\\\":\\\"%%s\\\",\\\"kind\\\":"
		     "\\\"ExecCredential\\\",\\\"status\\\":{\\\"token\\\":\\\"%%s\\\"}}\" "
		     "client.authentication.k8s.io/v1beta1 \"$(cat \"$TOKEN_PATH\")\"']\n"
		     "      env: [{name: TOKEN_PATH, value: '%s'}]\n",
		     tokpath) < 0)
		fail_msg("oom");
	kcpath = tu_kube_write_kubeconfig(tu_env("DS_KUBECONFIG_V1"), dir, "exec.kubeconfig",
					  tu_env("DS_KUBECONFIG_V1"), NULL, user);
	sa_client = tu_kube_connect(kcpath);
	assert_int_equal(ds_kube_list(sa_client, &cm_r, ns, NULL, &list, NULL, &ke), -EPERM);
	assert_int_equal(ke.code, 403);

	/* grant "list configmaps" in the namespace: now it works */
	role = tu_kube_doc("apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\n"
			   "metadata: {name: read-cm}\n"
			   "rules: [{apiGroups: [''], resources: [configmaps], verbs: [list]}]\n");
	rb = tu_kube_doc(
	    "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\n"
	    "metadata: {name: read-cm}\n"
	    "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: read-cm}\n"
	    "subjects: [{kind: ServiceAccount, name: nobody, namespace: '%s'}]\n",
	    ns);
	TU_KUBE_CHECK(ds_kube_create(k, &role_r, ns, role, NULL, &ke), ke);
	TU_KUBE_CHECK(ds_kube_create(k, &rb_r, ns, rb, NULL, &ke), ke);
	{
		int rc = -EPERM;
		for (int i = 0; i < 50 && rc == -EPERM; i++) {
			rc = ds_kube_list(sa_client, &cm_r, ns, NULL, &list, NULL, &ke);
			if (rc == -EPERM)
				tu_msleep(100); /* RBAC caches catch up */
		}
		TU_KUBE_CHECK(rc, ke);
	}
	json_decref(list);
	ds_kube_free(sa_client);
	free(kcpath);
	free(user);
	free(tokpath);
	json_decref(role);
	json_decref(rb);
	json_decref(sa);
	free(token);
	free(dir);
	tu_kube_drop_namespace(k, ns);
	ds_kube_free(k);
}

static void test_itest_kube_client__wrong_ca_and_wrong_name_are_clear_tls_errors(void **state)
{
	char *dir = tu_mkdtemp("itest-tls"), *kcpath;
	struct ds_kube_resource r;
	ds_kube *k;
	ds_kube_error ke;
	char buf[800];

	(void)state;
	/* the v1 server with the v1beta1 cluster's CA: an unknown CA */
	kcpath = tu_kube_write_kubeconfig(tu_env("DS_KUBECONFIG_V1"), dir, "wrong-ca",
					  tu_env("DS_KUBECONFIG_V1BETA1"), NULL, NULL);
	k = tu_kube_connect(kcpath);
	assert_int_equal(ds_kube_resource_find(k, "v1", "ConfigMap", &r, &ke), -EKEYREJECTED);
	assert_int_equal(ke.code, 0);
	assert_int_equal(ke.tls, DS_KUBE_TLS_UNKNOWN_CA);
	assert_int_equal(ke.attempts, 1); /* not retried */
	ds_kube_error_format(&ke, buf, sizeof(buf));
	assert_non_null(strstr(buf, "unknown CA"));
	assert_non_null(strstr(buf, "certificate-authority"));
	ds_kube_free(k);
	free(kcpath);

	/* the right CA, but verified against a name the certificate does not carry */
	kcpath = tu_kube_write_kubeconfig(tu_env("DS_KUBECONFIG_V1"), dir, "wrong-name",
					  tu_env("DS_KUBECONFIG_V1"),
					  "    tls-server-name: not-the-apiserver.example\n", NULL);
	k = tu_kube_connect(kcpath);
	assert_int_equal(ds_kube_resource_find(k, "v1", "ConfigMap", &r, &ke), -EKEYREJECTED);
	assert_int_equal(ke.tls, DS_KUBE_TLS_NAME_MISMATCH);
	ds_kube_error_format(&ke, buf, sizeof(buf));
	assert_non_null(strstr(buf, "name mismatch"));
	ds_kube_free(k);
	free(kcpath);

	/* no CA but insecure-skip-tls-verify: not verified, so it gets through (401: no user) */
	kcpath = tu_kube_write_kubeconfig(tu_env("DS_KUBECONFIG_V1"), dir, "insecure", NULL,
					  "    insecure-skip-tls-verify: true\n", NULL);
	k = tu_kube_connect(kcpath);
	assert_int_equal(ds_kube_resource_find(k, "v1", "ConfigMap", &r, &ke), -EACCES);
	assert_int_equal(ke.code, 401);
	ds_kube_free(k);
	free(kcpath);
	/* no CA and no insecure flag: the system trust store does not know this CA */
	kcpath = tu_kube_write_kubeconfig(tu_env("DS_KUBECONFIG_V1"), dir, "system-ca", NULL, NULL,
					  NULL);
	k = tu_kube_connect(kcpath);
	assert_int_equal(ds_kube_resource_find(k, "v1", "ConfigMap", &r, &ke), -EKEYREJECTED);
	assert_int_equal(ke.tls, DS_KUBE_TLS_UNKNOWN_CA);
	ds_kube_free(k);
	free(kcpath);

	/* tls-server-name naming a SAN the certificate has: fine (401: no user) */
	kcpath = tu_kube_write_kubeconfig(tu_env("DS_KUBECONFIG_V1"), dir, "sni",
					  tu_env("DS_KUBECONFIG_V1"),
					  "    tls-server-name: kubernetes.default.svc\n", NULL);
	k = tu_kube_connect(kcpath);
	assert_int_equal(ds_kube_resource_find(k, "v1", "ConfigMap", &r, &ke), -EACCES);
	assert_int_equal(ke.code, 401);
	ds_kube_free(k);
	free(kcpath);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_itest_kube_client__service_account_token_without_rights_gets_403),
	    cmocka_unit_test(test_itest_kube_client__in_cluster_config_rereads_a_rotated_token),
	    cmocka_unit_test(test_itest_kube_client__exec_plugin_client_certificate),
	    cmocka_unit_test(test_itest_kube_client__wrong_ca_and_wrong_name_are_clear_tls_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
