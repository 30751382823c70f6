#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu_http.h"

#include "testutil.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

struct sink {
	char *p;
	size_t n;
};

static size_t on_body(char *d, size_t sz, size_t n, void *ud)
{
	struct sink *s = ud;
	char *p = realloc(s->p, s->n + sz * n + 1);

	if (!p)
		return 0;
	memcpy(p + s->n, d, sz * n);
	s->n += sz * n;
	p[s->n] = '\0';
	s->p = p;
	return sz * n;
}

static size_t on_header(char *d, size_t sz, size_t n, void *ud)
{
	tu_http_reply *r = ud;
	size_t len = sz * n;

	if (len > 6 && strncasecmp(d, "Allow:", 6) == 0) {
		free(r->allow);
		r->allow = strndup(d + 6, len - 6);
		for (char *e = r->allow + strlen(r->allow);
		     e > r->allow && (e[-1] == '\r' || e[-1] == '\n'); e--)
			e[-1] = '\0';
		while (r->allow[0] == ' ')
			memmove(r->allow, r->allow + 1, strlen(r->allow));
	}
	return len;
}

void tu_http(tu_http_reply *r, const char *method, const char *url)
{
	struct sink s = {0};
	CURL *c = curl_easy_init();
	char *ct = NULL;

	memset(r, 0, sizeof(*r));
	assert_non_null(c);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 20000L);
	curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
	if (strcmp(method, "HEAD") == 0)
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	else if (strcmp(method, "POST") == 0)
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, "a=b");
	else if (strcmp(method, "GET") != 0)
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	if (curl_easy_perform(c) == CURLE_OK) {
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->code);
		curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
		r->content_type = ct ? strdup(ct) : NULL;
	}
	r->body = s.p ? s.p : strdup("");
	curl_easy_cleanup(c);
}

void tu_http_dispose(tu_http_reply *r)
{
	free(r->body);
	free(r->content_type);
	free(r->allow);
	memset(r, 0, sizeof(*r));
}

char *tu_http_get(const char *url, long code)
{
	tu_http_reply r;
	char *body;

	tu_http(&r, "GET", url);
	if (r.code != code)
		fail_msg("GET %s: HTTP %ld, expected %ld:\n%s", url, r.code, code, r.body);
	body = r.body;
	r.body = NULL;
	tu_http_dispose(&r);
	return body;
}

void tu_promtool_check_metrics(const char *text)
{
	char path[1100], out[1100], cmd[2400], *said;
	const char *tmp = getenv("DS_TEST_TMP") ? getenv("DS_TEST_TMP") : "/tmp";
	int rc;

	snprintf(path, sizeof(path), "%s/promtool-%d.prom", tmp, (int)getpid());
	snprintf(out, sizeof(out), "%s/promtool-%d.out", tmp, (int)getpid());
	tu_write_file(path, text);
	snprintf(cmd, sizeof(cmd), "promtool check metrics < '%s' > '%s' 2>&1", path, out);
	rc = system(cmd);
	said = tu_read_file(out, NULL);
	if (rc != 0)
		fail_msg("promtool check metrics failed (%d):\n%s\non:\n%s", rc, said, text);
	free(said);
	unlink(path);
	unlink(out);
}
