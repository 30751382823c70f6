#include "drasync/kube_error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void ds_kube_error_clear(ds_kube_error *ke)
{
	if (!ke)
		return;
	memset(ke, 0, sizeof(*ke));
	ke->retry_after = -1;
}

void ds_kube_error_set(ds_kube_error *ke, int http_code, const char *fmt, ...)
{
	va_list ap;
	int attempts;

	if (!ke)
		return;
	attempts = ke->attempts;
	ds_kube_error_clear(ke);
	ke->attempts = attempts;
	ke->code = http_code;
	va_start(ap, fmt);
	vsnprintf(ke->message, sizeof(ke->message), fmt, ap);
	va_end(ap);
}

int ds_kube_error_errno(int http_code, const char *reason)
{
	if (http_code > 0 && http_code < 400)
		return 0;
	switch (http_code) {
	case 400:
	case 422:
		return -EINVAL;
	case 401:
		return -EACCES;
	case 403:
		return -EPERM;
	case 404:
		return -ENOENT;
	case 405:
		return -EOPNOTSUPP;
	case 409:
		return reason && strcmp(reason, "AlreadyExists") == 0 ? -EEXIST : -ESTALE;
	case 410:
		return -EIDRM;
	case 413:
		return -E2BIG;
	case 429:
	case 503:
		return -EAGAIN;
	case 504:
		return -ETIMEDOUT;
	default:
		break;
	}
	if (http_code >= 500)
		return -EIO;
	return -EPROTO;
}

bool ds_kube_error_is_transient(int http_code)
{
	return http_code == 429 || (http_code >= 500 && http_code <= 599);
}

/*
 * An immutable field is reported as reason Invalid (422), the reason of
 * every validation failure, and its causes' type (FieldValueInvalid, or
 * FieldValueForbidden for a StatefulSet's spec) is the one of any invalid or
 * forbidden value: neither the reason, the code nor the cause type tells "may
 * not change" from "wrong value". So after the reason and code, the message
 * and the causes are read for the apiserver's words: "field is immutable"
 * (apimachinery's ValidateImmutableField, a ConfigMap or Secret with
 * immutable: true), "may not change fields" (a PersistentVolumeClaim's spec),
 * "updates to statefulset spec for fields other than ... are forbidden".
 */
bool ds_kube_error_is_immutable(const ds_kube_error *ke)
{
	if (!ke || ke->code != 422 || (ke->reason[0] && strcmp(ke->reason, "Invalid") != 0))
		return false;
	return strstr(ke->message, "immutable") || strstr(ke->causes, "immutable") ||
	       strstr(ke->message, "may not change fields") || strstr(ke->message, "updates to");
}

bool ds_kube_error_is_namespace_missing(const ds_kube_error *ke)
{
	return ke && ke->code == 404 && strcmp(ke->details_kind, "namespaces") == 0 &&
	       ke->details_name[0];
}

bool ds_kube_error_is_type_not_served(const ds_kube_error *ke)
{
	return ke && ke->code == 404 && !ke->details_name[0];
}

bool ds_kube_error_is_conflict(const ds_kube_error *ke)
{
	return ke && ke->code == 409 && strcmp(ke->reason, "AlreadyExists") != 0;
}

static void copy_str(char *dst, size_t size, const json_t *v)
{
	const char *s = json_string_value(v);

	snprintf(dst, size, "%s", s ? s : "");
}

/* Keep a bounded, printable excerpt of a body that is not a Status. */
static void copy_excerpt(char *dst, size_t size, const char *body, size_t len)
{
	size_t i, n = 0;

	for (i = 0; i < len && n + 1 < size; i++) {
		unsigned char c = (unsigned char)body[i];
		dst[n++] = (c == '\n' || c == '\r' || c == '\t') ? ' ' : (c < 0x20 ? '?' : (char)c);
	}
	while (n > 0 && dst[n - 1] == ' ')
		n--;
	dst[n] = '\0';
}

const char *ds_http_status_text(int http_code)
{
	switch (http_code) {
	case 400:
		return "Bad Request";
	case 401:
		return "Unauthorized";
	case 403:
		return "Forbidden";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 406:
		return "Not Acceptable";
	case 408:
		return "Request Timeout";
	case 409:
		return "Conflict";
	case 410:
		return "Gone";
	case 413:
		return "Content Too Large";
	case 415:
		return "Unsupported Media Type";
	case 422:
		return "Unprocessable Content";
	case 429:
		return "Too Many Requests";
	case 500:
		return "Internal Server Error";
	case 502:
		return "Bad Gateway";
	case 503:
		return "Service Unavailable";
	case 504:
		return "Gateway Timeout";
	default:
		return "";
	}
}

