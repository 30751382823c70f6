#!/usr/bin/env bash
# One real Kubernetes node on this host: Debian's containerd (1.6, the runc
# v2 shim, cgroupfs) and the kubelet built by tests/kube/kubelet/build.sh,
# both with private state under DIR, registered with a test cluster.
#
#   node.sh up DIR NAME KUBECONFIG   start containerd (socket DIR/containerd.sock,
#                                    root and state under DIR/containerd) and the
#                                    kubelet (root dir DIR/kubelet), which
#                                    registers node NAME with the API server of
#                                    KUBECONFIG (an admin's; the kubelet gets a
#                                    client certificate of its own, below);
#                                    returns when the node is Ready
#   node.sh import DIR ARCHIVE...    ctr -n k8s.io images import (docker or OCI
#                                    archives) into that containerd
#   node.sh down DIR                 stop the kubelet, every container and pod
#                                    sandbox (their shims), containerd; unmount
#                                    what they mounted under DIR; remove DIR
#
# The kubelet's identity is a client certificate for system:node:NAME in
# group system:nodes, signed by the cluster's CA (tests/kube/cluster.sh keeps
# it beside the admin kubeconfig, in pki/), with the system:node ClusterRole
# bound to it (the clusters authorize with RBAC only, no Node authorizer).
# What this host needs (hybrid cgroups, v1 controllers; podman works only
# with runc and cgroupfs): SystemdCgroup = false, cgroupDriver cgroupfs,
# cgroupsPerQOS false (no kubepods hierarchy), failCgroupV1 false, no swap
# check. Pods use the host network; containerd still reports its network
# ready only with a CNI configuration, so DIR/cni holds a bridge network
# (Debian's containernetworking-plugins) that no hostNetwork pod uses.
# The sandbox (pause) image is localhost/drasync-pause:VERSION, which the
# caller imports: the drasync image with `sleep infinity` as its entrypoint
# (no registry is reachable for registry.k8s.io/pause).
#
# Environment: DS_KUBE_BIN (kubectl), DS_KUBELET_BIN (default:
# tests/kube/kubelet/build.sh builds or reuses it), DS_NODE_PAUSE_IMAGE,
# DS_NODE_TIMEOUT (seconds to wait for Ready, default 120).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
die() {
  echo "node: $*" >&2
  exit 1
}
log() { echo "node: $*" >&2; }

