#include "applier_internal.h"

#include "drasync/buf.h"
#include "drasync/clock.h"
#include "drasync/dra_convert.h"
#include "drasync/dra_mapping.h"
#include "drasync/field_loss.h"
#include "drasync/k8s_object.h"
#include "drasync/kinds.h"
#include "drasync/ledger_objects.h"
#include "drasync/namespace_mode.h"
#include "drasync/preflight.h"
#include "drasync/report.h"
#include "drasync/sched_convert.h"
#include "drasync/selection.h"
#include "drasync/transform.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- tombstones --------------------------------------------------------------- */

/*
 * SPEC §5/§6: delete kind ns/name (as r's row names it) only when drasync
 * created it for this very source object: label managed-by=drasync, the
 * source uid of r's record, and for a Namespace the mark of one drasync made.
 */
void ds_applier_guarded_delete(ds_applier *a, const ds_object_state_row *r, const char *api,
			       const char *ns, const char *name, struct gone *g)
{
	struct ds_kube_resource res;
	const char *dra = ds_applier_need_api(a, r->kind ? r->kind : "");
	const char *managed, *uid_ann, *cluster, *written_by;
	json_t *obj = NULL, *labels;
	char owner[256];
	int rc, owned;

	memset(g, 0, sizeof(*g));
	if (dra && r->api_version && strncmp(r->api_version, "resource.k8s.io/", 16) == 0)
		api = dra;
	ds_kube_error_clear(&g->ke);
	rc = ds_kube_resource_find(a->cfg.kube, api, r->kind, &res, &g->ke);
	if (rc == -ENOENT) {
		g->state = DS_APPLY_DELETED;
		snprintf(g->reason, sizeof(g->reason), "not on the target (%s %s is not served)",
			 api, r->kind);
		return;
	}
	if (rc < 0) {
		g->what = "discovery";
		g->rc = rc;
		return;
	}
	ds_applier_count(a, &a->stats.api_reads, 1);
	rc = ds_kube_get(a->cfg.kube, &res, ns, name, NULL, &obj, &g->ke);
	if (rc == -ENOENT) {
		g->state = DS_APPLY_DELETED;
		snprintf(g->reason, sizeof(g->reason), "already gone from the target");
		return;
	}
	if (rc < 0) {
		g->what = "get";
		g->rc = rc;
		return;
	}
	labels = ds_json_path(obj, "metadata.labels");
	managed = labels ? ds_json_str(labels, DS_LABEL_MANAGED_BY) : NULL;
	uid_ann = ds_obj_annotation(obj, DS_ANNOTATION_SOURCE_UID);
	cluster = ds_obj_annotation(obj, DS_ANNOTATION_SOURCE_CLUSTER);
	written_by = ds_obj_annotation(obj, DS_ANNOTATION_SOURCE);
	owned = ds_object_state_target_owner(a->st, r->source, r->kind, ns, name, owner,
					     sizeof(owner), NULL);
	if (owned > 0) {
		g->state = DS_APPLY_KEPT;
		snprintf(g->reason, sizeof(g->reason),
			 "not deleted: %s %s%s%s is replicated from source %s, not %s", r->kind,
			 ns ? ns : "", ns ? "/" : "", name, owner, r->source);
	} else if (!managed || strcmp(managed, "drasync") != 0) {
		g->state = DS_APPLY_KEPT;
		snprintf(g->reason, sizeof(g->reason),
			 "not deleted: %s %s%s%s was not created by drasync (no label %s=drasync)",
			 r->kind, ns ? ns : "", ns ? "/" : "", name, DS_LABEL_MANAGED_BY);
	} else if (ds_kind_is(r->kind, DS_KIND_NAMESPACE) &&
		   !ds_obj_annotation(obj, DS_ANNOTATION_CREATED)) {
		g->state = DS_APPLY_KEPT;
		snprintf(g->reason, sizeof(g->reason),
			 "not deleted: Namespace %s was on the target before drasync applied it "
			 "(no annotation %s)",
			 name, DS_ANNOTATION_CREATED);
	} else if (written_by && strcmp(written_by, r->source) != 0) {
		g->state = DS_APPLY_KEPT;
		snprintf(g->reason, sizeof(g->reason),
			 "not deleted: %s %s%s%s has %s=%s, the tombstone is from source %s",
			 r->kind, ns ? ns : "", ns ? "/" : "", name, DS_ANNOTATION_SOURCE,
			 written_by, r->source);
	} else if (r->source_cluster && (!cluster || strcmp(cluster, r->source_cluster) != 0)) {
		g->state = DS_APPLY_KEPT;
		snprintf(
		    g->reason, sizeof(g->reason),
		    "not deleted: %s %s%s%s has %s=%s, the tombstone is from source cluster %s",
		    r->kind, ns ? ns : "", ns ? "/" : "", name, DS_ANNOTATION_SOURCE_CLUSTER,
		    cluster ? cluster : "(none)", r->source_cluster);
	} else if (!r->source_uid || !uid_ann || strcmp(uid_ann, r->source_uid) != 0) {
		g->state = DS_APPLY_KEPT;
		snprintf(g->reason, sizeof(g->reason),
			 "not deleted: %s %s%s%s has %s=%s, the tombstone is for source uid %s",
			 r->kind, ns ? ns : "", ns ? "/" : "", name, DS_ANNOTATION_SOURCE_UID,
			 uid_ann ? uid_ann : "(none)", r->source_uid ? r->source_uid : "(none)");
	} else {
		struct ds_kube_delete_opts dopts = {
		    .propagation = "Background",
		    .uid = ds_json_str(ds_json_path(obj, "metadata"), "uid"),
		    .grace_seconds = -1};
		ds_kube_error_clear(&g->ke);
		ds_applier_count(a, &a->stats.api_writes, 1);
		rc = ds_kube_delete(a->cfg.kube, &res, ns, name, &dopts, &g->ke);
		if (rc == 0 || rc == -ENOENT) {
			g->state = DS_APPLY_DELETED;
		} else {
			g->what = "delete";
			g->rc = rc;
		}
	}
	json_decref(obj);
}

/*
 * A tombstone: the target identity is where the object was applied, else the
 * mapping of the source's.
 */
void ds_applier_tombstone(ds_applier *a, struct item *it)
{
	ds_object_state_row *r = it->row;
	const char *api = r->target_api_version ? r->target_api_version : r->api_version;
	const char *ns = r->target_ns ? r->target_ns
			 : r->ns      ? ds_target_config_map_namespace(a->cfg.cfg, r->ns)
				      : NULL;
	const char *name = r->target_name ? r->target_name : r->name;
	struct gone g;

	/* SPEC §5: a tombstone is a write too: granted, valid names, before any call */
	if (!ds_applier_trust_check(a, it))
		return;
	ds_applier_guarded_delete(a, r, api, ns, name, &g);
	/* A prune says so (SPEC §6): the source sent no tombstone for it. */
	if (g.state == DS_APPLY_DELETED && !g.reason[0] && r->reason &&
	    strncmp(r->reason, "pruned: ", 8) == 0)
		ds_applier_decide(it, g.state, "%s", r->reason);
	else if (g.state)
		ds_applier_decide(it, g.state, "%s", g.reason);
	else
		ds_applier_decide_kube_failure(a, it, g.what, g.rc, &g.ke);
}
