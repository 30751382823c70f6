/* The table of kinds: what is replicated, in which order it is applied (SPEC §2-§5). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/k8s_object.h"
#include "drasync/kinds.h"
#include "dstest.h"

#include <errno.h>
#include <string.h>

/* SPEC §2: every kind the source lists and watches, with its group and resource. */
static const struct {
	const char *name, *group, *resource;
	bool namespaced;
} replicated[] = {
    {"Namespace", "", "namespaces", false},
    {"LimitRange", "", "limitranges", true},
    {"ResourceQuota", "", "resourcequotas", true},
    {"ServiceAccount", "", "serviceaccounts", true},
    {"ConfigMap", "", "configmaps", true},
    {"Secret", "", "secrets", true},
    {"PersistentVolumeClaim", "", "persistentvolumeclaims", true},
    {"Service", "", "services", true},
    {"DeviceClass", "resource.k8s.io", "deviceclasses", false},
    {"ResourceClaimTemplate", "resource.k8s.io", "resourceclaimtemplates", true},
    {"ResourceClaim", "resource.k8s.io", "resourceclaims", true},
    {"Workload", "scheduling.k8s.io", "workloads", true},
    {"PodGroup", "scheduling.k8s.io", "podgroups", true},
    {"Deployment", "apps", "deployments", true},
    {"ReplicaSet", "apps", "replicasets", true},
    {"StatefulSet", "apps", "statefulsets", true},
    {"DaemonSet", "apps", "daemonsets", true},
    {"Job", "batch", "jobs", true},
    {"CronJob", "batch", "cronjobs", true},
    {"Pod", "", "pods", true},
};

static void test_kinds__every_replicated_kind_is_in_the_table(void **state)
{
	(void)state;
	assert_int_equal(ds_kind_count(), sizeof(replicated) / sizeof(replicated[0]));
	for (size_t i = 0; i < sizeof(replicated) / sizeof(replicated[0]); i++) {
		const ds_kind *k = ds_kind_from_name(replicated[i].name);

		assert_non_null(k);
		assert_string_equal(k->group, replicated[i].group);
		assert_string_equal(k->resource, replicated[i].resource);
		assert_int_equal(k->namespaced, replicated[i].namespaced);
		assert_ptr_equal(ds_kind_from_resource(replicated[i].group, replicated[i].resource),
				 k);
		assert_ptr_equal(ds_kind_get(k->id), k);
		assert_int_equal(ds_kind_id_from_name(k->name), (int)k->id);
		/* iteration in table order: the apply order, as the source lists them */
		assert_ptr_equal(ds_kind_at(i), k);
	}
	assert_null(ds_kind_at(ds_kind_count()));
}

static void test_kinds__ranks_follow_the_spec_order(void **state)
{
	/* SPEC §5: Namespace, ServiceAccount, ConfigMap, Secret, PVC, Service,
	 * DeviceClass, ResourceClaimTemplate, ResourceClaim, Workload, PodGroup,
	 * then workloads; LimitRange and ResourceQuota before everything they
	 * govern (docs/architecture.md). */
	static const char *const order[] = {
	    "Namespace",
	    "LimitRange",
	    "ResourceQuota",
	    "ServiceAccount",
	    "ConfigMap",
	    "Secret",
	    "PersistentVolumeClaim",
	    "Service",
	    "DeviceClass",
	    "ResourceClaimTemplate",
	    "ResourceClaim",
	    "Workload",
	    "PodGroup",
	};
	static const char *const workloads[] = {
	    "Pod", "Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job", "CronJob"};

	(void)state;
	for (size_t i = 1; i < sizeof(order) / sizeof(order[0]); i++)
		assert_true(ds_kind_rank(order[i - 1]) < ds_kind_rank(order[i]));
	for (size_t i = 0; i < sizeof(workloads) / sizeof(workloads[0]); i++) {
		assert_true(ds_kind_rank(workloads[i]) > ds_kind_rank("PodGroup"));
		assert_int_equal(ds_kind_rank(workloads[i]), ds_kind_rank("Pod"));
		assert_true(ds_kind_rank(workloads[i]) < DS_KIND_RANK_UNKNOWN);
	}
	assert_int_equal(ds_kind_rank("ResourceSlice"), DS_KIND_RANK_UNKNOWN);
	assert_int_equal(ds_kind_rank(NULL), DS_KIND_RANK_UNKNOWN);
}

