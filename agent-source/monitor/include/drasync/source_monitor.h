#ifndef DRASYNC_SOURCE_MONITOR_H
#define DRASYNC_SOURCE_MONITOR_H

/*
 * What `drasync-source run` serves on metrics.listen: /metrics (Prometheus
 * text), /healthz and /readyz. The link's events and the passes are counted
 * from the run command's callbacks; the outbox and the target's results are
 * read at each scrape (export_status.h, its own read-only connection), the
 * acknowledgements from the sender's thread-safe getters. Every function is
 * safe from any thread.
 */

#include "drasync/err.h"
#include "drasync/exporter.h"
#include "drasync/kube_client.h"
#include "drasync/metrics.h"
#include "drasync/sender.h"
#include "drasync/transport.h"

#include <stdint.h>

typedef struct ds_source_monitor ds_source_monitor;

typedef struct ds_source_monitor_config {
	const char *state_dir; /* copied: the outbox is read from it */
	ds_kube *kube;	       /* borrowed: /readyz probes its API server */
} ds_source_monitor_config;

/** Define the source's metrics in m (for tests: the list the agent exposes). */
int ds_source_metrics_define(ds_metrics *m, ds_err *err);

int ds_source_monitor_new(ds_source_monitor **out, const ds_source_monitor_config *cfg,
			  ds_err *err);
/** Stops the server first. NULL-safe. */
/** Stop serving (the server reads the sender): call it before the agent is
 * freed, and free the monitor after the agent, whose sender reports link
 * events to it until then. NULL-safe; idempotent. */
void ds_source_monitor_stop(ds_source_monitor *m);
void ds_source_monitor_free(ds_source_monitor *m);

/** The sender whose acknowledgements a scrape reads (borrowed; NULL: none yet). */
void ds_source_monitor_attach(ds_source_monitor *m, ds_sender *s);

/** Records up to last_seq are in the outbox now (the exporter's on_pushed). */
void ds_source_monitor_on_pushed(ds_source_monitor *m, uint64_t last_seq);

/** One pass finished (rc 0 or its negative errno) after seconds. */
void ds_source_monitor_on_pass(ds_source_monitor *m, const ds_export_counts *c, int rc,
			       double seconds);

/** Count one link event and follow the session's state (a ds_transport_event_fn). */
void ds_source_monitor_on_link_event(void *ud, const ds_transport_event *ev);

/** Serve on listen ("127.0.0.1:9451"). @return 0, or as ds_http_server_start() */
int ds_source_monitor_serve(ds_source_monitor *m, const char *listen, ds_err *err);

/** The registry (borrowed). */
ds_metrics *ds_source_monitor_metrics(ds_source_monitor *m);

#endif
