#!/usr/bin/env bash
# The shipped manifests, rendered as an operator renders them and checked by
# the real API server of the test cluster (ctest deploy_manifests, fixture
# kube_v1):
#   - kubectl kustomize of deploy/kustomize/source, .../target, and .../target
#     with the target-deviceclasses component; helm lint --strict and helm
#     template of deploy/helm/drasync (source, target, target copying
#     DeviceClasses);
#   - each rendering applied with --dry-run=server: the API server validates
#     every object, and the Pod Security admission (the namespace enforces
#     "restricted") warns about no Deployment; each pod template is also
#     created as a Pod with --dry-run=server in that namespace, where
#     "restricted" is enforced;
#   - the source's RBAC for its fixed namespace list (RoleBindings in those
#     namespaces, their Namespace objects by name) and, with a
#     namespaceSelector, the kustomize component source-cluster-wide and the
#     chart's cluster-wide bindings;
#   - check_manifests.py: RBAC, probes, security context, Recreate, stateDir;
#     the target's RBAC namespaces are exactly those its configuration grants
#     the sources (sources[].namespaces after namespaceMappings, globs through
#     the names the chart is given; without sources, namespaceMappings), each
#     created enforcing the granted Pod Security level: the kustomize base,
#     the chart with sources (a mapped namespace it does not grant gets no
#     RBAC), without sources, and with a glob; the chart refuses a glob it has
#     no names for, a managed name no source is granted, and a grant of
#     nothing; check_manifests.py refuses RBAC wider than the grant and a
#     managed namespace enforcing another level;
#   - the configuration each ConfigMap holds is read by the agent itself
#     (drasync-target plan, drasync-source status), so an unknown key fails.
#
# Environment: DS_KUBECONFIG_V1, DS_KUBE_BIN, DS_HELM_BIN, DS_SOURCE_BIN,
# DS_TARGET_BIN.
set -euo pipefail
for v in DS_KUBECONFIG_V1 DS_KUBE_BIN DS_HELM_BIN DS_SOURCE_BIN DS_TARGET_BIN; do
  [ -n "${!v:-}" ] || { echo "manifests: $v is not set" >&2; exit 1; }
done
here=$(cd "$(dirname "$0")" && pwd)
deploy=$here/../../deploy
k() { "$DS_KUBE_BIN" kubectl --kubeconfig "$DS_KUBECONFIG_V1" "$@"; }
helm() { "$DS_HELM_BIN" "$@"; }

