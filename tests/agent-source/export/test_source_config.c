/* SourceConfig loading: a full file, defaults, every mode, and located errors for bad files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/source_config.h"
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"

/* Four lines every bad case below builds on, so later checks are reached. */
#define BASE                                                                                       \
	"clusterName: prod-east\n"                                                                 \
	"target: {endpoint: \"tcp://dr.example.net:7450\", serverPublicKey: \"" KEY "\"}\n"        \
	"keys: {secretKeyFile: /k}\n"                                                              \
	"namespaces: [ml-team]\n"

static ds_source_config *load(const char *yaml)
{
	ds_source_config *cfg = NULL;
	ds_err err = {0};
	char buf[512];

	if (ds_source_config_parse(&cfg, yaml, strlen(yaml), "source.yaml", &err) != 0)
		fail_msg("does not load: %s", ds_err_format(&err, buf, sizeof(buf)));
	return cfg;
}

static void test_source_config__full_file_loads(void **state)
{
	ds_source_config *cfg = load("apiVersion: drasync.io/v1alpha1\n"
				     "kind: SourceConfig\n"
				     "clusterName: prod-east.example.com\n"
				     "target:\n"
				     "  endpoint: tcp://dr.example.net:7450\n"
				     "  serverPublicKey: \"" KEY "\"\n"
				     "keys: {secretKeyFile: /etc/drasync/keys/source.key}\n"
				     "kubeconfig: /etc/kube/config\n"
				     "stateDir: /srv/drasync\n"
				     "namespaces: [ml-team, ml-infra]\n"
				     "schedule: {mode: cron, expr: \"*/15 * * * *\", "
				     "timeZone: Europe/Berlin}\n"
				     "metrics: {listen: \"127.0.0.1:9451\"}\n");
	const ds_schedule_config *s = ds_source_config_schedule(cfg);
	const char *const *ns;
	size_t n = 0;

	(void)state;
	assert_string_equal(ds_source_config_cluster_name(cfg), "prod-east.example.com");
	assert_string_equal(ds_source_config_endpoint(cfg), "tcp://dr.example.net:7450");
	assert_string_equal(ds_source_config_server_public_key(cfg), KEY);
	assert_string_equal(ds_source_config_secret_key_file(cfg), "/etc/drasync/keys/source.key");
	assert_string_equal(ds_source_config_kubeconfig(cfg), "/etc/kube/config");
	assert_string_equal(ds_source_config_state_dir(cfg), "/srv/drasync");
	assert_string_equal(ds_source_config_metrics_listen(cfg), "127.0.0.1:9451");
	ns = ds_source_config_namespaces(cfg, &n);
	assert_int_equal(n, 2);
	assert_string_equal(ns[0], "ml-team");
	assert_string_equal(ns[1], "ml-infra");
	assert_null(ds_source_config_namespace_selector(cfg));
	assert_int_equal(s->mode, DS_SCHEDULE_CRON);
	assert_string_equal(s->cron_expr, "*/15 * * * *");
	assert_string_equal(s->time_zone, "Europe/Berlin");
	assert_string_equal(ds_schedule_mode_name(s->mode), "cron");
	ds_source_config_free(cfg);
}

static void test_source_config__defaults(void **state)
{
	ds_source_config *cfg = load(BASE);
	const ds_schedule_config *s = ds_source_config_schedule(cfg);

	(void)state;
	assert_string_equal(ds_source_config_state_dir(cfg), "/var/lib/drasync");
	assert_null(ds_source_config_kubeconfig(cfg));
	assert_null(ds_source_config_metrics_listen(cfg));
	/* No schedule: watch, coalescing changes over 200ms. */
	assert_int_equal(s->mode, DS_SCHEDULE_WATCH);
	assert_int_equal(s->debounce_ms, 200);
	assert_int_equal(s->quiet_ms, 50);
	assert_null(s->cron_expr);
	ds_source_config_free(cfg);

	/* kubeconfig "" (in-cluster) stays "", not NULL. */
	cfg = load(BASE "kubeconfig: \"\"\n");
	assert_string_equal(ds_source_config_kubeconfig(cfg), "");
	ds_source_config_free(cfg);
}

