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
agent=${DS_BENCH_TARGET_AGENT:-$build/agent-target/drasync-target}
bench_start target "$agent"
# The agent's identity, as inside a cluster: a ServiceAccount token.
bench_identity drasync-target '["*"]'
# The DeviceClass the objects' claims name.
kubectl_admin apply -f - >/dev/null <<'YAML'
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec: {}
YAML
kubeconfig=$work/agent.kubeconfig

echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
# shellcheck disable=SC2086
"$build/tests/bench_target" --agent "$agent" --loadgen "$loadgen" --kube-bin "$bin" \
  --kubeconfig "$kubeconfig" --admin-kubeconfig "$admin" --work "$work" \
  --mixed "$mixed" ${DS_BENCH_TARGET_ARGS:-}
