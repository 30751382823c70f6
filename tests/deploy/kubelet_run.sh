#!/usr/bin/env bash
# Both agents run as Pods on real nodes, installed by `helm install` (ctest
# deploy_kubelet, label image; fixtures kube_v1, kube_v1beta1, helm_bin,
# kubelet_bin):
#
#   - scripts/image.sh builds the image; its OCI archive
#     (build/image/drasync-VERSION.oci.tar) is imported into containerd with
#     `ctr -n k8s.io images import`, beside localhost/drasync-pause:VERSION
#     (the image with `sleep infinity` as entrypoint: the pod sandbox image,
#     as registry.k8s.io/pause is out of reach);
#   - one node per cluster (tests/deploy/node.sh: Debian's containerd, the
#     kubelet of tests/kube/kubelet built from the control plane's modules),
#     Ready: the target's on the v1 cluster, the source's on the v1beta1 one;
#   - a PersistentVolume (hostPath on that node, storage class drasync-node)
#     for each release's PVC, as a cluster's provisioner would give;
#   - `helm install --wait` of deploy/helm/drasync on each cluster with the
#     image's tag, hostNetwork (the nodes have no pod network) and a
#     nodeSelector for the real node (the fixtures' fake nodes run nothing);
#   - the pods Running and Ready (the kubelet ran the chart's probes), the
#     init container exited 0, the containers never restarted, /healthz and
#     /metrics answer on the node, a ConfigMap and a Deployment replicated
#     from the v1beta1 cluster's ml-team into the v1 cluster's ml-team-dr, no
#     403 in the agents' logs (the kubelet's pod log files);
#   - `helm uninstall`: the kubelet stops each pod within the grace period
#     (the container's exit code is not checked: containerd 1.6 does not log
#     it and the CRI status is gone with the pod).
#
# Environment: DS_KUBECONFIG_V1, DS_KUBECONFIG_V1BETA1, DS_KUBE_BIN,
# DS_HELM_BIN, DS_KUBELET_BIN. Skipped (77) without podman or containerd.
set -euo pipefail
for tool in podman buildah containerd ctr; do
  command -v "$tool" >/dev/null || {
    echo "kubelet_run: $tool is not installed (scripts/setup.sh installs it): skipped" >&2
    exit 77
  }
done
for v in DS_KUBECONFIG_V1 DS_KUBECONFIG_V1BETA1 DS_KUBE_BIN DS_HELM_BIN; do
  [ -n "${!v:-}" ] || {
    echo "kubelet_run: $v is not set" >&2
    exit 1
  }
done
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
chart=$repo/deploy/helm/drasync
src_k() { "$DS_KUBE_BIN" kubectl --kubeconfig "$DS_KUBECONFIG_V1BETA1" "$@"; }
dst_k() { "$DS_KUBE_BIN" kubectl --kubeconfig "$DS_KUBECONFIG_V1" "$@"; }
k_of() { if [ "$1" = source ]; then shift && src_k "$@"; else shift && dst_k "$@"; fi; }
kc_of() { if [ "$1" = source ]; then echo "$DS_KUBECONFIG_V1BETA1"; else echo "$DS_KUBECONFIG_V1"; fi; }
helm_() {
  local a=$1
  shift
  "$DS_HELM_BIN" --kubeconfig "$(kc_of "$a")" "$@"
}
run=(podman run --runtime runc --cgroup-manager cgroupfs
  --ulimit nofile=1024:1024 --ulimit nproc=1024:1024)

