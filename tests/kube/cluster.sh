#!/usr/bin/env bash
# Local Kubernetes control planes for the drasync tests and the demo.
#
#   cluster.sh up NAME [--dra-api v1|v1beta1|v1beta2] [--features LIST]
#                                               start etcd, kube-apiserver,
#                                               kube-scheduler, kube-controller-manager;
#                                               v1beta1: resource.k8s.io as 1.32 served it;
#                                               v1beta2: as 1.33 did, v1beta2 preferred
#                                                 (v1beta1 beside it, for 1.33's scheduler)
#                                               LIST (comma-separated):
#                                                 workload: scheduling.k8s.io/v1beta1 and v1alpha3
#                                                   Workload/PodGroup, pod schedulingGroup
#                                                   (gate GenericWorkload)
#                                                 workload-claims: workload, plus their
#                                                   resourceClaims and Job spec.scheduling
#                                                   (DRAWorkloadResourceClaims, WorkloadWithJob)
#                                               without it those gates stay off, as on a
#                                               default 1.37 cluster
#   cluster.sh nodes NAME [--nodes N] [--devices N] [--driver NAME]
#                                               fake Ready nodes + DeviceClass +
#                                               ResourceSlices + pod "kubelet"
#   cluster.sh env NAME                         print KUBECONFIG=<admin kubeconfig>
#   cluster.sh kubectl NAME ARGS...             kubectl against the cluster
#   cluster.sh status NAME                      components and their pids
#   cluster.sh compact NAME                     compact etcd to its current revision
#                                               (older resourceVersions expire)
#   cluster.sh down NAME                        stop everything, remove the state
#   cluster.sh list                             clusters under the state root
#
# Every component listens on 127.0.0.1 only, on free ports, with TLS
# (a per-cluster CA made with openssl), client-certificate authentication,
# RBAC authorization and a service-account issuer and signing key.
#
# Environment:
#   DS_KUBE_STATE   state root (default /tmp/drasync-kube); one dir per cluster
#   DS_KUBE_BIN     multicall binary (default: tests/kube/build.sh builds or reuses it)
#   DS_KUBE_TIMEOUT seconds to wait for readiness (default 180)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=${DS_KUBE_STATE:-/tmp/drasync-kube}
timeout=${DS_KUBE_TIMEOUT:-180}

die() {
  echo "cluster: $*" >&2
  exit 1
}
log() { echo "cluster: $*" >&2; }

usage() {
  sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

now_ms() { date +%s%3N; }

check_name() {
  [[ "$1" =~ ^[a-z0-9][a-z0-9-]{0,40}$ ]] || die "bad cluster name '$1' (lowercase letters, digits, '-'; at most 41)"
}

kube_bin() {
  if [ -n "${DS_KUBE_BIN:-}" ]; then
    [ -x "$DS_KUBE_BIN" ] || die "DS_KUBE_BIN=$DS_KUBE_BIN is not executable"
    echo "$DS_KUBE_BIN"
  else
    "$here/build.sh"
  fi
}

# free_ports N: N distinct ports the kernel considers free on 127.0.0.1.
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

# pid_alive DIR NAME: the process recorded in DIR/pids/NAME still runs and
# is ours (its command line names this cluster's state dir).
pid_alive() {
  local f="$1/pids/$2" pid
  [ -f "$f" ] || return 1
  pid=$(cat "$f")
  [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$1/" || return 1
}

# start DIR NAME ARGS...: run one component detached, logging to DIR/logs/NAME.log.
# Returns once it has exec'd (its command line names DIR, as pid_alive checks)
# or ended: checked before the exec, a component that is starting looked dead.
start() {
  local dir=$1 name=$2 pid i
  shift 2
  setsid "$@" </dev/null >"$dir/logs/$name.log" 2>&1 &
  pid=$!
  echo "$pid" >"$dir/pids/$name"
  for i in $(seq 1 250); do
    pid_alive "$dir" "$name" && return 0
    [ -d "/proc/$pid" ] && ! grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null || return 0
    sleep 0.02
  done
}

stop_one() {
  local dir=$1 name=$2 pid i
  pid_alive "$dir" "$name" || { rm -f "$dir/pids/$name"; return 0; }
  pid=$(cat "$dir/pids/$name")
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 100); do
    [ -d "/proc/$pid" ] || break
    # A zombie is gone as far as we care.
    grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null && break
    sleep 0.1
  done
  if [ -d "/proc/$pid" ] && ! grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$dir/pids/$name"
}

# ---------------------------------------------------------------- certificates

gen_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

# gen_ca PKI NAME SUBJECT: a self-signed CA NAME.crt/NAME.key.
gen_ca() {
  gen_key "$1/$2.key"
  openssl req -x509 -new -key "$1/$2.key" -subj "$3" -days 3650 -sha256 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
    -out "$1/$2.crt" 2>/dev/null
}

# gen_cert PKI NAME SUBJECT EXT-USAGE [SANS] [CA]: NAME.crt/NAME.key signed by PKI/CA (default ca).
gen_cert() {
  local pki=$1 name=$2 subj=$3 usage=$4 sans=${5:-} ca=${6:-ca}
  gen_key "$pki/$name.key"
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$usage"
    [ -z "$sans" ] || echo "subjectAltName=$sans"
  } >"$pki/$name.ext"
  openssl req -new -key "$pki/$name.key" -subj "$subj" -out "$pki/$name.csr" 2>/dev/null
  openssl x509 -req -in "$pki/$name.csr" -CA "$pki/$ca.crt" -CAkey "$pki/$ca.key" \
    -CAcreateserial -days 3650 -sha256 -extfile "$pki/$name.ext" -out "$pki/$name.crt" 2>/dev/null
  rm -f "$pki/$name.csr" "$pki/$name.ext"
}

