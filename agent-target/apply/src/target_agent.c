/*
 * drasync-target run --config target.yaml: the importer. The receiver (CURVE
 * ROUTER, ZAP allow-list) commits what the sources push into the ledger in
 * stateDir and acknowledges it at once; the applier works from the ledger on
 * its own thread and applies the objects to this cluster, so the link never
 * waits for the API server.
 *
 * Threads: the main thread runs the receiver, one thread the applier, one
 * the verifier (each workload applied is checked on the cluster until it
 * verifies or 5 minutes pass: event=verified / event=not_verified), one
 * waits for SIGTERM/SIGINT (stops both) and SIGHUP (reloads the mapping
 * rules: the applier takes the new set at its next pass; the receiver's ZAP
 * handler re-reads the authorized sources itself whenever the file changes).
 */
#include "commands.h"

#include "drasync/apply_feedback.h"
#include "drasync/applier.h"
#include "drasync/buf.h"
#include "drasync/duration.h"
#include "drasync/keys.h"
#include "drasync/kube_client.h"
#include "drasync/log.h"
#include "drasync/receiver.h"
#include "drasync/stop_signals.h"
#include "drasync/target_config.h"
#include "drasync/target_monitor.h"
#include "drasync/verifier.h"

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct run {
	const char *config, *kubeconfig, *context;
	long long verify_timeout_ms; /* -1: the verifier's default; 0: no verifier */
	ds_target_config *cfg;
	ds_target_config **old_cfgs; /* replaced by SIGHUP; the applier may still read them */
	size_t n_old, old_cap;
	ds_apply_feedback *feedback;
	ds_keypair keys;
	ds_kube *kube;
	ds_applier *applier;
	ds_receiver *receiver;
	char ledger[4096];
	pthread_t applier_thread;
	bool applier_started;
	ds_verifier *verifier;
	ds_target_monitor *monitor; /* metrics, health, the status page (metrics.listen) */
	pthread_t verifier_thread;
	bool verifier_started;
	_Atomic(ds_target_config *) verify_cfg; /* r->cfg for the verifier's thread */
	size_t verified, not_verified;		/* since the last summary (verifier's thread) */
	ds_verify_modes verify_modes;		/* the verifier's thread's */
	ds_stop_signals signals;
	int applier_rc;
};

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: drasync-target run --config FILE [OPTIONS]\n"
		"\n"
		"Accepts the sources listed in keys.authorizedSources on `listen`, commits\n"
		"every record in the ledger in stateDir before acknowledging it, and applies\n"
		"the objects to this cluster from the ledger: DRA mapping, resource.k8s.io\n"
		"conversion, standby, SPEC order, server-side apply as field manager drasync.\n"
		"\n"
		"Options:\n"
		"  -c, --config FILE      the TargetConfig file (required)\n"
		"      --kubeconfig PATH  use this kubeconfig instead of the file's\n"
		"                         `kubeconfig` (empty there: in-cluster)\n"
		"      --context NAME     the kubeconfig context (default: current)\n"
		"      --log-level LEVEL  debug, info, warn or error (default info)\n"
		"      --verify-timeout DUR  how long a workload applied may take to verify\n"
		"                         (Go duration; default 5m; 0: do not verify)\n"
		"  -h, --help             show this help\n"
		"\n"
		"Signals: SIGTERM/SIGINT finish the pass in flight and exit 0; SIGHUP reads\n"
		"the file again (mapping rules, mode, namespaces; a bad file is refused\n"
		"with file:line:col and the rules in force are kept). The authorized\n"
		"sources are re-read whenever their file changes.\n"
		"\n"
		"Each workload applied is then verified on this cluster until it is or 5\n"
		"minutes pass (pods scheduled and Running, claims allocated; standby:\n"
		"parked): logged as event=verified or event=not_verified with the reason,\n"
		"kept in the ledger for status; drasync-target verify checks on demand.\n"
		"\n"
		"While it runs: drasync-target status --config FILE shows the ledger,\n"
		"drasync-target retry --config FILE applies failed objects again. With\n"
		"metrics.listen in the file (e.g. 127.0.0.1:9450) it serves /metrics\n"
		"(Prometheus), /healthz, /readyz and a status page at /.\n"
		"\n"
		"Exit codes: 0 stopped by SIGTERM/SIGINT, 1 the run could not go on,\n"
		"2 usage or configuration error.\n"
		"\n"
		"Example, outside a cluster against a kubeconfig:\n"
		"  drasync-target run --config target.yaml --kubeconfig ~/.kube/config\n");
}

