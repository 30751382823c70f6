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

/* ---- preflight ---------------------------------------------------------------- */

/* The apiVersion the target serves kind under, for the kinds preflight names. */
const char *ds_applier_need_api(const ds_applier *a, const char *kind)
{
	if (ds_kind_is_dra(kind))
		return ds_dra_api_version(a->dra);
	if (ds_kind_is_group(kind))
		return ds_sched_api_version(a->sched);
	return NULL;
}

/*
 * Whether kind ns/name is applied by us or exists on the target. Lookups on
 * the target are remembered for the pass.
 * @return 1, 0, or -ENOMEM
 */
static int present(ds_applier *a, const char *kind, const char *ns, const char *name)
{
	struct ds_kube_resource res;
	ds_kube_error ke;
	char key[800];
	json_t *seen;
	const char *api = ds_applier_need_api(a, kind);
	int rc;

	rc = ds_object_state_target_applied(a->st, kind, ns, name, NULL);
	if (rc != 0)
		return rc > 0 ? 1 : 0;
	snprintf(key, sizeof(key), "%s/%s/%s", kind, ns ? ns : "", name);
	seen = json_object_get(a->present, key);
	if (seen)
		return json_is_true(seen);
	ds_kube_error_clear(&ke);
	if (!api || ds_kube_resource_find(a->cfg.kube, api, kind, &res, &ke) < 0) {
		rc = 0;
	} else {
		json_t *obj = NULL;
		ds_applier_count(a, &a->stats.api_reads, 1);
		rc = ds_kube_get(a->cfg.kube, &res, ns, name, NULL, &obj, &ke) == 0;
		json_decref(obj);
	}
	if (json_object_set_new(a->present, key, json_boolean(rc)) < 0)
		return -ENOMEM;
	return rc;
}

struct missing {
	ds_applier *a;
	char text[REASON_MAX];
	size_t used, n;
	bool device_classes; /* report DeviceClasses (else ignore them) */
};

bool ds_applier_is_claim_or_template(const char *kind)
{
	return ds_kind_is_claim(kind);
}

void ds_applier_obj_key(const char *kind, const char *ns, const char *name, char *buf, size_t size)
{
	snprintf(buf, size, "%s/%s/%s", kind, ns ? ns : "", name);
}

/*
 * The claim or template as the target has it: applied in this pass, else read
 * (once per pass). @return borrowed, or NULL when it cannot be read
 */
static json_t *dra_object(ds_applier *a, const char *kind, const char *ns, const char *name)
{
	struct ds_kube_resource res;
	ds_kube_error ke;
	json_t *o = NULL;
	char key[800];

	ds_applier_obj_key(kind, ns, name, key, sizeof(key));
	o = json_object_get(a->objs, key);
	if (o)
		return json_is_object(o) ? o : NULL;
	ds_kube_error_clear(&ke);
	if (ds_kube_resource_find(a->cfg.kube, ds_applier_need_api(a, kind), kind, &res, &ke) ==
	    0) {
		ds_applier_count(a, &a->stats.api_reads, 1);
		if (ds_kube_get(a->cfg.kube, &res, ns, name, NULL, &o, &ke) < 0)
			o = NULL;
	}
	if (json_object_set_new(a->objs, key, o ? o : json_null()) < 0)
		return NULL;
	return o;
}

static int need(void *ud, const char *kind, const char *ns, const char *name)
{
	struct missing *m = ud;
	int p;

	if (!m->device_classes && ds_kind_is(kind, DS_KIND_DEVICE_CLASS))
		return 0;
	p = present(m->a, kind, ns, name);
	if (p < 0)
		return p;
	if (p && !m->device_classes && ds_applier_is_claim_or_template(kind)) {
		/* A workload also waits for the DeviceClasses its claims and templates
		 * request: without them its pods cannot be scheduled either. */
		json_t *o = dra_object(m->a, kind, ns, name);
		if (o) {
			m->device_classes = true;
			p = ds_preflight_needs(o, need, m);
			m->device_classes = false;
			if (p < 0)
				return p;
		}
		return 0;
	}
	if (!p) {
		int w = snprintf(m->text + m->used, sizeof(m->text) - m->used, "%s%s %s%s%s",
				 m->n ? ", " : "", kind, ns ? ns : "", ns ? "/" : "", name);
		if (w > 0 && (size_t)w < sizeof(m->text) - m->used)
			m->used += (size_t)w;
		m->n++;
	}
	return 0;
}

/* The target's DeviceClasses, listed once per pass (for extended resources). @return borrowed */
static const json_t *device_classes(ds_applier *a)
{
	struct ds_kube_resource res;
	ds_kube_error ke;
	json_t *list = NULL;

	if (a->classes)
		return a->classes;
	ds_kube_error_clear(&ke);
	if (ds_kube_resource_find(a->cfg.kube, ds_dra_api_version(a->dra), "DeviceClass", &res,
				  &ke) == 0) {
		ds_applier_count(a, &a->stats.api_reads, 1);
		if (ds_kube_list(a->cfg.kube, &res, NULL, NULL, &list, NULL, &ke) < 0)
			list = NULL;
	}
	a->classes = list ? json_incref(json_object_get(list, "items")) : json_array();
	json_decref(list);
	return a->classes;
}

struct ext_note {
	ds_applier *a;
	char *note;
	size_t size, used;
};

