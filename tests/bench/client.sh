#!/usr/bin/env bash
# scripts/bench.sh client [N] [ROUNDS]: the Kubernetes client's create rate
# against one local API server (tests/kube/cluster.sh), N ConfigMaps (default
# 2000) per measurement:
#   (a) the client's concurrent path, (b) the client serially,
#   (c) kubectl apply --server-side -f of the same objects.
# Both clients authenticate as the agents do inside a cluster: with a
# ServiceAccount token (kubeconfig user "token"), bound to a ClusterRole that
# allows only what the benchmark does. After an unmeasured warm-up, ROUNDS
# rounds (default 3) of (a), (b), (c) run in turn on the same cluster, each
# into namespaces of its own; the figures reported are the medians of the
# rounds. A last round with the API server and etcd confined to one CPU shows
# which side bounds each rate (not part of RESULT).
# Last line: RESULT concurrent_per_s=N serial_per_s=N kubectl_per_s=N speedup_vs_kubectl=X
set -euo pipefail
# shellcheck source=tests/bench/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.."
n=${1:-2000}
rounds=${2:-3}
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
state=$DS_KUBE_STATE/$name
admin=$state/admin.kubeconfig
kubectl_admin() { "$bin" kubectl --kubeconfig "$admin" "$@"; }

# The identity both clients use: a ServiceAccount with a token, as an agent
# running in the cluster has.
kubectl_admin apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: ServiceAccount
metadata: {name: drasync-bench, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: drasync-bench}
rules:
- apiGroups: [""]
  resources: [namespaces]
  verbs: [create, get]
- apiGroups: [""]
  resources: [configmaps]
  verbs: [create, get, list, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: drasync-bench}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: drasync-bench}
subjects:
- {kind: ServiceAccount, name: drasync-bench, namespace: default}
EOF
kubeconfig=$work/bench.kubeconfig
sa_kubeconfig drasync-bench 1h "$kubeconfig"

server_pids="$(cat "$state/pids/kube-apiserver") $(cat "$state/pids/etcd")"
cpu_ticks() { local t=0 p; for p in $server_pids; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo $t; }
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
cpus=$(nproc)
echo "machine: $cpus CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "auth: ServiceAccount token (default/drasync-bench); $n objects per measurement, $rounds rounds"

# round TAG COUNT: (a) and (b) through bench_client, then (c) kubectl; sets
# c, s and k to the three rates.
round() {
  local tag=$1 count=$2 t0 t1 c0 c1 got
  DS_BENCH_SERVER_PIDS=$server_pids "$build/tests/bench_client" "$kubeconfig" "$count" \
    "$work/manifest.json" "$tag" | tee "$work/out"
  c=$(sed -n 's/^concurrent_per_s=//p' "$work/out")
  s=$(sed -n 's/^serial_per_s=//p' "$work/out")

  "$bin" kubectl --kubeconfig "$kubeconfig" create namespace "bench-kubectl-$tag" >/dev/null
  t0=$(date +%s.%N)
  c0=$(cpu_ticks)
  "$bin" kubectl --kubeconfig "$kubeconfig" apply --server-side --field-manager drasync-bench \
    -f "$work/manifest.json" >/dev/null
  t1=$(date +%s.%N)
  c1=$(cpu_ticks)
  got=$(kubectl_admin -n "bench-kubectl-$tag" get configmaps \
    -l app.kubernetes.io/managed-by=drasync-bench -o name | wc -l)
  [ "$got" -eq "$count" ] || { echo "bench client: kubectl created $got of $count" >&2; exit 1; }
  k=$(python3 -c "print(round($count / ($t1 - $t0)))")
  printf 'kubectl apply --server-side: %d objects in %.3f s\n' "$count" "$(python3 -c "print($t1 - $t0)")"
  printf 'kubectl: CPU per object: API server + etcd %.2f ms\n' \
    "$(python3 -c "print(($c1 - $c0) * 1000 / $(getconf CLK_TCK) / $count)")"
  echo "kubectl_per_s=$k"
}

# A young API server is slower (small heap, controllers settling): warm
# every path up first, unmeasured.
echo "-- warm-up ($((n / 4)) objects each way, not counted)"
round warmup $((n / 4)) >/dev/null

conc=() ser=() kub=() ratios=()
for r in $(seq 1 "$rounds"); do
  echo "-- round $r"
  round "$r" "$n"
  conc+=("$c") ser+=("$s") kub+=("$k") ratios+=("$(python3 -c "print(f'{$c / $k:.2f}')")")
done
echo "-- rounds: concurrent ${conc[*]}; serial ${ser[*]}; kubectl ${kub[*]}; speedup ${ratios[*]}"

# Which side bounds the rates: the same round with the API server and etcd
# confined to one CPU and the clients to another. A rate that falls with the
# server's CPUs is the server's; one that does not is the client's own.
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
  for p in $server_pids; do
    for t in /proc/"$p"/task/*; do taskset -pc 0 "${t##*/}" >/dev/null; done
  done
  echo "-- API server and etcd on CPU 0 only, the clients on CPU 1"
  taskset -pc 1 $$ >/dev/null
  round pinned "$n" >"$work/pinned"
  sed -n -e '/^concurrent:.*objects in/p' -e '/^kubectl apply/p' "$work/pinned"
  echo "one server CPU: concurrent_per_s=$c kubectl_per_s=$k; all $cpus CPUs shared (medians above): concurrent_per_s=$(median "${conc[@]}") kubectl_per_s=$(median "${kub[@]}")"
fi
concurrent=$(median "${conc[@]}")
serial=$(median "${ser[@]}")
kubectl_rate=$(median "${kub[@]}")
speedup=$(python3 -c "print(f'{$concurrent / $kubectl_rate:.1f}')")
echo "RESULT concurrent_per_s=$concurrent serial_per_s=$serial kubectl_per_s=$kubectl_rate speedup_vs_kubectl=$speedup"
