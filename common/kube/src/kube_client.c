#include "drasync/kube_client.h"

#include "drasync/buf.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

struct ds_kube {
	ds_kubeconfig *kc;
	ds_kube_transport *t;

	pthread_mutex_t disc_lock; /* guards the two caches */
	json_t *groups;	   /* {group: {"preferred": v, "versions": [v...]}}, NULL: not loaded */
	json_t *resources; /* {"group/version": APIResourceList.resources} */
	unsigned long generation; /* counts group list loads */
	int refresh_interval_ms;  /* at most one reload per interval by a miss or refresh */
	int64_t refreshed_at_ms;  /* monotonic time of that last reload; 0: none */

	pthread_mutex_t jitter_lock; /* guards jitter */
	uint64_t jitter;	     /* xorshift64* state, never 0 */
};

/* ---- request paths ---------------------------------------------------------- */

/* Longest request path built here (the API server's own limit on a request line is larger). */
#define KUBE_MAX_PATH (64u * 1024u)

/* Percent-encode everything but RFC 3986 unreserved characters. */
static void sb_esc(ds_str *b, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";

	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '.' || c == '_' || c == '~') {
			ds_str_add(b, (const char *)&c, 1);
		} else {
			char e[3] = {'%', hex[c >> 4], hex[c & 15]};
			ds_str_add(b, e, 3);
		}
	}
}

/* Append "?k=v" or "&k=v" (v escaped) when v is set. */
static void sb_q(ds_str *b, const char *k, const char *v)
{
	if (!v || !v[0])
		return;
	ds_str_adds(b, strchr(ds_str_ptr(b) ? ds_str_ptr(b) : "", '?') ? "&" : "?");
	ds_str_adds(b, k);
	ds_str_adds(b, "=");
	sb_esc(b, v);
}

/* Hand the path over. @return 0, -E2BIG (longer than the bound), -ENOMEM */
static int sb_done(ds_str *b, char **out)
{
	char *s = ds_str_take(b, NULL);

	if (!s)
		return ds_str_error(b);
	*out = s;
	return 0;
}

/* ---- lifecycle ---------------------------------------------------------------- */

int ds_kube_new(ds_kube **out, ds_kubeconfig **kc, const struct ds_kube_transport_opts *opts,
		ds_err *err)
{
	ds_kube *k = calloc(1, sizeof(*k));
	int rc;

	if (!k)
		return ds_err_fallback(err, -ENOMEM);
	pthread_mutex_init(&k->disc_lock, NULL);
	pthread_mutex_init(&k->jitter_lock, NULL);
	if (getrandom(&k->jitter, sizeof(k->jitter), GRND_NONBLOCK) != (ssize_t)sizeof(k->jitter))
		k->jitter = (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)k;
	if (!k->jitter)
		k->jitter = 0x9e3779b97f4a7c15u;
	rc = ds_kube_transport_new(&k->t, *kc, opts, err);
	if (rc < 0) {
		pthread_mutex_destroy(&k->jitter_lock);
		pthread_mutex_destroy(&k->disc_lock);
		free(k);
		return ds_err_fallback(err, rc);
	}
	k->kc = *kc;
	*kc = NULL;
	*out = k;
	return 0;
}

void ds_kube_free(ds_kube *k)
{
	if (!k)
		return;
	ds_kube_transport_free(k->t);
	ds_kubeconfig_free(k->kc);
	json_decref(k->groups);
	json_decref(k->resources);
	pthread_mutex_destroy(&k->jitter_lock);
	pthread_mutex_destroy(&k->disc_lock);
	free(k);
}

ds_kube_transport *ds_kube_get_transport(ds_kube *k)
{
	return k->t;
}

ds_kubeconfig *ds_kube_get_config(ds_kube *k)
{
	return k->kc;
}

/* ---- requests ----------------------------------------------------------------- */

