#include "drasync/target_config.h"

#include "drasync/yaml.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONFIG_API_VERSION "drasync.io/v1alpha1"
#define PATH_MAX_LEN 512

struct ds_target_config {
	json_t *docs; /* owns every string the structures below point to */
	enum ds_mode mode;
	ds_dra_rule *rules;
	size_t n_rules;
	const char **ext; /* NULL-terminated runs, one per rule with extendedResources */
	ds_device_class_mapping *dcm;
	size_t n_dcm;
	ds_namespace_mapping *nsm;
	size_t n_nsm;
	ds_dra_config dra;
	const char *listen, *secret_key_file, *authorized_sources, *kubeconfig, *state_dir,
	    *metrics_listen;
};

/* Validation walk: the JSON pointer and the user-facing dotted path of the node at hand. */
struct walk {
	const ds_yaml_locs *locs;
	const char *file;
	ds_err *err;
	char ptr[PATH_MAX_LEN];
	char path[PATH_MAX_LEN];
};

struct mark {
	size_t ptr, path;
};

static struct mark push_key(struct walk *w, const char *key)
{
	struct mark m = {strlen(w->ptr), strlen(w->path)};
	size_t o = m.ptr;

	/* RFC 6901: '~' -> "~0", '/' -> "~1". */
	if (o + 1 < sizeof(w->ptr))
		w->ptr[o++] = '/';
	for (const char *p = key; *p && o + 2 < sizeof(w->ptr); p++) {
		if (*p == '~' || *p == '/') {
			w->ptr[o++] = '~';
			w->ptr[o++] = *p == '~' ? '0' : '1';
		} else {
			w->ptr[o++] = *p;
		}
	}
	w->ptr[o] = '\0';
	snprintf(w->path + m.path, sizeof(w->path) - m.path, "%s%s", m.path ? "." : "", key);
	return m;
}

static struct mark push_index(struct walk *w, size_t i)
{
	struct mark m = {strlen(w->ptr), strlen(w->path)};

	snprintf(w->ptr + m.ptr, sizeof(w->ptr) - m.ptr, "/%zu", i);
	snprintf(w->path + m.path, sizeof(w->path) - m.path, "[%zu]", i);
	return m;
}

static void pop(struct walk *w, struct mark m)
{
	w->ptr[m.ptr] = '\0';
	w->path[m.path] = '\0';
}

/* Record an error at the current node (its key when at_key and it has one). */
static int fail(struct walk *w, int at_key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(struct walk *w, int at_key, const char *fmt, ...)
{
	char msg[200];
	ds_yaml_loc loc = {0, 0, 0, 0};
	int line = 0, col = 0;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (w->locs && ds_yaml_locs_find(w->locs, 0, w->ptr, &loc) == 0) {
		line = loc.line;
		col = loc.col;
		if (at_key && loc.key_line > 0) {
			line = loc.key_line;
			col = loc.key_col;
		}
	}
	if (w->path[0])
		ds_err_setloc(w->err, w->file, line, col, "%s: %s", w->path, msg);
	else
		ds_err_setloc(w->err, w->file, line, col, "%s", msg);
	return -EINVAL;
}

static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), prev[64], cur[64];

	if (la >= 63 || lb >= 63)
		return 99;
	for (size_t j = 0; j <= lb; j++)
		prev[j] = j;
	for (size_t i = 1; i <= la; i++) {
		cur[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
			size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
			cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
		}
		memcpy(prev, cur, (lb + 1) * sizeof(size_t));
	}
	return prev[lb];
}

/* Every key of obj must be one of allowed (NULL-terminated). */
static int check_keys(struct walk *w, const json_t *obj, const char *const *allowed)
{
	const char *key;
	json_t *v;

	json_object_foreach ((json_t *)(uintptr_t)obj, key, v) {
		const char *best = NULL;
		size_t best_d = 3;
		int ok = 0;
		struct mark m;

		for (const char *const *a = allowed; *a; a++) {
			size_t d;

			if (strcmp(key, *a) == 0) {
				ok = 1;
				break;
			}
			d = edit_distance(key, *a);
			if (d < best_d) {
				best_d = d;
				best = *a;
			}
		}
		if (ok)
			continue;
		m = push_key(w, key);
		(void)m;
		if (best)
			return fail(w, 1, "unknown key (did you mean '%s'?)", best);
		return fail(w, 1, "unknown key");
	}
	return 0;
}

static const char *type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "a mapping";
	case JSON_ARRAY:
		return "a list";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
		return "an integer";
	case JSON_REAL:
		return "a number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "a boolean";
	default:
		return "null";
	}
}