static int parse_args(int argc, char **argv, struct run *r)
{
	static const struct option longopts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"kubeconfig", required_argument, NULL, 'k'},
	    {"context", required_argument, NULL, 'x'},
	    {"log-level", required_argument, NULL, 'l'},
	    {"verify-timeout", required_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	enum ds_log_level level;
	ds_err err = {0};
	int64_t ns;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "c:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			r->config = optarg;
			break;
		case 'k':
			r->kubeconfig = optarg;
			break;
		case 'x':
			r->context = optarg;
			break;
		case 'l':
			if (ds_log_level_parse(optarg, &level) < 0) {
				fprintf(
				    stderr,
				    "drasync-target run: --log-level: '%s' is not one of debug, "
				    "info, warn, error\n",
				    optarg);
				return 2;
			}
			ds_log_set_level(level);
			break;
		case 'v':
			if (ds_duration_parse(optarg, &ns, NULL, &err) < 0 || ns < 0) {
				fprintf(stderr,
					"drasync-target run: --verify-timeout: '%s': %s (a Go "
					"duration, e.g. 90s, 5m; 0: do not verify)\n",
					optarg, err.msg[0] ? err.msg : "negative");
				return 2;
			}
			r->verify_timeout_ms = ns / 1000000;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			fprintf(stderr, "Try 'drasync-target run --help'.\n");
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "drasync-target run: unexpected argument '%s' (try --help)\n",
			argv[optind]);
		return 2;
	}
	if (!r->config) {
		fprintf(stderr, "drasync-target run: --config FILE is required, e.g.\n"
				"  drasync-target run --config /etc/drasync/target.yaml\n");
		return 2;
	}
	return -1;
}

/* Everything the file must say for `run` (plan needs less), checked before binding. */
static int load(struct run *r)
{
	const char *listen, *key, *auth, *state;
	char msg[512];
	ds_err err = {0};
	int rc;

	rc = ds_target_config_load(&r->cfg, r->config, &err);
	if (rc < 0) {
		fprintf(stderr, "drasync-target run: %s\n", ds_err_format(&err, msg, sizeof(msg)));
		return 2;
	}
	listen = ds_target_config_listen(r->cfg);
	key = ds_target_config_secret_key_file(r->cfg);
	auth = ds_target_config_authorized_sources(r->cfg);
	state = ds_target_config_state_dir(r->cfg);
	if (!listen || !key || !auth) {
		fprintf(stderr,
			"drasync-target run: %s: `%s` is required to run (e.g. listen: "
			"tcp://0.0.0.0:7450; keys: {secretKeyFile: ..., authorizedSources: ...})\n",
			r->config,
			!listen ? "listen"
			: !key	? "keys.secretKeyFile"
				: "keys.authorizedSources");
		return 2;
	}
	rc = ds_keys_load_secret(key, &r->keys, &err);
	if (rc < 0) {
		fprintf(stderr,
			"drasync-target run: %s\n"
			"  (make the target's key pair with: drasync-target keygen --out DIR)\n",
			err.msg);
		return 2;
	}
	if (access(auth, R_OK) != 0) {
		fprintf(stderr,
			"drasync-target run: keys.authorizedSources %s: %s\n"
			"  (one line per source: \"NAME PUBLIC-KEY\", the key from drasync-source "
			"keygen)\n",
			auth, strerror(errno));
		return 2;
	}
	if (mkdir(state, 0700) < 0 && errno != EEXIST) {
		fprintf(stderr, "drasync-target run: stateDir %s: %s\n", state, strerror(errno));
		return 2;
	}
	ds_target_config_ledger(r->cfg, r->ledger, sizeof(r->ledger));
	return ds_target_check_ledger("run", r->ledger);
}

