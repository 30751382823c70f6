#ifndef DRASYNC_INVENTORY_H
#define DRASYNC_INVENTORY_H

/*
 * What `drasync-target inventory` shows: every claim reference the ledger
 * holds (the seed's drop-downs: object type, instance, container, pod-level
 * entry -> claim or template), the rule that maps it under the current
 * TargetConfig or none, the claim or template it lands on, and whether that
 * exists on the target cluster; and every ResourceClaim and
 * ResourceClaimTemplate the sources replicate. An operator writes the mapping
 * rules from what the source really has.
 *
 * Read-only, on its own connection to the ledger: it works whether `run` is
 * running on the same file or not. The newest state of an object is its
 * object_state row, or a record committed after the applier's cursor (not
 * folded in yet); a tombstone removes the object.
 */

#include "drasync/err.h"
#include "drasync/kube_client.h"
#include "drasync/target_config.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

enum ds_inventory_type {
	DS_INVENTORY_REFERENCE, /* a (container, entry) pair of a workload's pod spec */
	DS_INVENTORY_ATTACH,	/* a container without claims that an attach rule matches */
	DS_INVENTORY_OBJECT,	/* a ResourceClaim or ResourceClaimTemplate replicated as is */
	DS_INVENTORY_BROKEN,	/* an object whose claims cannot be read (error says why) */
	DS_INVENTORY_TYPE_MAX
};

enum ds_inventory_exists {
	DS_EXISTS_UNKNOWN, /* not checked, or the cluster did not say (exists_reason) */
	DS_EXISTS_YES,
	DS_EXISTS_NO,
	DS_EXISTS_MAX
};

/* One row. Strings owned by the inventory; NULL when not applicable. */
typedef struct ds_inventory_ref {
	enum ds_inventory_type type;
	char *source;	      /* the ledger's source (cluster) name */
	char *ns, *target_ns; /* source namespace; after namespaceMappings */
	char *object_type;    /* Pod ... CronJob, ResourceClaim, ResourceClaimTemplate */
	char *instance;	      /* the object's name */
	char *state;	      /* the object's apply state in the ledger ("applied", ...) */
	char *container;      /* NULL: an entry no container lists (ALL); objects: NULL */
	bool init_container;
	char *entry;			 /* the spec.resourceClaims entry (references only) */
	enum ds_target_kind kind;	 /* what it references now (objects: what it is) */
	char *from;			 /* the claim or template it references now */
	enum ds_target_kind target_kind; /* after mapping */
	char *target;			 /* after mapping, in target_ns */
	char *rule;			 /* "dra.resourceClaimMappings[0]"; NULL: unmapped */
	int rule_line;			 /* where the rule is in the TargetConfig; 0 unknown */
	char *error;			 /* the rules cannot resolve it, or BROKEN's cause */
	enum ds_inventory_exists exists; /* the target object on this cluster */
	char *exists_reason;		 /* UNKNOWN (and NO when not served): why */
	bool replicated; /* a source replicates the target object (drasync creates it) */
} ds_inventory_ref;

typedef struct ds_inventory {
	ds_inventory_ref *refs; /* by namespace, kind, name, source; pod-spec order within */
	size_t n_refs;
	size_t objects; /* workloads, claims and templates read from the ledger */
} ds_inventory;

typedef struct ds_inventory_opts {
	const char *ledger_path;
	const ds_target_config *cfg;
	/* Only objects in these namespaces (source, or target after mapping); none: all. */
	const char *const *namespaces;
	size_t n_namespaces;
	ds_kube *kube;		    /* the target cluster; NULL: existence is not checked */
	const char *no_kube_reason; /* why kube is NULL, for the rows' exists_reason */
} ds_inventory_opts;

/**
 * Read the inventory. -ENOENT (err says so) when there is no ledger at
 * ledger_path yet. A cluster that cannot be reached makes the rows UNKNOWN,
 * with the reason, never an error of the call. *out is owned
 * (ds_inventory_free).
 */
int ds_inventory_read(const ds_inventory_opts *opts, ds_inventory **out, ds_err *err);
void ds_inventory_free(ds_inventory *inv);

/** "reference", "attach", "object", "broken". */
const char *ds_inventory_type_name(enum ds_inventory_type t);
/** "unknown", "yes", "no". */
const char *ds_inventory_exists_name(enum ds_inventory_exists e);
/** "resourceClaim" / "resourceClaimTemplate", as in the TargetConfig's rules. */
const char *ds_inventory_kind_key(enum ds_target_kind k);

/**
 * Whether a row needs an operator: a reference or attach whose target is
 * neither on the cluster nor replicated by a source, one the rules cannot
 * resolve, or a broken object.
 */
bool ds_inventory_ref_missing(const ds_inventory_ref *r);

/** Rows that are unmapped references. */
size_t ds_inventory_unmapped(const ds_inventory *inv);

/** Rows for which ds_inventory_ref_missing() holds. */
size_t ds_inventory_missing(const ds_inventory *inv);

/** One JSON document with every field of every row. @return new reference, NULL on ENOMEM */
json_t *ds_inventory_json(const ds_inventory *inv);

/**
 * A starting `dra:` block, in the TargetConfig's syntax, with one rule per
 * unmapped reference (as specific as a rule can be: type, instance,
 * container, source = the entry), in the list of the reference's own kind; a
 * comment per rule says where it was found and whether the target has an
 * object of that name; the target is "todo-<name it references now>" (a
 * valid name a loader accepts, and one no cluster has) for the operator to
 * replace. References that would need two rules with identical selectors
 * (the same workload name in two namespaces) get the second one commented
 * out, with the reason. *out is a NUL-terminated string to free().
 * @return 0, -ENOMEM
 */
int ds_inventory_rules_yaml(const ds_inventory *inv, char **out);

#endif
