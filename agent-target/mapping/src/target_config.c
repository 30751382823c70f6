#include "drasync/target_config.h"

#include "target_config_internal.h"

#include "drasync/config_check.h"
#include "drasync/kinds.h"
#include "drasync/string_table.h"
#include "drasync/yaml.h"
#include "target_config_link.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ds_target_config {
	atomic_uint refs; /* ds_target_config_ref/unref; the last unref frees */
	json_t *docs;	  /* owns every string the structures below point to */
	enum ds_mode mode;
	ds_dra_rule *rules;
	size_t n_rules;
	const char **ext;	 /* NULL-terminated runs, one per rule with extendedResources */
	const char **field_loss; /* dra.allowFieldLoss */
	ds_device_class_mapping *dcm;
	size_t n_dcm;
	ds_namespace_mapping *nsm;
	size_t n_nsm;
	ds_source_grant *grants; /* sources[] */
	size_t n_grants;
	const char **grant_ns; /* the namespaces of every entry, one run each */
	bool has_sources, adopt_existing;
	char *file;
	ds_dra_config dra;
	const char *listen, *secret_key_file, *authorized_sources, *kubeconfig, *state_dir,
	    *metrics_listen, *identity_ns;
	uint64_t max_unapplied;
	ds_target_link link;
	int api_max_in_flight; /* apiServer.maxInFlight */
	ds_target_limits limits;
};

static int is_all(const char *s)
{
	return s && (strcmp(s, "ALL") == 0 || strcmp(s, "All") == 0);
}

static const char *const ds_mode_table[DS_MODE_MAX] = {
    [DS_MODE_MIGRATE] = "migrate",
    [DS_MODE_STANDBY] = "standby",
};
DS_DEFINE_PRIVATE_STRING_TABLE_LOOKUP(ds_mode, enum ds_mode)

int ds_rule_object_type(const char *kind)
{
	if (ds_kind_is(kind, DS_KIND_POD_GROUP))
		return DS_RULE_PODGROUP;
	if (ds_kind_is(kind, DS_KIND_WORKLOAD))
		return DS_RULE_WORKLOAD;
	return ds_workload_from_kind(kind);
}

const char *ds_rule_object_type_name(int type)
{
	if (type == DS_RULE_PODGROUP)
		return ds_kind_get(DS_KIND_POD_GROUP)->name;
	if (type == DS_RULE_WORKLOAD)
		return ds_kind_get(DS_KIND_WORKLOAD)->name;
	if (type < 0)
		return "All";
	return ds_workload_name((enum ds_workload)type);
}

static const char *const rule_keys[] = {
    "objectType", "objectInstance",    "container",
    "source",	  "resourceClaim",     "resourceClaimTemplate",
    "attach",	  "extendedResources", NULL,
};

/* A required selector of a rule: "ALL" or a name that passes `valid`. NULL out = ALL. */
static int selector(ds_config_walk *w, const json_t *rule, const char *key, int required,
		    bool (*valid)(const char *), const char *what, const char **out)
{
	const char *s;
	int r = ds_config_member_str(w, rule, key, &s);
	ds_config_mark m;

	if (r < 0)
		return r;
	*out = NULL;
	if (!s) {
		if (!required)
			return 0;
		return ds_config_fail(w, false, "missing '%s' (a %s, or ALL)", key, what);
	}
	if (is_all(s))
		return 0;
	if (!valid(s)) {
		m = ds_config_push_key(w, key);
		r = ds_config_fail(
		    w, false,
		    "'%s' is not a valid %s (lowercase letters, digits and '-'%s) nor ALL", s, what,
		    valid == ds_dns_subdomain_valid ? ", '.'" : "");
		ds_config_pop(w, m);
		return r;
	}
	*out = s;
	return 0;
}

/* A resource name as in limits: [prefix/]name, both parts DNS-like. */
static bool resource_name_valid(const char *s)
{
	const char *slash = strchr(s, '/');
	size_t n = strlen(s);

	if (n == 0 || n > 316)
		return false;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' || *p == '_' || *p == '/'))
			return false;
	if (slash && (slash == s || !slash[1] || strchr(slash + 1, '/')))
		return false;
	return true;
}

