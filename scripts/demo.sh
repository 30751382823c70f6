#!/usr/bin/env bash
# The demo: two real local Kubernetes control planes (built from Go modules),
# a GPU workload on the "source" cluster (resource.k8s.io/v1beta1 as a
# 1.32/1.33 cluster serves it, NVIDIA-named DeviceClass), and its replication
# to the "target" cluster (resource.k8s.io/v1, another driver's DeviceClass)
# through drasync's import pipeline: selection, sanitizing, namespace and DRA
# mapping, version conversion. The pods then run on the target with their
# claims allocated from the target's devices.
#
# Until the agents' `run` commands exist, the objects travel as
# `kubectl get -o json` output through `drasync-target plan` and are applied
# with server-side apply under drasync's field manager; the pipeline is the
# one the importer calls.
#
#   scripts/demo.sh [--keep]     --keep leaves both clusters running
set -euo pipefail
cd "$(dirname "$0")/.."
keep=0
[ "${1:-}" = "--keep" ] && keep=1

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "Setting up (Debian packages, the Kubernetes binary from Go modules)"
scripts/setup.sh
BUILD=build/demo
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDS_BUILD_TESTS=OFF >/dev/null
cmake --build "$BUILD" -j"$(nproc)" >/dev/null
target_bin=$PWD/$BUILD/agent-target/drasync-target

export DS_KUBE_STATE=${DS_KUBE_STATE:-/tmp/drasync-demo}
cluster=tests/kube/cluster.sh
src=demo-source
dst=demo-target
work=$(mktemp -d /tmp/drasync-demo-XXXXXX)
cleanup() {
  rm -rf "$work"
  if [ "$keep" = 0 ]; then
    $cluster down "$src" >/dev/null 2>&1 || true
    $cluster down "$dst" >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT

step "Starting the source cluster (serves resource.k8s.io/v1beta1, like 1.32/1.33)"
$cluster up "$src" --dra-api v1beta1
$cluster nodes "$src" --nodes 2 --devices 4 --driver gpu.nvidia.com
step "Starting the target cluster (serves resource.k8s.io/v1)"
$cluster up "$dst" --dra-api v1
$cluster nodes "$dst" --nodes 2 --devices 4 --driver gpu.example.com
ksrc() { $cluster kubectl "$src" "$@"; }
kdst() { $cluster kubectl "$dst" "$@"; }

step "A GPU workload on the source: a template, a shared claim, a Deployment and two pods"
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
EOF
ksrc apply -f "$work/workload.yaml"
ksrc wait -n ml-team --for=jsonpath='{.status.phase}'=Running pod --all --timeout=180s
ksrc get pods,resourceclaims -n ml-team -o wide

step "The target's drasync configuration"
cat >"$work/target.yaml" <<'EOF'
apiVersion: drasync.io/v1alpha1
kind: TargetConfig
mode: migrate
namespaceMappings: {ml-team: ml-team-dr}
dra:
  resourceClaimTemplateMappings:
  - {objectType: Deployment, objectInstance: gpu-app, container: ALL, resourceClaimTemplate: dr-gpu-template}
  deviceClassMappings:
  - {from: gpu.nvidia.com, to: gpu.example.com}
EOF
cat "$work/target.yaml"

step "Exporting from the source and planning the import (report on stderr)"
ksrc get namespace ml-team -o json >"$work/ns.json"
ksrc get resourceclaimtemplates,resourceclaims,deployments,replicasets,pods -n ml-team -o json >"$work/objects.json"
"$target_bin" plan --config "$work/target.yaml" --source-cluster "$src" \
  -f "$work/ns.json" -f "$work/objects.json" -o yaml >"$work/plan.yaml"

step "What the target receives, converted to resource.k8s.io/v1"
awk 'BEGIN { RS = "---\n" } /\nkind: ResourceClaim/ { printf "---\n%s", $0 }' "$work/plan.yaml"

step "The target needs the template the rule maps to: its platform team provides it"
kdst create namespace ml-team-dr
cat <<'EOF' | kdst apply -f -
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

step "Applying the planned objects to the target (server-side apply, field manager drasync)"
kdst apply --server-side --field-manager=drasync --force-conflicts -f "$work/plan.yaml"
kdst wait -n ml-team-dr --for=jsonpath='{.status.phase}'=Running pod --all --timeout=180s

step "On the target: workloads Running, claims allocated from the target's devices"
kdst get deployments,pods -n ml-team-dr -o wide
kdst get resourceclaims -n ml-team-dr \
  -o custom-columns='CLAIM:.metadata.name,CLASS:.spec.devices.requests[0].exactly.deviceClassName,ALLOCATED:.status.allocation.devices.results[*].device,RESERVED-FOR:.status.reservedFor[*].name'
running=$(kdst get pods -n ml-team-dr --no-headers | grep -c Running || true)
allocated=$(kdst get resourceclaims -n ml-team-dr -o jsonpath='{range .items[*]}{.status.allocation.devices.results[0].device}{"\n"}{end}' | grep -c . || true)
echo
echo "demo: $running pods Running on the target, $allocated claims allocated on gpu.example.com devices"
[ "$running" -ge 4 ] && [ "$allocated" -ge 3 ] || { echo "demo: FAILED" >&2; exit 1; }
[ "$keep" = 1 ] && echo "demo: clusters kept; tests/kube/cluster.sh env $src|$dst prints their kubeconfigs"
echo "demo: OK"
