#!/usr/bin/env bash
# scripts/bench.sh source [MIXED] [CONFIGMAPS]: the exporter, `drasync-source
# run` (schedule: once) as a real process, against one local API server
# (tests/kube/cluster.sh, resource.k8s.io/v1) and a target hosted by
# tests/bench/bench_source.c (an in-process ds_receiver over CURVE behind a
# relay that counts the bytes on the wire):
#   (a) first pass over MIXED objects (default 10000: Deployments,
#       StatefulSets, headless Services, Secrets, ConfigMaps, ServiceAccounts,
#       ResourceClaimTemplates, ResourceClaims, bare Pods, in 10 namespaces):
#       objects/s from the agent's start to its exit with every record
#       acknowledged, and its peak RSS;
#   (b) one ConfigMap changed, the agent run again: records and bytes sent;
#   (c) first pass over CONFIGMAPS ConfigMaps (default 100000, 512 bytes of
#       data each, 4 namespaces), fresh state: the agent's peak RSS.
# The objects are made by tests/bench/loadgen (client-go, built here into the
# build directory) as the cluster admin; the agent reads as a ServiceAccount
# allowed only get/list/watch, as it would inside a cluster.
# Extra arguments for bench_source go in DS_BENCH_SOURCE_ARGS (e.g.
# "--workers 64 --log-level debug").
# Last line: RESULT first_pass_per_s=N one_change_records=N one_change_bytes=N rss_mb_100k=N
set -euo pipefail
# shellcheck source=tests/bench/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.."
mixed=${1:-10000}
configmaps=${2:-100000}
build=${DS_BUILD_DIR:-build/bench}
agent=$build/agent-source/drasync-source
bench_start source "$agent"
# The agent's identity, as inside a cluster: a ServiceAccount token.
bench_identity drasync-source "[get, list, watch]"
kubeconfig=$work/agent.kubeconfig

echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
# shellcheck disable=SC2086
"$build/tests/bench_source" --agent "$agent" --loadgen "$loadgen" \
  --kubeconfig "$kubeconfig" --admin-kubeconfig "$admin" --work "$work" \
  --mixed "$mixed" --configmaps "$configmaps" ${DS_BENCH_SOURCE_ARGS:-}