static int parse_body(const struct ds_kube_response *r, const char *what, json_t **out,
		      ds_kube_error *ke)
{
	json_error_t je;
	json_t *v = json_loadb(r->body, r->len, 0, &je);

	if (!v) {
		ds_kube_error_set(ke, r->code, "%s: the server's answer is not JSON: %s", what,
				  je.text);
		return -EBADMSG;
	}
	*out = v;
	return 0;
}

/* One request whose 2xx answer is a JSON value (out may be NULL). */
static int call_json(ds_kube *k, const char *method, const char *path, const char *ctype,
		     const char *body, json_t **out, ds_kube_error *ke)
{
	struct ds_kube_request req = {method, path, ctype, body, body ? strlen(body) : 0};
	struct ds_kube_response resp = {0};
	json_t *v = NULL;
	int rc;

	rc = ds_kube_transport_request(k->t, &req, &resp, ke);
	if (rc < 0)
		return rc;
	if (out) {
		rc = parse_body(&resp, path, &v, ke);
		if (rc == 0)
			*out = v;
	}
	ds_kube_response_dispose(&resp);
	return rc;
}

/* ---- discovery ------------------------------------------------------------------ */

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* With disc_lock held: whether a reload asked for by a miss or a refresh may happen now. */
static bool reload_due(ds_kube *k)
{
	int64_t now = mono_ms();

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
	rc = call_json(k, "GET", "/api", NULL, NULL, &api, ke);
	if (rc == 0)
		rc = call_json(k, "GET", "/apis", NULL, NULL, &apis, ke);
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
	char key[256], path[300];
	json_t *doc = NULL, *res;
	int rc;

	snprintf(key, sizeof(key), "%s/%s", group, version);
	res = json_object_get(k->resources, key);
	if (res) {
		*list = res;
		return 0;
	}
	if (group[0])
		snprintf(path, sizeof(path), "/apis/%s/%s", group, version);
	else
		snprintf(path, sizeof(path), "/api/%s", version);
	rc = call_json(k, "GET", path, NULL, NULL, &doc, ke);
	if (rc < 0)
		return rc;
	res = json_object_get(doc, "resources");
	if (!json_is_array(res)) {
		json_decref(doc);
		ds_kube_error_set(ke, 0, "%s: no resources in the answer", path);
		return -EBADMSG;
	}
	json_object_set(k->resources, key, res);
	json_decref(doc);
	*list = res;
	return 0;
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

/* ---- paths ----------------------------------------------------------------------- */

static void sb_path(ds_str *b, const struct ds_kube_resource *res, const char *ns, const char *name,
		    const char *sub)
{
	if (res->group[0]) {
		ds_str_adds(b, "/apis/");
		ds_str_adds(b, res->group);
		ds_str_adds(b, "/");
	} else {
		ds_str_adds(b, "/api/");
	}
	ds_str_adds(b, res->version);
	if (res->namespaced && ns && ns[0]) {
		ds_str_adds(b, "/namespaces/");
		sb_esc(b, ns);
	}
	ds_str_adds(b, "/");
	ds_str_adds(b, res->resource);
	if (name && name[0]) {
		ds_str_adds(b, "/");
		sb_esc(b, name);
		if (sub && sub[0]) {
			ds_str_adds(b, "/");
			ds_str_adds(b, sub);
		}
	}
}

int ds_kube_path(const struct ds_kube_resource *res, const char *ns, const char *name,
		 const char *subresource, char **out)
{
	ds_str b;

	ds_str_init(&b, KUBE_MAX_PATH);
	sb_path(&b, res, ns, name, subresource);
	return sb_done(&b, out);
}

/* A request path that could not be built: say why in ke. @return rc */
static int path_failed(ds_kube_error *ke, const char *what, int rc)
{
	ds_kube_error_set(ke, 0, "%s: %s", what,
			  rc == -E2BIG ? "request path longer than 64 KiB" : "out of memory");
	return rc;
}

static const char *obj_name(const json_t *obj)
{
	return json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
}

static const char *obj_ns(const struct ds_kube_resource *res, const char *ns, const json_t *obj)
{
	if (!res->namespaced)
		return NULL;
	if (ns && ns[0])
		return ns;
	return json_string_value(json_object_get(json_object_get(obj, "metadata"), "namespace"));
}

/*
 * A name the request path can carry: the API server splits its decoded path
 * at '/', and refuses '%', "." and ".." in a name (a request for one would be
 * answered 404, as if the kind were not served).
 */
static int need_name(const char *name, const char *what, ds_kube_error *ke)
{
	if (!name || !name[0]) {
		ds_kube_error_set(ke, 0, "%s: the object has no metadata.name", what);
		return -EINVAL;
	}
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || strpbrk(name, "/%")) {
		ds_kube_error_set(ke, 0,
				  "%s: metadata.name '%.200s' cannot be named in an API path "
				  "(it is '.' or '..', or holds '/' or '%%'): no API server "
				  "accepts it",
				  what, name);
		return -EINVAL;
	}
	return 0;
}

