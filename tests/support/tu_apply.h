#ifndef DRASYNC_TU_APPLY_H
#define DRASYNC_TU_APPLY_H

/*
 * A target site for tests of the apply stage against the real v1 cluster
 * (fixture kube_v1; include after cmocka.h): source namespace src mapped to a
 * fresh target namespace dst, a real ledger in a fresh directory with a
 * TargetConfig file beside it (stateDir = that directory, for the commands),
 * records committed as the receiver does, and the applier working from them.
 */

#include "drasync/applier.h"
#include "drasync/kube_client.h"
#include "drasync/object_state.h"
#include "drasync/target_config.h"
#include "tu_ledger.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct tu_apply {
	char *dir;
	char path[1024], config[1024]; /* the ledger; the TargetConfig file */
	char src[64], dst[96];
	tu_ledger l;
	ds_kube *k;
	ds_target_config *cfg;
	ds_applier *a;
	char *payloads[256];
	size_t n_payloads;
	int takeovers;	       /* applier events that said so */
	char took_reason[800]; /* the last one's reason */
} tu_apply;

typedef struct tu_apply_opts {
	const char *mode;	    /* "migrate" (NULL) or "standby" */
	int discovery_refresh_ms;   /* the applier's (0: its default) */
	const char *dra_yaml;	    /* more lines under dra: ("  requireTargetObjects: false\n") */
	const char *kubeconfig_env; /* the target's kubeconfig variable (NULL: DS_KUBECONFIG_V1) */
} tu_apply_opts;

/** The site of source namespace src (o may be NULL); the target namespace is itest-ap-<n>. */
tu_apply *tu_apply_new(const char *src, const tu_apply_opts *o);

/** Delete the target namespace (in the background) and free everything. */
void tu_apply_free(tu_apply *e);

/** Commit objects (borrowed; kept alive by the caller until return) as upserts in one batch. */
void tu_apply_commit(tu_apply *e, json_t *const *objs, size_t n);

/** Commit one object as an upsert; takes the reference. */
void tu_apply_commit1(tu_apply *e, json_t *obj);

/** One applier pass; fails the test on an error. @return objects decided */
int tu_apply_pass(tu_apply *e);

/** Passes until one decides nothing. */
void tu_apply_settle(tu_apply *e);

/** The object name of kind in the target namespace (or cluster-scoped), or NULL when absent. */
json_t *tu_apply_target_get(tu_apply *e, const char *api, const char *kind, const char *name);

/** One YAML document, printf-formatted (tests pass the source namespace); caller decrefs. */
json_t *tu_objf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/** Commit ConfigMaps names[0..n) (n <= 8) with data {a: '1'} in the source namespace, as one batch.
 */
void tu_apply_commit_configmaps(tu_apply *e, const char *const *names, size_t n);

/** The applier's counters. */
ds_applier_stats tu_apply_stats(tu_apply *e);

/** The ledger row of an object of the source (source names); the caller disposes. */
ds_object_state_row tu_apply_row(tu_apply *e, const char *api, const char *kind, const char *name,
				 bool cluster_scoped);

/** Fail unless the object's ledger row is in state want, its reason containing reason_part. */
void tu_apply_assert_state(tu_apply *e, const char *api, const char *kind, const char *name,
			   enum ds_apply_state want, const char *reason_part);

/**
 * The applier's ledger steps without a cluster: fold the inbox in, mark up to
 * max due objects applied (in ml-team). @return how many
 */
size_t tu_apply_mark_applied(ds_object_state *st, size_t max);

#endif
