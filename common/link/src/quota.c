#include "drasync/quota.h"

#include "drasync/buf.h"
#include "drasync/clock.h"
#include "drasync/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sources come from the authorized-sources file and the ledger: a bound all the same. */
#define MAX_SOURCES 4096
#define NAME_MAX_LEN 128

static const char *const kind_names[DS_QUOTA_KIND_MAX] = {
    [DS_QUOTA_NONE] = "none",
    [DS_QUOTA_BACKLOG] = "backlog",
    [DS_QUOTA_LEDGER_BYTES] = "ledger_bytes",
    [DS_QUOTA_TOTAL_BACKLOG] = "total_backlog",
};

const char *ds_quota_kind_name(enum ds_quota_kind k)
{
	return k < DS_QUOTA_KIND_MAX ? kind_names[k] : "?";
}

/* ---- the decisions (pure) ---------------------------------------------------- */

static uint64_t backlog_limit(const ds_quota_usage *u, const ds_quota_total *t)
{
	return u->limits.max_unapplied ? u->limits.max_unapplied : t->max_unapplied;
}

/* The ceiling's share of one source: what it may hold whatever the others hold. */
static uint64_t share(const ds_quota_total *t)
{
	uint64_t s = t->max_unapplied / (t->sources ? t->sources : 1);

	return s ? s : 1;
}

/* Resumed below three quarters of the limit: room for more than a record again. */
static uint64_t low_water(uint64_t limit)
{
	return limit - limit / 4;
}

/* Over a limit (0: none); once throttled, until under its low-water mark. */
static bool over(uint64_t value, uint64_t limit, bool throttled)
{
	if (!limit)
		return false;
	return value >= (throttled ? low_water(limit) : limit);
}

enum ds_quota_kind ds_quota_state(const ds_quota_usage *u, const ds_quota_total *t,
				  enum ds_quota_kind was)
{
	bool th = was != DS_QUOTA_NONE;

	if (over(u->ledger_bytes, u->limits.max_ledger_bytes, th))
		return DS_QUOTA_LEDGER_BYTES;
	if (over(u->backlog, backlog_limit(u, t), th))
		return DS_QUOTA_BACKLOG;
	if (t->max_unapplied && over(t->backlog, t->max_unapplied, th) &&
	    over(u->backlog, share(t), th))
		return DS_QUOTA_TOTAL_BACKLOG;
	return DS_QUOTA_NONE;
}

uint32_t ds_quota_credit(uint32_t credit, const ds_quota_usage *u, const ds_quota_total *t,
			 enum ds_quota_kind state)
{
	uint64_t lim = backlog_limit(u, t), room = credit;

	if (state != DS_QUOTA_NONE)
		return 0;
	if (lim) {
		uint64_t own = lim > u->backlog ? lim - u->backlog : 0;
		room = own < room ? own : room;
	}
	if (t->max_unapplied) {
		uint64_t total = t->max_unapplied > t->backlog ? t->max_unapplied - t->backlog : 0;
		uint64_t fair = share(t) > u->backlog ? share(t) - u->backlog : 0;
		uint64_t ceiling = total > fair ? total : fair;
		room = ceiling < room ? ceiling : room;
	}
	return (uint32_t)room;
}

void ds_quota_measure(const ds_quota_usage *u, const ds_quota_total *t, enum ds_quota_kind kind,
		      uint64_t *value, uint64_t *limit)
{
	switch (kind) {
	case DS_QUOTA_LEDGER_BYTES:
		*value = u->ledger_bytes;
		*limit = u->limits.max_ledger_bytes;
		break;
	case DS_QUOTA_TOTAL_BACKLOG:
		*value = t->backlog;
		*limit = t->max_unapplied;
		break;
	default:
		*value = u->backlog;
		*limit = backlog_limit(u, t);
		break;
	}
}

/* ---- the table ------------------------------------------------------------------ */

struct entry {
	char name[NAME_MAX_LEN];
	ds_quota_usage u;
	enum ds_quota_kind state;
	int64_t since_ms; /* when it was throttled */
	uint64_t total;	  /* what the ceiling looked like then */
	/* A recount in progress, published whole by the next judge: a reader
	 * (metrics, status) never sees a backlog half counted again. */
	uint64_t counted, counted_bytes;
};

