#include "drasync/target_agent.h"

#include "drasync/apply_feedback.h"
#include "drasync/source_grants.h"
#include "drasync/zap.h"
#include "drasync/config_holder.h"
#include "drasync/ledger_identity.h"
#include "drasync/log.h"
#include "drasync/receiver.h"
#include "drasync/relocation.h"
#include "drasync/relocator.h"
#include "drasync/stop_signals.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct ds_target_agent {
	ds_target_agent_config cfg; /* config_path and ledger_path copied below */
	char *config_path, *ledger_path;
	ds_keypair keys;
	ds_config_holder *configs;  /* the one in force, and those the applier may still read */
	ds_target_config *listened; /* the receiver's: it was given the file's strings */
	pthread_mutex_t reload_mu;  /* one reload at a time */
	ds_apply_feedback *feedback;
	ds_applier *applier;
	ds_receiver *receiver;
	ds_link_stats link; /* the link's figures (the receiver writes them) */
	ds_verifier *verifier;
	ds_verify_modes verify_modes;  /* the verifier's thread's, with its reference in .cfg */
	size_t verified, not_verified; /* since the last summary (the verifier's thread's) */
	pthread_t applier_thread, verifier_thread, relocator_thread;
	int applier_rc;
	atomic_bool stopping; /* the identity's wait ends */
};

/* The configurations the applier has let go of (each pass takes the one in force). */
static void release_passed(ds_target_agent *a)
{
	ds_applier_stats st;

	ds_applier_stats_get(a->applier, &st);
	ds_config_holder_passed(a->configs, st.passes);
}

/* A workload the applier just applied ("Kind ns/name"): verify it on the cluster. */
static void verify_later(ds_target_agent *a, const ds_applier_event *ev)
{
	char kind[128], ns[256], name[512];

	if (!a->verifier || ev->state != DS_APPLY_APPLIED || ev->unchanged ||
	    ev->op != DS_RECORD_UPSERT || !ev->target ||
	    sscanf(ev->target, "%127s %255[^/]/%511s", kind, ns, name) != 3)
		return;
	ds_verifier_add(a->verifier, kind, ns, name); /* -EINVAL: not a workload */
}

static enum ds_verify_form verify_form(void *ud, const char *ns)
{
	ds_target_agent *a = ud;

	/* The verifier's thread alone: the file's mode as reloaded, the ledger kept open. */
	ds_target_config_unref((ds_target_config *)(uintptr_t)a->verify_modes.cfg);
	a->verify_modes.cfg = ds_config_holder_get(a->configs);
	a->verify_modes.ledger_path = a->ledger_path;
	return ds_verify_namespace_form(&a->verify_modes, ns);
}

/* A line per workload; a summary each time none is left to verify. */
static void on_verified(void *ud, const ds_verify_item *it)
{
	ds_target_agent *a = ud;
	char q[DS_VERIFY_REASON_MAX + 64], kind[200], ns[200], name[600];

	if (a->cfg.hooks.on_verified)
		a->cfg.hooks.on_verified(a->cfg.hooks.ud, it);
	ds_log(it->verified ? DS_LOG_INFO : DS_LOG_WARN, it->verified ? "verified" : "not_verified",
	       "kind=%s namespace=%s name=%s form=%s seconds=%.1f reason=%s",
	       ds_log_quote(it->kind, kind, sizeof(kind)), ds_log_quote(it->ns, ns, sizeof(ns)),
	       ds_log_quote(it->name, name, sizeof(name)), ds_verify_form_name(it->form),
	       it->seconds, ds_log_quote(it->reason, q, sizeof(q)));
	if (it->verified)
		a->verified++;
	else
		a->not_verified++;
	if (ds_verifier_pending(a->verifier) == 0) {
		ds_log(a->not_verified ? DS_LOG_WARN : DS_LOG_INFO, "verification_summary",
		       "verified=%zu not_verified=%zu%s", a->verified, a->not_verified,
		       a->not_verified ? " detail=\"drasync-target status lists them with why\""
				       : "");
		a->verified = a->not_verified = 0;
	}
}

