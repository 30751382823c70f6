/*
 * What `drasync-target status` shows of the ledger (ledger_status.h), as text
 * or JSON: sources and their lag, namespaces and their modes, objects per
 * state, those that need a look, the last verification, the planned
 * relocations the sources asked for.
 */
#include "drasync/status_report.h"

#include "drasync/clock.h"
#include "drasync/namespace_mode.h"

#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *when(int64_t t, char *buf, size_t size)
{
	struct tm tm;
	time_t tt = (time_t)t;

	if (t <= 0)
		return "never";
	gmtime_r(&tt, &tm);
	strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return buf;
}

const char *ds_status_report_attention(const ds_ledger_status *st)
{
	if (st->states[DS_APPLY_REFUSED])
		return "records were refused: outside what the target grants their source";
	if (st->states[DS_APPLY_FAILED])
		return "objects failed to apply";
	if (st->states[DS_APPLY_WAITING])
		return "objects wait for objects they need";
	if (st->not_verified)
		return "workloads failed their last verification";
	return NULL;
}

static size_t count_refused(const ds_ledger_status *st)
{
	size_t n = 0;

	for (size_t i = 0; i < st->n_items; i++)
		n += st->items[i].state == DS_APPLY_REFUSED;
	return n;
}

/* SPEC §5: the refused objects, per source, each with its reason. */
static void print_refused_text(FILE *out, const ds_ledger_status *st)
{
	if (!count_refused(st))
		return;
	fprintf(out, "\nrefused (outside what this target grants the source; nothing written):\n");
	for (size_t i = 0; i < st->n_items; i++) {
		const ds_ledger_item *it = &st->items[i];
		bool seen = false;
		size_t n = 0;

		if (it->state != DS_APPLY_REFUSED)
			continue;
		for (size_t k = 0; k < i && !seen; k++)
			seen = st->items[k].state == DS_APPLY_REFUSED &&
			       strcmp(st->items[k].source, it->source) == 0;
		if (seen)
			continue;
		for (size_t k = i; k < st->n_items; k++)
			n += st->items[k].state == DS_APPLY_REFUSED &&
			     strcmp(st->items[k].source, it->source) == 0;
		fprintf(out, "  source %s: %zu refused\n", it->source, n);
		for (size_t k = i; k < st->n_items; k++) {
			const ds_ledger_item *r = &st->items[k];
			if (r->state == DS_APPLY_REFUSED && strcmp(r->source, it->source) == 0)
				fprintf(out, "    %s %s%s%s: %s\n", r->kind, r->ns,
					r->ns[0] ? "/" : "", r->name, r->reason);
		}
	}
}

/* The last verification: totals, and each workload NOT verified with its reason. */
static void print_verification_text(FILE *out, const ds_ledger_status *st)
{
	char b[40];

	if (!st->verified && !st->not_verified) {
		fprintf(out, "\nverification: never (drasync-target verify --config FILE)\n");
		return;
	}
	fprintf(out, "\nverification: %llu verified, %llu NOT verified (last checked %s)\n",
		(unsigned long long)st->verified, (unsigned long long)st->not_verified,
		when(st->last_checked, b, sizeof(b)));
	for (size_t i = 0; i < st->n_verifications; i++) {
		const ds_ledger_verification *v = &st->verifications[i];
		if (!v->verified)
			fprintf(out, "  NOT verified %s %s/%s (%s, %s): %s\n", v->kind, v->ns,
				v->name, v->form, when(v->checked_at, b, sizeof(b)), v->reason);
	}
}

static json_t *verification_json(const ds_ledger_status *st)
{
	json_t *arr = json_array();

	for (size_t i = 0; i < st->n_verifications; i++) {
		const ds_ledger_verification *v = &st->verifications[i];
		json_array_append_new(
		    arr, json_pack("{ss ss ss ss sb ss sI sf}", "kind", v->kind, "namespace", v->ns,
				   "name", v->name, "form", v->form, "verified", v->verified,
				   "reason", v->reason, "checkedAt", (json_int_t)v->checked_at,
				   "seconds", v->seconds));
	}
	return json_pack("{sI sI sI so}", "verified", (json_int_t)st->verified, "notVerified",
			 (json_int_t)st->not_verified, "lastChecked", (json_int_t)st->last_checked,
			 "workloads", arr);
}

