#!/usr/bin/env bash
# scripts/bench.sh failover [NAMESPACES] [PER_NAMESPACE]: how long a DR
# failover takes, against the floor the cluster sets.
#
# Two local clusters (tests/kube/cluster.sh, resource.k8s.io/v1); the target
# has fake nodes with enough gpu.example.com devices for every pod twice.
# NAMESPACES (default 20) namespaces of PER_NAMESPACE (default 10) workloads
# each with DRA claims (5 Deployments and 2 StatefulSets on a claim template,
# 2 Jobs on it, 1 bare Pod with a ResourceClaim of its own; one pod each) are
# made on the source, replicated by the real agents (`drasync-source run`,
# schedule once, into `drasync-target run` in standby mode), then:
#   from scratch: the same objects in migrate form (`drasync-target plan`,
#       into other namespaces) created by `kubectl apply`: seconds from the
#       apply until every pod is Running with its claims allocated;
#   failover: `drasync-target failover` of every standby namespace while
#       `run` runs, once its verifier has verified the standby (as a standby
#       is, long before a disaster): seconds from the command until every pod
#       is Running with its claims allocated.
#   relocate: the failed-over namespaces back to standby (`drasync-target
#       failback`, their pods gone), the target restarted with `relocate: true`
#       in its sources[] and `drasync-source run` in watch mode; then
#       `drasync-source relocate --namespace NS` of every namespace at once
#       (one command per namespace, all started together, as `xargs -P`
#       would): seconds from their start until the last one exited 0, which
#       each does only once the target verified its namespace active (pods
#       Running, claims allocated), the final pass and parking included.
# Failover and from scratch are timed by the same poll (kubectl get
# pods,resourceclaims every 250 ms). Each phase meets the same cluster: no
# pod and no allocated claim of another phase on it (every device free), as
# from scratch, which goes first, met it. Its namespaces are deleted after it
# and the failover waits until their pods, claims and Namespaces are gone
# (else the scheduler and the DRA allocator would place the failed-over pods
# beside 200 others on half the free devices); the relocation waits likewise
# for the failed-back pods and their claims, every claim left unallocated,
# and, as the failover does, for the target to have verified the standby.
# The relocation prints where its time went: the source's steps (final pass,
# parking), the target's failover and verification, from the agents' logs,
# and when the last pod was ready against when the last command exited.
# Takes about 6 to 10 minutes at the defaults, the clusters' start and the build included.
# Last line: RESULT failover_s=N from_scratch_s=N ratio=X relocate_s=N relocate_ratio=X
# (targets: ratio <= 1.0, relocate_ratio <= 1.2)
set -euo pipefail
# shellcheck source=tests/bench/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.."
nss=${1:-20}
per=${2:-10}
build=${DS_BUILD_DIR:-build/bench}
target_bin=$build/agent-target/drasync-target
source_bin=$build/agent-source/drasync-source
[[ "$nss" =~ ^[0-9]+$ && "$per" =~ ^[0-9]+$ && "$nss" -gt 0 && "$per" -gt 0 ]] ||
  { echo "usage: scripts/bench.sh failover [NAMESPACES] [PER_NAMESPACE] (numbers)" >&2; exit 2; }
bench_start failover "$target_bin" -
src=bench-failover-src-$$
target_pid=
source_pid=
bench_more_cleanup() {
  [ -z "${ready_pid:-}" ] || kill "$ready_pid" 2>/dev/null || true
  [ -z "$source_pid" ] || kill "$source_pid" 2>/dev/null || true
  [ -z "$source_pid" ] || wait "$source_pid" 2>/dev/null || true
  [ -z "$target_pid" ] || kill "$target_pid" 2>/dev/null || true
  [ -z "$target_pid" ] || wait "$target_pid" 2>/dev/null || true
  "$cluster_sh" down "$src" >/dev/null 2>&1 || true
}
"$cluster_sh" up "$src" --dra-api v1 >/dev/null
src_admin=$DS_KUBE_STATE/$src/admin.kubeconfig
kubectl_src() { "$bin" kubectl --kubeconfig "$src_admin" "$@"; }
pods=$((nss * per))
devices=$(((2 * pods + 3) / 4 + 4))
"$cluster_sh" nodes "$name" --nodes 4 --devices "$devices" --driver gpu.example.com >/dev/null
echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "clusters: source $src, target $name (4 nodes x $devices devices)"

