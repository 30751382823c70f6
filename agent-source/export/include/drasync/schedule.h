#ifndef DRASYNC_SCHEDULE_H
#define DRASYNC_SCHEDULE_H

/*
 * When the passes of `schedule: {mode: interval}` and `{mode: cron}` run.
 * Interval slots are anchored at the first pass (start, start + every, ...);
 * cron slots are the times the expression names in its time zone. A pass
 * that is still running when its next slot comes is not started twice: the
 * next pass runs at the first slot after the pass ended, and the slots it
 * overran are counted so the agent can say so.
 */

#include "drasync/err.h"
#include "drasync/source_config.h"

#include <stdint.h>

typedef struct ds_schedule ds_schedule;

/**
 * A clock for an interval or cron schedule.
 * @param start_ms  the first slot of an interval schedule (ms since the epoch)
 * @return 0; -EINVAL for watch/once or a bad expression (err says why); -ENOMEM
 */
int ds_schedule_new(ds_schedule **out, const ds_schedule_config *cfg, int64_t start_ms,
		    ds_err *err);
void ds_schedule_free(ds_schedule *s);

/**
 * The first slot strictly after `now_ms`.
 * @param missed  optional: slots between `last_ms` (the slot the previous pass
 *                was started for; 0 for none) and now_ms that were not run
 * @return 0; -ENOENT when the expression names no time in the years ahead
 */
int ds_schedule_next(const ds_schedule *s, int64_t last_ms, int64_t now_ms, int64_t *next_ms,
		     uint64_t *missed, ds_err *err);

/** ISO 8601 UTC with milliseconds ("2026-12-01T08:00:00.000Z") into buf. @return buf */
const char *ds_schedule_format_time(int64_t ms, char *buf, size_t size);

#endif
