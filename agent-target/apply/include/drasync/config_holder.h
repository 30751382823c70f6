#ifndef DRASYNC_CONFIG_HOLDER_H
#define DRASYNC_CONFIG_HOLDER_H

/*
 * The configuration in force for the running importer, replaced by each
 * reload (SIGHUP). Its users are on other threads: the verifier and the
 * monitor hold references of their own (ds_config_holder_get); the applier
 * holds none but reads the configuration it was given until its next pass
 * begins (ds_applier_set_config), so the holder keeps a replaced
 * configuration for it until the applier's pass counter has gone past the
 * pass in flight at the reload. A configuration is freed when the last of
 * these lets go, not at exit.
 */

#include "drasync/target_config.h"

#include <stdint.h>

typedef struct ds_config_holder ds_config_holder;

/** Hold *cfg, the configuration in force; takes the caller's reference (*cfg is set NULL). */
int ds_config_holder_new(ds_config_holder **out, ds_target_config **cfg);

/** Drop every reference the holder has (NULL-safe). */
void ds_config_holder_free(ds_config_holder *h);

/** A reference to the configuration in force, which the caller drops. Safe from any thread. */
ds_target_config *ds_config_holder_get(ds_config_holder *h);

/** The configuration in force, borrowed: for the thread that replaces it only. */
const ds_target_config *ds_config_holder_peek(const ds_config_holder *h);

/**
 * Put *cfg in force (taking the caller's reference: *cfg is set NULL); the one
 * it replaces is kept for the applier until ds_config_holder_handed() and
 * ds_config_holder_passed() say the applier has let go of it. Safe from any
 * thread. @return 0, or -ENOMEM with nothing changed (*cfg still the caller's)
 */
int ds_config_holder_set(ds_config_holder *h, ds_target_config **cfg);

/**
 * The applier was given the configuration in force and its pass counter, read
 * after that, was `pass`: the configurations replaced so far are the applier's
 * until a pass beyond `pass` begins. Safe from any thread.
 */
void ds_config_holder_handed(ds_config_holder *h, uint64_t pass);

/**
 * The applier's pass counter is now `passes`: the configurations it replaced
 * before that pass began are no longer the applier's. Safe from any thread.
 * @return how many replaced configurations the holder still keeps
 */
size_t ds_config_holder_passed(ds_config_holder *h, uint64_t passes);

#endif