tmp=$(mktemp -d)
# Namespaces the renderings need to exist for a server-side dry run of what
# they hold (a dry run creates nothing, a Namespace included).
namespaces="drasync ml-team ml-team-dr ml-team-dr-drill ml-batch ml-batch-drill"
cleanup() {
  local ns
  for ns in $namespaces; do k delete namespace "$ns" --ignore-not-found --wait=false >/dev/null 2>&1 || true; done
  for ns in $namespaces; do k wait --for=delete "namespace/$ns" --timeout=120s >/dev/null 2>&1 || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

# shellcheck source=tap.sh
. "$here/tap.sh"

for ns in $namespaces; do
  k wait --for=delete "namespace/$ns" --timeout=120s >/dev/null 2>&1 || true
done
# --save-config: the renderings' Namespaces are applied over these.
k create namespace drasync --save-config >/dev/null
k label namespace drasync pod-security.kubernetes.io/enforce=restricted \
  pod-security.kubernetes.io/warn=restricted >/dev/null
# ml-team: the source's selected namespace (its RoleBinding lives there).
k create namespace ml-team --save-config >/dev/null
k create namespace ml-team-dr --save-config >/dev/null
k create namespace ml-team-dr-drill --save-config >/dev/null
# ml-batch: a source namespace kept by name, granted through a glob
k create namespace ml-batch --save-config >/dev/null
k create namespace ml-batch-drill --save-config >/dev/null
# The namespace does refuse a pod that is not "restricted", and warns about a
# Deployment whose pods would not be: the checks below can fail.
cat >"$tmp/loose.yaml" <<'YAML'
apiVersion: apps/v1
kind: Deployment
metadata: {name: loose, namespace: drasync}
spec:
  selector: {matchLabels: {app: loose}}
  template:
    metadata: {labels: {app: loose}}
    spec: {containers: [{name: c, image: drasync:dev}]}
YAML
# (the admission sees the namespace's new label a moment later: a few tries)
warned=
for _ in $(seq 1 25); do
  if k apply --dry-run=server -f "$tmp/loose.yaml" 2>&1 | grep -q 'would violate PodSecurity'; then
    warned=1
    break
  fi
  sleep 0.2
done
if [ -n "$warned" ]; then
  ok "a Deployment whose pods are not restricted draws a PodSecurity warning"
else
  notok "no PodSecurity warning for a Deployment whose pods are not restricted"
fi
if k run loose --image=drasync:dev -n drasync --dry-run=server >/dev/null 2>&1; then
  notok "a pod that is not restricted is admitted in the drasync namespace"
else
  ok "a pod that is not restricted is refused in the drasync namespace"
fi

# Keys for the chart (it refuses to render without them).
"$DS_SOURCE_BIN" keygen --out "$tmp/keys" >/dev/null
"$DS_TARGET_BIN" keygen --out "$tmp/keys" >/dev/null
grep -v '^#' "$tmp/keys/source.pub" | sed 's/^/prod-east /' >"$tmp/keys/authorized_sources"
target_pub=$(grep -v '^#' "$tmp/keys/target.pub")
# (a Z85 key holds characters --set parses: a values file)
printf 'source:\n  config:\n    target:\n      serverPublicKey: "%s"\n' "$target_pub" >"$tmp/keys/source-values.yaml"
keys_source=(-f "$tmp/keys/source-values.yaml" --set-file "source.keys.secretKey=$tmp/keys/source.key")
# The target as the kustomize base grants it (prod-east: ml-team), plus a
# mapping of ml-team-2 that no source is granted: the chart gives it no RBAC.
grant_target=(--set-json 'target.config.namespaceMappings={"ml-team":"ml-team-dr","ml-team-2":"other-team"}'
  --set-json 'target.config.sources=[{"name":"prod-east","namespaces":["ml-team"],"podSecurity":"baseline","relocate":false}]')
keys_target=("${grant_target[@]}" --set-file "target.keys.secretKey=$tmp/keys/target.key" --set-file "target.keys.authorizedSources=$tmp/keys/authorized_sources")

# server_check NAME AGENT FILE [--deviceclasses]: FILE (YAML) through the API
# server's dry run, its pod templates as Pods under "restricted", then the
# static checks and the agent's own reading of the configuration.
server_check() {
  local name=$1 agent=$2 file=$3 flag=${4:-} out=$tmp/$1
  mkdir -p "$out"
  if ! k apply --dry-run=server -o json -f "$file" >"$out/list.json" 2>"$out/err"; then
    notok "$name: kubectl apply --dry-run=server: $(cat "$out/err")"
    return
  fi
  if grep -i 'warning' "$out/err" >/dev/null; then
    notok "$name: the API server warned: $(cat "$out/err")"
  else
    ok "$name: the API server accepts every object (dry run), without a warning"
  fi
  # Each pod template as a Pod, in the namespace enforcing "restricted".
  python3 - "$out/list.json" "$out" <<'PY'
import json, sys
items = json.load(open(sys.argv[1]))["items"]
for d in (o for o in items if o["kind"] == "Deployment"):
    t = d["spec"]["template"]
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": d["metadata"]["name"], "namespace": "drasync",
                        "labels": t["metadata"].get("labels", {})},
           "spec": t["spec"]}
    json.dump(pod, open(f"{sys.argv[2]}/pod-{d['metadata']['name']}.json", "w"))