static int load_rule(ds_config_walk *w, ds_target_config *cfg, const json_t *rule, const char *list,
		     size_t index, ds_dra_rule *out, size_t *n_ext_used)
{
	const char *type, *claim, *tmpl;
	json_t *ext;
	ds_yaml_loc loc;
	int r;

	if (!json_is_object(rule))
		return ds_config_fail(
		    w, false,
		    "expected a mapping with objectType, objectInstance, container "
		    "and resourceClaim or resourceClaimTemplate, found %s",
		    ds_config_type_name(rule));
	memset(out, 0, sizeof(*out));
	out->list = list;
	out->index = index;
	if (w->locs && ds_yaml_locs_find(w->locs, 0, w->ptr, &loc) == 0) {
		out->line = loc.line;
		out->col = loc.col;
	}
	if ((r = ds_config_check_keys(w, rule, rule_keys)) < 0)
		return r;
	if ((r = ds_config_member_str(w, rule, "objectType", &type)) < 0)
		return r;
	if (!type)
		return ds_config_fail(w, false,
				      "missing 'objectType' (one of Pod, Deployment, ReplicaSet, "
				      "StatefulSet, DaemonSet, Job, CronJob, PodGroup, Workload, "
				      "All)");
	if (is_all(type)) {
		out->object_type = -1;
	} else {
		out->object_type = ds_rule_object_type(type);
		if (out->object_type < 0) {
			ds_config_mark m = ds_config_push_key(w, "objectType");
			r = ds_config_fail(
			    w, false,
			    "unknown objectType '%s' (expected one of Pod, Deployment, "
			    "ReplicaSet, StatefulSet, DaemonSet, Job, CronJob, PodGroup, "
			    "Workload, All)",
			    type);
			ds_config_pop(w, m);
			return r;
		}
	}
	if ((r = selector(w, rule, "objectInstance", 1, ds_dns_subdomain_valid, "object name",
			  &out->instance)) < 0 ||
	    (r = selector(w, rule, "container", 1, ds_dns_label_valid, "container name",
			  &out->container)) < 0 ||
	    (r = selector(w, rule, "source", 0, ds_dns_subdomain_valid,
			  "claim, template or entry name", &out->source)) < 0)
		return r;
	if (out->container &&
	    (out->object_type == DS_RULE_PODGROUP || out->object_type == DS_RULE_WORKLOAD)) {
		ds_config_mark m = ds_config_push_key(w, "container");
		r = ds_config_fail(w, false,
				   "a %s has no containers: a rule for one says container: ALL "
				   "(its member pods follow the group's claims)",
				   ds_rule_object_type_name(out->object_type));
		ds_config_pop(w, m);
		return r;
	}
	if ((r = ds_config_member_str(w, rule, "resourceClaim", &claim)) < 0 ||
	    (r = ds_config_member_str(w, rule, "resourceClaimTemplate", &tmpl)) < 0)
		return r;
	if (claim && tmpl)
		return ds_config_fail(
		    w, false,
		    "both resourceClaim and resourceClaimTemplate are set; a rule has "
		    "exactly one target");
	if (!claim && !tmpl)
		return ds_config_fail(w, false,
				      "no target: set resourceClaim or resourceClaimTemplate");
	out->target_kind = claim ? DS_TARGET_CLAIM : DS_TARGET_TEMPLATE;
	out->target = claim ? claim : tmpl;
	if (!ds_dns_subdomain_valid(out->target)) {
		ds_config_mark m =
		    ds_config_push_key(w, claim ? "resourceClaim" : "resourceClaimTemplate");
		r = ds_config_fail(
		    w, false,
		    "'%s' is not a valid object name (lowercase letters, digits, '-' "
		    "and '.', at most 253)",
		    out->target);
		ds_config_pop(w, m);
		return r;
	}
	if ((r = ds_config_member_bool(w, rule, "attach", false, &out->attach)) < 0)
		return r;
	if ((r = ds_config_member(w, rule, "extendedResources", JSON_ARRAY, &ext)) < 0)
		return r;
	if (ext && json_array_size(ext) > 0) {
		ds_config_mark m = ds_config_push_key(w, "extendedResources");
		size_t i;
		json_t *v;

		if (!out->attach) {
			r = ds_config_fail(w, true,
					   "extendedResources needs attach: true (only attached "
					   "containers have their extended resources replaced)");
			ds_config_pop(w, m);
			return r;
		}
		out->extended_resources = cfg->ext + *n_ext_used;
		json_array_foreach (ext, i, v) {
			ds_config_mark mi = ds_config_push_index(w, i);
			if (!json_is_string(v) || !resource_name_valid(json_string_value(v))) {
				r = ds_config_fail(
				    w, false, "expected a resource name such as nvidia.com/gpu");
				ds_config_pop(w, mi);
				ds_config_pop(w, m);
				return r;
			}
			ds_config_pop(w, mi);
			cfg->ext[(*n_ext_used)++] = json_string_value(v);
		}
		out->n_extended_resources = json_array_size(ext);
		cfg->ext[(*n_ext_used)++] = NULL;
		ds_config_pop(w, m);
	}
	return 0;
}

