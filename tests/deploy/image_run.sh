#!/usr/bin/env bash
# Both agents run from the image (ctest deploy_image, label image; fixtures
# kube_v1 and kube_v1beta1). scripts/image.sh builds it (the mmdebstrap base
# cached), then podman runs it as the chart runs it: read-only root, user
# 65532:0, no capabilities, no new privileges, the configuration and the
# Secret's files mounted read-only where the chart mounts them
# (/etc/drasync/config, /etc/drasync/secret), the secret key copied to
# /run/drasync/keys with the chart's init-container command (`install -m
# 0400`), the state directory a podman volume, /tmp a tmpfs, the host's
# network to reach the test clusters. The source (on the v1beta1 cluster)
# replicates ml-team into ml-team-dr on the target (the v1 cluster), a
# change made while it watches arrives; /healthz, /readyz and /metrics answer
# from outside the containers; SIGTERM stops each with exit 0 within the
# chart's grace period (Kubernetes' default, 30 s). The image has no shell
# and no package manager (checked).
#
# Environment: DS_KUBECONFIG_V1, DS_KUBECONFIG_V1BETA1, DS_KUBE_BIN.
set -euo pipefail
command -v podman >/dev/null || {
  echo "image_run: podman is not installed (scripts/setup.sh installs it): skipped" >&2
  exit 77
}
for v in DS_KUBECONFIG_V1 DS_KUBECONFIG_V1BETA1 DS_KUBE_BIN; do
  [ -n "${!v:-}" ] || {
    echo "image_run: $v is not set" >&2
    exit 1
  }
done
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
grace=30
src_k() { "$DS_KUBE_BIN" kubectl --kubeconfig "$DS_KUBECONFIG_V1BETA1" "$@"; }
dst_k() { "$DS_KUBE_BIN" kubectl --kubeconfig "$DS_KUBECONFIG_V1" "$@"; }
# What this host's podman needs (crun fails on hybrid cgroups; the default
# ulimits are refused).
run=(podman run --runtime runc --cgroup-manager cgroupfs
  --ulimit nofile=1024:1024 --ulimit nproc=1024:1024)
sec=(--read-only --user 65532:0 --cap-drop all --security-opt no-new-privileges)

