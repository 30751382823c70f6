#include "drasync/pod_security.h"

#include "drasync/k8s_object.h"
#include "drasync/string_table.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/*
 * The facts are those of upstream's pod-security-admission (policy/check_*.go):
 * which fields each check reads, the values it allows and the version each
 * rule took effect. The checks run in upstream's order (the baseline ones,
 * then the restricted ones, each by upstream's check ID), so the first
 * violation named is the one upstream names first; within a check the pod
 * comes before its containers, and containers go init, regular, ephemeral.
 * Unlike upstream, each violation is one sentence of its own
 * ("<check> <what> violates podSecurity <level>"), so a reader sees which
 * container did what without parsing lists.
 */

/* One pod being checked, and the violations found so far. */
struct pod {
	const json_t *meta; /* may be NULL */
	const json_t *spec;
	const json_t *sc; /* spec.securityContext, or NULL */
	enum ds_pss_level level;
	int minor;
	bool windows; /* spec.os.name is "windows" */
	bool userns;  /* spec.hostUsers is false: the pod runs in a user namespace */
	bool pod_set; /* for container visitors: the pod-level field covers containers */
	char *why;
	size_t size, len;
	unsigned found;
};

/* Append to why, cut at its size (p->size is 0 without a why). */
static void __attribute__((format(printf, 2, 0))) vput(struct pod *p, const char *fmt, va_list ap)
{
	size_t room = p->size - p->len;
	int n;

	if (room <= 1)
		return;
	n = vsnprintf(p->why + p->len, room, fmt, ap);
	if (n > 0)
		p->len += (size_t)n < room ? (size_t)n : room - 1;
}

static void __attribute__((format(printf, 2, 3))) put(struct pod *p, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vput(p, fmt, ap);
	va_end(ap);
}

/* Record one violation: the sentence's subject from fmt, then the verdict. */
static void __attribute__((format(printf, 2, 3))) add(struct pod *p, const char *fmt, ...)
{
	va_list ap;

	if (p->found++)
		put(p, "; ");
	va_start(ap, fmt);
	vput(p, fmt, ap);
	va_end(ap);
	put(p, " violates podSecurity %s", ds_pss_level_name(p->level));
}

/* Member key when present and not null (JSON null is "unset", as upstream decodes it). */
static const json_t *member(const json_t *obj, const char *key)
{
	const json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;

	return json_is_null(v) ? NULL : v;
}

/* One evaluation of the value (jansson's json_is_* macros name theirs twice). */
static bool is_true(const json_t *v)
{
	return json_is_true(v);
}

static bool is_false(const json_t *v)
{
	return json_is_false(v);
}

static bool is_object(const json_t *v)
{
	return json_is_object(v);
}

/* A string member for messages: its value, "" when unset, "?" when not a string. */
static const char *text(const json_t *v)
{
	if (!v)
		return "";
	return json_is_string(v) ? json_string_value(v) : "?";
}

static bool starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

static bool in_list(const char *s, const char *const *list)
{
	for (; *list; list++)
		if (strcmp(s, *list) == 0)
			return true;
	return false;
}

/* A value allowed from a minor version on. */
struct since {
	const char *name;
	int minor;
};

static bool allowed_at(const json_t *v, const struct since *list, size_t n, int minor)
{
	if (!json_is_string(v))
		return false;
	for (size_t i = 0; i < n; i++)
		if (minor >= list[i].minor && strcmp(json_string_value(v), list[i].name) == 0)
			return true;
	return false;
}

/*
 * An annotation's value as upstream decodes it: null is "" (a map of strings);
 * NULL for any other type, which the API server would refuse.
 */
static const char *annotation_text(const json_t *v)
{
	if (json_is_null(v))
		return "";
	return json_is_string(v) ? json_string_value(v) : NULL;
}

/*
 * The profile types AppArmor (appArmorProfile) and seccomp (seccompProfile,
 * from 1.19) allow: RuntimeDefault and Localhost, not Unconfined. A profile
 * without a type has type "", which is not allowed either.
 */
static bool profile_ok(const json_t *profile)
{
	const char *t = text(member(profile, "type"));

	return strcmp(t, "RuntimeDefault") == 0 || strcmp(t, "Localhost") == 0;
}

typedef void (*visit_fn)(struct pod *p, const json_t *c, const char *name);

