#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu_compare.h"

#include "drasync/sanitize.h"
#include "tu_kube.h"

#include <jansson.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static bool ours(const char *key)
{
	return strncmp(key, "drasync.io/", 11) == 0 ||
	       strcmp(key, "app.kubernetes.io/managed-by") == 0 ||
	       strncmp(key, "deployment.kubernetes.io/", 25) == 0;
}

/* A copy of the map at meta[field] without our keys; NULL when nothing is left. */
static json_t *foreign_keys(const json_t *meta, const char *field)
{
	json_t *in = json_object_get(meta, field), *out = json_object(), *v;
	const char *key;

	assert_non_null(out);
	json_object_foreach (in, key, v) {
		if (!ours(key))
			json_object_set(out, key, v);
	}
	if (json_object_size(out) == 0) {
		json_decref(out);
		return NULL;
	}
	return out;
}

/* What is compared of obj (a new object). */
static json_t *content(const json_t *obj)
{
	json_t *copy = json_deep_copy(obj), *meta, *kept = json_object(), *v;

	assert_non_null(copy);
	assert_non_null(kept);
	assert_int_equal(ds_sanitize(copy), 0);
	meta = json_object_get(copy, "metadata");
	json_object_set(kept, "name", json_object_get(meta, "name"));
	if ((v = foreign_keys(meta, "labels")))
		json_object_set_new(kept, "labels", v);
	if ((v = foreign_keys(meta, "annotations")))
		json_object_set_new(kept, "annotations", v);
	json_object_del(copy, "metadata");
	json_object_del(copy, "status");
	json_object_del(copy, "apiVersion");
	json_object_set_new(copy, "metadata", kept);
	return copy;
}

void tu_compare_digest(const json_t *obj, char hex[65])
{
	json_t *c = content(obj);
	char *text = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS);
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned len = 0;

	assert_non_null(text);
	assert_int_equal(EVP_Digest(text, strlen(text), md, &len, EVP_sha256(), NULL), 1);
	for (unsigned i = 0; i < len && i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	hex[64] = '\0';
	free(text);
	json_decref(c);
}

/* name -> object of one kind in ns (a new object). */
static json_t *by_name(ds_kube *k, const char *kind_path, const char *ns)
{
	char api[200];
	const char *slash = strrchr(kind_path, '/');
	struct ds_kube_resource r;
	struct ds_kube_list_opts lo = {.limit = 500};
	ds_kube_error ke;
	json_t *list = NULL, *out = json_object(), *item;
	size_t i;

	assert_non_null(slash);
	assert_non_null(out);
	snprintf(api, sizeof(api), "%.*s", (int)(slash - kind_path), kind_path);
	r = tu_kube_resource(k, api, slash + 1);
	TU_KUBE_CHECK(ds_kube_list(k, &r, ns, &lo, &list, NULL, &ke), ke);
	json_array_foreach (json_object_get(list, "items"), i, item) {
		const char *name =
		    json_string_value(json_object_get(json_object_get(item, "metadata"), "name"));

		if (!name ||
		    (strcmp(slash + 1, "ConfigMap") == 0 && strcmp(name, "kube-root-ca.crt") == 0))
			continue;
		json_object_set(out, name, item);
	}
	json_decref(list);
	return out;
}

static bool managed(const json_t *obj)
{
	const char *v = json_string_value(
	    json_object_get(json_object_get(json_object_get(obj, "metadata"), "labels"),
			    "app.kubernetes.io/managed-by"));

	return v && strcmp(v, "drasync") == 0;
}

static void note(tu_compare_result *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void note(tu_compare_result *out, const char *fmt, ...)
{
	size_t used = strlen(out->report);
	va_list ap;

	if (used + 200 >= sizeof(out->report))
		return;
	va_start(ap, fmt);
	vsnprintf(out->report + used, sizeof(out->report) - used, fmt, ap);
	va_end(ap);
}

void tu_compare_namespaces(ds_kube *src, const char *src_ns, ds_kube *dst, const char *dst_ns,
			   const char *const kinds[], tu_compare_result *out)
{
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; kinds[i]; i++) {
		json_t *a = by_name(src, kinds[i], src_ns), *b = by_name(dst, kinds[i], dst_ns), *o;
		const char *name;

		json_object_foreach (a, name, o) {
			json_t *copy = json_object_get(b, name);
			char ha[65], hb[65];

			out->source++;
			if (!copy) {
				out->missing++;
				note(out, "missing: %s %s/%s\n", kinds[i], dst_ns, name);
				continue;
			}
			tu_compare_digest(o, ha);
			tu_compare_digest(copy, hb);
			if (strcmp(ha, hb) == 0) {
				out->same++;
				continue;
			}
			out->differ++;
			if (out->differ <= 3) {
				json_t *ca = content(o), *cb = content(copy);
				char *ta = json_dumps(ca, JSON_COMPACT | JSON_SORT_KEYS);
				char *tb = json_dumps(cb, JSON_COMPACT | JSON_SORT_KEYS);

				note(out, "differs: %s %s/%s\n  source: %.600s\n  target: %.600s\n",
				     kinds[i], dst_ns, name, ta ? ta : "?", tb ? tb : "?");
				free(ta);
				free(tb);
				json_decref(ca);
				json_decref(cb);
			} else {
				note(out, "differs: %s %s/%s\n", kinds[i], dst_ns, name);
			}
		}
		json_object_foreach (b, name, o) {
			if (!json_object_get(a, name) && managed(o)) {
				out->extra++;
				note(out,
				     "extra: %s %s/%s (managed by drasync, not on the source)\n",
				     kinds[i], dst_ns, name);
			}
		}
		json_decref(a);
		json_decref(b);
	}
}

void tu_assert_same_objects(ds_kube *src, const char *src_ns, ds_kube *dst, const char *dst_ns,
			    const char *const kinds[], int timeout_ms)
{
	long long end = tu_now_ms() + timeout_ms;
	tu_compare_result r;

	for (;;) {
		tu_compare_namespaces(src, src_ns, dst, dst_ns, kinds, &r);
		if (r.missing == 0 && r.differ == 0 && r.extra == 0)
			return;
		if (tu_now_ms() > end)
			fail_msg(
			    "after %d ms, of %zu objects in %s: %zu the same in %s, %zu missing, "
			    "%zu different, %zu extra:\n%s",
			    timeout_ms, r.source, src_ns, r.same, dst_ns, r.missing, r.differ,
			    r.extra, r.report);
		tu_msleep(500);
	}
}