static int same_opt(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* Identical selectors and same target kind with different targets can never be resolved. */
static int check_conflicts(ds_config_walk *w, const ds_target_config *cfg)
{
	for (size_t i = 0; i < cfg->n_rules; i++) {
		for (size_t j = i + 1; j < cfg->n_rules; j++) {
			const ds_dra_rule *a = &cfg->rules[i], *b = &cfg->rules[j];

			if (a->object_type != b->object_type ||
			    !same_opt(a->instance, b->instance) ||
			    !same_opt(a->container, b->container) ||
			    !same_opt(a->source, b->source) || a->target_kind != b->target_kind ||
			    strcmp(a->target, b->target) == 0)
				continue;
			w->ptr[0] = '\0';
			w->path[0] = '\0';
			ds_err_setloc(w->err, w->file, b->line, b->col,
				      "dra.%s[%zu]: same selectors as dra.%s[%zu] (line %d) but a "
				      "different target ('%s' vs '%s'): no rule can win",
				      b->list, b->index, a->list, a->index, a->line, b->target,
				      a->target);
			return -EINVAL;
		}
	}
	return 0;
}

/* A field path as the dropped-field check names it: dotted members, [] for every list item. */
static bool field_path_valid(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 512 || s[0] == '.' || s[n - 1] == '.' || strstr(s, ".."))
		return false;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '.' || *p == '[' || *p == ']' ||
		      *p == '-' || *p == '_' || *p == '/'))
			return false;
	return true;
}

/* dra.allowFieldLoss: [paths] the target may drop without failing the object. */
static int load_field_loss(ds_config_walk *w, ds_target_config *cfg, const json_t *dra)
{
	json_t *arr, *v;
	ds_config_mark m;
	size_t i;
	int r;

	if ((r = ds_config_member(w, dra, "allowFieldLoss", JSON_ARRAY, &arr)) < 0 || !arr)
		return r;
	cfg->field_loss = calloc(json_array_size(arr) + 1, sizeof(*cfg->field_loss));
	if (!cfg->field_loss)
		return -ENOMEM;
	m = ds_config_push_key(w, "allowFieldLoss");
	json_array_foreach (arr, i, v) {
		ds_config_mark mi = ds_config_push_index(w, i);

		if (!json_is_string(v))
			return ds_config_fail(w, false,
					      "expected a field path such as "
					      "spec.resourceClaims, found %s",
					      ds_config_type_name(v));
		if (!field_path_valid(json_string_value(v)))
			return ds_config_fail(
			    w, false,
			    "'%s' is not a field path (dotted field names, [] for "
			    "the items of a list: spec.template.spec.resourceClaims)",
			    json_string_value(v));
		cfg->field_loss[cfg->dra.n_allow_field_loss++] = json_string_value(v);
		ds_config_pop(w, mi);
	}
	ds_config_pop(w, m);
	cfg->dra.allow_field_loss = cfg->field_loss;
	return 0;
}

