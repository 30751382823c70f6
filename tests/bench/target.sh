#!/usr/bin/env bash
# scripts/bench.sh target [MIXED]: the importer, `drasync-target run` as a
# real process against one local API server (tests/kube/cluster.sh,
# resource.k8s.io/v1), fed over CURVE by a real ds_sender in
# tests/bench/bench_target.c:
#   apply:   MIXED objects (default 10000, loadgen's mixed mode as an exporter
#            reads and sanitizes them, in 10 namespaces) from the first send
#            until every one is applied in the target's ledger: objects/s;
#   ceiling: the same API server's server-side apply rate for the same
#            objects (as the importer transforms them) from tests/bench/loadgen
#            (client-go), with several worker counts; the best;
#   burst:   1,000 updates to 10 ConfigMaps through the sender while the
#            target runs: the API server's own count of ConfigMap writes.
# Both the agent and the ceiling's generator authenticate as the same
# ServiceAccount (allowed everything), as an importer inside a cluster.
# DS_BENCH_TARGET_AGENT: another drasync-target binary to measure.
# Extra arguments for bench_target go in DS_BENCH_TARGET_ARGS (e.g.
# "--ceiling-workers 32,128 --log-level warn").
# Last line: RESULT apply_per_s=N ceiling_per_s=N ratio=X burst_writes=N
set -euo pipefail
# shellcheck source=tests/bench/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.."
mixed=${1:-10000}
build=${DS_BUILD_DIR:-build/bench}
cluster_sh=${DS_CLUSTER_SH:-tests/kube/cluster.sh}
agent=${DS_BENCH_TARGET_AGENT:-$build/agent-target/drasync-target}
[ -x "$cluster_sh" ] || { echo "bench target: no $cluster_sh (the control-plane fixtures)" >&2; exit 2; }
[ -x "$build/tests/bench_target" ] || { echo "bench target: no $build/tests/bench_target (build with -DDS_BUILD_TESTS=ON)" >&2; exit 2; }
if ! "$agent" --help 2>/dev/null | grep -q '^  run '; then
  echo "bench target: $agent has no 'run' command yet" >&2
  exit 2
fi

# The generator: built from tests/bench/loadgen/go.mod and go.sum only (the
# module cache holds what they name; no download).
loadgen=$(cd "$build" && pwd)/loadgen
(cd tests/bench/loadgen && GOFLAGS="-mod=readonly -buildvcs=false" go build -o "$loadgen" .) ||
  { echo "bench target: could not build tests/bench/loadgen" >&2; exit 1; }

bin=${DS_KUBE_BIN:-}
if [ -z "$bin" ]; then
  bin=$(tests/kube/build.sh)
fi
export DS_KUBE_BIN=$bin
export DS_KUBE_STATE=${DS_KUBE_STATE:-/tmp/drasync-kube}
name=bench-target-$$
work=$(mktemp -d /tmp/ds-bench-target-XXXXXX)
cleanup() {
  "$cluster_sh" down "$name" >/dev/null 2>&1 || true
  if [ -n "${DS_BENCH_KEEP:-}" ]; then echo "bench target: kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
"$cluster_sh" up "$name" --dra-api v1 >/dev/null
state=$DS_KUBE_STATE/$name
admin=$state/admin.kubeconfig
kubectl_admin() { "$bin" kubectl --kubeconfig "$admin" "$@"; }

# The importer's identity: a ServiceAccount token that may write everything.
kubectl_admin apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: ServiceAccount
metadata: {name: drasync-target, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: drasync-target-bench}
rules:
- apiGroups: ["*"]
  resources: ["*"]
  verbs: ["*"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: drasync-target-bench}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: drasync-target-bench}
subjects:
- {kind: ServiceAccount, name: drasync-target, namespace: default}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec: {}
YAML
kubeconfig=$work/agent.kubeconfig
sa_kubeconfig drasync-target 2h "$kubeconfig"

echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
# shellcheck disable=SC2086
"$build/tests/bench_target" --agent "$agent" --loadgen "$loadgen" --kube-bin "$bin" \
  --kubeconfig "$kubeconfig" --admin-kubeconfig "$admin" --work "$work" \
  --mixed "$mixed" ${DS_BENCH_TARGET_ARGS:-}