/* Every container the pod runs: init, regular, then ephemeral (they share the fields checked). */
static void each_container(struct pod *p, visit_fn fn)
{
	static const char *const lists[] = {"initContainers", "containers", "ephemeralContainers"};

	for (size_t i = 0; i < DS_ELEMENTSOF(lists); i++) {
		const json_t *arr = member(p->spec, lists[i]);
		const json_t *c;
		size_t j;

		if (!json_is_array(arr))
			continue;
		json_array_foreach (arr, j, c) {
			const char *name = ds_json_str(c, "name");

			if (json_is_object(c))
				fn(p, c, name ? name : "");
		}
	}
}

static const json_t *csc(const json_t *c)
{
	return member(c, "securityContext");
}

/* ---- baseline ---- */

/*
 * appArmorProfile, 1.0+: the fields as profile_ok(); the beta annotations
 * runtime/default, localhost/... or "".
 */

static void apparmor_container(struct pod *p, const json_t *c, const char *name)
{
	const json_t *profile = member(csc(c), "appArmorProfile");

	if (profile && !profile_ok(profile))
		add(p, "AppArmor profile '%s' of container %s", text(member(profile, "type")),
		    name);
}

static void check_apparmor(struct pod *p)
{
	static const char prefix[] = "container.apparmor.security.beta.kubernetes.io/";
	const json_t *profile = member(p->sc, "appArmorProfile");
	const json_t *annotations = member(p->meta, "annotations");
	const char *key;
	const json_t *v;

	if (profile && !profile_ok(profile))
		add(p, "AppArmor profile '%s' of pod", text(member(profile, "type")));
	each_container(p, apparmor_container);
	if (!json_is_object(annotations))
		return;
	json_object_foreach ((json_t *)annotations, key, v) {
		const char *s = annotation_text(v);

		if (!starts_with(key, prefix))
			continue;
		if (s &&
		    (!s[0] || strcmp(s, "runtime/default") == 0 || starts_with(s, "localhost/")))
			continue;
		add(p, "AppArmor annotation %s='%s'", key, s ? s : "?");
	}
}

/* capabilities_baseline, 1.0+: add only from the runtime's default set. */
static const char *const caps_default[] = {
    "AUDIT_WRITE",	"CHOWN",   "DAC_OVERRIDE", "FOWNER",  "FSETID", "KILL",	      "MKNOD",
    "NET_BIND_SERVICE", "SETFCAP", "SETGID",	   "SETPCAP", "SETUID", "SYS_CHROOT", NULL};

static void caps_baseline_container(struct pod *p, const json_t *c, const char *name)
{
	const json_t *added = member(member(csc(c), "capabilities"), "add");
	const json_t *cap;
	size_t i;

	if (added && !json_is_array(added)) {
		add(p, "capabilities.add of container %s (not a list)", name);
		return;
	}
	json_array_foreach (added, i, cap) {
		if (json_is_string(cap) && in_list(json_string_value(cap), caps_default))
			continue;
		add(p, "capability %s added to container %s", text(cap), name);
	}
}

/* hostNamespaces, 1.0+. */
static void check_host_namespaces(struct pod *p)
{
	static const char *const fields[] = {"hostNetwork", "hostPID", "hostIPC"};

	for (size_t i = 0; i < DS_ELEMENTSOF(fields); i++)
		if (is_true(member(p->spec, fields[i])))
			add(p, "%s pod", fields[i]);
}

/* hostPathVolumes, 1.0+ (at restricted, restrictedVolumes covers it). */
static void check_host_path(struct pod *p)
{
	const json_t *vols = member(p->spec, "volumes");
	const json_t *v;
	size_t i;

	json_array_foreach (vols, i, v) {
		if (member(v, "hostPath"))
			add(p, "hostPath volume %s", text(member(v, "name")));
	}
}

/* hostPorts, 1.0+: any hostPort but 0. */
static void host_ports_container(struct pod *p, const json_t *c, const char *name)
{
	const json_t *ports = member(c, "ports");
	const json_t *port;
	size_t i;

	json_array_foreach (ports, i, port) {
		const json_t *hp = member(port, "hostPort");

		if (!hp || (json_is_number(hp) && json_number_value(hp) == 0))
			continue;
		if (json_is_integer(hp))
			add(p, "hostPort %lld of container %s", (long long)json_integer_value(hp),
			    name);
		else
			add(p, "hostPort of container %s", name);
	}
}

