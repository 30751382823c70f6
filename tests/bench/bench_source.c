/*
 * scripts/bench.sh source (run by tests/bench/source.sh, which starts the
 * cluster): `drasync-source run` as a real process against a target hosted
 * here, in process (ds_receiver over CURVE, its handler counting records).
 * Between the agent and the receiver sits a TCP relay of this program that
 * counts the bytes on the wire in each direction (TCP payload: ZMTP
 * greetings, the CURVE handshake, Hello/Welcome, batches, acks, heartbeats;
 * not the TCP/IP headers).
 *
 *   (a) first pass over MIXED objects (tests/bench/loadgen -mode mixed):
 *       wall time from the agent's start to its exit (`schedule: once` exits
 *       once the target has acknowledged every record) -> records/s, and the
 *       agent's peak RSS (VmHWM, see struct child);
 *   (b) one ConfigMap changed (loadgen -patch), the agent run once more on
 *       the same state: records received and bytes on the wire for that run;
 *   (c) first pass over CONFIGMAPS ConfigMaps in a fresh state dir, against
 *       a fresh target -> the agent's peak RSS.
 *
 * Usage:
 *   bench_source --agent BIN --loadgen BIN --kubeconfig AGENT_KC --admin-kubeconfig KC
 *                --work DIR [--mixed N] [--mixed-namespaces K] [--configmaps N]
 *                [--configmap-namespaces K] [--configmap-size B] [--workers W]
 *                [--log-level L] [--agent-timeout SECONDS]
 *   bench_source --selftest DIR   (no cluster: the receiver, the relay and
 *                                  their counters, driven by an in-process sender)
 * Last line: RESULT first_pass_per_s=N one_change_records=N one_change_bytes=N rss_mb_100k=N
 */
#include "drasync/keys.h"
#include "drasync/outbox.h"
#include "drasync/receiver.h"
#include "drasync/sender.h"
#include "drasync/source_config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "bench source: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

/* ---- what the target saw ---------------------------------------------- */

struct counts {
	atomic_ullong records;
	atomic_ullong ops[DS_RECORD_OP_MAX];
	atomic_ullong payload_bytes;  /* uncompressed canonical JSON */
	atomic_ullong envelope_bytes; /* names, identity, hash, (epoch, seq), manifest */
	atomic_ullong up, down;	      /* TCP payload through the relay */
	atomic_ullong connections;
	atomic_ullong last_record_ns; /* CLOCK_MONOTONIC of the last record committed */
	/* The first few records, "Kind namespace/name" (only the handler's thread writes). */
	char first[4][160];
	unsigned n_first;
};

static void counts_reset(struct counts *c)
{
	atomic_store(&c->records, 0);
	for (int i = 0; i < DS_RECORD_OP_MAX; i++)
		atomic_store(&c->ops[i], 0);
	atomic_store(&c->payload_bytes, 0);
	atomic_store(&c->envelope_bytes, 0);
	atomic_store(&c->up, 0);
	atomic_store(&c->down, 0);
	atomic_store(&c->connections, 0);
	atomic_store(&c->last_record_ns, 0);
	c->n_first = 0;
}

static size_t slen(const char *s)
{
	return s ? strlen(s) : 0;
}

static void on_record(void *ud, const char *source, const ds_record *rec, ds_record_result *res)
{
	struct counts *c = ud;
	size_t env = 16 + DS_HASH_LEN + slen(rec->api_version) + slen(rec->kind) + slen(rec->ns) +
		     slen(rec->name) + slen(rec->source_uid) + slen(rec->source_resource_version) +
		     slen(rec->snapshot_id);

	(void)source;
	for (size_t i = 0; i < rec->manifest_len; i++)
		env += slen(rec->manifest[i].key) + DS_HASH_LEN;
	if (c->n_first < 4 && rec->op == DS_RECORD_UPSERT)
		snprintf(c->first[c->n_first++], sizeof(c->first[0]), "%s %s/%s", rec->kind,
			 rec->ns ? rec->ns : "", rec->name);
	atomic_fetch_add(&c->records, 1);
	if (rec->op > 0 && rec->op < DS_RECORD_OP_MAX)
		atomic_fetch_add(&c->ops[rec->op], 1);
	atomic_fetch_add(&c->payload_bytes, rec->payload_len);
	atomic_fetch_add(&c->envelope_bytes, env);
	atomic_store(&c->last_record_ns, (unsigned long long)(now_s() * 1e9));
	res->status = DS_RESULT_OK;
	res->message[0] = '\0';
}

