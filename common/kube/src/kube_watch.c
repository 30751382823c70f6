#include "kube_client_internal.h"

#include "drasync/buf.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* ---- watch ---------------------------------------------------------------------------- */

struct watch_state {
	ds_kube_watch_fn fn;
	void *user;
	char rv[128];	   /* last resourceVersion seen */
	bool gone;	   /* an ERROR event with 410 */
	bool stopped;	   /* the callback asked to stop */
	unsigned events;   /* events in this stream */
	ds_kube_error err; /* an ERROR event other than 410 */
	bool failed;
};

static void set_rv(struct watch_state *ws, const json_t *obj)
{
	const char *rv =
	    json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));

	if (rv && rv[0])
		snprintf(ws->rv, sizeof(ws->rv), "%s", rv);
}

static int on_line(void *user, const char *line, size_t len)
{
	struct watch_state *ws = user;
	json_t *ev = json_loadb(line, len, 0, NULL), *obj;
	const char *type;
	enum ds_kube_event_type t;
	int rc = 0;

	if (!json_is_object(ev))
		goto out; /* not an event: ignore the line, keep the stream */
	type = json_string_value(json_object_get(ev, "type"));
	obj = json_object_get(ev, "object");
	if (!type || !json_is_object(obj))
		goto out;
	if (strcmp(type, "ERROR") == 0) {
		char *s = json_dumps(obj, JSON_COMPACT);
		int code = (int)json_integer_value(json_object_get(obj, "code"));
		if (code == 410) {
			ws->gone = true;
		} else {
			ws->failed = true;
			ds_kube_error_from_response(&ws->err, code ? code : 500, s,
						    s ? strlen(s) : 0);
		}
		free(s);
		rc = 1;
		goto out;
	}
	if (strcmp(type, "ADDED") == 0)
		t = DS_KUBE_ADDED;
	else if (strcmp(type, "MODIFIED") == 0)
		t = DS_KUBE_MODIFIED;
	else if (strcmp(type, "DELETED") == 0)
		t = DS_KUBE_DELETED;
	else if (strcmp(type, "BOOKMARK") == 0)
		t = DS_KUBE_BOOKMARK;
	else
		goto out;
	set_rv(ws, obj);
	ws->events++;
	if (ws->fn(ws->user, t, obj) != 0) {
		ws->stopped = true;
		rc = 1;
	}
out:
	json_decref(ev);
	return rc;
}

static bool stop_set(const struct ds_kube_watch_opts *o)
{
	return o->stop && atomic_load(o->stop);
}

/* Sleep in small steps so `stop` is noticed. */
static void nap(const struct ds_kube_watch_opts *o, long ms)
{
	while (ms > 0 && !stop_set(o)) {
		long step = ms > 100 ? 100 : ms;
		struct timespec ts = {0, step * 1000000L};
		nanosleep(&ts, NULL);
		ms -= step;
	}
}

/*
 * Backoff jitter in [0,1): xorshift64* on the client's own state under its own
 * lock, so the threads sharing a client, and the application's rand(), do not
 * disturb each other.
 */
static double jitter01(ds_kube *k)
{
	uint64_t x;

	pthread_mutex_lock(&k->jitter_lock);
	x = k->jitter;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	k->jitter = x;
	pthread_mutex_unlock(&k->jitter_lock);
	return (double)((x * 0x2545f4914f6cdd1dULL) >> 11) / 9007199254740992.0; /* 2^53 */
}

/* What one step of a watch came to. */
enum watch_step {
	STEP_ON,     /* listed, or the stream ended normally: go on watching */
	STEP_RELIST, /* our resourceVersion is too old (410) */
	STEP_STOP,   /* the callback or `stop` ended it */
	STEP_FAILED, /* *rc: retry after a backoff unless retrying cannot help */
	STEP_FATAL,  /* *rc: an ERROR event no retry can fix */
};

/* The list a watch starts from, handed to the callback as SYNC. */
static enum watch_step watch_list(ds_kube *k, const struct ds_kube_resource *res, const char *ns,
				  const struct ds_kube_watch_opts *o, struct watch_state *ws,
				  int *rc, ds_kube_error *ke)
{
	struct ds_kube_list_opts lo = {o->label_selector, o->field_selector, NULL, NULL, 500};
	json_t *list = NULL;
	int r;

	r = ds_kube_list(k, res, ns, &lo, &list, NULL, ke);
	if (r < 0) {
		*rc = r;
		return STEP_FAILED;
	}
	set_rv(ws, list);
	r = ws->fn(ws->user, DS_KUBE_SYNC, list);
	json_decref(list);
	return r != 0 ? STEP_STOP : STEP_ON;
}

