#!/usr/bin/env bash
# Velero between two of the test clusters (tests/kube/cluster.sh), as its
# migration case sets it up: one object store, one bucket, a Velero server
# for the source (it backs up) and one for the target (it restores), both
# with a BackupStorageLocation "default" on that bucket (the target's
# ReadOnly). The servers are local processes against the clusters' admin
# kubeconfigs (`velero server --kubeconfig`), Velero's CRDs installed in
# each cluster (`velero install --crds-only --dry-run -o yaml | kubectl
# apply`), the AWS plugin in --plugin-dir; no node agent (no volumes).
# The test clusters have no kubelet: nothing of Velero runs as a pod.
#
#   velero.sh up WORK SOURCE_KUBECONFIG TARGET_KUBECONFIG
#       builds or reuses the tools (build.sh), starts versitygw (POSIX
#       backend, root WORK/store, bucket "velero") and both servers; returns
#       when both locations are Available. Writes WORK/velero.env (what
#       `velero.sh cli` and the callers read) and logs WORK/*.log.
#   velero.sh cli WORK source|target ARGS...   the velero CLI against that side
#   velero.sh rss WORK                         VmHWM (MB) of each server: "source=N target=N"
#   velero.sh down WORK                        stops the servers (their plugins) and the store
#
# Environment:
#   DS_KUBE_BIN          the control plane's multicall binary (its kubectl);
#                        default tests/kube/build.sh
#   DS_VELERO_SYNC_PERIOD  the target server's --backup-sync-period (default
#                        1s; Velero's own default is 1m). Velero 1.18 looks at
#                        the bucket once a minute whatever it says (its backup
#                        sync controller's period is a constant): a new backup
#                        reaches the target 0-60 s after it completed.
#   DS_VELERO_ARGS       more `velero server` flags for both servers
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)

die() {
  echo "velero.sh: $*" >&2
  exit 1
}

kube_bin() {
  if [ -n "${DS_KUBE_BIN:-}" ]; then echo "$DS_KUBE_BIN"; else "$repo/tests/kube/build.sh"; fi
}

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

# A process started by `setsid` leads its own process group: the server and
# the plugin processes it forks are stopped together.
stop_group() {
  local pidfile=$1 pid i
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- "-$pid" 2>/dev/null || true
    for i in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.2
    done
    kill -KILL -- "-$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
}

cmd=${1:-}
[ $# -ge 2 ] || die "usage: velero.sh up|cli|rss|down WORK ..."
work=$2
shift 2

case $cmd in
up)
  [ $# -eq 2 ] || die "usage: velero.sh up WORK SOURCE_KUBECONFIG TARGET_KUBECONFIG"
  src_kc=$1
  dst_kc=$2
  mkdir -p "$work"
  work=$(cd "$work" && pwd)
  tools=$("$here/build.sh")
  kbin=$(kube_bin)
  read -r s3_port m1 p1 m2 p2 <<<"$(free_ports 5)"
  access=velero-bench
  secret=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
  # The object store: versitygw's POSIX backend, metadata in xattrs.
  mkdir -p "$work/store"
  setsid "$tools/versitygw" --access "$access" --secret "$secret" --port "127.0.0.1:$s3_port" \
    --region us-east-1 --quiet posix "$work/store" </dev/null >"$work/versitygw.log" 2>&1 &
  echo $! >"$work/versitygw.pid"
  url=http://127.0.0.1:$s3_port
  for i in $(seq 1 100); do
    curl -s -o /dev/null "$url" && break
    kill -0 "$(cat "$work/versitygw.pid")" 2>/dev/null || { tail "$work/versitygw.log" >&2; die "versitygw exited"; }
    sleep 0.1
  done
  # One bucket, made through the S3 API (PUT Bucket, signed).
  curl -sSf --aws-sigv4 "aws:amz:us-east-1:s3" --user "$access:$secret" -X PUT "$url/velero" \
    -H "x-amz-content-sha256: $(printf '' | sha256sum | cut -d' ' -f1)" >/dev/null ||
    die "could not create the bucket velero in versitygw"
  umask 077
  printf '[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n' "$access" "$secret" >"$work/credentials"
  umask 022
  cat >"$work/velero.env" <<EOF
velero=$tools/velero
plugins=$tools/plugins
kbin=$kbin
s3_url=$url
s3_root=$work/store/velero
source_kc=$src_kc
target_kc=$dst_kc
EOF
  for side in source target; do
    if [ $side = source ]; then kc=$src_kc mport=$m1 pport=$p1 mode=ReadWrite; else kc=$dst_kc mport=$m2 pport=$p2 mode=ReadOnly; fi
    k() { "$kbin" kubectl --kubeconfig "$kc" "$@"; }
    "$tools/velero" install --crds-only --dry-run -o yaml >"$work/crds.yaml"
    k apply -f "$work/crds.yaml" >/dev/null
    k wait --for condition=established --timeout 60s -f "$work/crds.yaml" >/dev/null
    k create namespace velero --dry-run=client -o yaml | k apply -f - >/dev/null
    k apply -f - >/dev/null <<EOF
apiVersion: velero.io/v1
kind: BackupStorageLocation
metadata: {name: default, namespace: velero}
spec:
  provider: aws
  default: true
  accessMode: $mode
  objectStorage: {bucket: velero}
  config: {region: us-east-1, s3ForcePathStyle: "true", s3Url: "$url"}
EOF
    # What `velero install` would have made, at 0 replicas (the server runs
    # as a local process): Velero's pod restore action reads the image of
    # its restore helper from this Deployment, and a restore of any Pod
    # fails without it ("deployments.apps \"velero\" not found").
    k apply -f - >/dev/null <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: velero, namespace: velero, labels: {component: velero}}