/* ---- the relay: agent -> relay -> receiver, counting bytes --------------- */

#define RELAY_PAIRS 16

struct relay {
	int listen_fd;
	int port;
	int upstream_port; /* the receiver's */
	struct counts *counts;
	atomic_bool stop;
	pthread_t thread;
	int fds[RELAY_PAIRS][2]; /* [0] from the agent, [1] to the receiver; -1: free */
};

static int tcp_connect_local(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void pair_close(struct relay *r, int i)
{
	close(r->fds[i][0]);
	close(r->fds[i][1]);
	r->fds[i][0] = r->fds[i][1] = -1;
}

/* Copy what one side has to the other (blocking write: loopback, and the
 * peers drain their sockets). @return false when the pair is done */
static bool pump(struct relay *r, int from, int to, atomic_ullong *count)
{
	char buf[65536];
	ssize_t n = read(from, buf, sizeof(buf));

	if (n <= 0)
		return false;
	atomic_fetch_add(count, (unsigned long long)n);
	for (ssize_t off = 0; off < n;) {
		ssize_t w = write(to, buf + off, (size_t)(n - off));
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		off += w;
	}
	(void)r;
	return true;
}

static void *relay_run(void *arg)
{
	struct relay *r = arg;

	while (!atomic_load(&r->stop)) {
		struct pollfd p[1 + 2 * RELAY_PAIRS];
		int idx[1 + 2 * RELAY_PAIRS];
		nfds_t n = 0;

		p[n] = (struct pollfd){.fd = r->listen_fd, .events = POLLIN};
		idx[n++] = -1;
		for (int i = 0; i < RELAY_PAIRS; i++) {
			if (r->fds[i][0] < 0)
				continue;
			for (int s = 0; s < 2; s++) {
				p[n] = (struct pollfd){.fd = r->fds[i][s], .events = POLLIN};
				idx[n++] = i * 2 + s;
			}
		}
		if (poll(p, n, 100) <= 0)
			continue;
		for (nfds_t k = 0; k < n; k++) {
			if (!(p[k].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			if (idx[k] < 0) {
				int in = accept4(r->listen_fd, NULL, NULL, SOCK_CLOEXEC), out, i;
				if (in < 0)
					continue;
				for (i = 0; i < RELAY_PAIRS && r->fds[i][0] >= 0; i++)
					;
				out = tcp_connect_local(r->upstream_port);
				if (i == RELAY_PAIRS || out < 0) {
					close(in);
					if (out >= 0)
						close(out);
					continue;
				}
				r->fds[i][0] = in;
				r->fds[i][1] = out;
				atomic_fetch_add(&r->counts->connections, 1);
				continue;
			}
			{
				int i = idx[k] / 2, s = idx[k] % 2;
				if (r->fds[i][0] < 0)
					continue; /* closed earlier in this round */
				if (!pump(r, r->fds[i][s], r->fds[i][!s],
					  s == 0 ? &r->counts->up : &r->counts->down))
					pair_close(r, i);
			}
		}
	}
	for (int i = 0; i < RELAY_PAIRS; i++)
		if (r->fds[i][0] >= 0)
			pair_close(r, i);
	return NULL;
}

static void relay_start(struct relay *r, int upstream_port, struct counts *c)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t len = sizeof(a);
	int one = 1;

	memset(r, 0, sizeof(*r));
	for (int i = 0; i < RELAY_PAIRS; i++)
		r->fds[i][0] = r->fds[i][1] = -1;
	r->upstream_port = upstream_port;
	r->counts = c;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	r->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (r->listen_fd < 0 ||
	    setsockopt(r->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(r->listen_fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(r->listen_fd, 16) < 0 ||
	    getsockname(r->listen_fd, (struct sockaddr *)&a, &len) < 0)
		die("relay: %s", strerror(errno));
	r->port = ntohs(a.sin_port);
	pthread_create(&r->thread, NULL, relay_run, r);
}

static void relay_stop(struct relay *r)
{
	atomic_store(&r->stop, true);
	pthread_join(r->thread, NULL);
	close(r->listen_fd);
}

/* ---- the target: receiver + relay ----------------------------------------- */

struct target {
	ds_receiver *receiver;
	pthread_t thread;
	struct relay relay;
	struct counts counts;
};

static void *serve(void *arg)
{
	ds_err err = {0};

	if (ds_receiver_run(arg, &err) < 0)
		fprintf(stderr, "bench source: receiver: %s\n", err.msg);
	return NULL;
}

static void target_start(struct target *t, const char *dir, const ds_keypair *server,
			 const ds_keypair *source)
{
	char auth[600], inbox[600];
	ds_receiver_config rc;
	ds_err err = {0};
	const char *ep, *colon;
	FILE *f;

	memset(t, 0, sizeof(*t));
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		die("cannot create %s", dir);
	snprintf(auth, sizeof(auth), "%s/authorized_sources", dir);
	snprintf(inbox, sizeof(inbox), "%s/inbox.db", dir);
	f = fopen(auth, "w");
	if (!f)
		die("cannot write %s", auth);
	fprintf(f, "bench-source %s\n", source->public_z85);
	fclose(f);
	ds_receiver_config_default(&rc);
	rc.endpoint = "tcp://127.0.0.1:*";
	rc.keys = server;
	rc.authorized_sources = auth;
	rc.inbox_path = inbox;
	rc.handler = on_record;
	rc.handler_ud = &t->counts;
	if (ds_receiver_new(&t->receiver, &rc, &err) < 0)
		die("receiver: %s", err.msg);
	ep = ds_receiver_endpoint(t->receiver);
	colon = strrchr(ep, ':');
	if (!colon)
		die("receiver endpoint %s has no port", ep);
	pthread_create(&t->thread, NULL, serve, t->receiver);
	relay_start(&t->relay, atoi(colon + 1), &t->counts);
}

static void target_stop(struct target *t)
{
	relay_stop(&t->relay);
	ds_receiver_stop(t->receiver);
	pthread_join(t->thread, NULL);
	ds_receiver_free(t->receiver);
}

/* ---- child processes ------------------------------------------------------ */

/*
 * The peak RSS of a child is its VmHWM (/proc/PID/status), read every few
 * milliseconds while it runs: the kernel's high-water mark of the program's
 * own address space. wait4's ru_maxrss is not used for the figure: Linux
 * folds into it the RSS of the address space the child had before exec,
 * which after fork() is a copy of this harness's.
 */
struct child {
	int status;	/* exit code, 128+signal, or -1 when killed at the timeout */
	double started; /* now_s() at the spawn */
	double seconds; /* spawn to exit */
	long hwm_kib;	/* the last VmHWM read before the exit */
};

static long vm_hwm_kib(pid_t pid)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "VmHWM:", 6) == 0) {
			kib = strtol(line + 6, NULL, 10);
			break;
		}
	fclose(f);
	return kib;
}

/* Run argv, its stdout and stderr appended to `log`; kill it after timeout_s. */
static void run_child(struct child *c, const char *const argv[], const char *log, double timeout_s)
{
	double t0 = now_s();
	int st = 0, exec_pipe[2];
	char byte;
	pid_t pid;

	memset(c, 0, sizeof(*c));
	c->started = t0;
	if (pipe2(exec_pipe, O_CLOEXEC) < 0)
		die("pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
		close(exec_pipe[0]);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		execv(argv[0], (char *const *)argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		if (write(exec_pipe[1], "x", 1) < 0)
			_exit(126);
		_exit(127);
	}
	/* The pipe closes on exec: from then on /proc shows the program's own
	 * address space, not the copy of ours that fork() made. */
	close(exec_pipe[1]);
	while (read(exec_pipe[0], &byte, 1) < 0 && errno == EINTR)
		;
	close(exec_pipe[0]);
	for (;;) {
		pid_t w = waitpid(pid, &st, WNOHANG);
		long hwm;
		if (w == pid)
			break;
		if (w < 0 && errno != EINTR)
			die("waitpid: %s", strerror(errno));
		hwm = vm_hwm_kib(pid);
		if (hwm > c->hwm_kib)
			c->hwm_kib = hwm;
		if (now_s() - t0 > timeout_s) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			c->seconds = now_s() - t0;
			c->status = -1;
			return;
		}
		usleep(2000);
	}
	c->seconds = now_s() - t0;
	c->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void show_tail(const char *log)
{
	char cmd[700];

	snprintf(cmd, sizeof(cmd), "tail -n 30 '%s' >&2", log);
	if (system(cmd) != 0)
		fprintf(stderr, "bench source: (could not show %s)\n", log);
}

struct opts {
	const char *agent, *loadgen, *kubeconfig, *admin_kubeconfig, *work, *log_level;
	unsigned mixed, mixed_ns, configmaps, configmap_ns, configmap_size, workers;
	double agent_timeout;
};

/* "PREFIX-0,PREFIX-1,..." into buf. */
static void ns_list(char *buf, size_t size, const char *prefix, unsigned n)
{
	size_t o = 0;

	buf[0] = '\0';
	for (unsigned i = 0; i < n && o < size; i++)
		o += (size_t)snprintf(buf + o, size - o, "%s%s-%u", i ? "," : "", prefix, i);
}

static void loadgen(const struct opts *o, const char *mode, const char *namespaces, unsigned count,
		    const char *prefix)
{
	char n[32], w[32], size[32];
	struct child c;
	char log[600];
	const char *argv[] = {o->loadgen,
			      "-kubeconfig",
			      o->admin_kubeconfig,
			      "-mode",
			      mode,
			      "-namespaces",
			      namespaces,
			      "-count",
			      n,
			      "-workers",
			      w,
			      "-size",
			      size,
			      "-prefix",
			      prefix,
			      NULL};

	snprintf(n, sizeof(n), "%u", count);
	snprintf(w, sizeof(w), "%u", o->workers);
	snprintf(size, sizeof(size), "%u", o->configmap_size);
	snprintf(log, sizeof(log), "%s/loadgen.log", o->work);
	run_child(&c, argv, log, 3600);
	if (c.status != 0) {
		show_tail(log);
		die("loadgen -mode %s failed", mode);
	}
	printf("generated %u %s objects in %u namespace(s) in %.1f s (%.0f/s, %u workers%s)\n",
	       count, mode, strcmp(mode, "mixed") == 0 ? o->mixed_ns : o->configmap_ns, c.seconds,
	       count / c.seconds, o->workers,
	       strcmp(mode, "mixed") == 0 ? ", with the wait for the Deployment controller" : "");
	fflush(stdout);
}

static void write_config(const char *path, const char *state_dir, const char *namespaces, int port,
			 const ds_keypair *server, const char *key_file, const char *kubeconfig)
{
	FILE *f = fopen(path, "w");

	if (!f)
		die("cannot write %s", path);
	fprintf(f,
		"apiVersion: drasync.io/v1alpha1\n"
		"kind: SourceConfig\n"
		"clusterName: bench-source\n"
		"target: {endpoint: \"tcp://127.0.0.1:%d\", serverPublicKey: \"%s\"}\n"
		"keys: {secretKeyFile: \"%s\"}\n"
		"kubeconfig: \"%s\"\n"
		"stateDir: \"%s\"\n"
		"namespaces: [%s]\n"
		"schedule: {mode: once}\n",
		port, server->public_z85, key_file, kubeconfig, state_dir, namespaces);
	fclose(f);
}

/* One `drasync-source run` against target t; exits the benchmark unless it exits 0. */
static void agent(const struct opts *o, struct child *c, const char *config, const char *tag)
{
	char log[600];
	const char *argv[] = {o->agent,	     "run",	   "--config", config,
			      "--log-level", o->log_level, NULL};

	snprintf(log, sizeof(log), "%s/agent-%s.log", o->work, tag);
	run_child(c, argv, log, o->agent_timeout);
	if (c->status != 0) {
		show_tail(log);
		fprintf(stderr,
			"bench source: drasync-source run (%s) %s %d after %.1f s (log: %s)\n", tag,
			c->status < 0 ? "killed at the timeout," : "exited", c->status, c->seconds,
			log);
		exit(1);
	}
}

static void print_records(const char *what, const struct counts *c)
{
	printf("%s: %llu records (%llu upserts, %llu tombstones, %llu snapshot markers); "
	       "%llu bytes of JSON payload + %llu of envelope\n",
	       what, atomic_load(&c->records), atomic_load(&c->ops[DS_RECORD_UPSERT]),
	       atomic_load(&c->ops[DS_RECORD_DELETE]),
	       atomic_load(&c->ops[DS_RECORD_SNAPSHOT_BEGIN]) +
		   atomic_load(&c->ops[DS_RECORD_SNAPSHOT_END]),
	       atomic_load(&c->payload_bytes), atomic_load(&c->envelope_bytes));
}

static void print_wire(const char *what, const struct counts *c)
{
	printf("%s: on the wire %llu bytes (%llu source->target, %llu target->source; TCP payload "
	       "over %llu connection(s): ZMTP, CURVE handshake, Hello/Welcome, batches, acks, "
	       "heartbeats)\n",
	       what, atomic_load(&c->up) + atomic_load(&c->down), atomic_load(&c->up),
	       atomic_load(&c->down), atomic_load(&c->connections));
}

/* Seconds from the child's start to the last record the target committed (0: none). */
static double last_record_s(const struct counts *c, const struct child *ch)
{
	unsigned long long ns = atomic_load(&c->last_record_ns);

	return ns ? (double)ns / 1e9 - ch->started : 0;
}

static int bench(const struct opts *o)
{
	char keydir[512], keyfile[600], dir[600], cfg[600], state[600], nss[8192];
	ds_keypair server, source;
	struct target t;
	struct child a, b, c;
	ds_err err = {0};
	unsigned long long b_records, b_bytes;
	double rate;

	if (ds_keys_generate(&server, &err) < 0 || ds_keys_generate(&source, &err) < 0)
		die("keys: %s", err.msg);
	snprintf(keydir, sizeof(keydir), "%s/keys", o->work);
	if (ds_keys_write(keydir, "source", &source, true, &err) < 0)
		die("keys: %s", err.msg);
	snprintf(keyfile, sizeof(keyfile), "%s/source.key", keydir);

	/* (a) and (b): one target, one state dir. */
	ns_list(nss, sizeof(nss), "bench-mixed", o->mixed_ns);
	loadgen(o, "mixed", nss, o->mixed, "mixed");
	snprintf(dir, sizeof(dir), "%s/target-mixed", o->work);
	target_start(&t, dir, &server, &source);
	snprintf(cfg, sizeof(cfg), "%s/source-mixed.yaml", o->work);
	snprintf(state, sizeof(state), "%s/state-mixed", o->work);
	write_config(cfg, state, nss, t.relay.port, &server, keyfile, o->kubeconfig);
	agent(o, &a, cfg, "mixed-first");
	rate = (double)atomic_load(&t.counts.ops[DS_RECORD_UPSERT]) / a.seconds;
	print_records("first pass (mixed)", &t.counts);
	print_wire("first pass (mixed)", &t.counts);
	printf("first pass (mixed): %.2f s from the agent's start to its exit (all acknowledged): "
	       "%.0f objects/s; the last record was committed by the target %.2f s after the "
	       "start; peak RSS %.1f MiB\n",
	       a.seconds, rate, last_record_s(&t.counts, &a), (double)a.hwm_kib / 1024);
	fflush(stdout);

	{
		char name[200];
		const char *argv[] = {o->loadgen, "-kubeconfig", o->admin_kubeconfig,
				      "-patch",	  name,		 NULL};
		char log[600];
		struct child p;
		/* loadgen -mode mixed: object 4 is a ConfigMap, in the first namespace */
		snprintf(name, sizeof(name), "bench-mixed-0/mixed-configmap-4");
		snprintf(log, sizeof(log), "%s/loadgen.log", o->work);
		run_child(&p, argv, log, 120);
		if (p.status != 0) {
			show_tail(log);
			die("loadgen -patch %s failed", name);
		}
		printf("changed ConfigMap %s\n", name);
	}
	counts_reset(&t.counts);
	agent(o, &b, cfg, "mixed-change");
	b_records = atomic_load(&t.counts.records);
	b_bytes = atomic_load(&t.counts.up) + atomic_load(&t.counts.down);
	print_records("one change", &t.counts);
	for (unsigned i = 0; i < t.counts.n_first; i++)
		printf("one change: record %u: %s%s\n", i + 1, t.counts.first[i],
		       i == 3 && b_records > 4 ? " ..." : "");
	print_wire("one change", &t.counts);
	printf("one change: the agent ran %.2f s; peak RSS %.1f MiB\n", b.seconds,
	       (double)b.hwm_kib / 1024);
	fflush(stdout);
	target_stop(&t);

	/* (c): a fresh target and state dir. */
	ns_list(nss, sizeof(nss), "bench-cm", o->configmap_ns);
	loadgen(o, "configmaps", nss, o->configmaps, "cm");
	snprintf(dir, sizeof(dir), "%s/target-cm", o->work);
	target_start(&t, dir, &server, &source);
	snprintf(cfg, sizeof(cfg), "%s/source-cm.yaml", o->work);
	snprintf(state, sizeof(state), "%s/state-cm", o->work);
	write_config(cfg, state, nss, t.relay.port, &server, keyfile, o->kubeconfig);
	agent(o, &c, cfg, "cm-first");
	print_records("first pass (ConfigMaps)", &t.counts);
	print_wire("first pass (ConfigMaps)", &t.counts);
	printf("first pass (%u ConfigMaps of %u bytes): %.2f s, %.0f objects/s (last record "
	       "committed after %.2f s); peak RSS %.1f MiB\n",
	       o->configmaps, o->configmap_size, c.seconds,
	       (double)atomic_load(&t.counts.ops[DS_RECORD_UPSERT]) / c.seconds,
	       last_record_s(&t.counts, &c), (double)c.hwm_kib / 1024);
	target_stop(&t);

	printf("targets: one_change_records = 1, one_change_bytes < 4096, rss_mb_100k <= 64\n");
	printf("RESULT first_pass_per_s=%.0f one_change_records=%llu one_change_bytes=%llu "
	       "rss_mb_100k=%.0f\n",
	       rate, b_records, b_bytes, (double)c.hwm_kib / 1024);
	return 0;
}

/* ---- --selftest: the target side alone, with an in-process sender -------- */

static int selftest(const char *work)
{
	enum { N = 300 };
	char dir[600], outbox[600];
	ds_keypair server, source;
	struct target t;
	ds_sender_config sc;
	ds_sender *s;
	ds_outbox *ob;
	ds_outbox_options oo;
	ds_record recs[N];
	char names[N][32], endpoint[64];
	const char *payload = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{"
			      "\"name\":\"x\",\"namespace\":\"bench\"},\"data\":{\"k\":\"v\"}}";
	ds_err err = {0};
	unsigned long long up, down, records, bytes;
	int fails = 0;

	if (ds_keys_generate(&server, &err) < 0 || ds_keys_generate(&source, &err) < 0)
		die("keys: %s", err.msg);
	snprintf(dir, sizeof(dir), "%s/target", work);
	target_start(&t, dir, &server, &source);
	snprintf(outbox, sizeof(outbox), "%s/outbox.db", work);
	ds_outbox_options_default(&oo);
	if (ds_outbox_open(&ob, outbox, &oo, &err) < 0)
		die("outbox: %s", err.msg);
	for (unsigned i = 0; i < N; i++) {
		memset(&recs[i], 0, sizeof(recs[i]));
		snprintf(names[i], sizeof(names[i]), "cm-%u", i);
		recs[i].op = DS_RECORD_UPSERT;
		recs[i].api_version = "v1";
		recs[i].kind = "ConfigMap";
		recs[i].ns = "bench";
		recs[i].name = names[i];
		recs[i].payload = (const uint8_t *)payload;
		recs[i].payload_len = strlen(payload);
	}
	if (ds_outbox_push(ob, recs, N, NULL, &err) < 0)
		die("push: %s", err.msg);
	ds_outbox_free(ob);

	snprintf(endpoint, sizeof(endpoint), "tcp://127.0.0.1:%d", t.relay.port);
	ds_sender_config_default(&sc);
	sc.endpoint = endpoint;
	sc.server_public_key = server.public_z85;
	sc.keys = &source;
	sc.outbox_path = outbox;
	sc.cluster_name = "bench-selftest";
	if (ds_sender_new(&s, &sc, &err) < 0)
		die("sender: %s", err.msg);
	if (ds_sender_run(s, N, 30000, &err) < 0)
		die("sender: %s", err.msg);
	ds_sender_free(s);
	usleep(200000); /* the last ack and the close pass the relay */
	target_stop(&t);

	records = atomic_load(&t.counts.records);
	bytes = atomic_load(&t.counts.payload_bytes);
	up = atomic_load(&t.counts.up);
	down = atomic_load(&t.counts.down);
	print_records("selftest", &t.counts);
	print_wire("selftest", &t.counts);
	if (records != N || atomic_load(&t.counts.ops[DS_RECORD_UPSERT]) != N) {
		fprintf(stderr, "selftest: %llu records received, %d sent\n", records, N);
		fails++;
	}
	if (bytes != (unsigned long long)N * strlen(payload)) {
		fprintf(stderr, "selftest: %llu payload bytes, %zu sent\n", bytes,
			(size_t)N * strlen(payload));
		fails++;
	}
	/* Every record crossed the relay (CURVE adds to each); acks came back. */
	if (up < bytes || down == 0 || atomic_load(&t.counts.connections) < 1) {
		fprintf(stderr, "selftest: the relay counted up=%llu down=%llu\n", up, down);
		fails++;
	}

	/* The configuration the agent gets is one its parser accepts. */
	{
		char cfg[700], log[700];
		ds_source_config *sc_file = NULL;
		size_t n_ns = 0;
		struct child c;
		const char *const sh[] = {"/bin/sh", "-c", "echo hi; exit 3", NULL};
		const char *const py[] = {"/usr/bin/python3", "-c",
					  "import time; x = bytearray(48 << 20); time.sleep(0.3)",
					  NULL};

		snprintf(cfg, sizeof(cfg), "%s/source.yaml", work);
		write_config(cfg, "/tmp/state", "bench-a,bench-b", 7450, &server,
			     "/tmp/keys/source.key", "/tmp/kubeconfig");
		if (ds_source_config_load(&sc_file, cfg, &err) < 0) {
			fprintf(stderr, "selftest: the written config is refused: %s\n", err.msg);
			fails++;
		} else {
			const char *const *ns = ds_source_config_namespaces(sc_file, &n_ns);
			if (n_ns != 2 || strcmp(ns[1], "bench-b") != 0 ||
			    ds_source_config_schedule(sc_file)->mode != DS_SCHEDULE_ONCE ||
			    strcmp(ds_source_config_endpoint(sc_file), "tcp://127.0.0.1:7450") !=
				0) {
				fprintf(stderr, "selftest: the written config reads back wrong\n");
				fails++;
			}
		}
		ds_source_config_free(sc_file);

		/* Children: exit status, and the peak RSS of the program itself. */
		snprintf(log, sizeof(log), "%s/child.log", work);
		run_child(&c, sh, log, 10);
		if (c.status != 3) {
			fprintf(stderr, "selftest: /bin/sh exited %d, not 3\n", c.status);
			fails++;
		}
		if (access(py[0], X_OK) == 0) {
			run_child(&c, py, log, 30);
			printf("selftest: python3 holding 48 MiB: VmHWM %.1f MiB\n",
			       (double)c.hwm_kib / 1024);
			if (c.status != 0 || c.hwm_kib < 48 * 1024 || c.hwm_kib > 120 * 1024) {
				fprintf(stderr, "selftest: python3 status %d, VmHWM %ld KiB\n",
					c.status, c.hwm_kib);
				fails++;
			}
		}
	}
	printf("selftest: %s\n", fails ? "FAILED" : "ok");
	return fails ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct opts o = {.log_level = "info",
			 .mixed = 10000,
			 .mixed_ns = 10,
			 .configmaps = 100000,
			 .configmap_ns = 4,
			 .configmap_size = 512,
			 .workers = 32,
			 .agent_timeout = 1800};

	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && strcmp(argv[1], "--selftest") == 0)
		return selftest(argv[2]);
	for (int i = 1; i + 1 < argc; i += 2) {
		const char *k = argv[i], *v = argv[i + 1];
		if (strcmp(k, "--agent") == 0)
			o.agent = v;
		else if (strcmp(k, "--loadgen") == 0)
			o.loadgen = v;
		else if (strcmp(k, "--kubeconfig") == 0)
			o.kubeconfig = v;
		else if (strcmp(k, "--admin-kubeconfig") == 0)
			o.admin_kubeconfig = v;
		else if (strcmp(k, "--work") == 0)
			o.work = v;
		else if (strcmp(k, "--log-level") == 0)
			o.log_level = v;
		else if (strcmp(k, "--mixed") == 0)
			o.mixed = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(k, "--mixed-namespaces") == 0)
			o.mixed_ns = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(k, "--configmaps") == 0)
			o.configmaps = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(k, "--configmap-namespaces") == 0)
			o.configmap_ns = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(k, "--configmap-size") == 0)
			o.configmap_size = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(k, "--workers") == 0)
			o.workers = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(k, "--agent-timeout") == 0)
			o.agent_timeout = strtod(v, NULL);
		else
			die("unknown option %s", k);
	}
	if (!o.agent || !o.loadgen || !o.kubeconfig || !o.admin_kubeconfig || !o.work ||
	    o.mixed_ns == 0 || o.configmap_ns == 0 || o.workers == 0)
		die("%s", "usage: bench_source --agent BIN --loadgen BIN --kubeconfig KC "
			  "--admin-kubeconfig KC --work DIR [...] | --selftest DIR");
	return bench(&o);
}
