#include "drasync/kubeconfig.h"
#include "drasync/clock.h"
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

extern char **environ;

#define MAX_EXEC_OUTPUT (1u << 20) /* ExecCredential on stdout, messages on stderr */
#define EXEC_TIMEOUT_MS 60000

/* ---- time ----------------------------------------------------------------- */

int ds_kube_time_parse(const char *s, time_t *out)
{
	struct tm tm;
	const char *p;
	long off = 0;
	time_t t;

	memset(&tm, 0, sizeof(tm));
	if (!s)
		return -EINVAL;
	p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!p)
		return -EINVAL;
	if (*p == '.') {
		p++;
		if (*p < '0' || *p > '9')
			return -EINVAL;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int hh, mm;
		char sign = *p;
		if (sscanf(p + 1, "%2d:%2d", &hh, &mm) != 2 || hh > 23 || mm > 59)
			return -EINVAL;
		off = (hh * 3600L + mm * 60L) * (sign == '+' ? 1 : -1);
		p += 6;
	} else {
		return -EINVAL;
	}
	if (*p)
		return -EINVAL;
	t = timegm(&tm);
	if (t == (time_t)-1)
		return -EINVAL;
	*out = t - off;
	return 0;
}

/* ---- credentials ------------------------------------------------------------ */

/* Run the exec plugin; stdout and stderr captured (bounded), killed after a timeout. */
static int exec_run(const struct exec_plugin *e, char **out_stdout, char **out_stderr, int *status,
		    ds_err *err)
{
	posix_spawn_file_actions_t fa;
	int outp[2] = {-1, -1}, errp[2] = {-1, -1};
	char **envp = NULL, *bufs[2] = {NULL, NULL}, *info = NULL;
	size_t lens[2] = {0, 0}, nenv = 0, k = 0;
	bool fa_init = false;
	pid_t pid = -1;
	int rc = -ENOMEM, wst = 0;
	int64_t deadline;

	for (char **p = environ; *p; p++)
		nenv++;
	for (char **p = e->env; *p; p++)
		nenv++;
	envp = calloc(nenv + 2, sizeof(char *));
	if (!envp || asprintf(&info, "KUBERNETES_EXEC_INFO=%s", e->exec_info) < 0) {
		info = NULL;
		goto out;
	}
	/* the plugin's env entries override the inherited environment */
	for (char **p = environ; *p; p++) {
		size_t nl = strcspn(*p, "=");
		bool overridden = strncmp(*p, "KUBERNETES_EXEC_INFO=", 21) == 0;
		for (char **q = e->env; *q && !overridden; q++)
			overridden = strncmp(*p, *q, nl + 1) == 0;
		if (!overridden)
			envp[k++] = *p;
	}
	for (char **q = e->env; *q; q++)
		envp[k++] = *q;
	envp[k++] = info;
	envp[k] = NULL;
	for (int i = 0; i < 2; i++)
		if (!(bufs[i] = malloc(4096)))
			goto out;
	if (pipe2(outp, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0) {
		rc = -errno;
		goto out;
	}
	if (posix_spawn_file_actions_init(&fa) != 0)
		goto out;
	fa_init = true;
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, outp[1], 1);
	posix_spawn_file_actions_adddup2(&fa, errp[1], 2);
	rc = posix_spawnp(&pid, e->command, &fa, NULL, e->argv, envp);
	if (rc != 0) {
		ds_err_set(err, "exec plugin %s: cannot run: %s%s%s", e->command, strerror(rc),
			   e->install_hint ? "; " : "", e->install_hint ? e->install_hint : "");
		rc = -rc;
		pid = -1;
		goto out;
	}
	close(outp[1]);
	close(errp[1]);
	outp[1] = errp[1] = -1;
	deadline = ds_deadline_in(EXEC_TIMEOUT_MS);
	{
		struct pollfd pf[2] = {{outp[0], POLLIN, 0}, {errp[0], POLLIN, 0}};
		size_t caps[2] = {4096, 4096};
		int open_fds = 2;

		while (open_fds > 0) {
			int n;

			if (ds_deadline_passed(deadline)) {
				kill(pid, SIGKILL);
				ds_err_set(err, "exec plugin %s: no answer within %d s", e->command,
					   EXEC_TIMEOUT_MS / 1000);
				rc = -ETIMEDOUT;
				goto out;
			}
			n = poll(pf, 2, (int)ds_deadline_left(deadline));
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				rc = -errno;
				goto out;
			}
			for (int i = 0; i < 2; i++) {
				ssize_t r;
				if (pf[i].fd < 0 || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
					continue;
				if (caps[i] - lens[i] < 1024) {
					if (caps[i] >= MAX_EXEC_OUTPUT) {
						kill(pid, SIGKILL);
						ds_err_set(err, "exec plugin %s: output too large",
							   e->command);
						rc = -E2BIG;
						goto out;
					}
					if (ds_grow((void **)&bufs[i], &caps[i], caps[i] * 2, 1) <
					    0) {
						rc = -ENOMEM;
						goto out;
					}
				}
				r = read(pf[i].fd, bufs[i] + lens[i], caps[i] - lens[i] - 1);
				if (r > 0) {
					lens[i] += (size_t)r;
				} else if (r == 0 || errno != EINTR) {
					pf[i].fd = -1;
					open_fds--;
				}
			}
		}
	}
	while (waitpid(pid, &wst, 0) < 0) {
		if (errno != EINTR) {
			rc = -errno;
			pid = -1;
			goto out;
		}
	}
	pid = -1;
	bufs[0][lens[0]] = '\0';
	bufs[1][lens[1]] = '\0';
	*status = WIFEXITED(wst) ? WEXITSTATUS(wst) : 128 + WTERMSIG(wst);
	*out_stdout = bufs[0];
	*out_stderr = bufs[1];
	bufs[0] = bufs[1] = NULL;
	rc = 0;
out:
	if (pid > 0)
		waitpid(pid, NULL, 0);
	if (fa_init)
		posix_spawn_file_actions_destroy(&fa);
	for (int i = 0; i < 2; i++) {
		if (outp[i] >= 0)
			close(outp[i]);
		if (errp[i] >= 0)
			close(errp[i]);
	}
	free(bufs[0]);
	free(bufs[1]);
	free(info);
	free(envp);
	return rc;
}