/* hostProbesAndHostLifecycle, 1.34+: no host in httpGet or tcpSocket of probes and handlers. */
static void host_in(struct pod *p, const json_t *handler, const char *what, const char *name)
{
	static const char *const kinds[] = {"httpGet", "tcpSocket"};

	for (size_t i = 0; i < DS_ELEMENTSOF(kinds); i++) {
		const json_t *host = member(member(handler, kinds[i]), "host");

		if (host && !(json_is_string(host) && !json_string_value(host)[0]))
			add(p, "%s %s host '%s' of container %s", what, kinds[i], text(host), name);
	}
}

static void host_probes_container(struct pod *p, const json_t *c, const char *name)
{
	static const char *const probes[] = {"livenessProbe", "readinessProbe", "startupProbe"};
	static const char *const handlers[] = {"postStart", "preStop"};
	const json_t *lifecycle = member(c, "lifecycle");

	for (size_t i = 0; i < DS_ELEMENTSOF(probes); i++)
		host_in(p, member(c, probes[i]), probes[i], name);
	for (size_t i = 0; i < DS_ELEMENTSOF(handlers); i++)
		host_in(p, member(lifecycle, handlers[i]), handlers[i], name);
}

/* privileged, 1.0+. */
static void privileged_container(struct pod *p, const json_t *c, const char *name)
{
	if (is_true(member(csc(c), "privileged")))
		add(p, "privileged container %s", name);
}

/* procMount, 1.0+: Default or unset; from 1.35 baseline allows any in a user namespace. */
static void proc_mount_container(struct pod *p, const json_t *c, const char *name)
{
	const json_t *pm = member(csc(c), "procMount");

	if (pm && strcmp(text(pm), "Default") != 0)
		add(p, "procMount '%s' of container %s", text(pm), name);
}

static void check_proc_mount(struct pod *p)
{
	/* restricted 1.35+ overrides the relaxed baseline check with the strict one */
	if (p->minor >= 35 && p->userns && p->level == DS_PSS_BASELINE)
		return;
	each_container(p, proc_mount_container);
}

/* seLinuxOptions, 1.0+: type from a short list (container_engine_t from 1.31), no user, no role. */
static void selinux(struct pod *p, const json_t *opts, const char *subject, const char *name)
{
	static const struct since types[] = {{"", 0},
					     {"container_t", 0},
					     {"container_init_t", 0},
					     {"container_kvm_t", 0},
					     {"container_engine_t", 31}};
	const json_t *type = member(opts, "type");
	static const char *const others[] = {"user", "role"};

	if (!opts)
		return;
	if (type && !allowed_at(type, types, DS_ELEMENTSOF(types), p->minor))
		add(p, "SELinux type '%s' of %s%s", text(type), subject, name);
	for (size_t i = 0; i < DS_ELEMENTSOF(others); i++) {
		const json_t *v = member(opts, others[i]);

		if (v && !(json_is_string(v) && !json_string_value(v)[0]))
			add(p, "SELinux %s '%s' of %s%s", others[i], text(v), subject, name);
	}
}

static void selinux_container(struct pod *p, const json_t *c, const char *name)
{
	selinux(p, member(csc(c), "seLinuxOptions"), "container ", name);
}

static void check_selinux(struct pod *p)
{
	selinux(p, member(p->sc, "seLinuxOptions"), "pod", "");
	each_container(p, selinux_container);
}

/*
 * seccompProfile_baseline: before 1.19 the alpha annotations (runtime/default,
 * docker/default or localhost/..., when set); from 1.19 the fields, as
 * profile_ok() when set.
 */
static void seccomp_annotation(struct pod *p, const char *key)
{
	const json_t *annotations = member(p->meta, "annotations");
	const json_t *v = json_is_object(annotations) ? json_object_get(annotations, key) : NULL;
	const char *s = annotation_text(v);

	if (!v || (s && (strcmp(s, "runtime/default") == 0 || strcmp(s, "docker/default") == 0 ||
			 starts_with(s, "localhost/"))))
		return;
	add(p, "seccomp annotation %s='%s'", key, s ? s : "?");
}

static void seccomp_annotation_container(struct pod *p, const json_t *c, const char *name)
{
	char key[320];

	(void)c;
	snprintf(key, sizeof(key), "container.seccomp.security.alpha.kubernetes.io/%s", name);
	seccomp_annotation(p, key);
}

static void seccomp_container(struct pod *p, const json_t *c, const char *name)
{
	const json_t *profile = member(csc(c), "seccompProfile");

	if (profile && !profile_ok(profile))
		add(p, "seccomp profile '%s' of container %s", text(member(profile, "type")), name);
}

