/* The Pod Security Standards checker, on upstream's fixtures and on each workload kind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "drasync/pod_security.h"
#include "drasync/yaml.h"
#include "dstest.h"
#include "testutil.h"

#include <dirent.h>
#include <stdbool.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- upstream's fixtures: <level>/v1.<minor>/{pass,fail}/<check><n>.yaml ---- */

struct tally {
	unsigned pass, fail; /* cases run */
	unsigned latest;     /* of those, v1.DS_PSS_VERSION_LATEST cases run again as "latest" */
	unsigned wrong;	     /* cases whose verdict is not upstream's */
	unsigned versions;   /* version folders seen */
	int max_minor;
};

/*
 * What the sentences of a fixture's violation say, by upstream's check (the
 * fixture's name, less its number): a fail case must fail for its own check,
 * not by chance for another. (Not for it alone: a few of upstream's cases
 * break two rules, as a privileged container that cannot also forbid privilege
 * escalation, or a hostProcess pod that needs hostNetwork.)
 */
static const struct {
	const char *check;
	const char *const said[4];
} said_by[] = {
    {"allowprivilegeescalation", {"allowPrivilegeEscalation not false"}},
    {"apparmorprofile", {"AppArmor "}},
    {"capabilities_baseline", {"capability "}},
    {"capabilities_restricted", {"capability ", "capabilities not dropping ALL"}},
    {"hostnamespaces", {"hostNetwork pod", "hostPID pod", "hostIPC pod"}},
    {"hostpathvolumes", {"hostPath volume "}},
    {"hostports", {"hostPort "}},
    {"hostprobesandhostlifecycle",
     {"Probe httpGet host", "Probe tcpSocket host", "Start ", "preStop "}},
    {"privileged", {"privileged container "}},
    {"procmount", {"procMount "}},
    {"procmount_restricted", {"procMount "}},
    {"restrictedvolumes", {" volume "}},
    {"runasnonroot", {"runAsNonRoot"}},
    {"runasuser", {"runAsUser=0 "}},
    {"seccompprofile_baseline", {"seccomp "}},
    {"seccompprofile_restricted", {"seccomp "}},
    {"selinuxoptions", {"SELinux "}},
    {"sysctls", {"sysctl "}},
    {"windowshostprocess", {"hostProcess "}},
};

/* Whether a sentence of why is one the fixture's check says. */
static bool said_by_check(const char *file, const char *why)
{
	char check[64];
	size_t n = strcspn(file, "0123456789");
	const char *const *said = NULL;
	char copy[2048], *save = NULL;

	snprintf(check, sizeof(check), "%.*s", (int)n, file);
	for (size_t i = 0; i < sizeof(said_by) / sizeof(said_by[0]); i++)
		if (strcmp(said_by[i].check, check) == 0)
			said = said_by[i].said;
	if (!said)
		return false;
	snprintf(copy, sizeof(copy), "%s", why);
	for (char *s = strtok_r(copy, ";", &save); s; s = strtok_r(NULL, ";", &save)) {
		for (size_t i = 0; i < 4 && said[i]; i++)
			if (strstr(s, said[i]))
				return true;
	}
	return false;
}

static json_t *load_pod(const char *path)
{
	ds_err err = {0};
	json_t *docs = NULL, *pod;

	if (ds_yaml_parse_file(path, 0, &docs, NULL, &err) != 0) {
		print_error("%s: %s\n", path, err.msg);
		fail();
	}
	assert_int_equal(json_array_size(docs), 1);
	pod = json_incref(json_array_get(docs, 0));
	json_decref(docs);
	assert_string_equal(json_string_value(json_object_get(pod, "kind")), "Pod");
	return pod;
}

