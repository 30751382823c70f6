#include "e2e_session.h"

#include "drasync/clock.h"
#include "benchutil.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* A TCP port of 127.0.0.1 free at the time of the call. */
static int free_port(void)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0)
		bu_die("cannot find a free port: %s", strerror(errno));
	port = ntohs(a.sin_port);
	close(fd);
	return port;
}

/* The Z85 key of a .pub file: its first line that is not a comment. */
static void pub_key(const char *path, char *out, size_t size)
{
	char *text = bu_read_file(path);

	out[0] = '\0';
	for (char *p = text; p && *p;) {
		size_t k = strcspn(p, "\n");
		if (*p != '#' && k > 0) {
			snprintf(out, size, "%.*s", (int)k, p);
			break;
		}
		p += k;
		if (*p)
			p++;
	}
	free(text);
	if (strlen(out) != 40)
		bu_die("no Z85 key in %s", path);
}

void e2e_make_keys(const struct opts *o, struct keys *k)
{
	char src_pub[64], line[200], path[700];

	snprintf(k->target_dir, sizeof(k->target_dir), "%s/keys/target", o->work);
	snprintf(k->source_dir, sizeof(k->source_dir), "%s/keys/source", o->work);
	snprintf(path, sizeof(path), "%s/keys", o->work);
	if (mkdir(path, 0700) < 0 || mkdir(k->target_dir, 0700) < 0 ||
	    mkdir(k->source_dir, 0700) < 0)
		bu_die("cannot make %s/...: %s", path, strerror(errno));
	free(bu_run((const char *[]){o->target_agent, "keygen", "--out", k->target_dir, NULL},
		    o->work, "keygen-target"));
	free(bu_run((const char *[]){o->source_agent, "keygen", "--out", k->source_dir, NULL},
		    o->work, "keygen-source"));
	snprintf(path, sizeof(path), "%s/target.pub", k->target_dir);
	pub_key(path, k->target_pub, sizeof(k->target_pub));
	snprintf(path, sizeof(path), "%s/source.pub", k->source_dir);
	pub_key(path, src_pub, sizeof(src_pub));
	snprintf(k->auth, sizeof(k->auth), "%s/authorized_sources", k->target_dir);
	snprintf(line, sizeof(line), "%s %s\n", SOURCE_CLUSTER, src_pub);
	bu_write_file(k->auth, line);
}

/* TargetConfig for sources src_prefix-i -> dst_prefix-i (i < n). */
static void write_target_config(const struct opts *o, struct session *s, const struct keys *k,
				const char *src_prefix, const char *dst_prefix, unsigned n)
{
	char text[16384];
	size_t used;

	used =
	    (size_t)snprintf(text, sizeof(text),
			     "apiVersion: drasync.io/v1alpha1\n"
			     "kind: TargetConfig\n"
			     "listen: \"tcp://127.0.0.1:*\"\n"
			     "keys: {secretKeyFile: \"%s/target.key\", authorizedSources: \"%s\"}\n"
			     "kubeconfig: \"%s\"\n"
			     "stateDir: \"%s\"\n"
			     "mode: migrate\n"
			     "namespaceMappings:\n",
			     k->target_dir, k->auth, o->target_kc, s->target_state);
	for (unsigned i = 0; i < n && used < sizeof(text); i++)
		used += (size_t)snprintf(text + used, sizeof(text) - used, "  %s-%u: %s-%u\n",
					 src_prefix, i, dst_prefix, i);
	if (used >= sizeof(text))
		bu_die("target configuration too long");
	bu_write_file(s->target_cfg, text);
}

void e2e_session_init(const struct opts *o, struct session *s, const struct keys *k,
		      const char *tag, const char *src_prefix, const char *dst_prefix, unsigned n)
{
	memset(s, 0, sizeof(*s));
	s->tag = tag;
	bu_ns_list(s->src_ns, sizeof(s->src_ns), src_prefix, n);
	snprintf(s->target_cfg, sizeof(s->target_cfg), "%s/%s-target.yaml", o->work, tag);
	snprintf(s->source_cfg, sizeof(s->source_cfg), "%s/%s-source.yaml", o->work, tag);
	snprintf(s->target_log, sizeof(s->target_log), "%s/%s-target.log", o->work, tag);
	snprintf(s->source_log, sizeof(s->source_log), "%s/%s-source.log", o->work, tag);
	snprintf(s->proxy_log, sizeof(s->proxy_log), "%s/%s-proxy.log", o->work, tag);
	snprintf(s->target_state, sizeof(s->target_state), "%s/%s-target-state", o->work, tag);
	snprintf(s->source_state, sizeof(s->source_state), "%s/%s-source-state", o->work, tag);
	snprintf(s->ledger, sizeof(s->ledger), "%s/ledger.db", s->target_state);
	write_target_config(o, s, k, src_prefix, dst_prefix, n);
}