/* The planned relocations (relocation.h): source, namespace, outcome, when. */
static void print_relocations_text(FILE *out, const ds_ledger_status *st)
{
	char b[40], f[40];

	if (!st->n_relocations)
		return;
	fprintf(out, "\n%-20s %-24s %-28s %-8s %-21s %-21s %s\n", "RELOCATION FROM", "NAMESPACE",
		"TO", "OUTCOME", "ASKED", "FINISHED", "MESSAGE");
	for (size_t i = 0; i < st->n_relocations; i++) {
		const ds_ledger_relocation *r = &st->relocations[i];
		fprintf(out, "%-20s %-24s %-28s %-8s %-21s %-21s %s\n", r->source, r->ns,
			r->target_ns[0] ? r->target_ns : "-", r->state,
			when(r->requested_at, b, sizeof(b)),
			r->finished_at ? when(r->finished_at, f, sizeof(f)) : "-", r->message);
	}
}

static json_t *relocations_json(const ds_ledger_status *st)
{
	json_t *arr = json_array();

	for (size_t i = 0; i < st->n_relocations; i++) {
		const ds_ledger_relocation *r = &st->relocations[i];
		json_array_append_new(
		    arr,
		    json_pack("{ss ss ss ss ss sI so}", "source", r->source, "namespace", r->ns,
			      "targetNamespace", r->target_ns, "outcome", r->state, "message",
			      r->message, "requestedAt", (json_int_t)r->requested_at, "finishedAt",
			      r->finished_at ? json_integer(r->finished_at) : json_null()));
	}
	return arr;
}

/* How long the oldest record not applied yet has waited; 0 when none waits. */
static int64_t lag_seconds(const ds_ledger_source *s)
{
	int64_t now = ds_clock_wall_ms() / 1000; /* the ledger stores seconds of the wall clock */

	return s->unapplied && s->oldest_unapplied && now > s->oldest_unapplied
		   ? now - s->oldest_unapplied
		   : 0;
}

/* Each source's backlog and ledger bytes against its quotas, and which one throttles it. */
static void print_quotas_text(FILE *out, const ds_ledger_status *st)
{
	if (!st->n_sources)
		return;
	fprintf(out, "\n%-20s %25s %31s  %s\n", "SOURCE", "BACKLOG/LIMIT", "LEDGER BYTES/LIMIT",
		"CREDIT");
	for (size_t i = 0; i < st->n_sources; i++) {
		const ds_ledger_source *s = &st->sources[i];
		char backlog[48], bytes[64], lim[24];
		snprintf(backlog, sizeof(backlog), "%llu/%llu", (unsigned long long)s->unapplied,
			 (unsigned long long)s->max_unapplied);
		if (s->max_ledger_bytes)
			snprintf(lim, sizeof(lim), "%llu", (unsigned long long)s->max_ledger_bytes);
		else
			snprintf(lim, sizeof(lim), "unlimited");
		snprintf(bytes, sizeof(bytes), "%llu/%s", (unsigned long long)s->ledger_bytes, lim);
		if (s->throttled != DS_QUOTA_NONE)
			fprintf(out, "%-20s %25s %31s  throttled (%s)\n", s->name, backlog, bytes,
				ds_quota_kind_name(s->throttled));
		else
			fprintf(out, "%-20s %25s %31s  ok\n", s->name, backlog, bytes);
	}
}

/* A namespace's mode: the ledger's (failover, failback), else the configuration's. */
static const char *ns_mode(const ds_ledger_namespace *n, enum ds_mode conf)
{
	return ds_namespace_mode_word(n->recorded ? n->mode : conf);
}

