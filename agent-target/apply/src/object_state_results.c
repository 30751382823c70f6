/*
 * The applier's results: a row's outcome recorded (ds_object_state_set), the
 * decisions queued for the sources and read back for the link (SPEC §6: apply
 * results in later Acks), and the receiver's feedback that reads them.
 */

#include "object_state_internal.h"

#include "drasync/apply_feedback.h"
#include "drasync/buf.h"
#include "drasync/clock.h"
#include "drasync/log.h"
#include "drasync/store_sum.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

/* What the source hears of a state (SPEC §6: apply results in later Acks); 0: nothing. */
static int result_status(enum ds_apply_state s)
{
	switch (s) {
	case DS_APPLY_APPLIED:
	case DS_APPLY_DELETED:
		return DS_RESULT_APPLIED;
	case DS_APPLY_WAITING:
		return DS_RESULT_WAITING;
	case DS_APPLY_HELD:
		return DS_RESULT_HELD;
	case DS_APPLY_FAILED:
		return DS_RESULT_FAILED;
	case DS_APPLY_REFUSED:
		return DS_RESULT_REFUSED;
	case DS_APPLY_SKIPPED:
	case DS_APPLY_KEPT:
		return DS_RESULT_SKIPPED;
	default:
		return 0; /* pending: the source hears when it is decided */
	}
}

/* Queue the apply result of records.id record_id for its source's next Ack. */
int ds_object_state_queue_result(ds_object_state *st, int64_t record_id, enum ds_apply_state s,
				 const char *reason, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	int status = result_status(s);
	char source[256];
	int64_t epoch = 0, seq = 0;
	int rc;

	if (!status)
		return 0;
	rc = ds_ledger_record_origin(st->records, record_id, source, sizeof(source), &epoch, &seq,
				     err);
	if (rc <= 0)
		return rc; /* 0: the record is gone, so is whom to tell */
	rc = ds_object_state_keep(st, OS_STMT_QUEUE_RESULT,
				  "INSERT INTO apply_results(source, epoch, seq, status, message)"
				  " VALUES(?, ?, ?, ?, ?)",
				  &q, err);
	if (rc < 0)
		return rc;
	sqlite3_bind_text(q, 1, source, -1, SQLITE_STATIC);
	sqlite3_bind_int64(q, 2, epoch);
	sqlite3_bind_int64(q, 3, seq);
	sqlite3_bind_int(q, 4, status);
	ds_object_state_bind_text(q, 5, reason);
	rc = sqlite3_step(q);
	rc = rc == SQLITE_DONE ? 0 : ds_store_fail(st->store, rc, "apply result", err);
	ds_object_state_unkeep(0, q);
	return rc;
}

