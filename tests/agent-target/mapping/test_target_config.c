/* TargetConfig loading: defaults, the seed example, and located errors for bad files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/target_config.h"
#include "dstest.h"
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_target_config__full_example_loads(void **state)
{
	ds_target_config *cfg =
	    dt_config("apiVersion: drasync.io/v1alpha1\n"
		      "kind: TargetConfig\n"
		      "listen: tcp://0.0.0.0:7450\n"
		      "keys:\n"
		      "  secretKeyFile: /etc/drasync/keys/target.key\n"
		      "  authorizedSources: /etc/drasync/keys/authorized_sources\n"
		      "kubeconfig: \"\"\n"
		      "stateDir: /var/lib/drasync\n"
		      "mode: migrate\n"
		      "namespaceMappings: {ml-team: ml-team-dr}\n"
		      "dra:\n"
		      "  resourceClaimMappings:\n"
		      "    - {objectType: Pod, objectInstance: test-pod1, container: "
		      "gpu-container, resourceClaim: gpu-rc-claim1}\n"
		      "  resourceClaimTemplateMappings:\n"
		      "    - {objectType: All, objectInstance: ALL, container: ALL, source: gpu, "
		      "resourceClaimTemplate: gpu-rct2, attach: true,\n"
		      "       extendedResources: [nvidia.com/gpu]}\n"
		      "  deviceClassMappings:\n"
		      "    - {from: gpu.nvidia.com, to: gpu.example.com}\n"
		      "  requireTargetObjects: false\n"
		      "  replicateDeviceClasses: true\n"
		      "metrics: {listen: \"127.0.0.1:9450\"}\n");
	const ds_dra_config *d = ds_target_config_dra(cfg);

	(void)state;
	assert_int_equal(ds_target_config_mode(cfg), DS_MODE_MIGRATE);
	assert_string_equal(ds_target_config_listen(cfg), "tcp://0.0.0.0:7450");
	assert_string_equal(ds_target_config_secret_key_file(cfg), "/etc/drasync/keys/target.key");
	assert_string_equal(ds_target_config_authorized_sources(cfg),
			    "/etc/drasync/keys/authorized_sources");
	assert_string_equal(ds_target_config_state_dir(cfg), "/var/lib/drasync");
	assert_string_equal(ds_target_config_metrics_listen(cfg), "127.0.0.1:9450");
	assert_string_equal(ds_target_config_map_namespace(cfg, "ml-team"), "ml-team-dr");
	assert_string_equal(ds_target_config_map_namespace(cfg, "other"), "other");
	assert_int_equal(d->n_rules, 2);
	assert_int_equal(d->rules[0].object_type, 0 /* Pod */);
	assert_string_equal(d->rules[0].instance, "test-pod1");
	assert_string_equal(d->rules[0].container, "gpu-container");
	assert_null(d->rules[0].source);
	assert_int_equal(d->rules[0].target_kind, DS_TARGET_CLAIM);
	assert_string_equal(d->rules[0].target, "gpu-rc-claim1");
	assert_int_equal(d->rules[0].line, 13);
	assert_int_equal(d->rules[1].object_type, -1);
	assert_null(d->rules[1].instance);
	assert_null(d->rules[1].container);
	assert_string_equal(d->rules[1].source, "gpu");
	assert_int_equal(d->rules[1].target_kind, DS_TARGET_TEMPLATE);
	assert_true(d->rules[1].attach);
	assert_int_equal(d->rules[1].n_extended_resources, 1);
	assert_string_equal(d->rules[1].extended_resources[0], "nvidia.com/gpu");
	assert_null(d->rules[1].extended_resources[1]);
	assert_int_equal(d->n_device_classes, 1);
	assert_string_equal(d->device_classes[0].to, "gpu.example.com");
	assert_false(d->require_target_objects);
	assert_true(d->replicate_device_classes);
	ds_target_config_free(cfg);
}

