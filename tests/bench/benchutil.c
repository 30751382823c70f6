#include "benchutil.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *name = "bench";

void bu_init(const char *bench_name)
{
	name = bench_name;
}

void bu_msleep(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* ---- children: bu_die() stops every one still running ------------------------ */

#define MAX_CHILDREN 16
static pid_t children[MAX_CHILDREN];

static void child_add(pid_t pid)
{
	for (int i = 0; i < MAX_CHILDREN; i++)
		if (children[i] == 0) {
			children[i] = pid;
			return;
		}
}

void bu_child_forget(pid_t pid)
{
	for (int i = 0; i < MAX_CHILDREN; i++)
		if (children[i] == pid)
			children[i] = 0;
}

void bu_die(const char *fmt, ...)
{
	va_list ap;

	for (int i = 0; i < MAX_CHILDREN; i++)
		if (children[i] > 0) {
			kill(children[i], SIGKILL);
			waitpid(children[i], NULL, 0);
			children[i] = 0;
		}
	va_start(ap, fmt);
	fprintf(stderr, "%s: ", name);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

char *bu_xstrdup(const char *s)
{
	char *d = strdup(s ? s : "");

	if (!d)
		bu_die("out of memory");
	return d;
}

char *bu_read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t len = 0, cap = 0, n;

	if (!f)
		return bu_xstrdup("");
	do {
		if (len + 65536 + 1 > cap) {
			cap = (len + 65536 + 1) * 2;
			buf = realloc(buf, cap);
			if (!buf)
				bu_die("out of memory");
		}
		n = fread(buf + len, 1, 65536, f);
		len += n;
	} while (n > 0);
	fclose(f);
	buf[len] = '\0';
	return buf;
}

void bu_write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (!f || fputs(text, f) < 0 || fclose(f) != 0)
		bu_die("cannot write %s: %s", path, strerror(errno));
}

pid_t bu_spawn(const char *const argv[], const char *out_path, const char *log)
{
	int exec_pipe[2];
	char byte;
	pid_t pid;

	if (pipe2(exec_pipe, O_CLOEXEC) < 0)
		bu_die("pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0)
		bu_die("fork: %s", strerror(errno));
	if (pid == 0) {
		int lfd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
		int ofd = out_path ? open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600) : lfd;
		int nul = open("/dev/null", O_RDONLY);
		close(exec_pipe[0]);
		if (lfd < 0 || ofd < 0 || nul < 0)
			_exit(126);
		dup2(nul, 0);
		dup2(ofd, 1);
		dup2(lfd, 2);
		execv(argv[0], (char *const *)argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		if (write(exec_pipe[1], "x", 1) < 0)
			_exit(126);
		_exit(127);
	}
	close(exec_pipe[1]);
	while (read(exec_pipe[0], &byte, 1) < 0 && errno == EINTR)
		;
	close(exec_pipe[0]);
	child_add(pid);
	return pid;
}

int bu_wait_child(pid_t pid)
{
	int st;

	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			bu_die("waitpid: %s", strerror(errno));
	bu_child_forget(pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void bu_show_tail(const char *log)
{
	char cmd[700];

	snprintf(cmd, sizeof(cmd), "tail -n 30 '%s' >&2", log);
	if (system(cmd) != 0)
		fprintf(stderr, "%s: (could not show %s)\n", name, log);
}

char *bu_run(const char *const argv[], const char *work, const char *tag)
{
	char out[600], log[600];
	int status;

	snprintf(out, sizeof(out), "%s/%s.out", work, tag);
	snprintf(log, sizeof(log), "%s/%s.log", work, tag);
	status = bu_wait_child(bu_spawn(argv, out, log));
	if (status != 0) {
		bu_show_tail(log);
		bu_die("%s (%s) exited %d (log: %s)", argv[0], tag, status, log);
	}
	return bu_read_file(out);
}

const char *bu_last_line(const char *text, const char *prefix)
{
	const char *found = NULL;

	for (const char *p = text; p && *p;) {
		if (strncmp(p, prefix, strlen(prefix)) == 0)
			found = p;
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	if (!found)
		bu_die("no line '%s...' in:\n%s", prefix, text);
	return found;
}

double bu_field(const char *line, const char *key)
{
	const char *p = strstr(line, key);

	if (!p)
		bu_die("no %s in '%.200s'", key, line);
	return strtod(p + strlen(key), NULL);
}

double bu_proc_cpu_s(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut = 0, st = 0;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	if (!p ||
	    sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

void bu_ns_list(char *buf, size_t size, const char *prefix, unsigned n)
{
	size_t o = 0;

	buf[0] = '\0';
	for (unsigned i = 0; i < n && o < size; i++)
		o += (size_t)snprintf(buf + o, size - o, "%s%s-%u", i ? "," : "", prefix, i);
}
