/* What a target dropped of what was sent, and why it likely did. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/field_loss.h"
#include "dstest.h"
#include "testutil.h"

#include <stdio.h>
#include <string.h>

static json_t *resource(const char *name)
{
	char path[1024];

	snprintf(path, sizeof(path), "%s/workload-claims/%s", tu_env("DS_RESOURCES"), name);
	return dt_load_file(path);
}

/* As an ungated 1.37 server answers: the Deployment without schedulingGroup, defaults added. */
static void test_field_loss__gated_fields_dropped_are_named(void **state)
{
	json_t *docs = resource("podgroup-deployments.yaml");
	json_t *sent = dt_find(docs, "Deployment", "trainer-a");
	json_t *kept = json_deep_copy(sent);
	json_t *pg = dt_find(docs, "PodGroup", "trainers");
	json_t *pg_kept = json_deep_copy(pg);
	char buf[400];

	(void)state;
	json_object_del(dt_get(kept, "/spec/template/spec"), "schedulingGroup");
	json_object_set_new(dt_get(kept, "/spec"), "revisionHistoryLimit", json_integer(10));
	json_object_set_new(json_object_get(kept, "metadata"), "uid", json_string("u"));
	assert_int_equal(ds_field_loss_find(sent, kept, NULL, buf, sizeof(buf)), 1);
	assert_string_equal(buf, "spec.template.spec.schedulingGroup");
	assert_non_null(strstr(ds_field_loss_cause(buf), "GenericWorkload"));
	/* Nothing lost: what the server adds or defaults is not a loss. */
	assert_int_equal(ds_field_loss_find(kept, kept, NULL, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "");

	json_object_del(json_object_get(pg_kept, "spec"), "resourceClaims");
	assert_int_equal(ds_field_loss_find(pg, pg_kept, NULL, buf, sizeof(buf)), 1);
	assert_string_equal(buf, "spec.resourceClaims");
	assert_non_null(strstr(ds_field_loss_cause(buf), "DRAWorkloadResourceClaims"));
	json_decref(kept);
	json_decref(pg_kept);
	json_decref(docs);
}

/* List items are one path ([]), zero values and status are not compared. */
static void test_field_loss__lists_zero_values_and_status(void **state)
{
	json_t *sent = dt_object(
	    "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c}\n"
	    "spec:\n  devices:\n    requests:\n"
	    "    - {name: a, exactly: {deviceClassName: g, capacity: {requests: {memory: 1Gi}},"
	    " tolerations: [{key: k, operator: Exists}]}}\n"
	    "    - {name: b, exactly: {deviceClassName: g, capacity: {requests: {memory: 2Gi}}}}\n"
	    "status: {allocation: {}}\nextra: {}\nflag: false\n");
	json_t *kept =
	    dt_object("apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c}\n"
		      "spec:\n  devices:\n    requests:\n"
		      "    - {name: a, exactly: {deviceClassName: g, allocationMode: ExactCount}}\n"
		      "    - {name: b, exactly: {deviceClassName: g}}\n");
	char buf[400];

	(void)state;
	assert_int_equal(ds_field_loss_find(sent, kept, NULL, buf, sizeof(buf)), 2);
	assert_string_equal(buf, "spec.devices.requests[].exactly.capacity, "
				 "spec.devices.requests[].exactly.tolerations");
	assert_non_null(strstr(ds_field_loss_cause("spec.devices.requests[].exactly.capacity"),
			       "DRAConsumableCapacity"));
	assert_non_null(strstr(ds_field_loss_cause("spec.devices.requests[].exactly.tolerations"),
			       "DRADeviceTaints"));
	assert_non_null(strstr(ds_field_loss_cause("spec.somethingNew"), "feature gate"));
	/* A list the server kept shorter lost its items. */
	json_array_remove(dt_get(kept, "/spec/devices/requests"), 1);
	assert_int_equal(ds_field_loss_find(sent, kept, NULL, buf, sizeof(buf)), 3);
	assert_non_null(strstr(buf, "spec.devices.requests[]"));
	/* Cut to fit, still counted. */
	assert_int_equal(ds_field_loss_find(sent, kept, NULL, buf, 12), 3);
	assert_int_equal(strlen(buf), 11);
	json_decref(sent);
	json_decref(kept);
}

/* dra.allowFieldLoss: a path allows itself and what is under it, nothing beside it. */
static void test_field_loss__allow_field_loss(void **state)
{
	ds_target_config *cfg =
	    dt_config("dra:\n  allowFieldLoss:\n  - spec.devices.requests[].exactly.tolerations\n"
		      "  - spec.devices.requests[].exactly.cap\n");
	json_t *sent = dt_object(
	    "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c}\n"
	    "spec:\n  devices:\n    requests:\n"
	    "    - {name: a, exactly: {deviceClassName: g, capacity: {requests: {memory: 1Gi}},"
	    " tolerations: [{key: k, operator: Exists}]}}\n");
	json_t *kept = dt_object("apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\n"
				 "metadata: {name: c}\n"
				 "spec:\n  devices:\n    requests:\n"
				 "    - {name: a, exactly: {deviceClassName: g}}\n");
	char buf[400];

	(void)state;
	assert_int_equal(
	    ds_field_loss_find(sent, kept, ds_target_config_dra(cfg), buf, sizeof(buf)), 1);
	assert_string_equal(buf, "spec.devices.requests[].exactly.capacity");
	json_decref(sent);
	json_decref(kept);
	ds_target_config_free(cfg);
}

static void test_field_loss__relevant_objects(void **state)
{
	json_t *docs = resource("podgroup-deployments.yaml");
	json_t *cm = dt_object("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n");
	json_t *plain = dt_object("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
				  "spec: {containers: [{name: c, image: x}]}\n");

	(void)state;
	assert_true(ds_field_loss_relevant(dt_find(docs, "PodGroup", "trainers")));
	assert_true(ds_field_loss_relevant(dt_find(docs, "Deployment", "trainer-a")));
	assert_true(ds_field_loss_relevant(dt_find(docs, "ResourceClaimTemplate", "shared-gpu")));
	assert_false(ds_field_loss_relevant(cm));
	assert_false(ds_field_loss_relevant(plain));
	json_decref(cm);
	json_decref(plain);
	json_decref(docs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_field_loss__gated_fields_dropped_are_named),
	    cmocka_unit_test(test_field_loss__lists_zero_values_and_status),
	    cmocka_unit_test(test_field_loss__allow_field_loss),
	    cmocka_unit_test(test_field_loss__relevant_objects),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
