/*
 * The pair as an operator runs it: drasync-target run on the v1beta1 cluster,
 * drasync-source run in watch mode on the v1 cluster, over CURVE ZeroMQ on
 * loopback. What the source holds, the target holds: compared object by
 * object by the hash of their sanitized content (tu_compare.h), after the
 * first pass, after a change and after a delete.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "testutil.h"
#include "tu_compare.h"
#include "tu_kube.h"
#include "tu_site.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kinds[] = {"v1/ConfigMap", "v1/Secret", "apps/v1/Deployment", NULL};

static void test_e2e_watch__the_target_follows_the_source(void **state)
{
	ds_kube *src = tu_kube_connect(tu_env("DS_KUBECONFIG_V1"));
	ds_kube *dst = tu_kube_connect(tu_env("DS_KUBECONFIG_V1BETA1"));
	char *ns = tu_kube_new_namespace(src, "e2ew", ""), dst_ns[300], *extra;
	tu_site s;

	(void)state;
	snprintf(dst_ns, sizeof(dst_ns), "%s-dr", ns);
	for (int i = 0; i < 20; i++) {
		tu_kube_create(src, tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: "
						"cm-%d, namespace: %s, labels: {n: \"%d\"}}\n"
						"data: {i: \"%d\"}\n",
						i, ns, i, i));
		tu_kube_create(src, tu_kube_doc("apiVersion: v1\nkind: Secret\nmetadata: {name: "
						"s-%d, namespace: %s}\nstringData: {k: v%d}\n",
						i, ns, i));
	}
	tu_kube_create(src, tu_kube_doc("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: "
					"web, namespace: %s}\nspec:\n  replicas: 1\n"
					"  selector: {matchLabels: {app: web}}\n"
					"  template:\n    metadata: {labels: {app: web}}\n"
					"    spec: {containers: [{name: web, image: "
					"registry.k8s.io/pause:3.10}]}\n",
					ns));

	tu_site_init(&s, "e2ew", tu_env("DS_KUBECONFIG_V1BETA1"), "prod-east");
	assert_true(asprintf(&extra, "mode: migrate\nnamespaceMappings: {%s: %s}\n", ns, dst_ns) >
		    0);
	tu_site_write_config(&s, extra);
	free(extra);
	tu_site_agent_start(&s);
	assert_true(asprintf(&extra, "namespaces: [%s]\n", ns) > 0);
	tu_site_write_source_config(&s, extra);
	free(extra);
	tu_site_source_start(&s, tu_env("DS_KUBECONFIG_V1"), NULL);

	tu_assert_same_objects(src, ns, dst, dst_ns, kinds, 60000);

	/* A change and a delete on the source reach the target. */
	tu_kube_merge(src, "v1", "ConfigMap", ns, "cm-3", NULL, "{\"data\":{\"i\":\"changed\"}}");
	tu_kube_delete(src, "v1", "Secret", ns, "s-4");
	tu_assert_same_objects(src, ns, dst, dst_ns, kinds, 30000);

	tu_site_source_sigterm(&s);
	tu_site_agent_sigterm(&s);
	tu_site_dispose(&s);
	tu_kube_drop_namespace(src, ns);
	ds_kube_free(src);
	ds_kube_free(dst);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_e2e_watch__the_target_follows_the_source),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
