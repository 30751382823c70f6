/*
 * The running exporter: the exporter and the sender wired together and
 * driven by the schedule (watch, interval, cron or once).
 *
 * Threads: the caller's thread runs the passes or the watch; one thread runs
 * the sender; any thread may ask for the stop (the batch in flight is
 * finished: an outbox push is one transaction). `lock` and `cond` (monotonic)
 * carry the stop and the target's snapshot requests into the waits between
 * passes; `state_lock` guards agent.json's contents, written from the link's
 * events and the schedule.
 */
#include "drasync/source_agent.h"

#include "drasync/agent_state.h"
#include "drasync/clock.h"
#include "drasync/export_log.h"
#include "drasync/log.h"
#include "drasync/object_index.h"
#include "drasync/schedule.h"
#include "drasync/source_relocation.h"
#include "drasync/store.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct ds_source_agent {
	ds_source_agent_config cfg;
	ds_keypair keys;
	const ds_schedule_config *sched;
	const char *state_dir;
	ds_exporter *ex;
	ds_sender *sender;
	ds_link_stats link;	       /* the link's figures (the sender writes them) */
	_Atomic int64_t wire_saved_ms; /* when on_results last wrote them to agent.json */
	ds_store *reloc; /* the relocations (source_relocation.h): the sender's thread's */

	pthread_t sender_thread;
	int sender_rc;
	ds_err sender_err;

	/* Stop requests and the waits between passes. */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	atomic_bool stopping;

	/* What `status` reads beside the index, guarded by state_lock. */
	pthread_mutex_t state_lock;
	ds_agent_state state;

	/* Progress on a terminal during the first pass (monotonic ms). */
	bool tty;
	bool progress_shown;
	int64_t progress_start_ms, progress_last_ms;
};

/* ---- decisions a test reaches ----------------------------------------------------- */

/* Link events and what each says of the session (the others change nothing). */
static const struct {
	const char *event;
	int up;
} link_changes[] = {
    {"session_open", 1}, {"disconnected", 0},	  {"hello_timeout", 0},	 {"ack_timeout", 0},
    {"goodbye", 0},	 {"handshake_failed", 0}, {"target_too_old", 0},
};

int ds_source_agent_link_change(const char *event)
{
	for (size_t i = 0; i < sizeof(link_changes) / sizeof(link_changes[0]); i++)
		if (strcmp(event, link_changes[i].event) == 0)
			return link_changes[i].up;
	return -1;
}

int ds_source_agent_tally_of(const ds_export_status *st, ds_source_agent_tally *out)
{
	ds_source_agent_tally t = {.acknowledged = st->outbox.acked_seq};

	for (size_t i = 0; i < st->n_failures; i++)
		t.failed += st->failures[i].status == DS_RESULT_FAILED;
	t.failed += st->more_failures;
	for (size_t i = 0; i < st->n_kinds; i++) {
		t.committed += st->kinds[i].ok;
		t.applied += st->kinds[i].applied;
		t.held += st->kinds[i].held;
		t.waiting += st->kinds[i].waiting;
		t.refused += st->kinds[i].refused;
	}
	*out = t;
	return t.failed + t.waiting + t.refused > 0 ? 1 : 0;
}

int ds_source_agent_check_outbox(const char *state_dir, char *hint, size_t size, ds_err *err)
{
	char db[4096];
	int rc;

	hint[0] = '\0';
	if (ds_export_db_path(state_dir, db, sizeof(db)) < 0) {
		ds_err_set(err, "stateDir path too long");
		return -ENAMETOOLONG;
	}
	rc = ds_store_check(db, err);
	if (rc == -EBADMSG)
		snprintf(hint, size,
			 "  (the outbox cannot be used: stop drasync-source, move %s and its -wal "
			 "and -shm files aside, e.g. to %s.damaged, and start again: a new outbox "
			 "sends the target a full snapshot, and the target prunes what it no "
			 "longer holds)\n",
			 db, db);
	else if (rc == -ENOSPC)
		snprintf(hint, size,
			 "  (free space on the filesystem that holds %s and start again)\n", db);
	return rc;
}

