#!/usr/bin/env bash
# scripts/bench.sh e2e [OBJECTS]: drasync end to end between two local API
# servers (tests/kube/cluster.sh, both resource.k8s.io/v1), both agents as
# real processes: `drasync-source run` (watch) over CURVE ZeroMQ to
# `drasync-target run`, keys from their keygen, each agent a ServiceAccount
# of its cluster (the source: get/list/watch only; the target: everything).
# tests/bench/bench_e2e.c drives the phases (its header says what each
# measures):
#   ceiling  client-go server-side apply of the same objects into the target
#   sync     OBJECTS (default 10000) mixed objects, 10 namespaces: objects/s
#            from the source's start to all applied; ratio to the ceiling
#   rpo      200 ConfigMap changes in watch mode: p50/p99 until the target shows each
#   kubectl  kubectl get -o json | tests/bench/e2e_sanitize.py | kubectl apply --server-side
#   wan      the sync through tests/kube/faultproxy (25 ms each way, 100 Mbit/s):
#            seconds, bytes on the wire per object against the objects' JSON size;
#            then one change in the synced objects: records, bytes, target writes
#   wan-slow the sync through a slow, far link (100 ms each way, 2 Mbit/s): seconds to
#            every record committed by the target, against the ideal (its wire bytes at
#            2 Mbit/s plus one RTT per credit window), and seconds to all applied
#   velero   (not in the default list) the same objects through Velero
#            (tests/bench/velero/phase.sh: a server for each cluster, one versitygw
#            bucket): backup, restore with --namespace-mappings, objects/s; one
#            ConfigMap changed, the next backup and restore: seconds, bytes,
#            writes; the servers' peak RSS; ratio_vs_velero = sync / velero
#   rss      10,000 then 100,000 ConfigMaps, a fresh pair each: peak RSS of each agent
# Environment (for smaller runs and other binaries):
#   DS_BENCH_E2E_OBJECTS       mixed objects (default 10000; or the first argument)
#   DS_BENCH_E2E_RSS_OBJECTS   ConfigMaps of the rss phase (default 100000)
#   DS_BENCH_E2E_RPO_CHANGES   changes of the rpo phase (default 200)
#   DS_BENCH_E2E_PHASES        comma-separated subset of
#                              ceiling,sync,rpo,kubectl,wan,wan-slow,velero,rss (default: all but velero)
#   DS_BENCH_E2E_ARGS          more bench_e2e options (e.g. "--ceiling-workers 64
#                              --wan-rate-kbit 10000 --log-level warn")
#   DS_VELERO_DIR              prebuilt Velero tools (tests/bench/velero/build.sh builds
#                              and caches them otherwise: the first run takes minutes)
#   DS_FAULTPROXY              the faultproxy binary (default: tests/kube/faultproxy/build.sh;
#                              without one the wan phases are left out)
#   DS_BENCH_E2E_SOURCE_AGENT, DS_BENCH_E2E_TARGET_AGENT: other agents to measure
#   DS_BENCH_KEEP              keep the work directory (configurations, logs, ledgers)
# Run it alone on the machine (flock /tmp/ds-cluster.lock): two clusters and
# both agents share its cores.
# Last line: RESULT sync_per_s=N ceiling_per_s=N ratio=X kubectl_per_s=N wan_s=N
#   wire_bytes_per_obj=N json_bytes_per_obj=N wire_ratio=X wan_slow_s=X wan_slow_ideal_s=X
#   wan_slow_ratio=X wan_slow_applied_s=X rpo_p50_s=X rpo_p99_s=X
#   one_change_records=N one_change_bytes=N one_change_writes=N
#   rss_mb_source_10k=N rss_mb_target_10k=N rss_mb_source=N rss_mb_target=N
#   velero_per_s=N velero_one_change_s=X velero_one_change_bytes=N
#   velero_one_change_writes=N velero_rss_mb=N ratio_vs_velero=X
set -euo pipefail
# shellcheck source=tests/bench/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.."
objects=${1:-${DS_BENCH_E2E_OBJECTS:-10000}}
build=${DS_BUILD_DIR:-build/bench}
source_agent=${DS_BENCH_E2E_SOURCE_AGENT:-$build/agent-source/drasync-source}
target_agent=${DS_BENCH_E2E_TARGET_AGENT:-$build/agent-target/drasync-target}
phases=${DS_BENCH_E2E_PHASES:-ceiling,sync,rpo,kubectl,wan,wan-slow,rss}
if ! "$target_agent" --help 2>/dev/null | grep -q '^  run '; then
  echo "bench e2e: $target_agent has no 'run' command" >&2
  exit 2
fi
faultproxy=${DS_FAULTPROXY:-}
if [ -z "$faultproxy" ] && [ -x tests/kube/faultproxy/build.sh ]; then
  faultproxy=$(tests/kube/faultproxy/build.sh)
fi
if [ -z "$faultproxy" ]; then
  echo "bench e2e: no faultproxy (tests/kube/faultproxy/build.sh or DS_FAULTPROXY): no wan phases" >&2
  faultproxy=-
  phases=$(echo "$phases" | tr , '\n' | grep -vx 'wan\|wan-slow' | paste -sd, -)
fi
# Velero's tools before any cluster starts (built from Go modules, cached).
if echo ",$phases," | grep -q ',velero,'; then
  tests/bench/velero/build.sh >/dev/null
fi

# The source cluster (bench_start), then the target. The source's controllers
# write at 200 requests a second, not 20: the loadgen waits for them to settle
# its Deployments (3 minutes at 20 for 10,000 objects); the target's keep the
# defaults, as a target cluster's would be.
DS_KUBE_CM_API_QPS=${DS_BENCH_E2E_SOURCE_CM_QPS:-200} bench_start e2e "$source_agent"
src_state=$state
src_admin=$admin
bench_identity drasync-source "[get, list, watch]"
mv "$work/agent.kubeconfig" "$work/source.kubeconfig"
target_name=bench-e2e-target-$$
bench_more_cleanup() { "$cluster_sh" down "$target_name" >/dev/null 2>&1; }
"$cluster_sh" up "$target_name" --dra-api v1 >/dev/null
state=$DS_KUBE_STATE/$target_name
admin=$state/admin.kubeconfig
bench_identity drasync-target '["*"]'
mv "$work/agent.kubeconfig" "$work/target.kubeconfig"
# The DeviceClass the objects' claims name.
kubectl_admin apply -f - >/dev/null <<'YAML'
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec: {}
YAML
tgt_admin=$admin
state=$src_state
admin=$src_admin

echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
# shellcheck disable=SC2086
"$build/tests/bench_e2e" --source-agent "$source_agent" --target-agent "$target_agent" \
  --loadgen "$loadgen" --kube-bin "$bin" --faultproxy "$faultproxy" \
  --sanitizer tests/bench/e2e_sanitize.py --velero-phase tests/bench/velero/phase.sh \
  --source-kubeconfig "$work/source.kubeconfig" --target-kubeconfig "$work/target.kubeconfig" \
  --source-admin "$src_admin" --target-admin "$tgt_admin" --work "$work" \
  --objects "$objects" --rss-objects "${DS_BENCH_E2E_RSS_OBJECTS:-100000}" \
  --rpo-changes "${DS_BENCH_E2E_RPO_CHANGES:-200}" --phases "$phases" ${DS_BENCH_E2E_ARGS:-}