static void test_source_config__schedule_modes(void **state)
{
	ds_source_config *cfg;
	const ds_schedule_config *s;

	(void)state;
	cfg = load(BASE "schedule: {mode: watch, debounce: 1.5s}\n");
	s = ds_source_config_schedule(cfg);
	assert_int_equal(s->mode, DS_SCHEDULE_WATCH);
	assert_int_equal(s->debounce_ms, 1500);
	assert_int_equal(s->quiet_ms, 50);
	ds_source_config_free(cfg);

	cfg = load(BASE "schedule: {mode: watch, debounce: 1s, quiet: 300ms}\n");
	s = ds_source_config_schedule(cfg);
	assert_int_equal(s->debounce_ms, 1000);
	assert_int_equal(s->quiet_ms, 300);
	ds_source_config_free(cfg);

	/* a debounce shorter than the default quiet: the debounce alone */
	cfg = load(BASE "schedule: {mode: watch, debounce: 20ms}\n");
	s = ds_source_config_schedule(cfg);
	assert_int_equal(s->debounce_ms, 20);
	assert_int_equal(s->quiet_ms, 20);
	ds_source_config_free(cfg);

	cfg = load(BASE "schedule: {mode: interval, every: 1h30m}\n");
	s = ds_source_config_schedule(cfg);
	assert_int_equal(s->mode, DS_SCHEDULE_INTERVAL);
	assert_int_equal(s->every_ms, 5400000);
	assert_int_equal(s->debounce_ms, 0);
	ds_source_config_free(cfg);

	cfg = load(BASE "schedule: {mode: cron, expr: \"@hourly\"}\n");
	s = ds_source_config_schedule(cfg);
	assert_int_equal(s->mode, DS_SCHEDULE_CRON);
	assert_string_equal(s->cron_expr, "@hourly");
	assert_null(s->time_zone); /* UTC */
	ds_source_config_free(cfg);

	cfg = load(BASE "schedule: {mode: once}\n");
	assert_int_equal(ds_source_config_schedule(cfg)->mode, DS_SCHEDULE_ONCE);
	assert_string_equal(ds_schedule_mode_name(DS_SCHEDULE_ONCE), "once");
	assert_string_equal(ds_schedule_mode_name(DS_SCHEDULE_INTERVAL), "interval");
	assert_string_equal(ds_schedule_mode_name(DS_SCHEDULE_WATCH), "watch");
	ds_source_config_free(cfg);
}

static void test_source_config__namespace_selector(void **state)
{
	ds_source_config *cfg =
	    load("clusterName: prod-east\n"
		 "target: {endpoint: \"tcp://[fd00::1]:7450\", serverPublicKey: \"" KEY "\"}\n"
		 "keys: {secretKeyFile: /k}\n"
		 "namespaceSelector: \"drasync.io/replicate=true, tier notin (scratch)\"\n");
	size_t n = 9;

	(void)state;
	assert_string_equal(ds_source_config_namespace_selector(cfg),
			    "drasync.io/replicate=true, tier notin (scratch)");
	assert_null(ds_source_config_namespaces(cfg, &n));
	assert_int_equal(n, 0);
	ds_source_config_free(cfg);
}

