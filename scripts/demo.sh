#!/usr/bin/env bash
# The demo: two real local Kubernetes control planes (built from Go modules)
# and drasync's two agents between them, as an operator runs them.
#
#   source cluster: resource.k8s.io/v1beta1 (as 1.32/1.33 serve it),
#                   NVIDIA-named devices (DeviceClass gpu.nvidia.com)
#   target cluster: resource.k8s.io/v1, another driver's devices (gpu.example.com)
#
# Keys from the agents' keygen, a SourceConfig and a TargetConfig,
# `drasync-target run` and `drasync-source run` (watch) as background
# processes over one CURVE ZeroMQ connection; then the mapping report, the
# objects on both sides, the pods Running on the target with claims allocated
# from its devices, a live change with its measured delay, and a standby
# namespace failed over and back.
#
#   scripts/demo.sh [--keep] [--no-setup]
#     --keep      leave the clusters and the agents running (prints how to reach them)
#     --no-setup  skip scripts/setup.sh (packages, the control plane's binary)
#   Environment: DS_SOURCE_BIN / DS_TARGET_BIN use these agents instead of
#   building build/demo; DS_KUBE_STATE (default /tmp/drasync-demo) and
#   DS_DEMO_NAME (default demo: clusters demo-source, demo-target) keep two
#   demos apart.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
keep=0
setup=1
for a in "$@"; do
  case $a in
  --keep) keep=1 ;;
  --no-setup) setup=0 ;;
  -h | --help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "demo: unknown option $a (--keep, --no-setup)" >&2; exit 2 ;;
  esac
done

