#ifndef DRASYNC_INVENTORY_REPORT_H
#define DRASYNC_INVENTORY_REPORT_H

/* `drasync-target inventory`'s output of an inventory (ds_inventory_read()). */

#include "drasync/inventory.h"
#include "drasync/kube_client.h"

#include <jansson.h>
#include <stdio.h>

/**
 * The table on out (one row per reference, columns as wide as their widest
 * cell), the notes on the references that need a look, and once per reason
 * why a target's existence is unknown; config names the file in the hint to
 * -o yaml. @return 0 or -ENOMEM
 */
int ds_inventory_report_text(FILE *out, const ds_inventory *inv, const char *ledger,
			     const char *config);

/**
 * The inventory on out as format says: "text" (ds_inventory_report_text),
 * "json" (ds_inventory_report_json) or "yaml" (ds_inventory_rules_yaml).
 * @return 0, -EINVAL for another format, or -ENOMEM
 */
int ds_inventory_report(FILE *out, const ds_inventory *inv, const char *format, const char *ledger,
			const char *config);

/**
 * The target cluster inventory asks whether targets exist: --kubeconfig and
 * --context (NULL: not given), else the file's kubeconfig, else in-cluster,
 * with short timeouts (an operator waits). @return 0 with *out, or with *out
 * NULL and why set when the client cannot start; 1 no credentials found (why
 * says so: the exists column is unknown); a negative errno (err) when the
 * kubeconfig or context named on the command line cannot be used
 */
int ds_inventory_kube(const char *kubeconfig, const char *context, const ds_target_config *cfg,
		      ds_kube **out, char *why, size_t size, ds_err *err);

/** ds_inventory_json() with "ledger", on out. @return 0 or -ENOMEM */
int ds_inventory_report_json(FILE *out, const ds_inventory *inv, const char *ledger);

#endif