/* Each bad file: the message, and the exact line and column it points at. */
static const struct tu_bad_config bad[] = {
    {"unknown top-level key", BASE "schedul: {mode: watch}\n", 5, 1,
     "schedul: unknown key (did you mean 'schedule'?)"},
    {"wrong kind", "kind: TargetConfig\n" BASE, 1, 7,
     "kind: this is a 'TargetConfig'; drasync-source reads kind SourceConfig"},
    {"wrong apiVersion", "apiVersion: drasync.io/v2\n" BASE, 1, 13,
     "apiVersion: unsupported apiVersion 'drasync.io/v2' (expected drasync.io/v1alpha1)"},
    {"missing clusterName",
     "target: {endpoint: \"tcp://a:1\", serverPublicKey: \"" KEY "\"}\n"
     "keys: {secretKeyFile: /k}\nnamespaces: [a]\n",
     1, 1, "missing 'clusterName'"},
    {"invalid clusterName", "clusterName: Prod_East\n", 1, 14,
     "clusterName: 'Prod_East' is not a valid cluster name"},
    {"missing target", "clusterName: a\nkeys: {secretKeyFile: /k}\nnamespaces: [a]\n", 1, 1,
     "missing 'target' ({endpoint:"},
    {"endpoint not tcp", "clusterName: a\ntarget: {endpoint: \"http://a:1\", serverPublicKey: x}\n",
     2, 20, "target.endpoint: 'http://a:1' is not tcp://host:port"},
    {"endpoint without port", "clusterName: a\ntarget: {endpoint: tcp://a, serverPublicKey: x}\n",
     2, 20, "target.endpoint: 'tcp://a' is not tcp://host:port"},
    {"endpoint port out of range",
     "clusterName: a\ntarget: {endpoint: \"tcp://a:65536\", serverPublicKey: x}\n", 2, 20,
     "is not tcp://host:port (port 1-65535)"},
    {"endpoint wildcard host",
     "clusterName: a\ntarget: {endpoint: \"tcp://*:7450\", serverPublicKey: x}\n", 2, 20,
     "is not tcp://host:port"},
    {"missing serverPublicKey", "clusterName: a\ntarget: {endpoint: \"tcp://a:1\"}\n", 2, 9,
     "target: missing 'serverPublicKey' (the target's 40-character Z85 public key)"},
    {"bad serverPublicKey",
     "clusterName: a\ntarget: {endpoint: \"tcp://a:1\", serverPublicKey: short}\n", 2, 50,
     "target.serverPublicKey: 'short' is not a 40-character Z85 key"},
    {"unknown target key", "clusterName: a\ntarget: {endpoint: \"tcp://a:1\", serverPublicKy: x}\n",
     2, 33, "target.serverPublicKy: unknown key (did you mean 'serverPublicKey'?)"},
    {"empty secretKeyFile",
     "clusterName: a\ntarget: {endpoint: \"tcp://a:1\", serverPublicKey: \"" KEY "\"}\n"
     "keys: {}\n",
     3, 7, "keys: missing 'secretKeyFile'"},
    {"both namespaces and selector", BASE "namespaceSelector: a=b\n", 5, 1,
     "namespaceSelector: set either namespaces or namespaceSelector, not both"},
    {"neither namespaces nor selector",
     "clusterName: a\ntarget: {endpoint: \"tcp://a:1\", serverPublicKey: \"" KEY "\"}\n"
     "keys: {secretKeyFile: /k}\n",
     1, 1, "missing 'namespaces' (a list of names) or 'namespaceSelector'"},
    {"empty namespaces",
     "clusterName: a\ntarget: {endpoint: \"tcp://a:1\", serverPublicKey: \"" KEY "\"}\n"
     "keys: {secretKeyFile: /k}\nnamespaces: []\n",
     4, 13, "namespaces: empty list"},
    {"duplicate namespace",
     "clusterName: a\ntarget: {endpoint: \"tcp://a:1\", serverPublicKey: \"" KEY "\"}\n"
     "keys: {secretKeyFile: /k}\nnamespaces: [a, b, a]\n",
     4, 20, "namespaces[2]: 'a' is listed twice (also namespaces[0])"},
    {"invalid namespace",
     "clusterName: a\ntarget: {endpoint: \"tcp://a:1\", serverPublicKey: \"" KEY "\"}\n"
     "keys: {secretKeyFile: /k}\nnamespaces: [ok, ML_Team]\n",
     4, 18, "namespaces[1]: 'ML_Team' is not a valid namespace name"},
    {"namespaces not a list",
     "clusterName: a\ntarget: {endpoint: \"tcp://a:1\", serverPublicKey: \"" KEY "\"}\n"
     "keys: {secretKeyFile: /k}\nnamespaces: ml-team\n",
     4, 13, "namespaces: expected a list, found a string"},
    {"selector error inside a quoted value",
     "clusterName: a\ntarget: {endpoint: \"tcp://a:1\", serverPublicKey: \"" KEY "\"}\n"
     "keys: {secretKeyFile: /k}\nnamespaceSelector: \"env in (prod\"\n",
     4, 33, "namespaceSelector: found end of string, expected: ',' or ')'"},
    {"selector error inside a plain value",
     "clusterName: a\ntarget: {endpoint: \"tcp://a:1\", serverPublicKey: \"" KEY "\"}\n"
     "keys: {secretKeyFile: /k}\nnamespaceSelector: env=prod,tier in (a b)\n",
     4, 40, "namespaceSelector: found 'b', expected: ',' or ')'"},
    {"schedule without mode", BASE "schedule: {}\n", 5, 11,
     "schedule: missing 'mode' (watch, interval, cron or once)"},
    {"schedule not a mapping", BASE "schedule: watch\n", 5, 11,
     "schedule: expected a mapping, found a string"},
    {"unknown mode", BASE "schedule: {mode: hourly}\n", 5, 18,
     "schedule.mode: unknown mode 'hourly' (expected watch, interval, cron or once)"},
    {"unknown schedule key", BASE "schedule: {mode: cron, exp: x}\n", 5, 24,
     "schedule.exp: unknown key (did you mean 'expr'?)"},
    {"every with mode cron", BASE "schedule: {mode: cron, expr: \"@daily\", every: 15m}\n", 5, 40,
     "schedule.every: only for mode interval (mode is cron)"},
    {"debounce with mode interval", BASE "schedule: {mode: interval, every: 1m, debounce: 1s}\n", 5,
     39, "schedule.debounce: only for mode watch (mode is interval)"},
    {"expr with mode watch", BASE "schedule: {mode: watch, expr: x}\n", 5, 25,
     "schedule.expr: only for mode cron (mode is watch)"},
    {"timeZone with mode once", BASE "schedule: {mode: once, timeZone: UTC}\n", 5, 24,
     "schedule.timeZone: only for mode cron (mode is once)"},
    {"interval without every", BASE "schedule: {mode: interval}\n", 5, 11,
     "schedule: mode interval needs 'every' (a duration such as 15m)"},
    {"every without unit", BASE "schedule: {mode: interval, every: \"15\"}\n", 5, 38,
     "schedule.every: missing unit in duration '15'"},
    {"every as a number", BASE "schedule: {mode: interval, every: 15}\n", 5, 35,
     "schedule.every: a number needs a unit: write a Go duration such as 15m"},
    {"negative every", BASE "schedule: {mode: interval, every: -1.5h}\n", 5, 35,
     "schedule.every: duration '-1.5h' must be positive"},
    {"quiet longer than debounce", BASE "schedule: {mode: watch, debounce: 100ms, quiet: 1s}\n", 5,
     49, "schedule.quiet: 1000 ms is longer than debounce (100 ms)"},
    {"quiet with mode cron", BASE "schedule: {mode: cron, expr: \"@hourly\", quiet: 1s}\n", 5, 41,
     "schedule.quiet: only for mode watch (mode is cron)"},
    {"bad debounce unit", BASE "schedule: {mode: watch, debounce: 200mss}\n", 5, 38,
     "schedule.debounce: unknown unit in duration '200mss'"},
    {"cron without expr", BASE "schedule: {mode: cron}\n", 5, 11,
     "schedule: mode cron needs 'expr'"},
    {"cron field out of range, quoted", BASE "schedule: {mode: cron, expr: \"*/15 * 32 * *\"}\n", 5,
     38, "schedule.expr: day-of-month: 32 out of range 1-31"},
    {"cron field out of range, plain", BASE "schedule:\n  mode: cron\n  expr: 0 0 * * 8\n", 7, 17,
     "schedule.expr: day-of-week: 8 out of range 0-7"},
    {"cron field count", BASE "schedule: {mode: cron, expr: \"* * *\"}\n", 5, 30,
     "schedule.expr: expected 5 fields"},
    {"cron @every", BASE "schedule: {mode: cron, expr: \"@every 5m\"}\n", 5, 31,
     "schedule.expr: @every is not a cron expression; use schedule mode interval"},
    {"unknown time zone", BASE "schedule: {mode: cron, expr: \"@daily\", timeZone: Mars/Base}\n", 5,
     50, "schedule.timeZone: unknown time zone 'Mars/Base'"},
    {"time zone path",
     BASE "schedule: {mode: cron, expr: \"@daily\", timeZone: ../../etc/passwd}\n", 5, 50,
     "schedule.timeZone: '../../etc/passwd' is not a time zone name"},
    {"bad metrics.listen", BASE "metrics: {listen: localhost}\n", 5, 19,
     "metrics.listen: 'localhost' is not host:port"},
    {"metrics.listen as a number", BASE "metrics: {listen: 9451}\n", 5, 19,
     "metrics.listen: expected a string, found an integer"},
    {"unknown metrics key", BASE "metrics: {listn: \":9451\"}\n", 5, 11,
     "metrics.listn: unknown key (did you mean 'listen'?)"},
    {"empty stateDir", BASE "stateDir: \"\"\n", 5, 11, "stateDir: must not be empty"},
    {"kubeconfig not a string", BASE "kubeconfig: [a]\n", 5, 13,
     "kubeconfig: expected a string, found a list"},
    {"root not a mapping", "- a\n- b\n", 1, 1, "expected a SourceConfig mapping, found a list"},
    {"two documents", BASE "---\n" BASE, 0, 0, "expected one SourceConfig document, found 2"},
    {"empty file", "# nothing\n", 0, 0, "the file is empty; expected a SourceConfig document"},
    {"YAML syntax error", BASE "schedule: {mode: watch\n", 6, 1, ""},
};