struct ds_quota {
	pthread_mutex_t lock;
	struct entry *e;
	size_t n, cap;
	uint64_t max_unapplied;
	uint64_t total; /* the sum of the backlogs */
	uint64_t counted_total;
	bool recount_backlog, recount_bytes; /* begun, not yet published */
	size_t sessions;
	ds_quota_limits_fn limits_fn;
	void *limits_ud;
	ds_transport_event_fn on_event;
	void *event_ud;
};

int ds_quota_new(ds_quota **out, uint64_t max_unapplied, ds_quota_limits_fn limits_fn,
		 void *limits_ud, ds_transport_event_fn on_event, void *event_ud)
{
	ds_quota *q = calloc(1, sizeof(*q));

	if (!q)
		return -ENOMEM;
	pthread_mutex_init(&q->lock, NULL);
	q->max_unapplied = max_unapplied;
	q->limits_fn = limits_fn;
	q->limits_ud = limits_ud;
	q->on_event = on_event;
	q->event_ud = event_ud;
	*out = q;
	return 0;
}

void ds_quota_free(ds_quota *q)
{
	if (!q)
		return;
	pthread_mutex_destroy(&q->lock);
	free(q->e);
	free(q);
}

/* With the lock held: the entry of source, made when create is set. */
static struct entry *find(ds_quota *q, const char *source, bool create)
{
	struct entry *e;

	for (size_t i = 0; i < q->n; i++)
		if (strcmp(q->e[i].name, source) == 0)
			return &q->e[i];
	if (!create || q->n >= MAX_SOURCES || strlen(source) >= NAME_MAX_LEN)
		return NULL;
	if (ds_grow((void **)&q->e, &q->cap, q->n + 1, sizeof(*q->e)) < 0)
		return NULL;
	e = &q->e[q->n++];
	memset(e, 0, sizeof(*e));
	snprintf(e->name, sizeof(e->name), "%s", source);
	/* Its limits from the start: its first batch may already reach them. */
	if (q->limits_fn)
		q->limits_fn(q->limits_ud, e->name, &e->u.limits);
	return e;
}

void ds_quota_backlog_begin(ds_quota *q)
{
	pthread_mutex_lock(&q->lock);
	for (size_t i = 0; i < q->n; i++)
		q->e[i].counted = 0;
	q->counted_total = 0;
	q->recount_backlog = true;
	pthread_mutex_unlock(&q->lock);
}

int ds_quota_count_backlog(ds_quota *q, const char *source, uint64_t n)
{
	struct entry *e;

	pthread_mutex_lock(&q->lock);
	e = find(q, source, true);
	if (e) {
		q->counted_total += n;
		e->counted += n;
	}
	pthread_mutex_unlock(&q->lock);
	return e ? 0 : -ENOSPC;
}

void ds_quota_bytes_begin(ds_quota *q)
{
	pthread_mutex_lock(&q->lock);
	for (size_t i = 0; i < q->n; i++)
		q->e[i].counted_bytes = 0;
	q->recount_bytes = true;
	pthread_mutex_unlock(&q->lock);
}

int ds_quota_set_bytes(ds_quota *q, const char *source, uint64_t bytes)
{
	struct entry *e;

	pthread_mutex_lock(&q->lock);
	e = find(q, source, true);
	if (e)
		e->counted_bytes = bytes;
	pthread_mutex_unlock(&q->lock);
	return e ? 0 : -ENOSPC;
}

