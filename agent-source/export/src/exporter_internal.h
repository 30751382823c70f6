#ifndef DRASYNC_EXPORTER_INTERNAL_H
#define DRASYNC_EXPORTER_INTERNAL_H

/*
 * What the parts of the exporter share. exporter.c: the kinds, the
 * lifecycle; exporter_batch.c: the batch of records and the skips;
 * exporter_namespaces.c: the namespaces selected, and those of a pass;
 * exporter_watch.c: discovery, lists, passes and the watch;
 * exporter_results.c: the sources' apply results into the object index.
 */

#include "drasync/change_queue.h"
#include "drasync/exporter.h"
#include "drasync/store.h"
#include "drasync/kinds.h"
#include "drasync/object_index.h"
#include "drasync/outbox.h"
#include "drasync/selection.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RETRY_MS 1000	    /* first retry of a kind whose list or watch failed */
#define RETRY_MAX_MS 300000 /* backoff ceiling */

struct ds_exporter;

struct kind {
	const ds_kind *def;
	struct ds_exporter *ex;
	bool served; /* discovery found it and it is replicated */
	struct ds_kube_resource res;
	char api_version[200];
};

/*
 * One list and its watch: a kind cluster-wide (ns NULL), or, for a fixed
 * namespace list, a namespaced kind in one namespace, or the Namespace
 * object of one namespace (field selector metadata.name=NS).
 */
struct stream {
	struct kind *k;
	const char *ns;	   /* the exporter's copy of the namespace, or NULL */
	char field[300];   /* field selector, or "" */
	char list_rv[128]; /* resourceVersion of the last complete list */
	/* watch thread */
	pthread_t thread;
	bool running;
	atomic_bool done;
	int watch_rc;
	char watch_err[512];
	bool need_list;
	long long retry_at;
	unsigned failures;    /* consecutive failed lists or watches: the backoff */
	long long started_at; /* when the watch thread started */
};

/* Records being gathered for one outbox transaction, with the strings they own. */
struct batch {
	ds_record *recs;
	size_t n, cap;
	char **owned;
	size_t nown, owncap;
	const char **marks; /* keys of unchanged objects (strings in owned) */
	size_t nmarks, markcap;
};

struct ds_exporter {
	ds_exporter_config cfg;
	char db_path[1024];
	ds_outbox *ob;
	ds_object_index *idx; /* the pass/watch thread's */
	ds_store *reloc;      /* its relocations (source_relocation.h): what not to export */
	atomic_bool stop;
	atomic_bool watch_stop; /* ends the watch threads (stop, or a snapshot) */
	atomic_bool snapshot_wanted;
	_Atomic uint64_t last_seq;
	struct kind kinds[DS_KIND_MAX];
	/* the lists and watches, grouped by kind in the kinds table's order */
	struct stream *streams;
	size_t nstreams, streamcap;
	bool scoped; /* namespaced reads per selected namespace, not cluster-wide */
	bool discovered;
	ds_change_queue *q;
	struct batch b;
	ds_export_counts counts;
	bool force;	      /* a snapshot: push every object not pushed since snap_begin */
	uint64_t snap_begin;  /* seq of the snapshot's SNAPSHOT_BEGIN */
	bool local_failed;    /* the outbox or the index failed: fatal, unlike the cluster */
	bool finish_snapshot; /* watch: a snapshot left open by a partial pass */

	/* the selected namespaces (sorted), read by the watch threads */
	pthread_mutex_t mu;
	char **sel;
	size_t nsel, selcap;

	/* each namespace's drasync.io/mode as its Namespace last said ("" none): the
	 * pass thread's (exporter_namespaces.c) */
	struct ns_mode *modes;
	size_t nmodes, modecap;
	bool became_active; /* the last ds_exporter_ns_matches() saw it turn active */

	/* objects whose skip was logged: hash of key and reason (open addressing) */
	uint64_t *skips;
	size_t nskips, skipcap;

	/* results, from the sender's thread */
	pthread_mutex_t rmu;
	ds_object_index *ridx;
	uint64_t results[DS_RESULT_STATUS_MAX];
};

/* A namespace's drasync.io/mode, as its Namespace said. */
struct ns_mode {
	char *ns;
	char mode[16];
};

/* A sorted set of names (namespaces of a pass). */
struct names {
	char **v;
	size_t n, cap;
};

/* exporter.c */
const char *ds_exporter_quote(const char *v, char *buf, size_t size);
/* Keep the first error of a pass; later ones are logged where they happen. */
void ds_exporter_keep_err(int *first, ds_err *dst, int rc, const ds_err *src);
size_t ds_exporter_kind_index(const ds_exporter *ex, const struct kind *k);
/* The first stream of the kind (NULL when none). */
struct stream *ds_exporter_first_stream(ds_exporter *ex, size_t kind);
/* Every stream of the kind has its list (its objects are all known). */
bool ds_exporter_kind_listed(const ds_exporter *ex, size_t kind);

/* exporter_batch.c */
ds_record *ds_exporter_add_record(struct batch *b);
void ds_exporter_batch_reset(struct batch *b);
void ds_exporter_batch_dispose(struct batch *b);
int ds_exporter_flush(ds_exporter *ex, ds_err *err);
/* The snapshot's end after what is pending: its manifest read from the index a
 * part at a time (cfg.manifest_part_entries), SNAPSHOT_PART records then the
 * SNAPSHOT_END, in one outbox transaction; how many objects and records. */
int ds_exporter_push_snapshot_end(ds_exporter *ex, const char *id, size_t *objects, size_t *records,
				  ds_err *err);
/* The push guard of relocations on ex->idx (ds_exporter_new()). */
void ds_exporter_batch_guard(ds_exporter *ex);
int ds_exporter_maybe_flush(ds_exporter *ex, ds_err *err);
int ds_exporter_add_tombstone(ds_exporter *ex, const ds_index_row *row);
void ds_exporter_set_type(json_t *obj, const struct kind *k);
int ds_exporter_object_key(const struct kind *k, const json_t *obj, char *key, size_t size);
int ds_exporter_process_object(ds_exporter *ex, const struct kind *k, json_t *obj);
int ds_exporter_process_deletion(ds_exporter *ex, const struct kind *k, json_t *obj);

/* exporter_namespaces.c */
bool ds_exporter_ns_selected(ds_exporter *ex, const char *ns);
int ds_exporter_sel_add(ds_exporter *ex, const char *ns);
void ds_exporter_sel_remove(ds_exporter *ex, const char *ns);
bool ds_exporter_ns_matches(ds_exporter *ex, const json_t *ns_obj);
/* Whether obj is a copy a drasync-target wrote (its marks) in a namespace not active here. */
bool ds_exporter_standby_copy(ds_exporter *ex, const json_t *obj);
void ds_exporter_modes_dispose(ds_exporter *ex);
int ds_exporter_names_add(struct names *s, const char *name);
void ds_exporter_names_dispose(struct names *s);
int ds_exporter_unselect_namespace(ds_exporter *ex, const char *ns, ds_err *err);
int ds_exporter_pass_namespaces(ds_exporter *ex, struct stream *only, struct names *fresh,
				ds_err *err);

/* exporter_watch.c */
void ds_exporter_watches_stop(ds_exporter *ex);

/**
 * Report an event to cfg.on_event (nothing when it is NULL): the exporter's
 * one way to tell; `fmt` formats its logfmt fields, as ds_log() would.
 */
void ds_exporter_emit(const struct ds_exporter *ex, enum ds_log_level level, const char *name,
		      const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#endif