# The workloads, on the source.
python3 - "$nss" "$per" >"$work/workloads.yaml" <<'PY'
import sys
nss, per = int(sys.argv[1]), int(sys.argv[2])
claim = ('spec: {devices: {requests: [{name: gpu, exactly: '
         '{deviceClassName: gpu.example.com}}]}}')
def pod_spec(entry, ref, indent, restart=None):
    pad = ' ' * indent
    out = (f"{pad}resourceClaims: [{{name: gpu, {entry}: {ref}}}]\n"
           f"{pad}containers:\n"
           f"{pad}- name: main\n"
           f"{pad}  image: registry.example.net/bench/app:1.0\n"
           f"{pad}  resources: {{claims: [{{name: gpu}}]}}\n")
    if restart:
        out += f"{pad}restartPolicy: {restart}\n"
    return out
for n in range(nss):
    ns = f"ml-{n:02d}"
    print(f"---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}")
    print(f"---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\n"
          f"metadata: {{name: gpu, namespace: {ns}}}\nspec:\n  {claim}")
    for i in range(per):
        name = f"w{i:02d}"
        kind = ("Deployment" if i % 10 < 5 else "StatefulSet" if i % 10 < 7
                else "Job" if i % 10 < 9 else "Pod")
        meta = f"metadata: {{name: {name}, namespace: {ns}}}"
        if kind == "Pod":
            print(f"---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\n"
                  f"metadata: {{name: {name}-gpu, namespace: {ns}}}\n{claim}")
            print(f"---\napiVersion: v1\nkind: Pod\n{meta}\nspec:\n"
                  + pod_spec("resourceClaimName", f"{name}-gpu", 2), end="")
            continue
        if kind == "Job":
            print(f"---\napiVersion: batch/v1\nkind: Job\n{meta}\nspec:\n"
                  f"  template:\n    spec:\n"
                  + pod_spec("resourceClaimTemplateName", "gpu", 6, "Never"), end="")
            continue
        extra = f"  serviceName: {name}\n" if kind == "StatefulSet" else ""
        print(f"---\napiVersion: apps/v1\nkind: {kind}\n{meta}\nspec:\n"
              f"  replicas: 1\n{extra}  selector: {{matchLabels: {{app: {name}}}}}\n"
              f"  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec:\n"
              + pod_spec("resourceClaimTemplateName", "gpu", 6), end="")
PY
kubectl_src apply -f "$work/workloads.yaml" >/dev/null

# Keys and configurations, as an operator writes them.
"$target_bin" keygen --out "$work/keys" >/dev/null
"$source_bin" keygen --out "$work/keys" >/dev/null
# A .pub file is a comment line, then the key.
pubkey() { grep -v '^#' "$1" | head -n 1; }
echo "prod-east $(pubkey "$work/keys/source.pub")" >"$work/authorized_sources"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
namespaces=$(for n in $(seq 0 $((nss - 1))); do printf 'ml-%02d ' "$n"; done)
cat >"$work/target.yaml" <<YAML
apiVersion: drasync.io/v1alpha1
kind: TargetConfig
listen: tcp://127.0.0.1:$port
keys: {secretKeyFile: $work/keys/target.key, authorizedSources: $work/authorized_sources}
kubeconfig: $admin
stateDir: $work/target-state
mode: standby
sources: [{name: prod-east, namespaces: ['ml-*']}]
YAML
{
  cat <<YAML
apiVersion: drasync.io/v1alpha1
kind: SourceConfig
clusterName: prod-east
target: {endpoint: "tcp://127.0.0.1:$port", serverPublicKey: "$(pubkey "$work/keys/target.pub")"}
keys: {secretKeyFile: $work/keys/source.key}
kubeconfig: $src_admin
stateDir: $work/source-state
schedule: {mode: once}
namespaces:
YAML
  for ns in $namespaces; do echo "  - $ns"; done
} >"$work/source.yaml"
# From scratch: the same objects, in migrate form, into namespaces of their own.
{
  cat <<YAML
apiVersion: drasync.io/v1alpha1
kind: TargetConfig
mode: migrate
namespaceMappings:
YAML
  for ns in $namespaces; do echo "  $ns: scratch-${ns#ml-}"; done
} >"$work/scratch.yaml"

