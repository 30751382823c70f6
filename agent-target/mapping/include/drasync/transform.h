#ifndef DRASYNC_TRANSFORM_H
#define DRASYNC_TRANSFORM_H

/*
 * The importer's per-object pipeline, one library call shared by `plan` and
 * the running importer: selection -> sanitizing -> namespace mapping -> DRA
 * mapping (pod specs, PodGroups, Workloads) -> resource.k8s.io and
 * scheduling.k8s.io version conversion -> standby -> drasync's own labels and
 * source-identity annotations. Object in, object + report entries out.
 */

#include "drasync/dra_convert.h"
#include "drasync/report.h"
#include "drasync/sched_convert.h"
#include "drasync/target_config.h"

#include <jansson.h>

#define DS_LABEL_MANAGED_BY "app.kubernetes.io/managed-by"
#define DS_ANNOTATION_SOURCE_CLUSTER "drasync.io/source-cluster"
#define DS_ANNOTATION_SOURCE_UID "drasync.io/source-uid"
/* The source that wrote it, by its authenticated name (its key's in authorizedSources):
 * unlike the cluster name of its Hello, a source cannot claim another's. */
#define DS_ANNOTATION_SOURCE "drasync.io/source"
/* On every object the importer applies: the hash (hex SHA-256) of the form it
 * applied, so that a restarted importer sees an object it wrote but had not
 * recorded as applied (killed in between) and does not write it again. */
#define DS_ANNOTATION_APPLIED_HASH "drasync.io/applied-hash"
/* On a Namespace the importer created (not one it found): only such a one is deleted. */
#define DS_ANNOTATION_CREATED "drasync.io/created"

typedef struct ds_transform_opts {
	const ds_target_config *cfg;
	enum ds_dra_version dra_version; /* what the target serves */
	const char *source_cluster;	 /* NULL when unknown (plan without --source-cluster) */
	const char *source;		 /* the authenticated source's name; NULL: not marked */
	const char *source_uid;		 /* NULL: taken from the object's metadata.uid */
	/* The mode for an object in target namespace ns (after namespaceMappings; NULL:
	 * cluster-scoped), `configured` being cfg's; NULL: cfg's mode for every object.
	 * The importer answers from the ledger, where failover and failback set it. */
	enum ds_mode (*mode_of)(void *ud, const char *ns, enum ds_mode configured);
	void *mode_ud;
	/* scheduling.k8s.io version the target serves (Workload, PodGroup); AS_IS: none known. */
	enum ds_sched_version sched_version;
	/* The PodGroup `name` of source namespace `ns` as the source has it, for a
	 * workload whose pods join it (spec.schedulingGroup.podGroupName), so that
	 * the claims they share stay shared; NULL: none known. Borrowed for the call. */
	const json_t *(*group_of)(void *ud, const char *ns, const char *name);
	/* The workloads of source namespace ns whose pods join PodGroup `group`, as a
	 * JSON array of the objects as the source has them (borrowed); NULL: none
	 * known. A PodGroup and its members are applied only when all agree. */
	const json_t *(*members_of)(void *ud, const char *ns, const char *group);
	/* The PodGroups of source namespace ns made from a template of Workload `workload`, as a
	 * JSON array of the objects as the source has them (borrowed); NULL: none known. A
	 * template's claims follow them and their members. */
	const json_t *(*groups_from)(void *ud, const char *ns, const char *workload);
	void *group_ud;
} ds_transform_opts;

enum ds_transform_result {
	DS_TRANSFORM_APPLY, /* create/update obj on the target */
	DS_TRANSFORM_SKIP,  /* not replicated (a skip entry says why) */
	DS_TRANSFORM_HOLD,  /* standby: kept in the ledger, not created */
	DS_TRANSFORM_ERROR, /* cannot be imported (an error entry says why) */
};

/**
 * Run the pipeline on obj, modifying it in place.
 * @return enum ds_transform_result, or -ENOMEM
 */
int ds_transform_object(const ds_transform_opts *opts, json_t *obj, ds_report *rep);

#endif
