#!/usr/bin/env bash
# scripts/soak.sh [CTEST ARGS...]: the reliability suite (tests/reliability,
# ctest label reliability) at its full counts (DS_SOAK=1: e.g. 10,000 objects
# and 20 SIGKILLs of each agent), on a tree built as scripts/test.sh builds it
# (warnings as errors, ASan+UBSan). Run it alone on the machine: it starts the
# test clusters (under flock /tmp/ds-cluster.lock when that file exists).
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
grep -E '^([0-9]+/[0-9]+ )?Test +#[0-9]+: ' "$out" | sed 's/^/  /' || true
grep -E '(tests passed|tests failed)' "$out" | sed 's/^/  /' || true
echo "soak figures:"
# ctest -V prefixes each line of a test's output with "N: ".
if ! grep -E '^([0-9]+: )?SOAK ' "$out" | sed -E 's/^([0-9]+: )?SOAK /  /'; then
  echo "  (none printed)"
fi
exit "$rc"