/* ---- objects ---------------------------------------------------------------------- */

int ds_kube_get(ds_kube *k, const struct ds_kube_resource *res, const char *ns, const char *name,
		const char *subresource, json_t **out, ds_kube_error *ke)
{
	char *path = NULL;
	int rc;

	rc = need_name(name, "get", ke);
	if (rc < 0)
		return rc;
	rc = ds_kube_path(res, ns, name, subresource, &path);
	if (rc < 0)
		return path_failed(ke, "get", rc);
	rc = call_json(k, "GET", path, NULL, NULL, out, ke);
	free(path);
	return rc;
}

static int list_path(const struct ds_kube_resource *res, const char *ns,
		     const struct ds_kube_list_opts *o, char **out)
{
	ds_str b;
	char lim[32];

	ds_str_init(&b, KUBE_MAX_PATH);
	sb_path(&b, res, ns, NULL, NULL);
	if (o) {
		sb_q(&b, "labelSelector", o->label_selector);
		sb_q(&b, "fieldSelector", o->field_selector);
		sb_q(&b, "resourceVersion", o->resource_version);
		sb_q(&b, "continue", o->continue_token);
		if (o->limit > 0) {
			snprintf(lim, sizeof(lim), "%ld", o->limit);
			sb_q(&b, "limit", lim);
		}
	}
	return sb_done(&b, out);
}

int ds_kube_list_page(ds_kube *k, const struct ds_kube_resource *res, const char *ns,
		      const struct ds_kube_list_opts *opts, json_t **out, ds_kube_error *ke)
{
	char *path = NULL;
	int rc;

	rc = list_path(res, ns, opts, &path);
	if (rc < 0)
		return path_failed(ke, "list", rc);
	rc = call_json(k, "GET", path, NULL, NULL, out, ke);
	free(path);
	return rc;
}

int ds_kube_list(ds_kube *k, const struct ds_kube_resource *res, const char *ns,
		 const struct ds_kube_list_opts *opts, json_t **out, unsigned *pages,
		 ds_kube_error *ke)
{
	struct ds_kube_list_opts o = {0};
	json_t *all = NULL, *page = NULL;
	char *cont = NULL;
	unsigned n = 0;
	bool restarted = false;
	int rc;

	if (opts)
		o = *opts;
	for (;;) {
		const char *c;

		o.continue_token = cont;
		rc = ds_kube_list_page(k, res, ns, &o, &page, ke);
		n++;
		if (rc == -EIDRM && cont && !restarted) {
			/* the continue token expired: one consistent list without paging */
			restarted = true;
			json_decref(all);
			all = NULL;
			free(cont);
			cont = NULL;
			o.limit = 0;
			continue;
		}
		if (rc < 0)
			goto out;
		if (!json_is_array(json_object_get(page, "items"))) {
			rc = -EBADMSG;
			ds_kube_error_set(ke, 0, "list %s: the answer has no items", res->resource);
			goto out;
		}
		if (!all) {
			all = page;
			page = NULL;
		} else {
			if (json_array_extend(json_object_get(all, "items"),
					      json_object_get(page, "items")) < 0 ||
			    json_object_set(all, "metadata", json_object_get(page, "metadata")) <
				0) {
				rc = -ENOMEM;
				goto out;
			}
			json_decref(page);
			page = NULL;
		}
		free(cont);
		cont = NULL;
		c = json_string_value(
		    json_object_get(json_object_get(all, "metadata"), "continue"));
		if (!c || !c[0])
			break;
		if (!(cont = strdup(c))) {
			rc = -ENOMEM;
			goto out;
		}
	}
	json_object_del(json_object_get(all, "metadata"), "continue");
	json_object_del(json_object_get(all, "metadata"), "remainingItemCount");
	*out = all;
	all = NULL;
	if (pages)
		*pages = n;
	rc = 0;
out:
	json_decref(all);
	json_decref(page);
	free(cont);
	return rc;
}

