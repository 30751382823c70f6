/*
 * Failover and failback (failover.h): the decisions on JSON snapshots and
 * ledger rows first, then the run that lists the cluster and applies through
 * the applier.
 */
#include "drasync/failover.h"

#include "drasync/applier.h"
#include "drasync/buf.h"
#include "drasync/clock.h"
#include "drasync/inbox.h"
#include "drasync/k8s_object.h"
#include "drasync/kinds.h"
#include "drasync/ledger_identity.h"
#include "drasync/namespace_mode.h"
#include "drasync/standby.h"
#include "drasync/transform.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Rounds of mode, reconsider and apply: a running importer's pass that began
 * before the mode changed may write the old form once after ours. */
#define MAX_ROUNDS 3
/* How long the rows a run reconsiders are left to it alone (see apply_rounds). */
#define HOLD_MS 60000

/* The workloads whose standby form differs from the active one, in the order
 * their changes are said. */
static const enum ds_kind_id kinds[] = {
    DS_KIND_DEPLOYMENT, DS_KIND_STATEFUL_SET, DS_KIND_REPLICA_SET, DS_KIND_DAEMON_SET,
    DS_KIND_CRON_JOB,	DS_KIND_JOB,	      DS_KIND_POD,
};

struct ds_failover {
	ds_failover_opts o;
	const char *ns[DS_FAILOVER_MAX_NAMESPACES];
	size_t n_ns;
	char **ledger_ns; /* the ledger's namespaces, when none was given */
	size_t n_ledger_ns;
	ds_object_state *st;
	ds_namespace_modes *nm;
	ds_inbox *ib;
	ds_kube *kube;	    /* borrowed, during ds_failover_run() */
	int64_t held_at;    /* the rows reconsidered are this run's until then (wall ms) */
	size_t unannotated; /* Namespaces whose mode annotations could not be written */
};

/* ---- the decisions ---------------------------------------------------------------- */

/* A bare Pod or Job (held in the ledger in standby) by its snapshot key "Kind ns/name". */
static bool bare(const char *key)
{
	char kind[64];

	snprintf(kind, sizeof(kind), "%.*s", (int)strcspn(key, " "), key);
	return ds_kind_is(kind, DS_KIND_POD) || ds_kind_is(kind, DS_KIND_JOB);
}

int ds_failover_snapshot_add(json_t *snap, const char *kind, const char *ns, const json_t *list)
{
	json_t *item;
	size_t j;

	json_array_foreach (json_object_get(list, "items"), j, item) {
		json_t *meta = json_object_get(item, "metadata");
		json_t *spec = json_object_get(item, "spec"), *sel, *v;
		char key[700];

		if (json_object_get(meta, "deletionTimestamp") ||
		    json_array_size(json_object_get(meta, "ownerReferences")))
			continue;
		snprintf(key, sizeof(key), "%s %s/%s", kind, ns, ds_json_str(meta, "name"));
		v = json_object();
		if (!v)
			return -ENOMEM;
		if (json_is_integer(json_object_get(spec, "replicas")))
			json_object_set(v, "replicas", json_object_get(spec, "replicas"));
		if (ds_kind_is(kind, DS_KIND_CRON_JOB))
			json_object_set_new(
			    v, "suspend",
			    json_boolean(json_is_true(json_object_get(spec, "suspend"))));
		/* The standby form's own marks (SSA drops them in the active one). */
		json_object_set_new(v, "standby",
				    json_boolean(ds_obj_annotation(item, DS_ANNOTATION_REPLICAS) ||
						 ds_obj_annotation(item, DS_ANNOTATION_SUSPEND) ||
						 ds_obj_annotation(item, DS_ANNOTATION_STANDBY)));
		/* List items carry no kind: the DaemonSet's pod spec by its path. */
		sel = ds_json_path(item, "spec.template.spec.nodeSelector");
		if (ds_kind_is(kind, DS_KIND_DAEMON_SET))
			json_object_set_new(
			    v, "parked",
			    json_boolean(json_object_get(sel, DS_STANDBY_NODE_LABEL) != NULL));
		if (json_object_set_new(snap, key, v) < 0)
			return -ENOMEM;
	}
	return 0;
}

