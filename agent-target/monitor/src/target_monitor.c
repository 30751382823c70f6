#include "drasync/target_monitor.h"

#include "drasync/relocation.h"

#include "drasync/clock.h"
#include "drasync/html.h"
#include "drasync/http_server.h"
#include "drasync/inventory.h"
#include "drasync/kube_probe.h"
#include "drasync/ledger_compact.h"
#include "drasync/ledger_status.h"
#include "drasync/namespace_mode.h"
#include "drasync/source_grants.h"
#include "drasync/status_page.h"
#include "drasync/version.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Seconds: an object's apply from the pass taking it to its outcome. */
static const double apply_buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
				       1,     2.5,  5,	   10,	 30,  60,   300};

static const ds_metric_def defs[] = {
    {"drasync_build_info", DS_METRIC_GAUGE, "The agent and its version (always 1).",
     "agent,version", NULL, 0},
    {"drasync_target_objects_applied_total", DS_METRIC_COUNTER,
     "Objects the applier decided, by kind and result (applied, unchanged: already "
     "applied, no API call; waiting, failed, held, skipped, deleted, kept, refused).",
     "kind,result", NULL, 0},
    {"drasync_target_recreated_total", DS_METRIC_COUNTER,
     "Objects deleted and created again on the target because an immutable field changed "
     "(a pod spec, a claim's spec, a PodGroup's resourceClaims), by kind.",
     "kind", NULL, 0},
    {"drasync_target_refused_total", DS_METRIC_COUNTER,
     "Records refused because they are outside what the target grants their source (SPEC "
     "section 5), by source and reason (namespace, pod_security, name, reference, kind, "
     "exists, owner); nothing of them reached the API server.",
     "source,reason", NULL, 0},
    {"drasync_target_apply_duration_seconds", DS_METRIC_HISTOGRAM,
     "Seconds from the applier's pass taking an object to its outcome being in the ledger "
     "(objects that needed an API call).",
     "", apply_buckets, sizeof(apply_buckets) / sizeof(apply_buckets[0])},
    {"drasync_target_apply_passes_total", DS_METRIC_COUNTER, "Applier passes.", "", NULL, 0},
    {"drasync_target_apply_api_writes_total", DS_METRIC_COUNTER,
     "Writes (apply, delete) the applier sent to the API server.", "", NULL, 0},
    {"drasync_target_apply_api_reads_total", DS_METRIC_COUNTER,
     "Reads (get) the applier sent to the API server.", "", NULL, 0},
    {"drasync_target_apply_retries_total", DS_METRIC_COUNTER,
     "Objects the applier put back to try again later after a transient failure (429, 5xx, "
     "timeout, reset connection) that the API client's own retries did not overcome.",
     "", NULL, 0},
    {"drasync_target_apply_ledger_full_total", DS_METRIC_COUNTER,
     "Applier passes rolled back because the ledger's filesystem was full (each is tried "
     "again).",
     "", NULL, 0},
    {"drasync_target_kube_requests_total", DS_METRIC_COUNTER,
     "Requests sent to the target's API server, retries included.", "", NULL, 0},
    {"drasync_target_kube_retries_total", DS_METRIC_COUNTER,
     "Requests the API client sent again after a 429 (honouring Retry-After), a 5xx, a "
     "timeout or a reset connection.",
     "", NULL, 0},
    {"drasync_target_objects", DS_METRIC_GAUGE,
     "Objects in the ledger by apply state (pending, applied, waiting, failed, held, skipped, "
     "deleted, kept, refused).",
     "state", NULL, 0},
    {"drasync_target_ledger_bytes", DS_METRIC_GAUGE,
     "Bytes of the ledger on disk: ledger.db and its write-ahead log.", "", NULL, 0},
    {"drasync_target_ledger_records", DS_METRIC_GAUGE,
     "Records the ledger holds (what compaction left: the live objects' and those not "
     "applied or reported yet).",
     "", NULL, 0},
    {"drasync_target_ledger_compacted_rows_total", DS_METRIC_COUNTER,
     "Rows compaction deleted from the ledger, by table (records, manifests).", "table", NULL, 0},
    {"drasync_target_ledger_compacted_bytes_total", DS_METRIC_COUNTER,
     "Bytes the ledger file shrank by through compaction (incremental vacuum).", "", NULL, 0},
    {"drasync_target_ledger_unapplied_records", DS_METRIC_GAUGE,
     "Records committed in the ledger and not applied yet, all sources.", "", NULL, 0},
    {"drasync_target_source_unapplied_records", DS_METRIC_GAUGE,
     "Replication lag in records: committed from this source and not applied yet.", "source", NULL,
     0},
    {"drasync_target_source_lag_seconds", DS_METRIC_GAUGE,
     "Replication lag in seconds: how long the oldest record of this source not applied yet "
     "has waited (0: none waits).",
     "source", NULL, 0},
    {"drasync_target_source_committed_seq", DS_METRIC_GAUGE,
     "The highest record sequence number of this source committed in the ledger.", "source", NULL,
     0},
    {"drasync_target_source_last_contact_timestamp_seconds", DS_METRIC_GAUGE,
     "When this source last committed records or opened a session (Unix time).", "source", NULL, 0},
    {"drasync_target_source_backlog_records", DS_METRIC_GAUGE,
     "The unapplied backlog of this source as the receiver counts it for its quota "
     "(maxUnappliedRecords).",
     "source", NULL, 0},
    {"drasync_target_source_ledger_bytes", DS_METRIC_GAUGE,
     "Payload bytes of this source's records held in the ledger, as the receiver counts them "
     "for its quota (maxLedgerBytes).",
     "source", NULL, 0},
    {"drasync_target_source_throttled", DS_METRIC_GAUGE,
     "1 while this source gets no credit because it is over a quota (the source_throttled "
     "event says which), else 0.",
     "source", NULL, 0},
    {"drasync_target_namespaces", DS_METRIC_GAUGE,
     "Target namespaces of the ledger by mode (active, standby).", "mode", NULL, 0},
    {"drasync_target_mapping_rewrites_total", DS_METRIC_COUNTER,
     "Changes the DRA mapping made to objects applied, by type (rewrite, split, attach, "
     "deviceclass, resource) and the rule that made them.",
     "type,rule", NULL, 0},
    {"drasync_target_verifications_total", DS_METRIC_COUNTER,
     "Workload verifications finished by the verifier, by result (verified, not_verified).",
     "result", NULL, 0},
    {"drasync_target_relocations_total", DS_METRIC_COUNTER,
     "Planned relocations the sources asked for, by outcome (active: failed over and "
     "verified, failed, refused: not granted, returned: its source runs the namespace "
     "again and the target namespace went back to standby).",
     "outcome", NULL, 0},
    {"drasync_target_verifier_checks_total", DS_METRIC_COUNTER,
     "Checks the verifier made on the cluster.", "", NULL, 0},
    {"drasync_target_verifier_pending_workloads", DS_METRIC_GAUGE,
     "Workloads applied and not verified yet.", "", NULL, 0},
    {"drasync_target_workloads_last_verification", DS_METRIC_GAUGE,
     "Workloads by the result of their last verification (verified, not_verified).", "result", NULL,
     0},
    {"drasync_target_last_verification_timestamp_seconds", DS_METRIC_GAUGE,
     "When a workload was last verified or found not verified (Unix time; 0: never).", "", NULL, 0},
    {"drasync_target_link_sessions_total", DS_METRIC_COUNTER,
     "Sessions sources opened on the link (a source's reconnect opens one).", "", NULL, 0},
    {"drasync_target_link_refused_total", DS_METRIC_COUNTER,
     "Peers refused on the link, by reason (zap_refused: key not authorized, "
     "session_refused, handshake_failed, source_revoked, protocol_error).",
     "reason", NULL, 0},
    {"drasync_target_link_conns_refused_total", DS_METRIC_COUNTER,
     "TCP connections to the link closed at once because too many were unauthenticated, by "
     "reason (unauth_total: link.maxUnauthenticated, unauth_per_address: "
     "link.maxUnauthenticatedPerAddress).",
     "reason", NULL, 0},
    {"drasync_target_link_unauthenticated_connections", DS_METRIC_GAUGE,
     "TCP connections to the link not through their CURVE handshake yet.", "", NULL, 0},
    {"drasync_target_link_events_total", DS_METRIC_COUNTER,
     "Every event of the link (what the log calls event=...), by event.", "event", NULL, 0},
    /* the wire's figures (link_stats.h) */
    {"drasync_target_link_bytes_total", DS_METRIC_COUNTER,
     "Bytes of the link's frames since the agent started, by direction (sent, received); "
     "CURVE's framing aside.",
     "direction", NULL, 0},
    {"drasync_target_link_json_bytes_total", DS_METRIC_COUNTER,
     "JSON bytes of the records received (their payloads uncompressed).", "", NULL, 0},
    {"drasync_target_link_wire_ratio", DS_METRIC_GAUGE,
     "Link bytes (both directions) per JSON byte received since the agent started (0: none "
     "yet).",
     "", NULL, 0},
    {"drasync_target_ready", DS_METRIC_GAUGE,
     "1 when /readyz answers 200: bound, ledger readable, API server reachable.", "", NULL, 0},
};

