/*
 * The trust boundary's decisions that need nothing but the target's file: the
 * kind table, the API server's name rules, the reference against the payload,
 * the source's namespaces and its Pod Security level (SPEC §5).
 */

#include "drasync/record_check.h"

#include "drasync/k8s_object.h"
#include "drasync/kinds.h"
#include "drasync/log.h"
#include "drasync/object_names.h"
#include "drasync/pod_security.h"
#include "drasync/selection.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

const char *ds_record_shown(const char *s, char *buf, size_t size)
{
	char cut[96], q[200];
	size_t n;

	snprintf(cut, sizeof(cut), "%.80s%s", s ? s : "", s && strlen(s) > 80 ? "..." : "");
	ds_log_quote(cut, q, sizeof(q));
	if (q[0] == '"') {
		snprintf(buf, size, "%s", q);
		return buf;
	}
	n = strlen(q);
	if (n + 3 > size)
		n = size - 3;
	buf[0] = '"';
	memcpy(buf + 1, q, n);
	buf[n + 1] = '"';
	buf[n + 2] = '\0';
	return buf;
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

/* Whether the payload names what the reference names. */
static bool payload_agrees(const ds_kind *k, const ds_record_ref *r, const char *ns,
			   const json_t *obj)
{
	const char *pns = ds_obj_namespace(obj);

	return same(ds_obj_api_version(obj), r->api_version) && same(ds_obj_kind(obj), r->kind) &&
	       same(ds_obj_name(obj), r->name) && same(k->namespaced ? pns : NULL, ns) &&
	       (k->namespaced || !pns || !pns[0]);
}

static int refuse_reference(const ds_kind *k, const ds_record_ref *r, const char *ns,
			    const json_t *obj, char *why, size_t size)
{
	const char *pns = ds_obj_namespace(obj), *papi = ds_obj_api_version(obj);
	char payload[400], pq[400], api[200], api2[200];

	ds_obj_describe(obj, payload, sizeof(payload));
	/* the payload's names were never checked: quoted unless valid */
	if (ds_name_check(k->name, ds_obj_name(obj), NULL, 0) == 0 &&
	    (!pns || ds_name_check_namespace(pns, NULL, 0) == 0))
		snprintf(pq, sizeof(pq), "%s", payload);
	else
		ds_record_shown(payload, pq, sizeof(pq));
	/* kind and names of the reference were checked above; its version was not */
	ds_log_quote(r->api_version ? r->api_version : "", api, sizeof(api));
	if (papi)
		ds_log_quote(papi, api2, sizeof(api2));
	snprintf(why, size, "the record names %s %s%s%s (%s) but its payload is %s (%s)", r->kind,
		 ns ? ns : "", ns ? "/" : "", r->name, api, pq, papi ? api2 : "no apiVersion");
	return DS_REFUSAL_REFERENCE;
}

int ds_record_check(const ds_target_config *cfg, const ds_record_ref *r, const json_t *obj,
		    char *why, size_t size)
{
	const ds_kind *k = ds_kind_from_name(r->kind);
	const char *ns = r->ns && r->ns[0] ? r->ns : NULL;
	char q[200], q2[200], group[128], text[600];

	group_of(r->api_version, group, sizeof(group));
	if (!k || strcmp(k->group, group) != 0) {
		/* a source never lists these; the reason is still the kind's own */
		const char *never = ds_selection_never_reason(r->kind, group);

		snprintf(why, size, "kind %s of %s is not replicated by drasync%s%s",
			 ds_record_shown(r->kind, q, sizeof(q)),
			 ds_record_shown(r->api_version, q2, sizeof(q2)), never ? ": " : "",
			 never ? never : "");
		return DS_REFUSAL_KIND;
	}
	if (ds_name_check(k->name, r->name, text, sizeof(text)) < 0) {
		snprintf(why, size, "%s", text);
		return DS_REFUSAL_NAME;
	}
	if (k->namespaced && ds_name_check_namespace(ns, text, sizeof(text)) < 0) {
		snprintf(why, size, "%s %s: %s", k->name, ds_record_shown(r->name, q, sizeof(q)),
			 text);
		return DS_REFUSAL_NAME;
	}
	if (!k->namespaced && ns) {
		snprintf(why, size, "%s %s is cluster-scoped: the record names namespace %s",
			 k->name, ds_record_shown(r->name, q, sizeof(q)),
			 ds_record_shown(ns, q2, sizeof(q2)));
		return DS_REFUSAL_NAME;
	}
	if (obj && !payload_agrees(k, r, ns, obj))
		return refuse_reference(k, r, ns, obj, why, size);
	/* A Namespace is granted by its own name; a cluster-scoped DRA kind by dra's keys. */
	if ((k->namespaced || k->id == DS_KIND_NAMESPACE) &&
	    !ds_grant_namespace(cfg, r->source, k->namespaced ? ns : r->name, text, sizeof(text))) {
		snprintf(why, size, "%s", text);
		return DS_REFUSAL_NAMESPACE;
	}
	if (obj && ds_workload_from_kind(r->kind) >= 0) {
		int v = ds_pss_check_object(obj, ds_grant_pod_security(cfg, r->source), text,
					    sizeof(text));

		if (v < 0) {
			snprintf(why, size, "%s %s/%s: its pod spec cannot be checked", r->kind, ns,
				 r->name);
			return DS_REFUSAL_POD_SECURITY;
		}
		if (v > 0) {
			snprintf(why, size, "%s %s/%s: %s", r->kind, ns, r->name, text);
			return DS_REFUSAL_POD_SECURITY;
		}
	}
	return -1;
}