/* Verification waits while a pass applies: its reads would slow a bulk apply down. */
static bool applier_busy(void *ud)
{
	ds_target_agent *a = ud;

	return ds_applier_busy(a->applier);
}

static void *verifier_main(void *arg)
{
	ds_target_agent *a = arg;
	ds_err err = {0};

	if (ds_verifier_run(a->verifier, &err) < 0)
		ds_log(DS_LOG_ERROR, "verifier_failed", "error=%s", err.msg);
	return NULL;
}

/* Sleep about ms, returning early once the agent stops. */
static void nap(ds_target_agent *a, int ms)
{
	struct timespec ts = {0, 100 * 1000 * 1000};

	for (int i = 0; i < ms / 100 && !atomic_load(&a->stopping); i++)
		nanosleep(&ts, NULL);
}

/* How often the relocator looks for relocations that became pending. */
#define RELOCATE_LOOK_MS 200

static void relocation_done(void *ud, const char *source, int state)
{
	ds_target_agent *a = ud;

	if (a->cfg.hooks.on_relocation)
		a->cfg.hooks.on_relocation(a->cfg.hooks.ud, source, state);
}

/* The planned relocations the sources asked for (relocator.h), as they come, side by side. */
static void *relocator_main(void *arg)
{
	ds_target_agent *a = arg;
	ds_object_state *st = NULL;
	ds_relocator *rel = NULL;
	ds_err err = {0};

	while (!atomic_load(&a->stopping)) {
		ds_target_config *cfg;
		ds_relocation_ctx c;

		nap(a, RELOCATE_LOOK_MS);
		if (!rel && (ds_object_state_open(&st, a->ledger_path, &err) < 0 ||
			     ds_relocator_new(&rel, st) < 0)) {
			ds_log(DS_LOG_ERROR, "relocate_ledger_failed", "error=%s",
			       err.msg[0] ? err.msg : strerror(ENOMEM));
			ds_object_state_free(st);
			st = NULL;
			nap(a, 10000);
			continue;
		}
		if (atomic_load(&a->stopping))
			break;
		cfg = ds_config_holder_get(a->configs);
		c = (ds_relocation_ctx){.ledger_path = a->ledger_path,
					.config_path = a->config_path,
					.cfg = cfg,
					.kube = a->cfg.kube};
		memset(&err, 0, sizeof(err));
		if (ds_relocator_step(rel, &c, relocation_done, a, &err) < 0)
			ds_log(DS_LOG_ERROR, "relocate_ledger_failed", "error=%s", err.msg);
		ds_target_config_unref(cfg);
	}
	ds_relocator_free(rel);
	ds_object_state_free(st);
	return NULL;
}