struct ds_target_monitor {
	char *ledger_path, *config_path;
	ds_kube *kube;
	ds_target_config *cfg; /* a reference of the monitor's own */
	ds_metrics *mx;
	ds_kube_probe *probe;
	ds_http_server *http;
	pthread_mutex_t lock; /* guards cfg, cfg_gen, applier, verifier, listening */
	uint64_t cfg_gen;     /* counts the configurations put in force */
	ds_applier *applier;
	ds_verifier *verifier;
	ds_quota *quota;	   /* the receiver's, once it listens */
	const ds_link_stats *link; /* the receiver's figures, once it listens */
	char listening[256];
	/* The status page's inventory: held through a rebuild and the render that reads it, so
	 * concurrent requests share one rebuild. */
	pthread_mutex_t inv_lock; /* guards the inv_* fields */
	int64_t inv_max_age_ms;
	ds_inventory *inv;    /* NULL: inv_error says why */
	uint64_t inv_cfg_gen; /* the configuration it was read under */
	char inv_error[256];
	int64_t inv_built_mono; /* ms, ds_clock_mono_ms() */
	int64_t inv_built_wall; /* seconds since the epoch, shown on the page */
	uint64_t inv_builds;
};

int ds_target_metrics_define(ds_metrics *m, ds_err *err)
{
	return ds_metrics_define_all(m, defs, sizeof(defs) / sizeof(defs[0]), err);
}