tmp=$(mktemp -d /tmp/ds-kubelet.XXXXXX)
id=$$
node_of() { echo "ds-kubelet-$1-$id"; }
cleanup() {
  local a
  for a in source target; do
    helm_ "$a" uninstall drasync -n drasync --wait --timeout 60s >/dev/null 2>&1 || true
  done
  for a in source target; do
    DS_KUBE_BIN=$DS_KUBE_BIN "$here/node.sh" down "$tmp/node-$a" || true
    k_of "$a" delete pv "drasync-$a-state-$id" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  done
  src_k delete namespace ml-team drasync --ignore-not-found --wait=false >/dev/null 2>&1 || true
  dst_k delete namespace ml-team-dr ml-team-dr-drill drasync --ignore-not-found --wait=false >/dev/null 2>&1 || true
  src_k wait --for=delete namespace/ml-team namespace/drasync --timeout=120s >/dev/null 2>&1 || true
  dst_k wait --for=delete namespace/ml-team-dr namespace/ml-team-dr-drill namespace/drasync \
    --timeout=120s >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
# shellcheck source=tap.sh
. "$here/tap.sh"

# ---- the image, and the sandbox image made from it ---------------------------
build=$("$repo/scripts/image.sh" 2>&1) || {
  echo "$build"
  echo "not ok - scripts/image.sh failed"
  exit 1
}
echo "$build" | tail -n 3
version=$(sed -n 's/^project(drasync VERSION \([0-9.]*\).*/\1/p' "$repo/CMakeLists.txt")
image=localhost/drasync:$version
archive=${DS_IMAGE_OUT:-$repo/build/image}/drasync-$version.oci.tar
[ -s "$archive" ] || {
  echo "not ok - no $archive"
  exit 1
}
pause=localhost/drasync-pause:$version
c=$(buildah from "$image")
buildah config --entrypoint '["sleep","infinity"]' --cmd '' "$c" 2>/dev/null
buildah commit -q "$c" "$pause" >/dev/null
buildah rm "$c" >/dev/null
podman save -q --format docker-archive -o "$tmp/pause.tar" "$pause"
ok "scripts/image.sh built $archive; the sandbox image $pause"

# ---- a real node on each cluster ----------------------------------------------
export DS_NODE_PAUSE_IMAGE=$pause
t0=$(date +%s)
for a in target source; do
  if ! out=$("$here/node.sh" up "$tmp/node-$a" "$(node_of "$a")" "$(kc_of "$a")" 2>&1); then
    echo "$out"
    notok "node.sh up (the $a's node): $(echo "$out" | tail -n 3)"
    exit 1
  fi
  echo "$out" | sed 's/^/# /'
  "$here/node.sh" import "$tmp/node-$a" "$archive" "$tmp/pause.tar" 2>&1 | sed 's/^/# /'
  names=$(ctr --address "$tmp/node-$a/containerd.sock" -n k8s.io images ls -q)
  if grep -qx "$image" <<<"$names" && grep -qx "$pause" <<<"$names"; then
    ok "node $(node_of "$a") Ready on the $a's cluster; containerd holds $image and $pause"
  else
    notok "containerd of $(node_of "$a") lacks $image or $pause: $names"
    exit 1
  fi
done
echo "# nodes Ready in $(($(date +%s) - t0)) s"

# ---- keys, values, the PersistentVolumes -------------------------------------
mkdir -p "$tmp/keys/target" "$tmp/keys/source"
for a in target source; do
  "${run[@]}" --rm --network none -v "$tmp/keys/$a:/out" --user 0:0 "$image" \
    "drasync-$a" keygen --out /out >/dev/null
done
grep -v '^#' "$tmp/keys/source/source.pub" | sed 's/^/prod-east /' >"$tmp/keys/authorized_sources"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
link_port=$(free_port)
# The test clusters run no kube-proxy: the `kubernetes` Service's address
# (10.0.0.1:443, what the kubelet puts in KUBERNETES_SERVICE_HOST/PORT)
# routes nowhere. The chart's env value names the API server itself.
declare -A api_host api_port
for a in target source; do
  server=$(k_of "$a" config view --minify -o jsonpath='{.clusters[0].cluster.server}')
  hostport=${server#https://}
  api_host[$a]=${hostport%:*}
  api_port[$a]=${hostport##*:}
done
declare -A metrics=([target]=$(free_port) [source]=$(free_port))
common() {
  cat <<YAML
image: {repository: localhost/drasync, tag: "$version"}
metricsPort: ${metrics[$1]}
hostNetwork: true
nodeSelector: {kubernetes.io/hostname: $(node_of "$1")}
env:
- {name: KUBERNETES_SERVICE_HOST, value: "${api_host[$1]}"}
- {name: KUBERNETES_SERVICE_PORT, value: "${api_port[$1]}"}
YAML
}
{
  common target
  cat <<YAML
target:
  enabled: true
  linkPort: $link_port
  persistence: {storageClass: drasync-node, size: 1Gi}
  config:
    namespaceMappings: {ml-team: ml-team-dr}
    sources:
    - {name: prod-east, namespaces: [ml-team], podSecurity: baseline}
YAML
} >"$tmp/target.yaml"
{
  common source
  cat <<YAML
source:
  enabled: true
  persistence: {storageClass: drasync-node, size: 1Gi}
  config:
    clusterName: prod-east
    target:
      endpoint: "tcp://127.0.0.1:$link_port"
      serverPublicKey: "$(grep -v '^#' "$tmp/keys/target/target.pub")"
    namespaces: [ml-team]
    schedule: {mode: watch}
  keys: {existingSecret: prod-east-source-key}
YAML
} >"$tmp/source.yaml"
for a in target source; do
  # The state directory as the image's user (65532:0) may write it.
  mkdir -p "$tmp/pv-$a"
  chown 65532:0 "$tmp/pv-$a"
  chmod 0770 "$tmp/pv-$a"
  k_of "$a" apply -f - >/dev/null <<YAML
apiVersion: v1
kind: PersistentVolume
metadata: {name: drasync-$a-state-$id}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: drasync-node
  persistentVolumeReclaimPolicy: Retain
  claimRef: {namespace: drasync, name: drasync-$a-state}
  hostPath: {path: "$tmp/pv-$a", type: Directory}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - {key: kubernetes.io/hostname, operator: In, values: ["$(node_of "$a")"]}
YAML
done

# ---- helm install ----------------------------------------------------------
for a in source target; do
  k_of "$a" wait --for=delete namespace/drasync --timeout=120s >/dev/null 2>&1 || true
done
dst_k wait --for=delete namespace/ml-team-dr namespace/ml-team-dr-drill --timeout=120s >/dev/null 2>&1 || true
src_k wait --for=delete namespace/ml-team --timeout=120s >/dev/null 2>&1 || true
src_k create namespace ml-team >/dev/null
src_k -n ml-team create configmap settings --from-literal=mode=fast >/dev/null
src_k -n ml-team create deployment web --image=registry.k8s.io/pause:3.10 >/dev/null
src_k create namespace drasync >/dev/null
src_k -n drasync create secret generic prod-east-source-key \
  --from-file="source.key=$tmp/keys/source/source.key" >/dev/null
t0=$(date +%s)
if out=$(helm_ target install drasync "$chart" -n drasync --create-namespace -f "$tmp/target.yaml" \
  --set-file "target.keys.secretKey=$tmp/keys/target/target.key" \
  --set-file "target.keys.authorizedSources=$tmp/keys/authorized_sources" --wait --timeout 90s 2>&1); then
  ok "helm install (target, v1 cluster) --wait: ready in $(($(date +%s) - t0)) s"
else
  notok "helm install (target): $out"
fi
t0=$(date +%s)
if out=$(helm_ source install drasync "$chart" -n drasync -f "$tmp/source.yaml" --wait --timeout 90s 2>&1); then
  ok "helm install (source, v1beta1 cluster) --wait: ready in $(($(date +%s) - t0)) s"
else
  notok "helm install (source): $out"
fi

for a in target source; do
  p=$(k_of "$a" -n drasync get pods -o name | sed -n "s#^pod/##p" | grep "^drasync-$a-" | head -n 1 || true)
  echo "$p" >"$tmp/pod-$a"
  if [ -z "$p" ]; then
    notok "no drasync-$a pod: $(k_of "$a" -n drasync get pods,pvc 2>&1)"
    continue
  fi
  k_of "$a" -n drasync get pod "$p" -o json >"$tmp/pod-$a.json"
  summary=$(python3 - "$tmp/pod-$a.json" "$(node_of "$a")" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
st, spec = p["status"], p["spec"]
errs = []
if spec.get("nodeName") != sys.argv[2]:
    errs.append("on node %s" % spec.get("nodeName"))
if st.get("phase") != "Running":
    errs.append("phase %s" % st.get("phase"))
ready = [c for c in st.get("conditions", []) if c["type"] == "Ready"]
if not ready or ready[0]["status"] != "True":
    errs.append("not Ready")
for c in st.get("initContainerStatuses", []):
    t = c.get("state", {}).get("terminated") or {}
    if t.get("exitCode") != 0:
        errs.append("init %s: %s" % (c["name"], c.get("state")))
for c in st.get("containerStatuses", []):
    if c.get("restartCount", 0) != 0:
        errs.append("%s restarted %d times" % (c["name"], c["restartCount"]))
    if "running" not in c.get("state", {}):
        errs.append("%s: %s" % (c["name"], c.get("state")))
print("; ".join(errs) if errs else "ok %s" % st["containerStatuses"][0]["imageID"])
EOF
  )
  if [ "${summary%% *}" = ok ]; then
    ok "pod $p Running and Ready on $(node_of "$a"), init container exit 0, no restart (${summary#ok })"
  else
    notok "pod $p: $summary"
    k_of "$a" -n drasync describe pod "$p" | tail -n 15 | sed 's/^/#   /'
    logs "$a" 15 | sed 's/^/#   /'
  fi
done
for a in target source; do
  port=${metrics[$a]}
  # the page whole first: `curl | grep -q` fails under pipefail when grep stops
  # reading at its first match while curl still writes (curl: (23))
  page=$(curl -fsS "http://127.0.0.1:$port/metrics" 2>&1) || page=""
  if curl -fsS -o /dev/null "http://127.0.0.1:$port/healthz" &&
    grep -q "^drasync_${a}_" <<<"$page"; then
    ok "drasync-$a's pod answers /healthz and /metrics on the node (port $port)"
  else
    notok "drasync-$a's pod: no /healthz or /metrics on 127.0.0.1:$port"
  fi
done

# wait_get KIND NAME: the object appears on the target, marked as drasync's.
wait_get() {
  local i json
  for i in $(seq 1 150); do
    if json=$(dst_k -n ml-team-dr get "$1" "$2" -o json 2>/dev/null) &&
      [ "$(python3 -c 'import json,sys; print(json.load(sys.stdin)["metadata"].get("annotations",{}).get("drasync.io/source-cluster",""))' <<<"$json")" = prod-east ]; then
      return 0
    fi
    sleep 0.2
  done
  return 1
}
# logs AGENT [N]: the agent container's log as the kubelet keeps it (what
# `kubectl logs` serves; the API server cannot reach these kubelets: the
# clusters give it no kubelet client certificate).
logs() {
  local f
  f=$(ls "$tmp/node-$1/pod-logs"/drasync_drasync-"$1"-*/"drasync-$1"/*.log 2>/dev/null | tail -n 1)
  [ -n "$f" ] && tail -n "${2:-20}" "$f" || echo "(no log file for drasync-$1)"
}
for obj in configmap/settings deployment/web; do
  if wait_get "${obj%%/*}" "${obj#*/}"; then
    ok "$obj replicated from the v1beta1 cluster's ml-team into the v1 cluster's ml-team-dr, pod to pod"
  else
    notok "$obj did not reach ml-team-dr: $(logs target 10; logs source 10)"
  fi
done
for a in source target; do
  if ! logs "$a" 100000 | grep -q "${a}_cluster"; then
    notok "drasync-$a's pod log (the kubelet's) lacks its ${a}_cluster line: $(logs "$a" 5)"
  elif logs "$a" 100000 | grep -Eq 'status=403|Forbidden|forbidden'; then
    notok "drasync-$a met a 403 with the chart's RBAC: $(logs "$a" 100000 | grep -E 'status=403|Forbidden|forbidden' | head -n 5)"
  else
    ok "drasync-$a's log (the kubelet's pod log) has no 403"
  fi
done

# ---- helm uninstall: the kubelet stops the agents ----------------------------
for a in source target; do
  p=$(cat "$tmp/pod-$a")
  [ -n "$p" ] || continue
  t0=$(date +%s)
  helm_ "$a" uninstall drasync -n drasync --wait --timeout 90s >/dev/null 2>&1 || true
  if k_of "$a" -n drasync wait --for=delete "pod/$p" --timeout=30s >/dev/null 2>&1; then
    ok "helm uninstall (the $a): the kubelet stopped pod $p in $(($(date +%s) - t0)) s (grace 30 s)"
  else
    notok "helm uninstall (the $a): pod $p still there after 30 s"
  fi
done
exit "$fail"