static void test_source_config__bad_files_are_located(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ds_source_config *cfg = NULL;
		ds_err err = {0};
		int r;

		ds_err_clear(&err);
		r = ds_source_config_parse(&cfg, bad[i].yaml, strlen(bad[i].yaml), "source.yaml",
					   &err);
		tu_assert_bad_config(&bad[i], r, &err, "source.yaml");
		assert_null(cfg);
	}
}

/* The example shipped in deploy/ stays valid, read from its file. */
static void test_source_config__shipped_example_loads(void **state)
{
	char path[1024];
	ds_source_config *cfg = NULL;
	ds_err err = {0};
	size_t n = 0;

	(void)state;
	snprintf(path, sizeof(path), "%s/../../deploy/source.yaml", tu_env("DS_RESOURCES"));
	assert_int_equal(ds_source_config_load(&cfg, path, &err), 0);
	assert_string_equal(ds_source_config_cluster_name(cfg), "prod-east");
	assert_string_equal(ds_source_config_namespaces(cfg, &n)[0], "ml-team");
	assert_int_equal(n, 1);
	assert_int_equal(ds_source_config_schedule(cfg)->mode, DS_SCHEDULE_WATCH);
	assert_string_equal(ds_source_config_kubeconfig(cfg), "");
	ds_source_config_free(cfg);
}

