/* The agents' command line: the subcommand dispatch and the common options. */
#include "drasync/cli.h"

#include "drasync/duration.h"
#include "drasync/err.h"
#include "drasync/log.h"

#include <assert.h>
#include <getopt.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>

/* The common options, in the order --help lists them; key as getopt returns it. */
enum {
	KEY_KUBECONFIG = DS_CLI_LONG_ONLY - 8,
	KEY_CONTEXT,
	KEY_LOG_LEVEL,
	KEY_HELP = 'h',
};

static const struct {
	unsigned flag;
	struct option opt;
} common_opts[] = {
    {DS_CLI_CONFIG, {"config", required_argument, NULL, 'c'}},
    {DS_CLI_KUBECONFIG, {"kubeconfig", required_argument, NULL, KEY_KUBECONFIG}},
    {DS_CLI_CONTEXT, {"context", required_argument, NULL, KEY_CONTEXT}},
    {DS_CLI_OUTPUT, {"output", required_argument, NULL, 'o'}},
    {DS_CLI_NAMESPACE, {"namespace", required_argument, NULL, 'n'}},
    {DS_CLI_TIMEOUT, {"timeout", required_argument, NULL, 't'}},
    {DS_CLI_LOG_LEVEL, {"log-level", required_argument, NULL, KEY_LOG_LEVEL}},
};

#define N_COMMON (sizeof(common_opts) / sizeof(common_opts[0]))
#define MAX_OWN 32

static const char *const default_outputs[] = {"text", "json", NULL};

void ds_cli_usage(const struct ds_cli_program *prog, FILE *out)
{
	int width = prog->width;

	if (width <= 0)
		for (const struct ds_cli_command *c = prog->commands; c->name; c++)
			if ((int)strlen(c->name) + 2 > width)
				width = (int)strlen(c->name) + 2;
	fprintf(out, "Usage: %s COMMAND [OPTIONS]\n\n%s\nCommands:\n", prog->name, prog->about);
	for (const struct ds_cli_command *c = prog->commands; c->name; c++)
		fprintf(out, "  %-*s %s\n", width, c->name, c->summary);
	fprintf(out, "\n"
		     "Options:\n"
		     "  -h, --help     show this help (COMMAND --help for a command's options)\n"
		     "  -V, --version  print the version\n");
	if (prog->example)
		fprintf(out, "\n%s", prog->example);
}

int ds_cli_dispatch(const struct ds_cli_program *prog, const char *version, int argc, char **argv)
{
	if (argc < 2) {
		ds_cli_usage(prog, stderr);
		return 2;
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		ds_cli_usage(prog, stdout);
		return 0;
	}
	if (strcmp(argv[1], "-V") == 0 || strcmp(argv[1], "--version") == 0) {
		printf("%s %s\n", prog->name, version);
		return 0;
	}
	/* The agents run 10 to 70 threads (watches, the link, HTTP): glibc gave
	 * each its own arena up to 8 a core, a few hundred KB to MBs each that
	 * the others' frees never reach. A few arenas are shared instead. */
	mallopt(M_ARENA_MAX, DS_CLI_ARENAS);
	/* A fixed threshold: a buffer this large or larger (a batch, a manifest
	 * part, a decompressed record) is its own mapping, returned at free.
	 * glibc's own raises the threshold to each such buffer freed, and later
	 * ones then grow an arena, which a trim gives back only in part: the
	 * importer's peak rose with the length of a sync, not its working set. */
	mallopt(M_MMAP_THRESHOLD, DS_CLI_MMAP_THRESHOLD);
	for (const struct ds_cli_command *c = prog->commands; c->name; c++)
		if (strcmp(argv[1], c->name) == 0)
			return c->run(argc - 1, argv + 1);
	fprintf(stderr, "%s: unknown command '%s' (try --help)\n", prog->name, argv[1]);
	return 2;
}

int ds_cli_fail(const struct ds_cli_spec *spec, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s %s: ", spec->prog, spec->cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 2;
}

