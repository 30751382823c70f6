#include "drasync/metrics.h"

#include "drasync/string_table.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct series {
	char **values; /* one per label of the family */
	double value;  /* counter, gauge; histogram: the sum */
	double count;  /* histogram */
	double *buckets;
};

struct family {
	char *name, *help;
	enum ds_metric_type type;
	char *labels[DS_METRICS_MAX_LABELS];
	size_t n_labels;
	double bounds[DS_METRICS_MAX_BUCKETS];
	size_t n_bounds;
	struct series *series;
	size_t n_series, cap_series;
};

struct ds_metrics {
	pthread_mutex_t lock;
	struct family *fams;
	size_t n_fams, cap_fams;
	ds_metrics_collect_fn collect;
	void *collect_ud;
};

static const char *const ds_metric_type_table[DS_METRIC_TYPE_MAX] = {"counter", "gauge",
								     "histogram"};
DS_DEFINE_PRIVATE_STRING_TABLE_LOOKUP(ds_metric_type, enum ds_metric_type)

const char *ds_metric_type_name(enum ds_metric_type t)
{
	const char *s = ds_metric_type_to_string(t);

	return s ? s : "untyped";
}

int ds_metrics_new(ds_metrics **out)
{
	ds_metrics *m = calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	pthread_mutex_init(&m->lock, NULL);
	*out = m;
	return 0;
}

static void series_dispose(struct series *s, size_t n_labels)
{
	for (size_t i = 0; s->values && i < n_labels; i++)
		free(s->values[i]);
	free(s->values);
	free(s->buckets);
}

static void family_dispose(struct family *f)
{
	for (size_t i = 0; i < f->n_series; i++)
		series_dispose(&f->series[i], f->n_labels);
	free(f->series);
	for (size_t i = 0; i < f->n_labels; i++)
		free(f->labels[i]);
	free(f->name);
	free(f->help);
}

void ds_metrics_free(ds_metrics *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n_fams; i++)
		family_dispose(&m->fams[i]);
	free(m->fams);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* [a-zA-Z_:][a-zA-Z0-9_:]* for metrics; labels without the colon. */
static bool valid_name(const char *s, bool label)
{
	if (!s || !*s || isdigit((unsigned char)*s))
		return false;
	for (; *s; s++)
		if (!(isalnum((unsigned char)*s) || *s == '_' || (!label && *s == ':')))
			return false;
	return true;
}

/* Split "kind,result" into f->labels. */
static int parse_labels(struct family *f, const char *labels, ds_err *err)
{
	const char *p = labels;

	while (p && *p) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		char *name;

		if (f->n_labels == DS_METRICS_MAX_LABELS) {
			ds_err_set(err, "%s: more than %d labels", f->name, DS_METRICS_MAX_LABELS);
			return -EINVAL;
		}
		name = strndup(p, len);
		if (!name)
			return -ENOMEM;
		f->labels[f->n_labels++] = name;
		if (!valid_name(name, true) || strncmp(name, "__", 2) == 0 ||
		    (f->type == DS_METRIC_HISTOGRAM && strcmp(name, "le") == 0)) {
			ds_err_set(err, "%s: label name '%s' is not valid", f->name, name);
			return -EINVAL;
		}
		for (size_t i = 0; i + 1 < f->n_labels; i++)
			if (strcmp(f->labels[i], name) == 0) {
				ds_err_set(err, "%s: label '%s' twice", f->name, name);
				return -EINVAL;
			}
		p = comma ? comma + 1 : NULL;
	}
	return 0;
}

static int check_def(const ds_metric_def *def, ds_err *err)
{
	if (!valid_name(def->name, false)) {
		ds_err_set(err, "metric name '%s' is not valid", def->name ? def->name : "");
		return -EINVAL;
	}
	if (def->type >= DS_METRIC_TYPE_MAX) {
		ds_err_set(err, "%s: no such metric type", def->name);
		return -EINVAL;
	}
	if (def->type == DS_METRIC_COUNTER && !ends_with(def->name, "_total")) {
		ds_err_set(err, "%s: a counter's name ends in _total", def->name);
		return -EINVAL;
	}
	if (def->type != DS_METRIC_COUNTER && ends_with(def->name, "_total")) {
		ds_err_set(err, "%s: only a counter's name ends in _total", def->name);
		return -EINVAL;
	}
	if (def->type == DS_METRIC_HISTOGRAM) {
		if (ends_with(def->name, "_bucket") || ends_with(def->name, "_sum") ||
		    ends_with(def->name, "_count")) {
			ds_err_set(err,
				   "%s: a histogram's name may not end in _bucket, _sum, _count",
				   def->name);
			return -EINVAL;
		}
		if (!def->buckets || def->n_buckets == 0 ||
		    def->n_buckets > DS_METRICS_MAX_BUCKETS) {
			ds_err_set(err, "%s: a histogram needs 1 to %d buckets", def->name,
				   DS_METRICS_MAX_BUCKETS);
			return -EINVAL;
		}
		for (size_t i = 0; i < def->n_buckets; i++)
			if (!isfinite(def->buckets[i]) ||
			    (i > 0 && !(def->buckets[i] > def->buckets[i - 1]))) {
				ds_err_set(err, "%s: buckets must be finite and ascending",
					   def->name);
				return -EINVAL;
			}
	}
	return 0;
}

