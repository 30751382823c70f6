#ifndef DRASYNC_KUBE_CLIENT_H
#define DRASYNC_KUBE_CLIENT_H

/*
 * The Kubernetes API as drasync uses it: discovery, get, list, watch, create,
 * server-side apply, JSON merge patch, update, delete, the status subresource,
 * and a concurrent batch of writes. Objects are jansson values.
 *
 * Errors: every call returns 0 or a negative errno (mapping in kube_error.h) and
 * fills the optional last `ds_kube_error *` with the API's Status (reason,
 * message, details) or the transport/TLS failure.
 * A ds_kube may be used from several threads.
 */

#include "drasync/kube_error.h"
#include "drasync/kube_transport.h"
#include "drasync/kubeconfig.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>

typedef struct ds_kube ds_kube;

/* What discovery says about one kind. */
struct ds_kube_resource {
	char group[128];    /* "" for the core group */
	char version[64];   /* "v1", "v1beta1" */
	char resource[128]; /* plural, "configmaps" */
	char kind[128];	    /* "ConfigMap" */
	bool namespaced;
	bool has_status; /* the status subresource is served */
};

/**
 * New client. Takes ownership of *kc (set to NULL) on success.
 * opts NULL: transport defaults.
 */
int ds_kube_new(ds_kube **out, ds_kubeconfig **kc, const struct ds_kube_transport_opts *opts,
		ds_err *err);

/**
 * An agent's client by the agents' rule (ds_kubeconfig_for_agent(): --kubeconfig,
 * else the configuration file's, else $KUBECONFIG, else in-cluster).
 * @return 0; -ENOKEY no credentials to be found (err says where it looked;
 *         say DS_KUBE_CONNECT_HINT after it); another negative errno when the
 *         client cannot start
 */
#define DS_KUBE_CONNECT_HINT "  (outside a cluster, pass --kubeconfig PATH [--context NAME])\n"
int ds_kube_connect(ds_kube **out, const char *flag_path, const char *flag_context,
		    const char *file_path, const struct ds_kube_transport_opts *opts, ds_err *err);

void ds_kube_free(ds_kube *k);

ds_kube_transport *ds_kube_get_transport(ds_kube *k);
ds_kubeconfig *ds_kube_get_config(ds_kube *k);

/* ---- discovery (cached; read again when a kind is not found, see below) ---- */

/** Forget what discovery cached (e.g. after CRDs changed). */
void ds_kube_discovery_reset(ds_kube *k);

/**
 * Read the server's groups again now (CRDs or served versions changed), unless
 * discovery was read again less than the refresh interval ago; resource lists
 * are then fetched again when next needed.
 * @return 1 when read again, 0 when not due (the cache is kept), or a request error
 */
int ds_kube_discovery_refresh(ds_kube *k, ds_kube_error *ke);

/**
 * At most one re-read of discovery per interval_ms, by a lookup that misses or
 * by ds_kube_discovery_refresh() (default 0: a miss always reads it again).
 * The first load and ds_kube_discovery_reset() are not limited.
 */
void ds_kube_discovery_set_refresh_interval(ds_kube *k, int interval_ms);

/** Counts the loads of the server's group list: changes when discovery was read again. */
unsigned long ds_kube_discovery_generation(ds_kube *k);

/**
 * Resource for apiVersion ("v1", "apps/v1", "resource.k8s.io/v1beta1") and kind.
 * @return 0, -ENOENT when the server does not serve it, or a request error
 */
int ds_kube_resource_find(ds_kube *k, const char *api_version, const char *kind,
			  struct ds_kube_resource *out, ds_kube_error *ke);

/**
 * Resource of an object, from its apiVersion and kind.
 * @return 0, -EINVAL (no apiVersion or kind), -ENOENT when not served
 */
int ds_kube_resource_of(ds_kube *k, const json_t *obj, struct ds_kube_resource *out,
			ds_kube_error *ke);

/**
 * A group's versions: the preferred one and all served ones (a new JSON array of
 * strings, preferred first as the server orders them). group "" is the core group.
 * Either output may be NULL. @return 0, -ENOENT when the group is not served
 */