static void run_case(struct tally *t, const char *path, enum ds_pss_level level, int minor,
		     bool want_fail)
{
	json_t *pod = load_pod(path);
	json_t *meta = json_object_get(pod, "metadata"), *spec = json_object_get(pod, "spec");
	char why[2048], tail[64];
	int want = want_fail ? 1 : 0;
	int r = ds_pss_check_pod_version(meta, spec, level, minor, why, sizeof(why));

	if (r != want) {
		print_error("%s: got %d, upstream says %s (%s)\n", path, r,
			    want_fail ? "fail" : "pass", why);
		t->wrong++;
	}
	/* on a fail, the message names the level */
	snprintf(tail, sizeof(tail), " violates podSecurity %s", ds_pss_level_name(level));
	if (r == 1 && !strstr(why, tail)) {
		print_error("%s: message '%s'\n", path, why);
		t->wrong++;
	}
	if (r == 1 && want_fail && !said_by_check(strrchr(path, '/') + 1, why)) {
		print_error("%s: fails for another check: '%s'\n", path, why);
		t->wrong++;
	}
	if (minor == DS_PSS_VERSION_LATEST) {
		/* "latest" is exactly the newest version, for a Pod object as for its spec */
		if (ds_pss_check_pod(meta, spec, level, why, sizeof(why)) != want ||
		    ds_pss_check_object(pod, level, why, sizeof(why)) != want) {
			print_error("%s: latest disagrees with v1.%d\n", path, minor);
			t->wrong++;
		}
		t->latest++;
	}
	/* privileged allows every one of them */
	if (ds_pss_check_pod_version(meta, spec, DS_PSS_PRIVILEGED, minor, why, sizeof(why)) != 0) {
		print_error("%s: privileged refused it\n", path);
		t->wrong++;
	}
	if (want_fail)
		t->fail++;
	else
		t->pass++;
	json_decref(pod);
}

static void run_dir(struct tally *t, const char *dir, enum ds_pss_level level, int minor,
		    bool want_fail)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char path[1024];

	if (!d)
		return; /* a version may have no pass or no fail cases */
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);

		if (n < 6 || strcmp(e->d_name + n - 5, ".yaml") != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		run_case(t, path, level, minor, want_fail);
	}
	closedir(d);
}

static void run_level(struct tally *t, enum ds_pss_level level)
{
	char dir[512], sub[1024];
	DIR *d;
	struct dirent *e;

	snprintf(dir, sizeof(dir), "%s/pss/%s", tu_env("DS_RESOURCES"), ds_pss_level_name(level));
	d = opendir(dir);
	assert_non_null(d);
	t->max_minor = -1;
	while ((e = readdir(d))) {
		int minor;
		char tail;

		if (sscanf(e->d_name, "v1.%d%c", &minor, &tail) != 1)
			continue;
		t->versions++;
		if (minor > t->max_minor)
			t->max_minor = minor;
		snprintf(sub, sizeof(sub), "%s/%s/pass", dir, e->d_name);
		run_dir(t, sub, level, minor, false);
		snprintf(sub, sizeof(sub), "%s/%s/fail", dir, e->d_name);
		run_dir(t, sub, level, minor, true);
	}
	closedir(d);
	print_message("podSecurity %s: %u pass and %u fail cases of upstream over %u versions "
		      "(v1.0-v1.%d), %u again as latest; %u wrong\n",
		      ds_pss_level_name(level), t->pass, t->fail, t->versions, t->max_minor,
		      t->latest, t->wrong);
}

/* Every case upstream has at that commit (tests/resources/pss/SOURCE.md), each with upstream's
 * verdict. */
static void run_upstream(enum ds_pss_level level, unsigned pass, unsigned fail)
{
	struct tally t = {0};

	run_level(&t, level);
	assert_int_equal(t.wrong, 0);
	assert_int_equal(t.pass, pass);
	assert_int_equal(t.fail, fail);
	assert_int_equal(t.max_minor, DS_PSS_VERSION_LATEST);
	assert_true(t.latest > 0);
}

static void test_pod_security__upstream_baseline(void **state)
{
	(void)state;
	run_upstream(DS_PSS_BASELINE, 433, 1122);
}