static const char *map_ns(void *ud, const char *source_ns)
{
	return ds_target_config_map_namespace(ud, source_ns);
}

/* The configuration in force, a reference the caller drops: a reload may replace it meanwhile;
 * gen (may be NULL) says which one it is. */
static ds_target_config *config_get_gen(ds_target_monitor *m, uint64_t *gen)
{
	ds_target_config *cfg;

	pthread_mutex_lock(&m->lock);
	cfg = ds_target_config_ref(m->cfg);
	if (gen)
		*gen = m->cfg_gen;
	pthread_mutex_unlock(&m->lock);
	return cfg;
}

static ds_target_config *config_get(ds_target_monitor *m)
{
	return config_get_gen(m, NULL);
}

static int read_status(ds_target_monitor *m, size_t max_items, ds_ledger_status **st, ds_err *err)
{
	ds_target_config *cfg = config_get(m);
	int rc;

	rc = ds_ledger_status_read_mapped(m->ledger_path, max_items, cfg ? map_ns : NULL, cfg, st,
					  err);
	ds_target_config_unref(cfg);
	return rc;
}

/* /readyz's conditions, in order; why says the first that fails. */
static bool ready(ds_target_monitor *m, char *why, size_t size)
{
	ds_ledger_status *st = NULL;
	char listening[256], probe[300];
	ds_err err = {0};
	int rc;

	pthread_mutex_lock(&m->lock);
	snprintf(listening, sizeof(listening), "%s", m->listening);
	pthread_mutex_unlock(&m->lock);
	if (!listening[0]) {
		snprintf(why, size, "the link is not bound yet");
		return false;
	}
	rc = read_status(m, 0, &st, &err);
	ds_ledger_status_free(st);
	if (rc < 0) {
		snprintf(why, size, "ledger %s: %s", m->ledger_path, err.msg);
		return false;
	}
	if (!ds_kube_probe_reachable(m->probe, probe, sizeof(probe))) {
		snprintf(why, size, "%s", probe);
		return false;
	}
	snprintf(why, size, "ready: listening on %s, ledger open, API server reachable", listening);
	return true;
}