# ready PREFIX: prints how many pods of namespaces PREFIX-* are Running with
# every claim they use allocated, then how many of them each owner kind has
# (ReplicaSet:N ... Pod:N for the bare ones).
ready() {
  kubectl_admin get pods,resourceclaims -A -o json | python3 -c '
import json, sys
prefix = sys.argv[1]
items = json.load(sys.stdin)["items"]
alloc = {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in items
         if o["kind"] == "ResourceClaim" and (o.get("status") or {}).get("allocation")}
n = 0
kinds = {}
for o in items:
    ns = o["metadata"]["namespace"]
    if o["kind"] != "Pod" or not ns.startswith(prefix + "-"):
        continue
    st = o.get("status") or {}
    claims = [c.get("resourceClaimName") for c in st.get("resourceClaimStatuses") or []]
    claims += [c["resourceClaimName"] for c in o["spec"].get("resourceClaims") or []
               if c.get("resourceClaimName")]
    if st.get("phase") == "Running" and claims and all((ns, c) in alloc for c in claims):
        n += 1
        owner = (o["metadata"].get("ownerReferences") or [{"kind": "Pod"}])[0]["kind"]
        kinds[owner] = kinds.get(owner, 0) + 1
print(n, " ".join(f"{k}:{v}" for k, v in sorted(kinds.items())))' "$1"
}

# wait_ready PREFIX T0 WHAT: until every pod of PREFIX-* is ready; prints the seconds since T0.
wait_ready() {
  local prefix=$1 t0=$2 what=$3 n last=-1 deadline=$(($(date +%s) + 900))
  while :; do
    read -r n by <<<"$(ready "$prefix")"
    [ "$n" -ge "$pods" ] && break
    if [ "$(date +%s)" -gt "$deadline" ]; then
      echo "bench failover: $what: $n of $pods pods Running with claims allocated after 900 s" >&2
      exit 1
    fi
    [ "$n" = "$last" ] ||
      echo "  $what: $n/$pods at $(since "$t0") s ($by)" >&2
    last=$n
    sleep 0.25
  done
  python3 -c "import time; print(f'{time.time() - $t0:.2f}')"
}

now() { python3 -c 'import time; print(time.time())'; }
since() { python3 -c "import time; print(f'{time.time() - $1:.2f}')"; }

# leftovers PREFIX: what of namespaces PREFIX-* is still on the target, as
# "PODS CLAIMS ALLOCATED GENERATED NAMESPACES" (claims in all, allocated or
# reserved ones, those a pod's template made).
leftovers() {
  kubectl_admin get namespaces,pods,resourceclaims -A -o json | python3 -c '
import json, sys
prefix = sys.argv[1] + "-"
pods = claims = alloc = generated = nss = 0
for o in json.load(sys.stdin)["items"]:
    meta = o["metadata"]
    if o["kind"] == "Namespace":
        nss += meta["name"].startswith(prefix)
        continue
    if not meta["namespace"].startswith(prefix):
        continue
    if o["kind"] == "Pod":
        pods += 1
        continue
    claims += 1
    st = o.get("status") or {}
    alloc += bool(st.get("allocation") or st.get("reservedFor"))
    generated += bool(meta.get("ownerReferences"))
print(pods, claims, alloc, generated, nss)' "$1"
}

# wait_left PREFIX WHAT FIELDS...: until the leftovers of PREFIX-* at the
# given fields (1-based, as in leftovers) are all 0, at most 300 s.
wait_left() {
  local prefix=$1 what=$2 deadline=$(($(date +%s) + 300)) left f busy
  shift 2
  while :; do
    read -r -a left <<<"$(leftovers "$prefix")"
    busy=0
    for f in "$@"; do [ "${left[$((f - 1))]}" = 0 ] || busy=1; done
    [ "$busy" = 0 ] && return 0
    if [ "$(date +%s)" -gt "$deadline" ]; then
      echo "bench failover: $what: still there after 300 s (pods claims allocated generated namespaces): ${left[*]}" >&2
      exit 1
    fi
    sleep 0.5
  done
}