static void test_pod_security__upstream_restricted(void **state)
{
	(void)state;
	run_upstream(DS_PSS_RESTRICTED, 618, 2364);
}

/* ---- messages ---- */

static char why[1024];

static int check_yaml(const char *yaml, enum ds_pss_level level)
{
	json_t *obj = dt_object(yaml);
	int r = ds_pss_check_object(obj, level, why, sizeof(why));

	json_decref(obj);
	return r;
}

/* A pod that meets restricted, with room for one change. */
#define RESTRICTED_POD(extra_spec, extra_sc)                                                       \
	"apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns}\n"                          \
	"spec:\n"                                                                                  \
	"  securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}\n"        \
	"  containers:\n"                                                                          \
	"  - name: c\n"                                                                            \
	"    image: pause\n"                                                                       \
	"    securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: "             \
	"[ALL]}" extra_sc "}\n" extra_spec

static void test_pod_security__messages(void **state)
{
	(void)state;
	assert_int_equal(check_yaml(RESTRICTED_POD("", ""), DS_PSS_RESTRICTED), 0);
	assert_string_equal(why, "");

	assert_int_equal(check_yaml(RESTRICTED_POD("", ", privileged: true"), DS_PSS_BASELINE), 1);
	assert_string_equal(why, "privileged container c violates podSecurity baseline");

	assert_int_equal(
	    check_yaml(RESTRICTED_POD("  volumes:\n  - {name: root, hostPath: {path: /}}\n", ""),
		       DS_PSS_BASELINE),
	    1);
	assert_string_equal(why, "hostPath volume root violates podSecurity baseline");
	/* restricted names it too, through its own list of volume sources */
	assert_int_equal(
	    check_yaml(RESTRICTED_POD("  volumes:\n  - {name: root, hostPath: {path: /}}\n"
				      "  - {name: data, nfs: {server: s, path: /x}}\n"
				      "  - {name: ok, emptyDir: {}}\n",
				      ""),
		       DS_PSS_RESTRICTED),
	    1);
	assert_string_equal(why, "hostPath volume root violates podSecurity restricted; "
				 "nfs volume data violates podSecurity restricted");

	/* several checks: upstream's order (capabilities before hostNamespaces before privileged)
	 */
	assert_int_equal(check_yaml("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n"
				    "  hostPID: true\n  containers:\n  - name: c\n    image: x\n"
				    "    securityContext: {privileged: true, capabilities: {add: "
				    "[NET_RAW, CHOWN]}}\n",
				    DS_PSS_BASELINE),
			 1);
	assert_string_equal(why, "capability NET_RAW added to container c violates podSecurity "
				 "baseline; hostPID pod violates podSecurity baseline; privileged "
				 "container c violates podSecurity baseline");

	/* restricted-only checks pass baseline */
	assert_int_equal(check_yaml("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
				    "spec:\n  containers:\n  - {name: c, image: pause}\n",
				    DS_PSS_BASELINE),
			 0);
	assert_int_equal(check_yaml("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
				    "spec:\n  containers:\n  - {name: c, image: pause}\n",
				    DS_PSS_RESTRICTED),
			 1);
	assert_string_equal(
	    why, "capabilities not dropping ALL in container c violates podSecurity "
		 "restricted; seccomp profile unset on pod and container c violates "
		 "podSecurity restricted; allowPrivilegeEscalation not false in container "
		 "c violates podSecurity restricted; runAsNonRoot unset on pod and "
		 "container c violates podSecurity restricted");

	/* init and ephemeral containers count, and annotations are read */
	assert_int_equal(
	    check_yaml("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  annotations:\n"
		       "    container.apparmor.security.beta.kubernetes.io/c: unconfined\n"
		       "spec:\n  initContainers:\n  - {name: i, image: x, ports: [{containerPort: "
		       "80, hostPort: 8080}]}\n"
		       "  containers:\n  - {name: c, image: x}\n"
		       "  ephemeralContainers:\n  - {name: e, image: x, securityContext: "
		       "{procMount: Unmasked}}\n",
		       DS_PSS_BASELINE),
	    1);
	assert_string_equal(why,
			    "AppArmor annotation "
			    "container.apparmor.security.beta.kubernetes.io/c='unconfined' "
			    "violates podSecurity baseline; hostPort 8080 of container i "
			    "violates podSecurity baseline; procMount 'Unmasked' of container e "
			    "violates podSecurity baseline");
	assert_int_equal(check_yaml(RESTRICTED_POD("", ", privileged: true"), DS_PSS_PRIVILEGED),
			 0);
}