static void test_target_config__defaults(void **state)
{
	ds_target_config *cfg = dt_config("kind: TargetConfig\n");

	(void)state;
	/* A DR tool must not start workloads unless told to: standby by default. */
	assert_int_equal(ds_target_config_mode(cfg), DS_MODE_STANDBY);
	assert_true(ds_target_config_dra(cfg)->require_target_objects);
	assert_false(ds_target_config_dra(cfg)->replicate_device_classes);
	assert_int_equal(ds_target_config_dra(cfg)->n_rules, 0);
	assert_null(ds_target_config_identity_namespace(cfg));
	ds_target_config_free(cfg);
	cfg = dt_config("kind: TargetConfig\nidentity: {namespace: dr-ops}\n");
	assert_string_equal(ds_target_config_identity_namespace(cfg), "dr-ops");
	ds_target_config_free(cfg);
}

/* Each bad file: the message, and the exact line and column it points at. */
static const struct tu_bad_config bad[] = {
    {"unknown top-level key", "kind: TargetConfig\nmdoe: standby\n", 2, 1,
     "mdoe: unknown key (did you mean 'mode'?)"},
    {"unknown rule key",
     "dra:\n  resourceClaimMappings:\n  - objectType: Pod\n    objecInstance: a\n", 4, 5,
     "dra.resourceClaimMappings[0].objecInstance: unknown key (did you mean 'objectInstance'?)"},
    {"unknown dra key", "dra:\n  resourceClaimMapping: []\n", 2, 3,
     "dra.resourceClaimMapping: unknown key (did you mean 'resourceClaimMappings'?)"},
    {"unknown objectType",
     "dra:\n  resourceClaimMappings:\n  - {objectType: Deploymnet, objectInstance: a, container: "
     "ALL, resourceClaim: x}\n",
     3, 18, "unknown objectType 'Deploymnet'"},
    {"a PodGroup rule naming a container",
     "dra:\n  resourceClaimTemplateMappings:\n  - {objectType: PodGroup, objectInstance: g, "
     "container: ctr, resourceClaimTemplate: x}\n",
     3, 58, "a PodGroup has no containers: a rule for one says container: ALL"},
    {"allowFieldLoss not a list", "dra:\n  allowFieldLoss: spec.x\n", 2, 19, "allowFieldLoss"},
    {"allowFieldLoss entry not a path", "dra:\n  allowFieldLoss:\n  - spec.x\n  - 'spec..y'\n", 4,
     5, "'spec..y' is not a field path"},
    {"allowFieldLoss entry not a string", "dra:\n  allowFieldLoss:\n  - {a: b}\n", 3, 5,
     "expected a field path"},
    {"both targets",
     "dra:\n  resourceClaimMappings:\n  - {objectType: Pod, objectInstance: a, container: ALL, "
     "resourceClaim: x, resourceClaimTemplate: tmpl}\n",
     3, 5, "both resourceClaim and resourceClaimTemplate are set"},
    {"no target",
     "dra:\n  resourceClaimTemplateMappings:\n  - {objectType: Pod, objectInstance: a, container: "
     "ALL}\n",
     3, 5,
     "dra.resourceClaimTemplateMappings[0]: no target: set resourceClaim or resourceClaimTemplate"},
    {"invalid instance name",
     "dra:\n  resourceClaimMappings:\n  - {objectType: Pod, objectInstance: My_Pod, container: "
     "ALL, resourceClaim: x}\n",
     3, 39, "'My_Pod' is not a valid object name"},
    {"invalid container name",
     "dra:\n  resourceClaimMappings:\n  - {objectType: Pod, objectInstance: a, container: gpu.ctr, "
     "resourceClaim: x}\n",
     3, 53, "'gpu.ctr' is not a valid container name"},
    {"invalid target name",
     "dra:\n  resourceClaimMappings:\n  - {objectType: Pod, objectInstance: a, container: ALL, "
     "resourceClaim: -bad}\n",
     3, 73, "'-bad' is not a valid object name"},
    {"identical selectors, different targets",
     "dra:\n  resourceClaimMappings:\n"
     "  - {objectType: Pod, objectInstance: a, container: ALL, resourceClaim: x}\n"
     "  - {objectType: Pod, objectInstance: a, container: ALL, resourceClaim: z}\n",
     4, 5, "same selectors as dra.resourceClaimMappings[0] (line 3) but a different target"},
    {"missing objectType",
     "dra:\n  resourceClaimMappings:\n  - {objectInstance: a, container: ALL, resourceClaim: x}\n",
     3, 5, "missing 'objectType'"},
    {"missing container",
     "dra:\n  resourceClaimMappings:\n  - {objectType: Pod, objectInstance: a, resourceClaim: x}\n",
     3, 5, "missing 'container'"},
    {"rule not a mapping", "dra:\n  resourceClaimMappings:\n  - Pod a ALL x\n", 3, 5,
     "dra.resourceClaimMappings[0]: expected a mapping"},
    {"wrong type for attach",
     "dra:\n  resourceClaimMappings:\n  - {objectType: Pod, objectInstance: a, container: ALL, "
     "resourceClaim: x, attach: maybe}\n",
     3, 84, "attach: expected a boolean, found a string"},
    {"extendedResources without attach",
     "dra:\n  resourceClaimMappings:\n  - {objectType: Pod, objectInstance: a, container: ALL, "
     "resourceClaim: x, extendedResources: [nvidia.com/gpu]}\n",
     3, 76, "extendedResources needs attach: true"},
    {"unknown mode", "mode: active\n", 1, 7, "unknown mode 'active' (expected migrate or standby)"},
    {"wrong kind", "kind: SourceConfig\n", 1, 7, "this is a 'SourceConfig'"},
    {"wrong apiVersion", "apiVersion: drasync.io/v2\n", 1, 13,
     "unsupported apiVersion 'drasync.io/v2'"},
    {"device class mapped twice",
     "dra:\n  deviceClassMappings:\n  - {from: a.com, to: b.com}\n  - {from: a.com, to: c.com}\n",
     4, 5, "DeviceClass 'a.com' is already mapped to 'b.com'"},
    {"device class missing to", "dra:\n  deviceClassMappings:\n  - {from: a.com}\n", 3, 5,
     "missing 'to'"},
    {"bad namespace mapping", "namespaceMappings: {ml-team: ML_DR}\n", 1, 30,
     "namespaceMappings.ml-team: expected a target namespace name"},
    {"dra not a mapping", "dra: [1, 2]\n", 1, 6, "dra: expected a mapping, found a list"},
    {"backlog bound zero", "maxUnappliedRecords: 0\n", 1, 22,
     "maxUnappliedRecords must be at least 1"},
    {"backlog bound not a number", "maxUnappliedRecords: lots\n", 1, 22, "maxUnappliedRecords"},
    {"two documents", "kind: TargetConfig\n---\nkind: TargetConfig\n", 0, 0,
     "expected one TargetConfig document, found 2"},
    {"YAML syntax error", "dra:\n  resourceClaimMappings: [\n", 3, 1, ""},
    {"source without a name", "sources:\n- {namespaces: [a]}\n", 2, 3,
     "sources[0]: missing 'name'"},
    {"source listed twice",
     "sources:\n- {name: a, namespaces: [x]}\n- {name: a, namespaces: [y]}\n", 3, 10,
     "source 'a' is listed twice (first at sources[0])"},
    {"source without namespaces", "sources:\n- {name: a}\n", 2, 3, "missing 'namespaces'"},
    {"bad glob", "sources:\n- {name: a, namespaces: [ml-team, 'ml-[x']}\n", 2, 35,
     "sources[0].namespaces[1]: expected a namespace name or a glob of one"},
    {"upper-case namespace", "sources:\n- {name: a, namespaces: [ML]}\n", 2, 26,
     "expected a namespace name or a glob of one"},
    {"unknown level", "sources:\n- {name: a, namespaces: [x], podSecurity: strict}\n", 2, 43,
     "unknown podSecurity 'strict' (expected privileged, baseline or restricted)"},
    {"relocate not a boolean", "sources:\n- {name: a, namespaces: [x], relocate: yes please}\n", 2,
     40, "relocate: expected a boolean"},
    {"unknown key in a source", "sources:\n- {name: a, namespaces: [x], podsecurity: baseline}\n",
     2, 30, "podsecurity"},
    {"sources not a list", "sources: {name: a}\n", 1, 10, "sources: expected a list"},
    {"adoptExisting not a boolean", "adoptExisting: sometimes\n", 1, 16,
     "adoptExisting: expected a boolean"},
    {"link not a mapping", "link: 5s\n", 1, 7, "link: expected a mapping"},
    {"unknown link key", "link: {handshakeTimout: 5s}\n", 1, 8, "handshakeTimout"},
    {"handshake timeout without a unit", "link: {handshakeTimeout: 5}\n", 1, 26,
     "link.handshakeTimeout: a number needs a unit"},
    {"handshake timeout with a bad unit", "link: {handshakeTimeout: 5sec}\n", 1, 27,
     "link.handshakeTimeout: "},
    {"handshake timeout too short", "link: {handshakeTimeout: 50ms}\n", 1, 26,
     "link.handshakeTimeout: 50ms is out of bounds (100ms to 5m, default 5s)"},
    {"handshake timeout too long", "link: {handshakeTimeout: 1h}\n", 1, 26, "out of bounds"},
    {"frame limit too small", "link:\n  maxFrameBytes: 1000\n", 2, 18,
     "link.maxFrameBytes: 1000 is out of bounds (65536 to 134217728, default 8388608)"},
    {"frame limit not a number", "link:\n  maxFrameBytes: 8MiB\n", 2, 18,
     "link.maxFrameBytes: expected an integer"},
    {"no unauthenticated connection", "link: {maxUnauthenticated: 0}\n", 1, 28,
     "link.maxUnauthenticated: 0 is out of bounds (1 to 1024, default 64)"},
    {"too many unauthenticated connections", "link: {maxUnauthenticated: 5000}\n", 1, 28,
     "out of bounds (1 to 1024"},
    {"per address above the total",
     "link:\n  maxUnauthenticated: 4\n  maxUnauthenticatedPerAddress: 5\n", 3, 33,
     "link.maxUnauthenticatedPerAddress: maxUnauthenticatedPerAddress (5) must not exceed "
     "maxUnauthenticated (4)"},
    {"per address above the default total", "link: {maxUnauthenticatedPerAddress: 65}\n", 1, 38,
     "must not exceed maxUnauthenticated (64)"},
    {"api server not a mapping", "apiServer: 64\n", 1, 12, "apiServer: expected a mapping"},
    {"unknown api server key", "apiServer: {maxInflight: 64}\n", 1, 13, "maxInflight"},
    {"no request in flight", "apiServer:\n  maxInFlight: 0\n", 2, 16,
     "apiServer.maxInFlight: 0 is out of bounds (" DS_TARGET_API_IN_FLIGHT_BOUNDS ")"},
    {"too many requests in flight", "apiServer: {maxInFlight: 4096}\n", 1, 26,
     "apiServer.maxInFlight: 4096 is out of bounds"},
    {"refusal window too short", "link: {refusalLogWindow: 10ms}\n", 1, 26,
     "link.refusalLogWindow: 10ms is out of bounds (1s to 1h, default 1m)"},
    {"bytes with an unknown suffix",
     "sources:\n- {name: a, namespaces: [x], maxLedgerBytes: 2GB}\n", 2, 47,
     "sources[0].maxLedgerBytes: expected a byte quantity"},
    {"bytes negative", "limits:\n  sourceMaxLedgerBytes: -1\n", 2, 25,
     "expected a byte quantity (like 2Gi, or 0: unlimited), found a negative integer"},
    {"bytes not a quantity", "limits: {sourceMaxLedgerBytes: lots}\n", 1, 32,
     "expected a byte quantity"},
    {"bytes too large", "limits: {sourceMaxLedgerBytes: 99999999999Ti}\n", 1, 32, "too large"},
    {"source backlog zero", "sources:\n- {name: a, namespaces: [x], maxUnappliedRecords: 0}\n", 2,
     51, "sources[0].maxUnappliedRecords: must be at least 1 (a record count), found 0"},
    {"source backlog not a number",
     "sources:\n- {name: a, namespaces: [x], maxUnappliedRecords: many}\n", 2, 51,
     "maxUnappliedRecords: expected an integer"},
    {"unknown limits key", "limits:\n  maxLedgerBytes: 1Gi\n", 2, 3,
     "limits.maxLedgerBytes: unknown key"},
    {"limits not a mapping", "limits: 5\n", 1, 9, "limits: expected a mapping"},
    {"identity.namespace not a namespace name", "identity:\n  namespace: Drasync_NS\n", 2, 14,
     "identity.namespace 'Drasync_NS' is not a namespace name"},
    {"unknown key in identity", "identity: {namespce: drasync}\n", 1, 12, "namespce"},
};