tmp=$(mktemp -d)
id=$$
names="ds-image-target-$id ds-image-source-$id"
cleanup() {
  local n
  for n in $names; do podman rm -f -t 0 "$n" >/dev/null 2>&1 || true; done
  podman volume rm -f "ds-image-target-state-$id" "ds-image-source-state-$id" >/dev/null 2>&1 || true
  src_k delete namespace ml-team --ignore-not-found --wait=false >/dev/null 2>&1 || true
  dst_k delete namespace ml-team-dr --ignore-not-found --wait=false >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
# shellcheck source=tap.sh
. "$here/tap.sh"

build=$("$repo/scripts/image.sh" 2>&1) || {
  echo "$build"
  echo "not ok - scripts/image.sh failed"
  exit 1
}
echo "$build"
version=$(sed -n 's/^project(drasync VERSION \([0-9.]*\).*/\1/p' "$repo/CMakeLists.txt")
image=localhost/drasync:$version
ok "scripts/image.sh built $image"

# ---- no shell, no package manager ------------------------------------------
for tool in /bin/sh /usr/bin/bash /usr/bin/apt-get /usr/bin/dpkg /usr/bin/perl; do
  if "${run[@]}" --rm "${sec[@]}" --network none "$image" "$tool" --version >/dev/null 2>&1; then
    notok "the image runs $tool"
  fi
done
[ "$fail" = 1 ] || ok "the image has no shell, apt, dpkg or perl"

# ---- keys, configuration, namespaces ----------------------------------------
mkdir -p "$tmp/target/config" "$tmp/target/secret" "$tmp/target/keys" "$tmp/target/kube" \
  "$tmp/source/config" "$tmp/source/secret" "$tmp/source/keys" "$tmp/source/kube"
"${run[@]}" --rm "${sec[@]}" --network none -v "$tmp/target/secret:/out" --user 0:0 "$image" \
  drasync-target keygen --out /out >/dev/null
"${run[@]}" --rm "${sec[@]}" --network none -v "$tmp/source/secret:/out" --user 0:0 "$image" \
  drasync-source keygen --out /out >/dev/null
grep -v '^#' "$tmp/source/secret/source.pub" | sed 's/^/prod-east /' >"$tmp/target/secret/authorized_sources"
# A Secret volume: files root's, mode 0444 (the chart's defaultMode).
chmod 0444 "$tmp"/*/secret/*
# The keys emptyDir: the agent's user writes it.
chown 65532:0 "$tmp/target/keys" "$tmp/source/keys"
cp "$DS_KUBECONFIG_V1" "$tmp/target/kube/kubeconfig"
cp "$DS_KUBECONFIG_V1BETA1" "$tmp/source/kube/kubeconfig"
chmod 0444 "$tmp"/*/kube/kubeconfig
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
link_port=$(free_port)
target_metrics=$(free_port)
source_metrics=$(free_port)
cat >"$tmp/target/config/target.yaml" <<YAML
apiVersion: drasync.io/v1alpha1
kind: TargetConfig
listen: tcp://127.0.0.1:$link_port
keys: {secretKeyFile: /run/drasync/keys/target.key, authorizedSources: /etc/drasync/secret/authorized_sources}
kubeconfig: /etc/drasync/kube/kubeconfig
stateDir: /var/lib/drasync
mode: standby
namespaceMappings: {ml-team: ml-team-dr}
sources:
- {name: prod-east, namespaces: [ml-team], podSecurity: baseline}
metrics: {listen: "127.0.0.1:$target_metrics"}
# the shared test cluster's drasync/drasync-ledger is no test's: none here
identity: {namespace: ds-noid-$link_port}
YAML
cat >"$tmp/source/config/source.yaml" <<YAML
apiVersion: drasync.io/v1alpha1
kind: SourceConfig
clusterName: prod-east
target: {endpoint: "tcp://127.0.0.1:$link_port", serverPublicKey: "$(grep -v '^#' "$tmp/target/secret/target.pub")"}
keys: {secretKeyFile: /run/drasync/keys/source.key}
kubeconfig: /etc/drasync/kube/kubeconfig
stateDir: /var/lib/drasync
namespaces: [ml-team]
schedule: {mode: watch}
metrics: {listen: "127.0.0.1:$source_metrics"}
YAML
chmod 0444 "$tmp"/*/config/*.yaml

src_k create namespace ml-team >/dev/null
src_k -n ml-team create configmap settings --from-literal=mode=fast >/dev/null
src_k -n ml-team create deployment web --image=registry.k8s.io/pause:3.10 >/dev/null

# start AGENT: the chart's init container, then the agent, detached.
start() {
  local agent=$1 d=$tmp/$1
  "${run[@]}" --rm "${sec[@]}" --network none \
    -v "$d/secret:/etc/drasync/secret:ro" -v "$d/keys:/run/drasync/keys" "$image" \
    install -m 0400 "/etc/drasync/secret/$agent.key" "/run/drasync/keys/$agent.key"
  "${run[@]}" -d --name "ds-image-$agent-$id" "${sec[@]}" --network host \
    -v "$d/config:/etc/drasync/config:ro" -v "$d/secret:/etc/drasync/secret:ro" \
    -v "$d/keys:/run/drasync/keys:ro" -v "$d/kube:/etc/drasync/kube:ro" \
    -v "ds-image-$agent-state-$id:/var/lib/drasync" --tmpfs /tmp:size=64m \
    "$image" "drasync-$agent" run --config "/etc/drasync/config/$agent.yaml" >/dev/null
}
# http_ok PORT PATH: answers 200 within 30 s.
http_ok() {
  local i
  for i in $(seq 1 150); do
    curl -fsS -o /dev/null "http://127.0.0.1:$1$2" 2>/dev/null && return 0
    sleep 0.2
  done
  return 1
}
start target
if http_ok "$target_metrics" /readyz; then
  ok "drasync-target run from the image is ready (/readyz from outside)"
else
  notok "drasync-target not ready: $(podman logs "ds-image-target-$id" 2>&1 | tail -n 20)"
fi
start source
if http_ok "$source_metrics" /readyz; then
  ok "drasync-source run from the image is ready (/readyz from outside)"
else
  notok "drasync-source not ready: $(podman logs "ds-image-source-$id" 2>&1 | tail -n 20)"
fi
for port in "$target_metrics" "$source_metrics"; do
  http_ok "$port" /healthz || notok "/healthz on $port does not answer 200"
  curl -fsS "http://127.0.0.1:$port/metrics" >"$tmp/metrics-$port" || notok "/metrics on $port"
done
grep -q '^drasync_target_' "$tmp/metrics-$target_metrics" &&
  grep -q '^drasync_source_' "$tmp/metrics-$source_metrics" &&
  ok "/healthz and /metrics answer from outside both containers" ||
  notok "/metrics lacks the agents' families"

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
for obj in configmap/settings deployment/web; do
  if wait_get "${obj%%/*}" "${obj#*/}"; then
    ok "$obj replicated from the v1beta1 cluster's ml-team into the v1 cluster's ml-team-dr"
  else
    notok "$obj did not reach ml-team-dr: $(podman logs "ds-image-target-$id" 2>&1 | tail -n 10; podman logs "ds-image-source-$id" 2>&1 | tail -n 10)"
  fi
done
src_k -n ml-team create configmap live --from-literal=at=watch >/dev/null
if wait_get configmap live; then
  ok "a ConfigMap created while the source watched reached the target"
else
  notok "configmap/live did not reach ml-team-dr"
fi

# ---- SIGTERM: exit 0 within the grace period --------------------------------
for agent in source target; do
  n=ds-image-$agent-$id
  t0=$(date +%s.%N)
  podman kill --signal TERM "$n" >/dev/null
  rc=$(timeout "$grace" podman wait "$n" 2>/dev/null || echo timeout)
  took=$(python3 -c "import sys; print('%.1f' % ($(date +%s.%N) - $t0))")
  if [ "$rc" = 0 ]; then
    ok "drasync-$agent: SIGTERM, exit 0 in $took s (grace ${grace} s)"
  else
    notok "drasync-$agent: SIGTERM gave $rc after $took s: $(podman logs "$n" 2>&1 | tail -n 10)"
  fi
done
exit "$fail"
