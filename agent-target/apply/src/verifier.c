#include "drasync/verifier.h"

#include "drasync/buf.h"
#include "drasync/clock.h"
#include "drasync/k8s_object.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* While held, how often hold() is asked again. */
#define HOLD_POLL_MS 50

/* One workload waiting to verify. */
struct entry {
	char *kind, *ns, *name;
	long long added_ms, deadline_ms, next_ms;
	unsigned gen;	 /* bumped by each add: a check of an older version is not its outcome */
	unsigned checks; /* of this version, not verified yet: the next waits twice as long */
};

struct ds_verifier {
	ds_verifier_config cfg;
	ds_verify *verify;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	struct entry *entries;
	size_t n, cap;
	bool stop;
	bool held;		 /* the last step found hold() true (the verifier's thread's) */
	long long next_check_ms; /* the rate cap: no check before */
	unsigned long long checks;
};

int ds_verifier_new(ds_verifier **out, const ds_verifier_config *cfg, ds_err *err)
{
	ds_verifier *v = calloc(1, sizeof(*v));
	int rc;

	if (!v)
		return ds_err_fallback(err, -ENOMEM);
	v->cfg = *cfg;
	if (v->cfg.timeout_ms <= 0)
		v->cfg.timeout_ms = 300000;
	if (v->cfg.interval_ms <= 0)
		v->cfg.interval_ms = 2000;
	if (!v->cfg.max_pending)
		v->cfg.max_pending = 10000;
	if (v->cfg.max_interval_ms <= 0)
		v->cfg.max_interval_ms = 30000;
	if (v->cfg.checks_per_s <= 0)
		v->cfg.checks_per_s = 20;
	rc = ds_verify_new(&v->verify, cfg->kube, err);
	if (rc < 0) {
		free(v);
		return rc;
	}
	pthread_mutex_init(&v->mu, NULL);
	ds_cond_init_monotonic(&v->cond);
	*out = v;
	return 0;
}

static void entry_dispose(struct entry *e)
{
	free(e->kind);
	free(e->ns);
	free(e->name);
}

void ds_verifier_free(ds_verifier *v)
{
	if (!v)
		return;
	for (size_t i = 0; i < v->n; i++)
		entry_dispose(&v->entries[i]);
	free(v->entries);
	ds_verify_free(v->verify);
	pthread_mutex_destroy(&v->mu);
	pthread_cond_destroy(&v->cond);
	free(v);
}

static struct entry *find(ds_verifier *v, const char *kind, const char *ns, const char *name)
{
	for (size_t i = 0; i < v->n; i++)
		if (strcmp(v->entries[i].kind, kind) == 0 && strcmp(v->entries[i].ns, ns) == 0 &&
		    strcmp(v->entries[i].name, name) == 0)
			return &v->entries[i];
	return NULL;
}

static void remove_at(ds_verifier *v, size_t i)
{
	entry_dispose(&v->entries[i]);
	memmove(&v->entries[i], &v->entries[i + 1], (v->n - i - 1) * sizeof(v->entries[0]));
	v->n--;
}

static void settle(ds_verifier *v, ds_verify_item *it)
{
	ds_err err = {0};

	if (v->cfg.ledger_path && ds_verify_store(v->cfg.ledger_path, it, 1, &err) < 0 &&
	    it->reason[0]) {
		/* The outcome stands; say that status will not show it. */
		size_t len = strlen(it->reason);
		snprintf(it->reason + len, sizeof(it->reason) - len, " (not stored: %s)", err.msg);
	}
	if (v->cfg.on_result)
		v->cfg.on_result(v->cfg.result_ud, it);
}

static enum ds_verify_form form_of(ds_verifier *v, const char *ns)
{
	return v->cfg.form_of ? v->cfg.form_of(v->cfg.form_ud, ns) : DS_VERIFY_ACTIVE;
}

int ds_verifier_add(ds_verifier *v, const char *kind, const char *ns, const char *name)
{
	struct entry *e;
	long long now = ds_clock_mono_ms();
	int rc = 0;

	if (!kind || ds_workload_from_kind(kind) < 0 || !name)
		return -EINVAL;
	if (!ns)
		ns = "";
	pthread_mutex_lock(&v->mu);
	e = find(v, kind, ns, name);
	if (!e) {
		if (ds_grow((void **)&v->entries, &v->cap, v->n + 1, sizeof(*e)) < 0) {
			rc = -ENOMEM;
			goto out;
		}
		e = &v->entries[v->n];
		memset(e, 0, sizeof(*e));
		e->kind = strdup(kind);
		e->ns = strdup(ns);
		e->name = strdup(name);
		if (!e->kind || !e->ns || !e->name) {
			entry_dispose(e);
			rc = -ENOMEM;
			goto out;
		}
		v->n++;
	}
	e->added_ms = now;
	e->deadline_ms = now + v->cfg.timeout_ms;
	/* The API needs a moment to create the pods: the first look after one interval. */
	e->next_ms = now + v->cfg.interval_ms;
	e->checks = 0;
	e->gen++;
	pthread_cond_signal(&v->cond);
out:
	pthread_mutex_unlock(&v->mu);
	return rc;
}

unsigned long long ds_verifier_checks(ds_verifier *v)
{
	unsigned long long n;

	pthread_mutex_lock(&v->mu);
	n = v->checks;
	pthread_mutex_unlock(&v->mu);
	return n;
}

size_t ds_verifier_pending(ds_verifier *v)
{
	size_t n;

	pthread_mutex_lock(&v->mu);
	n = v->n;
	pthread_mutex_unlock(&v->mu);
	return n;
}

