#include "drasync/source_monitor.h"

#include "drasync/clock.h"
#include "drasync/export_status.h"
#include "drasync/http_server.h"
#include "drasync/kube_probe.h"
#include "drasync/version.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const double pass_buckets[] = {0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800};

static const ds_metric_def defs[] = {
    {"drasync_build_info", DS_METRIC_GAUGE, "The agent and its version (always 1).",
     "agent,version", NULL, 0},
    {"drasync_source_records_pushed_total", DS_METRIC_COUNTER,
     "Records pushed into the outbox (the outbox's last sequence number; it starts again "
     "from 0 when the outbox is recreated).",
     "", NULL, 0},
    {"drasync_source_records_acknowledged_total", DS_METRIC_COUNTER,
     "Records the target acknowledged (committed in its ledger).", "", NULL, 0},
    {"drasync_source_outbox_backlog_records", DS_METRIC_GAUGE,
     "Replication lag in records: pushed into the outbox, not acknowledged by the target yet.", "",
     NULL, 0},
    {"drasync_source_lag_seconds", DS_METRIC_GAUGE,
     "Replication lag in seconds: how long the oldest record not acknowledged yet has waited "
     "(0: none waits).",
     "", NULL, 0},
    {"drasync_source_target_unapplied_records", DS_METRIC_GAUGE,
     "Records the target says it has committed and not applied yet (its last answer).", "", NULL,
     0},
    {"drasync_source_objects", DS_METRIC_GAUGE,
     "Live objects replicated, by kind and the target's result for their current version "
     "(awaiting: not acknowledged; committed: not applied yet; applied, waiting, held, failed, "
     "skipped).",
     "kind,result", NULL, 0},
    {"drasync_source_link_up", DS_METRIC_GAUGE, "1 while a session with the target is open.", "",
     NULL, 0},
    {"drasync_source_link_reconnects_total", DS_METRIC_COUNTER,
     "Sessions opened again after the first (the link went down and came back).", "", NULL, 0},
    {"drasync_source_link_events_total", DS_METRIC_COUNTER,
     "Every event of the link (what the log calls event=...), by event.", "event", NULL, 0},
    {"drasync_source_link_bandwidth_limit_bytes_per_second", DS_METRIC_GAUGE,
     "The link's bandwidth cap (target.bandwidth), bytes per second; 0: none.", "", NULL, 0},
    {"drasync_source_link_bandwidth_bytes_total", DS_METRIC_COUNTER,
     "Bytes of the Batch frames the sender put on the link (what the bandwidth cap meters).", "",
     NULL, 0},
    {"drasync_source_link_bandwidth_wait_seconds_total", DS_METRIC_COUNTER,
     "Seconds the sender held a batch back to stay under the bandwidth cap.", "", NULL, 0},
    /* the wire's figures (link_stats.h) */
    {"drasync_source_link_bytes_total", DS_METRIC_COUNTER,
     "Bytes of the link's frames since the agent started, by direction (sent, received); "
     "CURVE's framing aside.",
     "direction", NULL, 0},
    {"drasync_source_link_json_bytes_total", DS_METRIC_COUNTER,
     "JSON bytes of the records the link carried (their payloads uncompressed).", "", NULL, 0},
    {"drasync_source_link_wire_ratio", DS_METRIC_GAUGE,
     "Link bytes (both directions) per JSON byte carried since the agent started (0: none "
     "yet); compression with context makes it a fraction.",
     "", NULL, 0},
    {"drasync_source_passes_total", DS_METRIC_COUNTER,
     "Full or incremental passes (interval, cron, once), by result (ok, failed).", "result", NULL,
     0},
    {"drasync_source_pass_duration_seconds", DS_METRIC_HISTOGRAM, "Seconds a pass took.", "",
     pass_buckets, sizeof(pass_buckets) / sizeof(pass_buckets[0])},
    {"drasync_source_pass_objects_total", DS_METRIC_COUNTER,
     "Objects the passes handled, by outcome (listed, pushed, unchanged, skipped, "
     "tombstoned).",
     "outcome", NULL, 0},
    {"drasync_source_ready", DS_METRIC_GAUGE,
     "1 when /readyz answers 200: connected to the target, API server reachable.", "", NULL, 0},
};

