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

int ds_relocation_fail_over(const ds_relocation_ctx *c, const char *source, const char *const *tns,
			    size_t n, const char *what, char *problem, size_t size)
{
	struct said said = {.source = source, .ns = what};
	int rc = fail_over(c, source, tns, n, &said);

	if (rc && problem && size)
		snprintf(problem, size, "%s",
			 said.first_problem[0] ? said.first_problem : said.last);
	return rc;
}
