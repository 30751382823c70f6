#include "refusals.h"

#include "drasync/clock.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Addresses tracked at once; beyond them, the others share one entry "*". */
#define PEERS_MAX 256

/* One (event, address) pair: each kind of refusal has its windows. */
struct peer {
	char addr[64]; /* "" when free */
	char name[48];
	int64_t since; /* the window's start, monotonic ms */
	uint64_t more; /* refusals at debug level in this window */
};

struct ds_refusals {
	pthread_mutex_t mu;
	int window_ms;
	ds_transport_event_fn fn;
	void *ud;
	struct peer peers[PEERS_MAX + 1]; /* the last one: "*" */
};

int ds_refusals_new(ds_refusals **out, int window_ms, ds_transport_event_fn fn, void *ud)
{
	ds_refusals *g = calloc(1, sizeof(*g));

	if (!g)
		return -ENOMEM;
	pthread_mutex_init(&g->mu, NULL);
	g->window_ms = window_ms > 0 ? window_ms : 60000;
	g->fn = fn;
	g->ud = ud;
	*out = g;
	return 0;
}

void ds_refusals_free(ds_refusals *g)
{
	if (!g)
		return;
	pthread_mutex_destroy(&g->mu);
	free(g);
}

static void emit(ds_refusals *g, enum ds_log_level level, const char *name, const char *peer,
		 const char *detail)
{
	ds_transport_event ev = {level, name, peer ? peer : "", detail ? detail : ""};

	if (g->fn)
		g->fn(g->ud, &ev);
}

static struct peer *peer_get(ds_refusals *g, const char *name, const char *ip)
{
	struct peer *free_slot = NULL;

	for (int i = 0; i < PEERS_MAX; i++) {
		if (g->peers[i].addr[0] && strcmp(g->peers[i].addr, ip) == 0 &&
		    strcmp(g->peers[i].name, name) == 0)
			return &g->peers[i];
		if (!free_slot && !g->peers[i].addr[0])
			free_slot = &g->peers[i];
	}
	if (!free_slot) {
		free_slot = &g->peers[PEERS_MAX];
		if (!free_slot->addr[0]) {
			snprintf(free_slot->addr, sizeof(free_slot->addr), "*");
			snprintf(free_slot->name, sizeof(free_slot->name), "refusals");
			free_slot->since = -1;
			free_slot->more = 0;
		}
		return free_slot;
	}
	snprintf(free_slot->addr, sizeof(free_slot->addr), "%s", ip);
	snprintf(free_slot->name, sizeof(free_slot->name), "%s", name);
	free_slot->since = -1;
	free_slot->more = 0;
	return free_slot;
}

void ds_refusals_report(ds_refusals *g, enum ds_log_level level, const char *name, const char *addr,
			const char *peer, const char *detail)
{
	struct peer *p;
	int64_t now = ds_clock_mono_ms();
	bool first;

	pthread_mutex_lock(&g->mu);
	/* An empty address would read as a free entry, loud every time: a peer
	 * gone before its address was read is grouped as "?". */
	p = peer_get(g, name, addr && addr[0] ? addr : "?");
	first = p->since < 0 || (p->more == 0 && now - p->since >= g->window_ms);
	if (first)
		p->since = now;
	else
		p->more++;
	pthread_mutex_unlock(&g->mu);
	emit(g, first ? level : DS_LOG_DEBUG, name, peer, detail);
}

void ds_refusals_flush(ds_refusals *g)
{
	int64_t now = ds_clock_mono_ms();

	if (!g)
		return;
	for (int i = 0; i <= PEERS_MAX; i++) {
		struct peer *p = &g->peers[i];
		char addr[64], name[48], detail[300];
		uint64_t more;

		pthread_mutex_lock(&g->mu);
		if (!p->addr[0] || p->since < 0 || now - p->since < g->window_ms) {
			pthread_mutex_unlock(&g->mu);
			continue;
		}
		more = p->more;
		snprintf(addr, sizeof(addr), "%s", p->addr);
		snprintf(name, sizeof(name), "%s", p->name);
		/* A window with refusals at debug level opens the next one, so the
		 * next refusal stays quiet too; a quiet window frees the entry. */
		if (more) {
			p->since = now;
			p->more = 0;
		} else {
			p->addr[0] = '\0';
		}
		pthread_mutex_unlock(&g->mu);
		if (!more)
			continue;
		snprintf(detail, sizeof(detail),
			 "%llu more %s from this address in the last %d s "
			 "(each at debug level, all counted in the metrics)",
			 (unsigned long long)more, name, (g->window_ms + 999) / 1000);
		emit(g, DS_LOG_WARN, "refusals_repeated", addr, detail);
	}
}
