#!/usr/bin/env bash
# scripts/soak.sh [CTEST ARGS...]: the reliability suite (tests/reliability,
# ctest label reliability) at its full counts (DS_SOAK=1: e.g. 10,000 objects
# and 20 SIGKILLs of each agent; itest_source_quota: 3,000 objects of a noisy
# source over its quotas beside a quiet one, `SOAK test=source_quota ...`;
# itest_ledger_compaction: 1,000 objects changed 500 times each,
# `SOAK test=ledger_compaction ... factor=...`), on a tree built as
# scripts/test.sh builds it (warnings as errors, ASan+UBSan). Run it alone on
# the machine: it starts the
# test clusters (under flock /tmp/ds-cluster.lock when that file exists).
#
# Then the three libFuzzer targets (tests/fuzz) for 10^7 executions each
# (DS_SOAK_FUZZ_RUNS; 0 skips them), config beside wire and ingest on the two
# cores: about 30 minutes more (fuzz_config, at ~6,000 executions a second, sets
# the pace).
#
# Every test prints its figures as lines `SOAK test=NAME key=value ...`
# (kills, objects, seconds, writes, max writes per object...); they are
# gathered at the end, with ctest's verdict. Exit code: ctest's.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
BUILD=${DS_SOAK_BUILD_DIR:-build/soak}
log="$BUILD.log"
mkdir -p "$(dirname "$log")"
if ! { cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
         -DDS_WERROR=ON -DDS_SANITIZE=ON -DDS_BUILD_TESTS=ON &&
       cmake --build "$BUILD" -j"$(nproc)"; } >"$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "soak: the build failed (full log: $log)" >&2
  exit 1
fi
out="$PWD/$BUILD/soak-output.log"
lock=()
if [ -e /tmp/ds-cluster.lock ] && command -v flock >/dev/null; then
  lock=(flock /tmp/ds-cluster.lock)
fi
start=$(date +%s)
set +e
(cd "$BUILD" && DS_SOAK=1 "${lock[@]}" ctest -L reliability -V "$@") >"$out" 2>&1
rc=$?
set -e
echo "soak: ctest -L reliability with DS_SOAK=1 exited $rc after $(( $(date +%s) - start )) s" \
  "(full output: $out)"

# The fuzz targets at depth, each line `SOAK test=fuzz_T runs=N seconds=S rc=RC`.
runs=${DS_SOAK_FUZZ_RUNS:-10000000}
fuzz_one() { # TARGET
  local t0=$SECONDS r=0 done
  tests/fuzz/run.sh "$1" "$fuzz" "RUNS=$runs" >"$fuzz/$1.log" 2>&1 || r=$?
  done=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$fuzz/$1.log" | tail -n 1)
  echo "SOAK test=fuzz_$1 runs=${done:-0} seconds=$((SECONDS - t0)) rc=$r" >>"$out"
  return "$r"
}
if [ "$runs" -gt 0 ]; then
  fuzz="$PWD/$BUILD/fuzz"
  frc=0
  if tests/fuzz/run.sh build "$fuzz" >>"$out" 2>&1; then
    fuzz_one config & cfg_pid=$!
    fuzz_one wire || frc=$?
    fuzz_one ingest || frc=$?
    wait "$cfg_pid" || frc=$?
  else
    frc=1
  fi
  echo "soak: the fuzz targets ($runs runs each) exited $frc (logs: $fuzz/*.log, artifacts:" \
    "$fuzz/*-artifacts)"
  [ "$frc" -eq 0 ] || [ "$rc" -ne 0 ] || rc=$frc
fi
grep -E '^([0-9]+/[0-9]+ )?Test +#[0-9]+: ' "$out" | sed 's/^/  /' || true
grep -E '(tests passed|tests failed)' "$out" | sed 's/^/  /' || true
echo "soak figures:"
# ctest -V prefixes each line of a test's output with "N: ".
if ! grep -E '^([0-9]+: )?SOAK ' "$out" | sed -E 's/^([0-9]+: )?SOAK /  /'; then
  echo "  (none printed)"
fi
exit "$rc"
