/* The command-line layer: the dispatch, the common options and their usage errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What a call printed: stdout and stderr, each captured in a file. */
struct captured {
	int out_fd, err_fd;
	FILE *out_f, *err_f;
	char out[4096], err[4096];
};

static void capture_start(struct captured *c)
{
	fflush(stdout);
	fflush(stderr);
	c->out_f = tmpfile();
	c->err_f = tmpfile();
	assert_non_null(c->out_f);
	assert_non_null(c->err_f);
	c->out_fd = dup(STDOUT_FILENO);
	c->err_fd = dup(STDERR_FILENO);
	dup2(fileno(c->out_f), STDOUT_FILENO);
	dup2(fileno(c->err_f), STDERR_FILENO);
}

static void slurp(FILE *f, char *buf, size_t size)
{
	size_t n;

	rewind(f);
	n = fread(buf, 1, size - 1, f);
	buf[n] = '\0';
	fclose(f);
}

static void capture_end(struct captured *c)
{
	fflush(stdout);
	fflush(stderr);
	dup2(c->out_fd, STDOUT_FILENO);
	dup2(c->err_fd, STDERR_FILENO);
	close(c->out_fd);
	close(c->err_fd);
	slurp(c->out_f, c->out, sizeof(c->out));
	slurp(c->err_f, c->err, sizeof(c->err));
}

static int ran_argc;
static char *ran_argv0;

static int cmd_hello(int argc, char **argv)
{
	ran_argc = argc;
	ran_argv0 = argv[0];
	return 7;
}

static const struct ds_cli_command commands[] = {
    {"hello", "say hello", cmd_hello},
    {"inventory", "list", cmd_hello},
    {NULL, NULL, NULL},
};

static const struct ds_cli_program program = {
    .name = "prog",
    .about = "A program.\n",
    .example = "Example:\n  prog hello\n",
    .commands = commands,
};

static int dispatch(struct captured *c, const char *const *args)
{
	static char words[8][64];
	char *argv[8] = {NULL};
	int argc = 1, rc;

	snprintf(words[0], sizeof(words[0]), "prog");
	argv[0] = words[0];
	for (; args[argc - 1] && argc < 7; argc++) {
		snprintf(words[argc], sizeof(words[argc]), "%s", args[argc - 1]);
		argv[argc] = words[argc];
	}
	capture_start(c);
	rc = ds_cli_dispatch(&program, "1.2.3", argc, argv);
	capture_end(c);
	return rc;
}

static void test_cli__dispatch(void **state)
{
	struct captured c;

	(void)state;
	ran_argc = 0;
	assert_int_equal(dispatch(&c, (const char *[]){"hello", "x", NULL}), 7);
	assert_int_equal(ran_argc, 2);
	assert_string_equal(ran_argv0, "hello");
	/* No command: the usage on stderr, exit 2. */
	assert_int_equal(dispatch(&c, (const char *[]){NULL}), 2);
	assert_non_null(strstr(c.err, "Usage: prog COMMAND [OPTIONS]"));
	assert_string_equal(c.out, "");
	for (int i = 0; i < 3; i++) {
		const char *help = (const char *[]){"-h", "--help", "help"}[i];

		assert_int_equal(dispatch(&c, (const char *[]){help, NULL}), 0);
		assert_string_equal(c.out, "Usage: prog COMMAND [OPTIONS]\n"
					   "\n"
					   "A program.\n"
					   "\n"
					   "Commands:\n"
					   "  hello       say hello\n"
					   "  inventory   list\n"
					   "\n"
					   "Options:\n"
					   "  -h, --help     show this help (COMMAND --help for a "
					   "command's options)\n"
					   "  -V, --version  print the version\n"
					   "\n"
					   "Example:\n"
					   "  prog hello\n");
	}
	assert_int_equal(dispatch(&c, (const char *[]){"-V", NULL}), 0);
	assert_string_equal(c.out, "prog 1.2.3\n");
	assert_int_equal(dispatch(&c, (const char *[]){"--version", NULL}), 0);
	assert_string_equal(c.out, "prog 1.2.3\n");
	assert_int_equal(dispatch(&c, (const char *[]){"frobnicate", NULL}), 2);
	assert_string_equal(c.err, "prog: unknown command 'frobnicate' (try --help)\n");
}

/* A command's own options, as on_option receives them. */
struct seen {
	int n;
	int keys[8];
	const char *args[8];
	long long ms[8];
	int fail_on;
};

static int on_option(void *ctx, int key, const char *arg, long long ms)
{
	struct seen *s = ctx;

	if (s->n < 8) {
		s->keys[s->n] = key;
		s->args[s->n] = arg;
		s->ms[s->n] = ms;
	}
	s->n++;
	return key == s->fail_on ? 5 : 0;
}

