/*
 * The trust boundary of the apply stage (SPEC §5): what a record may ask of
 * the target, decided before anything of it reaches the API server, and what
 * an object on the target must carry before drasync writes over it.
 */

#include "applier_internal.h"

#include "drasync/k8s_object.h"
#include "drasync/kinds.h"
#include "drasync/log.h"
#include "drasync/pod_security.h" /* ds_pss_level_name */
#include "drasync/source_grants.h"
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

/* A name from the wire, quoted as the logs quote it and cut to a readable length. */
static const char *shown(const char *s, char *buf, size_t size)
{
	char cut[96];

	snprintf(cut, sizeof(cut), "%.80s%s", s ? s : "", s && strlen(s) > 80 ? "..." : "");
	ds_log_quote(cut, buf, size);
	if (buf[0] != '"' && size > 2) {
		char tmp[200];
		snprintf(tmp, sizeof(tmp), "\"%s\"", buf);
		snprintf(buf, size, "%s", tmp);
	}
	return buf;
}

/* What the API server would refuse as a name of kind (a label for a Namespace and a
 * Service, else a subdomain; never a path segment like . or ..). @return NULL or why */
static const char *bad_name(const ds_kind *k, const char *name)
{
	if (!name || !name[0])
		return "is empty";
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || strpbrk(name, "/%"))
		return "may not be '.', '..' or hold '/' or '%'";
	if (k->id == DS_KIND_NAMESPACE || k->id == DS_KIND_SERVICE)
		return ds_dns_label_valid(name)
			   ? NULL
			   : "is not a DNS-1123 label (at most 63 of a-z, 0-9, "
			     "'-', alphanumeric at both ends)";
	return ds_dns_subdomain_valid(name) ? NULL
					    : "is not a DNS-1123 subdomain (at most 253 of a-z, "
					      "0-9, '-', '.')";
}

static bool same(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "") == 0;
}

/* The group of an apiVersion ("" for "v1"). */
static void group_of(const char *api, char *buf, size_t size)
{
	const char *slash = api ? strchr(api, '/') : NULL;

	snprintf(buf, size, "%.*s", slash ? (int)(slash - api) : 0, slash ? api : "");
}

bool ds_applier_trust_check(ds_applier *a, struct item *it)
{
	const ds_object_state_row *r = it->row;
	const ds_target_config *cfg = a->cfg.cfg;
	const ds_kind *k = ds_kind_from_name(r->kind);
	const char *ns = r->ns && r->ns[0] ? r->ns : NULL, *why;
	char q[200], q2[200], group[128], text[REASON_MAX];

	group_of(r->api_version, group, sizeof(group));
	if (!k || strcmp(k->group, group) != 0) {
		ds_applier_refuse(it, DS_REFUSAL_KIND, "kind %s of %s is not replicated by drasync",
				  shown(r->kind, q, sizeof(q)),
				  shown(r->api_version, q2, sizeof(q2)));
		return false;
	}
	if ((why = bad_name(k, r->name))) {
		ds_applier_refuse(it, DS_REFUSAL_NAME, "%s name %s %s", k->name,
				  shown(r->name, q, sizeof(q)), why);
		return false;
	}
	if (k->namespaced && (!ns || !ds_dns_label_valid(ns))) {
		ds_applier_refuse(it, DS_REFUSAL_NAME, "%s %s: namespace %s %s", k->name,
				  shown(r->name, q, sizeof(q)), shown(ns, q2, sizeof(q2)),
				  ns ? "is not a DNS-1123 label"
				     : "is missing (the kind is namespaced)");
		return false;
	}
	if (!k->namespaced && ns) {
		ds_applier_refuse(it, DS_REFUSAL_NAME,
				  "%s %s is cluster-scoped: the record names namespace %s", k->name,
				  shown(r->name, q, sizeof(q)), shown(ns, q2, sizeof(q2)));
		return false;
	}
	if (it->obj) {
		const char *pns = ds_obj_namespace(it->obj);

		if (!same(ds_obj_api_version(it->obj), r->api_version) ||
		    !same(ds_obj_kind(it->obj), r->kind) || !same(ds_obj_name(it->obj), r->name) ||
		    !same(k->namespaced ? pns : NULL, ns) || (!k->namespaced && pns && pns[0])) {
			char payload[400];
			ds_obj_describe(it->obj, payload, sizeof(payload));
			ds_applier_refuse(
			    it, DS_REFUSAL_REFERENCE,
			    "the record names %s %s%s%s (%s) but its payload is %s (%s)", r->kind,
			    ns ? ns : "", ns ? "/" : "", r->name,
			    r->api_version ? r->api_version : "", payload,
			    ds_obj_api_version(it->obj) ? ds_obj_api_version(it->obj)
							: "no apiVersion");
			return false;
		}
	}
	/* A Namespace is granted by its own name; a cluster-scoped DRA kind by dra's keys. */
	if ((k->namespaced || k->id == DS_KIND_NAMESPACE) &&
	    !ds_grant_namespace(cfg, r->source, k->namespaced ? ns : r->name, text, sizeof(text))) {
		ds_applier_refuse(it, DS_REFUSAL_NAMESPACE, "%s", text);
		return false;
	}
	return true;
}

