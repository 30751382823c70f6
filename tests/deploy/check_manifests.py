#!/usr/bin/env python3
"""Checks a rendering of drasync's manifests (a kubectl List in JSON, from
kubectl kustomize or helm template through kubectl create --dry-run=client
-o json) against what SPEC §10-11 and the packaging promise:

  check_manifests.py source|target LIST.json OUTDIR [--deviceclasses]

source: a ServiceAccount whose only grants are reads: for a fixed list of
up to 8 namespaces only in each of them (a RoleBinding each) and on those
Namespace objects by name, no Secret elsewhere; for a namespaceSelector
cluster-wide; target: one whose
cluster-wide grants are reads, DeviceClass writes only with --deviceclasses,
Namespace access only by name and only to the namespaces it has a
RoleBinding in, those being exactly the namespaces its configuration grants
the sources (SPEC §5: the target namespace, after namespaceMappings, of each
source namespace of sources[].namespaces, a glob standing for the names it
matches; without sources, the targets of namespaceMappings) and their -drill
scratch namespaces, each created by the rendering with the granted
podSecurity as its Pod Security enforce level (the more permissive one where
sources share a namespace), and in its own namespace one Role: get and
update of the ConfigMap drasync-ledger by name, create of ConfigMaps (the
ledger's identity). Both: one Deployment, one replica, Recreate,
/healthz and /readyz probes on the metrics port 9090, the restricted
security context with no fixed UID (OpenShift restricted-v2), the stateDir
on a PersistentVolumeClaim of the same rendering, the configuration from a
ConfigMap of the same rendering (written to OUTDIR/<agent>.yaml for the
agents themselves to parse). The configuration is read as YAML by helm
(DS_HELM_BIN: sigs.k8s.io/yaml, as Kubernetes reads it) for the target's
grant. Exits 1 with every problem found."""
import fnmatch
import json
import os
import re
import subprocess
import sys
import tempfile

READ = {"get", "list", "watch"}
problems = []


def bad(msg):
    problems.append(msg)


def by_kind(items, kind):
    return [o for o in items if o.get("kind") == kind]


def name(o):
    return o["metadata"]["name"]


def yaml_to_json(text):
    """The configuration as JSON, read by helm (a chart whose values are the
    file and whose one template prints them); None when it cannot be read."""
    helm = os.environ.get("DS_HELM_BIN")
    if not helm:
        bad("DS_HELM_BIN is not set: cannot read the configuration as YAML")
        return None
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(f"{d}/c/templates")
        with open(f"{d}/c/Chart.yaml", "w") as f:
            f.write("apiVersion: v2\nname: c\nversion: 0.0.1\n")
        with open(f"{d}/c/templates/out.yaml", "w") as f:
            f.write("{{ toJson .Values }}\n")
        with open(f"{d}/values.yaml", "w") as f:
            f.write(text)
        r = subprocess.run([helm, "template", "c", f"{d}/c", "-f", f"{d}/values.yaml"],
                           capture_output=True, text=True)
    if r.returncode != 0:
        bad(f"the configuration is not YAML helm reads: {r.stderr.strip()}")
        return None
    body = "".join(l for l in r.stdout.splitlines(True) if not l.startswith(("---", "#")))
    return json.loads(body)


RANK = {"restricted": 0, "baseline": 1, "privileged": 2}


def granted(cfg, candidates):
    """SPEC §5: {target namespace: podSecurity} that cfg grants its sources.
    A glob of sources[].namespaces stands for the names among candidates (the
    source namespaces the rendering knows of) it matches."""
    nsm = cfg.get("namespaceMappings") or {}
    out = {}

    def grant(src, level):
        dst = nsm.get(src, src)
        if dst not in out or RANK.get(level, -1) > RANK.get(out[dst], -1):
            out[dst] = level

    if "sources" not in cfg:
        for src in nsm:
            grant(src, "baseline")
        return out
    for i, s in enumerate(cfg.get("sources") or []):
        level = s.get("podSecurity", "baseline")
        if level not in RANK:
            bad(f"sources[{i}].podSecurity {level!r} is not a level")
        for pat in s.get("namespaces") or []:
            if not any(c in pat for c in "*?["):
                grant(pat, level)
                continue
            # glibc's fnmatch takes [^...] as [!...]; Python's would not
            hits = sorted(c for c in candidates if fnmatch.fnmatchcase(c, pat.replace("[^", "[!")))
            if not hits:
                bad(f"sources[{i}].namespaces: the glob {pat!r} stands for no namespace of the rendering")
            for h in hits:
                grant(h, level)
    return out


