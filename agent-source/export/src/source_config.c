#include "drasync/source_config.h"

#include "drasync/config_check.h"
#include "drasync/cron.h"
#include "drasync/duration.h"
#include "drasync/k8s_object.h"
#include "drasync/keys.h"
#include "drasync/label_selector.h"
#include "drasync/quantity.h"
#include "drasync/socks_proxy.h"
#include "drasync/string_table.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_STATE_DIR "/var/lib/drasync"
#define DEFAULT_DEBOUNCE_MS 200
#define DEFAULT_QUIET_MS 50

struct ds_source_config {
	json_t *docs; /* owns every string below */
	const char *cluster_name, *endpoint, *server_public_key, *secret_key_file, *kubeconfig,
	    *state_dir, *metrics_listen, *namespace_selector;
	const char **namespaces;
	size_t n_namespaces;
	ds_schedule_config schedule;
	uint64_t bandwidth;		    /* target.bandwidth, bytes per second; 0: none */
	const char *proxy_credentials_file; /* target.proxyCredentialsFile */
	ds_socks_proxy proxy;		    /* target.proxy; address "" when not set */
};

static const char *const ds_schedule_mode_table[DS_SCHEDULE_MODE_MAX] = {
    [DS_SCHEDULE_WATCH] = "watch",
    [DS_SCHEDULE_INTERVAL] = "interval",
    [DS_SCHEDULE_CRON] = "cron",
    [DS_SCHEDULE_ONCE] = "once",
};
DS_DEFINE_PRIVATE_STRING_TABLE_LOOKUP(ds_schedule_mode, enum ds_schedule_mode)

/* Fail at member `key` of the node at hand (its value, or its key when at_key). */
static int fail_at(ds_config_walk *w, const char *key, bool at_key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail_at(ds_config_walk *w, const char *key, bool at_key, const char *fmt, ...)
{
	ds_config_mark m = ds_config_push_key(w, key);
	char msg[200];
	va_list ap;
	int r;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	r = ds_config_fail(w, at_key, "%s", msg);
	ds_config_pop(w, m);
	return r;
}

/* Fail at member `key`, at 1-based column `col` inside its string (0: at the value). */
static int fail_in(ds_config_walk *w, const char *key, size_t col, const char *msg)
{
	ds_config_mark m = ds_config_push_key(w, key);
	int r = col ? ds_config_fail_in_value(w, col - 1, "%s", msg)
		    : ds_config_fail(w, false, "%s", msg);

	ds_config_pop(w, m);
	return r;
}

/* A required string member: present, a string, not empty. */
static int required_str(ds_config_walk *w, const json_t *obj, const char *key, const char *what,
			const char **out)
{
	int r = ds_config_member_str(w, obj, key, out);

	if (r < 0)
		return r;
	if (!*out)
		return ds_config_fail(w, false, "missing '%s' (%s)", key, what);
	if (!**out)
		return fail_at(w, key, false, "must not be empty (%s)", what);
	return 0;
}

/* A duration member in milliseconds; the column of a bad part is pointed at. */
static int duration_ms(ds_config_walk *w, const json_t *obj, const char *key, long long *out)
{
	const char *s;
	size_t col = 0;
	ds_err derr = {0};
	char msg[sizeof(derr.msg) + 64];
	int r;

	if (json_is_number(json_object_get(obj, key)))
		return fail_at(w, key, false,
			       "a number needs a unit: write a Go duration such as %s",
			       "15m, 30s or 1h30m");
	if ((r = ds_config_member_str(w, obj, key, &s)) < 0 || !s)
		return r;
	if (ds_duration_parse_ms(s, out, &col, &derr) == 0)
		return 0;
	snprintf(msg, sizeof(msg), "%s (a Go duration such as 15m, 1h30m)", derr.msg);
	return fail_in(w, key, col, msg);
}

/* Keys that belong to another mode, by the mode they belong to. */
static int check_mode_keys(ds_config_walk *w, const json_t *sched, enum ds_schedule_mode mode)
{
	static const struct {
		const char *key;
		enum ds_schedule_mode mode;
	} own[] = {
	    {"every", DS_SCHEDULE_INTERVAL}, {"expr", DS_SCHEDULE_CRON},
	    {"timeZone", DS_SCHEDULE_CRON},  {"debounce", DS_SCHEDULE_WATCH},
	    {"quiet", DS_SCHEDULE_WATCH},
	};

	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++) {
		if (own[i].mode == mode || !json_object_get(sched, own[i].key))
			continue;
		return fail_at(w, own[i].key, true, "only for mode %s (mode is %s)",
			       ds_schedule_mode_name(own[i].mode), ds_schedule_mode_name(mode));
	}
	return 0;
}

