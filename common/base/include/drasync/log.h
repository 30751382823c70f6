#ifndef DRASYNC_LOG_H
#define DRASYNC_LOG_H

/*
 * One line per event in logfmt on stderr:
 *   ts=2026-11-30T07:51:10.123Z level=info event=connected peer=127.0.0.1:7450
 * Libraries log at debug at most; the agents log where they decide.
 */

enum ds_log_level { DS_LOG_DEBUG, DS_LOG_INFO, DS_LOG_WARN, DS_LOG_ERROR, DS_LOG_LEVEL_MAX };

/** Only events at or above this level are written (default info). */
void ds_log_set_level(enum ds_log_level level);

/** Parse "debug", "info", "warn" or "error". @return 0 or -EINVAL */
int ds_log_level_parse(const char *name, enum ds_log_level *out);

/**
 * Write one event. `fields` is a printf format for the rest of the line,
 * "key=value key2=value2"; values that may hold spaces or quotes should be
 * passed through ds_log_quote().
 */
void ds_log(enum ds_log_level level, const char *event, const char *fields, ...)
    __attribute__((format(printf, 3, 4)));

/**
 * Quote a value for logfmt into buf (adds quotes and escapes only when needed).
 * @return buf
 */
const char *ds_log_quote(const char *value, char *buf, unsigned long size);

#endif