int ds_object_state_set(ds_object_state *st, int64_t id, int64_t record_id,
			const ds_object_state_result *res, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	bool news = false, own_txn = sqlite3_get_autocommit(st->db) != 0;
	int rc, k = 0;

	/* Inside ds_object_state_begin()'s transaction when the caller records a group. */
	rc = own_txn ? ds_store_exec(st->store, "BEGIN IMMEDIATE", err) : 0;
	if (rc < 0)
		return ds_err_fallback(err, rc);
	if (res->applied_hash) {
		/* What is on the target is a fact whatever arrived meanwhile. */
		rc = k = ds_object_state_keep(
		    st, OS_STMT_APPLIED,
		    "UPDATE object_state SET applied_hash = ?, applied_record_id = ?,"
		    " target_api_version = ?, target_namespace = ?, target_name = ?"
		    " WHERE id = ?",
		    &q, err);
		if (rc < 0)
			goto out;
		sqlite3_bind_blob(q, 1, res->applied_hash, DS_HASH_LEN, SQLITE_TRANSIENT);
		sqlite3_bind_int64(q, 2, record_id);
		ds_object_state_bind_text(q, 3, res->target_api_version);
		ds_object_state_bind_text(q, 4, res->target_ns);
		ds_object_state_bind_text(q, 5, res->target_name);
		sqlite3_bind_int64(q, 6, id);
		rc = sqlite3_step(q);
		rc = rc == SQLITE_DONE ? 0
				       : ds_store_fail(st->store, rc, "object_state applied", err);
		ds_object_state_unkeep(k, q);
		q = NULL;
		if (rc < 0)
			goto out;
	} else if (res->on_target && res->target_name) {
		/* On the target but not as desired (it dropped fields): where, without a hash. */
		rc = k = ds_object_state_keep(
		    st, OS_STMT_TARGET,
		    "UPDATE object_state SET target_api_version = ?, target_namespace = ?,"
		    " target_name = ? WHERE id = ?",
		    &q, err);
		if (rc < 0)
			goto out;
		ds_object_state_bind_text(q, 1, res->target_api_version);
		ds_object_state_bind_text(q, 2, res->target_ns);
		ds_object_state_bind_text(q, 3, res->target_name);
		sqlite3_bind_int64(q, 4, id);
		rc = sqlite3_step(q);
		rc = rc == SQLITE_DONE ? 0
				       : ds_store_fail(st->store, rc, "object_state target", err);
		ds_object_state_unkeep(k, q);
		q = NULL;
		if (rc < 0)
			goto out;
	} else if (res->forget_applied) {
		rc = k = ds_object_state_keep(
		    st, OS_STMT_FORGET,
		    "UPDATE object_state SET applied_hash = NULL,"
		    " applied_record_id = NULL, target_api_version = NULL,"
		    " target_namespace = NULL, target_name = NULL WHERE id = ?",
		    &q, err);
		if (rc < 0)
			goto out;
		sqlite3_bind_int64(q, 1, id);
		rc = sqlite3_step(q);
		rc = rc == SQLITE_DONE ? 0
				       : ds_store_fail(st->store, rc, "object_state forget", err);
		ds_object_state_unkeep(k, q);
		q = NULL;
		if (rc < 0)
			goto out;
	}
	/* The source hears of a decision once: a workload that goes on waiting for
	 * the same objects is not news. */
	rc = k = ds_object_state_keep(
	    st, OS_STMT_READ,
	    "SELECT state, reason FROM object_state WHERE id = ? AND record_id = ?", &q, err);
	if (rc < 0)
		goto out;
	sqlite3_bind_int64(q, 1, id);
	sqlite3_bind_int64(q, 2, record_id);
	rc = sqlite3_step(q);
	if (rc == SQLITE_ROW) {
		const char *was = (const char *)sqlite3_column_text(q, 0);
		const char *why = (const char *)sqlite3_column_text(q, 1);
		news = ds_apply_state_from_string(was) != (int)res->state ||
		       strcmp(why ? why : "", res->reason ? res->reason : "") != 0;
		rc = 0;
	} else {
		rc = rc == SQLITE_DONE ? 0 : ds_store_fail(st->store, rc, "object_state read", err);
	}
	ds_object_state_unkeep(k, q);
	q = NULL;
	if (rc == 0 && news)
		rc = ds_object_state_queue_result(st, record_id, res->state, res->reason, err);
	if (rc < 0)
		goto out;
	rc = k = ds_object_state_keep(
	    st, OS_STMT_RESULT,
	    "UPDATE object_state SET state = ?, reason = ?, attempts = ?, next_try_at = ?,"
	    " updated_at = ? WHERE id = ? AND record_id = ?",
	    &q, err);
	if (rc < 0)
		goto out;
	ds_object_state_bind_text(q, 1, ds_apply_state_name(res->state));
	ds_object_state_bind_text(q, 2, res->reason);
	sqlite3_bind_int(q, 3, res->attempts);
	sqlite3_bind_int64(q, 4, res->next_try_at);
	sqlite3_bind_int64(q, 5, (ds_clock_wall_ms() / 1000));
	sqlite3_bind_int64(q, 6, id);
	sqlite3_bind_int64(q, 7, record_id);
	rc = sqlite3_step(q);
	rc = rc == SQLITE_DONE ? 0 : ds_store_fail(st->store, rc, "object_state result", err);
out:
	if (q)
		ds_object_state_unkeep(k, q);
	if (!own_txn)
		return ds_err_fallback(err, rc); /* the group's commit or rollback decides */
	if (rc < 0) {
		ds_store_exec(st->store, "ROLLBACK", NULL);
		return ds_err_fallback(err, rc);
	}
	rc = ds_store_exec(st->store, "COMMIT", err);
	if (rc < 0)
		ds_store_exec(st->store, "ROLLBACK", NULL);
	return ds_err_fallback(err, rc);
}