static void test_target_config__bad_files_are_located(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ds_target_config *cfg = NULL;
		ds_err err = {0};
		int r;

		ds_err_clear(&err);
		r = ds_target_config_parse(&cfg, bad[i].yaml, strlen(bad[i].yaml), "target.yaml",
					   &err);
		tu_assert_bad_config(&bad[i], r, &err, "target.yaml");
		assert_null(cfg);
	}
}

/* link: the defaults when absent, the values when set. */
static void test_target_config__link_limits(void **state)
{
	ds_target_config *cfg = dt_config("mode: migrate\n");
	const ds_target_link *l = ds_target_config_link(cfg);

	(void)state;
	assert_int_equal(l->handshake_timeout_ms, 5000);
	assert_int_equal(l->max_frame_bytes, 8u * 1024 * 1024);
	assert_int_equal(l->max_unauth, 64);
	assert_int_equal(l->max_unauth_per_address, 8);
	assert_int_equal(l->refusal_window_ms, 60000);
	ds_target_config_free(cfg);
	cfg = dt_config("link:\n  handshakeTimeout: 1.5s\n  maxFrameBytes: 1048576\n"
			"  maxUnauthenticated: 16\n  maxUnauthenticatedPerAddress: 16\n"
			"  refusalLogWindow: 2m\n");
	l = ds_target_config_link(cfg);
	assert_int_equal(l->handshake_timeout_ms, 1500);
	assert_int_equal(l->max_frame_bytes, 1048576);
	assert_int_equal(l->max_unauth, 16);
	assert_int_equal(l->max_unauth_per_address, 16);
	assert_int_equal(l->refusal_window_ms, 120000);
	ds_target_config_free(cfg);
}

