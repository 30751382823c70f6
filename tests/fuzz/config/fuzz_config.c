/*
 * libFuzzer target: the YAML configuration loader on arbitrary bytes, as
 * `drasync-target run`, `plan` and `drasync-source run` read a TargetConfig or
 * SourceConfig file. Whatever the input, each parser returns a validated
 * configuration or an error with a message and, when it points into the file,
 * a line and column inside it. Seeds in tests/fuzz/config/corpus.
 */
#include "drasync/source_config.h"
#include "drasync/source_grants.h"
#include "drasync/target_config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An error names what is wrong, and where when it says where. */
static void check_err(const ds_err *err, const uint8_t *data, size_t size)
{
	int lines = 1;

	if (!err->msg[0])
		abort();
	/* YAML's line breaks: LF, CR, and in UTF-8 NEL (C2 85), LS and PS (E2 80 A8/A9);
	 * CR LF is one, so counting each byte of it bounds the line from above. */
	for (size_t i = 0; i < size; i++)
		lines += data[i] == '\n' || data[i] == '\r' || data[i] == 0x85 ||
			 (data[i] == 0xe2 && i + 2 < size && data[i + 1] == 0x80 &&
			  (data[i + 2] == 0xa8 || data[i + 2] == 0xa9));
	if (err->line < 0 || err->line > lines + 1 || err->col < 0)
		abort();
}

static void target(const uint8_t *data, size_t size)
{
	ds_target_config *cfg = NULL;
	ds_err err = {0};
	const ds_source_grant *g;
	const char *names[8];
	char buf[512];
	size_t n = 0;

	if (ds_target_config_parse(&cfg, (const char *)data, size, "fuzz.yaml", &err) < 0) {
		check_err(&err, data, size);
		return;
	}
	/* What run does next with a file it accepted. */
	g = ds_target_config_sources(cfg, &n);
	for (size_t i = 0; i < n && i < 8; i++)
		names[i] = g[i].name;
	for (size_t i = 0; i < n && i < 8; i++) {
		ds_grant_describe(cfg, names[i], buf, sizeof(buf));
		ds_grant_namespace(cfg, names[i], "default", buf, sizeof(buf));
	}
	if (ds_grant_check_names(cfg, names, n < 8 ? n : 8, &err) < 0)
		check_err(&err, data, size);
	ds_grant_describe(cfg, "someone-else", buf, sizeof(buf));
	ds_target_config_map_namespace(cfg, "default");
	ds_target_config_free(cfg);
}

static void source(const uint8_t *data, size_t size)
{
	ds_source_config *cfg = NULL;
	ds_err err = {0};

	if (ds_source_config_parse(&cfg, (const char *)data, size, "fuzz.yaml", &err) < 0) {
		check_err(&err, data, size);
		return;
	}
	/* Required settings are there once it parsed. */
	if (!ds_source_config_cluster_name(cfg) || !ds_source_config_endpoint(cfg))
		abort();
	ds_source_config_free(cfg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	target(data, size);
	source(data, size);
	return 0;
}
