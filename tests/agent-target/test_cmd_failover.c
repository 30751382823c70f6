/*
 * drasync-target failover and failback as an operator runs them, where no
 * cluster is needed: bad arguments, no ledger, an empty ledger, and the
 * split-brain guard on a real ledger file whose presence row says the source
 * is still connected (the guard refuses before any cluster is contacted).
 * The DR cycle itself runs against a real cluster in itest_failover.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/inbox.h"
#include "drasync/namespace_mode.h"
#include "drasync/object_state.h"
#include "testutil.h"
#include "tu_ledger.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct site {
	char *dir;
	char config[1100], ledger[1100];
};

static void site_new(struct site *s)
{
	char text[2400];

	memset(s, 0, sizeof(*s));
	s->dir = tu_mkdtemp("target-failover");
	snprintf(s->config, sizeof(s->config), "%s/target.yaml", s->dir);
	snprintf(s->ledger, sizeof(s->ledger), "%s/ledger.db", s->dir);
	snprintf(text, sizeof(text),
		 "apiVersion: drasync.io/v1alpha1\nkind: TargetConfig\nmode: standby\n"
		 "namespaceMappings: {ml: ml-dr}\nstateDir: %s\n",
		 s->dir);
	tu_write_file(s->config, text);
}

static void run(struct tu_run *r, const char *const *args)
{
	const char *argv[16] = {tu_env("DS_TARGET_BIN")};
	size_t n = 1;

	while (*args && n < 15)
		argv[n++] = *args++;
	argv[n] = NULL;
	tu_run(r, NULL, argv);
}

/* A Deployment of source namespace ml from `source`, ingested (not applied). */
static void fill(struct site *s, const char *source)
{
	tu_ledger l;
	ds_object_state *st = NULL;
	ds_record rec;
	char *payload;
	json_t *o = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:i}}", "apiVersion", "apps/v1", "kind",
			      "Deployment", "metadata", "name", "trainer", "namespace", "ml",
			      "spec", "replicas", 3);
	ds_err err = {0};

	tu_ledger_open(&l, s->ledger, source);
	rec = tu_record_upsert(o, "uid-1", &payload);
	tu_ledger_commit(&l, &rec, 1, NULL, NULL);
	free(payload);
	json_decref(o);
	assert_int_equal(ds_object_state_open(&st, s->ledger, &err), 0);
	assert_true(ds_object_state_ingest(st, &err) >= 0);
	ds_object_state_free(st);
	tu_ledger_close(&l);
}

static void test_cmd_failover__bad_arguments_exit_2_with_what_to_type(void **state)
{
	struct site s;
	struct tu_run r;

	(void)state;
	site_new(&s);
	run(&r, (const char *[]){"failover", NULL});
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "--config FILE is required"));
	assert_non_null(strstr(r.err, "drasync-target failover --config"));
	tu_run_dispose(&r);
	run(&r, (const char *[]){"failover", "--config", s.config, "--timeout", "soon", NULL});
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "--timeout 90s"));
	tu_run_dispose(&r);
	run(&r, (const char *[]){"failback", "--config", s.config, "--force", NULL});
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "--force is for failover only"));
	tu_run_dispose(&r);
	run(&r, (const char *[]){"failover", "--config", s.config, "ml-dr", NULL});
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "--namespace ml-dr"));
	tu_run_dispose(&r);
	run(&r, (const char *[]){"failover", "--config", s.config, "--namespace", "", NULL});
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "--namespace needs a namespace name"));
	tu_run_dispose(&r);
	run(&r, (const char *[]){"failback", "--bogus", NULL});
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "drasync-target failback --help"));
	tu_run_dispose(&r);
	/* A configuration that does not load. */
	tu_write_file(s.config, "kind: TargetConfig\nmode: sideways\n");
	run(&r, (const char *[]){"failover", "--config", s.config, NULL});
	assert_int_equal(r.status, 2);
	tu_run_dispose(&r);
	free(s.dir);
}

/* --timeout reads a Go duration as run and verify do: a bare number has no unit. */
static void test_cmd_failover__timeout_without_a_unit_is_refused(void **state)
{
	struct site s;
	struct tu_run r;

	(void)state;
	site_new(&s);
	run(&r, (const char *[]){"failover", "--config", s.config, "--timeout", "30", NULL});
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "--timeout"));
	assert_non_null(strstr(r.err, "30"));
	assert_null(strstr(r.err, "no ledger at"));
	tu_run_dispose(&r);
	run(&r, (const char *[]){"failback", "--config", s.config, "-t", "30", NULL});
	assert_int_equal(r.status, 2);
	assert_null(strstr(r.err, "no ledger at"));
	tu_run_dispose(&r);
	/* With a unit it is a duration: the command goes on (to the missing ledger). */
	run(&r, (const char *[]){"failover", "--config", s.config, "--timeout", "1m30s", NULL});
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "no ledger at"));
	tu_run_dispose(&r);
	free(s.dir);
}

