#!/usr/bin/env bash
# scripts/bench.sh NAME: builds an optimised, sanitizer-free tree and runs
# benchmark NAME (tests/bench/bench_NAME.c, or tests/bench/NAME.sh when the
# benchmark needs more than one process). The last line printed is
#   RESULT key=value ...
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ]; then
  echo "usage: scripts/bench.sh NAME [ARGS...]" >&2
  echo "benchmarks:" $(ls tests/bench | sed -n -e 's/^bench_\(.*\)\.c$/\1/p' -e 's/^\(.*\)\.sh$/\1/p' | sort -u) >&2
  exit 2
fi
name=$1; shift
scripts/setup.sh >/dev/null
BUILD=${DS_BENCH_BUILD_DIR:-build/bench}
log="$BUILD.log"
mkdir -p "$(dirname "$log")"
if ! { cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
         -DDS_WERROR=ON -DDS_SANITIZE=OFF -DDS_BUILD_TESTS=ON &&
       cmake --build "$BUILD" -j"$(nproc)"; } >"$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "bench: the build failed (full log: $log)" >&2
  exit 1
fi
export DS_BUILD_DIR="$BUILD" DS_FIXTURES="$(cd .. && pwd)/shared/fixtures"
if [ -x "tests/bench/$name.sh" ]; then
  exec "tests/bench/$name.sh" "$@"
elif [ -x "$BUILD/tests/bench_$name" ]; then
  exec "$BUILD/tests/bench_$name" "$@"
fi
echo "bench: no benchmark named '$name'" >&2
exit 2
