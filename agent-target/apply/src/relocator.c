/* The relocator's steps (relocator.h): relocations failed over as they come, in batches side by
 * side on threads of their own, verified side by side. */
#include "drasync/relocator.h"

#include "drasync/buf.h"
#include "drasync/clock.h"
#include "drasync/failover.h"
#include "drasync/log.h"
#include "drasync/verify.h"
#include "drasync/verify_run.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_VERIFY_MS (2 * 60 * 1000LL)

/* One relocation this step or being verified. */
struct job {
	ds_relocation_row r;
	char tns[256];
	enum ds_relocation_state state;
	bool decided;	       /* its outcome is known: to record */
	bool failed_over;      /* to verify */
	ds_verify_item *items; /* its namespace's workloads */
	size_t n_items;
	int64_t t0_ms, deadline_ms, next_check_ms;
	char message[1024];
};

/*
 * Relocations failed over together on a thread of their own (then their
 * workloads read for verification), so that the relocator goes on verifying
 * the others and takes those that arrive meanwhile into another batch. The
 * thread owns jobs and c (c.cfg a reference of its own) until done is set.
 */
struct batch {
	pthread_t thread;
	bool joinable; /* thread started (else the batch ran on the relocator's) */
	atomic_bool done;
	ds_relocation_ctx c;
	struct job *jobs;
	size_t n;
};

struct look;

struct ds_relocator {
	ds_object_state *st;
	ds_verify *ver[DS_RELOCATOR_CHECKERS]; /* on the client of the first step's context */
	struct job **v;			       /* being verified, each its own allocation */
	size_t n, cap;
	struct batch *b[DS_RELOCATOR_BATCHES]; /* failing over */
	size_t nb;
	struct look *look; /* the checkers' look in progress, or NULL */
};

int ds_relocator_new(ds_relocator **out, ds_object_state *st)
{
	ds_relocator *r = calloc(1, sizeof(*r));

	if (!r)
		return -ENOMEM;
	r->st = st;
	*out = r;
	return 0;
}

static void job_dispose(struct job *j)
{
	ds_verify_items_free(j->items, j->n_items);
	j->items = NULL;
	j->n_items = 0;
}

/* Wait for b's thread; its jobs' outcomes are not recorded (they stay pending in the ledger). */
static void batch_free(struct batch *b)
{
	if (!b)
		return;
	if (b->joinable)
		pthread_join(b->thread, NULL);
	for (size_t i = 0; i < b->n; i++)
		job_dispose(&b->jobs[i]);
	free(b->jobs);
	ds_target_config_unref((ds_target_config *)b->c.cfg);
	free(b);
}

static void look_join(struct look *l);

void ds_relocator_free(ds_relocator *r)
{
	if (!r)
		return;
	look_join(r->look);
	for (size_t i = 0; i < r->nb; i++)
		batch_free(r->b[i]);
	for (size_t i = 0; i < r->n; i++) {
		job_dispose(r->v[i]);
		free(r->v[i]);
	}
	free(r->v);
	for (size_t i = 0; i < DS_RELOCATOR_CHECKERS; i++)
		ds_verify_free(r->ver[i]);
	free(r);
}

static bool job_is(const struct job *j, int64_t id, const char *tns)
{
	return j->r.id == id || (tns && strcmp(j->tns, tns) == 0);
}

/* Whether the relocation with ledger id is failing over or being verified, or its namespace tns
 * is. */
static bool busy(const ds_relocator *r, int64_t id, const char *tns)
{
	for (size_t i = 0; i < r->n; i++)
		if (job_is(r->v[i], id, tns))
			return true;
	for (size_t i = 0; i < r->nb; i++)
		for (size_t k = 0; k < r->b[i]->n; k++)
			if (job_is(&r->b[i]->jobs[k], id, tns))
				return true;
	return false;
}

static void decide(struct job *j, enum ds_relocation_state state)
{
	j->decided = true;
	j->state = state;
}