/* Optional member of a given type: 0 with *out NULL when absent. */
static int member(struct walk *w, const json_t *obj, const char *key, json_type type, json_t **out)
{
	json_t *v = json_object_get(obj, key);
	static const char *const want[] = {
	    [JSON_OBJECT] = "a mapping",   [JSON_ARRAY] = "a list",  [JSON_STRING] = "a string",
	    [JSON_INTEGER] = "an integer", [JSON_REAL] = "a number", [JSON_TRUE] = "a boolean",
	    [JSON_FALSE] = "a boolean",	   [JSON_NULL] = "null",
	};

	*out = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (json_typeof(v) != type && !(type == JSON_TRUE && json_is_boolean(v))) {
		struct mark m = push_key(w, key);
		int r = fail(w, 0, "expected %s, found %s", want[type], type_name(v));
		pop(w, m);
		return r;
	}
	*out = v;
	return 0;
}

static int member_str(struct walk *w, const json_t *obj, const char *key, const char **out)
{
	json_t *v;
	int r = member(w, obj, key, JSON_STRING, &v);

	if (r < 0)
		return r;
	*out = v ? json_string_value(v) : NULL;
	return 0;
}

static int member_bool(struct walk *w, const json_t *obj, const char *key, bool dflt, bool *out)
{
	json_t *v;
	int r = member(w, obj, key, JSON_TRUE, &v);

	if (r < 0)
		return r;
	*out = v ? json_is_true(v) : dflt;
	return 0;
}

static int is_all(const char *s)
{
	return s && (strcmp(s, "ALL") == 0 || strcmp(s, "All") == 0);
}

static const char *const rule_keys[] = {
    "objectType", "objectInstance",    "container",
    "source",	  "resourceClaim",     "resourceClaimTemplate",
    "attach",	  "extendedResources", NULL,
};

