/* resource.k8s.io conversion between v1beta1, v1beta2 and v1 (SPEC §4). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/dra_convert.h"
#include "drasync/k8s_object.h"
#include "dstest.h"
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every DRA object of every fixture file in a folder, through `via` and back. */
static size_t round_trip_folder(const char *folder, enum ds_dra_version home,
				enum ds_dra_version via)
{
	char dir[1024];
	DIR *d;
	struct dirent *de;
	size_t n = 0;

	snprintf(dir, sizeof(dir), "%s", tu_fixture(folder));
	d = tu_opendir(dir);
	while ((de = readdir(d))) {
		char path[1400];
		json_t *docs;
		size_t i;
		json_t *o;

		if (!strstr(de->d_name, ".yaml"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		docs = dt_load_file(path);
		json_array_foreach (docs, i, o) {
			json_t *orig;
			ds_err err = {0};

			if (!ds_dra_is_convertible(o))
				continue;
			orig = json_deep_copy(o);
			ds_err_clear(&err);
			if (ds_dra_convert(o, via, &err) != 1)
				fail_msg("%s: %s: %s", de->d_name, ds_obj_name(o), err.msg);
			assert_string_equal(ds_obj_api_version(o), ds_dra_api_version(via));
			assert_false(json_equal(o, orig));
			assert_int_equal(ds_dra_convert(o, home, &err), 1);
			if (!json_equal(o, orig)) {
				char *a = json_dumps(orig, JSON_SORT_KEYS),
				     *b = json_dumps(o, JSON_SORT_KEYS);
				fail_msg("%s: round trip differs:\n%s\n%s", de->d_name, a, b);
			}
			json_decref(orig);
			n++;
		}
		json_decref(docs);
	}
	closedir(d);
	return n;
}

static void test_dra_convert__v1beta1_fixtures_round_trip_through_v1_and_v1beta2(void **state)
{
	(void)state;
	assert_true(round_trip_folder("dra-example-driver/v1beta1", DS_DRA_V1BETA1, DS_DRA_V1) >=
		    4);
	assert_true(
	    round_trip_folder("dra-example-driver/v1beta1", DS_DRA_V1BETA1, DS_DRA_V1BETA2) >= 4);
}

static void test_dra_convert__v1_fixtures_round_trip_through_v1beta1(void **state)
{
	(void)state;
	/* Every v1 claim and template of the fixtures, firstAvailable and capacity included. */
	assert_true(round_trip_folder("dra-example-driver/v1", DS_DRA_V1, DS_DRA_V1BETA1) >= 10);
}

static void test_dra_convert__flat_request_moves_under_exactly(void **state)
{
	json_t *docs = dt_load_file(tu_fixture("dra-example-driver/v1beta1/gpu-test2.yaml"));
	json_t *t = dt_find(docs, "ResourceClaimTemplate", "multiple-gpus");
	json_t *rq;

	(void)state;
	assert_int_equal(ds_dra_convert(t, DS_DRA_V1, NULL), 1);
	rq = dt_get(t, "/spec/spec/devices/requests/0");
	assert_string_equal(ds_obj_api_version(t), "resource.k8s.io/v1");
	assert_int_equal(json_object_size(rq), 2); /* name, exactly */
	assert_string_equal(dt_str(rq, "/name"), "gpus");
	assert_string_equal(dt_str(rq, "/exactly/deviceClassName"), "gpu.example.com");
	assert_string_equal(dt_str(rq, "/exactly/allocationMode"), "ExactCount");
	assert_int_equal(json_integer_value(dt_get(rq, "/exactly/count")), 2);
	json_decref(docs);
}

static void test_dra_convert__first_available_keeps_its_shape(void **state)
{
	json_t *docs =
	    dt_load_file(tu_fixture("dra-example-driver/v1/prioritized-alternatives.yaml"));
	json_t *t = dt_find(docs, "ResourceClaimTemplate", "prioritized-gpu");
	json_t *before = json_deep_copy(dt_get(t, "/spec/spec/devices/requests/0/firstAvailable"));

	(void)state;
	assert_int_equal(ds_dra_convert(t, DS_DRA_V1BETA1, NULL), 1);
	assert_true(json_equal(dt_get(t, "/spec/spec/devices/requests/0/firstAvailable"), before));
	assert_null(dt_get(t, "/spec/spec/devices/requests/0/deviceClassName"));
	assert_null(dt_get(t, "/spec/spec/devices/requests/0/exactly"));
	json_decref(before);
	json_decref(docs);
}

static void test_dra_convert__unknown_field_is_an_error_never_dropped(void **state)
{
	json_t *c = dt_object(
	    "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c}\n"
	    "spec:\n  devices:\n    requests:\n    - name: gpu\n"
	    "      exactly: {deviceClassName: gpu.example.com, bindingConditions: [x]}\n");
	json_t *before = json_deep_copy(c);
	ds_err err = {0};

	(void)state;
	ds_err_clear(&err);
	assert_int_equal(ds_dra_convert(c, DS_DRA_V1BETA1, &err), -EINVAL);
	assert_string_equal(err.msg,
			    "spec.devices.requests[0].exactly.bindingConditions: field not known "
			    "in resource.k8s.io/v1, cannot be converted without losing it");
	assert_true(json_equal(c, before));
	json_decref(c);
	json_decref(before);

	c = dt_object("apiVersion: resource.k8s.io/v1beta1\nkind: ResourceClaimTemplate\nmetadata: "
		      "{name: t}\n"
		      "spec:\n  spec:\n    devices:\n      requests:\n      - {name: gpu, "
		      "deviceClassName: a, futureField: 1}\n");
	assert_int_equal(ds_dra_convert(c, DS_DRA_V1, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "spec.spec.devices.requests[0].futureField: field not "
					"known in resource.k8s.io/v1beta1"));
	assert_string_equal(ds_obj_api_version(c), "resource.k8s.io/v1beta1");
	json_decref(c);

	c = dt_object(
	    "apiVersion: resource.k8s.io/v1alpha3\nkind: DeviceClass\nmetadata: {name: d}\n"
	    "spec: {selectors: [], suitableNodes: {nodeSelectorTerms: []}}\n");
	assert_int_equal(ds_dra_convert(c, DS_DRA_V1, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "spec.suitableNodes"));
	json_decref(c);
}

static void test_dra_convert__exact_and_alternatives_together_is_an_error(void **state)
{
	json_t *c = dt_object(
	    "apiVersion: resource.k8s.io/v1beta1\nkind: ResourceClaim\nmetadata: {name: c}\n"
	    "spec:\n  devices:\n    requests:\n    - name: gpu\n      deviceClassName: a\n"
	    "      firstAvailable: [{name: x, deviceClassName: b}]\n");
	ds_err err = {0};

	(void)state;
	assert_int_equal(ds_dra_convert(c, DS_DRA_V1, &err), -EINVAL);
	assert_non_null(
	    strstr(err.msg, "spec.devices.requests[0]: both firstAvailable and deviceClassName"));
	json_decref(c);
}

static void test_dra_convert__device_class_and_same_version(void **state)
{
	json_t *dc = dt_object(
	    "apiVersion: resource.k8s.io/v1beta1\nkind: DeviceClass\nmetadata: {name: "
	    "gpu.example.com}\n"
	    "spec:\n  selectors:\n  - cel: {expression: \"device.driver == 'gpu.example.com'\"}\n");
	json_t *pod = dt_object("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n");
	json_t *before = json_deep_copy(dc);

	(void)state;
	assert_int_equal(ds_dra_convert(dc, DS_DRA_V1BETA1, NULL), 0);
	assert_int_equal(ds_dra_convert(dc, DS_DRA_V1, NULL), 1);
	assert_string_equal(ds_obj_api_version(dc), "resource.k8s.io/v1");
	assert_true(json_equal(json_object_get(dc, "spec"), json_object_get(before, "spec")));
	assert_int_equal(ds_dra_convert(pod, DS_DRA_V1BETA1, NULL), 0);
	json_decref(dc);
	json_decref(pod);
	json_decref(before);
}

static void test_dra_convert__version_names(void **state)
{
	enum ds_dra_version v;

	(void)state;
	assert_int_equal(ds_dra_version_parse("resource.k8s.io/v1beta2", &v), 0);
	assert_int_equal(v, DS_DRA_V1BETA2);
	assert_int_equal(ds_dra_version_parse("v1", &v), 0);
	assert_int_equal(v, DS_DRA_V1);
	assert_int_equal(ds_dra_version_parse("resource.k8s.io/v2", &v), -EINVAL);
	assert_int_equal(ds_dra_version_parse("apps/v1", &v), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_dra_convert__v1beta1_fixtures_round_trip_through_v1_and_v1beta2),
	    cmocka_unit_test(test_dra_convert__v1_fixtures_round_trip_through_v1beta1),
	    cmocka_unit_test(test_dra_convert__flat_request_moves_under_exactly),
	    cmocka_unit_test(test_dra_convert__first_available_keeps_its_shape),
	    cmocka_unit_test(test_dra_convert__unknown_field_is_an_error_never_dropped),
	    cmocka_unit_test(test_dra_convert__exact_and_alternatives_together_is_an_error),
	    cmocka_unit_test(test_dra_convert__device_class_and_same_version),
	    cmocka_unit_test(test_dra_convert__version_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
