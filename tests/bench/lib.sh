# Shared by the benchmark scripts (sourced, not run).

# sa_kubeconfig SA DURATION OUT: a kubeconfig at OUT (mode 0600) that
# authenticates as ServiceAccount default/SA with a token of DURATION, as an
# agent inside a cluster does. Needs $state (the cluster's state directory)
# and kubectl_admin.
sa_kubeconfig() {
  local sa=$1 duration=$2 out=$3 token
  token=$(kubectl_admin -n default create token "$sa" --duration "$duration")
  (
    umask 077
    cat >"$out" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: bench
  cluster:
    server: $(cat "$state/server")
    certificate-authority: $state/pki/ca.crt
users:
- name: $sa
  user:
    token: $token
contexts:
- name: bench
  context: {cluster: bench, user: $sa}
current-context: bench
KUBECONFIG
  )
}

# bench_start WHAT AGENT [DRIVER]: the set-up every cluster benchmark shares.
# Checks the control-plane fixtures, DRIVER (default $build/tests/bench_WHAT;
# "-": the script drives the agents itself) and AGENT's `run`;
# builds tests/bench/loadgen into $build; starts one cluster (resource.k8s.io
# v1) named bench-WHAT-PID, removed on exit with the work directory (kept
# with DS_BENCH_KEEP). Needs $build; sets cluster_sh, loadgen, bin, name,
# work, state, admin and kubectl_admin.
bench_start() {
  local what=$1 agent=$2 driver=${3:-$build/tests/bench_$1}
  cluster_sh=${DS_CLUSTER_SH:-tests/kube/cluster.sh}
  [ -x "$cluster_sh" ] || { echo "bench $what: no $cluster_sh (the control-plane fixtures)" >&2; exit 2; }
  [ "$driver" = - ] || [ -x "$driver" ] ||
    { echo "bench $what: no $driver (build with -DDS_BUILD_TESTS=ON)" >&2; exit 2; }
  if ! "$agent" --help 2>/dev/null | grep -q '^  run '; then
    echo "bench $what: $agent has no 'run' command yet" >&2
    exit 2
  fi
  # The generator: built from tests/bench/loadgen/go.mod and go.sum only (the
  # module cache holds what they name; no download).
  loadgen=$(cd "$build" && pwd)/loadgen
  (cd tests/bench/loadgen && GOFLAGS="-mod=readonly -buildvcs=false" go build -o "$loadgen" .) ||
    { echo "bench $what: could not build tests/bench/loadgen" >&2; exit 1; }
  bin=${DS_KUBE_BIN:-}
  if [ -z "$bin" ]; then
    bin=$(tests/kube/build.sh)
  fi
  export DS_KUBE_BIN=$bin
  export DS_KUBE_STATE=${DS_KUBE_STATE:-/tmp/drasync-kube}
  name=bench-$what-$$
  # mktemp's template: six X's it replaces with a unique suffix.
  work=$(mktemp -d "/tmp/ds-bench-$what-XXXXXX")
  bench_what=$what
  trap bench_cleanup EXIT
  "$cluster_sh" up "$name" --dra-api v1 >/dev/null
  state=$DS_KUBE_STATE/$name
  admin=$state/admin.kubeconfig
}

# A benchmark that starts more (agents, a second cluster) defines
# bench_more_cleanup, which runs first.
bench_cleanup() {
  if declare -F bench_more_cleanup >/dev/null; then bench_more_cleanup || true; fi
  "$cluster_sh" down "$name" >/dev/null 2>&1 || true
  if [ -n "${DS_BENCH_KEEP:-}" ]; then echo "bench $bench_what: kept $work" >&2; else rm -rf "$work"; fi
}

kubectl_admin() { "$bin" kubectl --kubeconfig "$admin" "$@"; }

# bench_identity SA VERBS: ServiceAccount default/SA, bound to a ClusterRole
# SA-bench allowing VERBS (a YAML list, e.g. "[get, list, watch]") on every
# resource, and a kubeconfig for it at $work/agent.kubeconfig (token 2h).
bench_identity() {
  local sa=$1 verbs=$2
  kubectl_admin apply -f - >/dev/null <<YAML
apiVersion: v1
kind: ServiceAccount
metadata: {name: $sa, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: $sa-bench}
rules:
- apiGroups: ["*"]
  resources: ["*"]
  verbs: $verbs
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: $sa-bench}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: $sa-bench}
subjects:
- {kind: ServiceAccount, name: $sa, namespace: default}
YAML
  sa_kubeconfig "$sa" 2h "$work/agent.kubeconfig"
}
