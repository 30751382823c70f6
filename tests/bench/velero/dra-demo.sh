#!/usr/bin/env bash
# scripts/demo.sh's DRA workloads moved by Velero instead of drasync, for the
# comparison in docs/benchmarks.md ("drasync and Velero").
#
#   source cluster: resource.k8s.io/v1beta1 only (as 1.32/1.33), devices of
#                   gpu.nvidia.com; target: resource.k8s.io/v1, gpu.example.com
#   ml-team: a Deployment (2 replicas) on a ResourceClaimTemplate, two Pods
#            sharing a ResourceClaim; ml-serving: a Deployment on a template
#
# Velero as its migration case runs it (tests/bench/velero/velero.sh: one
# versitygw bucket, a server for each cluster): `velero backup create` of
# both namespaces at the source, `velero restore create` at the target with
# --namespace-mappings (ml-team:ml-team-dr, ml-serving:ml-serving-dr) and a
# resource modifier (a ConfigMap of JSON patches) that renames the device
# class gpu.nvidia.com -> gpu.example.com in claims and templates, and points
# gpu-app at the target's dr-gpu-template (as the drasync demo's rule does).
# Then what a user would check: the restore's phase, warnings and errors,
# the order Velero restored the objects in (its restore log), the pods and
# claims in the target; and, where Velero could not restore the DRA objects,
# what it takes by hand (the claims and templates out of the backup
# tarball, converted v1beta1 -> v1, applied) and whether the pods run then.
#
#   tests/bench/velero/dra-demo.sh [--keep]
#   Environment: DS_VELERO_DEMO_SOURCE_API=v1 makes the source serve v1 like
#   the target (the same demo without the API version change; the
#   workload is converted to v1 first), DS_KUBE_STATE (default /tmp/drasync-velero-demo),
#   DS_VELERO_DIR (prebuilt tools; otherwise build.sh builds or reuses them)
# Last line: RESULT velero_dra restore=PHASE warnings=N errors=N
#   dra_failed=N pods_running=N/5 claims_allocated=N by_hand=N
#   hand_pods_running=N/5 hand_claims_allocated=N
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
keep=0
[ "${1:-}" = --keep ] && keep=1
export DS_KUBE_STATE=${DS_KUBE_STATE:-/tmp/drasync-velero-demo}
cluster=$repo/tests/kube/cluster.sh
src=velero-demo-source
dst=velero-demo-target
DS_KUBE_BIN=${DS_KUBE_BIN:-$("$repo/tests/kube/build.sh")}
export DS_KUBE_BIN
tools=$("$here/build.sh")
mkdir -p "$DS_KUBE_STATE"
work=$(mktemp -d "$DS_KUBE_STATE/work-XXXXXX")
step() { printf '\n== %s\n' "$*"; }
show() { printf '  $ %s\n' "$*"; }
finish() {
  local rc=$?
  set +e
  if [ "$keep" = 0 ]; then
    "$here/velero.sh" down "$work/velero" 2>/dev/null
    "$cluster" down "$src" >/dev/null 2>&1
    "$cluster" down "$dst" >/dev/null 2>&1
    [ "$rc" != 0 ] || rm -rf "$work"
  fi
  [ "$rc" = 0 ] || echo "velero dra-demo: FAILED (exit $rc); logs in $work" >&2
  exit "$rc"
}
trap finish EXIT
ksrc() { "$DS_KUBE_BIN" kubectl --kubeconfig "$DS_KUBE_STATE/$src/admin.kubeconfig" "$@" 2> >(grep -v '^Warning: .* is deprecated' >&2); }
kdst() { "$DS_KUBE_BIN" kubectl --kubeconfig "$DS_KUBE_STATE/$dst/admin.kubeconfig" "$@"; }
vsrc() { "$here/velero.sh" cli "$work/velero" source "$@"; }
vdst() { "$here/velero.sh" cli "$work/velero" target "$@"; }

