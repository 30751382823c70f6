/* What the sanitizer removes before a record is built (SPEC §2). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/sanitize.h"
#include "dstest.h"

static void test_sanitize__server_metadata_and_status(void **state)
{
	json_t *o = dt_object(
	    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: n\n  uid: 1234\n"
	    "  resourceVersion: '99'\n  generation: 3\n  creationTimestamp: "
	    "'2026-01-01T00:00:00Z'\n"
	    "  deletionTimestamp: x\n  deletionGracePeriodSeconds: 30\n  managedFields: [{manager: "
	    "m}]\n"
	    "  selfLink: /api/v1/x\n  ownerReferences: [{kind: X, name: y}]\n  labels: {app: a}\n"
	    "  annotations: {kubectl.kubernetes.io/last-applied-configuration: '{}'}\n"
	    "spec:\n  nodeName: node-1\n  containers: [{name: c}]\nstatus: {phase: Running}\n");

	(void)state;
	assert_int_equal(ds_sanitize(o), 0);
	assert_null(json_object_get(o, "status"));
	assert_int_equal(json_object_size(json_object_get(o, "metadata")),
			 3); /* name, namespace, labels */
	assert_null(dt_get(o, "/spec/nodeName"));
	assert_string_equal(dt_str(o, "/spec/containers/0/name"), "c");
	json_decref(o);
}

static void test_sanitize__service_ips_and_node_ports(void **state)
{
	json_t *s =
	    dt_object("apiVersion: v1\nkind: Service\nmetadata: {name: s}\n"
		      "spec:\n  clusterIP: 10.0.0.5\n  clusterIPs: [10.0.0.5]\n  type: NodePort\n"
		      "  ports: [{port: 80, nodePort: 30080}]\n");
	json_t *h = dt_object("apiVersion: v1\nkind: Service\nmetadata: {name: h}\n"
			      "spec:\n  clusterIP: None\n  clusterIPs: [None]\n");

	(void)state;
	ds_sanitize(s);
	ds_sanitize(h);
	assert_null(dt_get(s, "/spec/clusterIP"));
	assert_null(dt_get(s, "/spec/clusterIPs"));
	assert_null(dt_get(s, "/spec/ports/0/nodePort"));
	assert_int_equal(json_integer_value(dt_get(s, "/spec/ports/0/port")), 80);
	assert_string_equal(dt_str(h, "/spec/clusterIP"), "None");
	assert_string_equal(dt_str(h, "/spec/clusterIPs/0"), "None");
	json_decref(s);
	json_decref(h);
}

static void test_sanitize__pvc_binding(void **state)
{
	json_t *p =
	    dt_object("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n"
		      "  annotations:\n    pv.kubernetes.io/bind-completed: 'yes'\n"
		      "    pv.kubernetes.io/bound-by-controller: 'yes'\n"
		      "    volume.kubernetes.io/selected-node: n1\n    team: ml\n"
		      "spec:\n  volumeName: pvc-123\n  resources: {requests: {storage: 1Gi}}\n");

	(void)state;
	ds_sanitize(p);
	assert_null(dt_get(p, "/spec/volumeName"));
	assert_int_equal(json_object_size(dt_get(p, "/metadata/annotations")), 1);
	assert_string_equal(dt_str(p, "/metadata/annotations/team"), "ml");
	json_decref(p);
}

/* A quota's status (hard and used, the target's own count) and server fields go; its spec stays. */
static void test_sanitize__quota_and_limits(void **state)
{
	json_t *q = dt_object(
	    "apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: q\n  namespace: ml\n"
	    "  uid: 1\n  resourceVersion: '7'\n  creationTimestamp: x\n  managedFields: [{}]\n"
	    "spec:\n  hard: {pods: '10', requests.cpu: '4'}\n  scopes: [NotTerminating]\n"
	    "status:\n  hard: {pods: '10', requests.cpu: '4'}\n  used: {pods: '3'}\n");
	json_t *l = dt_object("apiVersion: v1\nkind: LimitRange\nmetadata:\n  name: l\n  uid: 2\n"
			      "  generation: 1\nspec:\n  limits: [{type: Container, max: {cpu: "
			      "'2'}}]\n");

	(void)state;
	assert_int_equal(ds_sanitize(q), 0);
	assert_int_equal(ds_sanitize(l), 0);
	assert_null(json_object_get(q, "status"));
	assert_int_equal(json_object_size(json_object_get(q, "metadata")), 2); /* name, namespace */
	assert_string_equal(dt_str(q, "/spec/hard/pods"), "10");
	assert_string_equal(dt_str(q, "/spec/scopes/0"), "NotTerminating");
	assert_int_equal(json_object_size(json_object_get(l, "metadata")), 1);
	assert_string_equal(dt_str(l, "/spec/limits/0/max/cpu"), "2");
	json_decref(q);
	json_decref(l);
}