/* KEP-5004: what on the target serves an extended resource a container keeps. */
static int ext_note(void *ud, const char *container, const char *resource)
{
	struct ext_note *x = ud;
	const json_t *classes = device_classes(x->a);
	const char *by = NULL;
	size_t i;
	json_t *dc;
	int w;

	json_array_foreach (classes, i, dc)
		if (ds_preflight_class_serves(dc, resource))
			by = ds_obj_name(dc);
	if (x->used + 1 >= x->size)
		return 0;
	if (by)
		w = snprintf(x->note + x->used, x->size - x->used,
			     "%scontainer %s keeps %s: DeviceClass %s serves it (DRA extended "
			     "resource)",
			     x->used ? "; " : "", container, resource, by);
	else if (strncmp(resource, "deviceclass.resource.kubernetes.io/", 35) == 0)
		/* a class's implicit name: only that class serves it */
		w = snprintf(x->note + x->used, x->size - x->used,
			     "%scontainer %s keeps %s: the target has no DeviceClass %s, whose "
			     "implicit extended resource it is",
			     x->used ? "; " : "", container, resource, resource + 35);
	else
		w = snprintf(
		    x->note + x->used, x->size - x->used,
		    "%scontainer %s keeps %s: no DeviceClass of the target serves it, only "
		    "a device plugin can",
		    x->used ? "; " : "", container, resource);
	if (w > 0)
		x->used = (size_t)w < x->size - x->used ? x->used + (size_t)w : x->size - 1;
	return 0;
}

/*
 * The target's Namespace ns, read once per pass (kept with the pass's claims
 * and templates). @return borrowed, or NULL when it is not there or cannot be read
 */
static json_t *target_namespace(ds_applier *a, const char *ns)
{
	struct ds_kube_resource res;
	ds_kube_error ke;
	json_t *o = NULL;
	char key[800];

	ds_applier_obj_key("Namespace", NULL, ns, key, sizeof(key));
	o = json_object_get(a->objs, key);
	if (o)
		return json_is_object(o) ? o : NULL;
	ds_kube_error_clear(&ke);
	if (ds_kube_resource_find(a->cfg.kube, "v1", "Namespace", &res, &ke) == 0) {
		ds_applier_count(a, &a->stats.api_reads, 1);
		if (ds_kube_get(a->cfg.kube, &res, NULL, ns, NULL, &o, &ke) < 0)
			o = NULL;
	}
	if (json_object_set_new(a->objs, key, o ? o : json_null()) < 0)
		return NULL;
	return o;
}

void ds_applier_decide_wait_admin(ds_applier *a, struct item *it, const char *request)
{
	const char *ns = ds_obj_namespace(it->obj);

	ds_applier_decide(it, DS_APPLY_WAITING,
			  "waits for admin access: request %s asks for adminAccess, which the "
			  "target admits only in a Namespace labelled %s: \"true\"; Namespace %s "
			  "on the target %s (a grant of the target's admins: drasync never sets "
			  "it; looked at again every %d s)",
			  request && request[0] ? request : "(unnamed)", DS_ADMIN_ACCESS_LABEL,
			  ns ? ns : "", target_namespace(a, ns) ? "lacks it" : "is not there yet",
			  (a->cfg.wait_retry_ms + 999) / 1000);
	it->out.next_try_at = ds_clock_wall_ms() + a->cfg.wait_retry_ms;
}

/*
 * SPEC §5: a workload waits for the claims and templates it references and
 * the DeviceClasses they request; a claim or template is applied even when
 * its DeviceClass is missing (nothing else is held back), and its reason says
 * which is missing. A claim or template that asks for admin access waits until
 * its target Namespace carries the admins' grant (DS_ADMIN_ACCESS_LABEL).
 * @return 0, -ENOMEM
 */
int ds_applier_preflight(ds_applier *a, struct item *it, char *note, size_t note_size)
{
	bool workload = ds_workload_from_kind(ds_obj_kind(it->obj)) >= 0 ||
			ds_obj_in_group(it->obj, "scheduling.k8s.io");
	struct missing m = {.a = a, .device_classes = !workload};
	const ds_dra_config *dra = ds_target_config_dra(a->cfg.cfg);
	int rc;

	note[0] = '\0';
	if (!workload) {
		/* Admitted only where the target's admins granted it: waits until they do. */
		const char *req = ds_preflight_admin_access(it->obj);
		const json_t *ns = req ? target_namespace(a, ds_obj_namespace(it->obj)) : NULL;

		if (req && !ds_preflight_admin_granted(ns)) {
			ds_applier_decide_wait_admin(a, it, req);
			return 0;
		}
	}
	if (workload && dra && !dra->require_target_objects)
		return 0;
	rc = ds_preflight_needs(it->obj, need, &m);
	if (rc < 0)
		return rc;
	if (!m.n) {
		struct ext_note x = {.a = a, .note = note, .size = note_size};
		return workload ? ds_preflight_extended(it->obj, ext_note, &x) : 0;
	}
	if (workload) {
		ds_applier_decide(it, DS_APPLY_WAITING,
				  "waits for %s (neither applied by drasync nor on the "
				  "target)",
				  m.text);
		it->out.next_try_at = ds_clock_wall_ms() + a->cfg.wait_retry_ms;
	} else {
		/* The list of what is missing is cut to fit the note. */
		int room = note_size > 48 ? (int)(note_size - 48) : 0;
		snprintf(note, note_size, "needs %.*s, which the target does not have", room,
			 m.text);
	}
	return 0;
}
