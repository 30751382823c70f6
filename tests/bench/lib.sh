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