static int connect_cluster(struct run *r)
{
	struct ds_kube_transport_opts topts;
	int rc;

	/* The importer writes in bulk after an outage or a snapshot: the client's
	 * own limit sits well above what one API server takes, which answers 429
	 * (with Retry-After, honoured) when it has had enough. The default of 200/s
	 * held the apply rate at half the server's ceiling (bench target). */
	ds_kube_transport_opts_init(&topts);
	topts.qps = 2000;
	topts.burst = 2000;
	/* An API server takes more writes at once than the client's default 64
	 * (bench target: client-go gets 279/s with 16 workers, 375 with 64, 474
	 * with 256 on a clean cluster); it queues what it cannot take yet (API
	 * priority and fairness) and answers 429 beyond. */
	topts.max_parallel = DS_TARGET_MAX_PARALLEL;
	rc = ds_target_connect("run", r->kubeconfig, r->context, r->cfg, &topts, &r->kube);
	if (rc)
		return rc;
	ds_log(DS_LOG_INFO, "target_cluster", "server=%s",
	       ds_kubeconfig_server(ds_kube_get_config(r->kube)));
	return 0;
}

/* A workload the applier just applied ("Kind ns/name"): verify it on the cluster. */
static void verify_later(struct run *r, const ds_applier_event *ev)
{
	char kind[128], ns[256], name[512];

	if (!r->verifier || ev->state != DS_APPLY_APPLIED || ev->unchanged ||
	    ev->op != DS_RECORD_UPSERT || !ev->target ||
	    sscanf(ev->target, "%127s %255[^/]/%511s", kind, ns, name) != 3)
		return;
	ds_verifier_add(r->verifier, kind, ns, name); /* -EINVAL: not a workload */
}

static enum ds_verify_form verify_form(void *ud, const char *ns)
{
	struct run *r = ud;

	/* The verifier's thread alone: the file's mode as reloaded, the ledger kept open. */
	r->verify_modes.cfg = atomic_load(&r->verify_cfg);
	r->verify_modes.ledger_path = r->ledger;
	return ds_verify_namespace_form(&r->verify_modes, ns);
}

/* A line per workload; a summary each time none is left to verify. */
static void on_verified(void *ud, const ds_verify_item *it)
{
	struct run *r = ud;
	char q[DS_VERIFY_REASON_MAX + 64];

	ds_target_monitor_on_verified(r->monitor, it);
	ds_log(it->verified ? DS_LOG_INFO : DS_LOG_WARN, it->verified ? "verified" : "not_verified",
	       "kind=%s namespace=%s name=%s form=%s seconds=%.1f reason=%s", it->kind, it->ns,
	       it->name, ds_verify_form_name(it->form), it->seconds,
	       ds_log_quote(it->reason, q, sizeof(q)));
	if (it->verified)
		r->verified++;
	else
		r->not_verified++;
	if (ds_verifier_pending(r->verifier) == 0) {
		ds_log(r->not_verified ? DS_LOG_WARN : DS_LOG_INFO, "verification_summary",
		       "verified=%zu not_verified=%zu%s", r->verified, r->not_verified,
		       r->not_verified ? " detail=\"drasync-target status lists them with why\""
				       : "");
		r->verified = r->not_verified = 0;
	}
}

/* Verification waits while a pass applies: its reads would slow a bulk apply down. */
static bool applier_busy(void *ud)
{
	struct run *r = ud;

	return ds_applier_busy(r->applier);
}

static void *verifier_main(void *arg)
{
	struct run *r = arg;
	ds_err err = {0};

	if (ds_verifier_run(r->verifier, &err) < 0)
		ds_log(DS_LOG_ERROR, "verifier_failed", "error=%s", err.msg);
	return NULL;
}

