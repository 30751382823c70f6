#ifndef DRASYNC_TARGET_CONFIG_LINK_H
#define DRASYNC_TARGET_CONFIG_LINK_H

/* The target's connections in a TargetConfig, read by target_config.c's root: the `link:`
 * mapping (its port) and the `apiServer:` mapping (its client). */

#include "drasync/config_check.h"
#include "drasync/target_config.h"

/** Fill *out from member `link` of root (the defaults when absent). @return 0, -EINVAL */
int ds_target_config_load_link(ds_config_walk *w, const json_t *root, ds_target_link *out);

/** Fill *max_in_flight from member `apiServer` of root (the default when absent).
 * @return 0, -EINVAL */
int ds_target_config_load_api_server(ds_config_walk *w, const json_t *root, int *max_in_flight);

#endif