static int load_cron(ds_config_walk *w, const json_t *sched, ds_schedule_config *s)
{
	ds_cron *cron = NULL;
	ds_err cerr = {0};
	size_t col = 0;
	int r;

	if ((r = ds_config_member_str(w, sched, "expr", &s->cron_expr)) < 0 ||
	    (r = ds_config_member_str(w, sched, "timeZone", &s->time_zone)) < 0)
		return r;
	if (!s->cron_expr)
		return ds_config_fail(w, false,
				      "mode cron needs 'expr' (5 fields such as \"*/15 * * * *\", "
				      "or @hourly, @daily, ...)");
	if (ds_cron_parse(&cron, s->cron_expr, &col, &cerr) < 0)
		return fail_in(w, "expr", col, cerr.msg);
	ds_cron_free(cron);
	if (s->time_zone && ds_cron_zone_check(s->time_zone, &cerr) < 0)
		return fail_at(w, "timeZone", false, "%s", cerr.msg);
	if (s->time_zone && !*s->time_zone)
		s->time_zone = NULL;
	return 0;
}

/* debounce: the longest a change waits; quiet: how long its object must be
 * unchanged before it goes (default 50 ms, or the debounce when shorter). */
static int load_watch(ds_config_walk *w, const json_t *sched, ds_schedule_config *s)
{
	int r;

	if ((r = duration_ms(w, sched, "debounce", &s->debounce_ms)) < 0 ||
	    (r = duration_ms(w, sched, "quiet", &s->quiet_ms)) < 0)
		return r;
	if (!json_object_get(sched, "quiet")) {
		if (s->quiet_ms > s->debounce_ms)
			s->quiet_ms = s->debounce_ms;
		return 0;
	}
	if (s->quiet_ms > s->debounce_ms)
		return fail_at(w, "quiet", false,
			       "%lld ms is longer than debounce (%lld ms): a change waits for "
			       "quiet at most debounce after its first change; make quiet "
			       "shorter or debounce longer",
			       s->quiet_ms, s->debounce_ms);
	return 0;
}

static int load_schedule(ds_config_walk *w, const json_t *root, ds_schedule_config *s)
{
	static const char *const keys[] = {"mode",     "every", "expr", "timeZone",
					   "debounce", "quiet", NULL};
	json_t *sched;
	const char *mode;
	ds_config_mark m;
	int r, found = -1;

	s->mode = DS_SCHEDULE_WATCH;
	s->debounce_ms = DEFAULT_DEBOUNCE_MS;
	s->quiet_ms = DEFAULT_QUIET_MS;
	if ((r = ds_config_member(w, root, "schedule", JSON_OBJECT, &sched)) < 0 || !sched)
		return r;
	m = ds_config_push_key(w, "schedule");
	if ((r = ds_config_check_keys(w, sched, keys)) < 0 ||
	    (r = ds_config_member_str(w, sched, "mode", &mode)) < 0)
		return r;
	if (!mode)
		return ds_config_fail(w, false, "missing 'mode' (watch, interval, cron or once)");
	if ((found = ds_schedule_mode_from_string(mode)) < 0)
		return fail_at(w, "mode", false,
			       "unknown mode '%s' (expected watch, interval, cron or once)", mode);
	s->mode = (enum ds_schedule_mode)found;
	if ((r = check_mode_keys(w, sched, s->mode)) < 0)
		return r;
	switch (s->mode) {
	case DS_SCHEDULE_WATCH:
		r = load_watch(w, sched, s);
		break;
	case DS_SCHEDULE_INTERVAL:
		if (!json_object_get(sched, "every"))
			return ds_config_fail(
			    w, false, "mode interval needs 'every' (a duration such as 15m)");
		r = duration_ms(w, sched, "every", &s->every_ms);
		break;
	case DS_SCHEDULE_CRON:
		r = load_cron(w, sched, s);
		break;
	default:
		break;
	}
	if (r < 0)
		return r;
	if (s->mode != DS_SCHEDULE_WATCH)
		s->debounce_ms = s->quiet_ms = 0;
	ds_config_pop(w, m);
	return 0;
}