int ds_source_agent_report(FILE *out, const ds_export_status *st, const char *config_path)
{
	ds_source_agent_tally t;
	int attention = ds_source_agent_tally_of(st, &t);

	for (size_t i = 0; i < st->n_failures; i++) {
		const ds_export_failure *f = &st->failures[i];

		fprintf(out, "%s %s %s%s%s: %s\n",
			ds_result_status_name((enum ds_result_status)f->status), f->kind, f->ns,
			f->ns[0] ? "/" : "", f->name, f->message);
	}
	if (st->more_failures)
		fprintf(out, "... and %zu more (drasync-source status --config %s)\n",
			st->more_failures, config_path);
	fprintf(out,
		"%llu records acknowledged by the target: %llu applied, %llu held, %llu waiting, "
		"%zu failed, %llu refused\n",
		(unsigned long long)t.acknowledged, (unsigned long long)t.applied,
		(unsigned long long)t.held, (unsigned long long)t.waiting, t.failed,
		(unsigned long long)t.refused);
	return attention;
}

/* ---- the agent's state file and the link's events ---------------------------- */

static void state_save(ds_source_agent *a)
{
	ds_err err = {0};
	int rc;

	pthread_mutex_lock(&a->state_lock);
	ds_link_stats_read(&a->link, &a->state.wire);
	rc = ds_agent_state_write(a->state_dir, &a->state, &err);
	pthread_mutex_unlock(&a->state_lock);
	if (rc < 0)
		ds_log(DS_LOG_WARN, "state_write_failed", "error=%s", err.msg);
}

static void on_link_event(void *ud, const ds_transport_event *ev)
{
	ds_source_agent *a = ud;
	int up = ds_source_agent_link_change(ev->name);

	ds_transport_event_log(NULL, ev);
	if (a->cfg.on_link_event)
		a->cfg.on_link_event(a->cfg.ud, ev);
	if (up < 0)
		return;
	pthread_mutex_lock(&a->state_lock);
	if (a->state.connected != (up == 1))
		a->state.since_ms = ds_clock_wall_ms();
	a->state.connected = up == 1;
	snprintf(a->state.last_event, sizeof(a->state.last_event), "%s", ev->name);
	snprintf(a->state.last_detail, sizeof(a->state.last_detail), "%s", ev->detail);
	pthread_mutex_unlock(&a->state_lock);
	state_save(a);
}

/* ---- stopping and waiting ------------------------------------------------------------ */

void ds_source_agent_stop(ds_source_agent *a)
{
	if (!a)
		return;
	pthread_mutex_lock(&a->lock);
	atomic_store(&a->stopping, true);
	pthread_cond_broadcast(&a->cond);
	pthread_mutex_unlock(&a->lock);
	ds_exporter_stop(a->ex);
}

/*
 * Wait until the monotonic `deadline`, a stop, or the target asking for a
 * snapshot (which interval and cron send at once, not at the next slot).
 * @return true when stopped
 */
static bool wait_until(ds_source_agent *a, int64_t deadline)
{
	pthread_mutex_lock(&a->lock);
	while (!atomic_load(&a->stopping) && !ds_deadline_passed(deadline) &&
	       !ds_exporter_snapshot_wanted(a->ex))
		if (ds_cond_wait_until(&a->cond, &a->lock, deadline) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&a->lock);
	return atomic_load(&a->stopping);
}

static void on_snapshot_required(void *ud, uint64_t target_committed_seq)
{
	ds_source_agent *a = ud;

	ds_exporter_on_snapshot_required(a->ex, target_committed_seq);
	pthread_mutex_lock(&a->lock);
	pthread_cond_broadcast(&a->cond);
	pthread_mutex_unlock(&a->lock);
}

static void on_results(void *ud, const ds_wire_result *v, size_t n)
{
	ds_source_agent *a = ud;
	int64_t now = ds_clock_mono_ms();

	ds_exporter_on_results(a->ex, v, n);
	/* `status` shows the link's figures: refreshed at most every 2 s as Acks come. */
	if (now - atomic_load(&a->wire_saved_ms) >= 2000) {
		atomic_store(&a->wire_saved_ms, now);
		state_save(a);
	}
	ds_source_agent_relocation_results(a->reloc, v, n);
}

