#include "kube_transport_internal.h"

#include "drasync/buf.h"
#include "drasync/clock.h"
#include "drasync/version.h"

#include <curl/curl.h>
#include <jansson.h>
#include <errno.h>
#include <math.h>
#include <openssl/x509_vfy.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc;

static void global_init(void)
{
	global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

void ds_kube_sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	while (ms > 0 && nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static double rnd01(void)
{
	static _Thread_local unsigned seed;

	if (!seed)
		seed = (unsigned)time(NULL) ^ (unsigned)getpid() ^ (unsigned)(uintptr_t)&seed;
	return (double)rand_r(&seed) / ((double)RAND_MAX + 1.0);
}

void ds_kube_transport_opts_init(struct ds_kube_transport_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->qps = 200;
	o->burst = 400;
	o->timeout_ms = 60000;
	o->connect_timeout_ms = 10000;
	o->max_retries = 6;
	o->backoff_base_ms = 200;
	o->backoff_max_ms = 30000;
	o->retry_after_max_ms = 60000;
	o->max_parallel = 64;
	o->max_body = 512u << 20;
}

void ds_kube_response_dispose(struct ds_kube_response *resp)
{
	if (!resp)
		return;
	free(resp->body);
	memset(resp, 0, sizeof(*resp));
}

long ds_kube_backoff_ms(const struct ds_kube_transport_opts *o, int attempt, int retry_after_s,
			double rnd)
{
	double cap;

	if (retry_after_s >= 0) {
		long ms = (long)retry_after_s * 1000L;
		return ms > o->retry_after_max_ms ? o->retry_after_max_ms : ms;
	}
	if (attempt > 30)
		attempt = 30;
	cap = (double)o->backoff_base_ms * ldexp(1.0, attempt);
	if (cap > (double)o->backoff_max_ms)
		cap = (double)o->backoff_max_ms;
	return (long)(cap / 2.0 + rnd * cap / 2.0);
}

/* ---- rate limit ------------------------------------------------------------ */

/* Take one token; @return how long to wait (ms) before the request may go. */
long ds_kube_rate_reserve(ds_kube_transport *t)
{
	double now, wait = 0;

	if (t->opts.qps <= 0)
		return 0;
	pthread_mutex_lock(&t->rl_lock);
	now = ds_clock_mono_s();
	t->tokens += (now - t->last) * t->opts.qps;
	if (t->tokens > (double)t->opts.burst)
		t->tokens = (double)t->opts.burst;
	t->last = now;
	t->tokens -= 1.0;
	if (t->tokens < 0)
		wait = -t->tokens / t->opts.qps;
	pthread_mutex_unlock(&t->rl_lock);
	return (long)ceil(wait * 1000.0);
}

/* ---- setup ------------------------------------------------------------------ */

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access access, void *user)
{
	ds_kube_transport *t = user;

	(void)h;
	(void)access;
	if ((int)data >= 0 && data < CURL_LOCK_DATA_LAST)
		pthread_mutex_lock(&t->share_locks[data]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *user)
{
	ds_kube_transport *t = user;

	(void)h;
	if ((int)data >= 0 && data < CURL_LOCK_DATA_LAST)
		pthread_mutex_unlock(&t->share_locks[data]);
}

/* The URL prefix; with tls-server-name the URL names that host (SNI and
 * verification use it) and CONNECT_TO sends the connection to the real one. */
static int make_base(ds_kube_transport *t, ds_err *err)
{
	const char *server = ds_kubeconfig_server(t->kc),
		   *sni = ds_kubeconfig_tls_server_name(t->kc);
	CURLU *u = curl_url();
	char *host = NULL, *port = NULL, *url = NULL, *ct = NULL;
	int rc = -ENOMEM;

	if (!u)
		return -ENOMEM;
	if (curl_url_set(u, CURLUPART_URL, server, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK) {
		ds_err_set(err, "server '%s' is not a valid URL", server);
		rc = -EINVAL;
		goto out;
	}
	if (sni) {
		if (curl_url_set(u, CURLUPART_HOST, sni, 0) != CURLUE_OK) {
			ds_err_set(err, "tls-server-name '%s' is not a valid host name", sni);
			rc = -EINVAL;
			goto out;
		}
		if (asprintf(&ct, "%s:%s:%s:%s", sni, port, host, port) < 0) {
			ct = NULL;
			goto out;
		}
		t->connect_to = curl_slist_append(NULL, ct);
		if (!t->connect_to)
			goto out;
	}
	if (curl_url_get(u, CURLUPART_URL, &url, 0) != CURLUE_OK)
		goto out;
	{
		size_t n = strlen(url);
		while (n > 0 && url[n - 1] == '/')
			n--;
		t->base = strndup(url, n);
	}
	rc = t->base ? 0 : -ENOMEM;
out:
	curl_free(host);
	curl_free(port);
	curl_free(url);
	free(ct);
	curl_url_cleanup(u);
	return rc;
}

int ds_kube_transport_new(ds_kube_transport **out, ds_kubeconfig *kc,
			  const struct ds_kube_transport_opts *opts, ds_err *err)
{
	ds_kube_transport *t;
	int rc;

	pthread_once(&global_once, global_init);
	if (global_rc != CURLE_OK) {
		ds_err_set(err, "libcurl: %s", curl_easy_strerror(global_rc));
		return -EIO;
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		return ds_err_fallback(err, -ENOMEM);
	t->kc = kc;
	if (opts)
		t->opts = *opts;
	else
		ds_kube_transport_opts_init(&t->opts);
	if (t->opts.max_parallel < 1)
		t->opts.max_parallel = 1;
	if (t->opts.burst < 1)
		t->opts.burst = 1;
	if (t->opts.max_body == 0)
		t->opts.max_body = 512u << 20;
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&t->share_locks[i], NULL);
	pthread_mutex_init(&t->pool_lock, NULL);
	t->pools[DS_KUBE_POOL_MULTI].max = DS_KUBE_POOL_MULTI_MAX;
	t->pools[DS_KUBE_POOL_OWN].max = DS_KUBE_POOL_OWN_MAX;
	pthread_mutex_init(&t->rl_lock, NULL);
	pthread_mutex_init(&t->multi_lock, NULL);
	t->tokens = (double)t->opts.burst;
	t->last = ds_clock_mono_s();
	rc = -ENOMEM;
	if (asprintf(&t->ua, "%s",
		     t->opts.user_agent ? t->opts.user_agent : "drasync/" DS_VERSION) < 0) {
		t->ua = NULL;
		goto fail;
	}
	t->opts.user_agent = NULL;
	rc = make_base(t, err);
	if (rc < 0)
		goto fail;
	rc = -ENOMEM;
	t->share = curl_share_init();
	if (!t->share)
		goto fail;
	curl_share_setopt(t->share, CURLSHOPT_LOCKFUNC, share_lock);
	curl_share_setopt(t->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
	curl_share_setopt(t->share, CURLSHOPT_USERDATA, t);
	curl_share_setopt(t->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
	curl_share_setopt(t->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
	t->multi = curl_multi_init();
	if (!t->multi)
		goto fail;
	curl_multi_setopt(t->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
	curl_multi_setopt(t->multi, CURLMOPT_MAX_CONCURRENT_STREAMS,
			  (long)DS_KUBE_STREAMS_PER_CONN);
	*out = t;
	return 0;
fail:
	ds_kube_transport_free(t);
	return ds_err_fallback(err, rc);
}

void ds_kube_transport_free(ds_kube_transport *t)
{
	if (!t)
		return;
	for (size_t k = 0; k < 2; k++) {
		for (size_t i = 0; i < t->pools[k].n; i++)
			curl_easy_cleanup(t->pools[k].h[i]);
		free(t->pools[k].h);
	}
	if (t->multi)
		curl_multi_cleanup(t->multi);
	if (t->share)
		curl_share_cleanup(t->share);
	curl_slist_free_all(t->connect_to);
	free(t->base);
	free(t->ua);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&t->share_locks[i]);
	pthread_mutex_destroy(&t->pool_lock);
	pthread_mutex_destroy(&t->rl_lock);
	pthread_mutex_destroy(&t->multi_lock);
	free(t);
}

ds_kubeconfig *ds_kube_transport_config(ds_kube_transport *t)
{
	return t->kc;
}

void ds_kube_transport_stats(ds_kube_transport *t, struct ds_kube_transport_stats *out)
{
	out->requests = atomic_load(&t->requests);
	out->retries = atomic_load(&t->retries);
	out->connections = atomic_load(&t->connections);
	out->http2 = atomic_load(&t->http2);
}

static CURL *pool_get(ds_kube_transport *t, enum ds_kube_pool_kind kind)
{
	struct ds_kube_pool *p = &t->pools[kind];
	CURL *h = NULL;

	pthread_mutex_lock(&t->pool_lock);
	if (p->n > 0)
		h = p->h[--p->n];
	pthread_mutex_unlock(&t->pool_lock);
	return h ? h : curl_easy_init();
}

void ds_kube_pool_put(ds_kube_transport *t, CURL *h, enum ds_kube_pool_kind kind)
{
	struct ds_kube_pool *p = &t->pools[kind];

	if (!h)
		return;
	pthread_mutex_lock(&t->pool_lock);
	/* beyond the bound the handle goes, and an own transfer's connection with it */
	if (p->n >= p->max || ds_grow((void **)&p->h, &p->cap, p->n + 1, sizeof(*p->h)) < 0) {
		pthread_mutex_unlock(&t->pool_lock);
		curl_easy_cleanup(h);
		return;
	}
	p->h[p->n++] = h;
	pthread_mutex_unlock(&t->pool_lock);
}

/* ---- one transfer ------------------------------------------------------------- */

/* A transfer of t with a pooled handle. @return 0 or -ENOMEM */
int ds_kube_xfer_init(struct xfer *x, ds_kube_transport *t, enum ds_kube_pool_kind kind)
{
	memset(x, 0, sizeof(*x));
	x->t = t;
	ds_str_init(&x->body, t->opts.max_body);
	x->h = pool_get(t, kind);
	return x->h ? 0 : -ENOMEM;
}

void ds_kube_xfer_dispose(struct xfer *x)
{
	curl_slist_free_all(x->hdrs);
	x->hdrs = NULL;
	ds_str_dispose(&x->body);
}

/* Deliver complete lines from the buffer; keeps a partial tail. */
static void deliver_lines(struct xfer *x)
{
	char *buf = ds_str_ptr(&x->body);
	size_t start = 0, len = ds_str_len(&x->body);

	for (size_t i = 0; i < len && !x->stopped; i++) {
		if (buf[i] != '\n')
			continue;
		buf[i] = '\0';
		if (i > start && x->fn(x->user, buf + start, i - start) != 0)
			x->stopped = true;
		start = i + 1;
	}
	ds_str_drop(&x->body, start);
}

static size_t on_write(char *data, size_t size, size_t nmemb, void *user)
{
	struct xfer *x = user;
	size_t n = size * nmemb;

	int rc = ds_str_add(&x->body, data, n);

	if (rc) {
		x->too_big = rc == -E2BIG;
		return 0;
	}
	if (x->fn) {
		long code = 0;
		/* an error answer is kept whole for its Status */
		curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &code);
		if (code < 200 || code >= 300)
			return n;
		deliver_lines(x);
		if (x->stopped)
			return 0;
	}
	return n;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *user)
{
	struct xfer *x = user;
	size_t n = size * nmemb;

	if (n > 9 && strncmp(data, "HTTP/", 5) == 0) {
		/* "HTTP/1.1 413 Request Entity Too Large\r\n": a new answer */
		const char *sp = memchr(data, ' ', n), *p;
		size_t l = 0;

		x->phrase[0] = '\0';
		p = sp ? memchr(sp + 1, ' ', n - (size_t)(sp + 1 - data)) : NULL;
		if (p) {
			p++;
			while (p + l < data + n && p[l] != '\r' && p[l] != '\n' &&
			       l + 1 < sizeof(x->phrase))
				l++;
			memcpy(x->phrase, p, l);
			x->phrase[l] = '\0';
		}
		return n;
	}
	if (n > 12 && strncasecmp(data, "Retry-After:", 12) == 0) {
		char v[64];
		size_t l = n - 12;
		long secs;
		char *end;
		if (l >= sizeof(v))
			l = sizeof(v) - 1;
		memcpy(v, data + 12, l);
		v[l] = '\0';
		secs = strtol(v, &end, 10);
		if (end != v && secs >= 0)
			x->retry_after = secs > 3600 ? 3600 : (int)secs;
		else {
			/* an HTTP date */
			struct tm tm;
			char *p = v;
			memset(&tm, 0, sizeof(tm));
			while (*p == ' ')
				p++;
			if (strptime(p, "%a, %d %b %Y %H:%M:%S GMT", &tm)) {
				time_t when = timegm(&tm), now = time(NULL);
				x->retry_after =
				    when > now ? (int)(when - now > 3600 ? 3600 : when - now) : 0;
			}
		}
	}
	return n;
}

static int on_progress(void *user, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	struct xfer *x = user;

	(void)a;
	(void)b;
	(void)c;
	(void)d;
	if (x->stop && atomic_load(x->stop)) {
		x->stopped = true;
		return 1;
	}
	return 0;
}

static bool is_idempotent(const struct ds_kube_request *req)
{
	const char *m = req->method ? req->method : "GET";

	if (strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0 || strcmp(m, "PUT") == 0 ||
	    strcmp(m, "DELETE") == 0)
		return true;
	if (strcmp(m, "PATCH") == 0 && req->content_type)
		return strcmp(req->content_type, "application/apply-patch+yaml") == 0 ||
		       strcmp(req->content_type, "application/merge-patch+json") == 0 ||
		       strcmp(req->content_type, "application/strategic-merge-patch+json") == 0;
	return false;
}

/* Configure x->h (a pooled handle) for one attempt of `req`. */
int ds_kube_xfer_setup(struct xfer *x, const struct ds_kube_request *req, bool stream,
		       ds_kube_error *ke)
{
	ds_kube_transport *t = x->t;
	ds_kubeconfig *kc = t->kc;
	ds_kube_credentials cr = {0};
	const char *m = req->method ? req->method : "GET";
	char *url = NULL, *line = NULL;
	ds_err e = {0};
	int rc;

	ds_err_clear(&e);
	rc = ds_kubeconfig_credentials(kc, &cr, &e);
	if (rc < 0) {
		ds_kube_error_set(ke, 0, "credentials: %s", e.msg);
		return rc;
	}
	rc = -ENOMEM;
	curl_easy_reset(x->h);
	ds_str_reset(&x->body);
	x->too_big = false;
	x->retry_after = -1;
	x->errbuf[0] = '\0';
	x->stopped = false;
	if (asprintf(&url, "%s%s", t->base, req->path) < 0) {
		url = NULL;
		goto out;
	}
	curl_easy_setopt(x->h, CURLOPT_URL, url);
	/* The client escapes every segment; libcurl must not fold "." or ".." away (issue 22). */
	curl_easy_setopt(x->h, CURLOPT_PATH_AS_IS, 1L);
	curl_easy_setopt(x->h, CURLOPT_SHARE, t->share);
	curl_easy_setopt(x->h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(x->h, CURLOPT_ERRORBUFFER, x->errbuf);
	curl_easy_setopt(x->h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
	curl_easy_setopt(x->h, CURLOPT_PIPEWAIT, 1L);
	curl_easy_setopt(x->h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(x->h, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(x->h, CURLOPT_CONNECTTIMEOUT_MS, t->opts.connect_timeout_ms);
	curl_easy_setopt(x->h, CURLOPT_TIMEOUT_MS, stream ? 0L : t->opts.timeout_ms);
	curl_easy_setopt(x->h, CURLOPT_USERAGENT, t->ua);
	curl_easy_setopt(x->h, CURLOPT_ACCEPT_ENCODING, "");
	curl_easy_setopt(x->h, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(x->h, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(x->h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(x->h, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(x->h, CURLOPT_PROTOCOLS_STR, "http,https");
	/* libcurl's own buffer sizes: 7.88 writes an HTTP/2 DATA frame past a
	 * receive buffer smaller than the frame (CURLOPT_BUFFERSIZE 4096 overflowed
	 * under ASan in itest_group_claims), so they are not made smaller. */
	if (stream) {
		curl_easy_setopt(x->h, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(x->h, CURLOPT_XFERINFOFUNCTION, on_progress);
		curl_easy_setopt(x->h, CURLOPT_XFERINFODATA, x);
	}
	if (t->connect_to)
		curl_easy_setopt(x->h, CURLOPT_CONNECT_TO, t->connect_to);
	if (ds_kubeconfig_proxy_url(kc))
		curl_easy_setopt(x->h, CURLOPT_PROXY, ds_kubeconfig_proxy_url(kc));
	if (ds_kubeconfig_insecure(kc)) {
		curl_easy_setopt(x->h, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(x->h, CURLOPT_SSL_VERIFYHOST, 0L);
	} else if (ds_kubeconfig_ca_pem(kc)) {
		struct curl_blob ca = {(void *)(uintptr_t)ds_kubeconfig_ca_pem(kc),
				       strlen(ds_kubeconfig_ca_pem(kc)), CURL_BLOB_COPY};
		curl_easy_setopt(x->h, CURLOPT_CAINFO_BLOB, &ca);
	}
	if (cr.cert_pem && cr.key_pem) {
		struct curl_blob c = {cr.cert_pem, strlen(cr.cert_pem), CURL_BLOB_COPY};
		struct curl_blob k = {cr.key_pem, strlen(cr.key_pem), CURL_BLOB_COPY};
		curl_easy_setopt(x->h, CURLOPT_SSLCERTTYPE, "PEM");
		curl_easy_setopt(x->h, CURLOPT_SSLCERT_BLOB, &c);
		curl_easy_setopt(x->h, CURLOPT_SSLKEYTYPE, "PEM");
		curl_easy_setopt(x->h, CURLOPT_SSLKEY_BLOB, &k);
	}
	curl_slist_free_all(x->hdrs);
	x->hdrs = NULL;
	x->hdrs = curl_slist_append(x->hdrs, "Accept: application/json");
	if (!x->hdrs)
		goto out;
	if (cr.token) {
		if (asprintf(&line, "Authorization: Bearer %s", cr.token) < 0) {
			line = NULL;
			goto out;
		}
		struct curl_slist *n = curl_slist_append(x->hdrs, line);
		explicit_bzero(line, strlen(line));
		if (!n)
			goto out;
		x->hdrs = n;
	}
	if (req->body) {
		char ctl[160];
		struct curl_slist *n;
		snprintf(ctl, sizeof(ctl), "Content-Type: %s",
			 req->content_type ? req->content_type : "application/json");
		n = curl_slist_append(x->hdrs, ctl);
		if (!n)
			goto out;
		x->hdrs = n;
		curl_easy_setopt(x->h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
		curl_easy_setopt(x->h, CURLOPT_POSTFIELDS, req->body);
	}
	/* "Expect: 100-continue" costs a round trip on HTTP/1.1 for nothing here */
	{
		struct curl_slist *n = curl_slist_append(x->hdrs, "Expect:");
		if (!n)
			goto out;
		x->hdrs = n;
	}
	if (strcmp(m, "GET") == 0 && !req->body)
		curl_easy_setopt(x->h, CURLOPT_HTTPGET, 1L);
	else if (strcmp(m, "POST") != 0)
		curl_easy_setopt(x->h, CURLOPT_CUSTOMREQUEST, m);
	else if (!req->body)
		curl_easy_setopt(x->h, CURLOPT_POSTFIELDSIZE, 0L),
		    curl_easy_setopt(x->h, CURLOPT_POSTFIELDS, "");
	curl_easy_setopt(x->h, CURLOPT_HTTPHEADER, x->hdrs);
	rc = 0;
out:
	free(line);
	free(url);
	ds_kube_credentials_dispose(&cr);
	return rc;
}

static enum ds_kube_tls_cause tls_cause(CURL *h, CURLcode cc, const char *errbuf)
{
	long vr = 0;

	if (cc == CURLE_SSL_CERTPROBLEM)
		return DS_KUBE_TLS_CLIENT_CERT;
	if (cc == CURLE_PEER_FAILED_VERIFICATION) {
		curl_easy_getinfo(h, CURLINFO_SSL_VERIFYRESULT, &vr);
		switch (vr) {
		case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
		case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
		case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
		case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
		case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
		case X509_V_ERR_CERT_SIGNATURE_FAILURE:
			return DS_KUBE_TLS_UNKNOWN_CA;
		case X509_V_ERR_CERT_HAS_EXPIRED:
		case X509_V_ERR_CERT_NOT_YET_VALID:
			return DS_KUBE_TLS_EXPIRED;
		case X509_V_ERR_HOSTNAME_MISMATCH:
		case X509_V_ERR_IP_ADDRESS_MISMATCH:
			return DS_KUBE_TLS_NAME_MISMATCH;
		default:
			break;
		}
		/* curl checks the host name itself after a successful chain verification */
		if (strstr(errbuf, "subject name") || strstr(errbuf, "does not match") ||
		    strstr(errbuf, "hostname"))
			return DS_KUBE_TLS_NAME_MISMATCH;
		if (strstr(errbuf, "issuer") || strstr(errbuf, "self-signed") ||
		    strstr(errbuf, "self signed"))
			return DS_KUBE_TLS_UNKNOWN_CA;
		return DS_KUBE_TLS_HANDSHAKE;
	}
	if (cc == CURLE_SSL_CONNECT_ERROR) {
		if (strstr(errbuf, "certificate") &&
		    (strstr(errbuf, "alert") || strstr(errbuf, "bad")))
			return DS_KUBE_TLS_CLIENT_CERT;
		return DS_KUBE_TLS_HANDSHAKE;
	}
	return DS_KUBE_TLS_OK;
}

static const char *tls_advice(enum ds_kube_tls_cause c)
{
	switch (c) {
	case DS_KUBE_TLS_UNKNOWN_CA:
		return "the server's certificate is not signed by the configured "
		       "certificate-authority";
	case DS_KUBE_TLS_NAME_MISMATCH:
		return "the server's certificate does not name the server host (or "
		       "tls-server-name)";
	case DS_KUBE_TLS_EXPIRED:
		return "the server's certificate is expired or not yet valid";
	case DS_KUBE_TLS_CLIENT_CERT:
		return "the client certificate or key was refused or is unusable";
	default:
		return "TLS handshake failed";
	}
}

/*
 * Whether a transfer broken by cc still carries the server's final answer:
 * its status line arrived with a definite refusal (a 4xx other than 408 and
 * 429) before the connection closed. A server that refuses a large request
 * body (413) answers before reading it and closes, and the rest of its answer
 * can be lost; sending it again would only be refused again.
 */
static bool answer_arrived(struct xfer *x, CURLcode cc, long *code)
{
	*code = 0;
	switch (cc) {
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_PARTIAL_FILE:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
		break;
	default:
		return false;
	}
	if (x->fn || curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, code) != CURLE_OK)
		return false;
	return *code >= 400 && *code < 500 && *code != 408 && *code != 429;
}

/* Turn the outcome of one attempt into rc/resp/ke and a retry decision. */
int ds_kube_xfer_finish(struct xfer *x, const struct ds_kube_request *req, CURLcode cc,
			struct ds_kube_response *resp, ds_kube_error *ke, enum retry_kind *retry)
{
	ds_kube_transport *t = x->t;
	long code = 0, nconn = 0;
	int rc;

	*retry = RETRY_NO;
	atomic_fetch_add(&t->requests, 1);
	if (curl_easy_getinfo(x->h, CURLINFO_NUM_CONNECTS, &nconn) == CURLE_OK && nconn > 0)
		atomic_fetch_add(&t->connections, (unsigned long)nconn);
	if (cc != CURLE_OK && !x->too_big && answer_arrived(x, cc, &code)) {
		const char *detail = x->errbuf[0] ? x->errbuf : curl_easy_strerror(cc);
		json_t *whole = json_loadb(ds_str_ptr(&x->body), ds_str_len(&x->body), 0, NULL);

		if (ke)
			ke->retry_after = x->retry_after;
		/* the answer's Status if all of it came, else its status line */
		rc = ds_kube_error_from_response(ke, (int)code, ds_str_ptr(&x->body),
						 ds_str_len(&x->body));
		if (ke && !json_is_object(whole)) {
			const char *phrase =
			    x->phrase[0] ? x->phrase : ds_http_status_text((int)code);

			snprintf(ke->message, sizeof(ke->message),
				 "HTTP %ld%s%s (the rest of the answer was lost: %s)", code,
				 phrase[0] ? " " : "", phrase, detail);
		}
		json_decref(whole);
		return rc;
	}
	if (cc != CURLE_OK && !(x->fn && x->stopped)) {
		enum ds_kube_tls_cause tc = tls_cause(x->h, cc, x->errbuf);
		const char *detail = x->errbuf[0] ? x->errbuf : curl_easy_strerror(cc);

		if (x->too_big) {
			ds_kube_error_set(ke, 0, "%s %s: response larger than %zu bytes",
					  req->method, req->path, t->opts.max_body);
			if (ke)
				ke->tls = tc;
			return -E2BIG;
		}
		if (tc != DS_KUBE_TLS_OK) {
			ds_kube_error_set(ke, 0, "%s (%s): %s", tls_advice(tc),
					  ds_kube_tls_cause_name(tc), detail);
			if (ke)
				ke->tls = tc;
			return -EKEYREJECTED;
		}
		ds_kube_error_set(ke, 0, "%s %s%s: %s", req->method, t->base, req->path, detail);
		switch (cc) {
		case CURLE_COULDNT_CONNECT:
			*retry = RETRY_ANY;
			return -ECONNREFUSED;
		case CURLE_COULDNT_RESOLVE_HOST:
		case CURLE_COULDNT_RESOLVE_PROXY:
			*retry = RETRY_ANY;
			return -EHOSTUNREACH;
		case CURLE_OPERATION_TIMEDOUT:
			*retry = RETRY_IDEMPOTENT;
			return -ETIMEDOUT;
		case CURLE_SEND_ERROR:
		case CURLE_RECV_ERROR:
		case CURLE_GOT_NOTHING:
		case CURLE_PARTIAL_FILE:
		case CURLE_HTTP2:
		case CURLE_HTTP2_STREAM:
			*retry = RETRY_IDEMPOTENT;
			return -ECONNRESET;
		case CURLE_OUT_OF_MEMORY:
			return -ENOMEM;
		default:
			return -EPROTO;
		}
	}
	curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &code);
	{
		long ver = 0;
		if (curl_easy_getinfo(x->h, CURLINFO_HTTP_VERSION, &ver) == CURLE_OK &&
		    ver == CURL_HTTP_VERSION_2_0)
			atomic_fetch_add(&t->http2, 1);
	}
	if (x->fn) { /* stream: 2xx already delivered */
		if (code >= 200 && code < 300)
			return x->stopped ? 1 : 0;
	} else if (code >= 200 && code < 300) {
		resp->code = (int)code;
		resp->body = ds_str_take(&x->body, &resp->len);
		return resp->body ? 0 : -ENOMEM;
	}
	if (ke) {
		int attempts = ke->attempts;
		ds_kube_error_clear(ke);
		ke->attempts = attempts;
		ke->retry_after = x->retry_after;
	}
	rc = ds_kube_error_from_response(ke, (int)code, ds_str_ptr(&x->body), ds_str_len(&x->body));
	if (code == 429)
		*retry = RETRY_ANY;
	else if (code == 401)
		*retry = RETRY_AUTH;
	else if (ds_kube_error_is_transient((int)code))
		*retry = RETRY_IDEMPOTENT;
	return rc;
}

/* Whether to try again, and after how long. */
bool ds_kube_retry_decide(ds_kube_transport *t, const struct ds_kube_request *req,
			  enum retry_kind kind, int attempt, bool *auth_retried, int retry_after,
			  long *delay_ms)
{
	*delay_ms = 0;
	switch (kind) {
	case RETRY_NO:
		return false;
	case RETRY_AUTH:
		if (*auth_retried || !ds_kubeconfig_invalidate(t->kc))
			return false;
		*auth_retried = true;
		return true;
	case RETRY_IDEMPOTENT:
		if (!is_idempotent(req))
			return false;
		/* fall through */
	case RETRY_ANY:
		if (attempt >= t->opts.max_retries)
			return false;
		*delay_ms = ds_kube_backoff_ms(&t->opts, attempt, retry_after, rnd01());
		return true;
	}
	return false;
}

int ds_kube_transport_request(ds_kube_transport *t, const struct ds_kube_request *req,
			      struct ds_kube_response *resp, ds_kube_error *ke)
{
	struct xfer x;
	ds_kube_error local;
	bool auth_retried = false;
	int attempt = 0, rc;

	if (!ke)
		ke = &local;
	ds_kube_error_clear(ke);
	if (ds_kube_xfer_init(&x, t, DS_KUBE_POOL_OWN) < 0)
		return -ENOMEM;
	for (;;) {
		struct ds_kube_response r = {0};
		enum retry_kind kind;
		long wait = ds_kube_rate_reserve(t), delay;
		CURLcode cc;

		if (wait > 0)
			ds_kube_sleep_ms(wait);
		rc = ds_kube_xfer_setup(&x, req, false, ke);
		if (rc < 0)
			break;
		cc = curl_easy_perform(x.h);
		ke->attempts++;
		rc = ds_kube_xfer_finish(&x, req, cc, &r, ke, &kind);
		if (rc == 0) {
			*resp = r;
			break;
		}
		if (!ds_kube_retry_decide(t, req, kind, attempt, &auth_retried, ke->retry_after,
					  &delay))
			break;
		if (kind != RETRY_AUTH)
			attempt++;
		atomic_fetch_add(&t->retries, 1);
		ds_kube_sleep_ms(delay);
	}
	ds_kube_xfer_dispose(&x);
	ds_kube_pool_put(t, x.h, DS_KUBE_POOL_OWN);
	return rc;
}

int ds_kube_transport_stream(ds_kube_transport *t, const struct ds_kube_request *req,
			     ds_kube_line_fn fn, void *user, const atomic_bool *stop,
			     ds_kube_error *ke)
{
	struct xfer x;
	ds_kube_error local;
	enum retry_kind kind;
	CURLcode cc;
	long wait;
	int rc;

	if (!ke)
		ke = &local;
	ds_kube_error_clear(ke);
	if (ds_kube_xfer_init(&x, t, DS_KUBE_POOL_OWN) < 0)
		return -ENOMEM;
	x.fn = fn;
	x.user = user;
	x.stop = stop;
	wait = ds_kube_rate_reserve(t);
	if (wait > 0)
		ds_kube_sleep_ms(wait);
	rc = ds_kube_xfer_setup(&x, req, true, ke);
	if (rc < 0)
		goto out;
	/* a non-2xx answer is buffered whole, not split into lines */
	cc = curl_easy_perform(x.h);
	ke->attempts = 1;
	{
		long code = 0;
		curl_easy_getinfo(x.h, CURLINFO_RESPONSE_CODE, &code);
		if (code >= 300) {
			x.fn = NULL;
			cc = CURLE_OK;
		}
	}
	rc = ds_kube_xfer_finish(&x, req, cc, NULL, ke, &kind);
	if (rc == 0 && x.fn && ds_str_len(&x.body) > 0 && !x.stopped) {
		/* a last line without '\n' */
		if (fn(user, ds_str_ptr(&x.body), ds_str_len(&x.body)) != 0)
			rc = 1;
	}
out:
	ds_kube_xfer_dispose(&x);
	ds_kube_pool_put(t, x.h, DS_KUBE_POOL_OWN);
	return rc;
}