static int load_namespaces(ds_config_walk *w, ds_source_config *cfg, const json_t *list)
{
	ds_config_mark m = ds_config_push_key(w, "namespaces");
	size_t i;
	json_t *v;

	if (json_array_size(list) == 0)
		return ds_config_fail(w, false,
				      "empty list: name at least one namespace (or use "
				      "namespaceSelector)");
	cfg->namespaces = calloc(json_array_size(list) + 1, sizeof(*cfg->namespaces));
	if (!cfg->namespaces)
		return -ENOMEM;
	json_array_foreach (list, i, v) {
		ds_config_mark mi = ds_config_push_index(w, i);
		const char *ns = json_string_value(v);

		if (!ns)
			return ds_config_fail(w, false, "expected a namespace name, found %s",
					      ds_config_type_name(v));
		if (!ds_dns_label_valid(ns))
			return ds_config_fail(w, false,
					      "'%s' is not a valid namespace name (a DNS label: "
					      "lowercase letters, digits and '-', at most 63)",
					      ns);
		for (size_t k = 0; k < cfg->n_namespaces; k++)
			if (strcmp(cfg->namespaces[k], ns) == 0)
				return ds_config_fail(
				    w, false, "'%s' is listed twice (also namespaces[%zu])", ns, k);
		cfg->namespaces[cfg->n_namespaces++] = ns;
		ds_config_pop(w, mi);
	}
	ds_config_pop(w, m);
	return 0;
}

static int load_selection(ds_config_walk *w, ds_source_config *cfg, const json_t *root)
{
	ds_label_selector *sel = NULL;
	ds_err serr = {0};
	size_t col = 0;
	json_t *list;
	int r;

	if ((r = ds_config_member(w, root, "namespaces", JSON_ARRAY, &list)) < 0 ||
	    (r = ds_config_member_str(w, root, "namespaceSelector", &cfg->namespace_selector)) < 0)
		return r;
	if (list && cfg->namespace_selector)
		return fail_at(w, "namespaceSelector", true,
			       "set either namespaces or namespaceSelector, not both");
	if (!list && !cfg->namespace_selector)
		return ds_config_fail(w, false,
				      "missing 'namespaces' (a list of names) or "
				      "'namespaceSelector' (a label selector such as "
				      "drasync.io/replicate=true)");
	if (list)
		return load_namespaces(w, cfg, list);
	if (ds_label_selector_parse(&sel, cfg->namespace_selector, &col, &serr) < 0)
		return fail_in(w, "namespaceSelector", col, serr.msg);
	ds_label_selector_free(sel);
	return 0;
}

#define MIN_BANDWIDTH 1024 /* below 1Ki a single object could take minutes */

/* target.bandwidth: a byte quantity per second (absent or 0: no cap). */
static int load_bandwidth(ds_config_walk *w, const json_t *t, uint64_t *out)
{
	const json_t *v = json_object_get(t, "bandwidth");
	ds_config_mark m;
	size_t bad = 0;
	int r = 0;

	if (!v)
		return 0;
	m = ds_config_push_key(w, "bandwidth");
	if (json_is_integer(v) && json_integer_value(v) >= 0) {
		*out = (uint64_t)json_integer_value(v);
	} else if (json_is_string(v)) {
		r = ds_quantity_parse_bytes(json_string_value(v), out, &bad);
		if (r == -ERANGE)
			r = ds_config_fail(w, false, "'%s' is too large", json_string_value(v));
		else if (r < 0)
			r = ds_config_fail_in_value(
			    w, bad,
			    "expected bytes per second (like 10Mi or 500Ki; "
			    "suffixes Ki Mi Gi Ti k M G T), found '%s'",
			    json_string_value(v));
	} else {
		r = ds_config_fail(
		    w, false, "expected bytes per second (like 10Mi, or 0: no cap), found %s",
		    json_is_integer(v) ? "a negative integer" : ds_config_type_name(v));
	}
	if (r == 0 && *out > 0 && *out < MIN_BANDWIDTH)
		r = ds_config_fail(w, false,
				   "%llu bytes per second is below the least cap, 1Ki (0: no cap)",
				   (unsigned long long)*out);
	ds_config_pop(w, m);
	return r;
}

