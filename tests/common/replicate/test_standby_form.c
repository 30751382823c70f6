#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/standby_form.h"
#include "dstest.h"

#include <jansson.h>
#include <string.h>

static json_t *obj(const char *text)
{
	json_error_t je;
	json_t *o = json_loads(text, 0, &je);

	assert_non_null(o);
	return o;
}

/* Parked, it says so; parked again it keeps the count; unparked it is as it was. */
static void test_standby_form__deployment_round_trip(void **state)
{
	json_t *d = obj("{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\","
			"\"metadata\":{\"name\":\"t\"},\"spec\":{\"replicas\":3}}");
	char was[32];

	(void)state;
	assert_false(ds_standby_form_is_parked(d));
	assert_int_equal(ds_standby_form_park(d, was, sizeof(was)), DS_STANDBY_FORM_SCALED);
	assert_string_equal(was, "3");
	assert_int_equal(json_integer_value(dt_get(d, "/spec/replicas")), 0);
	assert_string_equal(dt_str(d, "/metadata/annotations/drasync.io~1replicas"), "3");
	assert_true(ds_standby_form_is_parked(d));
	assert_int_equal(ds_standby_form_unpark(d), 1);
	assert_int_equal(json_integer_value(dt_get(d, "/spec/replicas")), 3);
	assert_null(dt_get(d, "/metadata/annotations/drasync.io~1replicas"));
	assert_int_equal(ds_standby_form_unpark(d), 0); /* not parked: nothing */
	json_decref(d);
}

static void test_standby_form__cronjob_daemonset_and_bare(void **state)
{
	json_t *c = obj("{\"kind\":\"CronJob\",\"metadata\":{\"name\":\"c\"},"
			"\"spec\":{\"suspend\":false}}");
	json_t *ds = obj("{\"kind\":\"DaemonSet\",\"metadata\":{\"name\":\"d\"},"
			 "\"spec\":{\"template\":{\"spec\":{\"containers\":[]}}}}");
	json_t *p = obj("{\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"},\"spec\":{}}");
	json_t *cm = obj("{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"x\"}}");
	char was[32];

	(void)state;
	assert_int_equal(ds_standby_form_park(c, was, sizeof(was)), DS_STANDBY_FORM_SUSPENDED);
	assert_string_equal(was, "false");
	assert_true(json_is_true(dt_get(c, "/spec/suspend")));
	assert_int_equal(ds_standby_form_unpark(c), 1);
	assert_true(json_is_false(dt_get(c, "/spec/suspend")));

	assert_int_equal(ds_standby_form_park(ds, was, sizeof(was)), DS_STANDBY_FORM_PARKED);
	assert_string_equal(dt_str(ds, "/spec/template/spec/nodeSelector/drasync.io~1standby"),
			    "true");
	assert_true(ds_standby_form_is_parked(ds));
	assert_int_equal(ds_standby_form_unpark(ds), 1);
	assert_null(dt_get(ds, "/spec/template/spec/nodeSelector"));

	assert_int_equal(ds_standby_form_park(p, was, sizeof(was)), DS_STANDBY_FORM_HOLD);
	assert_int_equal(ds_standby_form_park(cm, was, sizeof(was)), DS_STANDBY_FORM_NONE);
	json_decref(c);
	json_decref(ds);
	json_decref(p);
	json_decref(cm);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_standby_form__deployment_round_trip),
	    cmocka_unit_test(test_standby_form__cronjob_daemonset_and_bare),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