static void usage(FILE *out)
{
	fputs("Usage: prog cmd [OPTIONS]\n", out);
}

enum { KEY_INTERVAL = DS_CLI_LONG_ONLY, KEY_OFFLINE };

static const struct ds_cli_option own_options[] = {
    {"force", 'f', DS_CLI_FLAG},
    {"into", 'I', DS_CLI_STRING},
    {"interval", KEY_INTERVAL, DS_CLI_DURATION},
    {"offline", KEY_OFFLINE, DS_CLI_FLAG},
    {NULL, 0, DS_CLI_FLAG},
};

static struct ds_cli_spec spec_all(struct seen *s)
{
	return (struct ds_cli_spec){
	    .prog = "prog",
	    .cmd = "cmd",
	    .takes = DS_CLI_CONFIG | DS_CLI_KUBECONFIG | DS_CLI_CONTEXT | DS_CLI_OUTPUT |
		     DS_CLI_NAMESPACE | DS_CLI_TIMEOUT | DS_CLI_LOG_LEVEL | DS_CLI_CONFIG_REQUIRED,
	    .usage = usage,
	    .config_example = "/etc/drasync/x.yaml",
	    .max_namespaces = 3,
	    .ns_example = "ml-dr",
	    .ns_hint = "leave them out for all",
	    .max_args = 1,
	    .args_hint = "; name namespaces with --namespace NS",
	    .options = own_options,
	    .on_option = on_option,
	    .ctx = s,
	};
}

static int parse(struct captured *c, const struct ds_cli_spec *spec, const char *const *args,
		 struct ds_cli_args *a)
{
	static char words[32][64];
	static char *argv[32];
	int argc = 1, rc;

	snprintf(words[0], sizeof(words[0]), "cmd");
	argv[0] = words[0];
	for (; args[argc - 1] && argc < 31; argc++) {
		snprintf(words[argc], sizeof(words[argc]), "%s", args[argc - 1]);
		argv[argc] = words[argc];
	}
	argv[argc] = NULL;
	capture_start(c);
	rc = ds_cli_parse(spec, argc, argv, a);
	capture_end(c);
	return rc;
}

static void test_cli__every_common_option(void **state)
{
	struct seen s = {.fail_on = -1};
	struct ds_cli_spec spec = spec_all(&s);
	struct ds_cli_args a = {.timeout_ms = 42};
	struct captured c;

	(void)state;
	assert_int_equal(parse(&c, &spec,
			       (const char *[]){"-c", "x.yaml", "--kubeconfig", "/kc", "--context",
						"east", "-o", "json", "-n", "a", "--namespace", "b",
						"-t", "90s", "--log-level", "debug", "obj", NULL},
			       &a),
			 DS_CLI_CONTINUE);
	assert_string_equal(c.err, "");
	assert_string_equal(a.config, "x.yaml");
	assert_string_equal(a.kubeconfig, "/kc");
	assert_string_equal(a.context, "east");
	assert_string_equal(a.output, "json");
	assert_int_equal(a.n_namespaces, 2);
	assert_string_equal(a.namespaces[0], "a");
	assert_string_equal(a.namespaces[1], "b");
	assert_int_equal(a.timeout_ms, 90000);
	assert_true(a.timeout_given);
	assert_int_equal(a.argc, 1);
	assert_string_equal(a.argv[0], "obj");
	assert_int_equal(s.n, 0);

	/* Long forms, defaults kept, the first output the default. */
	a = (struct ds_cli_args){.timeout_ms = 42};
	assert_int_equal(parse(&c, &spec, (const char *[]){"--config=y.yaml", NULL}, &a),
			 DS_CLI_CONTINUE);
	assert_string_equal(a.config, "y.yaml");
	assert_string_equal(a.output, "text");
	assert_int_equal(a.timeout_ms, 42);
	assert_false(a.timeout_given);
	assert_null(a.kubeconfig);
	assert_int_equal(a.argc, 0);

	/* The command's own options, in order, a duration in ms. */
	a = (struct ds_cli_args){0};
	assert_int_equal(parse(&c, &spec,
			       (const char *[]){"-c", "x", "-f", "--into", "scratch", "--interval",
						"1.5s", "--offline", NULL},
			       &a),
			 DS_CLI_CONTINUE);
	assert_int_equal(s.n, 4);
	assert_int_equal(s.keys[0], 'f');
	assert_null(s.args[0]);
	assert_int_equal(s.keys[1], 'I');
	assert_string_equal(s.args[1], "scratch");
	assert_int_equal(s.keys[2], KEY_INTERVAL);
	assert_int_equal(s.ms[2], 1500);
	assert_int_equal(s.keys[3], KEY_OFFLINE);

	/* An own option's exit code stops the parse. */
	s = (struct seen){.fail_on = 'I'};
	assert_int_equal(parse(&c, &spec, (const char *[]){"--into", "x", "-c", "x", NULL}, &a), 5);

	/* --help: the command's usage on stdout, 0. */
	assert_int_equal(parse(&c, &spec, (const char *[]){"--bogus-later", "-h", NULL}, &a), 2);
	assert_int_equal(parse(&c, &spec, (const char *[]){"-h", NULL}, &a), 0);
	assert_string_equal(c.out, "Usage: prog cmd [OPTIONS]\n");
}