static void test_cmd_failover__help_and_no_ledger(void **state)
{
	struct site s;
	struct tu_run r;

	(void)state;
	site_new(&s);
	run(&r, (const char *[]){"failover", "--help", NULL});
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "Exit codes: 0"));
	assert_non_null(strstr(r.out, "--force"));
	assert_non_null(strstr(r.out, "Split brain"));
	assert_non_null(strstr(r.out, "drasync-target failover --config"));
	tu_run_dispose(&r);
	run(&r, (const char *[]){"failback", "--help", NULL});
	assert_int_equal(r.status, 0);
	assert_null(strstr(r.out, "--force"));
	assert_non_null(strstr(r.out, "held in the"));
	tu_run_dispose(&r);
	/* The top-level help lists both. */
	run(&r, (const char *[]){"--help", NULL});
	assert_non_null(strstr(r.out, "failover"));
	assert_non_null(strstr(r.out, "failback"));
	tu_run_dispose(&r);
	/* No ledger in stateDir: nothing was ever received there. */
	run(&r, (const char *[]){"failback", "--config", s.config, NULL});
	assert_int_equal(r.status, 2);
	assert_non_null(strstr(r.err, "no ledger at"));
	assert_non_null(strstr(r.err, "stateDir"));
	tu_run_dispose(&r);
	free(s.dir);
}

static void test_cmd_failover__refused_while_the_source_is_connected(void **state)
{
	struct site s;
	struct tu_run r;
	ds_inbox *ib = NULL;
	ds_namespace_modes *nm = NULL;
	ds_err err = {0};

	(void)state;
	site_new(&s);
	fill(&s, "prod-east");
	/* The receiver of a running importer saw the source's Hello a moment ago. */
	assert_int_equal(ds_inbox_open(&ib, s.ledger, &err), 0);
	assert_int_equal(
	    ds_inbox_presence_seen(ib, "prod-east", "10.1.2.3:5555", true, 60000, &err), 0);

	run(&r, (const char *[]){"failover", "--config", s.config, NULL});
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.err, "refused: source prod-east is still connected"));
	assert_non_null(strstr(r.err, "10.1.2.3:5555"));
	assert_non_null(strstr(r.err, "split brain"));
	/* what to type instead, with the namespace the ledger holds (mapped) */
	assert_non_null(strstr(r.err, "--namespace ml-dr --force"));
	assert_non_null(strstr(r.err, "Nothing was changed"));
	tu_run_dispose(&r);
	assert_int_equal(ds_namespace_modes_open(&nm, s.ledger, &err), 0);
	assert_int_equal(ds_namespace_modes_get(nm, "ml-dr", NULL, &err), 0);

	/* A source of another namespace does not hold this one back: the guard is
	 * per namespace (and here it goes on to the cluster, which there is none of). */
	run(&r, (const char *[]){"failover", "--config", s.config, "--namespace", "web-dr", NULL});
	assert_null(strstr(r.err, "refused"));
	assert_non_null(strstr(r.err, "the ledger holds no objects for namespace web-dr"));
	tu_run_dispose(&r);

	/* Its session ended: no longer refused for that (the cluster is what fails then). */
	assert_int_equal(ds_inbox_presence_end(ib, "prod-east", "connection closed", &err), 0);
	run(&r, (const char *[]){"failover", "--config", s.config, "--kubeconfig",
				 "/nonexistent/kubeconfig", NULL});
	assert_null(strstr(r.err, "still connected"));
	assert_int_not_equal(r.status, 0);
	tu_run_dispose(&r);
	assert_int_equal(ds_namespace_modes_get(nm, "ml-dr", NULL, &err), 0);
	ds_namespace_modes_free(nm);
	ds_inbox_free(ib);
	free(s.dir);
}

static void test_cmd_failover__empty_ledger_has_nothing_to_fail_over(void **state)
{
	struct site s;
	struct tu_run r;
	ds_object_state *st = NULL;
	ds_err err = {0};

	(void)state;
	site_new(&s);
	assert_int_equal(ds_object_state_open(&st, s.ledger, &err), 0);
	ds_object_state_free(st);
	run(&r, (const char *[]){"failover", "--config", s.config, NULL});
	assert_int_equal(r.status, 1);
	assert_non_null(strstr(r.err, "holds no namespaced objects yet"));
	tu_run_dispose(&r);
	free(s.dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cmd_failover__bad_arguments_exit_2_with_what_to_type),
	    cmocka_unit_test(test_cmd_failover__timeout_without_a_unit_is_refused),
	    cmocka_unit_test(test_cmd_failover__help_and_no_ledger),
	    cmocka_unit_test(test_cmd_failover__refused_while_the_source_is_connected),
	    cmocka_unit_test(test_cmd_failover__empty_ledger_has_nothing_to_fail_over),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