step "Two clusters: the source serves resource.k8s.io/${DS_VELERO_DEMO_SOURCE_API:-v1beta1} only, the target v1 only"
"$cluster" down "$src" >/dev/null 2>&1 || true
"$cluster" down "$dst" >/dev/null 2>&1 || true
src_api=${DS_VELERO_DEMO_SOURCE_API:-v1beta1}
"$cluster" up "$src" --dra-api "$src_api" >/dev/null
"$cluster" nodes "$src" --nodes 2 --devices 4 --driver gpu.nvidia.com >/dev/null
"$cluster" up "$dst" --dra-api v1 >/dev/null
"$cluster" nodes "$dst" --nodes 2 --devices 4 --driver gpu.example.com >/dev/null
echo "  source: resource.k8s.io $(ksrc api-versions | grep '^resource.k8s.io/' | tr '\n' ' ')"
echo "  target: resource.k8s.io $(kdst api-versions | grep '^resource.k8s.io/' | tr '\n' ' ')"

step "scripts/demo.sh's workloads on the source"
cat >"$work/workload.yaml" <<'EOF'
apiVersion: v1
kind: Namespace
metadata: {name: ml-team}
---
apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaimTemplate
metadata: {name: gpu-template, namespace: ml-team}
spec:
  spec:
    devices:
      requests:
      - {name: gpu, deviceClassName: gpu.nvidia.com}
---
apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaim
metadata: {name: shared-gpu, namespace: ml-team}
spec:
  devices:
    requests:
    - {name: gpu, deviceClassName: gpu.nvidia.com}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: gpu-app, namespace: ml-team}
spec:
  replicas: 2
  selector: {matchLabels: {app: gpu-app}}
  template:
    metadata: {labels: {app: gpu-app}}
    spec:
      containers:
      - name: inference
        image: registry.example.com/inference:v1
        resources: {claims: [{name: gpu}]}
      resourceClaims:
      - {name: gpu, resourceClaimTemplateName: gpu-template}
---
apiVersion: v1
kind: Pod
metadata: {name: trainer-0, namespace: ml-team}
spec:
  containers:
  - name: trainer
    image: registry.example.com/trainer:v1
    resources: {claims: [{name: gpu}]}
  resourceClaims:
  - {name: gpu, resourceClaimName: shared-gpu}
---
apiVersion: v1
kind: Pod
metadata: {name: trainer-1, namespace: ml-team}
spec:
  containers:
  - name: trainer
    image: registry.example.com/trainer:v1
    resources: {claims: [{name: gpu}]}
  resourceClaims:
  - {name: gpu, resourceClaimName: shared-gpu}
---
apiVersion: v1
kind: Namespace
metadata: {name: ml-serving}
---
apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaimTemplate
metadata: {name: gpu-template, namespace: ml-serving}
spec:
  spec:
    devices:
      requests:
      - {name: gpu, deviceClassName: gpu.nvidia.com}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: frontend, namespace: ml-serving}
spec:
  replicas: 1
  selector: {matchLabels: {app: frontend}}
  template:
    metadata: {labels: {app: frontend}}
    spec:
      containers:
      - name: server
        image: registry.example.com/frontend:v1
        resources: {claims: [{name: gpu}]}
      resourceClaims:
      - {name: gpu, resourceClaimTemplateName: gpu-template}
EOF
if [ "$src_api" = v1 ]; then
  # the same objects in resource.k8s.io/v1 (a request's class under exactly)
  sed -i 's|resource.k8s.io/v1beta1|resource.k8s.io/v1|; s|- {name: gpu, deviceClassName: gpu.nvidia.com}|- {name: gpu, exactly: {deviceClassName: gpu.nvidia.com}}|' "$work/workload.yaml"