void ds_source_agent_relocation_results(ds_store *reloc, const ds_wire_result *v, size_t n)
{
	ds_err err = {0};
	char q[600];
	int rc = reloc ? ds_source_relocation_on_results(reloc, v, n, &err) : 0;

	if (rc < 0) {
		ds_log(DS_LOG_ERROR, "relocation_not_recorded", "error=%s",
		       ds_log_quote(err.msg, q, sizeof(q)));
		return;
	}
	for (size_t i = 0; rc > 0 && i < n; i++)
		if (v[i].status == DS_RESULT_APPLIED || v[i].status == DS_RESULT_FAILED ||
		    v[i].status == DS_RESULT_REFUSED || v[i].status == DS_RESULT_SKIPPED) {
			ds_log(v[i].status == DS_RESULT_APPLIED ? DS_LOG_INFO : DS_LOG_WARN,
			       "relocation_result", "seq=%llu status=%s detail=%s",
			       (unsigned long long)v[i].seq, ds_result_status_name(v[i].status),
			       ds_log_quote(v[i].message ? v[i].message : "", q, sizeof(q)));
		}
}

/* ---- the sender's thread ---------------------------------------------------------- */

static void *sender_main(void *arg)
{
	ds_source_agent *a = arg;

	a->sender_rc = ds_sender_run(a->sender, 0, 0, &a->sender_err);
	if (a->sender_rc < 0) {
		ds_log(DS_LOG_ERROR, "sender_failed", "error=%s", a->sender_err.msg);
		ds_source_agent_stop(a);
	}
	return NULL;
}

static void on_pushed(void *ud, uint64_t last_seq)
{
	ds_source_agent *a = ud;

	if (a->cfg.on_pushed)
		a->cfg.on_pushed(a->cfg.ud, last_seq);
	if (a->sender)
		ds_sender_wake(a->sender);
}

/* ---- progress on a terminal ------------------------------------------------------ */

static void on_progress(void *ud, const char *kind, const ds_export_counts *c)
{
	ds_source_agent *a = ud;
	int64_t t = ds_clock_mono_ms();
	double secs;

	if (!a->tty || t - a->progress_last_ms < 250)
		return;
	a->progress_last_ms = t;
	secs = (double)(t - a->progress_start_ms) / 1000.0;
	fprintf(stderr,
		"\r\033[K%s: listed %llu  pushed %llu  unchanged %llu  skipped %llu  "
		"acknowledged %llu  %.0f objects/s",
		kind ? kind : "", (unsigned long long)c->listed, (unsigned long long)c->pushed,
		(unsigned long long)c->unchanged, (unsigned long long)c->skipped,
		(unsigned long long)(a->sender ? ds_sender_acked(a->sender) : 0),
		secs > 0 ? (double)c->listed / secs : 0.0);
	a->progress_shown = true;
}

static void progress_end(ds_source_agent *a)
{
	if (a->progress_shown)
		fputc('\n', stderr);
	a->progress_shown = false;
	a->tty = false; /* only the first pass shows progress */
}

/* ---- one pass ----------------------------------------------------------------------- */

/* What to do about an error of the state files (logfmt, with its leading space), else "". */
static const char *storage_hint(int rc)
{
	if (rc == -ENOSPC)
		return " hint=\"free space on the filesystem of stateDir and start again: nothing "
		       "is lost, the agent lists the cluster again\"";
	if (rc == -EBADMSG)
		return " hint=\"the outbox is damaged: stop the agent, move it and its -wal and "
		       "-shm files aside and start again (a full snapshot)\"";
	return "";
}

static int run_pass(ds_source_agent *a, const char *why, ds_err *err)
{
	ds_export_counts c = {0};
	int64_t t0 = ds_clock_mono_ms();
	int rc;

	a->progress_start_ms = t0;
	ds_log(DS_LOG_INFO, "pass_start", "reason=%s", why);
	rc = ds_exporter_pass(a->ex, &c, err);
	progress_end(a);
	if (rc == -ECANCELED)
		return rc;
	if (a->cfg.on_pass)
		a->cfg.on_pass(a->cfg.ud, &c, rc, (double)(ds_clock_mono_ms() - t0) / 1000.0);
	ds_log(rc < 0 ? DS_LOG_WARN : DS_LOG_INFO, "pass_done",
	       "listed=%llu pushed=%llu unchanged=%llu skipped=%llu tombstoned=%llu ms=%lld%s%s%s",
	       (unsigned long long)c.listed, (unsigned long long)c.pushed,
	       (unsigned long long)c.unchanged, (unsigned long long)c.skipped,
	       (unsigned long long)c.tombstoned, (long long)(ds_clock_mono_ms() - t0),
	       rc < 0 ? " error=" : "", rc < 0 ? err->msg : "", storage_hint(rc));
	return rc;
}