/* Request line and body of one write, shared by the single and batch paths. */
struct write_req {
	const char *method;
	const char *ctype;
	char *path;
	char *body;
};

static void write_req_dispose(struct write_req *w)
{
	free(w->path);
	free(w->body);
	memset(w, 0, sizeof(*w));
}

static int build_write(enum ds_kube_op_kind kind, const struct ds_kube_resource *res,
		       const char *ns, const char *name, const json_t *obj,
		       const char *field_manager, bool force, const char *sub,
		       const struct ds_kube_delete_opts *dopts, struct write_req *w,
		       ds_kube_error *ke)
{
	ds_str b;
	json_t *del = NULL;
	int rc;

	ds_str_init(&b, KUBE_MAX_PATH);
	memset(w, 0, sizeof(*w));
	ns = obj_ns(res, ns, obj);
	if (!name && obj)
		name = obj_name(obj);
	switch (kind) {
	case DS_KUBE_OP_CREATE:
		w->method = "POST";
		sb_path(&b, res, ns, NULL, NULL);
		break;
	case DS_KUBE_OP_APPLY:
		w->method = "PATCH";
		w->ctype = "application/apply-patch+yaml";
		if ((rc = need_name(name, "apply", ke)) < 0)
			return rc;
		sb_path(&b, res, ns, name, sub);
		sb_q(&b, "fieldManager", field_manager ? field_manager : "drasync");
		if (force)
			sb_q(&b, "force", "true");
		break;
	case DS_KUBE_OP_MERGE_PATCH:
		w->method = "PATCH";
		w->ctype = "application/merge-patch+json";
		if ((rc = need_name(name, "patch", ke)) < 0)
			return rc;
		sb_path(&b, res, ns, name, sub);
		break;
	case DS_KUBE_OP_UPDATE:
		w->method = "PUT";
		if ((rc = need_name(name, "update", ke)) < 0)
			return rc;
		sb_path(&b, res, ns, name, sub);
		break;
	case DS_KUBE_OP_DELETE:
		w->method = "DELETE";
		if ((rc = need_name(name, "delete", ke)) < 0)
			return rc;
		sb_path(&b, res, ns, name, NULL);
		break;
	case DS_KUBE_OP_GET:
		w->method = "GET";
		if ((rc = need_name(name, "get", ke)) < 0)
			return rc;
		sb_path(&b, res, ns, name, sub);
		break;
	default:
		ds_str_dispose(&b);
		ds_kube_error_set(ke, 0, "unknown operation %d", (int)kind);
		return -EINVAL;
	}
	rc = sb_done(&b, &w->path);
	if (rc < 0)
		return path_failed(ke, w->method, rc);
	if (kind == DS_KUBE_OP_DELETE && dopts) {
		json_t *pre = json_object();
		del = json_pack("{s:s,s:s}", "kind", "DeleteOptions", "apiVersion", "v1");
		if (!del || !pre) {
			json_decref(pre);
			rc = -ENOMEM;
			goto out;
		}
		if (dopts->propagation)
			json_object_set_new(del, "propagationPolicy",
					    json_string(dopts->propagation));
		if (dopts->grace_seconds >= 0)
			json_object_set_new(del, "gracePeriodSeconds",
					    json_integer(dopts->grace_seconds));
		if (dopts->uid)
			json_object_set_new(pre, "uid", json_string(dopts->uid));
		if (dopts->resource_version)
			json_object_set_new(pre, "resourceVersion",
					    json_string(dopts->resource_version));
		if (json_object_size(pre))
			json_object_set_new(del, "preconditions", pre);
		else
			json_decref(pre);
		obj = del;
	}
	if (obj && kind != DS_KUBE_OP_GET) {
		w->body = json_dumps(obj, JSON_COMPACT);
		if (!w->body) {
			rc = -ENOMEM;
			goto out;
		}
	}
	rc = 0;
out:
	json_decref(del);
	if (rc < 0)
		write_req_dispose(w);
	return rc;
}

