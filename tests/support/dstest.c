#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dstest.h"

#include "drasync/k8s_object.h"
#include "drasync/yaml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ds_target_config *dt_config(const char *yaml)
{
	ds_target_config *cfg = NULL;
	ds_err err = {0};
	char buf[600];

	ds_err_clear(&err);
	if (ds_target_config_parse(&cfg, yaml, strlen(yaml), "test.yaml", &err) < 0)
		fail_msg("config does not load: %s", ds_err_format(&err, buf, sizeof(buf)));
	return cfg;
}

json_t *dt_object(const char *yaml)
{
	json_t *docs = NULL, *obj;
	ds_err err = {0};

	ds_err_clear(&err);
	if (ds_yaml_parse(yaml, strlen(yaml), "test", 0, &docs, NULL, &err) < 0)
		fail_msg("object does not parse: %s", err.msg);
	assert_int_equal(json_array_size(docs), 1);
	obj = json_incref(json_array_get(docs, 0));
	json_decref(docs);
	return obj;
}

json_t *dt_load_file(const char *path)
{
	json_t *docs = NULL;
	ds_err err = {0};
	char buf[600];

	ds_err_clear(&err);
	if (ds_yaml_parse_file(path, 0, &docs, NULL, &err) < 0)
		fail_msg("%s does not parse: %s", path, ds_err_format(&err, buf, sizeof(buf)));
	return docs;
}

json_t *dt_find(json_t *objs, const char *kind, const char *name)
{
	size_t i;
	json_t *o;

	json_array_foreach (objs, i, o) {
		const char *k = ds_obj_kind(o), *n = ds_obj_name(o);
		if (k && n && strcmp(k, kind) == 0 && strcmp(n, name) == 0)
			return o;
	}
	fail_msg("no %s named %s", kind, name);
	return NULL;
}

json_t *dt_get(const json_t *obj, const char *ptr)
{
	char seg[256];
	const json_t *cur = obj;
	const char *p = ptr;

	while (cur && *p == '/') {
		size_t n = strcspn(p + 1, "/");

		if (n >= sizeof(seg))
			return NULL;
		memcpy(seg, p + 1, n);
		seg[n] = '\0';
		/* RFC 6901 escapes: "~1" is '/', "~0" is '~'. */
		for (char *q = seg; (q = strchr(q, '~')) != NULL; q++) {
			if (q[1] == '1' || q[1] == '0') {
				*q = q[1] == '1' ? '/' : '~';
				memmove(q + 1, q + 2, strlen(q + 2) + 1);
			}
		}
		p += 1 + n;
		if (json_is_array(cur)) {
			char *end;
			unsigned long idx = strtoul(seg, &end, 10);
			cur = *end ? NULL : json_array_get(cur, idx);
		} else if (json_is_object(cur)) {
			cur = json_object_get(cur, seg);
		} else {
			cur = NULL;
		}
	}
	return (json_t *)(uintptr_t)cur;
}

const char *dt_str(const json_t *obj, const char *ptr)
{
	json_t *v = dt_get(obj, ptr);

	return json_is_string(v) ? json_string_value(v) : NULL;
}

static int has(const char *field, const char *want)
{
	return !want || (field && strstr(field, want));
}

size_t dt_count(const ds_report *rep, enum ds_report_type type, const char *object,
		const char *container, const char *entry, const char *from, const char *to)
{
	size_t n = 0;

	for (size_t i = 0; i < ds_report_count(rep); i++) {
		const ds_report_entry *e = ds_report_get(rep, i);
		if (e->type == type && has(e->object, object) && has(e->container, container) &&
		    has(e->entry, entry) && has(e->from, from) && has(e->to, to))
			n++;
	}
	return n;
}

void dt_dump(const ds_report *rep)
{
	ds_report_print(stderr, rep);
}