bool ds_failover_settled(const json_t *snap, enum ds_mode to)
{
	const char *key;
	json_t *v;

	json_object_foreach ((json_t *)snap, key, v) {
		bool marked = json_is_true(json_object_get(v, "standby"));

		if (to == DS_MODE_MIGRATE && marked)
			return false;
		if (to == DS_MODE_STANDBY && (bare(key) || !marked))
			return false;
	}
	return true;
}

/* Equal values, or both absent (json_equal() says no to two NULLs). */
static bool eq(const json_t *a, const json_t *b)
{
	return (!a && !b) || json_equal(a, b);
}

/* The snapshot values compared for the lines: what an operator sees change. */
static bool same(const json_t *a, const json_t *b)
{
	static const char *const fields[] = {"replicas", "suspend", "parked"};

	for (size_t i = 0; i < 3; i++)
		if (!eq(json_object_get(a, fields[i]), json_object_get(b, fields[i])))
			return false;
	return true;
}

static const char *int_text(const json_t *v, char *buf, size_t size)
{
	if (!v)
		return "unset";
	snprintf(buf, size, "%lld", (long long)json_integer_value(v));
	return buf;
}

static int add_line(json_t *lines, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int add_line(json_t *lines, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	return json_array_append_new(lines, json_string(line)) < 0 ? -ENOMEM : 0;
}

/* The lines of one workload that is in both snapshots and changed. */
static int diff_one(json_t *lines, const char *key, const json_t *b, const json_t *a)
{
	char x[32], y[32];
	int rc = 0;

	if (!eq(json_object_get(b, "replicas"), json_object_get(a, "replicas")))
		rc = add_line(lines, "%s: replicas %s -> %s", key,
			      int_text(json_object_get(b, "replicas"), x, sizeof(x)),
			      int_text(json_object_get(a, "replicas"), y, sizeof(y)));
	if (rc == 0 && !eq(json_object_get(b, "suspend"), json_object_get(a, "suspend")))
		rc = add_line(lines, "%s: suspend %s -> %s", key,
			      json_is_true(json_object_get(b, "suspend")) ? "true" : "false",
			      json_is_true(json_object_get(a, "suspend")) ? "true" : "false");
	if (rc == 0 && !eq(json_object_get(b, "parked"), json_object_get(a, "parked")))
		rc = add_line(lines, "%s: %s", key,
			      json_is_true(json_object_get(a, "parked")) ? "parked" : "unparked");
	return rc;
}

int ds_failover_diff(const json_t *before, const json_t *after, json_t **lines, size_t *unchanged)
{
	json_t *out = json_array(), *b, *a;
	const char *key;
	size_t changed = 0, same_n = 0;
	int rc = out ? 0 : -ENOMEM;

	json_object_foreach ((json_t *)after, key, a) {
		if (rc < 0)
			break;
		b = json_object_get(before, key);
		if (!b) {
			rc = add_line(out, "%s: created%s", key, bare(key) ? " (was held)" : "");
			changed++;
		} else if (same(a, b)) {
			same_n++;
		} else {
			rc = diff_one(out, key, b, a);
			changed++;
		}
	}
	json_object_foreach ((json_t *)before, key, b) {
		if (rc < 0)
			break;
		if (!json_object_get(after, key)) {
			rc = add_line(out, "%s: deleted%s", key,
				      bare(key) ? " (held in the ledger again)" : "");
			changed++;
		}
	}
	if (rc < 0) {
		json_decref(out);
		return rc;
	}
	*lines = out;
	*unchanged = same_n;
	return (int)changed;
}

static const char *when(int64_t t_s, char *buf, size_t size)
{
	struct tm tm;
	time_t tt = (time_t)t_s;

	gmtime_r(&tt, &tm);
	strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return buf;
}

enum ds_failover_verdict ds_failover_guard_verdict(const json_t *sources, bool force,
						   int64_t now_ms, json_t *lines)
{
	size_t i, connected = 0;
	json_t *s;
	char t1[64];

	json_array_foreach (sources, i, s) {
		if (!json_is_true(json_object_get(s, "connected")))
			continue;
		connected++;
		if (!lines)
			continue;
		add_line(
		    lines,
		    "%s source %s is still connected to this target (session from %s since "
		    "%s, seen %lld s ago)%s",
		    force ? "warning:" : "refused:", ds_json_str(s, "source"),
		    ds_json_str(s, "peer"),
		    when(json_integer_value(json_object_get(s, "since")) / 1000, t1, sizeof(t1)),
		    (long long)((now_ms - json_integer_value(json_object_get(s, "seenAt"))) / 1000),
		    force ? "; --force given" : "");
	}
	if (!connected)
		return DS_FAILOVER_GO;
	return force ? DS_FAILOVER_FORCED : DS_FAILOVER_REFUSED;
}

const char *ds_failover_problem(const ds_object_state_row *r)
{
	if (r->state == DS_APPLY_FAILED)
		return "FAILED";
	if (r->state == DS_APPLY_WAITING)
		return "NOT APPLIED (waits)";
	if (r->state == DS_APPLY_PENDING)
		return "NOT APPLIED (still retrying)";
	if (r->state == DS_APPLY_HELD && r->reason && strstr(r->reason, "not deleted:"))
		return "KEPT on the target";
	return NULL;
}

/* ---- the run ---------------------------------------------------------------------- */

static void sayf(const ds_failover *f, bool problem, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void sayf(const ds_failover *f, bool problem, const char *fmt, ...)
{
	char line[2048];
	va_list ap;

	if (!f->o.say)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	f->o.say(f->o.ud, problem, line);
}

/* What the ledger said went wrong, with the verb and the file. */
static void say_ledger(const ds_failover *f, const ds_err *err)
{
	sayf(f, true, "drasync-target %s: %s: %s", f->o.verb, f->o.ledger_path, err->msg);
}

static const char *map_ns(void *ud, const char *source_ns)
{
	return ds_target_config_map_namespace(ud, source_ns);
}

static ds_object_state_scope scope_of(const ds_failover *f)
{
	return (ds_object_state_scope){.ns = f->ns,
				       .n = f->n_ns,
				       .map_ns = map_ns,
				       .map_ud = (void *)f->o.cfg,
				       .held_at = f->held_at};
}

int ds_failover_open(ds_failover **out, const ds_failover_opts *o, ds_err *err)
{
	ds_failover *f = calloc(1, sizeof(*f));
	int rc;

	if (!f)
		return -ENOMEM;
	f->o = *o;
	rc = ds_object_state_open(&f->st, o->ledger_path, err);
	if (rc == 0)
		rc = ds_namespace_modes_open(&f->nm, o->ledger_path, err);
	if (rc == 0)
		rc = ds_inbox_open(&f->ib, o->ledger_path, err);
	if (rc < 0) {
		ds_failover_free(f);
		return rc;
	}
	*out = f;
	return 0;
}

void ds_failover_free(ds_failover *f)
{
	if (!f)
		return;
	ds_inbox_free(f->ib);
	ds_namespace_modes_free(f->nm);
	ds_object_state_free(f->st);
	ds_object_state_strings_free(f->ledger_ns, f->n_ledger_ns);
	free(f);
}

int ds_failover_namespaces(ds_failover *f, const char *const *ns, size_t n)
{
	ds_err err = {0};
	int rc = ds_object_state_namespaces(f->st, map_ns, (void *)f->o.cfg, &f->ledger_ns,
					    &f->n_ledger_ns, &err);

	if (rc < 0) {
		say_ledger(f, &err);
		return 1;
	}
	if (!n) {
		if (!f->n_ledger_ns) {
			sayf(f, true,
			     "drasync-target %s: the ledger %s holds no namespaced objects yet: "
			     "nothing to %s",
			     f->o.verb, f->o.ledger_path, f->o.verb);
			return 1;
		}
		for (size_t i = 0; i < f->n_ledger_ns && f->n_ns < DS_FAILOVER_MAX_NAMESPACES; i++)
			f->ns[f->n_ns++] = f->ledger_ns[i];
		return 0;
	}
	for (size_t i = 0; i < n && i < DS_FAILOVER_MAX_NAMESPACES; i++)
		f->ns[f->n_ns++] = ns[i];
	for (size_t i = 0; i < f->n_ns; i++) {
		bool known = false;
		ds_str s;

		for (size_t j = 0; j < f->n_ledger_ns && !known; j++)
			known = strcmp(f->ns[i], f->ledger_ns[j]) == 0;
		if (known)
			continue;
		ds_str_init(&s, 1 << 20);
		ds_str_addf(&s,
			    "drasync-target %s: the ledger holds no objects for namespace %s (a "
			    "target namespace, after namespaceMappings); it has:",
			    f->o.verb, f->ns[i]);
		for (size_t j = 0; j < f->n_ledger_ns; j++)
			ds_str_addf(&s, " %s", f->ledger_ns[j]);
		ds_str_adds(&s, f->n_ledger_ns ? "" : " none");
		if (ds_str_ptr(&s) && f->o.say)
			f->o.say(f->o.ud, true, ds_str_ptr(&s));
		ds_str_dispose(&s);
	}
	return 0;
}

/* The sources of the namespaces as ds_failover_guard_verdict() reads them. */
static int presences(ds_failover *f, json_t **out)
{
	ds_object_state_scope scope = scope_of(f);
	char **sources = NULL;
	size_t n = 0;
	ds_err err = {0};
	json_t *arr;
	int rc = ds_object_state_sources_in(f->st, &scope, &sources, &n, &err);

	if (rc < 0) {
		sayf(f, true, "drasync-target failover: %s: %s", f->o.ledger_path, err.msg);
		return rc;
	}
	arr = json_array();
	for (size_t i = 0; arr && i < n; i++) {
		ds_inbox_presence p;

		if (f->o.requester && strcmp(sources[i], f->o.requester) == 0)
			continue; /* it asked: its own session is no split brain */
		if (ds_inbox_presence_get(f->ib, sources[i], ds_clock_wall_ms(), &p, NULL) != 1)
			continue;
		json_array_append_new(arr, json_pack("{ss sb ss sI sI}", "source", sources[i],
						     "connected", p.connected, "peer", p.peer,
						     "since", (json_int_t)p.since, "seenAt",
						     (json_int_t)p.seen_at));
	}
	ds_object_state_strings_free(sources, n);
	if (!arr)
		return -ENOMEM;
	*out = arr;
	return 0;
}

int ds_failover_guard(ds_failover *f)
{
	json_t *sources = NULL, *lines = NULL, *line;
	enum ds_failover_verdict v;
	size_t i;
	ds_str s;

	if (f->o.to != DS_MODE_MIGRATE)
		return 0;
	if (presences(f, &sources) < 0 || !(lines = json_array())) {
		json_decref(sources);
		return 1;
	}
	v = ds_failover_guard_verdict(sources, f->o.force, ds_clock_wall_ms(), lines);
	json_array_foreach (lines, i, line)
		if (f->o.say)
			f->o.say(f->o.ud, true, json_string_value(line));
	json_decref(lines);
	json_decref(sources);
	if (v != DS_FAILOVER_REFUSED)
		return 0;
	ds_str_init(&s, 1 << 20);
	ds_str_addf(&s,
		    "  Its site may still run these workloads: failing over now would run them\n"
		    "  twice (split brain). Stop drasync-source on the source site (or cut the\n"
		    "  link) and run failover again, or, if you know the source site is down,\n"
		    "  add --force:\n"
		    "    drasync-target failover --config %s",
		    f->o.config_path);
	for (i = 0; i < f->n_ns; i++)
		ds_str_addf(&s, " --namespace %s", f->ns[i]);
	ds_str_adds(&s, " --force\nNothing was changed.");
	if (ds_str_ptr(&s) && f->o.say)
		f->o.say(f->o.ud, true, ds_str_ptr(&s));
	ds_str_dispose(&s);
	return 1;
}

/* Whether ns is one of the command's namespaces. */
static bool ours(const ds_failover *f, const char *ns)
{
	for (size_t i = 0; ns && i < f->n_ns; i++)
		if (strcmp(f->ns[i], ns) == 0)
			return true;
	return false;
}

/* Add the items of list in the command's namespaces, each under its own namespace. */
static int add_ours(ds_failover *f, json_t *snap, const char *kind, const json_t *list)
{
	json_t *one = json_object(), *items = json_array(), *item;
	size_t j;
	int rc = one && items ? 0 : -ENOMEM;

	json_object_set_new(one, "items", items);
	json_array_foreach (json_object_get(list, "items"), j, item) {
		const char *ns = ds_json_str(json_object_get(item, "metadata"), "namespace");

		if (rc < 0 || !ours(f, ns))
			continue;
		json_array_clear(items);
		if (json_array_append(items, item) < 0)
			rc = -ENOMEM;
		else
			rc = ds_failover_snapshot_add(snap, kind, ns, one);
	}
	json_decref(one);
	return rc;
}

/*
 * One kind in the namespaces: one list across the cluster when there are
 * several (a request per kind, not per kind and namespace: the first write
 * waits for these), else, or when the cluster-wide list is not allowed, one
 * per namespace.
 */
static int snapshot_kind(ds_failover *f, json_t *snap, const ds_kind *kd,
			 const struct ds_kube_resource *res)
{
	struct ds_kube_list_opts lo = {.label_selector = DS_LABEL_MANAGED_BY "=drasync",
				       .limit = 500};
	ds_kube_error ke;
	char buf[600];
	int rc;

	if (f->n_ns > 1) {
		json_t *list = NULL;

		ds_kube_error_clear(&ke);
		rc = ds_kube_list(f->kube, res, NULL, &lo, &list, NULL, &ke);
		if (rc == 0) {
			rc = add_ours(f, snap, kd->name, list);
			json_decref(list);
			return rc;
		}
		if (ke.code != 403) {
			sayf(f, true, "drasync-target %s: list %s: %s", f->o.verb, kd->name,
			     ds_kube_error_format(&ke, buf, sizeof(buf)));
			return rc;
		}
	}
	for (size_t i = 0; i < f->n_ns; i++) {
		json_t *list = NULL;

		ds_kube_error_clear(&ke);
		rc = ds_kube_list(f->kube, res, f->ns[i], &lo, &list, NULL, &ke);
		if (rc < 0) {
			sayf(f, true, "drasync-target %s: list %s in %s: %s", f->o.verb, kd->name,
			     f->ns[i], ds_kube_error_format(&ke, buf, sizeof(buf)));
			return rc;
		}
		rc = ds_failover_snapshot_add(snap, kd->name, f->ns[i], list);
		json_decref(list);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* The workloads drasync manages in the namespaces, as the cluster has them. */
static int snapshot(ds_failover *f, json_t **out)
{
	json_t *snap = json_object();
	int rc = 0;

	if (!snap)
		return -ENOMEM;
	for (size_t k = 0; rc == 0 && k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		const ds_kind *kd = ds_kind_get(kinds[k]);
		struct ds_kube_resource res;
		ds_kube_error ke;
		char api[128];

		snprintf(api, sizeof(api), "%s%s%s", kd->group, kd->group[0] ? "/" : "",
			 kd->versions[0]);
		ds_kube_error_clear(&ke);
		if (ds_kube_resource_find(f->kube, api, kd->name, &res, &ke) < 0)
			continue;
		rc = snapshot_kind(f, snap, kd, &res);
	}
	if (rc < 0) {
		json_decref(snap);
		return rc;
	}
	*out = snap;
	return 0;
}

/*
 * What did not go as the mode wants, from the ledger (whichever applier
 * decided it, this command's or a running importer's). One line each.
 * @return how many, or < 0
 */
static int report_problems(ds_failover *f)
{
	ds_object_state_scope scope = scope_of(f);
	ds_object_state_row *rows = NULL;
	size_t n = 0, bad = 0;
	ds_err err = {0};
	int rc = ds_object_state_list_in(f->st, &scope, &rows, &n, &err);

	if (rc < 0) {
		say_ledger(f, &err);
		return rc;
	}
	for (size_t i = 0; i < n; i++) {
		const ds_object_state_row *r = &rows[i];
		const char *what = ds_failover_problem(r), *ns;

		if (!what)
			continue;
		ns = r->target_name ? r->target_ns : map_ns((void *)f->o.cfg, r->ns ? r->ns : "");
		sayf(f, false, "%s %s/%s: %s: %s", r->kind ? r->kind : "?", ns ? ns : "",
		     r->target_name ? r->target_name : r->name, what,
		     r->reason ? r->reason : "no reason given");
		bad++;
	}
	ds_object_state_rows_free(rows, n);
	return (int)bad;
}

/*
 * Apply what is due in the namespaces until nothing is, retrying objects in
 * backoff until the deadline. @return 0, or a negative errno (ledger)
 */
static int apply_all(ds_failover *f, ds_applier *a, int64_t deadline, size_t *pending_left)
{
	ds_object_state_scope scope = scope_of(f);
	ds_err err = {0};
	int rc;

	for (;;) {
		size_t pending = 0, waiting = 0;
		int64_t next_at = 0, wait;
		struct timespec ts;

		rc = ds_applier_pass(a, &err);
		if (rc == -EBUSY || rc > 0)
			continue;
		if (rc == 0)
			rc = ds_object_state_due_in(f->st, &scope, &pending, &waiting, &next_at,
						    &err);
		if (rc < 0) {
			say_ledger(f, &err);
			return rc;
		}
		*pending_left = pending;
		if (!pending || ds_deadline_passed(deadline))
			return 0;
		/* next_at is a ledger time, on the wall clock */
		wait = next_at - ds_clock_wall_ms();
		if (wait > 500)
			wait = 500;
		if (wait < 20)
			wait = 20;
		ts.tv_sec = 0;
		ts.tv_nsec = (long)wait * 1000000L;
		nanosleep(&ts, NULL);
	}
}

/* Record the mode of each namespace, saying which changed. @return how many, or < 0 */
static int set_modes(ds_failover *f)
{
	enum ds_mode conf = ds_target_config_mode(f->o.cfg);
	int changed = 0;

	for (size_t i = 0; i < f->n_ns; i++) {
		enum ds_mode was = conf;
		ds_err err = {0};
		int rc = ds_namespace_modes_get(f->nm, f->ns[i], &was, &err);

		if (rc >= 0)
			rc = ds_namespace_modes_set(f->nm, f->ns[i], f->o.to, f->o.verb, &err);
		if (rc < 0) {
			say_ledger(f, &err);
			return rc;
		}
		if (rc == 1 && was != f->o.to) {
			sayf(f, false, "namespace %s: %s -> %s", f->ns[i],
			     ds_namespace_mode_word(was), ds_namespace_mode_word(f->o.to));
			changed++;
		}
	}
	return changed;
}

/*
 * The modes on the Namespaces too (drasync.io/mode*), what a new ledger reads
 * back (ledger_identity.h). Written every time, so running the command again
 * mends one that failed; a failure is said and fails the command.
 */
static int annotate_modes(ds_failover *f)
{
	ds_namespace_mode *rows = NULL;
	size_t n = 0;
	ds_err err = {0};

	if (ds_namespace_modes_list(f->nm, &rows, &n, &err) < 0) {
		say_ledger(f, &err);
		return -EIO;
	}
	for (size_t i = 0; i < f->n_ns; i++) {
		const ds_namespace_mode *row = NULL;
		char buf[600];
		ds_kube_error ke;

		for (size_t j = 0; j < n && !row; j++)
			if (strcmp(rows[j].ns, f->ns[i]) == 0)
				row = &rows[j];
		ds_kube_error_clear(&ke);
		if (row && ds_namespace_mode_annotate(f->kube, f->ns[i], row->mode, row->since,
						      row->changed_by, &ke) == 0)
			continue;
		if (row && ke.code == 404 && strcmp(ke.details_kind, "namespaces") == 0) {
			/* Nothing replicated there yet: nothing to carry the mode. */
			sayf(f, false,
			     "drasync-target %s: namespace %s is not on the target yet: its mode "
			     "is in the ledger only (run %s again once it exists, so that a new "
			     "ledger can read it back)",
			     f->o.verb, f->ns[i], f->o.verb);
			continue;
		}
		f->unannotated++;
		sayf(
		    f, true,
		    "drasync-target %s: namespace %s: the mode is in the ledger, but writing it on "
		    "the Namespace (annotation " DS_ANNOTATION_MODE ") failed: %s; a new ledger "
		    "reads the modes back from there: run %s again once that is fixed",
		    f->o.verb, f->ns[i],
		    row ? ds_kube_error_format(&ke, buf, sizeof(buf)) : "not in the ledger",
		    f->o.verb);
	}
	ds_namespace_mode_list_free(rows, n);
	return 0;
}

/* Reconsider and apply until the snapshot has the mode's form (or MAX_ROUNDS). */
static int apply_rounds(ds_failover *f, int64_t deadline, json_t **after, size_t *pending_left)
{
	ds_object_state_scope scope;
	ds_applier_config ac;
	ds_applier *a = NULL;
	json_t *snap = NULL;
	ds_err err = {0};
	int rc, rounds = 0;

	/* The rows it reconsiders are this run's to apply for HOLD_MS: a running
	 * importer's applier would write every one of them too (and verify each),
	 * beside this one, while the pods start. Should this run end first, they
	 * are due for it then. */
	f->held_at = ds_clock_wall_ms() + HOLD_MS;
	scope = scope_of(f);

	memset(&ac, 0, sizeof(ac));
	ac.ledger_path = f->o.ledger_path;
	ac.kube = f->kube;
	ac.cfg = f->o.cfg;
	ac.namespaces = f->ns;
	ac.n_namespaces = f->n_ns;
	/* Every row is due again (reconsidered): listing the namespaces for objects a
	 * killed run wrote would hold up the first writes; one written twice costs a
	 * write that changes nothing. */
	ac.no_restart_check = true;
	ac.held_at = f->held_at;
	rc = ds_applier_new(&a, &ac, &err);
	if (rc < 0) {
		sayf(f, true, "drasync-target %s: %s", f->o.verb, err.msg);
		return rc;
	}
	do {
		json_decref(snap);
		snap = NULL;
		rc = ds_object_state_reconsider_in(f->st, &scope, &err);
		if (rc < 0) {
			say_ledger(f, &err);
			goto out;
		}
		rc = apply_all(f, a, deadline, pending_left);
		if (rc == 0)
			rc = snapshot(f, &snap);
		if (rc < 0)
			goto out;
	} while (!ds_failover_settled(snap, f->o.to) && ++rounds < MAX_ROUNDS);
	*after = snap;
	snap = NULL;
out:
	json_decref(snap);
	ds_applier_free(a);
	return rc < 0 ? rc : 0;
}

/* The last line: nothing to change, or what changed. */
static void summary(const ds_failover *f, size_t modes, size_t changed, size_t unchanged,
		    size_t failed, size_t pending_left)
{
	const char *word = ds_namespace_mode_word(f->o.to);
	ds_str s;

	if (changed || modes || failed || pending_left) {
		sayf(f, false,
		     "%s: %zu namespace%s %s, %zu workload%s changed, %zu unchanged, %zu not "
		     "done%s",
		     f->o.verb, f->n_ns, f->n_ns == 1 ? "" : "s", word, changed,
		     changed == 1 ? "" : "s", unchanged, failed, failed ? " (see above)" : "");
		return;
	}
	ds_str_init(&s, 1 << 20);
	ds_str_addf(&s, "%s: nothing to change: namespace%s", f->o.verb, f->n_ns == 1 ? "" : "s");
	for (size_t i = 0; i < f->n_ns; i++)
		ds_str_addf(&s, "%s %s", i ? "," : "", f->ns[i]);
	ds_str_addf(&s, " already %s (%zu workload%s as they should be)", word, unchanged,
		    unchanged == 1 ? "" : "s");
	if (ds_str_ptr(&s) && f->o.say)
		f->o.say(f->o.ud, false, ds_str_ptr(&s));
	ds_str_dispose(&s);
}

int ds_failover_run(ds_failover *f, ds_kube *kube, int64_t deadline)
{
	json_t *before = NULL, *after = NULL, *lines = NULL, *line;
	size_t pending_left = 0, unchanged = 0, failed, i;
	int rc, modes, changed;

	f->kube = kube;
	if (snapshot(f, &before) < 0)
		return 1;
	rc = 1;
	modes = set_modes(f);
	/* The workloads first: the Namespaces' annotations are what a new ledger
	 * reads back, nothing waits for them to run. */
	if (modes < 0 || apply_rounds(f, deadline, &after, &pending_left) < 0 ||
	    annotate_modes(f) < 0)
		goto out;
	changed = ds_failover_diff(before, after, &lines, &unchanged);
	if (changed < 0)
		goto out;
	json_array_foreach (lines, i, line)
		sayf(f, false, "%s", json_string_value(line));
	rc = report_problems(f);
	if (rc < 0) {
		rc = 1;
		goto out;
	}
	failed = (size_t)rc;
	if (pending_left)
		sayf(f, false,
		     "%zu object%s still to be retried after --timeout (a running importer goes "
		     "on; see drasync-target status)",
		     pending_left, pending_left == 1 ? "" : "s");
	summary(f, (size_t)modes, (size_t)changed, unchanged, failed, pending_left);
	rc = failed || pending_left || f->unannotated ? 1 : 0;
out:
	f->kube = NULL;
	json_decref(lines);
	json_decref(before);
	json_decref(after);
	return rc;
}
