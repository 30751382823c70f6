/*
 * A planned relocation carried out (relocation.h): the grant, the failover
 * of the mapped namespace, its verification and the outcome for the source.
 */
#include "drasync/relocation.h"

#include "drasync/clock.h"
#include "drasync/failover.h"
#include "drasync/log.h"
#include "drasync/source_grants.h"
#include "drasync/verify_run.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_FAILOVER_MS (5 * 60 * 1000LL)
#define DEFAULT_VERIFY_MS (2 * 60 * 1000LL)
/* How often verification looks again at what is not verified yet. */
#define VERIFY_INTERVAL_MS 500

bool ds_relocation_granted(const ds_target_config *cfg, const char *source, const char *ns,
			   char *why, size_t size)
{
	if (!ds_grant_of(cfg, source)) {
		snprintf(why, size,
			 "source %s has no entry in sources[] of %s, so it may not relocate "
			 "(add one with relocate: true)",
			 source, ds_target_config_file(cfg));
		return false;
	}
	if (!ds_grant_relocate(cfg, source)) {
		snprintf(why, size,
			 "source %s may not relocate: sources[].relocate is false for it in %s "
			 "(set relocate: true to allow it)",
			 source, ds_target_config_file(cfg));
		return false;
	}
	if (!ds_grant_namespace(cfg, source, ns, why, size))
		return false;
	return true;
}

/* What failover says, logged; its first problem kept for the source. */
struct said {
	const char *source, *ns;
	char first_problem[256];
	char last[256];
};

static void say(void *ud, bool problem, const char *line)
{
	struct said *s = ud;
	char q[400];

	ds_log_quote(line, q, sizeof(q));
	ds_log(problem ? DS_LOG_WARN : DS_LOG_INFO, "relocate_step",
	       "source=%s namespace=%s line=%s", s->source, s->ns, q);
	if (problem && !s->first_problem[0])
		snprintf(s->first_problem, sizeof(s->first_problem), "%s", line);
	if (!problem)
		snprintf(s->last, sizeof(s->last), "%s", line);
}

/* Fail the target namespaces tns over for source, together. @return 0 done, 1 not (said) */
static int fail_over(const ds_relocation_ctx *c, const char *source, const char *const *tns,
		     size_t n, struct said *said)
{
	ds_failover_opts o = {.verb = "relocate",
			      .to = DS_MODE_MIGRATE,
			      .ledger_path = c->ledger_path,
			      .config_path = c->config_path ? c->config_path : "target.yaml",
			      .cfg = c->cfg,
			      .requester = source,
			      .say = say,
			      .ud = said};
	ds_failover *f = NULL;
	ds_err err = {0};
	int rc;

	if (ds_failover_open(&f, &o, &err) < 0) {
		snprintf(said->first_problem, sizeof(said->first_problem), "%.200s", err.msg);
		return 1;
	}
	rc = ds_failover_namespaces(f, tns, n);
	if (rc == 0)
		rc = ds_failover_guard(f);
	if (rc == 0)
		rc = ds_failover_run(f, c->kube,
				     ds_deadline_in(c->failover_timeout_ms > 0
							? c->failover_timeout_ms
							: DEFAULT_FAILOVER_MS));
	ds_failover_free(f);
	return rc ? 1 : 0;
}

/* One relocation of a batch: its row, target namespace and how it goes. */
struct job {
	const ds_relocation_row *r;
	const char *tns;
	enum ds_relocation_state state;
	bool decided, failed_over;
	size_t verified, total;
	char message[512];
};

/*
 * Verify the workloads of the jobs that failed over, in one run over their
 * namespaces (each checked until verified or the timeout). Each job's outcome:
 * active, or failed with its first workload not verified.
 */
static void verify(const ds_relocation_ctx *c, struct job *jobs, size_t n, double t0)
{
	ds_verify_opts o = {.timeout_ms =
				c->verify_timeout_ms > 0 ? c->verify_timeout_ms : DEFAULT_VERIFY_MS,
			    .interval_ms = VERIFY_INTERVAL_MS};
	const char *ns[DS_FAILOVER_MAX_NAMESPACES];
	ds_verify_summary sum = {0};
	ds_verify_item *items = NULL;
	ds_err err = {0}, store_err = {0};
	size_t m = 0, n_items = 0;
	int stored = 0, rc;

	for (size_t i = 0; i < n; i++)
		if (!jobs[i].decided && jobs[i].failed_over && m < DS_FAILOVER_MAX_NAMESPACES)
			ns[m++] = jobs[i].tns;
	if (!m)
		return;
	rc = ds_verify_run_items(c->ledger_path, c->cfg, ns, m, &items, &n_items, &err);
	if (rc == 0)
		rc = ds_verify_run_check(c->kube, c->ledger_path, items, n_items, &o, &sum, &stored,
					 &store_err, &err);
	for (size_t i = 0; i < n; i++) {
		struct job *j = &jobs[i];
		const ds_verify_item *bad = NULL;

		if (j->decided || !j->failed_over)
			continue;
		j->decided = true;
		j->state = DS_RELOCATION_FAILED;
		if (rc < 0) {
			snprintf(j->message, sizeof(j->message),
				 "namespace %s is active but not verified: verify: %s", j->tns,
				 err.msg);
			continue;
		}
		for (size_t k = 0; k < n_items; k++) {
			if (strcmp(items[k].ns, j->tns) != 0)
				continue;
			j->total++;
			if (items[k].verified)
				j->verified++;
			else if (!bad)
				bad = &items[k];
		}
		if (bad) {
			/* a long reason is cut: the rest is in verify's own report */
			if (snprintf(j->message, sizeof(j->message),
				     "namespace %s is active but not verified: %zu of %zu "
				     "workloads not verified; %s %s/%s: %s",
				     j->tns, j->total - j->verified, j->total, bad->kind, bad->ns,
				     bad->name, bad->reason) < 0)
				j->message[0] = '\0';
			continue;
		}
		j->state = DS_RELOCATION_ACTIVE;
		snprintf(j->message, sizeof(j->message),
			 "namespace %s verified active: %zu workload%s verified (pods Running, "
			 "claims allocated) in %.1f s",
			 j->tns, j->verified, j->verified == 1 ? "" : "s", ds_clock_mono_s() - t0);
	}
	ds_verify_items_free(items, n_items);
}

