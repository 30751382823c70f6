/* The relocator's steps (relocator.h): relocations failed over as they come, verified side by
 * side. */
#include "drasync/relocator.h"

#include "drasync/buf.h"
#include "drasync/clock.h"
#include "drasync/failover.h"
#include "drasync/log.h"
#include "drasync/verify.h"
#include "drasync/verify_run.h"

#include <errno.h>
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

struct ds_relocator {
	ds_object_state *st;
	ds_verify *ver; /* on the client of the first step's context */
	struct job *v;	/* being verified */
	size_t n, cap;
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

void ds_relocator_free(ds_relocator *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++)
		job_dispose(&r->v[i]);
	free(r->v);
	ds_verify_free(r->ver);
	free(r);
}

/* Whether the relocation with ledger id is being verified, or its namespace tns is. */
static bool busy(const ds_relocator *r, int64_t id, const char *tns)
{
	for (size_t i = 0; i < r->n; i++)
		if (r->v[i].r.id == id || (tns && strcmp(r->v[i].tns, tns) == 0))
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

/* Take the relocations that became pending: refused, failed, or to verify (into r->v). */
static int take_new(ds_relocator *r, const ds_relocation_ctx *c, ds_relocator_done_fn done,
		    void *ud, ds_err *err)
{
	ds_relocation_row rows[DS_RELOCATOR_BATCH];
	struct job *jobs;
	size_t n = 0, m = 0;
	int64_t now = ds_clock_mono_ms();
	long long verify_ms = c->verify_timeout_ms > 0 ? c->verify_timeout_ms : DEFAULT_VERIFY_MS;
	int rc = ds_relocation_pending(r->st, rows, DS_RELOCATOR_BATCH, &n, err);

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
			continue; /* being verified */
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
	for (size_t i = 0; i < m; i++) {
		bool seen = false;

		for (size_t k = 0; k < i && !seen; k++)
			seen = strcmp(jobs[k].r.source, jobs[i].r.source) == 0;
		if (!seen && !jobs[i].decided)
			fail_over_source(c, jobs, m, i);
	}
	for (size_t i = 0; i < m && rc == 0; i++) {
		struct job *j = &jobs[i];

		if (!j->decided)
			load_items(c, j);
		if (j->decided) {
			rc = finish(r, j, done, ud, err);
			job_dispose(j);
			continue;
		}
		if (ds_grow((void **)&r->v, &r->cap, r->n + 1, sizeof(*r->v)) < 0) {
			rc = ds_err_fallback(err, -ENOMEM);
			break;
		}
		r->v[r->n++] = *j;
		memset(j, 0, sizeof(*j));
	}
	for (size_t i = 0; i < m; i++)
		job_dispose(&jobs[i]);
	free(jobs);
	return rc;
}

/* Check j's workloads not verified yet, once; decide it when all are, or at its deadline. */
static int check(ds_relocator *r, struct job *j, int64_t now)
{
	const ds_verify_item *bad = NULL;
	size_t verified = 0;

	bool last = now >= j->deadline_ms;

	for (size_t i = 0; i < j->n_items; i++) {
		ds_verify_item *it = &j->items[i];

		if (!it->verified && (!bad || last)) {
			if (ds_verify_check(r->ver, it) == -ENOMEM)
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

/* Look again at the relocations being verified whose time has come; record those decided. */
static int verify_due(ds_relocator *r, const ds_relocation_ctx *c, ds_relocator_done_fn done,
		      void *ud, ds_err *err)
{
	int rc = 0;

	if (r->n && !r->ver) {
		if ((rc = ds_verify_new(&r->ver, c->kube, err)) < 0)
			return rc;
		/* Every namespace is looked at each DS_RELOCATOR_CHECK_MS while its
		 * pods start: the template and DeviceClass its workloads name are
		 * read every few looks, not at each (about a third of the reads). */
		ds_verify_keep_refs(r->ver, DS_RELOCATOR_REFS_MS);
	}
	for (size_t i = 0; i < r->n && rc == 0;) {
		struct job *j = &r->v[i];
		int64_t now = ds_clock_mono_ms();
		ds_err store_err = {0};

		if (now < j->next_check_ms) {
			i++;
			continue;
		}
		j->next_check_ms = now + DS_RELOCATOR_CHECK_MS;
		if ((rc = check(r, j, now)) < 0) {
			rc = ds_err_fallback(err, rc);
			break;
		}
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
		r->v[i] = r->v[--r->n];
	}
	return rc;
}

int ds_relocator_step(ds_relocator *r, const ds_relocation_ctx *c, ds_relocator_done_fn done,
		      void *ud, ds_err *err)
{
	int rc = take_new(r, c, done, ud, err);

	if (rc == 0)
		rc = verify_due(r, c, done, ud, err);
	return rc < 0 ? rc : (int)r->n;
}
