/* What a TargetConfig grants each authorized source (SPEC §5 "Trust boundary"). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/source_grants.h"
#include "dstest.h"

#include <errno.h>
#include <string.h>

#define HEADER "apiVersion: drasync.io/v1alpha1\nkind: TargetConfig\n"

static void test_source_grants__entries_globs_and_levels(void **state)
{
	ds_target_config *cfg = dt_config(HEADER "namespaceMappings: {ml-team: ml-team-dr}\n"
						 "sources:\n"
						 "- name: prod-east\n"
						 "  namespaces: [ml-team, 'team-*', 'gpu-?[0-9]']\n"
						 "  podSecurity: restricted\n"
						 "  relocate: true\n"
						 "- {name: prod-west, namespaces: []}\n");
	char why[400];

	(void)state;
	assert_true(ds_target_config_has_sources(cfg));
	assert_true(ds_grant_namespace(cfg, "prod-east", "ml-team", why, sizeof(why)));
	assert_true(ds_grant_namespace(cfg, "prod-east", "team-a", why, sizeof(why)));
	assert_true(ds_grant_namespace(cfg, "prod-east", "gpu-a1", why, sizeof(why)));
	assert_false(ds_grant_namespace(cfg, "prod-east", "gpu-ab", why, sizeof(why)));
	assert_false(ds_grant_namespace(cfg, "prod-east", "hz-denied", why, sizeof(why)));
	assert_string_equal(why, "namespace hz-denied is not granted to source prod-east "
				 "(sources[0].namespaces)");
	/* a glob is not a prefix: the whole name matches or not */
	assert_false(ds_grant_namespace(cfg, "prod-east", "ml-team-2", why, sizeof(why)));
	assert_false(ds_grant_namespace(cfg, "prod-west", "ml-team", why, sizeof(why)));
	assert_non_null(strstr(why, "(sources[1].namespaces)"));
	assert_false(ds_grant_namespace(cfg, "stranger", "ml-team", why, sizeof(why)));
	assert_non_null(strstr(why, "has no entry in sources: it may write nothing"));
	assert_int_equal(ds_grant_pod_security(cfg, "prod-east"), DS_PSS_RESTRICTED);
	assert_int_equal(ds_grant_pod_security(cfg, "prod-west"), DS_PSS_BASELINE);
	assert_true(ds_grant_relocate(cfg, "prod-east"));
	assert_false(ds_grant_relocate(cfg, "prod-west"));
	assert_false(ds_grant_is_empty(cfg, "prod-east"));
	assert_true(ds_grant_is_empty(cfg, "prod-west"));
	assert_true(ds_grant_is_empty(cfg, "stranger"));
	assert_string_equal(ds_grant_describe(cfg, "prod-east", why, sizeof(why)),
			    "namespaces ml-team, team-*, gpu-?[0-9] (sources[0]), podSecurity "
			    "restricted, relocate");
	assert_string_equal(ds_grant_describe(cfg, "stranger", why, sizeof(why)),
			    "nothing: source stranger has no entry in sources");
	ds_target_config_free(cfg);
}

/* A file without sources: the namespaces of namespaceMappings, baseline; without either, nothing.
 */
static void test_source_grants__without_sources_the_mapped_namespaces(void **state)
{
	ds_target_config *cfg = dt_config(HEADER "namespaceMappings: {ml-team: ml-team-dr}\n");
	ds_target_config *none = dt_config(HEADER "mode: migrate\n");
	char why[400];

	(void)state;
	assert_false(ds_target_config_has_sources(cfg));
	assert_true(ds_grant_namespace(cfg, "anyone", "ml-team", why, sizeof(why)));
	/* the target side of a mapping is not a source namespace */
	assert_false(ds_grant_namespace(cfg, "anyone", "ml-team-dr", why, sizeof(why)));
	assert_non_null(strstr(why, "namespaceMappings only"));
	assert_int_equal(ds_grant_pod_security(cfg, "anyone"), DS_PSS_BASELINE);
	assert_false(ds_grant_relocate(cfg, "anyone"));
	assert_string_equal(ds_grant_describe(cfg, "anyone", why, sizeof(why)),
			    "namespaces ml-team (namespaceMappings), podSecurity baseline");
	assert_true(ds_grant_is_empty(none, "anyone"));
	assert_false(ds_grant_namespace(none, "anyone", "default", why, sizeof(why)));
	ds_target_config_free(cfg);
	ds_target_config_free(none);
}

/* sources[].name must be a name of the authorized-sources file, located in the file. */
static void test_source_grants__names_checked_against_authorized_sources(void **state)
{
	const char *yaml = HEADER "keys: {authorizedSources: /etc/drasync/auth}\n"
				  "sources:\n"
				  "- {name: prod-east, namespaces: [a]}\n"
				  "- {name: prod-esat, namespaces: [b]}\n";
	const char *const names[] = {"prod-east", "prod-west"};
	ds_target_config *cfg = NULL;
	ds_err err = {0};

	(void)state;
	assert_int_equal(ds_target_config_parse(&cfg, yaml, strlen(yaml), "target.yaml", &err), 0);
	assert_int_equal(ds_grant_check_names(cfg, names, 1, &err), -EINVAL);
	assert_string_equal(err.file, "target.yaml");
	assert_int_equal(err.line, 6);
	assert_int_equal(err.col, 3);
	assert_non_null(strstr(err.msg, "sources[1].name: 'prod-esat' is not a source of the "
					"authorized-sources file /etc/drasync/auth"));
	ds_err_clear(&err);
	assert_int_equal(
	    ds_grant_check_names(cfg, (const char *const[]){"prod-east", "prod-esat"}, 2, &err), 0);
	(void)names;
	ds_target_config_free(cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_source_grants__entries_globs_and_levels),
	    cmocka_unit_test(test_source_grants__without_sources_the_mapped_namespaces),
	    cmocka_unit_test(test_source_grants__names_checked_against_authorized_sources),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
