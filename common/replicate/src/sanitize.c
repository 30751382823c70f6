#include "drasync/sanitize.h"

#include "drasync/k8s_object.h"
#include "drasync/kinds.h"
#include "drasync/standby_form.h"

#include <errno.h>
#include <string.h>

static const char *const server_metadata[] = {
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
    "ownerReferences",
    NULL,
};

/* Annotations the PV controller and schedulers write on a bound claim. */
static const char *const pvc_bind_annotations[] = {
    "pv.kubernetes.io/bind-completed",
    "pv.kubernetes.io/bound-by-controller",
    "volume.beta.kubernetes.io/storage-provisioner",
    "volume.kubernetes.io/storage-provisioner",
    "volume.kubernetes.io/selected-node",
    NULL,
};

/*
 * kubectl's client-side apply record describes the source's configuration
 * (source namespace, references before mapping): stale on the target, and it
 * would mislead a later `kubectl apply` there.
 */
static const char *const source_only_annotations[] = {
    "kubectl.kubernetes.io/last-applied-configuration",
    NULL,
};

/*
 * A Namespace's grant of admin access to devices (DRA, Kubernetes 1.36 GA): a
 * decision of each cluster's admins, never carried from the source to the
 * target (the importer waits for the target's own, agent-target preflight.h).
 */
static const char *const grant_labels[] = {
    "resource.kubernetes.io/admin-access",
    NULL,
};

static void del_keys(json_t *obj, const char *const *keys)
{
	for (; json_is_object(obj) && *keys; keys++)
		json_object_del(obj, *keys);
}

static int drop_finalizer(json_t *meta, const char *finalizer)
{
	json_t *fins = json_object_get(meta, "finalizers");
	size_t i;
	json_t *f;

	if (!json_is_array(fins))
		return 0;
	for (i = json_array_size(fins); i-- > 0;) {
		f = json_array_get(fins, i);
		if (json_is_string(f) && strcmp(json_string_value(f), finalizer) == 0)
			json_array_remove(fins, i);
	}
	if (json_array_size(fins) == 0)
		json_object_del(meta, "finalizers");
	return 0;
}

static void sanitize_service(json_t *spec)
{
	const char *ip = ds_json_str(spec, "clusterIP");
	json_t *ports = json_object_get(spec, "ports");
	size_t i;
	json_t *p;

	/* A headless Service keeps "None": that is a choice, not an allocation. */
	if (!ip || strcmp(ip, "None") != 0) {
		json_object_del(spec, "clusterIP");
		json_object_del(spec, "clusterIPs");
	}
	json_array_foreach (ports, i, p)
		json_object_del(p, "nodePort");
	json_object_del(spec, "healthCheckNodePort");
}

/*
 * A Job whose selector the job controller generated (manualSelector not
 * true) carries the source Job's uid in it and in its pod template's labels;
 * the target's API server generates its own and refuses another's (422
 * "must be <uid>"). A selector the user chose stays.
 */
static void sanitize_job(json_t *spec)
{
	static const char *const generated[] = {"controller-uid",
						"batch.kubernetes.io/controller-uid", NULL};

	if (!json_is_object(spec) || json_is_true(json_object_get(spec, "manualSelector")))
		return;
	json_object_del(spec, "selector");
	del_keys(ds_json_path(spec, "template.metadata.labels"), generated);
}

/*
 * drasync's own marks (SPEC §5, reverse replication): what a target wrote
 * on its copy (app.kubernetes.io/managed-by: drasync, every drasync.io/
 * annotation: source, uid, mode, relocation) belongs to that copy; exported
 * back it would make the other site's target take it for its own. A copy in
 * its standby form travels in the form it stands for.
 */
static int drop_drasync_marks(json_t *obj)
{
	json_t *meta = json_object_get(obj, "metadata");
	json_t *ann, *labels, *v, *tmp;
	const char *key, *m;
	int rc;

	if (ds_standby_form_is_parked(obj) && (rc = ds_standby_form_unpark(obj)) < 0)
		return rc;
	ann = json_object_get(meta, "annotations");
	if (json_is_object(ann))
		json_object_foreach_safe (ann, tmp, key, v)
			if (strncmp(key, DS_DRASYNC_PREFIX, strlen(DS_DRASYNC_PREFIX)) == 0)
				json_object_del(ann, key);
	labels = json_object_get(meta, "labels");
	m = ds_json_str(labels, DS_SANITIZE_MANAGED_BY);
	if (m && strcmp(m, "drasync") == 0)
		json_object_del(labels, DS_SANITIZE_MANAGED_BY);
	if (json_is_object(labels) && json_object_size(labels) == 0)
		json_object_del(meta, "labels");
	return 0;
}

int ds_sanitize(json_t *obj)
{
	const char *kind = ds_obj_kind(obj);
	json_t *meta = json_object_get(obj, "metadata");
	json_t *spec = json_object_get(obj, "spec");

	if (!json_is_object(obj))
		return 0;
	json_object_del(obj, "status");
	del_keys(meta, server_metadata);
	del_keys(json_object_get(meta, "annotations"), source_only_annotations);
	if (drop_drasync_marks(obj) < 0)
		return -ENOMEM;
	if (!kind)
		return 0;
	switch (ds_kind_id_from_name(kind)) {
	case DS_KIND_NAMESPACE:
		del_keys(json_object_get(meta, "labels"), grant_labels);
		if (json_is_object(json_object_get(meta, "labels")) &&
		    json_object_size(json_object_get(meta, "labels")) == 0)
			json_object_del(meta, "labels");
		break;
	case DS_KIND_POD:
		json_object_del(spec, "nodeName");
		break;
	case DS_KIND_SERVICE:
		sanitize_service(spec);
		break;
	case DS_KIND_PERSISTENT_VOLUME_CLAIM:
		json_object_del(spec, "volumeName");
		del_keys(json_object_get(meta, "annotations"), pvc_bind_annotations);
		break;
	case DS_KIND_JOB:
		sanitize_job(spec);
		break;
	case DS_KIND_RESOURCE_CLAIM:
		drop_finalizer(meta, "resource.kubernetes.io/delete-protection");
		break;
	case DS_KIND_POD_GROUP:
		/* The target's PodGroup protection controller sets its own. */
		drop_finalizer(meta, "scheduling.k8s.io/podgroup-protection");
		break;
	default: /* nothing of its own to drop */
		break;
	}
	if (json_is_object(json_object_get(meta, "annotations")) &&
	    json_object_size(json_object_get(meta, "annotations")) == 0)
		json_object_del(meta, "annotations");
	return 0;
}
