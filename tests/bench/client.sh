#!/usr/bin/env bash
# scripts/bench.sh client [N]: the Kubernetes client's create rate against one
# local API server (tests/kube/cluster.sh), N ConfigMaps (default 2000):
#   (a) the client's concurrent path, (b) the client serially,
#   (c) kubectl apply --server-side -f of the same objects.
# Last line: RESULT concurrent_per_s=N serial_per_s=N kubectl_per_s=N speedup_vs_kubectl=X
set -euo pipefail
cd "$(dirname "$0")/../.."
n=${1:-2000}
build=${DS_BUILD_DIR:-build/bench}
cluster_sh=${DS_CLUSTER_SH:-tests/kube/cluster.sh}
[ -x "$cluster_sh" ] || { echo "bench client: no $cluster_sh (the control-plane fixtures)" >&2; exit 2; }
bin=${DS_KUBE_BIN:-}
if [ -z "$bin" ]; then
  bin=$(tests/kube/build.sh)
fi
export DS_KUBE_BIN=$bin
export DS_KUBE_STATE=${DS_KUBE_STATE:-/tmp/drasync-kube}
name=bench-client-$$
work=$(mktemp -d)
cleanup() {
  "$cluster_sh" down "$name" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
"$cluster_sh" up "$name" --dra-api v1 >/dev/null
kubeconfig=$DS_KUBE_STATE/$name/admin.kubeconfig

state=$DS_KUBE_STATE/$name
server_pids="$(cat "$state/pids/kube-apiserver") $(cat "$state/pids/etcd")"
cpu_ticks() { local t=0 p; for p in $server_pids; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo $t; }
echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
DS_BENCH_SERVER_PIDS=$server_pids "$build/tests/bench_client" "$kubeconfig" "$n" "$work/manifest.json" | tee "$work/out"
concurrent=$(sed -n 's/^concurrent_per_s=//p' "$work/out")
serial=$(sed -n 's/^serial_per_s=//p' "$work/out")

"$bin" kubectl --kubeconfig "$kubeconfig" create namespace bench-kubectl >/dev/null
t0=$(date +%s.%N)
c0=$(cpu_ticks)
"$bin" kubectl --kubeconfig "$kubeconfig" apply --server-side --field-manager drasync-bench \
  -f "$work/manifest.json" >/dev/null
t1=$(date +%s.%N)
c1=$(cpu_ticks)
count=$("$bin" kubectl --kubeconfig "$kubeconfig" -n bench-kubectl get configmaps \
  -l app.kubernetes.io/managed-by=drasync-bench -o name | wc -l)
[ "$count" -eq "$n" ] || { echo "bench client: kubectl created $count of $n" >&2; exit 1; }
kubectl_rate=$(python3 -c "print(round($n / ($t1 - $t0)))")
printf 'kubectl apply --server-side: %d objects in %.3f s\n' "$n" "$(python3 -c "print($t1 - $t0)")"
printf 'kubectl: CPU per object: API server + etcd %.2f ms\n' "$(python3 -c "print(($c1 - $c0) * 1000 / $(getconf CLK_TCK) / $n)")"
speedup=$(python3 -c "print(f'{$concurrent / $kubectl_rate:.1f}')")
echo "RESULT concurrent_per_s=$concurrent serial_per_s=$serial kubectl_per_s=$kubectl_rate speedup_vs_kubectl=$speedup"
