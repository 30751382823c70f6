/* `drasync-source relocate`: the steps and their order (relocation_run.h). */
#include "drasync/relocation_run.h"

#include "drasync/agent_state.h"
#include "drasync/clock.h"
#include "drasync/export_log.h"
#include "drasync/exporter.h"
#include "drasync/kinds.h"
#include "drasync/log.h"
#include "drasync/outbox.h"
#include "drasync/relocation_park.h"
#include "drasync/record.h"
#include "drasync/sender.h"
#include "drasync/source_agent.h"
#include "drasync/source_relocation.h"
#include "drasync/standby_form.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define DEFAULT_TIMEOUT_MS (10 * 60 * 1000LL)

bool ds_relocation_ns_allowed(const ds_source_config *cfg, const char *ns)
{
	size_t n = 0;
	const char *const *v = ds_source_config_namespaces(cfg, &n);

	if (!n)
		return ds_source_config_namespace_selector(cfg) != NULL;
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i], ns) == 0)
			return true;
	return false;
}

struct run {
	const ds_relocation_run_opts *o;
	const char *state_dir;
	char db_path[4096];
	ds_store *db;
	/* a sender of its own, when no agent runs */
	ds_sender *sender;
	ds_store *sender_db; /* the sender's thread's */
	pthread_t thread;
	bool sender_started;
	/* what the final pass listed, to park and mark from (NULL: not run here) */
	json_t *listed;
	int listed_rc;
};

static void say(void *ud, const char *line)
{
	const struct run *r = ud;

	fprintf(r->o->out, "  %s\n", line);
	fflush(r->o->out);
}

static void nap_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static bool agent_running(const struct run *r)
{
	ds_agent_state st;
	bool running = false;

	return ds_agent_state_read(r->state_dir, &st, &running, NULL) == 0 && running;
}

static void on_listed(void *ud, int kind, const char *api_version, const json_t *item)
{
	struct run *r = ud;
	const ds_kind *kd = ds_kind_get((enum ds_kind_id)kind);

	if (!kd || r->listed_rc < 0)
		return;
	r->listed_rc = ds_relocation_listed_add(r->listed, kd->name, api_version, item);
}

/*
 * The final pass (state syncing): NS's objects as the source has them now,
 * against what was pushed, into the outbox. The intent is committed first
 * and every push checks it in its own transaction, so whatever the running
 * agent (or an earlier run) pushed of NS comes before these records, and
 * nothing of NS after them: the relocation record, pushed after the
 * parking, is behind every change. @return 0, or 1 (said)
 */
static int final_pass(struct run *r)
{
	ds_exporter_config ec;
	ds_exporter *ex = NULL;
	ds_export_counts c = {0};
	ds_err err = {0};
	int rc;

	ds_exporter_config_default(&ec);
	ec.on_event = ds_export_log_event;
	ec.kube = r->o->kube;
	ec.state_dir = r->state_dir;
	ec.namespaces = (const char *const[]){r->o->ns};
	ec.n_namespaces = 1;
	ec.replicate_device_classes = true;
	ec.relocating_ns = r->o->ns;
	/* its lists are what parking and marking go through next */
	r->listed = json_object();
	r->listed_rc = r->listed ? 0 : -ENOMEM;
	ec.on_listed = on_listed;
	ec.listed_ud = r;
	rc = ds_exporter_new(&ex, &ec, &err);
	if (rc == 0)
		rc = ds_exporter_pass_namespace(ex, r->o->ns, &c, &err);
	ds_exporter_free(ex);
	if (rc < 0) {
		fprintf(r->o->errout,
			"drasync-source relocate: the final pass of %s: %s (nothing is parked; run "
			"the same command again)\n",
			r->o->ns, err.msg);
		return 1;
	}
	fprintf(r->o->out,
		"relocate: final pass of %s: %llu objects read, %llu changes and %llu deletions "
		"queued, %llu unchanged\n",
		r->o->ns, (unsigned long long)c.listed, (unsigned long long)c.pushed,
		(unsigned long long)c.tombstoned, (unsigned long long)c.unchanged);
	ds_log(DS_LOG_INFO, "relocate_final_pass",
	       "namespace=%s listed=%llu pushed=%llu unchanged=%llu tombstoned=%llu", r->o->ns,
	       (unsigned long long)c.listed, (unsigned long long)c.pushed,
	       (unsigned long long)c.unchanged, (unsigned long long)c.tombstoned);
	if (r->listed_rc < 0) {
		/* not kept whole: parking lists again */
		json_decref(r->listed);
		r->listed = NULL;
	}
	if (ds_source_relocation_synced(r->db, r->o->ns, &err) < 0) {
		fprintf(r->o->errout, "drasync-source relocate: %s\n", err.msg);
		return 1;
	}
	return 0;
}