/* Too many waiting: the oldest settle as not verified, so memory stays bounded. */
static int shed(ds_verifier *v)
{
	int settled = 0;

	for (;;) {
		ds_verify_item it;
		size_t oldest = 0;
		bool over;

		pthread_mutex_lock(&v->mu);
		over = v->n > v->cfg.max_pending;
		for (size_t i = 1; over && i < v->n; i++)
			if (v->entries[i].added_ms < v->entries[oldest].added_ms)
				oldest = i;
		if (over &&
		    ds_verify_item_init(&it, v->entries[oldest].kind, v->entries[oldest].ns,
					v->entries[oldest].name, DS_VERIFY_ACTIVE, false) < 0) {
			pthread_mutex_unlock(&v->mu);
			return -ENOMEM;
		}
		if (over)
			remove_at(v, oldest);
		pthread_mutex_unlock(&v->mu);
		if (!over)
			return settled;
		it.form = form_of(v, it.ns);
		snprintf(it.reason, sizeof(it.reason),
			 "not checked: more than %zu workloads wait to be verified",
			 v->cfg.max_pending);
		settle(v, &it);
		ds_verify_item_dispose(&it);
		settled++;
	}
}

int ds_verifier_step(ds_verifier *v, ds_err *err)
{
	int settled = shed(v);

	if (settled < 0)
		return ds_err_fallback(err, settled);
	for (;;) {
		ds_verify_item it;
		struct entry *e = NULL;
		long long now = ds_clock_mono_ms(), added = 0;
		unsigned gen = 0;
		bool last = false;

		/* Held: what is due waits (for the end of the applier's pass). */
		if (v->cfg.hold && v->cfg.hold(v->cfg.hold_ud)) {
			v->held = true;
			return settled;
		}
		v->held = false;
		/* The next due entry, copied out: the check does I/O without the lock.
		 * Stopped: the rest waits (a round may be long while the API is down). */
		pthread_mutex_lock(&v->mu);
		for (size_t i = 0; i < v->n && !e && !v->stop && now >= v->next_check_ms; i++)
			if (v->entries[i].next_ms <= now)
				e = &v->entries[i];
		if (e) {
			if (ds_verify_item_init(&it, e->kind, e->ns, e->name, DS_VERIFY_ACTIVE,
						false) < 0) {
				pthread_mutex_unlock(&v->mu);
				return ds_err_fallback(err, -ENOMEM);
			}
			added = e->added_ms;
			gen = e->gen;
			last = now >= e->deadline_ms;
			/* Not due again this round, whatever the check says: later and later
			 * (interval, twice that, ... at most max_interval), and at the
			 * deadline for the last word. */
			{
				long long wait = v->cfg.interval_ms;
				for (unsigned c = 0; c < e->checks && wait < v->cfg.max_interval_ms;
				     c++)
					wait *= 2;
				if (wait > v->cfg.max_interval_ms)
					wait = v->cfg.max_interval_ms;
				e->next_ms = now + wait;
				if (!last && e->next_ms > e->deadline_ms)
					e->next_ms = e->deadline_ms;
			}
			e->checks++;
			v->checks++;
			/* However many wait: at most checks_per_s reads of the API server. */
			v->next_check_ms = now + 1000 / v->cfg.checks_per_s;
		}
		pthread_mutex_unlock(&v->mu);
		if (!e)
			return settled;
		it.form = form_of(v, it.ns);
		if (ds_verify_check(v->verify, &it) == -ENOMEM) {
			ds_verify_item_dispose(&it);
			return ds_err_fallback(err, -ENOMEM);
		}
		it.seconds = (double)(ds_clock_mono_ms() - added) / 1000.0;
		pthread_mutex_lock(&v->mu);
		e = find(v, it.kind, it.ns, it.name);
		/* Added again meanwhile: a newer version, with its own deadline. */
		if (!e || e->gen != gen || (!it.verified && !last)) {
			pthread_mutex_unlock(&v->mu);
			ds_verify_item_dispose(&it);
			continue;
		}
		remove_at(v, (size_t)(e - v->entries));
		pthread_mutex_unlock(&v->mu);
		settle(v, &it);
		ds_verify_item_dispose(&it);
		settled++;
	}
}

int ds_verifier_run(ds_verifier *v, ds_err *err)
{
	for (;;) {
		long long next = -1;
		int rc;

		pthread_mutex_lock(&v->mu);
		if (v->stop) {
			pthread_mutex_unlock(&v->mu);
			return 0;
		}
		pthread_mutex_unlock(&v->mu);
		rc = ds_verifier_step(v, err);
		if (rc < 0)
			return rc;
		pthread_mutex_lock(&v->mu);
		for (size_t i = 0; i < v->n; i++)
			if (next < 0 || v->entries[i].next_ms < next)
				next = v->entries[i].next_ms;
		if (next >= 0 && next < v->next_check_ms)
			next = v->next_check_ms;
		if (!v->stop) {
			/* Until the next one is due (at most a second), an add, or stop. */
			long long wait = next < 0 ? 1000 : next - ds_clock_mono_ms();
			if (wait > 1000)
				wait = 1000;
			if (v->held) /* looked at again soon: the pass may be over */
				wait = HOLD_POLL_MS;
			if (wait > 0) {
				ds_cond_wait_until(&v->cond, &v->mu, ds_deadline_in(wait));
			}
		}
		pthread_mutex_unlock(&v->mu);
	}
}

void ds_verifier_stop(ds_verifier *v)
{
	pthread_mutex_lock(&v->mu);
	v->stop = true;
	pthread_cond_broadcast(&v->cond);
	pthread_mutex_unlock(&v->mu);
}
