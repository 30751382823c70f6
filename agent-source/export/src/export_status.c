#include "drasync/export_status.h"

#include "drasync/buf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct collect {
	ds_export_status *st;
	size_t max, cap;
	int rc;
};

static int add_failure(void *ud, const ds_index_row *row)
{
	struct collect *c = ud;
	ds_export_status *st = c->st;
	ds_export_failure *f;

	if (st->n_failures >= c->max) {
		st->more_failures++;
		return 0;
	}
	if (ds_grow((void **)&st->failures, &c->cap, st->n_failures + 1, sizeof(*st->failures)) <
	    0) {
		c->rc = -ENOMEM;
		return 1;
	}
	f = &st->failures[st->n_failures++];
	memset(f, 0, sizeof(*f));
	snprintf(f->key, sizeof(f->key), "%s", row->key);
	snprintf(f->kind, sizeof(f->kind), "%s", row->kind);
	snprintf(f->ns, sizeof(f->ns), "%s", row->ns);
	snprintf(f->name, sizeof(f->name), "%s", row->name);
	snprintf(f->message, sizeof(f->message), "%s", row->result_message);
	f->status = row->result_status;
	f->seq = row->seq;
	return 0;
}

static int64_t meta(ds_object_index *idx, const char *key)
{
	int64_t v = 0;
	ds_err err = {0};

	return ds_object_index_meta_get(idx, key, &v, &err) == 0 ? v : 0;
}

int ds_export_status_read(const char *state_dir, size_t max_failures, ds_export_status **out,
			  ds_err *err)
{
	ds_export_status *st = NULL;
	ds_object_index *idx = NULL;
	ds_outbox *ob = NULL;
	struct collect c = {0};
	char path[1024];
	struct stat sb;
	int rc;

	rc = ds_export_db_path(state_dir, path, sizeof(path));
	if (rc < 0) {
		ds_err_set(err, "state directory path too long");
		return rc;
	}
	if (stat(path, &sb) < 0) {
		rc = -errno;
		ds_err_set(err, "%s: %s (has the agent run yet?)", path, strerror(errno));
		return rc;
	}
	st = calloc(1, sizeof(*st));
	if (!st)
		return ds_err_fallback(err, -ENOMEM);
	rc = ds_outbox_open(&ob, path, NULL, err);
	if (rc == 0)
		rc = ds_object_index_open(&idx, path, err);
	if (rc == 0)
		rc = ds_outbox_state_get(ob, &st->outbox, err);
	if (rc < 0)
		goto out;
	st->backlog = st->outbox.last_seq - st->outbox.acked_seq;
	st->epoch = ds_outbox_epoch(ob);
	st->last_pass_started_ms = meta(idx, "last_pass_started_ms");
	st->last_pass_finished_ms = meta(idx, "last_pass_finished_ms");
	st->last_pass_rc = (int)meta(idx, "last_pass_rc");
	st->last_pass.listed = (uint64_t)meta(idx, "last_pass_listed");
	st->last_pass.pushed = (uint64_t)meta(idx, "last_pass_pushed");
	st->last_pass.unchanged = (uint64_t)meta(idx, "last_pass_unchanged");
	st->last_pass.skipped = (uint64_t)meta(idx, "last_pass_skipped");
	st->last_pass.tombstoned = (uint64_t)meta(idx, "last_pass_tombstoned");
	rc = ds_object_index_snapshot_done(idx, &st->snapshot_done, err);
	if (rc == 0)
		rc = ds_object_index_kind_counts(idx, &st->kinds, &st->n_kinds, err);
	c.st = st;
	c.max = max_failures;
	if (rc == 0)
		rc = ds_object_index_with_result(idx, DS_RESULT_FAILED, add_failure, &c, err);
	if (rc == 0)
		rc = ds_object_index_with_result(idx, DS_RESULT_REFUSED, add_failure, &c, err);
	if (rc == 0)
		rc = ds_object_index_with_result(idx, DS_RESULT_WAITING, add_failure, &c, err);
	if (rc == 0)
		rc = ds_object_index_with_result(idx, DS_RESULT_SKIPPED, add_failure, &c, err);
	if (rc > 0 || c.rc < 0)
		rc = c.rc < 0 ? c.rc : -EIO;
out:
	ds_object_index_free(idx);
	ds_outbox_free(ob);
	if (rc < 0) {
		ds_export_status_free(st);
		return ds_err_fallback(err, rc);
	}
	*out = st;
	return 0;
}

void ds_export_status_free(ds_export_status *st)
{
	if (!st)
		return;
	free(st->kinds);
	free(st->failures);
	free(st);
}
