#ifndef DRASYNC_RECORD_CHECK_H
#define DRASYNC_RECORD_CHECK_H

/*
 * What a record may ask of the target (SPEC §5 "Trust boundary"), decided from
 * the target's file alone, before anything of it reaches an API server: a kind
 * drasync replicates, names the API server would take, a reference that agrees
 * with the payload, a namespace granted to the source, pod specs within the
 * source's podSecurity. The apply stage and the ingest fuzz target call it.
 */

#include "drasync/source_grants.h"
#include "drasync/target_config.h"

#include <jansson.h>
#include <stddef.h>

/* A record's reference as the wire carried it (every field may be anything). */
typedef struct ds_record_ref {
	const char *source; /* the authenticated source */
	const char *api_version;
	const char *kind;
	const char *ns; /* NULL or "": none */
	const char *name;
} ds_record_ref;

/**
 * Check ref, and obj (its payload; NULL for a tombstone) against it and cfg.
 * @return -1 when the record may go on, else its enum ds_refusal with why
 *         saying what (names from the wire quoted)
 */
int ds_record_check(const ds_target_config *cfg, const ds_record_ref *ref, const json_t *obj,
		    char *why, size_t size);

/** s as the logs quote a name from the wire: always in quotes, cut to a readable length. */
const char *ds_record_shown(const char *s, char *buf, size_t size);

#endif
