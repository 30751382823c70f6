#ifndef DRASYNC_STATUS_PAGE_H
#define DRASYNC_STATUS_PAGE_H

/*
 * The target's status page: one self-contained HTML document (no script,
 * font, image or stylesheet from anywhere, for air-gapped sites), every value
 * escaped. It shows what `drasync-target status` and `inventory` read: the
 * sources and their lag, the namespaces and their mode, the objects waiting
 * or failed with the reason, the last verifications, the mapping inventory.
 */

#include "drasync/buf.h"
#include "drasync/inventory.h"
#include "drasync/ledger_status.h"
#include "drasync/link_stats.h"
#include "drasync/target_config.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct ds_status_page {
	const char *config_path, *ledger_path, *listen; /* any may be NULL */
	const ds_target_config *cfg;			/* mode in the file */
	const ds_ledger_status *st;			/* NULL: ledger_error says why */
	const char *ledger_error;
	const ds_inventory *inv; /* NULL: inventory_error says why */
	const char *inventory_error;
	int64_t inventory_built; /* when inv was read (seconds since the epoch); 0: not said */
	bool ready;
	const char *not_ready; /* why, when not ready */
	int64_t now;	       /* seconds since the epoch */
	ds_link_figures wire;  /* the link's bytes and the JSON they carried */
} ds_status_page;

/** Append the page to out. @return 0, or out's error */
int ds_status_page_render(ds_str *out, const ds_status_page *p);

#endif
