/*
 * The pair and its state on disk (issue 15): drasync-source run (watch mode,
 * v1 cluster) and drasync-target run (v1beta1 cluster) as processes.
 *
 * 1-2. The target's ledger damaged (its header overwritten) or truncated while
 *      the agent is stopped: the agent refuses to start, exit 1, naming the
 *      file and saying to move it aside; moved aside, a fresh start recovers
 *      from the source (what changed meanwhile included).
 * 3-4. The same for the source's outbox: a new outbox is a new epoch, whose
 *      snapshot brings the target up to date and prunes what the source no
 *      longer has.
 * 5.   The target's stateDir on a small tmpfs that fills up, first while the
 *      apply stage has work (its API writes held back by tests/kube/faultproxy
 *      until then): it says so and keeps trying, the agent runs on; then while
 *      records arrive: the agent says which file and to free space, the source's
 *      acknowledged seq never passes what the ledger committed, nothing is
 *      lost when the agent is killed while the disk is full, and everything
 *      arrives once there is space again.
 * 6.   The source's stateDir full: the agent says which file and to free
 *      space, exits 1 rather than going on without its outbox, and a restart
 *      once there is space syncs everything.
 *
 * Mounting a tmpfs needs root (CI runs as root); without it case 5-6 fail
 * saying so. Each prints `SOAK test=storage_faults case=... seconds=...`.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "testutil.h"
#include "tu_compare.h"
#include "tu_kube.h"
#include "tu_proxy.h"
#include "tu_site.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define SOURCE "prod-east"
#define N_OBJECTS 60

static const char *const kinds[] = {"v1/ConfigMap", "v1/Secret", NULL};

struct fx {
	tu_site s;
	ds_kube *src, *dst;
	char *ns;
	char dst_ns[300];
	char mounted[1100]; /* a tmpfs mounted there, "" when none */
	char filler[1200];
	int next;      /* the next ConfigMap's number */
	tu_proxy *api; /* in front of the target's API server, or NULL */
	long long t0;
};

static struct fx F;

/* ---- small things ------------------------------------------------------------------ */

static void create_cms(int n, int pad)
{
	for (int i = 0; i < n; i++, F.next++)
		tu_kube_create(
		    F.src, tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-%04d, "
				       "namespace: %s}\ndata: {i: \"%d\", pad: \"%0*d\"}\n",
				       F.next, F.ns, F.next, pad, F.next));
}

static void start_pair(void)
{
	tu_site_agent_start(&F.s);
	tu_site_source_start(&F.s, tu_env("DS_KUBECONFIG_V1"), NULL);
}

static void assert_in_sync(int timeout_ms)
{
	tu_assert_same_objects(F.src, F.ns, F.dst, F.dst_ns, kinds, timeout_ms);
}

/* Some change on the source: an update, a delete, a creation. */
static void change_source(void)
{
	tu_kube_merge(F.src, "v1", "ConfigMap", F.ns, "cm-0003", NULL,
		      "{\"data\":{\"i\":\"changed\"}}");
	tu_kube_delete(F.src, "v1", "ConfigMap", F.ns, "cm-0004");
	create_cms(1, 10);
}

/*
 * Run an agent that must refuse to start: its exit code, its output in *out
 * (caller frees).
 */
static int run_refused(const char *bin, const char *cfg, const char *kubeconfig, char **out)
{
	char log[1200];
	int pid, code;

	snprintf(log, sizeof(log), "%s/refused.log", F.s.dir);
	tu_write_file(log, "");
	pid = tu_spawn(
	    log, (const char *[]){bin, "run", "--config", cfg, "--kubeconfig", kubeconfig, NULL});
	code = tu_wait_exit(pid, 30000);
	*out = tu_read_file(log, NULL);
	if (code < 0)
		fail_msg("%s run was still running after 30 s:\n%s", bin, *out);
	return code;
}

static void assert_says(const char *out, const char *what, const char *const words[])
{
	for (size_t i = 0; words[i]; i++)
		if (!strstr(out, words[i]))
			fail_msg("%s: the output does not say \"%s\":\n%s", what, words[i], out);
}