spec:
  replicas: 0
  selector: {matchLabels: {deploy: velero}}
  template:
    metadata: {labels: {deploy: velero, component: velero}}
    spec:
      containers:
      - {name: velero, image: "velero/velero:$("$tools/velero" version --client-only | sed -n 's/^[[:space:]]*Version: //p')", command: [/velero], args: [server]}
EOF
    sync=1m
    [ $side = target ] && sync=${DS_VELERO_SYNC_PERIOD:-1s}
    mkdir -p "$work/$side-tmp"
    # TMPDIR: each server keeps its credentials files under it (os.TempDir()).
    # shellcheck disable=SC2086
    TMPDIR=$work/$side-tmp AWS_SHARED_CREDENTIALS_FILE=$work/credentials \
      setsid "$tools/velero" server --kubeconfig "$kc" --namespace velero \
      --plugin-dir "$tools/plugins" --metrics-address "127.0.0.1:$mport" \
      --profiler-address "127.0.0.1:$pport" --backup-sync-period "$sync" \
      --store-validation-frequency 10s --log-format text ${DS_VELERO_ARGS:-} \
      </dev/null >"$work/velero-$side.log" 2>&1 &
    echo $! >"$work/velero-$side.pid"
    echo "${side}_metrics=127.0.0.1:$mport" >>"$work/velero.env"
  done
  for side in source target; do
    if [ $side = source ]; then kc=$src_kc; else kc=$dst_kc; fi
    end=$(($(date +%s) + 120))
    until [ "$("$kbin" kubectl --kubeconfig "$kc" -n velero get backupstoragelocation default \
      -o jsonpath='{.status.phase}' 2>/dev/null)" = Available ]; do
      kill -0 "$(cat "$work/velero-$side.pid")" 2>/dev/null ||
        { tail -n 30 "$work/velero-$side.log" >&2; die "the $side's velero server exited"; }
      [ "$(date +%s)" -lt "$end" ] ||
        { tail -n 30 "$work/velero-$side.log" >&2; die "the $side's backup location is not Available after 120 s"; }
      sleep 0.5
    done
  done
  echo "velero.sh: versitygw at $url (bucket velero, $work/store), velero servers for the source and the target up ($tools)" >&2
  ;;
cli)
  [ $# -ge 1 ] || die "usage: velero.sh cli WORK source|target ARGS..."
  # shellcheck disable=SC1091
  . "$work/velero.env"
  side=$1
  shift
  case $side in source) kc=$source_kc ;; target) kc=$target_kc ;; *) die "cli: source or target, not $side" ;; esac
  exec "$velero" --kubeconfig "$kc" --namespace velero "$@"
  ;;
rss)
  out=""
  for side in source target; do
    pid=$(cat "$work/velero-$side.pid" 2>/dev/null || echo 0)
    kib=$(sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$pid/status" 2>/dev/null || true)
    out="$out${out:+ }$side=$(awk -v k="${kib:-0}" 'BEGIN { printf "%.0f", k / 1024 }')"
  done
  echo "$out"
  ;;
down)
  stop_group "$work/velero-source.pid"
  stop_group "$work/velero-target.pid"
  stop_group "$work/versitygw.pid"
  ;;
*) die "unknown command $cmd (up, cli, rss, down)" ;;
esac
