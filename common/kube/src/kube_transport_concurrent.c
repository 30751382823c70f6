#include "kube_transport_internal.h"

#include "drasync/clock.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- the concurrent path ------------------------------------------------------ */

struct slot {
	struct xfer x;
	struct ds_kube_call *call;
	int attempt;
	bool auth_retried;
	bool inited;  /* x holds a pooled handle */
	double ready; /* monotonic time it may be (re)started */
	bool busy;
	bool has_token; /* parked for the rate limit: its token is taken, ready is its turn */
};

/* A call that ends here (done, failed, not started): its caller hears of it. */
static void end_call(const struct ds_kube_call_stream *s, struct ds_kube_call *c, int *failed)
{
	if (c->rc < 0)
		(*failed)++;
	if (s->done)
		s->done(s->ud, c);
}

int ds_kube_transport_request_stream(ds_kube_transport *t, const struct ds_kube_call_stream *s)
{
	size_t nslots = (size_t)t->opts.max_parallel, active = 0;
	struct slot *slots = NULL;
	size_t *waiting = NULL, nwaiting = 0; /* slots waiting for a retry or their turn */
	bool ended = false, paused = false;   /* paused: next() said "not now" */
	int failed = 0, rc = 0;

	slots = calloc(nslots, sizeof(*slots));
	waiting = calloc(nslots, sizeof(*waiting));
	if (!slots || !waiting) {
		rc = -ENOMEM;
		goto out;
	}
	pthread_mutex_lock(&t->multi_lock);
	/* A server that speaks HTTP/2 (as kube-apiservers do) takes the calls on
	 * a few connections, DS_KUBE_STREAMS_PER_CONN each; what finds them all
	 * full waits in libcurl's queue. Without this cap libcurl opened 157 at
	 * once in a sync of 10,000 objects, a TLS and an nghttp2 session each,
	 * most of the importer's memory (heaptrack). HTTP/1.1 has one call a
	 * connection: no cap before a server has answered in HTTP/2. */
	curl_multi_setopt(t->multi, CURLMOPT_MAX_HOST_CONNECTIONS,
			  atomic_load(&t->http2) > 0 ? (long)(nslots / DS_KUBE_STREAMS_PER_CONN + 1)
						     : 0L);
	for (;;) {
		double now = ds_clock_mono_s(), wake = now + 1.0;
		int running = 0, numfds = 0;
		CURLMsg *msg;
		int left;

		/* start what may start: due retries first, then fresh calls */
		for (size_t i = 0; i < nslots; i++) {
			struct slot *sl = &slots[i];
			bool retry_due = false;
			long wait;

			if (sl->busy)
				continue;
			for (size_t w = 0; w < nwaiting; w++)
				if (waiting[w] == i)
					retry_due = true;
			if (retry_due && sl->ready > now) {
				if (sl->ready < wake)
					wake = sl->ready;
				continue;
			}
			if (!retry_due) {
				struct ds_kube_call *c = NULL;
				int r;

				if (ended || paused)
					continue;
				r = s->next(s->ud, &c);
				if (r < 0 || (r > 0 && !c)) {
					ended = true;
					continue;
				}
				if (r == 0) {
					paused = true;
					continue;
				}
				ds_kube_error_clear(&c->error);
				memset(&c->resp, 0, sizeof(c->resp));
				c->rc = -EINPROGRESS;
				if (!sl->inited) {
					if (ds_kube_xfer_init(&sl->x, t, DS_KUBE_POOL_MULTI) < 0) {
						sl->x.h = NULL;
						c->rc = -ENOMEM;
						c->error.attempts = 0;
						end_call(s, c, &failed);
						continue;
					}
					sl->inited = true;
				}
				sl->call = c;
				sl->attempt = 0;
				sl->auth_retried = false;
			} else {
				for (size_t w = 0; w < nwaiting; w++)
					if (waiting[w] == i) {
						waiting[w] = waiting[--nwaiting];
						break;
					}
			}
			/* A start parked for the rate limit already took its token. */
			wait = sl->has_token ? 0 : ds_kube_rate_reserve(t);
			sl->has_token = false;
			sl->ready = now + (double)wait / 1000.0;
			sl->busy = true;
			if (wait > 0) {
				/* not yet: park it as a due-later start */
				sl->busy = false;
				sl->has_token = true;
				waiting[nwaiting++] = i;
				if (sl->ready < wake)
					wake = sl->ready;
				continue;
			}
			{
				int sr = ds_kube_xfer_setup(&sl->x, &sl->call->req, false,
							    &sl->call->error);
				curl_easy_setopt(sl->x.h, CURLOPT_PRIVATE, sl);
				if (sr == 0 && curl_multi_add_handle(t->multi, sl->x.h) != CURLM_OK)
					sr = -ENOMEM;
				sl->call->rc = sr;
			}
			if (sl->call->rc < 0) {
				sl->busy = false;
				end_call(s, sl->call, &failed);
				sl->call = NULL;
				continue;
			}
			sl->call->rc = -EINPROGRESS;
			active++;
		}
		if (active == 0) {
			double d;
			if (nwaiting == 0 && (ended || paused))
				break; /* no more calls, or none until one ends: and none will */
			if (nwaiting == 0)
				continue;
			d = wake - ds_clock_mono_s();
			if (d > 0)
				ds_kube_sleep_ms((long)(d * 1000.0) + 1);
			continue;
		}
		curl_multi_perform(t->multi, &running);
		while ((msg = curl_multi_info_read(t->multi, &left))) {
			struct slot *sl = NULL;
			struct ds_kube_call *c;
			enum retry_kind kind;
			long delay;
			int r;

			if (msg->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&sl);
			curl_multi_remove_handle(t->multi, sl->x.h);
			active--;
			sl->busy = false;
			c = sl->call;
			c->error.attempts++;
			r = ds_kube_xfer_finish(&sl->x, &c->req, msg->data.result, &c->resp,
						&c->error, &kind);
			if (r != 0 &&
			    ds_kube_retry_decide(t, &c->req, kind, sl->attempt, &sl->auth_retried,
						 c->error.retry_after, &delay)) {
				if (kind != RETRY_AUTH)
					sl->attempt++;
				atomic_fetch_add(&t->retries, 1);
				sl->ready = ds_clock_mono_s() + (double)delay / 1000.0;
				waiting[nwaiting++] = (size_t)(sl - slots);
				continue;
			}
			c->rc = r;
			sl->call = NULL;
			paused = false; /* a call ended: the caller may have more now */
			end_call(s, c, &failed);
		}
		if (active > 0) {
			double d = wake - ds_clock_mono_s();
			int ms = d <= 0 ? 0 : (d > 1.0 ? 1000 : (int)(d * 1000.0) + 1);
			curl_multi_poll(t->multi, NULL, 0, ms, &numfds);
		}
	}
	rc = failed;
	for (size_t i = 0; i < nslots; i++) {
		if (slots[i].busy)
			curl_multi_remove_handle(t->multi, slots[i].x.h);
		if (!slots[i].inited)
			continue;
		ds_kube_xfer_dispose(&slots[i].x);
		if (slots[i].x.h) {
			curl_easy_setopt(slots[i].x.h, CURLOPT_PRIVATE, NULL);
			ds_kube_pool_put(t, slots[i].x.h, DS_KUBE_POOL_MULTI);
		}
	}
	pthread_mutex_unlock(&t->multi_lock);
out:
	free(slots);
	free(waiting);
	return rc;
}

struct call_array {
	struct ds_kube_call *calls;
	size_t n, next;
};

static int array_next(void *ud, struct ds_kube_call **out)
{
	struct call_array *a = ud;

	if (a->next >= a->n)
		return -1;
	*out = &a->calls[a->next++];
	return 1;
}

int ds_kube_transport_request_many(ds_kube_transport *t, struct ds_kube_call *calls, size_t n)
{
	struct call_array a = {calls, n, 0};
	struct ds_kube_call_stream s = {.next = array_next, .ud = &a};

	if (n == 0)
		return 0;
	for (size_t i = 0; i < n; i++) {
		ds_kube_error_clear(&calls[i].error);
		memset(&calls[i].resp, 0, sizeof(calls[i].resp));
		calls[i].rc = -EINPROGRESS;
	}
	return ds_kube_transport_request_stream(t, &s);
}