static void check_seccomp_baseline(struct pod *p)
{
	const json_t *profile = member(p->sc, "seccompProfile");

	if (p->minor < 19) {
		seccomp_annotation(p, "seccomp.security.alpha.kubernetes.io/pod");
		each_container(p, seccomp_annotation_container);
		return;
	}
	if (profile && !profile_ok(profile))
		add(p, "seccomp profile '%s' of pod", text(member(profile, "type")));
	each_container(p, seccomp_container);
}

/* sysctls: the namespaced, isolated ones, a set that grew in 1.27, 1.29, 1.32 and 1.37. */
static const struct since safe_sysctls[] = {
    {"kernel.shm_rmid_forced", 0},
    {"net.ipv4.ip_local_port_range", 0},
    {"net.ipv4.tcp_syncookies", 0},
    {"net.ipv4.ping_group_range", 0},
    {"net.ipv4.ip_unprivileged_port_start", 0},
    {"net.ipv4.ip_local_reserved_ports", 27},
    {"net.ipv4.tcp_keepalive_time", 29},
    {"net.ipv4.tcp_fin_timeout", 29},
    {"net.ipv4.tcp_keepalive_intvl", 29},
    {"net.ipv4.tcp_keepalive_probes", 29},
    {"net.ipv4.tcp_rmem", 32},
    {"net.ipv4.tcp_wmem", 32},
    {"net.ipv4.tcp_slow_start_after_idle", 37},
    {"net.ipv4.tcp_notsent_lowat", 37},
};

static void check_sysctls(struct pod *p)
{
	const json_t *list = member(p->sc, "sysctls");
	const json_t *s;
	size_t i;

	if (list && !json_is_array(list)) {
		add(p, "sysctls of pod (not a list)");
		return;
	}
	json_array_foreach (list, i, s) {
		const json_t *name = member(s, "name");

		if (allowed_at(name, safe_sysctls, DS_ELEMENTSOF(safe_sysctls), p->minor))
			continue;
		add(p, "sysctl %s", text(name));
	}
}

/* windowsHostProcess, 1.0+. */
static void host_process_container(struct pod *p, const json_t *c, const char *name)
{
	if (is_true(member(member(csc(c), "windowsOptions"), "hostProcess")))
		add(p, "hostProcess container %s", name);
}

static void check_host_process(struct pod *p)
{
	if (is_true(member(member(p->sc, "windowsOptions"), "hostProcess")))
		add(p, "hostProcess pod");
	each_container(p, host_process_container);
}

/* ---- restricted ---- */

/* allowPrivilegeEscalation, 1.8+: must be false; Windows pods exempt from 1.25. */
static void escalation_container(struct pod *p, const json_t *c, const char *name)
{
	if (!is_false(member(csc(c), "allowPrivilegeEscalation")))
		add(p, "allowPrivilegeEscalation not false in container %s", name);
}

static void check_escalation(struct pod *p)
{
	if (p->minor < 8 || (p->minor >= 25 && p->windows))
		return;
	each_container(p, escalation_container);
}

/* capabilities_restricted, 1.22+ (replacing the baseline check): drop ALL, add at most
 * NET_BIND_SERVICE. */
static void caps_restricted_container(struct pod *p, const json_t *c, const char *name)
{
	const json_t *caps = member(csc(c), "capabilities");
	const json_t *drop = member(caps, "drop"), *added = member(caps, "add");
	const json_t *cap;
	bool all = false;
	size_t i;

	json_array_foreach (drop, i, cap) {
		if (json_is_string(cap) && strcmp(json_string_value(cap), "ALL") == 0)
			all = true;
	}
	if (!all)
		add(p, "capabilities not dropping ALL in container %s", name);
	if (added && !json_is_array(added)) {
		add(p, "capabilities.add of container %s (not a list)", name);
		return;
	}
	json_array_foreach (added, i, cap) {
		if (!(json_is_string(cap) &&
		      strcmp(json_string_value(cap), "NET_BIND_SERVICE") == 0))
			add(p, "capability %s added to container %s", text(cap), name);
	}
}

static void check_caps(struct pod *p)
{
	if (p->level == DS_PSS_RESTRICTED && p->minor >= 22) {
		if (p->minor < 25 || !p->windows)
			each_container(p, caps_restricted_container);
		return;
	}
	each_container(p, caps_baseline_container);
}

