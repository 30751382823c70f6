#ifndef DRASYNC_TU_TRUST_H
#define DRASYNC_TU_TRUST_H

/*
 * What a test of the trust boundary looks at (after cmocka.h): the writes
 * the target's API server counted per resource, a labelled series of an
 * agent's metrics, an object's row in the target's ledger.
 */

#include "drasync/kube_client.h"

#include <stdbool.h>
#include <stddef.h>

/**
 * Writes to `resource` ("pods") the API server counted in its /metrics
 * (apiserver_request_total, verbs POST, PUT, PATCH, APPLY and DELETE of the
 * resource itself, whatever the answer; not DELETECOLLECTION, which the
 * namespace controller sends for the namespaces earlier tests dropped).
 * detail (may be NULL) gets them by verb and code.
 */
long long tu_trust_writes(ds_kube *k, const char *resource, char *detail, size_t size);

/**
 * The value of series `name` whose labels hold every `key="value"` of the
 * NULL-terminated list `labels` (pairs: key, value, ...) on base/metrics; 0
 * when there is no such series. Fails the test when the page cannot be read.
 */
double tu_trust_metric(const char *base, const char *name, const char *const labels[]);

/* One object's row in the target's ledger. */
typedef struct tu_trust_row {
	char state[32]; /* "" when there is no row */
	char reason[1024];
	char target_name[512];
} tu_trust_row;

/**
 * The object_state row of (source, kind, ns, name) in the ledger at path
 * (ns "" for a cluster-scoped object); names are bound, not quoted, so any
 * bytes work.
 */
tu_trust_row tu_trust_ledger_row(const char *ledger, const char *source, const char *kind,
				 const char *ns, const char *name);

/**
 * How many records the ledger holds for source committed after the record
 * after_id (0: all of them). Compaction deletes superseded records, so a
 * count of all of them may fall; what was committed after a point may not.
 */
long long tu_trust_ledger_records(const char *ledger, const char *source, long long after_id);

/** The id of the ledger's newest record, of any source (0: none). */
long long tu_trust_ledger_last_id(const char *ledger);

/*
 * Checks that do not stop the test: each one that does not hold is kept,
 * and tu_trust_check_done() fails the test naming all of them, so that one
 * run tells every point of a scenario that does not hold.
 */
void tu_trust_check(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** Fail the test (what: the part of the scenario) when a check did not hold; forget them. */
void tu_trust_check_done(const char *what);

/** A name for a message: newlines shown as \n, at most 40 characters. @return buf */
const char *tu_trust_shown(const char *name, char *buf, size_t size);

#endif
