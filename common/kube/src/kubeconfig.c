#include "drasync/kubeconfig.h"
#include "drasync/buf.h"

#include "drasync/log.h"
#include "drasync/yaml.h"

#include "kubeconfig_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_FILE (16u << 20) /* kubeconfig, CA, cert, key or token file */

/* ---- small helpers ---------------------------------------------------- */

void ds_kube_credentials_dispose(ds_kube_credentials *c)
{
	if (!c)
		return;
	if (c->token)
		explicit_bzero(c->token, strlen(c->token));
	if (c->key_pem)
		explicit_bzero(c->key_pem, strlen(c->key_pem));
	free(c->token);
	free(c->cert_pem);
	free(c->key_pem);
	memset(c, 0, sizeof(*c));
}

int ds_kubeconfig_dupstr(char **dst, const char *s)
{
	if (!s) {
		*dst = NULL;
		return 0;
	}
	*dst = strdup(s);
	return *dst ? 0 : -ENOMEM;
}

int ds_kubeconfig_read_file(const char *path, size_t max, char **out, size_t *len_out, ds_err *err)
{
	int rc = ds_read_file(path, max, out, len_out);

	if (rc == -E2BIG)
		ds_err_set(err, "%s: larger than %zu bytes", path, max);
	else if (rc == -EIO)
		ds_err_set(err, "%s: read error", path);
	else if (rc < 0 && rc != -ENOMEM)
		ds_err_set(err, "%s: %s", path, strerror(-rc));
	return rc;
}

static int b64val(int c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+' || c == '-')
		return 62;
	if (c == '/' || c == '_')
		return 63;
	return -1;
}

/* Standard base64 (padding optional, whitespace ignored) into a NUL-terminated buffer. */
static int b64_decode(const char *in, char **out)
{
	size_t n = strlen(in), o = 0;
	unsigned acc = 0;
	int bits = 0;
	char *buf = malloc(n / 4 * 3 + 4);

	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		int v;
		unsigned char c = (unsigned char)in[i];

		if (c == '=')
			break;
		if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
			continue;
		v = b64val(c);
		if (v < 0) {
			free(buf);
			return -EBADMSG;
		}
		acc = (acc << 6) | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			buf[o++] = (char)((acc >> bits) & 0xffu);
		}
	}
	buf[o] = '\0';
	*out = buf;
	return 0;
}

static char *dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		return strdup(".");
	if (slash == path)
		return strdup("/");
	return strndup(path, (size_t)(slash - path));
}

/* `rel` relative to `dir` unless absolute. */
static char *resolve(const char *dir, const char *rel)
{
	char *p;

	if (rel[0] == '/' || !dir)
		return strdup(rel);
	if (rel[0] == '~' && rel[1] == '/' && getenv("HOME")) {
		if (asprintf(&p, "%s/%s", getenv("HOME"), rel + 2) < 0)
			return NULL;
		return p;
	}
	if (asprintf(&p, "%s/%s", dir, rel) < 0)
		return NULL;
	return p;
}

/* ---- reading one kubeconfig file --------------------------------------- */

/* The first document of a YAML (or JSON) file, as kubectl reads it; an empty file gives {}. */
static int read_yaml_file(const char *path, json_t **out, ds_err *err)
{
	json_t *docs = NULL, *doc;
	int rc;

	rc = ds_yaml_parse_file(path, 0, &docs, NULL, err);
	if (rc < 0) {
		if (err && err->line == 0) {
			/* no position: say which file in the message itself */
			char msg[sizeof(err->msg)];
			snprintf(msg, sizeof(msg), "%s", err->msg);
			ds_err_set(err, "%s: %s", path, msg);
		}
		return rc;
	}
	doc = json_array_get(docs, 0);
	if (!doc || json_is_null(doc)) {
		json_decref(docs);
		*out = json_object();
		return *out ? 0 : -ENOMEM;
	}
	if (!json_is_object(doc)) {
		json_decref(docs);
		ds_err_setloc(err, path, 1, 1, "a kubeconfig must be a mapping");
		return -EBADMSG;
	}
	*out = json_incref(doc);
	json_decref(docs);
	return 0;
}

