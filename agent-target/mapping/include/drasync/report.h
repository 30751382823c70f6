#ifndef DRASYNC_REPORT_H
#define DRASYNC_REPORT_H

/*
 * What the import pipeline did to each object: every DRA rewrite (workload,
 * container, entry, from -> to), every skip and its reason, every error.
 * `plan` prints it; the running importer logs it and counts it in metrics.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

enum ds_report_type {
	DS_REPORT_REWRITE,	/* a claim reference now points elsewhere */
	DS_REPORT_SPLIT,	/* a shared pod-level entry was split */
	DS_REPORT_ATTACH,	/* a container without claims was given one (attach: true) */
	DS_REPORT_RESOURCE,	/* an extended resource limit/request was removed */
	DS_REPORT_DEVICE_CLASS, /* deviceClassName renamed in a claim or template */
	DS_REPORT_NAMESPACE,	/* the object moves to another namespace */
	DS_REPORT_CONVERT,	/* resource.k8s.io version conversion */
	DS_REPORT_STANDBY,	/* standby transformation */
	DS_REPORT_HOLD,		/* kept in the ledger until failover (standby Pods and Jobs) */
	DS_REPORT_REQUIRE,	/* the object needs another object to exist on the target */
	DS_REPORT_SKIP,		/* the object is not replicated, and why */
	DS_REPORT_ERROR,	/* the object cannot be imported, and why */
	DS_REPORT_EXTENDED,	/* an extended resource is kept in limits, and what serves it */
	DS_REPORT_ATTRIBUTES,	/* KEP-5304: the device-attribute files a container reads move */
	DS_REPORT_TYPE_MAX
};

typedef struct ds_report_entry {
	enum ds_report_type type;
	char *object;	 /* "Deployment ml-team/gpu-app" */
	char *container; /* NULL when not about one container */
	char *entry;	 /* pod-level resourceClaims entry, or NULL */
	char *from, *to; /* NULL when not a change */
	char *message;	 /* detail / reason, or NULL */
} ds_report_entry;

typedef struct ds_report ds_report;

int ds_report_new(ds_report **out);
void ds_report_free(ds_report *rep);

/**
 * Append an entry; every string is copied, any may be NULL.
 * @return 0 or -ENOMEM
 */
int ds_report_add(ds_report *rep, enum ds_report_type type, const char *object,
		  const char *container, const char *entry, const char *from, const char *to,
		  const char *message);

/** As ds_report_add() with a printf-formatted message. */
int ds_report_addf(ds_report *rep, enum ds_report_type type, const char *object, const char *fmt,
		   ...) __attribute__((format(printf, 4, 5)));

size_t ds_report_count(const ds_report *rep);
const ds_report_entry *ds_report_get(const ds_report *rep, size_t i);

/** Entries of one type. */
size_t ds_report_count_type(const ds_report *rep, enum ds_report_type type);

/** Drop entries from index `n` on (undo what a failed object added). */
void ds_report_truncate(ds_report *rep, size_t n);

/** "rewrite", "skip", ... */
const char *ds_report_type_name(enum ds_report_type type);

/** Write one entry as a human line ("rewrite  Pod ns/p container=c entry=e: a -> b"). */
void ds_report_entry_print(FILE *out, const ds_report_entry *e);

/** Write every entry, then a summary line. */
void ds_report_print(FILE *out, const ds_report *rep);

#endif