static struct family *find(ds_metrics *m, const char *name)
{
	for (size_t i = 0; i < m->n_fams; i++)
		if (strcmp(m->fams[i].name, name) == 0)
			return &m->fams[i];
	return NULL;
}

static bool same_def(const struct family *f, const struct family *g)
{
	if (f->type != g->type || f->n_labels != g->n_labels)
		return false;
	for (size_t i = 0; i < f->n_labels; i++)
		if (strcmp(f->labels[i], g->labels[i]) != 0)
			return false;
	return true;
}

int ds_metrics_define(ds_metrics *m, const ds_metric_def *def, ds_err *err)
{
	struct family f = {0}, *have;
	int rc;

	rc = check_def(def, err);
	if (rc < 0)
		return rc;
	f.type = def->type;
	f.name = strdup(def->name);
	f.help = strdup(def->help ? def->help : "");
	if (!f.name || !f.help) {
		rc = -ENOMEM;
		goto out;
	}
	rc = parse_labels(&f, def->labels, err);
	if (rc < 0)
		goto out;
	if (def->type == DS_METRIC_HISTOGRAM) {
		memcpy(f.bounds, def->buckets, def->n_buckets * sizeof(*f.bounds));
		f.n_bounds = def->n_buckets;
	}
	pthread_mutex_lock(&m->lock);
	have = find(m, def->name);
	if (have) {
		rc = same_def(have, &f) ? 0 : -EEXIST;
		if (rc < 0)
			ds_err_set(err, "%s: defined twice, differently", def->name);
	} else {
		rc = ds_grow((void **)&m->fams, &m->cap_fams, m->n_fams + 1, sizeof(*m->fams));
		if (rc == 0) {
			m->fams[m->n_fams++] = f;
			memset(&f, 0, sizeof(f));
		}
	}
	pthread_mutex_unlock(&m->lock);
out:
	family_dispose(&f);
	return ds_err_fallback(err, rc);
}

int ds_metrics_define_all(ds_metrics *m, const ds_metric_def *defs, size_t n, ds_err *err)
{
	for (size_t i = 0; i < n; i++) {
		int rc = ds_metrics_define(m, &defs[i], err);

		if (rc < 0)
			return rc;
	}
	return 0;
}

static bool same_values(const struct family *f, const struct series *s, const char *const *values)
{
	for (size_t i = 0; i < f->n_labels; i++)
		if (strcmp(s->values[i], values[i]) != 0)
			return false;
	return true;
}

/* The series of values, created when missing. Under the lock. */
static int series_of(struct family *f, const char *const *values, struct series **out)
{
	struct series s = {0};

	for (size_t i = 0; i < f->n_labels; i++)
		if (!values || !values[i])
			return -EINVAL;
	for (size_t i = 0; i < f->n_series; i++)
		if (same_values(f, &f->series[i], values)) {
			*out = &f->series[i];
			return 0;
		}
	if (f->n_series >= DS_METRICS_MAX_SERIES)
		return -E2BIG;
	if (ds_grow((void **)&f->series, &f->cap_series, f->n_series + 1, sizeof(*f->series)) < 0)
		return -ENOMEM;
	if (f->n_labels && !(s.values = calloc(f->n_labels, sizeof(*s.values))))
		return -ENOMEM;
	if (f->n_bounds && !(s.buckets = calloc(f->n_bounds, sizeof(*s.buckets)))) {
		free(s.values);
		return -ENOMEM;
	}
	for (size_t i = 0; i < f->n_labels; i++)
		if (!(s.values[i] = strdup(values[i]))) {
			series_dispose(&s, f->n_labels);
			return -ENOMEM;
		}
	f->series[f->n_series] = s;
	*out = &f->series[f->n_series++];
	return 0;
}