/* One failover's outcome for job j. */
static void failed_over(struct job *j, int rc, const struct said *said)
{
	if (rc == 0) {
		j->failed_over = true;
		return;
	}
	j->decided = true;
	j->state = DS_RELOCATION_FAILED;
	snprintf(j->message, sizeof(j->message), "failover of %s failed: %s", j->tns,
		 said->first_problem[0] ? said->first_problem : said->last);
}

/*
 * Fail over the undecided jobs of source from `from` on, together; when that
 * fails, one at a time, so that each outcome names its own problem (failover
 * changes nothing twice).
 */
static void fail_over_source(const ds_relocation_ctx *c, struct job *jobs, size_t n, size_t from)
{
	const char *source = jobs[from].r->source;
	const char *tns[DS_FAILOVER_MAX_NAMESPACES];
	size_t idx[DS_FAILOVER_MAX_NAMESPACES], m = 0;
	struct said said = {.source = source};
	char names[512] = "";

	for (size_t i = from; i < n && m < DS_FAILOVER_MAX_NAMESPACES; i++) {
		if (jobs[i].decided || strcmp(jobs[i].r->source, source) != 0)
			continue;
		idx[m] = i;
		tns[m++] = jobs[i].tns;
		snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s",
			 m > 1 ? "," : "", jobs[i].r->ns);
	}
	said.ns = names;
	if (m > 1 && fail_over(c, source, tns, m, &said) == 0) {
		for (size_t k = 0; k < m; k++)
			failed_over(&jobs[idx[k]], 0, &said);
		return;
	}
	for (size_t k = 0; k < m; k++) {
		struct said one = {.source = source, .ns = jobs[idx[k]].r->ns};

		failed_over(&jobs[idx[k]], fail_over(c, source, &tns[k], 1, &one), &one);
	}
}

int ds_relocation_perform_all(ds_object_state *st, const ds_relocation_ctx *c,
			      const ds_relocation_row *rows, size_t n, int *states, ds_err *err)
{
	struct job *jobs = calloc(n ? n : 1, sizeof(*jobs));
	double t0 = ds_clock_mono_s();
	int rc = 0;

	for (size_t i = 0; i < n; i++)
		states[i] = -1;
	if (!jobs)
		return ds_err_fallback(err, -ENOMEM);
	for (size_t i = 0; i < n; i++) {
		struct job *j = &jobs[i];
		char why[400];

		j->r = &rows[i];
		j->tns = ds_target_config_map_namespace(c->cfg, rows[i].ns);
		if (!j->tns)
			j->tns = rows[i].ns;
		ds_log(DS_LOG_INFO, "relocate_started",
		       "source=%s namespace=%s target_namespace=%s seq=%lld", rows[i].source,
		       rows[i].ns, j->tns, (long long)rows[i].seq);
		for (size_t k = 0; k < i && !j->decided; k++)
			if (!jobs[k].decided && strcmp(jobs[k].tns, j->tns) == 0) {
				/* the same namespace twice: the later one in the next batch */
				j->decided = true;
				j->state = DS_RELOCATION_PENDING;
			}
		if (!j->decided &&
		    !ds_relocation_granted(c->cfg, rows[i].source, rows[i].ns, why, sizeof(why))) {
			j->decided = true;
			j->state = DS_RELOCATION_REFUSED;
			snprintf(j->message, sizeof(j->message), "refused: %s; nothing was changed",
				 why);
		}
	}
	for (size_t i = 0; i < n; i++) {
		bool seen = false;

		for (size_t k = 0; k < i && !seen; k++)
			seen = strcmp(rows[k].source, rows[i].source) == 0;
		if (!seen && !jobs[i].decided)
			fail_over_source(c, jobs, n, i);
	}
	verify(c, jobs, n, t0);
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct job *j = &jobs[i];
		char q[600];

		if (j->state == DS_RELOCATION_PENDING)
			continue;
		rc = ds_relocation_finish(st, j->r, j->tns, j->state, j->message, err);
		if (rc < 0)
			break;
		states[i] = (int)j->state;
		ds_log_quote(j->message, q, sizeof(q));
		ds_log(j->state == DS_RELOCATION_ACTIVE ? DS_LOG_INFO : DS_LOG_WARN,
		       j->state == DS_RELOCATION_ACTIVE	   ? "relocated"
		       : j->state == DS_RELOCATION_REFUSED ? "relocate_refused"
							   : "relocate_failed",
		       "source=%s namespace=%s target_namespace=%s seq=%lld detail=%s",
		       j->r->source, j->r->ns, j->tns, (long long)j->r->seq, q);
	}
	free(jobs);
	return rc;
}
