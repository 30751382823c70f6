#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/kube_error.h"
#include "testutil.h"

#include <errno.h>
#include <string.h>

static void test_kube_error__http_status_to_errno(void **state)
{
	static const struct {
		int code;
		const char *reason;
		int rc;
	} map[] = {
	    {200, NULL, 0},
	    {201, "", 0},
	    {400, "BadRequest", -EINVAL},
	    {422, "Invalid", -EINVAL},
	    {401, "Unauthorized", -EACCES},
	    {403, "Forbidden", -EPERM},
	    {404, "NotFound", -ENOENT},
	    {405, "MethodNotAllowed", -EOPNOTSUPP},
	    {409, "AlreadyExists", -EEXIST},
	    {409, "Conflict", -ESTALE},
	    {410, "Expired", -EIDRM},
	    {413, "RequestEntityTooLarge", -E2BIG},
	    {415, "UnsupportedMediaType", -EPROTO},
	    {429, "TooManyRequests", -EAGAIN},
	    {500, "InternalError", -EIO},
	    {502, NULL, -EIO},
	    {503, "ServiceUnavailable", -EAGAIN},
	    {504, "Timeout", -ETIMEDOUT},
	    {418, NULL, -EPROTO},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (ds_kube_error_errno(map[i].code, map[i].reason) != map[i].rc)
			fail_msg("%d %s -> %d, want %d", map[i].code,
				 map[i].reason ? map[i].reason : "",
				 ds_kube_error_errno(map[i].code, map[i].reason), map[i].rc);
	assert_true(ds_kube_error_is_transient(429));
	assert_true(ds_kube_error_is_transient(503));
	assert_false(ds_kube_error_is_transient(409));
	assert_false(ds_kube_error_is_transient(404));
}

static void test_kube_error__status_message_reason_details_kept(void **state)
{
	const char *body =
	    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
	    "\"message\":\"Deployment.apps \\\"web\\\" is invalid: spec.replicas: Invalid value: "
	    "-1: must be greater than or equal to 0\",\"reason\":\"Invalid\",\"details\":{"
	    "\"name\":\"web\",\"group\":\"apps\",\"kind\":\"Deployment\",\"causes\":[{"
	    "\"reason\":\"FieldValueInvalid\",\"message\":\"Invalid value: -1\",\"field\":"
	    "\"spec.replicas\"},{\"message\":\"second\",\"field\":\"spec.x\"}],"
	    "\"retryAfterSeconds\":3},\"code\":422}";
	ds_kube_error ke;
	char buf[1024];

	(void)state;
	ds_kube_error_clear(&ke);
	assert_int_equal(ds_kube_error_from_response(&ke, 422, body, strlen(body)), -EINVAL);
	assert_int_equal(ke.code, 422);
	assert_string_equal(ke.reason, "Invalid");
	assert_non_null(strstr(ke.message, "spec.replicas: Invalid value"));
	assert_string_equal(ke.details_name, "web");
	assert_string_equal(ke.details_group, "apps");
	assert_string_equal(ke.details_kind, "Deployment");
	assert_string_equal(ke.causes, "spec.replicas: Invalid value: -1; spec.x: second");
	assert_int_equal(ke.retry_after, 3);
	ds_kube_error_format(&ke, buf, sizeof(buf));
	assert_true(strncmp(buf, "422 Invalid: Deployment.apps \"web\" is invalid", 45) == 0);
}

static void test_kube_error__non_status_bodies(void **state)
{
	ds_kube_error ke;
	char buf[600];

	(void)state;
	ds_kube_error_clear(&ke);
	assert_int_equal(ds_kube_error_from_response(&ke, 502, "<html>\nBad gateway\n</html>", 26),
			 -EIO);
	assert_string_equal(ke.reason, "");
	assert_string_equal(ke.message, "<html> Bad gateway </html>");
	ds_kube_error_clear(&ke);
	assert_int_equal(ds_kube_error_from_response(&ke, 503, NULL, 0), -EAGAIN);
	assert_string_equal(ke.message, "HTTP 503 Service Unavailable");
	ds_kube_error_clear(&ke);
	assert_int_equal(ds_kube_error_from_response(&ke, 413, "", 0), -E2BIG);
	assert_string_equal(ke.message, "HTTP 413 Content Too Large");
	ds_kube_error_clear(&ke);
	ds_kube_error_from_response(&ke, 499, NULL, 0);
	assert_string_equal(ke.message, "HTTP 499");
	/* a JSON body that is not a Status is shown as text */
	ds_kube_error_clear(&ke);
	assert_int_equal(ds_kube_error_from_response(&ke, 404, "{\"kind\":\"Pod\"}", 14), -ENOENT);
	assert_string_equal(ke.message, "{\"kind\":\"Pod\"}");
	ds_kube_error_clear(&ke);
	ke.tls = DS_KUBE_TLS_UNKNOWN_CA;
	snprintf(ke.message, sizeof(ke.message), "x");
	assert_string_equal(ds_kube_error_format(&ke, buf, sizeof(buf)), "TLS unknown CA: x");
	assert_string_equal(ds_kube_tls_cause_name(DS_KUBE_TLS_NAME_MISMATCH), "name mismatch");
}

/* One setter for every failure drasync itself detects: nothing stale survives it. */
static void test_kube_error__set_replaces_everything_but_attempts(void **state)
{
	static const char body[] =
	    "{\"kind\":\"Status\",\"reason\":\"Conflict\",\"message\":\"old\","
	    "\"details\":{\"name\":\"c\"}}";
	ds_kube_error ke = {0};
	char buf[600];

	(void)state;
	assert_int_equal(ds_kube_error_from_response(&ke, 409, body, strlen(body)), -ESTALE);
	ke.attempts = 3;
	ke.tls = DS_KUBE_TLS_EXPIRED;
	ds_kube_error_set(&ke, 0, "list %s: the answer has no items", "configmaps");
	assert_int_equal(ke.code, 0);
	assert_string_equal(ke.reason, "");
	assert_string_equal(ke.details_name, "");
	assert_int_equal(ke.tls, DS_KUBE_TLS_OK);
	assert_int_equal(ke.attempts, 3);
	assert_string_equal(ds_kube_error_format(&ke, buf, sizeof(buf)),
			    "list configmaps: the answer has no items");
	ds_kube_error_set(&ke, 404, "%s", "not served");
	assert_int_equal(ke.code, 404);
	assert_string_equal(ke.message, "not served");
	ds_kube_error_set(NULL, 500, "NULL is accepted");
}

/* ke filled from a Status body as the API server sends it. */
static ds_kube_error *from(ds_kube_error *ke, int code, const char *body)
{
	ds_kube_error_clear(ke);
	ds_kube_error_from_response(ke, code, body, strlen(body));
	return ke;
}

/* Status bodies in the shape kube-apiserver answers with (long Go values elided as {...}). */
static const char job_template_immutable[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"Job.batch \\\"pi\\\" is invalid: spec.template: Invalid value: "
    "core.PodTemplateSpec{...}: field is immutable\",\"reason\":\"Invalid\",\"details\":{"
    "\"name\":\"pi\",\"group\":\"batch\",\"kind\":\"Job\",\"causes\":[{\"reason\":"
    "\"FieldValueInvalid\",\"message\":\"Invalid value: core.PodTemplateSpec{...}: field is "
    "immutable\",\"field\":\"spec.template\"}]},\"code\":422}";
static const char statefulset_spec_forbidden[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"StatefulSet.apps \\\"web\\\" is invalid: spec: Forbidden: updates to "
    "statefulset spec for fields other than 'replicas', 'ordinals', 'template', "
    "'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are "
    "forbidden\",\"reason\":\"Invalid\",\"details\":{\"name\":\"web\",\"group\":\"apps\","
    "\"kind\":\"StatefulSet\",\"causes\":[{\"reason\":\"FieldValueForbidden\",\"message\":"
    "\"Forbidden: updates to statefulset spec for fields other than 'replicas' are "
    "forbidden\",\"field\":\"spec\"}]},\"code\":422}";
static const char pvc_spec_immutable[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"PersistentVolumeClaim \\\"data\\\" is invalid: spec: Forbidden: spec is "
    "immutable after creation except resources.requests and volumeAttributesClassName for "
    "bound claims\",\"reason\":\"Invalid\",\"details\":{\"name\":\"data\",\"kind\":"
    "\"PersistentVolumeClaim\",\"causes\":[{\"reason\":\"FieldValueForbidden\",\"message\":"
    "\"Forbidden: spec is immutable after creation\",\"field\":\"spec\"}]},\"code\":422}";
static const char replicas_invalid[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"Deployment.apps \\\"web\\\" is invalid: spec.replicas: Invalid value: -1: "
    "must be greater than or equal to 0\",\"reason\":\"Invalid\",\"details\":{\"name\":"
    "\"web\",\"group\":\"apps\",\"kind\":\"Deployment\",\"causes\":[{\"reason\":"
    "\"FieldValueInvalid\",\"message\":\"Invalid value: -1: must be greater than or equal "
    "to 0\",\"field\":\"spec.replicas\"}]},\"code\":422}";
static const char namespace_not_found[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"namespaces \\\"team-a\\\" not found\",\"reason\":\"NotFound\","
    "\"details\":{\"name\":\"team-a\",\"kind\":\"namespaces\"},\"code\":404}";
static const char configmap_not_found[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"configmaps \\\"x\\\" not found\",\"reason\":\"NotFound\",\"details\":{"
    "\"name\":\"x\",\"kind\":\"configmaps\"},\"code\":404}";
static const char resource_not_served[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"the server could not find the requested resource\",\"reason\":"
    "\"NotFound\",\"details\":{},\"code\":404}";
static const char apply_conflict[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"Apply failed with 1 conflict: conflict with \\\"other-team\\\" using v1: "
    ".data.v\",\"reason\":\"Conflict\",\"details\":{\"causes\":[{\"reason\":"
    "\"FieldManagerConflict\",\"message\":\"conflict with \\\"other-team\\\" using v1\","
    "\"field\":\".data.v\"}]},\"code\":409}";
static const char stale_update[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"Operation cannot be fulfilled on configmaps \\\"x\\\": the object has been "
    "modified; please apply your changes to the latest version and try again\",\"reason\":"
    "\"Conflict\",\"details\":{\"name\":\"x\",\"kind\":\"configmaps\"},\"code\":409}";
static const char already_exists[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"configmaps \\\"x\\\" already exists\",\"reason\":\"AlreadyExists\","
    "\"details\":{\"name\":\"x\",\"kind\":\"configmaps\"},\"code\":409}";
/* an admission webhook's denial: "immutable" and "may not change fields", but 403 Forbidden */
static const char forbidden[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"admission webhook \\\"immutable-labels.policy.example.com\\\" denied the "
    "request: label team may not change fields it owns\",\"reason\":\"Forbidden\",\"code\":403}";
static const char expired[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"too old resource version: 1 (4242)\",\"reason\":\"Expired\",\"code\":410}";

static void test_kube_error__immutable_is_422_invalid_naming_an_immutable_field(void **state)
{
	ds_kube_error ke;

	(void)state;
	assert_true(ds_kube_error_is_immutable(from(&ke, 422, job_template_immutable)));
	assert_true(ds_kube_error_is_immutable(from(&ke, 422, statefulset_spec_forbidden)));
	assert_true(ds_kube_error_is_immutable(from(&ke, 422, pvc_spec_immutable)));
	/* Invalid, but a wrong value: applying again after a delete would not help */
	assert_false(ds_kube_error_is_immutable(from(&ke, 422, replicas_invalid)));
	/* the words alone are not enough: the reason and code decide first */
	assert_false(ds_kube_error_is_immutable(from(&ke, 403, forbidden)));
	assert_false(ds_kube_error_is_immutable(from(&ke, 404, namespace_not_found)));
	assert_false(ds_kube_error_is_immutable(NULL));
}

static void test_kube_error__not_found_tells_namespace_object_and_type_apart(void **state)
{
	ds_kube_error ke;

	(void)state;
	assert_true(ds_kube_error_is_namespace_missing(from(&ke, 404, namespace_not_found)));
	assert_false(ds_kube_error_is_type_not_served(&ke));
	assert_false(ds_kube_error_is_namespace_missing(from(&ke, 404, configmap_not_found)));
	assert_false(ds_kube_error_is_type_not_served(&ke));
	assert_true(ds_kube_error_is_type_not_served(from(&ke, 404, resource_not_served)));
	assert_false(ds_kube_error_is_namespace_missing(&ke));
	/* a proxy's "404 page not found" is not a Status: no name either */
	assert_true(ds_kube_error_is_type_not_served(from(&ke, 404, "404 page not found")));
	assert_false(ds_kube_error_is_type_not_served(from(&ke, 410, expired)));
	assert_false(ds_kube_error_is_namespace_missing(from(&ke, 403, forbidden)));
	assert_false(ds_kube_error_is_namespace_missing(NULL));
	assert_false(ds_kube_error_is_type_not_served(NULL));
}

static void test_kube_error__conflict_is_409_but_not_already_exists(void **state)
{
	ds_kube_error ke;

	(void)state;
	assert_true(ds_kube_error_is_conflict(from(&ke, 409, apply_conflict)));
	assert_string_equal(ke.causes, ".data.v: conflict with \"other-team\" using v1");
	assert_true(ds_kube_error_is_conflict(from(&ke, 409, stale_update)));
	assert_false(ds_kube_error_is_conflict(from(&ke, 409, already_exists)));
	assert_false(ds_kube_error_is_conflict(from(&ke, 410, expired)));
	assert_false(ds_kube_error_is_conflict(from(&ke, 422, job_template_immutable)));
	assert_false(ds_kube_error_is_conflict(NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_kube_error__http_status_to_errno),
	    cmocka_unit_test(test_kube_error__status_message_reason_details_kept),
	    cmocka_unit_test(test_kube_error__non_status_bodies),
	    cmocka_unit_test(test_kube_error__set_replaces_everything_but_attempts),
	    cmocka_unit_test(test_kube_error__immutable_is_422_invalid_naming_an_immutable_field),
	    cmocka_unit_test(test_kube_error__not_found_tells_namespace_object_and_type_apart),
	    cmocka_unit_test(test_kube_error__conflict_is_409_but_not_already_exists),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