PY
  local pod
  for pod in "$out"/pod-*.json; do
    # The pod's ServiceAccount must exist for the dry run; the rendering's is
    # not created, so it runs as "default" (what is checked is its security).
    python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); p["spec"]["serviceAccountName"]="default"; json.dump(p,open(sys.argv[1],"w"))' "$pod"
    if k create --dry-run=server -f "$pod" >/dev/null 2>"$out/pod.err"; then
      ok "$name: $(basename "$pod" .json) admitted under the restricted Pod Security Standard"
    else
      notok "$name: $(basename "$pod" .json) refused in a restricted namespace: $(cat "$out/pod.err")"
    fi
  done
  if python3 "$here/check_manifests.py" "$agent" "$out/list.json" "$out" $flag; then
    ok "$name: RBAC$([ "$agent" = source ] || echo " (the granted namespaces)"), Deployment, probes, security context, stateDir as promised"
  else
    notok "$name: check_manifests.py"
  fi
  if [ ! -f "$out/$agent.yaml" ]; then
    notok "$name: no $agent.yaml configuration"
    return
  fi
  # The agents read the configuration as shipped (stateDir moved to a
  # scratch directory).
  sed -i "s|^stateDir: .*|stateDir: $out/state|" "$out/$agent.yaml"
  mkdir -p "$out/state"
  if [ "$agent" = target ]; then
    printf 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: ml-team}\n' >"$out/in.yaml"
    if "$DS_TARGET_BIN" plan --config "$out/$agent.yaml" -f "$out/in.yaml" >"$out/plan.out" 2>"$out/plan.err"; then
      ok "$name: drasync-target plan reads the shipped target.yaml"
    else
      notok "$name: drasync-target plan refuses the shipped target.yaml: $(cat "$out/plan.err")"
    fi
  else
    # status reads the file, then finds no state: a configuration error
    # would be reported with the file's line and column instead.
    "$DS_SOURCE_BIN" status --config "$out/$agent.yaml" >"$out/status.out" 2>&1 || true
    if grep -q 'nothing in stateDir' "$out/status.out"; then
      ok "$name: drasync-source reads the shipped source.yaml"
    else
      notok "$name: drasync-source refuses the shipped source.yaml: $(cat "$out/status.out")"
    fi
  fi
}

echo "# kustomize"
for agent in source target; do
  if k kustomize "$deploy/kustomize/$agent" >"$tmp/kustomize-$agent.yaml" 2>"$tmp/err"; then
    ok "kubectl kustomize deploy/kustomize/$agent"
    server_check "kustomize-$agent" "$agent" "$tmp/kustomize-$agent.yaml"
  else
    notok "kubectl kustomize deploy/kustomize/$agent: $(cat "$tmp/err")"
  fi
done
# An overlay as the component's comment shows it.
mkdir -p "$tmp/overlay"
cp -r "$deploy/kustomize/target" "$deploy/kustomize/target-deviceclasses" "$tmp/"
printf 'resources: [../target]\ncomponents: [../target-deviceclasses]\n' >"$tmp/overlay/kustomization.yaml"
if k kustomize "$tmp/overlay" >"$tmp/kustomize-dc.yaml" 2>"$tmp/err"; then
  ok "kubectl kustomize of an overlay with the target-deviceclasses component"
  server_check "kustomize-target-deviceclasses" target "$tmp/kustomize-dc.yaml" --deviceclasses
else
  notok "kubectl kustomize with target-deviceclasses: $(cat "$tmp/err")"
fi
# Without the component, check_manifests refuses DeviceClass writes: the
# check can fail.
if python3 "$here/check_manifests.py" target "$tmp/kustomize-target-deviceclasses/list.json" "$tmp" 2>/dev/null; then
  notok "check_manifests.py accepts DeviceClass writes it was not told of"
else
  ok "check_manifests.py refuses DeviceClass writes it was not told of"
fi

