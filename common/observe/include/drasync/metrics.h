#ifndef DRASYNC_METRICS_H
#define DRASYNC_METRICS_H

/*
 * A registry of Prometheus metrics and its text exposition (format 0.0.4,
 * what `promtool check metrics` reads). Families are defined once, each with
 * its type, help and label names; series are created on first use with one
 * value per label name. Every call is safe from any thread (one mutex).
 *
 * Names follow Prometheus' rules and are checked at definition: a counter
 * ends in _total, a histogram has buckets and no reserved suffix, label names
 * are [a-zA-Z_][a-zA-Z0-9_]*. A family holds at most DS_METRICS_MAX_SERIES
 * series: label values must come from bounded sets (kind, result, source),
 * never from object names; a series beyond the cap is refused (-E2BIG).
 *
 * A collector, set with ds_metrics_set_collector(), runs at the start of each
 * render outside the registry's lock, so it may read other modules' getters
 * and set gauges from them.
 */

#include "drasync/buf.h"
#include "drasync/err.h"

#include <stddef.h>

#define DS_METRICS_MAX_SERIES 512
#define DS_METRICS_MAX_LABELS 4
#define DS_METRICS_MAX_BUCKETS 24

typedef struct ds_metrics ds_metrics;

enum ds_metric_type { DS_METRIC_COUNTER, DS_METRIC_GAUGE, DS_METRIC_HISTOGRAM, DS_METRIC_TYPE_MAX };

typedef struct ds_metric_def {
	const char *name; /* drasync_target_objects_applied_total */
	enum ds_metric_type type;
	const char *help;
	const char *labels;    /* "kind,result"; NULL or "": none */
	const double *buckets; /* histograms: upper bounds, ascending (+Inf is implied) */
	size_t n_buckets;
} ds_metric_def;

/* Called at the start of each render, outside the registry's lock. */
typedef void (*ds_metrics_collect_fn)(void *ud, ds_metrics *m);

/** An empty registry. @return 0, -ENOMEM */
int ds_metrics_new(ds_metrics **out);
void ds_metrics_free(ds_metrics *m);

/**
 * Define a family (copied). Defining the same name again with the same type
 * and labels is a no-op. @return 0, -EINVAL (bad name, type, labels or
 * buckets; err says which), -EEXIST (same name, different definition), -ENOMEM
 */
int ds_metrics_define(ds_metrics *m, const ds_metric_def *def, ds_err *err);

/** ds_metrics_define() of n definitions, stopping at the first failure. */
int ds_metrics_define_all(ds_metrics *m, const ds_metric_def *defs, size_t n, ds_err *err);

/**
 * Add delta to a counter or gauge series; `values` has one string per label
 * of the family (NULL when it has none). A counter refuses a negative delta.
 * @return 0, -ENOENT (no such family), -EINVAL (wrong type, bad delta or a
 *         NULL value), -E2BIG (the family is full), -ENOMEM
 */
int ds_metrics_add(ds_metrics *m, const char *name, const char *const *values, double delta);

/**
 * Set a gauge series, or a counter series mirrored from a cumulative count
 * kept elsewhere (the applier's stats). @return as ds_metrics_add()
 */
int ds_metrics_set(ds_metrics *m, const char *name, const char *const *values, double value);

/** Count one observation in a histogram series. @return as ds_metrics_add() */
int ds_metrics_observe(ds_metrics *m, const char *name, const char *const *values, double v);

/** Drop every series of a family (gauges recomputed from a snapshot). @return 0, -ENOENT */
int ds_metrics_clear(ds_metrics *m, const char *name);

/**
 * The value of one counter or gauge series, for tests and readiness. @return 0,
 * -ENOENT (no such family or series)
 */
int ds_metrics_value(ds_metrics *m, const char *name, const char *const *values, double *out);

/** Set the collector (replacing any). */
void ds_metrics_set_collector(ds_metrics *m, ds_metrics_collect_fn fn, void *ud);

/**
 * Run the collector, then append the exposition text of every family, in the
 * order defined, to out. A family without series shows its HELP and TYPE
 * only (an unlabelled counter or gauge shows 0). @return 0, or out's error
 */
int ds_metrics_render(ds_metrics *m, ds_str *out);

/** The number of families. */
size_t ds_metrics_count(ds_metrics *m);

/** The name of family i (borrowed, lives as long as m), NULL past the end. */
const char *ds_metrics_name(ds_metrics *m, size_t i);

/** The type of family i; DS_METRIC_TYPE_MAX past the end. */
enum ds_metric_type ds_metrics_type(ds_metrics *m, size_t i);

/** "counter", "gauge", "histogram". */
const char *ds_metric_type_name(enum ds_metric_type t);

/**
 * Append value as the exposition writes it: integers without a fraction,
 * others in the shortest form (up to 17 digits) that reads back as the same
 * double, NaN, +Inf, -Inf. @return as ds_str_addf
 */
int ds_metrics_format_value(ds_str *out, double v);

/** Append a label value with \\, " and newline escaped. @return as ds_str_add */
int ds_metrics_escape_label(ds_str *out, const char *v);

#endif