fi
ksrc apply -f "$work/workload.yaml" | sed 's/^/  /'
# running NS: pods Running; allocated NS: claims with an allocation (either API).
running() { "$1" get pods -n "$2" --no-headers 2>/dev/null | grep -c ' Running ' || true; }
allocated() {
  "$1" get resourceclaims -n "$2" -o jsonpath='{range .items[*]}{.status.allocation.devices.results[0].device}{"\n"}{end}' 2>/dev/null |
    grep -c . || true
}
end=$(($(date +%s) + 120))
until [ "$(running ksrc ml-team)" -ge 4 ] && [ "$(running ksrc ml-serving)" -ge 1 ]; do
  [ "$(date +%s)" -lt "$end" ] || { ksrc get pods -A >&2; exit 1; }
  sleep 1
done
echo "  source: $(running ksrc ml-team) pods Running in ml-team, $(allocated ksrc ml-team) claims allocated; $(running ksrc ml-serving) in ml-serving"

step "The target's platform team provides dr-gpu-template (as in the drasync demo)"
kdst create namespace ml-team-dr | sed 's/^/  /'
cat <<'EOF' | kdst apply -f - | sed 's/^/  /'
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: dr-gpu-template, namespace: ml-team-dr}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.example.com}
EOF

step "Velero: versitygw, one bucket, a server for each cluster (tests/bench/velero/velero.sh up)"
show "tests/bench/velero/velero.sh up $work/velero SOURCE_KUBECONFIG TARGET_KUBECONFIG"
"$here/velero.sh" up "$work/velero" "$DS_KUBE_STATE/$src/admin.kubeconfig" "$DS_KUBE_STATE/$dst/admin.kubeconfig" 2>&1 | sed 's/^/  /'
echo "  $("$tools/velero" version --client-only | tr -s '\n' ' ')"

step "The resource modifier on the target: rename the device class, point gpu-app at dr-gpu-template"
cat >"$work/modifiers.yaml" <<'EOF'
version: v1
resourceModifierRules:
- conditions:
    groupResource: resourceclaims.resource.k8s.io
  patches:
  - {operation: test, path: /spec/devices/requests/0/deviceClassName, value: gpu.nvidia.com}
  - {operation: replace, path: /spec/devices/requests/0/deviceClassName, value: gpu.example.com}
- conditions:
    groupResource: resourceclaimtemplates.resource.k8s.io
  patches:
  - {operation: test, path: /spec/spec/devices/requests/0/deviceClassName, value: gpu.nvidia.com}
  - {operation: replace, path: /spec/spec/devices/requests/0/deviceClassName, value: gpu.example.com}
- conditions:
    groupResource: deployments.apps
    resourceNameRegex: "^gpu-app$"
  patches:
  - {operation: replace, path: /spec/template/spec/resourceClaims/0/resourceClaimTemplateName, value: dr-gpu-template}
EOF
# v1 puts a request's class under exactly
[ "$src_api" = v1beta1 ] || sed -i 's|requests/0/deviceClassName|requests/0/exactly/deviceClassName|' "$work/modifiers.yaml"
sed 's/^/  /' "$work/modifiers.yaml"
show "kubectl -n velero create configmap dra-rename --from-file=modifiers.yaml"
kdst -n velero create configmap dra-rename --from-file=modifiers.yaml="$work/modifiers.yaml" | sed 's/^/  /'

step "Backup at the source"
show "velero backup create dra --include-namespaces ml-team,ml-serving --wait"
t0=$EPOCHREALTIME
vsrc backup create dra --include-namespaces ml-team,ml-serving --wait 2>&1 | sed 's/^/  /'
vsrc backup describe dra --colorized=false 2>&1 | grep -E '^(Phase|Errors|Warnings|Total items|Items backed up|Resource List)' -A12 |
  sed -n '1,40p' | sed 's/^/  /'
until kdst -n velero get backups.velero.io dra >/dev/null 2>&1; do sleep 0.2; done
echo "  the target's server has the backup (its backup sync)"