void e2e_target_start(const struct opts *o, struct session *s)
{
	const char *argv[] = {o->target_agent, "run",	     "--config", s->target_cfg,
			      "--log-level",   o->log_level, NULL};
	double end = ds_clock_mono_s() + 60;

	bu_write_file(s->target_log, "");
	s->target = bu_spawn(argv, NULL, s->target_log);
	for (;;) {
		char *log = bu_read_file(s->target_log);
		const char *p = strstr(log, "event=started listen=");
		int st;

		if (p) {
			p += strlen("event=started listen=");
			snprintf(s->endpoint, sizeof(s->endpoint), "%.*s", (int)strcspn(p, " \n"),
				 p);
			free(log);
			return;
		}
		free(log);
		if (waitpid(s->target, &st, WNOHANG) == s->target) {
			bu_child_forget(s->target);
			bu_show_tail(s->target_log);
			bu_die("drasync-target run exited before it listened (log: %s)",
			       s->target_log);
		}
		if (ds_clock_mono_s() > end) {
			bu_show_tail(s->target_log);
			bu_die("drasync-target run did not start within 60 s");
		}
		bu_msleep(50);
	}
}

/* GET http://127.0.0.1:PORT/stats of the proxy, parsed; NULL when it does not answer. */
static json_t *proxy_stats(const struct opts *o, int port)
{
	char url[64];
	const char *argv[] = {"/usr/bin/curl", "-sS", "--max-time", "5", url, NULL};
	char out[600], log[600];
	json_t *j;
	char *text;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/stats", port);
	snprintf(out, sizeof(out), "%s/proxy-stats.out", o->work);
	snprintf(log, sizeof(log), "%s/proxy-stats.log", o->work);
	if (bu_wait_child(bu_spawn(argv, out, log)) != 0)
		return NULL;
	text = bu_read_file(out);
	j = json_loads(text, 0, NULL);
	free(text);
	return j;
}

double e2e_proxy_bytes(const struct opts *o, const struct session *s, double *up)
{
	json_t *j = proxy_stats(o, s->proxy_control);
	double b;

	if (!j)
		bu_die("the faultproxy's /stats does not answer (log: %s)", s->proxy_log);
	b = json_number_value(json_object_get(j, "bytes_up")) +
	    json_number_value(json_object_get(j, "bytes_down"));
	if (up)
		*up = json_number_value(json_object_get(j, "bytes_up"));
	json_decref(j);
	return b;
}

/* The faultproxy between the agents: listen -> the target's endpoint. */
void e2e_proxy_start(const struct opts *o, struct session *s)
{
	char listen[64], to[256], control[64], lat[16], rate[16], ep[128];
	const char *host_port = strstr(s->endpoint, "://");
	const char *argv[] = {o->faultproxy, "tcp",   "--listen",     listen, "--to",	     to,
			      "--control",   control, "--latency-ms", lat,    "--rate-kbit", rate,
			      NULL};
	double end = ds_clock_mono_s() + 30;
	json_t *j;

	if (!host_port)
		bu_die("endpoint %s is not tcp://HOST:PORT", s->endpoint);
	snprintf(to, sizeof(to), "%s", host_port + 3);
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", free_port());
	s->proxy_control = free_port();
	snprintf(control, sizeof(control), "127.0.0.1:%d", s->proxy_control);
	snprintf(lat, sizeof(lat), "%u", o->wan_latency_ms);
	snprintf(rate, sizeof(rate), "%u", o->wan_rate_kbit);
	s->proxy = bu_spawn(argv, NULL, s->proxy_log);
	while (!(j = proxy_stats(o, s->proxy_control))) {
		int st;
		if (waitpid(s->proxy, &st, WNOHANG) == s->proxy) {
			bu_child_forget(s->proxy);
			bu_show_tail(s->proxy_log);
			bu_die("the faultproxy exited (log: %s)", s->proxy_log);
		}
		if (ds_clock_mono_s() > end)
			bu_die("the faultproxy did not answer on %s within 30 s", control);
		bu_msleep(100);
	}
	json_decref(j);
	snprintf(ep, sizeof(ep), "tcp://%s", listen);
	printf("%s: faultproxy tcp %s -> %s, %u ms each way (RTT %u ms), %u kbit/s each way\n",
	       s->tag, listen, to, o->wan_latency_ms, 2 * o->wan_latency_ms, o->wan_rate_kbit);
	snprintf(s->endpoint, sizeof(s->endpoint), "%s", ep);
}

