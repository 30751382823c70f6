/* What `drasync-source status` shows beyond the text: whether the source needs attention, and the
 * JSON. */
#include "drasync/source_status.h"

#include <string.h>

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
	json_object_set_new(o, "needsAttention", json_boolean(why != NULL));
	if (why)
		json_object_set_new(o, "attention", json_string(why));
	return o;
}