/* A required selector of a rule: "ALL" or a name that passes `valid`. NULL out = ALL. */
static int selector(struct walk *w, const json_t *rule, const char *key, int required,
		    bool (*valid)(const char *), const char *what, const char **out)
{
	const char *s;
	int r = member_str(w, rule, key, &s);
	struct mark m;

	if (r < 0)
		return r;
	*out = NULL;
	if (!s) {
		if (!required)
			return 0;
		return fail(w, 0, "missing '%s' (a %s, or ALL)", key, what);
	}
	if (is_all(s))
		return 0;
	if (!valid(s)) {
		m = push_key(w, key);
		r = fail(w, 0,
			 "'%s' is not a valid %s (lowercase letters, digits and '-'%s) nor ALL", s,
			 what, valid == ds_dns_subdomain_valid ? ", '.'" : "");
		pop(w, m);
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

static int load_rule(struct walk *w, ds_target_config *cfg, const json_t *rule, const char *list,
		     size_t index, ds_dra_rule *out, size_t *n_ext_used)
{
	const char *type, *claim, *tmpl;
	json_t *ext;
	ds_yaml_loc loc;
	int r;

	if (!json_is_object(rule))
		return fail(w, 0,
			    "expected a mapping with objectType, objectInstance, container "
			    "and resourceClaim or resourceClaimTemplate, found %s",
			    type_name(rule));
	memset(out, 0, sizeof(*out));
	out->list = list;
	out->index = index;
	if (w->locs && ds_yaml_locs_find(w->locs, 0, w->ptr, &loc) == 0) {
		out->line = loc.line;
		out->col = loc.col;
	}
	if ((r = check_keys(w, rule, rule_keys)) < 0)
		return r;
	if ((r = member_str(w, rule, "objectType", &type)) < 0)
		return r;
	if (!type)
		return fail(w, 0,
			    "missing 'objectType' (one of Pod, Deployment, ReplicaSet, "
			    "StatefulSet, DaemonSet, Job, CronJob, All)");
	if (is_all(type)) {
		out->object_type = -1;
	} else {
		out->object_type = ds_workload_from_kind(type);
		if (out->object_type < 0) {
			struct mark m = push_key(w, "objectType");
			r = fail(w, 0,
				 "unknown objectType '%s' (expected one of Pod, Deployment, "
				 "ReplicaSet, StatefulSet, DaemonSet, Job, CronJob, All)",
				 type);
			pop(w, m);
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
	if ((r = member_str(w, rule, "resourceClaim", &claim)) < 0 ||
	    (r = member_str(w, rule, "resourceClaimTemplate", &tmpl)) < 0)
		return r;
	if (claim && tmpl)
		return fail(w, 0,
			    "both resourceClaim and resourceClaimTemplate are set; a rule has "
			    "exactly one target");
	if (!claim && !tmpl)
		return fail(w, 0, "no target: set resourceClaim or resourceClaimTemplate");
	out->target_kind = claim ? DS_TARGET_CLAIM : DS_TARGET_TEMPLATE;
	out->target = claim ? claim : tmpl;
	if (!ds_dns_subdomain_valid(out->target)) {
		struct mark m = push_key(w, claim ? "resourceClaim" : "resourceClaimTemplate");
		r = fail(w, 0,
			 "'%s' is not a valid object name (lowercase letters, digits, '-' "
			 "and '.', at most 253)",
			 out->target);
		pop(w, m);
		return r;
	}
	if ((r = member_bool(w, rule, "attach", false, &out->attach)) < 0)
		return r;
	if ((r = member(w, rule, "extendedResources", JSON_ARRAY, &ext)) < 0)
		return r;
	if (ext && json_array_size(ext) > 0) {
		struct mark m = push_key(w, "extendedResources");
		size_t i;
		json_t *v;

		if (!out->attach) {
			r = fail(w, 1,
				 "extendedResources needs attach: true (only attached "
				 "containers have their extended resources replaced)");
			pop(w, m);
			return r;
		}
		out->extended_resources = cfg->ext + *n_ext_used;
		json_array_foreach (ext, i, v) {
			struct mark mi = push_index(w, i);
			if (!json_is_string(v) || !resource_name_valid(json_string_value(v))) {
				r = fail(w, 0, "expected a resource name such as nvidia.com/gpu");
				pop(w, mi);
				pop(w, m);
				return r;
			}
			pop(w, mi);
			cfg->ext[(*n_ext_used)++] = json_string_value(v);
		}
		out->n_extended_resources = json_array_size(ext);
		cfg->ext[(*n_ext_used)++] = NULL;
		pop(w, m);
	}
	return 0;
}

static int same_opt(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* Identical selectors and same target kind with different targets can never be resolved. */
static int check_conflicts(struct walk *w, const ds_target_config *cfg)
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

static int load_dra(struct walk *w, ds_target_config *cfg, const json_t *dra)
{
	static const char *const keys[] = {
	    "resourceClaimMappings", "resourceClaimTemplateMappings", "deviceClassMappings",
	    "requireTargetObjects",  "replicateDeviceClasses",	      NULL,
	};
	static const char *const lists[] = {"resourceClaimMappings",
					    "resourceClaimTemplateMappings"};
	json_t *arr[2], *dcm;
	size_t n = 0, n_ext = 0, i;
	struct mark m;
	json_t *v;
	int r;

	if ((r = check_keys(w, dra, keys)) < 0)
		return r;
	for (int l = 0; l < 2; l++) {
		if ((r = member(w, dra, lists[l], JSON_ARRAY, &arr[l])) < 0)
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
		m = push_key(w, lists[l]);
		json_array_foreach (arr[l], i, v) {
			struct mark mi = push_index(w, i);
			r = load_rule(w, cfg, v, lists[l], i, &cfg->rules[cfg->n_rules], &n_ext);
			if (r < 0)
				return r;
			cfg->n_rules++;
			pop(w, mi);
		}
		pop(w, m);
	}

	if ((r = member(w, dra, "deviceClassMappings", JSON_ARRAY, &dcm)) < 0)
		return r;
	if (dcm) {
		static const char *const dkeys[] = {"from", "to", NULL};

		cfg->dcm = calloc(json_array_size(dcm) + 1, sizeof(*cfg->dcm));
		if (!cfg->dcm)
			return -ENOMEM;
		m = push_key(w, "deviceClassMappings");
		json_array_foreach (dcm, i, v) {
			struct mark mi = push_index(w, i);
			const char *from, *to;

			if (!json_is_object(v))
				return fail(w, 0, "expected a mapping {from, to}, found %s",
					    type_name(v));
			if ((r = check_keys(w, v, dkeys)) < 0 ||
			    (r = member_str(w, v, "from", &from)) < 0 ||
			    (r = member_str(w, v, "to", &to)) < 0)
				return r;
			if (!from || !to)
				return fail(w, 0, "missing '%s' (a DeviceClass name)",
					    from ? "to" : "from");
			if (!ds_dns_subdomain_valid(from) || !ds_dns_subdomain_valid(to)) {
				struct mark mk =
				    push_key(w, ds_dns_subdomain_valid(from) ? "to" : "from");
				r = fail(w, 0, "'%s' is not a valid DeviceClass name",
					 ds_dns_subdomain_valid(from) ? to : from);
				pop(w, mk);
				return r;
			}
			for (size_t k = 0; k < cfg->n_dcm; k++) {
				if (strcmp(cfg->dcm[k].from, from) == 0 &&
				    strcmp(cfg->dcm[k].to, to) != 0)
					return fail(w, 0,
						    "DeviceClass '%s' is already mapped to '%s' "
						    "by deviceClassMappings[%zu]",
						    from, cfg->dcm[k].to, k);
			}
			cfg->dcm[cfg->n_dcm].from = from;
			cfg->dcm[cfg->n_dcm].to = to;
			cfg->n_dcm++;
			pop(w, mi);
		}
		pop(w, m);
	}
	if ((r = member_bool(w, dra, "requireTargetObjects", true,
			     &cfg->dra.require_target_objects)) < 0 ||
	    (r = member_bool(w, dra, "replicateDeviceClasses", false,
			     &cfg->dra.replicate_device_classes)) < 0)
		return r;
	return check_conflicts(w, cfg);
}

static int load_namespaces(struct walk *w, ds_target_config *cfg, const json_t *map)
{
	const char *key;
	json_t *v;

	cfg->nsm = calloc(json_object_size(map) + 1, sizeof(*cfg->nsm));
	if (!cfg->nsm)
		return -ENOMEM;
	json_object_foreach ((json_t *)(uintptr_t)map, key, v) {
		struct mark m = push_key(w, key);
		int r;

		if (!ds_dns_label_valid(key)) {
			r = fail(w, 1, "'%s' is not a valid namespace name", key);
			pop(w, m);
			return r;
		}
		if (!json_is_string(v) || !ds_dns_label_valid(json_string_value(v))) {
			r = fail(w, 0, "expected a target namespace name (a DNS label)");
			pop(w, m);
			return r;
		}
		cfg->nsm[cfg->n_nsm].from = key;
		cfg->nsm[cfg->n_nsm].to = json_string_value(v);
		cfg->n_nsm++;
		pop(w, m);
	}
	return 0;
}

static int load_section_str(struct walk *w, const json_t *obj, const char *section,
			    const char *const *keys, const char **outs[])
{
	json_t *sec;
	struct mark m;
	int r;

	if ((r = member(w, obj, section, JSON_OBJECT, &sec)) < 0 || !sec)
		return r;
	m = push_key(w, section);
	if ((r = check_keys(w, sec, keys)) < 0)
		return r;
	for (size_t i = 0; keys[i]; i++)
		if ((r = member_str(w, sec, keys[i], outs[i])) < 0)
			return r;
	pop(w, m);
	return 0;
}

static int load_root(struct walk *w, ds_target_config *cfg, const json_t *root)
{
	static const char *const keys[] = {
	    "apiVersion",	 "kind", "listen",  "keys", "kubeconfig", "stateDir", "mode",
	    "namespaceMappings", "dra",	 "metrics", NULL,
	};
	static const char *const key_keys[] = {"secretKeyFile", "authorizedSources", NULL};
	static const char *const metric_keys[] = {"listen", NULL};
	const char **key_outs[] = {&cfg->secret_key_file, &cfg->authorized_sources};
	const char **metric_outs[] = {&cfg->metrics_listen};
	const char *api, *kind, *mode;
	json_t *dra, *nsm;
	int r;

	if (!json_is_object(root))
		return fail(w, 0, "expected a TargetConfig mapping, found %s", type_name(root));
	if ((r = check_keys(w, root, keys)) < 0)
		return r;
	if ((r = member_str(w, root, "apiVersion", &api)) < 0 ||
	    (r = member_str(w, root, "kind", &kind)) < 0)
		return r;
	if (api && strcmp(api, CONFIG_API_VERSION) != 0) {
		struct mark m = push_key(w, "apiVersion");
		r = fail(w, 0, "unsupported apiVersion '%s' (expected %s)", api,
			 CONFIG_API_VERSION);
		pop(w, m);
		return r;
	}
	if (kind && strcmp(kind, "TargetConfig") != 0) {
		struct mark m = push_key(w, "kind");
		r = fail(w, 0, "this is a '%s'; drasync-target reads kind TargetConfig", kind);
		pop(w, m);
		return r;
	}
	if ((r = member_str(w, root, "mode", &mode)) < 0)
		return r;
	cfg->mode = DS_MODE_STANDBY;
	if (mode) {
		if (strcmp(mode, "migrate") == 0) {
			cfg->mode = DS_MODE_MIGRATE;
		} else if (strcmp(mode, "standby") != 0) {
			struct mark m = push_key(w, "mode");
			r = fail(w, 0, "unknown mode '%s' (expected migrate or standby)", mode);
			pop(w, m);
			return r;
		}
	}
	if ((r = member_str(w, root, "listen", &cfg->listen)) < 0 ||
	    (r = member_str(w, root, "kubeconfig", &cfg->kubeconfig)) < 0 ||
	    (r = member_str(w, root, "stateDir", &cfg->state_dir)) < 0 ||
	    (r = load_section_str(w, root, "keys", key_keys, key_outs)) < 0 ||
	    (r = load_section_str(w, root, "metrics", metric_keys, metric_outs)) < 0)
		return r;
	if ((r = member(w, root, "namespaceMappings", JSON_OBJECT, &nsm)) < 0)
		return r;
	if (nsm) {
		struct mark m = push_key(w, "namespaceMappings");
		if ((r = load_namespaces(w, cfg, nsm)) < 0)
			return r;
		pop(w, m);
	}
	cfg->dra.require_target_objects = true;
	if ((r = member(w, root, "dra", JSON_OBJECT, &dra)) < 0)
		return r;
	if (dra) {
		struct mark m = push_key(w, "dra");
		if ((r = load_dra(w, cfg, dra)) < 0)
			return r;
		pop(w, m);
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

static int from_docs(ds_target_config **out, json_t *docs, ds_yaml_locs *locs, const char *filename,
		     ds_err *err)
{
	ds_target_config *cfg = calloc(1, sizeof(*cfg));
	struct walk w = {.locs = locs, .file = filename, .err = err};
	int r;

	if (!cfg) {
		json_decref(docs);
		return -ENOMEM;
	}
	cfg->docs = docs;
	if (json_array_size(docs) != 1) {
		ds_err_setloc(err, filename, 0, 0,
			      json_array_size(docs) == 0
				  ? "the file is empty; expected a TargetConfig document"
				  : "expected one TargetConfig document, found %zu",
			      json_array_size(docs));
		r = -EINVAL;
		goto out;
	}
	r = load_root(&w, cfg, json_array_get(docs, 0));
	if (r < 0)
		goto out;
	finish(cfg);
	*out = cfg;
	cfg = NULL;
out:
	ds_target_config_free(cfg);
	return r;
}

int ds_target_config_parse(ds_target_config **out, const char *buf, size_t len,
			   const char *filename, ds_err *err)
{
	json_t *docs = NULL;
	ds_yaml_locs *locs = NULL;
	int r;

	r = ds_yaml_parse(buf, len, filename, DS_YAML_LOCATIONS, &docs, &locs, err);
	if (r < 0)
		return r == -EBADMSG ? -EINVAL : r;
	r = from_docs(out, docs, locs, filename, err);
	ds_yaml_locs_free(locs);
	return r;
}

int ds_target_config_load(ds_target_config **out, const char *path, ds_err *err)
{
	json_t *docs = NULL;
	ds_yaml_locs *locs = NULL;
	int r;

	r = ds_yaml_parse_file(path, DS_YAML_LOCATIONS, &docs, &locs, err);
	if (r < 0)
		return r == -EBADMSG ? -EINVAL : r;
	r = from_docs(out, docs, locs, path, err);
	ds_yaml_locs_free(locs);
	return r;
}

int ds_target_config_new_empty(ds_target_config **out)
{
	ds_target_config *cfg = calloc(1, sizeof(*cfg));

	if (!cfg)
		return -ENOMEM;
	cfg->mode = DS_MODE_MIGRATE;
	cfg->dra.require_target_objects = true;
	finish(cfg);
	*out = cfg;
	return 0;
}

void ds_target_config_free(ds_target_config *cfg)
{
	if (!cfg)
		return;
	free(cfg->rules);
	free(cfg->ext);
	free(cfg->dcm);
	free(cfg->nsm);
	json_decref(cfg->docs);
	free(cfg);
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
const char *ds_target_config_state_dir(const ds_target_config *cfg)
{
	return cfg->state_dir;
}
const char *ds_target_config_metrics_listen(const ds_target_config *cfg)
{
	return cfg->metrics_listen;
}

const char *ds_mode_name(enum ds_mode mode)
{
	return mode == DS_MODE_MIGRATE ? "migrate" : mode == DS_MODE_STANDBY ? "standby" : "?";
}
