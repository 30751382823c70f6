#include "kube_client_internal.h"

#include "drasync/buf.h"
#include "drasync/clock.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* ---- discovery ------------------------------------------------------------------ */

/* With disc_lock held: whether a reload asked for by a miss or a refresh may happen now. */
static bool reload_due(ds_kube *k)
{
	int64_t now = ds_clock_mono_ms();

	if (k->refresh_interval_ms > 0 && k->refreshed_at_ms &&
	    now - k->refreshed_at_ms < k->refresh_interval_ms)
		return false;
	k->refreshed_at_ms = now;
	return true;
}

static void drop_locked(ds_kube *k)
{
	json_decref(k->groups);
	json_decref(k->resources);
	k->groups = k->resources = NULL;
}

void ds_kube_discovery_set_refresh_interval(ds_kube *k, int interval_ms)
{
	pthread_mutex_lock(&k->disc_lock);
	k->refresh_interval_ms = interval_ms > 0 ? interval_ms : 0;
	pthread_mutex_unlock(&k->disc_lock);
}

unsigned long ds_kube_discovery_generation(ds_kube *k)
{
	unsigned long g;

	pthread_mutex_lock(&k->disc_lock);
	g = k->generation;
	pthread_mutex_unlock(&k->disc_lock);
	return g;
}

static int load_groups(ds_kube *k, ds_kube_error *ke);

int ds_kube_discovery_refresh(ds_kube *k, ds_kube_error *ke)
{
	int rc = 0;

	pthread_mutex_lock(&k->disc_lock);
	if (reload_due(k)) {
		drop_locked(k);
		rc = load_groups(k, ke);
		rc = rc < 0 ? rc : 1;
	}
	pthread_mutex_unlock(&k->disc_lock);
	return rc;
}

void ds_kube_discovery_reset(ds_kube *k)
{
	pthread_mutex_lock(&k->disc_lock);
	json_decref(k->groups);
	json_decref(k->resources);
	k->groups = NULL;
	k->resources = NULL;
	pthread_mutex_unlock(&k->disc_lock);
}

/* With disc_lock held. */
static int load_groups(ds_kube *k, ds_kube_error *ke)
{
	json_t *api = NULL, *apis = NULL, *groups = NULL, *core = NULL, *g, *v;
	size_t i, j;
	int rc;

	if (k->groups)
		return 0;
	rc = ds_kube_call_json(k, "GET", "/api", NULL, NULL, &api, ke);
	if (rc == 0)
		rc = ds_kube_call_json(k, "GET", "/apis", NULL, NULL, &apis, ke);
	if (rc < 0)
		goto out;
	rc = -ENOMEM;
	groups = json_object();
	core = json_array();
	if (!groups || !core)
		goto out;
	json_array_foreach (json_object_get(api, "versions"), i, v)
		if (json_is_string(v))
			json_array_append(core, v);
	if (json_array_size(core) > 0 &&
	    json_object_set_new(
		groups, "",
		json_pack("{s:O,s:O}", "preferred", json_array_get(core, 0), "versions", core)) < 0)
		goto out;
	json_array_foreach (json_object_get(apis, "groups"), i, g) {
		const char *name = json_string_value(json_object_get(g, "name"));
		json_t *pref = json_object_get(json_object_get(g, "preferredVersion"), "version");
		json_t *vs = json_array(), *ver;

		if (!vs)
			goto out;
		json_array_foreach (json_object_get(g, "versions"), j, ver)
			if (json_is_string(json_object_get(ver, "version")))
				json_array_append(vs, json_object_get(ver, "version"));
		if (!name || !json_is_string(pref)) {
			json_decref(vs);
			continue;
		}
		if (json_object_set_new(groups, name,
					json_pack("{s:O,s:o}", "preferred", pref, "versions", vs)) <
		    0)
			goto out;
	}
	k->groups = groups;
	k->generation++;
	groups = NULL;
	if (!k->resources)
		k->resources = json_object();
	rc = k->resources ? 0 : -ENOMEM;
out:
	json_decref(api);
	json_decref(apis);
	json_decref(groups);
	json_decref(core);
	return rc;
}

/* With disc_lock held: the resource list of one group/version. */
static int load_gv(ds_kube *k, const char *group, const char *version, json_t **list,
		   ds_kube_error *ke)
{
	char key[256];
	char *path = NULL;
	json_t *doc = NULL, *res;
	ds_str b;
	int rc;

	snprintf(key, sizeof(key), "%s/%s", group, version);
	res = json_object_get(k->resources, key);
	if (res) {
		*list = res;
		return 0;
	}
	ds_str_init(&b, KUBE_MAX_PATH);
	ds_kube_sb_group_version(&b, group, version);
	rc = ds_kube_sb_done(&b, &path);
	if (rc < 0) {
		ds_kube_error_set(ke, 0, "discovery of %s: out of memory", key);
		return rc;
	}
	rc = ds_kube_call_json(k, "GET", path, NULL, NULL, &doc, ke);
	if (rc < 0)
		goto out;
	res = json_object_get(doc, "resources");
	if (!json_is_array(res)) {
		ds_kube_error_set(ke, 0, "%s: no resources in the answer", path);
		rc = -EBADMSG;
		goto out;
	}
	json_object_set(k->resources, key, res);
	*list = res;
out:
	json_decref(doc);
	free(path);
	return rc;
}