static void test_kinds__classes(void **state)
{
	(void)state;
	for (int w = 0; w < DS_WORKLOAD_MAX; w++) {
		const ds_kind *k = ds_kind_from_name(ds_workload_name((enum ds_workload)w));

		assert_non_null(k);
		assert_true(ds_kind_is_workload(k->name));
		assert_int_equal(k->workload, w);
	}
	assert_false(ds_kind_is_workload("PodGroup"));
	assert_false(ds_kind_is_workload("ConfigMap"));

	assert_true(ds_kind_is_dra("DeviceClass"));
	assert_true(ds_kind_is_dra("ResourceClaim"));
	assert_true(ds_kind_is_dra("ResourceClaimTemplate"));
	assert_false(ds_kind_is_dra("ResourceSlice"));
	assert_false(ds_kind_is_dra("Pod"));

	assert_true(ds_kind_is_claim("ResourceClaim"));
	assert_true(ds_kind_is_claim("ResourceClaimTemplate"));
	assert_false(ds_kind_is_claim("DeviceClass"));

	assert_true(ds_kind_is_group("PodGroup"));
	assert_true(ds_kind_is_group("Workload"));
	assert_false(ds_kind_is_group("Deployment"));

	assert_true(ds_kind_is("Namespace", DS_KIND_NAMESPACE));
	assert_false(ds_kind_is("Namespace", DS_KIND_POD));
	assert_false(ds_kind_namespaced("Namespace"));
	assert_false(ds_kind_namespaced("DeviceClass"));
	assert_true(ds_kind_namespaced("Pod"));
	/* a kind drasync does not know is taken for namespaced, as the API mostly is */
	assert_true(ds_kind_namespaced("Widget"));
	assert_int_equal(ds_kind_from_name("Namespace")->kind_class, DS_KIND_CLASS_NAMESPACE);
	assert_int_equal(ds_kind_from_name("Secret")->kind_class, DS_KIND_CLASS_SUPPORT);
}

static void test_kinds__versions_preferred_first(void **state)
{
	const ds_kind *rc = ds_kind_from_name("ResourceClaim");
	const ds_kind *pg = ds_kind_from_name("PodGroup");
	const ds_kind *dep = ds_kind_from_name("Deployment");

	(void)state;
	assert_string_equal(rc->versions[0], "v1");
	assert_string_equal(rc->versions[1], "v1beta2");
	assert_string_equal(rc->versions[2], "v1beta1");
	assert_null(rc->versions[3]);
	assert_string_equal(pg->versions[0], "v1");
	assert_string_equal(pg->versions[1], "v1beta1");
	assert_string_equal(pg->versions[2], "v1alpha3");
	assert_string_equal(pg->versions[3], "v1alpha2");
	assert_null(pg->versions[4]);
	assert_string_equal(dep->versions[0], "v1");
	assert_null(dep->versions[1]);
}

static void test_kinds__unknown_is_null_or_einval(void **state)
{
	(void)state;
	assert_null(ds_kind_from_name("ResourceSlice"));
	assert_null(ds_kind_from_name("deployment")); /* exact, as in `kind:` */
	assert_null(ds_kind_from_name(NULL));
	assert_int_equal(ds_kind_id_from_name("Event"), -EINVAL);
	assert_int_equal(ds_kind_id_from_name(NULL), -EINVAL);
	assert_null(ds_kind_from_resource("", "deployments")); /* apps, not core */
	assert_null(ds_kind_from_resource(NULL, "pods"));
	assert_null(ds_kind_get(DS_KIND_MAX));
	assert_false(ds_kind_is(NULL, DS_KIND_POD));
	assert_false(ds_kind_is_workload(NULL));
}

static void test_kinds__of_an_object_checks_its_group(void **state)
{
	json_t *dep = dt_object("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\n");
	json_t *rc = dt_object(
	    "apiVersion: resource.k8s.io/v1beta1\nkind: ResourceClaim\nmetadata: {name: a}\n");
	json_t *other = dt_object("apiVersion: example.com/v1\nkind: Deployment\nmetadata: {}\n");
	json_t *none = dt_object("kind: Pod\nmetadata: {}\n");

	(void)state;
	assert_ptr_equal(ds_kind_of(dep), ds_kind_get(DS_KIND_DEPLOYMENT));
	assert_ptr_equal(ds_kind_of(rc), ds_kind_get(DS_KIND_RESOURCE_CLAIM));
	assert_null(ds_kind_of(other));
	assert_null(ds_kind_of(none));
	json_decref(dep);
	json_decref(rc);
	json_decref(other);
	json_decref(none);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_kinds__every_replicated_kind_is_in_the_table),
	    cmocka_unit_test(test_kinds__ranks_follow_the_spec_order),
	    cmocka_unit_test(test_kinds__classes),
	    cmocka_unit_test(test_kinds__versions_preferred_first),
	    cmocka_unit_test(test_kinds__unknown_is_null_or_einval),
	    cmocka_unit_test(test_kinds__of_an_object_checks_its_group),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
