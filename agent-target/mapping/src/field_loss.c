#include "drasync/field_loss.h"

#include "drasync/k8s_object.h"

#include <stdio.h>
#include <string.h>

#define PATH_MAX_LEN 512

struct walk {
	const ds_dra_config *dra;
	char *buf;
	size_t size, used, n;
	json_t *seen; /* paths already counted */
};

static bool zero(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_NULL:
	case JSON_FALSE:
		return true;
	case JSON_STRING:
		return json_string_length(v) == 0;
	case JSON_INTEGER:
		return json_integer_value(v) == 0;
	case JSON_OBJECT:
		return json_object_size(v) == 0;
	case JSON_ARRAY:
		return json_array_size(v) == 0;
	default:
		return false;
	}
}

/* allowFieldLoss: a path allows itself and everything under it. */
static bool allowed(const ds_dra_config *dra, const char *path)
{
	for (size_t i = 0; dra && i < dra->n_allow_field_loss; i++) {
		const char *a = dra->allow_field_loss[i];
		size_t n = strlen(a);

		if (strncmp(path, a, n) == 0 && (path[n] == '\0' || path[n] == '.'))
			return true;
	}
	return false;
}

static void lost(struct walk *w, const char *path)
{
	int k;

	/* Each path once: [] makes the items of a list one path. */
	if (allowed(w->dra, path) || json_object_get(w->seen, path))
		return;
	json_object_set_new(w->seen, path, json_true()); /* without memory: may repeat */
	w->n++;
	if (!w->buf || w->used + 1 >= w->size)
		return;
	k = snprintf(w->buf + w->used, w->size - w->used, "%s%s", w->n > 1 ? ", " : "", path);
	if (k > 0)
		w->used = (size_t)k < w->size - w->used ? w->used + (size_t)k : w->size - 1;
}

static void compare(struct walk *w, const json_t *sent, const json_t *kept, const char *path)
{
	char sub[PATH_MAX_LEN];
	const char *key;
	json_t *v;
	size_t i;

	if (json_is_object(sent)) {
		if (!json_is_object(kept))
			return; /* replaced by another type: not a loss we can name */
		json_object_foreach ((json_t *)sent, key, v) {
			json_t *k = json_object_get(kept, key);

			if (!path[0] && strcmp(key, "status") == 0)
				continue;
			snprintf(sub, sizeof(sub), "%s%s%s", path, path[0] ? "." : "", key);
			if (!k) {
				if (!zero(v))
					lost(w, sub);
				continue;
			}
			compare(w, v, k, sub);
		}
	} else if (json_is_array(sent) && json_is_array(kept)) {
		snprintf(sub, sizeof(sub), "%s[]", path);
		/* Items in order; a list the server kept shorter lost its tail. */
		json_array_foreach ((json_t *)sent, i, v) {
			if (i >= json_array_size(kept)) {
				lost(w, sub);
				break;
			}
			compare(w, v, json_array_get(kept, i), sub);
		}
	}
}

size_t ds_field_loss_find(const json_t *sent, const json_t *kept, const ds_dra_config *dra,
			  char *buf, size_t size)
{
	struct walk w = {.dra = dra, .buf = buf, .size = size, .seen = json_object()};

	if (buf && size)
		buf[0] = '\0';
	compare(&w, sent, kept, "");
	json_decref(w.seen);
	return w.n;
}

const char *ds_field_loss_cause(const char *path)
{
	/* By the field's own name, the last one of the path the table knows. */
	static const struct {
		const char *field, *cause;
	} causes[] = {
	    {"schedulingGroup", "feature gate GenericWorkload (Kubernetes 1.36+, off by default)"},
	    {"scheduling",
	     "feature gate WorkloadWithJob (Kubernetes 1.36+, alpha, off by default)"},
	    {"resourceClaims",
	     "feature gate DRAWorkloadResourceClaims (Kubernetes 1.36+, off by default) for a "
	     "PodGroup's or Workload's claims; DynamicResourceAllocation for a pod's"},
	    {"tolerations",
	     "feature gate DRADeviceTaints (alpha 1.33-1.35, off by default; beta 1.36, GA 1.37), "
	     "or a 1.32 or older server, whose claims have no tolerations"},
	    {"derivedAttributes", "feature gate DRADerivedAttributes (Kubernetes 1.37+, alpha)"},
	    {"capacity", "feature gate DRAConsumableCapacity (Kubernetes 1.34+)"},
	    {"firstAvailable", "feature gate DRAPrioritizedList (Kubernetes 1.33+)"},
	    {"adminAccess", "feature gate DRAAdminAccess (Kubernetes 1.32+)"},
	    {"extendedResourceName", "feature gate DRAExtendedResource (Kubernetes 1.34+)"},
	    {"bindingConditions", "feature gate DRADeviceBindingConditions (Kubernetes 1.34+)"},
	    {"preemptionPolicy", "feature gate PodGroupPreemptionPolicy (Kubernetes 1.37+)"},
	    {"schedulingConstraints",
	     "feature gate TopologyAwareWorkloadScheduling (Kubernetes 1.36+)"},
	};
	char p[PATH_MAX_LEN];
	char *comp;

	snprintf(p, sizeof(p), "%s", path);
	for (;;) {
		size_t n;

		while ((n = strlen(p)) >= 2 && strcmp(p + n - 2, "[]") == 0)
			p[n - 2] = '\0';
		comp = strrchr(p, '.');
		comp = comp ? comp + 1 : p;
		for (size_t i = 0; i < sizeof(causes) / sizeof(causes[0]); i++)
			if (strcmp(comp, causes[i].field) == 0)
				return causes[i].cause;
		if (comp == p)
			break;
		comp[-1] = '\0';
	}
	return "a feature gate that is off on the target, or a field its Kubernetes version does "
	       "not know";
}

bool ds_field_loss_relevant(const json_t *obj)
{
	const json_t *spec;

	if (ds_obj_in_group(obj, "resource.k8s.io") || ds_obj_in_group(obj, "scheduling.k8s.io"))
		return true;
	spec = ds_obj_pod_spec(obj, NULL);
	if (!spec)
		return false;
	return json_array_size(json_object_get(spec, "resourceClaims")) > 0 ||
	       json_object_get(spec, "schedulingGroup") ||
	       ds_json_path(obj, "spec.scheduling") != NULL;
}
