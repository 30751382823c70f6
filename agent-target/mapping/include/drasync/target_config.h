#ifndef DRASYNC_TARGET_CONFIG_H
#define DRASYNC_TARGET_CONFIG_H

/*
 * The target agent's configuration file (SPEC §8), `kind: TargetConfig`.
 * Loading validates everything and names file:line:col and the rule at fault.
 * The structures are plain data owned by the ds_target_config they come from.
 */

#include "drasync/err.h"
#include "drasync/k8s_object.h"
#include "drasync/pod_security.h"

#include <stdbool.h>
#include <stddef.h>

enum ds_mode {
	DS_MODE_MIGRATE, /* objects are created active */
	DS_MODE_STANDBY, /* DR: workloads created scaled down / suspended / held */
	DS_MODE_MAX
};

enum ds_target_kind {
	DS_TARGET_CLAIM,    /* resourceClaimName */
	DS_TARGET_TEMPLATE, /* resourceClaimTemplateName */
	DS_TARGET_KIND_MAX
};

/* objectType values beyond enum ds_workload: the workload-level DRA objects
 * of scheduling.k8s.io, whose resourceClaims their member pods share. */
#define DS_RULE_PODGROUP ((int)DS_WORKLOAD_MAX)
#define DS_RULE_WORKLOAD ((int)DS_WORKLOAD_MAX + 1)

/** objectType of a kind name: a workload, DS_RULE_PODGROUP, DS_RULE_WORKLOAD; -1 otherwise. */
int ds_rule_object_type(const char *kind);

/** "Deployment", "PodGroup", "All" (for -1). */
const char *ds_rule_object_type_name(int type);

/* One rule of dra.resourceClaimMappings or dra.resourceClaimTemplateMappings. */
typedef struct ds_dra_rule {
	int object_type;       /* enum ds_workload, DS_RULE_PODGROUP/WORKLOAD, or -1 for All */
	const char *instance;  /* NULL = ALL */
	const char *container; /* NULL = ALL */
	const char *source;    /* NULL = ALL: source claim/template name or pod entry name */
	enum ds_target_kind target_kind;
	const char *target; /* name of the target claim or template */
	bool attach;	    /* also give the target to matched containers without claims */
	const char *const *extended_resources; /* NULL-terminated; removed with attach */
	size_t n_extended_resources;
	const char *list; /* "resourceClaimMappings" or "resourceClaimTemplateMappings" */
	size_t index;	  /* position in that list, for reports */
	int line, col;	  /* where the rule starts in the file */
} ds_dra_rule;

typedef struct ds_device_class_mapping {
	const char *from, *to;
} ds_device_class_mapping;

typedef struct ds_namespace_mapping {
	const char *from, *to;
} ds_namespace_mapping;

typedef struct ds_dra_config {
	const ds_dra_rule *rules; /* both lists, claim rules first, in file order */
	size_t n_rules;
	const ds_device_class_mapping *device_classes;
	size_t n_device_classes;
	bool require_target_objects;   /* default true */
	bool replicate_device_classes; /* default false */
	/* dra.allowFieldLoss: field paths the target may drop (see field_loss.h) */
	const char *const *allow_field_loss;
	size_t n_allow_field_loss;
} ds_dra_config;

/*
 * One entry of `sources` (SPEC §5 "Trust boundary", §8): what the authorized
 * source `name` may write. namespaces are source namespace names or shell
 * globs (fnmatch); after namespaceMappings they are the target namespaces it
 * may write.
 */
typedef struct ds_source_grant {
	const char *name; /* its name in authorizedSources */
	const char *const *namespaces;
	size_t n_namespaces;
	enum ds_pss_level pod_security; /* default baseline */
	bool relocate;			/* may ask for a planned failover; default false */
	size_t index;			/* position in sources[] */
	/* Its quotas (maxUnappliedRecords, maxLedgerBytes) when the entry sets them. */
	uint64_t max_unapplied, max_ledger_bytes;
	bool has_max_unapplied, has_max_ledger_bytes;
	int line, col; /* where the entry starts in the file */
} ds_source_grant;

typedef struct ds_target_config ds_target_config;

/**
 * Load and validate a TargetConfig file ("-" reads stdin).
 * @return 0; -EINVAL with err located at the offending key or value; -ENOENT
 *         or other negative errno when the file cannot be read
 */
int ds_target_config_load(ds_target_config **out, const char *path, ds_err *err);

/** As ds_target_config_load(), from a buffer; `filename` names it in errors. */
int ds_target_config_parse(ds_target_config **out, const char *buf, size_t len,
			   const char *filename, ds_err *err);

/** A configuration with no rules, mode migrate (for tests and the plan defaults). */
int ds_target_config_new_empty(ds_target_config **out);