/* Errors found in a file on disk are located in it, columns inside values too. */
static void test_source_config__file_errors_name_the_file(void **state)
{
	char path[1024];
	const char *yaml = BASE "schedule: {mode: cron, expr: \"0 25 * * *\"}\n";
	ds_source_config *cfg = NULL;
	ds_err err = {0};
	FILE *f;

	(void)state;
	snprintf(path, sizeof(path), "%s/source_config_bad.yaml", tu_env("DS_TEST_TMP"));
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(yaml, f);
	fclose(f);
	assert_int_equal(ds_source_config_load(&cfg, path, &err), -EINVAL);
	assert_string_equal(err.file, path);
	assert_int_equal(err.line, 5);
	assert_int_equal(err.col, 33);
	assert_non_null(strstr(err.msg, "schedule.expr: hour: 25 out of range 0-23"));
	assert_null(cfg);
	remove(path);

	ds_err_clear(&err);
	assert_true(ds_source_config_load(&cfg, "/nonexistent/source.yaml", &err) < 0);
	assert_string_equal(err.file, "/nonexistent/source.yaml");
	assert_null(cfg);
}

/* target.bandwidth and target.proxy: the values, and located errors that never quote a password. */
#define TGT                                                                                        \
	"clusterName: a\n"                                                                         \
	"keys: {secretKeyFile: /k}\n"                                                              \
	"namespaces: [a]\n"                                                                        \
	"target:\n"                                                                                \
	"  endpoint: tcp://a:1\n"                                                                  \
	"  serverPublicKey: \"" KEY "\"\n"

