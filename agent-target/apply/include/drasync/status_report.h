#ifndef DRASYNC_STATUS_REPORT_H
#define DRASYNC_STATUS_REPORT_H

/* `drasync-target status`'s report of a ledger (ds_ledger_status_read_mapped()). */

#include "drasync/ledger_status.h"
#include "drasync/target_config.h"

#include <stdio.h>

/**
 * Why the target needs an operator's attention (objects failed or wait,
 * workloads failed their last verification), or NULL when healthy.
 */
const char *ds_status_report_attention(const ds_ledger_status *st);

/**
 * The report as text on out; conf is the configuration's mode, shown for the
 * namespaces the ledger records none for.
 */
void ds_status_report_text(FILE *out, const ds_ledger_status *st, const char *ledger,
			   enum ds_mode conf);

/** The report as one JSON object on out, with healthy and attention. @return 0 or -ENOMEM */
int ds_status_report_json(FILE *out, const ds_ledger_status *st, const char *ledger,
			  enum ds_mode conf);

#endif