# The source's cluster-wide variant: a namespaceSelector and the component.
mkdir -p "$tmp/overlay-source"
cp -r "$deploy/kustomize/source" "$deploy/kustomize/source-cluster-wide" "$tmp/"
sed 's/^namespaces: .*/namespaceSelector: "drasync.io\/replicate=true"/' "$deploy/kustomize/source/source.yaml" >"$tmp/overlay-source/source.yaml"
cat >"$tmp/overlay-source/kustomization.yaml" <<'YAML'
resources: [../source]
components: [../source-cluster-wide]
configMapGenerator:
- {name: drasync-source-config, namespace: drasync, behavior: replace, files: [source.yaml]}
YAML
if k kustomize "$tmp/overlay-source" >"$tmp/kustomize-source-sel.yaml" 2>"$tmp/err"; then
  ok "kubectl kustomize of an overlay with a namespaceSelector and the source-cluster-wide component"
  server_check "kustomize-source-selector" source "$tmp/kustomize-source-sel.yaml"
else
  notok "kubectl kustomize with source-cluster-wide: $(cat "$tmp/err")"
fi
# The opt-in Role of `drasync-source relocate` (docs/operations.md, "Planned
# relocation"): absent from the base, present with the component, and only in
# the namespace it names.
mkdir -p "$tmp/overlay-relocate"
cp -r "$deploy/kustomize/source-relocate" "$tmp/"
printf 'resources: [../source]\ncomponents: [../source-relocate]\n' >"$tmp/overlay-relocate/kustomization.yaml"
if grep -q 'drasync-source-relocate' "$tmp/kustomize-source.yaml"; then
  notok "the source base renders the relocate Role, which is opt-in"
else
  ok "the source base has no relocate Role (it only reads)"
fi
if k kustomize "$tmp/overlay-relocate" >"$tmp/kustomize-relocate.yaml" 2>"$tmp/err" &&
  k apply --dry-run=server -o json -f "$tmp/kustomize-relocate.yaml" >"$tmp/relocate.json" 2>"$tmp/err"; then
  if python3 - "$tmp/relocate.json" <<'PY'
import json, sys
items = json.load(open(sys.argv[1]))["items"]
roles = [o for o in items if o["kind"] == "Role" and o["metadata"]["name"] == "drasync-source-relocate"]
binds = [o for o in items if o["kind"] == "RoleBinding" and o["metadata"]["name"] == "drasync-source-relocate"]
assert len(roles) == 1 and roles[0]["metadata"]["namespace"] == "ml-team", roles
assert len(binds) == 1 and binds[0]["subjects"][0]["name"] == "drasync-source", binds
verbs = {v for r in roles[0]["rules"] for v in r["verbs"]}
assert verbs == {"get", "list", "update", "delete", "patch"}, verbs
PY
  then
    ok "kubectl kustomize with source-relocate: a Role and RoleBinding in ml-team (get, list, update, delete, patch)"
  else
    notok "the source-relocate component renders other RBAC than its Role in ml-team"
  fi
else
  notok "kubectl kustomize with source-relocate: $(cat "$tmp/err")"
fi
if helm template drasync "$deploy/helm/drasync" -n drasync --set source.enabled=true "${keys_source[@]}" \
  >"$tmp/helm-source-default.yaml" 2>"$tmp/err" &&
  helm template drasync "$deploy/helm/drasync" -n drasync --set source.enabled=true "${keys_source[@]}" \
  --set source.relocate.enabled=true >"$tmp/helm-relocate.yaml" 2>"$tmp/err"; then
  if [ "$(grep -c 'name: drasync-source-relocate' "$tmp/helm-relocate.yaml")" -ge 2 ] &&
    ! grep -q 'source-relocate' "$tmp/helm-source-default.yaml"; then
    ok "helm: source.relocate.enabled renders the relocate Role and RoleBinding; off by default"
  else
    notok "helm: the relocate Role is not opt-in: $(grep -n 'source-relocate' "$tmp/helm-relocate.yaml" "$tmp/helm-source-default.yaml" | head -n 5)"
  fi
else
  notok "helm template (source.relocate.enabled): $(cat "$tmp/err")"