if [ -t 1 ]; then bold=$'\033[1m' off=$'\033[0m'; else bold="" off=""; fi
step() { printf '\n%s== %s%s\n' "$bold" "$*" "$off"; }
say() { echo "demo: $*"; }
now() { echo "$EPOCHREALTIME"; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

t_start=$(now)
step "Setting up (Debian packages, the Kubernetes binary from Go modules, drasync)"
[ "$setup" = 0 ] || scripts/setup.sh
if [ -n "${DS_SOURCE_BIN:-}" ] && [ -n "${DS_TARGET_BIN:-}" ]; then
  source_bin=$DS_SOURCE_BIN
  target_bin=$DS_TARGET_BIN
else
  BUILD=build/demo
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDS_BUILD_TESTS=OFF >/dev/null
  cmake --build "$BUILD" -j"$(nproc)" >/dev/null
  source_bin=$repo/$BUILD/agent-source/drasync-source
  target_bin=$repo/$BUILD/agent-target/drasync-target
fi
[ -x "$source_bin" ] && [ -x "$target_bin" ] || { echo "demo: no agents at $source_bin, $target_bin" >&2; exit 1; }

export DS_KUBE_STATE=${DS_KUBE_STATE:-/tmp/drasync-demo}
name=${DS_DEMO_NAME:-demo}
cluster=$repo/tests/kube/cluster.sh
src=$name-source
dst=$name-target
mkdir -p "$DS_KUBE_STATE"
for f in "$DS_KUBE_STATE/$name"-work-*/stop.sh; do
  [ -x "$f" ] || continue
  say "stopping what a previous --keep left running ($f)"
  "$f" >/dev/null 2>&1 || true
done
work=$(mktemp -d "$DS_KUBE_STATE/$name-work-XXXXXX")
target_pid=""
source_pid=""

# stop_agent PID NAME: SIGTERM (SIGKILL after 15 s); says how it exited, returns 1 unless 0.
stop_agent() {
  local p=$1 code wd
  [ -n "$p" ] || return 0
  kill -TERM "$p" 2>/dev/null
  (sleep 15 && kill -KILL "$p" 2>/dev/null) &
  wd=$!
  code=0
  wait "$p" 2>/dev/null || code=$?
  kill "$wd" 2>/dev/null
  wait "$wd" 2>/dev/null
  echo "demo: $2 stopped (exit $code)"
  [ "$code" = 0 ]
}
finish() {
  local rc=$1 stopped=0
  set +e
  trap - INT TERM
  if [ "$keep" = 0 ] || [ "$rc" != 0 ]; then
    stop_agent "$source_pid" "drasync-source run" || stopped=1
    stop_agent "$target_pid" "drasync-target run" || stopped=1
    # A run that succeeded fails when an agent did not stop cleanly on SIGTERM.
    [ "$rc" != 0 ] || rc=$stopped
  fi
  if [ "$rc" != 0 ]; then
    echo >&2
    echo "demo: FAILED (exit $rc); the agents' last lines:" >&2
    for l in "$work/target.log" "$work/source.log"; do
      [ -f "$l" ] || continue
      echo "---- $l" >&2
      tail -n 25 "$l" >&2
    done
  fi
  if [ "$keep" = 0 ] || [ "$rc" != 0 ]; then
    $cluster down "$src" >/dev/null 2>&1
    $cluster down "$dst" >/dev/null 2>&1
    if [ "$rc" = 0 ]; then rm -rf "$work"; else echo "demo: logs and configurations kept in $work" >&2; fi
  fi
  [ "$rc" != 0 ] || say "OK"
  exit "$rc"
}
trap 'finish $?' EXIT
trap 'exit 130' INT TERM

# wait_for SECONDS WHAT COMMAND...: until COMMAND succeeds, or fail.
wait_for() {
  local secs=$1 what=$2 end=$(($(date +%s) + $1))
  shift 2
  until "$@" >/dev/null 2>&1; do
    for p in $target_pid $source_pid; do
      kill -0 "$p" 2>/dev/null || { echo "demo: an agent exited (pid $p) while waiting for $what" >&2; return 1; }
    done
    [ "$(date +%s)" -lt "$end" ] || { echo "demo: $what: not after $secs s" >&2; return 1; }
    sleep 0.2
  done
}

step "Starting the source cluster (serves resource.k8s.io/v1beta1, like 1.32/1.33) and the target (resource.k8s.io/v1)"
$cluster down "$src" >/dev/null 2>&1 || true
$cluster down "$dst" >/dev/null 2>&1 || true
$cluster up "$src" --dra-api v1beta1 >/dev/null
$cluster nodes "$src" --nodes 2 --devices 4 --driver gpu.nvidia.com
$cluster up "$dst" --dra-api v1 >/dev/null
$cluster nodes "$dst" --nodes 2 --devices 4 --driver gpu.example.com
src_kc=$DS_KUBE_STATE/$src/admin.kubeconfig
dst_kc=$DS_KUBE_STATE/$dst/admin.kubeconfig
# (the source's v1beta1 DRA objects draw deprecation warnings: not the demo's news)
ksrc() { "$cluster" kubectl "$src" "$@" 2> >(grep -v '^Warning: .* is deprecated' >&2); }
kdst() { "$cluster" kubectl "$dst" "$@"; }
setup_s=$(since "$t_start")
say "set up in $setup_s s"
t0=$(now)

step "GPU workloads on the source: ml-team (a Deployment on a claim template, two pods sharing a claim) and ml-serving"
cat >"$work/workload.yaml" <<'EOF'
apiVersion: v1
kind: Namespace
metadata: {name: ml-team}
---
apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaimTemplate
metadata: {name: gpu-template, namespace: ml-team}
spec:
  spec:
    devices:
      requests:
      - {name: gpu, deviceClassName: gpu.nvidia.com}
---
apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaim
metadata: {name: shared-gpu, namespace: ml-team}
spec:
  devices:
    requests:
    - {name: gpu, deviceClassName: gpu.nvidia.com}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: gpu-app, namespace: ml-team}
spec:
  replicas: 2
  selector: {matchLabels: {app: gpu-app}}
  template:
    metadata: {labels: {app: gpu-app}}
    spec:
      containers:
      - name: inference
        image: registry.example.com/inference:v1
        resources: {claims: [{name: gpu}]}
      resourceClaims:
      - {name: gpu, resourceClaimTemplateName: gpu-template}
---
apiVersion: v1
kind: Pod
metadata: {name: trainer-0, namespace: ml-team}
spec:
  containers:
  - name: trainer
    image: registry.example.com/trainer:v1
    resources: {claims: [{name: gpu}]}
  resourceClaims:
  - {name: gpu, resourceClaimName: shared-gpu}
---
apiVersion: v1
kind: Pod
metadata: {name: trainer-1, namespace: ml-team}
spec:
  containers:
  - name: trainer
    image: registry.example.com/trainer:v1
    resources: {claims: [{name: gpu}]}
  resourceClaims:
  - {name: gpu, resourceClaimName: shared-gpu}
---
apiVersion: v1
kind: Namespace
metadata: {name: ml-serving}
---
apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaimTemplate
metadata: {name: gpu-template, namespace: ml-serving}
spec:
  spec:
    devices:
      requests:
      - {name: gpu, deviceClassName: gpu.nvidia.com}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: frontend, namespace: ml-serving}