/* Move path and its -wal and -shm aside to path.damaged*, as the message says. */
static void move_aside(const char *path)
{
	const char *const sfx[] = {"", "-wal", "-shm"};

	for (size_t i = 0; i < 3; i++) {
		char from[1200], to[1300];

		snprintf(from, sizeof(from), "%s%s", path, sfx[i]);
		snprintf(to, sizeof(to), "%s.damaged%s", path, sfx[i]);
		if (rename(from, to) < 0 && errno != ENOENT)
			fail_msg("mv %s %s: %s", from, to, strerror(errno));
	}
}

static void overwrite_header(const char *path)
{
	int fd = open(path, O_WRONLY);

	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "this is no sqlite", 17, 0), 17);
	close(fd);
}

static void truncate_half(const char *path)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	/* Several pages (4 KiB for the ledger, 32 KiB for the outbox): cut well inside. */
	if (st.st_size < 8 * 4096)
		fail_msg("%s has %lld bytes: too small to truncate inside", path,
			 (long long)st.st_size);
	assert_int_equal(truncate(path, st.st_size / 2 + 1000), 0);
}

static void need_root(void)
{
	if (geteuid() != 0)
		fail_msg("this case mounts a small tmpfs for a stateDir and needs root (CI runs "
			 "as root): run it as root, or under `unshare -rm` with the agents inside");
}

/* Small, not tiny: SQLite's WAL grows to 1,000 pages before a checkpoint
 * (32 MiB with the outbox's 32 KiB pages), so a stateDir needs that much
 * beside its files to work at all. */
static void mount_small(const char *dir, const char *size)
{
	char opts[64];

	need_root();
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		fail_msg("mkdir %s: %s", dir, strerror(errno));
	snprintf(opts, sizeof(opts), "size=%s,mode=0700", size);
	if (mount("tmpfs", dir, "tmpfs", 0, opts) < 0)
		fail_msg("mount -t tmpfs -o %s tmpfs %s: %s", opts, dir, strerror(errno));
	snprintf(F.mounted, sizeof(F.mounted), "%s", dir);
	snprintf(F.filler, sizeof(F.filler), "%s/filler", dir);
}

/* Write the filler until the filesystem is full; the bytes written. */
static long long fill(void)
{
	static char block[65536];
	int fd = open(F.filler, O_WRONLY | O_CREAT | O_APPEND, 0600);
	long long total = 0;

	assert_true(fd >= 0);
	memset(block, 'x', sizeof(block));
	for (size_t len = sizeof(block); len > 0;) {
		ssize_t w = write(fd, block, len);

		if (w > 0) {
			total += w;
			continue;
		}
		if (w < 0 && errno != ENOSPC)
			fail_msg("filling %s: %s", F.filler, strerror(errno));
		len /= 2; /* the last bytes, smaller writes */
	}
	close(fd);
	return total;
}

static void unfill(void)
{
	assert_int_equal(unlink(F.filler), 0);
}

static void soak_line(const char *name)
{
	fprintf(stderr, "SOAK test=storage_faults case=%s seconds=%lld\n", name,
		(tu_now_ms() - F.t0) / 1000);
}

/* ---- setup and teardown ---------------------------------------------------------------- */

