/*
 * drasync-target inventory as an operator runs it, on a real ledger file the
 * test fills as the receiver would, without a cluster (--offline, a
 * kubeconfig that cannot be read, one whose server does not answer): the
 * table and the JSON field by field, the rules -o yaml prints accepted by
 * `plan` once merged, and every bad argument exits 2 naming what to type.
 * The exists column against a real cluster: itest_inventory.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/manifest.h"
#include "dstest.h"
#include "testutil.h"
#include "tu_ledger.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIXTURE "dra-example-driver/v1/basic-shared-claim-across-containers.yaml"
#define NS "basic-shared-claim-across-containers"

struct site {
	char *dir;
	char config[1100], ledger[1100];
};

/* The rules of the file; -o yaml's block is merged into these. */
#define RULES                                                                                      \
	"    - {objectType: Pod, objectInstance: pod0, container: ctr1, resourceClaimTemplate: "   \
	"gpu-rct1}\n"

static void site_new(struct site *s, const char *extra)
{
	char text[3000];

	memset(s, 0, sizeof(*s));
	s->dir = tu_mkdtemp("target-inventory");
	snprintf(s->config, sizeof(s->config), "%s/target.yaml", s->dir);
	snprintf(s->ledger, sizeof(s->ledger), "%s/ledger.db", s->dir);
	snprintf(text, sizeof(text),
		 "apiVersion: drasync.io/v1alpha1\nkind: TargetConfig\nmode: migrate\n"
		 "stateDir: %s\nnamespaceMappings: {" NS ": gpu-dr}\n%s"
		 "dra:\n  resourceClaimTemplateMappings:\n" RULES,
		 s->dir, extra ? extra : "");
	tu_write_file(s->config, text);
}

static void site_free(struct site *s)
{
	free(s->dir);
}

/* The fixture's Namespace, template and Pod (ctr0 and ctr1 share entry shared-gpu). */
static void fill(struct site *s)
{
	ds_manifest *m = NULL;
	ds_record recs[8];
	char *payloads[8];
	tu_ledger l;
	ds_err err = {0};
	size_t n;

	assert_int_equal(ds_manifest_new(&m), 0);
	assert_true(ds_manifest_load(m, tu_fixture(FIXTURE), &err) > 0);
	n = ds_manifest_count(m);
	assert_int_equal(n, 3);
	for (size_t i = 0; i < n; i++)
		recs[i] = tu_record_upsert(ds_manifest_object(m, i), "uid", &payloads[i]);
	tu_ledger_open(&l, s->ledger, "prod-east");
	tu_ledger_commit(&l, recs, n, NULL, NULL);
	tu_ledger_close(&l);
	for (size_t i = 0; i < n; i++)
		free(payloads[i]);
	ds_manifest_free(m);
}

static void inventory(struct tu_run *r, const char *const *args)
{
	const char *argv[16] = {tu_env("DS_TARGET_BIN"), "inventory"};
	size_t n = 2;

	for (; *args && n < 15; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	tu_run(r, NULL, argv);
}

/* The text line of a row: its cells separated by runs of spaces. */
static void assert_row(const char *out, const char *const cells[8])
{
	const char *line = out;

	while ((line = strstr(line, cells[0])) != NULL) {
		const char *p = line, *end = strchr(line, '\n');
		int c;

		for (c = 0; c < 8; c++) {
			size_t len = strlen(cells[c]);

			while (*p == ' ')
				p++;
			if (strncmp(p, cells[c], len) != 0 ||
			    !(p[len] == ' ' || p[len] == '\n' || p[len] == '\0'))
				break;
			p += len;
		}
		if (c == 8 && p == end)
			return;
		line = end ? end : line + 1;
	}
	fail_msg("no row %s | %s | %s | %s | %s | %s | %s | %s in:\n%s", cells[0], cells[1],
		 cells[2], cells[3], cells[4], cells[5], cells[6], cells[7], out);
}

static void test_cmd_inventory__text_field_by_field(void **state)
{
	struct site s;
	struct tu_run r;

	(void)state;
	site_new(&s, NULL);
	fill(&s);
	inventory(&r, (const char *[]){"--config", s.config, "--offline", NULL});
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "ledger: "));
	assert_non_null(strstr(r.out, s.ledger));
	assert_non_null(strstr(r.out, "NAMESPACE"));
	assert_row(r.out, (const char *[]){"NAMESPACE", "OBJECT TYPE", "INSTANCE", "CONTAINER",
					   "ENTRY", "-> CLAIM/TEMPLATE", "RULE", "EXISTS"});
	assert_row(r.out, (const char *[]){NS, "Pod", "pod0", "ctr0", "shared-gpu",
					   "template gpu-dr/single-gpu", "unmapped",
					   "unknown (replicated)"});
	assert_row(r.out, (const char *[]){
			      NS, "Pod", "pod0", "ctr1", "shared-gpu", "template gpu-dr/gpu-rct1",
			      "dra.resourceClaimTemplateMappings[0] line 8", "unknown"});
	assert_row(r.out,
		   (const char *[]){NS, "ResourceClaimTemplate", "single-gpu", "-", "-",
				    "template gpu-dr/single-gpu", "(replicated)", "unknown"});
	assert_non_null(strstr(r.out, "2 objects, 2 claim references: 1 unmapped, 0 need a look"));
	assert_non_null(strstr(r.out, "\ntargets: 3 are unknown: not checked (--offline)\n"));
	assert_non_null(strstr(r.out, "rules to start from: drasync-target inventory --config "));
	assert_string_equal(r.err, "");
	tu_run_dispose(&r);

	/* --namespace by the target's name; another namespace lists nothing */
	inventory(&r, (const char *[]){"--config", s.config, "--offline", "-n", "gpu-dr", NULL});
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "2 objects, 2 claim references"));
	tu_run_dispose(&r);
	inventory(
	    &r, (const char *[]){"--config", s.config, "--offline", "--namespace", "other", NULL});
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "(the ledger holds no workload with claims"));
	assert_non_null(strstr(r.out, "0 objects, 0 claim references"));
	tu_run_dispose(&r);
	site_free(&s);
}

