#!/usr/bin/env bash
# Both agents run from the image as the Helm chart runs them (ctest
# deploy_image, label image; fixtures kube_v1, kube_v1beta1, helm_bin).
# scripts/image.sh builds the image (the mmdebstrap base cached); the image
# has no shell and no package manager (checked). Then, per agent, the chart:
#
#   - `helm template drasync deploy/helm/drasync -n drasync` with the values
#     a user sets: the image (localhost/drasync:<version>), the keys
#     (--set-file for the target; an existingSecret the user created for the
#     source), the endpoint and the target's public key, namespaceMappings and
#     sources, and distinct metricsPort/linkPort, since both pods share this
#     host's network here;
#   - the rendered objects but the Deployment and the PVC (chart_pod.py
#     objects) applied to that agent's cluster (target: v1, source: v1beta1):
#     ServiceAccount, ClusterRoles, bindings, the target's managed Namespaces,
#     ConfigMap, Secret;
#   - a token of the chart's ServiceAccount (`kubectl create token`, the
#     TokenRequest API: cluster.sh gives kube-apiserver a service-account
#     issuer and signing key) with the cluster's CA and the namespace mounted
#     at /var/run/secrets/kubernetes.io/serviceaccount, and
#     KUBERNETES_SERVICE_HOST/PORT the test API server: the agents run
#     in-cluster (the chart's `kubeconfig: ""`) with exactly the chart's
#     permissions;
#   - the rendered Deployment's pod template turned into `podman run`
#     arguments by chart_pod.py pod: command and args, env, securityContext
#     (user, read-only root, capabilities, no new privileges), volumeMounts
#     (readOnly, subPath) over the volumes: the ConfigMap and Secret files as
#     the cluster holds them (defaultMode), emptyDirs (Memory ones a tmpfs),
#     the PVC a podman volume; the init container first, then the agent;
#   - its probes run as a kubelet runs them (curl on the rendered path and
#     port, at the rendered period) for the whole run: ready, and the liveness
#     probe never failing failureThreshold times in a row.
#
# The source replicates ml-team into ml-team-dr on the target, a change made
# while it watches arrives, no agent meets a 403 (a rule missing in the
# chart); /healthz, /readyz and /metrics answer from outside the containers;
# SIGTERM stops each with exit 0 within the rendered
# terminationGracePeriodSeconds (30 s when unset).
#
# Environment: DS_KUBECONFIG_V1, DS_KUBECONFIG_V1BETA1, DS_KUBE_BIN, DS_HELM_BIN.
set -euo pipefail
command -v podman >/dev/null || {
  echo "image_run: podman is not installed (scripts/setup.sh installs it): skipped" >&2
  exit 77
}
for v in DS_KUBECONFIG_V1 DS_KUBECONFIG_V1BETA1 DS_KUBE_BIN DS_HELM_BIN; do
  [ -n "${!v:-}" ] || {
    echo "image_run: $v is not set" >&2
    exit 1
  }
done
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
chart=$repo/deploy/helm/drasync
src_k() { "$DS_KUBE_BIN" kubectl --kubeconfig "$DS_KUBECONFIG_V1BETA1" "$@"; }
dst_k() { "$DS_KUBE_BIN" kubectl --kubeconfig "$DS_KUBECONFIG_V1" "$@"; }
# the cluster of each agent
k_of() { if [ "$1" = source ]; then shift && src_k "$@"; else shift && dst_k "$@"; fi; }
# What this host's podman needs (crun fails on hybrid cgroups; the default
# ulimits are refused).
run=(podman run --runtime runc --cgroup-manager cgroupfs
  --ulimit nofile=1024:1024 --ulimit nproc=1024:1024)