/* Every outcome of the apply stage as one log line, with its reason. */
static void on_apply(void *ud, const ds_applier_event *ev)
{
	struct run *r = ud;
	char reason[600];
	enum ds_log_level level = DS_LOG_INFO;

	ds_target_monitor_on_apply(r->monitor, ev);
	verify_later(r, ev);
	if (ev->unchanged)
		level = DS_LOG_DEBUG;
	else if (ev->state == DS_APPLY_FAILED || ev->takeover)
		level = DS_LOG_WARN; /* a takeover: someone on the target changed what we own */
	ds_log(level, "apply", "source=%s object=%s target=%s seq=%llu state=%s reason=%s",
	       ev->source, ev->key, ev->target ? ev->target : "-", (unsigned long long)ev->seq,
	       ds_apply_state_name(ev->state),
	       ds_log_quote(ev->reason ? ev->reason : "", reason, sizeof(reason)));
	/* SPEC §3: every change the pipeline made, as `plan` would report it. */
	for (size_t i = 0; !ev->unchanged && ev->report && i < ev->report_n; i++) {
		const ds_report_entry *e = ds_report_get(ev->report, ev->report_first + i);
		char obj[400], ctr[200], ent[200], from[400], to[400], msg[600];
		if (!e)
			break;
		ds_log(DS_LOG_INFO, "mapping",
		       "type=%s object=%s container=%s entry=%s from=%s to=%s detail=%s",
		       ds_report_type_name(e->type),
		       ds_log_quote(e->object ? e->object : "", obj, sizeof(obj)),
		       ds_log_quote(e->container ? e->container : "", ctr, sizeof(ctr)),
		       ds_log_quote(e->entry ? e->entry : "", ent, sizeof(ent)),
		       ds_log_quote(e->from ? e->from : "", from, sizeof(from)),
		       ds_log_quote(e->to ? e->to : "", to, sizeof(to)),
		       ds_log_quote(e->message ? e->message : "", msg, sizeof(msg)));
	}
}

/* The apply stage waits out a full ledger filesystem; it says so at each try. */
static void on_ledger_full(void *ud, const char *msg, int retry_ms)
{
	struct run *r = ud;
	char q[600];

	ds_log(DS_LOG_ERROR, "ledger_error",
	       "stage=apply ledger=%s error=%s detail=\"the outcomes of the last pass not "
	       "committed: its objects are applied again in %d s; free space on the ledger's "
	       "filesystem\"",
	       r->ledger, ds_log_quote(msg, q, sizeof(q)), retry_ms / 1000);
}

static void *applier_main(void *arg)
{
	struct run *r = arg;
	ds_err err = {0};

	r->applier_rc = ds_applier_run(r->applier, &err);
	if (r->applier_rc < 0) {
		ds_log(DS_LOG_ERROR, "applier_failed", "error=%s", err.msg);
		ds_receiver_stop(r->receiver);
	}
	return NULL;
}

static void on_stop_signal(void *ud, int sig)
{
	struct run *r = ud;

	(void)sig;
	ds_receiver_stop(r->receiver);
}

/* A key `run` reads only at start: say that changing it needs a restart. */
static void restart_needed(const char *key, const char *was, const char *now)
{
	if (strcmp(was ? was : "", now ? now : "") != 0)
		ds_log(DS_LOG_WARN, "reload_partial",
		       "key=%s detail=\"changed in the file, takes effect at the next start\"",
		       key);
}

/*
 * SIGHUP: the file is read again; a bad one is reported (file:line:col) and
 * the rules in force are kept. The applier takes the new rules at its next
 * pass; sessions are not touched. The authorized sources need no signal: the
 * ZAP handler re-reads that file whenever it changes.
 */