# pid_of DIR NAME: the recorded process if it still runs and its command
# line names DIR.
pid_of() {
  local f=$1/pids/$2 pid
  [ -f "$f" ] || return 1
  pid=$(cat "$f")
  [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$1/" || return 1
  echo "$pid"
}

stop_pid() {
  local pid=$1 i
  kill -TERM "$pid" 2>/dev/null || return 0
  for i in $(seq 1 100); do
    [ -d "/proc/$pid" ] && ! grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
}

ctr_() { ctr --address "$DIR/containerd.sock" -n k8s.io "$@"; }

free_ports() {
  python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

cmd_up() {
  local name=$1 admin=$2 kubelet pki ca cakey server kctl ports kport hport i
  command -v containerd >/dev/null || die "containerd is not installed (apt-get install containerd; scripts/setup.sh)"
  [ -x /usr/lib/cni/bridge ] || die "no /usr/lib/cni/bridge (apt-get install containernetworking-plugins)"
  kubelet=${DS_KUBELET_BIN:-$("$repo/tests/kube/kubelet/build.sh")}
  [ -n "${DS_KUBE_BIN:-}" ] || die "DS_KUBE_BIN is not set"
  kctl() { "$DS_KUBE_BIN" kubectl --kubeconfig "$admin" "$@"; }
  pki=$(cd "$(dirname "$admin")" && pwd)/pki
  ca=$pki/ca.crt cakey=$pki/ca.key
  [ -r "$ca" ] && [ -r "$cakey" ] || die "no cluster CA at $pki (a tests/kube/cluster.sh cluster's)"
  server=$(kctl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
  mkdir -p "$DIR"/{pids,logs,containerd/root,containerd/state,kubelet/pki,kubelet/root,pod-logs,cni/conf,cni/state}
  echo "$name" >"$DIR/name"
  echo "$admin" >"$DIR/admin"
  local pause=${DS_NODE_PAUSE_IMAGE:-localhost/drasync-pause:latest}

  cat >"$DIR/containerd/config.toml" <<EOF
version = 2
root = "$DIR/containerd/root"
state = "$DIR/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.internal.v1.opt"]
[grpc]
  address = "$DIR/containerd.sock"
[ttrpc]
  address = "$DIR/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause"
  restrict_oom_score_adj = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$DIR/containerd/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$DIR/cni/conf"
EOF
  cat >"$DIR/cni/conf/10-drasync.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "drasync-node",
 "plugins": [{"type": "bridge", "bridge": "dsnode0", "isGateway": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.250.0/24"}]],
            "dataDir": "$DIR/cni/state"}}]}
EOF
  setsid containerd --config "$DIR/containerd/config.toml" </dev/null >"$DIR/logs/containerd.log" 2>&1 &
  echo $! >"$DIR/pids/containerd"
  for i in $(seq 1 100); do
    ctr_ version >/dev/null 2>&1 && break
    pid_of "$DIR" containerd >/dev/null || { tail -n 20 "$DIR/logs/containerd.log" >&2; die "containerd exited"; }
    sleep 0.1
  done
  ctr_ version >/dev/null 2>&1 || die "containerd did not answer on $DIR/containerd.sock (log: $DIR/logs/containerd.log)"
  log "containerd $(containerd --version | awk '{print $3}') on $DIR/containerd.sock"

  # The node's client certificate and kubeconfig.
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$DIR/kubelet/pki/client.key" 2>/dev/null
  openssl req -new -key "$DIR/kubelet/pki/client.key" -subj "/O=system:nodes/CN=system:node:$name" \
    -out "$DIR/kubelet/pki/client.csr" 2>/dev/null
  printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' \
    >"$DIR/kubelet/pki/client.ext"
  openssl x509 -req -in "$DIR/kubelet/pki/client.csr" -CA "$ca" -CAkey "$cakey" -CAcreateserial \
    -CAserial "$DIR/kubelet/pki/ca.srl" -days 2 -sha256 -extfile "$DIR/kubelet/pki/client.ext" \
    -out "$DIR/kubelet/pki/client.crt" 2>/dev/null
  cat >"$DIR/kubelet/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: "$server", certificate-authority: "$ca"}
users:
- name: node
  user: {client-certificate: "$DIR/kubelet/pki/client.crt", client-key: "$DIR/kubelet/pki/client.key"}
contexts:
- name: node
  context: {cluster: test, user: node}
current-context: node
EOF
  kctl create clusterrolebinding "drasync-node-$name" --clusterrole system:node \
    --user "system:node:$name" >/dev/null

  ports=$(free_ports 2)
  read -r kport hport <<<"$ports"
  cat >"$DIR/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $kport
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $hport
containerRuntimeEndpoint: unix://$DIR/containerd.sock
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failCgroupV1: false
failSwapOn: false
podLogsDir: $DIR/pod-logs
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: "$ca"}
authorization: {mode: AlwaysAllow}
evictionHard: {memory.available: "50Mi", nodefs.available: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
maxPods: 16
rotateCertificates: false
serverTLSBootstrap: false
EOF
  echo "$hport" >"$DIR/healthz-port"
  setsid "$kubelet" --config "$DIR/kubelet/config.yaml" --kubeconfig "$DIR/kubelet/kubeconfig" \
    --root-dir "$DIR/kubelet/root" --cert-dir "$DIR/kubelet/pki" \
    --hostname-override "$name" -v 2 </dev/null >"$DIR/logs/kubelet.log" 2>&1 &
  echo $! >"$DIR/pids/kubelet"
  local deadline=$(($(date +%s) + ${DS_NODE_TIMEOUT:-120}))
  until [ "$(kctl get node "$name" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; do
    if ! pid_of "$DIR" kubelet >/dev/null; then
      tail -n 30 "$DIR/logs/kubelet.log" >&2
      die "the kubelet exited (log: $DIR/logs/kubelet.log)"
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      kctl get node "$name" -o jsonpath='{range .status.conditions[*]}{.type}={.status} {.message}{"\n"}{end}' >&2 || true
      grep -E '^E' "$DIR/logs/kubelet.log" | tail -n 20 >&2 || true
      die "node $name not Ready after ${DS_NODE_TIMEOUT:-120}s (log: $DIR/logs/kubelet.log)"
    fi
    sleep 0.5
  done
  log "node $name Ready ($("$kubelet" --version 2>/dev/null), kubelet healthz on 127.0.0.1:$hport)"
}

cmd_import() {
  local a
  for a in "$@"; do
    ctr_ images import --all-platforms "$a" >&2 || die "ctr images import $a failed"
  done
}

cmd_down() {
  local pid name admin id m
  [ -d "$DIR" ] || return 0
  if pid=$(pid_of "$DIR" kubelet); then stop_pid "$pid"; fi
  if pid_of "$DIR" containerd >/dev/null; then
    # Every task (pod sandboxes and containers) killed and deleted, so
    # their shims exit with them.
    for id in $(ctr_ tasks ls -q 2>/dev/null); do
      ctr_ tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
    done
    sleep 0.5
    for id in $(ctr_ tasks ls -q 2>/dev/null); do
      ctr_ tasks delete -f "$id" >/dev/null 2>&1 || true
    done
    stop_pid "$(pid_of "$DIR" containerd)"
  fi
  # Shims of this containerd that outlived it.
  for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $DIR/containerd.sock" || true); do
    stop_pid "$pid"
  done
  # What the kubelet and containerd mounted (secrets, emptyDirs in memory,
  # overlay root filesystems, sandbox /dev/shm), deepest first.
  awk -v d="$DIR/" 'index($2, d) == 1 { print $2 }' /proc/self/mounts | sort -r |
    while read -r m; do umount -l "$m" 2>/dev/null || true; done
  if [ -s "$DIR/name" ] && [ -s "$DIR/admin" ] && [ -n "${DS_KUBE_BIN:-}" ]; then
    name=$(cat "$DIR/name")
    admin=$(cat "$DIR/admin")
    "$DS_KUBE_BIN" kubectl --kubeconfig "$admin" delete node "$name" --ignore-not-found --wait=false >/dev/null 2>&1 || true
    "$DS_KUBE_BIN" kubectl --kubeconfig "$admin" delete clusterrolebinding "drasync-node-$name" \
      --ignore-not-found >/dev/null 2>&1 || true
  fi
  rm -rf "$DIR"
}

cmd=${1:-}
DIR=${2:-}
[ -n "$cmd" ] && [ -n "$DIR" ] || { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
case $DIR in /*) ;; *) DIR=$(pwd)/$DIR ;; esac
shift 2
case $cmd in
up) [ $# -eq 2 ] || die "up DIR NAME KUBECONFIG"; cmd_up "$@" ;;
import) cmd_import "$@" ;;
down) cmd_down ;;
*) die "unknown command $cmd" ;;
esac