/* ---- apply results for the link ------------------------------------------------- */

int ds_object_state_results(ds_object_state *st, const char *source, uint64_t epoch,
			    ds_wire_result *out, size_t max, size_t *n, int64_t *token, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	size_t len = 0, used = 0, *offs = NULL;
	int rc;

	*n = 0;
	*token = 0;
	offs = calloc(max ? max : 1, sizeof(*offs));
	if (!offs)
		return ds_err_fallback(err, -ENOMEM);
	rc = ds_store_prepare(st->store,
			      "SELECT id, seq, status, coalesce(message, '') FROM apply_results"
			      " WHERE source = ? AND epoch = ? ORDER BY id LIMIT ?",
			      &q, err);
	if (rc < 0)
		goto out;
	ds_object_state_bind_text(q, 1, source);
	sqlite3_bind_int64(q, 2, (sqlite3_int64)epoch);
	sqlite3_bind_int64(q, 3, (sqlite3_int64)max);
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		const char *m = (const char *)sqlite3_column_text(q, 3);
		size_t mlen = strlen(m ? m : "") + 1;
		int status = sqlite3_column_int(q, 2);

		*token = sqlite3_column_int64(q, 0);
		if (status <= 0 || status >= DS_RESULT_STATUS_MAX)
			continue;
		if (ds_grow((void **)&st->messages, &st->messages_cap, used + mlen, 1) < 0) {
			rc = -ENOMEM;
			goto out;
		}
		memcpy(st->messages + used, m ? m : "", mlen);
		offs[len] = used;
		used += mlen;
		out[len].seq = (uint64_t)sqlite3_column_int64(q, 1);
		out[len].status = (enum ds_result_status)status;
		len++;
	}
	rc = rc == SQLITE_DONE ? 0 : ds_store_fail(st->store, rc, "apply results", err);
	/* The arena may have moved while it grew: point into it only now. */
	for (size_t i = 0; rc == 0 && i < len; i++)
		out[i].message = st->messages + offs[i];
	if (rc == 0)
		*n = len;
out:
	sqlite3_finalize(q);
	free(offs);
	return ds_err_fallback(err, rc);
}

int ds_object_state_results_sent(ds_object_state *st, const char *source, uint64_t epoch,
				 int64_t token, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	int rc = ds_store_prepare(
	    st->store, "DELETE FROM apply_results WHERE source = ? AND (id <= ? OR epoch != ?)", &q,
	    err);

	if (rc == 0) {
		ds_object_state_bind_text(q, 1, source);
		sqlite3_bind_int64(q, 2, token);
		sqlite3_bind_int64(q, 3, (sqlite3_int64)epoch);
		rc = sqlite3_step(q);
		rc =
		    rc == SQLITE_DONE ? 0 : ds_store_fail(st->store, rc, "apply results sent", err);
	}
	sqlite3_finalize(q);
	return ds_err_fallback(err, rc);
}

int ds_object_state_unapplied(ds_object_state *st, uint64_t *n, ds_err *err)
{
	sqlite3_stmt *q = NULL;
	uint64_t records = 0;
	int64_t cursor = 0;
	int rc;

	*n = 0;
	rc = ds_store_prepare(st->store,
			      "SELECT (SELECT count(*) FROM object_state WHERE state = 'pending'),"
			      " (SELECT record_id FROM apply_cursor WHERE id = 1)",
			      &q, err);
	if (rc == 0) {
		rc = sqlite3_step(q);
		if (rc == SQLITE_ROW) {
			*n = (uint64_t)sqlite3_column_int64(q, 0);
			cursor = sqlite3_column_int64(q, 1);
			rc = 0;
		} else {
			rc = ds_store_fail(st->store, rc, "unapplied count", err);
		}
	}
	sqlite3_finalize(q);
	if (rc == 0)
		rc = ds_ledger_records_backlog(st->records, cursor, NULL, &records, NULL, err);
	if (rc == 0)
		*n += records;
	return ds_err_fallback(err, rc);
}