/* apiServer.maxInFlight: the default when absent, the value when set. */
static void test_target_config__api_server_in_flight(void **state)
{
	ds_target_config *cfg = dt_config("mode: migrate\n");

	(void)state;
	assert_int_equal(ds_target_config_api_max_in_flight(cfg), DS_TARGET_API_IN_FLIGHT_DEFAULT);
	ds_target_config_free(cfg);
	cfg = dt_config("apiServer: {maxInFlight: 32}\n");
	assert_int_equal(ds_target_config_api_max_in_flight(cfg), 32);
	ds_target_config_free(cfg);
}

/* The quotas: each source's own, else the limits: defaults, else the ceiling and unlimited. */
static void test_target_config__source_quotas(void **state)
{
	ds_target_config *cfg = dt_config("maxUnappliedRecords: 5000\n"
					  "limits: {sourceMaxLedgerBytes: 4Gi}\n"
					  "sources:\n"
					  "- {name: noisy, namespaces: [a], maxUnappliedRecords: "
					  "200, maxLedgerBytes: \"512Mi\"}\n"
					  "- {name: dec, namespaces: [b], maxLedgerBytes: 3G}\n"
					  "- {name: raw, namespaces: [c], maxLedgerBytes: 1000}\n"
					  "- {name: free, namespaces: [d], maxLedgerBytes: 0}\n"
					  "- {name: plain, namespaces: [e]}\n");
	ds_target_config *dflt = dt_config("limits: {sourceMaxUnappliedRecords: 300}\n");
	ds_target_config *none = dt_config("kind: TargetConfig\n");
	uint64_t n = 0, b = 0;

	(void)state;
	ds_target_config_source_limits(cfg, "noisy", &n, &b);
	assert_int_equal(n, 200);
	assert_int_equal(b, 512ull << 20);
	ds_target_config_source_limits(cfg, "dec", &n, &b);
	assert_int_equal(n, 5000); /* the ceiling's value */
	assert_int_equal(b, 3000000000ull);
	ds_target_config_source_limits(cfg, "raw", &n, &b);
	assert_int_equal(b, 1000);
	ds_target_config_source_limits(cfg, "free", &n, &b);
	assert_int_equal(b, 0); /* unlimited, over the 4Gi default */
	ds_target_config_source_limits(cfg, "plain", &n, &b);
	assert_int_equal(n, 5000);
	assert_int_equal(b, 4ull << 30);
	ds_target_config_source_limits(cfg, "not-listed", &n, &b);
	assert_int_equal(b, 4ull << 30);
	ds_target_config_source_limits(dflt, "x", &n, &b);
	assert_int_equal(n, 300);
	assert_int_equal(b, 0);
	assert_int_equal(ds_target_config_max_unapplied(dflt), 100000);
	ds_target_config_source_limits(none, "x", &n, &b);
	assert_int_equal(n, 100000);
	assert_int_equal(b, 0);
	ds_target_config_free(cfg);
	ds_target_config_free(dflt);
	ds_target_config_free(none);
}

