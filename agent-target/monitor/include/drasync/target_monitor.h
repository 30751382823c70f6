#ifndef DRASYNC_TARGET_MONITOR_H
#define DRASYNC_TARGET_MONITOR_H

/*
 * What `drasync-target run` serves on metrics.listen: /metrics (Prometheus
 * text), /healthz, /readyz and the status page at /. The counters of events
 * (objects applied, rewrites, verifications, link events) are fed by the run
 * command's callbacks; the rest is read at each scrape from the thread-safe
 * getters of the applier and verifier and from the ledger (ledger_status.h,
 * on its own read-only connection). Every function is safe from any thread.
 *
 * The status page's mapping inventory (inventory.h) parses every workload
 * payload of the ledger, so the monitor keeps the last one it built and
 * rebuilds it on the HTTP thread that asks only once it is older than
 * inventory_max_age_ms or the configuration in force changed; concurrent
 * requests wait for that one rebuild and share it.
 */

#include "drasync/applier.h"
#include "drasync/err.h"
#include "drasync/kube_client.h"
#include "drasync/metrics.h"
#include "drasync/link_stats.h"
#include "drasync/quota.h"
#include "drasync/target_config.h"
#include "drasync/transport.h"
#include "drasync/verifier.h"

#include <stdint.h>

typedef struct ds_target_monitor ds_target_monitor;

/* How long the status page serves an inventory before reading the ledger again. */
#define DS_TARGET_MONITOR_INVENTORY_MAX_AGE_MS 5000

typedef struct ds_target_monitor_config {
	const char *ledger_path;     /* copied */
	const char *config_path;     /* copied; shown on the status page */
	ds_kube *kube;		     /* borrowed: /readyz probes its API server */
	const ds_target_config *cfg; /* the monitor takes a reference of its own */
	int inventory_max_age_ms;    /* <= 0: DS_TARGET_MONITOR_INVENTORY_MAX_AGE_MS */
} ds_target_monitor_config;

/** Define the target's metrics in m (for tests: the list the agent exposes). */
int ds_target_metrics_define(ds_metrics *m, ds_err *err);

/** A monitor; it serves nothing until ds_target_monitor_serve(). */
int ds_target_monitor_new(ds_target_monitor **out, const ds_target_monitor_config *cfg,
			  ds_err *err);
/** Stop serving (the server reads the applier and verifier): call it before
 * the agent is freed, and free the monitor after the agent, whose threads
 * report link events to it until then. NULL-safe; idempotent. */
void ds_target_monitor_stop(ds_target_monitor *m);
/** Stops the server first. NULL-safe. */
void ds_target_monitor_free(ds_target_monitor *m);

/** The applier and verifier whose counters a scrape reads (borrowed; either may be NULL). */
void ds_target_monitor_attach(ds_target_monitor *m, ds_applier *a, ds_verifier *v);

/** The receiver's quotas, for the per-source backlog, bytes and throttled metrics (borrowed). */
void ds_target_monitor_attach_quota(ds_target_monitor *m, ds_quota *q);
/** The receiver's link figures, for the wire metrics and the status page (borrowed). */
void ds_target_monitor_attach_link(ds_target_monitor *m, const ds_link_stats *st);

/** The configuration in force (SIGHUP): the monitor takes a reference to cfg and drops the
 *  one it held once no request still reads it. Safe from any thread. */
void ds_target_monitor_set_config(ds_target_monitor *m, const ds_target_config *cfg);

/** The receiver is bound on endpoint (copied): one condition of /readyz. */
void ds_target_monitor_set_listening(ds_target_monitor *m, const char *endpoint);

/** Count one outcome of the applier (its event callback). */
void ds_target_monitor_on_apply(ds_target_monitor *m, const ds_applier_event *ev);

/** Count one verification result. */
void ds_target_monitor_on_verified(ds_target_monitor *m, const ds_verify_item *it);

/** A planned relocation ended (enum ds_relocation_state): drasync_target_relocations_total. */
void ds_target_monitor_on_relocation(ds_target_monitor *m, int state);

/** Count one link event (a ds_transport_event_fn; ud: the monitor). */
void ds_target_monitor_on_link_event(void *ud, const ds_transport_event *ev);
/** The receiver's count of unauthenticated connections changed (its monitor thread). */
void ds_target_monitor_on_link_unauth(void *ud, unsigned n);

/** Serve on listen ("127.0.0.1:9450"). @return 0, or as ds_http_server_start() */
int ds_target_monitor_serve(ds_target_monitor *m, const char *listen, ds_err *err);

/** How many times the status page read the inventory from the ledger (for tests). */
uint64_t ds_target_monitor_inventory_builds(ds_target_monitor *m);

/** The registry (borrowed). */
ds_metrics *ds_target_monitor_metrics(ds_target_monitor *m);

#endif
