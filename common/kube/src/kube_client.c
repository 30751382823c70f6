#include "kube_client_internal.h"

#include "drasync/buf.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* ---- request paths ---------------------------------------------------------- */

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

/*
 * One path segment, escaped. "." and ".." are written %2E and %2E%2E as well:
 * with CURLOPT_PATH_AS_IS libcurl sends them as they are, and neither it nor
 * a proxy that normalises dot segments can turn a request for a name ".."
 * into a request for the collection or the namespace above it.
 */
void ds_kube_sb_seg(ds_str *b, const char *s)
{
	if (strcmp(s, ".") == 0)
		ds_str_adds(b, "%2E");
	else if (strcmp(s, "..") == 0)
		ds_str_adds(b, "%2E%2E");
	else
		sb_esc(b, s);
}

/* Append "?k=v" or "&k=v" (v escaped) when v is set. */
void ds_kube_sb_q(ds_str *b, const char *k, const char *v)
{
	if (!v || !v[0])
		return;
	ds_str_adds(b, strchr(ds_str_ptr(b) ? ds_str_ptr(b) : "", '?') ? "&" : "?");
	ds_str_adds(b, k);
	ds_str_adds(b, "=");
	sb_esc(b, v);
}

/* Hand the path over. @return 0, -E2BIG (longer than the bound), -ENOMEM */
int ds_kube_sb_done(ds_str *b, char **out)
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
int ds_kube_call_json(ds_kube *k, const char *method, const char *path, const char *ctype,
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

/* ---- paths ----------------------------------------------------------------------- */

void ds_kube_sb_group_version(ds_str *b, const char *group, const char *version)
{
	if (group[0]) {
		ds_str_adds(b, "/apis/");
		ds_kube_sb_seg(b, group);
		ds_str_adds(b, "/");
	} else {
		ds_str_adds(b, "/api/");
	}
	ds_kube_sb_seg(b, version);
}

void ds_kube_sb_path(ds_str *b, const struct ds_kube_resource *res, const char *ns,
		     const char *name, const char *sub)
{
	ds_kube_sb_group_version(b, res->group, res->version);
	if (res->namespaced && ns && ns[0]) {
		ds_str_adds(b, "/namespaces/");
		ds_kube_sb_seg(b, ns);
	}
	ds_str_adds(b, "/");
	ds_kube_sb_seg(b, res->resource);
	if (name && name[0]) {
		ds_str_adds(b, "/");
		ds_kube_sb_seg(b, name);
		if (sub && sub[0]) {
			ds_str_adds(b, "/");
			ds_kube_sb_seg(b, sub);
		}
	}
}

int ds_kube_path(const struct ds_kube_resource *res, const char *ns, const char *name,
		 const char *subresource, char **out)
{
	ds_str b;

	ds_str_init(&b, KUBE_MAX_PATH);
	ds_kube_sb_path(&b, res, ns, name, subresource);
	return ds_kube_sb_done(&b, out);
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

/*
 * A namespace the request path can carry, for the same reasons (a namespace
 * ".." is answered 500 "invalid key" and retried as a server error; folded
 * by a proxy it would be every namespace). NULL or "" is every namespace.
 */
int ds_kube_need_ns(const struct ds_kube_resource *res, const char *ns, const char *what,
		    ds_kube_error *ke)
{
	if (!res->namespaced || !ns || !ns[0])
		return 0;
	if (strcmp(ns, ".") == 0 || strcmp(ns, "..") == 0 || strpbrk(ns, "/%")) {
		ds_kube_error_set(ke, 0,
				  "%s: namespace '%.200s' cannot be named in an API path (it is "
				  "'.' or '..', or holds '/' or '%%'): no API server accepts it",
				  what, ns);
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
	if (rc == 0)
		rc = ds_kube_need_ns(res, ns, "get", ke);
	if (rc < 0)
		return rc;
	rc = ds_kube_path(res, ns, name, subresource, &path);
	if (rc < 0)
		return path_failed(ke, "get", rc);
	rc = ds_kube_call_json(k, "GET", path, NULL, NULL, out, ke);
	free(path);
	return rc;
}

static int list_path(const struct ds_kube_resource *res, const char *ns,
		     const struct ds_kube_list_opts *o, char **out)
{
	ds_str b;
	char lim[32];

	ds_str_init(&b, KUBE_MAX_PATH);
	ds_kube_sb_path(&b, res, ns, NULL, NULL);
	if (o) {
		ds_kube_sb_q(&b, "labelSelector", o->label_selector);
		ds_kube_sb_q(&b, "fieldSelector", o->field_selector);
		ds_kube_sb_q(&b, "resourceVersion", o->resource_version);
		ds_kube_sb_q(&b, "continue", o->continue_token);
		if (o->limit > 0) {
			snprintf(lim, sizeof(lim), "%ld", o->limit);
			ds_kube_sb_q(&b, "limit", lim);
		}
	}
	return ds_kube_sb_done(&b, out);
}

int ds_kube_list_page(ds_kube *k, const struct ds_kube_resource *res, const char *ns,
		      const struct ds_kube_list_opts *opts, json_t **out, ds_kube_error *ke)
{
	char *path = NULL;
	int rc;

	rc = ds_kube_need_ns(res, ns, "list", ke);
	if (rc < 0)
		return rc;
	rc = list_path(res, ns, opts, &path);
	if (rc < 0)
		return path_failed(ke, "list", rc);
	rc = ds_kube_call_json(k, "GET", path, NULL, NULL, out, ke);
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
	if ((rc = ds_kube_need_ns(res, ns, "write", ke)) < 0)
		return rc;
	switch (kind) {
	case DS_KUBE_OP_CREATE:
		w->method = "POST";
		ds_kube_sb_path(&b, res, ns, NULL, NULL);
		break;
	case DS_KUBE_OP_APPLY:
		w->method = "PATCH";
		w->ctype = "application/apply-patch+yaml";
		if ((rc = need_name(name, "apply", ke)) < 0)
			return rc;
		ds_kube_sb_path(&b, res, ns, name, sub);
		ds_kube_sb_q(&b, "fieldManager", field_manager ? field_manager : "drasync");
		if (force)
			ds_kube_sb_q(&b, "force", "true");
		break;
	case DS_KUBE_OP_MERGE_PATCH:
		w->method = "PATCH";
		w->ctype = "application/merge-patch+json";
		if ((rc = need_name(name, "patch", ke)) < 0)
			return rc;
		ds_kube_sb_path(&b, res, ns, name, sub);
		break;
	case DS_KUBE_OP_UPDATE:
		w->method = "PUT";
		if ((rc = need_name(name, "update", ke)) < 0)
			return rc;
		ds_kube_sb_path(&b, res, ns, name, sub);
		break;
	case DS_KUBE_OP_DELETE:
		w->method = "DELETE";
		if ((rc = need_name(name, "delete", ke)) < 0)
			return rc;
		ds_kube_sb_path(&b, res, ns, name, NULL);
		break;
	case DS_KUBE_OP_GET:
		w->method = "GET";
		if ((rc = need_name(name, "get", ke)) < 0)
			return rc;
		ds_kube_sb_path(&b, res, ns, name, sub);
		break;
	default:
		ds_str_dispose(&b);
		ds_kube_error_set(ke, 0, "unknown operation %d", (int)kind);
		return -EINVAL;
	}
	rc = ds_kube_sb_done(&b, &w->path);
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
	rc = ds_kube_call_json(k, w.method, w.path, w.ctype, w.body, out, ke);
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
