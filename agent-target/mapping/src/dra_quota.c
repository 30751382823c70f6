#include "drasync/dra_quota.h"

#include "drasync/k8s_object.h"
#include "drasync/kinds.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The forms of the header; upstream's ResourceClaimsPerClass and
 * ResourceImplicitExtendedClaimsPerClass.
 */
static const char quota_suffix[] = ".deviceclass.resource.k8s.io/devices";
static const char quota_prefix[] = "requests.deviceclass.resource.kubernetes.io/";
static const char limit_prefix[] = "deviceclass.resource.kubernetes.io/";

/* The maps of a LimitRange item that hold resource names. */
static const char *const limit_maps[] = {"max", "min", "default", "defaultRequest",
					 "maxLimitRequestRatio"};

#define N_LIMIT_MAPS (sizeof(limit_maps) / sizeof(limit_maps[0]))
#define NAME_MAX_LEN 320 /* a DeviceClass name (253) in the longest form */

const char *ds_dra_quota_key_class(const char *key, bool quota, char *buf, size_t size)
{
	const char *prefix = quota ? quota_prefix : limit_prefix;
	size_t n, ns = sizeof(quota_suffix) - 1, np = strlen(prefix), len = 0;
	const char *cls = NULL;

	if (!key)
		return NULL;
	n = strlen(key);
	if (quota && n > ns && strcmp(key + n - ns, quota_suffix) == 0) {
		cls = key;
		len = n - ns;
	} else if (n > np && strncmp(key, prefix, np) == 0) {
		cls = key + np;
		len = n - np;
	}
	if (!cls || len + 1 > size)
		return NULL;
	memcpy(buf, cls, len);
	buf[len] = '\0';
	return buf;
}

/* The same form as key, naming class `to`. */
static void key_for(const char *key, bool quota, const char *to, char *out, size_t size)
{
	size_t n = strlen(key), ns = sizeof(quota_suffix) - 1;

	if (quota && n > ns && strcmp(key + n - ns, quota_suffix) == 0)
		snprintf(out, size, "%s%s", to, quota_suffix);
	else
		snprintf(out, size, "%s%s", quota ? quota_prefix : limit_prefix, to);
}

static const char *map_class(const ds_dra_config *dra, const char *name)
{
	for (size_t i = 0; i < dra->n_device_classes; i++)
		if (strcmp(dra->device_classes[i].from, name) == 0)
			return dra->device_classes[i].to;
	return NULL;
}

/* A quantity as text, for messages. */
static void value_text(const json_t *v, char *out, size_t size)
{
	if (json_is_string(v))
		snprintf(out, size, "%s", json_string_value(v));
	else if (json_is_integer(v))
		snprintf(out, size, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
	else
		snprintf(out, size, "?");
}

/* A plain count ("4" or 4), the form a device count takes. @return true with *out set */
static bool count_of(const json_t *v, int64_t *out)
{
	const char *s;
	int64_t n = 0;

	if (json_is_integer(v)) {
		*out = json_integer_value(v);
		return *out >= 0;
	}
	s = json_string_value(v);
	if (!s || !*s || strlen(s) > 15)
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return false;
		n = n * 10 + (*s - '0');
	}
	*out = n;
	return true;
}

struct pass {
	const ds_dra_config *dra;
	ds_report *rep;
	const char *what;
	char why[1200];
};

/*
 * Rename the DRA names of one map into a new object (*out), keeping the
 * others. Two names that become one are merged as ds_dra_map_quota() says.
 * @return names renamed, -EINVAL (why says which), -ENOMEM
 */
static int rename_map(struct pass *p, const json_t *map, bool quota, const char *path, json_t **out)
{
	json_t *o = json_object(), *v;
	const char *key;
	int changed = 0;

	if (!o)
		return -ENOMEM;
	json_object_foreach ((json_t *)map, key, v) {
		char cls[NAME_MAX_LEN], nk[NAME_MAX_LEN + 64], a[80], b[80], msg[900];
		const char *to = NULL, *k = key;
		json_t *prev;
		int64_t x, y;

		if (ds_dra_quota_key_class(key, quota, cls, sizeof(cls)))
			to = map_class(p->dra, cls);
		if (to) {
			key_for(key, quota, to, nk, sizeof(nk));
			k = nk;
			if (ds_report_add(p->rep, DS_REPORT_DEVICE_CLASS, p->what, NULL, path, key,
					  nk, "(deviceClassMappings)") < 0)
				goto nomem;
			changed++;
		}
		prev = json_object_get(o, k);
		if (!prev) {
			if (json_object_set(o, k, v) < 0)
				goto nomem;
			continue;
		}
		/* Two source classes now one: the target's class takes both budgets. */
		value_text(prev, a, sizeof(a));
		value_text(v, b, sizeof(b));
		if (strcmp(a, b) == 0) {
			snprintf(msg, sizeof(msg),
				 "two names become %s, with the same value %s: kept", k, a);
		} else if (quota && count_of(prev, &x) && count_of(v, &y)) {
			snprintf(msg, sizeof(msg),
				 "two names become %s: their counts %s and %s are added up to "
				 "%" PRId64,
				 k, a, b, x + y);
			snprintf(a, sizeof(a), "%" PRId64, x + y);
			if (json_object_set_new(o, k, json_string(a)) < 0)
				goto nomem;
		} else {
			snprintf(p->why, sizeof(p->why),
				 "%s: two names become %s by deviceClassMappings, with values %s "
				 "and %s that cannot be merged (%s)",
				 path, k, a, b,
				 quota ? "only plain device counts are added up"
				       : "a LimitRange's values are kept only when equal");
			json_decref(o);
			return -EINVAL;
		}
		if (ds_report_add(p->rep, DS_REPORT_DEVICE_CLASS, p->what, NULL, path, NULL, NULL,
				  msg) < 0)
			goto nomem;
	}
	*out = o;
	return changed;
nomem:
	json_decref(o);
	return -ENOMEM;
}