/* SPEC §3: every change the pipeline made, as `plan` would report it. */
static void log_mapping(const ds_applier_event *ev)
{
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

/* Every outcome of the apply stage as one log line, with its reason. */
static void on_apply(void *ud, const ds_applier_event *ev)
{
	ds_target_agent *a = ud;
	char reason[600], src[300], key[800], tgt[800];
	enum ds_log_level level = DS_LOG_INFO;

	release_passed(a); /* an event: a pass is under way, maybe with new rules */
	if (a->cfg.hooks.on_apply)
		a->cfg.hooks.on_apply(a->cfg.hooks.ud, ev);
	verify_later(a, ev);
	if (ev->unchanged)
		level = DS_LOG_DEBUG;
	else if (ev->state == DS_APPLY_FAILED || ev->state == DS_APPLY_REFUSED || ev->takeover)
		level = DS_LOG_WARN; /* a takeover: someone on the target changed what we own */
	/* Names come from the wire: quoted, so a newline in one cannot forge a line. */
	ds_log(level, "apply", "source=%s object=%s target=%s seq=%llu state=%s reason=%s",
	       ds_log_quote(ev->source, src, sizeof(src)), ds_log_quote(ev->key, key, sizeof(key)),
	       ev->target ? ds_log_quote(ev->target, tgt, sizeof(tgt)) : "-",
	       (unsigned long long)ev->seq, ds_apply_state_name(ev->state),
	       ds_log_quote(ev->reason ? ev->reason : "", reason, sizeof(reason)));
	/* An immutable field changed: the object on the target was deleted first. */
	if (ev->recreated)
		ds_log(DS_LOG_WARN, "recreated", "source=%s object=%s target=%s seq=%llu reason=%s",
		       src, key, ev->target ? tgt : "-", (unsigned long long)ev->seq, reason);
	log_mapping(ev);
}

/* The apply stage waits out a full ledger filesystem; it says so at each try. */
static void on_ledger_full(void *ud, const char *msg, int retry_ms)
{
	ds_target_agent *a = ud;
	char q[600];

	ds_log(DS_LOG_ERROR, "ledger_error",
	       "stage=apply ledger=%s error=%s detail=\"the outcomes of the last pass not "
	       "committed: its objects are applied again in %d s; free space on the ledger's "
	       "filesystem\"",
	       a->ledger_path, ds_log_quote(msg, q, sizeof(q)), retry_ms / 1000);
}

/* What compaction gave back, at most a line a minute (ledger_compact.h). */
static void on_compacted(void *ud, const ds_ledger_compact_stats *s, const char *error)
{
	ds_target_agent *a = ud;
	char q[600];

	if (!s) {
		ds_log(DS_LOG_WARN, "ledger_compaction_failed",
		       "ledger=%s error=%s detail=\"tried again in 5 s; the ledger keeps growing "
		       "meanwhile\"",
		       a->ledger_path, ds_log_quote(error ? error : "", q, sizeof(q)));
		return;
	}
	ds_log(DS_LOG_INFO, "ledger_compacted",
	       "ledger=%s records=%llu manifests=%llu bytes_freed=%llu ms=%lld ledger_bytes=%llu",
	       a->ledger_path, (unsigned long long)s->records, (unsigned long long)s->manifests,
	       (unsigned long long)s->bytes_freed, (long long)s->ms,
	       (unsigned long long)ds_ledger_file_bytes(a->ledger_path));
}

void ds_target_log_identity(const ds_identity_check *c, int rc)
{
	char q[1400], cm[300];

	snprintf(cm, sizeof(cm), "%s/%s", c->ns, DS_LEDGER_CONFIGMAP);
	if (rc < 0) {
		ds_log(DS_LOG_WARN, "ledger_identity_waiting",
		       "ledger=%s configmap=%s error=%s detail=\"%s\"", c->ledger_path, cm,
		       ds_log_quote(c->msg, q, sizeof(q)),
		       c->ledger.id[0] ? "the apply stage waits for the target's API server; the "
					 "link is open"
				       : "a new ledger accepts no record before the target's API "
					 "server tells whether a ledger was lost");
		return;
	}
	if (rc == 1) {
		ds_log(DS_LOG_ERROR, "ledger_identity_refused",
		       "verdict=%s ledger=%s ledger_id=%s cluster_id=%s configmap=%s detail=%s",
		       ds_identity_verdict_name(c->verdict), c->ledger_path,
		       c->ledger.id[0] ? c->ledger.id : "-", c->cluster.id[0] ? c->cluster.id : "-",
		       cm, ds_log_quote(c->msg, q, sizeof(q)));
		return;
	}
	ds_log(DS_LOG_INFO, "ledger_identity", "verdict=%s ledger=%s id=%s created=%s configmap=%s",
	       ds_identity_verdict_name(c->verdict), c->ledger_path, c->ledger.id,
	       c->ledger.created, cm);
	if (c->verdict == DS_IDENTITY_ADOPT)
		ds_log(DS_LOG_WARN, "namespace_modes_read_back",
		       "ledger=%s modes=%zu detail=\"a new ledger (--new-ledger): the modes of the "
		       "Namespaces' " DS_ANNOTATION_MODE " annotations are kept\"",
		       c->ledger_path, c->modes_read);
	if (rc == 2)
		ds_log(DS_LOG_WARN, "ledger_identity_unpublished", "configmap=%s error=%s", cm,
		       ds_log_quote(c->msg, q, sizeof(q)));
}

/*
 * An existing ledger with an identity: the link opened at once; the apply
 * stage checks it against the cluster's when the API server answers, and a
 * ledger that is not the cluster's applies nothing.
 * @return true: go on and apply
 */
static bool identity_checked(ds_target_agent *a)
{
	ds_identity_check c = {.cmd = "run", .ledger_path = a->ledger_path};
	ds_target_config *cfg = ds_config_holder_get(a->configs);
	struct timespec ts = {.tv_sec = 0, .tv_nsec = 100000000L};
	int rc, slices = 0;

	while ((rc = ds_ledger_identity_check(a->cfg.kube, cfg, &c)) < 0 &&
	       !atomic_load(&a->stopping)) {
		if (slices % 300 == 0) /* every 30 s */
			ds_target_log_identity(&c, rc);
		for (int i = 0; i < 20 && !atomic_load(&a->stopping); i++, slices++)
			nanosleep(&ts, NULL);
	}
	ds_target_config_unref(cfg);
	if (rc < 0)
		return false; /* stopping */
	ds_target_log_identity(&c, rc);
	if (rc == 1) {
		ds_log(DS_LOG_ERROR, "apply_stopped",
		       "ledger=%s detail=\"the ledger is not this cluster's (see "
		       "ledger_identity_refused): nothing is applied; stop drasync-target\"",
		       a->ledger_path);
		return false;
	}
	return true;
}

static void *applier_main(void *arg)
{
	ds_target_agent *a = arg;
	ds_err err = {0};

	if (a->cfg.check_identity && !identity_checked(a))
		return NULL;
	a->applier_rc = ds_applier_run(a->applier, &err);
	if (a->applier_rc < 0) {
		ds_log(DS_LOG_ERROR, "applier_failed", "error=%s", err.msg);
		ds_receiver_stop(a->receiver);
	}
	return NULL;
}

void ds_target_agent_transport_opts(struct ds_kube_transport_opts *o, int max_parallel)
{
	/* The importer writes in bulk after an outage or a snapshot: the client's
	 * own limit sits well above what one API server takes, which answers 429
	 * (with Retry-After, honoured) when it has had enough. The default of 200/s
	 * held the apply rate at half the server's ceiling (bench target). */
	ds_kube_transport_opts_init(o);
	o->qps = 2000;
	o->burst = 2000;
	/* apiServer.maxInFlight (default 64): on a quiet 2-CPU machine 64 and 256
	 * writes in flight gave the same sync rates within the runs' spread (mixed
	 * objects 559 and 372 against 421 and 427 objects/s; 100,000 ConfigMaps 647
	 * against 595), 64 with about 5 MB less memory (docs/benchmarks.md). The
	 * server queues what it cannot take yet (API priority and fairness) and
	 * answers 429 beyond. */
	o->max_parallel = max_parallel;
}

int ds_target_agent_new(ds_target_agent **out, const ds_target_agent_config *cfg, ds_err *err)
{
	ds_target_agent *a = NULL;
	ds_target_config *own = NULL;
	ds_applier_config ac = {0};
	ds_verifier_config vc = {0};
	int rc = -ENOMEM;

	if (!cfg || !cfg->config_path || !cfg->cfg || !cfg->keys || !cfg->kube ||
	    !cfg->ledger_path) {
		ds_err_set(err, "target agent: config, keys, cluster and ledger are required");
		return -EINVAL;
	}
	a = calloc(1, sizeof(*a));
	if (!a)
		goto out;
	pthread_mutex_init(&a->reload_mu, NULL);
	a->cfg = *cfg;
	a->keys = *cfg->keys;
	a->config_path = strdup(cfg->config_path);
	a->ledger_path = strdup(cfg->ledger_path);
	own = ds_target_config_ref(cfg->cfg);
	if (!a->config_path || !a->ledger_path || ds_config_holder_new(&a->configs, &own) < 0)
		goto out;
	a->cfg.config_path = a->config_path;
	a->cfg.ledger_path = a->ledger_path;
	a->cfg.keys = &a->keys;
	a->cfg.cfg = NULL; /* the holder's */
	/* The verifier before the applier, whose events feed it. */
	vc = (ds_verifier_config){.kube = cfg->kube,
				  .ledger_path = a->ledger_path,
				  .timeout_ms =
				      cfg->verify_timeout_ms > 0 ? cfg->verify_timeout_ms : 0,
				  .form_of = verify_form,
				  .form_ud = a,
				  .hold = applier_busy,
				  .hold_ud = a,
				  .on_result = on_verified,
				  .result_ud = a};
	rc = cfg->verify_timeout_ms ? ds_verifier_new(&a->verifier, &vc, err) : 0;
	if (rc < 0)
		goto out;
	ac.ledger_path = a->ledger_path;
	ac.kube = cfg->kube;
	ac.cfg = ds_config_holder_peek(a->configs);
	ac.on_event = on_apply;
	ac.on_ledger_full = on_ledger_full;
	ac.on_compacted = on_compacted;
	ac.event_ud = a;
	/* The applier before the receiver, whose handler wakes it. */
	rc = ds_applier_new(&a->applier, &ac, err);
	if (rc < 0)
		goto out;
	rc = ds_apply_feedback_open(&a->feedback, a->ledger_path, err);
	if (rc < 0)
		goto out;
	*out = a;
	a = NULL;
out:
	ds_target_config_unref(own);
	ds_target_agent_free(a);
	return ds_err_fallback(err, rc);
}

/*
 * SPEC §5: every sources[] name must be an authorized source, and each
 * authorized source is told at start (and at each reload) what it may write;
 * one that may write nothing is a warning. @return 0, or -EINVAL (err located)
 */
int ds_target_agent_check_grants(const ds_target_config *cfg, ds_err *err)
{
	ds_authorized *auth = NULL;
	const char **names = NULL;
	size_t n = 0;
	int rc;

	rc = ds_authorized_load(&auth, ds_target_config_authorized_sources(cfg), NULL, NULL, err);
	if (rc < 0)
		return rc;
	n = ds_authorized_count(auth);
	names = calloc(n + 1, sizeof(*names));
	if (!names) {
		ds_authorized_free(auth);
		return ds_err_fallback(err, -ENOMEM);
	}
	for (size_t i = 0; i < n; i++)
		names[i] = ds_authorized_name_at(auth, i);
	rc = ds_grant_check_names(cfg, names, n, err);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		char what[1024], q[1100], qs[300];
		bool dup = false;
		for (size_t k = 0; k < i && !dup; k++)
			dup = strcmp(names[k], names[i]) == 0;
		if (dup)
			continue;
		ds_grant_describe(cfg, names[i], what, sizeof(what));
		if (ds_grant_is_empty(cfg, names[i]))
			ds_log(DS_LOG_WARN, "source_grant",
			       "source=%s grant=%s detail=\"its records are all refused: grant it "
			       "namespaces in sources[] of %s\"",
			       ds_log_quote(names[i], qs, sizeof(qs)),
			       ds_log_quote(what, q, sizeof(q)), ds_target_config_file(cfg));
		else
			ds_log(DS_LOG_INFO, "source_grant", "source=%s grant=%s",
			       ds_log_quote(names[i], qs, sizeof(qs)),
			       ds_log_quote(what, q, sizeof(q)));
	}
	free(names);
	ds_authorized_free(auth);
	return rc;
}

