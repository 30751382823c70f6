/*
 * bench_yaml: parse and emit speed of the YAML module on the fixture manifests
 * (every *.yaml under $DS_FIXTURES/dra-example-driver/{v1,v1beta1}) joined
 * into one multi-document stream and repeated to about 8 MiB.
 * Prints MB/s and documents/s for: YAML parse, YAML parse with locations,
 * JSON parse (the same documents as JSON texts), and emit.
 * Times are this process's CPU time, so the figures are per core and hold up
 * on a machine shared with other work.
 */
#include "drasync/buf.h"
#include "drasync/yaml.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct buf {
	char *p;
	size_t len, cap;
};

static void put(struct buf *b, const char *s, size_t n)
{
	if (ds_grow((void **)&b->p, &b->cap, b->len + n + 1, 1) < 0) {
		fprintf(stderr, "bench_yaml: out of memory\n");
		exit(1);
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void load_fixtures(struct buf *out)
{
	const char *root = getenv("DS_FIXTURES");
	const char *dirs[] = {"dra-example-driver/v1", "dra-example-driver/v1beta1"};

	if (!root) {
		fprintf(stderr, "bench_yaml: DS_FIXTURES is not set\n");
		exit(2);
	}
	for (size_t d = 0; d < 2; d++) {
		char dir[1024];
		DIR *dh;
		struct dirent *de;

		snprintf(dir, sizeof(dir), "%s/%s", root, dirs[d]);
		dh = opendir(dir);
		if (!dh) {
			perror(dir);
			exit(2);
		}
		while ((de = readdir(dh)) != NULL) {
			char path[2048], chunk[65536];
			FILE *f;
			size_t n;

			if (!strstr(de->d_name, ".yaml"))
				continue;
			snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
			f = fopen(path, "rb");
			if (!f) {
				perror(path);
				exit(2);
			}
			put(out, "---\n", 4);
			while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
				put(out, chunk, n);
			put(out, "\n", 1);
			fclose(f);
		}
		closedir(dh);
	}
}

/* Parse `text` repeatedly for about `secs`; returns MB/s and sets *docs_per_s. */
static double run_parse(const struct buf *text, unsigned flags, double secs, double *docs_per_s)
{
	double t0 = now(), t;
	size_t bytes = 0, docs = 0;

	do {
		json_t *d = NULL;
		ds_yaml_locs *locs = NULL;
		ds_err err = {0};

		if (ds_yaml_parse(text->p, text->len, "bench", flags, &d, &locs, &err)) {
			fprintf(stderr, "bench_yaml: parse failed: %s\n", err.msg);
			exit(1);
		}
		docs += json_array_size(d);
		bytes += text->len;
		json_decref(d);
		ds_yaml_locs_free(locs);
		t = now() - t0;
	} while (t < secs);
	*docs_per_s = (double)docs / t;
	return (double)bytes / t / 1e6;
}

int main(int argc, char **argv)
{
	struct buf one = {0}, text = {0}, json = {0};
	json_t *docs = NULL;
	ds_err err = {0};
	double secs = argc > 1 ? atof(argv[1]) : 2.0;
	double yaml_mbs, yaml_dps, loc_mbs, loc_dps, json_mbs, json_dps, emit_mbs, emit_dps;
	double t0, t;
	size_t emitted = 0, ndocs = 0;

	load_fixtures(&one);
	while (text.len < 8u * 1024 * 1024)
		put(&text, one.p, one.len);
	if (ds_yaml_parse(one.p, one.len, "fixtures", 0, &docs, NULL, &err)) {
		fprintf(stderr, "bench_yaml: %s\n", err.msg);
		return 1;
	}
	while (json.len < 8u * 1024 * 1024) {
		for (size_t i = 0; i < json_array_size(docs); i++) {
			char *s = json_dumps(json_array_get(docs, i), JSON_INDENT(2));

			put(&json, s, strlen(s));
			put(&json, "\n", 1);
			free(s);
		}
	}

	yaml_mbs = run_parse(&text, 0, secs, &yaml_dps);
	loc_mbs = run_parse(&text, DS_YAML_LOCATIONS, secs, &loc_dps);
	json_mbs = run_parse(&json, 0, secs, &json_dps);

	t0 = now();
	do {
		for (size_t i = 0; i < json_array_size(docs); i++) {
			char *s = NULL;

			if (ds_yaml_emit_string(json_array_get(docs, i), &s, &err)) {
				fprintf(stderr, "bench_yaml: emit failed: %s\n", err.msg);
				return 1;
			}
			emitted += strlen(s);
			ndocs++;
			free(s);
		}
		t = now() - t0;
	} while (t < secs);
	emit_mbs = (double)emitted / t / 1e6;
	emit_dps = (double)ndocs / t;

	printf("input: %zu fixture documents, %zu bytes; YAML stream %zu bytes, JSON stream %zu "
	       "bytes\n",
	       json_array_size(docs), one.len, text.len, json.len);
	printf("yaml parse:            %8.1f MB/s %10.0f docs/s\n", yaml_mbs, yaml_dps);
	printf("yaml parse+locations:  %8.1f MB/s %10.0f docs/s\n", loc_mbs, loc_dps);
	printf("json parse:            %8.1f MB/s %10.0f docs/s\n", json_mbs, json_dps);
	printf("yaml emit:             %8.1f MB/s %10.0f docs/s\n", emit_mbs, emit_dps);
	printf("RESULT yaml_parse_mb_per_s=%.1f yaml_parse_docs_per_s=%.0f "
	       "yaml_parse_locs_mb_per_s=%.1f json_parse_mb_per_s=%.1f yaml_emit_mb_per_s=%.1f "
	       "yaml_emit_docs_per_s=%.0f\n",
	       yaml_mbs, yaml_dps, loc_mbs, json_mbs, emit_mbs, emit_dps);
	json_decref(docs);
	free(one.p);
	free(text.p);
	free(json.p);
	return 0;
}