fi
# The fixed list's rendering with the cluster-wide Secret reads: refused, the
# check can fail.
python3 - "$tmp/kustomize-source/list.json" "$tmp/kustomize-source-selector/list.json" "$tmp/mixed.json" <<'PY'
import json, sys
a, b = (json.load(open(p))["items"] for p in sys.argv[1:3])
extra = [o for o in b if o["kind"] == "ClusterRoleBinding" and o["metadata"]["name"] == "drasync-source"]
json.dump({"items": a + extra}, open(sys.argv[3], "w"))
PY
if python3 "$here/check_manifests.py" source "$tmp/mixed.json" "$tmp" 2>/dev/null; then
  notok "check_manifests.py accepts a fixed namespace list bound cluster-wide"
else
  ok "check_manifests.py refuses a fixed namespace list whose source may read Secrets cluster-wide"
fi

echo "# helm"
chart=$deploy/helm/drasync
if helm lint --strict "$chart" --set source.enabled=true --set target.enabled=true \
  "${keys_source[@]}" "${keys_target[@]}" >"$tmp/lint" 2>&1; then
  ok "helm lint --strict deploy/helm/drasync"
else
  notok "helm lint --strict: $(cat "$tmp/lint")"
fi
for agent in source target; do
  keys=("${keys_source[@]}")
  [ "$agent" = source ] || keys=("${keys_target[@]}")
  if helm template drasync "$chart" -n drasync --set "$agent.enabled=true" "${keys[@]}" >"$tmp/helm-$agent.yaml" 2>"$tmp/err"; then
    ok "helm template ($agent.enabled)"
    server_check "helm-$agent" "$agent" "$tmp/helm-$agent.yaml"
  else
    notok "helm template ($agent.enabled): $(cat "$tmp/err")"
  fi
done
if helm template drasync "$chart" -n drasync --set source.enabled=true "${keys_source[@]}" \
  --set-json 'source.config.namespaces=null' --set source.config.namespaceSelector=drasync.io/replicate=true \
  >"$tmp/helm-source-sel.yaml" 2>"$tmp/err"; then
  server_check "helm-source-selector" source "$tmp/helm-source-sel.yaml"
else
  notok "helm template (namespaceSelector): $(cat "$tmp/err")"
fi
# A site whose only way out is a SOCKS5 proxy with a password
# (docs/configuration.md): the credentials travel in a Secret of their own,
# are copied beside the key (mode 0400) and named by proxyCredentialsFile;
# the ConfigMap holds the proxy's address and never the password.
printf 'drasync:s3cret-proxy-pass\n' >"$tmp/proxy-credentials"
proxy_values=(--set source.config.target.proxy=socks5://egress.corp.example:1080
  --set-file "source.proxyCredentials.credentials=$tmp/proxy-credentials")
if helm template drasync "$chart" -n drasync --set source.enabled=true "${keys_source[@]}" \
  "${proxy_values[@]}" >"$tmp/helm-source-proxy.yaml" 2>"$tmp/err"; then
  server_check "helm-source-proxy" source "$tmp/helm-source-proxy.yaml"
  if python3 - "$tmp/helm-source-proxy/list.json" <<'PY'; then
import base64, json, sys
items = json.load(open(sys.argv[1]))["items"]
def one(kind, name):
    found = [o for o in items if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)}"
    return found[0]
sec = one("Secret", "drasync-source-proxy")
assert base64.b64decode(sec["data"]["proxy-credentials"]) == b"drasync:s3cret-proxy-pass\n", "the Secret's value"
cfg = one("ConfigMap", "drasync-source-config")["data"]["source.yaml"]
assert "s3cret-proxy-pass" not in cfg, "the password is in the ConfigMap"
assert "proxyCredentialsFile: /run/drasync/keys/proxy-credentials" in cfg, "proxyCredentialsFile not set"
assert "proxy: socks5://egress.corp.example:1080" in cfg, "proxy lost"
assert "endpoint:" in cfg, "the target's endpoint lost in the merge"
spec = one("Deployment", "drasync-source")["spec"]["template"]["spec"]
init = spec["initContainers"][0]
assert "/etc/drasync/proxy/proxy-credentials" in init["command"] and init["command"][:3] == ["install", "-m", "0400"], init["command"]
assert any(m["name"] == "proxy" for m in init["volumeMounts"]), "the init container does not mount the proxy Secret"
assert not any(m["name"] == "proxy" for m in spec["containers"][0]["volumeMounts"]), "the agent mounts the Secret itself"
assert any(v["name"] == "proxy" and v["secret"]["secretName"] == "drasync-source-proxy" for v in spec["volumes"])
PY
    ok "helm: source.proxyCredentials renders a Secret, copies it 0400 beside the key, sets proxyCredentialsFile; no password in the ConfigMap"
  else
    notok "helm: source.proxyCredentials rendering"
  fi
  # The check can fail: the same rendering whose init container forgets the credentials.
  python3 - "$tmp/helm-source-proxy/list.json" "$tmp/proxy-uncopied.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
