#ifndef DRASYNC_CLI_H
#define DRASYNC_CLI_H

/*
 * The command line of both agents, written once: main.c's dispatch of the
 * subcommands (usage, --help, --version, an unknown command), and each
 * command's options: the common ones parsed here with the same error texts
 * everywhere, the command's own handed to it one at a time. A usage error is
 * said on stderr as "PROGRAM COMMAND: what is wrong, what to type" and exits 2.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/** One subcommand: argv[0] is its name. @return the process's exit code */
struct ds_cli_command {
	const char *name;
	const char *summary; /* one line of the program's --help */
	int (*run)(int argc, char **argv);
};

/** An agent's program: its name, what it is, its commands. */
struct ds_cli_program {
	const char *name;		       /* "drasync-source" */
	const char *about;		       /* the --help text after "Usage:" */
	const char *example;		       /* NULL: none; printed last */
	const struct ds_cli_command *commands; /* ends with {NULL} */
	int width;			       /* column of summaries; 0: longest+2 */
};

/** The program's --help on `out`. */
void ds_cli_usage(const struct ds_cli_program *prog, FILE *out);

/**
 * main(): runs the command named by argv[1] with argv + 1. No command: the
 * usage on stderr, 2; -h/--help/help: the usage, 0; -V/--version: "NAME
 * VERSION", 0; any other word: "NAME: unknown command 'x' (try --help)", 2.
 * @return the exit code
 */
int ds_cli_dispatch(const struct ds_cli_program *prog, const char *version, int argc, char **argv);

/* The common options a command may take (struct ds_cli_spec.takes). */
enum ds_cli_common {
	DS_CLI_CONFIG = 1u << 0,	  /* -c, --config FILE */
	DS_CLI_KUBECONFIG = 1u << 1,	  /* --kubeconfig FILE */
	DS_CLI_CONTEXT = 1u << 2,	  /* --context NAME */
	DS_CLI_OUTPUT = 1u << 3,	  /* -o, --output FORMAT: one of spec->outputs */
	DS_CLI_NAMESPACE = 1u << 4,	  /* -n, --namespace NS: spec->max_namespaces of them */
	DS_CLI_TIMEOUT = 1u << 5,	  /* -t, --timeout DURATION */
	DS_CLI_LOG_LEVEL = 1u << 6,	  /* --log-level LEVEL, set with ds_log_set_level() */
	DS_CLI_CONFIG_REQUIRED = 1u << 7, /* no --config: "--config FILE is required, e.g." */
	DS_CLI_ZERO_DURATION = 1u << 8,	  /* durations may be 0 (else at least 1ms) */
};

/* An option of the command's own: what its value is. */
enum ds_cli_arg {
	DS_CLI_FLAG,	 /* no value */
	DS_CLI_STRING,	 /* a word, passed as it is */
	DS_CLI_DURATION, /* a Go duration ("90s", "5m"), parsed as --timeout is */
	DS_CLI_ARG_MAX,
};

/* A command's own option. key: a letter is also the short option -key; a
 * long-only option takes a key of DS_CLI_LONG_ONLY or above. A letter of a
 * common option the command takes (c o n t) is not a key of its own. */
struct ds_cli_option {
	const char *name; /* the long name, without "--" */
	int key;	  /* what on_option receives */
	enum ds_cli_arg arg;
};

#define DS_CLI_LONG_ONLY 256
#define DS_CLI_MAX_NAMESPACES 256
#define DS_CLI_ANY_ARGS (-1)
/* malloc arenas of a drasync process (glibc M_ARENA_MAX; its default is 8 a core) */
#define DS_CLI_ARENAS 4
/* Allocations of at least this many bytes are mmapped (mallopt M_MMAP_THRESHOLD). */
#define DS_CLI_MMAP_THRESHOLD (256 * 1024)
/* ds_cli_parse(): go on with the command (no --help, no usage error). */
#define DS_CLI_CONTINUE (-1)
/* on_option()'s key for an option getopt did not know (arg: the word given). */
#define DS_CLI_UNKNOWN '?'

/** How a command reads its arguments. Zero fields take the defaults said. */
struct ds_cli_spec {
	const char *prog;	    /* "drasync-source" */
	const char *cmd;	    /* "run" */
	unsigned takes;		    /* enum ds_cli_common flags */
	void (*usage)(FILE *out);   /* the command's --help */
	const char *config_example; /* "/etc/drasync/source.yaml" */
	/* -o: the formats, the first the default; NULL: text and json. */
	const char *const *outputs;
	/* --namespace: how many (0: DS_CLI_MAX_NAMESPACES; 1: "one at a time"), an
	 * example name (NULL: "ml-team") and what to do instead of one more. */
	size_t max_namespaces;
	const char *ns_example;
	const char *ns_hint;
	/* Positional arguments: how many (DS_CLI_ANY_ARGS: the command checks
	 * them) and what to say after "unexpected argument 'x'" (NULL: nothing). */
	int max_args;
	const char *args_hint;
	/* The command's own options, ending with {NULL}; one named as a common
	 * option replaces it (the command then parses that option itself). */
	const struct ds_cli_option *options;
	/* Each of the command's own options, in order: arg its value (NULL for a
	 * flag), ms a DS_CLI_DURATION's milliseconds. Also called with
	 * DS_CLI_UNKNOWN before "Try ... --help" (its return then ignored).
	 * @return 0 to go on, or the exit code after saying why on stderr */
	int (*on_option)(void *ctx, int key, const char *arg, long long ms);
	void *ctx;
};

/** What the common options said; the caller sets the defaults before parsing. */
struct ds_cli_args {
	const char *config;
	const char *kubeconfig;
	const char *context;
	const char *output; /* NULL before: spec->outputs[0] */
	const char *namespaces[DS_CLI_MAX_NAMESPACES];
	size_t n_namespaces;
	long long timeout_ms; /* unchanged when --timeout is not given */
	bool timeout_given;
	int argc; /* the positional arguments */
	char **argv;
};

/**
 * Parse a command's argv (argv[0] its name) per spec into `out`, which holds
 * the caller's defaults. Says every usage error on stderr with what to type.
 * @return DS_CLI_CONTINUE to go on; 0 after --help (printed on stdout);
 *         2 a usage error (said), or on_option()'s exit code
 */
int ds_cli_parse(const struct ds_cli_spec *spec, int argc, char **argv, struct ds_cli_args *out);

/**
 * A duration option's value, as --timeout reads it: a Go duration, at least
 * 1ms (or 0 and up with DS_CLI_ZERO_DURATION); a bare number is refused.
 * @param opt  the long option's name, for the message
 * @return 0, or 2 after saying on stderr what to write
 */
int ds_cli_duration(const struct ds_cli_spec *spec, const char *opt, const char *arg,
		    long long *ms_out);

/**
 * Say a usage error: "PROG CMD: " then the message (a newline is added).
 * @return 2, the exit code of a usage error
 */
int ds_cli_fail(const struct ds_cli_spec *spec, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