/* ---- merging ------------------------------------------------------------ */

/* merged: {"clusters": {name: {"v": obj, "dir": dir}}, "users": ..., "contexts": ...,
 *          "current-context": s} */
static int merge_named(json_t *merged, const char *section, const json_t *list, const char *dir,
		       const char *singular, const char *file, ds_err *err)
{
	json_t *map = json_object_get(merged, section), *item;
	size_t i;

	if (json_is_null(list) || !list)
		return 0;
	if (!json_is_array(list)) {
		ds_err_set(err, "%s: '%s' must be a list", file, section);
		return -EBADMSG;
	}
	json_array_foreach (list, i, item) {
		const char *name = json_string_value(json_object_get(item, "name"));
		json_t *body = json_object_get(item, singular);

		if (!json_is_object(item) || !name || !name[0]) {
			ds_err_set(err, "%s: %s[%zu] has no name", file, section, i);
			return -EBADMSG;
		}
		if (json_object_get(map, name))
			continue; /* the first file that defines a name wins */
		if (body && !json_is_object(body) && !json_is_null(body)) {
			ds_err_set(err, "%s: %s '%s': '%s' must be a mapping", file, section, name,
				   singular);
			return -EBADMSG;
		}
		if (json_object_set_new(map, name,
					json_pack("{s:O,s:s}", "v",
						  json_is_object(body) ? body : json_object(),
						  "dir", dir)) < 0)
			return -ENOMEM;
	}
	return 0;
}

static int merge_file(json_t *merged, const char *path, ds_err *err)
{
	json_t *doc = NULL;
	char *dir = NULL;
	const char *cc;
	int rc;

	rc = read_yaml_file(path, &doc, err);
	if (rc < 0)
		goto out;
	dir = dir_of(path);
	if (!dir) {
		rc = -ENOMEM;
		goto out;
	}
	rc = merge_named(merged, "clusters", json_object_get(doc, "clusters"), dir, "cluster", path,
			 err);
	if (rc == 0)
		rc = merge_named(merged, "users", json_object_get(doc, "users"), dir, "user", path,
				 err);
	if (rc == 0)
		rc = merge_named(merged, "contexts", json_object_get(doc, "contexts"), dir,
				 "context", path, err);
	if (rc < 0)
		goto out;
	cc = json_string_value(json_object_get(doc, "current-context"));
	if (cc && cc[0] && !json_object_get(merged, "current-context"))
		json_object_set_new(merged, "current-context", json_string(cc));
out:
	json_decref(doc);
	free(dir);
	return rc;
}

/* ---- building the resolved configuration ---------------------------------- */

const char *ds_kubeconfig_str_field(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s && s[0] ? s : NULL;
}

static int bool_field(const json_t *o, const char *key, bool *out, const char *what, ds_err *err)
{
	json_t *v = json_object_get(o, key);

	if (!v || json_is_null(v)) {
		*out = false;
		return 0;
	}
	if (json_is_boolean(v)) {
		*out = json_is_true(v);
		return 0;
	}
	if (json_is_string(v) && (strcmp(json_string_value(v), "true") == 0 ||
				  strcmp(json_string_value(v), "false") == 0)) {
		*out = strcmp(json_string_value(v), "true") == 0;
		return 0;
	}
	ds_err_set(err, "%s: '%s' must be true or false", what, key);
	return -EBADMSG;
}

