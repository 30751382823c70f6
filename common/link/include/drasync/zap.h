#ifndef DRASYNC_ZAP_H
#define DRASYNC_ZAP_H

/*
 * ZAP (ZeroMQ authentication protocol, RFC 27) handler of the target: admits
 * a CURVE client only when its public key is in the authorized-sources file,
 *
 *   # comment
 *   prod-east  rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7
 *
 * one "name Z85-public-key" per line; the name becomes the ZAP user id, i.e.
 * the source's identity in the target's ledger. The file is re-read when it
 * changes (checked at every handshake); a bad line is reported and skipped;
 * an unreadable file admits nobody. The handler runs in its own thread.
 */

#include "drasync/err.h"
#include "drasync/transport.h"

#include <stdbool.h>

/* The ZMTP metadata property each admitted connection carries: its Z85 key
 * (read with zmq_msg_gets() on a message of the connection). */
#define DS_ZAP_KEY_PROPERTY "X-Source-Key"

typedef struct ds_zap ds_zap;

/**
 * Bind the ZAP endpoint of zmq context `zctx` and start serving it. Must be
 * called before the server socket binds. The file must be readable now.
 */
int ds_zap_new(ds_zap **out, void *zctx, const char *authorized_path, const char *domain,
	       ds_transport_event_fn on_event, void *event_ud, ds_err *err);

/** Stop the handler thread and close its socket. NULL-safe. */
void ds_zap_free(ds_zap *zap);

/**
 * Whether source `name` with Z85 key `public_z85` is admitted by the
 * authorized-sources file as it is now (re-read first if it changed): false
 * once the line is removed, or the name is given another key. Thread-safe.
 */
bool ds_zap_admits(ds_zap *zap, const char *name, const char *public_z85);

/** The authorized-sources file the handler reads. */
const char *ds_zap_path(const ds_zap *zap);

typedef struct ds_authorized ds_authorized;

/**
 * Parse an authorized-sources file. Bad lines are reported through on_event
 * (file:line and why) and skipped.
 * @return 0, or a negative errno when the file cannot be read
 */
int ds_authorized_load(ds_authorized **out, const char *path, ds_transport_event_fn on_event,
		       void *event_ud, ds_err *err);
void ds_authorized_free(ds_authorized *a);

/** The name for a Z85 public key, or NULL when it is not authorized. */
const char *ds_authorized_lookup(const ds_authorized *a, const char *public_z85);

/** Number of keys loaded. */
size_t ds_authorized_count(const ds_authorized *a);

/** The name of the i-th key loaded (file order), NULL past the end. */
const char *ds_authorized_name_at(const ds_authorized *a, size_t i);

#endif