# wait_verified WHAT: until the target's verifier has recorded as many
# workloads verified as it applied in standby form (the Deployments and
# StatefulSets; the held Pods and Jobs are not on the cluster), at most 120 s;
# says how many. (status's totals: its list of workloads stops at 50.)
wait_verified() {
  local deadline=$(($(date +%s) + 120)) verified
  while :; do
    verified=$("$target_bin" status --config "$work/target.yaml" -o json 2>/dev/null |
      python3 -c 'import json, sys; print(json.load(sys.stdin)["verification"]["verified"])' || echo 0)
    [ "$verified" -ge "$workloads" ] && break
    if [ "$(date +%s)" -ge "$deadline" ]; then
      # why not, once: what `verify` says of them now
      "$target_bin" verify --config "$work/target.yaml" --timeout 0 2>&1 |
        grep -i 'not verified' | head -n 3 | sed 's/^/  /' || true
      break
    fi
    sleep 1
  done
  echo "standby: $verified of $workloads workloads verified by the target before the $1"
}

# api_requests OUT: the target API server's request counts by verb and
# resource/subresource (apiserver_request_total), for what a phase cost it.
api_requests() {
  kubectl_admin get --raw /metrics | python3 -c '
import re, sys
counts = {}
for line in sys.stdin:
    if not line.startswith("apiserver_request_total{"):
        continue
    labels = dict(re.findall(r"(\w+)=\"([^\"]*)\"", line))
    res = labels.get("resource") or "-"
    if labels.get("subresource"):
        res += "/" + labels["subresource"]
    key = (labels.get("verb") or "-", res)
    counts[key] = counts.get(key, 0) + float(line.rsplit(" ", 1)[1])
for (verb, res), n in sorted(counts.items()):
    print(verb, res, int(n))' >"$1"
}
# api_delta BEFORE AFTER: the requests between them, the largest first.
api_delta() {
  python3 - "$1" "$2" <<'PY'
import sys
def read(p):
    out = {}
    for line in open(p):
        verb, res, n = line.split()
        out[(verb, res)] = int(n)
    return out
a, b = read(sys.argv[1]), read(sys.argv[2])
d = sorted(((b[k] - a.get(k, 0), k) for k in b if b[k] - a.get(k, 0) > 0), reverse=True)
print("  API requests (all clients): " + ", ".join(f"{v} {r} {n}" for n, (v, r) in d[:12]))
PY
}

# (a) from scratch
"$target_bin" plan --config "$work/scratch.yaml" -f "$work/workloads.yaml" \
  >"$work/scratch-objects.yaml" 2>"$work/scratch-plan.log"
api_requests "$work/api-scratch-before"
t0=$(now)
kubectl_admin apply -f "$work/scratch-objects.yaml" >/dev/null
apply_s=$(python3 -c "import time; print(f'{time.time() - $t0:.2f}')")
from_scratch=$(wait_ready scratch "$t0" "from scratch")
echo "from scratch: $pods pods of $((nss * per)) workloads in $nss namespaces Running with claims allocated ${from_scratch} s after kubectl apply (the apply took ${apply_s} s)"
api_requests "$work/api-scratch-after"
api_delta "$work/api-scratch-before" "$work/api-scratch-after"
# The same cluster for the failover: the from-scratch namespaces go, with
# their pods and claims (every device free again), before the agents start.
t0=$(now)
# shellcheck disable=SC2046
kubectl_admin delete namespace --wait=false $(for ns in $namespaces; do echo "scratch-${ns#ml-}"; done) >/dev/null
wait_left scratch "the from-scratch namespaces" 1 2 3 4 5
echo "from scratch: its namespaces, pods and claims gone $(since "$t0") s after kubectl delete"

