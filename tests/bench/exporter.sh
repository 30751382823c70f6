#!/usr/bin/env bash
# scripts/bench.sh exporter [N]: the exporter's peak memory (VmHWM) over a
# pass of N selected ConfigMaps of ~1 KiB (default 100000) and a second pass
# that finds nothing changed, on a local API server of its own
# (tests/kube/cluster.sh). SPEC's bound: 64 MB with 100,000 objects.
# Last line: RESULT objects=N peak_rss_kb=K first_pass_s=S second_pass_s=S
set -euo pipefail
cd "$(dirname "$0")/../.."
n=${1:-100000}
build=${DS_BUILD_DIR:-build/bench}
cluster_sh=${DS_CLUSTER_SH:-tests/kube/cluster.sh}
bin=${DS_KUBE_BIN:-$(tests/kube/build.sh)}
export DS_KUBE_BIN=$bin
export DS_KUBE_STATE=${DS_KUBE_STATE:-/tmp/drasync-kube}
name=bench-exporter-$$
work=$(mktemp -d)
cleanup() {
  "$cluster_sh" down "$name" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
"$cluster_sh" up "$name" --dra-api v1 >/dev/null
admin=$DS_KUBE_STATE/$name/admin.kubeconfig
"$build/tests/bench_exporter" create "$admin" bench-objects "$n"
out=$("$build/tests/bench_exporter" pass "$admin" "$work/state" 2>"$work/log")
echo "$out"
rss=$(sed -n 's/^peak_rss_kb=//p' <<<"$out")
p1=$(sed -n 's/^pass 1: .*seconds=//p' <<<"$out")
p2=$(sed -n 's/^pass 2: .*seconds=//p' <<<"$out")
echo "RESULT objects=$n peak_rss_kb=$rss first_pass_s=$p1 second_pass_s=$p2"