static void quota_row(void *ud, const ds_quota_row *row)
{
	ds_metrics *mx = ud;
	const char *lv[] = {row->source};

	ds_metrics_set(mx, "drasync_target_source_backlog_records", lv, (double)row->usage.backlog);
	ds_metrics_set(mx, "drasync_target_source_ledger_bytes", lv,
		       (double)row->usage.ledger_bytes);
	ds_metrics_set(mx, "drasync_target_source_throttled", lv,
		       row->throttled != DS_QUOTA_NONE ? 1 : 0);
}

static void collect(void *ud, ds_metrics *mx)
{
	ds_target_monitor *m = ud;
	ds_applier_stats as;
	ds_ledger_status *st = NULL;
	ds_applier *a;
	ds_verifier *v;
	ds_quota *q;
	uint64_t unapplied = 0, modes[DS_MODE_MAX] = {0};
	ds_target_config *cfg = config_get(m);
	int64_t now = ds_clock_wall_ms() / 1000;
	char why[400];

	pthread_mutex_lock(&m->lock);
	a = m->applier;
	v = m->verifier;
	q = m->quota;
	pthread_mutex_unlock(&m->lock);
	if (q)
		ds_quota_each(q, quota_row, mx);
	{ /* the wire's figures */
		ds_link_figures f;
		pthread_mutex_lock(&m->lock);
		ds_link_stats_read(m->link, &f);
		pthread_mutex_unlock(&m->lock);
		ds_metrics_set(mx, "drasync_target_link_bytes_total", (const char *[]){"sent"},
			       (double)f.sent);
		ds_metrics_set(mx, "drasync_target_link_bytes_total", (const char *[]){"received"},
			       (double)f.received);
		ds_metrics_set(mx, "drasync_target_link_json_bytes_total", NULL, (double)f.json);
		ds_metrics_set(mx, "drasync_target_link_wire_ratio", NULL,
			       ds_link_figures_ratio(f.sent, f.received, f.json));
	}
	if (a) {
		ds_applier_stats_get(a, &as);
		ds_metrics_set(mx, "drasync_target_apply_passes_total", NULL, (double)as.passes);
		ds_metrics_set(mx, "drasync_target_apply_api_writes_total", NULL,
			       (double)as.api_writes);
		ds_metrics_set(mx, "drasync_target_apply_api_reads_total", NULL,
			       (double)as.api_reads);
		ds_metrics_set(mx, "drasync_target_apply_retries_total", NULL, (double)as.retried);
		ds_metrics_set(mx, "drasync_target_apply_ledger_full_total", NULL,
			       (double)as.ledger_full);
		ds_metrics_set(mx, "drasync_target_ledger_compacted_rows_total",
			       (const char *[]){"records"}, (double)as.compacted_records);
		ds_metrics_set(mx, "drasync_target_ledger_compacted_rows_total",
			       (const char *[]){"manifests"}, (double)as.compacted_manifests);
		ds_metrics_set(mx, "drasync_target_ledger_compacted_bytes_total", NULL,
			       (double)as.compacted_bytes);
	}
	/* Counted where the ingest commits them (relocation.h), not by a callback. */
	ds_metrics_set(mx, "drasync_target_relocations_total",
		       (const char *[]){ds_relocation_state_name(DS_RELOCATION_RETURNED)},
		       (double)ds_relocation_returned_total());
	ds_metrics_set(mx, "drasync_target_ledger_bytes", NULL,
		       (double)ds_ledger_file_bytes(m->ledger_path));
	if (m->kube) {
		struct ds_kube_transport_stats ts;

		ds_kube_transport_stats(ds_kube_get_transport(m->kube), &ts);
		ds_metrics_set(mx, "drasync_target_kube_requests_total", NULL, (double)ts.requests);
		ds_metrics_set(mx, "drasync_target_kube_retries_total", NULL, (double)ts.retries);
	}
	if (v) {
		ds_metrics_set(mx, "drasync_target_verifier_checks_total", NULL,
			       (double)ds_verifier_checks(v));
		ds_metrics_set(mx, "drasync_target_verifier_pending_workloads", NULL,
			       (double)ds_verifier_pending(v));
	}
	if (read_status(m, 0, &st, NULL) == 0) {
		/* Recomputed from the ledger: a source or state gone is gone. */
		ds_metrics_clear(mx, "drasync_target_source_unapplied_records");
		ds_metrics_clear(mx, "drasync_target_source_lag_seconds");
		ds_metrics_clear(mx, "drasync_target_source_committed_seq");
		ds_metrics_clear(mx, "drasync_target_source_last_contact_timestamp_seconds");
		for (size_t i = 0; i < st->n_sources; i++) {
			const ds_ledger_source *s = &st->sources[i];
			const char *lv[] = {s->name};
			int64_t lag =
			    s->unapplied && s->oldest_unapplied && now > s->oldest_unapplied
				? now - s->oldest_unapplied
				: 0;

			unapplied += s->unapplied;
			ds_metrics_set(mx, "drasync_target_source_unapplied_records", lv,
				       (double)s->unapplied);
			ds_metrics_set(mx, "drasync_target_source_lag_seconds", lv, (double)lag);
			ds_metrics_set(mx, "drasync_target_source_committed_seq", lv,
				       (double)s->committed_seq);
			ds_metrics_set(mx, "drasync_target_source_last_contact_timestamp_seconds",
				       lv, (double)s->last_contact);
		}
		ds_metrics_set(mx, "drasync_target_ledger_unapplied_records", NULL,
			       (double)unapplied);
		ds_metrics_set(mx, "drasync_target_ledger_records", NULL, (double)st->records);
		for (int s = 1; s < DS_APPLY_STATE_MAX; s++)
			ds_metrics_set(
			    mx, "drasync_target_objects",
			    (const char *[]){ds_apply_state_name((enum ds_apply_state)s)},
			    (double)st->states[s]);
		for (size_t i = 0; i < st->n_namespaces; i++) {
			const ds_ledger_namespace *n = &st->namespaces[i];
			enum ds_mode mode = n->recorded ? n->mode
					    : cfg	? ds_target_config_mode(cfg)
							: DS_MODE_STANDBY;
			if (mode < DS_MODE_MAX)
				modes[mode]++;
		}
		for (int i = 0; i < DS_MODE_MAX; i++)
			ds_metrics_set(mx, "drasync_target_namespaces",
				       (const char *[]){ds_namespace_mode_word((enum ds_mode)i)},
				       (double)modes[i]);
		ds_metrics_set(mx, "drasync_target_workloads_last_verification",
			       (const char *[]){"verified"}, (double)st->verified);
		ds_metrics_set(mx, "drasync_target_workloads_last_verification",
			       (const char *[]){"not_verified"}, (double)st->not_verified);
		ds_metrics_set(mx, "drasync_target_last_verification_timestamp_seconds", NULL,
			       (double)st->last_checked);
	}
	ds_ledger_status_free(st);
	ds_target_config_unref(cfg);
	ds_metrics_set(mx, "drasync_target_ready", NULL, ready(m, why, sizeof(why)) ? 1 : 0);
}

