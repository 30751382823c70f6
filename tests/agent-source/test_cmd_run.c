/*
 * drasync-source run and status without a cluster: usage, --help, and every
 * kind of configuration error exits 2, located, before any connection.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/exporter.h"
#include "drasync/keys.h"
#include "drasync/object_index.h"
#include "drasync/outbox.h"
#include "testutil.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

/*
 * status on a stateDir the target answered with refusals (issue 22): a
 * REFUSED column, the refused objects with their reasons, in text and JSON,
 * and an exit that says it needs attention.
 */
static const char DENIED[] =
    "namespace hz-denied is not granted to source prod-east (sources[0].namespaces)";
static const char EVIL[] = "Pod hz-ok/evil: privileged container c violates podSecurity baseline";

static ds_record upsert(const char *kind, const char *ns, const char *name)
{
	ds_record r;

	memset(&r, 0, sizeof(r));
	r.op = DS_RECORD_UPSERT;
	r.api_version = "v1";
	r.kind = kind;
	r.ns = ns;
	r.name = name;
	r.source_uid = name;
	r.payload = (const uint8_t *)"{}";
	r.payload_len = 2;
	return r;
}

/* A stateDir whose index holds three objects: one applied, two refused. */
static void state_dir_with_refusals(const char *state)
{
	ds_record r[3] = {upsert("ConfigMap", "hz-ok", "a"), upsert("ConfigMap", "hz-denied", "b"),
			  upsert("Pod", "hz-ok", "evil")};
	ds_outbox *ob = NULL;
	ds_object_index *idx = NULL;
	char db[1200];
	ds_err err = {0};

	assert_int_equal(mkdir(state, 0700), 0);
	assert_int_equal(ds_export_db_path(state, db, sizeof(db)), 0);
	assert_int_equal(ds_outbox_open(&ob, db, NULL, &err), 0);
	assert_int_equal(ds_object_index_open(&idx, db, &err), 0);
	assert_int_equal(ds_object_index_push(idx, ob, r, 3, NULL, &err), 0);
	assert_int_equal(ds_object_index_result(idx, 1, DS_RESULT_APPLIED, "", NULL, NULL, &err),
			 0);
	assert_int_equal(
	    ds_object_index_result(idx, 2, DS_RESULT_REFUSED, DENIED, NULL, NULL, &err), 0);
	assert_int_equal(ds_object_index_result(idx, 3, DS_RESULT_REFUSED, EVIL, NULL, NULL, &err),
			 0);
	ds_object_index_free(idx);
	ds_outbox_free(ob);
}

static void run_status(struct tu_run *r, const char *config, const char *output)
{
	const char *argv[] = {
	    tu_env("DS_SOURCE_BIN"), "status", "--config", config, "-o", output, NULL};

	tu_run(r, NULL, argv);
}

static void test_cmd_run__status_counts_and_lists_refused_objects(void **state)
{
	char *dir = tu_mkdtemp("cmd-status");
	char path[1100], key[1100], statedir[1100], *text;
	struct tu_run r;
	ds_keypair kp;
	ds_err err = {0};
	json_t *doc, *kinds, *fails;
	json_error_t jerr;

	(void)state;
	assert_int_equal(ds_keys_generate(&kp, &err), 0);
	assert_int_equal(ds_keys_write(dir, "source", &kp, true, &err), 0);
	snprintf(key, sizeof(key), "%s/source.key", dir);
	snprintf(path, sizeof(path), "%s/source.yaml", dir);
	snprintf(statedir, sizeof(statedir), "%s/state", dir);
	assert_true(asprintf(&text,
			     "apiVersion: drasync.io/v1alpha1\n"
			     "kind: SourceConfig\n"
			     "clusterName: prod-east\n"
			     "target: {endpoint: \"tcp://127.0.0.1:9\", serverPublicKey: \"%s\"}\n"
			     "keys: {secretKeyFile: %s}\n"
			     "stateDir: %s\n"
			     "namespaces: [hz-ok, hz-denied]\n"
			     "schedule: {mode: once}\n",
			     kp.public_z85, key, statedir) > 0);
	tu_write_file(path, text);
	free(text);
	state_dir_with_refusals(statedir);

	run_status(&r, path, "text");
	if (r.status != 1 || !strstr(r.out, " REFUSED ") ||
	    !strstr(r.out, "refused ConfigMap hz-denied/b (seq 2): namespace hz-denied is not "
			   "granted to source prod-east (sources[0].namespaces)") ||
	    !strstr(r.out,
		    "refused Pod hz-ok/evil (seq 3): Pod hz-ok/evil: privileged container") ||
	    !strstr(r.out, "needs attention: the target refused objects"))
		fail_msg("exit %d\nstdout:\n%s\nstderr:\n%s", r.status, r.out, r.err);
	/* the REFUSED column: ConfigMap 2 objects, 1 applied, 1 refused */
	assert_non_null(strstr(r.out, "ConfigMap                       2         0        1        "
				      "0        0        0        1        0        0\n"));
	tu_run_dispose(&r);

	run_status(&r, path, "json");
	assert_int_equal(r.status, 1);
	doc = json_loads(r.out, 0, &jerr);
	if (!doc)
		fail_msg("not JSON: %s\n%s", jerr.text, r.out);
	kinds = json_object_get(doc, "kinds");
	assert_int_equal(json_array_size(kinds), 2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(kinds, 0), "kind")),
			    "ConfigMap");
	assert_int_equal(json_integer_value(json_object_get(json_array_get(kinds, 0), "refused")),
			 1);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(kinds, 1), "refused")),
			 1);
	fails = json_object_get(doc, "failures");
	assert_int_equal(json_array_size(fails), 2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(fails, 0), "status")),
			    "refused");
	assert_string_equal(json_string_value(json_object_get(json_array_get(fails, 0), "message")),
			    DENIED);
	assert_string_equal(json_string_value(json_object_get(json_array_get(fails, 1), "name")),
			    "evil");
	assert_string_equal(json_string_value(json_object_get(doc, "attention")),
			    "the target refused objects (outside what it grants this source)");
	json_decref(doc);
	tu_run_dispose(&r);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cmd_run__usage),
	    cmocka_unit_test(test_cmd_run__config_errors_exit_2_located),
	    cmocka_unit_test(test_cmd_run__status_counts_and_lists_refused_objects),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
