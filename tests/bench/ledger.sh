#!/usr/bin/env bash
# scripts/bench.sh ledger [OBJECTS] [CHANGES]: how big the target's ledger is
# after a long history, against a fresh one of the same objects.
#
# The churn of tests/reliability/itest_ledger_compaction.c, run through ctest in
# the benchmark's tree (its fixtures start the two test clusters; take the
# machine's cluster lock around it: flock /tmp/drasync-cluster.lock ...):
# OBJECTS (default 1000) objects on the source, each changed CHANGES (default 50)
# times, replicated by the real agents (drasync-source run in watch mode,
# drasync-target run) while compaction runs between the apply passes; then the
# same objects synced once into a new ledger. Sizes are of ledger.db once its
# agent stopped (the write-ahead log copied into it).
# Last line: RESULT ledger_bytes_per_live_object=N objects=N changes=N
#   ledger_bytes=N fresh_bytes_per_live_object=N
set -euo pipefail
cd "$(dirname "$0")/../.."
objects=${1:-1000}
changes=${2:-50}
build=${DS_BUILD_DIR:-build/bench}
[[ "$objects" =~ ^[0-9]+$ && "$changes" =~ ^[0-9]+$ && "$objects" -gt 0 && "$changes" -gt 0 ]] ||
  { echo "usage: scripts/bench.sh ledger [OBJECTS] [CHANGES] (numbers)" >&2; exit 2; }
[ -x "$build/tests/itest_ledger_compaction" ] ||
  { echo "bench ledger: no $build/tests/itest_ledger_compaction (build with -DDS_BUILD_TESTS=ON)" >&2; exit 2; }
echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "churn: $objects objects x $changes changes"
out=$build/bench-ledger.log
rc=0
(cd "$build" && DS_COMPACT_OBJECTS=$objects DS_COMPACT_CHANGES=$changes \
  ctest --output-on-failure -V -R '^itest_ledger_compaction$') >"$out" 2>&1 || rc=$?
# ctest -V prefixes each line of a test's output with "N: ".
line=$(sed -nE 's/^([0-9]+: )?SOAK test=ledger_compaction //p' "$out" | tail -n 1)
if [ -z "$line" ]; then
  tail -n 60 "$out" >&2
  echo "bench ledger: the churn did not finish (ctest exited $rc; full output: $out)" >&2
  exit 1
fi
val() { sed -nE "s/.*(^| )$1=([0-9.]+).*/\\2/p" <<<"$line"; }
bytes=$(val ledger_bytes)
fresh=$(val fresh_bytes)
echo "ledger after the churn: $bytes bytes; fresh: $fresh bytes; factor $(val factor)" \
  "(ctest exited $rc; full output: $out)"
echo "RESULT ledger_bytes_per_live_object=$((bytes / objects)) objects=$objects" \
  "changes=$changes ledger_bytes=$bytes fresh_bytes_per_live_object=$((fresh / objects))"