/* One watch request from ws->rv, until the server or the callback ends it. */
static enum watch_step watch_stream(ds_kube *k, const struct ds_kube_resource *res, const char *ns,
				    const struct ds_kube_watch_opts *o, struct watch_state *ws,
				    int *rc, ds_kube_error *ke)
{
	struct ds_kube_request req = {"GET", NULL, NULL, NULL, 0};
	ds_str b;
	char num[32];
	char *path = NULL;
	int r;

	ds_str_init(&b, KUBE_MAX_PATH);
	ds_kube_sb_path(&b, res, ns, NULL, NULL);
	ds_kube_sb_q(&b, "watch", "true");
	ds_kube_sb_q(&b, "resourceVersion", ws->rv);
	if (o->bookmarks)
		ds_kube_sb_q(&b, "allowWatchBookmarks", "true");
	ds_kube_sb_q(&b, "labelSelector", o->label_selector);
	ds_kube_sb_q(&b, "fieldSelector", o->field_selector);
	snprintf(num, sizeof(num), "%d", o->timeout_seconds);
	ds_kube_sb_q(&b, "timeoutSeconds", num);
	if ((r = ds_kube_sb_done(&b, &path)) < 0) {
		*rc = r;
		ds_kube_error_set(ke, 0, "watch %s: %s", res->resource,
				  r == -E2BIG ? "request path too long" : "out of memory");
		return STEP_FATAL;
	}
	req.path = path;
	ws->gone = ws->stopped = ws->failed = false;
	ws->events = 0;
	r = ds_kube_transport_stream(k->t, &req, on_line, ws, o->stop, ke);
	free(path);
	if (ws->stopped || (r == 1 && stop_set(o)))
		return STEP_STOP;
	if (ws->gone || r == -EIDRM)
		return STEP_RELIST;
	if (ws->failed) {
		if (ke)
			*ke = ws->err;
		*rc = ds_kube_error_errno(ws->err.code, ws->err.reason);
		return ds_kube_error_is_transient(ws->err.code) ? STEP_FAILED : STEP_FATAL;
	}
	if (r >= 0)
		return STEP_ON; /* the server ended the stream (timeoutSeconds, restart) */
	*rc = r;
	return STEP_FAILED;
}

/* Errors a retry cannot fix. */
static bool watch_fatal(int rc)
{
	return rc == -EPERM || rc == -ENOENT || rc == -EACCES || rc == -EINVAL ||
	       rc == -EKEYREJECTED || rc == -ENOMEM;
}

int ds_kube_watch(ds_kube *k, const struct ds_kube_resource *res, const char *ns,
		  const struct ds_kube_watch_opts *opts, ds_kube_watch_fn fn, void *user,
		  ds_kube_error *ke)
{
	struct ds_kube_watch_opts o = {0};
	struct ds_kube_transport_opts topts;
	struct watch_state ws;
	bool need_list, streamed = false;
	int failures = 0, rc = 0;

	rc = ds_kube_need_ns(res, ns, "watch", ke);
	if (rc < 0)
		return rc;
	ds_kube_transport_opts_init(&topts);
	if (opts)
		o = *opts;
	if (o.timeout_seconds <= 0)
		o.timeout_seconds = 300;
	if (o.max_failures <= 0)
		o.max_failures = 10;
	if (o.reconnects)
		*o.reconnects = 0;
	if (o.relists)
		*o.relists = 0;
	memset(&ws, 0, sizeof(ws));
	ws.fn = fn;
	ws.user = user;
	need_list = !o.resource_version || !o.resource_version[0];
	if (!need_list)
		snprintf(ws.rv, sizeof(ws.rv), "%s", o.resource_version);
	while (!stop_set(&o)) {
		enum watch_step step = STEP_ON;

		if (need_list)
			step = watch_list(k, res, ns, &o, &ws, &rc, ke);
		if (step == STEP_ON) {
			need_list = false;
			if (streamed && o.reconnects)
				(*o.reconnects)++;
			streamed = true;
			step = watch_stream(k, res, ns, &o, &ws, &rc, ke);
		}
		switch (step) {
		case STEP_ON:
			failures = 0;
			continue;
		case STEP_RELIST:
			if (o.fail_on_gone) {
				/* the caller relists itself (page by page) */
				ds_kube_error_set(ke, 410, "resourceVersion %s is too old", ws.rv);
				if (ke)
					snprintf(ke->reason, sizeof(ke->reason), "Expired");
				return -EIDRM;
			}
			need_list = true;
			if (o.relists)
				(*o.relists)++;
			failures = 0;
			continue;
		case STEP_STOP:
			return 0;
		case STEP_FATAL:
			return rc;
		case STEP_FAILED:
			break;
		}
		if (watch_fatal(rc) || ++failures >= o.max_failures)
			return rc;
		nap(&o, ds_kube_backoff_ms(&topts, failures - 1, ke ? ke->retry_after : -1,
					   jitter01(k)));
	}
	return 0;
}