/* Record j's outcome and say it. @return 0, or < 0 (the ledger) */
static int finish(ds_relocator *r, struct job *j, ds_relocator_done_fn done, void *ud, ds_err *err)
{
	char q[600];
	int rc = ds_relocation_finish(r->st, &j->r, j->tns, j->state, j->message, err);

	if (rc < 0)
		return rc;
	ds_log_quote(j->message, q, sizeof(q));
	ds_log(j->state == DS_RELOCATION_ACTIVE ? DS_LOG_INFO : DS_LOG_WARN,
	       j->state == DS_RELOCATION_ACTIVE	   ? "relocated"
	       : j->state == DS_RELOCATION_REFUSED ? "relocate_refused"
						   : "relocate_failed",
	       "source=%s namespace=%s target_namespace=%s seq=%lld detail=%s", j->r.source,
	       j->r.ns, j->tns, (long long)j->r.seq, q);
	if (done)
		done(ud, j->r.source, (int)j->state);
	return 0;
}

/*
 * Fail over the undecided jobs of source from `from` on, together; when that
 * fails, one at a time, so that each outcome names its own problem (failover
 * changes nothing twice).
 */
static void fail_over_source(const ds_relocation_ctx *c, struct job *jobs, size_t n, size_t from)
{
	const char *source = jobs[from].r.source;
	const char *tns[DS_FAILOVER_MAX_NAMESPACES];
	size_t idx[DS_FAILOVER_MAX_NAMESPACES], m = 0;
	char names[512] = "", problem[256];

	for (size_t i = from; i < n && m < DS_FAILOVER_MAX_NAMESPACES; i++) {
		size_t used = strlen(names);

		if (jobs[i].decided || strcmp(jobs[i].r.source, source) != 0)
			continue;
		idx[m] = i;
		tns[m++] = jobs[i].tns;
		snprintf(names + used, sizeof(names) - used, "%s%s", m > 1 ? "," : "",
			 jobs[i].r.ns);
	}
	if (m > 1 &&
	    ds_relocation_fail_over(c, source, tns, m, names, problem, sizeof(problem)) == 0) {
		for (size_t k = 0; k < m; k++)
			jobs[idx[k]].failed_over = true;
		return;
	}
	for (size_t k = 0; k < m; k++) {
		struct job *j = &jobs[idx[k]];

		if (ds_relocation_fail_over(c, source, &tns[k], 1, j->r.ns, problem,
					    sizeof(problem)) == 0) {
			j->failed_over = true;
			continue;
		}
		decide(j, DS_RELOCATION_FAILED);
		snprintf(j->message, sizeof(j->message), "failover of %s failed: %s", j->tns,
			 problem);
	}
}

/* The workloads j's namespace should run, to verify; a failure to read them decides j. */
static void load_items(const ds_relocation_ctx *c, struct job *j)
{
	const char *ns[1] = {j->tns};
	ds_err err = {0};

	if (ds_verify_run_items(c->ledger_path, c->cfg, ns, 1, &j->items, &j->n_items, &err) == 0)
		return;
	decide(j, DS_RELOCATION_FAILED);
	snprintf(j->message, sizeof(j->message),
		 "namespace %s is active but not verified: verify: %.300s", j->tns, err.msg);
}

/* A batch's thread: its relocations failed over, those of one source together, then the
 * workloads of each to verify read. */
static void *batch_main(void *arg)
{
	struct batch *b = arg;

	for (size_t i = 0; i < b->n; i++) {
		bool seen = false;

		for (size_t k = 0; k < i && !seen; k++)
			seen = strcmp(b->jobs[k].r.source, b->jobs[i].r.source) == 0;
		if (!seen && !b->jobs[i].decided)
			fail_over_source(&b->c, b->jobs, b->n, i);
	}
	for (size_t i = 0; i < b->n; i++)
		if (!b->jobs[i].decided)
			load_items(&b->c, &b->jobs[i]);
	atomic_store(&b->done, true);
	return NULL;
}