static void on_results(void *ud, const ds_wire_result *v, size_t n)
{
	struct run *r = ud;

	ds_source_agent_relocation_results(r->sender_db, v, n);
}

static void *sender_main(void *arg)
{
	struct run *r = arg;
	ds_err err = {0};

	if (ds_sender_run(r->sender, 0, 0, &err) < 0)
		fprintf(r->o->errout, "drasync-source relocate: the link: %s\n", err.msg);
	return NULL;
}

/* No agent runs: carry the record with a sender of our own. @return 0, or < 0 (said) */
static int start_sender(struct run *r)
{
	const ds_source_config *cfg = r->o->cfg;
	ds_sender_config sc;
	ds_err err = {0};

	ds_sender_config_default(&sc);
	sc.endpoint = ds_source_config_endpoint(cfg);
	sc.server_public_key = ds_source_config_server_public_key(cfg);
	sc.keys = r->o->keys;
	sc.outbox_path = r->db_path;
	sc.cluster_name = ds_source_config_cluster_name(cfg);
	sc.on_results = on_results;
	sc.ud = r;
	if (ds_source_relocation_open(&r->sender_db, r->state_dir, &err) < 0 ||
	    ds_sender_new(&r->sender, &sc, &err) < 0) {
		fprintf(r->o->errout, "drasync-source relocate: %s\n", err.msg);
		return -EIO;
	}
	if (pthread_create(&r->thread, NULL, sender_main, r) != 0) {
		fprintf(r->o->errout, "drasync-source relocate: cannot start the sender\n");
		return -EAGAIN;
	}
	r->sender_started = true;
	fprintf(r->o->out,
		"relocate: drasync-source run is not running here: sending to %s myself\n",
		sc.endpoint);
	return 0;
}

static void stop_sender(struct run *r)
{
	if (r->sender_started) {
		ds_sender_stop(r->sender);
		pthread_join(r->thread, NULL);
	}
	ds_sender_free(r->sender);
	ds_store_free(r->sender_db);
}

static const char *when(int64_t t, char *buf, size_t size)
{
	struct tm tm;
	time_t tt = (time_t)t;

	gmtime_r(&tt, &tm);
	strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return buf;
}

/* Wait for the target's outcome of the sent relocation into *row. @return 1 got it, 0 timeout */
static int wait_outcome(struct run *r, ds_source_relocation *row, int64_t deadline)
{
	ds_err err = {0};

	fprintf(r->o->out,
		"relocate: waiting for the target to apply every record before seq %llu, fail "
		"%s over and verify it\n",
		(unsigned long long)row->seq, r->o->ns);
	fflush(r->o->out);
	while (ds_deadline_left(deadline) > 0) {
		if (ds_source_relocation_get(r->db, r->o->ns, row, &err) == 1 &&
		    (row->state == DS_SRC_RELOCATION_ACTIVE ||
		     row->state == DS_SRC_RELOCATION_FAILED))
			return 1;
		if (!r->sender_started && !agent_running(r) && start_sender(r) < 0)
			return 0;
		if (r->sender_started && agent_running(r)) {
			/* the agent is back (restarted): its sender carries the rest */
			stop_sender(r);
			r->sender = NULL;
			r->sender_db = NULL;
			r->sender_started = false;
			fprintf(r->o->out, "relocate: drasync-source run is running again: it "
					   "carries the relocation from here\n");
		}
		nap_ms(200);
	}
	return 0;
}

/* Verified active: the bare Pods and Jobs go, the outcome is printed. */
static int done(struct run *r, const ds_source_relocation *row)
{
	ds_err err = {0};
	char t[64];

	if (ds_relocation_remove_bare(r->o->kube, r->o->ns, say, r, &err) < 0)
		fprintf(r->o->errout,
			"drasync-source relocate: %s (run the command again to finish)\n", err.msg);
	fprintf(r->o->out, "relocated: %s to %s at %s: %s\n", r->o->ns, row->target,
		when(row->finished_at, t, sizeof(t)), row->message);
	ds_log(DS_LOG_INFO, "relocated", "namespace=%s target=%s seq=%llu", r->o->ns, row->target,
	       (unsigned long long)row->seq);
	return 0;
}