static void first_line(const char *s, char *dst, size_t size)
{
	size_t n = strcspn(s, "\n");

	if (n >= size)
		n = size - 1;
	memcpy(dst, s, n);
	dst[n] = '\0';
}

/* Parse an ExecCredential answer into creds/expiry. */
static int exec_parse_answer(const struct exec_plugin *e, const char *text,
			     ds_kube_credentials *creds, time_t *expiry, ds_err *err)
{
	json_t *doc = NULL, *st;
	const char *api, *kind, *tok, *cert, *key, *exp;
	json_error_t je;
	int rc = -EBADMSG;

	doc = json_loads(text, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(doc)) {
		ds_err_set(err, "exec plugin %s: output is not an ExecCredential JSON object: %s",
			   e->command, doc ? "not an object" : je.text);
		goto out;
	}
	api = json_string_value(json_object_get(doc, "apiVersion"));
	kind = json_string_value(json_object_get(doc, "kind"));
	if (!kind || strcmp(kind, "ExecCredential") != 0) {
		ds_err_set(err, "exec plugin %s: kind is '%s', expected ExecCredential", e->command,
			   kind ? kind : "");
		goto out;
	}
	if (!api || strcmp(api, e->api_version) != 0) {
		ds_err_set(err, "exec plugin %s: answered apiVersion '%s', configured '%s'",
			   e->command, api ? api : "", e->api_version);
		goto out;
	}
	st = json_object_get(doc, "status");
	if (!json_is_object(st)) {
		ds_err_set(err, "exec plugin %s: ExecCredential has no status", e->command);
		goto out;
	}
	tok = ds_kubeconfig_str_field(st, "token");
	cert = ds_kubeconfig_str_field(st, "clientCertificateData");
	key = ds_kubeconfig_str_field(st, "clientKeyData");
	exp = ds_kubeconfig_str_field(st, "expirationTimestamp");
	if (!tok && !(cert && key)) {
		ds_err_set(err,
			   "exec plugin %s: status has neither a token nor clientCertificateData "
			   "and clientKeyData",
			   e->command);
		goto out;
	}
	if (!cert != !key) {
		ds_err_set(err,
			   "exec plugin %s: clientCertificateData and clientKeyData go together",
			   e->command);
		goto out;
	}
	*expiry = 0;
	if (exp && ds_kube_time_parse(exp, expiry) < 0) {
		ds_err_set(err, "exec plugin %s: expirationTimestamp '%s' is not RFC 3339",
			   e->command, exp);
		goto out;
	}
	rc = -ENOMEM;
	if (ds_kubeconfig_dupstr(&creds->token, tok) < 0 ||
	    ds_kubeconfig_dupstr(&creds->cert_pem, cert) < 0 ||
	    ds_kubeconfig_dupstr(&creds->key_pem, key) < 0) {
		ds_kube_credentials_dispose(creds);
		goto out;
	}
	rc = 0;
out:
	json_decref(doc);
	return rc;
}

