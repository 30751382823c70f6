#ifndef DRASYNC_BANDWIDTH_H
#define DRASYNC_BANDWIDTH_H

/*
 * The sender's bandwidth cap (target.bandwidth): a token bucket over the bytes
 * of the Batch frames the source puts on the link. Pure logic: the caller
 * passes the monotonic time in nanoseconds, so it is tested without a clock.
 *
 * The bucket holds `burst` bytes and refills at `rate` bytes per second. A
 * frame may go when the bucket is not in debt; it takes its whole size, so
 * one frame larger than what the bucket holds goes at once and the next waits
 * until the debt is paid. Over any interval T the bytes that go are at most
 * rate * T + burst + one frame, and the long-run average is the rate.
 * Heartbeats, Hello and what the target sends never pass through it.
 */

#include <stddef.h>
#include <stdint.h>

typedef struct ds_bandwidth {
	uint64_t rate;	/* bytes per second; 0: no cap, every frame goes at once */
	uint64_t burst; /* bytes the bucket holds when full */
	int64_t tat_ns; /* when the bucket is full again (the theoretical arrival time) */
	uint64_t bytes; /* bytes taken so far */
} ds_bandwidth;

/** A full bucket at now_ns; rate 0 turns the cap off. */
void ds_bandwidth_init(ds_bandwidth *b, uint64_t rate, uint64_t burst, int64_t now_ns);

/** Nanoseconds until a frame may go at now_ns; 0: now. */
int64_t ds_bandwidth_delay_ns(const ds_bandwidth *b, int64_t now_ns);

/** A frame of n bytes goes at now_ns (whatever ds_bandwidth_delay_ns said). */
void ds_bandwidth_take(ds_bandwidth *b, size_t n, int64_t now_ns);

/**
 * The batch size that keeps the link smooth under the cap: a quarter of a
 * second of the rate, at least 64 KiB, at most max_bytes (rate 0: max_bytes).
 */
size_t ds_bandwidth_batch_bytes(uint64_t rate, size_t max_bytes);

#endif
