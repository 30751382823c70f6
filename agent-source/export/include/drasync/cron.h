#ifndef DRASYNC_CRON_H
#define DRASYNC_CRON_H

/*
 * Cron expressions for `schedule: {mode: cron}`, read as Kubernetes CronJob
 * reads them (robfig/cron v3's standard parser), plus Vixie cron's 7 = Sunday:
 *
 *   minute(0-59) hour(0-23) day-of-month(1-31) month(1-12|JAN-DEC) day-of-week(0-7|SUN-SAT)
 *
 * - Each field is a comma-separated list of `*`, `N`, `N-M`, each with an
 *   optional `/step`; `N/step` means N to the field's maximum (robfig; Vixie
 *   rejects it). `?` is `*` in the two day fields. Names are the English
 *   three-letter abbreviations, case-insensitive, usable in ranges (MON-FRI).
 * - Macros: @yearly = @annually "0 0 1 1 *", @monthly "0 0 1 * *", @weekly
 *   "0 0 * * 0", @daily = @midnight "0 0 * * *", @hourly "0 * * * *"
 *   (case-insensitive). No seconds field, no @every (that is mode interval),
 *   no CRON_TZ= prefix (that is schedule.timeZone).
 * - Day of month and day of week: when either field is unrestricted (starts
 *   with `*` or `?` without a step above 1) a day must match both; when both
 *   are restricted it matches if EITHER does (Vixie; robfig decides
 *   "restricted" as said, so "*\/2" counts as restricted).
 * - Times are wall-clock times in a time zone: a time that a daylight-saving
 *   gap skips does not happen that day (02:30 on a spring-forward night in
 *   America/New_York is not run, and nothing is run in its place); a wall
 *   time that happens twice when clocks go back runs at both instants, as
 *   robfig/cron (and so Kubernetes) does.
 */

#include "drasync/err.h"

#include <stddef.h>
#include <time.h>

typedef struct ds_cron ds_cron;

/**
 * Parse a cron expression.
 * @param col_out  optional: on failure, the 1-based byte column of the part
 *                 of expr at fault (0 when about the whole expression)
 * @return 0; -EINVAL, err naming the field and why ("minute: 61 out of
 *         range 0-59"); -ENOMEM
 */
int ds_cron_parse(ds_cron **out, const char *expr, size_t *col_out, ds_err *err);

void ds_cron_free(ds_cron *cron);

/**
 * Check an IANA time zone name ("Europe/Berlin"): a relative path of plain
 * components naming a TZif file under /usr/share/zoneinfo (Debian `tzdata`).
 * @return 0; -ENOENT (no such zone) or -EINVAL (not a zone name), err says which
 */
int ds_cron_zone_check(const char *tz, ds_err *err);

/**
 * The first time strictly after `after` that the expression names, in the
 * time zone `tz` (NULL, "", "UTC" or "Etc/UTC": UTC).
 *
 * A named zone is applied by pointing the TZ environment variable at its file
 * and calling tzset(), under a process-wide mutex, and TZ is put back (to
 * ":/etc/localtime" when it was unset, which means the same to the C
 * library) before returning. Other threads that call localtime() or mktime()
 * meanwhile would see that zone: drasync formats its own times in UTC
 * (gmtime_r), so only a library asking for local time could notice.
 *
 * @return 0; -ENOENT when no time within nine years matches; -EINVAL (bad zone)
 */
int ds_cron_next(const ds_cron *cron, time_t after, const char *tz, time_t *next, ds_err *err);

#endif