static void on_reload(void *ud)
{
	struct run *r = ud;
	ds_target_config *cfg = NULL, *was = r->cfg;
	char msg[512], q[600];
	size_t n_nsm = 0;
	ds_err err = {0};

	if (ds_target_config_load(&cfg, r->config, &err) < 0) {
		ds_log(DS_LOG_ERROR, "reload_failed", "config=%s error=%s detail=\"%s\"", r->config,
		       ds_log_quote(ds_err_format(&err, msg, sizeof(msg)), q, sizeof(q)),
		       "the rules in force are kept");
		return;
	}
	if (ds_grow((void **)&r->old_cfgs, &r->old_cap, r->n_old + 1, sizeof(*r->old_cfgs)) < 0) {
		ds_log(DS_LOG_ERROR, "reload_failed", "config=%s error=\"out of memory\"",
		       r->config);
		ds_target_config_free(cfg);
		return;
	}
	restart_needed("listen", ds_target_config_listen(was), ds_target_config_listen(cfg));
	restart_needed("keys.secretKeyFile", ds_target_config_secret_key_file(was),
		       ds_target_config_secret_key_file(cfg));
	restart_needed("keys.authorizedSources", ds_target_config_authorized_sources(was),
		       ds_target_config_authorized_sources(cfg));
	restart_needed("kubeconfig", ds_target_config_kubeconfig(was),
		       ds_target_config_kubeconfig(cfg));
	restart_needed("stateDir", ds_target_config_state_dir(was),
		       ds_target_config_state_dir(cfg));
	restart_needed("metrics.listen", ds_target_config_metrics_listen(was),
		       ds_target_config_metrics_listen(cfg));
	r->old_cfgs[r->n_old++] = was;
	r->cfg = cfg;
	atomic_store(&r->verify_cfg, cfg);
	ds_applier_set_config(r->applier, cfg);
	ds_target_monitor_set_config(r->monitor, cfg);
	ds_target_config_namespaces(cfg, &n_nsm);
	ds_log(DS_LOG_INFO, "reloaded",
	       "config=%s mode=%s mapping_rules=%zu device_class_mappings=%zu "
	       "namespace_mappings=%zu",
	       r->config, ds_mode_name(ds_target_config_mode(cfg)),
	       ds_target_config_dra(cfg)->n_rules, ds_target_config_dra(cfg)->n_device_classes,
	       n_nsm);
}

/* The monitor counts in any case; it serves only when metrics.listen is set. */
static int start_monitor(struct run *r)
{
	ds_target_monitor_config mc = {
	    .ledger_path = r->ledger, .config_path = r->config, .kube = r->kube, .cfg = r->cfg};
	const char *listen = ds_target_config_metrics_listen(r->cfg);
	ds_err err = {0};

	if (ds_target_monitor_new(&r->monitor, &mc, &err) < 0) {
		fprintf(stderr, "drasync-target run: %s\n", err.msg);
		return 1;
	}
	if (!listen) {
		ds_log(DS_LOG_INFO, "metrics_off",
		       "detail=\"no metrics.listen in the file: no /metrics, /healthz, /readyz or "
		       "status page\"");
		return 0;
	}
	if (ds_target_monitor_serve(r->monitor, listen, &err) < 0) {
		fprintf(stderr, "drasync-target run: %s: %s\n", r->config, err.msg);
		return 1;
	}
	ds_log(DS_LOG_INFO, "metrics_listening",
	       "listen=%s paths=\"/metrics /healthz /readyz / (status page)\"", listen);
	return 0;
}

static int start(struct run *r)
{
	ds_applier_config ac;
	ds_receiver_config rc_cfg;
	ds_verifier_config vc = {.kube = r->kube,
				 .ledger_path = r->ledger,
				 .timeout_ms = r->verify_timeout_ms > 0 ? r->verify_timeout_ms : 0,
				 .form_of = verify_form,
				 .form_ud = r,
				 .hold = applier_busy,
				 .hold_ud = r,
				 .on_result = on_verified,
				 .result_ud = r};
	ds_err err = {0};
	int rc;

	rc = start_monitor(r);
	if (rc)
		return rc;
	/* The verifier before the applier, whose events feed it. */
	atomic_store(&r->verify_cfg, r->cfg);
	rc = r->verify_timeout_ms ? ds_verifier_new(&r->verifier, &vc, &err) : 0;
	if (rc < 0) {
		fprintf(stderr, "drasync-target run: %s\n", err.msg);
		return 1;
	}
	memset(&ac, 0, sizeof(ac));
	ac.ledger_path = r->ledger;
	ac.kube = r->kube;
	ac.cfg = r->cfg;
	ac.on_event = on_apply;
	ac.on_ledger_full = on_ledger_full;
	ac.event_ud = r;
	/* The applier first: the receiver's handler wakes it. */
	rc = ds_applier_new(&r->applier, &ac, &err);
	if (rc < 0) {
		fprintf(stderr, "drasync-target run: %s\n", err.msg);
		return 1;
	}
	ds_receiver_config_default(&rc_cfg);
	rc_cfg.endpoint = ds_target_config_listen(r->cfg);
	rc_cfg.keys = &r->keys;
	rc_cfg.authorized_sources = ds_target_config_authorized_sources(r->cfg);
	rc_cfg.inbox_path = r->ledger;
	rc_cfg.handler = ds_applier_record_handler;
	rc_cfg.handler_ud = r->applier;
	rc_cfg.on_event = ds_target_monitor_on_link_event; /* logs and counts */
	rc_cfg.event_ud = r->monitor;
	rc_cfg.max_unapplied = ds_target_config_max_unapplied(r->cfg);
	rc = ds_apply_feedback_open(&r->feedback, r->ledger, &err);
	if (rc < 0) {
		fprintf(stderr, "drasync-target run: %s\n", err.msg);
		return 1;
	}
	ds_apply_feedback_bind(r->feedback, &rc_cfg.feedback);
	rc = ds_receiver_new(&r->receiver, &rc_cfg, &err);
	if (rc < 0) {
		fprintf(stderr, "drasync-target run: %s\n", err.msg);
		return 2;
	}
	ds_target_monitor_attach(r->monitor, r->applier, r->verifier);
	ds_target_monitor_set_listening(r->monitor, ds_receiver_endpoint(r->receiver));
	ds_log(DS_LOG_INFO, "started",
	       "listen=%s mode=%s ledger=%s dra_api=%s authorized_sources=%s "
	       "max_unapplied=%llu",
	       ds_receiver_endpoint(r->receiver), ds_mode_name(ds_target_config_mode(r->cfg)),
	       r->ledger, ds_applier_dra_api_version(r->applier),
	       ds_target_config_authorized_sources(r->cfg),
	       (unsigned long long)ds_target_config_max_unapplied(r->cfg));
	return 0;
}