int ds_cli_duration(const struct ds_cli_spec *spec, const char *opt, const char *arg,
		    long long *ms_out)
{
	ds_err err = {0};
	long long ms;
	int64_t ns;

	if (spec->takes & DS_CLI_ZERO_DURATION) {
		if (ds_duration_parse(arg, &ns, NULL, &err) < 0)
			goto bad;
		if (ns < 0) {
			ds_err_set(&err, "negative");
			goto bad;
		}
		ms = ns / 1000000;
	} else if (ds_duration_parse_ms(arg, &ms, NULL, &err) < 0) {
		goto bad;
	}
	*ms_out = ms;
	return 0;
bad:
	return ds_cli_fail(spec, "--%s: '%s': %s (a Go duration, e.g. --%s 90s or --%s 5m)", opt,
			   arg, err.msg, opt, opt);
}

/* "text or json", "text, json or yaml" */
static void list_outputs(const char *const *outputs, char *buf, size_t size)
{
	size_t n = 0, used = 0;

	while (outputs[n])
		n++;
	buf[0] = '\0';
	for (size_t i = 0; i < n && used < size; i++) {
		const char *sep = i == 0 ? "" : i + 1 == n ? " or " : ", ";
		int w = snprintf(buf + used, size - used, "%s%s", sep, outputs[i]);

		if (w < 0)
			break;
		used += (size_t)w;
	}
}

static bool own(const struct ds_cli_spec *spec, const char *name)
{
	for (const struct ds_cli_option *o = spec->options; o && o->name; o++)
		if (strcmp(o->name, name) == 0)
			return true;
	return false;
}

static int add_namespace(const struct ds_cli_spec *spec, const char *ns, struct ds_cli_args *out)
{
	size_t max = spec->max_namespaces ? spec->max_namespaces : DS_CLI_MAX_NAMESPACES;
	const char *hint = spec->ns_hint;

	if (max > DS_CLI_MAX_NAMESPACES)
		max = DS_CLI_MAX_NAMESPACES;
	if (!ns[0] || strchr(ns, '/'))
		return ds_cli_fail(spec,
				   "--namespace needs a namespace name ('%s' is not one), e.g. "
				   "--namespace %s",
				   ns, spec->ns_example ? spec->ns_example : "ml-team");
	if (out->n_namespaces == max && max == 1)
		return ds_cli_fail(spec, "one --namespace at a time%s%s", hint ? "; " : "",
				   hint ? hint : "");
	if (out->n_namespaces == max)
		return ds_cli_fail(spec, "at most %zu --namespace%s%s", max, hint ? "; " : "",
				   hint ? hint : "");
	out->namespaces[out->n_namespaces++] = ns;
	return 0;
}

static int common_option(const struct ds_cli_spec *spec, int key, const char *arg,
			 struct ds_cli_args *out)
{
	enum ds_log_level level;

	switch (key) {
	case 'c':
		out->config = arg;
		return 0;
	case KEY_KUBECONFIG:
		out->kubeconfig = arg;
		return 0;
	case KEY_CONTEXT:
		out->context = arg;
		return 0;
	case 'o':
		out->output = arg;
		return 0;
	case 'n':
		return add_namespace(spec, arg, out);
	case 't':
		if (ds_cli_duration(spec, "timeout", arg, &out->timeout_ms) != 0)
			return 2;
		out->timeout_given = true;
		return 0;
	case KEY_LOG_LEVEL:
		if (ds_log_level_parse(arg, &level) < 0)
			return ds_cli_fail(
			    spec, "--log-level: '%s' is not one of debug, info, warn, error", arg);
		ds_log_set_level(level);
		return 0;
	default:
		return -1;
	}
}

/* The command's own option for getopt's key, or NULL. */
static const struct ds_cli_option *own_option(const struct ds_cli_spec *spec, int key)
{
	for (const struct ds_cli_option *o = spec->options; o && o->name; o++)
		if (o->key == key)
			return o;
	return NULL;
}

static int own_value(const struct ds_cli_spec *spec, const struct ds_cli_option *o, const char *arg)
{
	long long ms = 0;

	if (!spec->on_option)
		return 0;
	if (o->arg == DS_CLI_DURATION && ds_cli_duration(spec, o->name, arg, &ms) != 0)
		return 2;
	return spec->on_option(spec->ctx, o->key, o->arg == DS_CLI_FLAG ? NULL : arg, ms);
}