/* A Job as the source's API server returns it: its controller's selector and labels go. */
static void test_sanitize__job_generated_selector_and_uid_labels(void **state)
{
	json_t *j = dt_object(
	    "apiVersion: batch/v1\nkind: Job\nmetadata: {name: w07, namespace: ml}\n"
	    "spec:\n  selector:\n    matchLabels: {batch.kubernetes.io/controller-uid: "
	    "f98917ca-64f9-4a1e-8bd1-9ee53aa50dc5}\n"
	    "  template:\n    metadata:\n      labels:\n"
	    "        batch.kubernetes.io/controller-uid: f98917ca-64f9-4a1e-8bd1-9ee53aa50dc5\n"
	    "        batch.kubernetes.io/job-name: w07\n"
	    "        controller-uid: f98917ca-64f9-4a1e-8bd1-9ee53aa50dc5\n"
	    "        job-name: w07\n        team: ml\n"
	    "    spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}\n");
	json_t *manual =
	    dt_object("apiVersion: batch/v1\nkind: Job\nmetadata: {name: m}\n"
		      "spec:\n  manualSelector: true\n"
		      "  selector: {matchLabels: {app: m}}\n"
		      "  template:\n    metadata: {labels: {app: m, controller-uid: x}}\n");

	(void)state;
	ds_sanitize(j);
	assert_null(dt_get(j, "/spec/selector"));
	assert_null(dt_get(j, "/spec/template/metadata/labels/controller-uid"));
	assert_null(
	    dt_get(j, "/spec/template/metadata/labels/batch.kubernetes.io~1controller-uid"));
	/* the names are the Job's own, the same on the target; the user's label stays */
	assert_string_equal(dt_str(j, "/spec/template/metadata/labels/job-name"), "w07");
	assert_string_equal(dt_str(j, "/spec/template/metadata/labels/team"), "ml");
	/* a selector the user chose is theirs */
	ds_sanitize(manual);
	assert_string_equal(dt_str(manual, "/spec/selector/matchLabels/app"), "m");
	assert_string_equal(dt_str(manual, "/spec/template/metadata/labels/controller-uid"), "x");
	json_decref(j);
	json_decref(manual);
}

static void test_sanitize__resource_claim_allocation_and_finalizer(void **state)
{
	json_t *c = dt_object(
	    "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata:\n  name: single-gpu\n"
	    "  finalizers: [resource.kubernetes.io/delete-protection]\n"
	    "spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: "
	    "gpu.example.com}}]}}\n"
	    "status:\n  allocation: {devices: {results: [{request: gpu, driver: gpu.example.com, "
	    "pool: n1, device: gpu-0}]}}\n"
	    "  reservedFor: [{resource: pods, name: pod0, uid: u}]\n");
	json_t *k = dt_object(
	    "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata:\n  name: c\n"
	    "  finalizers: [resource.kubernetes.io/delete-protection, example.com/keep]\n");

	(void)state;
	ds_sanitize(c);
	ds_sanitize(k);
	assert_null(json_object_get(c, "status"));
	assert_null(dt_get(c, "/metadata/finalizers"));
	assert_string_equal(dt_str(c, "/spec/devices/requests/0/exactly/deviceClassName"),
			    "gpu.example.com");
	assert_int_equal(json_array_size(dt_get(k, "/metadata/finalizers")), 1);
	assert_string_equal(dt_str(k, "/metadata/finalizers/0"), "example.com/keep");
	json_decref(c);
	json_decref(k);
}

/* A PodGroup as a 1.37 source serves it: status and the protection finalizer stay home. */
static void test_sanitize__podgroup_status_and_finalizer(void **state)
{
	json_t *g = dt_object(
	    "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata:\n  name: trainers\n"
	    "  finalizers: [scheduling.k8s.io/podgroup-protection]\n"
	    "spec:\n  schedulingPolicy: {basic: {}}\n"
	    "  resourceClaims: [{name: g, resourceClaimTemplateName: t}]\n"
	    "status:\n  resourceClaimStatuses: [{name: g, resourceClaimName: trainers-g-x}]\n");

	(void)state;
	ds_sanitize(g);
	assert_null(json_object_get(g, "status"));
	assert_null(dt_get(g, "/metadata/finalizers"));
	assert_string_equal(dt_str(g, "/spec/resourceClaims/0/resourceClaimTemplateName"), "t");
	json_decref(g);
}

