/*
 * The trust boundary of the apply stage (SPEC §5): what a record may ask of
 * the target, decided before anything of it reaches the API server, and what
 * an object on the target must carry before drasync writes over it.
 */

#include "applier_internal.h"

#include "drasync/k8s_object.h"
#include "drasync/kinds.h"
#include "drasync/log.h"
#include "drasync/pod_security.h"
#include "drasync/record_check.h"
#include "drasync/source_grants.h"
#include "drasync/standby_form.h"
#include "drasync/transform.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define PSA_PREFIX "pod-security.kubernetes.io/"

void ds_applier_refuse(struct item *it, int refusal, const char *fmt, ...)
{
	va_list ap;

	ds_applier_decide(it, DS_APPLY_REFUSED, NULL);
	va_start(ap, fmt);
	vsnprintf(it->reason, sizeof(it->reason), fmt, ap);
	va_end(ap);
	it->out.reason = it->reason;
	it->refusal = refusal;
}

bool ds_applier_trust_check(ds_applier *a, struct item *it)
{
	const ds_object_state_row *r = it->row;
	ds_record_ref ref = {r->source, r->api_version, r->kind, r->ns, r->name};
	char text[REASON_MAX];
	int refusal = ds_record_check(a->cfg.cfg, &ref, it->obj, text, sizeof(text));

	if (refusal < 0)
		return true;
	ds_applier_refuse(it, refusal, "%s", text);
	return false;
}

/* Whether an object whose label managed-by and annotations source and source-cluster are
 * these carries drasync's marks for the row's source: its authenticated name, or (written
 * before drasync marked it) its cluster. */
static bool marked_for(const char *managed, const char *source, const char *cluster,
		       const ds_object_state_row *r)
{
	if (!managed || strcmp(managed, "drasync") != 0)
		return false;
	if (source)
		return strcmp(source, r->source) == 0;
	return cluster && r->source_cluster && strcmp(cluster, r->source_cluster) == 0;
}

/* A pass that writes this many objects of one kind and namespace for the first time lists
 * what is there and not drasync's once, instead of reading each. */
#define FIRST_WRITES_LISTED 4

static json_t *marks_of(const json_t *obj)
{
	const char *m = ds_obj_label(obj, DS_LABEL_MANAGED_BY);
	const char *c = ds_obj_annotation(obj, DS_ANNOTATION_SOURCE_CLUSTER);

	const char *s = ds_obj_annotation(obj, DS_ANNOTATION_SOURCE);
	const char *rel = ds_obj_annotation(obj, DS_ANNOTATION_RELOCATED_TO);

	return json_pack("[s?s?s?s?]", m, c, s, rel);
}

/*
 * What is on the target at it's name, as [managed-by, source-cluster] (*out NULL: nothing
 * there), from the pass's list of its kind and namespace once there were
 * FIRST_WRITES_LISTED, else by a read. @return 0, or the failed call's rc (ke says why)
 */
static int existing(ds_applier *a, struct item *it, json_t **out, ds_kube_error *ke)
{
	const char *ns = ds_obj_namespace(it->obj), *name = ds_obj_name(it->obj);
	json_t *entry, *names, *got = NULL, *item;
	char key[800];
	size_t i;
	int rc;

	*out = NULL;
	snprintf(key, sizeof(key), "%s|%s|%s", ds_obj_api_version(it->obj), ds_obj_kind(it->obj),
		 ns ? ns : "");
	if (!a->exists && !(a->exists = json_object()))
		return -ENOMEM;
	entry = json_object_get(a->exists, key);
	if (!entry) {
		entry = json_pack("{sI}", "seen", (json_int_t)0);
		if (!entry || json_object_set_new(a->exists, key, entry) < 0)
			return -ENOMEM;
	}
	json_object_set_new(entry, "seen",
			    json_integer(json_integer_value(json_object_get(entry, "seen")) + 1));
	names = json_object_get(entry, "names");
	if (!names && json_integer_value(json_object_get(entry, "seen")) >= FIRST_WRITES_LISTED) {
		/* What drasync did not make: the server filters, few come back. One drasync
		 * made is either this source's or in the ledger of another (its owner row,
		 * checked in prepare). */
		struct ds_kube_list_opts lo = {.label_selector = DS_LABEL_MANAGED_BY "!=drasync",
					       .limit = 500};

		ds_applier_count(a, &a->stats.api_reads, 1);
		if (ds_kube_list(a->cfg.kube, &it->res, ns, &lo, &got, NULL, ke) == 0) {
			names = json_object();
			json_array_foreach (json_object_get(got, "items"), i, item) {
				const char *n = ds_obj_name(item);
				if (n && names)
					json_object_set_new(names, n, marks_of(item));
			}
			json_decref(got);
			got = NULL;
			if (!names || json_object_set_new(entry, "names", names) < 0)
				return -ENOMEM;
		}
		ds_kube_error_clear(ke);
	}
	if (names) {
		*out = json_incref(json_object_get(names, name));
		return 0;
	}
	ds_applier_count(a, &a->stats.api_reads, 1);
	rc = ds_kube_get(a->cfg.kube, &it->res, ns, name, NULL, &got, ke);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return rc;
	*out = marks_of(got);
	json_decref(got);
	return *out ? 0 : -ENOMEM;
}

