/* What `drasync-source status` shows beyond the text: whether the source needs attention, and the
 * JSON. */
#include "drasync/source_status.h"

#include <string.h>
#include <time.h>

const char *ds_source_status_attention(const ds_source_status *v)
{
	uint64_t failed = 0, refused = 0;

	for (size_t i = 0; i < v->st->n_kinds; i++) {
		failed += v->st->kinds[i].failed;
		refused += v->st->kinds[i].refused;
	}
	if (failed > 0)
		return "the target failed objects";
	if (refused > 0)
		return "the target refused objects (outside what it grants this source)";
	if (v->st->last_pass_rc != 0)
		return "the last pass failed";
	if (!v->as)
		return "the agent never started here";
	/* A `once` run is meant to have ended; the others are meant to run, linked. */
	if (strcmp(v->as->schedule, "once") == 0)
		return v->st->backlog > 0 && !v->running ? "records the target has not acknowledged"
							 : NULL;
	if (!v->running)
		return "the agent is not running";
	if (!v->as->connected)
		return "the link to the target is down";
	return NULL;
}

/* The word status says of a relocation's state. */
static const char *relocation_word(enum ds_source_relocation_state s)
{
	return s == DS_SRC_RELOCATION_ACTIVE ? "relocated" : ds_source_relocation_state_name(s);
}

static json_t *relocations_json(const ds_source_status *v)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < v->n_relocations; i++) {
		const ds_source_relocation *r = &v->relocations[i];
		json_array_append_new(
		    a, json_pack("{ss ss ss sI sI sI ss}", "namespace", r->ns, "state",
				 relocation_word(r->state), "target", r->target, "seq",
				 (json_int_t)r->seq, "requestedAt", (json_int_t)r->requested_at,
				 "finishedAt", (json_int_t)r->finished_at, "message", r->message));
	}
	return a;
}

static const char *utc(int64_t t, char *buf, size_t size)
{
	struct tm tm;
	time_t tt = (time_t)t;

	if (t <= 0)
		return "-";
	gmtime_r(&tt, &tm);
	strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return buf;
}

void ds_source_status_print_relocations(FILE *out, const ds_source_status *v)
{
	char t1[40], t2[40];

	if (!v->n_relocations)
		return;
	fprintf(out, "\nrelocations:\n");
	for (size_t i = 0; i < v->n_relocations; i++) {
		const ds_source_relocation *r = &v->relocations[i];

		if (r->state == DS_SRC_RELOCATION_ACTIVE)
			fprintf(out, "  %s: relocated to %s at %s (not exported any more): %s\n",
				r->ns, r->target, utc(r->finished_at, t1, sizeof(t1)), r->message);
		else
			fprintf(out, "  %s: %s (to %s, asked at %s%s%s)%s%s\n", r->ns,
				relocation_word(r->state), r->target,
				utc(r->requested_at, t1, sizeof(t1)),
				r->finished_at ? ", ended at " : "",
				r->finished_at ? utc(r->finished_at, t2, sizeof(t2)) : "",
				r->message[0] ? ": " : "", r->message);
	}
}

int ds_source_status_read_relocations(const char *state_dir, ds_source_relocation *out, size_t max,
				      ds_err *err)
{
	ds_store *db = NULL;
	int rc = ds_source_relocation_open(&db, state_dir, err);

	if (rc < 0)
		return rc;
	rc = ds_source_relocation_list(db, out, max, err);
	ds_store_free(db);
	return rc;
}

