/*
 * drasync-source run --config source.yaml: the exporter. Wires the
 * configuration, the source cluster's client, the exporter (passes and
 * watches that fill the outbox) and the sender (which drains it to the
 * target) together, and runs the schedule: watch, interval, cron or once.
 *
 * Threads: the main thread runs the passes or the watch; one thread runs the
 * sender; one waits for SIGTERM/SIGINT and stops both in order (the batch in
 * flight is finished: an outbox push is one transaction).
 */
#include "commands.h"

#include "drasync/agent_state.h"
#include "drasync/duration.h"
#include "drasync/export_log.h"
#include "drasync/exporter.h"
#include "drasync/export_status.h"
#include "drasync/keys.h"
#include "drasync/kube_client.h"
#include "drasync/label_selector.h"
#include "drasync/log.h"
#include "drasync/schedule.h"
#include "drasync/sender.h"
#include "drasync/source_config.h"
#include "drasync/source_monitor.h"
#include "drasync/sqlite_util.h"
#include "drasync/stop_signals.h"

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct run_opts {
	const char *config;
	const char *kubeconfig; /* --kubeconfig: overrides the file's */
	const char *context;
	long long timeout_ms; /* once: give up waiting for the target after this */
};

struct run {
	struct run_opts opts;
	ds_source_config *cfg;
	const ds_schedule_config *sched;
	const char *state_dir;
	ds_label_selector *selector;
	ds_keypair keys;
	ds_kube *kube;
	ds_exporter *ex;
	ds_sender *sender;
	ds_source_monitor *monitor; /* metrics and health (metrics.listen) */

	pthread_t sender_thread;
	bool sender_started;
	ds_stop_signals signals;
	int sender_rc;
	ds_err sender_err;

	/* Stop requests and the waits between passes. */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	atomic_bool stopping;

	/* What `status` reads beside the index, guarded by state_lock. */
	pthread_mutex_t state_lock;
	ds_agent_state state;

	/* Progress on a terminal during the first pass. */
	bool tty;
	bool progress_shown;
	int64_t progress_start_ms, progress_last_ms;
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void usage(FILE *out)
{
	fprintf(out, "Usage: drasync-source run --config FILE [OPTIONS]\n"
		     "\n"
		     "Replicates the selected namespaces of this cluster to a drasync-target:\n"
		     "lists and watches them, pushes every change once through the durable\n"
		     "outbox in stateDir, and follows the schedule of the configuration file:\n"
		     "  watch     stream changes as they happen (debounced)\n"
		     "  interval  an incremental pass every `every`\n"
		     "  cron      an incremental pass at each time of `expr`\n"
		     "  once      one full pass; wait for the target's results; exit 0 when\n"
		     "            all were applied, 1 when some failed\n"
		     "\n"
		     "Options:\n"
		     "  -c, --config FILE      the SourceConfig file (required)\n"
		     "      --kubeconfig PATH  use this kubeconfig instead of the file's\n"
		     "                         `kubeconfig` (empty there: in-cluster)\n"
		     "      --context NAME     the kubeconfig context (default: current)\n"
		     "      --log-level LEVEL  debug, info, warn or error (default info)\n"
		     "      --timeout DUR      once: stop waiting for the target after DUR\n"
		     "                         (Go duration, e.g. 10m; default: wait)\n"
		     "  -h, --help             show this help\n"
		     "\n"
		     "With metrics.listen in the file (e.g. 127.0.0.1:9451) it serves /metrics\n"
		     "(Prometheus), /healthz and /readyz.\n"
		     "\n"
		     "Exit codes: 0 done (or stopped by SIGTERM/SIGINT), 1 the target failed\n"
		     "objects or the run could not go on, 2 usage or configuration error.\n"
		     "\n"
		     "Example, outside a cluster against a kubeconfig:\n"
		     "  drasync-source run --config source.yaml --kubeconfig ~/.kube/config \\\n"
		     "      --context prod-east\n");
}

static int parse_args(int argc, char **argv, struct run_opts *o)
{
	static const struct option longopts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"kubeconfig", required_argument, NULL, 'k'},
	    {"context", required_argument, NULL, 'x'},
	    {"log-level", required_argument, NULL, 'l'},
	    {"timeout", required_argument, NULL, 't'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	enum ds_log_level level;
	ds_err err = {0};
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "c:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			o->config = optarg;
			break;
		case 'k':
			o->kubeconfig = optarg;
			break;
		case 'x':
			o->context = optarg;
			break;
		case 'l':
			if (ds_log_level_parse(optarg, &level) < 0) {
				fprintf(
				    stderr,
				    "drasync-source run: --log-level: '%s' is not one of debug, "
				    "info, warn, error\n",
				    optarg);
				return 2;
			}
			ds_log_set_level(level);
			break;
		case 't':
			if (ds_duration_parse_ms(optarg, &o->timeout_ms, NULL, &err) < 0) {
				fprintf(stderr,
					"drasync-source run: --timeout: %s (e.g. 10m, 90s)\n",
					err.msg);
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			fprintf(stderr, "Try 'drasync-source run --help'.\n");
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "drasync-source run: unexpected argument '%s' (try --help)\n",
			argv[optind]);
		return 2;
	}
	if (!o->config) {
		fprintf(stderr, "drasync-source run: --config FILE is required, e.g.\n"
				"  drasync-source run --config /etc/drasync/source.yaml\n");
		return 2;
	}
	return -1;
}

