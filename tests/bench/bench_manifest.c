/*
 * bench_manifest: what one snapshot's manifest costs each agent in memory.
 * A snapshot end carries every key of the source with its content hash in one
 * record (SPEC §6), so it is the one thing on the link whose size follows the
 * object count. For N entries of the rss phase's shape (ConfigMaps in 4
 * namespaces), each step runs in a fresh child process and its peak RSS
 * (VmHWM) above the child's start is reported, MB:
 *   entries  the source's manifest as ds_object_index_manifest() holds it
 *   record   that plus the record encoded (ds_wire_record_encode)
 *   zbatch   the encoded record, then the sender's ZBatch of it
 *   decode   the frame, then the target's decode of it (ds_wire_decode)
 *
 *   bench_manifest [N ...]      (default: 10000 100000)
 *
 * Last line: RESULT for each N: manifest_mb_source_N=X manifest_mb_target_N=X
 *   (source: the larger of record and zbatch; target: decode)
 */
#include "drasync/wire.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static long vm_kib(const char *what)
{
	char line[256];
	long kib = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, what, strlen(what)) == 0) {
			kib = strtol(line + strlen(what), NULL, 10);
			break;
		}
	fclose(f);
	return kib;
}

/* Resets VmHWM to the current RSS (Linux 4.0+). */
static void hwm_reset(void)
{
	FILE *f = fopen("/proc/self/clear_refs", "w");

	if (f) {
		fputs("5", f);
		fclose(f);
	}
}

enum step { ENTRIES, RECORD, ZBATCH, DECODE };

static char *keys;
static ds_manifest_entry *entries;

static void make_entries(size_t n)
{
	keys = malloc(n * 48);
	entries = malloc(n * sizeof(*entries));
	if (!keys || !entries)
		exit(1);
	for (size_t i = 0; i < n; i++) {
		char *k = keys + i * 48;
		snprintf(k, 48, "/ConfigMap/rss-src-%zu/rss-%zu", i % 4, i);
		entries[i].key = k;
		uint64_t x = 0x9e3779b97f4a7c15ull * (i + 1);

		/* as incompressible as a SHA-256 (xorshift64) */
		for (size_t b = 0; b < DS_HASH_LEN; b++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			entries[i].content_hash[b] = (uint8_t)x;
		}
	}
}

static void encode(size_t n, uint8_t **out, size_t *len)
{
	ds_wire_encoder *enc = NULL;
	ds_record rec = {0};
	ds_err err = {0};

	rec.epoch = 1;
	rec.seq = 1;
	rec.op = DS_RECORD_SNAPSHOT_END;
	rec.snapshot_id = "snap-1";
	rec.manifest = entries;
	rec.manifest_len = n;
	if (ds_wire_encoder_new(&enc, 3, 512) < 0 ||
	    ds_wire_record_encode(enc, &rec, out, len, &err) < 0) {
		fprintf(stderr, "encode: %s\n", err.msg);
		exit(1);
	}
	ds_wire_encoder_free(enc);
}

static void zbatch(uint8_t *rec, size_t rec_len, uint8_t **out, size_t *len)
{
	ds_wire_zbatcher *z = NULL;
	ds_wire_blob b = {rec, rec_len};
	int rc;

	if (ds_wire_zbatcher_new(&z, 3, 32u << 20) < 0)
		exit(1);
	rc = ds_wire_zbatch_encode(z, &b, 1, out, len, NULL);
	if (rc == -E2BIG)
		rc = ds_wire_batch_encode(&b, 1, out, len);
	if (rc < 0) {
		fprintf(stderr, "zbatch: %d\n", rc);
		exit(1);
	}
	ds_wire_zbatcher_free(z);
}

static double step_mb(size_t n, enum step s)
{
	int fd[2];
	pid_t pid;
	double mb = -1;

	if (pipe(fd) < 0)
		return -1;
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		uint8_t *rec = NULL, *frame = NULL;
		size_t rec_len = 0, frame_len = 0;
		long base;
		double d;

		close(fd[0]);
		if (s == DECODE) {
			/* the frame as the target receives it; what made it is gone */
			make_entries(n);
			encode(n, &rec, &rec_len);
			zbatch(rec, rec_len, &frame, &frame_len);
			free(rec);
			free(entries);
			free(keys);
		} else if (s == ZBATCH) {
			make_entries(n);
			encode(n, &rec, &rec_len);
			free(entries);
			free(keys);
		}
		hwm_reset();
		base = vm_kib("VmRSS:");
		if (s == ENTRIES || s == RECORD)
			make_entries(n);
		if (s == RECORD)
			encode(n, &rec, &rec_len);
		if (s == ZBATCH)
			zbatch(rec, rec_len, &frame, &frame_len);
		if (s == DECODE) {
			ds_wire_decoder *dec = NULL;
			ds_wire_limits lim;
			ds_wire_msg *msg = NULL;
			ds_err err = {0};

			ds_wire_limits_default(&lim);
			lim.max_frame = 64u << 20;
			if (ds_wire_decoder_new(&dec, &lim) < 0 ||
			    ds_wire_decode(dec, frame, frame_len, &msg, &err) < 0) {
				fprintf(stderr, "decode: %s\n", err.msg);
				_exit(1);
			}
			if (ds_wire_msg_record(msg, 0)->manifest_len != n)
				_exit(1);
			d = (double)(vm_kib("VmHWM:") - base) / 1024.0;
			if (write(fd[1], &d, sizeof(d)) != sizeof(d))
				_exit(1);
			_exit(0);
		}
		d = (double)(vm_kib("VmHWM:") - base) / 1024.0;
		if (s == ZBATCH)
			printf("  %zu entries: record %zu bytes, frame %zu bytes\n", n, rec_len,
			       frame_len);
		fflush(stdout);
		if (write(fd[1], &d, sizeof(d)) != sizeof(d))
			_exit(1);
		_exit(0);
	}
	close(fd[1]);
	if (pid < 0 || read(fd[0], &mb, sizeof(mb)) != sizeof(mb))
		mb = -1;
	close(fd[0]);
	if (pid > 0)
		waitpid(pid, NULL, 0);
	return mb;
}

int main(int argc, char **argv)
{
	size_t counts[8] = {10000, 100000}, nc = 2;
	char result[1024] = "RESULT";
	size_t off = strlen(result);

	if (argc > 1) {
		nc = 0;
		for (int i = 1; i < argc && nc < 8; i++)
			counts[nc++] = strtoul(argv[i], NULL, 10);
	}
	for (size_t c = 0; c < nc; c++) {
		size_t n = counts[c];
		double e = step_mb(n, ENTRIES), r = step_mb(n, RECORD), z = step_mb(n, ZBATCH),
		       d = step_mb(n, DECODE), src = r > z ? r : z;

		printf("%zu entries: peak above the start, MB: entries %.1f, entries+record %.1f, "
		       "zbatch %.1f, decode %.1f\n",
		       n, e, r, z, d);
		off += (size_t)snprintf(result + off, sizeof(result) - off,
					" manifest_mb_source_%zu=%.1f manifest_mb_target_%zu=%.1f",
					n, src, n, d);
	}
	puts(result);
	return 0;
}