static int load_dra(ds_config_walk *w, ds_target_config *cfg, const json_t *dra)
{
	static const char *const keys[] = {
	    "resourceClaimMappings",
	    "resourceClaimTemplateMappings",
	    "deviceClassMappings",
	    "requireTargetObjects",
	    "replicateDeviceClasses",
	    "allowFieldLoss",
	    NULL,
	};
	static const char *const lists[] = {"resourceClaimMappings",
					    "resourceClaimTemplateMappings"};
	json_t *arr[2], *dcm;
	size_t n = 0, n_ext = 0, i;
	ds_config_mark m;
	json_t *v;
	int r;

	if ((r = ds_config_check_keys(w, dra, keys)) < 0)
		return r;
	for (int l = 0; l < 2; l++) {
		if ((r = ds_config_member(w, dra, lists[l], JSON_ARRAY, &arr[l])) < 0)
			return r;
		if (arr[l]) {
			n += json_array_size(arr[l]);
			json_array_foreach (arr[l], i, v) {
				json_t *e = json_object_get(v, "extendedResources");
				n_ext += json_is_array(e) ? json_array_size(e) + 1 : 0;
			}
		}
	}
	cfg->rules = calloc(n ? n : 1, sizeof(*cfg->rules));
	cfg->ext = calloc(n_ext + 1, sizeof(*cfg->ext));
	if (!cfg->rules || !cfg->ext)
		return -ENOMEM;
	n_ext = 0;
	for (int l = 0; l < 2; l++) {
		if (!arr[l])
			continue;
		m = ds_config_push_key(w, lists[l]);
		json_array_foreach (arr[l], i, v) {
			ds_config_mark mi = ds_config_push_index(w, i);
			r = load_rule(w, cfg, v, lists[l], i, &cfg->rules[cfg->n_rules], &n_ext);
			if (r < 0)
				return r;
			cfg->n_rules++;
			ds_config_pop(w, mi);
		}
		ds_config_pop(w, m);
	}

	if ((r = ds_config_member(w, dra, "deviceClassMappings", JSON_ARRAY, &dcm)) < 0)
		return r;
	if (dcm) {
		static const char *const dkeys[] = {"from", "to", NULL};

		cfg->dcm = calloc(json_array_size(dcm) + 1, sizeof(*cfg->dcm));
		if (!cfg->dcm)
			return -ENOMEM;
		m = ds_config_push_key(w, "deviceClassMappings");
		json_array_foreach (dcm, i, v) {
			ds_config_mark mi = ds_config_push_index(w, i);
			const char *from, *to;

			if (!json_is_object(v))
				return ds_config_fail(w, false,
						      "expected a mapping {from, to}, found %s",
						      ds_config_type_name(v));
			if ((r = ds_config_check_keys(w, v, dkeys)) < 0 ||
			    (r = ds_config_member_str(w, v, "from", &from)) < 0 ||
			    (r = ds_config_member_str(w, v, "to", &to)) < 0)
				return r;
			if (!from || !to)
				return ds_config_fail(w, false, "missing '%s' (a DeviceClass name)",
						      from ? "to" : "from");
			if (!ds_dns_subdomain_valid(from) || !ds_dns_subdomain_valid(to)) {
				ds_config_mark mk = ds_config_push_key(
				    w, ds_dns_subdomain_valid(from) ? "to" : "from");
				r = ds_config_fail(w, false, "'%s' is not a valid DeviceClass name",
						   ds_dns_subdomain_valid(from) ? to : from);
				ds_config_pop(w, mk);
				return r;
			}
			for (size_t k = 0; k < cfg->n_dcm; k++) {
				if (strcmp(cfg->dcm[k].from, from) == 0 &&
				    strcmp(cfg->dcm[k].to, to) != 0)
					return ds_config_fail(
					    w, false,
					    "DeviceClass '%s' is already mapped to '%s' "
					    "by deviceClassMappings[%zu]",
					    from, cfg->dcm[k].to, k);
			}
			cfg->dcm[cfg->n_dcm].from = from;
			cfg->dcm[cfg->n_dcm].to = to;
			cfg->n_dcm++;
			ds_config_pop(w, mi);
		}
		ds_config_pop(w, m);
	}
	if ((r = load_field_loss(w, cfg, dra)) < 0)
		return r;
	if ((r = ds_config_member_bool(w, dra, "requireTargetObjects", true,
				       &cfg->dra.require_target_objects)) < 0 ||
	    (r = ds_config_member_bool(w, dra, "replicateDeviceClasses", false,
				       &cfg->dra.replicate_device_classes)) < 0)
		return r;
	return check_conflicts(w, cfg);
}

static int load_namespaces(ds_config_walk *w, ds_target_config *cfg, const json_t *map)
{
	const char *key;
	json_t *v;

	cfg->nsm = calloc(json_object_size(map) + 1, sizeof(*cfg->nsm));
	if (!cfg->nsm)
		return -ENOMEM;
	json_object_foreach ((json_t *)(uintptr_t)map, key, v) {
		ds_config_mark m = ds_config_push_key(w, key);
		int r;

		if (!ds_dns_label_valid(key)) {
			r = ds_config_fail(w, true, "'%s' is not a valid namespace name", key);
			ds_config_pop(w, m);
			return r;
		}
		if (!json_is_string(v) || !ds_dns_label_valid(json_string_value(v))) {
			r = ds_config_fail(w, false,
					   "expected a target namespace name (a DNS label)");
			ds_config_pop(w, m);
			return r;
		}
		cfg->nsm[cfg->n_nsm].from = key;
		cfg->nsm[cfg->n_nsm].to = json_string_value(v);
		cfg->n_nsm++;
		ds_config_pop(w, m);
	}
	return 0;
}