/* ---- schedules ---------------------------------------------------------------------- */

static int run_watch(ds_source_agent *a, ds_err *err)
{
	int rc;

	a->progress_start_ms = ds_clock_mono_ms();
	rc = ds_exporter_watch(a->ex, err);
	progress_end(a);
	if (rc < 0 && rc != -ECANCELED) {
		ds_log(DS_LOG_ERROR, "watch_failed", "error=\"%s\"%s", err->msg, storage_hint(rc));
		return rc;
	}
	return 0;
}

/* The next three run times, so an operator can check the expression. */
static void log_next_three(ds_source_agent *a, ds_schedule *clock)
{
	int64_t t = ds_clock_wall_ms(), n[3] = {0, 0, 0};
	char b1[40], b2[40], b3[40];

	for (int i = 0; i < 3; i++) {
		if (ds_schedule_next(clock, 0, t, &n[i], NULL, NULL) < 0)
			break;
		t = n[i];
	}
	ds_log(DS_LOG_INFO, "schedule", "mode=%s next=%s,%s,%s",
	       ds_schedule_mode_name(a->sched->mode), ds_schedule_format_time(n[0], b1, 40),
	       ds_schedule_format_time(n[1], b2, 40), ds_schedule_format_time(n[2], b3, 40));
}

/* interval and cron: slots are wall-clock times; each wait is a monotonic deadline. */
static int run_clock(ds_source_agent *a, ds_err *err)
{
	ds_schedule *clock = NULL;
	int64_t slot, next, deadline;
	uint64_t missed = 0;
	char b1[40];
	int rc = ds_schedule_new(&clock, a->sched, ds_clock_wall_ms(), err);

	if (rc < 0) {
		ds_log(DS_LOG_ERROR, "schedule_invalid", "error=%s", err->msg);
		return -EINVAL;
	}
	log_next_three(a, clock);
	/* The first pass runs at start (it brings the target up to date);
	 * interval slots count from here, cron slots are the expression's. */
	slot = ds_clock_wall_ms();
	rc = 0;
	for (bool first = true; !atomic_load(&a->stopping); first = false) {
		ds_err pass_err = {0};

		if (run_pass(a, first ? "start" : "schedule", &pass_err) == -ECANCELED)
			break;
		if (ds_schedule_next(clock, slot, ds_clock_wall_ms(), &next, &missed, err) < 0) {
			ds_log(DS_LOG_ERROR, "schedule_ended", "error=%s", err->msg);
			rc = -ERANGE;
			break;
		}
		if (missed)
			ds_log(DS_LOG_WARN, "pass_overran",
			       "skipped_slots=%llu detail=\"the pass ran past its next slot; it is "
			       "not started twice\"",
			       (unsigned long long)missed);
		pthread_mutex_lock(&a->state_lock);
		a->state.next_pass_ms = next;
		pthread_mutex_unlock(&a->state_lock);
		state_save(a);
		ds_log(DS_LOG_INFO, "pass_next", "at=%s", ds_schedule_format_time(next, b1, 40));
		/* Both clocks read in whole ms: without the 1 ms the monotonic deadline
		 * can pass before the wall-clock slot, and a pass would start at 11:59:59.999
		 * for a slot of 12:00 (a cron pass never starts before its slot). */
		deadline = ds_deadline_in(next - ds_clock_wall_ms() + 1);
		if (wait_until(a, deadline))
			break;
		if (!ds_deadline_passed(deadline)) {
			ds_log(DS_LOG_INFO, "snapshot_now",
			       "detail=\"the target asked for a snapshot: the pass runs now\"");
			continue; /* the slot stays the last one run */
		}
		slot = next;
	}
	ds_schedule_free(clock);
	return rc;
}