/* target.proxy (socks5://[user:pass@]host:port) and target.proxyCredentialsFile. */
static int load_proxy(ds_config_walk *w, ds_source_config *cfg, const json_t *t)
{
	const char *url = NULL;
	ds_err perr = {0};
	size_t bad = 0;
	int r;

	if ((r = ds_config_member_str(w, t, "proxy", &url)) < 0 ||
	    (r = ds_config_member_str(w, t, "proxyCredentialsFile", &cfg->proxy_credentials_file)) <
		0)
		return r;
	if (!url) {
		if (cfg->proxy_credentials_file)
			return fail_at(w, "proxyCredentialsFile", true,
				       "only with 'proxy' (socks5://host:port)");
		return 0;
	}
	if (ds_socks_proxy_parse(url, &cfg->proxy, &bad, &perr) < 0)
		return fail_in(w, "proxy", bad + 1, perr.msg);
	if (cfg->proxy.username[0] && cfg->proxy_credentials_file)
		return fail_at(w, "proxyCredentialsFile", true,
			       "the proxy URL holds credentials already: keep them in the file "
			       "only (a config file is seldom kept as a secret)");
	if (cfg->proxy_credentials_file && !*cfg->proxy_credentials_file)
		return fail_at(w, "proxyCredentialsFile", false,
			       "must not be empty (a file holding user:pass, mode 0600)");
	return 0;
}

static int load_target(ds_config_walk *w, ds_source_config *cfg, const json_t *root)
{
	static const char *const keys[] = {"endpoint", "serverPublicKey",      "bandwidth",
					   "proxy",    "proxyCredentialsFile", NULL};
	const char *hp;
	json_t *t;
	ds_config_mark m;
	int r;

	if ((r = ds_config_member(w, root, "target", JSON_OBJECT, &t)) < 0)
		return r;
	if (!t)
		return ds_config_fail(w, false,
				      "missing 'target' ({endpoint: \"tcp://host:port\", "
				      "serverPublicKey: <Z85>})");
	m = ds_config_push_key(w, "target");
	if ((r = ds_config_check_keys(w, t, keys)) < 0 ||
	    (r = required_str(w, t, "endpoint", "the target agent, tcp://host:port",
			      &cfg->endpoint)) < 0 ||
	    (r = required_str(w, t, "serverPublicKey", "the target's 40-character Z85 public key",
			      &cfg->server_public_key)) < 0)
		return r;
	hp = cfg->endpoint + 6;
	if (strncmp(cfg->endpoint, "tcp://", 6) != 0 || hp[0] == ':' || hp[0] == '*' ||
	    !ds_config_host_port_valid(hp))
		return fail_at(w, "endpoint", false, "'%s' is not tcp://host:port (port 1-65535)",
			       cfg->endpoint);
	if (!ds_keys_z85_valid(cfg->server_public_key))
		return fail_at(w, "serverPublicKey", false,
			       "'%s' is not a 40-character Z85 key (drasync-target keygen prints "
			       "one)",
			       cfg->server_public_key);
	if ((r = load_bandwidth(w, t, &cfg->bandwidth)) < 0 || (r = load_proxy(w, cfg, t)) < 0)
		return r;
	ds_config_pop(w, m);
	return 0;
}

static int load_root(ds_config_walk *w, const json_t *root, void *ctx)
{
	static const char *const keys[] = {
	    "apiVersion", "kind",	"clusterName",	     "target",	 "keys",    "kubeconfig",
	    "stateDir",	  "namespaces", "namespaceSelector", "schedule", "metrics", NULL,
	};
	static const char *const key_keys[] = {"secretKeyFile", NULL};
	static const char *const metric_keys[] = {"listen", NULL};
	ds_source_config *cfg = ctx;
	const char **key_outs[] = {&cfg->secret_key_file};
	const char **metric_outs[] = {&cfg->metrics_listen};
	int r;

	if (!json_is_object(root))
		return ds_config_fail(w, false, "expected a SourceConfig mapping, found %s",
				      ds_config_type_name(root));
	if ((r = ds_config_check_keys(w, root, keys)) < 0 ||
	    (r = ds_config_check_header(w, root, "SourceConfig", "drasync-source")) < 0)
		return r;
	if ((r = required_str(w, root, "clusterName", "this cluster's name, a DNS subdomain",
			      &cfg->cluster_name)) < 0)
		return r;
	if (!ds_dns_subdomain_valid(cfg->cluster_name))
		return fail_at(w, "clusterName", false,
			       "'%s' is not a valid cluster name (lowercase letters, digits, '-' "
			       "and '.', at most 253)",
			       cfg->cluster_name);
	if ((r = load_target(w, cfg, root)) < 0 ||
	    (r = ds_config_section_str(w, root, "keys", key_keys, key_outs)) < 0)
		return r;
	if (!cfg->secret_key_file || !*cfg->secret_key_file) {
		if (!json_object_get(root, "keys"))
			return ds_config_fail(w, false, "missing 'keys' ({secretKeyFile: <path>})");
		return fail_at(w, "keys", false, "missing 'secretKeyFile' (%s)",
			       "the source's CURVE secret key file, from drasync-source keygen");
	}
	if ((r = ds_config_member_str(w, root, "kubeconfig", &cfg->kubeconfig)) < 0 ||
	    (r = ds_config_member_str(w, root, "stateDir", &cfg->state_dir)) < 0)
		return r;
	if (!cfg->state_dir)
		cfg->state_dir = DEFAULT_STATE_DIR;
	else if (!*cfg->state_dir)
		return fail_at(w, "stateDir", false, "must not be empty (default %s)",
			       DEFAULT_STATE_DIR);
	if ((r = load_selection(w, cfg, root)) < 0 ||
	    (r = load_schedule(w, root, &cfg->schedule)) < 0 ||
	    (r = ds_config_section_str(w, root, "metrics", metric_keys, metric_outs)) < 0)
		return r;
	if (cfg->metrics_listen && !ds_config_host_port_valid(cfg->metrics_listen)) {
		ds_config_mark m = ds_config_push_key(w, "metrics");
		r = fail_at(w, "listen", false, "'%s' is not host:port (port 1-65535)",
			    cfg->metrics_listen);
		ds_config_pop(w, m);
		return r;
	}
	return 0;
}