spec:
  replicas: 1
  selector: {matchLabels: {app: frontend}}
  template:
    metadata: {labels: {app: frontend}}
    spec:
      containers:
      - name: server
        image: registry.example.com/frontend:v1
        resources: {claims: [{name: gpu}]}
      resourceClaims:
      - {name: gpu, resourceClaimTemplateName: gpu-template}
EOF
ksrc apply -f "$work/workload.yaml" | sed 's/^/  /'

step "Keys: drasync-target keygen, drasync-source keygen, the target's authorized-sources file"
mkdir -p "$work/keys/target" "$work/keys/source"
"$target_bin" keygen --out "$work/keys/target" | sed 's/^/  /'
"$source_bin" keygen --out "$work/keys/source" | sed 's/^/  /'

pubkey() { grep -v '^#' "$1" | head -n 1; } # a .pub file: a comment line, then the Z85 key
echo "prod-east $(pubkey "$work/keys/source/source.pub")" >"$work/keys/target/authorized_sources"
echo "  authorized_sources (the source's key under its cluster name):"
sed 's/^/    /' "$work/keys/target/authorized_sources"

step "The target's configuration: migrate, namespaces mapped, the Deployment's template and the DeviceClass mapped"
cat >"$work/target.yaml" <<EOF
apiVersion: drasync.io/v1alpha1
kind: TargetConfig
listen: "tcp://127.0.0.1:*"
keys:
  secretKeyFile: $work/keys/target/target.key
  authorizedSources: $work/keys/target/authorized_sources
kubeconfig: $dst_kc
stateDir: $work/target-state
mode: migrate
namespaceMappings: {ml-team: ml-team-dr, ml-serving: ml-serving-dr}
dra:
  resourceClaimTemplateMappings:
  - {objectType: Deployment, objectInstance: gpu-app, container: ALL, resourceClaimTemplate: dr-gpu-template}
  deviceClassMappings:
  - {from: gpu.nvidia.com, to: gpu.example.com}
EOF
sed 's/^/  /' "$work/target.yaml"

step "The target's platform team provides the template the rule maps gpu-app to"
kdst create namespace ml-team-dr | sed 's/^/  /'
cat <<'EOF' | kdst apply -f - | sed 's/^/  /'
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: dr-gpu-template, namespace: ml-team-dr}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.example.com}
EOF

step "Starting drasync-target run (log: $work/target.log)"
setsid "$target_bin" run --config "$work/target.yaml" </dev/null >"$work/target.log" 2>&1 &
target_pid=$!
wait_for 30 "drasync-target run started" grep -q 'event=started ' "$work/target.log"
endpoint=$(sed -n 's/.*event=started listen=\([^ ]*\).*/\1/p' "$work/target.log" | head -n 1)
grep 'event=started ' "$work/target.log" | sed 's/^/  /'

# The configuration's mode is the whole target's; failback records a namespace's
# own mode in the ledger, also before any of its objects arrived.
step "ml-serving-dr is the DR copy: in standby before anything arrives (drasync-target failback)"
"$target_bin" failback --config "$work/target.yaml" --namespace ml-serving-dr 2>&1 | sed 's/^/  /'

step "The source's configuration: watch ml-team and ml-serving, push to the target"
cat >"$work/source.yaml" <<EOF
apiVersion: drasync.io/v1alpha1
kind: SourceConfig
clusterName: prod-east
target: {endpoint: "$endpoint", serverPublicKey: "$(pubkey "$work/keys/target/target.pub")"}
keys: {secretKeyFile: $work/keys/source/source.key}
kubeconfig: $src_kc
stateDir: $work/source-state
namespaces: [ml-team, ml-serving]
schedule: {mode: watch, debounce: 200ms}
EOF
sed 's/^/  /' "$work/source.yaml"

step "Starting drasync-source run, watch mode (log: $work/source.log)"
t_agents=$(now)
setsid "$source_bin" run --config "$work/source.yaml" </dev/null >"$work/source.log" 2>&1 &
source_pid=$!
wait_for 30 "the source connected" grep -q 'event=connected' "$work/source.log"
grep -m 2 'event=connected\|event=started' "$work/source.log" | sed 's/^/  /'

# The first pass: every workload of ml-team in the target's ledger and applied.
first_pass() {
  grep -q 'event=pass_finished' "$work/source.log" &&
    grep -q 'event=apply .*object=apps/Deployment/ml-team/gpu-app ' "$work/target.log" &&
    grep -q 'event=apply .*object=core/Pod/ml-team/trainer-0 ' "$work/target.log" &&
    grep -q 'event=apply .*object=core/Pod/ml-team/trainer-1 ' "$work/target.log"
}
wait_for 60 "the first pass applied on the target" first_pass
say "first pass replicated and applied $(since "$t_agents") s after the source agent started"

