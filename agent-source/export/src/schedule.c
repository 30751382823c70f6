/* The pass clock of interval and cron schedules. */
#include "drasync/schedule.h"

#include "drasync/cron.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct ds_schedule {
	enum ds_schedule_mode mode;
	int64_t start_ms;
	int64_t every_ms;
	ds_cron *cron;
	char *tz;
};

int ds_schedule_new(ds_schedule **out, const ds_schedule_config *cfg, int64_t start_ms, ds_err *err)
{
	ds_schedule *s;
	int rc;

	if (cfg->mode != DS_SCHEDULE_INTERVAL && cfg->mode != DS_SCHEDULE_CRON) {
		ds_err_set(err, "schedule mode %s has no pass clock",
			   ds_schedule_mode_name(cfg->mode));
		return -EINVAL;
	}
	if (cfg->mode == DS_SCHEDULE_INTERVAL && cfg->every_ms <= 0) {
		ds_err_set(err, "schedule.every must be positive");
		return -EINVAL;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		ds_err_set(err, "out of memory");
		return -ENOMEM;
	}
	s->mode = cfg->mode;
	s->start_ms = start_ms;
	s->every_ms = cfg->every_ms;
	if (cfg->mode == DS_SCHEDULE_CRON) {
		rc = ds_cron_parse(&s->cron, cfg->cron_expr ? cfg->cron_expr : "", NULL, err);
		if (rc == 0 && cfg->time_zone && !(s->tz = strdup(cfg->time_zone))) {
			ds_err_set(err, "out of memory");
			rc = -ENOMEM;
		}
		if (rc < 0) {
			ds_schedule_free(s);
			return rc;
		}
	}
	*out = s;
	return 0;
}

void ds_schedule_free(ds_schedule *s)
{
	if (!s)
		return;
	ds_cron_free(s->cron);
	free(s->tz);
	free(s);
}

/* Cron works in whole seconds: the slot after `ms` is the one after its second. */
static int cron_after(const ds_schedule *s, int64_t ms, int64_t *next_ms, ds_err *err)
{
	time_t next;
	int rc = ds_cron_next(s->cron, (time_t)(ms / 1000), s->tz, &next, err);

	if (rc == 0)
		*next_ms = (int64_t)next * 1000;
	return rc;
}

int ds_schedule_next(const ds_schedule *s, int64_t last_ms, int64_t now_ms, int64_t *next_ms,
		     uint64_t *missed, ds_err *err)
{
	uint64_t skipped = 0;
	int64_t next = 0;
	int rc;

	if (s->mode == DS_SCHEDULE_INTERVAL) {
		int64_t k;

		if (now_ms < s->start_ms) {
			next = s->start_ms;
		} else {
			k = (now_ms - s->start_ms) / s->every_ms + 1;
			next = s->start_ms + k * s->every_ms;
		}
		if (last_ms > 0 && next - s->every_ms > last_ms)
			skipped = (uint64_t)((next - s->every_ms - last_ms) / s->every_ms);
	} else {
		rc = cron_after(s, now_ms, &next, err);
		if (rc < 0)
			return rc;
		/* Slots after the last one run and up to now were overrun; count
		 * them, but not beyond a bound (a cron of every minute left for a
		 * week is "many", not a loop of 10,000 steps). */
		if (last_ms > 0) {
			int64_t t = last_ms;

			while (skipped < 1000) {
				int64_t n = 0;

				rc = cron_after(s, t, &n, err);
				if (rc < 0 || n > now_ms)
					break;
				skipped++;
				t = n;
			}
		}
	}
	*next_ms = next;
	if (missed)
		*missed = skipped;
	return 0;
}

const char *ds_schedule_format_time(int64_t ms, char *buf, size_t size)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	gmtime_r(&t, &tm);
	snprintf(buf, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
		 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
	return buf;
}