#define PUSHES_MAX 1024

struct push {
	uint64_t last_seq;
	int64_t at_ms;
};

struct ds_source_monitor {
	char *state_dir;
	ds_metrics *mx;
	ds_kube_probe *probe;
	ds_http_server *http;
	pthread_mutex_t lock; /* guards what follows */
	ds_sender *sender;
	bool up;
	uint64_t sessions;
	char last_down[128];
	/* When records were pushed, oldest first, for the lag in seconds. */
	struct push pushes[PUSHES_MAX];
	size_t n_pushes;
};

int ds_source_metrics_define(ds_metrics *m, ds_err *err)
{
	return ds_metrics_define_all(m, defs, sizeof(defs) / sizeof(defs[0]), err);
}

static bool ready(ds_source_monitor *m, char *why, size_t size)
{
	char probe[300], down[128];
	bool up;

	pthread_mutex_lock(&m->lock);
	up = m->up;
	snprintf(down, sizeof(down), "%s", m->last_down);
	pthread_mutex_unlock(&m->lock);
	if (!up) {
		snprintf(why, size, "not connected to the target%s%s", down[0] ? ": " : "", down);
		return false;
	}
	if (!ds_kube_probe_reachable(m->probe, probe, sizeof(probe))) {
		snprintf(why, size, "%s", probe);
		return false;
	}
	snprintf(why, size, "ready: connected to the target, API server reachable");
	return true;
}

/* The oldest push holding a record after acked; drops those fully acknowledged. */
static double lag_seconds(ds_source_monitor *m, uint64_t acked, uint64_t last, int64_t now)
{
	size_t drop = 0;
	double lag = 0;

	pthread_mutex_lock(&m->lock);
	while (drop < m->n_pushes && m->pushes[drop].last_seq <= acked)
		drop++;
	memmove(m->pushes, m->pushes + drop, (m->n_pushes - drop) * sizeof(*m->pushes));
	m->n_pushes -= drop;
	/* Records an earlier run left unacknowledged: waiting since we know of them. */
	if (last > acked && m->n_pushes == 0)
		m->pushes[m->n_pushes++] = (struct push){last, now};
	if (last > acked && now > m->pushes[0].at_ms)
		lag = (double)(now - m->pushes[0].at_ms) / 1000.0;
	pthread_mutex_unlock(&m->lock);
	return lag;
}