/* A source's quotas, from the configuration in force (a reload applies at the next recount). */
static void source_limits(void *ud, const char *source, ds_quota_limits *out)
{
	ds_target_agent *a = ud;
	ds_target_config *cfg = ds_config_holder_get(a->configs);

	ds_target_config_source_limits(cfg, source, &out->max_unapplied, &out->max_ledger_bytes);
	ds_target_config_unref(cfg);
}

int ds_target_agent_listen(ds_target_agent *a, ds_err *err)
{
	ds_receiver_config rc_cfg;
	ds_target_config *cfg = ds_config_holder_get(a->configs);
	int rc;

	ds_receiver_config_default(&rc_cfg);
	rc_cfg.endpoint = ds_target_config_listen(cfg);
	rc_cfg.keys = &a->keys;
	rc_cfg.authorized_sources = ds_target_config_authorized_sources(cfg);
	rc_cfg.inbox_path = a->ledger_path;
	rc_cfg.handler = ds_applier_record_handler;
	rc_cfg.handler_ud = a->applier;
	rc_cfg.on_event = a->cfg.hooks.on_link_event;
	rc_cfg.event_ud = a->cfg.hooks.ud;
	rc_cfg.max_unapplied = ds_target_config_max_unapplied(cfg);
	{
		const ds_target_link *l = ds_target_config_link(cfg);
		rc_cfg.tuning.handshake_timeout_ms = l->handshake_timeout_ms;
		rc_cfg.tuning.limits.max_frame = (size_t)l->max_frame_bytes;
		rc_cfg.max_unauth = l->max_unauth;
		rc_cfg.max_unauth_per_address = l->max_unauth_per_address;
		rc_cfg.refusal_window_ms = l->refusal_window_ms;
		rc_cfg.on_unauth = a->cfg.hooks.on_link_unauth;
	}
	rc_cfg.source_limits = source_limits;
	rc_cfg.limits_ud = a;
	rc_cfg.stats = &a->link;
	ds_apply_feedback_bind(a->feedback, &rc_cfg.feedback);
	rc = ds_receiver_new(&a->receiver, &rc_cfg, err);
	if (rc < 0) {
		ds_target_config_unref(cfg);
		return rc;
	}
	a->listened = cfg; /* the receiver's reference, dropped when it is freed */
	if (a->cfg.hooks.on_listening)
		a->cfg.hooks.on_listening(a->cfg.hooks.ud, a);
	ds_log(DS_LOG_INFO, "started",
	       "listen=%s mode=%s ledger=%s dra_api=%s authorized_sources=%s "
	       "max_unapplied=%llu link.handshakeTimeout=%dms link.maxFrameBytes=%llu "
	       "link.maxUnauthenticated=%u link.maxUnauthenticatedPerAddress=%u",
	       ds_receiver_endpoint(a->receiver), ds_mode_name(ds_target_config_mode(cfg)),
	       a->ledger_path,
	       ds_applier_discovered(a->applier) ? ds_applier_dra_api_version(a->applier)
						 : "at-first-pass",
	       ds_target_config_authorized_sources(cfg),
	       (unsigned long long)ds_target_config_max_unapplied(cfg),
	       rc_cfg.tuning.handshake_timeout_ms,
	       (unsigned long long)rc_cfg.tuning.limits.max_frame, rc_cfg.max_unauth,
	       rc_cfg.max_unauth_per_address);
	return 0;
}

