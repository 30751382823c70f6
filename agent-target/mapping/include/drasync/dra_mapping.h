#ifndef DRASYNC_DRA_MAPPING_H
#define DRASYNC_DRA_MAPPING_H

/*
 * The DRA mapping engine (SPEC §3): rewrites the claim references of a
 * workload's pod spec by the target's rules, and renames DeviceClasses in
 * claims and templates. Pure functions of (rules, object): no I/O.
 */

#include "drasync/err.h"
#include "drasync/report.h"
#include "drasync/target_config.h"

#include <jansson.h>
#include <stdbool.h>

/**
 * Map the DRA references of a workload (any of the seven kinds; anything else
 * is left alone and 0 returned). Every change is added to `rep`.
 * The mapping is applied to a copy of the pod spec, which replaces the
 * original only when all of it succeeded: on error the object is unchanged and
 * one DS_REPORT_ERROR entry (and nothing else) explains why. On success,
 * pointers into the old pod spec taken before the call are no longer valid.
 * @return number of references changed (>= 0), -EINVAL when the rules cannot
 *         be resolved for this workload (ambiguous tie, or a container naming a
 *         claim entry the pod does not define), -ENOMEM
 */
int ds_dra_map_workload(const ds_dra_config *dra, json_t *obj, ds_report *rep);

/**
 * As ds_dra_map_workload(), keeping a workload consistent with the group its
 * pods join. `group` is the PodGroup of spec.schedulingGroup.podGroupName as
 * the source has it (NULL: none known; the pod spec is mapped on its own).
 * A pod entry equal to one of the group's resourceClaims (name,
 * resourceClaimName, resourceClaimTemplateName) shares the group's claim and
 * takes what the rules naming the group (objectType PodGroup) make of it; a
 * member rule that maps it elsewhere is an error naming both rules. A Job's
 * spec.scheduling.resourceClaims are its own group: a rule on any of the
 * Job's references to such a claim rewrites the scheduling entry too, and two
 * references of it that would map differently are an error.
 * @return as ds_dra_map_workload()
 */
int ds_dra_map_workload_in(const ds_dra_config *dra, json_t *obj, const json_t *group,
			   ds_report *rep);

/**
 * As ds_dra_map_workload_in(), the group's entries that no rule naming the
 * group decides following its members (a JSON array of the workloads that
 * join it as the source has them, NULL: this one alone): when every member
 * that shares an entry resolves it the same way, the group's entry and every
 * member's take that (ds_dra_map_group_members() does it to the group).
 * Members that resolve it differently are an error naming both rules.
 * @return as ds_dra_map_workload()
 */
int ds_dra_map_workload_members(const ds_dra_config *dra, json_t *obj, const json_t *group,
				const json_t *members, ds_report *rep);

/**
 * Whether a PodGroup and its members (a JSON array of workloads as the source
 * has them) agree: every member mapped against the group, on a copy. The
 * first member whose rules would map a shared claim elsewhere than the group
 * is described in why ("Deployment ns/x: claim ... rule ...").
 * @return 0, -EINVAL (they disagree), -ENOMEM
 */
int ds_dra_check_group(const ds_dra_config *dra, const json_t *group, const json_t *members,
		       char *why, size_t size);

/** The Workload a PodGroup is made from (spec.podGroupTemplateRef.workload or
 * spec.workloadRef: workloadName, borrowed), or NULL. */
const char *ds_dra_group_workload(const json_t *pg);

/** spec.schedulingGroup.podGroupName of a workload's pod spec (borrowed), or NULL. */
const char *ds_dra_group_of(const json_t *obj);

/**
 * Map the resourceClaims of a scheduling.k8s.io PodGroup (rules with objectType
 * PodGroup or All, objectInstance the group's name, container ALL) or of each
 * podGroupTemplate of a Workload (objectType Workload). Anything else is left
 * alone. On error obj is unchanged and one DS_REPORT_ERROR says why.
 * @return number of entries changed, -EINVAL (a tie), -ENOMEM
 */
int ds_dra_map_group(const ds_dra_config *dra, json_t *obj, ds_report *rep);

/**
 * As ds_dra_map_group(), a PodGroup's entries that no rule naming it decides
 * following its members (see ds_dra_map_workload_members()); members that
 * disagree among themselves or with the group's rule are the group's error.
 * For a Workload, `members` is the PodGroups made from its templates, each
 * {"podGroup": the PodGroup as the source has it, "members": its members}: a
 * template's entries that no rule naming the Workload decides follow what
 * those PodGroups are given, when they agree.
 */