/* Objects the target committed and has not applied yet, by the index's counts. */
static int committed_not_applied(ds_object_index *idx, uint64_t *n, ds_err *err)
{
	ds_index_kind_count *kinds = NULL;
	size_t nk = 0;
	int rc = ds_object_index_kind_counts(idx, &kinds, &nk, err);

	*n = 0;
	for (size_t i = 0; rc == 0 && i < nk; i++)
		*n += kinds[i].ok;
	free(kinds);
	return rc;
}

/*
 * once, after everything is acknowledged: a target that sends apply results
 * (SPEC §6) is waited for until each object has one (applied, held, waiting,
 * failed or skipped), within the timeout. The counts are read every 100 ms
 * on a connection of the wait's own, opened once (the sender writes the
 * results through the exporter's). @return 0 every result in (or stopped),
 * or a negative errno
 */
static int wait_applied(ds_source_agent *a, int64_t deadline, ds_err *err)
{
	int64_t next_note = ds_deadline_in(5000);
	ds_object_index *idx = NULL;
	uint64_t committed = 0;
	char db[1024];
	ds_err why = {0};
	int rc;

	if (ds_sender_target_sends_apply_results(a->sender) != 1)
		return 0;
	if (ds_export_db_path(a->state_dir, db, sizeof(db)) < 0 ||
	    ds_object_index_open(&idx, db, &why) < 0) {
		ds_err_set(err, "reading the results: %s", why.msg);
		return -EIO;
	}
	for (;;) {
		if (committed_not_applied(idx, &committed, &why) < 0) {
			ds_err_set(err, "reading the results: %s", why.msg);
			rc = -EIO;
			break;
		}
		if (committed == 0 || atomic_load(&a->stopping)) {
			rc = 0;
			break;
		}
		if (deadline && ds_deadline_passed(deadline)) {
			ds_err_set(
			    err,
			    "%llu objects are committed on the target but not applied yet "
			    "within the --timeout (its API server may be slow or down); they "
			    "are safe in its ledger and will be applied there: drasync-source "
			    "status --config %s shows them",
			    (unsigned long long)committed, a->cfg.config_path);
			rc = -ETIMEDOUT;
			break;
		}
		if (ds_deadline_passed(next_note)) {
			ds_log(DS_LOG_INFO, "waiting_for_apply", "committed_not_applied=%llu",
			       (unsigned long long)committed);
			next_note = ds_deadline_in(5000);
		}
		wait_until(a, ds_deadline_in(100));
	}
	ds_object_index_free(idx);
	return rc;
}

/* once: the sender has been sending since the pass began; wait for its
 * acknowledgements up to `until`, with a snapshot at once if the target asks. */
static int wait_acked(ds_source_agent *a, uint64_t until, int64_t deadline, ds_err *err)
{
	int rc;

	while (until > 0 && ds_sender_acked(a->sender) < until) {
		if (atomic_load(&a->stopping))
			return -ECANCELED;
		if (deadline && ds_deadline_passed(deadline)) {
			ds_err_set(err,
				   "the target did not acknowledge seq %llu within the --timeout; "
				   "the records stay in the outbox and go out on the next run",
				   (unsigned long long)until);
			return -ETIMEDOUT;
		}
		if (ds_exporter_snapshot_wanted(a->ex)) {
			rc = run_pass(a, "snapshot", err);
			if (rc < 0)
				return rc;
			if (ds_exporter_last_seq(a->ex) > until)
				until = ds_exporter_last_seq(a->ex);
		}
		wait_until(a, ds_deadline_in(20));
	}
	return 0;
}

/* once: one pass, then wait until the target acknowledged (and applied) everything. */
static int run_once(ds_source_agent *a, ds_err *err)
{
	int64_t deadline = 0;
	ds_export_status *st = NULL;
	ds_err why = {0};
	uint64_t until;
	int rc;

	rc = run_pass(a, "once", err);
	if (rc < 0)
		return rc == -ECANCELED ? 0 : rc;
	/* Everything the outbox holds, this pass's records and any an earlier
	 * run left unacknowledged. */
	rc = ds_export_status_read(a->state_dir, 0, &st, &why);
	if (rc < 0) {
		ds_err_set(err, "reading the outbox: %s", why.msg);
		return -EIO;
	}
	until = st->outbox.last_seq > st->outbox.acked_seq ? st->outbox.last_seq : 0;
	ds_export_status_free(st);
	ds_log(DS_LOG_INFO, "waiting_for_target", "until_seq=%llu", (unsigned long long)until);
	if (a->cfg.timeout_ms > 0)
		deadline = ds_deadline_in(a->cfg.timeout_ms);
	rc = wait_acked(a, until, deadline, err);
	if (rc == 0) {
		if (a->cfg.timeout_ms > 0)
			deadline = ds_deadline_in(a->cfg.timeout_ms);
		rc = wait_applied(a, deadline, err);
	}
	if (rc == -ECANCELED || (rc == 0 && atomic_load(&a->stopping)))
		return 0;
	return rc < 0 ? rc : DS_SOURCE_AGENT_ONCE_DONE;
}