int ds_kube_group_versions(ds_kube *k, const char *group, char *preferred, size_t size,
			   json_t **served, ds_kube_error *ke);

/**
 * The version of group to use on this cluster: `want` when it is served, else
 * the group's preferred one (resource.k8s.io: "v1" when served, else what an
 * older cluster prefers), into out. @return 0, -ENOENT when the group is not
 * served, or discovery's error
 */
int ds_kube_version_to_use(ds_kube *k, const char *group, const char *want, char *out, size_t size,
			   ds_kube_error *ke);

/** Build "/api/v1/namespaces/ns/pods/name/status" style paths (ns, name, sub may be NULL). */
int ds_kube_path(const struct ds_kube_resource *res, const char *ns, const char *name,
		 const char *subresource, char **out);

/* ---- objects ---- */

/** GET one object (subresource NULL or "status"). */
int ds_kube_get(ds_kube *k, const struct ds_kube_resource *res, const char *ns, const char *name,
		const char *subresource, json_t **out, ds_kube_error *ke);

struct ds_kube_list_opts {
	const char *label_selector;
	const char *field_selector;
	const char *resource_version;
	const char *continue_token;
	long limit; /* page size; 0: the server's choice (everything) */
};

/** One page of a list: the List object as the server sent it (metadata.continue set when more). */
int ds_kube_list_page(ds_kube *k, const struct ds_kube_resource *res, const char *ns,
		      const struct ds_kube_list_opts *opts, json_t **out, ds_kube_error *ke);

/**
 * Every page (opts->limit per page) joined into one List: "items" holds all of
 * them, metadata.resourceVersion is the list's. When the continue token expires
 * midway (410), starts again once without paging. `pages` (may be NULL) counts
 * the requests.
 */
int ds_kube_list(ds_kube *k, const struct ds_kube_resource *res, const char *ns,
		 const struct ds_kube_list_opts *opts, json_t **out, unsigned *pages,
		 ds_kube_error *ke);

/** POST a new object (namespace from `ns`, else metadata.namespace). */
int ds_kube_create(ds_kube *k, const struct ds_kube_resource *res, const char *ns,
		   const json_t *obj, json_t **out, ds_kube_error *ke);

/**
 * Server-side apply (application/apply-patch+yaml; JSON is YAML) of `obj`
 * (named by metadata.name) as `field_manager`, with force to take over fields
 * other managers own. subresource NULL or "status".
 */
int ds_kube_apply(ds_kube *k, const struct ds_kube_resource *res, const char *ns, const json_t *obj,
		  const char *field_manager, bool force, const char *subresource, json_t **out,
		  ds_kube_error *ke);

/** JSON merge patch (RFC 7386). subresource NULL or "status". */
int ds_kube_merge_patch(ds_kube *k, const struct ds_kube_resource *res, const char *ns,
			const char *name, const json_t *patch, const char *subresource,
			json_t **out, ds_kube_error *ke);

/**
 * PUT `obj`; with metadata.resourceVersion set the server refuses a stale one
 * (409 -> -ESTALE). subresource NULL or "status".
 */
int ds_kube_update(ds_kube *k, const struct ds_kube_resource *res, const char *ns,
		   const json_t *obj, const char *subresource, json_t **out, ds_kube_error *ke);

struct ds_kube_delete_opts {
	const char *propagation;      /* "Foreground", "Background", "Orphan" or NULL */
	const char *uid;	      /* precondition, or NULL */
	const char *resource_version; /* precondition, or NULL */
	long grace_seconds;	      /* < 0: the object's default */
};

/** DELETE one object (opts may be NULL). */
int ds_kube_delete(ds_kube *k, const struct ds_kube_resource *res, const char *ns, const char *name,
		   const struct ds_kube_delete_opts *opts, ds_kube_error *ke);

/* ---- watch ---- */

enum ds_kube_event_type {
	DS_KUBE_ADDED,
	DS_KUBE_MODIFIED,
	DS_KUBE_DELETED,
	DS_KUBE_BOOKMARK,
	DS_KUBE_SYNC, /* a (re)list: obj is the List with every object; replace what you hold */
	DS_KUBE_EVENT_MAX
};