void e2e_source_start(const struct opts *o, struct session *s, const struct keys *k)
{
	char text[8192];
	const char *argv[] = {o->source_agent, "run",	     "--config", s->source_cfg,
			      "--log-level",   o->log_level, NULL};

	snprintf(text, sizeof(text),
		 "apiVersion: drasync.io/v1alpha1\n"
		 "kind: SourceConfig\n"
		 "clusterName: %s\n"
		 "target: {endpoint: \"%s\", serverPublicKey: \"%s\"}\n"
		 "keys: {secretKeyFile: \"%s/source.key\"}\n"
		 "kubeconfig: \"%s\"\n"
		 "stateDir: \"%s\"\n"
		 "namespaces: [%s]\n"
		 "schedule: {mode: watch}\n",
		 SOURCE_CLUSTER, s->endpoint, k->target_pub, k->source_dir, o->source_kc,
		 s->source_state, s->src_ns);
	bu_write_file(s->source_cfg, text);
	bu_write_file(s->source_log, "");
	s->source = bu_spawn(argv, NULL, s->source_log);
}

static void stop(pid_t *pid, const char *what)
{
	int st;

	if (*pid <= 0)
		return;
	kill(*pid, SIGTERM);
	for (int i = 0; i < 300; i++) {
		if (waitpid(*pid, &st, WNOHANG) == *pid) {
			if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
				fprintf(stderr, "bench e2e: %s ended with status %d\n", what, st);
			bu_child_forget(*pid);
			*pid = 0;
			return;
		}
		bu_msleep(100);
	}
	kill(*pid, SIGKILL);
	waitpid(*pid, &st, 0);
	bu_child_forget(*pid);
	*pid = 0;
	fprintf(stderr, "bench e2e: %s did not stop on SIGTERM within 30 s\n", what);
}

void e2e_session_stop(struct session *s)
{
	stop(&s->source, "drasync-source run");
	stop(&s->target, "drasync-target run");
	stop(&s->proxy, "faultproxy");
	if (s->db)
		sqlite3_close(s->db);
	s->db = NULL;
}

/* ---- the target's ledger ---------------------------------------------------- */