/* PEM from `<key>-data` (base64) or from the file `<key>` (relative to dir). */
static int pem_field(const json_t *o, const char *key, const char *dir, const char *what,
		     char **out, ds_err *err)
{
	char data_key[96], *path = NULL;
	const char *v;
	int rc = 0;

	*out = NULL;
	snprintf(data_key, sizeof(data_key), "%s-data", key);
	v = ds_kubeconfig_str_field(o, data_key);
	if (v) {
		rc = b64_decode(v, out);
		if (rc == -EBADMSG)
			ds_err_set(err, "%s: '%s' is not valid base64", what, data_key);
		return rc;
	}
	v = ds_kubeconfig_str_field(o, key);
	if (!v)
		return 0;
	path = resolve(dir, v);
	if (!path)
		return -ENOMEM;
	rc = ds_kubeconfig_read_file(path, MAX_FILE, out, NULL, err);
	if (rc < 0) {
		char msg[256];
		snprintf(msg, sizeof(msg), "%s", err ? err->msg : "");
		ds_err_set(err, "%s: %s: %s", what, key, msg);
	}
	free(path);
	return rc;
}

static char **strv_new(size_t n)
{
	return calloc(n + 1, sizeof(char *));
}

static void strv_free(char **v)
{
	if (!v)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

static void exec_free(struct exec_plugin *e)
{
	if (!e)
		return;
	free(e->command);
	strv_free(e->argv);
	strv_free(e->env);
	free(e->api_version);
	free(e->install_hint);
	free(e->exec_info);
	free(e);
}

static int exec_parse(const json_t *x, const char *dir, const json_t *cluster_info,
		      const char *what, struct exec_plugin **out, ds_err *err)
{
	struct exec_plugin *e = calloc(1, sizeof(*e));
	const char *cmd = ds_kubeconfig_str_field(x, "command"),
		   *api = ds_kubeconfig_str_field(x, "apiVersion");
	const char *mode = ds_kubeconfig_str_field(x, "interactiveMode");
	json_t *args = json_object_get(x, "args"), *env = json_object_get(x, "env"), *a;
	json_t *info = NULL;
	bool provide = false;
	size_t i;
	int rc = -ENOMEM;

	if (!e)
		return -ENOMEM;
	if (!cmd) {
		ds_err_set(err, "%s: exec: 'command' is required", what);
		rc = -EBADMSG;
		goto out;
	}
	if (!api || (strcmp(api, "client.authentication.k8s.io/v1") != 0 &&
		     strcmp(api, "client.authentication.k8s.io/v1beta1") != 0)) {
		ds_err_set(err,
			   "%s: exec: apiVersion '%s' is not supported "
			   "(client.authentication.k8s.io/v1 or v1beta1)",
			   what, api ? api : "");
		rc = -EBADMSG;
		goto out;
	}
	if (mode && strcmp(mode, "Never") != 0 && strcmp(mode, "IfAvailable") != 0 &&
	    strcmp(mode, "Always") != 0) {
		ds_err_set(err,
			   "%s: exec: interactiveMode '%s' is not Never, IfAvailable or Always",
			   what, mode);
		rc = -EBADMSG;
		goto out;
	}
	if (mode && strcmp(mode, "Always") == 0) {
		ds_err_set(err,
			   "%s: exec: interactiveMode Always needs a terminal; drasync has none",
			   what);
		rc = -EINVAL;
		goto out;
	}
	if ((args && !json_is_array(args) && !json_is_null(args)) ||
	    (env && !json_is_array(env) && !json_is_null(env))) {
		ds_err_set(err, "%s: exec: 'args' and 'env' must be lists", what);
		rc = -EBADMSG;
		goto out;
	}
	rc = bool_field(x, "provideClusterInfo", &provide, what, err);
	if (rc < 0)
		goto out;
	rc = -ENOMEM;
	/* a command with a path separator is relative to the kubeconfig, else looked up in PATH */
	e->command = strchr(cmd, '/') ? resolve(dir, cmd) : strdup(cmd);
	e->argv = strv_new(json_array_size(args) + 1);
	e->env = strv_new(json_array_size(env));
	if (!e->command || !e->argv || !e->env || ds_kubeconfig_dupstr(&e->api_version, api) < 0 ||
	    ds_kubeconfig_dupstr(&e->install_hint, ds_kubeconfig_str_field(x, "installHint")) < 0)
		goto out;
	if (!(e->argv[0] = strdup(e->command)))
		goto out;
	json_array_foreach (args, i, a) {
		if (!json_is_string(a)) {
			ds_err_set(err, "%s: exec: args[%zu] must be a string", what, i);
			rc = -EBADMSG;
			goto out;
		}
		if (!(e->argv[i + 1] = strdup(json_string_value(a))))
			goto out;
	}
	json_array_foreach (env, i, a) {
		const char *n = ds_kubeconfig_str_field(a, "name");
		const char *v = json_string_value(json_object_get(a, "value"));

		if (!n || !v || strchr(n, '=')) {
			ds_err_set(err, "%s: exec: env[%zu] needs a name and a string value", what,
				   i);
			rc = -EBADMSG;
			goto out;
		}
		if (asprintf(&e->env[i], "%s=%s", n, v) < 0) {
			e->env[i] = NULL;
			goto out;
		}
	}
	info = json_pack("{s:s,s:s,s:{s:b}}", "apiVersion", api, "kind", "ExecCredential", "spec",
			 "interactive", 0);
	if (!info)
		goto out;
	if (provide && cluster_info &&
	    json_object_set(json_object_get(info, "spec"), "cluster", (json_t *)cluster_info) < 0)
		goto out;
	e->exec_info = json_dumps(info, JSON_COMPACT);
	if (!e->exec_info)
		goto out;
	*out = e;
	e = NULL;
	rc = 0;
out:
	json_decref(info);
	exec_free(e);
	return rc;
}

static ds_kubeconfig *kc_alloc(void)
{
	ds_kubeconfig *kc = calloc(1, sizeof(*kc));

	if (!kc)
		return NULL;
	pthread_mutex_init(&kc->lock, NULL);
	kc->auth_kind = "none";
	return kc;
}

void ds_kubeconfig_free(ds_kubeconfig *kc)
{
	if (!kc)
		return;
	free(kc->server);
	free(kc->ns);
	free(kc->context);
	free(kc->ca_pem);
	free(kc->tls_server_name);
	free(kc->proxy_url);
	if (kc->token)
		explicit_bzero(kc->token, strlen(kc->token));
	free(kc->token);
	free(kc->token_file);
	free(kc->cert_pem);
	if (kc->key_pem)
		explicit_bzero(kc->key_pem, strlen(kc->key_pem));
	free(kc->key_pem);
	exec_free(kc->exec);
	if (kc->file_token)
		explicit_bzero(kc->file_token, strlen(kc->file_token));
	free(kc->file_token);
	ds_kube_credentials_dispose(&kc->cached);
	pthread_mutex_destroy(&kc->lock);
	free(kc);
}

static int normalize_server(const char *server, char **out)
{
	size_t n = strlen(server);

	while (n > 0 && server[n - 1] == '/')
		n--;
	if (strncmp(server, "https://", 8) != 0 && strncmp(server, "http://", 7) != 0) {
		/* kubectl accepts "host:port" and means https */
		if (asprintf(out, "https://%.*s", (int)n, server) < 0)
			return -ENOMEM;
		return 0;
	}
	*out = strndup(server, n);
	return *out ? 0 : -ENOMEM;
}

static int build(ds_kubeconfig **out, const json_t *merged, const char *context, const char *files,
		 ds_err *err)
{
	ds_kubeconfig *kc = NULL;
	const json_t *ctx_e, *cl_e, *us_e, *ctx, *cl, *us;
	const char *cl_name, *us_name, *cl_dir, *us_dir, *v;
	json_t *cluster_info = NULL;
	char what[320];
	int rc = -ENOMEM;

	if (!context || !context[0])
		context = ds_kubeconfig_str_field(merged, "current-context");
	if (!context) {
		ds_err_set(err, "%s: no current-context and no --context given", files);
		return -ENOENT;
	}
	ctx_e = json_object_get(json_object_get(merged, "contexts"), context);
	if (!ctx_e) {
		ds_err_set(err, "%s: context '%s' not found", files, context);
		return -ENOENT;
	}
	ctx = json_object_get(ctx_e, "v");
	cl_name = ds_kubeconfig_str_field(ctx, "cluster");
	us_name = ds_kubeconfig_str_field(ctx, "user");
	cl_e = cl_name ? json_object_get(json_object_get(merged, "clusters"), cl_name) : NULL;
	us_e = us_name ? json_object_get(json_object_get(merged, "users"), us_name) : NULL;
	if (!cl_e) {
		ds_err_set(err, "%s: context '%s': cluster '%s' not found", files, context,
			   cl_name ? cl_name : "");
		return -ENOENT;
	}
	if (us_name && !us_e) {
		ds_err_set(err, "%s: context '%s': user '%s' not found", files, context, us_name);
		return -ENOENT;
	}
	cl = json_object_get(cl_e, "v");
	cl_dir = json_string_value(json_object_get(cl_e, "dir"));
	us = us_e ? json_object_get(us_e, "v") : NULL;
	us_dir = us_e ? json_string_value(json_object_get(us_e, "dir")) : NULL;

	kc = kc_alloc();
	if (!kc)
		return -ENOMEM;
	snprintf(what, sizeof(what), "cluster '%s'", cl_name);
	v = ds_kubeconfig_str_field(cl, "server");
	if (!v) {
		ds_err_set(err, "%s: %s has no server", files, what);
		rc = -EBADMSG;
		goto out;
	}
	if ((rc = normalize_server(v, &kc->server)) < 0)
		goto out;
	rc = -ENOMEM;
	if (ds_kubeconfig_dupstr(&kc->context, context) < 0 ||
	    ds_kubeconfig_dupstr(&kc->ns, ds_kubeconfig_str_field(ctx, "namespace")
					      ? ds_kubeconfig_str_field(ctx, "namespace")
					      : "default") < 0 ||
	    ds_kubeconfig_dupstr(&kc->tls_server_name,
				 ds_kubeconfig_str_field(cl, "tls-server-name")) < 0 ||
	    ds_kubeconfig_dupstr(&kc->proxy_url, ds_kubeconfig_str_field(cl, "proxy-url")) < 0)
		goto out;
	rc = bool_field(cl, "insecure-skip-tls-verify", &kc->insecure, what, err);
	if (rc < 0)
		goto out;
	rc = pem_field(cl, "certificate-authority", cl_dir, what, &kc->ca_pem, err);
	if (rc < 0)
		goto out;
	if (kc->insecure && kc->ca_pem) {
		/* client-go refuses this pair too: which one was meant? */
		ds_err_set(err,
			   "%s: %s: certificate-authority and insecure-skip-tls-verify cannot "
			   "both be set",
			   files, what);
		rc = -EINVAL;
		goto out;
	}
	if (kc->insecure)
		ds_log(DS_LOG_WARN, "kube_tls_insecure",
		       "cluster=%s msg=\"insecure-skip-tls-verify is set: the API server's "
		       "certificate is not verified\"",
		       cl_name);

	if (us) {
		const json_t *x = json_object_get(us, "exec");

		snprintf(what, sizeof(what), "user '%s'", us_name);
		rc = pem_field(us, "client-certificate", us_dir, what, &kc->cert_pem, err);
		if (rc == 0)
			rc = pem_field(us, "client-key", us_dir, what, &kc->key_pem, err);
		if (rc < 0)
			goto out;
		if (!kc->cert_pem != !kc->key_pem) {
			ds_err_set(err, "%s: %s: client-certificate and client-key go together",
				   files, what);
			rc = -EBADMSG;
			goto out;
		}
		rc = -ENOMEM;
		if (ds_kubeconfig_dupstr(&kc->token, ds_kubeconfig_str_field(us, "token")) < 0)
			goto out;
		v = ds_kubeconfig_str_field(us, "tokenFile");
		if (v && !(kc->token_file = resolve(us_dir, v)))
			goto out;
		if (json_is_object(x)) {
			cluster_info = json_pack("{s:s,s:b}", "server", kc->server,
						 "insecure-skip-tls-verify", kc->insecure);
			if (!cluster_info)
				goto out;
			if (ds_kubeconfig_str_field(cl, "certificate-authority-data"))
				json_object_set_new(cluster_info, "certificate-authority-data",
						    json_string(ds_kubeconfig_str_field(
							cl, "certificate-authority-data")));
			if (kc->tls_server_name)
				json_object_set_new(cluster_info, "tls-server-name",
						    json_string(kc->tls_server_name));
			if (kc->proxy_url)
				json_object_set_new(cluster_info, "proxy-url",
						    json_string(kc->proxy_url));
			rc = exec_parse(x, us_dir, cluster_info, what, &kc->exec, err);
			if (rc < 0)
				goto out;
		} else if (x && !json_is_null(x)) {
			ds_err_set(err, "%s: %s: 'exec' must be a mapping", files, what);
			rc = -EBADMSG;
			goto out;
		}
		if (json_object_get(us, "auth-provider")) {
			ds_err_set(err,
				   "%s: %s: auth-provider plugins are not supported; use an exec "
				   "credential plugin",
				   files, what);
			rc = -EINVAL;
			goto out;
		}
	}
	kc->auth_kind = kc->exec	 ? "exec"
			: kc->token_file ? "tokenFile"
			: kc->token	 ? "token"
			: kc->cert_pem	 ? "client-certificate"
					 : "none";
	*out = kc;
	kc = NULL;
	rc = 0;
out:
	json_decref(cluster_info);
	ds_kubeconfig_free(kc);
	return rc;
}

int ds_kubeconfig_load(ds_kubeconfig **out, const char *path, const char *context, ds_err *err)
{
	json_t *merged = NULL;
	char *list = NULL, *save = NULL, *home_cfg = NULL;
	const char *files = path;
	bool explicit = path && path[0];
	int loaded = 0, rc;

	if (!explicit) {
		files = getenv("KUBECONFIG");
		if (!files || !files[0]) {
			const char *home = getenv("HOME");
			if (!home || asprintf(&home_cfg, "%s/.kube/config", home) < 0) {
				ds_err_set(err, "no kubeconfig: KUBECONFIG and HOME are unset");
				return -ENOENT;
			}
			files = home_cfg;
			explicit = true;
		}
	}
	merged = json_pack("{s:{},s:{},s:{}}", "clusters", "users", "contexts");
	list = strdup(files);
	if (!merged || !list) {
		rc = -ENOMEM;
		goto out;
	}
	for (char *f = strtok_r(list, ":", &save); f; f = strtok_r(NULL, ":", &save)) {
		if (!f[0])
			continue;
		if (access(f, F_OK) != 0 && !explicit)
			continue; /* kubectl skips missing files named in KUBECONFIG */
		rc = merge_file(merged, f, err);
		if (rc < 0)
			goto out;
		loaded++;
	}
	if (!loaded) {
		ds_err_set(err, "no kubeconfig file found in '%s'", files);
		rc = -ENOENT;
		goto out;
	}
	rc = build(out, merged, context, files, err);
out:
	json_decref(merged);
	free(list);
	free(home_cfg);
	return ds_err_fallback(err, rc);
}

int ds_kubeconfig_in_cluster(ds_kubeconfig **out, const char *sa_dir, ds_err *err)
{
	const char *host = getenv("KUBERNETES_SERVICE_HOST"),
		   *port = getenv("KUBERNETES_SERVICE_PORT");
	ds_kubeconfig *kc = NULL;
	char *p = NULL, *ns = NULL;
	int rc = -ENOMEM;

	if (!sa_dir)
		sa_dir = DS_KUBE_SA_DIR;
	if (!host || !host[0] || !port || !port[0]) {
		ds_err_set(err, "not running in a cluster: KUBERNETES_SERVICE_HOST/PORT are unset");
		return -ENOENT;
	}
	kc = kc_alloc();
	if (!kc)
		return ds_err_fallback(err, -ENOMEM);
	/* an IPv6 service address needs brackets in a URL */
	if (asprintf(&kc->server, strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host,
		     port) < 0) {
		kc->server = NULL;
		goto out;
	}
	if (asprintf(&kc->token_file, "%s/token", sa_dir) < 0) {
		kc->token_file = NULL;
		goto out;
	}
	if (access(kc->token_file, R_OK) != 0) {
		ds_err_set(err, "in-cluster: cannot read %s: %s", kc->token_file, strerror(errno));
		rc = -ENOENT;
		goto out;
	}
	if (asprintf(&p, "%s/ca.crt", sa_dir) < 0) {
		p = NULL;
		goto out;
	}
	rc = ds_kubeconfig_read_file(p, MAX_FILE, &kc->ca_pem, NULL, err);
	if (rc < 0)
		goto out;
	free(p);
	if (asprintf(&p, "%s/namespace", sa_dir) < 0) {
		p = NULL;
		rc = -ENOMEM;
		goto out;
	}
	if (ds_kubeconfig_read_file(p, 4096, &ns, NULL, NULL) == 0) {
		ns[strcspn(ns, " \r\n\t")] = '\0';
		if (ns[0]) {
			kc->ns = ns;
			ns = NULL;
		}
	}
	rc = -ENOMEM;
	if (!kc->ns && !(kc->ns = strdup("default")))
		goto out;
	if (!(kc->context = strdup("")))
		goto out;
	kc->auth_kind = "tokenFile";
	*out = kc;
	kc = NULL;
	rc = 0;
out:
	free(p);
	free(ns);
	ds_kubeconfig_free(kc);
	return ds_err_fallback(err, rc);
}

int ds_kubeconfig_auto(ds_kubeconfig **out, const char *path, const char *context, ds_err *err)
{
	const char *env = getenv("KUBECONFIG");

	if (path && path[0])
		return ds_kubeconfig_load(out, path, context, err);
	if (env && env[0])
		return ds_kubeconfig_load(out, NULL, context, err);
	if (getenv("KUBERNETES_SERVICE_HOST") && getenv("KUBERNETES_SERVICE_HOST")[0])
		return ds_kubeconfig_in_cluster(out, NULL, err);
	return ds_kubeconfig_load(out, NULL, context, err);
}

int ds_kubeconfig_for_agent(ds_kubeconfig **out, const char *flag_path, const char *flag_context,
			    const char *file_path, ds_err *err)
{
	const char *path = flag_path && flag_path[0] ? flag_path : file_path;
	const char *env = getenv("KUBECONFIG");

	if ((path && path[0]) || (flag_context && flag_context[0]) || (env && env[0]))
		return ds_kubeconfig_auto(out, path, flag_context, err);
	return ds_kubeconfig_in_cluster(out, NULL, err);
}

const char *ds_kubeconfig_server(const ds_kubeconfig *kc)
{
	return kc->server;
}

const char *ds_kubeconfig_namespace(const ds_kubeconfig *kc)
{
	return kc->ns;
}

const char *ds_kubeconfig_context(const ds_kubeconfig *kc)
{
	return kc->context;
}

const char *ds_kubeconfig_ca_pem(const ds_kubeconfig *kc)
{
	return kc->ca_pem;
}

bool ds_kubeconfig_insecure(const ds_kubeconfig *kc)
{
	return kc->insecure;
}

const char *ds_kubeconfig_tls_server_name(const ds_kubeconfig *kc)
{
	return kc->tls_server_name;
}

const char *ds_kubeconfig_proxy_url(const ds_kubeconfig *kc)
{
	return kc->proxy_url;
}

const char *ds_kubeconfig_auth_kind(const ds_kubeconfig *kc)
{
	return kc->auth_kind;
}

unsigned ds_kubeconfig_exec_runs(const ds_kubeconfig *kc)
{
	return kc->exec_runs;
}