static int setup(void **state)
{
	char *extra;

	(void)state;
	memset(&F, 0, sizeof(F));
	F.t0 = tu_now_ms();
	F.src = tu_kube_connect(tu_env("DS_KUBECONFIG_V1"));
	F.dst = tu_kube_connect(tu_env("DS_KUBECONFIG_V1BETA1"));
	F.ns = tu_kube_new_namespace(F.src, "store", "");
	snprintf(F.dst_ns, sizeof(F.dst_ns), "%s-dr", F.ns);
	tu_site_init(&F.s, "storage-faults", tu_env("DS_KUBECONFIG_V1BETA1"), SOURCE);
	assert_true(
	    asprintf(&extra, "mode: migrate\nnamespaceMappings: {%s: %s}\n", F.ns, F.dst_ns) > 0);
	tu_site_write_config(&F.s, extra);
	free(extra);
	assert_true(asprintf(&extra, "namespaces: [%s]\n", F.ns) > 0);
	tu_site_write_source_config(&F.s, extra);
	free(extra);
	create_cms(N_OBJECTS, 100);
	for (int i = 0; i < 5; i++)
		tu_kube_create(F.src, tu_kube_doc("apiVersion: v1\nkind: Secret\nmetadata: {name: "
						  "s-%d, namespace: %s}\nstringData: {k: v%d}\n",
						  i, F.ns, i));
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	tu_site_dispose(&F.s); /* the agents first: they hold files on the mount */
	tu_proxy_stop(F.api);
	if (F.mounted[0] && umount2(F.mounted, 0) < 0 && umount2(F.mounted, MNT_DETACH) < 0)
		fprintf(stderr, "storage-faults: umount %s: %s\n", F.mounted, strerror(errno));
	tu_kube_drop_namespace(F.src, F.ns);
	{
		char *d = strdup(F.dst_ns);

		tu_kube_drop_namespace(F.dst, d);
	}
	ds_kube_free(F.src);
	ds_kube_free(F.dst);
	memset(&F, 0, sizeof(F));
	return 0;
}

/* ---- 1-2. the ledger damaged ------------------------------------------------------------ */

static void ledger_case(void (*damage)(const char *), const char *name)
{
	char *out;
	int code;

	start_pair();
	assert_in_sync(60000);
	tu_site_agent_sigterm(&F.s);
	damage(F.s.ledger);
	change_source();

	code = run_refused(tu_env("DS_TARGET_BIN"), F.s.cfg, tu_env("DS_KUBECONFIG_V1BETA1"), &out);
	if (code != 1)
		fail_msg("drasync-target run on a damaged ledger exited %d, not 1:\n%s", code, out);
	assert_says(out, "drasync-target run",
		    (const char *const[]){F.s.ledger, "is damaged", "move", "aside", "-wal",
					  "snapshot", NULL});
	fprintf(stderr, "storage-faults: %s: drasync-target run said:\n%s", name, out);
	free(out);

	/* As it says: moved aside, a fresh start. */
	move_aside(F.s.ledger);
	tu_site_agent_start(&F.s);
	assert_in_sync(90000);
	tu_site_source_sigterm(&F.s);
	tu_site_agent_sigterm(&F.s);
	soak_line(name);
}

static void test_storage_faults__damaged_ledger(void **state)
{
	(void)state;
	ledger_case(overwrite_header, "damaged_ledger");
}

static void test_storage_faults__truncated_ledger(void **state)
{
	(void)state;
	ledger_case(truncate_half, "truncated_ledger");
}

/* ---- 3-4. the outbox damaged ------------------------------------------------------------- */

static void outbox_case(void (*damage)(const char *), const char *name)
{
	char *out;
	int code;

	start_pair();
	assert_in_sync(60000);
	tu_site_source_sigterm(&F.s);
	damage(F.s.source_outbox);
	change_source();

	code =
	    run_refused(tu_env("DS_SOURCE_BIN"), F.s.source_cfg, tu_env("DS_KUBECONFIG_V1"), &out);
	if (code != 1)
		fail_msg("drasync-source run on a damaged outbox exited %d, not 1:\n%s", code, out);
	assert_says(out, "drasync-source run",
		    (const char *const[]){F.s.source_outbox, "is damaged", "move", "aside", "-wal",
					  "snapshot", NULL});
	fprintf(stderr, "storage-faults: %s: drasync-source run said:\n%s", name, out);
	free(out);

	/* A new outbox: a new epoch, a snapshot; the deleted object goes on the target too. */
	move_aside(F.s.source_outbox);
	tu_site_source_start(&F.s, tu_env("DS_KUBECONFIG_V1"), NULL);
	assert_in_sync(90000);
	tu_site_source_sigterm(&F.s);
	tu_site_agent_sigterm(&F.s);
	soak_line(name);
}

