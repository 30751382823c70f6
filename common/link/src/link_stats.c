#include "drasync/link_stats.h"

#include <stdint.h>
#include <string.h>

void ds_link_stats_add(ds_link_stats *st, uint64_t sent, uint64_t received, uint64_t json)
{
	if (!st)
		return;
	if (sent) {
		atomic_fetch_add(&st->sent, sent);
		atomic_fetch_add(&st->session_sent, sent);
	}
	if (received) {
		atomic_fetch_add(&st->received, received);
		atomic_fetch_add(&st->session_received, received);
	}
	if (json) {
		atomic_fetch_add(&st->json, json);
		atomic_fetch_add(&st->session_json, json);
	}
}

void ds_link_stats_session(ds_link_stats *st, bool zbatch)
{
	if (!st)
		return;
	atomic_store(&st->session_sent, 0);
	atomic_store(&st->session_received, 0);
	atomic_store(&st->session_json, 0);
	atomic_store(&st->zbatch, zbatch ? 1 : 0);
}

void ds_link_stats_read(const ds_link_stats *st, ds_link_figures *out)
{
	ds_link_stats *s = (ds_link_stats *)(uintptr_t)st;

	memset(out, 0, sizeof(*out));
	if (!s)
		return;
	out->sent = atomic_load(&s->sent);
	out->received = atomic_load(&s->received);
	out->json = atomic_load(&s->json);
	out->session_sent = atomic_load(&s->session_sent);
	out->session_received = atomic_load(&s->session_received);
	out->session_json = atomic_load(&s->session_json);
	out->zbatch = atomic_load(&s->zbatch) != 0;
}

double ds_link_figures_ratio(uint64_t sent, uint64_t received, uint64_t json)
{
	return json ? (double)(sent + received) / (double)json : 0.0;
}