int ds_object_state_unapplied_each(ds_object_state *st,
				   int (*fn)(void *ud, const char *source, uint64_t n), void *ud,
				   ds_err *err)
{
	sqlite3_stmt *q = NULL;
	int64_t cursor = 0;
	int rc;

	rc =
	    ds_store_prepare(st->store, "SELECT record_id FROM apply_cursor WHERE id = 1", &q, err);
	if (rc == 0 && sqlite3_step(q) == SQLITE_ROW)
		cursor = sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	q = NULL;
	if (rc == 0)
		rc = ds_ledger_records_backlog_each(st->records, cursor, fn, ud, err);
	if (rc >= 0)
		rc = ds_store_prepare(
		    st->store, "SELECT source FROM object_state WHERE state = 'pending'", &q, err);
	/* The pending objects add to what the records said: fn is told a second time. */
	if (rc >= 0)
		rc = ds_store_sum_by_source(q, fn, ud);
	if (rc == SQLITE_DONE)
		rc = 0;
	else if (rc > 0)
		rc = ds_store_fail(st->store, rc, "unapplied per source", err);
	sqlite3_finalize(q);
	return ds_err_fallback(err, rc);
}

/* ---- the receiver's feedback (apply_feedback.h) --------------------------------- */

struct ds_apply_feedback {
	ds_object_state *st;
};

int ds_apply_feedback_open(ds_apply_feedback **out, const char *ledger_path, ds_err *err)
{
	ds_apply_feedback *fb = calloc(1, sizeof(*fb));
	int rc;

	if (!fb)
		return ds_err_fallback(err, -ENOMEM);
	rc = ds_object_state_open(&fb->st, ledger_path, err);
	if (rc < 0) {
		free(fb);
		return rc;
	}
	*out = fb;
	return 0;
}

void ds_apply_feedback_free(ds_apply_feedback *fb)
{
	if (!fb)
		return;
	ds_object_state_free(fb->st);
	free(fb);
}

/* A ledger that cannot be read costs the sources their results for now, not the session. */
static void ledger_trouble(const char *what, const ds_err *err)
{
	char q[600];

	ds_log(DS_LOG_WARN, "feedback_error", "what=%s error=%s", what,
	       ds_log_quote(err->msg, q, sizeof(q)));
}

static int results(void *ud, const char *source, uint64_t epoch, ds_wire_result *out, size_t max,
		   size_t *n, int64_t *token)
{
	ds_apply_feedback *fb = ud;
	ds_err err = {0};
	int rc = ds_object_state_results(fb->st, source, epoch, out, max, n, token, &err);

	if (rc < 0)
		ledger_trouble("apply results", &err);
	return rc;
}

static void sent(void *ud, const char *source, uint64_t epoch, int64_t token)
{
	ds_apply_feedback *fb = ud;
	ds_err err = {0};

	if (ds_object_state_results_sent(fb->st, source, epoch, token, &err) < 0)
		ledger_trouble("apply results sent", &err);
}

static int unapplied_each(void *ud, int (*fn)(void *fnud, const char *source, uint64_t n),
			  void *fnud)
{
	ds_apply_feedback *fb = ud;
	ds_err err = {0};
	int rc = ds_object_state_unapplied_each(fb->st, fn, fnud, &err);

	if (rc < 0)
		ledger_trouble("unapplied count", &err);
	return rc;
}

void ds_apply_feedback_bind(ds_apply_feedback *fb, ds_receiver_feedback *out)
{
	out->results = results;
	out->sent = sent;
	out->unapplied_each = unapplied_each;
	out->ud = fb;
}

int ds_object_state_reconsider_key(ds_object_state *st, const char *source, const char *key,
				   ds_err *err)
{
	sqlite3_stmt *q = NULL;
	int rc = ds_store_prepare(
	    st->store,
	    "UPDATE object_state SET state = 'pending', attempts = 0, next_try_at = 0"
	    " WHERE source = ? AND key = ? AND op = 1 AND state IN ('applied', 'waiting',"
	    " 'failed', 'held', 'skipped', 'refused')",
	    &q, err);

	if (rc < 0)
		return ds_err_fallback(err, rc);
	sqlite3_bind_text(q, 1, source, -1, SQLITE_STATIC);
	sqlite3_bind_text(q, 2, key, -1, SQLITE_STATIC);
	rc = sqlite3_step(q);
	rc = rc == SQLITE_DONE ? sqlite3_changes(st->db)
			       : ds_store_fail(st->store, rc, "object_state reconsider", err);
	sqlite3_finalize(q);
	return ds_err_fallback(err, rc);
}