make_pki() {
  local pki=$1 name=$2
  mkdir -p "$pki"
  gen_ca "$pki" ca "/CN=drasync-$name-ca"
  # The aggregation layer's front proxy has its own CA, as in kubeadm.
  gen_ca "$pki" front-proxy-ca "/CN=drasync-$name-front-proxy-ca"
  gen_cert "$pki" front-proxy-client "/CN=front-proxy-client" clientAuth "" front-proxy-ca
  local local_sans="IP:127.0.0.1,DNS:localhost"
  gen_cert "$pki" etcd "/CN=etcd" "serverAuth,clientAuth" "$local_sans"
  gen_cert "$pki" apiserver-etcd-client "/CN=kube-apiserver-etcd-client" clientAuth
  gen_cert "$pki" apiserver "/CN=kube-apiserver" serverAuth \
    "$local_sans,IP:10.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  gen_cert "$pki" scheduler-serving "/CN=kube-scheduler" serverAuth "$local_sans"
  gen_cert "$pki" controller-manager-serving "/CN=kube-controller-manager" serverAuth "$local_sans"
  gen_cert "$pki" admin "/O=system:masters/CN=drasync-admin" clientAuth
  gen_cert "$pki" scheduler "/CN=system:kube-scheduler" clientAuth
  gen_cert "$pki" controller-manager "/CN=system:kube-controller-manager" clientAuth
  # Service-account token signing key pair.
  gen_key "$pki/sa.key"
  openssl pkey -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
  chmod 600 "$pki"/*.key
}

# kubeconfig FILE SERVER PKI USER: a kubeconfig with embedded client cert.
kubeconfig() {
  local file=$1 server=$2 pki=$3 user=$4 b64="base64 -w0"
  cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: drasync
  cluster:
    server: $server
    certificate-authority-data: $($b64 <"$pki/ca.crt")
users:
- name: $user
  user:
    client-certificate-data: $($b64 <"$pki/$user.crt")
    client-key-data: $($b64 <"$pki/$user.key")
contexts:
- name: drasync
  context:
    cluster: drasync
    user: $user
current-context: drasync
EOF
  chmod 600 "$file"
}

# wait_https URL PKI WHAT: poll until URL answers 200 "ok" (admin client cert).
wait_https() {
  local url=$1 pki=$2 what=$3 dir=$4 deadline=$(($(date +%s) + timeout))
  while :; do
    if curl -sf --max-time 5 --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
      "$url" 2>/dev/null | grep -q '^ok'; then
      return 0
    fi
    local n
    for n in etcd kube-apiserver kube-scheduler kube-controller-manager dra-controller-manager; do
      if [ -f "$dir/pids/$n" ] && ! pid_alive "$dir" "$n"; then
        tail -n 30 "$dir/logs/$n.log" >&2 || true
        die "$n exited while waiting for $what (log: $dir/logs/$n.log)"
      fi
    done
    [ "$(date +%s)" -lt "$deadline" ] || die "$what not ready after ${timeout}s (logs: $dir/logs)"
    sleep 0.2
  done
}

# ---------------------------------------------------------------- commands

cmd_up() {
  local name=${1:-} api=v1 features=""
  [ -n "$name" ] || usage
  shift
  check_name "$name"
  while [ $# -gt 0 ]; do
    case $1 in
    --dra-api) api=${2:-}; shift 2 ;;
    --dra-api=*) api=${1#*=}; shift ;;
    --features) features=${2:-}; shift 2 ;;
    --features=*) features=${1#*=}; shift ;;
    *) die "up: unknown option $1" ;;
    esac
  done
  case $api in v1 | v1beta1 | v1beta2) ;; *) die "up: --dra-api must be v1, v1beta1 or v1beta2, not '$api'" ;; esac
  # Feature gates (the same on every component) and API versions for --features.
  local gates="" sched_rc=""
  local f
  for f in ${features//,/ }; do
    case $f in
    workload) gates=${gates:+$gates,}GenericWorkload=true ;;
    workload-claims)
      gates=${gates:+$gates,}GenericWorkload=true,DRAWorkloadResourceClaims=true,WorkloadWithJob=true ;;
    *) die "up: --features: unknown feature '$f' (workload, workload-claims)" ;;
    esac
  done
  # 1.37 serves Workload and PodGroup as v1beta1 and v1alpha3 (alpha: runtime-config)
  [ -z "$gates" ] || sched_rc=scheduling.k8s.io/v1beta1=true,scheduling.k8s.io/v1alpha3=true
  [ -z "$gates" ] || [ "$api" = v1 ] || die "up: --features needs --dra-api v1"

  local dir=$root/$name
  if pid_alive "$dir" kube-apiserver; then
    die "cluster $name is already up (cluster.sh down $name first)"
  fi
  [ ! -d "$dir" ] || cmd_down "$name" >/dev/null 2>&1 || true
  local bin
  bin=$(kube_bin)
  mkdir -p "$dir"/{pids,logs,etcd}
  # A failed start stops what it started (the logs stay for a look).
  trap "stop_all '$dir'" EXIT
  echo "$api" >"$dir/dra-api"
  echo "$features" >"$dir/features"
  ln -sf "$bin" "$dir/kube"

  local t0
  t0=$(now_ms)
  make_pki "$dir/pki" "$name"
  local pki=$dir/pki
  local ports etcd_client etcd_peer api_port sched_port cm_port
  local dra_cm_port
  ports=$(free_ports 6)
  read -r etcd_client etcd_peer api_port sched_port cm_port dra_cm_port <<<"$ports"
  cat >"$dir/ports" <<EOF
etcd_client=$etcd_client
etcd_peer=$etcd_peer
apiserver=$api_port
scheduler=$sched_port
controller_manager=$cm_port
dra_controller_manager=$dra_cm_port
EOF
  local server=https://127.0.0.1:$api_port
  echo "$server" >"$dir/server"
  kubeconfig "$dir/admin.kubeconfig" "$server" "$pki" admin
  kubeconfig "$dir/scheduler.kubeconfig" "$server" "$pki" scheduler
  kubeconfig "$dir/controller-manager.kubeconfig" "$server" "$pki" controller-manager

  start "$dir" etcd "$bin" etcd --name "$name" --data-dir "$dir/etcd" \
    --listen-client "https://127.0.0.1:$etcd_client" --listen-peer "https://127.0.0.1:$etcd_peer" \
    --cert-file "$pki/etcd.crt" --key-file "$pki/etcd.key" --trusted-ca-file "$pki/ca.crt" \
    --unsafe-no-fsync

  local runtime_config=""
  local cm_controllers="*" cm_extra=()
  # DS_KUBE_CM_API_QPS: the controllers' client rate (their default is 20 a
  # second, burst 30); a benchmark's source cluster raises it so that thousands
  # of Deployments it makes settle in seconds, not minutes.
  if [ -n "${DS_KUBE_CM_API_QPS:-}" ]; then
    cm_extra+=(--kube-api-qps="$DS_KUBE_CM_API_QPS" --kube-api-burst="$((DS_KUBE_CM_API_QPS * 2))")
  fi
  local sched_bin=$bin sched_extra=() dra_cm=""
  if [ "$api" = v1beta1 ] || [ "$api" = v1beta2 ]; then
    # Serve resource.k8s.io as Kubernetes 1.32 did: v1beta1 only, no v1.
    runtime_config="resource.k8s.io/v1=false,resource.k8s.io/v1beta1=true"
    # Or as 1.33 did: v1beta2 too, the version clients prefer (discovery's
    # order, drasync's), v1beta1 beside it for 1.33's scheduler, claim
    # controller and the node agent, which speak v1beta1.
    [ "$api" = v1beta1 ] || runtime_config=$runtime_config,resource.k8s.io/v1beta2=true
    # These 1.37 controllers speak resource.k8s.io/v1 only and would wait for it forever.
    cm_controllers="*,-resourceclaim-controller,-device-taint-eviction-controller,-resourcepoolstatusrequest-controller"
    local compat=${DS_KUBE_COMPAT_BIN:-$(dirname "$(readlink -f "$bin")")/kube-compat}
    if [ -x "$compat" ]; then
      # Kubernetes 1.33's scheduler and ResourceClaim controller allocate
      # and generate claims through resource.k8s.io/v1beta1.
      sched_bin=$compat
      sched_extra=(--feature-gates=DynamicResourceAllocation=true)
      # 1.33's firstAvailable (alpha there) for the v1beta2 cluster's subrequests.
      [ "$api" = v1beta1 ] || sched_extra=(--feature-gates=DynamicResourceAllocation=true,DRAPrioritizedList=true)
      dra_cm=$compat
    else
      # A 1.37 scheduler's DRA support (locked on since 1.35) waits for v1
      # informers that never sync; as a 1.34 scheduler it can be turned off.
      # Pods are then bound without claim allocation, and the node agent
      # never starts them.
      log "no $compat: the v1beta1 cluster's scheduler will not allocate claims"
      sched_extra=(--emulated-version=1.34 --min-compatibility-version=1.34
        --feature-gates=DynamicResourceAllocation=false,DRAPrioritizedList=false,DRASchedulerFilterTimeout=false,DRAAdminAccess=false)
    fi
  fi

  local gate_flag=()
  if [ -n "$gates" ]; then
    runtime_config=${runtime_config:+$runtime_config,}$sched_rc
    gate_flag=(--feature-gates="$gates")
    sched_extra+=("${gate_flag[@]}")
    cm_extra+=("${gate_flag[@]}")
  fi

  local t_api
  t_api=$(now_ms)
  # --watch-cache-sizes: PodTemplates and ResourceClaimTemplates have no watch
  # cache, so a watch of them is served by etcd and "compact" makes an old
  # resourceVersion expire (410) at once, as it does on a busy cluster; the
  # tests of watch relists use them (the client's, the exporter's).
  start "$dir" kube-apiserver "$bin" kube-apiserver \
    --etcd-servers "https://127.0.0.1:$etcd_client" \
    --etcd-cafile "$pki/ca.crt" --etcd-certfile "$pki/apiserver-etcd-client.crt" \
    --etcd-keyfile "$pki/apiserver-etcd-client.key" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
    --cert-dir "$dir/apiserver" \
    --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
    --client-ca-file "$pki/ca.crt" \
    --requestheader-client-ca-file "$pki/front-proxy-ca.crt" \
    --requestheader-allowed-names front-proxy-client \
    --requestheader-username-headers X-Remote-User \
    --requestheader-group-headers X-Remote-Group \
    --requestheader-extra-headers-prefix X-Remote-Extra- \
    --proxy-client-cert-file "$pki/front-proxy-client.crt" \
    --proxy-client-key-file "$pki/front-proxy-client.key" \
    --authorization-mode RBAC \
    --anonymous-auth=false \
    --service-account-issuer "$server" \
    --service-account-key-file "$pki/sa.pub" \
    --service-account-signing-key-file "$pki/sa.key" \
    --service-cluster-ip-range 10.0.0.0/24 \
    --endpoint-reconciler-type none \
    --allow-privileged=true \
    --profiling=false \
    --watch-cache-sizes podtemplates#0,resourceclaimtemplates.resource.k8s.io#0 \
    ${runtime_config:+--runtime-config "$runtime_config"} ${gate_flag[@]+"${gate_flag[@]}"}

  wait_https "$server/readyz" "$pki" "kube-apiserver /readyz" "$dir"
  local t_ready
  t_ready=$(now_ms)

  start "$dir" kube-scheduler "$sched_bin" kube-scheduler \
    --kubeconfig "$dir/scheduler.kubeconfig" \
    --authentication-kubeconfig "$dir/scheduler.kubeconfig" \
    --authorization-kubeconfig "$dir/scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port "$sched_port" \
    --tls-cert-file "$pki/scheduler-serving.crt" --tls-private-key-file "$pki/scheduler-serving.key" \
    --client-ca-file "$pki/ca.crt" \
    --leader-elect=false --profiling=false ${sched_extra[@]+"${sched_extra[@]}"}

  # What both controller managers (1.37's and the 1.33 claim controller) share.
  local cm_common=(
    --kubeconfig "$dir/controller-manager.kubeconfig"
    --authentication-kubeconfig "$dir/controller-manager.kubeconfig"
    --authorization-kubeconfig "$dir/controller-manager.kubeconfig"
    --bind-address 127.0.0.1
    --tls-cert-file "$pki/controller-manager-serving.crt"
    --tls-private-key-file "$pki/controller-manager-serving.key"
    --client-ca-file "$pki/ca.crt"
    --use-service-account-credentials=true
    --leader-elect=false --profiling=false
  )
  start "$dir" kube-controller-manager "$bin" kube-controller-manager "${cm_common[@]}" \
    --secure-port "$cm_port" \
    --root-ca-file "$pki/ca.crt" \
    --service-account-private-key-file "$pki/sa.key" \
    --cluster-signing-cert-file "$pki/ca.crt" --cluster-signing-key-file "$pki/ca.key" \
    --controllers "$cm_controllers" ${cm_extra[@]+"${cm_extra[@]}"}

  if [ -n "$dra_cm" ]; then
    start "$dir" dra-controller-manager "$dra_cm" kube-controller-manager "${cm_common[@]}" \
      --secure-port "$dra_cm_port" \
      --feature-gates=DynamicResourceAllocation=true \
      --controllers resourceclaim-controller
  fi

  wait_https "https://127.0.0.1:$sched_port/healthz" "$pki" "kube-scheduler /healthz" "$dir"
  wait_https "https://127.0.0.1:$cm_port/healthz" "$pki" "kube-controller-manager /healthz" "$dir"
  [ -z "$dra_cm" ] || wait_https "https://127.0.0.1:$dra_cm_port/healthz" "$pki" "1.33 resourceclaim controller /healthz" "$dir"
  # Pods can only be created once the service-account controller made the
  # namespace's default ServiceAccount.
  local deadline=$(($(date +%s) + timeout))
  until "$bin" kubectl --kubeconfig "$dir/admin.kubeconfig" -n default get serviceaccount default >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || die "no default ServiceAccount after ${timeout}s (logs: $dir/logs)"
    sleep 0.3
  done
  local t_done
  t_done=$(now_ms)
  log "$name up (resource.k8s.io/$api${features:+, features $features}) at $server: /readyz $((t_ready - t_api))ms after kube-apiserver start" \
    "($((t_ready - t0))ms with PKI and etcd), all components ready after $((t_done - t0))ms"
  trap - EXIT
  echo "KUBECONFIG=$dir/admin.kubeconfig"
}

cmd_nodes() {
  local name=${1:-} nodes=2 devices=4 driver=gpu.example.com
  [ -n "$name" ] || usage
  shift
  check_name "$name"
  while [ $# -gt 0 ]; do
    case $1 in
    --nodes) nodes=${2:-}; shift 2 ;;
    --devices) devices=${2:-}; shift 2 ;;
    --driver) driver=${2:-}; shift 2 ;;
    *) die "nodes: unknown option $1" ;;
    esac
  done
  [[ "$nodes" =~ ^[0-9]+$ && "$devices" =~ ^[0-9]+$ ]] || die "nodes: --nodes and --devices take numbers"
  local dir=$root/$name
  pid_alive "$dir" kube-apiserver || die "cluster $name is not up"
  stop_one "$dir" nodeagent
  rm -f "$dir/nodeagent.ready"
  local t0
  t0=$(now_ms)
  start "$dir" nodeagent "$dir/kube" nodeagent --kubeconfig "$dir/admin.kubeconfig" \
    --nodes "$nodes" --devices "$devices" --driver "$driver" --ready-file "$dir/nodeagent.ready"
  local deadline=$(($(date +%s) + timeout))
  until [ -f "$dir/nodeagent.ready" ]; do
    if ! pid_alive "$dir" nodeagent; then
      tail -n 30 "$dir/logs/nodeagent.log" >&2 || true
      die "nodeagent exited (log: $dir/logs/nodeagent.log)"
    fi
    [ "$(date +%s)" -lt "$deadline" ] || die "nodeagent not ready after ${timeout}s"
    sleep 0.2
  done
  log "$name: $nodes nodes x $devices $driver devices after $(($(now_ms) - t0))ms"
}

cmd_env() {
  local name=${1:-}
  [ -n "$name" ] || usage
  check_name "$name"
  [ -f "$root/$name/admin.kubeconfig" ] || die "cluster $name does not exist under $root"
  echo "KUBECONFIG=$root/$name/admin.kubeconfig"
}

cmd_kubectl() {
  local name=${1:-}
  [ -n "$name" ] || usage
  shift
  check_name "$name"
  [ -f "$root/$name/admin.kubeconfig" ] || die "cluster $name does not exist under $root"
  exec "$root/$name/kube" kubectl --kubeconfig "$root/$name/admin.kubeconfig" "$@"
}

cmd_status() {
  local name=${1:-} n rc=0
  [ -n "$name" ] || usage
  check_name "$name"
  local dir=$root/$name
  [ -d "$dir" ] || die "cluster $name does not exist under $root"
  echo "cluster $name: $(cat "$dir/server" 2>/dev/null) resource.k8s.io/$(cat "$dir/dra-api" 2>/dev/null)"
  for n in etcd kube-apiserver kube-scheduler kube-controller-manager dra-controller-manager nodeagent; do
    if pid_alive "$dir" "$n"; then
      echo "  $n running (pid $(cat "$dir/pids/$n"))"
    elif [ -f "$dir/pids/$n" ]; then
      echo "  $n DEAD (log: $dir/logs/$n.log)"
      rc=1
    fi
  done
  return $rc
}

# compact NAME: etcd compacts its history up to the current revision, through
# its JSON gateway with the API server's etcd client certificate.
cmd_compact() {
  local name=${1:-}
  [ -n "$name" ] || usage
  check_name "$name"
  local dir=$root/$name pki=$root/$name/pki port rev
  pid_alive "$dir" etcd || die "cluster $name is not up"
  port=$(sed -n 's/^etcd_client=//p' "$dir/ports")
  local etcd=(curl -sSf --max-time 10 --cacert "$pki/ca.crt" --cert "$pki/apiserver-etcd-client.crt"
    --key "$pki/apiserver-etcd-client.key" -X POST)
  rev=$("${etcd[@]}" "https://127.0.0.1:$port/v3/kv/range" -d '{"key":"AA=="}' |
    sed -n 's/.*"revision":"\([0-9]*\)".*/\1/p')
  [ -n "$rev" ] || die "compact: cannot read etcd's revision"
  "${etcd[@]}" "https://127.0.0.1:$port/v3/kv/compaction" -d "{\"revision\":\"$rev\",\"physical\":true}" >/dev/null ||
    die "compact: etcd refused to compact to $rev"
  log "$name: etcd compacted to revision $rev"
}