/* Rename within holder[field] (when it is a mapping). @return as rename_map() */
static int rename_field(struct pass *p, json_t *holder, const char *field, bool quota,
			const char *path)
{
	json_t *map = json_object_get(holder, field), *out = NULL;
	int r;

	if (!json_is_object(map))
		return 0;
	r = rename_map(p, map, quota, path, &out);
	if (r <= 0) {
		json_decref(out);
		return r;
	}
	return json_object_set_new(holder, field, out) < 0 ? -ENOMEM : r;
}

static const ds_kind *limit_kind(const json_t *obj)
{
	const ds_kind *k = ds_kind_of(obj);

	if (!k || (k->id != DS_KIND_RESOURCE_QUOTA && k->id != DS_KIND_LIMIT_RANGE))
		return NULL;
	return k;
}

int ds_dra_map_quota(const ds_dra_config *dra, json_t *obj, ds_report *rep)
{
	const ds_kind *k = limit_kind(obj);
	size_t rep_start = ds_report_count(rep), i;
	struct pass p = {.dra = dra, .rep = rep};
	char what[300], path[80];
	json_t *copy, *item;
	int changed = 0, r = 0;

	if (!k || !dra || dra->n_device_classes == 0 || !json_object_get(obj, "spec"))
		return 0;
	ds_obj_describe(obj, what, sizeof(what));
	p.what = what;
	/* On a copy of the spec: it replaces the original only when all of it succeeded. */
	copy = json_deep_copy(json_object_get(obj, "spec"));
	if (!copy)
		return -ENOMEM;
	if (k->id == DS_KIND_RESOURCE_QUOTA) {
		r = rename_field(&p, copy, "hard", true, "spec.hard");
		changed = r > 0 ? r : 0;
	} else {
		json_array_foreach (json_object_get(copy, "limits"), i, item) {
			for (size_t m = 0; r >= 0 && m < N_LIMIT_MAPS; m++) {
				snprintf(path, sizeof(path), "spec.limits[%zu].%s", i,
					 limit_maps[m]);
				r = rename_field(&p, item, limit_maps[m], false, path);
				changed += r > 0 ? r : 0;
			}
			if (r < 0)
				break;
		}
	}
	if (r >= 0 && changed > 0 && json_object_set(obj, "spec", copy) < 0)
		r = -ENOMEM;
	json_decref(copy);
	if (r < 0) {
		ds_report_truncate(rep, rep_start);
		ds_report_add(rep, DS_REPORT_ERROR, what, NULL, NULL, NULL, NULL,
			      r == -ENOMEM ? "out of memory" : p.why);
		return r;
	}
	return changed;
}

/* Every class a map's names name, once per object (seen is the set). */
static int map_needs(const json_t *map, bool quota, json_t *seen, ds_preflight_need_fn fn, void *ud)
{
	const char *key;
	json_t *v;
	int r;

	json_object_foreach ((json_t *)map, key, v) {
		char cls[NAME_MAX_LEN];

		if (!ds_dra_quota_key_class(key, quota, cls, sizeof(cls)) ||
		    json_object_get(seen, cls))
			continue;
		if (json_object_set_new(seen, cls, json_true()) < 0)
			return -ENOMEM;
		if ((r = fn(ud, "DeviceClass", NULL, cls)) < 0)
			return r;
	}
	return 0;
}

int ds_dra_quota_needs(const json_t *obj, ds_preflight_need_fn fn, void *userdata)
{
	const ds_kind *k = limit_kind(obj);
	json_t *seen, *item;
	size_t i;
	int r = 0;

	if (!k)
		return 0;
	if (!(seen = json_object()))
		return -ENOMEM;
	if (k->id == DS_KIND_RESOURCE_QUOTA) {
		r = map_needs(ds_json_path(obj, "spec.hard"), true, seen, fn, userdata);
	} else {
		json_array_foreach (ds_json_path(obj, "spec.limits"), i, item)
			for (size_t m = 0; r == 0 && m < N_LIMIT_MAPS; m++)
				r = map_needs(json_object_get(item, limit_maps[m]), false, seen, fn,
					      userdata);
	}
	json_decref(seen);
	return r;
}