/* Options a command does not take are unknown to it. */
static void test_cli__only_the_declared_options(void **state)
{
	struct ds_cli_spec spec = {.prog = "prog", .cmd = "cmd", .takes = DS_CLI_CONFIG};
	struct ds_cli_args a = {0};
	struct captured c;

	(void)state;
	assert_int_equal(parse(&c, &spec, (const char *[]){"-c", "x", NULL}, &a), DS_CLI_CONTINUE);
	assert_int_equal(parse(&c, &spec, (const char *[]){"--timeout", "5m", NULL}, &a), 2);
	assert_non_null(strstr(c.err, "--timeout"));
	assert_non_null(strstr(c.err, "Try 'prog cmd --help'.\n"));
	assert_int_equal(parse(&c, &spec, (const char *[]){"-o", "json", NULL}, &a), 2);
	assert_int_equal(parse(&c, &spec, (const char *[]){"--kubeconfig", "k", NULL}, &a), 2);
}

/* A bare number is not a duration: the same refusal for --timeout and every duration option. */
static void test_cli__bare_number_timeout_refused(void **state)
{
	struct seen s = {.fail_on = -1};
	struct ds_cli_spec spec = spec_all(&s);
	struct ds_cli_args a = {.timeout_ms = 42};
	struct captured c;

	(void)state;
	assert_int_equal(parse(&c, &spec, (const char *[]){"-c", "x", "--timeout", "30", NULL}, &a),
			 2);
	assert_non_null(strstr(c.err, "prog cmd: --timeout: '30': "));
	assert_non_null(strstr(c.err, "(a Go duration, e.g. --timeout 90s or --timeout 5m)\n"));
	assert_int_equal(a.timeout_ms, 42);
	assert_int_equal(parse(&c, &spec, (const char *[]){"-c", "x", "-t", "soon", NULL}, &a), 2);
	assert_non_null(strstr(c.err, "--timeout: 'soon'"));
	assert_int_equal(
	    parse(&c, &spec, (const char *[]){"-c", "x", "--interval", "30", NULL}, &a), 2);
	assert_non_null(strstr(c.err, "prog cmd: --interval: '30': "));
	assert_int_equal(s.n, 0);
	/* Zero: refused unless the command allows it; a negative one always. */
	assert_int_equal(parse(&c, &spec, (const char *[]){"-c", "x", "-t", "0s", NULL}, &a), 2);
	spec.takes |= DS_CLI_ZERO_DURATION;
	assert_int_equal(parse(&c, &spec, (const char *[]){"-c", "x", "-t", "0s", NULL}, &a),
			 DS_CLI_CONTINUE);
	assert_int_equal(a.timeout_ms, 0);
	assert_int_equal(parse(&c, &spec, (const char *[]){"-c", "x", "-t", "-5s", NULL}, &a), 2);
	assert_non_null(strstr(c.err, "--timeout: '-5s': negative"));
}

static void test_cli__unknown_option(void **state)
{
	struct seen s = {.fail_on = -1};
	struct ds_cli_spec spec = spec_all(&s);
	struct ds_cli_args a = {0};
	struct captured c;

	(void)state;
	assert_int_equal(parse(&c, &spec, (const char *[]){"-c", "x", "--bogus", NULL}, &a), 2);
	assert_non_null(strstr(c.err, "unrecognized option"));
	assert_non_null(strstr(c.err, "Try 'prog cmd --help'.\n"));
	assert_string_equal(c.out, "");
	/* The command hears of it first (failback's word on --force). */
	assert_int_equal(s.n, 1);
	assert_int_equal(s.keys[0], DS_CLI_UNKNOWN);
	assert_string_equal(s.args[0], "--bogus");
	/* A missing value is a usage error too. */
	assert_int_equal(parse(&c, &spec, (const char *[]){"-c", NULL}, &a), 2);
	assert_non_null(strstr(c.err, "Try 'prog cmd --help'.\n"));
}

