#include "drasync/kube_probe.h"

#include "drasync/clock.h"
#include "drasync/kube_transport.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ds_kube_probe {
	pthread_mutex_t lock;
	ds_kube_transport *t;
	long cache_ms;
	long long checked_ms; /* 0: never */
	bool ok;
	char why[1024];
};

int ds_kube_probe_new(ds_kube_probe **out, ds_kube *k, long timeout_ms, long cache_ms, ds_err *err)
{
	struct ds_kube_transport_opts opts;
	ds_kube_probe *p = calloc(1, sizeof(*p));
	int rc;

	if (!p)
		return ds_err_fallback(err, -ENOMEM);
	ds_kube_transport_opts_init(&opts);
	opts.timeout_ms = timeout_ms;
	opts.connect_timeout_ms = timeout_ms;
	opts.max_retries = 0;
	opts.qps = 0;
	rc = ds_kube_transport_new(&p->t, ds_kube_get_config(k), &opts, err);
	if (rc < 0) {
		free(p);
		return ds_err_fallback(err, rc);
	}
	pthread_mutex_init(&p->lock, NULL);
	p->cache_ms = cache_ms;
	*out = p;
	return 0;
}

void ds_kube_probe_free(ds_kube_probe *p)
{
	if (!p)
		return;
	ds_kube_transport_free(p->t);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

bool ds_kube_probe_reachable(ds_kube_probe *p, char *why, size_t why_size)
{
	struct ds_kube_request req = {.method = "GET", .path = "/version"};
	struct ds_kube_response resp = {0};
	ds_kube_error ke;
	bool ok;

	/* One probe at a time: the others wait for its answer and reuse it. */
	pthread_mutex_lock(&p->lock);
	if (!p->checked_ms || ds_clock_mono_ms() - p->checked_ms >= p->cache_ms) {
		memset(&ke, 0, sizeof(ke));
		if (ds_kube_transport_request(p->t, &req, &resp, &ke) == 0 ||
		    (ke.code >= 400 && ke.code < 500)) {
			p->ok = true;
			p->why[0] = '\0';
		} else {
			p->ok = false;
			snprintf(p->why, sizeof(p->why), "API server %.300s: %s%.511s",
				 ds_kubeconfig_server(ds_kube_transport_config(p->t)),
				 ke.code >= 500 ? "HTTP 5xx: " : "",
				 ke.message[0] ? ke.message : "no answer");
		}
		ds_kube_response_dispose(&resp);
		p->checked_ms = ds_clock_mono_ms();
	}
	ok = p->ok;
	if (why && why_size)
		snprintf(why, why_size, "%s", p->why);
	pthread_mutex_unlock(&p->lock);
	return ok;
}
