#ifndef DRASYNC_RELOCATION_RUN_H
#define DRASYNC_RELOCATION_RUN_H

/*
 * `drasync-source relocate --namespace NS` (SPEC §5 "Planned relocation"):
 * the steps, each recorded in STATE_DIR/outbox.db (source_relocation.h) so
 * that running it again after a crash goes on where it stopped and never
 * does a step twice:
 *  1. the intent (state syncing): from here the exporter, the running
 *     agent's included, pushes nothing of NS (checked in each push's
 *     transaction);
 *  2. the final pass: NS's objects as the source has them, against what
 *     was pushed, into the outbox (state parking once done);
 *  3. NS's workloads parked on the source cluster (relocation_park.h);
 *  4. the relocation record pushed into the outbox behind every change
 *     (state sent, in the push's transaction);
 *  5. the outcome awaited: the running agent's sender carries the record and
 *     records the target's answer; with no agent running the command runs a
 *     sender of its own;
 *  6. verified active: the bare Pods and Jobs are deleted on the source, the
 *     namespace stays relocated (`status` says so); refused or failed: the
 *     workloads are brought back and NS is exported again.
 * Exit codes: 0 the target's namespace is verified active; 1 refused, failed
 * or no outcome within the timeout (the relocation stays open: run it again
 * to keep waiting); 2 usage or configuration.
 */

#include "drasync/keys.h"
#include "drasync/kube_client.h"
#include "drasync/source_config.h"

#include <stdio.h>

typedef struct ds_relocation_run_opts {
	const ds_source_config *cfg;
	const char *config_path;
	ds_kube *kube;		/* the source cluster */
	const ds_keypair *keys; /* for a sender of its own */
	const char *ns;
	long long timeout_ms; /* the wait for the target; 0: 10 minutes */
	FILE *out, *errout;
} ds_relocation_run_opts;

/** Run (or resume) the relocation of o->ns. @return the exit code */
int ds_relocation_run(const ds_relocation_run_opts *o);

/**
 * `drasync-source park --namespace NS`: after a failover to the other site
 * (the site here was lost and came back), NS stops here as a planned
 * relocation would leave it, without asking the target: recorded relocated
 * (nothing of NS exported from now), workloads parked, every object marked
 * with the relocation's mark (the other site's reverse replication may update
 * them), bare Pods and Jobs deleted. Running it again finishes what is left.
 * o->keys and o->timeout_ms are not used. @return the exit code (0, 1, 2)
 */
int ds_relocation_park_here(const ds_relocation_run_opts *o);

/**
 * Whether ns is one the configuration replicates (pure): in its namespaces
 * list, or any name with a namespaceSelector (the exporter decides then).
 */
bool ds_relocation_ns_allowed(const ds_source_config *cfg, const char *ns);

#endif