for o in doc["items"]:
    if o["kind"] == "Deployment":
        init = o["spec"]["template"]["spec"]["initContainers"][0]
        init["command"] = [a for a in init["command"] if not a.endswith("/proxy-credentials")]
json.dump(doc, open(sys.argv[2], "w"))
PY
  if python3 "$here/check_manifests.py" source "$tmp/proxy-uncopied.json" "$tmp/helm-source-proxy" 2>"$tmp/err"; then
    notok "check_manifests.py accepts proxy credentials no init container copies"
  elif grep -q 'proxyCredentialsFile /run/drasync/keys/proxy-credentials is not copied' "$tmp/err"; then
    ok "check_manifests.py refuses proxy credentials no init container copies"
  else
    notok "check_manifests.py refused the uncopied credentials, but said: $(cat "$tmp/err")"
  fi
else
  notok "helm template (source.proxyCredentials): $(cat "$tmp/err")"
fi
if helm template drasync "$chart" -n drasync --set source.enabled=true "${keys_source[@]}" \
  --set source.proxyCredentials.existingSecret=site-proxy \
  --set source.config.target.proxy=socks5://egress.corp.example:1080 >"$tmp/helm-proxy-existing.yaml" 2>"$tmp/err" &&
  ! grep -q 'name: drasync-source-proxy' "$tmp/helm-proxy-existing.yaml" &&
  grep -q 'secretName: site-proxy' "$tmp/helm-proxy-existing.yaml"; then
  ok "helm: source.proxyCredentials.existingSecret is mounted, no Secret rendered"
else
  notok "helm: source.proxyCredentials.existingSecret: $(cat "$tmp/err")"
fi
if helm template drasync "$chart" -n drasync --set source.enabled=true "${keys_source[@]}" \
  --set-file "source.proxyCredentials.credentials=$tmp/proxy-credentials" >/dev/null 2>"$tmp/err"; then
  notok "helm renders proxy credentials without source.config.target.proxy"
elif grep -q 'source.config.target.proxy' "$tmp/err"; then
  ok "helm refuses proxy credentials without a proxy, saying which value is missing"
else
  notok "helm refused proxy credentials without a proxy, but said: $(cat "$tmp/err")"
fi
if grep -q 'proxy-credentials\|proxyCredentials\|name: proxy' "$tmp/helm-source-default.yaml"; then
  notok "the default source rendering has a proxy Secret, mount or credentials file: $(grep -n 'proxy-credentials\|proxyCredentials\|name: proxy' "$tmp/helm-source-default.yaml" | head -n 3)"
else
  ok "helm: no proxy Secret or mount by default"
fi
if helm template drasync "$chart" -n drasync --set target.enabled=true "${keys_target[@]}" \
  --set target.config.dra.replicateDeviceClasses=true >"$tmp/helm-dc.yaml" 2>"$tmp/err"; then
  server_check "helm-target-deviceclasses" target "$tmp/helm-dc.yaml" --deviceclasses
else
  notok "helm template (replicateDeviceClasses): $(cat "$tmp/err")"
