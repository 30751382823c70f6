#ifndef DRASYNC_TARGET_CONFIG_INTERNAL_H
#define DRASYNC_TARGET_CONFIG_INTERNAL_H

/* What target_config.c shares with the files that parse parts of it. */

#include "drasync/config_check.h"
#include "drasync/target_config.h"

#include <jansson.h>
#include <stdint.h>

/* The per-source quota defaults (`limits:`), before any sources[] entry overrides them. */
typedef struct ds_target_limits {
	uint64_t source_max_unapplied;	  /* default: the config's maxUnappliedRecords */
	uint64_t source_max_ledger_bytes; /* default 0: unlimited */
} ds_target_limits;

/** `limits:` (the mapping, at hand in w) into out. @return 0 or -EINVAL (err located) */
int ds_target_config_load_limits(ds_config_walk *w, const json_t *limits, ds_target_limits *out);

/** maxUnappliedRecords and maxLedgerBytes of one sources[] entry (at hand in w) into g. */
int ds_target_config_load_grant_limits(ds_config_walk *w, const json_t *entry, ds_source_grant *g);

#endif
