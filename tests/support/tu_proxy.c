#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu_proxy.h"

#include "testutil.h"
#include "tu_http.h"
#include "tu_kube.h"
#include "tu_site.h"

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct tu_proxy {
	int pid, port, control;
	char *dir;
	char log[1100], kubeconfig[1100];
};

/* Start argv (the listen and control ports already in it) and wait until the control port answers.
 */
static void wait_up(tu_proxy *p)
{
	char url[128];
	long long end = tu_now_ms() + 20000;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/stats", p->control);
	for (;;) {
		tu_http_reply r;
		int code;

		tu_http(&r, "GET", url);
		code = (int)r.code;
		tu_http_dispose(&r);
		if (code == 200 && (!p->kubeconfig[0] || access(p->kubeconfig, R_OK) == 0))
			return;
		if (kill(p->pid, 0) != 0 || tu_now_ms() > end) {
			char *log = tu_read_file(p->log, NULL);

			fail_msg("faultproxy did not come up on control port %d:\n%s", p->control,
				 log);
		}
		tu_msleep(20);
	}
}

static tu_proxy *proxy_new(const char *dir)
{
	tu_proxy *p = calloc(1, sizeof(*p));

	assert_non_null(p);
	p->dir = dir ? strdup(dir) : tu_mkdtemp("faultproxy");
	assert_non_null(p->dir);
	p->port = tu_free_port();
	p->control = tu_free_port();
	while (p->control == p->port)
		p->control = tu_free_port();
	snprintf(p->log, sizeof(p->log), "%s/faultproxy-%d.log", p->dir, p->port);
	tu_write_file(p->log, "");
	return p;
}

tu_proxy *tu_proxy_start_tcp(int to_port, int latency_ms, int rate_kbit, double loss_pct)
{
	tu_proxy *p = proxy_new(NULL);
	char listen[64], to[64], control[64], lat[32], rate[32], loss[32];

	snprintf(listen, sizeof(listen), "127.0.0.1:%d", p->port);
	snprintf(to, sizeof(to), "127.0.0.1:%d", to_port);
	snprintf(control, sizeof(control), "127.0.0.1:%d", p->control);
	snprintf(lat, sizeof(lat), "%d", latency_ms);
	snprintf(rate, sizeof(rate), "%d", rate_kbit);
	snprintf(loss, sizeof(loss), "%g", loss_pct);
	p->pid =
	    tu_spawn(p->log, (const char *[]){tu_env("DS_FAULTPROXY"), "tcp", "--listen", listen,
					      "--to", to, "--control", control, "--latency-ms", lat,
					      "--rate-kbit", rate, "--loss", loss, NULL});
	wait_up(p);
	return p;
}

tu_proxy *tu_proxy_start_api(const char *admin_kubeconfig, const char *dir)
{
	tu_proxy *p = proxy_new(dir);
	char listen[64], control[64];

	snprintf(listen, sizeof(listen), "127.0.0.1:%d", p->port);
	snprintf(control, sizeof(control), "127.0.0.1:%d", p->control);
	snprintf(p->kubeconfig, sizeof(p->kubeconfig), "%s/faultproxy-%d.kubeconfig", p->dir,
		 p->port);
	p->pid =
	    tu_spawn(p->log, (const char *[]){tu_env("DS_FAULTPROXY"), "api", "--listen", listen,
					      "--kubeconfig", admin_kubeconfig, "--control",
					      control, "--write-kubeconfig", p->kubeconfig, NULL});
	wait_up(p);
	return p;
}

int tu_proxy_port(const tu_proxy *p)
{
	return p->port;
}

const char *tu_proxy_kubeconfig(const tu_proxy *p)
{
	return p->kubeconfig[0] ? p->kubeconfig : NULL;
}

char *tu_proxy_log(const tu_proxy *p)
{
	return tu_read_file(p->log, NULL);
}

/* METHOD /path?query on the control port; fails the test unless it answers 200. Returns the JSON.
 */
static json_t *control(const tu_proxy *p, const char *method, const char *path)
{
	char url[512];
	tu_http_reply r;
	json_error_t jerr;
	json_t *doc;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", p->control, path);
	tu_http(&r, method, url);
	if (r.code != 200) {
		char *log = tu_proxy_log(p);

		fail_msg("faultproxy %s %s: HTTP %ld %s\n%s", method, path, r.code, r.body, log);
	}
	doc = json_loads(r.body, 0, &jerr);
	if (!doc)
		fail_msg("faultproxy %s %s: not JSON (%s): %s", method, path, jerr.text, r.body);
	tu_http_dispose(&r);
	return doc;
}

void tu_proxy_cut(tu_proxy *p)
{
	json_decref(control(p, "POST", "/cut"));
}

void tu_proxy_restore(tu_proxy *p)
{
	json_decref(control(p, "POST", "/restore"));
}

void tu_proxy_set(tu_proxy *p, int latency_ms, int rate_kbit, double loss_pct)
{
	char path[256] = "/set?";
	size_t n = strlen(path);

	if (latency_ms >= 0)
		n += (size_t)snprintf(path + n, sizeof(path) - n, "latency_ms=%d&", latency_ms);
	if (rate_kbit >= 0)
		n += (size_t)snprintf(path + n, sizeof(path) - n, "rate_kbit=%d&", rate_kbit);
	if (loss_pct >= 0)
		snprintf(path + n, sizeof(path) - n, "loss=%g&", loss_pct);
	json_decref(control(p, "POST", path));
}

void tu_proxy_faults(tu_proxy *p, const char *kind, double ratio, int retry_after,
		     const char *methods)
{
	char path[384];
	int n;

	n = snprintf(path, sizeof(path), "/faults?kind=%s&ratio=%.17g", kind, ratio);
	if (retry_after > 0)
		n += snprintf(path + n, sizeof(path) - (size_t)n, "&retry_after=%d", retry_after);
	if (methods)
		snprintf(path + n, sizeof(path) - (size_t)n, "&methods=%s", methods);
	json_decref(control(p, "POST", path));
}

long long tu_proxy_stats_int(tu_proxy *p, const char *key)
{
	json_t *doc = control(p, "GET", "/stats"), *v = doc;
	char part[64];
	long long out = 0;

	for (const char *k = key; v && *k;) {
		size_t len = strcspn(k, ".");

		assert_true(len < sizeof(part));
		memcpy(part, k, len);
		part[len] = '\0';
		v = json_object_get(v, part);
		k += len + (k[len] == '.');
	}
	if (json_is_boolean(v))
		out = json_is_true(v);
	else if (json_is_integer(v))
		out = json_integer_value(v);
	else {
		char *text = json_dumps(doc, JSON_COMPACT);

		fail_msg("faultproxy /stats has no integer %s: %s", key, text);
	}
	json_decref(doc);
	return out;
}

void tu_proxy_stop(tu_proxy *p)
{
	int code;

	if (!p)
		return;
	kill(p->pid, SIGTERM);
	code = tu_wait_exit(p->pid, 10000);
	if (code != 0) {
		char *log = tu_proxy_log(p);

		fail_msg("faultproxy exited %d after SIGTERM:\n%s", code, log);
	}
	free(p->dir);
	free(p);
}
