#ifndef DRASYNC_RELOCATOR_H
#define DRASYNC_RELOCATOR_H

/*
 * The target agent's relocator (relocation.h): the planned relocations the
 * sources asked for, carried out as they come and side by side. Each step
 * takes the relocations that became pending (refuses those not granted,
 * fails the others over, those of one source together, one at a time when
 * that fails so that each outcome names its own problem), then checks once
 * the workloads of every relocation being verified (pods Running, claims
 * allocated; again at most every DS_RELOCATOR_CHECK_MS, up to its first
 * workload not verified yet, every one at its deadline) and records each
 * outcome as it is decided: verified active, or failed at its verification
 * deadline with its first workload not verified. Each batch fails over on a
 * thread of its own (up to DS_RELOCATOR_BATCHES at once): a relocation that
 * arrives while others fail over or are verified is failed over at once, in
 * a batch of its own, not after them; the namespaces due for a look are
 * looked at side by side (DS_RELOCATOR_CHECKERS threads), while the steps
 * go on taking what arrives; a look's outcomes are recorded by the first
 * step after it is done.
 */

#include "drasync/object_state.h"
#include "drasync/relocation.h"

#include <stddef.h>

/* How often the workloads of a relocation being verified are looked at again. */
#define DS_RELOCATOR_CHECK_MS 500
/* How long a ResourceClaimTemplate or DeviceClass read for a check is used again. */
#define DS_RELOCATOR_REFS_MS 2000
/* How many pending relocations one step takes. */
#define DS_RELOCATOR_BATCH 64
/* How many batches fail over side by side (each on a thread of its own). */
#define DS_RELOCATOR_BATCHES 16
/* How many namespaces being verified are looked at side by side (a thread each). */
#define DS_RELOCATOR_CHECKERS 4

typedef struct ds_relocator ds_relocator;

/* A relocation's outcome was recorded (enum ds_relocation_state). */
typedef void (*ds_relocator_done_fn)(void *ud, const char *source, int state);

/** A relocator on the ledger's state st (borrowed). @return 0 or -ENOMEM */
int ds_relocator_new(ds_relocator **out, ds_object_state *st);
void ds_relocator_free(ds_relocator *r);

/**
 * One step under c. Its configuration is borrowed for the step (a batch
 * failing over keeps a reference of its own); its client and paths are used
 * by the batches after the step too, so they outlive r. done (may be NULL)
 * is called for each outcome recorded, on the caller's thread.
 * @return how many relocations are still failing over or being verified, or a negative errno
 *         (the ledger failed: what was not recorded stays pending)
 */
int ds_relocator_step(ds_relocator *r, const ds_relocation_ctx *c, ds_relocator_done_fn done,
		      void *ud, ds_err *err);

#endif
