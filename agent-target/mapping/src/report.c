#include "drasync/report.h"

#include "drasync/buf.h"
#include "drasync/string_table.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

struct ds_report {
	ds_report_entry *v;
	size_t n, cap;
};

static const char *const ds_report_type_table[DS_REPORT_TYPE_MAX] = {
    "rewrite", "split", "attach",  "resource", "deviceclass", "namespace", "convert",
    "standby", "hold",	"require", "skip",     "error",	      "extended",  "attributes",
};
DS_DEFINE_PRIVATE_STRING_TABLE_LOOKUP(ds_report_type, enum ds_report_type)

const char *ds_report_type_name(enum ds_report_type type)
{
	const char *s = ds_report_type_to_string(type);

	return s ? s : "?";
}

int ds_report_new(ds_report **out)
{
	ds_report *rep = calloc(1, sizeof(*rep));

	if (!rep)
		return -ENOMEM;
	*out = rep;
	return 0;
}

static void entry_dispose(ds_report_entry *e)
{
	free(e->object);
	free(e->container);
	free(e->entry);
	free(e->from);
	free(e->to);
	free(e->message);
}

void ds_report_free(ds_report *rep)
{
	if (!rep)
		return;
	ds_report_truncate(rep, 0);
	free(rep->v);
	free(rep);
}

void ds_report_truncate(ds_report *rep, size_t n)
{
	while (rep->n > n)
		entry_dispose(&rep->v[--rep->n]);
}

static int dup_opt(const char *s, char **out)
{
	*out = NULL;
	if (!s)
		return 0;
	*out = strdup(s);
	return *out ? 0 : -ENOMEM;
}

int ds_report_add(ds_report *rep, enum ds_report_type type, const char *object,
		  const char *container, const char *entry, const char *from, const char *to,
		  const char *message)
{
	ds_report_entry e = {.type = type};

	if (!rep)
		return 0;
	if (ds_grow((void **)&rep->v, &rep->cap, rep->n + 1, sizeof(*rep->v)) < 0)
		return -ENOMEM;
	if (dup_opt(object, &e.object) < 0 || dup_opt(container, &e.container) < 0 ||
	    dup_opt(entry, &e.entry) < 0 || dup_opt(from, &e.from) < 0 || dup_opt(to, &e.to) < 0 ||
	    dup_opt(message, &e.message) < 0) {
		entry_dispose(&e);
		return -ENOMEM;
	}
	rep->v[rep->n++] = e;
	return 0;
}

int ds_report_addf(ds_report *rep, enum ds_report_type type, const char *object, const char *fmt,
		   ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return ds_report_add(rep, type, object, NULL, NULL, NULL, NULL, msg);
}

size_t ds_report_count(const ds_report *rep)
{
	return rep ? rep->n : 0;
}

const ds_report_entry *ds_report_get(const ds_report *rep, size_t i)
{
	return rep && i < rep->n ? &rep->v[i] : NULL;
}

size_t ds_report_count_type(const ds_report *rep, enum ds_report_type type)
{
	size_t n = 0;

	for (size_t i = 0; rep && i < rep->n; i++)
		n += rep->v[i].type == type;
	return n;
}

void ds_report_entry_print(FILE *out, const ds_report_entry *e)
{
	fprintf(out, "%-11s %s", ds_report_type_name(e->type), e->object ? e->object : "-");
	if (e->container)
		fprintf(out, " container=%s", e->container);
	if (e->entry)
		fprintf(out, " entry=%s", e->entry);
	if (e->from || e->to)
		fprintf(out, ": %s -> %s", e->from ? e->from : "(none)", e->to ? e->to : "(none)");
	if (e->message)
		fprintf(out, "%s%s", (e->from || e->to) ? " " : ": ", e->message);
	fputc('\n', out);
}

void ds_report_print(FILE *out, const ds_report *rep)
{
	for (size_t i = 0; rep && i < rep->n; i++)
		ds_report_entry_print(out, &rep->v[i]);
}