fi
# The mapped namespace no source is granted has no RBAC and no Namespace.
if grep -v 'ml-team-2: other-team' "$tmp/helm-target.yaml" | grep -q 'other-team'; then
  notok "the chart renders RBAC or a Namespace for other-team, which no source is granted: $(grep -n 'other-team' "$tmp/helm-target.yaml" | grep -v 'ml-team-2: other-team' | head -n 5)"
else
  ok "the chart gives the ungranted mapping ml-team-2 -> other-team no RBAC (only target.yaml names it)"
fi
[ "$(grep -c 'ml-team-2: other-team' "$tmp/helm-target.yaml")" -eq 1 ] ||
  notok "the chart's target.yaml lost the mapping ml-team-2: other-team"
# Without sources the file grants the source namespaces of namespaceMappings.
if helm template drasync "$chart" -n drasync --set target.enabled=true "${keys_target[@]}" \
  --set-json 'target.config.sources=null' --set-json 'target.config.namespaceMappings={"ml-team":"ml-team-dr"}' \
  >"$tmp/helm-nosources.yaml" 2>"$tmp/err"; then
  if grep -q '^    sources:' "$tmp/helm-nosources.yaml"; then
    notok "helm template without sources still writes sources into target.yaml"
  fi
  server_check "helm-target-nosources" target "$tmp/helm-nosources.yaml"
else
  notok "helm template (no sources): $(cat "$tmp/err")"
fi
# A glob: RBAC needs names, the chart takes them from managedNamespaces.extra
# (ml-batch, kept by name) and the keys of namespaceMappings (ml-team).
if helm template drasync "$chart" -n drasync --set target.enabled=true "${keys_target[@]}" \
  --set-json 'target.config.sources=[{"name":"prod-east","namespaces":["ml-*"],"podSecurity":"restricted"}]' \
  --set-json 'target.config.namespaceMappings={"ml-team":"ml-team-dr"}' \
  --set-json 'target.managedNamespaces.extra=["ml-batch"]' >"$tmp/helm-glob.yaml" 2>"$tmp/err"; then
  server_check "helm-target-glob" target "$tmp/helm-glob.yaml"
  if python3 - "$tmp/helm-target-glob/list.json" <<'PY'
import json, sys
items = json.load(open(sys.argv[1]))["items"]
ns = {o["metadata"]["name"]: o["metadata"].get("labels", {}) for o in items if o["kind"] == "Namespace"}
want = {"ml-team-dr", "ml-team-dr-drill", "ml-batch", "ml-batch-drill"}
sys.exit(0 if set(ns) == want and all(l.get("pod-security.kubernetes.io/enforce") == "restricted" for l in ns.values()) else 1)
PY
  then
    ok "helm template with the glob ml-* manages ml-team-dr and ml-batch (and their drills), enforcing restricted"
  else
    notok "helm template with the glob ml-*: not the namespaces ml-team-dr, ml-batch and their drills, restricted"
  fi
else
  notok "helm template (a glob with its names): $(cat "$tmp/err")"
fi

# What cannot work is refused at render time: a target with nowhere to
# write, a glob without names, a managed name no source is granted, an agent
# without keys.
# refuses WHAT MESSAGE COMMAND...: COMMAND fails, and its error says MESSAGE.
refuses() {
  local what=$1 msg=$2
  shift 2
  if "$@" >/dev/null 2>"$tmp/err"; then
    notok "accepted: $what ($*)"
  elif grep -qF -- "$msg" "$tmp/err"; then
    ok "refused: $what (...$msg...)"
  else
    notok "refused: $what, but without '$msg': $(cat "$tmp/err")"
  fi
}
# target_refused WHAT MESSAGE ARGS...: helm template of the target with ARGS.
target_refused() {
  refuses "by helm template, $1" "$2" helm template drasync "$chart" -n drasync --set target.enabled=true "${keys_target[@]}" "${@:3}"
}
target_refused "a target with no managed namespace" "nowhere to write" \
  --set-json 'target.config.sources=null' --set-json 'target.config.namespaceMappings={}'
target_refused "a target whose sources grant nothing" "sources (without it, namespaceMappings) grants no namespace" \
  --set-json 'target.config.sources=[]'