json_t *ds_source_status_json(const ds_source_status *v)
{
	const ds_export_status *st = v->st;
	const char *why = ds_source_status_attention(v);
	json_t *o = json_object(), *kinds = json_array(), *fails = json_array(), *link;

	for (size_t i = 0; i < st->n_kinds; i++) {
		const ds_index_kind_count *k = &st->kinds[i];

		json_array_append_new(
		    kinds, json_pack("{ss sI sI sI sI sI sI sI sI sI}", "kind", k->kind, "objects",
				     (json_int_t)k->objects, "ok", (json_int_t)k->ok, "applied",
				     (json_int_t)k->applied, "waiting", (json_int_t)k->waiting,
				     "held", (json_int_t)k->held, "failed", (json_int_t)k->failed,
				     "refused", (json_int_t)k->refused, "skipped",
				     (json_int_t)k->skipped, "awaiting", (json_int_t)k->awaiting));
	}
	for (size_t i = 0; i < st->n_failures; i++) {
		const ds_export_failure *f = &st->failures[i];

		json_array_append_new(
		    fails, json_pack("{ss ss ss ss ss sI ss}", "key", f->key, "status",
				     ds_result_status_name((enum ds_result_status)f->status),
				     "kind", f->kind, "namespace", f->ns, "name", f->name, "seq",
				     (json_int_t)f->seq, "message", f->message));
	}
	link = json_pack("{sb sb}", "running", v->running, "connected",
			 v->running && v->as && v->as->connected);
	if (v->as) {
		json_object_set_new(link, "pid", json_integer((json_int_t)v->as->pid));
		json_object_set_new(link, "endpoint", json_string(v->as->endpoint));
		json_object_set_new(link, "schedule", json_string(v->as->schedule));
		json_object_set_new(link, "sinceMs", json_integer((json_int_t)v->as->since_ms));
		json_object_set_new(link, "lastEvent", json_string(v->as->last_event));
		json_object_set_new(link, "lastDetail", json_string(v->as->last_detail));
		json_object_set_new(link, "nextPassMs",
				    json_integer((json_int_t)v->as->next_pass_ms));
		json_object_set_new(link, "bandwidth", json_integer((json_int_t)v->as->bandwidth));
		json_object_set_new(link, "proxy", json_string(v->as->proxy));
		json_object_set_new(
		    link, "wire",
		    json_pack(
			"{sI sI sI sI sI sI sb sf}", "sentBytes", (json_int_t)v->as->wire.sent,
			"receivedBytes", (json_int_t)v->as->wire.received, "jsonBytes",
			(json_int_t)v->as->wire.json, "sessionSentBytes",
			(json_int_t)v->as->wire.session_sent, "sessionReceivedBytes",
			(json_int_t)v->as->wire.session_received, "sessionJsonBytes",
			(json_int_t)v->as->wire.session_json, "zbatch", v->as->wire.zbatch, "ratio",
			ds_link_figures_ratio(v->as->wire.sent, v->as->wire.received,
					      v->as->wire.json)));
	}
	json_object_set_new(o, "agent", link);
	json_object_set_new(o, "epoch", json_integer((json_int_t)st->epoch));
	json_object_set_new(o, "pushedSeq", json_integer((json_int_t)st->outbox.last_seq));
	json_object_set_new(o, "ackedSeq", json_integer((json_int_t)st->outbox.acked_seq));
	json_object_set_new(o, "backlog", json_integer((json_int_t)st->backlog));
	json_object_set_new(o, "snapshotDone", json_boolean(st->snapshot_done));
	json_object_set_new(o, "lastPass",
			    json_pack("{sI sI si sI sI sI sI sI}", "startedMs",
				      (json_int_t)st->last_pass_started_ms, "finishedMs",
				      (json_int_t)st->last_pass_finished_ms, "rc", st->last_pass_rc,
				      "listed", (json_int_t)st->last_pass.listed, "pushed",
				      (json_int_t)st->last_pass.pushed, "unchanged",
				      (json_int_t)st->last_pass.unchanged, "skipped",
				      (json_int_t)st->last_pass.skipped, "tombstoned",
				      (json_int_t)st->last_pass.tombstoned));
	json_object_set_new(o, "kinds", kinds);
	json_object_set_new(o, "failures", fails);
	json_object_set_new(o, "moreFailures", json_integer((json_int_t)st->more_failures));
	json_object_set_new(o, "relocations", relocations_json(v));
	json_object_set_new(o, "needsAttention", json_boolean(why != NULL));
	if (why)
		json_object_set_new(o, "attention", json_string(why));
	return o;
}