# (b) standby through the agents
"$target_bin" run --config "$work/target.yaml" --log-level warn >"$work/target.log" 2>&1 &
target_pid=$!
t1=$(now)
if ! "$source_bin" run --config "$work/source.yaml" --timeout 10m >"$work/source.log" 2>&1; then
  tail -n 30 "$work/source.log" >&2
  echo "bench failover: drasync-source run (once) failed (log: $work/source.log)" >&2
  exit 1
fi
echo "standby: $(grep -c '^kind:' "$work/workloads.yaml") objects replicated by the agents in $(python3 -c "import time; print(f'{time.time() - $t1:.2f}')") s"
if [ "$(ready ml | cut -d' ' -f1)" != 0 ]; then
  echo "bench failover: standby namespaces have running pods before the failover" >&2
  exit 1
fi

# (c) failover, with `run` running and the source gone. The target marks the
# source's session closed at its next presence sweep (every 2 s): before that
# the split-brain guard refuses, as it should. A standby is failed over long
# after it was synced and verified: wait (at most 120 s) until the target's
# verifier has verified every standby workload it applied (the Deployments and
# StatefulSets; the held Pods and Jobs are not on the cluster), else its backlog is looked at
# again in active form while the failed-over pods start.
sleep 3
workloads=$(grep -cE '^kind: (Deployment|StatefulSet)$' "$work/workloads.yaml")
wait_verified failover
api_requests "$work/api-before"
t0=$(now)
# shellcheck disable=SC2046
"$target_bin" failover --config "$work/target.yaml" $(for ns in $namespaces; do echo --namespace "$ns"; done) \
  >"$work/failover.out" 2>"$work/failover.log" || {
  tail -n 30 "$work/failover.out" "$work/failover.log" >&2
  echo "bench failover: drasync-target failover failed (log: $work/failover.log)" >&2
  exit 1
}
cmd_s=$(python3 -c "import time; print(f'{time.time() - $t0:.2f}')")
failover=$(wait_ready ml "$t0" failover)
echo "failover: the command took ${cmd_s} s ($(grep -c . "$work/failover.out") lines); every pod Running with claims allocated ${failover} s after it started"
api_requests "$work/api-after"
api_delta "$work/api-before" "$work/api-after"
ratio=$(python3 -c "print(f'{$failover / $from_scratch:.2f}')")

# (d) planned relocation of the same namespaces, back from standby
"$target_bin" failback --config "$work/target.yaml" >"$work/failback.out" 2>&1 || {
  tail -n 30 "$work/failback.out" >&2
  echo "bench failover: drasync-target failback failed (log: $work/failback.out)" >&2
  exit 1
}
# The same cluster for the relocation: the failed-back pods gone, their
# claims too (those of the templates deleted, the others unallocated).
t0=$(now)
wait_left ml "the failed-back pods" 1 3 4
echo "failback: pods gone, claims deleted or unallocated $(since "$t0") s after the command"
kill "$target_pid" && wait "$target_pid" 2>/dev/null || true
sed -i "s/^sources: \[{name: prod-east, namespaces: \['ml-\*'\]}\]$/sources: [{name: prod-east, namespaces: ['ml-*'], relocate: true}]/" "$work/target.yaml"
grep -q 'relocate: true' "$work/target.yaml"
"$target_bin" run --config "$work/target.yaml" --log-level info >"$work/target-relocate.log" 2>&1 &
target_pid=$!
sed 's/^schedule: {mode: once}$/schedule: {mode: watch, debounce: 200ms}/' "$work/source.yaml" >"$work/source-watch.yaml"
"$source_bin" run --config "$work/source-watch.yaml" >"$work/source-watch.log" 2>&1 &
source_pid=$!
# the agents connected and in step (the source's status says so: nothing
# left to send), and the standby verified, as before the failover
deadline=$(($(date +%s) + 120))
while :; do
  st=$("$source_bin" status --config "$work/source-watch.yaml" 2>/dev/null || true)
  grep -q '^link: *connected' <<<"$st" && grep -q '^backlog: *0 records' <<<"$st" && break
  [ "$(date +%s)" -lt "$deadline" ] ||
    { echo "bench failover: drasync-source run not connected and in step after 120 s" >&2; exit 1; }
  sleep 0.5
