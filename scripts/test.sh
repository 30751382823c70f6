#!/usr/bin/env bash
# The whole test suite: setup, a check that every tool and library used comes
# from setup.sh's package list, a format check, a build with warnings as errors
# and ASan+UBSan, the optimised build with warnings as errors, then every test (unit, integration against real API servers,
# transport, fuzz).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

BUILD=${DS_BUILD_DIR:-build/test}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DDS_WERROR=ON -DDS_SANITIZE=ON -DDS_BUILD_TESTS=ON
# A fresh machine has only what setup.sh installs; the tree is formatted.
scripts/check-deps.sh "$BUILD"
scripts/check-format.sh
cmake --build "$BUILD" -j"$(nproc)"
# The optimised build the benchmarks use: its warnings (null dereference,
# array bounds at -O3) are errors too.
cmake -S . -B "$BUILD-release" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DDS_WERROR=ON -DDS_SANITIZE=OFF -DDS_BUILD_TESTS=ON >/dev/null
cmake --build "$BUILD-release" -j"$(nproc)" >"$BUILD-release.log" 2>&1 ||
  { tail -n 40 "$BUILD-release.log" >&2; echo "test: the optimised build failed (log: $BUILD-release.log)" >&2; exit 1; }
cd "$BUILD"
ctest --output-on-failure --timeout 1200 "$@"
