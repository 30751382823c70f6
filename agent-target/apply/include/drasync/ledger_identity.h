#ifndef DRASYNC_LEDGER_IDENTITY_H
#define DRASYNC_LEDGER_IDENTITY_H

/*
 * What of the ledger survives the loss of its file (docs/operations.md, "Lost
 * state directory"): the ledger's identity (a random id and when it was made)
 * is kept in the ledger's store_info and in the target cluster, in the
 * ConfigMap drasync-ledger of the agent's own namespace; each namespace mode
 * failover and failback set is also written on the Namespace as annotations.
 *
 * A ledger that is new (missing, empty, or without an identity) while the
 * cluster's ConfigMap names one is a lost ledger: the commands refuse to use
 * it (a fresh ledger would re-apply the standby form over a namespace that
 * failed over) until the operator restores the state directory or accepts a
 * new ledger (--new-ledger), whose namespace modes are then read back from
 * the Namespaces' annotations.
 *
 * The decision is a pure function (ds_ledger_identity_decide); the rest does
 * the I/O on the ledger file and the cluster. Nothing here logs: the callers
 * say what happened.
 */

#include "drasync/err.h"
#include "drasync/kube_client.h"
#include "drasync/namespace_mode.h"
#include "drasync/target_config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The ConfigMap of the identity, in the agent's own namespace. */
#define DS_LEDGER_CONFIGMAP "drasync-ledger"
/* The namespace when neither identity.namespace nor the service account says. */
#define DS_LEDGER_DEFAULT_NAMESPACE "drasync"
/* The service account's namespace, in a pod. */
#define DS_LEDGER_SA_NAMESPACE_FILE "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

/* The annotations of a target Namespace's mode. */
#define DS_ANNOTATION_MODE "drasync.io/mode"		 /* "active" or "standby" */
#define DS_ANNOTATION_MODE_SINCE "drasync.io/mode-since" /* RFC 3339, UTC */
#define DS_ANNOTATION_MODE_BY "drasync.io/mode-by"	 /* "failover", "failback", ... */

/* store_info's keys in the ledger. */
#define DS_LEDGER_INFO_ID "ledger_id"
#define DS_LEDGER_INFO_CREATED "ledger_created"

typedef struct ds_ledger_identity {
	char id[65];	  /* 32 hex digits; "" none */
	char created[32]; /* RFC 3339, UTC */
	char target[256]; /* the cluster's copy: the host of the target that wrote it */
} ds_ledger_identity;

/* What the identities of the ledger and of the cluster decide. */
enum ds_identity_verdict {
	DS_IDENTITY_SAME,    /* both, the same id: go on */
	DS_IDENTITY_FIRST,   /* neither: make one, keep it in both */
	DS_IDENTITY_PUBLISH, /* the ledger's only: write it to the cluster */
	DS_IDENTITY_LOST,    /* the cluster's only: the ledger was lost, refuse */
	DS_IDENTITY_OTHER,   /* two different ids: another ledger, refuse */
	DS_IDENTITY_ADOPT,   /* --new-ledger: this ledger (a new id if it has none) is the
				cluster's; modes read back from the Namespaces */
	DS_IDENTITY_VERDICT_MAX,
};

/** "same", "first", "publish", "lost", "other", "adopt"; "none" for _MAX (not decided). */
const char *ds_identity_verdict_name(enum ds_identity_verdict v);

/**
 * The decision on the ledger's id and the cluster's ("" or NULL: none), and
 * whether the operator accepted a new ledger.
 */
enum ds_identity_verdict ds_ledger_identity_decide(const char *ledger_id, const char *cluster_id,
						   bool new_ledger);

/**
 * The ledger file's identity into *out. A missing or 0-byte file has none
 * (and is left as it is). @return 1 found, 0 none, or a negative errno
 */
int ds_ledger_identity_read(const char *ledger_path, ds_ledger_identity *out, ds_err *err);

/**
 * The ledger's identity, made (random id, now) when it has none; the file is
 * created when missing. @return 1 made now, 0 it had one, or a negative errno
 */
int ds_ledger_identity_ensure(const char *ledger_path, ds_ledger_identity *out, ds_err *err);

/**
 * The agent's own namespace, where the ConfigMap is: identity.namespace of
 * the file, else the service account's (in a pod), else "drasync".
 */
const char *ds_ledger_identity_namespace(const ds_target_config *cfg, char *buf, size_t size);

/**
 * The cluster's identity (ConfigMap drasync-ledger in ns) into *out.
 * @return 1 found, 0 no ConfigMap (or one without data.ledgerId), < 0 the API's error
 */
int ds_ledger_identity_fetch(ds_kube *k, const char *ns, ds_ledger_identity *out,
			     ds_kube_error *ke);

/** Create or replace the ConfigMap with id (its target: this host). @return 0 or < 0 */
int ds_ledger_identity_publish(ds_kube *k, const char *ns, const ds_ledger_identity *id,
			       ds_kube_error *ke);

/**
 * Write mode, since (seconds since the epoch) and by on the Namespace ns as
 * its drasync.io/mode* annotations (a merge patch). @return 0 or < 0
 */
int ds_namespace_mode_annotate(ds_kube *k, const char *ns, enum ds_mode mode, int64_t since,
			       const char *by, ds_kube_error *ke);

/**
 * Read the modes back from the annotations of every target namespace cfg
 * names (sources[].namespaces and namespaceMappings, mapped) into the
 * ledger's table, for each namespace the table does not have yet (changed
 * by "new-ledger"). A Namespace missing or not readable is skipped.
 * *found: how many were read back. @return 0 or a negative errno (err says)
 */
int ds_namespace_modes_read_back(ds_kube *k, const ds_target_config *cfg, ds_namespace_modes *nm,
				 size_t *found, ds_err *err);

/* One check of a command (run, failover, failback, drill) before it writes the ledger. */
typedef struct ds_identity_check {
	const char *cmd;	 /* "run", "failover", ... in the messages */
	const char *ledger_path; /* the ledger file */
	bool new_ledger;	 /* --new-ledger */
	/* out */
	enum ds_identity_verdict verdict;
	ds_ledger_identity ledger, cluster;
	char ns[256];	   /* the ConfigMap's namespace */
	size_t modes_read; /* ADOPT: the modes read back */
	char msg[1200];	   /* what to say when it is not 0 */
} ds_identity_check;

/**
 * Read both identities, decide, and do what the verdict says (make the
 * ledger's identity, write the ConfigMap, read the modes back).
 * @return 0 go on; 1 refused (msg: why and what to do); 2 go on, but the
 *         ConfigMap could not be written (msg: why); < 0 could not decide (the
 *         API server did not answer, the ledger failed: msg says which)
 */
int ds_ledger_identity_check(ds_kube *k, const ds_target_config *cfg, ds_identity_check *c);

#endif