/* With kc->lock held. */
static int exec_credentials(ds_kubeconfig *kc, ds_err *err)
{
	char *out_s = NULL, *err_s = NULL, line[200];
	ds_kube_credentials fresh = {0};
	time_t expiry = 0;
	int status = 0, rc;

	if (kc->cached_valid && (kc->cached_expiry == 0 || time(NULL) < kc->cached_expiry))
		return 0;
	rc = exec_run(kc->exec, &out_s, &err_s, &status, err);
	if (rc < 0)
		goto out;
	kc->exec_runs++;
	if (status != 0) {
		first_line(err_s, line, sizeof(line));
		ds_err_set(err, "exec plugin %s exited with %d: %s%s%s", kc->exec->command, status,
			   line, kc->exec->install_hint ? "; " : "",
			   kc->exec->install_hint ? kc->exec->install_hint : "");
		rc = -EACCES;
		goto out;
	}
	rc = exec_parse_answer(kc->exec, out_s, &fresh, &expiry, err);
	if (rc < 0)
		goto out;
	ds_kube_credentials_dispose(&kc->cached);
	kc->cached = fresh;
	kc->cached_expiry = expiry;
	kc->cached_valid = true;
out:
	if (out_s)
		explicit_bzero(out_s, strlen(out_s));
	free(out_s);
	free(err_s);
	return rc;
}

/* With kc->lock held: re-read the token file when it changed (rotation). */
static int file_token(ds_kubeconfig *kc, ds_err *err)
{
	struct stat st;
	char *buf = NULL;
	size_t n;
	int rc;

	if (stat(kc->token_file, &st) < 0) {
		rc = -errno;
		ds_err_set(err, "token file %s: %s", kc->token_file, strerror(errno));
		return rc;
	}
	if (kc->file_valid && st.st_ino == kc->file_stat.st_ino &&
	    st.st_dev == kc->file_stat.st_dev && st.st_size == kc->file_stat.st_size &&
	    st.st_mtim.tv_sec == kc->file_stat.st_mtim.tv_sec &&
	    st.st_mtim.tv_nsec == kc->file_stat.st_mtim.tv_nsec)
		return 0;
	rc = ds_kubeconfig_read_file(kc->token_file, 1u << 20, &buf, &n, err);
	if (rc < 0)
		return rc;
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	if (n == 0) {
		free(buf);
		ds_err_set(err, "token file %s is empty", kc->token_file);
		return -EBADMSG;
	}
	if (kc->file_token)
		explicit_bzero(kc->file_token, strlen(kc->file_token));
	free(kc->file_token);
	kc->file_token = buf;
	kc->file_stat = st;
	kc->file_valid = true;
	return 0;
}

int ds_kubeconfig_credentials(ds_kubeconfig *kc, ds_kube_credentials *out, ds_err *err)
{
	ds_kube_credentials c = {0};
	const char *tok = kc->token, *cert = kc->cert_pem, *key = kc->key_pem;
	int rc;

	pthread_mutex_lock(&kc->lock);
	if (kc->exec) {
		rc = exec_credentials(kc, err);
		if (rc < 0)
			goto out;
		/* the plugin's answer wins over static fields, as in client-go */
		if (kc->cached.token)
			tok = kc->cached.token;
		if (kc->cached.cert_pem) {
			cert = kc->cached.cert_pem;
			key = kc->cached.key_pem;
		}
	}
	if (kc->token_file && !(kc->exec && kc->cached.token)) {
		/* as client-go: the file, when it could be read, wins over `token` */
		rc = file_token(kc, err);
		if (rc == 0 || kc->file_token)
			tok = kc->file_token;
		else if (!kc->token)
			goto out;
	}
	rc = -ENOMEM;
	if (ds_kubeconfig_dupstr(&c.token, tok) < 0 ||
	    ds_kubeconfig_dupstr(&c.cert_pem, cert) < 0 ||
	    ds_kubeconfig_dupstr(&c.key_pem, key) < 0) {
		ds_kube_credentials_dispose(&c);
		goto out;
	}
	*out = c;
	rc = 0;
out:
	pthread_mutex_unlock(&kc->lock);
	return ds_err_fallback(err, rc);
}

bool ds_kubeconfig_invalidate(ds_kubeconfig *kc)
{
	bool fresh = false;

	pthread_mutex_lock(&kc->lock);
	if (kc->exec && kc->cached_valid) {
		kc->cached_valid = false;
		fresh = true;
	}
	/* a token file is re-read anyway when it changes; read it again regardless */
	if (kc->token_file)
		kc->file_valid = false;
	pthread_mutex_unlock(&kc->lock);
	return fresh;
}
