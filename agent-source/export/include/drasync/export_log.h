#ifndef DRASYNC_EXPORT_LOG_H
#define DRASYNC_EXPORT_LOG_H

/*
 * The source agent's logging of the exporter's events: one logfmt line per
 * event, as ds_log() writes it (the e2e tests read these lines).
 */

#include "drasync/exporter.h"

/** A ds_exporter_config.on_event callback writing each event with ds_log(); ud unused. */
void ds_export_log_event(void *ud, const ds_exporter_event *ev);

#endif
