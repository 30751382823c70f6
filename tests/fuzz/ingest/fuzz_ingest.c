/*
 * libFuzzer target: what the target does with one record from the wire before
 * any API call (SPEC §5): its payload inflated and checked against the JSON
 * limits before jansson parses it (ds_ledger_payload_json), its reference and
 * payload against the source's grant (ds_record_check), then the importer's
 * pipeline (ds_transform_object) on what was admitted.
 *
 * The input: one flags byte, then apiVersion, kind, namespace and name, each
 * ended by a NUL, then the payload. Flags: bit 0 the payload is given as a zstd
 * frame as it is (garbage frames too), bit 1 it is compressed here first (a
 * valid frame of the given bytes), bit 2 the record is from the source that
 * has a grant in sources[] (else from one granted nothing), bits 3-4 the DRA
 * version the target serves (v1beta1, v1beta2, v1, v1). Seeds in tests/fuzz/ingest/corpus.
 */
#include "drasync/ledger_objects.h"
#include "drasync/record_check.h"
#include "drasync/report.h"
#include "drasync/transform.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char config[] =
    "apiVersion: drasync.io/v1alpha1\n"
    "kind: TargetConfig\n"
    "mode: standby\n"
    "namespaceMappings: {ml-team: ml-team-dr}\n"
    "sources:\n"
    "  - {name: prod-east, namespaces: [ml-team, 'team-*', default], podSecurity: baseline}\n"
    "  - {name: prod-west, namespaces: []}\n"
    "dra:\n"
    "  resourceClaimMappings:\n"
    "    - {objectType: Pod, objectInstance: ALL, container: ALL, resourceClaim: gpu-rc}\n"
    "  resourceClaimTemplateMappings:\n"
    "    - {objectType: Deployment, objectInstance: ALL, container: ALL,"
    " resourceClaimTemplate: gpu-rct}\n"
    "  deviceClassMappings:\n"
    "    - {from: gpu.nvidia.com, to: gpu.example.com}\n";

static ds_target_config *cfg;

static const enum ds_dra_version served[4] = {DS_DRA_V1BETA1, DS_DRA_V1BETA2, DS_DRA_V1, DS_DRA_V1};

/* The next NUL-ended field of data at *at; NULL when the input ends first. */
static char *field(const uint8_t *data, size_t size, size_t *at)
{
	const uint8_t *end = *at < size ? memchr(data + *at, 0, size - *at) : NULL;
	char *s;

	if (!end)
		return NULL;
	s = strndup((const char *)data + *at, (size_t)(end - (data + *at)));
	*at = (size_t)(end - data) + 1;
	return s;
}

static void ingest(const char *source, const char *f[4], const uint8_t *payload, size_t len,
		   int zstd, enum ds_dra_version dra)
{
	ds_record_ref ref = {source, f[0], f[1], f[2], f[3]};
	ds_transform_opts opts = {.cfg = cfg, .dra_version = dra, .source = source};
	ds_report *rep = NULL;
	json_t *obj = NULL;
	char why[800];

	if (len == 0) { /* a tombstone: the reference alone */
		if (ds_record_check(cfg, &ref, NULL, why, sizeof(why)) >= 0 && !why[0])
			abort(); /* a refusal always says why */
		return;
	}
	why[0] = '\0';
	if (ds_ledger_payload_json(payload, len, zstd, &obj, why, sizeof(why)) < 0) {
		if (!why[0])
			abort();
		return;
	}
	why[0] = '\0';
	if (ds_record_check(cfg, &ref, obj, why, sizeof(why)) >= 0) {
		if (!why[0])
			abort();
		json_decref(obj);
		return;
	}
	if (ds_report_new(&rep) < 0)
		abort();
	ds_transform_object(&opts, obj, rep);
	ds_report_free(rep);
	json_decref(obj);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *f[4] = {NULL, NULL, NULL, NULL};
	size_t at = 1;
	uint8_t flags;
	void *packed = NULL;

	if (!cfg && ds_target_config_parse(&cfg, config, sizeof(config) - 1, "fuzz", NULL) < 0)
		abort();
	if (size < 1)
		return 0;
	flags = data[0];
	for (int i = 0; i < 4; i++)
		if (!(f[i] = field(data, size, &at)))
			goto out;
	{
		const uint8_t *payload = data + at;
		size_t len = size - at;
		int zstd = (flags & 1) != 0;

		if (flags & 2) {
			size_t cap = ZSTD_compressBound(len);
			packed = malloc(cap ? cap : 1);
			if (!packed)
				abort();
			len = ZSTD_compress(packed, cap, payload, len, 1);
			if (ZSTD_isError(len))
				abort();
			payload = packed;
			zstd = 1;
		}
		ingest(flags & 4 ? "prod-east" : "prod-west", (const char **)f, payload, len, zstd,
		       served[(flags >> 3) & 3]);
	}
out:
	free(packed);
	for (int i = 0; i < 4; i++)
		free(f[i]);
	return 0;
}
