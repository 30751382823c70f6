#include "drasync/manifest.h"

#include "drasync/buf.h"
#include "drasync/k8s_object.h"
#include "drasync/yaml.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct item {
	json_t *obj;
	size_t file; /* index into files */
	int line, col;
	size_t doc;
};

struct ds_manifest {
	struct item *v;
	size_t n, cap;
	char **files;
	size_t n_files, cap_files;
};

int ds_manifest_new(ds_manifest **out)
{
	ds_manifest *m = calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	*out = m;
	return 0;
}

void ds_manifest_free(ds_manifest *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++)
		json_decref(m->v[i].obj);
	for (size_t i = 0; i < m->n_files; i++)
		free(m->files[i]);
	free(m->files);
	free(m->v);
	free(m);
}

static int push(ds_manifest *m, json_t *obj, const ds_yaml_locs *locs, size_t doc, const char *ptr)
{
	ds_yaml_loc loc = {0, 0, 0, 0};

	if (ds_grow((void **)&m->v, &m->cap, m->n + 1, sizeof(*m->v)) < 0)
		return -ENOMEM;
	if (locs)
		ds_yaml_locs_find(locs, doc, ptr, &loc);
	m->v[m->n++] = (struct item){json_incref(obj), m->n_files - 1, loc.line, loc.col, doc};
	return 0;
}

static int is_list(const json_t *doc)
{
	const char *kind = ds_obj_kind(doc);
	size_t n;

	/* kubectl unrolls "List" and any "FooList" with items. */
	if (!kind || !json_is_array(json_object_get(doc, "items")))
		return 0;
	n = strlen(kind);
	return n >= 4 && strcmp(kind + n - 4, "List") == 0;
}

static int add_docs(ds_manifest *m, json_t *docs, const ds_yaml_locs *locs)
{
	size_t d, i;
	json_t *doc, *it;
	int added = 0, r;

	json_array_foreach (docs, d, doc) {
		if (is_list(doc)) {
			const char *av = ds_obj_api_version(doc);
			const char *lk = ds_obj_kind(doc);
			char ptr[48];

			json_array_foreach (json_object_get(doc, "items"), i, it) {
				/* A typed list (PodList) may leave kind off its items. */
				if (json_is_object(it) && !json_object_get(it, "kind") &&
				    strcmp(lk, "List") != 0) {
					json_object_set_new(it, "kind",
							    json_stringn(lk, strlen(lk) - 4));
					if (av && !json_object_get(it, "apiVersion"))
						json_object_set_new(it, "apiVersion",
								    json_string(av));
				}
				snprintf(ptr, sizeof(ptr), "/items/%zu", i);
				if ((r = push(m, it, locs, d, ptr)) < 0)
					return r;
				added++;
			}
			continue;
		}
		if ((r = push(m, doc, locs, d, "")) < 0)
			return r;
		added++;
	}
	return added;
}

static int add_file(ds_manifest *m, const char *name)
{
	if (ds_grow((void **)&m->files, &m->cap_files, m->n_files + 1, sizeof(*m->files)) < 0)
		return -ENOMEM;
	m->files[m->n_files] = strdup(name);
	if (!m->files[m->n_files])
		return -ENOMEM;
	m->n_files++;
	return 0;
}

static int load_docs(ds_manifest *m, json_t *docs, ds_yaml_locs *locs, const char *name)
{
	int r = add_file(m, name);

	if (r == 0)
		r = add_docs(m, docs, locs);
	json_decref(docs);
	ds_yaml_locs_free(locs);
	return r;
}

int ds_manifest_load(ds_manifest *m, const char *path, ds_err *err)
{
	json_t *docs = NULL;
	ds_yaml_locs *locs = NULL;
	int r = ds_yaml_parse_file(path, DS_YAML_LOCATIONS, &docs, &locs, err);

	if (r < 0)
		return ds_err_fallback(err, r);
	return ds_err_fallback(err,
			       load_docs(m, docs, locs, strcmp(path, "-") == 0 ? "(stdin)" : path));
}

int ds_manifest_load_buffer(ds_manifest *m, const char *buf, size_t len, const char *name,
			    ds_err *err)
{
	json_t *docs = NULL;
	ds_yaml_locs *locs = NULL;
	int r = ds_yaml_parse(buf, len, name, DS_YAML_LOCATIONS, &docs, &locs, err);

	if (r < 0)
		return ds_err_fallback(err, r);
	return ds_err_fallback(err, load_docs(m, docs, locs, name));
}

size_t ds_manifest_count(const ds_manifest *m)
{
	return m->n;
}

json_t *ds_manifest_object(const ds_manifest *m, size_t i)
{
	return i < m->n ? m->v[i].obj : NULL;
}

const char *ds_manifest_origin(const ds_manifest *m, size_t i, char *buf, size_t size)
{
	const struct item *it = i < m->n ? &m->v[i] : NULL;

	if (!it)
		snprintf(buf, size, "?");
	else if (it->line > 0)
		snprintf(buf, size, "%s:%d:%d", m->files[it->file], it->line, it->col);
	else
		snprintf(buf, size, "%s: document %zu", m->files[it->file], it->doc + 1);
	return buf;
}