static void emit(ds_quota *q, enum ds_log_level level, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void emit(ds_quota *q, enum ds_log_level level, const char *name, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ds_transport_event_emitv(q->on_event, q->event_ud, level, name, "", fmt, ap);
	va_end(ap);
}

/* The event of one transition, said once: the source, the quota, value and limit. */
static void report(ds_quota *q, const struct entry *e, enum ds_quota_kind was,
		   const ds_quota_total *t)
{
	char qs[300];
	uint64_t value, limit;

	ds_log_quote(e->name, qs, sizeof(qs));
	if (e->state != DS_QUOTA_NONE) {
		ds_quota_measure(&e->u, t, e->state, &value, &limit);
		emit(q, DS_LOG_WARN, "source_throttled",
		     "source=%s quota=%s value=%llu limit=%llu: no credit until it is under %llu",
		     qs, ds_quota_kind_name(e->state), (unsigned long long)value,
		     (unsigned long long)limit, (unsigned long long)low_water(limit));
		return;
	}
	ds_quota_measure(&e->u, t, was, &value, &limit);
	emit(q, DS_LOG_INFO, "source_resumed",
	     "source=%s quota=%s value=%llu limit=%llu throttled_ms=%lld: credit again", qs,
	     ds_quota_kind_name(was), (unsigned long long)value, (unsigned long long)limit,
	     (long long)(ds_clock_mono_ms() - e->since_ms));
}

/* With the lock held: e's state for t, reported when it changes. */
static void decide(ds_quota *q, struct entry *e, const ds_quota_total *t)
{
	enum ds_quota_kind was = e->state;

	e->state = ds_quota_state(&e->u, t, was);
	/* Said again when another quota takes over (a raised limit, say). */
	if (e->state == was)
		return;
	if (was == DS_QUOTA_NONE)
		e->since_ms = ds_clock_mono_ms();
	report(q, e, was, t);
}

static ds_quota_total total_of(const ds_quota *q)
{
	return (ds_quota_total){
	    .backlog = q->total, .max_unapplied = q->max_unapplied, .sources = q->sessions};
}

/* Judged at once with the limits of the last judge: a burst of batches stops at the quota,
 * not at the next recount. */
int ds_quota_add(ds_quota *q, const char *source, uint64_t records, uint64_t bytes)
{
	struct entry *e;
	ds_quota_total t;

	pthread_mutex_lock(&q->lock);
	e = find(q, source, true);
	if (e) {
		e->u.backlog += records;
		e->u.ledger_bytes += bytes;
		q->total += records;
		t = total_of(q);
		decide(q, e, &t);
	}
	pthread_mutex_unlock(&q->lock);
	return e ? 0 : -ENOSPC;
}

void ds_quota_judge(ds_quota *q, size_t sessions)
{
	ds_quota_total t;

	pthread_mutex_lock(&q->lock);
	for (size_t i = 0; i < q->n; i++) {
		if (q->recount_backlog)
			q->e[i].u.backlog = q->e[i].counted;
		if (q->recount_bytes)
			q->e[i].u.ledger_bytes = q->e[i].counted_bytes;
	}
	if (q->recount_backlog)
		q->total = q->counted_total;
	q->recount_backlog = q->recount_bytes = false;
	q->sessions = sessions;
	t = total_of(q);
	for (size_t i = 0; i < q->n; i++) {
		struct entry *e = &q->e[i];

		e->u.limits = (ds_quota_limits){0};
		if (q->limits_fn)
			q->limits_fn(q->limits_ud, e->name, &e->u.limits);
		decide(q, e, &t);
	}
	pthread_mutex_unlock(&q->lock);
}

uint32_t ds_quota_credit_for(ds_quota *q, const char *source, uint32_t credit)
{
	ds_quota_total t;
	struct entry *e;
	uint32_t c = credit;

	pthread_mutex_lock(&q->lock);
	t = (ds_quota_total){
	    .backlog = q->total, .max_unapplied = q->max_unapplied, .sources = q->sessions};
	e = find(q, source, true);
	if (e)
		c = ds_quota_credit(credit, &e->u, &t, e->state);
	else if (q->max_unapplied)
		c = q->total >= q->max_unapplied ? 0 : credit; /* beyond MAX_SOURCES */
	pthread_mutex_unlock(&q->lock);
	return c;
}

bool ds_quota_bytes_limited(ds_quota *q)
{
	bool any = false;

	pthread_mutex_lock(&q->lock);
	for (size_t i = 0; i < q->n && !any; i++)
		any = q->e[i].u.limits.max_ledger_bytes != 0;
	pthread_mutex_unlock(&q->lock);
	return any;
}

uint64_t ds_quota_total_backlog(const ds_quota *q)
{
	ds_quota *m = (ds_quota *)(uintptr_t)q;
	uint64_t n;

	pthread_mutex_lock(&m->lock);
	n = m->total;
	pthread_mutex_unlock(&m->lock);
	return n;
}

void ds_quota_each(ds_quota *q, void (*fn)(void *ud, const ds_quota_row *row), void *ud)
{
	pthread_mutex_lock(&q->lock);
	for (size_t i = 0; i < q->n; i++) {
		ds_quota_row row = {
		    .source = q->e[i].name, .usage = q->e[i].u, .throttled = q->e[i].state};
		fn(ud, &row);
	}
	pthread_mutex_unlock(&q->lock);
}