static void test_storage_faults__damaged_outbox(void **state)
{
	(void)state;
	outbox_case(overwrite_header, "damaged_outbox");
}

static void test_storage_faults__truncated_outbox(void **state)
{
	(void)state;
	outbox_case(truncate_half, "truncated_outbox");
}

/* ---- 5. the target's stateDir full ------------------------------------------------------- */

static long long ledger_committed(void)
{
	return tu_site_ledger_int(&F.s,
				  "SELECT committed_seq FROM sources WHERE name = '" SOURCE "'");
}

static long long source_acked(void)
{
	return tu_site_source_outbox_int(&F.s, "SELECT value FROM meta WHERE key = 'acked_seq'");
}

static long long source_last(void)
{
	return tu_site_source_outbox_int(&F.s, "SELECT value FROM meta WHERE key = 'last_seq'");
}

/* The first line of log holding both a and b (caller frees), NULL when none. */
static char *line_with(const char *log, const char *a, const char *b)
{
	for (const char *l = log; l && *l;) {
		const char *eol = strchr(l, '\n');
		size_t n = eol ? (size_t)(eol - l) : strlen(l);
		char *line = strndup(l, n);

		if (strstr(line, a) && strstr(line, b))
			return line;
		free(line);
		l = eol ? eol + 1 : NULL;
	}
	return NULL;
}

/* The target must ride out the full disk, not exit. */
static void assert_agent_running(const char *when)
{
	int st = 0;

	if (waitpid(F.s.agent_pid, &st, WNOHANG) == F.s.agent_pid) {
		char *log = tu_site_run_log(&F.s);

		F.s.agent_pid = 0;
		fprintf(stderr, "storage-faults: target_disk_full: the target said:\n%s\n", log);
		free(log);
		fail_msg("drasync-target run exited (status %d) %s: the log is above", st, when);
	}
}

