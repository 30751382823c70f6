#include "drasync/bandwidth.h"

#include <math.h>

#define NS_PER_S 1000000000ll

/* n bytes at rate, in nanoseconds (rounded up, so the average never goes over). */
static int64_t span_ns(uint64_t n, uint64_t rate)
{
	double ns = ceil((double)n * (double)NS_PER_S / (double)rate);

	/* Bounded so that adding spans to a time never overflows. */
	return ns > (double)(INT64_MAX / 4) ? INT64_MAX / 4 : (int64_t)ns;
}

void ds_bandwidth_init(ds_bandwidth *b, uint64_t rate, uint64_t burst, int64_t now_ns)
{
	b->rate = rate;
	b->burst = burst;
	b->tat_ns = now_ns;
	b->bytes = 0;
}

int64_t ds_bandwidth_delay_ns(const ds_bandwidth *b, int64_t now_ns)
{
	/* In debt while the full-again time lies more than the burst's worth ahead. */
	int64_t allowed;

	if (b->rate == 0)
		return 0;
	allowed = b->tat_ns - span_ns(b->burst, b->rate);
	return allowed > now_ns ? allowed - now_ns : 0;
}

void ds_bandwidth_take(ds_bandwidth *b, size_t n, int64_t now_ns)
{
	b->bytes += n;
	if (b->rate == 0)
		return;
	/* An idle bucket fills up to its burst, never beyond: a link that was
	 * quiet does not earn an unbounded burst. */
	if (b->tat_ns < now_ns)
		b->tat_ns = now_ns;
	b->tat_ns += span_ns(n, b->rate);
}

size_t ds_bandwidth_batch_bytes(uint64_t rate, size_t max_bytes)
{
	uint64_t quarter = rate / 4;

	if (rate == 0)
		return max_bytes;
	if (quarter < 64u << 10)
		quarter = 64u << 10;
	return quarter < max_bytes ? (size_t)quarter : max_bytes;
}