/* ---- the agent's state file and the link's events ---------------------------- */

static void state_save(struct run *r)
{
	ds_err err = {0};
	int rc;

	pthread_mutex_lock(&r->state_lock);
	rc = ds_agent_state_write(r->state_dir, &r->state, &err);
	pthread_mutex_unlock(&r->state_lock);
	if (rc < 0)
		ds_log(DS_LOG_WARN, "state_write_failed", "error=%s", err.msg);
}

static void on_link_event(void *ud, const ds_transport_event *ev)
{
	struct run *r = ud;
	bool up = strcmp(ev->name, "session_open") == 0;
	bool down = strcmp(ev->name, "disconnected") == 0 ||
		    strcmp(ev->name, "hello_timeout") == 0 ||
		    strcmp(ev->name, "ack_timeout") == 0 || strcmp(ev->name, "goodbye") == 0 ||
		    strcmp(ev->name, "handshake_failed") == 0;

	ds_transport_event_log(NULL, ev);
	ds_source_monitor_on_link_event(r->monitor, ev);
	if (!up && !down)
		return;
	pthread_mutex_lock(&r->state_lock);
	if (r->state.connected != up)
		r->state.since_ms = now_ms();
	r->state.connected = up;
	snprintf(r->state.last_event, sizeof(r->state.last_event), "%s", ev->name);
	snprintf(r->state.last_detail, sizeof(r->state.last_detail), "%s", ev->detail);
	pthread_mutex_unlock(&r->state_lock);
	state_save(r);
}

/* ---- stopping ------------------------------------------------------------------ */

static void request_stop(struct run *r)
{
	pthread_mutex_lock(&r->lock);
	atomic_store(&r->stopping, true);
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
	ds_exporter_stop(r->ex);
}

static void on_stop_signal(void *ud, int sig)
{
	(void)sig;
	request_stop(ud);
}

/*
 * Wait until `deadline_ms` (wall clock), a stop, or the target asking for a
 * snapshot (which interval and cron send at once, not at the next slot).
 * @return true when stopped
 */
static bool wait_until(struct run *r, int64_t deadline_ms)
{
	struct timespec ts = {.tv_sec = (time_t)(deadline_ms / 1000),
			      .tv_nsec = (long)(deadline_ms % 1000) * 1000000L};

	pthread_mutex_lock(&r->lock);
	while (!atomic_load(&r->stopping) && now_ms() < deadline_ms &&
	       !ds_exporter_snapshot_wanted(r->ex))
		if (pthread_cond_timedwait(&r->cond, &r->lock, &ts) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&r->lock);
	return atomic_load(&r->stopping);
}

