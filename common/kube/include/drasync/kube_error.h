#ifndef DRASYNC_KUBE_ERROR_H
#define DRASYNC_KUBE_ERROR_H

/*
 * What went wrong with a Kubernetes API request, kept for the caller: the HTTP
 * status, the API's own Status (reason, message, details), or the transport or
 * TLS failure when there was no response at all.
 *
 * HTTP status -> negative errno (what ds_kube_* functions return):
 *   400 BadRequest, 422 Invalid      -EINVAL
 *   401 Unauthorized                  -EACCES
 *   403 Forbidden                     -EPERM
 *   404 NotFound                      -ENOENT
 *   405 MethodNotAllowed              -EOPNOTSUPP
 *   406, 415 (content negotiation)    -EPROTO
 *   409 AlreadyExists                 -EEXIST
 *   409 Conflict (stale resourceVersion, apply conflict)  -ESTALE
 *   410 Gone (resourceVersion too old) -EIDRM
 *   413 RequestEntityTooLarge         -E2BIG
 *   429 TooManyRequests               -EAGAIN (after retries)
 *   500, 502 and other 5xx            -EIO    (after retries)
 *   503 ServiceUnavailable            -EAGAIN (after retries)
 *   504 GatewayTimeout                -ETIMEDOUT
 *   other 4xx                         -EPROTO
 * Without a response: -ECONNREFUSED, -EHOSTUNREACH, -ETIMEDOUT, -ECONNRESET,
 * -EKEYREJECTED (TLS verification failed; `tls` names the cause), -EPROTO.
 */

#include <jansson.h>
#include <stdbool.h>

enum ds_kube_tls_cause {
	DS_KUBE_TLS_OK,
	DS_KUBE_TLS_UNKNOWN_CA,	   /* server certificate not signed by a trusted CA */
	DS_KUBE_TLS_NAME_MISMATCH, /* certificate does not name the host (or tls-server-name) */
	DS_KUBE_TLS_EXPIRED,	   /* certificate expired or not yet valid */
	DS_KUBE_TLS_CLIENT_CERT,   /* our client certificate/key was refused or unusable */
	DS_KUBE_TLS_HANDSHAKE,	   /* any other handshake failure */
	DS_KUBE_TLS_CAUSE_MAX
};

typedef struct ds_kube_error {
	int code;		    /* HTTP status; 0 when no response was received */
	char reason[64];	    /* Status.reason ("NotFound", "Conflict", ...), "" if none */
	char message[512];	    /* Status.message, or the transport/TLS failure */
	char details_kind[64];	    /* Status.details.kind */
	char details_name[256];	    /* Status.details.name */
	char details_group[128];    /* Status.details.group */
	char causes[512];	    /* Status.details.causes as "field: message; ..." */
	enum ds_kube_tls_cause tls; /* TLS failure cause, DS_KUBE_TLS_OK otherwise */
	int retry_after;	    /* seconds from Retry-After / details.retryAfterSeconds, -1 */
	int attempts;		    /* how many times the request was sent */
} ds_kube_error;

/** Reset to "no error". NULL-safe. */
void ds_kube_error_clear(ds_kube_error *ke);

/**
 * A failure drasync detected itself (no API Status to copy): reset `ke`, keeping
 * `attempts`, and set the HTTP status (0 when none) and the message
 * (printf-style). NULL-safe.
 */
void ds_kube_error_set(ds_kube_error *ke, int http_code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/**
 * The errno for an HTTP status and Status.reason (reason may be NULL or "").
 * @return a negative errno, or 0 for 1xx-3xx
 */
int ds_kube_error_errno(int http_code, const char *reason);

/**
 * The standard reason phrase of an HTTP status (RFC 9110: 413 is "Content Too
 * Large"), for answers that carry none (HTTP/2) or lost theirs.
 * @return a static string, "" for a status not listed
 */
const char *ds_http_status_text(int http_code);

/**
 * Fill `ke` from an HTTP error response: its status and, when the body is a
 * metav1.Status, its reason, message and details; otherwise the start of the
 * body (bounded) as the message.
 * @return the errno for the response, as ds_kube_error_errno()
 */
int ds_kube_error_from_response(ds_kube_error *ke, int http_code, const char *body, size_t len);

/** Name of a TLS cause ("unknown CA", "name mismatch", ...). */
const char *ds_kube_tls_cause_name(enum ds_kube_tls_cause cause);

/**
 * One line for humans: "404 NotFound: configmaps \"x\" not found" or the
 * transport failure. @return buf
 */
const char *ds_kube_error_format(const ds_kube_error *ke, char *buf, size_t size);

/** True when the request may be retried as far as the server's answer goes (429, 5xx). */
bool ds_kube_error_is_transient(int http_code);

/*
 * What an API Status says, decided on its HTTP code, its reason
 * (metav1.StatusReason: NotFound 404, AlreadyExists and Conflict 409, Gone
 * and Expired 410, Invalid 422, ...) and its details. NULL-safe: NULL is
 * "no". Only where the reason and code cannot tell does one read the message
 * (ds_kube_error_is_immutable() says why).
 */

/**
 * The write was refused because fields cannot change in place (a Job's
 * template, a StatefulSet's spec beyond what it may update, an immutable
 * ConfigMap): 422 Invalid naming an immutable field.
 */
bool ds_kube_error_is_immutable(const ds_kube_error *ke);

/**
 * 404 NotFound for the object's namespace: details.kind "namespaces" and
 * details.name the namespace.
 */
bool ds_kube_error_is_namespace_missing(const ds_kube_error *ke);

/**
 * 404 for the resource type itself (a CRD or a version the server no longer
 * serves): a missing namespace or object names itself in details.name, this
 * does not.
 */
bool ds_kube_error_is_type_not_served(const ds_kube_error *ke);

/**
 * 409 Conflict: a stale resourceVersion, or a server-side apply that other
 * field managers own fields of (details.causes name them). Not 409
 * AlreadyExists.
 */
bool ds_kube_error_is_conflict(const ds_kube_error *ke);

#endif