tmp=$(mktemp -d)
id=$$
prober_pids=
cleanup() {
  local a n p
  for p in $prober_pids; do kill "$p" 2>/dev/null || true; done
  for a in source target; do
    if [ -s "$tmp/$a/pod/containers.tsv" ]; then
      while IFS=$'\t' read -r _ n _; do
        podman rm -f -t 0 "ds-image-$a-$n-$id" >/dev/null 2>&1 || true
      done <"$tmp/$a/pod/containers.tsv"
    fi
    if [ -s "$tmp/$a/pod/volumes" ]; then
      xargs -r podman volume rm -f <"$tmp/$a/pod/volumes" >/dev/null 2>&1 || true
    fi
    if [ -s "$tmp/$a/pod/tmpfs" ]; then
      xargs -r umount <"$tmp/$a/pod/tmpfs" 2>/dev/null || true
    fi
    if [ -s "$tmp/$a/objects.json" ]; then
      k_of "$a" delete -f "$tmp/$a/objects.json" --ignore-not-found --wait=false >/dev/null 2>&1 || true
    fi
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
  if "${run[@]}" --rm --read-only --cap-drop all --network none "$image" "$tool" --version >/dev/null 2>&1; then
    notok "the image runs $tool"
  fi
done
[ "$fail" = 1 ] || ok "the image has no shell, apt, dpkg or perl"

# ---- keys, values, the chart rendered --------------------------------------
mkdir -p "$tmp/keys/target" "$tmp/keys/source" "$tmp/source" "$tmp/target"
for a in target source; do
  "${run[@]}" --rm --network none -v "$tmp/keys/$a:/out" --user 0:0 "$image" \
    "drasync-$a" keygen --out /out >/dev/null
done
grep -v '^#' "$tmp/keys/source/source.pub" | sed 's/^/prod-east /' >"$tmp/keys/authorized_sources"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
link_port=$(free_port)
target_metrics=$(free_port)
source_metrics=$(free_port)
cat >"$tmp/target/values.yaml" <<YAML
image: {repository: localhost/drasync, tag: "$version"}
metricsPort: $target_metrics
target:
  enabled: true
  linkPort: $link_port
  config:
    namespaceMappings: {ml-team: ml-team-dr}
    sources:
    - {name: prod-east, namespaces: [ml-team], podSecurity: baseline}
YAML
cat >"$tmp/source/values.yaml" <<YAML
image: {repository: localhost/drasync, tag: "$version"}
metricsPort: $source_metrics
source:
  enabled: true
  config:
    clusterName: prod-east
    target:
      endpoint: "tcp://127.0.0.1:$link_port"
      serverPublicKey: "$(grep -v '^#' "$tmp/keys/target/target.pub")"
    namespaces: [ml-team]
    schedule: {mode: watch}
  keys: {existingSecret: prod-east-source-key}
YAML
render() {
  local a=$1
  shift
  "$DS_HELM_BIN" template drasync "$chart" -n drasync -f "$tmp/$a/values.yaml" "$@" \
    >"$tmp/$a/rendered.yaml" 2>"$tmp/$a/err" &&
    k_of "$a" create --dry-run=client -o json -f "$tmp/$a/rendered.yaml" >"$tmp/$a/rendered.json" 2>>"$tmp/$a/err" &&
    python3 "$here/chart_pod.py" objects "$tmp/$a/rendered.json" "$tmp/$a/objects.json" 2>>"$tmp/$a/err"
}
render target --set-file "target.keys.secretKey=$tmp/keys/target/target.key" \
  --set-file "target.keys.authorizedSources=$tmp/keys/authorized_sources" ||
  notok "helm template (target): $(cat "$tmp/target/err")"
render source || notok "helm template (source): $(cat "$tmp/source/err")"
[ "$fail" = 0 ] || exit 1
ok "helm template of the chart for a target and a source release"

# ---- what a cluster holds for each release ----------------------------------
for a in source target; do
  k_of "$a" wait --for=delete namespace/drasync --timeout=120s >/dev/null 2>&1 || true
done
dst_k wait --for=delete namespace/ml-team-dr namespace/ml-team-dr-drill --timeout=120s >/dev/null 2>&1 || true
src_k wait --for=delete namespace/ml-team --timeout=120s >/dev/null 2>&1 || true
src_k create namespace ml-team >/dev/null
src_k -n ml-team create configmap settings --from-literal=mode=fast >/dev/null
src_k -n ml-team create deployment web --image=registry.k8s.io/pause:3.10 >/dev/null
for a in source target; do
  k_of "$a" create namespace drasync >/dev/null # helm install --create-namespace
  out=$(k_of "$a" apply -f "$tmp/$a/objects.json" 2>&1) || notok "applying the $a release's objects: $out"
done
# The Secret the chart expects the source's user to create (keys.existingSecret).
src_k -n drasync create secret generic prod-east-source-key \
  --from-file="source.key=$tmp/keys/source/source.key" >/dev/null
[ "$fail" = 0 ] || exit 1
ok "the releases' ServiceAccounts, RBAC, Namespaces, ConfigMaps and Secrets are on their clusters"

# ---- each pod: its service account, its volumes, its containers -------------
image_user=$(podman image inspect --format '{{.Config.User}}' "$image")
for a in source target; do
  d=$tmp/$a
  mkdir -p "$d/pod" "$d/sa"
  k_of "$a" -n drasync get configmaps,secrets -o json >"$d/cluster.json"
  if ! python3 "$here/chart_pod.py" pod "$d/rendered.json" "drasync-$a" "$d/pod" \
    --objects "$d/cluster.json" --sa-dir "$d/sa" --image-user "$image_user" \
    --volume-prefix "ds-image-$a-$id" 2>"$d/err"; then
    notok "the $a's pod template: $(cat "$d/err")"
    exit 1
  fi
  sa=$(cat "$d/pod/serviceaccount")
  server=$(k_of "$a" config view --raw --minify -o jsonpath='{.clusters[0].cluster.server}')
  k_of "$a" config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}' |
    base64 -d >"$d/sa/ca.crt"
  k_of "$a" -n drasync create token "$sa" --duration 1h >"$d/sa/token"
  printf drasync >"$d/sa/namespace"
  chmod 0644 "$d/sa"/*
  hostport=${server#https://}
  printf 'KUBERNETES_SERVICE_HOST=%s\nKUBERNETES_SERVICE_PORT=%s\n' "${hostport%:*}" "${hostport##*:}" >"$d/env"
  echo "# $a: service account drasync/$sa at $server; podman arguments:"
  while IFS=$'\t' read -r role n f; do
    echo "#   $role $n: $(tr '\0' ' ' <"$f")"
  done <"$d/pod/containers.tsv"
done

# probe_loop AGENT: the rendered probes, as a kubelet runs them, until killed;
# one line per probe: seconds since start, container, kind, ok|fail.
probe_loop() {
  local a=$1 t0 now c kind path port period thr delay tmo
  local -A next
  t0=$(date +%s)
  while :; do
    now=$(($(date +%s) - t0))
    while IFS=$'\t' read -r c kind path port period thr delay tmo; do
      [ "$now" -ge "${next[$kind]:-$delay}" ] || continue
      next[$kind]=$((now + period))
      if curl -fsS -o /dev/null --max-time "$tmo" "http://127.0.0.1:$port$path" 2>/dev/null; then
        echo "$now $c $kind ok"
      else
        echo "$now $c $kind fail"
      fi
    done <"$tmp/$a/pod/probes.tsv"
    sleep 1
  done
}
# start AGENT: the init containers in order (each must exit 0), then the
# pod's containers, detached, and its prober.
start() {
  local a=$1 role n f args env
  env=()
  while read -r line; do env+=(--env "$line"); done <"$tmp/$a/env"
  while IFS=$'\t' read -r role n f; do
    mapfile -d '' args <"$f"
    if [ "$role" = init ]; then
      if ! out=$("${run[@]}" --rm --name "ds-image-$a-$n-$id" --network host "${env[@]}" "${args[@]}" 2>&1 </dev/null); then
        notok "drasync-$a: init container $n failed: $out"
        return 1
      fi
    else
      "${run[@]}" -d --name "ds-image-$a-$n-$id" --network host "${env[@]}" "${args[@]}" >/dev/null </dev/null
    fi
  done <"$tmp/$a/pod/containers.tsv"
  probe_loop "$a" >"$tmp/$a/probes.log" 2>&1 &
  prober_pids="$prober_pids $!"
}
# ready AGENT: the readiness probe succeeded within the liveness probe's
# budget (failureThreshold x periodSeconds, after its initial delay).
ready() {
  local a=$1 budget i
  budget=$(awk -F'\t' '$2 == "liveness" { print $7 + $5 * $6 }' "$tmp/$a/pod/probes.tsv")
  for i in $(seq 1 "${budget:-60}"); do
    grep -q ' readiness ok$' "$tmp/$a/probes.log" 2>/dev/null && return 0
    [ "$(podman container inspect -f '{{.State.Running}}' "ds-image-$a-drasync-$a-$id" 2>/dev/null)" = true ] || return 1
    sleep 1
  done
  return 1
}
logs() { podman logs "ds-image-$1-drasync-$1-$id" 2>&1 | tail -n "${2:-20}"; }
start target || exit 1
if ready target; then
  ok "drasync-target, run as the chart renders it, passes its readiness probe (from outside)"
else
  notok "drasync-target not ready: $(logs target)"
fi
start source || exit 1
if ready source; then
  ok "drasync-source, run as the chart renders it, passes its readiness probe (from outside)"
else
  notok "drasync-source not ready: $(logs source)"
fi
for a in source target; do
  server=$(k_of "$a" config view --minify -o jsonpath='{.clusters[0].cluster.server}')
  if logs "$a" 200 | grep -q "${a}_cluster.*server=$server"; then
    ok "drasync-$a runs in-cluster: the service account's token, KUBERNETES_SERVICE_HOST/PORT ($server)"
  else
    notok "drasync-$a did not connect in-cluster to $server: $(logs "$a")"
  fi
done
for port in "$target_metrics" "$source_metrics"; do
  curl -fsS -o /dev/null "http://127.0.0.1:$port/healthz" || notok "/healthz on $port does not answer 200"
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
    notok "$obj did not reach ml-team-dr: $(logs target 10; logs source 10)"
  fi
done
src_k -n ml-team create configmap live --from-literal=at=watch >/dev/null
if wait_get configmap live; then
  ok "a ConfigMap created while the source watched reached the target"
else
  notok "configmap/live did not reach ml-team-dr"
fi
for a in source target; do
  if logs "$a" 100000 | grep -Eq 'status=403|Forbidden|forbidden'; then
    notok "drasync-$a met a 403 with the chart's RBAC: $(logs "$a" 100000 | grep -E 'status=403|Forbidden|forbidden' | head -n 5)"
  else
    ok "drasync-$a met no 403 with the chart's RBAC"
  fi
done

# ---- the probes over the run, then SIGTERM ----------------------------------
# A liveness probe that passed at least once (the first, at start, may come
# before the HTTP server is up), within the liveness budget.
for a in source target; do
  budget=$(awk -F'\t' '$2 == "liveness" { print $7 + $5 * $6 }' "$tmp/$a/pod/probes.tsv")
  for i in $(seq 1 "${budget:-60}"); do
    grep -q ' liveness ok$' "$tmp/$a/probes.log" && break
    sleep 1
  done
done
for p in $prober_pids; do kill "$p" 2>/dev/null || true; done
prober_pids=
for a in source target; do
  thr=$(awk -F'\t' '$2 == "liveness" { print $6 }' "$tmp/$a/pod/probes.tsv")
  worst=$(awk '$3 == "liveness" { run = $4 == "fail" ? run + 1 : 0; if (run > max) max = run } END { print max + 0 }' "$tmp/$a/probes.log")
  n=$(grep -c ' liveness ' "$tmp/$a/probes.log" || true)
  if grep -q ' liveness ok$' "$tmp/$a/probes.log" && [ "$worst" -lt "${thr:-3}" ]; then
    ok "drasync-$a: $n liveness probes, at most $worst failed in a row (a restart at $thr)"
  else
    notok "drasync-$a: liveness: $n probes, $worst failed in a row (threshold ${thr:-3}): $(tail -n 5 "$tmp/$a/probes.log")"
  fi
done
for a in source target; do
  grace=$(cat "$tmp/$a/pod/grace")
  n=ds-image-$a-drasync-$a-$id
  t0=$(date +%s.%N)
  podman kill --signal TERM "$n" >/dev/null
  rc=$(timeout "$grace" podman wait "$n" 2>/dev/null || echo timeout)
  took=$(python3 -c "import sys; print('%.1f' % ($(date +%s.%N) - $t0))")
  if [ "$rc" = 0 ]; then
    ok "drasync-$a: SIGTERM, exit 0 in $took s (terminationGracePeriodSeconds ${grace})"
  else
    notok "drasync-$a: SIGTERM gave $rc after $took s: $(logs "$a" 10)"
  fi
done
exit "$fail"