/* Whether obj on the target carries drasync's marks for the row's source. */
static bool marked_for(const json_t *obj, const ds_object_state_row *r)
{
	const char *managed = ds_obj_label(obj, DS_LABEL_MANAGED_BY);
	const char *cluster = ds_obj_annotation(obj, DS_ANNOTATION_SOURCE_CLUSTER);

	return managed && strcmp(managed, "drasync") == 0 && cluster && r->source_cluster &&
	       strcmp(cluster, r->source_cluster) == 0;
}

int ds_applier_check_first_write(ds_applier *a, struct item *it)
{
	const ds_object_state_row *r = it->row;
	const char *ns = ds_obj_namespace(it->obj), *name = ds_obj_name(it->obj);
	ds_kube_error ke;
	json_t *got = NULL;
	char what[400];
	int rc;

	/* What this source wrote before (the ledger says so) is its own. */
	if (r->has_applied_hash || r->target_name)
		return 0;
	if (ds_kind_is(ds_obj_kind(it->obj), DS_KIND_NAMESPACE))
		return 0; /* a Namespace keeps its own metadata instead
			     (ds_applier_namespace_labels) */
	ds_kube_error_clear(&ke);
	ds_applier_count(a, &a->stats.api_reads, 1);
	rc = ds_kube_get(a->cfg.kube, &it->res, ns, name, NULL, &got, &ke);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0) {
		ds_applier_decide_kube_failure(a, it, "get (does it exist on the target?)", rc,
					       &ke);
		return 0;
	}
	if (marked_for(got, r)) {
		json_decref(got);
		return 0; /* written for this source before the ledger knew (a restart) */
	}
	ds_obj_describe(it->obj, what, sizeof(what));
	if (ds_target_config_adopt_existing(a->cfg.cfg)) {
		const char *cluster = ds_obj_annotation(got, DS_ANNOTATION_SOURCE_CLUSTER);
		snprintf(it->took, sizeof(it->took),
			 "adopted: %s existed on the target without drasync's marks for source "
			 "%s%s%s%s; taken over (adoptExisting: true)",
			 what, r->source, cluster ? " (it was replicated from cluster " : "",
			 cluster ? cluster : "", cluster ? ")" : "");
		it->takeover = true;
		json_decref(got);
		return 0;
	}
	{
		const char *cluster = ds_obj_annotation(got, DS_ANNOTATION_SOURCE_CLUSTER);
		if (cluster && ds_obj_label(got, DS_LABEL_MANAGED_BY))
			ds_applier_refuse(
			    it, DS_REFUSAL_OWNER,
			    "%s exists on the target and was created by drasync for "
			    "source cluster %s, not %s: set adoptExisting: true to take "
			    "it over",
			    what, cluster, r->source_cluster ? r->source_cluster : r->source);
		else
			ds_applier_refuse(it, DS_REFUSAL_EXISTS,
					  "%s exists on the target and was not created by drasync: "
					  "set adoptExisting: true to take it over",
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
