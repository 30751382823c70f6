#ifndef DRASYNC_CHANGE_QUEUE_H
#define DRASYNC_CHANGE_QUEUE_H

/*
 * The watch's debounce: changes wait here, coalesced per object key, until
 * their object has been quiet for a while. An object changed many times in
 * a burst leaves one entry, holding its latest state; it is due once no
 * change came for `quiet`, at the latest `window` after its first change, so
 * a lone change goes out after `quiet` and a steady stream of changes still
 * goes out once per window. Thread-safe: the watch threads put, the
 * exporter takes.
 */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct ds_change_queue ds_change_queue;

/* One coalesced change, taken from the queue; owned (ds_change_dispose()). */
typedef struct ds_change {
	char *key;
	int tag;      /* the caller's (the exporter: the kind's index) */
	bool deleted; /* the object's last event was its deletion */
	json_t *obj;  /* its latest state (for a deletion: the last state seen) */
} ds_change;

/* quiet_ms: how long an object must be unchanged before its entry is due
 * (at most window_ms; negative or above window_ms: window_ms, the window
 * alone). */
int ds_change_queue_new(ds_change_queue **out, long long window_ms, long long quiet_ms);
void ds_change_queue_free(ds_change_queue *q);

/**
 * The latest state of the object `key` at now_ms: replaces a pending one
 * (its due time now + quiet, but no later than its first change + window)
 * or queues a new one due at now_ms + quiet.
 * obj gets a new reference. @return 0, -ENOMEM
 */
int ds_change_queue_put(ds_change_queue *q, const char *key, int tag, bool deleted, json_t *obj,
			long long now_ms);

/** Take the oldest entry due at now_ms into *out. @return 1 taken, 0 none due */
int ds_change_queue_take(ds_change_queue *q, long long now_ms, ds_change *out);

/** Drop every entry for which match() is true. @return how many */
size_t ds_change_queue_drop(ds_change_queue *q,
			    bool (*match)(void *ud, const char *key, int tag, const json_t *obj),
			    void *ud);

/** Entries waiting. */
size_t ds_change_queue_len(ds_change_queue *q);

void ds_change_dispose(ds_change *c);

#endif