step "Restore at the target, namespaces mapped, the resource modifier"
show "velero restore create dra --from-backup dra --namespace-mappings ml-team:ml-team-dr,ml-serving:ml-serving-dr --resource-modifier-configmap dra-rename --wait"
vdst restore create dra --from-backup dra --namespace-mappings ml-team:ml-team-dr,ml-serving:ml-serving-dr \
  --resource-modifier-configmap dra-rename --wait 2>&1 | sed 's/^/  /'
restore_s=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
phase=$(kdst -n velero get restores.velero.io dra -o jsonpath='{.status.phase}')
warnings=$(kdst -n velero get restores.velero.io dra -o jsonpath='{.status.warnings}')
errors=$(kdst -n velero get restores.velero.io dra -o jsonpath='{.status.errors}')
echo "  restore: $phase, warnings ${warnings:-0}, errors ${errors:-0}, $restore_s s from the backup's start"
vdst restore describe dra --details --colorized=false >"$work/restore-describe.txt" 2>&1 || true
sed -n '/^Warnings:/,/^Backup:/p' "$work/restore-describe.txt" | grep -v '^Backup:' | sed 's/^/  /'

step "The order Velero restored the objects in (its restore log: 'Attempting to restore')"
vdst restore logs dra >"$work/restore.log" 2>&1 || true
{ grep -o 'Attempting to restore [A-Za-z]*: [^ "]*' "$work/restore.log" || true; } | sed 's/Attempting to restore //; s/\.$//' |
  awk '{ printf "  %2d. %s\n", NR, $0 }'
{ grep -iE 'level=(error|warning)' "$work/restore.log" || true; } | sed 's/^.*msg=//' | sort -u | head -20 | sed 's/^/  log: /'

step "The target after the restore"
sleep 10 # the scheduler and the fake kubelet
kdst get deployments,replicasets,pods -n ml-team-dr -o wide 2>&1 | sed 's/^/  /'
kdst get pods -n ml-serving-dr -o wide 2>&1 | sed 's/^/  /'
kdst get resourceclaimtemplates,resourceclaims -A \
  -o custom-columns='KIND:.kind,NAMESPACE:.metadata.namespace,NAME:.metadata.name,CLASS:.spec.devices.requests[0].exactly.deviceClassName,TEMPLATE-CLASS:.spec.spec.devices.requests[0].exactly.deviceClassName,ALLOCATED:.status.allocation.devices.results[*].device' 2>&1 |
  grep -v '^KIND.*\bkube-' | sed 's/^/  /'
dra_failed=$(grep -cE 'error restoring resourceclaim(template)?s\.resource\.k8s\.io/' "$work/restore-describe.txt" || true)
pods=$(($(running kdst ml-team-dr) + $(running kdst ml-serving-dr)))
claims=$(($(allocated kdst ml-team-dr) + $(allocated kdst ml-serving-dr)))
echo "  $pods of 5 pods Running in ml-team-dr (2 of gpu-app, trainer-0, trainer-1) and ml-serving-dr (frontend); $claims claims allocated"
kdst get events -n ml-team-dr --field-selector type=Warning -o custom-columns='OBJECT:.involvedObject.name,REASON:.reason,MESSAGE:.message' 2>/dev/null |
  head -12 | sed 's/^/  /'

# What it takes by hand when Velero restored no DRA object: the source's
# claims and templates out of the backup, converted to the target's API.
by_hand=0 hand_pods=-1 hand_claims=-1
missing=0
kdst -n ml-team-dr get resourceclaim shared-gpu >/dev/null 2>&1 || missing=1
kdst -n ml-serving-dr get resourceclaimtemplate gpu-template >/dev/null 2>&1 || missing=1
if [ "$missing" = 1 ]; then
  step "By hand: the claims and templates out of the backup tarball, v1beta1 -> v1, the class renamed"
  show "velero backup download dra -o dra.tar.gz"
  vsrc backup download dra -o "$work/dra.tar.gz" 2>&1 | sed 's/^/  /'
  mkdir -p "$work/tar"
  tar -xzf "$work/dra.tar.gz" -C "$work/tar"
  find "$work/tar/resources" -path '*resource.k8s.io*' -name '*.json' | sort | sed "s|$work/tar/|  |"
  show "python3 (v1beta1 -> v1: requests[].deviceClassName etc. under exactly; namespace and class mapped) | kubectl apply -f -"
  python3 - "$work/tar/resources" >"$work/by-hand.json" <<'EOF'