static void test_storage_faults__target_disk_full(void **state)
{
	char dir[1100], *log = NULL;
	long long end, filled, acked = 0, committed = 0, last = 0, checks = 0;
	char *said = NULL, *applier;

	(void)state;
	/* The target's API server behind the fault proxy: writes can be held back. */
	F.api = tu_proxy_start_api(tu_env("DS_KUBECONFIG_V1BETA1"), F.s.dir);
	F.s.kubeconfig = tu_proxy_kubeconfig(F.api);
	snprintf(dir, sizeof(dir), "%s/target-state", F.s.dir);
	mount_small(dir, "64m");
	start_pair();
	assert_in_sync(60000);

	/* a. Records committed but not applied (every write 503) when the disk
	 * fills; the writes then go through: the apply stage cannot commit what it
	 * did, says so and keeps trying, the agent runs on. */
	tu_proxy_faults(F.api, "503", 1.0, 0, NULL);
	last = source_last();
	create_cms(20, 100);
	for (end = tu_now_ms() + 60000;
	     source_last() < last + 20 || ledger_committed() < source_last();) {
		if (tu_now_ms() > end)
			fail_msg("20 changes were not committed in 60 s (source last %lld, ledger "
				 "committed %lld)",
				 source_last(), ledger_committed());
		tu_msleep(50);
	}
	filled = fill();
	tu_proxy_faults(F.api, "none", 0, 0, NULL);
	for (end = tu_now_ms() + 60000;;) {
		log = tu_site_run_log(&F.s);
		applier = line_with(log, "event=ledger_error", "stage=apply");
		free(log);
		if (applier)
			break;
		assert_agent_running("when its apply stage met the full disk");
		if (tu_now_ms() > end)
			fail_msg("the apply stage did not report the full disk in 60 s");
		tu_msleep(100);
	}
	assert_says(applier, "the apply stage's ledger_error",
		    (const char *const[]){F.s.ledger, "full", "not committed", "applied again",
					  "free space", NULL});
	fprintf(stderr, "storage-faults: target_disk_full: %s\n", applier);
	free(applier);
	log = NULL;

	/* b. Records that need space: 300 ConfigMaps of 2 KB. */
	create_cms(300, 2000);
	end = tu_now_ms() + 60000;
	while (!said) {
		free(log);
		log = tu_site_run_log(&F.s);
		said = line_with(log, "event=ledger_error", "not committed nor acknowledged");
		assert_agent_running("when its stateDir filled up");
		acked = source_acked();
		committed = ledger_committed();
		last = source_last();
		checks++;
		if (acked > committed)
			fail_msg("the source has seq %lld acknowledged, the ledger committed only "
				 "%lld (disk full)",
				 acked, committed);
		if (!said && tu_now_ms() > end) {
			fprintf(stderr, "storage-faults: target_disk_full: the target said:\n%s\n",
				log);
			fail_msg(
			    "no ledger_error in 60 s with the disk full (%lld bytes filled, "
			    "acked %lld, committed %lld, last %lld): the target's log is above",
			    filled, acked, committed, last);
		}
		tu_msleep(100);
	}
	assert_says(said, "ledger_error",
		    (const char *const[]){F.s.ledger, "full", "not committed", "free space", NULL});
	fprintf(stderr, "storage-faults: target_disk_full: %s\n", said);
	free(said);
	free(log);
	/* A while longer full: the ack never passes the commit. */
	for (end = tu_now_ms() + 3000; tu_now_ms() < end; checks++) {
		acked = source_acked();
		committed = ledger_committed();
		if (acked > committed)
			fail_msg("the source has seq %lld acknowledged, the ledger committed only "
				 "%lld (disk full)",
				 acked, committed);
		tu_msleep(100);
	}
	assert_agent_running("while its stateDir was full");
	last = source_last();
	fprintf(stderr,
		"storage-faults: target_disk_full: %lld bytes filled; acked %lld, committed %lld, "
		"pushed %lld (%lld checks)\n",
		filled, acked, committed, last, checks);
	if (committed >= last)
		fail_msg("the ledger committed everything (%lld of %lld) with the disk full: the "
			 "case did not fill it",
			 committed, last);

	/* Killed while full (what it acknowledged must be in the ledger), space
	 * back, restarted: everything arrives. */
	if (F.s.agent_pid)
		tu_site_agent_sigkill(&F.s);
	unfill();
	tu_site_agent_start(&F.s);
	assert_in_sync(90000);
	tu_site_source_sigterm(&F.s);
	tu_site_agent_sigterm(&F.s);
	soak_line("target_disk_full");
}

/* ---- 6. the source's stateDir full -------------------------------------------------------- */

static void test_storage_faults__source_disk_full(void **state)
{
	char dir[1100], *log;
	int code;

	(void)state;
	snprintf(dir, sizeof(dir), "%s/source-state", F.s.dir);
	mount_small(dir, "64m");
	start_pair();
	assert_in_sync(60000);

	fill();
	create_cms(300, 2000);
	code = tu_site_source_wait(&F.s, 60000);
	log = tu_site_source_run_log(&F.s);
	if (code != 1)
		fail_msg("drasync-source run with its stateDir full exited %d, not 1:\n%s", code,
			 log);
	assert_says(log, "drasync-source run",
		    (const char *const[]){F.s.source_outbox, "full", "free space", NULL});
	fprintf(stderr, "storage-faults: source_disk_full: the source said:\n%s\n", log);
	free(log);

	unfill();
	tu_site_source_start(&F.s, tu_env("DS_KUBECONFIG_V1"), NULL);
	assert_in_sync(90000);
	tu_site_source_sigterm(&F.s);
	tu_site_agent_sigterm(&F.s);
	soak_line("source_disk_full");
}

int main(int argc, char **argv)
{
	if (argc > 1 && argv[1][0])
		cmocka_set_test_filter(argv[1]);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_storage_faults__damaged_ledger, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_storage_faults__truncated_ledger, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_storage_faults__damaged_outbox, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_storage_faults__truncated_outbox, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_storage_faults__target_disk_full, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_storage_faults__source_disk_full, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