static void test_pod_security__message_truncated(void **state)
{
	json_t *pod = dt_object(RESTRICTED_POD("  hostNetwork: true\n  hostIPC: true\n", ""));
	char small[24];

	(void)state;
	memset(small, 'x', sizeof(small));
	assert_int_equal(ds_pss_check_object(pod, DS_PSS_BASELINE, small, sizeof(small)), 1);
	assert_string_equal(small, "hostNetwork pod violate");
	assert_int_equal(ds_pss_check_object(pod, DS_PSS_BASELINE, NULL, 0), 1);
	json_decref(pod);
}

static void test_pod_security__versions(void **state)
{
	json_t *pod =
	    dt_object(RESTRICTED_POD("", "")); /* restricted at every version; add to it below */
	json_t *spec = json_object_get(pod, "spec");
	json_t *sysctls = json_pack("[{s:s, s:s}]", "name", "net.ipv4.tcp_rmem", "value", "4096");

	(void)state;
	json_object_set_new(json_object_get(spec, "securityContext"), "sysctls", sysctls);
	/* tcp_rmem is safe from 1.32 on */
	assert_int_equal(
	    ds_pss_check_pod_version(NULL, spec, DS_PSS_BASELINE, 31, why, sizeof(why)), 1);
	assert_string_equal(why, "sysctl net.ipv4.tcp_rmem violates podSecurity baseline");
	assert_int_equal(
	    ds_pss_check_pod_version(NULL, spec, DS_PSS_BASELINE, 32, why, sizeof(why)), 0);
	/* tcp_notsent_lowat from 1.37 (upstream's fixtures do not try it at 1.36) */
	json_object_set_new(json_array_get(sysctls, 0), "name",
			    json_string("net.ipv4.tcp_notsent_lowat"));
	assert_int_equal(
	    ds_pss_check_pod_version(NULL, spec, DS_PSS_BASELINE, 36, why, sizeof(why)), 1);
	assert_int_equal(
	    ds_pss_check_pod_version(NULL, spec, DS_PSS_BASELINE, 37, why, sizeof(why)), 0);
	/* negative and future versions are the latest */
	assert_int_equal(
	    ds_pss_check_pod_version(NULL, spec, DS_PSS_BASELINE, -1, why, sizeof(why)), 0);
	assert_int_equal(
	    ds_pss_check_pod_version(NULL, spec, DS_PSS_BASELINE, 99, why, sizeof(why)), 0);
	assert_int_equal(
	    ds_pss_check_pod_version(NULL, sysctls, DS_PSS_BASELINE, 1, why, sizeof(why)), -EINVAL);
	json_decref(pod);
}

