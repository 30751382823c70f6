#ifndef DRASYNC_TARGET_AGENT_H
#define DRASYNC_TARGET_AGENT_H

/*
 * The running importer (`drasync-target run`): the receiver commits what the
 * sources push into the ledger and acknowledges it at once; the applier works
 * from the ledger on its own thread, so the link never waits for the API
 * server; the verifier checks each workload applied on its own thread.
 *
 * Threads: ds_target_agent_run()'s caller runs the receiver; one thread the
 * applier (wakes on the receiver's commits, a reload, or each second); one the
 * verifier (wakes on a workload applied; holds while the applier applies); one
 * waits for SIGTERM/SIGINT (ds_target_agent_stop) and SIGHUP
 * (ds_target_agent_reload: the applier takes the new rules at its next pass;
 * the receiver's ZAP handler re-reads the authorized sources itself).
 *
 * The configuration is reference-counted: each reload puts a new one in force
 * and the one replaced is freed once the applier's next pass has begun and no
 * verifier or monitor call still reads it (see config_holder.h).
 *
 * The agent logs its events (apply, mapping, verified, reloaded...); the
 * hooks let the caller count them too (the monitor area, which links this
 * one, not the other way round).
 */

#include "drasync/applier.h"
#include "drasync/err.h"
#include "drasync/keys.h"
#include "drasync/ledger_identity.h"
#include "drasync/link_stats.h"
#include "drasync/kube_client.h"
#include "drasync/quota.h"
#include "drasync/target_config.h"
#include "drasync/transport.h"
#include "drasync/verifier.h"

typedef struct ds_target_agent ds_target_agent;

/* Called from the agent's threads; each may be NULL. */
typedef struct ds_target_agent_hooks {
	void *ud;
	void (*on_apply)(void *ud, const ds_applier_event *ev);	 /* the applier's thread */
	void (*on_verified)(void *ud, const ds_verify_item *it); /* the verifier's thread */
	ds_transport_event_fn on_link_event; /* the receiver's; it logs them (NULL: none) */
	void (*on_link_unauth)(void *ud, unsigned n); /* unauthenticated connections now */
	void (*on_config)(void *ud, const ds_target_config *cfg); /* a reload put cfg in force */
	/* A planned relocation ended (enum ds_relocation_state), on the relocator's thread. */
	void (*on_relocation)(void *ud, const char *source, int state);
	/* The receiver is bound, before event=started: applier, verifier, endpoint are set. */
	void (*on_listening)(void *ud, ds_target_agent *a);
} ds_target_agent_hooks;

typedef struct ds_target_agent_config {
	const char *config_path;     /* read again by ds_target_agent_reload() */
	const ds_target_config *cfg; /* the agent takes a reference of its own */
	const ds_keypair *keys;	     /* copied */
	ds_kube *kube;		     /* borrowed: the target cluster */
	const char *ledger_path;
	long long verify_timeout_ms; /* -1: the verifier's default; 0: no verifier */
	/* The ledger has an identity: the apply stage checks it against the
	 * cluster's (ledger_identity.h) before its first pass, and applies nothing
	 * when it is another ledger's. */
	bool check_identity;
	ds_target_agent_hooks hooks;
} ds_target_agent_config;

/** The client settings for the importer's cluster, writes in flight at most max_parallel. */
void ds_target_agent_transport_opts(struct ds_kube_transport_opts *o, int max_parallel);

/** The applier and the verifier, on the ledger. @return 0 or a negative errno (err says why) */
int ds_target_agent_new(ds_target_agent **out, const ds_target_agent_config *cfg, ds_err *err);

/** Bind the receiver on the file's `listen` and log event=started. @return 0 or a negative errno */
int ds_target_agent_listen(ds_target_agent *a, ds_err *err);

/** The applier, the verifier (NULL with verify_timeout_ms 0), the bound endpoint: borrowed. */
/** The receiver's per-source quotas (NULL before ds_target_agent_listen). */
ds_quota *ds_target_agent_quota(ds_target_agent *a);
/** The link's figures: bytes each way, JSON received (the receiver's thread writes them). */
const ds_link_stats *ds_target_agent_link_stats(const ds_target_agent *a);

ds_applier *ds_target_agent_applier(ds_target_agent *a);
ds_verifier *ds_target_agent_verifier(ds_target_agent *a);
const char *ds_target_agent_endpoint(const ds_target_agent *a);

/**
 * Start the applier, verifier and signal threads and run the receiver on this
 * thread until ds_target_agent_stop() (SIGTERM, SIGINT) or a failure; then
 * stop and join them. ds_stop_signals_block() must have run before any thread.
 * @return 0 once stopped, or a negative errno (the receiver's or the ledger's)
 */
int ds_target_agent_run(ds_target_agent *a, ds_err *err);

/**
 * Read config_path again (SIGHUP): a bad file is logged (event=reload_failed)
 * and the rules in force are kept; keys read only at start are logged as
 * needing a restart (event=reload_partial). Safe from any thread.
 * @return 0 or the negative errno of the load
 */
int ds_target_agent_reload(ds_target_agent *a, ds_err *err);

/**
 * Log one identity check (rc: ds_ledger_identity_check()'s): event
 * ledger_identity, ledger_identity_refused, ledger_identity_waiting,
 * ledger_identity_unpublished, namespace_modes_read_back.
 */
void ds_target_log_identity(const ds_identity_check *c, int rc);

/** Make ds_target_agent_run() return. Safe from any thread. */
void ds_target_agent_stop(ds_target_agent *a);

/** NULL-safe; after ds_target_agent_run() has returned (or was never called). */
void ds_target_agent_free(ds_target_agent *a);

/**
 * SPEC §5: every sources[] name of cfg must be a source of its authorized-sources
 * file (-EINVAL, err located at the entry); then each authorized source is told in
 * the log what it may write (event source_grant, warn when nothing). `run` calls it
 * before it binds, a reload before the new file is taken. @return 0, or < 0
 */
int ds_target_agent_check_grants(const ds_target_config *cfg, ds_err *err);

#endif
