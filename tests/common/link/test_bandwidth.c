/* The bandwidth cap's token bucket as pure logic: the caller's clock, no sockets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/bandwidth.h"

#define S 1000000000ll
#define KI 1024u

/* A sender that puts `frame`-byte frames out whenever the bucket lets it, for `secs`. */
static uint64_t drive(ds_bandwidth *b, int64_t start, int64_t secs, size_t frame, int64_t *end)
{
	int64_t now = start;
	uint64_t sent = 0;

	while (now < start + secs * S) {
		int64_t d = ds_bandwidth_delay_ns(b, now);

		if (d > 0) {
			now += d; /* the sender sleeps exactly as long as it is told */
			continue;
		}
		ds_bandwidth_take(b, frame, now);
		sent += frame;
	}
	*end = now;
	return sent;
}

static void test_bandwidth__no_cap_never_waits(void **state)
{
	ds_bandwidth b;

	(void)state;
	ds_bandwidth_init(&b, 0, 0, 0);
	for (int i = 0; i < 1000; i++) {
		assert_int_equal(ds_bandwidth_delay_ns(&b, 0), 0);
		ds_bandwidth_take(&b, 4u << 20, 0);
	}
	assert_int_equal(b.bytes, 1000ull * (4u << 20));
}

/* Over a long run the average is the rate, within one frame and the burst. */
static void test_bandwidth__average_holds_the_rate(void **state)
{
	static const struct {
		uint64_t rate;
		size_t frame, burst;
	} cases[] = {
	    {1024 * KI, 64 * KI, 256 * KI},
	    {100 * KI, 10 * KI, 64 * KI},
	    {10 * KI, 1500, 0},
	    {1024 * KI, 3 * 1024 * KI, 64 * KI}, /* frames > burst */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ds_bandwidth b;
		int64_t end = 0, t0 = 5 * S;
		uint64_t sent, bound;

		ds_bandwidth_init(&b, cases[i].rate, cases[i].burst, t0);
		sent = drive(&b, t0, 60, cases[i].frame, &end);
		bound = cases[i].rate * 60 + cases[i].burst + cases[i].frame;
		assert_true(sent <= bound);
		assert_true(sent + cases[i].frame >= cases[i].rate * 60);
		assert_int_equal(b.bytes, sent);
	}
}

/* A quiet link earns its burst and no more. */
static void test_bandwidth__idle_earns_only_the_burst(void **state)
{
	ds_bandwidth b;
	int64_t now = 0;
	uint64_t sent = 0;

	(void)state;
	ds_bandwidth_init(&b, 100 * KI, 50 * KI, now);
	ds_bandwidth_take(&b, 10 * KI, now);
	now += 3600 * S; /* an hour of nothing */
	while (ds_bandwidth_delay_ns(&b, now) == 0) {
		ds_bandwidth_take(&b, 10 * KI, now);
		sent += 10 * KI;
	}
	/* 50 Ki of burst, and the frame that goes into debt. */
	assert_int_equal(sent, 60 * KI);
	/* The debt is paid at the rate: 10 Ki at 100 Ki/s is 0.1 s. */
	assert_int_equal(ds_bandwidth_delay_ns(&b, now), S / 10);
	assert_int_equal(ds_bandwidth_delay_ns(&b, now + S / 10), 0);
}

/* A frame larger than the bucket still goes (whole), and the next one waits for its debt. */
static void test_bandwidth__big_frame_goes_then_waits(void **state)
{
	ds_bandwidth b;

	(void)state;
	ds_bandwidth_init(&b, 1024 * KI, 64 * KI, 0);
	assert_int_equal(ds_bandwidth_delay_ns(&b, 0), 0);
	ds_bandwidth_take(&b, 4u << 20, 0);
	/* 4 MiB at 1 MiB/s, less the 64 Ki the bucket holds: 4 s - 62.5 ms. */
	assert_int_equal(ds_bandwidth_delay_ns(&b, 0), 4 * S - S / 16);
	assert_int_equal(ds_bandwidth_delay_ns(&b, 2 * S), 2 * S - S / 16);
	assert_int_equal(ds_bandwidth_delay_ns(&b, 4 * S), 0);
}

/* Rounding never lets the average creep over the rate: 3 bytes at 7 bytes/s. */
static void test_bandwidth__rounding_is_against_the_sender(void **state)
{
	ds_bandwidth b;
	int64_t end = 0;
	uint64_t sent;

	(void)state;
	ds_bandwidth_init(&b, 7, 0, 0);
	sent = drive(&b, 0, 3000, 3, &end);
	assert_true(sent <= 7 * 3000 + 3);
	assert_true(sent >= 7 * 3000 - 3);
}

static void test_bandwidth__batch_bytes(void **state)
{
	(void)state;
	assert_int_equal(ds_bandwidth_batch_bytes(0, 4u << 20), 4u << 20);
	assert_int_equal(ds_bandwidth_batch_bytes(1024 * KI, 4u << 20), 256 * KI);
	assert_int_equal(ds_bandwidth_batch_bytes(10 * KI, 4u << 20), 64 * KI);
	assert_int_equal(ds_bandwidth_batch_bytes(100u << 20, 4u << 20), 4u << 20);
	assert_int_equal(ds_bandwidth_batch_bytes(10 * KI, 32 * KI), 32 * KI);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bandwidth__no_cap_never_waits),
	    cmocka_unit_test(test_bandwidth__average_holds_the_rate),
	    cmocka_unit_test(test_bandwidth__idle_earns_only_the_burst),
	    cmocka_unit_test(test_bandwidth__big_frame_goes_then_waits),
	    cmocka_unit_test(test_bandwidth__rounding_is_against_the_sender),
	    cmocka_unit_test(test_bandwidth__batch_bytes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