static int do_write(ds_kube *k, enum ds_kube_op_kind kind, const struct ds_kube_resource *res,
		    const char *ns, const char *name, const json_t *obj, const char *fm, bool force,
		    const char *sub, const struct ds_kube_delete_opts *dopts, json_t **out,
		    ds_kube_error *ke)
{
	struct write_req w;
	int rc;

	rc = build_write(kind, res, ns, name, obj, fm, force, sub, dopts, &w, ke);
	if (rc < 0)
		return rc;
	rc = call_json(k, w.method, w.path, w.ctype, w.body, out, ke);
	write_req_dispose(&w);
	return rc;
}

int ds_kube_create(ds_kube *k, const struct ds_kube_resource *res, const char *ns,
		   const json_t *obj, json_t **out, ds_kube_error *ke)
{
	return do_write(k, DS_KUBE_OP_CREATE, res, ns, NULL, obj, NULL, false, NULL, NULL, out, ke);
}

int ds_kube_apply(ds_kube *k, const struct ds_kube_resource *res, const char *ns, const json_t *obj,
		  const char *field_manager, bool force, const char *subresource, json_t **out,
		  ds_kube_error *ke)
{
	return do_write(k, DS_KUBE_OP_APPLY, res, ns, NULL, obj, field_manager, force, subresource,
			NULL, out, ke);
}

int ds_kube_merge_patch(ds_kube *k, const struct ds_kube_resource *res, const char *ns,
			const char *name, const json_t *patch, const char *subresource,
			json_t **out, ds_kube_error *ke)
{
	return do_write(k, DS_KUBE_OP_MERGE_PATCH, res, ns, name, patch, NULL, false, subresource,
			NULL, out, ke);
}

int ds_kube_update(ds_kube *k, const struct ds_kube_resource *res, const char *ns,
		   const json_t *obj, const char *subresource, json_t **out, ds_kube_error *ke)
{
	return do_write(k, DS_KUBE_OP_UPDATE, res, ns, NULL, obj, NULL, false, subresource, NULL,
			out, ke);
}

int ds_kube_delete(ds_kube *k, const struct ds_kube_resource *res, const char *ns, const char *name,
		   const struct ds_kube_delete_opts *opts, ds_kube_error *ke)
{
	return do_write(k, DS_KUBE_OP_DELETE, res, ns, name, NULL, NULL, false, NULL, opts, NULL,
			ke);
}

/* ---- batch ------------------------------------------------------------------------- */

/* One op of a stream on its way: the call is first, so the transport's call leads back here. */
struct pending {
	struct ds_kube_call call;
	struct write_req w;
	struct ds_kube_op *op;
};

struct op_stream {
	ds_kube *k;
	const struct ds_kube_op_stream *s;
	int failed;
};

static void op_done(struct op_stream *os, struct ds_kube_op *op)
{
	if (op->rc < 0)
		os->failed++;
	if (os->s->done)
		os->s->done(os->s->ud, op);
}