static const struct tu_bad_config bad_link[] = {
    {"bandwidth bad suffix", TGT "  bandwidth: 10Xi\n", 7, 16,
     "target.bandwidth: expected bytes per second (like 10Mi or 500Ki"},
    {"bandwidth negative", TGT "  bandwidth: -5\n", 7, 14, "found a negative integer"},
    {"bandwidth tiny", TGT "  bandwidth: 100\n", 7, 14,
     "100 bytes per second is below the least cap, 1Ki (0: no cap)"},
    {"bandwidth a list", TGT "  bandwidth: [1]\n", 7, 14, "found a list"},
    {"bandwidth too large", TGT "  bandwidth: 99999999999Ti\n", 7, 14, "is too large"},
    {"proxy not socks5", TGT "  proxy: http://p:1080\n", 7, 10,
     "target.proxy: not a SOCKS5 proxy URL: write socks5://[user:pass@]host:port"},
    {"proxy without port", TGT "  proxy: socks5://p\n", 7, 19,
     "target.proxy: the proxy's address is not host:port"},
    {"proxy credentials without password", TGT "  proxy: \"socks5://u@p:1080\"\n", 7, 20,
     "target.proxy: the proxy's credentials are not user:pass"},
    {"proxy credentials twice",
     TGT "  proxy: \"socks5://u:pw@p:1080\"\n  proxyCredentialsFile: /c\n", 8, 3,
     "target.proxyCredentialsFile: the proxy URL holds credentials already"},
    {"credentials file without proxy", TGT "  proxyCredentialsFile: /c\n", 7, 3,
     "target.proxyCredentialsFile: only with 'proxy'"},
    {"unknown target key", TGT "  proxi: socks5://p:1\n", 7, 3,
     "target.proxi: unknown key (did you mean 'proxy'?)"},
};

static void test_source_config__bandwidth_and_proxy(void **state)
{
	static const struct {
		const char *value;
		uint64_t bytes;
	} rates[] = {{"10Mi", 10485760}, {"500Ki", 512000}, {"2M", 2000000},
		     {"4096", 4096},	 {"0", 0},	    {"1Ki", 1024}};
	ds_source_config *cfg;
	const ds_socks_proxy *px;
	char yaml[1024];
	ds_err err = {0};

	(void)state;
	for (size_t i = 0; i < sizeof(rates) / sizeof(rates[0]); i++) {
		snprintf(yaml, sizeof(yaml), "%s  bandwidth: %s\n", TGT, rates[i].value);
		cfg = load(yaml);
		assert_int_equal(ds_source_config_bandwidth(cfg), rates[i].bytes);
		assert_null(ds_source_config_proxy(cfg));
		ds_source_config_free(cfg);
	}
	cfg = load(TGT);
	assert_int_equal(ds_source_config_bandwidth(cfg), 0);
	ds_source_config_free(cfg);

	cfg = load(TGT "  proxy: socks5://egress.corp.example:1080\n"
		       "  proxyCredentialsFile: /etc/drasync/proxy-credentials\n");
	px = ds_source_config_proxy(cfg);
	assert_non_null(px);
	assert_string_equal(px->address, "egress.corp.example:1080");
	assert_string_equal(px->username, "");
	assert_string_equal(ds_source_config_proxy_credentials_file(cfg),
			    "/etc/drasync/proxy-credentials");
	ds_source_config_free(cfg);

	cfg = load(TGT "  proxy: \"socks5://drasync:p@ss:word@10.0.0.1:1080\"\n");
	px = ds_source_config_proxy(cfg);
	assert_string_equal(px->address, "10.0.0.1:1080");
	assert_string_equal(px->username, "drasync");
	assert_string_equal(px->password, "p@ss:word");
	ds_source_config_free(cfg);

	for (size_t i = 0; i < sizeof(bad_link) / sizeof(bad_link[0]); i++) {
		int r;

		cfg = NULL;
		ds_err_clear(&err);
		r = ds_source_config_parse(&cfg, bad_link[i].yaml, strlen(bad_link[i].yaml),
					   "source.yaml", &err);
		tu_assert_bad_config(&bad_link[i], r, &err, "source.yaml");
		assert_null(cfg);
	}
	/* A bad proxy URL is reported without its password. */
	ds_err_clear(&err);
	snprintf(yaml, sizeof(yaml), "%s", TGT "  proxy: \"socks5://u:s3cr3t@:1080\"\n");
	assert_int_equal(ds_source_config_parse(&cfg, yaml, strlen(yaml), "source.yaml", &err),
			 -EINVAL);
	assert_non_null(strstr(err.msg, "not host:port"));
	assert_null(strstr(err.msg, "s3cr3t"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_source_config__full_file_loads),
	    cmocka_unit_test(test_source_config__defaults),
	    cmocka_unit_test(test_source_config__schedule_modes),
	    cmocka_unit_test(test_source_config__namespace_selector),
	    cmocka_unit_test(test_source_config__bad_files_are_located),
	    cmocka_unit_test(test_source_config__shipped_example_loads),
	    cmocka_unit_test(test_source_config__file_errors_name_the_file),
	    cmocka_unit_test(test_source_config__bandwidth_and_proxy),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
