#ifndef DRASYNC_VERIFY_RUN_H
#define DRASYNC_VERIFY_RUN_H

/*
 * `drasync-target verify` on demand (SPEC, the seed's step 7), around the
 * verifier (verify.h): the workloads of the ledger in the namespaces asked,
 * each in its namespace's form; which namespaces asked hold none; the report
 * `-o json` prints. The last two are pure, for tests without a cluster.
 */

#include "drasync/err.h"
#include "drasync/target_config.h"
#include "drasync/verify.h"

#include <jansson.h>
#include <stddef.h>

/**
 * The workloads of the ledger at `ledger` in the target namespaces ns (n_ns 0:
 * all), each with the form its namespace has now (the ledger's mode, else the
 * configuration's). *items is a new array (ds_verify_items_free).
 * @return as ds_verify_items_from_ledger(): 0, -ENOENT without a ledger, or a
 *         negative errno
 */
int ds_verify_run_items(const char *ledger, const ds_target_config *cfg, const char *const *ns,
			size_t n_ns, ds_verify_item **items, size_t *n, ds_err *err);

/**
 * Which of the namespaces ns hold no workload of items (a typo more often than
 * not): *lines (new reference) is an array with one message for each, naming
 * the namespaces that do hold some ("the ledger has no workload in namespace
 * x (...); namespaces with workloads: a, b").
 * @return how many are missing, -ENOMEM
 */
int ds_verify_run_missing(const ds_verify_item *items, size_t n, const char *const *ns, size_t n_ns,
			  json_t **lines);

/**
 * Verify items through k until o->timeout_ms (ds_verify_run()), then store
 * the outcome in the ledger for `status`. A store that fails does not fail
 * the run: *stored gets its negative errno (0 stored) and store_err why.
 * @return 0 with *sum, or the negative errno of the run (err says why)
 */
int ds_verify_run_check(ds_kube *k, const char *ledger, ds_verify_item *items, size_t n,
			const ds_verify_opts *o, ds_verify_summary *sum, int *stored,
			ds_err *store_err, ds_err *err);

/**
 * The report of a verification: {ledger, workloads [{kind, namespace, name,
 * form, verified, reason, seconds}], summary {total, verified, notVerified,
 * seconds}, verified}. @return a new reference, NULL out of memory
 */
json_t *ds_verify_run_report(const char *ledger, const ds_verify_item *items, size_t n,
			     const ds_verify_summary *sum);

#endif