static void split_api_version(const char *api_version, char *group, size_t gs, char *version,
			      size_t vs)
{
	const char *slash = strrchr(api_version, '/');

	if (!slash) {
		snprintf(group, gs, "%s", "");
		snprintf(version, vs, "%s", api_version);
	} else {
		snprintf(group, gs, "%.*s", (int)(slash - api_version), api_version);
		snprintf(version, vs, "%s", slash + 1);
	}
}

static int find_locked(ds_kube *k, const char *group, const char *version, const char *kind,
		       struct ds_kube_resource *out, ds_kube_error *ke)
{
	json_t *info, *list = NULL, *r, *v;
	bool served = false;
	size_t i;
	int rc;

	rc = load_groups(k, ke);
	if (rc < 0)
		return rc;
	info = json_object_get(k->groups, group);
	json_array_foreach (json_object_get(info, "versions"), i, v)
		if (strcmp(json_string_value(v), version) == 0)
			served = true;
	if (!served)
		return -ENOENT;
	rc = load_gv(k, group, version, &list, ke);
	if (rc < 0)
		return rc;
	json_array_foreach (list, i, r) {
		const char *name = json_string_value(json_object_get(r, "name"));
		const char *rk = json_string_value(json_object_get(r, "kind"));
		size_t j;
		json_t *s;

		if (!name || !rk || strchr(name, '/') || strcmp(rk, kind) != 0)
			continue;
		memset(out, 0, sizeof(*out));
		snprintf(out->group, sizeof(out->group), "%s", group);
		snprintf(out->version, sizeof(out->version), "%s", version);
		snprintf(out->resource, sizeof(out->resource), "%s", name);
		snprintf(out->kind, sizeof(out->kind), "%s", kind);
		out->namespaced = json_is_true(json_object_get(r, "namespaced"));
		json_array_foreach (list, j, s) {
			const char *sn = json_string_value(json_object_get(s, "name"));
			size_t nl = strlen(name);
			if (sn && strncmp(sn, name, nl) == 0 && strcmp(sn + nl, "/status") == 0)
				out->has_status = true;
		}
		return 0;
	}
	return -ENOENT;
}

int ds_kube_resource_find(ds_kube *k, const char *api_version, const char *kind,
			  struct ds_kube_resource *out, ds_kube_error *ke)
{
	char group[128], version[64];
	int rc;

	split_api_version(api_version, group, sizeof(group), version, sizeof(version));
	pthread_mutex_lock(&k->disc_lock);
	rc = find_locked(k, group, version, kind, out, ke);
	if (rc == -ENOENT && reload_due(k)) {
		/* maybe new since we looked (a CRD, an enabled API): look once more */
		drop_locked(k);
		rc = find_locked(k, group, version, kind, out, ke);
	}
	pthread_mutex_unlock(&k->disc_lock);
	if (rc == -ENOENT) {
		ds_kube_error_set(ke, 404, "the server does not serve kind %s in %s", kind,
				  api_version);
		if (ke)
			snprintf(ke->reason, sizeof(ke->reason), "NotFound");
	}
	return rc;
}

int ds_kube_resource_of(ds_kube *k, const json_t *obj, struct ds_kube_resource *out,
			ds_kube_error *ke)
{
	const char *api = json_string_value(json_object_get(obj, "apiVersion"));
	const char *kind = json_string_value(json_object_get(obj, "kind"));

	if (!api || !api[0] || !kind || !kind[0]) {
		ds_kube_error_set(ke, 0, "the object has no apiVersion or kind");
		return -EINVAL;
	}
	return ds_kube_resource_find(k, api, kind, out, ke);
}

int ds_kube_group_versions(ds_kube *k, const char *group, char *preferred, size_t size,
			   json_t **served, ds_kube_error *ke)
{
	json_t *info;
	int rc;

	pthread_mutex_lock(&k->disc_lock);
	rc = load_groups(k, ke);
	if (rc < 0)
		goto out;
	info = json_object_get(k->groups, group ? group : "");
	if (!info) {
		rc = -ENOENT;
		ds_kube_error_set(ke, 0, "API group '%s' is not served", group ? group : "");
		goto out;
	}
	if (served) {
		*served = json_deep_copy(json_object_get(info, "versions"));
		if (!*served) {
			rc = -ENOMEM;
			ds_kube_error_set(ke, 0, "discovery of %s: out of memory",
					  group ? group : "");
			goto out;
		}
	}
	if (preferred && size)
		snprintf(preferred, size, "%s",
			 json_string_value(json_object_get(info, "preferred")));
out:
	pthread_mutex_unlock(&k->disc_lock);
	return rc;
}

int ds_kube_version_to_use(ds_kube *k, const char *group, const char *want, char *out, size_t size,
			   ds_kube_error *ke)
{
	json_t *served = NULL, *v;
	size_t i;
	int rc = ds_kube_group_versions(k, group, out, size, &served, ke);

	if (rc < 0)
		return rc;
	json_array_foreach (served, i, v)
		if (json_is_string(v) && strcmp(json_string_value(v), want) == 0)
			snprintf(out, size, "%s", want);
	json_decref(served);
	return 0;
}