/* The target's admins grant admin access to devices: the source's grant is not carried. */
static void test_sanitize__namespace_admin_access_grant(void **state)
{
	json_t *ns = dt_object("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: mon\n"
			       "  labels:\n    resource.kubernetes.io/admin-access: 'true'\n"
			       "    team: gpu-ops\n");
	json_t *only = dt_object("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: m2\n"
				 "  labels: {resource.kubernetes.io/admin-access: 'true'}\n");
	json_t *cm = dt_object("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n"
			       "  labels: {resource.kubernetes.io/admin-access: 'true'}\n");

	(void)state;
	assert_int_equal(ds_sanitize(ns), 0);
	assert_null(dt_get(ns, "/metadata/labels/resource.kubernetes.io~1admin-access"));
	assert_string_equal(dt_str(ns, "/metadata/labels/team"), "gpu-ops");
	assert_int_equal(ds_sanitize(only), 0);
	assert_null(dt_get(only, "/metadata/labels"));
	/* Only a Namespace's label grants anything: another kind keeps it. */
	assert_int_equal(ds_sanitize(cm), 0);
	assert_string_equal(dt_str(cm, "/metadata/labels/resource.kubernetes.io~1admin-access"),
			    "true");
	json_decref(ns);
	json_decref(only);
	json_decref(cm);
}

/*
 * Reverse replication: what a drasync-target wrote on its copy stays there
 * (marks, mode, the relocation's mark); a standby copy travels as the
 * workload it stands for; another manager's label and the user's own
 * annotations travel.
 */
static void test_sanitize__drasync_marks_never_travel(void **state)
{
	json_t *d = dt_object(
	    "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: trainer\n  namespace: n\n"
	    "  labels: {app.kubernetes.io/managed-by: drasync, app: t}\n"
	    "  annotations: {drasync.io/source: site-a, drasync.io/source-cluster: site-a,\n"
	    "    drasync.io/source-uid: u1, drasync.io/replicas: '3', drasync.io/relocated-to: x,\n"
	    "    team.example.com/owner: ml}\n"
	    "spec:\n  replicas: 0\n  template: {spec: {containers: [{name: c}]}}\n");
	json_t *ns = dt_object("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: n\n"
			       "  labels: {app.kubernetes.io/managed-by: helm}\n"
			       "  annotations: {drasync.io/mode: active, drasync.io/mode-since: x, "
			       "drasync.io/created: 'true'}\n");

	(void)state;
	assert_int_equal(ds_sanitize(d), 0);
	assert_int_equal(json_integer_value(dt_get(d, "/spec/replicas")), 3);
	assert_null(dt_get(d, "/metadata/labels/app.kubernetes.io~1managed-by"));
	assert_string_equal(dt_str(d, "/metadata/labels/app"), "t");
	assert_int_equal(json_object_size(dt_get(d, "/metadata/annotations")), 1);
	assert_string_equal(dt_str(d, "/metadata/annotations/team.example.com~1owner"), "ml");
	assert_int_equal(ds_sanitize(ns), 0);
	assert_null(dt_get(ns, "/metadata/annotations"));
	assert_string_equal(dt_str(ns, "/metadata/labels/app.kubernetes.io~1managed-by"), "helm");
	json_decref(d);
	json_decref(ns);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sanitize__server_metadata_and_status),
	    cmocka_unit_test(test_sanitize__service_ips_and_node_ports),
	    cmocka_unit_test(test_sanitize__pvc_binding),
	    cmocka_unit_test(test_sanitize__quota_and_limits),
	    cmocka_unit_test(test_sanitize__job_generated_selector_and_uid_labels),
	    cmocka_unit_test(test_sanitize__resource_claim_allocation_and_finalizer),
	    cmocka_unit_test(test_sanitize__podgroup_status_and_finalizer),
	    cmocka_unit_test(test_sanitize__namespace_admin_access_grant),
	    cmocka_unit_test(test_sanitize__drasync_marks_never_travel),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