/*
 * restrictedVolumes, 1.0+ (replacing hostPathVolumes): only these inline
 * sources. A volume that names no source is an emptyDir: the API server
 * defaults it so before admission sees it (upstream's fixtures pass it).
 */
static const char *const volumes_allowed[] = {
    "configMap", "csi",	   "downwardAPI", "emptyDir", "ephemeral", "image", "persistentVolumeClaim",
    "projected", "secret", NULL};

static void check_volumes(struct pod *p)
{
	const json_t *vols = member(p->spec, "volumes");
	const json_t *v;
	size_t i;

	json_array_foreach (vols, i, v) {
		const char *key, *type = NULL;
		const json_t *val;
		bool ok = false;

		if (!json_is_object(v)) {
			add(p, "volume %zu (not an object)", i);
			continue;
		}
		json_object_foreach ((json_t *)v, key, val) {
			if (json_is_null(val) || strcmp(key, "name") == 0)
				continue;
			if (in_list(key, volumes_allowed))
				ok = true;
			else if (!type)
				type = key;
		}
		if (!ok && type)
			add(p, "%s volume %s", type ? type : "unknown", text(member(v, "name")));
	}
}

/* runAsNonRoot, 1.0+: true at the pod or at every container; from 1.35 a user namespace is enough.
 */
static void non_root_container(struct pod *p, const json_t *c, const char *name)
{
	const json_t *v = member(csc(c), "runAsNonRoot");

	if (v && !json_is_true(v))
		add(p, "runAsNonRoot=false container %s", name);
	else if (!v && !p->pod_set)
		add(p, "runAsNonRoot unset on pod and container %s", name);
}

static void check_non_root(struct pod *p)
{
	const json_t *v = member(p->sc, "runAsNonRoot");

	if (p->minor >= 35 && p->userns)
		return;
	if (v && !json_is_true(v))
		add(p, "runAsNonRoot=false pod");
	p->pod_set = json_is_true(v);
	each_container(p, non_root_container);
}

/* runAsUser, 1.23+: not 0 at the pod or a container; from 1.35 a user namespace is enough. */
static bool root_user(const json_t *v)
{
	return v && !(json_is_number(v) && json_number_value(v) != 0);
}

static void user_container(struct pod *p, const json_t *c, const char *name)
{
	if (root_user(member(csc(c), "runAsUser")))
		add(p, "runAsUser=0 container %s", name);
}

static void check_user(struct pod *p)
{
	if (p->minor < 23 || (p->minor >= 35 && p->userns))
		return;
	if (root_user(member(p->sc, "runAsUser")))
		add(p, "runAsUser=0 pod");
	each_container(p, user_container);
}

/*
 * seccompProfile_restricted, 1.19+ (replacing the baseline check): RuntimeDefault
 * or Localhost at the pod or at every container; Windows pods exempt from 1.25.
 */
static void seccomp_required_container(struct pod *p, const json_t *c, const char *name)
{
	const json_t *profile = member(csc(c), "seccompProfile");

	if (profile && !profile_ok(profile))
		add(p, "seccomp profile '%s' of container %s", text(member(profile, "type")), name);
	else if (!profile && !p->pod_set)
		add(p, "seccomp profile unset on pod and container %s", name);
}

static void check_seccomp(struct pod *p)
{
	const json_t *profile = member(p->sc, "seccompProfile");

	if (p->level != DS_PSS_RESTRICTED || p->minor < 19) {
		check_seccomp_baseline(p);
		return;
	}
	if (p->minor >= 25 && p->windows)
		return;
	if (profile && !profile_ok(profile))
		add(p, "seccomp profile '%s' of pod", text(member(profile, "type")));
	p->pod_set = profile && profile_ok(profile);
	each_container(p, seccomp_required_container);
}

static void check_volume_sources(struct pod *p)
{
	if (p->level == DS_PSS_RESTRICTED)
		check_volumes(p);
	else
		check_host_path(p);
}

static void check_host_ports(struct pod *p)
{
	each_container(p, host_ports_container);
}

static void check_host_probes(struct pod *p)
{
	if (p->minor >= 34)
		each_container(p, host_probes_container);
}

static void check_privileged(struct pod *p)
{
	each_container(p, privileged_container);
}

/*
 * upstream's order: the baseline check IDs sorted, then the restricted ones;
 * a restricted check that replaces a baseline one (capabilities, volumes,
 * seccomp, procMount) runs in the baseline one's place, which only moves
 * where its sentences come in the message.
 */