/* Values of the wrong type (the API server would not decode them) count against the pod. */
static void test_pod_security__wrong_types(void **state)
{
	(void)state;
	assert_int_equal(check_yaml("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n"
				    "  containers:\n  - name: c\n    image: x\n"
				    "    ports: [{containerPort: 80, hostPort: '80'}]\n"
				    "    securityContext: {capabilities: {add: [7]}}\n"
				    "  volumes:\n  - {name: v, hostPath: 1}\n",
				    DS_PSS_BASELINE),
			 1);
	assert_string_equal(why, "capability ? added to container c violates podSecurity baseline; "
				 "hostPath volume v violates podSecurity baseline; hostPort of "
				 "container c violates podSecurity baseline");
	/* null is unset, as the API server reads it */
	assert_int_equal(check_yaml("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n"
				    "  hostNetwork: null\n  securityContext: null\n"
				    "  containers:\n  - {name: c, image: x, securityContext: "
				    "{privileged: null, procMount: null}}\n"
				    "  volumes:\n  - {name: v, hostPath: null}\n",
				    DS_PSS_BASELINE),
			 0);
	/* a null annotation is "": fine for AppArmor, not for the alpha seccomp annotation */
	{
		json_t *pod =
		    dt_object("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  annotations:\n"
			      "    container.apparmor.security.beta.kubernetes.io/c: null\n"
			      "    seccomp.security.alpha.kubernetes.io/pod: null\n"
			      "spec:\n  containers: [{name: c, image: x}]\n");
		json_t *meta = json_object_get(pod, "metadata"),
		       *spec = json_object_get(pod, "spec");

		assert_int_equal(
		    ds_pss_check_pod_version(meta, spec, DS_PSS_BASELINE, 19, why, sizeof(why)), 0);
		assert_int_equal(
		    ds_pss_check_pod_version(meta, spec, DS_PSS_BASELINE, 18, why, sizeof(why)), 1);
		assert_string_equal(why, "seccomp annotation seccomp.security.alpha.kubernetes.io/"
					 "pod='' violates podSecurity baseline");
		json_decref(pod);
	}
	/* only hostUsers: false is a user namespace */
	assert_int_equal(check_yaml(RESTRICTED_POD("  hostUsers: 'false'\n",
						   ", runAsUser: 0, runAsNonRoot: false"),
				    DS_PSS_RESTRICTED),
			 1);
	assert_string_equal(why, "runAsNonRoot=false container c violates podSecurity restricted; "
				 "runAsUser=0 container c violates podSecurity restricted");
	assert_int_equal(check_yaml(RESTRICTED_POD("  hostUsers: false\n",
						   ", runAsUser: 0, runAsNonRoot: false"),
				    DS_PSS_RESTRICTED),
			 0);
}

/* ---- each workload kind ---- */

#define BAD_TEMPLATE                                                                               \
	"    metadata: {labels: {a: b}}\n"                                                         \
	"    spec:\n"                                                                              \
	"      containers:\n"                                                                      \
	"      - {name: c, image: x, securityContext: {privileged: true}}\n"

static void test_pod_security__workload_kinds(void **state)
{
	static const struct {
		const char *head;
		const char *indent_tpl; /* what comes between head and the template */
	} kinds[] = {
	    {"apiVersion: apps/v1\nkind: Deployment\n", "spec:\n  template:\n"},
	    {"apiVersion: apps/v1\nkind: ReplicaSet\n", "spec:\n  template:\n"},
	    {"apiVersion: apps/v1\nkind: StatefulSet\n", "spec:\n  template:\n"},
	    {"apiVersion: apps/v1\nkind: DaemonSet\n", "spec:\n  template:\n"},
	    {"apiVersion: batch/v1\nkind: Job\n", "spec:\n  template:\n"},
	    {"kind: Job\n", "spec:\n  template:\n"}, /* no apiVersion: checked all the same */
	};
	char yaml[1024];

	(void)state;
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		snprintf(yaml, sizeof(yaml),
			 "%smetadata: {name: w, namespace: ns}\n%s" BAD_TEMPLATE, kinds[i].head,
			 kinds[i].indent_tpl);
		assert_int_equal(check_yaml(yaml, DS_PSS_BASELINE), 1);
		assert_string_equal(why, "privileged container c violates podSecurity baseline");
		assert_int_equal(check_yaml(yaml, DS_PSS_PRIVILEGED), 0);
	}
	/* a CronJob's pods are two templates down */
	assert_int_equal(check_yaml("apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: w}\n"
				    "spec:\n  schedule: '* * * * *'\n  jobTemplate:\n    spec:\n"
				    "      template:\n"
				    "        spec:\n          hostNetwork: true\n"
				    "          containers: [{name: c, image: x}]\n",
				    DS_PSS_BASELINE),
			 1);
	assert_string_equal(why, "hostNetwork pod violates podSecurity baseline");
	/* a template's annotations are its pods' */
	assert_int_equal(check_yaml("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: w}\n"
				    "spec:\n  template:\n    metadata:\n      annotations:\n"
				    "        container.apparmor.security.beta.kubernetes.io/c: "
				    "unconfined\n"
				    "    spec:\n      containers: [{name: c, image: x}]\n",
				    DS_PSS_BASELINE),
			 1);
	assert_string_equal(why, "AppArmor annotation "
				 "container.apparmor.security.beta.kubernetes.io/c='unconfined' "
				 "violates podSecurity baseline");
}

