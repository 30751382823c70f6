#include "drasync/change_queue.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Entries are a list in due order and a chained hash table on the key, so a
 * put finds its pending entry at once. A put's due time is at or after every
 * other's but those pushed back by a later change, so a new or re-put entry
 * finds its place a few steps from the tail. */
struct entry {
	char *key;
	int tag;
	bool deleted;
	json_t *obj;
	long long first; /* the first change of the window */
	long long due;
	struct entry *prev, *next; /* in due order */
	struct entry *chain;	   /* hash bucket */
};

struct ds_change_queue {
	pthread_mutex_t mu;
	long long window, quiet;
	struct entry *head, *tail;
	struct entry **buckets;
	size_t nbuckets, len;
};

static uint64_t hash(const char *s)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

int ds_change_queue_new(ds_change_queue **out, long long window_ms, long long quiet_ms)
{
	ds_change_queue *q = calloc(1, sizeof(*q));

	if (!q)
		return -ENOMEM;
	q->nbuckets = 1024;
	q->buckets = calloc(q->nbuckets, sizeof(*q->buckets));
	if (!q->buckets) {
		free(q);
		return -ENOMEM;
	}
	pthread_mutex_init(&q->mu, NULL);
	q->window = window_ms < 0 ? 0 : window_ms;
	q->quiet = quiet_ms < 0 || quiet_ms > q->window ? q->window : quiet_ms;
	*out = q;
	return 0;
}

static void entry_free(struct entry *e)
{
	free(e->key);
	json_decref(e->obj);
	free(e);
}

void ds_change_queue_free(ds_change_queue *q)
{
	struct entry *e, *n;

	if (!q)
		return;
	for (e = q->head; e; e = n) {
		n = e->next;
		entry_free(e);
	}
	free(q->buckets);
	pthread_mutex_destroy(&q->mu);
	free(q);
}

static struct entry **slot(ds_change_queue *q, const char *key)
{
	struct entry **p = &q->buckets[hash(key) % q->nbuckets];

	while (*p && strcmp((*p)->key, key) != 0)
		p = &(*p)->chain;
	return p;
}

/* Bigger table when chains grow long: rehash every entry (in FIFO order). */
static void grow(ds_change_queue *q)
{
	size_t n = q->nbuckets * 4;
	struct entry **b = calloc(n, sizeof(*b));

	if (!b)
		return; /* longer chains, still correct */
	free(q->buckets);
	q->buckets = b;
	q->nbuckets = n;
	for (struct entry *e = q->head; e; e = e->next) {
		struct entry **p = &q->buckets[hash(e->key) % n];
		e->chain = *p;
		*p = e;
	}
}

/* Take e out of the due-ordered list. */
static void list_remove(ds_change_queue *q, struct entry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		q->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		q->tail = e->prev;
	e->prev = e->next = NULL;
}

/* Put e into the list at its due time, after every entry due no later. */
static void list_insert(ds_change_queue *q, struct entry *e)
{
	struct entry *at = q->tail;

	while (at && at->due > e->due)
		at = at->prev;
	e->prev = at;
	e->next = at ? at->next : q->head;
	if (e->next)
		e->next->prev = e;
	else
		q->tail = e;
	if (at)
		at->next = e;
	else
		q->head = e;
}

/* Unlink e from the list and its bucket (it must be in both). */
static void unlink_entry(ds_change_queue *q, struct entry *e)
{
	struct entry **p = slot(q, e->key);

	*p = e->chain;
	list_remove(q, e);
	q->len--;
}

/* When an entry whose window opened at `first` is due after a change at now:
 * once quiet for q->quiet, at the latest q->window after its first change. */
static long long due_at(const ds_change_queue *q, long long first, long long now)
{
	long long quiet = now + q->quiet, latest = first + q->window;

	return quiet < latest ? quiet : latest;
}

int ds_change_queue_put(ds_change_queue *q, const char *key, int tag, bool deleted, json_t *obj,
			long long now_ms)
{
	struct entry **p, *e;
	int rc = 0;

	pthread_mutex_lock(&q->mu);
	p = slot(q, key);
	if (*p) {
		e = *p;
		json_decref(e->obj);
		e->obj = json_incref(obj);
		e->deleted = deleted;
		e->tag = tag;
		/* a change within the window holds it until quiet again */
		long long due = due_at(q, e->first, now_ms);

		if (due > e->due) {
			list_remove(q, e);
			e->due = due;
			list_insert(q, e);
		}
		goto out;
	}
	e = calloc(1, sizeof(*e));
	if (!e || !(e->key = strdup(key))) {
		free(e);
		rc = -ENOMEM;
		goto out;
	}
	e->tag = tag;
	e->deleted = deleted;
	e->obj = json_incref(obj);
	e->first = now_ms;
	e->due = due_at(q, now_ms, now_ms);
	/* a clock step back must not put it before entries queued earlier */
	if (q->tail && e->due < q->tail->due)
		e->due = q->tail->due;
	list_insert(q, e);
	*p = e;
	q->len++;
	if (q->len > q->nbuckets * 2)
		grow(q);
out:
	pthread_mutex_unlock(&q->mu);
	return rc;
}

int ds_change_queue_take(ds_change_queue *q, long long now_ms, ds_change *out)
{
	struct entry *e;
	int rc = 0;

	pthread_mutex_lock(&q->mu);
	e = q->head;
	if (e && e->due <= now_ms) {
		unlink_entry(q, e);
		out->key = e->key;
		out->tag = e->tag;
		out->deleted = e->deleted;
		out->obj = e->obj;
		free(e);
		rc = 1;
	}
	pthread_mutex_unlock(&q->mu);
	return rc;
}

size_t ds_change_queue_drop(ds_change_queue *q,
			    bool (*match)(void *ud, const char *key, int tag, const json_t *obj),
			    void *ud)
{
	struct entry *e, *n;
	size_t dropped = 0;

	pthread_mutex_lock(&q->mu);
	for (e = q->head; e; e = n) {
		n = e->next;
		if (match(ud, e->key, e->tag, e->obj)) {
			unlink_entry(q, e);
			entry_free(e);
			dropped++;
		}
	}
	pthread_mutex_unlock(&q->mu);
	return dropped;
}

size_t ds_change_queue_len(ds_change_queue *q)
{
	size_t n;

	pthread_mutex_lock(&q->mu);
	n = q->len;
	pthread_mutex_unlock(&q->mu);
	return n;
}

void ds_change_dispose(ds_change *c)
{
	if (!c)
		return;
	free(c->key);
	json_decref(c->obj);
	memset(c, 0, sizeof(*c));
}