/* The batches whose thread is done: outcomes recorded, the others into r->v to verify. */
static int collect(ds_relocator *r, ds_relocator_done_fn done, void *ud, ds_err *err)
{
	int rc = 0;

	for (size_t i = 0; i < r->nb && rc == 0;) {
		struct batch *b = r->b[i];

		if (!atomic_load(&b->done)) {
			i++;
			continue;
		}
		for (size_t k = 0; k < b->n && rc == 0; k++) {
			struct job *j = &b->jobs[k];

			if (j->decided) {
				rc = finish(r, j, done, ud, err);
				job_dispose(j);
				continue;
			}
			struct job *kept = malloc(sizeof(*kept));

			if (!kept ||
			    ds_grow((void **)&r->v, &r->cap, r->n + 1, sizeof(*r->v)) < 0) {
				free(kept);
				rc = ds_err_fallback(err, -ENOMEM);
				break;
			}
			*kept = *j;
			r->v[r->n++] = kept;
			memset(j, 0, sizeof(*j));
		}
		/* on a failure what is left stays pending in the ledger: taken again */
		batch_free(b);
		r->b[i] = r->b[--r->nb];
	}
	return rc;
}

/* Take the relocations that became pending: refused at once, the others failed over by a batch
 * of their own (collect() takes its outcomes). */
static int take_new(ds_relocator *r, const ds_relocation_ctx *c, ds_relocator_done_fn done,
		    void *ud, ds_err *err)
{
	ds_relocation_row rows[DS_RELOCATOR_BATCH];
	struct batch *b = NULL;
	struct job *jobs;
	size_t n = 0, m = 0;
	int64_t now = ds_clock_mono_ms();
	long long verify_ms = c->verify_timeout_ms > 0 ? c->verify_timeout_ms : DEFAULT_VERIFY_MS;
	int rc;

	/* as many batches side by side as there are slots: the rest waits, pending */
	if (r->nb >= DS_RELOCATOR_BATCHES)
		return 0;
	rc = ds_relocation_pending(r->st, rows, DS_RELOCATOR_BATCH, &n, err);
	if (rc < 0 || !n)
		return rc;
	jobs = calloc(n, sizeof(*jobs));
	if (!jobs)
		return ds_err_fallback(err, -ENOMEM);
	for (size_t i = 0; i < n; i++) {
		const char *tns = ds_target_config_map_namespace(c->cfg, rows[i].ns);
		struct job *j = &jobs[m];
		bool twice = false;
		char why[400];

		if (busy(r, rows[i].id, NULL))
			continue; /* failing over or being verified */
		tns = tns ? tns : rows[i].ns;
		/* a second relocation of a namespace being relocated: after that one */
		for (size_t k = 0; k < m && !twice; k++)
			twice = strcmp(jobs[k].tns, tns) == 0;
		if (twice || busy(r, -1, tns))
			continue;
		j->r = rows[i];
		snprintf(j->tns, sizeof(j->tns), "%s", tns);
		j->t0_ms = now;
		j->deadline_ms = now + verify_ms;
		m++;
		ds_log(DS_LOG_INFO, "relocate_started",
		       "source=%s namespace=%s target_namespace=%s seq=%lld", j->r.source, j->r.ns,
		       j->tns, (long long)j->r.seq);
		if (!ds_relocation_granted(c->cfg, j->r.source, j->r.ns, why, sizeof(why))) {
			decide(j, DS_RELOCATION_REFUSED);
			snprintf(j->message, sizeof(j->message), "refused: %s; nothing was changed",
				 why);
		}
	}
	/* the refused ones now; the others to a batch */
	for (size_t i = 0; i < m && rc == 0; i++)
		if (jobs[i].decided)
			rc = finish(r, &jobs[i], done, ud, err);
	if (rc == 0 && !(b = calloc(1, sizeof(*b)))) {
		rc = ds_err_fallback(err, -ENOMEM);
	} else if (rc == 0) {
		b->c = *c;
		b->c.cfg = ds_target_config_ref(c->cfg);
		b->jobs = jobs;
		for (size_t i = 0; i < m; i++) {
			if (jobs[i].decided) {
				job_dispose(&jobs[i]);
				continue;
			}
			if (b->n != i)
				b->jobs[b->n] = jobs[i];
			b->n++;
		}
		jobs = NULL;
		if (!b->n) {
			atomic_store(&b->done, true);
			free(b->jobs);
			ds_target_config_unref((ds_target_config *)b->c.cfg);
			free(b);
			b = NULL;
		} else if (pthread_create(&b->thread, NULL, batch_main, b) != 0) {
			/* no thread: on this one (collected right after) */
			batch_main(b);
			r->b[r->nb++] = b;
		} else {
			b->joinable = true;
			r->b[r->nb++] = b;
		}
	}
	if (jobs) {
		for (size_t i = 0; i < m; i++)
			job_dispose(&jobs[i]);
		free(jobs);
	}
	return rc;
}