/* A namespace name or a shell glob of one: DNS-label characters, * ? and [...] classes. */
static bool namespace_glob_valid(const char *s)
{
	size_t n = strlen(s);
	int depth = 0;

	if (n == 0 || n > 253)
		return false;
	for (const char *p = s; *p; p++) {
		if (*p == '[') {
			if (depth++)
				return false;
			if (p[1] == '!' || p[1] == '^')
				p++;
			continue;
		}
		if (*p == ']') {
			if (!depth--)
				return false;
			continue;
		}
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' ||
		      *p == '*' || *p == '?'))
			return false;
	}
	/* fnmatch takes any pattern; one that matches no valid name is a mistake */
	return depth == 0 && (strpbrk(s, "*?[") || ds_dns_label_valid(s));
}

static int load_grant(ds_config_walk *w, ds_target_config *cfg, const json_t *v, size_t index,
		      size_t *n_ns_used)
{
	static const char *const keys[] = {"name",     "namespaces",	      "podSecurity",
					   "relocate", "maxUnappliedRecords", "maxLedgerBytes",
					   NULL};
	ds_source_grant *g = &cfg->grants[cfg->n_grants];
	const char *level;
	json_t *ns, *e;
	ds_yaml_loc loc;
	size_t i;
	int r;

	if (!json_is_object(v))
		return ds_config_fail(
		    w, false,
		    "expected a mapping {name, namespaces, podSecurity, relocate}, "
		    "found %s",
		    ds_config_type_name(v));
	memset(g, 0, sizeof(*g));
	g->index = index;
	g->pod_security = DS_PSS_BASELINE;
	if (w->locs && ds_yaml_locs_find(w->locs, 0, w->ptr, &loc) == 0) {
		g->line = loc.line;
		g->col = loc.col;
	}
	if ((r = ds_config_check_keys(w, v, keys)) < 0 ||
	    (r = ds_config_member_str(w, v, "name", &g->name)) < 0 ||
	    (r = ds_target_config_load_grant_limits(w, v, g)) < 0)
		return r;
	if (!g->name || !g->name[0])
		return ds_config_fail(w, false,
				      "missing 'name' (the source's name in authorizedSources)");
	for (size_t k = 0; k < cfg->n_grants; k++)
		if (strcmp(cfg->grants[k].name, g->name) == 0) {
			ds_config_mark m = ds_config_push_key(w, "name");
			r = ds_config_fail(w, false,
					   "source '%s' is listed twice (first at sources[%zu])",
					   g->name, k);
			ds_config_pop(w, m);
			return r;
		}
	if ((r = ds_config_member(w, v, "namespaces", JSON_ARRAY, &ns)) < 0)
		return r;
	if (!ns)
		return ds_config_fail(w, false,
				      "missing 'namespaces' (the source namespaces it may write: "
				      "names or globs; [] for none)");
	g->namespaces = cfg->grant_ns + *n_ns_used;
	json_array_foreach (ns, i, e) {
		ds_config_mark m = ds_config_push_key(w, "namespaces");
		ds_config_mark mi = ds_config_push_index(w, i);

		if (!json_is_string(e) || !namespace_glob_valid(json_string_value(e))) {
			r = ds_config_fail(w, false,
					   "expected a namespace name or a glob of one (lowercase "
					   "letters, digits, '-', '*', '?', [...]), found %s%s%s",
					   json_is_string(e) ? "'" : ds_config_type_name(e),
					   json_is_string(e) ? json_string_value(e) : "",
					   json_is_string(e) ? "'" : "");
			ds_config_pop(w, mi);
			ds_config_pop(w, m);
			return r;
		}
		ds_config_pop(w, mi);
		ds_config_pop(w, m);
		cfg->grant_ns[(*n_ns_used)++] = json_string_value(e);
	}
	g->n_namespaces = json_array_size(ns);
	if ((r = ds_config_member_str(w, v, "podSecurity", &level)) < 0)
		return r;
	if (level && ds_pss_level_parse(level, &g->pod_security) < 0) {
		ds_config_mark m = ds_config_push_key(w, "podSecurity");
		r = ds_config_fail(w, false,
				   "unknown podSecurity '%s' (expected privileged, baseline or "
				   "restricted)",
				   level);
		ds_config_pop(w, m);
		return r;
	}
	if ((r = ds_config_member_bool(w, v, "relocate", false, &g->relocate)) < 0)
		return r;
	cfg->n_grants++;
	return 0;
}

