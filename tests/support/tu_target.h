#ifndef DRASYNC_TU_TARGET_H
#define DRASYNC_TU_TARGET_H

/*
 * A real target site in the test process (after cmocka.h): a CURVE ROUTER
 * (ds_receiver) on a free loopback port with fresh server and source key
 * pairs, an authorized-sources file, and a SQLite ledger; every record
 * committed is also kept in memory so a test can ask what arrived.
 */

#include "drasync/keys.h"
#include "drasync/record.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct tu_target tu_target;

/* The target's verdict on a record (res is preset to ok); may be NULL. */
typedef void (*tu_target_verdict_fn)(void *ud, const ds_record *rec, ds_record_result *res);

/**
 * A verdict for tests of the target's results: objects named bad* fail
 * ("DeviceClass gpu.nowhere.example does not exist on the target"), those
 * named skip* are skipped ("held in the ledger (standby)"), the rest are ok.
 */
void tu_target_verdict_by_name(void *ud, const ds_record *rec, ds_record_result *res);

/** Start a target with its files under `dir`. */
tu_target *tu_target_start(const char *dir, tu_target_verdict_fn verdict, void *ud);
void tu_target_stop(tu_target *t);

const char *tu_target_endpoint(const tu_target *t);
const ds_keypair *tu_target_server_keys(const tu_target *t);
/** The authorized source's key pair (name "source"). */
const ds_keypair *tu_target_source_keys(const tu_target *t);
/** Write the source's secret key to DIR/source.key (mode 0600); returns the path (static). */
const char *tu_target_write_source_key(const tu_target *t, const char *dir);

/** Records committed so far. */
size_t tu_target_len(tu_target *t);

/** One committed record as the target's handler saw it. */
typedef struct tu_arrival {
	int op;
	char key[600];	       /* "group/Kind/namespace/name" (see below); "" for markers */
	char api_version[128]; /* "" for markers */
	const char *payload;   /* NUL-terminated, NULL when none; valid until tu_target_stop() */
	size_t manifest_len;   /* SNAPSHOT_PART / _END: the objects of its part of the manifest */
	unsigned parts_left;   /* SNAPSHOT_PART: records up to the snapshot's end */
	unsigned long long seq;
} tu_arrival;

/** Record i (0 is the first committed); fails the test when there is none. */
tu_arrival tu_target_at(tu_target *t, size_t i);

/**
 * Records from index `from` on with op (0: any) and key (NULL: any), where
 * the key is "group/Kind/namespace/name" (group "" for the core group).
 */
int tu_target_count(tu_target *t, size_t from, int op, const char *key);

/** As tu_target_count(), keys holding `part`. */
int tu_target_count_like(tu_target *t, size_t from, int op, const char *part);

/** The payload of the last upsert of key (caller frees), or NULL. */
char *tu_target_last_payload(tu_target *t, const char *key);

/** Wait up to timeout_ms for a record as tu_target_count() counts; fails the test after. */
void tu_target_wait(tu_target *t, size_t from, int op, const char *key, int timeout_ms);

/** Print the records from `from` on to stderr (for a failing test). */
void tu_target_dump(tu_target *t, size_t from);

#endif