static void test_pod_security__kinds_without_pods(void **state)
{
	(void)state;
	/* Workload and PodGroup carry PodGroupTemplates, not pod templates */
	assert_int_equal(check_yaml("apiVersion: scheduling.k8s.io/v1beta1\nkind: Workload\n"
				    "metadata: {name: w}\nspec:\n  podGroupTemplates:\n"
				    "  - {name: g, schedulingPolicy: {gang: {minCount: 2}}}\n",
				    DS_PSS_RESTRICTED),
			 0);
	assert_int_equal(check_yaml("apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\n"
				    "metadata: {name: g}\nspec:\n  schedulingPolicy: {basic: {}}\n",
				    DS_PSS_RESTRICTED),
			 0);
	assert_int_equal(check_yaml("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"
				    "data: {privileged: 'true'}\n",
				    DS_PSS_RESTRICTED),
			 0);
	/* a custom resource named like a workload is not one */
	assert_int_equal(check_yaml("apiVersion: example.com/v1\nkind: Deployment\nmetadata: "
				    "{name: d}\nspec:\n  template:\n" BAD_TEMPLATE,
				    DS_PSS_BASELINE),
			 0);
	/* a workload without a template has no pod to check */
	assert_int_equal(check_yaml("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n"
				    "spec: {replicas: 1}\n",
				    DS_PSS_RESTRICTED),
			 0);
	assert_string_equal(why, "");
}

static void test_pod_security__levels(void **state)
{
	enum ds_pss_level l = DS_PSS_LEVEL_MAX;

	(void)state;
	assert_int_equal(ds_pss_level_parse("restricted", &l), 0);
	assert_int_equal(l, DS_PSS_RESTRICTED);
	assert_int_equal(ds_pss_level_parse("privileged", &l), 0);
	assert_int_equal(l, DS_PSS_PRIVILEGED);
	assert_int_equal(ds_pss_level_parse("Baseline", &l), -EINVAL);
	assert_int_equal(ds_pss_level_parse(NULL, &l), -EINVAL);
	assert_int_equal(l, DS_PSS_PRIVILEGED);
	assert_string_equal(ds_pss_level_name(DS_PSS_BASELINE), "baseline");
	assert_int_equal(
	    check_yaml("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n", DS_PSS_LEVEL_MAX),
	    -EINVAL);
	assert_string_equal(ds_pss_level_name(DS_PSS_LEVEL_MAX), "unknown");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pod_security__upstream_baseline),
	    cmocka_unit_test(test_pod_security__upstream_restricted),
	    cmocka_unit_test(test_pod_security__messages),
	    cmocka_unit_test(test_pod_security__message_truncated),
	    cmocka_unit_test(test_pod_security__versions),
	    cmocka_unit_test(test_pod_security__wrong_types),
	    cmocka_unit_test(test_pod_security__workload_kinds),
	    cmocka_unit_test(test_pod_security__kinds_without_pods),
	    cmocka_unit_test(test_pod_security__levels),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
