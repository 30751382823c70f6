#ifndef DRASYNC_DRILL_H
#define DRASYNC_DRILL_H

/*
 * `drasync-target drill` (SPEC §5): a failover copy of one standby namespace
 * into a scratch namespace, verified, the standby left untouched. The
 * objects are the ledger's newest states of that namespace
 * (ledger_objects.h), through the same pipeline as the importer's
 * (transform.h) in active (migrate) form, with the scratch namespace as their
 * namespace and the label drasync.io/drill=<namespace>; they are applied in
 * the SPEC order (server-side apply, field manager drasync) and never enter
 * object_state, so neither `run` nor `status` takes them for the standby.
 * The copy's workloads are then verified (verify.h) until the timeout. The
 * scratch namespace is created with the label, and a namespace without it is
 * never written to nor deleted.
 */

#include "drasync/err.h"
#include "drasync/kube_client.h"
#include "drasync/target_config.h"
#include "drasync/verify.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define DS_LABEL_DRILL "drasync.io/drill"

/* What the drill tells as it goes: one line of text, no newline. */
typedef void (*ds_drill_say_fn)(void *ud, const char *line);

typedef struct ds_drill_opts {
	const char *ledger_path;
	const ds_target_config *cfg;
	ds_kube *kube;
	const char *ns;		   /* the standby (target) namespace */
	const char *into;	   /* the scratch namespace; NULL: "<ns>-drill" */
	long long timeout_ms;	   /* for verification; 0: check once */
	long long interval_ms;	   /* between verification rounds; 0: 2000 */
	bool cleanup;		   /* delete the scratch namespace at the end */
	const char *field_manager; /* NULL: "drasync" */
	ds_drill_say_fn say;	   /* may be NULL */
	void *ud;
} ds_drill_opts;

/**
 * Run the drill. *report (new reference) is the drill report: namespace,
 * into, startedAt, seconds, objects {applied, skipped, failed[]}, workloads
 * [{kind, name, verified, seconds, reason}], verified, cleanedUp; kept by the
 * caller. @return 0 with the report (verified or not: see "verified"); -EEXIST
 * when into exists without the drill label for ns, -ENOENT when the ledger
 * holds nothing for ns, -EINVAL for a bad into (err says what to do); another
 * negative errno when the drill could not run
 */
int ds_drill_run(const ds_drill_opts *o, json_t **report, ds_err *err);

/**
 * Keep a drill report in state_dir/drills/<namespace>-<UTC time to the
 * millisecond>.json (the directory made when missing); path gets the file's
 * name. @return 0, or a negative errno (err says which file and why)
 */
int ds_drill_report_keep(const char *state_dir, const json_t *report, char *path, size_t size,
			 ds_err *err);

#endif
