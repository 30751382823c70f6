#include "drasync/source_grants.h"

#include "drasync/string_table.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

static const char *const refusal_table[DS_REFUSAL_MAX] = {
    [DS_REFUSAL_NAMESPACE] = "namespace", [DS_REFUSAL_POD_SECURITY] = "pod_security",
    [DS_REFUSAL_NAME] = "name",		  [DS_REFUSAL_REFERENCE] = "reference",
    [DS_REFUSAL_KIND] = "kind",		  [DS_REFUSAL_EXISTS] = "exists",
    [DS_REFUSAL_OWNER] = "owner",
};
DS_DEFINE_PRIVATE_STRING_TABLE_LOOKUP(refusal, enum ds_refusal)

const char *ds_refusal_name(enum ds_refusal r)
{
	const char *s = refusal_to_string(r);

	return s ? s : "unknown";
}

const ds_source_grant *ds_grant_of(const ds_target_config *cfg, const char *source)
{
	size_t n;
	const ds_source_grant *g = ds_target_config_sources(cfg, &n);

	for (size_t i = 0; source && i < n; i++)
		if (strcmp(g[i].name, source) == 0)
			return &g[i];
	return NULL;
}

bool ds_grant_namespace(const ds_target_config *cfg, const char *source, const char *ns, char *why,
			size_t size)
{
	const ds_source_grant *g;
	const ds_namespace_mapping *m;
	size_t n;

	if (why && size)
		why[0] = '\0';
	if (!ns)
		ns = "";
	if (!ds_target_config_has_sources(cfg)) {
		m = ds_target_config_namespaces(cfg, &n);
		for (size_t i = 0; i < n; i++)
			if (strcmp(m[i].from, ns) == 0)
				return true;
		if (why)
			snprintf(why, size,
				 "namespace %s is not granted to source %s (the file has no "
				 "sources: a source may write the namespaces of namespaceMappings "
				 "only)",
				 ns, source);
		return false;
	}
	g = ds_grant_of(cfg, source);
	if (!g) {
		if (why)
			snprintf(why, size,
				 "namespace %s is not granted to source %s (it has no entry in "
				 "sources: it may write nothing)",
				 ns, source);
		return false;
	}
	for (size_t i = 0; i < g->n_namespaces; i++)
		if (fnmatch(g->namespaces[i], ns, 0) == 0)
			return true;
	if (why)
		snprintf(why, size,
			 "namespace %s is not granted to source %s (sources[%zu].namespaces)", ns,
			 source, g->index);
	return false;
}

enum ds_pss_level ds_grant_pod_security(const ds_target_config *cfg, const char *source)
{
	const ds_source_grant *g = ds_grant_of(cfg, source);

	return g ? g->pod_security : DS_PSS_BASELINE;
}

bool ds_grant_relocate(const ds_target_config *cfg, const char *source)
{
	const ds_source_grant *g = ds_grant_of(cfg, source);

	return g && g->relocate;
}

int ds_grant_check_names(const ds_target_config *cfg, const char *const *authorized, size_t n,
			 ds_err *err)
{
	size_t ng;
	const ds_source_grant *g = ds_target_config_sources(cfg, &ng);

	for (size_t i = 0; i < ng; i++) {
		bool found = false;
		for (size_t k = 0; k < n && !found; k++)
			found = strcmp(authorized[k], g[i].name) == 0;
		if (found)
			continue;
		ds_err_setloc(err, ds_target_config_file(cfg), g[i].line, g[i].col,
			      "sources[%zu].name: '%s' is not a source of the authorized-sources "
			      "file %s (%zu name%s there)",
			      i, g[i].name,
			      ds_target_config_authorized_sources(cfg)
				  ? ds_target_config_authorized_sources(cfg)
				  : "(not set)",
			      n, n == 1 ? "" : "s");
		return -EINVAL;
	}
	return 0;
}

bool ds_grant_is_empty(const ds_target_config *cfg, const char *source)
{
	size_t n;

	if (!ds_target_config_has_sources(cfg)) {
		ds_target_config_namespaces(cfg, &n);
		return n == 0;
	}
	const ds_source_grant *g = ds_grant_of(cfg, source);
	return !g || g->n_namespaces == 0;
}

const char *ds_grant_describe(const ds_target_config *cfg, const char *source, char *buf,
			      size_t size)
{
	const ds_source_grant *g = ds_grant_of(cfg, source);
	const char *const *ns = NULL;
	const char *from = "namespaceMappings";
	char where[32];
	size_t n = 0, used;
	int w;

	if (ds_target_config_has_sources(cfg) && !g) {
		snprintf(buf, size, "nothing: source %s has no entry in sources", source);
		return buf;
	}
	if (g) {
		ns = g->namespaces;
		n = g->n_namespaces;
		snprintf(where, sizeof(where), "sources[%zu]", g->index);
		from = where;
	}
	w = snprintf(buf, size, "namespaces ");
	used = w > 0 ? (size_t)w : 0;
	if (!g) {
		const ds_namespace_mapping *m = ds_target_config_namespaces(cfg, &n);
		for (size_t i = 0; i < n && used < size; i++) {
			w = snprintf(buf + used, size - used, "%s%s", i ? ", " : "", m[i].from);
			used += w > 0 ? (size_t)w : 0;
		}
	} else {
		for (size_t i = 0; i < n && used < size; i++) {
			w = snprintf(buf + used, size - used, "%s%s", i ? ", " : "", ns[i]);
			used += w > 0 ? (size_t)w : 0;
		}
	}
	if (used < size)
		snprintf(buf + used, size - used, "%s (%s), podSecurity %s%s", n ? "" : "(none)",
			 from, ds_pss_level_name(ds_grant_pod_security(cfg, source)),
			 g && g->relocate ? ", relocate" : "");
	return buf;
}