void ds_status_report_text(FILE *out, const ds_ledger_status *st, const char *ledger,
			   enum ds_mode conf)
{
	const char *mode = ds_mode_name(conf);
	char b[40];

	fprintf(out, "ledger:  %s\n", ledger);
	if (st->ledger_id[0])
		fprintf(out, "ledger id: %s (created %s; ConfigMap drasync-ledger)\n",
			st->ledger_id, st->ledger_created);
	else
		fprintf(out, "ledger id: none yet (made by the next run, failover or failback)\n");
	fprintf(out, "size:    %.1f MiB, %llu records\nmode:    %s\n",
		(double)st->bytes / (1024.0 * 1024.0), (unsigned long long)st->records, mode);
	fprintf(out, "\n%-20s %-20s %20s %12s %-21s %10s %8s %9s\n", "SOURCE", "CLUSTER", "EPOCH",
		"COMMITTED", "LAST CONTACT", "UNAPPLIED", "LAG", "OBJECTS");
	for (size_t i = 0; i < st->n_sources; i++) {
		const ds_ledger_source *s = &st->sources[i];
		char lag[24];
		snprintf(lag, sizeof(lag), "%llds", (long long)lag_seconds(s));
		fprintf(out, "%-20s %-20s %20llu %12llu %-21s %10llu %8s %9llu\n", s->name,
			s->cluster, (unsigned long long)s->epoch,
			(unsigned long long)s->committed_seq, when(s->last_contact, b, sizeof(b)),
			(unsigned long long)s->unapplied, lag, (unsigned long long)s->objects);
	}
	if (!st->n_sources)
		fprintf(out, "(no source has connected yet)\n");
	print_quotas_text(out, st);
	if (st->n_namespaces) {
		fprintf(out, "\n%-32s %-8s %-21s %-11s %9s %6s\n", "NAMESPACE", "MODE", "SINCE",
			"CHANGED BY", "OBJECTS", "HELD");
		for (size_t i = 0; i < st->n_namespaces; i++) {
			const ds_ledger_namespace *n = &st->namespaces[i];
			fprintf(out, "%-32s %-8s %-21s %-11s %9llu %6llu\n", n->name,
				ns_mode(n, conf), n->recorded ? when(n->since, b, sizeof(b)) : "-",
				n->recorded ? n->changed_by : "config",
				(unsigned long long)n->objects, (unsigned long long)n->held);
		}
	}
	fprintf(out, "\nobjects:");
	for (int s = 1; s < DS_APPLY_STATE_MAX; s++)
		fprintf(out, " %s %llu", ds_apply_state_name((enum ds_apply_state)s),
			(unsigned long long)st->states[s]);
	fprintf(out, "\n");
	print_refused_text(out, st);
	if (st->n_items > count_refused(st)) {
		fprintf(out, "\nobjects that need a look:\n");
		for (size_t i = 0; i < st->n_items; i++) {
			const ds_ledger_item *it = &st->items[i];
			if (it->state == DS_APPLY_REFUSED)
				continue;
			fprintf(out, "  %-7s %s %s%s%s (source %s): %s\n",
				ds_apply_state_name(it->state), it->kind, it->ns,
				it->ns[0] ? "/" : "", it->name, it->source, it->reason);
		}
		if (st->more_items)
			fprintf(out, "  ... and %llu more\n", (unsigned long long)st->more_items);
	}
	print_verification_text(out, st);
	print_relocations_text(out, st);
}

int ds_status_report_json(FILE *out, const ds_ledger_status *st, const char *ledger,
			  enum ds_mode conf)
{
	const char *mode = ds_mode_name(conf);
	json_t *o = json_object(), *srcs = json_array(), *states = json_object(),
	       *items = json_array(), *nss = json_array(), *refused = json_object();
	const char *why = ds_status_report_attention(st);
	char *text;
	int rc;