stop_all() {
  local n
  for n in nodeagent dra-controller-manager kube-controller-manager kube-scheduler kube-apiserver etcd; do
    stop_one "$1" "$n"
  done
}

cmd_down() {
  local name=${1:-}
  [ -n "$name" ] || usage
  check_name "$name"
  local dir=$root/$name
  [ -d "$dir" ] || { log "$name: nothing to stop"; return 0; }
  stop_all "$dir"
  rm -rf "$dir"
  log "$name down"
}

cmd_list() {
  local d
  [ -d "$root" ] || return 0
  for d in "$root"/*/; do
    [ -f "$d/server" ] || continue
    echo "$(basename "$d") $(cat "$d/server") resource.k8s.io/$(cat "$d/dra-api" 2>/dev/null)"
  done
}

cmd=${1:-}
[ -n "$cmd" ] || usage
shift
case $cmd in
up) cmd_up "$@" ;;
nodes) cmd_nodes "$@" ;;
env) cmd_env "$@" ;;
kubectl) cmd_kubectl "$@" ;;
status) cmd_status "$@" ;;
compact) cmd_compact "$@" ;;
down) cmd_down "$@" ;;
list) cmd_list ;;
-h | --help | help) usage ;;
*) die "unknown command '$cmd'" ;;
esac