int ds_applier_check_first_write(ds_applier *a, struct item *it)
{
	const ds_object_state_row *r = it->row;
	const char *managed, *cluster, *source, *relocated;
	ds_kube_error ke;
	json_t *got = NULL;
	char what[400];
	int rc;

	/* What this source wrote before (the ledger says so) is its own. */
	if (r->has_applied_hash || r->target_name)
		return 0;
	if (ds_kind_is(ds_obj_kind(it->obj), DS_KIND_NAMESPACE))
		return 0; /* a Namespace keeps its own metadata (mark_created_namespace) */
	ds_kube_error_clear(&ke);
	rc = existing(a, it, &got, &ke);
	if (rc == -ENOMEM)
		return rc;
	if (rc < 0) {
		ds_applier_decide_kube_failure(a, it, "get (does it exist on the target?)", rc,
					       &ke);
		return 0;
	}
	if (!got)
		return 0;
	managed = json_string_value(json_array_get(got, 0));
	cluster = json_string_value(json_array_get(got, 1));
	source = json_string_value(json_array_get(got, 2));
	relocated = json_string_value(json_array_get(got, 3));
	ds_obj_describe(it->obj, what, sizeof(what));
	if (marked_for(managed, source, cluster, r)) {
		/* written for this source before the ledger knew (a restart) */
	} else if (relocated) {
		/* parked here by a relocation (or the operator) to the site this source
		 * replicates from: reverse replication updates it (SPEC §5) */
		snprintf(it->took, sizeof(it->took),
			 "taken over: %s was parked here when it was relocated to %s; source %s "
			 "updates it now (reverse replication)",
			 what, relocated, r->source);
		it->takeover = true;
	} else if (ds_target_config_adopt_existing(a->cfg.cfg)) {
		snprintf(it->took, sizeof(it->took),
			 "adopted: %s existed on the target without drasync's marks for source "
			 "%s%s%s%s; taken over (adoptExisting: true)",
			 what, r->source, cluster ? " (it was replicated from cluster " : "",
			 cluster ? cluster : "", cluster ? ")" : "");
		it->takeover = true;
	} else if (managed && strcmp(managed, "drasync") == 0) {
		ds_applier_refuse(it, DS_REFUSAL_OWNER,
				  "%s exists on the target and was created by drasync for source "
				  "%s, not %s: set adoptExisting: true to take it over",
				  what,
				  source    ? source
				  : cluster ? cluster
					    : "(unknown)",
				  r->source);
	} else {
		ds_applier_refuse(it, DS_REFUSAL_EXISTS,
				  "%s exists on the target and was not created by drasync: set "
				  "adoptExisting: true to take it over",
				  what);
	}
	json_decref(got);
	return 0;
}

/* Drop every pod-security.kubernetes.io/ label of obj. @return 0, -ENOMEM */
static int drop_psa_labels(json_t *obj)
{
	json_t *labels = ds_json_path(obj, "metadata.labels");
	const char *key;
	json_t *v, *tmp;

	if (!json_is_object(labels))
		return 0;
	json_object_foreach_safe (labels, tmp, key, v)
		if (strncmp(key, PSA_PREFIX, strlen(PSA_PREFIX)) == 0)
			json_object_del(labels, key);
	return 0;
}

int ds_applier_namespace_foreign(ds_applier *a, const char *name)
{
	struct ds_kube_resource res;
	ds_kube_error ke;
	json_t *got = NULL;
	int rc;

	ds_kube_error_clear(&ke);
	if (!name || ds_kube_resource_find(a->cfg.kube, "v1", "Namespace", &res, &ke) < 0)
		return -ENOENT;
	ds_applier_count(a, &a->stats.api_reads, 1);
	rc = ds_kube_get(a->cfg.kube, &res, NULL, name, NULL, &got, &ke);
	if (rc == 0)
		rc = ds_obj_annotation(got, DS_ANNOTATION_CREATED) ? 0 : 1;
	else if (rc == -ENOENT)
		rc = 0;
	json_decref(got);
	return rc;
}

int ds_applier_namespace_labels(ds_applier *a, struct item *it)
{
	const char *level;

	if (!ds_kind_is(ds_obj_kind(it->obj), DS_KIND_NAMESPACE))
		return 0;
	drop_psa_labels(it->obj);
	/* Set on every Namespace prepared (so the hash follows the grant); one that exists and
	 * that drasync did not create is not written at all (mark_created_namespace). */
	level = ds_pss_level_name(ds_grant_pod_security(a->cfg.cfg, it->row->source));
	if (ds_obj_set_label(it->obj, PSA_PREFIX "enforce", level) < 0 ||
	    ds_obj_set_label(it->obj, PSA_PREFIX "enforce-version", "latest") < 0)
		return -ENOMEM;
	return 0;
}