def check_container(c, where, main):
    sc = c.get("securityContext") or {}
    if sc.get("allowPrivilegeEscalation") is not False:
        bad(f"{where}: allowPrivilegeEscalation is not false")
    if sc.get("readOnlyRootFilesystem") is not True:
        bad(f"{where}: readOnlyRootFilesystem is not true")
    if sc.get("runAsNonRoot") is not True:
        bad(f"{where}: runAsNonRoot is not true")
    if (sc.get("capabilities") or {}).get("drop") != ["ALL"]:
        bad(f"{where}: capabilities.drop is not [ALL]")
    if (sc.get("seccompProfile") or {}).get("type") != "RuntimeDefault":
        bad(f"{where}: seccompProfile is not RuntimeDefault")
    for k in ("runAsUser", "runAsGroup", "privileged"):
        if k in sc:
            bad(f"{where}: securityContext.{k} is set (OpenShift assigns the UID)")
    res = c.get("resources") or {}
    if not (res.get("requests") or {}).get("memory") or not (res.get("limits") or {}).get("memory"):
        bad(f"{where}: no memory request and limit")
    if not main:
        return
    ports = {p.get("name"): p.get("containerPort") for p in c.get("ports", [])}
    if ports.get("metrics") != 9090:
        bad(f"{where}: no port 'metrics' 9090 (ports {ports})")
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        g = (c.get(probe) or {}).get("httpGet") or {}
        if g.get("path") != path or g.get("port") not in ("metrics", 9090):
            bad(f"{where}: {probe} is not GET {path} on the metrics port ({g})")