const ds_link_stats *ds_target_agent_link_stats(const ds_target_agent *a)
{
	return &a->link;
}

ds_quota *ds_target_agent_quota(ds_target_agent *a)
{
	return a->receiver ? ds_receiver_quota(a->receiver) : NULL;
}

ds_applier *ds_target_agent_applier(ds_target_agent *a)
{
	return a->applier;
}

ds_verifier *ds_target_agent_verifier(ds_target_agent *a)
{
	return a->verifier;
}

const char *ds_target_agent_endpoint(const ds_target_agent *a)
{
	return a->receiver ? ds_receiver_endpoint(a->receiver) : NULL;
}

/* A key `run` reads only at start: say that changing it needs a restart. */
static void restart_needed(const char *key, const char *was, const char *now)
{
	if (strcmp(was ? was : "", now ? now : "") != 0)
		ds_log(DS_LOG_WARN, "reload_partial",
		       "key=%s detail=\"changed in the file, takes effect at the next start\"",
		       key);
}

static void restart_keys(const ds_target_config *was, const ds_target_config *cfg)
{
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
	{
		/* The receiver's socket options and caps are set once, at bind. */
		const ds_target_link *lw = ds_target_config_link(was),
				     *lc = ds_target_config_link(cfg);
		char w[5][24], c[5][24];
		static const char *const keys[5] = {
		    "link.handshakeTimeout", "link.maxFrameBytes", "link.maxUnauthenticated",
		    "link.maxUnauthenticatedPerAddress", "link.refusalLogWindow"};
		const ds_target_link *both[2] = {lw, lc};
		for (int k = 0; k < 2; k++) {
			char(*o)[24] = k ? c : w;
			snprintf(o[0], 24, "%d", both[k]->handshake_timeout_ms);
			snprintf(o[1], 24, "%llu", (unsigned long long)both[k]->max_frame_bytes);
			snprintf(o[2], 24, "%u", both[k]->max_unauth);
			snprintf(o[3], 24, "%u", both[k]->max_unauth_per_address);
			snprintf(o[4], 24, "%d", both[k]->refusal_window_ms);
		}
		for (int i = 0; i < 5; i++)
			restart_needed(keys[i], w[i], c[i]);
		/* the client's requests in flight: set when it was made */
		snprintf(w[0], 24, "%d", ds_target_config_api_max_in_flight(was));
		snprintf(c[0], 24, "%d", ds_target_config_api_max_in_flight(cfg));
		restart_needed("apiServer.maxInFlight", w[0], c[0]);
	}
	restart_needed("identity.namespace", ds_target_config_identity_namespace(was),
		       ds_target_config_identity_namespace(cfg));
}

