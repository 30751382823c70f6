#ifndef DRASYNC_MANIFEST_H
#define DRASYNC_MANIFEST_H

/*
 * Kubernetes manifests as users hand them over: multi-document YAML or JSON,
 * `kubectl get -o yaml|json` output included, `kind: List` (and *List) unrolled
 * into its items. Each object remembers where it came from for messages.
 */

#include "drasync/err.h"

#include <jansson.h>
#include <stddef.h>

typedef struct ds_manifest ds_manifest;

int ds_manifest_new(ds_manifest **out);
void ds_manifest_free(ds_manifest *m);

/**
 * Read a file ("-" = stdin) and append its objects.
 * @return number of objects appended, -EBADMSG (err located), -ENOENT/-EIO, -ENOMEM
 */
int ds_manifest_load(ds_manifest *m, const char *path, ds_err *err);

/** As ds_manifest_load(), from memory; `name` is used in messages. */
int ds_manifest_load_buffer(ds_manifest *m, const char *buf, size_t len, const char *name,
			    ds_err *err);

size_t ds_manifest_count(const ds_manifest *m);

/** The i-th object (borrowed). */
json_t *ds_manifest_object(const ds_manifest *m, size_t i);

/** "file:line:col" (or "file: document N") of the i-th object into buf. @return buf */
const char *ds_manifest_origin(const ds_manifest *m, size_t i, char *buf, size_t size);

#endif