int ds_dra_map_group_members(const ds_dra_config *dra, json_t *obj, const json_t *members,
			     ds_report *rep);

/**
 * Apply deviceClassMappings to a ResourceClaim or ResourceClaimTemplate of any
 * resource.k8s.io version: every request's deviceClassName (v1beta1 flat,
 * v1/v1beta2 `exactly`) and every firstAvailable subrequest's.
 * Then ds_dra_map_extended() for workloads and DeviceClasses.
 * @return number of names changed, -EINVAL (obj unchanged, one DS_REPORT_ERROR), -ENOMEM
 */
int ds_dra_map_device_classes(const ds_dra_config *dra, json_t *obj, ds_report *rep);

/**
 * deviceClassMappings for extended resources backed by DRA (KEP-5004): in a
 * workload's containers, limits and requests keys
 * deviceclass.resource.kubernetes.io/<from> become .../<to>; a DeviceClass that a
 * mapping maps away loses spec.extendedResourceName (the class mapped to serves
 * it on the target). Each change is a DS_REPORT_DEVICE_CLASS entry.
 * @return names changed, -EINVAL (a container would hold one name twice: obj
 * unchanged, one DS_REPORT_ERROR), -ENOMEM
 */
int ds_dra_map_extended(const ds_dra_config *dra, json_t *obj, ds_report *rep);

/**
 * Which rule wins for one claim reference. `container` NULL means the
 * reference of an entry that no container lists (matched as container ALL).
 * Exposed for tests and for `plan --explain`-style tooling.
 * @return 0 with *winner set (NULL when no rule matches), or -EINVAL on an
 *         unresolvable tie (err names the two rules)
 */
int ds_dra_resolve(const ds_dra_config *dra, int workload, const char *instance,
		   const char *container, const char *entry, const char *source,
		   enum ds_target_kind current, const ds_dra_rule **winner, ds_err *err);

/* One claim reference of a workload and what the rules make of it now. */
typedef struct ds_dra_ref {
	const char *container;	  /* NULL: an entry no container lists (matched as container ALL) */
	bool init_container;	  /* container is one of spec.initContainers */
	const char *entry;	  /* the spec.resourceClaims entry; NULL for an attach */
	enum ds_target_kind kind; /* what the entry references now */
	const char *from;	  /* the claim or template it references now; NULL for an attach */
	const ds_dra_rule *rule;  /* the winning rule; NULL: unmapped */
	enum ds_target_kind target_kind; /* after mapping (kind when unmapped) */
	const char *target;		 /* after mapping (from when unmapped) */
	bool attach;	 /* a container without claims that an attach rule gives the target */
	char error[256]; /* not "": the rules tie for this reference (then rule is NULL) */
} ds_dra_ref;

/**
 * Every claim reference of a workload's pod spec, as ds_dra_map_workload()
 * would resolve it, without changing anything: init containers and containers
 * in pod-spec order (each (container, entry) of resources.claims), then the
 * entries no container lists, then the containers an attach rule matches. A
 * tie is that reference's `error`, not the call's. The strings are borrowed
 * from obj and from the rules. *out is a new array (free()) of *n, NULL when
 * none; an object that is not a workload has none.
 * @return 0; -EINVAL when the pod spec cannot be read (an entry without a
 *         name or target, a container naming an entry the pod lacks), -ENOMEM
 */
int ds_dra_workload_refs(const ds_dra_config *dra, const json_t *obj, ds_dra_ref **out, size_t *n,
			 ds_err *err);

/**
 * As ds_dra_workload_refs(), for a workload whose pods join PodGroup `group`
 * (as the source has it; NULL: none): a reference to an entry that shares the
 * group's claim resolves as the group's rules decide, and one whose own rule
 * disagrees carries that as its `error`.
 */
int ds_dra_workload_refs_in(const ds_dra_config *dra, const json_t *obj, const json_t *group,
			    ds_dra_ref **out, size_t *n, ds_err *err);

/** Specificity of a rule: instance named 8, container named 4, source named 2, type named 1. */
int ds_dra_rule_specificity(const ds_dra_rule *rule);

#endif