int ds_kube_error_from_response(ds_kube_error *ke, int http_code, const char *body, size_t len)
{
	json_t *st = NULL, *details;
	ds_kube_error local;
	int rc;

	if (!ke)
		ke = &local;
	/* attempts and Retry-After are filled by the transport; keep them */
	{
		int attempts = ke->attempts, retry_after = ke->retry_after;
		ds_kube_error_clear(ke);
		ke->attempts = attempts;
		ke->retry_after = retry_after;
	}
	ke->code = http_code;
	if (body && len > 0 && len < (16u << 20))
		st = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL);
	if (json_is_object(st) && json_is_string(json_object_get(st, "kind")) &&
	    strcmp(json_string_value(json_object_get(st, "kind")), "Status") == 0) {
		copy_str(ke->reason, sizeof(ke->reason), json_object_get(st, "reason"));
		copy_str(ke->message, sizeof(ke->message), json_object_get(st, "message"));
		details = json_object_get(st, "details");
		if (json_is_object(details)) {
			json_t *causes = json_object_get(details, "causes"), *c;
			size_t i, off = 0;

			copy_str(ke->details_kind, sizeof(ke->details_kind),
				 json_object_get(details, "kind"));
			copy_str(ke->details_name, sizeof(ke->details_name),
				 json_object_get(details, "name"));
			copy_str(ke->details_group, sizeof(ke->details_group),
				 json_object_get(details, "group"));
			if (json_is_integer(json_object_get(details, "retryAfterSeconds")) &&
			    ke->retry_after < 0) {
				json_int_t ra = json_integer_value(
				    json_object_get(details, "retryAfterSeconds"));
				ke->retry_after = ra < 0 ? -1 : (ra > 3600 ? 3600 : (int)ra);
			}
			json_array_foreach (causes, i, c) {
				const char *field = json_string_value(json_object_get(c, "field"));
				const char *msg = json_string_value(json_object_get(c, "message"));
				int w;

				if (off >= sizeof(ke->causes))
					break;
				w = snprintf(ke->causes + off, sizeof(ke->causes) - off, "%s%s%s%s",
					     off ? "; " : "", field ? field : "", field ? ": " : "",
					     msg ? msg : "");
				if (w < 0)
					break;
				off += (size_t)w;
			}
		}
	} else if (body && len > 0) {
		copy_excerpt(ke->message, sizeof(ke->message), body, len);
	}
	if (!ke->message[0])
		snprintf(ke->message, sizeof(ke->message), "HTTP %d%s%s", http_code,
			 ds_http_status_text(http_code)[0] ? " " : "",
			 ds_http_status_text(http_code));
	rc = ds_kube_error_errno(http_code, ke->reason);
	json_decref(st);
	return rc;
}

const char *ds_kube_tls_cause_name(enum ds_kube_tls_cause cause)
{
	switch (cause) {
	case DS_KUBE_TLS_OK:
		return "ok";
	case DS_KUBE_TLS_UNKNOWN_CA:
		return "unknown CA";
	case DS_KUBE_TLS_NAME_MISMATCH:
		return "name mismatch";
	case DS_KUBE_TLS_EXPIRED:
		return "certificate expired or not yet valid";
	case DS_KUBE_TLS_CLIENT_CERT:
		return "client certificate refused";
	case DS_KUBE_TLS_HANDSHAKE:
	case DS_KUBE_TLS_CAUSE_MAX:
		break;
	}
	return "handshake failed";
}

const char *ds_kube_error_format(const ds_kube_error *ke, char *buf, size_t size)
{
	if (!buf || size == 0)
		return buf;
	if (!ke) {
		buf[0] = '\0';
		return buf;
	}
	if (ke->code > 0)
		snprintf(buf, size, "%d%s%s: %s", ke->code, ke->reason[0] ? " " : "", ke->reason,
			 ke->message);
	else if (ke->tls != DS_KUBE_TLS_OK)
		snprintf(buf, size, "TLS %s: %s", ds_kube_tls_cause_name(ke->tls), ke->message);
	else
		snprintf(buf, size, "%s", ke->message[0] ? ke->message : "no error");
	return buf;
}