/* Refused or failed: the workloads come back, NS is exported again. */
static int failed(struct run *r, const ds_source_relocation *row)
{
	ds_err err = {0};
	int rc;

	fprintf(r->o->errout, "drasync-source relocate: the target did not take %s: %s\n", r->o->ns,
		row->message);
	fprintf(r->o->out, "relocate: bringing %s's workloads back on this cluster\n", r->o->ns);
	rc = ds_relocation_unpark(r->o->kube, r->o->ns, say, r, &err);
	if (rc < 0)
		fprintf(r->o->errout,
			"drasync-source relocate: %s; some workloads stay parked (annotation "
			"drasync.io/replicas keeps their counts)\n",
			err.msg);
	/* Nothing of NS went: the marks that let this cluster's target update it
	 * from the other site would only mislead. */
	memset(&err, 0, sizeof(err));
	if (row->target[0] &&
	    ds_relocation_unmark(r->o->kube, r->o->ns, row->target, say, r, &err) < 0)
		fprintf(r->o->errout,
			"drasync-source relocate: %s; some objects keep the mark "
			"drasync.io/relocated-to=%s (remove it: kubectl annotate -n %s <kind> "
			"<name> drasync.io/relocated-to-)\n",
			err.msg, row->target, r->o->ns);
	ds_log(DS_LOG_WARN, "relocate_failed", "namespace=%s seq=%llu", r->o->ns,
	       (unsigned long long)row->seq);
	return 1;
}

static int park_and_send(struct run *r, ds_source_relocation *row)
{
	ds_err err = {0};
	uint64_t seq = 0;
	int marked = 0, n;

	if (ds_source_relocation_get(r->db, r->o->ns, row, &err) != 1) {
		fprintf(r->o->errout, "drasync-source relocate: %s\n",
			err.msg[0] ? err.msg : "the relocation's row is gone");
		return 1;
	}
	/* parked and marked in one pass: each kind listed once, a workload written once */
	n = ds_relocation_park_mark(r->o->kube, r->o->ns, row->target, r->listed, &marked, say, r,
				    &err);
	if (n < 0) {
		fprintf(r->o->errout, "drasync-source relocate: parking %s: %s\n", r->o->ns,
			err.msg);
		ds_source_relocation_fail(r->db, r->o->ns, err.msg, NULL);
		ds_relocation_unpark(r->o->kube, r->o->ns, say, r, NULL);
		ds_relocation_unmark(r->o->kube, r->o->ns, row->target, say, r, NULL);
		return 1;
	}
	fprintf(r->o->out, "relocate: %d workload%s parked in %s\n", n, n == 1 ? "" : "s",
		r->o->ns);
	fprintf(r->o->out, "  %d object%s of %s marked %s=%s\n", marked, marked == 1 ? "" : "s",
		r->o->ns, DS_ANNOTATION_RELOCATED_TO, row->target);
	if (ds_source_relocation_push(r->db_path, r->o->ns, &seq, &err) < 0) {
		fprintf(r->o->errout, "drasync-source relocate: %s: %s\n", r->db_path, err.msg);
		return 1;
	}
	fprintf(r->o->out, "relocate: relocation record queued behind every change (seq %llu)\n",
		(unsigned long long)seq);
	ds_log(DS_LOG_INFO, "relocate_sent", "namespace=%s parked=%d seq=%llu", r->o->ns, n,
	       (unsigned long long)seq);
	if (ds_source_relocation_get(r->db, r->o->ns, row, &err) != 1) {
		fprintf(r->o->errout, "drasync-source relocate: %s\n", err.msg);
		return 1;
	}
	return 0;
}