/*
 * The applier takes the new rules at its next pass; sessions are not touched.
 * The authorized sources need no signal: the ZAP handler re-reads that file
 * whenever it changes.
 */
int ds_target_agent_reload(ds_target_agent *a, ds_err *err)
{
	ds_target_config *cfg = NULL, *was = NULL;
	const ds_target_config *now;
	ds_applier_stats st;
	char msg[512], q[600];
	size_t n_nsm = 0;
	ds_err local = {0};
	int rc;

	if (!err)
		err = &local;
	pthread_mutex_lock(&a->reload_mu);
	rc = ds_target_config_load(&cfg, a->config_path, err);
	if (rc == 0 && ds_target_config_authorized_sources(cfg))
		rc = ds_target_agent_check_grants(cfg, err);
	if (rc < 0) {
		ds_log(DS_LOG_ERROR, "reload_failed", "config=%s error=%s detail=\"%s\"",
		       a->config_path,
		       ds_log_quote(ds_err_format(err, msg, sizeof(msg)), q, sizeof(q)),
		       "the rules in force are kept");
		goto out;
	}
	now = cfg;
	was = ds_config_holder_get(a->configs);
	rc = ds_config_holder_set(a->configs, &cfg);
	if (rc < 0) {
		ds_err_set(err, "out of memory");
		ds_log(DS_LOG_ERROR, "reload_failed", "config=%s error=\"out of memory\"",
		       a->config_path);
		goto out;
	}
	restart_keys(was, now);
	/* The holder keeps what it replaced until the applier's next pass has begun. */
	ds_applier_set_config(a->applier, now);
	ds_applier_stats_get(a->applier, &st);
	ds_config_holder_handed(a->configs, st.passes);
	release_passed(a);
	if (a->cfg.hooks.on_config)
		a->cfg.hooks.on_config(a->cfg.hooks.ud, now);
	ds_target_config_namespaces(now, &n_nsm);
	ds_log(DS_LOG_INFO, "reloaded",
	       "config=%s mode=%s mapping_rules=%zu device_class_mappings=%zu "
	       "namespace_mappings=%zu",
	       a->config_path, ds_mode_name(ds_target_config_mode(now)),
	       ds_target_config_dra(now)->n_rules, ds_target_config_dra(now)->n_device_classes,
	       n_nsm);
out:
	pthread_mutex_unlock(&a->reload_mu);
	ds_target_config_unref(was);
	ds_target_config_unref(cfg);
	return rc;
}