static int load_sources(ds_config_walk *w, ds_target_config *cfg, const json_t *list)
{
	size_t n_ns = 0, i;
	json_t *v;

	json_array_foreach (list, i, v) {
		json_t *ns = json_object_get(v, "namespaces");
		n_ns += json_is_array(ns) ? json_array_size(ns) : 0;
	}
	cfg->grants = calloc(json_array_size(list) + 1, sizeof(*cfg->grants));
	cfg->grant_ns = calloc(n_ns + 1, sizeof(*cfg->grant_ns));
	if (!cfg->grants || !cfg->grant_ns)
		return -ENOMEM;
	n_ns = 0;
	json_array_foreach (list, i, v) {
		ds_config_mark m = ds_config_push_index(w, i);
		int r = load_grant(w, cfg, v, i, &n_ns);

		if (r < 0)
			return r;
		ds_config_pop(w, m);
	}
	return 0;
}

/* identity.namespace names a namespace: a DNS-1123 label. */
static int check_identity(ds_config_walk *w, const ds_target_config *cfg)
{
	const char *ns = cfg->identity_ns;
	size_t len = ns ? strlen(ns) : 0;
	bool ok = len > 0 && len <= 63 && ns[0] != '-' && ns[len - 1] != '-';
	ds_config_mark a, b;
	int r;

	for (size_t i = 0; ok && i < len; i++)
		ok = (ns[i] >= 'a' && ns[i] <= 'z') || (ns[i] >= '0' && ns[i] <= '9') ||
		     ns[i] == '-';
	if (!ns || ok)
		return 0;
	a = ds_config_push_key(w, "identity");
	b = ds_config_push_key(w, "namespace");
	r = ds_config_fail(w, false,
			   "identity.namespace '%s' is not a namespace name (lower-case letters, "
			   "digits and '-', at most 63; e.g. drasync)",
			   ns);
	ds_config_pop(w, b);
	ds_config_pop(w, a);
	return r;
}

static int load_root(ds_config_walk *w, ds_target_config *cfg, const json_t *root)
{
	static const char *const keys[] = {
	    "apiVersion",
	    "kind",
	    "listen",
	    "keys",
	    "kubeconfig",
	    "stateDir",
	    "mode",
	    "namespaceMappings",
	    "dra",
	    "metrics",
	    "maxUnappliedRecords",
	    "sources",
	    "adoptExisting",
	    "link",
	    "apiServer",
	    "limits",
	    "identity",
	    NULL,
	};
	static const char *const key_keys[] = {"secretKeyFile", "authorizedSources", NULL};
	static const char *const metric_keys[] = {"listen", NULL};
	static const char *const identity_keys[] = {"namespace", NULL};
	const char **identity_outs[] = {&cfg->identity_ns};
	const char **key_outs[] = {&cfg->secret_key_file, &cfg->authorized_sources};
	const char **metric_outs[] = {&cfg->metrics_listen};
	const char *mode;
	json_t *dra, *nsm;
	int r;

	if (!json_is_object(root))
		return ds_config_fail(w, false, "expected a TargetConfig mapping, found %s",
				      ds_config_type_name(root));
	if ((r = ds_config_check_keys(w, root, keys)) < 0)
		return r;
	if ((r = ds_config_check_header(w, root, "TargetConfig", "drasync-target")) < 0)
		return r;
	if ((r = ds_config_member_str(w, root, "mode", &mode)) < 0)
		return r;
	cfg->mode = DS_MODE_STANDBY;
	if (mode) {
		int m = ds_mode_from_string(mode);

		if (m < 0) {
			ds_config_mark mark = ds_config_push_key(w, "mode");
			r = ds_config_fail(w, false,
					   "unknown mode '%s' (expected migrate or standby)", mode);
			ds_config_pop(w, mark);
			return r;
		}
		cfg->mode = (enum ds_mode)m;
	}
	if ((r = ds_config_member_str(w, root, "listen", &cfg->listen)) < 0 ||
	    (r = ds_config_member_str(w, root, "kubeconfig", &cfg->kubeconfig)) < 0 ||
	    (r = ds_config_member_str(w, root, "stateDir", &cfg->state_dir)) < 0 ||
	    (r = ds_config_section_str(w, root, "keys", key_keys, key_outs)) < 0 ||
	    (r = ds_config_section_str(w, root, "metrics", metric_keys, metric_outs)) < 0 ||
	    (r = ds_config_section_str(w, root, "identity", identity_keys, identity_outs)) < 0 ||
	    (r = check_identity(w, cfg)) < 0)
		return r;
	cfg->max_unapplied = 100000;
	if ((r = ds_config_member(w, root, "maxUnappliedRecords", JSON_INTEGER, &nsm)) < 0)
		return r;
	if (nsm) {
		ds_config_mark m = ds_config_push_key(w, "maxUnappliedRecords");
		if (json_integer_value(nsm) < 1) {
			r = ds_config_fail(
			    w, false, "maxUnappliedRecords must be at least 1 (default 100000)");
			ds_config_pop(w, m);
			return r;
		}
		cfg->max_unapplied = (uint64_t)json_integer_value(nsm);
		ds_config_pop(w, m);
	}
	if ((r = ds_target_config_load_link(w, root, &cfg->link)) < 0 ||
	    (r = ds_target_config_load_api_server(w, root, &cfg->api_max_in_flight)) < 0)
		return r;
	cfg->limits.source_max_unapplied = cfg->max_unapplied;
	if ((r = ds_config_member(w, root, "limits", JSON_OBJECT, &nsm)) < 0)
		return r;
	if (nsm) {
		ds_config_mark m = ds_config_push_key(w, "limits");
		if ((r = ds_target_config_load_limits(w, nsm, &cfg->limits)) < 0)
			return r;
		ds_config_pop(w, m);
	}
	if ((r = ds_config_member(w, root, "namespaceMappings", JSON_OBJECT, &nsm)) < 0)
		return r;
	if (nsm) {
		ds_config_mark m = ds_config_push_key(w, "namespaceMappings");
		if ((r = load_namespaces(w, cfg, nsm)) < 0)
			return r;
		ds_config_pop(w, m);
	}
	if ((r = ds_config_member(w, root, "sources", JSON_ARRAY, &nsm)) < 0)
		return r;
	if (nsm) {
		ds_config_mark m = ds_config_push_key(w, "sources");
		cfg->has_sources = true;
		if ((r = load_sources(w, cfg, nsm)) < 0)
			return r;
		ds_config_pop(w, m);
	}
	if ((r = ds_config_member_bool(w, root, "adoptExisting", false, &cfg->adopt_existing)) < 0)
		return r;
	cfg->dra.require_target_objects = true;
	if ((r = ds_config_member(w, root, "dra", JSON_OBJECT, &dra)) < 0)
		return r;
	if (dra) {
		ds_config_mark m = ds_config_push_key(w, "dra");
		if ((r = load_dra(w, cfg, dra)) < 0)
			return r;
		ds_config_pop(w, m);
	}
	return 0;
}