enum op { OP_ADD, OP_SET, OP_OBSERVE };

static int update(ds_metrics *m, const char *name, const char *const *values, double v, enum op op)
{
	struct family *f;
	struct series *s;
	int rc = 0;

	if (isnan(v))
		return -EINVAL;
	pthread_mutex_lock(&m->lock);
	f = find(m, name);
	if (!f) {
		rc = -ENOENT;
		goto out;
	}
	if ((op == OP_OBSERVE) != (f->type == DS_METRIC_HISTOGRAM) ||
	    (op == OP_ADD && f->type == DS_METRIC_COUNTER && v < 0) ||
	    (op == OP_SET && f->type == DS_METRIC_COUNTER && v < 0)) {
		rc = -EINVAL;
		goto out;
	}
	rc = series_of(f, values, &s);
	if (rc < 0)
		goto out;
	switch (op) {
	case OP_ADD:
		s->value += v;
		break;
	case OP_SET:
		s->value = v;
		break;
	case OP_OBSERVE:
		s->value += v;
		s->count += 1;
		for (size_t i = 0; i < f->n_bounds; i++)
			if (v <= f->bounds[i])
				s->buckets[i] += 1;
		break;
	}
out:
	pthread_mutex_unlock(&m->lock);
	return rc;
}

int ds_metrics_add(ds_metrics *m, const char *name, const char *const *values, double delta)
{
	return update(m, name, values, delta, OP_ADD);
}

int ds_metrics_set(ds_metrics *m, const char *name, const char *const *values, double value)
{
	return update(m, name, values, value, OP_SET);
}

int ds_metrics_observe(ds_metrics *m, const char *name, const char *const *values, double v)
{
	return update(m, name, values, v, OP_OBSERVE);
}

int ds_metrics_clear(ds_metrics *m, const char *name)
{
	struct family *f;
	int rc = 0;

	pthread_mutex_lock(&m->lock);
	f = find(m, name);
	if (f) {
		for (size_t i = 0; i < f->n_series; i++)
			series_dispose(&f->series[i], f->n_labels);
		f->n_series = 0;
	} else {
		rc = -ENOENT;
	}
	pthread_mutex_unlock(&m->lock);
	return rc;
}

int ds_metrics_value(ds_metrics *m, const char *name, const char *const *values, double *out)
{
	struct family *f;
	int rc = -ENOENT;

	pthread_mutex_lock(&m->lock);
	f = find(m, name);
	for (size_t i = 0; f && f->type != DS_METRIC_HISTOGRAM && i < f->n_series; i++)
		if (f->n_labels == 0 || (values && same_values(f, &f->series[i], values))) {
			*out = f->series[i].value;
			rc = 0;
			break;
		}
	pthread_mutex_unlock(&m->lock);
	return rc;
}

void ds_metrics_set_collector(ds_metrics *m, ds_metrics_collect_fn fn, void *ud)
{
	pthread_mutex_lock(&m->lock);
	m->collect = fn;
	m->collect_ud = ud;
	pthread_mutex_unlock(&m->lock);
}

int ds_metrics_format_value(ds_str *out, double v)
{
	if (isnan(v))
		return ds_str_adds(out, "NaN");
	if (isinf(v))
		return ds_str_adds(out, v > 0 ? "+Inf" : "-Inf");
	/* Counts are integers: print them exactly, without an exponent. */
	if (v == floor(v) && fabs(v) < 9007199254740992.0)
		return ds_str_addf(out, "%.0f", v);
	/* The shortest form that reads back as the same double (0.1, not
	 * 0.10000000000000001): what a person reads and what Prometheus parses. */
	for (int prec = 15; prec < 17; prec++) {
		char b[40];

		snprintf(b, sizeof(b), "%.*g", prec, v);
		if (strtod(b, NULL) == v)
			return ds_str_adds(out, b);
	}
	return ds_str_addf(out, "%.17g", v);
}

int ds_metrics_escape_label(ds_str *out, const char *v)
{
	for (const char *p = v; *p; p++) {
		const char *esc = *p == '\\'   ? "\\\\"
				  : *p == '"'  ? "\\\""
				  : *p == '\n' ? "\\n"
					       : NULL;
		int rc = esc ? ds_str_adds(out, esc) : ds_str_add(out, p, 1);

		if (rc < 0)
			return rc;
	}
	return 0;
}