/* ---- the agent ------------------------------------------------------------------------- */

static bool ns_match(void *ud, const json_t *ns)
{
	const ds_source_agent *a = ud;
	const json_t *labels = json_object_get(json_object_get(ns, "metadata"), "labels");

	return ds_label_selector_matches(a->cfg.selector, labels);
}

static int make_exporter(ds_source_agent *a, ds_err *err)
{
	ds_exporter_config ec;
	size_t n_ns = 0;

	ds_exporter_config_default(&ec);
	ec.on_event = ds_export_log_event; /* the agent logs what the exporter reports */
	ec.kube = a->cfg.kube;
	ec.state_dir = a->state_dir;
	ec.namespaces = ds_source_config_namespaces(a->cfg.cfg, &n_ns);
	ec.n_namespaces = n_ns;
	/* DeviceClasses belong to the target's infrastructure team: the source
	 * offers them and the target copies them only with replicateDeviceClasses. */
	ec.replicate_device_classes = true;
	if (a->cfg.selector) {
		ec.ns_match = ns_match;
		ec.ns_match_ud = a;
	}
	if (a->sched->mode == DS_SCHEDULE_WATCH) {
		ec.debounce_ms = a->sched->debounce_ms;
		ec.quiet_ms = a->sched->quiet_ms;
	}
	ec.on_progress = on_progress;
	ec.progress_ud = a;
	ec.on_pushed = on_pushed;
	ec.pushed_ud = a;
	return ds_exporter_new(&a->ex, &ec, err);
}

static int make_sender(ds_source_agent *a, ds_err *err)
{
	const ds_socks_proxy *px = ds_source_config_proxy(a->cfg.cfg);
	const char *cred_file = ds_source_config_proxy_credentials_file(a->cfg.cfg);
	ds_socks_proxy proxy = {.address = ""};
	ds_sender_config sc;
	char db[4096];
	int rc;

	if (ds_export_db_path(a->state_dir, db, sizeof(db)) < 0) {
		ds_err_set(err, "stateDir path too long");
		return -ENAMETOOLONG;
	}
	ds_sender_config_default(&sc);
	sc.endpoint = ds_source_config_endpoint(a->cfg.cfg);
	sc.server_public_key = ds_source_config_server_public_key(a->cfg.cfg);
	sc.keys = &a->keys;
	sc.outbox_path = db;
	sc.cluster_name = ds_source_config_cluster_name(a->cfg.cfg);
	sc.on_event = on_link_event;
	sc.event_ud = a;
	sc.on_results = on_results;
	sc.on_snapshot_required = on_snapshot_required;
	sc.ud = a;
	sc.stats = &a->link;
	sc.bandwidth = ds_source_config_bandwidth(a->cfg.cfg);
	if (px) {
		proxy = *px;
		if (cred_file && (rc = ds_socks_proxy_load_credentials(cred_file, &proxy, err)) < 0)
			goto out;
		sc.socks_proxy = proxy.address;
		sc.socks_username = proxy.username[0] ? proxy.username : NULL;
		sc.socks_password = proxy.username[0] ? proxy.password : NULL;
	}
	rc = ds_sender_new(&a->sender, &sc, err);
out:
	ds_socks_proxy_dispose(&proxy);
	return rc;
}

