#!/usr/bin/env bash
# scripts/bench.sh wire [OBJECTS]: the link's compression candidates over the
# e2e benchmark's object mix (tests/bench/bench_wire.c says what each is):
# loadgen's mixed mode (OBJECTS, default 10000, 10 namespaces) dry-run created
# on one local API server (-dump: what the server returns), then bench_wire
# over that file. No agents, no sockets.
# DS_BENCH_WIRE_DUMP: an existing dump (no cluster then).
# Last line: RESULT json_bytes_per_obj=N record_ratio=X zbatch3_ratio=X ... (bench_wire.c)
set -euo pipefail
# shellcheck source=tests/bench/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.."
objects=${1:-10000}
build=${DS_BUILD_DIR:-build/bench}
if [ -n "${DS_BENCH_WIRE_DUMP:-}" ]; then
  exec "$build/tests/bench_wire" --dump "$DS_BENCH_WIRE_DUMP"
fi
bench_start wire "$build/agent-source/drasync-source"
ns=$(seq -f 'bench-src-%g' 0 9 | paste -sd, -)
"$loadgen" -kubeconfig "$admin" -mode mixed -namespaces "$ns" -count "$objects" \
  -prefix mixed -dump "$work/source.ndjson" >/dev/null
"$build/tests/bench_wire" --dump "$work/source.ndjson"
