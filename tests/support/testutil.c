#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/buf.h"
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

char *tu_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	if (!f)
		fail_msg("cannot open %s: %s", path, strerror(errno));
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	if (len)
		*len = (size_t)n;
	return buf;
}

const char *tu_env(const char *name)
{
	const char *v = getenv(name);

	if (!v || !v[0])
		fail_msg("environment variable %s is not set (run the test through ctest)", name);
	return v;
}

const char *tu_fixture(const char *relpath)
{
	static char slots[8][1024];
	static unsigned next;
	char *p = slots[next++ % 8];

	snprintf(p, sizeof(slots[0]), "%s/%s", tu_env("DS_FIXTURES"), relpath);
	if (access(p, R_OK) != 0)
		fail_msg("fixture %s: %s (looked in DS_FIXTURES=%s, which the build sets to "
			 "../shared/fixtures beside the repository)",
			 p, strerror(errno), tu_env("DS_FIXTURES"));
	return p;
}

DIR *tu_opendir(const char *path)
{
	DIR *d = opendir(path);

	if (!d)
		fail_msg("cannot open directory %s: %s", path, strerror(errno));
	return d;
}

char *tu_mkdtemp(const char *prefix)
{
	const char *base = getenv("DS_TEST_TMP");
	char *path;

	if (!base || !base[0])
		base = "/tmp";
	mkdir(base, 0755);
	if (asprintf(&path, "%s/%s-XXXXXX", base, prefix) < 0)
		fail_msg("out of memory");
	if (!mkdtemp(path))
		fail_msg("mkdtemp %s: %s", path, strerror(errno));
	return path;
}

void tu_write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "wb");

	if (!f)
		fail_msg("cannot write %s: %s", path, strerror(errno));
	fputs(text, f);
	fclose(f);
}

static void append(char **buf, size_t *len, size_t *cap, const char *data, size_t n)
{
	assert_int_equal(ds_grow((void **)buf, cap, *len + n + 1, 1), 0);
	memcpy(*buf + *len, data, n);
	*len += n;
	(*buf)[*len] = '\0';
}

void tu_run(struct tu_run *r, const char *input, const char *const argv[])
{
	tu_run_to(r, input, NULL, argv);
}

void tu_run_to(struct tu_run *r, const char *input, const char *stdout_path,
	       const char *const argv[])
{
	int in[2], out[2], err[2];
	size_t olen = 0, ocap = 0, elen = 0, ecap = 0, ilen, ioff = 0;
	pid_t pid;
	int status;

	memset(r, 0, sizeof(*r));
	assert_int_equal(pipe(in), 0);
	assert_int_equal(pipe(out), 0);
	assert_int_equal(pipe(err), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		if (stdout_path) {
			int fd = open(stdout_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

			if (fd < 0 || dup2(fd, 1) < 0) {
				fprintf(stderr, "open %s: %s\n", stdout_path, strerror(errno));
				_exit(127);
			}
			close(fd);
		}
		dup2(err[1], 2);
		close(in[0]);
		close(in[1]);
		close(out[0]);
		close(out[1]);
		close(err[0]);
		close(err[1]);
		execv(argv[0], (char *const *)(uintptr_t)argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	close(err[1]);
	signal(SIGPIPE, SIG_IGN);
	ilen = input ? strlen(input) : 0;
	if (ilen == 0) {
		close(in[1]);
		in[1] = -1;
	}
	append(&r->out, &olen, &ocap, "", 0);
	append(&r->err, &elen, &ecap, "", 0);
	while (out[0] >= 0 || err[0] >= 0) {
		struct pollfd p[3];
		nfds_t n = 0;
		char buf[8192];

		p[n++] = (struct pollfd){.fd = out[0], .events = POLLIN};
		p[n++] = (struct pollfd){.fd = err[0], .events = POLLIN};
		p[n++] = (struct pollfd){.fd = in[1], .events = POLLOUT};
		if (poll(p, n, -1) < 0 && errno != EINTR)
			fail_msg("poll: %s", strerror(errno));
		if (out[0] >= 0 && (p[0].revents & (POLLIN | POLLHUP))) {
			ssize_t k = read(out[0], buf, sizeof(buf));
			if (k <= 0) {
				close(out[0]);
				out[0] = -1;
			} else
				append(&r->out, &olen, &ocap, buf, (size_t)k);
		}
		if (err[0] >= 0 && (p[1].revents & (POLLIN | POLLHUP))) {
			ssize_t k = read(err[0], buf, sizeof(buf));
			if (k <= 0) {
				close(err[0]);
				err[0] = -1;
			} else
				append(&r->err, &elen, &ecap, buf, (size_t)k);
		}
		if (in[1] >= 0 && (p[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
			ssize_t k = write(in[1], input + ioff, ilen - ioff);
			if (k <= 0 || (ioff += (size_t)k) >= ilen) {
				close(in[1]);
				in[1] = -1;
			}
		}
	}
	if (in[1] >= 0)
		close(in[1]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	r->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void tu_run_dispose(struct tu_run *r)
{
	free(r->out);
	free(r->err);
	memset(r, 0, sizeof(*r));
}

void tu_assert_bad_config(const struct tu_bad_config *c, int r, const ds_err *err, const char *file)
{
	if (r != -EINVAL || !strstr(err->msg, c->msg) || err->line != c->line || err->col != c->col)
		fail_msg("case '%s': r=%d at %d:%d '%s' (want %d:%d '%s')", c->name, r, err->line,
			 err->col, err->msg, c->line, c->col, c->msg);
	assert_string_equal(err->file, file);
}

int tu_spawn(const char *log_path, const char *const argv[])
{
	pid_t pid, parent = getpid();
	int fd;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		fail_msg("fork: %s", strerror(errno));
	if (pid == 0) {
		fd = open("/dev/null", O_RDONLY);
		if (fd >= 0)
			dup2(fd, 0);
		fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		/* Nothing else: an agent left behind by a failed test must not hold what
		 * the test inherited (the cluster lock of flock, sockets). */
		closefrom(3);
		/* Gone with the test process, even when a failing test did not stop it. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	return (int)pid;
}

int tu_wait_exit(int pid, int timeout_ms)
{
	int status = 0;

	for (int waited = 0;; waited += 20) {
		pid_t r = waitpid((pid_t)pid, &status, WNOHANG);

		if (r == (pid_t)pid)
			break;
		if (waited >= timeout_ms) {
			kill((pid_t)pid, SIGKILL);
			waitpid((pid_t)pid, &status, 0);
			return -1;
		}
		usleep(20000);
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