/* Check j's workloads not verified yet, once, with ver; decide it when all are, or at its
 * deadline. */
static int check(ds_verify *ver, struct job *j, int64_t now)
{
	const ds_verify_item *bad = NULL;
	size_t verified = 0;

	bool last = now >= j->deadline_ms;

	for (size_t i = 0; i < j->n_items; i++) {
		ds_verify_item *it = &j->items[i];

		if (!it->verified && (!bad || last)) {
			if (ds_verify_check(ver, it) == -ENOMEM)
				return -ENOMEM;
			it->seconds = (double)(ds_clock_mono_ms() - j->t0_ms) / 1000.0;
		}
		/* One not verified decides nothing before the deadline: the rest of
		 * the namespace is looked at next time (fewer reads while the pods
		 * start), all of it at the deadline for the outcome. */
		if (it->verified)
			verified++;
		else if (!bad)
			bad = it;
	}
	if (!bad) {
		decide(j, DS_RELOCATION_ACTIVE);
		snprintf(j->message, sizeof(j->message),
			 "namespace %s verified active: %zu workload%s verified (pods Running, "
			 "claims allocated) in %.1f s",
			 j->tns, verified, verified == 1 ? "" : "s",
			 (double)(ds_clock_mono_ms() - j->t0_ms) / 1000.0);
		return 0;
	}
	if (!last)
		return 0;
	decide(j, DS_RELOCATION_FAILED);
	/* a long reason is cut: the rest is in verify's own report */
	if (snprintf(j->message, sizeof(j->message),
		     "namespace %s is active but not verified: %zu of %zu workloads not "
		     "verified; %s %s/%s: %s",
		     j->tns, j->n_items - verified, j->n_items, bad->kind, bad->ns, bad->name,
		     bad->reason) < 0)
		j->message[0] = '\0';
	return 0;
}

/*
 * A look: the jobs due, shared by checker threads that run while the
 * relocator's thread goes on taking what arrives (a look at namespaces whose
 * pods have all come up reads every workload of each, seconds at a time).
 * The jobs it checks stay where they are until it is joined.
 */
struct look {
	struct job **due;
	size_t n;
	atomic_size_t next;
	atomic_int rc;
	atomic_size_t finished; /* checkers done */
	size_t started;		/* checker threads started */
	int64_t now;
	struct checker {
		struct look *l;
		ds_verify *ver;
		pthread_t thread;
	} ck[DS_RELOCATOR_CHECKERS];
};

/* A checker: the next job due, until none is left. */
static void *checker_main(void *arg)
{
	struct checker *ck = arg;
	struct look *l = ck->l;

	for (size_t i; (i = atomic_fetch_add(&l->next, 1)) < l->n;)
		if (check(ck->ver, l->due[i], l->now) < 0)
			atomic_store(&l->rc, -ENOMEM);
	atomic_fetch_add(&l->finished, 1);
	return NULL;
}

/* Wait for l's checkers and free it. */
static void look_join(struct look *l)
{
	if (!l)
		return;
	for (size_t k = 0; k < l->started; k++)
		pthread_join(l->ck[k].thread, NULL);
	free(l->due);
	free(l);
}

/*
 * Start a look at the relocations being verified whose time has come, side
 * by side (up to DS_RELOCATOR_CHECKERS namespaces at once: the last ones of
 * many namespaces come due together once their pods run). When no thread
 * starts, the look is done on this one.
 */
