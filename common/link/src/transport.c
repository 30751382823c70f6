#include "drasync/transport.h"

#include <stdio.h>

void ds_transport_tuning_default(ds_transport_tuning *t)
{
	t->heartbeat_ivl_ms = 1000;
	t->heartbeat_timeout_ms = 5000;
	t->linger_ms = 500;
	t->reconnect_ivl_ms = 100;
	t->reconnect_ivl_max_ms = 5000;
	t->handshake_timeout_ms = 5000;
	ds_wire_limits_default(&t->limits);
}

void ds_transport_event_log(void *ud, const ds_transport_event *ev)
{
	char peer[300], detail[600];
	const char *who = ud;

	ds_log(ev->level, ev->name, "%s%s%speer=%s detail=%s", who ? "side=" : "", who ? who : "",
	       who ? " " : "", ds_log_quote(ev->peer, peer, sizeof(peer)),
	       ds_log_quote(ev->detail, detail, sizeof(detail)));
}

void ds_transport_event_emitv(ds_transport_event_fn fn, void *ud, enum ds_log_level level,
			      const char *name, const char *peer, const char *fmt, va_list ap)
{
	char detail[512];
	ds_transport_event ev;

	if (!fn)
		return;
	vsnprintf(detail, sizeof(detail), fmt, ap);
	ev.level = level;
	ev.name = name;
	ev.peer = peer ? peer : "";
	ev.detail = detail;
	fn(ud, &ev);
}
