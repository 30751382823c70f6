#include "exporter_internal.h"

#include "drasync/buf.h"
#include "drasync/change_queue.h"
#include "drasync/clock.h"
#include "drasync/json_limits.h"
#include "drasync/k8s_object.h"
#include "drasync/log.h"
#include "drasync/object_index.h"
#include "drasync/outbox.h"
#include "drasync/sanitize.h"
#include "drasync/selection.h"
#include "drasync/source_relocation.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- skips: logged once per object and reason ------------------------------ */

static uint64_t fnv(const char *s, uint64_t h)
{
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

/* true when this (key, reason) was not noted before */
static bool skip_note(ds_exporter *ex, const char *key, const char *why)
{
	uint64_t h = fnv(why, fnv("\n", fnv(key, 1469598103934665603ull)));
	size_t i;

	if (h == 0)
		h = 1;
	if (ex->nskips * 2 >= ex->skipcap) {
		/* Bounded: past a million remembered skips start over (some are logged again). */
		size_t ncap = ex->skipcap ? ex->skipcap * 2 : 1024;
		uint64_t *n;

		if (ncap > (1u << 21))
			ncap = 1u << 21;
		n = calloc(ncap, sizeof(*n));
		if (!n)
			return true;
		if (ncap > ex->skipcap)
			for (size_t k = 0; k < ex->skipcap; k++) {
				uint64_t v = ex->skips[k];
				if (!v)
					continue;
				for (i = v % ncap; n[i]; i = (i + 1) % ncap)
					;
				n[i] = v;
			}
		else
			ex->nskips = 0;
		free(ex->skips);
		ex->skips = n;
		ex->skipcap = ncap;
	}
	for (i = h % ex->skipcap; ex->skips[i]; i = (i + 1) % ex->skipcap)
		if (ex->skips[i] == h)
			return false;
	ex->skips[i] = h;
	ex->nskips++;
	return true;
}

/* ---- the batch ----------------------------------------------------------------- */

static const char *own(struct batch *b, const char *s)
{
	char *d;

	if (!s)
		return NULL;
	if (ds_grow((void **)&b->owned, &b->owncap, b->nown + 1, sizeof(*b->owned)) < 0)
		return NULL;
	d = strdup(s);
	if (d)
		b->owned[b->nown++] = d;
	return d;
}

static char *own_take(struct batch *b, char *s)
{
	if (!s || ds_grow((void **)&b->owned, &b->owncap, b->nown + 1, sizeof(*b->owned)) < 0) {
		free(s);
		return NULL;
	}
	b->owned[b->nown++] = s;
	return s;
}

ds_record *ds_exporter_add_record(struct batch *b)
{
	ds_record *r;

	if (ds_grow((void **)&b->recs, &b->cap, b->n + 1, sizeof(*b->recs)) < 0)
		return NULL;
	r = &b->recs[b->n++];
	memset(r, 0, sizeof(*r));
	return r;
}

void ds_exporter_batch_reset(struct batch *b)
{
	for (size_t i = 0; i < b->nown; i++)
		free(b->owned[i]);
	b->nown = 0;
	b->n = 0;
	b->nmarks = 0;
}

void ds_exporter_batch_dispose(struct batch *b)
{
	ds_exporter_batch_reset(b);
	free(b->owned);
	free(b->recs);
	free(b->marks);
	memset(b, 0, sizeof(*b));
}

/*
 * Drop the records of namespaces being relocated (source_relocation.h): from
 * the intent on, nothing of them is exported, the parked form least of all.
 * The index keeps what it had, so nothing is tombstoned for them either.
 */
static int drop_relocated(ds_exporter *ex, struct batch *b, ds_err *err)
{
	char **ex_ns = NULL;
	size_t n_ns = 0, k = 0, dropped = 0;
	int rc = ds_source_relocation_excluded(ex->reloc, &ex_ns, &n_ns, err);

	if (rc < 0 || n_ns == 0)
		return rc;
	for (size_t i = 0; i < b->n; i++) {
		const char *ns = b->recs[i].ns;
		bool final_pass =
		    ex->cfg.relocating_ns && ns && strcmp(ex->cfg.relocating_ns, ns) == 0;

		if (!final_pass &&
		    !ds_source_relocation_exports((const char *const *)ex_ns, n_ns, ns)) {
			dropped++;
			continue;
		}
		b->recs[k++] = b->recs[i];
	}
	b->n = k;
	if (dropped)
		ds_exporter_emit(ex, DS_LOG_DEBUG, "relocated_not_exported",
				 "records=%zu namespaces=%zu", dropped, n_ns);
	for (size_t i = 0; i < n_ns; i++)
		free(ex_ns[i]);
	free(ex_ns);
	return 0;
}

/* The push guard (object_index.h): decided in the push's transaction. */
static int guard(void *ud, struct sqlite3 *db, const ds_record *pushed, size_t n, ds_err *err)
{
	const ds_exporter *ex = ud;

	return ds_source_relocation_check_push(db, pushed, n, ex->cfg.relocating_ns, err);
}

void ds_exporter_batch_guard(ds_exporter *ex)
{
	ds_object_index_set_guard(ex->idx, guard, ex);
}

/* After a push of n records: the last seq published, or the failure reported. */
static void pushed(ds_exporter *ex, int rc, uint64_t last, size_t n, const ds_err *err)
{
	if (rc == 0 && n) {
		atomic_store(&ex->last_seq, last);
		if (ex->cfg.on_pushed)
			ex->cfg.on_pushed(ex->cfg.pushed_ud, last);
	} else if (rc < 0) {
		char e[300];

		ex->local_failed = true;
		ds_exporter_emit(ex, DS_LOG_ERROR, "outbox_failed", "records=%zu error=%s", n,
				 ds_exporter_quote(err ? err->msg : strerror(-rc), e, sizeof(e)));
	}
}

int ds_exporter_flush(ds_exporter *ex, ds_err *err)
{
	struct batch *b = &ex->b;
	uint64_t last = 0;
	int rc = 0;

	if (b->n)
		rc = drop_relocated(ex, b, err);
	if (rc == 0 && b->nmarks)
		rc = ds_object_index_mark(ex->idx, b->marks, b->nmarks, err);
	/* A relocation's intent committed since drop_relocated() read them: the
	 * guard refused the push, read again (a relocation begins once). */
	for (int tries = 0; rc == 0 && b->n; tries++) {
		rc = ds_object_index_push(ex->idx, ex->ob, b->recs, b->n, &last, err);
		if (rc == -ESTALE && tries < 3) {
			char d[600];

			ds_exporter_emit(ex, DS_LOG_INFO, "relocation_began",
					 "records=%zu detail=%s", b->n,
					 ds_exporter_quote(err ? err->msg : "", d, sizeof(d)));
			if (err)
				err->msg[0] = '\0';
			rc = drop_relocated(ex, b, err);
			continue;
		}
		break;
	}
	pushed(ex, rc, last, b->n, err);
	ds_exporter_batch_reset(b);
	return rc;
}

/* ---- the snapshot's end ------------------------------------------------------------ */

/* The manifest's records, one page of the index each, for ds_object_index_push_each(). */
struct manifest_parts {
	ds_object_index *idx;
	const char *id;
	size_t part, k, i;
	char after[DS_OBJECT_KEY_MAX];
	ds_index_manifest page;
	ds_record rec;
};

static int next_part(void *ud, const ds_record **recs, size_t *n, ds_err *err)
{
	struct manifest_parts *p = ud;
	int rc;

	ds_index_manifest_dispose(&p->page);
	*n = 0;
	if (p->i == p->k)
		return 0;
	rc = ds_object_index_manifest_page(p->idx, p->i ? p->after : NULL, p->part, &p->page, err);
	if (rc < 0)
		return rc;
	if (p->page.n)
		snprintf(p->after, sizeof(p->after), "%s", p->page.entries[p->page.n - 1].key);
	memset(&p->rec, 0, sizeof(p->rec));
	p->rec.op = p->i + 1 < p->k ? DS_RECORD_SNAPSHOT_PART : DS_RECORD_SNAPSHOT_END;
	p->rec.snapshot_id = p->id;
	p->rec.parts_left = (uint32_t)(p->k - 1 - p->i);
	p->rec.manifest = p->page.entries;
	p->rec.manifest_len = p->page.n;
	p->i++;
	*recs = &p->rec;
	*n = 1;
	return 0;
}

int ds_exporter_push_snapshot_end(ds_exporter *ex, const char *id, size_t *objects, size_t *records,
				  ds_err *err)
{
	struct manifest_parts p;
	uint64_t last = 0;
	size_t n = 0;
	int rc = ds_exporter_flush(ex, err);

	if (rc < 0)
		return rc;
	memset(&p, 0, sizeof(p));
	p.idx = ex->idx;
	p.id = id;
	p.part = ex->cfg.manifest_part_entries;
	rc = ds_object_index_manifest_count(ex->idx, &n, err);
	if (rc == 0) {
		p.k = n > p.part ? (n + p.part - 1) / p.part : 1;
		if (p.k >= DS_MANIFEST_MAX_PARTS) {
			ds_err_set(err,
				   "a manifest of %zu objects needs %zu parts of %zu: more than %u",
				   n, p.k, p.part, DS_MANIFEST_MAX_PARTS - 1);
			rc = -E2BIG;
		}
	}
	if (rc == 0)
		rc = ds_object_index_push_each(ex->idx, ex->ob, next_part, &p, &last, err);
	ds_index_manifest_dispose(&p.page);
	pushed(ex, rc, last, p.k, err);
	*objects = n;
	*records = p.k;
	return rc;
}

int ds_exporter_maybe_flush(ds_exporter *ex, ds_err *err)
{
	if (ex->b.n + ex->b.nmarks >= ex->cfg.batch_records)
		return ds_exporter_flush(ex, err);
	return 0;
}

int ds_exporter_add_tombstone(ds_exporter *ex, const ds_index_row *row)
{
	struct batch *b = &ex->b;
	ds_record *r = ds_exporter_add_record(b);

	if (!r)
		return -ENOMEM;
	r->op = DS_RECORD_DELETE;
	r->api_version = own(b, row->api_version);
	r->kind = own(b, row->kind);
	r->ns = own(b, row->ns);
	r->name = own(b, row->name);
	r->source_uid = own(b, row->uid);
	if (!r->api_version || !r->kind || !r->ns || !r->name || !r->source_uid)
		return -ENOMEM;
	ex->counts.tombstoned++;
	return 0;
}

/* Items of a List carry neither apiVersion nor kind: give them the served ones. */
void ds_exporter_set_type(json_t *obj, const struct kind *k)
{
	if (!json_is_string(json_object_get(obj, "apiVersion")))
		json_object_set_new(obj, "apiVersion", json_string(k->api_version));
	if (!json_is_string(json_object_get(obj, "kind")))
		json_object_set_new(obj, "kind", json_string(k->def->name));
}

int ds_exporter_object_key(const struct kind *k, const json_t *obj, char *key, size_t size)
{
	return ds_object_key(key, size, k->api_version, k->def->name,
			     k->def->namespaced ? ds_obj_namespace(obj) : NULL, ds_obj_name(obj));
}

/*
 * One object as the source has it now: selection, sanitizing, canonical
 * JSON, hash; queued for the outbox when it differs from what the index
 * says was pushed (or always, in a snapshot).
 */
int ds_exporter_process_object(ds_exporter *ex, const struct kind *k, json_t *obj)
{
	struct batch *b = &ex->b;
	char key[DS_OBJECT_KEY_MAX], desc[300], e1[300], e2[400];
	ds_err why = {0};
	const char *uid, *rv;
	uint8_t hash[DS_HASH_LEN];
	ds_index_row row;
	json_t *copy = NULL;
	char *payload = NULL;
	ds_record *r;
	ds_err err = {0};
	int rc, have;

	ds_exporter_set_type(obj, k);
	if (ds_exporter_object_key(k, obj, key, sizeof(key)) < 0)
		return 0; /* nameless: nothing to replicate */
	have = ds_object_index_get(ex->idx, key, &row, &err);
	if (have < 0 && have != -ENOENT) {
		ex->local_failed = true;
		return have;
	}
	have = have == 0 && !row.deleted;
	if (!ds_selection_check(obj, ex->cfg.replicate_device_classes, &why)) {
		ex->counts.skipped++;
		if (skip_note(ex, key, why.msg))
			ds_exporter_emit(ex, DS_LOG_INFO, "skipped", "object=%s reason=%s",
					 ds_exporter_quote(ds_obj_describe(obj, desc, sizeof(desc)),
							   e1, sizeof(e1)),
					 ds_exporter_quote(why.msg, e2, sizeof(e2)));
		/* replicated before, not any more (e.g. adopted by a controller) */
		return have ? ds_exporter_add_tombstone(ex, &row) : 0;
	}
	/* Reverse replication without loops: a standby copy stays here (its
	 * namespace active here, it is exported without the copy's marks). */
	if (ds_exporter_standby_copy(ex, obj)) {
		static const char why_copy[] = "a standby copy: drasync-target keeps it here and "
					       "its namespace is not active on this cluster";
		ex->counts.skipped++;
		if (skip_note(ex, key, why_copy))
			ds_exporter_emit(ex, DS_LOG_DEBUG, "skipped", "object=%s reason=%s",
					 ds_exporter_quote(ds_obj_describe(obj, desc, sizeof(desc)),
							   e1, sizeof(e1)),
					 ds_exporter_quote(why_copy, e2, sizeof(e2)));
		if (have) { /* pushed while it was active: kept, not tombstoned */
			const char *kd = own(b, key);
			if (!kd || ds_grow((void **)&b->marks, &b->markcap, b->nmarks + 1,
					   sizeof(*b->marks)) < 0)
				return -ENOMEM;
			b->marks[b->nmarks++] = kd;
		}
		return 0;
	}
	uid = ds_json_str(json_object_get(obj, "metadata"), "uid");
	rv = ds_json_str(json_object_get(obj, "metadata"), "resourceVersion");
	copy = json_deep_copy(obj);
	if (!copy)
		return -ENOMEM;
	rc = ds_sanitize(copy);
	if (rc < 0)
		goto out;
	payload = json_dumps(copy, JSON_SORT_KEYS | JSON_COMPACT);
	if (!payload) {
		rc = -ENOMEM;
		goto out;
	}
	/* Issue 23: an object the API server could never take in one request is not sent;
	 * the target keeps the last version it had. */
	if (strlen(payload) > DS_JSON_MAX_BYTES) {
		char msg[200];

		snprintf(msg, sizeof(msg),
			 "its JSON is %zu bytes, over the %u bytes an API server accepts in one "
			 "request: not sent%s",
			 strlen(payload), DS_JSON_MAX_BYTES,
			 have ? " (the target keeps the last version it had)" : "");
		ex->counts.skipped++;
		if (skip_note(ex, key, msg))
			ds_exporter_emit(ex, DS_LOG_WARN, "object_too_large", "object=%s reason=%s",
					 ds_exporter_quote(ds_obj_describe(obj, desc, sizeof(desc)),
							   e1, sizeof(e1)),
					 ds_exporter_quote(msg, e2, sizeof(e2)));
		if (have) {
			const char *kd = own(b, key);
			if (!kd || ds_grow((void **)&b->marks, &b->markcap, b->nmarks + 1,
					   sizeof(*b->marks)) < 0) {
				rc = -ENOMEM;
				goto out;
			}
			b->marks[b->nmarks++] = kd;
		}
		goto out;
	}
	ds_record_hash(payload, strlen(payload), hash);
	/* In a snapshot, what was pushed after its SNAPSHOT_BEGIN (before a
	 * crash, when it resumes) is in it already. */
	if (have && !(ex->force && row.seq < ex->snap_begin) &&
	    strcmp(row.uid, uid ? uid : "") == 0 && memcmp(row.hash, hash, DS_HASH_LEN) == 0) {
		const char *kd = own(b, key);
		if (!kd || ds_grow((void **)&b->marks, &b->markcap, b->nmarks + 1,
				   sizeof(*b->marks)) < 0) {
			rc = -ENOMEM;
			goto out;
		}
		b->marks[b->nmarks++] = kd;
		ex->counts.unchanged++;
		goto out;
	}
	/* the same name under a new uid: the old object is gone, this is another one */
	if (have && row.uid[0] && uid && strcmp(row.uid, uid) != 0) {
		rc = ds_exporter_add_tombstone(ex, &row);
		if (rc < 0)
			goto out;
	}
	r = ds_exporter_add_record(b);
	if (!r) {
		rc = -ENOMEM;
		goto out;
	}
	r->op = DS_RECORD_UPSERT;
	r->api_version = own(b, ds_obj_api_version(obj));
	r->kind = own(b, k->def->name);
	r->ns = own(b, k->def->namespaced && ds_obj_namespace(obj) ? ds_obj_namespace(obj) : "");
	r->name = own(b, ds_obj_name(obj));
	r->source_uid = own(b, uid ? uid : "");
	r->source_resource_version = own(b, rv ? rv : "");
	r->payload = (const uint8_t *)own_take(b, payload);
	r->payload_len = strlen(payload);
	payload = NULL;
	if (!r->api_version || !r->kind || !r->ns || !r->name || !r->source_uid ||
	    !r->source_resource_version || !r->payload) {
		rc = -ENOMEM;
		goto out;
	}
	ex->counts.pushed++;
out:
	free(payload);
	json_decref(copy);
	return rc;
}

/* The object was deleted on the source: a tombstone when the index holds it
 * (under that uid: a re-created object has its own). */
int ds_exporter_process_deletion(ds_exporter *ex, const struct kind *k, json_t *obj)
{
	const char *uid = ds_json_str(json_object_get(obj, "metadata"), "uid");
	char key[DS_OBJECT_KEY_MAX];
	ds_index_row row;
	ds_err err = {0};
	int rc;

	ds_exporter_set_type(obj, k);
	if (ds_exporter_object_key(k, obj, key, sizeof(key)) < 0)
		return 0;
	rc = ds_object_index_get(ex->idx, key, &row, &err);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0) {
		ex->local_failed = true;
		return rc;
	}
	if (row.deleted || (uid && row.uid[0] && strcmp(uid, row.uid) != 0))
		return 0;
	return ds_exporter_add_tombstone(ex, &row);
}