static const struct {
	enum ds_pss_level level;
	void (*run)(struct pod *p);
} checks[] = {
    {DS_PSS_BASELINE, check_apparmor},	      /* appArmorProfile */
    {DS_PSS_BASELINE, check_caps},	      /* capabilities_baseline | _restricted */
    {DS_PSS_BASELINE, check_host_namespaces}, /* hostNamespaces */
    {DS_PSS_BASELINE, check_volume_sources},  /* hostPathVolumes | restrictedVolumes */
    {DS_PSS_BASELINE, check_host_ports},      /* hostPorts */
    {DS_PSS_BASELINE, check_host_probes},     /* hostProbesAndHostLifecycle */
    {DS_PSS_BASELINE, check_privileged},      /* privileged */
    {DS_PSS_BASELINE, check_proc_mount},      /* procMount | procMount_restricted */
    {DS_PSS_BASELINE, check_selinux},	      /* seLinuxOptions */
    {DS_PSS_BASELINE, check_seccomp},	      /* seccompProfile_baseline | _restricted */
    {DS_PSS_BASELINE, check_sysctls},	      /* sysctls */
    {DS_PSS_BASELINE, check_host_process},    /* windowsHostProcess */
    {DS_PSS_RESTRICTED, check_escalation},    /* allowPrivilegeEscalation */
    {DS_PSS_RESTRICTED, check_non_root},      /* runAsNonRoot */
    {DS_PSS_RESTRICTED, check_user},	      /* runAsUser */
};

int ds_pss_check_pod_version(const json_t *meta, const json_t *spec, enum ds_pss_level level,
			     int minor, char *why, size_t size)
{
	struct pod p = {0};

	if (!json_is_object(spec) || (unsigned)level >= DS_PSS_LEVEL_MAX)
		return -EINVAL;
	if (why && size)
		why[0] = '\0';
	if (level == DS_PSS_PRIVILEGED)
		return 0;
	p.meta = meta;
	p.spec = spec;
	p.sc = member(spec, "securityContext");
	p.level = level;
	p.minor = minor < 0 || minor > DS_PSS_VERSION_LATEST ? DS_PSS_VERSION_LATEST : minor;
	p.windows = strcmp(text(member(member(spec, "os"), "name")), "windows") == 0;
	p.userns = is_false(member(spec, "hostUsers"));
	p.why = why;
	p.size = why ? size : 0;
	for (size_t i = 0; i < DS_ELEMENTSOF(checks); i++)
		if (checks[i].level <= level)
			checks[i].run(&p);
	return p.found ? 1 : 0;
}

int ds_pss_check_pod(const json_t *meta, const json_t *spec, enum ds_pss_level level, char *why,
		     size_t size)
{
	return ds_pss_check_pod_version(meta, spec, level, DS_PSS_VERSION_LATEST, why, size);
}

/* Where each workload kind keeps its pod template, and the API group that kind is in. */
static const struct {
	const char *kind;
	const char *group;
	const char *tpl; /* "" for the object itself (a Pod) */
} holders[] = {
    {"Pod", "", ""},
    {"Deployment", "apps", "spec.template"},
    {"ReplicaSet", "apps", "spec.template"},
    {"StatefulSet", "apps", "spec.template"},
    {"DaemonSet", "apps", "spec.template"},
    {"Job", "batch", "spec.template"},
    {"CronJob", "batch", "spec.jobTemplate.spec.template"},
};

int ds_pss_check_object(const json_t *obj, enum ds_pss_level level, char *why, size_t size)
{
	const char *kind = ds_obj_kind(obj);
	const json_t *holder;

	if ((unsigned)level >= DS_PSS_LEVEL_MAX)
		return -EINVAL;
	if (why && size)
		why[0] = '\0';
	if (!kind)
		return 0;
	for (size_t i = 0; i < DS_ELEMENTSOF(holders); i++) {
		if (strcmp(kind, holders[i].kind) != 0)
			continue;
		/* a custom resource of that kind name is not a workload; no apiVersion is no proof
		 */
		if (ds_obj_api_version(obj) && !ds_obj_in_group(obj, holders[i].group))
			return 0;
		holder = holders[i].tpl[0] ? ds_json_path(obj, holders[i].tpl) : obj;
		if (!is_object(member(holder, "spec")))
			return 0;
		return ds_pss_check_pod(member(holder, "metadata"), member(holder, "spec"), level,
					why, size);
	}
	return 0;
}
