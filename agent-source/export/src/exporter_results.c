#include "exporter_internal.h"

#include "drasync/buf.h"
#include "drasync/clock.h"
#include "drasync/change_queue.h"
#include "drasync/k8s_object.h"
#include "drasync/log.h"
#include "drasync/object_index.h"
#include "drasync/outbox.h"
#include "drasync/sanitize.h"
#include "drasync/selection.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- results ---------------------------------------------------------------------- */

/* One result, ex->rmu held: stored on the object; news logged once per object and reason. */
static int result_locked(ds_exporter *ex, uint64_t seq, enum ds_result_status status,
			 const char *message)
{
	ds_index_row row;
	bool changed = false;
	ds_err err = {0};
	char e1[700], e2[400];
	int rc;

	if (status > 0 && status < DS_RESULT_STATUS_MAX)
		ex->results[status]++;
	rc = ds_object_index_result(ex->ridx, seq, status, message, &row, &changed, &err);
	if (rc == 0 && changed && (status == DS_RESULT_FAILED || status == DS_RESULT_SKIPPED))
		ds_exporter_emit(
		    ex, DS_LOG_WARN,
		    status == DS_RESULT_FAILED ? "target_failed" : "target_skipped",
		    "object=%s seq=%llu reason=%s", ds_exporter_quote(row.key, e2, sizeof(e2)),
		    (unsigned long long)seq, ds_exporter_quote(message, e1, sizeof(e1)));
	else if (rc == 0 && changed && status == DS_RESULT_REFUSED)
		/* outside the target's grant: nothing was written there (SPEC §5) */
		ds_exporter_emit(ex, DS_LOG_WARN, "target_refused", "object=%s seq=%llu reason=%s",
				 ds_exporter_quote(row.key, e2, sizeof(e2)),
				 (unsigned long long)seq,
				 ds_exporter_quote(message, e1, sizeof(e1)));
	else if (rc == 0 && changed && status == DS_RESULT_WAITING)
		ds_exporter_emit(ex, DS_LOG_INFO, "target_waiting", "object=%s seq=%llu reason=%s",
				 ds_exporter_quote(row.key, e2, sizeof(e2)),
				 (unsigned long long)seq,
				 ds_exporter_quote(message, e1, sizeof(e1)));
	else if (rc == 0 && changed && (status == DS_RESULT_APPLIED || status == DS_RESULT_HELD))
		ds_exporter_emit(ex, DS_LOG_DEBUG,
				 status == DS_RESULT_APPLIED ? "target_applied" : "target_held",
				 "object=%s seq=%llu", ds_exporter_quote(row.key, e2, sizeof(e2)),
				 (unsigned long long)seq);
	else if (rc < 0 && rc != -ENOENT)
		ds_exporter_emit(ex, DS_LOG_ERROR, "result_not_recorded", "seq=%llu error=%s",
				 (unsigned long long)seq,
				 ds_exporter_quote(err.msg, e1, sizeof(e1)));
	return rc == -ENOENT ? 0 : rc;
}

void ds_exporter_on_results(void *ud, const ds_wire_result *v, size_t n)
{
	ds_exporter *ex = ud;
	ds_err err = {0};
	char e[400];
	bool batch;
	int rc = 0;

	pthread_mutex_lock(&ex->rmu);
	/* One transaction for the Ack's results: without it, each is a commit of
	 * its own (two per object, an fsync each), as when begin fails. */
	batch = n > 1 && ds_object_index_begin(ex->ridx, &err) == 0;
	if (n > 1 && !batch)
		ds_exporter_emit(ex, DS_LOG_WARN, "result_batch",
				 "error=%s detail=\"one result at a time\"",
				 ds_exporter_quote(err.msg, e, sizeof(e)));
	for (size_t i = 0; i < n && (rc == 0 || !batch); i++)
		rc = result_locked(ex, v[i].seq, v[i].status, v[i].message);
	if (batch) {
		if (rc == 0)
			rc = ds_object_index_commit(ex->ridx, &err);
		else
			ds_object_index_rollback(ex->ridx);
		if (rc < 0)
			ds_exporter_emit(
			    ex, DS_LOG_ERROR, "result_not_recorded", "results=%zu error=%s", n,
			    ds_exporter_quote(err.msg[0] ? err.msg : strerror(-rc), e, sizeof(e)));
	}
	pthread_mutex_unlock(&ex->rmu);
}

void ds_exporter_result_counts(ds_exporter *ex, uint64_t counts[DS_RESULT_STATUS_MAX])
{
	pthread_mutex_lock(&ex->rmu);
	memcpy(counts, ex->results, sizeof(ex->results));
	pthread_mutex_unlock(&ex->rmu);
}

uint64_t ds_exporter_last_seq(ds_exporter *ex)
{
	return atomic_load(&ex->last_seq);
}