static void test_cmd_inventory__json_field_by_field(void **state)
{
	struct site s;
	struct tu_run r;
	json_error_t jerr;
	json_t *o, *refs, *a;

	(void)state;
	site_new(&s, NULL);
	fill(&s);
	inventory(&r, (const char *[]){"--config", s.config, "--offline", "-o", "json", NULL});
	assert_int_equal(r.status, 0);
	o = json_loads(r.out, 0, &jerr);
	if (!o)
		fail_msg("not JSON: %s\n%s", jerr.text, r.out);
	assert_string_equal(dt_str(o, "/ledger"), s.ledger);
	assert_int_equal(json_integer_value(json_object_get(o, "objects")), 2);
	assert_int_equal(json_integer_value(json_object_get(o, "unmapped")), 1);
	assert_int_equal(json_integer_value(json_object_get(o, "missing")), 0);
	refs = json_object_get(o, "references");
	assert_int_equal(json_array_size(refs), 3);
	a = json_array_get(refs, 0);
	assert_string_equal(dt_str(a, "/type"), "reference");
	assert_string_equal(dt_str(a, "/source"), "prod-east");
	assert_string_equal(dt_str(a, "/namespace"), NS);
	assert_string_equal(dt_str(a, "/targetNamespace"), "gpu-dr");
	assert_string_equal(dt_str(a, "/objectType"), "Pod");
	assert_string_equal(dt_str(a, "/objectInstance"), "pod0");
	assert_string_equal(dt_str(a, "/state"), "pending");
	assert_string_equal(dt_str(a, "/container"), "ctr0");
	assert_true(json_is_false(json_object_get(a, "initContainer")));
	assert_string_equal(dt_str(a, "/entry"), "shared-gpu");
	assert_string_equal(dt_str(a, "/from/kind"), "resourceClaimTemplate");
	assert_string_equal(dt_str(a, "/from/name"), "single-gpu");
	assert_string_equal(dt_str(a, "/to/kind"), "resourceClaimTemplate");
	assert_string_equal(dt_str(a, "/to/namespace"), "gpu-dr");
	assert_string_equal(dt_str(a, "/to/name"), "single-gpu");
	assert_true(json_is_null(json_object_get(a, "rule")));
	assert_true(json_is_false(json_object_get(a, "mapped")));
	assert_true(json_is_null(json_object_get(a, "error")));
	assert_string_equal(dt_str(a, "/targetExists"), "unknown");
	assert_string_equal(dt_str(a, "/targetExistsReason"), "not checked (--offline)");
	assert_true(json_is_true(json_object_get(a, "replicated")));
	assert_true(json_is_false(json_object_get(a, "missing")));
	a = json_array_get(refs, 1);
	assert_string_equal(dt_str(a, "/container"), "ctr1");
	assert_string_equal(dt_str(a, "/to/name"), "gpu-rct1");
	assert_string_equal(dt_str(a, "/rule/name"), "dra.resourceClaimTemplateMappings[0]");
	assert_int_equal(json_integer_value(dt_get(a, "/rule/line")), 8);
	assert_true(json_is_true(json_object_get(a, "mapped")));
	assert_true(json_is_false(json_object_get(a, "replicated")));
	a = json_array_get(refs, 2);
	assert_string_equal(dt_str(a, "/type"), "object");
	assert_string_equal(dt_str(a, "/objectType"), "ResourceClaimTemplate");
	json_decref(o);
	tu_run_dispose(&r);
	site_free(&s);
}