static void collect(void *ud, ds_metrics *mx)
{
	ds_source_monitor *m = ud;
	ds_export_status *st = NULL;
	ds_sender *s;
	char why[400];
	bool up;

	pthread_mutex_lock(&m->lock);
	s = m->sender;
	up = m->up;
	pthread_mutex_unlock(&m->lock);
	ds_metrics_set(mx, "drasync_source_link_up", NULL, up ? 1 : 0);
	if (s) {
		ds_sender_bandwidth_stats bw;

		ds_metrics_set(mx, "drasync_source_target_unapplied_records", NULL,
			       (double)ds_sender_target_unapplied(s));
		ds_sender_bandwidth_stats_get(s, &bw);
		ds_metrics_set(mx, "drasync_source_link_bandwidth_limit_bytes_per_second", NULL,
			       (double)bw.rate);
		ds_metrics_set(mx, "drasync_source_link_bandwidth_bytes_total", NULL,
			       (double)bw.bytes);
		ds_metrics_set(mx, "drasync_source_link_bandwidth_wait_seconds_total", NULL,
			       bw.wait_seconds);
	}
	if (s) { /* the wire's figures */
		ds_link_figures f;
		ds_link_stats_read(ds_sender_link_stats(s), &f);
		ds_metrics_set(mx, "drasync_source_link_bytes_total", (const char *[]){"sent"},
			       (double)f.sent);
		ds_metrics_set(mx, "drasync_source_link_bytes_total", (const char *[]){"received"},
			       (double)f.received);
		ds_metrics_set(mx, "drasync_source_link_json_bytes_total", NULL, (double)f.json);
		ds_metrics_set(mx, "drasync_source_link_wire_ratio", NULL,
			       ds_link_figures_ratio(f.sent, f.received, f.json));
	}
	if (ds_export_status_read(m->state_dir, 0, &st, NULL) == 0) {
		uint64_t acked = st->outbox.acked_seq, last = st->outbox.last_seq;

		if (s && ds_sender_acked(s) > acked && ds_sender_acked(s) <= last)
			acked = ds_sender_acked(s);
		ds_metrics_set(mx, "drasync_source_records_pushed_total", NULL, (double)last);
		ds_metrics_set(mx, "drasync_source_records_acknowledged_total", NULL,
			       (double)acked);
		ds_metrics_set(mx, "drasync_source_outbox_backlog_records", NULL,
			       (double)(last > acked ? last - acked : 0));
		ds_metrics_set(mx, "drasync_source_lag_seconds", NULL,
			       lag_seconds(m, acked, last, ds_clock_wall_ms()));
		ds_metrics_clear(mx, "drasync_source_objects");
		for (size_t i = 0; i < st->n_kinds; i++) {
			const ds_index_kind_count *k = &st->kinds[i];
			const struct {
				const char *result;
				uint64_t n;
			} by[] = {{"awaiting", k->awaiting}, {"committed", k->ok},
				  {"applied", k->applied},   {"waiting", k->waiting},
				  {"held", k->held},	     {"failed", k->failed},
				  {"refused", k->refused},   {"skipped", k->skipped}};

			for (size_t j = 0; j < sizeof(by) / sizeof(by[0]); j++)
				ds_metrics_set(mx, "drasync_source_objects",
					       (const char *[]){k->kind, by[j].result},
					       (double)by[j].n);
		}
	}
	ds_export_status_free(st);
	ds_metrics_set(mx, "drasync_source_ready", NULL, ready(m, why, sizeof(why)) ? 1 : 0);
}

int ds_source_monitor_new(ds_source_monitor **out, const ds_source_monitor_config *cfg, ds_err *err)
{
	ds_source_monitor *m = calloc(1, sizeof(*m));
	int rc = -ENOMEM;

	if (!m)
		return ds_err_fallback(err, rc);
	pthread_mutex_init(&m->lock, NULL);
	m->state_dir = strdup(cfg->state_dir);
	if (!m->state_dir || ds_metrics_new(&m->mx) < 0)
		goto out;
	rc = ds_source_metrics_define(m->mx, err);
	if (rc < 0)
		goto out;
	ds_metrics_set(m->mx, "drasync_build_info", (const char *[]){"source", DS_VERSION}, 1);
	rc = ds_kube_probe_new(&m->probe, cfg->kube, 2000, 2000, err);
	if (rc < 0)
		goto out;
	ds_metrics_set_collector(m->mx, collect, m);
	*out = m;
	m = NULL;
out:
	ds_source_monitor_free(m);
	return ds_err_fallback(err, rc);
}

void ds_source_monitor_stop(ds_source_monitor *m)
{
	if (!m)
		return;
	ds_http_server_free(m->http);
	m->http = NULL;
}