/* HELP text escapes backslash and newline only. */
static void add_help(ds_str *out, const char *help)
{
	for (const char *p = help; *p; p++) {
		if (*p == '\\')
			ds_str_adds(out, "\\\\");
		else if (*p == '\n')
			ds_str_adds(out, "\\n");
		else
			ds_str_add(out, p, 1);
	}
}

/* {a="x",b="y"[,le="0.5"]}, or nothing without labels. */
static void add_labels(ds_str *out, const struct family *f, const struct series *s, const char *le)
{
	if (f->n_labels == 0 && !le)
		return;
	ds_str_adds(out, "{");
	for (size_t i = 0; i < f->n_labels; i++) {
		ds_str_addf(out, "%s%s=\"", i ? "," : "", f->labels[i]);
		ds_metrics_escape_label(out, s->values[i]);
		ds_str_adds(out, "\"");
	}
	if (le)
		ds_str_addf(out, "%sle=\"%s\"", f->n_labels ? "," : "", le);
	ds_str_adds(out, "}");
}

static void render_series(ds_str *out, const struct family *f, const struct series *s)
{
	char le[64];

	if (f->type != DS_METRIC_HISTOGRAM) {
		ds_str_adds(out, f->name);
		add_labels(out, f, s, NULL);
		ds_str_adds(out, " ");
		ds_metrics_format_value(out, s->value);
		ds_str_adds(out, "\n");
		return;
	}
	for (size_t i = 0; i <= f->n_bounds; i++) {
		ds_str bound;

		ds_str_init(&bound, sizeof(le) - 1);
		if (i < f->n_bounds)
			ds_metrics_format_value(&bound, f->bounds[i]);
		snprintf(le, sizeof(le), "%s", i < f->n_bounds ? ds_str_ptr(&bound) : "+Inf");
		ds_str_dispose(&bound);
		ds_str_addf(out, "%s_bucket", f->name);
		add_labels(out, f, s, le);
		ds_str_adds(out, " ");
		ds_metrics_format_value(out, i < f->n_bounds ? s->buckets[i] : s->count);
		ds_str_adds(out, "\n");
	}
	ds_str_addf(out, "%s_sum", f->name);
	add_labels(out, f, s, NULL);
	ds_str_adds(out, " ");
	ds_metrics_format_value(out, s->value);
	ds_str_addf(out, "\n%s_count", f->name);
	add_labels(out, f, s, NULL);
	ds_str_adds(out, " ");
	ds_metrics_format_value(out, s->count);
	ds_str_adds(out, "\n");
}

int ds_metrics_render(ds_metrics *m, ds_str *out)
{
	ds_metrics_collect_fn collect;
	void *ud;

	pthread_mutex_lock(&m->lock);
	collect = m->collect;
	ud = m->collect_ud;
	pthread_mutex_unlock(&m->lock);
	if (collect)
		collect(ud, m);
	pthread_mutex_lock(&m->lock);
	for (size_t i = 0; i < m->n_fams; i++) {
		const struct family *f = &m->fams[i];

		ds_str_addf(out, "# HELP %s ", f->name);
		add_help(out, f->help);
		ds_str_addf(out, "\n# TYPE %s %s\n", f->name, ds_metric_type_name(f->type));
		if (f->n_series == 0 && f->n_labels == 0) {
			struct series zero = {0};
			double zb[DS_METRICS_MAX_BUCKETS] = {0};

			zero.buckets = zb;
			render_series(out, f, &zero);
		}
		for (size_t j = 0; j < f->n_series; j++)
			render_series(out, f, &f->series[j]);
	}
	pthread_mutex_unlock(&m->lock);
	return ds_str_error(out);
}

size_t ds_metrics_count(ds_metrics *m)
{
	size_t n;

	pthread_mutex_lock(&m->lock);
	n = m->n_fams;
	pthread_mutex_unlock(&m->lock);
	return n;
}

const char *ds_metrics_name(ds_metrics *m, size_t i)
{
	const char *name = NULL;

	pthread_mutex_lock(&m->lock);
	if (i < m->n_fams)
		name = m->fams[i].name;
	pthread_mutex_unlock(&m->lock);
	return name;
}

enum ds_metric_type ds_metrics_type(ds_metrics *m, size_t i)
{
	enum ds_metric_type t = DS_METRIC_TYPE_MAX;

	pthread_mutex_lock(&m->lock);
	if (i < m->n_fams)
		t = m->fams[i].type;
	pthread_mutex_unlock(&m->lock);
	return t;
}