def main():
    agent, path, outdir = sys.argv[1], sys.argv[2], sys.argv[3]
    deviceclasses = "--deviceclasses" in sys.argv[4:]
    items = json.load(open(path))["items"]
    sas = by_kind(items, "ServiceAccount")
    if len(sas) != 1:
        bad(f"{len(sas)} ServiceAccounts, not 1")
        return
    sa = sas[0]
    sa_ns = sa["metadata"]["namespace"]
    subject = {"kind": "ServiceAccount", "name": name(sa), "namespace": sa_ns}

    def bound(kind):
        return [b for b in by_kind(items, kind) if subject in b.get("subjects", [])]

    roles = {name(r): r for r in by_kind(items, "ClusterRole")}
    cluster_rules = []
    for b in bound("ClusterRoleBinding"):
        r = roles.get(b["roleRef"]["name"])
        if not r:
            bad(f"ClusterRoleBinding {name(b)}: ClusterRole {b['roleRef']['name']} is not in the rendering")
            continue
        cluster_rules += r.get("rules", [])
    ns_bindings = {}
    own_roles = {(r["metadata"].get("namespace"), name(r)): r for r in by_kind(items, "Role")}
    ledger_bound = False
    for b in bound("RoleBinding"):
        where = b["metadata"].get("namespace")
        if b["roleRef"]["kind"] == "Role":
            # the target's one Role: the ledger's identity in its own namespace
            if agent != "target" or where != sa_ns or (where, b["roleRef"]["name"]) not in own_roles:
                bad(f"RoleBinding {where}/{name(b)}: Role {b['roleRef']['name']} is not the target's ledger Role of {sa_ns}")
            else:
                ledger_bound = True
            continue
        r = roles.get(b["roleRef"]["name"]) if b["roleRef"]["kind"] == "ClusterRole" else None
        if not r:
            bad(f"RoleBinding {where}/{name(b)}: role not in the rendering")
            continue
        ns_bindings[where] = r.get("rules", [])
    # A Role only for the ConfigMap drasync-ledger: get/update it by name, create
    # (which cannot be limited by name).
    for (where, rname), r in own_roles.items():
        for rule in r.get("rules", []):
            verbs, names = set(rule.get("verbs", [])), rule.get("resourceNames") or []
            ok = rule.get("apiGroups") == [""] and rule.get("resources") == ["configmaps"] and (
                (names == ["drasync-ledger"] and verbs <= {"get", "update"}) or (not names and verbs == {"create"}))
            if agent != "target" or where != sa_ns or not ok:
                bad(f"Role {where}/{rname}: {rule} is more than the ledger's ConfigMap drasync-ledger in {sa_ns}")
    if agent == "target" and not ledger_bound:
        bad(f"the target may not keep the ledger's identity: no Role for the ConfigMap drasync-ledger in {sa_ns}")

    # The configuration.
    deps = by_kind(items, "Deployment")
    if len(deps) != 1:
        bad(f"{len(deps)} Deployments, not 1")
        return
    d = deps[0]
    spec, pod = d["spec"], d["spec"]["template"]["spec"]
    cms = {name(c): c for c in by_kind(items, "ConfigMap")}
    cfg_vol = [v for v in pod.get("volumes", []) if "configMap" in v]
    cfg_text = None
    if len(cfg_vol) != 1 or cfg_vol[0]["configMap"]["name"] not in cms:
        bad("the Deployment's configuration volume is not a ConfigMap of the rendering")
    else:
        data = cms[cfg_vol[0]["configMap"]["name"]].get("data", {})
        key = f"{agent}.yaml"
        cfg_text = data.get(key)
        if cfg_text is None:
            bad(f"the configuration ConfigMap has no {key}")
        else:
            with open(os.path.join(outdir, key), "w") as f:
                f.write(cfg_text)

    if agent == "source":
        for r in cluster_rules + [r for rs in ns_bindings.values() for r in rs]:
            if set(r.get("verbs", [])) - READ:
                bad(f"the source may {sorted(set(r['verbs']) - READ)} {r.get('resources')}: it only reads")
        # The selection: `namespaces: [a, b]` (inline or a block list) or
        # namespaceSelector.
        text = cfg_text or ""
        selector = re.search(r"^namespaceSelector:", text, re.M) is not None
        m = re.search(r"^namespaces:\s*\[([^\]]*)\]", text, re.M)
        if m:
            selected = {n.strip().strip("'\"") for n in m.group(1).split(",") if n.strip()}
        else:
            m = re.search(r"^namespaces:\s*\n((?:[ ]*- .*\n?)+)", text, re.M)
            selected = {l.strip()[2:].strip().strip("'\"") for l in m.group(1).splitlines()} if m else set()
        secrets_everywhere = any("secrets" in r.get("resources", []) for r in cluster_rules)
        ns_rules = [r for r in cluster_rules if "namespaces" in r.get("resources", [])]
        if selected and not selector and len(selected) <= 8:
            # read namespace by namespace: bound in each selected one only
            if secrets_everywhere:
                bad("a fixed namespace list, yet the source may read Secrets cluster-wide")
            if set(ns_bindings) != selected:
                bad(f"RoleBindings in {sorted(ns_bindings)}, namespaces selected {sorted(selected)}")
            for ns, rs in sorted(ns_bindings.items()):
                if not any("secrets" in r.get("resources", []) for r in rs):
                    bad(f"the source cannot read Secrets in the selected {ns}")
            if not ns_rules or any(set(r.get("resourceNames") or []) != selected for r in ns_rules):
                bad(f"Namespace reads are not exactly the selected {sorted(selected)} by name: {ns_rules}")
        elif selector or len(selected) > 8:
            if not secrets_everywhere:
                bad("a namespaceSelector, yet the source cannot read Secrets cluster-wide")
            if not any(not r.get("resourceNames") for r in ns_rules):
                bad("a namespaceSelector, yet the source cannot list every Namespace")
        else:
            bad("the source's configuration selects no namespace")
    else:
        managed = None
        for r in cluster_rules:
            writes = set(r.get("verbs", [])) - READ
            res = r.get("resources", [])
            if not writes:
                continue
            if res == ["namespaces"] and r.get("apiGroups") == [""]:
                if not r.get("resourceNames"):
                    bad("the target may write every Namespace: resourceNames is empty")
                if writes - {"patch", "update"}:
                    bad(f"the target may {sorted(writes - {'patch', 'update'})} namespaces")
                managed = set(r.get("resourceNames", []))
            elif res == ["deviceclasses"] and r.get("apiGroups") == ["resource.k8s.io"] and deviceclasses:
                continue
            else:
                bad(f"the target has a cluster-wide {sorted(writes)} on {res}")
        if managed is None:
            bad("the target may not apply any Namespace")
            managed = set()
        if set(ns_bindings) != managed:
            bad(f"RoleBindings in {sorted(ns_bindings)} but Namespace access to {sorted(managed)}")
        # The managed namespaces are exactly the granted ones (and their drill
        # scratch namespaces), each enforcing the granted Pod Security level.
        nss = {name(n): n for n in by_kind(items, "Namespace")}
        cfg = yaml_to_json(cfg_text) if cfg_text is not None else None
        if cfg is not None:
            nsm = cfg.get("namespaceMappings") or {}
            drills = {n for n, o in nss.items() if (o["metadata"].get("labels") or {}).get("drasync.io/drill")}
            # the source namespaces a glob may stand for: namespaceMappings'
            # keys, and the managed names that are neither a mapping's target
            # nor a drill's scratch namespace
            candidates = set(nsm) | {n for n in managed if n not in set(nsm.values()) and n not in drills}
            grants = granted(cfg, candidates)
            want = set(grants) | {ns + "-drill" for ns in grants}
            if not grants:
                bad("the target's configuration grants its sources no namespace")
            if want != managed:
                bad(f"the configuration grants {sorted(grants)} (with their drill namespaces "
                    f"{sorted(want)}), the RBAC manages {sorted(managed)}")
            for ns in sorted(managed):
                if ns not in nss:
                    bad(f"managed namespace {ns} is not created by the rendering")
                    continue
                labels = nss[ns]["metadata"].get("labels") or {}
                of = ns[:-6] if ns.endswith("-drill") and ns not in grants else ns
                if of != ns and labels.get("drasync.io/drill") != of:
                    bad(f"drill namespace {ns} lacks the label drasync.io/drill={of}")
                level = grants.get(of)
                if level and (labels.get("pod-security.kubernetes.io/enforce") != level or
                              labels.get("pod-security.kubernetes.io/enforce-version") != "latest"):
                    bad(f"managed namespace {ns} does not enforce the granted podSecurity {level} "
                        f"(pod-security.kubernetes.io/enforce={labels.get('pod-security.kubernetes.io/enforce')}, "
                        f"-version={labels.get('pod-security.kubernetes.io/enforce-version')})")
        if any(set(r.get("verbs", [])) >= {"create", "delete"} and "namespaces" in r.get("resources", [])
               for rs in ns_bindings.values() for r in rs):
            bad("a namespaced role grants namespaces")
        svcs = by_kind(items, "Service")
        sel = d["spec"]["template"]["metadata"].get("labels", {})
        if len(svcs) != 1:
            bad(f"{len(svcs)} Services, not 1")
        else:
            s = svcs[0]["spec"]
            if not s.get("selector") or any(sel.get(k) != v for k, v in s["selector"].items()):
                bad(f"the Service's selector {s.get('selector')} does not select the pod {sel}")
            if [(p.get("port"), p.get("targetPort")) for p in s.get("ports", [])] != [(7450, "link")]:
                bad(f"the Service's ports are {s.get('ports')}, not 7450 -> link")

    # The Deployment.
    if spec.get("replicas") != 1:
        bad(f"replicas {spec.get('replicas')}, not 1")
    if (spec.get("strategy") or {}).get("type") != "Recreate":
        bad("strategy is not Recreate")
    if pod.get("serviceAccountName") != name(sa):
        bad(f"the pod runs as {pod.get('serviceAccountName')}, not {name(sa)}")
    psc = pod.get("securityContext") or {}
    if psc.get("runAsNonRoot") is not True:
        bad("pod: runAsNonRoot is not true")
    if (psc.get("seccompProfile") or {}).get("type") != "RuntimeDefault":
        bad("pod: seccompProfile is not RuntimeDefault")
    for k in ("runAsUser", "runAsGroup", "fsGroup"):
        if k in psc:
            bad(f"pod: securityContext.{k} is set (OpenShift restricted-v2 assigns it)")
    if pod.get("hostNetwork") or pod.get("hostPID") or pod.get("hostIPC"):
        bad("pod: host namespaces")
    mains = [c for c in pod["containers"] if c["name"] == f"drasync-{agent}"]
    if len(mains) != 1 or mains[0].get("command", [None])[0] != f"drasync-{agent}":
        bad(f"no container drasync-{agent} running drasync-{agent}")
    for c in pod.get("initContainers", []):
        check_container(c, f"initContainer {c['name']}", False)
    for c in pod["containers"]:
        check_container(c, f"container {c['name']}", c in mains)
    pvcs = {name(p) for p in by_kind(items, "PersistentVolumeClaim")}
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    if mains:
        m = {vm["mountPath"]: vm["name"] for vm in mains[0].get("volumeMounts", [])}
        state = vols.get(m.get("/var/lib/drasync"), {})
        if (state.get("persistentVolumeClaim") or {}).get("claimName") not in pvcs:
            bad("/var/lib/drasync (stateDir) is not a PersistentVolumeClaim of the rendering")
        if cfg_text is not None and "stateDir: /var/lib/drasync" not in cfg_text:
            bad("the configuration's stateDir is not /var/lib/drasync")
        # Every file the configuration names is mounted in the agent's
        # container; the secret key on a volume an init container fills
        # (a Secret volume's files are root's: the agent would refuse them).
        inits = pod.get("initContainers", [])

        def copies(cmd, path):
            """Whether an init container's command writes path: named as
            install's destination, or `install ... SRC... DIR/` with a source
            of path's base name."""
            if path in cmd:
                return True
            d, base = path.rsplit("/", 1)
            return bool(cmd) and cmd[0] == "install" and cmd[-1].rstrip("/") == d and any(
                a.rsplit("/", 1)[-1] == base for a in cmd[1:-1])

        for field in ("secretKeyFile", "authorizedSources", "proxyCredentialsFile"):
            f = re.search(rf"^\s*{field}:\s*(\S+)", cfg_text or "", re.M)
            if not f:
                if field == "secretKeyFile" or (field == "authorizedSources" and agent == "target"):
                    bad(f"the configuration has no keys.{field}")
                continue
            path = f.group(1)
            mp = [p for p in m if path.startswith(p.rstrip("/") + "/")]
            if not mp:
                bad(f"keys.{field} {path} is on no volume of the agent's container")
            elif field != "authorizedSources":
                # A secret the agent refuses unless it is its own, mode 0600 or less.
                vol = vols.get(m[mp[0]], {})
                filled = any(vm["name"] == m[mp[0]] and copies(c.get("command", []), path)
                             for c in inits for vm in c.get("volumeMounts", []))
                if "emptyDir" not in vol or not filled:
                    bad(f"{field} {path} is not copied into an emptyDir by an init container")
        conf = [a for a in mains[0].get("command", []) if a.endswith(f"/{agent}.yaml")]
        mount = next((p for p, n in m.items() if cfg_vol and n == cfg_vol[0]["name"]), None)
        if not conf or not mount or conf[0] != f"{mount}/{agent}.yaml":
            bad(f"--config {conf} is not the ConfigMap's file under {mount}")


main()
for p in problems:
    print(f"check_manifests: {sys.argv[1]} {sys.argv[2]}: {p}", file=sys.stderr)
sys.exit(1 if problems else 0)