static int build(ds_source_config **out, const char *path, const char *buf, size_t len,
		 const char *filename, ds_err *err)
{
	ds_source_config *cfg = calloc(1, sizeof(*cfg));
	int r;

	if (!cfg) {
		ds_err_set(err, "out of memory");
		return -ENOMEM;
	}
	r = ds_config_run(path, buf, len, filename, "SourceConfig", load_root, cfg, &cfg->docs,
			  err);
	if (r < 0) {
		ds_source_config_free(cfg);
		return r;
	}
	*out = cfg;
	return 0;
}

int ds_source_config_load(ds_source_config **out, const char *path, ds_err *err)
{
	return build(out, path, NULL, 0, NULL, err);
}

int ds_source_config_parse(ds_source_config **out, const char *buf, size_t len,
			   const char *filename, ds_err *err)
{
	return build(out, NULL, buf, len, filename, err);
}

void ds_source_config_free(ds_source_config *cfg)
{
	if (!cfg)
		return;
	free(cfg->namespaces);
	ds_socks_proxy_dispose(&cfg->proxy);
	json_decref(cfg->docs);
	free(cfg);
}

const char *ds_source_config_cluster_name(const ds_source_config *cfg)
{
	return cfg->cluster_name;
}
const char *ds_source_config_endpoint(const ds_source_config *cfg)
{
	return cfg->endpoint;
}
const char *ds_source_config_server_public_key(const ds_source_config *cfg)
{
	return cfg->server_public_key;
}
const char *ds_source_config_secret_key_file(const ds_source_config *cfg)
{
	return cfg->secret_key_file;
}
const char *ds_source_config_kubeconfig(const ds_source_config *cfg)
{
	return cfg->kubeconfig;
}
const char *ds_source_config_state_dir(const ds_source_config *cfg)
{
	return cfg->state_dir;
}
const char *ds_source_config_metrics_listen(const ds_source_config *cfg)
{
	return cfg->metrics_listen;
}

uint64_t ds_source_config_bandwidth(const ds_source_config *cfg)
{
	return cfg->bandwidth;
}

const ds_socks_proxy *ds_source_config_proxy(const ds_source_config *cfg)
{
	return cfg->proxy.address[0] ? &cfg->proxy : NULL;
}

const char *ds_source_config_proxy_credentials_file(const ds_source_config *cfg)
{
	return cfg->proxy_credentials_file;
}

const char *const *ds_source_config_namespaces(const ds_source_config *cfg, size_t *n)
{
	*n = cfg->n_namespaces;
	return cfg->n_namespaces ? cfg->namespaces : NULL;
}

const char *ds_source_config_namespace_selector(const ds_source_config *cfg)
{
	return cfg->namespace_selector;
}

const ds_schedule_config *ds_source_config_schedule(const ds_source_config *cfg)
{
	return &cfg->schedule;
}

const char *ds_schedule_mode_name(enum ds_schedule_mode mode)
{
	const char *s = ds_schedule_mode_to_string(mode);

	return s ? s : "?";
}
