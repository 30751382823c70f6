#ifndef DRASYNC_TESTUTIL_H
#define DRASYNC_TESTUTIL_H

/* Helpers shared by the cmocka tests. Must be included after cmocka.h. */

#include "drasync/err.h"

#include <dirent.h>
#include <stddef.h>

/** Read a whole file (NUL-terminated); fails the test when it cannot. Caller frees. */
char *tu_read_file(const char *path, size_t *len);

/** $name from the ctest environment; fails the test when it is unset. */
const char *tu_env(const char *name);

/**
 * Path of a fixture under $DS_FIXTURES, in a static buffer per call site cycle (8 slots).
 * Fails the test, naming the path it looked in, when the fixture is not there.
 */
const char *tu_fixture(const char *relpath);

/** opendir(path); fails the test naming the path when it cannot. */
DIR *tu_opendir(const char *path);

/** A fresh empty directory under $DS_TEST_TMP (or /tmp). Caller frees. */
char *tu_mkdtemp(const char *prefix);

/** Write text to path; fails the test when it cannot. */
void tu_write_file(const char *path, const char *text);

/* A configuration file that must be rejected, and where its error must point. */
struct tu_bad_config {
	const char *name; /* what the case tries */
	const char *yaml;
	int line, col;	 /* 0, 0: about the whole file */
	const char *msg; /* a substring of the message */
};

/**
 * Fail the test unless a load of `c` gave -EINVAL (r), with err at
 * file:c->line:c->col and c->msg in its message.
 */
void tu_assert_bad_config(const struct tu_bad_config *c, int r, const ds_err *err,
			  const char *file);

/* The result of running a program. */
struct tu_run {
	int status; /* exit code, or 128+signal */
	char *out;  /* captured stdout, NUL-terminated */
	char *err;  /* captured stderr, NUL-terminated */
};

/**
 * Run argv (argv[0] a path) with `input` on stdin (NULL: /dev/null), capture
 * stdout and stderr. Fails the test when the program cannot be started.
 */
void tu_run(struct tu_run *r, const char *input, const char *const argv[]);

/** As tu_run(), with stdout written to the file at stdout_path (r->out stays ""). */
void tu_run_to(struct tu_run *r, const char *input, const char *stdout_path,
	       const char *const argv[]);
void tu_run_dispose(struct tu_run *r);

/**
 * Start argv (argv[0] a path) in the background with stdin from /dev/null and
 * stdout and stderr appended to `log_path`, no other file descriptor of the
 * test's, and SIGKILL when the calling thread ends (call it from the test's
 * main thread: a test that fails before it stops the program leaves nothing
 * running). @return its pid
 */
int tu_spawn(const char *log_path, const char *const argv[]);

/**
 * Wait up to timeout_ms for pid to exit. @return its exit code, 128+signal
 * when a signal ended it, or -1 when it was still running (it is then killed
 * with SIGKILL and reaped).
 */
int tu_wait_exit(int pid, int timeout_ms);

#endif
