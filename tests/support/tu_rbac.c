#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tu_rbac.h"

#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The names of list (NULL-terminated) joined by spaces into out. */
static void join(const char *const list[], char *out, size_t size)
{
	size_t len = 0;

	out[0] = '\0';
	for (size_t i = 0; list && list[i]; i++) {
		int n = snprintf(out + len, size - len, "%s%s", i ? " " : "", list[i]);

		assert_true(n > 0 && (size_t)n < size - len);
		len += (size_t)n;
	}
}

static const char *script(char *buf, size_t size)
{
	snprintf(buf, size, "%s/tests/e2e/shipped_rbac.sh", tu_env("DS_SOURCE_DIR"));
	return buf;
}

void tu_rbac_install(tu_rbac *r, const char *src_admin, const char *const src_ns[],
		     const char *dst_admin, const char *const dst_ns[])
{
	tu_rbac_install_with(r, 0, src_admin, src_ns, dst_admin, dst_ns);
}

void tu_rbac_install_with(tu_rbac *r, unsigned flags, const char *src_admin,
			  const char *const src_ns[], const char *dst_admin,
			  const char *const dst_ns[])
{
	char path[1100], srcs[600], dsts[600];
	const char *argv[12];
	size_t n = 0;
	struct tu_run run;

	memset(r, 0, sizeof(*r));
	r->dir = tu_mkdtemp("rbac");
	snprintf(r->src_admin, sizeof(r->src_admin), "%s", src_admin);
	snprintf(r->dst_admin, sizeof(r->dst_admin), "%s", dst_admin);
	for (size_t i = 0; dst_ns[i]; i++) {
		assert_true(i < TU_RBAC_MAX_NS);
		snprintf(r->dst_ns[i], sizeof(r->dst_ns[i]), "%s", dst_ns[i]);
		r->n_dst = i + 1;
	}
	join(src_ns, srcs, sizeof(srcs));
	join(dst_ns, dsts, sizeof(dsts));
	argv[n++] = script(path, sizeof(path));
	argv[n++] = "install";
	if (flags & TU_RBAC_SOURCE_CLUSTER_WIDE)
		argv[n++] = "--source-cluster-wide";
	if (flags & TU_RBAC_TARGET_DEVICECLASSES)
		argv[n++] = "--target-deviceclasses";
	argv[n++] = r->dir;
	argv[n++] = src_admin;
	argv[n++] = srcs;
	argv[n++] = dst_admin;
	argv[n++] = dsts;
	argv[n] = NULL;
	tu_run(&run, NULL, argv);
	if (run.status != 0)
		fail_msg("shipped_rbac.sh install exited %d:\n%s%s", run.status, run.out, run.err);
	tu_run_dispose(&run);
	snprintf(r->source_kubeconfig, sizeof(r->source_kubeconfig), "%s/source.kubeconfig",
		 r->dir);
	snprintf(r->target_kubeconfig, sizeof(r->target_kubeconfig), "%s/target.kubeconfig",
		 r->dir);
}

void tu_rbac_remove(tu_rbac *r)
{
	char path[1100], dsts[600];
	const char *list[TU_RBAC_MAX_NS + 1] = {0};
	struct tu_run run;

	if (!r->dir)
		return;
	for (size_t i = 0; i < r->n_dst; i++)
		list[i] = r->dst_ns[i];
	join(list, dsts, sizeof(dsts));
	tu_run(&run, NULL,
	       (const char *[]){script(path, sizeof(path)), "remove", r->src_admin, r->dst_admin,
				dsts, NULL});
	if (run.status != 0)
		fail_msg("shipped_rbac.sh remove exited %d:\n%s%s", run.status, run.out, run.err);
	tu_run_dispose(&run);
	free(r->dir);
	r->dir = NULL;
}