int ds_target_monitor_new(ds_target_monitor **out, const ds_target_monitor_config *cfg, ds_err *err)
{
	ds_target_monitor *m = calloc(1, sizeof(*m));
	int rc = -ENOMEM;

	if (!m)
		return ds_err_fallback(err, rc);
	pthread_mutex_init(&m->lock, NULL);
	pthread_mutex_init(&m->inv_lock, NULL);
	m->inv_max_age_ms = cfg->inventory_max_age_ms > 0 ? cfg->inventory_max_age_ms
							  : DS_TARGET_MONITOR_INVENTORY_MAX_AGE_MS;
	m->kube = cfg->kube;
	m->cfg = ds_target_config_ref(cfg->cfg);
	m->ledger_path = strdup(cfg->ledger_path);
	m->config_path = strdup(cfg->config_path ? cfg->config_path : "");
	if (!m->ledger_path || !m->config_path || ds_metrics_new(&m->mx) < 0)
		goto out;
	rc = ds_target_metrics_define(m->mx, err);
	if (rc < 0)
		goto out;
	ds_metrics_set(m->mx, "drasync_build_info", (const char *[]){"target", DS_VERSION}, 1);
	/* A probe answers within 2 s; a scrape and a readyz reuse it for 2 s. */
	rc = ds_kube_probe_new(&m->probe, cfg->kube, 2000, 2000, err);
	if (rc < 0)
		goto out;
	ds_metrics_set_collector(m->mx, collect, m);
	*out = m;
	m = NULL;
out:
	ds_target_monitor_free(m);
	return ds_err_fallback(err, rc);
}