void ds_source_monitor_free(ds_source_monitor *m)
{
	if (!m)
		return;
	ds_source_monitor_stop(m);
	ds_kube_probe_free(m->probe);
	ds_metrics_free(m->mx);
	free(m->state_dir);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

void ds_source_monitor_attach(ds_source_monitor *m, ds_sender *s)
{
	pthread_mutex_lock(&m->lock);
	m->sender = s;
	pthread_mutex_unlock(&m->lock);
}

void ds_source_monitor_on_pushed(ds_source_monitor *m, uint64_t last_seq)
{
	int64_t t = ds_clock_wall_ms();

	if (!m)
		return;

	pthread_mutex_lock(&m->lock);
	if (m->n_pushes && m->pushes[m->n_pushes - 1].last_seq >= last_seq)
		; /* nothing new */
	else if (m->n_pushes == PUSHES_MAX)
		/* Full: the last entry stands for more records, with its older time
		 * (the lag is over- rather than under-stated). */
		m->pushes[m->n_pushes - 1].last_seq = last_seq;
	else
		m->pushes[m->n_pushes++] = (struct push){last_seq, t};
	pthread_mutex_unlock(&m->lock);
}

void ds_source_monitor_on_pass(ds_source_monitor *m, const ds_export_counts *c, int rc,
			       double seconds)
{
	if (!m)
		return;
	ds_metrics_add(m->mx, "drasync_source_passes_total",
		       (const char *[]){rc < 0 ? "failed" : "ok"}, 1);
	ds_metrics_observe(m->mx, "drasync_source_pass_duration_seconds", NULL,
			   seconds > 0 ? seconds : 0);
	ds_metrics_add(m->mx, "drasync_source_pass_objects_total", (const char *[]){"listed"},
		       (double)c->listed);
	ds_metrics_add(m->mx, "drasync_source_pass_objects_total", (const char *[]){"pushed"},
		       (double)c->pushed);
	ds_metrics_add(m->mx, "drasync_source_pass_objects_total", (const char *[]){"unchanged"},
		       (double)c->unchanged);
	ds_metrics_add(m->mx, "drasync_source_pass_objects_total", (const char *[]){"skipped"},
		       (double)c->skipped);
	ds_metrics_add(m->mx, "drasync_source_pass_objects_total", (const char *[]){"tombstoned"},
		       (double)c->tombstoned);
}

void ds_source_monitor_on_link_event(void *ud, const ds_transport_event *ev)
{
	ds_source_monitor *m = ud;
	bool open = strcmp(ev->name, "session_open") == 0;
	bool down = strcmp(ev->name, "disconnected") == 0 ||
		    strcmp(ev->name, "hello_timeout") == 0 ||
		    strcmp(ev->name, "ack_timeout") == 0 || strcmp(ev->name, "goodbye") == 0 ||
		    strcmp(ev->name, "handshake_failed") == 0;
	char name[48];
	bool reconnect = false;

	if (!m)
		return;
	snprintf(name, sizeof(name), "%s", ev->name);
	ds_metrics_add(m->mx, "drasync_source_link_events_total", (const char *[]){name}, 1);
	pthread_mutex_lock(&m->lock);
	if (open) {
		reconnect = m->sessions++ > 0;
		m->up = true;
		m->last_down[0] = '\0';
	} else if (down) {
		m->up = false;
		snprintf(m->last_down, sizeof(m->last_down), "%s", ev->name);
	}
	pthread_mutex_unlock(&m->lock);
	if (reconnect)
		ds_metrics_add(m->mx, "drasync_source_link_reconnects_total", NULL, 1);
}

/* ---- HTTP --------------------------------------------------------------------- */

static void get_metrics(void *ud, ds_http_reply *r)
{
	ds_source_monitor *m = ud;

	r->content_type = "text/plain; version=0.0.4; charset=utf-8";
	ds_metrics_render(m->mx, &r->body);
}

static void get_healthz(void *ud, ds_http_reply *r)
{
	(void)ud;
	ds_str_adds(&r->body, "ok\n");
}

static void get_readyz(void *ud, ds_http_reply *r)
{
	char why[400];

	r->status = ready(ud, why, sizeof(why)) ? 200 : 503;
	ds_str_addf(&r->body, "%s\n", why);
}

int ds_source_monitor_serve(ds_source_monitor *m, const char *listen, ds_err *err)
{
	const ds_http_route routes[] = {
	    {"/metrics", get_metrics, m},
	    {"/healthz", get_healthz, m},
	    {"/readyz", get_readyz, m},
	};

	return ds_http_server_start(&m->http, listen, routes, sizeof(routes) / sizeof(routes[0]),
				    err);
}

ds_metrics *ds_source_monitor_metrics(ds_source_monitor *m)
{
	return m->mx;
}