static void finish(ds_target_config *cfg)
{
	cfg->dra.rules = cfg->rules;
	cfg->dra.n_rules = cfg->n_rules;
	cfg->dra.device_classes = cfg->dcm;
	cfg->dra.n_device_classes = cfg->n_dcm;
}

static int load_root_cb(ds_config_walk *w, const json_t *root, void *cfg)
{
	return load_root(w, cfg, root);
}

static int build(ds_target_config **out, const char *path, const char *buf, size_t len,
		 const char *filename, ds_err *err)
{
	ds_target_config *cfg = calloc(1, sizeof(*cfg));
	int r;

	if (!cfg) {
		ds_err_set(err, "out of memory");
		return -ENOMEM;
	}
	atomic_init(&cfg->refs, 1);
	r = ds_config_run(path, buf, len, filename, "TargetConfig", load_root_cb, cfg, &cfg->docs,
			  err);
	if (r < 0) {
		ds_target_config_free(cfg);
		return r;
	}
	finish(cfg);
	cfg->file = strdup(path ? path : filename ? filename : "(config)");
	if (!cfg->file) {
		ds_target_config_free(cfg);
		ds_err_set(err, "out of memory");
		return -ENOMEM;
	}
	*out = cfg;
	return 0;
}

int ds_target_config_parse(ds_target_config **out, const char *buf, size_t len,
			   const char *filename, ds_err *err)
{
	return ds_err_fallback(err, build(out, NULL, buf, len, filename, err));
}

int ds_target_config_load(ds_target_config **out, const char *path, ds_err *err)
{
	return ds_err_fallback(err, build(out, path, NULL, 0, NULL, err));
}

int ds_target_config_new_empty(ds_target_config **out)
{
	ds_target_config *cfg = calloc(1, sizeof(*cfg));

	if (!cfg)
		return -ENOMEM;
	atomic_init(&cfg->refs, 1);
	cfg->mode = DS_MODE_MIGRATE;
	cfg->dra.require_target_objects = true;
	ds_target_link_default(&cfg->link);
	cfg->api_max_in_flight = DS_TARGET_API_IN_FLIGHT_DEFAULT;
	finish(cfg);
	*out = cfg;
	return 0;
}

