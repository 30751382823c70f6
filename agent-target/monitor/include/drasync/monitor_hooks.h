#ifndef DRASYNC_MONITOR_HOOKS_H
#define DRASYNC_MONITOR_HOOKS_H

/*
 * The monitor wired to the running importer (target_agent.h): the agent's
 * hooks count in the monitor, and the monitor starts serving on
 * metrics.listen. The monitor area links the apply area, not the reverse, so
 * the wiring lives here.
 */

#include "drasync/target_agent.h"
#include "drasync/target_monitor.h"

/** The hooks for ds_target_agent_config that feed m (ud: m). */
void ds_target_monitor_hooks(ds_target_monitor *m, ds_target_agent_hooks *out);

/**
 * A monitor for `run`: it counts in any case and serves only when `listen`
 * (metrics.listen) is set; logs event=metrics_off or event=metrics_listening.
 * @return 0, or a negative errno (err names config_path when serving fails)
 */
int ds_target_monitor_start(ds_target_monitor **out, const ds_target_monitor_config *mc,
			    const char *listen, ds_err *err);

/**
 * The end of `run`: the monitor's server stops first (it reads the applier and
 * the verifier), the agent logs `stopped` (when it had bound) and is freed
 * (its threads report to the monitor until they join), the monitor last.
 * Either may be NULL.
 */
void ds_target_monitor_stop_run(ds_target_monitor *m, ds_target_agent *a, int rc);

#endif