/* -o yaml merged into the file's dra: block: plan loads it and maps ctr0 to the todo- name. */
static void test_cmd_inventory__yaml_rules_accepted_by_plan(void **state)
{
	struct site s;
	struct tu_run r;
	char *conf, *merged, path[1200], *rules;
	size_t len;

	(void)state;
	site_new(&s, NULL);
	fill(&s);
	inventory(&r, (const char *[]){"--config", s.config, "--offline", "-o", "yaml", NULL});
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "dra:\n  resourceClaimMappings: []\n"
				      "  resourceClaimTemplateMappings:\n"));
	assert_non_null(strstr(r.out, "    - {objectType: Pod, objectInstance: pod0, container: "
				      "ctr0, source: shared-gpu, resourceClaimTemplate: "
				      "todo-single-gpu}\n"));
	/* the operator merges the list into the file's */
	rules = strstr(r.out, "  resourceClaimTemplateMappings:\n");
	rules += strlen("  resourceClaimTemplateMappings:\n");
	conf = tu_read_file(s.config, &len);
	len += strlen(rules) + 1;
	merged = malloc(len);
	assert_non_null(merged);
	snprintf(merged, len, "%s%s", conf, rules);
	snprintf(path, sizeof(path), "%s/merged.yaml", s.dir);
	tu_write_file(path, merged);
	tu_run_dispose(&r);

	tu_run(&r, NULL,
	       (const char *[]){tu_env("DS_TARGET_BIN"), "plan", "--config", path, "-f",
				tu_fixture(FIXTURE), NULL});
	if (r.status != 0)
		fail_msg("plan exit %d: %s\n--- config:\n%s", r.status, r.err, merged);
	/* the shared entry is split: ctr0 to the todo- template, ctr1 by the file's rule */
	assert_non_null(strstr(r.out, "resourceClaimTemplateName: todo-single-gpu"));
	assert_non_null(strstr(r.out, "resourceClaimTemplateName: gpu-rct1"));
	tu_run_dispose(&r);

	/* and the inventory of the merged file has nothing unmapped left */
	inventory(&r, (const char *[]){"--config", path, "--offline", NULL});
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "2 claim references: 0 unmapped"));
	assert_row(r.out,
		   (const char *[]){NS, "Pod", "pod0", "ctr0", "shared-gpu",
				    "template gpu-dr/todo-single-gpu",
				    "dra.resourceClaimTemplateMappings[1] line 12", "unknown"});
	tu_run_dispose(&r);
	free(conf);
	free(merged);
	site_free(&s);
}

/* A cluster that cannot be asked makes the column unknown, with why; never a failure. */
static void test_cmd_inventory__no_cluster_is_unknown_with_the_reason(void **state)
{
	struct site s, t;
	struct tu_run r;
	char extra[1400], kc[1200], text[1200];

	(void)state;
	/* the file's kubeconfig does not exist */
	site_new(&s, "kubeconfig: /nonexistent/drasync/kubeconfig\n");
	fill(&s);
	inventory(&r, (const char *[]){"--config", s.config, NULL});
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.err, "no cluster to ask: "));
	assert_non_null(strstr(r.err, "/nonexistent/drasync/kubeconfig"));
	assert_non_null(strstr(r.err, "--kubeconfig PATH"));
	assert_non_null(strstr(r.out, "\ntargets: 3 are unknown: no cluster to ask: "));
	tu_run_dispose(&r);

	/* a server that does not answer */
	site_new(&t, NULL);
	snprintf(kc, sizeof(kc), "%s/kubeconfig", t.dir);
	snprintf(text, sizeof(text),
		 "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
		 "clusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\", "
		 "insecure-skip-tls-verify: true}}]\n"
		 "users: [{name: u, user: {token: abc}}]\n"
		 "contexts: [{name: c, context: {cluster: c, user: u}}]\n");
	tu_write_file(kc, text);
	snprintf(extra, sizeof(extra), "kubeconfig: %s\n", kc);
	site_free(&t);
	site_new(&t, extra);
	fill(&t);
	inventory(&r, (const char *[]){"--config", t.config, "-o", "json", NULL});
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "\"targetExists\": \"unknown\""));
	assert_non_null(strstr(r.out, "\"targetExistsReason\": \"cannot reach the cluster: "));
	tu_run_dispose(&r);
	site_free(&s);
	site_free(&t);
}