/* The target's ledger, read-only, once it exists: false before. */
static bool ledger_open(struct session *s)
{
	struct stat sb;

	if (s->db)
		return true;
	if (stat(s->ledger, &sb) < 0)
		return false;
	if (sqlite3_open_v2(s->ledger, &s->db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
		bu_die("cannot open %s: %s", s->ledger, sqlite3_errmsg(s->db));
	sqlite3_busy_timeout(s->db, 2000);
	return true;
}

/* Rows of object_state named PREFIX-... that are applied; -1 before the ledger exists. */
static long ledger_applied(struct session *s, const char *prefix)
{
	sqlite3_stmt *q = NULL;
	char like[64];
	long c = -1;

	if (!ledger_open(s))
		return -1;
	if (sqlite3_prepare_v2(s->db,
			       "SELECT count(*) FROM object_state WHERE state = 'applied' AND "
			       "name LIKE ?",
			       -1, &q, NULL) != SQLITE_OK) {
		sqlite3_finalize(q); /* the applier may not have made the table yet */
		return -1;
	}
	snprintf(like, sizeof(like), "%s-%%", prefix);
	sqlite3_bind_text(q, 1, like, -1, SQLITE_TRANSIENT);
	if (sqlite3_step(q) == SQLITE_ROW)
		c = sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	return c;
}

/* seq of the ledger's row for ConfigMap name when it is applied, else 0. */
long long e2e_ledger_applied_seq(struct session *s, const char *name)
{
	sqlite3_stmt *q = NULL;
	long long seq = 0;

	if (!s->db ||
	    sqlite3_prepare_v2(s->db,
			       "SELECT seq FROM object_state WHERE kind = 'ConfigMap' AND "
			       "name = ? AND state = 'applied'",
			       -1, &q, NULL) != SQLITE_OK)
		bu_die("ledger %s: cannot read", s->ledger);
	sqlite3_bind_text(q, 1, name, -1, SQLITE_TRANSIENT);
	if (sqlite3_step(q) == SQLITE_ROW)
		seq = sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	return seq;
}

static void ledger_show_unapplied(struct session *s)
{
	sqlite3_stmt *q = NULL;

	if (!s->db || sqlite3_prepare_v2(s->db,
					 "SELECT key, state, reason FROM object_state WHERE state "
					 "!= 'applied' LIMIT 10",
					 -1, &q, NULL) != SQLITE_OK)
		return;
	while (sqlite3_step(q) == SQLITE_ROW)
		fprintf(stderr, "  %s: %s: %s\n", sqlite3_column_text(q, 0),
			sqlite3_column_text(q, 1),
			sqlite3_column_text(q, 2) ? (const char *)sqlite3_column_text(q, 2) : "");
	sqlite3_finalize(q);
}

void e2e_check_alive(struct session *s)
{
	pid_t *p[] = {&s->target, &s->source, &s->proxy};
	const char *what[] = {s->target_log, s->source_log, s->proxy_log};

	for (int i = 0; i < 3; i++) {
		int st;
		if (*p[i] > 0 && waitpid(*p[i], &st, WNOHANG) == *p[i]) {
			bu_child_forget(*p[i]);
			*p[i] = 0;
			bu_show_tail(what[i]);
			bu_die("%s: a process exited with status %d (log: %s)", s->tag, st,
			       what[i]);
		}
	}
}

/*
 * Wait until want objects named prefix-... are applied; the seconds since t0.
 * Every 200 ms: the count reads the whole ledger, and polling it every 25 ms
 * took 6 CPU s of a 55 s sync from the agents and API servers it measures.
 */
/* Records of op 4 (a snapshot's end) in the ledger; -1 before it exists. */
static long ledger_snapshot_ends(struct session *s)
{
	sqlite3_stmt *q = NULL;
	long c = -1;

	if (!ledger_open(s))
		return -1;
	if (sqlite3_prepare_v2(s->db, "SELECT count(*) FROM records WHERE op = 4", -1, &q, NULL) !=
	    SQLITE_OK) {
		sqlite3_finalize(q); /* the receiver may not have made the table yet */
		return -1;
	}
	if (sqlite3_step(q) == SQLITE_ROW)
		c = sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	return c;
}

double e2e_wait_committed(const struct opts *o, struct session *s, double t0)
{
	for (;;) {
		double now;

		bu_msleep(50);
		now = ds_clock_mono_s();
		if (ledger_snapshot_ends(s) >= 1)
			return now - t0;
		e2e_check_alive(s);
		if (now - t0 > o->timeout) {
			bu_show_tail(s->source_log);
			bu_show_tail(s->target_log);
			bu_die("%s: no snapshot end committed after %.1f s (logs: %s, %s)", s->tag,
			       now - t0, s->source_log, s->target_log);
		}
	}
}

double e2e_wait_applied(const struct opts *o, struct session *s, const char *prefix, long want,
			double t0)
{
	double last_progress = ds_clock_mono_s();
	long last = -1;

	for (;;) {
		double now;
		long applied;

		bu_msleep(200);
		now = ds_clock_mono_s();
		applied = ledger_applied(s, prefix);
		if (applied >= want)
			return now - t0;
		if (applied != last) {
			last = applied;
			last_progress = now;
		}
		e2e_check_alive(s);
		if (now - last_progress > 120 || now - t0 > o->timeout) {
			fprintf(stderr,
				"bench e2e: %s: %ld of %ld applied after %.1f s; some rows:\n",
				s->tag, applied, want, now - t0);
			ledger_show_unapplied(s);
			bu_show_tail(s->source_log);
			bu_show_tail(s->target_log);
			bu_die("%s: the target did not apply every object (logs: %s, %s)", s->tag,
			       s->source_log, s->target_log);
		}
	}
}

/* The source's records pushed so far: `drasync-source status -o json`, pushedSeq. */
double e2e_source_pushed(const struct opts *o, const struct session *s)
{
	const char *argv[] = {o->source_agent, "status", "--config", s->source_cfg, "-o",
			      "json",	       NULL};
	char out_path[600], log[600], *out;
	json_t *j;
	double v;
	int rc;

	/* exit 1 with the JSON: the status needs attention (said on stderr) */
	snprintf(out_path, sizeof(out_path), "%s/source-status.out", o->work);
	snprintf(log, sizeof(log), "%s/source-status.log", o->work);
	rc = bu_wait_child(bu_spawn(argv, out_path, log));
	out = bu_read_file(out_path);
	j = json_loads(out, 0, NULL);
	if (rc != 0 && rc != 1)
		bu_die("drasync-source status exited %d (log: %s)", rc, log);

	if (!j || !json_object_get(j, "pushedSeq"))
		bu_die("drasync-source status -o json: no pushedSeq in:\n%s", out);
	v = json_number_value(json_object_get(j, "pushedSeq"));
	json_decref(j);
	free(out);
	return v;
}

/* ---- the objects ---------------------------------------------------------- */