static int op_next(void *ud, struct ds_kube_call **out)
{
	struct op_stream *os = ud;

	for (;;) {
		struct ds_kube_delete_opts dopts = {NULL, NULL, NULL, -1};
		struct ds_kube_op *op = NULL;
		struct pending *p;
		int r = os->s->next(os->s->ud, &op);

		if (r <= 0 || !op)
			return r > 0 ? -1 : r;
		op->result = NULL;
		ds_kube_error_clear(&op->error);
		p = calloc(1, sizeof(*p));
		if (!p) {
			op->rc = -ENOMEM;
			op_done(os, op);
			continue;
		}
		p->op = op;
		op->rc =
		    build_write(op->kind, op->res, op->ns, op->name,
				op->kind == DS_KUBE_OP_DELETE ? NULL : op->obj,
				os->s->field_manager, os->s->force || op->force, NULL,
				op->kind == DS_KUBE_OP_DELETE ? &dopts : NULL, &p->w, &op->error);
		if (op->rc < 0) {
			free(p);
			op_done(os, op);
			continue;
		}
		p->call.req.method = p->w.method;
		p->call.req.path = p->w.path;
		p->call.req.content_type = p->w.ctype;
		p->call.req.body = p->w.body;
		p->call.req.body_len = p->w.body ? strlen(p->w.body) : 0;
		*out = &p->call;
		return 1;
	}
}

static void op_call_done(void *ud, struct ds_kube_call *call)
{
	struct op_stream *os = ud;
	struct pending *p = (struct pending *)call; /* call is its first member */
	struct ds_kube_op *op = p->op;

	op->rc = call->rc;
	op->error = call->error;
	/* Parsing an answer nobody reads costs the client more than the request. */
	if (op->rc == 0 && call->resp.len > 0 && (!os->s->no_result || op->want_result))
		op->rc = parse_body(&call->resp, call->req.path, &op->result, &op->error);
	ds_kube_response_dispose(&call->resp);
	write_req_dispose(&p->w);
	free(p);
	op_done(os, op);
}

int ds_kube_stream(ds_kube *k, const struct ds_kube_op_stream *s)
{
	struct op_stream os = {k, s, 0};
	struct ds_kube_call_stream cs = {op_next, op_call_done, &os};
	int rc = ds_kube_transport_request_stream(k->t, &cs);

	return rc < 0 ? rc : os.failed;
}

struct op_array {
	struct ds_kube_op *ops;
	size_t n, next;
};

static int array_next(void *ud, struct ds_kube_op **out)
{
	struct op_array *a = ud;

	if (a->next >= a->n)
		return -1;
	*out = &a->ops[a->next++];
	return 1;
}

int ds_kube_batch(ds_kube *k, struct ds_kube_op *ops, size_t n, const char *field_manager,
		  bool force)
{
	struct op_array a = {ops, n, 0};
	struct ds_kube_op_stream s = {
	    .next = array_next, .ud = &a, .field_manager = field_manager, .force = force};

	return n ? ds_kube_stream(k, &s) : 0;
}

/* ---- watch ---------------------------------------------------------------------------- */

struct watch_state {
	ds_kube_watch_fn fn;
	void *user;
	char rv[128];	   /* last resourceVersion seen */
	bool gone;	   /* an ERROR event with 410 */
	bool stopped;	   /* the callback asked to stop */
	unsigned events;   /* events in this stream */
	ds_kube_error err; /* an ERROR event other than 410 */
	bool failed;
};

static void set_rv(struct watch_state *ws, const json_t *obj)
{
	const char *rv =
	    json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));

	if (rv && rv[0])
		snprintf(ws->rv, sizeof(ws->rv), "%s", rv);
}

