#!/usr/bin/env bash
# The agents' identities as an operator installs them, for the e2e suite
# (tests/support/tu_rbac.h runs it): the ServiceAccounts, ClusterRoles and
# bindings of deploy/kustomize/source on the source cluster and of
# deploy/kustomize/target on the target cluster, rendered with an overlay
# that names the test's namespaces as the bases' comments say (every selected
# namespace in selected-namespaces.yaml and in drasync-source-cluster's
# resourceNames; every managed namespace, with its drill namespace NS-drill,
# in managed-namespaces.yaml and in drasync-target-cluster's resourceNames),
# and a kubeconfig per agent holding a TokenRequest token of its
# ServiceAccount.
#
#   shipped_rbac.sh install [OPTION...] DIR SRC_KUBECONFIG "SRC_NS..." DST_KUBECONFIG "DST_NS..."
#       writes DIR/source.kubeconfig and DIR/target.kubeconfig; creates the
#       managed namespaces DST_NS and DST_NS-drill (the target agent may not
#       create namespaces), not the source's (they are the source's own).
#       Options, the shipped components as their comments say to add them:
#         --source-cluster-wide   deploy/kustomize/source-cluster-wide (a
#                                 namespaceSelector: reads in every namespace;
#                                 SRC_NS then only waits for the reads there)
#         --target-deviceclasses  deploy/kustomize/target-deviceclasses
#                                 (dra.replicateDeviceClasses: true)
#   shipped_rbac.sh remove SRC_KUBECONFIG DST_KUBECONFIG "DST_NS..."
#       deletes what install created (the cluster-scoped objects at once, the
#       namespaces in the background)
#
# The cluster-scoped names are fixed (the shipped ones): ctest runs its users
# under RESOURCE_LOCK ds_deploy_namespaces. Environment: DS_KUBE_BIN.
set -euo pipefail
[ -n "${DS_KUBE_BIN:-}" ] || { echo "shipped_rbac: DS_KUBE_BIN is not set" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
deploy=$here/../../deploy
cluster_objects="clusterrolebinding/drasync-source clusterrole/drasync-source
clusterrolebinding/drasync-source-cluster clusterrole/drasync-source-cluster
clusterrolebinding/drasync-target-cluster clusterrole/drasync-target-cluster clusterrole/drasync-target
clusterrolebinding/drasync-source-namespaces clusterrole/drasync-source-namespaces
clusterrolebinding/drasync-target-deviceclasses clusterrole/drasync-target-deviceclasses"

kc() {
  local kubeconfig=$1
  shift
  "$DS_KUBE_BIN" kubectl --kubeconfig "$kubeconfig" "$@"
}

# yaml_list "a b": [a, b]
yaml_list() {
  local out="" n
  for n in $1; do out="${out:+$out, }$n"; done
  echo "[$out]"
}

# render BASE OVERLAY-DIR OUT.json: kustomize, then only the identity kinds
# (the Deployments need an image and kubelets the test clusters have not),
# Namespaces first.
render() {
  kc "$kubeconfig_any" kustomize "$1" >"$2.yaml"
  kc "$kubeconfig_any" create --dry-run=client -o json -f "$2.yaml" >"$2.raw.json"
  python3 - "$2.raw.json" "$2.json" <<'PY'
import json, sys
keep = {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
text, dec, objs, i = open(sys.argv[1]).read(), json.JSONDecoder(), [], 0
while True:
    while i < len(text) and text[i].isspace():
        i += 1
    if i >= len(text):
        break
    o, i = dec.raw_decode(text, i)
    objs += o["items"] if o.get("kind") == "List" else [o]
items = sorted((o for o in objs if o["kind"] in keep), key=lambda o: o["kind"] != "Namespace")
json.dump({"apiVersion": "v1", "kind": "List", "items": items}, open(sys.argv[2], "w"))
PY
}

# kubeconfig_for ADMIN-KUBECONFIG SA OUT: a kubeconfig with a token of drasync/SA.
kubeconfig_for() {
  local admin=$1 sa=$2 out=$3 server ca token
  server=$(kc "$admin" config view --raw --minify -o jsonpath='{.clusters[0].cluster.server}')
  ca=$(kc "$admin" config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
  token=$(kc "$admin" -n drasync create token "$sa" --duration=1h)
  umask 077
  cat >"$out" <<KC
apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: "$server", certificate-authority-data: "$ca"}
users:
- name: $sa
  user: {token: "$token"}
contexts:
- name: $sa
  context: {cluster: test, user: $sa}
current-context: $sa
KC
}

# wait_terminated KUBECONFIG NS: until NS, when it is being deleted, is gone.
wait_terminated() {
  if [ "$(kc "$1" get namespace "$2" -o jsonpath='{.status.phase}' 2>/dev/null || true)" = Terminating ]; then
    kc "$1" wait --for=delete "namespace/$2" --timeout=120s >/dev/null 2>&1 || true
  fi
}

cmd_install() {
  local cluster_wide=0 deviceclasses=0
  while [ $# -gt 0 ]; do
    case "$1" in
    --source-cluster-wide) cluster_wide=1; shift ;;
    --target-deviceclasses) deviceclasses=1; shift ;;
    --*) echo "shipped_rbac: unknown option $1" >&2; exit 2 ;;
    *) break ;;
    esac
  done
  [ $# -eq 5 ] || { echo "usage: $0 install [OPTION...] DIR SRC NS DST NS" >&2; exit 2; }
  local dir=$1 src=$2 src_ns=$3 dst=$4 dst_ns=$5 n
  kubeconfig_any=$src
  mkdir -p "$dir/rbac"
  # A namespace of an earlier run may still be terminating.
  for k in "$src" "$dst"; do wait_terminated "$k" drasync; done
  for n in $dst_ns; do
    wait_terminated "$dst" "$n"
    wait_terminated "$dst" "$n-drill"
  done

  # ---- source: the base, its RoleBinding per selected namespace -----------
  cp -r "$deploy/kustomize/source" "$dir/rbac/source-base"
  mkdir -p "$dir/rbac/source"
  if [ $cluster_wide = 1 ]; then
    # The component as its comment says: the base, untouched, and the
    # component (which removes the base's per-namespace grants).
    cp -r "$deploy/kustomize/source-cluster-wide" "$dir/rbac/source-cluster-wide"
    cat >"$dir/rbac/source/kustomization.yaml" <<YAML
resources: [../source-base]
components: [../source-cluster-wide]
YAML
  else
    : >"$dir/rbac/source-base/selected-namespaces.yaml"
    for n in $src_ns; do
      { echo "---"; sed "s/namespace: ml-team\$/namespace: $n/" "$deploy/kustomize/source/selected-namespaces.yaml"; } \
        >>"$dir/rbac/source-base/selected-namespaces.yaml"
    done
    cat >"$dir/rbac/source/kustomization.yaml" <<YAML
resources: [../source-base]
patches:
- target: {group: rbac.authorization.k8s.io, kind: ClusterRole, name: drasync-source-cluster}
  patch: |-
    - {op: test, path: /rules/0/resources, value: [namespaces]}
    - {op: test, path: /rules/0/resourceNames, value: [ml-team]}
    - {op: replace, path: /rules/0/resourceNames, value: $(yaml_list "$src_ns")}
YAML
  fi
  render "$dir/rbac/source" "$dir/rbac/source-rendered"

  # ---- target: the base, a Namespace and RoleBinding per managed namespace
  # and per drill namespace -------------------------------------------------
  cp -r "$deploy/kustomize/target" "$dir/rbac/target-base"
  : >"$dir/rbac/target-base/managed-namespaces.yaml"
  local names=""
  for n in $dst_ns; do
    { echo "---"; sed "s/ml-team-dr/$n/g" "$deploy/kustomize/target/managed-namespaces.yaml"; } \
      >>"$dir/rbac/target-base/managed-namespaces.yaml"
    names="$names $n $n-drill"
  done
  mkdir -p "$dir/rbac/target"
  cat >"$dir/rbac/target/kustomization.yaml" <<YAML
resources: [../target-base]
patches:
- target: {group: rbac.authorization.k8s.io, kind: ClusterRole, name: drasync-target-cluster}
  patch: |-
    - {op: test, path: /rules/0/resources, value: [namespaces]}
    - {op: test, path: /rules/0/resourceNames, value: [ml-team-dr, ml-team-dr-drill]}
    - {op: replace, path: /rules/0/resourceNames, value: $(yaml_list "$names")}
YAML
  if [ $deviceclasses = 1 ]; then
    cp -r "$deploy/kustomize/target-deviceclasses" "$dir/rbac/target-deviceclasses"
    echo "components: [../target-deviceclasses]" >>"$dir/rbac/target/kustomization.yaml"
  fi
  render "$dir/rbac/target" "$dir/rbac/target-rendered"

  kc "$src" apply -f "$dir/rbac/source-rendered.json" >/dev/null
  kc "$dst" apply -f "$dir/rbac/target-rendered.json" >/dev/null
  kubeconfig_for "$src" drasync-source "$dir/source.kubeconfig"
  kubeconfig_for "$dst" drasync-target "$dir/target.kubeconfig"
  # The tokens authenticate as the ServiceAccounts, and the bindings are in
  # force before the agents start (the authorizer's cache follows them).
  local who
  who=$(kc "$dir/source.kubeconfig" auth whoami -o jsonpath='{.status.userInfo.username}')
  [ "$who" = system:serviceaccount:drasync:drasync-source ] || { echo "source token is $who" >&2; exit 1; }
  who=$(kc "$dir/target.kubeconfig" auth whoami -o jsonpath='{.status.userInfo.username}')
  [ "$who" = system:serviceaccount:drasync:drasync-target ] || { echo "target token is $who" >&2; exit 1; }
  for n in $src_ns; do
    for _ in $(seq 1 50); do
      [ "$(kc "$dir/source.kubeconfig" auth can-i list secrets -n "$n" 2>/dev/null)" = yes ] && break
      sleep 0.1
    done
  done
  for n in $dst_ns; do
    for _ in $(seq 1 50); do
      [ "$(kc "$dir/target.kubeconfig" auth can-i create deployments.apps -n "$n" 2>/dev/null)" = yes ] && break
      sleep 0.1
    done
  done
  if [ $deviceclasses = 1 ]; then
    for _ in $(seq 1 50); do
      [ "$(kc "$dir/target.kubeconfig" auth can-i create deviceclasses.resource.k8s.io 2>/dev/null)" = yes ] && break
      sleep 0.1
    done
  fi
}

cmd_remove() {
  local src=$1 dst=$2 dst_ns=$3 k o n
  for k in "$src" "$dst"; do
    for o in $cluster_objects; do kc "$k" delete "$o" --ignore-not-found >/dev/null 2>&1 || true; done
    kc "$k" delete namespace drasync --ignore-not-found --wait=false >/dev/null 2>&1 || true
  done
  for n in $dst_ns; do
    kc "$dst" delete namespace "$n" "$n-drill" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  done
}

case "${1:-}" in
install) shift; cmd_install "$@" ;;
remove) shift; [ $# -eq 3 ] || { echo "usage: $0 remove SRC DST NS" >&2; exit 2; }; cmd_remove "$@" ;;
*) echo "usage: $0 install|remove ..." >&2; exit 2 ;;
esac