void ds_target_monitor_stop(ds_target_monitor *m)
{
	if (!m)
		return;
	ds_http_server_free(m->http);
	m->http = NULL;
}

void ds_target_monitor_free(ds_target_monitor *m)
{
	if (!m)
		return;
	ds_target_monitor_stop(m);
	ds_kube_probe_free(m->probe);
	ds_metrics_free(m->mx);
	free(m->ledger_path);
	free(m->config_path);
	ds_target_config_unref(m->cfg);
	ds_inventory_free(m->inv);
	pthread_mutex_destroy(&m->inv_lock);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

void ds_target_monitor_attach(ds_target_monitor *m, ds_applier *a, ds_verifier *v)
{
	pthread_mutex_lock(&m->lock);
	m->applier = a;
	m->verifier = v;
	pthread_mutex_unlock(&m->lock);
}

void ds_target_monitor_attach_link(ds_target_monitor *m, const ds_link_stats *st)
{
	pthread_mutex_lock(&m->lock);
	m->link = st;
	pthread_mutex_unlock(&m->lock);
}

void ds_target_monitor_attach_quota(ds_target_monitor *m, ds_quota *q)
{
	pthread_mutex_lock(&m->lock);
	m->quota = q;
	pthread_mutex_unlock(&m->lock);
}

void ds_target_monitor_set_config(ds_target_monitor *m, const ds_target_config *cfg)
{
	ds_target_config *was;

	pthread_mutex_lock(&m->lock);
	was = m->cfg;
	m->cfg = ds_target_config_ref(cfg);
	m->cfg_gen++;
	pthread_mutex_unlock(&m->lock);
	ds_target_config_unref(was);
}

void ds_target_monitor_set_listening(ds_target_monitor *m, const char *endpoint)
{
	pthread_mutex_lock(&m->lock);
	snprintf(m->listening, sizeof(m->listening), "%s", endpoint ? endpoint : "");
	pthread_mutex_unlock(&m->lock);
}

/* "group/Kind/namespace/name" -> Kind; "" when the key has no kind. */
static void key_kind(const char *key, char *kind, size_t size)
{
	const char *a = key ? strchr(key, '/') : NULL, *b = a ? strchr(a + 1, '/') : NULL;
	size_t n = b ? (size_t)(b - a - 1) : 0;

	if (n >= size)
		n = size - 1;
	memcpy(kind, a ? a + 1 : "", n);
	kind[n] = '\0';
}

/* The rule a report entry names: "dra.resourceClaimMappings[0]"; "" when none. */
static void entry_rule(const ds_report_entry *e, char *rule, size_t size)
{
	const char *p = e->message ? strstr(e->message, "dra.") : NULL;
	size_t n = 0;

	if (e->type == DS_REPORT_DEVICE_CLASS) {
		snprintf(rule, size, "dra.deviceClassMappings");
		return;
	}
	while (p && p[n] &&
	       (p[n] == '.' || p[n] == '[' || p[n] == ']' || (p[n] >= '0' && p[n] <= '9') ||
		(p[n] >= 'a' && p[n] <= 'z') || (p[n] >= 'A' && p[n] <= 'Z')))
		n++;
	if (n >= size)
		n = size - 1;
	memcpy(rule, p ? p : "", n);
	rule[n] = '\0';
}

void ds_target_monitor_on_apply(ds_target_monitor *m, const ds_applier_event *ev)
{
	char kind[64];

	if (!m)
		return;

	key_kind(ev->key, kind, sizeof(kind));
	ds_metrics_add(
	    m->mx, "drasync_target_objects_applied_total",
	    (const char *[]){kind[0] ? kind : "unknown",
			     ev->unchanged ? "unchanged" : ds_apply_state_name(ev->state)},
	    1);
	if (ev->recreated)
		ds_metrics_add(m->mx, "drasync_target_recreated_total",
			       (const char *[]){kind[0] ? kind : "unknown"}, 1);
	if (ev->state == DS_APPLY_REFUSED && !ev->unchanged)
		ds_metrics_add(
		    m->mx, "drasync_target_refused_total",
		    (const char *[]){ev->source, ds_refusal_name((enum ds_refusal)ev->refusal)}, 1);
	if (ev->unchanged)
		return;
	ds_metrics_observe(m->mx, "drasync_target_apply_duration_seconds", NULL,
			   ev->seconds > 0 ? ev->seconds : 0);
	for (size_t i = 0; ev->report && i < ev->report_n; i++) {
		const ds_report_entry *e = ds_report_get(ev->report, ev->report_first + i);
		char rule[96];

		if (!e)
			break;
		if (e->type != DS_REPORT_REWRITE && e->type != DS_REPORT_SPLIT &&
		    e->type != DS_REPORT_ATTACH && e->type != DS_REPORT_DEVICE_CLASS &&
		    e->type != DS_REPORT_RESOURCE)
			continue;
		entry_rule(e, rule, sizeof(rule));
		ds_metrics_add(m->mx, "drasync_target_mapping_rewrites_total",
			       (const char *[]){ds_report_type_name(e->type), rule}, 1);
	}
}

void ds_target_monitor_on_verified(ds_target_monitor *m, const ds_verify_item *it)
{
	if (!m)
		return;
	ds_metrics_add(m->mx, "drasync_target_verifications_total",
		       (const char *[]){it->verified ? "verified" : "not_verified"}, 1);
}

void ds_target_monitor_on_relocation(ds_target_monitor *m, int state)
{
	if (!m)
		return;
	ds_metrics_add(m->mx, "drasync_target_relocations_total",
		       (const char *[]){ds_relocation_state_name((enum ds_relocation_state)state)},
		       1);
}

void ds_target_monitor_on_link_event(void *ud, const ds_transport_event *ev)
{
	ds_target_monitor *m = ud;
	static const char *const refused[] = {"zap_refused", "session_refused", "handshake_failed",
					      "source_revoked", "protocol_error"};
	char name[48];

	ds_transport_event_log(NULL, ev);
	if (!m)
		return;
	/* Event names are the link's own, a fixed set; bounded anyway. */
	snprintf(name, sizeof(name), "%s", ev->name);
	ds_metrics_add(m->mx, "drasync_target_link_events_total", (const char *[]){name}, 1);
	if (strcmp(ev->name, "session_open") == 0)
		ds_metrics_add(m->mx, "drasync_target_link_sessions_total", NULL, 1);
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		if (strcmp(ev->name, refused[i]) == 0)
			ds_metrics_add(m->mx, "drasync_target_link_refused_total",
				       (const char *[]){name}, 1);
	if (strcmp(ev->name, "conn_refused_unauth_total") == 0)
		ds_metrics_add(m->mx, "drasync_target_link_conns_refused_total",
			       (const char *[]){"unauth_total"}, 1);
	else if (strcmp(ev->name, "conn_refused_unauth_per_address") == 0)
		ds_metrics_add(m->mx, "drasync_target_link_conns_refused_total",
			       (const char *[]){"unauth_per_address"}, 1);
}

void ds_target_monitor_on_link_unauth(void *ud, unsigned n)
{
	ds_target_monitor *m = ud;

	if (m)
		ds_metrics_set(m->mx, "drasync_target_link_unauthenticated_connections", NULL,
			       (double)n);
}

/* ---- HTTP --------------------------------------------------------------------- */

static void get_metrics(void *ud, ds_http_reply *r)
{
	ds_target_monitor *m = ud;

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

/* With inv_lock held: the inventory read again from the ledger once it is older than
 * inv_max_age_ms or was read under another configuration than cfg (generation gen). */
static void inventory_refresh(ds_target_monitor *m, const ds_target_config *cfg, uint64_t gen)
{
	ds_inventory_opts io = {.ledger_path = m->ledger_path,
				.cfg = cfg,
				.kube = NULL,
				.no_kube_reason = "not checked by the status page "
						  "(drasync-target inventory checks)"};
	ds_inventory *inv = NULL;
	ds_err err = {0};

	if (m->inv_builds && m->inv_cfg_gen == gen &&
	    ds_clock_mono_ms() - m->inv_built_mono < m->inv_max_age_ms)
		return;
	ds_inventory_free(m->inv);
	m->inv = NULL;
	m->inv_cfg_gen = gen;
	m->inv_built_wall = ds_clock_wall_ms() / 1000;
	if (ds_inventory_read(&io, &inv, &err) == 0)
		m->inv = inv;
	snprintf(m->inv_error, sizeof(m->inv_error), "%s", err.msg);
	m->inv_built_mono = ds_clock_mono_ms();
	m->inv_builds++;
}

uint64_t ds_target_monitor_inventory_builds(ds_target_monitor *m)
{
	uint64_t n;

	pthread_mutex_lock(&m->inv_lock);
	n = m->inv_builds;
	pthread_mutex_unlock(&m->inv_lock);
	return n;
}

static void get_page(void *ud, ds_http_reply *r)
{
	ds_target_monitor *m = ud;
	uint64_t gen;
	ds_target_config *cfg = config_get_gen(m, &gen);
	ds_status_page p = {.config_path = m->config_path,
			    .ledger_path = m->ledger_path,
			    .cfg = cfg,
			    .now = ds_clock_wall_ms() / 1000};
	ds_ledger_status *st = NULL;
	ds_err lerr = {0};
	char why[400], listening[256];

	pthread_mutex_lock(&m->lock);
	snprintf(listening, sizeof(listening), "%s", m->listening);
	ds_link_stats_read(m->link, &p.wire);
	pthread_mutex_unlock(&m->lock);
	p.listen = listening;
	p.ready = ready(m, why, sizeof(why));
	p.not_ready = why;
	if (read_status(m, 100, &st, &lerr) == 0)
		p.st = st;
	p.ledger_error = lerr.msg;
	p.inventory_error = "no configuration";
	r->content_type = "text/html; charset=utf-8";
	pthread_mutex_lock(&m->inv_lock);
	if (cfg) {
		inventory_refresh(m, cfg, gen);
		p.inv = m->inv;
		p.inventory_error = m->inv_error;
		p.inventory_built = m->inv_built_wall;
	}
	ds_status_page_render(&r->body, &p);
	pthread_mutex_unlock(&m->inv_lock);
	ds_ledger_status_free(st);
	ds_target_config_unref(cfg);
}

int ds_target_monitor_serve(ds_target_monitor *m, const char *listen, ds_err *err)
{
	const ds_http_route routes[] = {
	    {"/metrics", get_metrics, m},
	    {"/healthz", get_healthz, m},
	    {"/readyz", get_readyz, m},
	    {"/", get_page, m},
	};

	return ds_http_server_start(&m->http, listen, routes, sizeof(routes) / sizeof(routes[0]),
				    err);
}

ds_metrics *ds_target_monitor_metrics(ds_target_monitor *m)
{
	return m->mx;
}