static int on_line(void *user, const char *line, size_t len)
{
	struct watch_state *ws = user;
	json_t *ev = json_loadb(line, len, 0, NULL), *obj;
	const char *type;
	enum ds_kube_event_type t;
	int rc = 0;

	if (!json_is_object(ev))
		goto out; /* not an event: ignore the line, keep the stream */
	type = json_string_value(json_object_get(ev, "type"));
	obj = json_object_get(ev, "object");
	if (!type || !json_is_object(obj))
		goto out;
	if (strcmp(type, "ERROR") == 0) {
		char *s = json_dumps(obj, JSON_COMPACT);
		int code = (int)json_integer_value(json_object_get(obj, "code"));
		if (code == 410) {
			ws->gone = true;
		} else {
			ws->failed = true;
			ds_kube_error_from_response(&ws->err, code ? code : 500, s,
						    s ? strlen(s) : 0);
		}
		free(s);
		rc = 1;
		goto out;
	}
	if (strcmp(type, "ADDED") == 0)
		t = DS_KUBE_ADDED;
	else if (strcmp(type, "MODIFIED") == 0)
		t = DS_KUBE_MODIFIED;
	else if (strcmp(type, "DELETED") == 0)
		t = DS_KUBE_DELETED;
	else if (strcmp(type, "BOOKMARK") == 0)
		t = DS_KUBE_BOOKMARK;
	else
		goto out;
	set_rv(ws, obj);
	ws->events++;
	if (ws->fn(ws->user, t, obj) != 0) {
		ws->stopped = true;
		rc = 1;
	}
out:
	json_decref(ev);
	return rc;
}

static bool stop_set(const struct ds_kube_watch_opts *o)
{
	return o->stop && atomic_load(o->stop);
}

/* Sleep in small steps so `stop` is noticed. */
static void nap(const struct ds_kube_watch_opts *o, long ms)
{
	while (ms > 0 && !stop_set(o)) {
		long step = ms > 100 ? 100 : ms;
		struct timespec ts = {0, step * 1000000L};
		nanosleep(&ts, NULL);
		ms -= step;
	}
}

/*
 * Backoff jitter in [0,1): xorshift64* on the client's own state under its own
 * lock, so the threads sharing a client, and the application's rand(), do not
 * disturb each other.
 */
static double jitter01(ds_kube *k)
{
	uint64_t x;

	pthread_mutex_lock(&k->jitter_lock);
	x = k->jitter;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	k->jitter = x;
	pthread_mutex_unlock(&k->jitter_lock);
	return (double)((x * 0x2545f4914f6cdd1dULL) >> 11) / 9007199254740992.0; /* 2^53 */
}

/* What one step of a watch came to. */
enum watch_step {
	STEP_ON,     /* listed, or the stream ended normally: go on watching */
	STEP_RELIST, /* our resourceVersion is too old (410) */
	STEP_STOP,   /* the callback or `stop` ended it */
	STEP_FAILED, /* *rc: retry after a backoff unless retrying cannot help */
	STEP_FATAL,  /* *rc: an ERROR event no retry can fix */
};

/* The list a watch starts from, handed to the callback as SYNC. */
static enum watch_step watch_list(ds_kube *k, const struct ds_kube_resource *res, const char *ns,
				  const struct ds_kube_watch_opts *o, struct watch_state *ws,
				  int *rc, ds_kube_error *ke)
{
	struct ds_kube_list_opts lo = {o->label_selector, o->field_selector, NULL, NULL, 500};
	json_t *list = NULL;
	int r;

	r = ds_kube_list(k, res, ns, &lo, &list, NULL, ke);
	if (r < 0) {
		*rc = r;
		return STEP_FAILED;
	}
	set_rv(ws, list);
	r = ws->fn(ws->user, DS_KUBE_SYNC, list);
	json_decref(list);
	return r != 0 ? STEP_STOP : STEP_ON;
}

