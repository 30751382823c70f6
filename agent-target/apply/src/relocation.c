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
#include <string.h>

#define DEFAULT_FAILOVER_MS (5 * 60 * 1000LL)
#define DEFAULT_VERIFY_MS (2 * 60 * 1000LL)

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

/* Fail tns over for r's source. @return 0 done, 1 not (said) */
static int fail_over(const ds_relocation_ctx *c, const ds_relocation_row *r, const char *tns,
		     struct said *said)
{
	ds_failover_opts o = {.verb = "relocate",
			      .to = DS_MODE_MIGRATE,
			      .ledger_path = c->ledger_path,
			      .config_path = c->config_path ? c->config_path : "target.yaml",
			      .cfg = c->cfg,
			      .requester = r->source,
			      .say = say,
			      .ud = said};
	const char *ns[1] = {tns};
	ds_failover *f = NULL;
	ds_err err = {0};
	int rc;

	if (ds_failover_open(&f, &o, &err) < 0) {
		snprintf(said->first_problem, sizeof(said->first_problem), "%.200s", err.msg);
		return 1;
	}
	rc = ds_failover_namespaces(f, ns, 1);
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

/* Verify tns's workloads. @return 0 all verified, 1 not (why says which) */
static int verify(const ds_relocation_ctx *c, const char *tns, char *why, size_t size,
		  size_t *verified)
{
	ds_verify_opts o = {.timeout_ms =
				c->verify_timeout_ms > 0 ? c->verify_timeout_ms : DEFAULT_VERIFY_MS,
			    .interval_ms = 1000};
	const char *ns[1] = {tns};
	ds_verify_summary sum = {0};
	ds_verify_item *items = NULL;
	ds_err err = {0}, store_err = {0};
	size_t n = 0;
	int stored = 0, rc;

	*verified = 0;
	rc = ds_verify_run_items(c->ledger_path, c->cfg, ns, 1, &items, &n, &err);
	if (rc < 0) {
		snprintf(why, size, "verify: %s", err.msg);
		return 1;
	}
	rc = ds_verify_run_check(c->kube, c->ledger_path, items, n, &o, &sum, &stored, &store_err,
				 &err);
	if (rc < 0) {
		snprintf(why, size, "verify: %s", err.msg);
		ds_verify_items_free(items, n);
		return 1;
	}
	*verified = sum.verified;
	rc = 0;
	for (size_t i = 0; i < n; i++) {
		if (items[i].verified)
			continue;
		/* a long reason is cut at size: the rest is in verify's own report */
		if (snprintf(why, size, "%zu of %zu workloads not verified; %s %s/%s: %s",
			     sum.not_verified, sum.total, items[i].kind, items[i].ns, items[i].name,
			     items[i].reason) < 0)
			why[0] = '\0';
		rc = 1;
		break;
	}
	ds_verify_items_free(items, n);
	return rc;
}

int ds_relocation_perform(ds_object_state *st, const ds_relocation_ctx *c,
			  const ds_relocation_row *r, char *message, size_t size, ds_err *err)
{
	const char *tns = ds_target_config_map_namespace(c->cfg, r->ns);
	struct said said = {.source = r->source, .ns = r->ns};
	enum ds_relocation_state state;
	char why[400];
	size_t verified = 0;
	double t0 = ds_clock_mono_s();
	int rc;

	if (!tns)
		tns = r->ns;
	ds_log(DS_LOG_INFO, "relocate_started",
	       "source=%s namespace=%s target_namespace=%s seq=%lld", r->source, r->ns, tns,
	       (long long)r->seq);
	if (!ds_relocation_granted(c->cfg, r->source, r->ns, why, sizeof(why))) {
		state = DS_RELOCATION_REFUSED;
		snprintf(message, size, "refused: %s; nothing was changed", why);
	} else if (fail_over(c, r, tns, &said) != 0) {
		state = DS_RELOCATION_FAILED;
		snprintf(message, size, "failover of %s failed: %s", tns,
			 said.first_problem[0] ? said.first_problem : said.last);
	} else if (verify(c, tns, why, sizeof(why), &verified) != 0) {
		state = DS_RELOCATION_FAILED;
		snprintf(message, size, "namespace %s is active but not verified: %s", tns, why);
	} else {
		state = DS_RELOCATION_ACTIVE;
		snprintf(message, size,
			 "namespace %s verified active: %zu workload%s verified (pods Running, "
			 "claims allocated) in %.1f s",
			 tns, verified, verified == 1 ? "" : "s", ds_clock_mono_s() - t0);
	}
	rc = ds_relocation_finish(st, r, tns, state, message, err);
	if (rc < 0)
		return rc;
	{
		char q[600];
		ds_log_quote(message, q, sizeof(q));
		ds_log(state == DS_RELOCATION_ACTIVE ? DS_LOG_INFO : DS_LOG_WARN,
		       state == DS_RELOCATION_ACTIVE	? "relocated"
		       : state == DS_RELOCATION_REFUSED ? "relocate_refused"
							: "relocate_failed",
		       "source=%s namespace=%s target_namespace=%s seq=%lld detail=%s", r->source,
		       r->ns, tns, (long long)r->seq, q);
	}
	return (int)state;
}
