#ifndef DRASYNC_PLAN_H
#define DRASYNC_PLAN_H

/*
 * What the importer would create on the target from manifests, offline
 * (`drasync-target plan`): the pipeline `run` applies (selection, sanitizing,
 * namespace and DRA mapping, resource.k8s.io conversion, standby), the
 * preflight of the objects the plan needs but lacks, and the objects in
 * apply order. No cluster, no ledger.
 */

#include "drasync/dra_convert.h"
#include "drasync/err.h"
#include "drasync/manifest.h"
#include "drasync/report.h"
#include "drasync/sched_convert.h"
#include "drasync/target_config.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

typedef struct ds_plan ds_plan;

typedef struct ds_plan_opts {
	const ds_target_config *cfg;
	enum ds_dra_version api;     /* the resource.k8s.io version the target serves */
	enum ds_sched_version sched; /* the scheduling.k8s.io version it serves */
	const char *source_cluster;  /* NULL: no drasync.io/source-cluster annotation */
	/* Each report entry as it is made (NULL: none): errors always, the rest unless quiet. */
	FILE *report;
	bool quiet;
} ds_plan_opts;

typedef struct ds_plan_counts {
	size_t apply, skip, held, failed; /* by the transform's verdict */
	size_t required; /* distinct objects a planned one needs that the plan lacks */
	size_t admin;	 /* claims and templates that wait for the admin-access grant */
} ds_plan_counts;

int ds_plan_new(ds_plan **out);
void ds_plan_free(ds_plan *p);

/** Plan every object of man (transformed in place). @return 0 or -ENOMEM */
int ds_plan_run(ds_plan *p, ds_manifest *man, const ds_plan_opts *o);

/** The objects to apply, in apply order (borrowed). */
const json_t *ds_plan_objects(const ds_plan *p);
/** Every rewrite, skip, requirement and error of the plan (borrowed). */
const ds_report *ds_plan_report(const ds_plan *p);
const ds_plan_counts *ds_plan_count(const ds_plan *p);

/** The summary line after ds_plan_run(); n_bad_files manifests could not be read (failed). */
void ds_plan_summary(const ds_plan *p, FILE *out, size_t n_bad_files);

/**
 * The objects on out, as YAML documents or (json) one List as kubectl get -o
 * json prints, flushed. @return 0; -ENOMEM; -ECANCELED when an object cannot
 * be written as YAML (err says why); a write's negative errno
 */
int ds_plan_write(const ds_plan *p, FILE *out, bool json, ds_err *err);

#endif