step "The mapping report: what the running importer changed (event=mapping in its log)"
awk '
  function field(key,   m) {
    if (match($0, " " key "=\"[^\"]*\"")) return substr($0, RSTART + length(key) + 3, RLENGTH - length(key) - 4)
    if (match($0, " " key "=[^ ]*")) return substr($0, RSTART + length(key) + 2, RLENGTH - length(key) - 2)
    return ""
  }
  / event=mapping / {
    where = field("container") != "" ? " container=" field("container") : ""
    where = where (field("entry") != "" ? " entry=" field("entry") : "")
    change = field("from") != "" || field("to") != "" ? ": " field("from") " -> " field("to") : ""
    line = sprintf("  %-11s %s%s%s %s", field("type"), field("object"), where, change, field("detail"))
    if (!seen[line]++) print line
  }' "$work/target.log"

step "Every claim reference of ml-team, its rule, its target here (drasync-target inventory)"
"$target_bin" inventory --config "$work/target.yaml" --namespace ml-team | sed 's/^/  /'

step "Pods Running on the target, claims allocated from its devices (drasync-target verify)"
"$target_bin" verify --config "$work/target.yaml" --namespace ml-team-dr --timeout 90s --interval 500ms |
  sed 's/^/  /'
echo
kdst get pods -n ml-team-dr -o wide | sed 's/^/  /'
echo
kdst get resourceclaims -n ml-team-dr \
  -o custom-columns='CLAIM:.metadata.name,CLASS:.spec.devices.requests[0].exactly.deviceClassName,ALLOCATED:.status.allocation.devices.results[*].device,RESERVED-FOR:.status.reservedFor[*].name' |
  sed 's/^/  /'
running=$(kdst get pods -n ml-team-dr --no-headers | grep -c ' Running ' || true)
allocated=$(kdst get resourceclaims -n ml-team-dr -o jsonpath='{range .items[*]}{.status.allocation.devices.results[0].device}{"\n"}{end}' | grep -c . || true)
echo
say "$running pods Running on the target, $allocated claims allocated on gpu.example.com devices"
[ "$running" -ge 4 ] && [ "$allocated" -ge 3 ] || { echo "demo: expected 4 pods Running and 3 claims allocated" >&2; exit 1; }

step "The objects and their DRA references on both sides"
refs='KIND:.kind,NAMESPACE:.metadata.namespace,NAME:.metadata.name,API:.apiVersion,CLAIM:.spec.resourceClaims[*].resourceClaimName,TEMPLATE:.spec.template.spec.resourceClaims[*].resourceClaimTemplateName'
echo "  source (prod-east):"
ksrc get deployments,pods -n ml-team -o custom-columns="$refs" | grep -v 'gpu-app-' | sed 's/^/    /'
ksrc get resourceclaimtemplates,resourceclaims -n ml-team \
  -o custom-columns='KIND:.kind,NAME:.metadata.name,API:.apiVersion,CLASS:.spec.devices.requests[0].deviceClassName,TEMPLATE-CLASS:.spec.spec.devices.requests[0].deviceClassName' |
  grep -v 'gpu-app-' | sed 's/^/    /'
echo "  target:"
kdst get deployments,pods -n ml-team-dr -o custom-columns="$refs" | grep -v 'gpu-app-' | sed 's/^/    /'
kdst get resourceclaimtemplates,resourceclaims -n ml-team-dr \
  -o custom-columns='KIND:.kind,NAME:.metadata.name,API:.apiVersion,CLASS:.spec.devices.requests[0].exactly.deviceClassName,TEMPLATE-CLASS:.spec.spec.devices.requests[0].exactly.deviceClassName' |
  grep -v 'gpu-app-' | sed 's/^/    /'