import json, os, sys
ns_map = {"ml-team": "ml-team-dr", "ml-serving": "ml-serving-dr"}
# ExactDeviceRequest's fields in v1; v1beta1 had them on the request itself.
exact = ("deviceClassName", "selectors", "allocationMode", "count", "adminAccess", "tolerations", "capacity")
def to_v1(spec):
    for r in spec.get("devices", {}).get("requests", []):
        if "firstAvailable" in r:
            continue
        e = r.pop("exactly", None) or {k: r.pop(k) for k in exact if k in r}
        if e.get("deviceClassName") == "gpu.nvidia.com":
            e["deviceClassName"] = "gpu.example.com"
        r["exactly"] = e
items = []
for root, _, files in os.walk(sys.argv[1]):
    # the backup holds each object twice: under the resource, and under
    # VERSION-preferredversion (the version the source served)
    if "resource.k8s.io" not in root or "/namespaces/" not in root or "-preferredversion" in root:
        continue
    for f in sorted(files):
        o = json.load(open(os.path.join(root, f)))
        m = o["metadata"]
        if m.get("ownerReferences"):  # generated from a template for a pod: the target makes its own
            continue
        o["apiVersion"] = "resource.k8s.io/v1"
        o["metadata"] = {"name": m["name"], "namespace": ns_map.get(m["namespace"], m["namespace"]),
                         **({"labels": m["labels"]} if m.get("labels") else {})}
        o.pop("status", None)
        to_v1(o["spec"]["spec"] if o["kind"] == "ResourceClaimTemplate" else o["spec"])
        items.append(o)
json.dump({"apiVersion": "v1", "kind": "List", "items": items}, sys.stdout, indent=1)
EOF
  by_hand=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["items"]))' "$work/by-hand.json")
  kdst apply -f "$work/by-hand.json" 2>&1 | sed 's/^/  /'
  end=$(($(date +%s) + 90))
  until [ "$(($(running kdst ml-team-dr) + $(running kdst ml-serving-dr)))" -ge 5 ]; do
    [ "$(date +%s)" -lt "$end" ] || break
    sleep 1
  done
  hand_pods=$(($(running kdst ml-team-dr) + $(running kdst ml-serving-dr)))
  hand_claims=$(($(allocated kdst ml-team-dr) + $(allocated kdst ml-serving-dr)))
  kdst get pods -n ml-team-dr -o wide 2>&1 | sed 's/^/  /'
  kdst get pods -n ml-serving-dr -o wide 2>&1 | sed 's/^/  /'
  kdst get resourceclaims -A -o custom-columns='NAMESPACE:.metadata.namespace,NAME:.metadata.name,CLASS:.spec.devices.requests[0].exactly.deviceClassName,ALLOCATED:.status.allocation.devices.results[*].device,RESERVED-FOR:.status.reservedFor[*].name' 2>&1 |
    sed 's/^/  /'
  echo "  after $by_hand objects written by hand: $hand_pods of 5 pods Running, $hand_claims claims allocated"
fi
echo
echo "RESULT velero_dra restore=$phase warnings=${warnings:-0} errors=${errors:-0} dra_failed=$dra_failed pods_running=$pods/5 claims_allocated=$claims by_hand=$by_hand hand_pods_running=$hand_pods/5 hand_claims_allocated=$hand_claims"