static int steps(struct run *r)
{
	const ds_relocation_run_opts *o = r->o;
	ds_source_relocation row;
	ds_err err = {0};
	char t[64];
	int found = ds_source_relocation_get(r->db, o->ns, &row, &err), rc;
	enum ds_source_relocation_step step;
	int64_t deadline = ds_deadline_in(o->timeout_ms > 0 ? o->timeout_ms : DEFAULT_TIMEOUT_MS);

	if (found < 0) {
		fprintf(o->errout, "drasync-source relocate: %s\n", err.msg);
		return 1;
	}
	step = ds_source_relocation_next(&row, found == 1);
	if (step == DS_SRC_STEP_SYNC || step == DS_SRC_STEP_PARK)
		fprintf(o->out, "relocate: going on with the relocation of %s (%s)\n", o->ns,
			ds_source_relocation_state_name(row.state));
	switch (step) {
	case DS_SRC_STEP_DONE:
		fprintf(o->out, "relocate: %s was relocated already (at %s)\n", o->ns,
			when(row.finished_at, t, sizeof(t)));
		return done(r, &row);
	case DS_SRC_STEP_BEGIN:
		if (ds_source_relocation_begin(r->db, o->ns, ds_source_config_endpoint(o->cfg),
					       &err) < 0) {
			fprintf(o->errout, "drasync-source relocate: %s\n", err.msg);
			return 1;
		}
		fprintf(o->out, "relocate: intent recorded: nothing of %s is exported from now\n",
			o->ns);
		ds_log(DS_LOG_INFO, "relocate_intent", "namespace=%s target=%s", o->ns,
		       ds_source_config_endpoint(o->cfg));
		/* fall through */
	case DS_SRC_STEP_SYNC:
		if ((rc = final_pass(r)) != 0)
			return rc;
		/* fall through */
	case DS_SRC_STEP_PARK:
		if ((rc = park_and_send(r, &row)) != 0)
			return rc;
		break;
	case DS_SRC_STEP_WAIT:
		fprintf(o->out, "relocate: going on with the relocation of %s sent at seq %llu\n",
			o->ns, (unsigned long long)row.seq);
		break;
	}
	if (!wait_outcome(r, &row, deadline)) {
		fprintf(o->errout,
			"drasync-source relocate: no outcome from the target within the timeout; "
			"%s stays parked and the relocation open: run the same command again to "
			"keep waiting\n",
			o->ns);
		return 1;
	}
	return row.state == DS_SRC_RELOCATION_ACTIVE ? done(r, &row) : failed(r, &row);
}

int ds_relocation_run(const ds_relocation_run_opts *o)
{
	struct run r = {.o = o, .state_dir = ds_source_config_state_dir(o->cfg)};
	ds_err err = {0};
	int rc;

	if (!ds_relocation_ns_allowed(o->cfg, o->ns)) {
		fprintf(o->errout,
			"drasync-source relocate: %s: namespace %s is not one this source "
			"replicates (namespaces: in the file)\n",
			o->config_path, o->ns);
		return 2;
	}
	if (ds_export_db_path(r.state_dir, r.db_path, sizeof(r.db_path)) < 0 ||
	    ds_source_relocation_open(&r.db, r.state_dir, &err) < 0) {
		fprintf(o->errout, "drasync-source relocate: %s\n",
			err.msg[0] ? err.msg : "stateDir path too long");
		return 2;
	}
	rc = steps(&r);
	stop_sender(&r);
	ds_store_free(r.db);
	json_decref(r.listed);
	return rc;
}

int ds_relocation_park_here(const ds_relocation_run_opts *o)
{
	struct run r = {.o = o, .state_dir = ds_source_config_state_dir(o->cfg)};
	const char *to = ds_source_config_endpoint(o->cfg);
	ds_err err = {0};
	int rc = 0, n;

	if (!ds_relocation_ns_allowed(o->cfg, o->ns)) {
		fprintf(o->errout,
			"drasync-source park: %s: namespace %s is not one this source replicates "
			"(namespaces: in the file)\n",
			o->config_path, o->ns);
		return 2;
	}
	if (ds_source_relocation_open(&r.db, r.state_dir, &err) < 0) {
		fprintf(o->errout, "drasync-source park: %s\n", err.msg);
		return 2;
	}
	if (ds_source_relocation_parked_by_operator(r.db, o->ns, to, &err) < 0) {
		fprintf(o->errout, "drasync-source park: %s\n", err.msg);
		rc = 1;
		goto out;
	}
	fprintf(o->out, "park: %s recorded as running at %s: nothing of it is exported from now\n",
		o->ns, to);
	ds_log(DS_LOG_INFO, "parked_by_operator", "namespace=%s target=%s", o->ns, to);
	n = ds_relocation_park(o->kube, o->ns, say, &r, &err);
	if (n >= 0) {
		fprintf(o->out, "park: %d workload%s parked in %s\n", n, n == 1 ? "" : "s", o->ns);
		n = ds_relocation_mark(o->kube, o->ns, to, say, &r, &err);
	}
	if (n >= 0)
		n = ds_relocation_remove_bare(o->kube, o->ns, say, &r, &err);
	if (n < 0) {
		fprintf(o->errout, "drasync-source park: %s: %s (run the same command again)\n",
			o->ns, err.msg);
		rc = 1;
		goto out;
	}
	fprintf(o->out,
		"parked: %s (the other site runs it; its drasync-source may replicate it "
		"back here)\n",
		o->ns);
out:
	ds_store_free(r.db);
	return rc;
}