/* Every bad argument exits 2 and says what to type instead. */
static void test_cmd_inventory__bad_arguments_exit_2_with_what_to_type(void **state)
{
	struct site s, empty;
	struct tu_run r;
	char bad[1200];
	static const struct {
		const char *args[8];
		const char *says[2];
	} cases[] = {
	    {{NULL}, {"--config FILE is required", "drasync-target inventory --config "}},
	    {{"-o", "xml", "--config", "CONFIG", NULL},
	     {"-o: 'xml' is not text, json or yaml", " -o yaml"}},
	    {{"--config", "CONFIG", "ml-team", NULL},
	     {"unexpected argument 'ml-team'", "--namespace NS"}},
	    {{"--config", "CONFIG", "--namespace", "", NULL},
	     {"--namespace needs a name", "--namespace ml-team"}},
	    {{"--config", "CONFIG", "--frobnicate", NULL},
	     {"unrecognized option", "Try 'drasync-target inventory --help'"}},
	    {{"--config", "CONFIG", "--offline", "--kubeconfig", "/x", NULL},
	     {"--offline asks no cluster", "leave out --kubeconfig"}},
	    {{"--config", "CONFIG", "--kubeconfig", "/nonexistent/kc", NULL},
	     {"/nonexistent/kc", "or --offline"}},
	    {{"--config", "BAD", NULL}, {"bad.yaml:5:", "objectTypo"}},
	    {{"--config", "EMPTY", NULL}, {"no ledger at ", "drasync-target run --config "}},
	};

	(void)state;
	site_new(&s, NULL);
	fill(&s);
	site_new(&empty, NULL);
	snprintf(bad, sizeof(bad), "%s/bad.yaml", s.dir);
	tu_write_file(bad, "apiVersion: drasync.io/v1alpha1\nkind: TargetConfig\ndra:\n"
			   "  resourceClaimMappings:\n"
			   "    - {objectTypo: Pod, objectInstance: a, container: b, "
			   "resourceClaim: c}\n");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *args[9] = {NULL};

		for (size_t k = 0; k < 8; k++) {
			const char *a = cases[i].args[k];
			args[k] = a && strcmp(a, "CONFIG") == 0	 ? s.config
				  : a && strcmp(a, "BAD") == 0	 ? bad
				  : a && strcmp(a, "EMPTY") == 0 ? empty.config
								 : a;
			if (!a)
				break;
		}
		inventory(&r, args);
		print_message("case %zu: %s", i, r.err);
		assert_int_equal(r.status, 2);
		assert_string_equal(r.out, "");
		for (size_t k = 0; k < 2; k++)
			if (cases[i].says[k] && !strstr(r.err, cases[i].says[k]))
				fail_msg("case %zu: '%s' not in: %s", i, cases[i].says[k], r.err);
		tu_run_dispose(&r);
	}
	/* --help: exit 0, with the options and examples */
	inventory(&r, (const char *[]){"--help", NULL});
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "Usage: drasync-target inventory --config FILE"));
	assert_non_null(strstr(r.out, "--offline"));
	assert_non_null(strstr(r.out, "Examples:\n  drasync-target inventory --config "));
	tu_run_dispose(&r);
	/* and the command list names it */
	tu_run(&r, NULL, (const char *[]){tu_env("DS_TARGET_BIN"), "--help", NULL});
	assert_non_null(strstr(r.out, "  inventory  every claim reference"));
	tu_run_dispose(&r);
	site_free(&s);
	site_free(&empty);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cmd_inventory__text_field_by_field),
	    cmocka_unit_test(test_cmd_inventory__json_field_by_field),
	    cmocka_unit_test(test_cmd_inventory__yaml_rules_accepted_by_plan),
	    cmocka_unit_test(test_cmd_inventory__no_cluster_is_unknown_with_the_reason),
	    cmocka_unit_test(test_cmd_inventory__bad_arguments_exit_2_with_what_to_type),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
