#ifndef DRASYNC_BENCHUTIL_H
#define DRASYNC_BENCHUTIL_H

/*
 * What the benchmarks of tests/bench share: files, child processes and their
 * output. A benchmark does not recover: every helper dies (bu_die) with a
 * message when it cannot do its job, stopping the children still running.
 */

#include <stddef.h>
#include <sys/types.h>

/** The name the messages start with ("bench e2e"); call first in main. */
void bu_init(const char *bench_name);

/** Sleep ms milliseconds. */
void bu_msleep(long ms);

/** pid was waited for elsewhere: bu_die() no longer stops it. */
void bu_child_forget(pid_t pid);

/** Print "<name>: <message>", SIGKILL every child still running, exit 1. */
void bu_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/** strdup(s), "" for NULL; dies out of memory. */
char *bu_xstrdup(const char *s);

/** The whole file ("" when it cannot be opened); the caller frees. */
char *bu_read_file(const char *path);

/** Write text to path, or die. */
void bu_write_file(const char *path, const char *text);

/**
 * Start argv, stdout to out_path (NULL: the log), stderr appended to log.
 * Returns once the program has exec'd (from then on /proc shows its own
 * memory, not the copy of ours that fork made).
 */
pid_t bu_spawn(const char *const argv[], const char *out_path, const char *log);

/** Wait for pid; its exit code, or 128 + the signal that ended it. */
int bu_wait_child(pid_t pid);

/** The last 30 lines of log on stderr. */
void bu_show_tail(const char *log);

/** Run argv to its end; its stdout (caller frees); dies unless it exits 0. */
char *bu_run(const char *const argv[], const char *work, const char *tag);

/** The last line of text that starts with prefix (borrowed), or die. */
const char *bu_last_line(const char *text, const char *prefix);

/** The number after key in line, or die. */
double bu_field(const char *line, const char *key);

/** CPU seconds (user + system) process pid has used so far; -1 when unknown. */
double bu_proc_cpu_s(pid_t pid);

/** "PREFIX-0,PREFIX-1,..." into buf. */
void bu_ns_list(char *buf, size_t size, const char *prefix, unsigned n);

#endif