static void on_stop_signal(void *ud, int sig)
{
	(void)sig;
	ds_target_agent_stop(ud);
}

static void on_reload_signal(void *ud)
{
	ds_err err = {0};

	ds_target_agent_reload(ud, &err); /* logged */
}

void ds_target_agent_stop(ds_target_agent *a)
{
	ds_receiver_stop(a->receiver);
}

int ds_target_agent_run(ds_target_agent *a, ds_err *err)
{
	ds_stop_signals signals = {0};
	bool applier_started = false, verifier_started = false, relocator_started = false;
	int rc;

	if (ds_stop_signals_start(&signals, on_stop_signal, on_reload_signal, a) < 0)
		ds_log(DS_LOG_WARN, "no_signal_thread", "detail=\"SIGTERM will not stop cleanly\"");
	if (pthread_create(&a->applier_thread, NULL, applier_main, a) != 0) {
		ds_err_set(err, "cannot start the applier thread");
		rc = -EAGAIN;
		goto out;
	}
	applier_started = true;
	if (a->verifier) { /* none with verify_timeout_ms 0 */
		if (pthread_create(&a->verifier_thread, NULL, verifier_main, a) == 0)
			verifier_started = true;
		else
			ds_log(DS_LOG_WARN, "no_verifier", "detail=\"workloads are not verified\"");
	}
	if (pthread_create(&a->relocator_thread, NULL, relocator_main, a) == 0)
		relocator_started = true;
	else
		ds_log(DS_LOG_WARN, "no_relocator",
		       "detail=\"planned relocations are not served\"");
	rc = ds_receiver_run(a->receiver, err);
	if (rc < 0)
		ds_log(DS_LOG_ERROR, "receiver_failed", "error=%s", err ? err->msg : "");
out:
	atomic_store(&a->stopping, true);
	ds_applier_stop(a->applier);
	ds_applier_notify(a->applier);
	if (applier_started) {
		pthread_join(a->applier_thread, NULL);
		if (a->applier_rc < 0 && rc == 0)
			rc = a->applier_rc;
	}
	if (relocator_started)
		pthread_join(a->relocator_thread, NULL);
	if (verifier_started) {
		ds_verifier_stop(a->verifier);
		pthread_join(a->verifier_thread, NULL);
	}
	ds_stop_signals_end(&signals);
	return rc;
}

void ds_target_agent_free(ds_target_agent *a)
{
	if (!a)
		return;
	ds_receiver_free(a->receiver);
	ds_target_config_unref(a->listened);
	ds_apply_feedback_free(a->feedback);
	ds_applier_free(a->applier);
	ds_verifier_free(a->verifier);
	ds_target_config_unref((ds_target_config *)(uintptr_t)a->verify_modes.cfg);
	ds_verify_modes_dispose(&a->verify_modes);
	ds_config_holder_free(a->configs);
	free(a->config_path);
	free(a->ledger_path);
	pthread_mutex_destroy(&a->reload_mu);
	free(a);
}
