#ifndef DRASYNC_VERIFIER_H
#define DRASYNC_VERIFIER_H

/*
 * The running importer's verification (SPEC §5 "verify"): the applier hands
 * each workload it applied to ds_verifier_add() (no I/O, any thread); the
 * verifier's own thread (ds_verifier_run) checks each with ds_verify_check()
 * after an interval, then twice as long after each check (at most
 * max_interval, and at its deadline), until it verifies or its deadline passes
 * (timeout from when it was last added: a new version starts again); however
 * many wait, it makes at most checks_per_s checks a second, so a bulk apply
 * of thousands of workloads is not followed by thousands of reads a second
 * of the API server it is applying to, and none starts while the caller's
 * hold() says the applier is busy. Then it calls on_result and stores
 * the outcome in the ledger's verifications table, where `status` reads it.
 * The agent logs in on_result (libraries log at debug at most).
 */

#include "drasync/err.h"
#include "drasync/kube_client.h"
#include "drasync/verify.h"

#include <stdatomic.h>
#include <stddef.h>

typedef struct ds_verifier ds_verifier;

/* A workload settled: verified, or not at its deadline (it is borrowed for the call). */
typedef void (*ds_verifier_result_fn)(void *ud, const ds_verify_item *it);

typedef struct ds_verifier_config {
	ds_kube *kube;		   /* borrowed; the target cluster */
	const char *ledger_path;   /* where outcomes are stored; NULL: not stored */
	long long timeout_ms;	   /* per workload; 0: 300000 (5 min) */
	long long interval_ms;	   /* before the first check of a workload; 0: 2000 */
	long long max_interval_ms; /* between two checks of one workload at most; 0: 30000 */
	int checks_per_s;	   /* checks a second at most, all workloads; 0: 20 */
	ds_verify_form_fn form_of; /* the form of a target namespace; NULL: active */
	void *form_ud;
	/* While hold(hold_ud) is true no check starts; those due are made when it
	 * is false again (cmd_run: while the applier applies a pass, so that a bulk
	 * apply is not slowed by verification reads). NULL: never held. */
	bool (*hold)(void *ud);
	void *hold_ud;
	ds_verifier_result_fn on_result; /* may be NULL */
	void *result_ud;
	size_t max_pending; /* workloads waiting at most; beyond, the oldest settle as
			     * not verified ("too many workloads to verify"); 0: 10000 */
} ds_verifier_config;

int ds_verifier_new(ds_verifier **out, const ds_verifier_config *cfg, ds_err *err);

/** Stops nothing: stop and join ds_verifier_run() first. NULL-safe. */
void ds_verifier_free(ds_verifier *v);

/**
 * Verify kind ns/name (target names) from now, within the timeout; one already
 * waiting starts its deadline again. Thread-safe, without I/O.
 * @return 0, -EINVAL (not a workload kind), -ENOMEM
 */
int ds_verifier_add(ds_verifier *v, const char *kind, const char *ns, const char *name);

/**
 * Check the workloads that are due once. @return the number settled (>= 0),
 * or -ENOMEM
 */
int ds_verifier_step(ds_verifier *v, ds_err *err);

/** Checks made (since ds_verifier_new). */
unsigned long long ds_verifier_checks(ds_verifier *v);

/** Workloads waiting to be verified. */
size_t ds_verifier_pending(ds_verifier *v);

/**
 * Check what is due until ds_verifier_stop(), sleeping between rounds (an add
 * wakes it). @return 0, or a negative errno
 */
int ds_verifier_run(ds_verifier *v, ds_err *err);
void ds_verifier_stop(ds_verifier *v);

#endif