/** obj is borrowed for the call. Return nonzero to stop watching. */
typedef int (*ds_kube_watch_fn)(void *user, enum ds_kube_event_type type, json_t *obj);

struct ds_kube_watch_opts {
	const char *label_selector;
	const char *field_selector;
	const char *resource_version; /* resume from here; NULL or "": list first (SYNC) */
	int timeout_seconds;	      /* per watch request; the server then closes it and
				       * we reconnect (default 300) */
	bool bookmarks;		      /* allowWatchBookmarks */
	const atomic_bool *stop;      /* set from another thread to end the watch */
	int max_failures;	      /* consecutive failed (re)connects before giving up
				       * (default 10; backoff between them) */
	unsigned *reconnects;	      /* out, may be NULL: streams reopened */
	unsigned *relists;	      /* out, may be NULL: lists made because of 410 Gone */
	bool fail_on_gone;	      /* 410 Gone: return -EIDRM instead of relisting, for a
				       * caller that relists page by page itself */
};

/**
 * Watch like an informer: list (SYNC) unless resuming, then watch from the last
 * resourceVersion seen; reconnect when the stream ends; relist on 410 Gone
 * (unless opts->fail_on_gone).
 * @return 0 when the callback or `stop` ended it, -EIDRM on 410 Gone with
 *         fail_on_gone, or the error that could not be recovered (403, 404,
 *         repeated connection failures)
 */
int ds_kube_watch(ds_kube *k, const struct ds_kube_resource *res, const char *ns,
		  const struct ds_kube_watch_opts *opts, ds_kube_watch_fn fn, void *user,
		  ds_kube_error *ke);

/* ---- concurrent batch ---- */

enum ds_kube_op_kind {
	DS_KUBE_OP_CREATE,
	DS_KUBE_OP_APPLY,
	DS_KUBE_OP_MERGE_PATCH,
	DS_KUBE_OP_UPDATE,
	DS_KUBE_OP_DELETE,
	DS_KUBE_OP_GET,
	DS_KUBE_OP_KIND_MAX
};

struct ds_kube_op {
	enum ds_kube_op_kind kind;
	const struct ds_kube_resource *res;
	const char *ns;
	const char *name;  /* GET, DELETE, MERGE_PATCH; else metadata.name */
	const json_t *obj; /* the object (CREATE, APPLY, UPDATE) or patch */
	bool force; /* APPLY: take over fields other managers own, whatever the batch's force */
	int rc;	    /* out */
	bool want_result; /* the server's object is wanted, even in a no_result stream */
	json_t *result;	  /* out: the server's object on success (caller decrefs), may stay NULL */
	ds_kube_error error; /* out */
};

/**
 * Run the operations concurrently over the transport's concurrent path.
 * APPLY uses field_manager, and forces when force or the op's own force is set.
 * @return the number that failed (each op has its own rc and error), or a
 *         negative errno when the batch could not run
 */
int ds_kube_batch(ds_kube *k, struct ds_kube_op *ops, size_t n, const char *field_manager,
		  bool force);

/*
 * Operations handed over one at a time (ds_kube_stream): next() gives the
 * next op, 1 with *out (the caller's, valid until done() has it), 0 when there
 * is none now (asked again after one ends), -1 when there are no more; done()
 * gets each op once with rc, result (the caller decrefs) and error. Both run
 * on the calling thread between transfers and may make blocking calls of
 * their own (ds_kube_get, ...), not batches.
 */
struct ds_kube_op_stream {
	int (*next)(void *ud, struct ds_kube_op **out);
	void (*done)(void *ud, struct ds_kube_op *op);
	void *ud;
	const char *field_manager; /* APPLY */
	bool force;		   /* APPLY: for every op (else the op's own force) */
	bool no_result;		   /* the server's object is not wanted: op->result stays NULL */
};

/**
 * Keep up to the transport's max_parallel ops in flight until next() has no
 * more and all have ended: a caller prepares the next op while the server
 * works on the others, and makes one wait for others (next() returning 0).
 * @return the number that failed, or -ENOMEM when the stream could not run
 */
int ds_kube_stream(ds_kube *k, const struct ds_kube_op_stream *s);

#endif
