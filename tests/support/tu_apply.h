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
#include "drasync/target_config.h"
#include "tu_ledger.h"

#include <jansson.h>
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

#endif
