/*
 * drasync-source run and status without a cluster: usage, --help, and every
 * kind of configuration error exits 2, located, before any connection.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/keys.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void agent(struct tu_run *r, const char *const *args)
{
	const char *argv[16] = {tu_env("DS_SOURCE_BIN")};
	size_t n = 1;

	for (; args[n - 1] && n < 15; n++)
		argv[n] = args[n - 1];
	argv[n] = NULL;
	tu_run(r, NULL, argv);
}

static void expect(const char *const *args, int code, const char *in_err, const char *in_out)
{
	struct tu_run r;

	agent(&r, args);
	if (r.status != code || (in_err && !strstr(r.err, in_err)) ||
	    (in_out && !strstr(r.out, in_out)))
		fail_msg("%s %s: exit %d (want %d)\nstdout:\n%s\nstderr:\n%s (want '%s')", args[0],
			 args[1] ? args[1] : "", r.status, code, r.out, r.err,
			 in_err ? in_err : "");
	tu_run_dispose(&r);
}

static void test_cmd_run__usage(void **state)
{
	(void)state;
	expect((const char *[]){"--help", NULL}, 0, NULL, "run ");
	expect((const char *[]){"run", "--help", NULL}, 0, NULL, "Example, outside a cluster");
	expect((const char *[]){"status", "--help", NULL}, 0, NULL, "Example:");
	expect((const char *[]){"keygen", "--help", NULL}, 0, NULL, "Example:");
	expect((const char *[]){"run", NULL}, 2, "--config FILE is required", NULL);
	expect((const char *[]){"run", "--config", "x.yaml", "extra", NULL}, 2,
	       "unexpected argument 'extra'", NULL);
	expect((const char *[]){"run", "--bogus", NULL}, 2, "Try 'drasync-source run --help'",
	       NULL);
	expect((const char *[]){"run", "--config", "x.yaml", "--log-level", "loud", NULL}, 2,
	       "'loud' is not one of debug, info, warn, error", NULL);
	expect((const char *[]){"run", "--config", "x.yaml", "--timeout", "soon", NULL}, 2,
	       "--timeout:", NULL);
	expect((const char *[]){"status", "--config", "x.yaml", "-o", "xml", NULL}, 2,
	       "-o must be text or json", NULL);
}

static const char GOOD[] = "apiVersion: drasync.io/v1alpha1\n"
			   "kind: SourceConfig\n"
			   "clusterName: prod-east\n"
			   "target: {endpoint: \"tcp://127.0.0.1:9\", serverPublicKey: \"%s\"}\n"
			   "keys: {secretKeyFile: %s}\n"
			   "stateDir: %s/state\n"
			   "namespaces: [ml-team]\n"
			   "schedule: {mode: once}\n"
			   "%s";

static void test_cmd_run__config_errors_exit_2_located(void **state)
{
	char *dir = tu_mkdtemp("cmd-run");
	char path[1100], key[1100], *text;
	ds_keypair kp;
	ds_err err = {0};

	(void)state;
	assert_int_equal(ds_keys_generate(&kp, &err), 0);
	assert_int_equal(ds_keys_write(dir, "source", &kp, true, &err), 0);
	snprintf(key, sizeof(key), "%s/source.key", dir);
	snprintf(path, sizeof(path), "%s/source.yaml", dir);

	/* An unknown key, at its line and column, with a suggestion. */
	assert_true(asprintf(&text, GOOD, kp.public_z85, key, dir, "namespace: [x]\n") > 0);
	tu_write_file(path, text);
	free(text);
	expect((const char *[]){"run", "--config", path, NULL}, 2, "source.yaml:9:1", NULL);
	expect((const char *[]){"status", "--config", path, NULL}, 2, "source.yaml:9:1", NULL);

	/* A bad value: a cron expression out of range, pointed at inside the value. */
	assert_true(asprintf(&text, GOOD, kp.public_z85, key, dir, "") > 0);
	{
		char *p = strstr(text, "{mode: once}");

		assert_non_null(p);
		tu_write_file(path, "");
		FILE *f = fopen(path, "w");
		fprintf(f, "%.*s{mode: cron, expr: \"61 * * * *\"}\n", (int)(p - text), text);
		fclose(f);
	}
	free(text);
	expect((const char *[]){"run", "--config", path, NULL}, 2, "minute", NULL);

	/* A missing file. */
	expect((const char *[]){"run", "--config", "/nonexistent/source.yaml", NULL}, 2,
	       "/nonexistent/source.yaml", NULL);

	/* The secret key file missing: exit 2 with the command that makes one. */
	assert_true(asprintf(&text, GOOD, kp.public_z85, "/nonexistent/source.key", dir, "") > 0);
	tu_write_file(path, text);
	free(text);
	expect((const char *[]){"run", "--config", path, NULL}, 2, "drasync-source keygen", NULL);

	/* No kubeconfig and not in a cluster: exit 2 saying what to pass. */
	assert_true(asprintf(&text, GOOD, kp.public_z85, key, dir, "") > 0);
	tu_write_file(path, text);
	free(text);
	expect((const char *[]){"run", "--config", path, NULL}, 2, "--kubeconfig PATH", NULL);
	expect((const char *[]){"run", "--config", path, "--kubeconfig", "/nonexistent/kc", NULL},
	       2, "/nonexistent/kc", NULL);

	/* status before any run: says so, exit 2. */
	expect((const char *[]){"status", "--config", path, NULL}, 2,
	       "the agent has not run with this configuration", NULL);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cmd_run__usage),
	    cmocka_unit_test(test_cmd_run__config_errors_exit_2_located),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