target_refused "RBAC for a glob it has no names for" \
  "sources[0].namespaces: 'team-*' is a glob, and RBAC grants namespaces by name: list the source namespaces it stands for in target.managedNamespaces.extra" \
  --set-json 'target.config.sources=[{"name":"prod-east","namespaces":["team-*"]}]'
target_refused "RBAC for a managed name no source is granted" "extra: 'other-team' is granted to no source" \
  --set-json 'target.managedNamespaces.extra=["other-team"]'
# check_manifests.py refuses RBAC wider than the grant, and a managed
# namespace that enforces another level than the granted one: the check can
# fail.
python3 - "$tmp/helm-target/list.json" "$tmp/wider.json" "$tmp/level.json" <<'PY'
import copy, json, sys
items = json.load(open(sys.argv[1]))["items"]
wider = copy.deepcopy(items)
for o in list(wider):
    if o["kind"] == "RoleBinding" and o["metadata"]["namespace"] == "ml-team-dr":
        rb = copy.deepcopy(o)
        rb["metadata"]["namespace"] = "other-team"
        wider.append(rb)
    if o["kind"] == "Namespace" and o["metadata"]["name"] == "ml-team-dr":
        n = copy.deepcopy(o)
        n["metadata"]["name"] = "other-team"
        wider.append(n)
    if o["kind"] == "ClusterRole":
        for r in o.get("rules", []):
            if r.get("resources") == ["namespaces"]:
                r["resourceNames"].append("other-team")
json.dump({"items": wider}, open(sys.argv[2], "w"))
for o in items:
    if o["kind"] == "Namespace" and o["metadata"]["name"] == "ml-team-dr":
        o["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] = "privileged"
json.dump({"items": items}, open(sys.argv[3], "w"))
PY
mkdir -p "$tmp/neg"
refuses "by check_manifests.py, RBAC in other-team, which the configuration grants no source" \
  "the RBAC manages ['ml-team-dr', 'ml-team-dr-drill', 'other-team']" \
  python3 "$here/check_manifests.py" target "$tmp/wider.json" "$tmp/neg"
refuses "by check_manifests.py, a managed namespace enforcing privileged where baseline is granted" \
  "ml-team-dr does not enforce the granted podSecurity baseline" \
  python3 "$here/check_manifests.py" target "$tmp/level.json" "$tmp/neg"
if helm template drasync "$chart" -n drasync --set source.enabled=true >/dev/null 2>"$tmp/err"; then
  notok "helm template renders a source without keys"
else
  ok "helm template refuses a source without keys: $(grep -o 'serverPublicKey[^:]*' "$tmp/err" | head -n1)"
fi

# Both ways render the same objects (kind, namespace, name; kustomize's
# ConfigMap names carry a hash of the content; the chart leaves the release
# namespace to helm install --create-namespace).
objects() { # LIST.json strip-hash
  python3 - "$1" "$2" <<'PY'
import json, sys
for o in sorted(json.load(open(sys.argv[1]))["items"], key=lambda o: (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])):
    n = o["metadata"]["name"]
    if o["kind"] == "ConfigMap" and sys.argv[2] == "1":
        n = n.rsplit("-", 1)[0]
    if o["kind"] == "Namespace" and n == "drasync":
        continue
    print(o["kind"], o["metadata"].get("namespace", "-"), n)
PY
}
for agent in source target source-selector; do
  a=$(objects "$tmp/kustomize-$agent/list.json" 1)
  b=$(objects "$tmp/helm-$agent/list.json" 0)
  if [ -n "$a" ] && [ "$a" = "$b" ]; then
    ok "kustomize and helm render the same $agent objects ($(echo "$a" | wc -l))"
  else
    notok "kustomize and helm render different $agent objects: $(diff <(echo "$a") <(echo "$b") | tr '\n' ' ')"
  fi
done

if [ "$fail" -ne 0 ]; then
  echo "manifests: FAILED" >&2
  exit 1
fi
echo "manifests: every rendering passed"