int ds_cmd_run(int argc, char **argv)
{
	struct run r;
	ds_err err = {0};
	int rc;

	memset(&r, 0, sizeof(r));
	r.verify_timeout_ms = -1;
	rc = parse_args(argc, argv, &r);
	if (rc >= 0)
		return rc;
	ds_stop_signals_block();

	if ((rc = load(&r)) != 0 || (rc = connect_cluster(&r)) != 0 || (rc = start(&r)) != 0)
		goto out;
	if (ds_stop_signals_start(&r.signals, on_stop_signal, on_reload, &r) < 0)
		ds_log(DS_LOG_WARN, "no_signal_thread", "detail=\"SIGTERM will not stop cleanly\"");
	if (pthread_create(&r.applier_thread, NULL, applier_main, &r) != 0) {
		fprintf(stderr, "drasync-target run: cannot start the applier thread\n");
		rc = 1;
		goto out;
	}
	r.applier_started = true;
	if (r.verifier) { /* none with --verify-timeout 0 */
		if (pthread_create(&r.verifier_thread, NULL, verifier_main, &r) == 0)
			r.verifier_started = true;
		else
			ds_log(DS_LOG_WARN, "no_verifier", "detail=\"workloads are not verified\"");
	}
	rc = ds_receiver_run(r.receiver, &err);
	if (rc < 0) {
		ds_log(DS_LOG_ERROR, "receiver_failed", "error=%s", err.msg);
		rc = 1;
	} else {
		rc = r.applier_rc < 0 ? 1 : 0;
	}
out:
	if (r.applier) {
		ds_applier_stop(r.applier);
		ds_applier_notify(r.applier);
	}
	if (r.applier_started) {
		pthread_join(r.applier_thread, NULL);
		if (r.applier_rc < 0 && rc == 0)
			rc = 1;
	}
	if (r.verifier_started) {
		ds_verifier_stop(r.verifier);
		pthread_join(r.verifier_thread, NULL);
	}
	ds_stop_signals_end(&r.signals);
	/* The HTTP server reads the applier and verifier: it stops first. */
	ds_target_monitor_free(r.monitor);
	if (r.receiver)
		ds_log(DS_LOG_INFO, "stopped", "exit=%d", rc);
	ds_receiver_free(r.receiver);
	ds_apply_feedback_free(r.feedback);
	ds_applier_free(r.applier);
	ds_verifier_free(r.verifier);
	ds_verify_modes_dispose(&r.verify_modes);
	ds_kube_free(r.kube);
	ds_target_config_free(r.cfg);
	for (size_t i = 0; i < r.n_old; i++)
		ds_target_config_free(r.old_cfgs[i]);
	free(r.old_cfgs);
	return rc;
}