done
wait_verified relocation
api_requests "$work/api-relocate-before"
t0=$(now)
# the same poll as for the other phases, beside: when the last pod was ready
wait_ready ml "$t0" relocate >"$work/relocate-ready" &
ready_pid=$!
rpids=()
for ns in $namespaces; do
  {
    rc=0
    "$source_bin" relocate --config "$work/source-watch.yaml" --namespace "$ns" --timeout 3m \
      >"$work/relocate-$ns.out" 2>&1 || rc=$?
    now >"$work/relocate-$ns.end"
    exit "$rc"
  } &
  rpids+=($!)
done
rfail=0
for p in "${rpids[@]}"; do wait "$p" || rfail=$((rfail + 1)); done
relocate=$(since "$t0")
wait "$ready_pid" || true
if [ "$rfail" != 0 ]; then
  for ns in $namespaces; do grep -q '^relocated: ' "$work/relocate-$ns.out" || tail -n 15 "$work/relocate-$ns.out" >&2; done
  echo "bench failover: $rfail of $nss relocate commands failed (logs: $work/relocate-*.out)" >&2
  exit 1
fi
# each command exits 0 only once its namespace was verified; the poll agrees
n=$(ready ml | cut -d' ' -f1)
[ "$n" -ge "$pods" ] ||
  { echo "bench failover: relocate: the commands said verified, but $n of $pods pods are ready" >&2; exit 1; }
echo "relocate: $nss namespaces relocated (every command exited 0, verified active) ${relocate} s after the commands started; every pod Running with claims allocated at $(cat "$work/relocate-ready") s"
api_requests "$work/api-relocate-after"
api_delta "$work/api-relocate-before" "$work/api-relocate-after"
# Where the time went, namespace by namespace (seconds from the start; the
# median and the last): the source's steps from the commands' logs, the
# target's from its relocator's.
python3 - "$work" "$t0" $namespaces <<'PY'
import re, sys, datetime, statistics
work, t0, nss = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
def ts(line):
    m = re.match(r"ts=(\S+)Z ", line)
    return datetime.datetime.fromisoformat(m.group(1)).replace(
        tzinfo=datetime.timezone.utc).timestamp() - t0 if m else None
def events(path, field, ev):
    out = {}
    for line in open(path, errors="replace"):
        m = re.search(r" event=(\S+)", line)
        n = re.search(field + r"=(\S+)", line)
        if m and n and m.group(1) in ev and ts(line) is not None:
            out.setdefault((m.group(1), n.group(1)), ts(line))
    return out
src = {}
for ns in nss:
    src.update(events(f"{work}/relocate-{ns}.out", " namespace",
                      {"relocate_intent", "relocate_final_pass", "relocate_sent", "relocated"}))
    src[("exit", ns)] = float(open(f"{work}/relocate-{ns}.end").read()) - t0
tgt = events(f"{work}/target-relocate.log", " namespace",
             {"relocate_started", "relocate_step", "relocated"})
rows = [("intent recorded", src, "relocate_intent"),
        ("final pass done", src, "relocate_final_pass"),
        ("parked, record queued", src, "relocate_sent"),
        ("target: relocation taken", tgt, "relocate_started"),
        ("target: failed over (its first line)", tgt, "relocate_step"),
        ("target: verified active", tgt, "relocated"),
        ("source: outcome printed", src, "relocated"),
        ("command exited", src, "exit")]
print("  relocate, seconds from the start (median / last of the namespaces):")
for what, d, ev in rows:
    v = sorted(d[(ev, ns)] for ns in nss if (ev, ns) in d)
    if v:
        print(f"    {what}: {statistics.median(v):.2f} / {v[-1]:.2f}"
              + ("" if len(v) == len(nss) else f" ({len(v)} of {len(nss)})"))
PY
relocate_ratio=$(python3 -c "print(f'{$relocate / $from_scratch:.2f}')")
echo "targets: ratio <= 1.0, relocate_ratio <= 1.2"
echo "RESULT failover_s=$failover from_scratch_s=$from_scratch ratio=$ratio relocate_s=$relocate relocate_ratio=$relocate_ratio"
