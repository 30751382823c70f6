#ifndef DRASYNC_TU_LINK_H
#define DRASYNC_TU_LINK_H

/*
 * The replication link in a test (after cmocka.h): a receiver and a sender
 * in this process on loopback CURVE sockets and real SQLite files, the
 * events they report, and the target's ledger read as an operator would.
 * Every helper fails the test when what it needs cannot be done.
 */

#include "drasync/inbox.h"
#include "drasync/keys.h"
#include "drasync/receiver.h"
#include "drasync/sender.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* The transport events one end reported, one "name|peer|detail" line each. */
struct tu_events {
	pthread_mutex_t mu;
	char *text;
	size_t len, cap;
};

/** A ds_transport_event callback: logs ev and, when ud is a tu_events, records it there. */
void tu_link_on_event(void *ud, const ds_transport_event *ev);

/** How many recorded events hold a (and b, unless NULL). */
int tu_events_count(struct tu_events *e, const char *a, const char *b);

/** Whether an event holds a (and b, unless NULL). */
int tu_events_has(struct tu_events *e, const char *a, const char *b);

void tu_events_init(struct tu_events *e);
void tu_events_dispose(struct tu_events *e);

/** "dir/name" into out. */
void tu_path_in(char *out, size_t len, const char *dir, const char *name);

/**
 * An outbox at path holding records 1..n of ml-team/trainer-<seq>, Deployments
 * of a realistic shape; every tenth a delete.
 */
void tu_link_fill_outbox(const char *path, unsigned n);

/** The first column of the first row sql gives on the SQLite file db_path; -1 if none. */
long long tu_query_ll(const char *db_path, const char *sql);

/** Every record 1..n committed exactly once, in seq order, for `source`. */
void tu_assert_exactly_once_in_order(const char *inbox, const char *source, long long n);

/** The committed seq the inbox holds for `source`; -1 if none. */
long long tu_committed_of(const char *inbox, const char *source);

/**
 * Key files for a test directory: server.key/.pub, NAME.key/.pub for each of
 * the n sources, and authorized_sources naming them all.
 */
void tu_link_make_keys(const char *dir, const char *const *sources, size_t n, ds_keypair *server,
		       ds_keypair *clients);

/* A receiver on its own thread, serving dir/inbox.db on tcp://127.0.0.1:*. */
struct tu_rx {
	ds_receiver *r;
	pthread_t thread;
	struct tu_events ev;
	int handler_sleep_us; /* each record's apply takes this long */
	long handled;
	uint32_t credit; /* set before tu_rx_start; 0: the default */
	bool no_zbatch;	 /* set before tu_rx_start: a Welcome without "zbatch" (an older target) */
	ds_link_stats stats; /* the receiver's link figures */
};

/** Start rx (zeroed but for handler_sleep_us and credit); max_frame 0: the default. */
void tu_rx_start(struct tu_rx *rx, const char *dir, const ds_keypair *server, size_t max_frame);

/** Stop rx's thread and free it. */
void tu_rx_stop(struct tu_rx *rx);

/* A sender of dir/NAME-outbox.db, run on the caller's thread or its own. */
struct tu_tx {
	ds_sender *s;
	pthread_t thread;
	uint64_t until; /* what tu_tx_main runs the sender until */
	int timeout_ms;
	int rc;
	long results, duplicates;
	struct tu_events ev;
};

/** A sender named name of endpoint, counting its results; batch 0: the default. */
void tu_tx_new(struct tu_tx *tx, const char *dir, const char *name, const char *endpoint,
	       const ds_keypair *server, const ds_keypair *client, size_t batch);

/** As tu_tx_new(), under a bandwidth cap (bytes/s) and an Ack timeout (0: the default). */
void tu_tx_new_capped(struct tu_tx *tx, const char *dir, const char *name, const char *endpoint,
		      const ds_keypair *server, const ds_keypair *client, size_t batch,
		      uint64_t bandwidth, int ack_timeout_ms);

/** Run the sender until tx->until is acknowledged or tx->timeout_ms pass (a thread's main). */
void *tu_tx_main(void *arg);

/** Run the sender until `until` is acknowledged or timeout_ms pass; its rc. */
int tu_tx_deliver(struct tu_tx *tx, uint64_t until, int timeout_ms);

void tu_tx_free(struct tu_tx *tx);

#endif
