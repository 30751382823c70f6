#ifndef DRASYNC_LEDGER_STATUS_H
#define DRASYNC_LEDGER_STATUS_H

/*
 * What the target's ledger says, for `drasync-target status`: per source its
 * identity, epoch, committed seq, last contact and unapplied backlog; the
 * objects per apply state; the objects waiting (and for what) and failed (and
 * why); the last verification of each workload; the planned relocations
 * sources asked for (source, namespace, outcome, when). Read-only, on its own connection: it works
 * whether `run` is running on the same file or not.
 */

#include "drasync/err.h"
#include "drasync/object_state.h"
#include "drasync/quota.h"
#include "drasync/target_config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ds_ledger_source {
	char *name, *cluster;
	uint64_t epoch, committed_seq;
	int64_t last_contact;	  /* seconds since the epoch; 0: never */
	uint64_t unapplied;	  /* committed records not yet applied */
	int64_t oldest_unapplied; /* when the oldest of them was committed (s since the epoch); 0:
				     none */
	uint64_t objects;	  /* objects it has in the ledger */
	uint64_t ledger_bytes;	  /* payload bytes of its records in the ledger */
	/* Its quotas and whether the ledger puts it over one now (ds_ledger_status_quotas). */
	uint64_t max_unapplied, max_ledger_bytes; /* max_ledger_bytes 0: unlimited */
	enum ds_quota_kind throttled;
} ds_ledger_source;

/* One object that needs a look (waiting or failed), newest change first. */
typedef struct ds_ledger_item {
	char *source, *kind, *ns, *name; /* target names when applied before, else the source's */
	enum ds_apply_state state;
	char *reason;
	int64_t updated_at;
} ds_ledger_item;

/* The last verification of one workload (drasync-target verify, or run's verifier). */
typedef struct ds_ledger_verification {
	char *kind, *ns, *name, *form, *reason; /* target names; form "active" or "standby" */
	bool verified;
	int64_t checked_at; /* seconds since the epoch */
	double seconds;	    /* until verified, or spent */
} ds_ledger_verification;

/* One planned relocation a source asked for (relocation.h), newest first. */
typedef struct ds_ledger_relocation {
	char *source, *ns, *target_ns; /* source namespace; target_ns "" until decided */
	char *state;		       /* "pending", "active", "failed", "refused" */
	char *message;
	int64_t requested_at, finished_at; /* seconds since the epoch; finished_at 0: not yet */
} ds_ledger_relocation;

/* One target namespace: of the ledger's objects, or with a mode failover/failback set. */
typedef struct ds_ledger_namespace {
	char *name;
	bool recorded;	   /* the ledger records its mode (else the configuration's applies) */
	enum ds_mode mode; /* when recorded */
	int64_t since;	   /* seconds since the epoch, when recorded */
	char *changed_by;  /* "failover", "failback"; "" when not recorded */
	uint64_t objects, held;
} ds_ledger_namespace;

typedef struct ds_ledger_status {
	ds_ledger_namespace *namespaces; /* sorted by name */
	size_t n_namespaces;
	ds_ledger_source *sources;
	size_t n_sources;
	uint64_t states[DS_APPLY_STATE_MAX]; /* objects per state */
	ds_ledger_item *items;		     /* waiting and failed, at most max_items */
	size_t n_items;
	uint64_t more_items; /* beyond max_items */
	/* The last verification per workload: those NOT verified first, at most max_items. */
	ds_ledger_verification *verifications;
	size_t n_verifications;
	uint64_t verified, not_verified;	/* every workload's last verification */
	int64_t last_checked;			/* the newest check; 0: never verified */
	uint64_t records;			/* records the ledger holds (after compaction) */
	uint64_t bytes;				/* ledger.db and its write-ahead log on disk */
	char ledger_id[65], ledger_created[32]; /* its identity (ledger_identity.h); "" none */
	ds_ledger_relocation *relocations;	/* newest first, at most max_items */
	size_t n_relocations;
} ds_ledger_status;

/**
 * Read the ledger at path. -ENOENT (err says so) when there is none yet.
 * *out is owned (ds_ledger_status_free).
 */
int ds_ledger_status_read(const char *path, size_t max_items, ds_ledger_status **out, ds_err *err);

/**
 * As ds_ledger_status_read(); the namespaces of objects never applied are
 * their source namespaces mapped by map_ns (NULL: the same).
 */
int ds_ledger_status_read_mapped(const char *path, size_t max_items,
				 const char *(*map_ns)(void *ud, const char *source_ns),
				 void *map_ud, ds_ledger_status **out, ds_err *err);
void ds_ledger_status_free(ds_ledger_status *st);

/**
 * Each source's quotas from cfg, and whether its backlog and ledger bytes
 * put it over one now (quota.h's rule, the sources in the ledger sharing the
 * ceiling): what the receiver decides, but for the hysteresis it keeps in memory.
 */
void ds_ledger_status_quotas(ds_ledger_status *st, const ds_target_config *cfg);

#endif