	for (size_t i = 0; i < st->n_sources; i++) {
		const ds_ledger_source *s = &st->sources[i];
		json_t *so = json_pack(
		    "{ss ss sI sI sI sI sI sI}", "name", s->name, "cluster", s->cluster, "epoch",
		    (json_int_t)s->epoch, "committedSeq", (json_int_t)s->committed_seq,
		    "lastContact", (json_int_t)s->last_contact, "unapplied",
		    (json_int_t)s->unapplied, "lagSeconds", (json_int_t)lag_seconds(s), "objects",
		    (json_int_t)s->objects);
		json_object_set_new(so, "ledgerBytes", json_integer((json_int_t)s->ledger_bytes));
		json_object_set_new(so, "maxUnappliedRecords",
				    json_integer((json_int_t)s->max_unapplied));
		json_object_set_new(so, "maxLedgerBytes",
				    json_integer((json_int_t)s->max_ledger_bytes));
		json_object_set_new(so, "throttled", json_boolean(s->throttled != DS_QUOTA_NONE));
		json_object_set_new(so, "throttledBy",
				    s->throttled != DS_QUOTA_NONE
					? json_string(ds_quota_kind_name(s->throttled))
					: json_null());
		json_array_append_new(srcs, so);
	}
	for (int s = 1; s < DS_APPLY_STATE_MAX; s++)
		json_object_set_new(states, ds_apply_state_name((enum ds_apply_state)s),
				    json_integer((json_int_t)st->states[s]));
	for (size_t i = 0; i < st->n_items; i++) {
		const ds_ledger_item *it = &st->items[i];
		json_array_append_new(
		    items, json_pack("{ss ss ss ss ss ss}", "state", ds_apply_state_name(it->state),
				     "source", it->source, "kind", it->kind, "namespace", it->ns,
				     "name", it->name, "reason", it->reason));
		if (it->state == DS_APPLY_REFUSED) {
			json_t *per = json_object_get(refused, it->source);
			if (!per)
				json_object_set_new(refused, it->source, per = json_array());
			json_array_append_new(per, json_pack("{ss ss ss ss}", "kind", it->kind,
							     "namespace", it->ns, "name", it->name,
							     "reason", it->reason));
		}
	}
	for (size_t i = 0; i < st->n_namespaces; i++) {
		const ds_ledger_namespace *n = &st->namespaces[i];
		json_array_append_new(
		    nss, json_pack("{ss ss so ss sI sI}", "name", n->name, "mode", ns_mode(n, conf),
				   "since", n->recorded ? json_integer(n->since) : json_null(),
				   "changedBy", n->recorded ? n->changed_by : "config", "objects",
				   (json_int_t)n->objects, "held", (json_int_t)n->held));
	}
	json_object_set_new(o, "ledger", json_string(ledger));
	json_object_set_new(o, "ledgerBytes", json_integer((json_int_t)st->bytes));
	json_object_set_new(o, "ledgerRecords", json_integer((json_int_t)st->records));
	json_object_set_new(o, "ledgerId",
			    st->ledger_id[0] ? json_string(st->ledger_id) : json_null());
	json_object_set_new(o, "ledgerCreated",
			    st->ledger_created[0] ? json_string(st->ledger_created) : json_null());
	json_object_set_new(o, "mode", json_string(mode));
	json_object_set_new(o, "sources", srcs);
	json_object_set_new(o, "namespaces", nss);
	json_object_set_new(o, "objects", states);
	json_object_set_new(o, "needsLook", items);
	json_object_set_new(o, "moreNeedLook", json_integer((json_int_t)st->more_items));
	json_object_set_new(o, "refused", refused); /* per source: the needsLook entries refused */
	json_object_set_new(o, "verification", verification_json(st));
	json_object_set_new(o, "relocations", relocations_json(st));
	json_object_set_new(o, "healthy", json_boolean(!why));
	json_object_set_new(o, "attention", why ? json_string(why) : json_null());
	text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (text)
		fprintf(out, "%s\n", text);
	rc = text ? 0 : -ENOMEM;
	free(text);
	json_decref(o);
	return rc;
}