int ds_source_agent_new(ds_source_agent **out, const ds_source_agent_config *cfg, ds_err *err)
{
	ds_source_agent *a = calloc(1, sizeof(*a));
	size_t n_ns = 0;
	int rc;

	if (!a) {
		ds_err_set(err, "out of memory");
		return -ENOMEM;
	}
	a->cfg = *cfg;
	a->keys = *cfg->keys;
	a->cfg.keys = &a->keys;
	a->sched = ds_source_config_schedule(cfg->cfg);
	a->state_dir = ds_source_config_state_dir(cfg->cfg);
	a->tty = cfg->progress;
	pthread_mutex_init(&a->lock, NULL);
	pthread_mutex_init(&a->state_lock, NULL);
	rc = -ds_cond_init_monotonic(&a->cond);
	if (rc < 0) {
		ds_err_set(err, "%s", strerror(-rc));
		pthread_mutex_destroy(&a->state_lock);
		pthread_mutex_destroy(&a->lock);
		free(a);
		return rc;
	}
	if ((rc = make_exporter(a, err)) < 0 || (rc = make_sender(a, err)) < 0 ||
	    (rc = ds_source_relocation_open(&a->reloc, a->state_dir, err)) < 0)
		goto out;
	a->state.pid = (int64_t)getpid();
	a->state.started_ms = ds_clock_wall_ms();
	snprintf(a->state.endpoint, sizeof(a->state.endpoint), "%s",
		 ds_source_config_endpoint(cfg->cfg));
	snprintf(a->state.schedule, sizeof(a->state.schedule), "%s",
		 ds_schedule_mode_name(a->sched->mode));
	/* The proxy's address only: its credentials never leave the sender. */
	a->state.bandwidth = ds_source_config_bandwidth(cfg->cfg);
	snprintf(a->state.proxy, sizeof(a->state.proxy), "%s",
		 ds_source_config_proxy(cfg->cfg) ? ds_source_config_proxy(cfg->cfg)->address : "");
	state_save(a);
	(void)ds_source_config_namespaces(cfg->cfg, &n_ns);
	ds_log(DS_LOG_INFO, "started",
	       "cluster=%s target=%s schedule=%s state_dir=%s namespaces=%zu selector=%s "
	       "bandwidth=%llu proxy=%s",
	       ds_source_config_cluster_name(cfg->cfg), ds_source_config_endpoint(cfg->cfg),
	       ds_schedule_mode_name(a->sched->mode), a->state_dir, n_ns,
	       cfg->selector ? "yes" : "no", (unsigned long long)a->state.bandwidth,
	       a->state.proxy[0] ? a->state.proxy : "none");
out:
	if (rc < 0) {
		ds_source_agent_free(a);
		return rc;
	}
	*out = a;
	return 0;
}

ds_sender *ds_source_agent_sender(ds_source_agent *a)
{
	return a->sender;
}

int ds_source_agent_run(ds_source_agent *a, ds_err *err)
{
	int rc;

	/* The link runs beside the passes from the start (once included: its
	 * records go out while it still lists). */
	if (pthread_create(&a->sender_thread, NULL, sender_main, a) != 0) {
		ds_err_set(err, "cannot start the sender thread");
		rc = -EAGAIN;
		goto out;
	}
	if (a->sched->mode == DS_SCHEDULE_ONCE)
		rc = run_once(a, err);
	else if (a->sched->mode == DS_SCHEDULE_WATCH)
		rc = run_watch(a, err);
	else
		rc = run_clock(a, err);
	/* The exporter has returned (its last push committed): now stop the link. */
	ds_sender_stop(a->sender);
	pthread_join(a->sender_thread, NULL);
	if (a->sender_rc < 0 && rc >= 0) {
		*err = a->sender_err;
		rc = a->sender_rc;
	}
out:
	pthread_mutex_lock(&a->state_lock);
	a->state.connected = false;
	snprintf(a->state.last_event, sizeof(a->state.last_event), "stopped");
	a->state.last_detail[0] = '\0';
	pthread_mutex_unlock(&a->state_lock);
	state_save(a);
	return rc;
}

void ds_source_agent_free(ds_source_agent *a)
{
	if (!a)
		return;
	ds_sender_free(a->sender);
	ds_exporter_free(a->ex);
	ds_store_free(a->reloc);
	pthread_cond_destroy(&a->cond);
	pthread_mutex_destroy(&a->state_lock);
	pthread_mutex_destroy(&a->lock);
	free(a);
}