step "A live change: gpu-app scaled 2 -> 3 on the source"
api() { # CLUSTER METHOD PATH [BODY]: the API server, as its admin (no kubectl start-up in the measure)
  local d=$DS_KUBE_STATE/$1
  curl -sSf --max-time 5 --cacert "$d/pki/ca.crt" --cert "$d/pki/admin.crt" --key "$d/pki/admin.key" \
    -X "$2" ${4:+-H 'Content-Type: application/merge-patch+json' -d "$4"} "$(cat "$d/server")$3"
}
dst_replicas() {
  api "$dst" GET /apis/apps/v1/namespaces/ml-team-dr/deployments/gpu-app | tr -d ' \n\t' |
    sed -n 's/.*"spec":{"replicas":\([0-9]*\).*/\1/p'
}
[ "$(dst_replicas)" = 2 ] || { echo "demo: gpu-app has not 2 replicas on the target" >&2; exit 1; }
t_write=$(now)
api "$src" PATCH /apis/apps/v1/namespaces/ml-team/deployments/gpu-app/scale '{"spec":{"replicas":3}}' >/dev/null
end=$(($(date +%s) + 30))
until [ "$(dst_replicas)" = 3 ]; do
  [ "$(date +%s)" -lt "$end" ] || { echo "demo: the change did not reach the target in 30 s" >&2; exit 1; }
  sleep 0.02
done
delay=$(awk -v a="$t_write" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }')
say "live change: Deployment ml-team/gpu-app replicas 2 -> 3 on the source reached the target in $delay s"
"$target_bin" verify --config "$work/target.yaml" --namespace ml-team-dr --timeout 60s --interval 500ms |
  grep 'gpu-app' | sed 's/^/  /'

step "Disaster recovery: the standby namespace ml-serving-dr"
kdst get deployments -n ml-serving-dr \
  -o custom-columns='DEPLOYMENT:.metadata.name,REPLICAS:.spec.replicas,SOURCE-REPLICAS:.metadata.annotations.drasync\.io/replicas' |
  sed 's/^/  /'
echo "  \$ drasync-target failover --config target.yaml --namespace ml-serving-dr"
if "$target_bin" failover --config "$work/target.yaml" --namespace ml-serving-dr >"$work/failover.out" 2>&1; then
  cat "$work/failover.out"
  echo "demo: failover did not refuse while the source is connected" >&2
  exit 1
fi
sed 's/^/  /' "$work/failover.out"
say "split-brain guard: failover refused while prod-east is connected"
echo "  \$ drasync-target failover --config target.yaml --namespace ml-serving-dr --force"
"$target_bin" failover --config "$work/target.yaml" --namespace ml-serving-dr --force --timeout 60s 2>&1 |
  sed 's/^/  /'
"$target_bin" verify --config "$work/target.yaml" --namespace ml-serving-dr --timeout 60s --interval 500ms |
  sed 's/^/  /'
kdst get pods -n ml-serving-dr -o wide | sed 's/^/  /'
echo "  \$ drasync-target failback --config target.yaml --namespace ml-serving-dr"
"$target_bin" failback --config "$work/target.yaml" --namespace ml-serving-dr --timeout 60s 2>&1 |
  sed 's/^/  /'
"$target_bin" verify --config "$work/target.yaml" --namespace ml-serving-dr --timeout 60s --interval 500ms |
  sed 's/^/  /'

step "drasync-target status (the target's ledger) and drasync-source status (the link, the target's results)"
"$target_bin" status --config "$work/target.yaml" | sed "s/^/  /"
echo
"$source_bin" status --config "$work/source.yaml" | sed "s/^/  /"

after_s=$(since "$t0")
echo
say "setup ${setup_s} s (packages, builds, two clusters); the demo ${after_s} s after setup"
if [ "$keep" = 1 ]; then
  cat >"$work/stop.sh" <<EOF
#!/usr/bin/env bash
# Stops what scripts/demo.sh --keep left running (an agent only while its
# command line still names this work directory: a pid can be reused).
for p in $source_pid $target_pid; do
  tr '\\0' ' ' </proc/\$p/cmdline 2>/dev/null | grep -qF "$work/" && kill -TERM \$p
done
export DS_KUBE_STATE=$DS_KUBE_STATE
$cluster down $src
$cluster down $dst
rm -rf $work
EOF
  chmod +x "$work/stop.sh"
  say "kept running:"
  echo "  source cluster:  export KUBECONFIG=$src_kc   (or: DS_KUBE_STATE=$DS_KUBE_STATE tests/kube/cluster.sh kubectl $src ...)"
  echo "  target cluster:  export KUBECONFIG=$dst_kc"
  echo "  drasync-target run: pid $target_pid, log $work/target.log, config $work/target.yaml"
  echo "  drasync-source run: pid $source_pid, log $work/source.log, config $work/source.yaml"
  echo "  status:          $target_bin status --config $work/target.yaml"
  echo "  stop everything: $work/stop.sh"
fi
