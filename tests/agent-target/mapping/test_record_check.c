/* What a record may ask of the target, decided from the file alone (SPEC §5). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/record_check.h"
#include "dstest.h"

#include <string.h>

#define CONFIG                                                                                     \
	"apiVersion: drasync.io/v1alpha1\nkind: TargetConfig\n"                                    \
	"sources:\n"                                                                               \
	"- {name: prod-east, namespaces: [ml-team], podSecurity: baseline}\n"

static json_t *obj(const char *text)
{
	json_error_t e;
	json_t *o = json_loads(text, 0, &e);

	assert_non_null(o);
	return o;
}

static void test_record_check__admitted_and_refused_with_reasons(void **state)
{
	ds_target_config *cfg = dt_config(CONFIG);
	ds_record_ref ok = {"prod-east", "v1", "ConfigMap", "ml-team", "a"};
	ds_record_ref ref;
	json_t *cm = obj("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\","
			 "\"metadata\":{\"namespace\":\"ml-team\",\"name\":\"a\"}}");
	json_t *other = obj("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\","
			    "\"metadata\":{\"namespace\":\"ml-team\",\"name\":\"b\"}}");
	char why[600];

	(void)state;
	assert_int_equal(ds_record_check(cfg, &ok, cm, why, sizeof(why)), -1);
	assert_int_equal(ds_record_check(cfg, &ok, NULL, why, sizeof(why)), -1);

	ref = ok;
	ref.kind = "Secret\nlevel=error";
	assert_int_equal(ds_record_check(cfg, &ref, NULL, why, sizeof(why)), DS_REFUSAL_KIND);
	assert_null(strchr(why, '\n')); /* a name from the wire never breaks a log line */
	assert_non_null(strstr(why, "is not replicated by drasync"));
	/* a kind that is never replicated says why (issue 24) */
	ref = (ds_record_ref){"prod-east", "resource.k8s.io/v1", "DeviceTaintRule", NULL, "t"};
	assert_int_equal(ds_record_check(cfg, &ref, NULL, why, sizeof(why)), DS_REFUSAL_KIND);
	assert_non_null(strstr(why, "kind \"DeviceTaintRule\" of \"resource.k8s.io/v1\" is not "
				    "replicated by drasync: describes one cluster's hardware"));

	ref = ok;
	ref.name = "..";
	assert_int_equal(ds_record_check(cfg, &ref, NULL, why, sizeof(why)), DS_REFUSAL_NAME);

	ref = ok;
	ref.ns = NULL;
	assert_int_equal(ds_record_check(cfg, &ref, NULL, why, sizeof(why)), DS_REFUSAL_NAME);

	assert_int_equal(ds_record_check(cfg, &ok, other, why, sizeof(why)), DS_REFUSAL_REFERENCE);
	assert_string_equal(why, "the record names ConfigMap ml-team/a (v1) but its payload is "
				 "ConfigMap ml-team/b (v1)");

	ref = ok;
	ref.ns = "kube-system";
	assert_int_equal(ds_record_check(cfg, &ref, NULL, why, sizeof(why)), DS_REFUSAL_NAMESPACE);
	assert_non_null(strstr(why, "not granted to source prod-east"));

	ref = ok;
	ref.source = "stranger";
	assert_int_equal(ds_record_check(cfg, &ref, cm, why, sizeof(why)), DS_REFUSAL_NAMESPACE);
	json_decref(cm);
	json_decref(other);
	ds_target_config_free(cfg);
}

static void test_record_check__pod_security_of_the_source(void **state)
{
	ds_target_config *cfg = dt_config(CONFIG);
	ds_record_ref ref = {"prod-east", "v1", "Pod", "ml-team", "p"};
	json_t *plain = obj("{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"namespace\":"
			    "\"ml-team\",\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":"
			    "\"c\",\"image\":\"x\"}]}}");
	json_t *priv = obj("{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"namespace\":"
			   "\"ml-team\",\"name\":\"p\"},\"spec\":{\"hostNetwork\":true,"
			   "\"containers\":[{\"name\":\"c\",\"image\":\"x\"}]}}");
	char why[600];

	(void)state;
	assert_int_equal(ds_record_check(cfg, &ref, plain, why, sizeof(why)), -1);
	assert_int_equal(ds_record_check(cfg, &ref, priv, why, sizeof(why)),
			 DS_REFUSAL_POD_SECURITY);
	assert_non_null(strstr(why, "Pod ml-team/p: "));
	assert_non_null(strstr(why, "host"));
	json_decref(plain);
	json_decref(priv);
	ds_target_config_free(cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_record_check__admitted_and_refused_with_reasons),
	    cmocka_unit_test(test_record_check__pod_security_of_the_source),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