static int look_start(ds_relocator *r, const ds_relocation_ctx *c, ds_err *err)
{
	struct look *l;
	size_t workers;
	int rc = 0;

	if (r->look || !r->n)
		return 0;
	if (!(l = calloc(1, sizeof(*l))) || !(l->due = calloc(r->n, sizeof(*l->due)))) {
		free(l);
		return ds_err_fallback(err, -ENOMEM);
	}
	l->now = ds_clock_mono_ms();
	for (size_t i = 0; i < r->n; i++) {
		if (l->now < r->v[i]->next_check_ms)
			continue;
		r->v[i]->next_check_ms = l->now + DS_RELOCATOR_CHECK_MS;
		l->due[l->n++] = r->v[i];
	}
	workers = l->n < DS_RELOCATOR_CHECKERS ? l->n : DS_RELOCATOR_CHECKERS;
	for (size_t k = 0; k < workers && rc == 0; k++) {
		if (r->ver[k])
			continue;
		if ((rc = ds_verify_new(&r->ver[k], c->kube, err)) < 0)
			break;
		/* Every namespace is looked at each DS_RELOCATOR_CHECK_MS while its
		 * pods start: the template and DeviceClass its workloads name are
		 * read every few looks, not at each (about a third of the reads). */
		ds_verify_keep_refs(r->ver[k], DS_RELOCATOR_REFS_MS);
	}
	if (rc < 0 || !workers) {
		look_join(l);
		return rc;
	}
	for (size_t k = 0; k < workers; k++) {
		l->ck[k] = (struct checker){.l = l, .ver = r->ver[k]};
		if (pthread_create(&l->ck[k].thread, NULL, checker_main, &l->ck[k]) != 0)
			break;
		l->started = k + 1;
	}
	if (!l->started) {
		/* no thread: the look on this one */
		checker_main(&l->ck[0]);
		l->started = 0;
	}
	r->look = l;
	return 0;
}

/* Once the look in progress is done: the relocations it decided recorded. */
static int look_finish(ds_relocator *r, const ds_relocation_ctx *c, ds_relocator_done_fn done,
		       void *ud, ds_err *err)
{
	struct look *l = r->look;
	size_t workers;
	int rc;

	if (!l)
		return 0;
	workers = l->started ? l->started : 1;
	if (atomic_load(&l->finished) < workers)
		return 0;
	rc = atomic_load(&l->rc);
	look_join(l);
	r->look = NULL;
	if (rc < 0)
		return ds_err_fallback(err, rc);
	for (size_t i = 0; i < r->n && rc == 0;) {
		struct job *j = r->v[i];
		ds_err store_err = {0};

		if (!j->decided) {
			i++;
			continue;
		}
		if (ds_verify_store(c->ledger_path, j->items, j->n_items, &store_err) < 0) {
			char line[600], q[700];

			snprintf(line, sizeof(line), "verifications not stored: %.500s",
				 store_err.msg);
			ds_log_quote(line, q, sizeof(q));
			ds_log(DS_LOG_WARN, "relocate_step", "source=%s namespace=%s line=%s",
			       j->r.source, j->r.ns, q);
		}
		rc = finish(r, j, done, ud, err);
		if (rc < 0)
			break; /* stays pending in the ledger: verified again next step */
		job_dispose(j);
		free(j);
		r->v[i] = r->v[--r->n];
	}
	return rc;
}

int ds_relocator_step(ds_relocator *r, const ds_relocation_ctx *c, ds_relocator_done_fn done,
		      void *ud, ds_err *err)
{
	int rc = collect(r, done, ud, err);
	size_t failing = 0;

	if (rc == 0)
		rc = take_new(r, c, done, ud, err);
	if (rc == 0)
		rc = collect(r, done, ud, err);
	if (rc == 0)
		rc = look_finish(r, c, done, ud, err);
	if (rc == 0)
		rc = look_start(r, c, err);
	if (rc == 0)
		rc = look_finish(r, c, done, ud, err); /* done on this thread */
	for (size_t i = 0; i < r->nb; i++)
		failing += r->b[i]->n;
	return rc < 0 ? rc : (int)(r->n + failing);
}
