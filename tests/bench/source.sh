#!/usr/bin/env bash
# scripts/bench.sh source [MIXED] [CONFIGMAPS]: the exporter, `drasync-source
# run` (schedule: once) as a real process, against one local API server
# (tests/kube/cluster.sh, resource.k8s.io/v1) and a target hosted by
# tests/bench/bench_source.c (an in-process ds_receiver over CURVE behind a
# relay that counts the bytes on the wire):
#   (a) first pass over MIXED objects (default 10000: Deployments,
#       StatefulSets, headless Services, Secrets, ConfigMaps, ServiceAccounts,
#       ResourceClaimTemplates, ResourceClaims, bare Pods, in 10 namespaces):
#       objects/s from the agent's start to its exit with every record
#       acknowledged, and its peak RSS;
#   (b) one ConfigMap changed, the agent run again: records and bytes sent;
#   (c) first pass over CONFIGMAPS ConfigMaps (default 100000, 512 bytes of
#       data each, 4 namespaces), fresh state: the agent's peak RSS.
# The objects are made by tests/bench/loadgen (client-go, built here into the
# build directory) as the cluster admin; the agent reads as a ServiceAccount
# allowed only get/list/watch, as it would inside a cluster.
# Extra arguments for bench_source go in DS_BENCH_SOURCE_ARGS (e.g.
# "--workers 64 --log-level debug").
# Last line: RESULT first_pass_per_s=N one_change_records=N one_change_bytes=N rss_mb_100k=N
set -euo pipefail
# shellcheck source=tests/bench/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.."
mixed=${1:-10000}
configmaps=${2:-100000}
build=${DS_BUILD_DIR:-build/bench}
cluster_sh=${DS_CLUSTER_SH:-tests/kube/cluster.sh}
agent=$build/agent-source/drasync-source
[ -x "$cluster_sh" ] || { echo "bench source: no $cluster_sh (the control-plane fixtures)" >&2; exit 2; }
[ -x "$build/tests/bench_source" ] || { echo "bench source: no $build/tests/bench_source (build with -DDS_BUILD_TESTS=ON)" >&2; exit 2; }
if ! "$agent" --help 2>/dev/null | grep -q '^  run '; then
  echo "bench source: $agent has no 'run' command yet" >&2
  exit 2
fi

# The generator: built from tests/bench/loadgen/go.mod and go.sum only (the
# module cache holds what they name; no download).
loadgen=$(cd "$build" && pwd)/loadgen
(cd tests/bench/loadgen && GOFLAGS="-mod=readonly -buildvcs=false" go build -o "$loadgen" .) ||
  { echo "bench source: could not build tests/bench/loadgen" >&2; exit 1; }

bin=${DS_KUBE_BIN:-}
if [ -z "$bin" ]; then
  bin=$(tests/kube/build.sh)
fi
export DS_KUBE_BIN=$bin
export DS_KUBE_STATE=${DS_KUBE_STATE:-/tmp/drasync-kube}
name=bench-source-$$
work=$(mktemp -d /tmp/ds-bench-source-XXXXXX)
cleanup() {
  "$cluster_sh" down "$name" >/dev/null 2>&1 || true
  if [ -n "${DS_BENCH_KEEP:-}" ]; then echo "bench source: kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
"$cluster_sh" up "$name" --dra-api v1 >/dev/null
state=$DS_KUBE_STATE/$name
admin=$state/admin.kubeconfig
kubectl_admin() { "$bin" kubectl --kubeconfig "$admin" "$@"; }

# The agent's identity: a ServiceAccount token that may only read.
kubectl_admin apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: ServiceAccount
metadata: {name: drasync-source, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: drasync-source-bench}
rules:
- apiGroups: ["*"]
  resources: ["*"]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: drasync-source-bench}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: drasync-source-bench}
subjects:
- {kind: ServiceAccount, name: drasync-source, namespace: default}
EOF
kubeconfig=$work/agent.kubeconfig
sa_kubeconfig drasync-source 2h "$kubeconfig"

echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
# shellcheck disable=SC2086
"$build/tests/bench_source" --agent "$agent" --loadgen "$loadgen" \
  --kubeconfig "$kubeconfig" --admin-kubeconfig "$admin" --work "$work" \
  --mixed "$mixed" --configmaps "$configmaps" ${DS_BENCH_SOURCE_ARGS:-}
