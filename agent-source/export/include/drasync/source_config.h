#ifndef DRASYNC_SOURCE_CONFIG_H
#define DRASYNC_SOURCE_CONFIG_H

/*
 * The source agent's configuration file (SPEC §8), `kind: SourceConfig`.
 * Loaded with TargetConfig's rules: every key checked, unknown keys and bad
 * values rejected with file:line:col and the dotted path of the key. The
 * structures are plain data owned by the ds_source_config they come from.
 */

#include "drasync/err.h"
#include "drasync/socks_proxy.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum ds_schedule_mode {
	DS_SCHEDULE_WATCH,    /* list, then watch; changes coalesced per debounce window */
	DS_SCHEDULE_INTERVAL, /* a pass every `every` */
	DS_SCHEDULE_CRON,     /* a pass at each time the cron expression names */
	DS_SCHEDULE_ONCE,     /* one full pass, wait for the target's results, exit */
	DS_SCHEDULE_MODE_MAX
};

typedef struct ds_schedule_config {
	enum ds_schedule_mode mode;
	long long every_ms;    /* interval: Go duration, e.g. "15m", "1h30m" */
	const char *cron_expr; /* cron: 5 fields or a macro, e.g. "*\/15 * * * *", "@hourly" */
	const char *time_zone; /* cron: IANA name ("Europe/Berlin"); NULL = UTC */
	long long debounce_ms; /* watch: coalescing window; default 200 */
	long long quiet_ms;    /* watch: a change goes once quiet this long; default 50 */
} ds_schedule_config;

typedef struct ds_source_config ds_source_config;

/**
 * Load and validate a SourceConfig file ("-" reads stdin).
 * @return 0; -EINVAL with err located at the offending key or value; -ENOENT
 *         or another negative errno when the file cannot be read
 */
int ds_source_config_load(ds_source_config **out, const char *path, ds_err *err);

/** As ds_source_config_load(), from a buffer; `filename` names it in errors. */
int ds_source_config_parse(ds_source_config **out, const char *buf, size_t len,
			   const char *filename, ds_err *err);

void ds_source_config_free(ds_source_config *cfg);

/* Settings; strings are borrowed, NULL when not set (kubeconfig "" means in-cluster). */
const char *ds_source_config_cluster_name(const ds_source_config *cfg);	     /* required */
const char *ds_source_config_endpoint(const ds_source_config *cfg);	     /* required */
const char *ds_source_config_server_public_key(const ds_source_config *cfg); /* Z85, required */
const char *ds_source_config_secret_key_file(const ds_source_config *cfg);   /* required */
const char *ds_source_config_kubeconfig(const ds_source_config *cfg);
const char *ds_source_config_state_dir(const ds_source_config *cfg); /* default /var/lib/drasync */
const char *ds_source_config_metrics_listen(const ds_source_config *cfg);

/** target.bandwidth in bytes per second; 0: no cap. */
uint64_t ds_source_config_bandwidth(const ds_source_config *cfg);
/**
 * target.proxy parsed (borrowed; NULL: no proxy). Its username and password
 * are set only when the URL holds them; with target.proxyCredentialsFile
 * (ds_source_config_proxy_credentials_file()) the agent reads them at start.
 */
const ds_socks_proxy *ds_source_config_proxy(const ds_source_config *cfg);
const char *ds_source_config_proxy_credentials_file(const ds_source_config *cfg);

/**
 * The selected namespaces: either a list (`namespaces: [...]`, n > 0) or a
 * selector (`namespaceSelector`, kubectl syntax, validated at load); exactly
 * one of the two is set.
 */
const char *const *ds_source_config_namespaces(const ds_source_config *cfg, size_t *n);
const char *ds_source_config_namespace_selector(const ds_source_config *cfg);

const ds_schedule_config *ds_source_config_schedule(const ds_source_config *cfg);

/** "watch", "interval", "cron", "once". */
const char *ds_schedule_mode_name(enum ds_schedule_mode mode);

#endif
