#ifndef DRASYNC_REFUSALS_H
#define DRASYNC_REFUSALS_H

/*
 * Refused handshakes and connections, logged per kind (event name), peer
 * address and window: the first one
 * at once, the others at debug level, then at most one line per address and
 * window saying how many more. Every refusal is still reported as an event
 * (the metrics count each one); only its level changes. Thread-safe: the ZAP
 * thread and the receiver's monitor thread both report refusals.
 */

#include "drasync/transport.h"
#include "drasync/zap.h"

#include <stdint.h>

typedef struct ds_refusals ds_refusals;

/* window_ms <= 0: 60000. */
int ds_refusals_new(ds_refusals **out, int window_ms, ds_transport_event_fn fn, void *ud);
void ds_refusals_free(ds_refusals *g);

/**
 * Report the refusal `name` of `peer`, grouped by `addr` (its IP address, no
 * port): at `level` when it is the first of its window, at debug level otherwise.
 */
void ds_refusals_report(ds_refusals *g, enum ds_log_level level, const char *name, const char *addr,
			const char *peer, const char *detail);

/** Emit "refusals_repeated" for each kind and address whose window ended; call often. */
void ds_refusals_flush(ds_refusals *g);

/* The ZAP handler reports its refusals through g (NULL: one line each). */
void ds_zap_set_refusals(ds_zap *zap, ds_refusals *g);

#endif
