/*
 * Seed inputs for fuzz_ingest, made from manifests the project already has (the
 * shared DRA fixtures) so that no copy of them is kept: every object of every
 * file given, as a record in fuzz_ingest's input format (a flags byte,
 * apiVersion, kind, namespace and name each ended by a NUL, the JSON payload),
 * under four flag sets.
 *
 * usage: fuzz_ingest_seeds OUT_DIR FILE.yaml...
 */
#include "drasync/yaml.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int write_seed(const char *dir, int n, unsigned char flags, json_t *obj)
{
	json_t *meta = json_object_get(obj, "metadata");
	const char *kind = json_string_value(json_object_get(obj, "kind"));
	const char *fields[4];
	char path[4096], *payload;
	FILE *f;

	if (!json_is_object(meta))
		return 0;
	/* Namespaced objects land in the namespace fuzz_ingest's source is granted (and
	 * mapped), so that the seeds reach the pipeline instead of a refusal. */
	if (kind && (strcmp(kind, "Namespace") == 0 || strcmp(kind, "DeviceClass") == 0))
		json_object_del(meta, "namespace");
	else
		json_object_set_new(meta, "namespace", json_string("ml-team"));
	if (kind && strcmp(kind, "Namespace") == 0)
		json_object_set_new(meta, "name", json_string("ml-team"));
	fields[0] = json_string_value(json_object_get(obj, "apiVersion"));
	fields[1] = kind;
	fields[2] = json_string_value(json_object_get(meta, "namespace"));
	fields[3] = json_string_value(json_object_get(meta, "name"));
	payload = json_dumps(obj, JSON_COMPACT);
	snprintf(path, sizeof(path), "%s/fixture-%d", dir, n);
	if (!payload || !(f = fopen(path, "wb"))) {
		free(payload);
		return -1;
	}
	fputc(flags, f);
	for (int i = 0; i < 4; i++) {
		fputs(fields[i] ? fields[i] : "", f);
		fputc('\0', f);
	}
	fputs(payload, f);
	free(payload);
	return fclose(f) == 0 ? 1 : -1;
}

int main(int argc, char **argv)
{
	static const unsigned char flags[] = {4, 4 | 2, 4 | 8, 16};
	int n = 0;

	if (argc < 3) {
		fprintf(stderr, "usage: %s OUT_DIR FILE.yaml...\n", argv[0]);
		return 2;
	}
	for (int a = 2; a < argc; a++) {
		json_t *docs = NULL, *doc;
		ds_err err = {0};
		size_t i;

		if (ds_yaml_parse_file(argv[a], 0, &docs, NULL, &err) < 0) {
			fprintf(stderr, "%s: %s\n", argv[a], err.msg);
			return 1;
		}
		json_array_foreach (docs, i, doc) {
			for (size_t k = 0; k < sizeof(flags); k++) {
				int rc = write_seed(argv[1], n + 1, flags[k], doc);
				if (rc < 0) {
					fprintf(stderr, "cannot write a seed in %s\n", argv[1]);
					return 1;
				}
				n += rc;
			}
		}
		json_decref(docs);
	}
	printf("fuzz_ingest_seeds: %d seeds in %s\n", n, argv[1]);
	return 0;
}
