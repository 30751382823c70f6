#ifndef DRASYNC_TU_RAWSOURCE_H
#define DRASYNC_TU_RAWSOURCE_H

/*
 * A hostile source in a test (after cmocka.h): a CURVE DEALER with an
 * authorized key that speaks the protocol by hand (wire.h's encoders), not
 * through ds_sender or drasync-source, so that it can send what a real source
 * never would: any name, a reference that disagrees with its payload, a kind
 * drasync does not replicate, another source's object. It keeps what the
 * target answers: each record's commit result and its apply result from the
 * later Acks, and whether the target said Goodbye.
 */

#include "drasync/keys.h"
#include "drasync/record.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tu_raw tu_raw;

/* What the target said of one record (status 0: nothing yet). */
typedef struct tu_raw_result {
	enum ds_result_status commit, apply;
	char commit_msg[256], apply_msg[512];
} tu_raw_result;

/**
 * Connect to endpoint as the owner of `me` (the server's key `server`), send
 * Hello claiming cluster_name, with routing id `rid` (NULL: libzmq's), and
 * wait up to timeout_ms for the Welcome. @return the client, or NULL when no
 * Welcome came (the reason is printed); fails the test on a Goodbye only when
 * `must` is set.
 */
tu_raw *tu_raw_connect(const char *endpoint, const ds_keypair *server, const ds_keypair *me,
		       const char *cluster_name, const char *rid, int timeout_ms, bool must);

/** The name the Welcome gave this key ("" before one). */
const char *tu_raw_source_name(const tu_raw *c);

/** The session's epoch, and the seq the next record gets. */
uint64_t tu_raw_epoch(const tu_raw *c);
uint64_t tu_raw_next_seq(const tu_raw *c);

/**
 * Send recs (n of them) as one Batch: epoch and seq are set here (the seq of
 * record i is returned in seqs[i] when seqs is not NULL), the content hash
 * computed from each payload. Waits until the target acknowledged all of
 * them; fails the test after timeout_ms or when the target drops the session.
 * @return the last seq
 */
uint64_t tu_raw_send(tu_raw *c, ds_record *recs, size_t n, uint64_t *seqs, int timeout_ms);

/**
 * Send recs as one Batch without waiting (a session that may not exist);
 * seqs from `first_seq` on.
 */
void tu_raw_send_nowait(tu_raw *c, ds_record *recs, size_t n, uint64_t epoch, uint64_t first_seq);

/** Read what the target sent for up to timeout_ms (Acks, Goodbye). */
void tu_raw_pump(tu_raw *c, int timeout_ms);

/**
 * Wait until the target sent the apply result of seq; fails the test after
 * timeout_ms. @return the record's results (borrowed, lives as long as c)
 */
const tu_raw_result *tu_raw_wait_applied(tu_raw *c, uint64_t seq, int timeout_ms);

/** The results of seq so far (borrowed); NULL for a seq never sent. */
const tu_raw_result *tu_raw_result_of(const tu_raw *c, uint64_t seq);

/** Whether the target said Goodbye or dropped the peer (reason into why when not NULL). */
bool tu_raw_dropped(const tu_raw *c, const char **why);

/** How many Welcomes, Acks and Goodbyes came. */
long tu_raw_received(const tu_raw *c);

void tu_raw_free(tu_raw *c);

#endif