/**
 * Another reference to cfg (NULL-safe), for a user on another thread that may
 * outlive the caller's: the configuration lives until its last reference is
 * dropped. Loading and ds_target_config_new_empty() give the first one.
 * Safe from any thread. @return cfg
 */
ds_target_config *ds_target_config_ref(const ds_target_config *cfg);

/** Drop a reference (NULL-safe); the last one frees. Safe from any thread. */
void ds_target_config_unref(ds_target_config *cfg);

/** How many references cfg has (0 for NULL): for tests and assertions. */
unsigned ds_target_config_refs(const ds_target_config *cfg);

/** ds_target_config_unref(): the owner of a configuration no one else holds frees it. */
void ds_target_config_free(ds_target_config *cfg);

enum ds_mode ds_target_config_mode(const ds_target_config *cfg);
const ds_dra_config *ds_target_config_dra(const ds_target_config *cfg);

/** Namespace on the target for a source namespace (itself when unmapped). Borrowed. */
const char *ds_target_config_map_namespace(const ds_target_config *cfg, const char *ns);

const ds_namespace_mapping *ds_target_config_namespaces(const ds_target_config *cfg, size_t *n);

/**
 * sources[] as the file has it (*n 0 when it has none: see source_grants.h for
 * what a file without `sources` grants). Borrowed.
 */
const ds_source_grant *ds_target_config_sources(const ds_target_config *cfg, size_t *n);

/** Whether the file has a `sources` key (an empty list grants nothing). */
bool ds_target_config_has_sources(const ds_target_config *cfg);

/** adoptExisting: take over objects that exist on the target without drasync's marks. */
bool ds_target_config_adopt_existing(const ds_target_config *cfg);

/** The file the configuration was loaded from ("(config)" when parsed from a buffer unnamed). */
const char *ds_target_config_file(const ds_target_config *cfg);

/** Agent settings (NULL when not set, but for stateDir). Borrowed. */
const char *ds_target_config_listen(const ds_target_config *cfg);
const char *ds_target_config_secret_key_file(const ds_target_config *cfg);
const char *ds_target_config_authorized_sources(const ds_target_config *cfg);
const char *ds_target_config_kubeconfig(const ds_target_config *cfg);
/* stateDir, /var/lib/drasync when unset. */
const char *ds_target_config_state_dir(const ds_target_config *cfg);
/** The ledger `run`, `status` and `retry` share: stateDir/ledger.db, into buf. @return buf */
const char *ds_target_config_ledger(const ds_target_config *cfg, char *buf, size_t size);
/* maxUnappliedRecords: the ceiling of the whole ledger backlog (100000): at it, the
 * sources holding their share of it get no more credit. */
uint64_t ds_target_config_max_unapplied(const ds_target_config *cfg);

/**
 * The quotas of source: its sources[] entry's maxUnappliedRecords and
 * maxLedgerBytes, else limits.sourceMaxUnappliedRecords (default: the
 * ceiling) and limits.sourceMaxLedgerBytes (default 0: unlimited).
 */
void ds_target_config_source_limits(const ds_target_config *cfg, const char *source,
				    uint64_t *max_unapplied, uint64_t *max_ledger_bytes);
const char *ds_target_config_metrics_listen(const ds_target_config *cfg);
/* identity.namespace: where the ConfigMap drasync-ledger is (NULL: not set). */
const char *ds_target_config_identity_namespace(const ds_target_config *cfg);

/* link: the limits of the target's port before a peer is authenticated. */
#define DS_TARGET_LINK_UNAUTH_MAX 1024
typedef struct ds_target_link {
	int handshake_timeout_ms;	 /* handshakeTimeout: 5s (100ms to 5m) */
	uint64_t max_frame_bytes;	 /* maxFrameBytes: 8 MiB (64 KiB to 128 MiB) */
	unsigned max_unauth;		 /* maxUnauthenticated: 64 (1 to 1024) */
	unsigned max_unauth_per_address; /* maxUnauthenticatedPerAddress: 8 (at most the above) */
	int refusal_window_ms;		 /* refusalLogWindow: 1m (1s to 1h) */
} ds_target_link;

/** The defaults above. */
void ds_target_link_default(ds_target_link *l);

/** link: as read (the defaults when absent). Borrowed. */
const ds_target_link *ds_target_config_link(const ds_target_config *cfg);

/*
 * apiServer.maxInFlight: how many requests the target agent's client keeps in
 * flight to its API server (the importer's writes, a failover's, the
 * verifier's reads share them).
 */
#define DS_TARGET_API_IN_FLIGHT_DEFAULT 64
#define DS_TARGET_API_IN_FLIGHT_MAX 1024
#define DS_TARGET_API_IN_FLIGHT_BOUNDS "1 to 1024, default 64"
int ds_target_config_api_max_in_flight(const ds_target_config *cfg);

/** "migrate" / "standby". */
const char *ds_mode_name(enum ds_mode mode);

#endif
