#!/usr/bin/env bash
# The libFuzzer targets of tests/fuzz (wire, config, ingest):
#   tests/fuzz/run.sh build OUT_DIR                 build them with clang in OUT_DIR/tree
#   tests/fuzz/run.sh TARGET OUT_DIR SECONDS         fuzz for a time (or RUNS=N executions)
#   tests/fuzz/run.sh replay TARGET OUT_DIR REPLAY SEEDS
#                                                    run REPLAY (tests/fuzz/replay.c built in
#                                                    the ordinary tree) over the seeds
# The corpus starts from the target's committed seeds (tests/fuzz/TARGET/corpus), its
# regressions (tests/fuzz/TARGET/regressions), the example configurations in deploy/
# (config) and every object of the shared DRA fixtures (ingest, written by the
# fuzz_ingest_seeds tool SEEDS), plus what earlier runs in OUT_DIR found. A crash, leak,
# timeout or sanitizer report fails the run and leaves the input in
# OUT_DIR/TARGET-artifacts/: add it to tests/fuzz/TARGET/regressions/, which every test
# run replays (test_fuzz_replay_TARGET).
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
fixtures=${DS_FIXTURES_DIR:-$src/../shared/fixtures}

corpus() { # TARGET DIR SEEDS
  local what=$1 dir=$2 seeds=$3 f
  mkdir -p "$dir"
  for f in "$src/tests/fuzz/$what/corpus" "$src/tests/fuzz/$what/regressions"; do
    if [ -d "$f" ]; then cp "$f"/* "$dir/"; fi
  done
  case $what in
    config)
      grep -l -E '^kind: (Target|Source)Config' "$src"/deploy/*.yaml "$src"/deploy/kustomize/*/*.yaml |
        while read -r f; do cp "$f" "$dir/deploy-$(basename "$(dirname "$f")")-$(basename "$f")"; done ;;
    ingest)
      find "$fixtures" -name '*.yaml' -print0 | sort -z | xargs -0 "$seeds" "$dir" ;;
  esac
}

case $1 in
build)
  out=$2 tree=$2/tree
  mkdir -p "$out"
  clang=$(command -v clang || true)
  [ -n "$clang" ] || { echo "fuzz: clang not found (scripts/setup.sh installs it)" >&2; exit 1; }
  cmake -S "$src" -B "$tree" -G Ninja -DCMAKE_C_COMPILER="$clang" -DCMAKE_BUILD_TYPE=Debug \
    -DDS_FUZZ=ON -DDS_BUILD_TESTS=OFF >"$out/configure.log" 2>&1 ||
    { tail -n 30 "$out/configure.log" >&2; exit 1; }
  cmake --build "$tree" -j"$(nproc)" --target fuzz_wire fuzz_config fuzz_ingest \
    fuzz_ingest_seeds >"$out/build.log" 2>&1 ||
    { grep -E "error|FAILED" -A3 "$out/build.log" | head -n 40 >&2; exit 1; }
  echo "fuzz: targets built in $tree/tests/fuzz"
  ;;
replay)
  what=$2 out=$3 replay=$4 seeds=$5
  rm -rf "$out/$what-replay"
  corpus "$what" "$out/$what-replay" "$seeds"
  exec "$replay" "$out/$what-replay"
  ;;
wire | config | ingest)
  what=$1 out=$2 limit=$3
  bin=$out/tree/tests/fuzz/fuzz_$what
  [ -x "$bin" ] || { echo "fuzz: $bin is not built (run: $0 build $out)" >&2; exit 1; }
  corpus "$what" "$out/$what-corpus" "$out/tree/tests/fuzz/fuzz_ingest_seeds"
  mkdir -p "$out/$what-artifacts"
  case $limit in
    RUNS=*) budget=(-runs="${limit#RUNS=}") ;;
    *) budget=(-max_total_time="$limit") ;;
  esac
  # Inputs up to 64 KiB; zstd and the JSON limits are exercised with what fits.
  exec "$bin" "${budget[@]}" -rss_limit_mb=1024 -max_len=65536 -timeout=10 \
    -print_final_stats=1 -artifact_prefix="$out/$what-artifacts/" "$out/$what-corpus"
  ;;
*)
  echo "usage: $0 build OUT | wire|config|ingest OUT SECONDS|RUNS=N | replay TARGET OUT REPLAY SEEDS" >&2
  exit 2
  ;;
esac