/* The seed lists share selectors across kinds: that is allowed. */
static void test_target_config__identical_selectors_across_kinds_allowed(void **state)
{
	ds_target_config *cfg = dt_config(
	    "dra:\n  resourceClaimMappings:\n"
	    "  - {objectType: Pod, objectInstance: ALL, container: ALL, resourceClaim: claim-x}\n"
	    "  resourceClaimTemplateMappings:\n"
	    "  - {objectType: Pod, objectInstance: ALL, container: ALL, resourceClaimTemplate: "
	    "template-y}\n");

	(void)state;
	assert_int_equal(ds_target_config_dra(cfg)->n_rules, 2);
	ds_target_config_free(cfg);
}

/* The example shipped in deploy/ stays valid. */
static void test_target_config__shipped_example_loads(void **state)
{
	char path[1024];
	ds_target_config *cfg = NULL;
	ds_err err = {0};

	(void)state;
	snprintf(path, sizeof(path), "%s/../../deploy/target.yaml", tu_env("DS_RESOURCES"));
	ds_err_clear(&err);
	assert_int_equal(ds_target_config_load(&cfg, path, &err), 0);
	assert_int_equal(ds_target_config_dra(cfg)->n_rules, 5);
	assert_int_equal(ds_target_config_mode(cfg), DS_MODE_STANDBY);
	ds_target_config_free(cfg);
}

static void test_target_config__missing_file(void **state)
{
	ds_target_config *cfg = NULL;
	ds_err err = {0};

	(void)state;
	ds_err_clear(&err);
	assert_true(ds_target_config_load(&cfg, "/nonexistent/target.yaml", &err) < 0);
	assert_non_null(strstr(err.file, "/nonexistent/target.yaml"));
	assert_null(cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_target_config__full_example_loads),
	    cmocka_unit_test(test_target_config__defaults),
	    cmocka_unit_test(test_target_config__bad_files_are_located),
	    cmocka_unit_test(test_target_config__source_quotas),
	    cmocka_unit_test(test_target_config__identical_selectors_across_kinds_allowed),
	    cmocka_unit_test(test_target_config__shipped_example_loads),
	    cmocka_unit_test(test_target_config__link_limits),
	    cmocka_unit_test(test_target_config__api_server_in_flight),
	    cmocka_unit_test(test_target_config__missing_file),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
