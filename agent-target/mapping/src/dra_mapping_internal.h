#ifndef DRASYNC_DRA_MAPPING_INTERNAL_H
#define DRASYNC_DRA_MAPPING_INTERNAL_H

/*
 * What the two parts of the DRA mapping share: dra_mapping.c decides (the
 * rules, the names, a pod spec's entries and references, the group's
 * entries, what each reference resolves to, the refs report) and
 * dra_mapping_rewrite.c rewrites (a workload's entries and containers, a
 * group's list, device classes).
 */

#include "drasync/dra_mapping.h"
#include "drasync/report.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* The field of an entry that references each target kind. */
extern const char *const ds_dra_ref_field[DS_TARGET_KIND_MAX];

/*
 * An entry of a group's resourceClaims (PodGroup spec.resourceClaims, a
 * Workload's podGroupTemplates[].resourceClaims, Job spec.scheduling
 * .resourceClaims) and what the rules make of it. A pod's entry shares the
 * group's claim only when name, resourceClaimName and
 * resourceClaimTemplateName are all equal.
 */
struct gentry {
	json_t *json;
	const char *name;
	enum ds_target_kind kind;
	const char *source;
	const ds_dra_rule *rule; /* NULL: kept */
	enum ds_target_kind tkind;
	const char *target;
	const char *by;	   /* what decided it, for messages: "container c" or the group */
	char follows[160]; /* the member whose rule it follows (no rule names the group), or "" */
};

/* A pod-level spec.resourceClaims entry. */
struct entry {
	json_t *json;
	const char *name;
	enum ds_target_kind kind; /* what it references now */
	const char *source;	  /* the claim or template it references now */
	size_t index;
	int listed;	       /* some container lists it */
	struct gentry *shared; /* the group entry whose claim it shares, or NULL */
};

/* One claim reference: container (NULL = ALL) x entry, and what it resolves to. */
struct ref {
	json_t *container; /* NULL for an entry no container lists */
	const char *cname;
	json_t *claim_item; /* the container's resources.claims[] item */
	struct entry *e;
	const ds_dra_rule *winner;
	enum ds_target_kind kind; /* effective target */
	const char *target;
	const char *new_name; /* entry name the container must use afterwards */
	bool init;	      /* an init container */
};

struct attach {
	json_t *container;
	const char *cname;
	const ds_dra_rule *rule;
};

/* Names in use in spec.resourceClaims; generated ones are owned. */
struct names {
	const char **v;
	char **owned;
	size_t n, n_owned, cap, cap_owned;
};

struct ctx {
	const ds_dra_config *dra;
	ds_report *rep;
	char what[300]; /* "Deployment ns/name" */
	int workload;
	const char *instance;
	json_t *spec;
	struct entry *entries;
	size_t n_entries;
	struct ref *refs;
	size_t n_refs, cap_refs;
	struct attach *attaches;
	size_t n_attaches, cap_attaches;
	struct names names;
	size_t changed;
	char why[512]; /* the failure, reported once the attempt is abandoned */
	/* The group whose claims the pods may share: a PodGroup (another object,
	 * firm: its decision stands) or the Job's own spec.scheduling (its entries
	 * are rewritten with the pod spec's). */
	struct gentry *g;
	size_t n_g;
	bool g_firm;
	char g_what[340];
	const char *g_name;
	json_t *g_rcs;	 /* the Job's copy of spec.scheduling.resourceClaims */
	bool g_conflict; /* the failure is a group and a member that disagree */
};

/* Free the generated names and the list. */
void ds_dra_names_dispose(struct names *ns);

/* A new, unique DNS-label entry name from base (and suffix), added to ns. @return 0, -ENOMEM */
int ds_dra_unique_name(struct names *ns, const char *base, const char *suffix, char **out);

/* "resourceClaimName=name" or "resourceClaimTemplateName=name" into buf. */
void ds_dra_ref_text(enum ds_target_kind kind, const char *name, char *buf, size_t size);

/* A new entry {"name": name, <field of kind>: target}, or NULL (out of memory). */
json_t *ds_dra_entry_json(const char *name, enum ds_target_kind kind, const char *target);

/* Point an entry at (kind, target), removing the other reference field. @return 0, -ENOMEM */
int ds_dra_retarget(json_t *entry, enum ds_target_kind kind, const char *target);

/* Note the failure in c->why. @return -EINVAL */
int ds_dra_fail(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The pod spec's spec.resourceClaims entries, and their names. @return 0, -EINVAL, -ENOMEM */
int ds_dra_collect_entries(struct ctx *c);

/* Claim references of every init container and container, in pod-spec order. @return 0,
 * -EINVAL, -ENOMEM */
int ds_dra_collect_refs(struct ctx *c);

/* Read a group's resourceClaims list into a new array (free()) of *n. @return 0, -EINVAL (why
 * says which entry), -ENOMEM */
int ds_dra_group_read(json_t *rcs, const char *path, struct gentry **out, size_t *n, char *why,
		      size_t why_size);

/* What the rules that name the group make of each of its entries. @return 0, -EINVAL (a tie) */
int ds_dra_group_decide(const ds_dra_config *dra, int type, const char *instance, struct gentry *g,
			size_t n, const char *what, char *why, size_t why_size);

/*
 * The group's entries that no rule naming the group decided follow its
 * members (a JSON array of workloads as the source has them, and `self`, a
 * member being mapped; either may be NULL): when every member that shares an
 * entry resolves it the same way (a rule, or no rule: kept), the entry takes
 * that rule. Members that differ, or a member rule against the group's rule,
 * are an error (why, starting with the member's name). Members are named in
 * namespace ns (the group's as it is being mapped; NULL: their own).
 * @return 0, -EINVAL, -ENOMEM
 */
int ds_dra_group_follow(const ds_dra_config *dra, struct gentry *g, size_t n, const char *gwhat,
			const char *gname, const json_t *members, const json_t *self,
			const char *ns, char *why, size_t size);

/*
 * A Workload's template `tname`: its entries that no rule naming the Workload
 * decided follow the PodGroups made from it (groups: a JSON array of
 * {"podGroup": a PodGroup as the source has it, "members": its members}),
 * each decided by its own rules and members; PodGroups that differ, or one
 * against the Workload's rule, are an error. PodGroups and members are named in
 * namespace ns (as ds_dra_group_follow()). @return 0, -EINVAL (why), -ENOMEM
 */
int ds_dra_template_follow(const ds_dra_config *dra, struct gentry *g, size_t n, const char *wwhat,
			   const char *wname, const char *tname, const json_t *groups,
			   const char *ns, char *why, size_t size);

/* Resolve every reference (its winning rule, target and the group entry it shares). @return 0,
 * -EINVAL */
int ds_dra_resolve_refs(struct ctx *c);

#endif