static void on_snapshot_required(void *ud, uint64_t target_committed_seq)
{
	struct run *r = ud;

	ds_exporter_on_snapshot_required(r->ex, target_committed_seq);
	pthread_mutex_lock(&r->lock);
	pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

static void on_results(void *ud, const ds_wire_result *v, size_t n)
{
	struct run *r = ud;

	ds_exporter_on_results(r->ex, v, n);
}

/* ---- the sender's thread ---------------------------------------------------------- */

static void *sender_main(void *arg)
{
	struct run *r = arg;

	r->sender_rc = ds_sender_run(r->sender, 0, 0, &r->sender_err);
	if (r->sender_rc < 0) {
		ds_log(DS_LOG_ERROR, "sender_failed", "error=%s", r->sender_err.msg);
		request_stop(r);
	}
	return NULL;
}

static void on_pushed(void *ud, uint64_t last_seq)
{
	struct run *r = ud;

	ds_source_monitor_on_pushed(r->monitor, last_seq);
	if (r->sender)
		ds_sender_wake(r->sender);
}

/* ---- progress on a terminal ------------------------------------------------------ */

static void on_progress(void *ud, const char *kind, const ds_export_counts *c)
{
	struct run *r = ud;
	int64_t t = now_ms();
	double secs;

	if (!r->tty || t - r->progress_last_ms < 250)
		return;
	r->progress_last_ms = t;
	secs = (double)(t - r->progress_start_ms) / 1000.0;
	fprintf(stderr,
		"\r\033[K%s: listed %llu  pushed %llu  unchanged %llu  skipped %llu  "
		"acknowledged %llu  %.0f objects/s",
		kind ? kind : "", (unsigned long long)c->listed, (unsigned long long)c->pushed,
		(unsigned long long)c->unchanged, (unsigned long long)c->skipped,
		(unsigned long long)(r->sender ? ds_sender_acked(r->sender) : 0),
		secs > 0 ? (double)c->listed / secs : 0.0);
	r->progress_shown = true;
}

static void progress_end(struct run *r)
{
	if (r->progress_shown)
		fputc('\n', stderr);
	r->progress_shown = false;
	r->tty = false; /* only the first pass shows progress */
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

static int run_pass(struct run *r, const char *why)
{
	ds_export_counts c = {0};
	ds_err err = {0};
	int64_t t0 = now_ms();
	int rc;

	r->progress_start_ms = t0;
	ds_log(DS_LOG_INFO, "pass_start", "reason=%s", why);
	rc = ds_exporter_pass(r->ex, &c, &err);
	progress_end(r);
	if (rc == -ECANCELED)
		return rc;
	ds_source_monitor_on_pass(r->monitor, &c, rc, (double)(now_ms() - t0) / 1000.0);
	ds_log(rc < 0 ? DS_LOG_WARN : DS_LOG_INFO, "pass_done",
	       "listed=%llu pushed=%llu unchanged=%llu skipped=%llu tombstoned=%llu ms=%lld%s%s%s",
	       (unsigned long long)c.listed, (unsigned long long)c.pushed,
	       (unsigned long long)c.unchanged, (unsigned long long)c.skipped,
	       (unsigned long long)c.tombstoned, (long long)(now_ms() - t0),
	       rc < 0 ? " error=" : "", rc < 0 ? err.msg : "", storage_hint(rc));
	return rc;
}

/* ---- schedules ---------------------------------------------------------------------- */

static int run_watch(struct run *r)
{
	ds_err err = {0};
	int rc;

	r->progress_start_ms = now_ms();
	rc = ds_exporter_watch(r->ex, &err);
	progress_end(r);
	if (rc < 0 && rc != -ECANCELED) {
		ds_log(DS_LOG_ERROR, "watch_failed", "error=\"%s\"%s", err.msg, storage_hint(rc));
		return 1;
	}
	return 0;
}

static int run_clock(struct run *r)
{
	ds_schedule *clock = NULL;
	ds_err err = {0};
	int64_t slot, next;
	uint64_t missed = 0;
	char b1[40], b2[40], b3[40];
	int rc;

	rc = ds_schedule_new(&clock, r->sched, now_ms(), &err);
	if (rc < 0) {
		ds_log(DS_LOG_ERROR, "schedule_invalid", "error=%s", err.msg);
		return 2;
	}
	/* The next three run times, so an operator can check the expression. */
	{
		int64_t t = now_ms(), n[3] = {0, 0, 0};

		for (int i = 0; i < 3; i++) {
			if (ds_schedule_next(clock, 0, t, &n[i], NULL, &err) < 0)
				break;
			t = n[i];
		}
		ds_log(DS_LOG_INFO, "schedule", "mode=%s next=%s,%s,%s",
		       ds_schedule_mode_name(r->sched->mode), ds_schedule_format_time(n[0], b1, 40),
		       ds_schedule_format_time(n[1], b2, 40),
		       ds_schedule_format_time(n[2], b3, 40));
	}
	/* The first pass runs at start (it brings the target up to date);
	 * interval slots count from here, cron slots are the expression's. */
	slot = now_ms();
	for (bool first = true; !atomic_load(&r->stopping); first = false) {
		rc = run_pass(r, first ? "start" : "schedule");
		if (rc == -ECANCELED)
			break;
		if (ds_schedule_next(clock, slot, now_ms(), &next, &missed, &err) < 0) {
			ds_log(DS_LOG_ERROR, "schedule_ended", "error=%s", err.msg);
			ds_schedule_free(clock);
			return 1;
		}
		if (missed)
			ds_log(DS_LOG_WARN, "pass_overran",
			       "skipped_slots=%llu detail=\"the pass ran past its next slot; it is "
			       "not started twice\"",
			       (unsigned long long)missed);
		pthread_mutex_lock(&r->state_lock);
		r->state.next_pass_ms = next;
		pthread_mutex_unlock(&r->state_lock);
		state_save(r);
		ds_log(DS_LOG_INFO, "pass_next", "at=%s", ds_schedule_format_time(next, b1, 40));
		if (wait_until(r, next))
			break;
		if (now_ms() < next) {
			ds_log(DS_LOG_INFO, "snapshot_now",
			       "detail=\"the target asked for a snapshot: the pass runs now\"");
			continue; /* the slot stays the last one run */
		}
		slot = next;
	}
	ds_schedule_free(clock);
	return 0;
}

/*
 * once, after everything is acknowledged: a target that sends apply results
 * (SPEC §6) is waited for until each object has one (applied, held, waiting,
 * failed or skipped), within --timeout. @return -1 to go on, or an exit code
 */
static int wait_applied(struct run *r)
{
	int64_t deadline = r->opts.timeout_ms > 0 ? now_ms() + r->opts.timeout_ms : 0;
	int64_t next_note = now_ms() + 5000;
	ds_export_status *st = NULL;
	ds_err err = {0};

	if (ds_sender_target_sends_apply_results(r->sender) != 1)
		return -1;
	for (;;) {
		uint64_t committed = 0;

		if (ds_export_status_read(r->state_dir, 0, &st, &err) < 0) {
			fprintf(stderr, "drasync-source run: reading the results: %s\n", err.msg);
			return 1;
		}
		for (size_t i = 0; i < st->n_kinds; i++)
			committed += st->kinds[i].ok;
		ds_export_status_free(st);
		st = NULL;
		if (committed == 0)
			return -1;
		if (atomic_load(&r->stopping))
			return 0;
		if (deadline && now_ms() > deadline) {
			fprintf(stderr,
				"drasync-source run: %llu objects are committed on the target but "
				"not applied yet within the --timeout (its API server may be slow "
				"or down); they are safe in its ledger and will be applied there: "
				"drasync-source status --config %s shows them\n",
				(unsigned long long)committed, r->opts.config);
			return 1;
		}
		if (now_ms() >= next_note) {
			ds_log(DS_LOG_INFO, "waiting_for_apply", "committed_not_applied=%llu",
			       (unsigned long long)committed);
			next_note = now_ms() + 5000;
		}
		wait_until(r, now_ms() + 100);
	}
}

/* once: one pass, then wait until the target acknowledged (and applied) everything. */
static int run_once(struct run *r)
{
	ds_export_status *st = NULL;
	ds_err err = {0};
	uint64_t until;
	int rc;

	rc = run_pass(r, "once");
	if (rc == -ECANCELED)
		return 0;
	if (rc < 0)
		return 1;
	/* Everything the outbox holds, this pass's records and any an earlier
	 * run left unacknowledged. */
	rc = ds_export_status_read(r->state_dir, 0, &st, &err);
	if (rc < 0) {
		fprintf(stderr, "drasync-source run: reading the outbox: %s\n", err.msg);
		return 1;
	}
	until = st->outbox.last_seq > st->outbox.acked_seq ? st->outbox.last_seq : 0;
	ds_export_status_free(st);
	st = NULL;
	ds_log(DS_LOG_INFO, "waiting_for_target", "until_seq=%llu", (unsigned long long)until);
	/* The sender thread has been sending since the pass began; wait for its
	 * acknowledgements, and send a snapshot at once if the target asks. */
	{
		int64_t deadline = r->opts.timeout_ms > 0 ? now_ms() + r->opts.timeout_ms : 0;

		while (until > 0 && ds_sender_acked(r->sender) < until) {
			if (atomic_load(&r->stopping))
				return 0;
			if (deadline && now_ms() > deadline) {
				fprintf(
				    stderr,
				    "drasync-source run: the target did not acknowledge seq %llu "
				    "within the --timeout; the records stay in the outbox and go "
				    "out on the next run\n",
				    (unsigned long long)until);
				return 1;
			}
			if (ds_exporter_snapshot_wanted(r->ex)) {
				rc = run_pass(r, "snapshot");
				if (rc == -ECANCELED)
					return 0;
				if (rc < 0)
					return 1;
				until = ds_exporter_last_seq(r->ex) > until
					    ? ds_exporter_last_seq(r->ex)
					    : until;
			}
			wait_until(r, now_ms() + 20);
		}
	}
	rc = wait_applied(r);
	if (rc != -1)
		return rc;
	rc = ds_export_status_read(r->state_dir, 100, &st, &err);
	if (rc < 0) {
		fprintf(stderr, "drasync-source run: reading the results: %s\n", err.msg);
		return 1;
	}
	for (size_t i = 0; i < st->n_failures; i++) {
		const ds_export_failure *f = &st->failures[i];

		printf("%s %s %s%s%s: %s\n",
		       ds_result_status_name((enum ds_result_status)f->status), f->kind, f->ns,
		       f->ns[0] ? "/" : "", f->name, f->message);
	}
	if (st->more_failures)
		printf("... and %zu more (drasync-source status --config %s)\n", st->more_failures,
		       r->opts.config);
	{
		size_t failed = 0;

		uint64_t applied = 0, held = 0, waiting = 0;

		for (size_t i = 0; i < st->n_failures; i++)
			failed += st->failures[i].status == DS_RESULT_FAILED;
		for (size_t i = 0; i < st->n_kinds; i++) {
			applied += st->kinds[i].applied;
			held += st->kinds[i].held;
			waiting += st->kinds[i].waiting;
		}
		printf("%llu records acknowledged by the target: %llu applied, %llu held, "
		       "%llu waiting, %zu failed\n",
		       (unsigned long long)st->outbox.acked_seq, (unsigned long long)applied,
		       (unsigned long long)held, (unsigned long long)waiting,
		       failed + st->more_failures);
		rc = failed + st->more_failures + waiting > 0 ? 1 : 0;
	}
	ds_export_status_free(st);
	return rc;
}

/* ---- set-up --------------------------------------------------------------------------- */

static bool ns_match(void *ud, const json_t *ns)
{
	const struct run *r = ud;
	const json_t *labels = json_object_get(json_object_get(ns, "metadata"), "labels");

	return ds_label_selector_matches(r->selector, labels);
}

/*
 * The outbox (and the object index in its file) checked before anything uses
 * it: a damaged file is named with what to do, and the agent exits 1.
 */
static int check_outbox(const struct run *r)
{
	char db[4096];
	ds_err err = {0};
	int rc;

	if (ds_export_db_path(r->state_dir, db, sizeof(db)) < 0) {
		fprintf(stderr, "drasync-source run: stateDir path too long\n");
		return 2;
	}
	rc = ds_sqlite_check(db, &err);
	if (rc == 0)
		return 0;
	fprintf(stderr, "drasync-source run: %s\n", err.msg);
	if (rc == -EBADMSG)
		fprintf(stderr,
			"  (the outbox cannot be used: stop drasync-source, move %s and its -wal "
			"and -shm files aside, e.g. to %s.damaged, and start again: a new outbox "
			"sends the target a full snapshot, and the target prunes what it no "
			"longer holds)\n",
			db, db);
	else if (rc == -ENOSPC)
		fprintf(stderr, "  (free space on the filesystem that holds %s and start again)\n",
			db);
	return 1;
}

static int load(struct run *r)
{
	char msg[512];
	ds_err err = {0};
	const char *sel;
	int rc;

	rc = ds_source_config_load(&r->cfg, r->opts.config, &err);
	if (rc < 0) {
		fprintf(stderr, "drasync-source run: %s\n", ds_err_format(&err, msg, sizeof(msg)));
		return 2;
	}
	r->sched = ds_source_config_schedule(r->cfg);
	r->state_dir = ds_source_config_state_dir(r->cfg);
	sel = ds_source_config_namespace_selector(r->cfg);
	if (sel && ds_label_selector_parse(&r->selector, sel, NULL, &err) < 0) {
		fprintf(stderr, "drasync-source run: %s: namespaceSelector: %s\n", r->opts.config,
			err.msg);
		return 2;
	}
	rc = ds_keys_load_secret(ds_source_config_secret_key_file(r->cfg), &r->keys, &err);
	if (rc < 0) {
		fprintf(stderr,
			"drasync-source run: %s\n"
			"  (make a key pair with: drasync-source keygen --out DIR, and list its "
			"public key in the target's authorized-sources file)\n",
			err.msg);
		return 2;
	}
	if (mkdir(r->state_dir, 0700) < 0 && errno != EEXIST) {
		fprintf(stderr, "drasync-source run: stateDir %s: %s\n", r->state_dir,
			strerror(errno));
		return 2;
	}
	return check_outbox(r);
}

static int connect_cluster(struct run *r)
{
	ds_kubeconfig *kc = NULL;
	char msg[512];
	ds_err err = {0};
	int rc;

	rc = ds_kubeconfig_for_agent(&kc, r->opts.kubeconfig, r->opts.context,
				     ds_source_config_kubeconfig(r->cfg), &err);
	if (rc < 0) {
		fprintf(stderr,
			"drasync-source run: %s\n"
			"  (outside a cluster, pass --kubeconfig PATH [--context NAME])\n",
			ds_err_format(&err, msg, sizeof(msg)));
		return 2;
	}
	rc = ds_kube_new(&r->kube, &kc, NULL, &err);
	ds_kubeconfig_free(kc);
	if (rc < 0) {
		fprintf(stderr, "drasync-source run: %s\n", err.msg);
		return 1;
	}
	ds_log(DS_LOG_INFO, "source_cluster", "server=%s",
	       ds_kubeconfig_server(ds_kube_get_config(r->kube)));
	return 0;
}

/* The monitor counts in any case; it serves only when metrics.listen is set. */
static int start_monitor(struct run *r)
{
	ds_source_monitor_config mc = {.state_dir = r->state_dir, .kube = r->kube};
	const char *listen = ds_source_config_metrics_listen(r->cfg);
	ds_err err = {0};

	if (ds_source_monitor_new(&r->monitor, &mc, &err) < 0) {
		fprintf(stderr, "drasync-source run: %s\n", err.msg);
		return 1;
	}
	if (!listen) {
		ds_log(
		    DS_LOG_INFO, "metrics_off",
		    "detail=\"no metrics.listen in the file: no /metrics, /healthz or /readyz\"");
		return 0;
	}
	if (ds_source_monitor_serve(r->monitor, listen, &err) < 0) {
		fprintf(stderr, "drasync-source run: %s: %s\n", r->opts.config, err.msg);
		return 1;
	}
	ds_log(DS_LOG_INFO, "metrics_listening", "listen=%s paths=\"/metrics /healthz /readyz\"",
	       listen);
	return 0;
}

static int start(struct run *r)
{
	ds_exporter_config ec;
	ds_sender_config sc;
	char db[4096];
	ds_err err = {0};
	size_t n_ns = 0;
	const char *const *ns = ds_source_config_namespaces(r->cfg, &n_ns);
	int rc;

	rc = start_monitor(r);
	if (rc)
		return rc;
	ds_exporter_config_default(&ec);
	ec.on_event = ds_export_log_event;
	ec.kube = r->kube;
	ec.state_dir = r->state_dir;
	ec.namespaces = ns;
	ec.n_namespaces = n_ns;
	/* DeviceClasses belong to the target's infrastructure team: the source
	 * offers them and the target copies them only with replicateDeviceClasses. */
	ec.replicate_device_classes = true;
	if (r->selector) {
		ec.ns_match = ns_match;
		ec.ns_match_ud = r;
	}
	if (r->sched->debounce_ms > 0)
		ec.debounce_ms = r->sched->debounce_ms;
	ec.on_progress = on_progress;
	ec.progress_ud = r;
	ec.on_pushed = on_pushed;
	ec.pushed_ud = r;
	rc = ds_exporter_new(&r->ex, &ec, &err);
	if (rc < 0) {
		fprintf(stderr, "drasync-source run: %s\n", err.msg);
		return 1;
	}
	if (ds_export_db_path(r->state_dir, db, sizeof(db)) < 0) {
		fprintf(stderr, "drasync-source run: stateDir path too long\n");
		return 2;
	}
	ds_sender_config_default(&sc);
	sc.endpoint = ds_source_config_endpoint(r->cfg);
	sc.server_public_key = ds_source_config_server_public_key(r->cfg);
	sc.keys = &r->keys;
	sc.outbox_path = db;
	sc.cluster_name = ds_source_config_cluster_name(r->cfg);
	sc.on_event = on_link_event;
	sc.event_ud = r;
	sc.on_results = on_results;
	sc.on_snapshot_required = on_snapshot_required;
	sc.ud = r;
	rc = ds_sender_new(&r->sender, &sc, &err);
	if (rc < 0) {
		fprintf(stderr, "drasync-source run: %s\n", err.msg);
		return 1;
	}
	ds_source_monitor_attach(r->monitor, r->sender);
	r->state.pid = (int64_t)getpid();
	r->state.started_ms = now_ms();
	snprintf(r->state.endpoint, sizeof(r->state.endpoint), "%s", sc.endpoint);
	snprintf(r->state.schedule, sizeof(r->state.schedule), "%s",
		 ds_schedule_mode_name(r->sched->mode));
	state_save(r);
	ds_log(DS_LOG_INFO, "started",
	       "cluster=%s target=%s schedule=%s state_dir=%s namespaces=%zu selector=%s",
	       sc.cluster_name, sc.endpoint, ds_schedule_mode_name(r->sched->mode), r->state_dir,
	       n_ns, r->selector ? "yes" : "no");
	return 0;
}

int ds_cmd_run(int argc, char **argv)
{
	struct run r;
	int rc;

	memset(&r, 0, sizeof(r));
	rc = parse_args(argc, argv, &r.opts);
	if (rc >= 0)
		return rc;
	pthread_mutex_init(&r.lock, NULL);
	pthread_cond_init(&r.cond, NULL);
	pthread_mutex_init(&r.state_lock, NULL);
	r.tty = isatty(STDERR_FILENO) == 1;

	/* Signals go to the signal thread only (every thread inherits the mask). */
	ds_stop_signals_block();

	if ((rc = load(&r)) != 0 || (rc = connect_cluster(&r)) != 0 || (rc = start(&r)) != 0)
		goto out;
	if (ds_stop_signals_start(&r.signals, on_stop_signal, NULL, &r) < 0)
		ds_log(DS_LOG_WARN, "no_signal_thread", "detail=\"SIGTERM will not stop cleanly\"");
	/* The link runs beside the passes from the start (once included: its
	 * records go out while it still lists). */
	if (pthread_create(&r.sender_thread, NULL, sender_main, &r) != 0) {
		fprintf(stderr, "drasync-source run: cannot start the sender thread\n");
		rc = 1;
		goto out;
	}
	r.sender_started = true;
	if (r.sched->mode == DS_SCHEDULE_ONCE)
		rc = run_once(&r);
	else if (r.sched->mode == DS_SCHEDULE_WATCH)
		rc = run_watch(&r);
	else
		rc = run_clock(&r);
out:
	/* The exporter has returned (its last push committed): now stop the link. */
	if (r.sender)
		ds_sender_stop(r.sender);
	if (r.sender_started)
		pthread_join(r.sender_thread, NULL);
	if (r.sender_started && r.sender_rc < 0 && rc == 0)
		rc = 1;
	ds_stop_signals_end(&r.signals);
	if (r.ex) {
		pthread_mutex_lock(&r.state_lock);
		r.state.connected = false;
		snprintf(r.state.last_event, sizeof(r.state.last_event), "stopped");
		r.state.last_detail[0] = '\0';
		pthread_mutex_unlock(&r.state_lock);
		state_save(&r);
		ds_log(DS_LOG_INFO, "stopped", "exit=%d", rc);
	}
	/* The HTTP server reads the sender: it stops first. */
	ds_source_monitor_free(r.monitor);
	ds_sender_free(r.sender);
	ds_exporter_free(r.ex);
	ds_kube_free(r.kube);
	ds_label_selector_free(r.selector);
	ds_source_config_free(r.cfg);
	pthread_mutex_destroy(&r.state_lock);
	pthread_cond_destroy(&r.cond);
	pthread_mutex_destroy(&r.lock);
	return rc;
}