static void test_cli__usage_errors(void **state)
{
	static const char *const formats[] = {"text", "json", "yaml", NULL};
	struct seen s = {.fail_on = -1};
	struct ds_cli_spec spec = spec_all(&s);
	struct ds_cli_args a = {0};
	struct captured c;

	(void)state;
	assert_int_equal(parse(&c, &spec, (const char *[]){NULL}, &a), 2);
	assert_string_equal(c.err, "prog cmd: --config FILE is required, e.g.\n"
				   "  prog cmd --config /etc/drasync/x.yaml\n");
	a = (struct ds_cli_args){0};
	assert_int_equal(parse(&c, &spec, (const char *[]){"-c", "x", "a", "b", NULL}, &a), 2);
	assert_string_equal(c.err, "prog cmd: unexpected argument 'b'; name namespaces with "
				   "--namespace NS (try --help)\n");
	a = (struct ds_cli_args){0};
	assert_int_equal(parse(&c, &spec, (const char *[]){"-c", "x", "-o", "xml", NULL}, &a), 2);
	assert_string_equal(c.err, "prog cmd: -o: 'xml' is not text or json; -o must be text or "
				   "json, e.g.\n  prog cmd --config x -o json\n");
	spec.outputs = formats;
	a = (struct ds_cli_args){0};
	assert_int_equal(parse(&c, &spec, (const char *[]){"-c", "x", "-o", "xml", NULL}, &a), 2);
	assert_non_null(strstr(c.err, "-o: 'xml' is not text, json or yaml"));
	assert_non_null(strstr(c.err, " -o yaml\n"));
	a = (struct ds_cli_args){0};
	assert_int_equal(parse(&c, &spec, (const char *[]){"-c", "x", "-o", "yaml", NULL}, &a),
			 DS_CLI_CONTINUE);
	assert_int_equal(parse(&c, &spec, (const char *[]){"--log-level", "loud", NULL}, &a), 2);
	assert_string_equal(
	    c.err, "prog cmd: --log-level: 'loud' is not one of debug, info, warn, error\n");
}

static void test_cli__namespaces(void **state)
{
	struct seen s = {.fail_on = -1};
	struct ds_cli_spec spec = spec_all(&s);
	struct ds_cli_args a = {0};
	struct captured c;

	(void)state;
	assert_int_equal(parse(&c, &spec, (const char *[]){"-c", "x", "-n", "", NULL}, &a), 2);
	assert_string_equal(c.err, "prog cmd: --namespace needs a namespace name ('' is not one), "
				   "e.g. --namespace ml-dr\n");
	a = (struct ds_cli_args){0};
	assert_int_equal(parse(&c, &spec, (const char *[]){"-n", "a/b", NULL}, &a), 2);
	assert_non_null(strstr(c.err, "('a/b' is not one)"));
	a = (struct ds_cli_args){0};
	assert_int_equal(parse(&c, &spec,
			       (const char *[]){"-n", "a", "-n", "b", "-n", "c", "-n", "d", NULL},
			       &a),
			 2);
	assert_string_equal(c.err, "prog cmd: at most 3 --namespace; leave them out for all\n");
	spec.max_namespaces = 1;
	spec.ns_hint = "run one per namespace";
	a = (struct ds_cli_args){0};
	assert_int_equal(parse(&c, &spec, (const char *[]){"-n", "a", "-n", "b", NULL}, &a), 2);
	assert_string_equal(c.err, "prog cmd: one --namespace at a time; run one per namespace\n");
}

/* A command's own option of a common option's name replaces it. */
static void test_cli__own_option_replaces_a_common_one(void **state)
{
	static const struct ds_cli_option mine[] = {
	    {"namespace", 'n', DS_CLI_STRING},
	    {NULL, 0, DS_CLI_FLAG},
	};
	struct seen s = {.fail_on = -1};
	struct ds_cli_spec spec = spec_all(&s);
	struct ds_cli_args a = {0};
	struct captured c;

	(void)state;
	spec.options = mine;
	assert_int_equal(parse(&c, &spec, (const char *[]){"-c", "x", "-n", "", NULL}, &a),
			 DS_CLI_CONTINUE);
	assert_int_equal(a.n_namespaces, 0);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.keys[0], 'n');
	assert_string_equal(s.args[0], "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cli__dispatch),
	    cmocka_unit_test(test_cli__every_common_option),
	    cmocka_unit_test(test_cli__only_the_declared_options),
	    cmocka_unit_test(test_cli__bare_number_timeout_refused),
	    cmocka_unit_test(test_cli__unknown_option),
	    cmocka_unit_test(test_cli__usage_errors),
	    cmocka_unit_test(test_cli__namespaces),
	    cmocka_unit_test(test_cli__own_option_replaces_a_common_one),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
