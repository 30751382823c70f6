#ifndef DRASYNC_TARGET_CONFIG_LINK_H
#define DRASYNC_TARGET_CONFIG_LINK_H

/* The `link:` mapping of a TargetConfig, read by target_config.c's root. */

#include "drasync/config_check.h"
#include "drasync/target_config.h"

/** Fill *out from member `link` of root (the defaults when absent). @return 0, -EINVAL */
int ds_target_config_load_link(ds_config_walk *w, const json_t *root, ds_target_link *out);

#endif