/* One watch request from ws->rv, until the server or the callback ends it. */
static enum watch_step watch_stream(ds_kube *k, const struct ds_kube_resource *res, const char *ns,
				    const struct ds_kube_watch_opts *o, struct watch_state *ws,
				    int *rc, ds_kube_error *ke)
{
	struct ds_kube_request req = {"GET", NULL, NULL, NULL, 0};
	ds_str b;
	char num[32];
	char *path = NULL;
	int r;

	ds_str_init(&b, KUBE_MAX_PATH);
	sb_path(&b, res, ns, NULL, NULL);
	sb_q(&b, "watch", "true");
	sb_q(&b, "resourceVersion", ws->rv);
	if (o->bookmarks)
		sb_q(&b, "allowWatchBookmarks", "true");
	sb_q(&b, "labelSelector", o->label_selector);
	sb_q(&b, "fieldSelector", o->field_selector);
	snprintf(num, sizeof(num), "%d", o->timeout_seconds);
	sb_q(&b, "timeoutSeconds", num);
	if ((r = sb_done(&b, &path)) < 0) {
		*rc = r;
		ds_kube_error_set(ke, 0, "watch %s: %s", res->resource,
				  r == -E2BIG ? "request path too long" : "out of memory");
		return STEP_FATAL;
	}
	req.path = path;
	ws->gone = ws->stopped = ws->failed = false;
	ws->events = 0;
	r = ds_kube_transport_stream(k->t, &req, on_line, ws, o->stop, ke);
	free(path);
	if (ws->stopped || (r == 1 && stop_set(o)))
		return STEP_STOP;
	if (ws->gone || r == -EIDRM)
		return STEP_RELIST;
	if (ws->failed) {
		if (ke)
			*ke = ws->err;
		*rc = ds_kube_error_errno(ws->err.code, ws->err.reason);
		return ds_kube_error_is_transient(ws->err.code) ? STEP_FAILED : STEP_FATAL;
	}
	if (r >= 0)
		return STEP_ON; /* the server ended the stream (timeoutSeconds, restart) */
	*rc = r;
	return STEP_FAILED;
}

/* Errors a retry cannot fix. */
static bool watch_fatal(int rc)
{
	return rc == -EPERM || rc == -ENOENT || rc == -EACCES || rc == -EINVAL ||
	       rc == -EKEYREJECTED || rc == -ENOMEM;
}

int ds_kube_watch(ds_kube *k, const struct ds_kube_resource *res, const char *ns,
		  const struct ds_kube_watch_opts *opts, ds_kube_watch_fn fn, void *user,
		  ds_kube_error *ke)
{
	struct ds_kube_watch_opts o = {0};
	struct ds_kube_transport_opts topts;
	struct watch_state ws;
	bool need_list, streamed = false;
	int failures = 0, rc = 0;

	ds_kube_transport_opts_init(&topts);
	if (opts)
		o = *opts;
	if (o.timeout_seconds <= 0)
		o.timeout_seconds = 300;
	if (o.max_failures <= 0)
		o.max_failures = 10;
	if (o.reconnects)
		*o.reconnects = 0;
	if (o.relists)
		*o.relists = 0;
	memset(&ws, 0, sizeof(ws));
	ws.fn = fn;
	ws.user = user;
	need_list = !o.resource_version || !o.resource_version[0];
	if (!need_list)
		snprintf(ws.rv, sizeof(ws.rv), "%s", o.resource_version);
	while (!stop_set(&o)) {
		enum watch_step step = STEP_ON;

		if (need_list)
			step = watch_list(k, res, ns, &o, &ws, &rc, ke);
		if (step == STEP_ON) {
			need_list = false;
			if (streamed && o.reconnects)
				(*o.reconnects)++;
			streamed = true;
			step = watch_stream(k, res, ns, &o, &ws, &rc, ke);
		}
		switch (step) {
		case STEP_ON:
			failures = 0;
			continue;
		case STEP_RELIST:
			if (o.fail_on_gone) {
				/* the caller relists itself (page by page) */
				ds_kube_error_set(ke, 410, "resourceVersion %s is too old", ws.rv);
				if (ke)
					snprintf(ke->reason, sizeof(ke->reason), "Expired");
				return -EIDRM;
			}
			need_list = true;
			if (o.relists)
				(*o.relists)++;
			failures = 0;
			continue;
		case STEP_STOP:
			return 0;
		case STEP_FATAL:
			return rc;
		case STEP_FAILED:
			break;
		}
		if (watch_fatal(rc) || ++failures >= o.max_failures)
			return rc;
		nap(&o, ds_kube_backoff_ms(&topts, failures - 1, ke ? ke->retry_after : -1,
					   jitter01(k)));
	}
	return 0;
}