ds_target_config *ds_target_config_ref(const ds_target_config *cfg)
{
	/* The count is the one field a holder of a const configuration may change. */
	ds_target_config *c = (ds_target_config *)(uintptr_t)cfg;

	if (c)
		atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
	return c;
}

unsigned ds_target_config_refs(const ds_target_config *cfg)
{
	return cfg ? atomic_load(&cfg->refs) : 0;
}

void ds_target_config_unref(ds_target_config *cfg)
{
	if (!cfg)
		return;
	/* Release: every user's reads happen before the last one frees. */
	if (atomic_fetch_sub_explicit(&cfg->refs, 1, memory_order_acq_rel) != 1)
		return;
	free(cfg->rules);
	free(cfg->ext);
	free(cfg->field_loss);
	free(cfg->dcm);
	free(cfg->nsm);
	free(cfg->grants);
	free(cfg->grant_ns);
	free(cfg->file);
	json_decref(cfg->docs);
	free(cfg);
}

void ds_target_config_free(ds_target_config *cfg)
{
	ds_target_config_unref(cfg);
}

enum ds_mode ds_target_config_mode(const ds_target_config *cfg)
{
	return cfg->mode;
}

const ds_dra_config *ds_target_config_dra(const ds_target_config *cfg)
{
	return &cfg->dra;
}

const char *ds_target_config_map_namespace(const ds_target_config *cfg, const char *ns)
{
	if (!ns)
		return NULL;
	for (size_t i = 0; i < cfg->n_nsm; i++)
		if (strcmp(cfg->nsm[i].from, ns) == 0)
			return cfg->nsm[i].to;
	return ns;
}

const ds_namespace_mapping *ds_target_config_namespaces(const ds_target_config *cfg, size_t *n)
{
	*n = cfg->n_nsm;
	return cfg->nsm;
}

const ds_source_grant *ds_target_config_sources(const ds_target_config *cfg, size_t *n)
{
	*n = cfg->n_grants;
	return cfg->grants;
}

bool ds_target_config_has_sources(const ds_target_config *cfg)
{
	return cfg->has_sources;
}

bool ds_target_config_adopt_existing(const ds_target_config *cfg)
{
	return cfg->adopt_existing;
}

const char *ds_target_config_file(const ds_target_config *cfg)
{
	return cfg->file ? cfg->file : "(config)";
}

const char *ds_target_config_listen(const ds_target_config *cfg)
{
	return cfg->listen;
}
const char *ds_target_config_secret_key_file(const ds_target_config *cfg)
{
	return cfg->secret_key_file;
}
const char *ds_target_config_authorized_sources(const ds_target_config *cfg)
{
	return cfg->authorized_sources;
}
const char *ds_target_config_kubeconfig(const ds_target_config *cfg)
{
	return cfg->kubeconfig;
}
uint64_t ds_target_config_max_unapplied(const ds_target_config *cfg)
{
	return cfg->max_unapplied;
}

void ds_target_config_source_limits(const ds_target_config *cfg, const char *source,
				    uint64_t *max_unapplied, uint64_t *max_ledger_bytes)
{
	*max_unapplied = cfg->limits.source_max_unapplied;
	*max_ledger_bytes = cfg->limits.source_max_ledger_bytes;
	for (size_t i = 0; source && i < cfg->n_grants; i++) {
		const ds_source_grant *g = &cfg->grants[i];
		if (strcmp(g->name, source) != 0)
			continue;
		if (g->has_max_unapplied)
			*max_unapplied = g->max_unapplied;
		if (g->has_max_ledger_bytes)
			*max_ledger_bytes = g->max_ledger_bytes;
	}
}

const char *ds_target_config_state_dir(const ds_target_config *cfg)
{
	return cfg->state_dir ? cfg->state_dir : "/var/lib/drasync";
}

const char *ds_target_config_ledger(const ds_target_config *cfg, char *buf, size_t size)
{
	snprintf(buf, size, "%s/ledger.db", ds_target_config_state_dir(cfg));
	return buf;
}
int ds_target_config_api_max_in_flight(const ds_target_config *cfg)
{
	return cfg->api_max_in_flight;
}

const ds_target_link *ds_target_config_link(const ds_target_config *cfg)
{
	return &cfg->link;
}

const char *ds_target_config_metrics_listen(const ds_target_config *cfg)
{
	return cfg->metrics_listen;
}

const char *ds_target_config_identity_namespace(const ds_target_config *cfg)
{
	return cfg->identity_ns;
}

const char *ds_mode_name(enum ds_mode mode)
{
	const char *s = ds_mode_to_string(mode);

	return s ? s : "?";
}
