#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu_load.h"

#include "testutil.h"
#include "tu_http.h"
#include "tu_kube.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK 100

static void name_of(int i, char *out, size_t size)
{
	snprintf(out, size, "%s-%05d", i % 5 < 2 ? "cm" : i % 5 < 4 ? "sec" : "dep", i);
}

/* Hex of random bytes: ~payload bytes that zstd cannot shrink much below half. */
static char *noise(int payload)
{
	size_t n = payload > 0 ? (size_t)payload : 1;
	char *s = malloc(n + 1);

	assert_non_null(s);
	for (size_t i = 0; i < n; i++)
		s[i] = "0123456789abcdef"[tu_rand() & 15u];
	s[n] = '\0';
	return s;
}

static json_t *object(const char *ns, int i, int payload, int round)
{
	char name[32], *data = noise(payload);
	json_t *o;

	name_of(i, name, sizeof(name));
	if (i % 5 < 2)
		o = tu_kube_doc(
		    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: %s, "
		    "labels: {load: \"%d\"}}\ndata: {round: \"%d\", noise: \"%s\"}\n",
		    name, ns, i % 7, round, data);
	else if (i % 5 < 4)
		o = tu_kube_doc(
		    "apiVersion: v1\nkind: Secret\nmetadata: {name: %s, namespace: %s}\n"
		    "type: Opaque\nstringData: {round: \"%d\", noise: \"%s\"}\n",
		    name, ns, round, data);
	else
		o = tu_kube_doc(
		    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: %s, "
		    "namespace: %s, annotations: {noise: \"%s\"}}\nspec:\n  replicas: 0\n"
		    "  selector: {matchLabels: {app: %s}}\n"
		    "  template:\n    metadata: {labels: {app: %s}}\n"
		    "    spec: {containers: [{name: c, image: registry.k8s.io/pause:3.10}]}\n",
		    name, ns, data, name, name);
	free(data);
	return o;
}

static void run_batch(ds_kube *k, struct ds_kube_op *ops, size_t n, const char *what)
{
	int failed = ds_kube_batch(k, ops, n, "drasync-test", false);
	char buf[600];

	if (failed < 0)
		fail_msg("%s: batch could not run (%d)", what, failed);
	for (size_t i = 0; i < n; i++) {
		if (ops[i].rc < 0)
			fail_msg("%s %s/%s: %s", what, ops[i].ns ? ops[i].ns : "",
				 ops[i].name ? ops[i].name : "",
				 ds_kube_error_format(&ops[i].error, buf, sizeof(buf)));
		json_decref(ops[i].result);
	}
}

void tu_load_create(ds_kube *k, const char *ns, int first, int n, int payload)
{
	struct ds_kube_resource res[3] = {tu_kube_resource(k, "v1", "ConfigMap"),
					  tu_kube_resource(k, "v1", "Secret"),
					  tu_kube_resource(k, "apps/v1", "Deployment")};
	struct ds_kube_op ops[CHUNK];
	json_t *objs[CHUNK];

	for (int i = first; i < first + n;) {
		size_t m = 0;

		memset(ops, 0, sizeof(ops));
		for (; m < CHUNK && i < first + n; m++, i++) {
			objs[m] = object(ns, i, payload, 0);
			ops[m] = (struct ds_kube_op){.kind = DS_KUBE_OP_CREATE,
						     .res = &res[i % 5 < 2   ? 0
								 : i % 5 < 4 ? 1
									     : 2],
						     .ns = ns,
						     .obj = objs[m]};
		}
		run_batch(k, ops, m, "create");
		for (size_t j = 0; j < m; j++)
			json_decref(objs[j]);
	}
}

void tu_load_change(ds_kube *k, const char *ns, int first, int n, int round)
{
	struct ds_kube_resource res[3] = {tu_kube_resource(k, "v1", "ConfigMap"),
					  tu_kube_resource(k, "v1", "Secret"),
					  tu_kube_resource(k, "apps/v1", "Deployment")};
	struct ds_kube_op ops[CHUNK];
	json_t *patches[CHUNK];
	char names[CHUNK][32];

	for (int i = first; i < first + n;) {
		size_t m = 0;

		memset(ops, 0, sizeof(ops));
		for (; m < CHUNK && i < first + n; m++, i++) {
			char r[16];

			snprintf(r, sizeof(r), "%d", round);
			name_of(i, names[m], sizeof(names[m]));
			if (i % 5 < 2)
				patches[m] = json_pack("{s:{s:s}}", "data", "round", r);
			else if (i % 5 < 4)
				patches[m] = json_pack("{s:{s:s}}", "stringData", "round", r);
			else
				patches[m] = json_pack("{s:{s:{s:s}}}", "metadata", "annotations",
						       "round", r);
			assert_non_null(patches[m]);
			ops[m] = (struct ds_kube_op){.kind = DS_KUBE_OP_MERGE_PATCH,
						     .res = &res[i % 5 < 2   ? 0
								 : i % 5 < 4 ? 1
									     : 2],
						     .ns = ns,
						     .name = names[m],
						     .obj = patches[m]};
		}
		run_batch(k, ops, m, "change");
		for (size_t j = 0; j < m; j++)
			json_decref(patches[j]);
	}
}

void tu_load_delete(ds_kube *k, const char *ns, int first, int n)
{
	struct ds_kube_resource res[3] = {tu_kube_resource(k, "v1", "ConfigMap"),
					  tu_kube_resource(k, "v1", "Secret"),
					  tu_kube_resource(k, "apps/v1", "Deployment")};
	struct ds_kube_op ops[CHUNK];
	char names[CHUNK][32];

	for (int i = first; i < first + n;) {
		size_t m = 0;

		memset(ops, 0, sizeof(ops));
		for (; m < CHUNK && i < first + n; m++, i++) {
			name_of(i, names[m], sizeof(names[m]));
			ops[m] = (struct ds_kube_op){.kind = DS_KUBE_OP_DELETE,
						     .res = &res[i % 5 < 2   ? 0
								 : i % 5 < 4 ? 1
									     : 2],
						     .ns = ns,
						     .name = names[m]};
		}
		run_batch(k, ops, m, "delete");
	}
}

double tu_metric(const char *base, const char *series)
{
	char url[256], *text;
	size_t n = strlen(series);
	double v = -1;

	snprintf(url, sizeof(url), "%s/metrics", base);
	text = tu_http_get(url, 200);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, series, n) == 0 && p[n] == ' ') {
			v = strtod(p + n + 1, NULL);
			break;
		}
	free(text);
	return v;
}

int tu_soak(void)
{
	const char *v = getenv("DS_SOAK");

	return v && strcmp(v, "1") == 0;
}