/* After the options: the positional arguments, --config and -o. */
static int check(const struct ds_cli_spec *spec, const char *const *outputs, int argc, char **argv,
		 struct ds_cli_args *out)
{
	char list[128];
	size_t n;

	out->argc = argc - optind;
	out->argv = argv + optind;
	if (spec->max_args != DS_CLI_ANY_ARGS && out->argc > spec->max_args)
		return ds_cli_fail(spec, "unexpected argument '%s'%s (try --help)",
				   out->argv[spec->max_args],
				   spec->args_hint ? spec->args_hint : "");
	if ((spec->takes & DS_CLI_CONFIG_REQUIRED) && !out->config)
		return ds_cli_fail(spec, "--config FILE is required, e.g.\n  %s %s --config %s",
				   spec->prog, spec->cmd,
				   spec->config_example ? spec->config_example : "FILE");
	if (!(spec->takes & DS_CLI_OUTPUT))
		return DS_CLI_CONTINUE;
	if (!out->output)
		out->output = outputs[0];
	for (n = 0; outputs[n]; n++)
		if (strcmp(out->output, outputs[n]) == 0)
			return DS_CLI_CONTINUE;
	list_outputs(outputs, list, sizeof(list));
	return ds_cli_fail(
	    spec, "-o: '%s' is not %s; -o must be %s, e.g.\n  %s %s --config %s -o %s", out->output,
	    list, list, spec->prog, spec->cmd, out->config ? out->config : "FILE", outputs[n - 1]);
}

int ds_cli_parse(const struct ds_cli_spec *spec, int argc, char **argv, struct ds_cli_args *out)
{
	const char *const *outputs = spec->outputs ? spec->outputs : default_outputs;
	struct option longopts[N_COMMON + MAX_OWN + 2];
	char shortopts[2 * (N_COMMON + MAX_OWN) + 2];
	size_t nl = 0, ns = 0;
	int c, rc;

	for (size_t i = 0; i < N_COMMON; i++) {
		const struct option *o = &common_opts[i].opt;

		if (!(spec->takes & common_opts[i].flag) || own(spec, o->name))
			continue;
		/* A command's own key never shadows a common option it takes. */
		assert(!own_option(spec, o->val));
		longopts[nl++] = *o;
		if (o->val < DS_CLI_LONG_ONLY - 8) {
			shortopts[ns++] = (char)o->val;
			shortopts[ns++] = ':';
		}
	}
	for (const struct ds_cli_option *o = spec->options; o && o->name && nl < N_COMMON + MAX_OWN;
	     o++) {
		int has = o->arg == DS_CLI_FLAG ? no_argument : required_argument;

		longopts[nl++] = (struct option){o->name, has, NULL, o->key};
		if (o->key > 0 && o->key < 128) {
			shortopts[ns++] = (char)o->key;
			if (has == required_argument)
				shortopts[ns++] = ':';
		}
	}
	longopts[nl++] = (struct option){"help", no_argument, NULL, KEY_HELP};
	longopts[nl] = (struct option){NULL, 0, NULL, 0};
	shortopts[ns++] = 'h';
	shortopts[ns] = '\0';

	optind = 0; /* glibc: start afresh, also after a parse that stopped mid-word */
	while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		const struct ds_cli_option *o = own_option(spec, c);

		if (c == KEY_HELP) {
			if (spec->usage)
				spec->usage(stdout);
			return 0;
		}
		if (o) {
			if ((rc = own_value(spec, o, optarg)) != 0)
				return rc;
			continue;
		}
		if (c != '?' && c != ':' && (rc = common_option(spec, c, optarg, out)) >= 0) {
			if (rc != 0)
				return rc;
			continue;
		}
		if (spec->on_option && optind > 0 && optind <= argc)
			(void)spec->on_option(spec->ctx, DS_CLI_UNKNOWN, argv[optind - 1], 0);
		fprintf(stderr, "Try '%s %s --help'.\n", spec->prog, spec->cmd);
		return 2;
	}
	return check(spec, outputs, argc, argv, out);
}
