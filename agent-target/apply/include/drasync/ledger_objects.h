#ifndef DRASYNC_LEDGER_OBJECTS_H
#define DRASYNC_LEDGER_OBJECTS_H

/*
 * The newest state of every object the target's ledger holds, for the
 * commands that read it without applying (inventory, drill): an object's
 * object_state row and its record, or a record committed after the
 * applier's cursor (not folded in yet), the later winning. Read-only, in one
 * read transaction on a connection of its own: it works whether `run` is
 * running on the same file or not. And the one way a record's payload
 * becomes a JSON object (the applier's too).
 */

#include "drasync/err.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* Largest object inflated from the ledger. */
#define DS_LEDGER_OBJECT_MAX (16u << 20)

/* One object of one source. Strings owned; ns NULL for cluster-scoped objects. */
typedef struct ds_ledger_object {
	char *source, *key, *state, *ns, *kind, *name;
	int op;		      /* enum ds_record_op of its newest record */
	char *source_uid;     /* the source object's uid, NULL when unknown */
	char *source_cluster; /* the source's cluster name, NULL when unknown */
	uint8_t *payload;     /* the record's payload as stored */
	size_t len;
	int zstd;
} ds_ledger_object;

/**
 * Read the objects whose kind is one of kinds (NULL-terminated; NULL: all)
 * from the ledger at path, in ledger order. A ledger with nothing received
 * yet gives none. -ENOENT (err says so) when there is no file at path.
 * *out is owned (ds_ledger_objects_free).
 */
int ds_ledger_objects_read(const char *path, const char *const *kinds, ds_ledger_object **out,
			   size_t *n, ds_err *err);
void ds_ledger_objects_free(ds_ledger_object *v, size_t n);

/**
 * A record's payload as the object it carries (inflated when zstd).
 * @return 0 with *out (a new reference); -EINVAL when it is no JSON object
 *         (why says so: cannot be decompressed, not JSON, another JSON
 *         value, empty); -ENOMEM
 */
int ds_ledger_payload_json(const uint8_t *payload, size_t len, int zstd, json_t **out, char *why,
			   size_t why_size);

#endif
