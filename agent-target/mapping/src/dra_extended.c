/*
 * deviceClassMappings beyond deviceClassName (KEP-5004, extended resources
 * backed by DRA): the implicit extended resource
 * deviceclass.resource.kubernetes.io/<class> in containers' limits and
 * requests, and a replicated DeviceClass's spec.extendedResourceName.
 */
#include "drasync/dra_mapping.h"

#include "drasync/k8s_object.h"
#include "drasync/kinds.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define IMPLICIT_PREFIX "deviceclass.resource.kubernetes.io/"
#define IMPLICIT_LEN (sizeof(IMPLICIT_PREFIX) - 1)

static const char *map_class(const ds_dra_config *dra, const char *name)
{
	for (size_t i = 0; name && i < dra->n_device_classes; i++)
		if (strcmp(dra->device_classes[i].from, name) == 0)
			return dra->device_classes[i].to;
	return NULL;
}

/* The name a limits/requests key has after the mappings, in buf. */
static const char *renamed(const ds_dra_config *dra, const char *key, char *buf, size_t size)
{
	const char *to = strncmp(key, IMPLICIT_PREFIX, IMPLICIT_LEN) == 0
			     ? map_class(dra, key + IMPLICIT_LEN)
			     : NULL;

	snprintf(buf, size, "%s%s", to ? IMPLICIT_PREFIX : "", to ? to : key);
	return to;
}

static void quantity_text(const json_t *v, char *buf, size_t size)
{
	if (json_is_string(v))
		snprintf(buf, size, "=%s", json_string_value(v));
	else if (json_is_integer(v))
		snprintf(buf, size, "=%lld", (long long)json_integer_value(v));
	else
		buf[0] = '\0';
}

/*
 * One container's limits or requests, rebuilt in order with each mapped class's
 * implicit name renamed (once: mappings do not chain). @return names renamed,
 * -EINVAL (why says which), -ENOMEM
 */
static int rename_map(const ds_dra_config *dra, json_t *res, const char *field, const char *what,
		      const char *cname, ds_report *rep, char *why, size_t why_size)
{
	json_t *map = json_object_get(res, field), *out;
	const char *key;
	json_t *v;
	int n = 0;

	if (!json_is_object(map))
		return 0;
	json_object_foreach (map, key, v) {
		if (strncmp(key, IMPLICIT_PREFIX, IMPLICIT_LEN) == 0 &&
		    map_class(dra, key + IMPLICIT_LEN))
			n++;
	}
	if (n == 0)
		return 0;
	if (!(out = json_object()))
		return -ENOMEM;
	json_object_foreach (map, key, v) {
		char nk[400], from[500], tos[500], q[64];
		const char *to = renamed(dra, key, nk, sizeof(nk));

		if (json_object_get(out, nk)) {
			const char *k2;
			json_t *v2;
			char other[400];

			/* the key that took the name first */
			json_object_foreach (map, k2, v2) {
				renamed(dra, k2, other, sizeof(other));
				if (strcmp(other, nk) == 0)
					break;
			}
			snprintf(why, why_size,
				 "container %s: %s.%s and %s.%s are both set and "
				 "deviceClassMappings makes them one name, %s; give the container "
				 "one of them",
				 cname, field, k2 ? k2 : "?", field, key, nk);
			json_decref(out);
			return -EINVAL;
		}
		if (json_object_set(out, nk, v) < 0) {
			json_decref(out);
			return -ENOMEM;
		}
		if (!to)
			continue;
		quantity_text(v, q, sizeof(q));
		snprintf(from, sizeof(from), "%s.%s%s", field, key, q);
		snprintf(tos, sizeof(tos), "%s.%s%s", field, nk, q);
		if (ds_report_add(rep, DS_REPORT_DEVICE_CLASS, what, cname, NULL, from, tos,
				  "(deviceClassMappings, the class's extended resource)") < 0) {
			json_decref(out);
			return -ENOMEM;
		}
	}
	return json_object_set_new(res, field, out) < 0 ? -ENOMEM : n;
}

/* Every container of a pod spec (a copy: replaced only when all succeeded). */
static int map_pod_spec(const ds_dra_config *dra, json_t *obj, json_t *spec, ds_report *rep)
{
	static const char *const lists[] = {"initContainers", "containers"};
	static const char *const fields[] = {"limits", "requests"};
	size_t rep_start = ds_report_count(rep);
	json_t *copy = json_deep_copy(spec);
	char what[300], why[600] = "";
	int n = 0, r = 0;

	if (!copy)
		return -ENOMEM;
	ds_obj_describe(obj, what, sizeof(what));
	for (size_t l = 0; l < 2 && r >= 0; l++) {
		size_t i;
		json_t *ctr;

		json_array_foreach (json_object_get(copy, lists[l]), i, ctr) {
			json_t *res = json_object_get(ctr, "resources");
			const char *cname = ds_json_str(ctr, "name");

			for (size_t f = 0; f < 2 && r >= 0; f++) {
				r = rename_map(dra, res, fields[f], what, cname ? cname : "?", rep,
					       why, sizeof(why));
				if (r > 0)
					n += r;
			}
			if (r < 0)
				break;
		}
	}
	if (r >= 0 && n > 0) {
		/* replace every key of the original: its holder keeps pointing at it */
		if (json_object_update(spec, copy) < 0)
			r = -ENOMEM;
	}
	json_decref(copy);
	if (r < 0) {
		ds_report_truncate(rep, rep_start);
		ds_report_add(rep, DS_REPORT_ERROR, what, NULL, NULL, NULL, NULL,
			      r == -ENOMEM ? "out of memory" : why);
		return r;
	}
	return n;
}

/*
 * A replicated DeviceClass that deviceClassMappings maps away (X -> Y) serves no
 * claim on the target: they all ask for Y. Its extendedResourceName would still make
 * the target's scheduler pick X for pods asking for that resource, so it is dropped
 * from the copy; Y (the target's, or replicated) must carry the name.
 */
static int map_device_class(const ds_dra_config *dra, json_t *obj, ds_report *rep)
{
	const char *name = ds_obj_name(obj), *to = map_class(dra, name);
	json_t *spec = json_object_get(obj, "spec");
	const char *ern = ds_json_str(spec, "extendedResourceName");
	char what[300], from[400], msg[700];

	if (!to || !ern)
		return 0;
	ds_obj_describe(obj, what, sizeof(what));
	snprintf(from, sizeof(from), "extendedResourceName=%s", ern);
	snprintf(msg, sizeof(msg),
		 "(deviceClassMappings: %s maps to %s; pods asking for %s are served on the "
		 "target by the DeviceClass that carries it: give %s extendedResourceName %s)",
		 name, to, ern, to, ern);
	if (ds_report_add(rep, DS_REPORT_DEVICE_CLASS, what, NULL, NULL, from, "(removed)", msg) <
	    0)
		return -ENOMEM;
	json_object_del(spec, "extendedResourceName");
	return 1;
}

int ds_dra_map_extended(const ds_dra_config *dra, json_t *obj, ds_report *rep)
{
	const char *kind = ds_obj_kind(obj);
	json_t *spec;

	if (!kind || dra->n_device_classes == 0)
		return 0;
	if (ds_kind_is(kind, DS_KIND_DEVICE_CLASS) && ds_obj_in_group(obj, "resource.k8s.io"))
		return map_device_class(dra, obj, rep);
	if (!ds_kind_is_workload(kind) || !(spec = ds_obj_pod_spec(obj, NULL)))
		return 0;
	return map_pod_spec(dra, obj, spec, rep);
}
