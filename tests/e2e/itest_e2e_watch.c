/*
 * The pair as an operator runs it: drasync-target run on the v1beta1 cluster,
 * drasync-source run in watch mode on the v1 cluster, over CURVE ZeroMQ on
 * loopback, each on its ServiceAccount's token bound by the shipped RBAC
 * (tu_e2e.h). What the source holds, the target holds: compared object by
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
#include "tu_e2e.h"
#include "tu_kube.h"
#include "tu_site.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kinds[] = {"v1/ConfigMap", "v1/Secret", "apps/v1/Deployment", NULL};

static tu_pair P; /* disposed by teardown(), after a failure too */

static void test_e2e_watch__the_target_follows_the_source(void **state)
{
	tu_pair *const p = &P;
	const char *ns;

	(void)state;
	tu_pair_init(p, "e2ew", "DS_KUBECONFIG_V1", "DS_KUBECONFIG_V1BETA1", "prod-east",
		     "mode: migrate\n", NULL);
	ns = p->src_ns;
	for (int i = 0; i < 20; i++) {
		tu_kube_create(p->src, tu_kube_doc("apiVersion: v1\nkind: ConfigMap\nmetadata: "
						   "{name: cm-%d, namespace: %s, labels: {n: "
						   "\"%d\"}}\ndata: {i: \"%d\"}\n",
						   i, ns, i, i));
		tu_kube_create(p->src, tu_kube_doc("apiVersion: v1\nkind: Secret\nmetadata: {name: "
						   "s-%d, namespace: %s}\nstringData: {k: v%d}\n",
						   i, ns, i));
	}
	tu_kube_create(p->src, tu_kube_doc("apiVersion: apps/v1\nkind: Deployment\nmetadata: "
					   "{name: web, namespace: %s}\nspec:\n  replicas: 1\n"
					   "  selector: {matchLabels: {app: web}}\n"
					   "  template:\n    metadata: {labels: {app: web}}\n"
					   "    spec: {containers: [{name: web, image: "
					   "registry.k8s.io/pause:3.10}]}\n",
					   ns));
	tu_pair_target_start(p);
	tu_pair_source_start(p, NULL);

	tu_assert_same_objects(p->src, ns, p->dst, p->dst_ns, kinds, 60000);

	/* A change and a delete on the source reach the target. */
	tu_kube_merge(p->src, "v1", "ConfigMap", ns, "cm-3", NULL,
		      "{\"data\":{\"i\":\"changed\"}}");
	tu_kube_delete(p->src, "v1", "Secret", ns, "s-4");
	tu_assert_same_objects(p->src, ns, p->dst, p->dst_ns, kinds, 30000);

	tu_site_source_sigterm(&p->site);
	tu_site_agent_sigterm(&p->site);
}

static int teardown(void **state)
{
	(void)state;
	if (P.src)
		tu_pair_dispose(&P);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_e2e_watch__the_target_follows_the_source, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
