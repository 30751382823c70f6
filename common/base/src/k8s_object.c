#include "drasync/k8s_object.h"

#include "drasync/string_table.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const char *const ds_workload_table[DS_WORKLOAD_MAX] = {
    "Pod", "Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job", "CronJob",
};
DS_DEFINE_PRIVATE_STRING_TABLE_LOOKUP(ds_workload, enum ds_workload)

const char *ds_workload_name(enum ds_workload w)
{
	const char *s = ds_workload_to_string(w);

	return s ? s : "?";
}

int ds_workload_from_kind(const char *kind)
{
	int w = ds_workload_from_string(kind);

	return w < 0 ? -1 : w;
}

const char *ds_json_str(const json_t *obj, const char *key)
{
	const json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;

	return json_is_string(v) ? json_string_value(v) : NULL;
}

json_t *ds_json_path(const json_t *obj, const char *dotted)
{
	const char *p = dotted;
	json_t *cur = (json_t *)(uintptr_t)obj;

	while (cur && *p) {
		const char *dot = strchr(p, '.');
		size_t n = dot ? (size_t)(dot - p) : strlen(p);

		if (!json_is_object(cur))
			return NULL;
		cur = json_object_getn(cur, p, n);
		p += n;
		if (*p == '.')
			p++;
	}
	return cur;
}

json_t *ds_json_object_ensure(json_t *obj, const char *key)
{
	json_t *v;

	if (!json_is_object(obj))
		return NULL;
	v = json_object_get(obj, key);
	if (v)
		return json_is_object(v) ? v : NULL;
	v = json_object();
	if (!v || json_object_set_new(obj, key, v) < 0)
		return NULL;
	return v;
}

const char *ds_obj_api_version(const json_t *obj)
{
	return ds_json_str(obj, "apiVersion");
}

const char *ds_obj_kind(const json_t *obj)
{
	return ds_json_str(obj, "kind");
}

const char *ds_obj_name(const json_t *obj)
{
	return ds_json_str(json_object_get(obj, "metadata"), "name");
}

const char *ds_obj_namespace(const json_t *obj)
{
	return ds_json_str(json_object_get(obj, "metadata"), "namespace");
}

const char *ds_obj_group(const json_t *obj, char *buf, size_t size)
{
	const char *av = ds_obj_api_version(obj);
	const char *slash;

	if (!av || size == 0)
		return NULL;
	slash = strchr(av, '/');
	if (!slash)
		buf[0] = '\0';
	else
		snprintf(buf, size, "%.*s", (int)(slash - av), av);
	return buf;
}

const char *ds_obj_version(const json_t *obj)
{
	const char *av = ds_obj_api_version(obj);
	const char *slash;

	if (!av)
		return NULL;
	slash = strrchr(av, '/');
	return slash ? slash + 1 : av;
}

bool ds_obj_in_group(const json_t *obj, const char *group)
{
	const char *av = ds_obj_api_version(obj);
	size_t n = strlen(group);

	if (!av)
		return false;
	if (n == 0)
		return strchr(av, '/') == NULL;
	return strncmp(av, group, n) == 0 && av[n] == '/';
}

json_t *ds_obj_pod_spec(const json_t *obj, enum ds_workload *kind_out)
{
	int w = ds_workload_from_kind(ds_obj_kind(obj));
	json_t *spec;

	if (w < 0)
		return NULL;
	switch ((enum ds_workload)w) {
	case DS_WORKLOAD_POD:
		spec = ds_json_path(obj, "spec");
		break;
	case DS_WORKLOAD_CRONJOB:
		spec = ds_json_path(obj, "spec.jobTemplate.spec.template.spec");
		break;
	default:
		spec = ds_json_path(obj, "spec.template.spec");
		break;
	}
	if (!json_is_object(spec))
		return NULL;
	if (kind_out)
		*kind_out = (enum ds_workload)w;
	return spec;
}

const char *ds_obj_describe(const json_t *obj, char *buf, size_t size)
{
	return ds_obj_describe_in(obj, NULL, buf, size);
}

const char *ds_obj_describe_in(const json_t *obj, const char *in, char *buf, size_t size)
{
	const char *kind = ds_obj_kind(obj), *ns = ds_obj_namespace(obj), *name = ds_obj_name(obj);

	if (in && ns && ns[0])
		ns = in;

	if (ns && ns[0])
		snprintf(buf, size, "%s %s/%s", kind ? kind : "(no kind)", ns,
			 name ? name : "(no name)");
	else
		snprintf(buf, size, "%s %s", kind ? kind : "(no kind)", name ? name : "(no name)");
	return buf;
}

const char *ds_obj_annotation(const json_t *obj, const char *key)
{
	return ds_json_str(ds_json_path(obj, "metadata.annotations"), key);
}

const char *ds_obj_label(const json_t *obj, const char *key)
{
	return ds_json_str(ds_json_path(obj, "metadata.labels"), key);
}

int ds_obj_set_namespace(json_t *obj, const char *ns)
{
	json_t *meta = ds_json_object_ensure(obj, "metadata");

	if (!meta)
		return -EINVAL;
	return json_object_set_new(meta, "namespace", json_string(ns)) < 0 ? -ENOMEM : 0;
}

static int set_meta_map(json_t *obj, const char *map, const char *key, const char *value)
{
	json_t *meta = ds_json_object_ensure(obj, "metadata");
	json_t *m = meta ? ds_json_object_ensure(meta, map) : NULL;

	if (!m)
		return -EINVAL;
	return json_object_set_new(m, key, json_string(value)) < 0 ? -ENOMEM : 0;
}

int ds_obj_set_annotation(json_t *obj, const char *key, const char *value)
{
	return set_meta_map(obj, "annotations", key, value);
}

int ds_obj_set_label(json_t *obj, const char *key, const char *value)
{
	return set_meta_map(obj, "labels", key, value);
}

static bool alnum_lower(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool label_valid_n(const char *s, size_t n, size_t max)
{
	if (n == 0 || n > max || !alnum_lower(s[0]) || !alnum_lower(s[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!alnum_lower(s[i]) && s[i] != '-')
			return false;
	return true;
}

bool ds_dns_label_valid(const char *s)
{
	return s && label_valid_n(s, strlen(s), 63);
}

bool ds_dns_subdomain_valid(const char *s)
{
	size_t n;
	const char *p;

	if (!s)
		return false;
	n = strlen(s);
	if (n == 0 || n > 253)
		return false;
	p = s;
	for (;;) {
		const char *dot = strchr(p, '.');
		size_t len = dot ? (size_t)(dot - p) : strlen(p);

		/* Kubernetes bounds only the whole name here, not each part. */
		if (!label_valid_n(p, len, 253))
			return false;
		if (!dot)
			return true;
		p = dot + 1;
	}
}
