#!/usr/bin/env bash
# Builds faultproxy (the Go program beside this script, standard library
# only: it builds offline) or reuses the cached build. The reliability tests
# (tests/reliability/) and the e2e benchmark put it between the agents (tcp)
# and in front of the target's API server (api).
#
# stdout: the binary's path, one line. Progress goes to stderr.
#
# build.sh --path prints the path the binary has (or will have) and builds
# nothing.
#
# Environment:
#   DS_FAULTPROXY_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/drasync/faultproxy)
# The cache key is a hash of go.mod, the *.go files and this script: a change
# to any builds a new binary beside the old one.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

key=$(cd "$here" && cat go.mod $(LC_ALL=C ls *.go) build.sh | sha256sum | cut -c1-16)
root=${DS_FAULTPROXY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/drasync/faultproxy}
dir=$root/$key
bin=$dir/faultproxy

if [ "${1:-}" = --path ]; then
  echo "$bin"
  exit 0
fi
if [ -x "$bin" ]; then
  echo "faultproxy: reusing $bin" >&2
  echo "$bin"
  exit 0
fi

GO=$(command -v go || true)
[ -n "$GO" ] || { [ -x /usr/local/go/bin/go ] && GO=/usr/local/go/bin/go; } || true
[ -n "$GO" ] || { echo "faultproxy: no Go toolchain found; Go >= 1.22 is needed" >&2; exit 1; }

mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
if [ -x "$bin" ]; then # another build finished while we waited
  echo "faultproxy: reusing $bin" >&2
  echo "$bin"
  exit 0
fi
# No module is required: nothing is downloaded, not even a toolchain.
export GOFLAGS="-mod=readonly -buildvcs=false" GOTOOLCHAIN=local GOPROXY=off
echo "faultproxy: building into $bin" >&2
(cd "$here" && "$GO" build -trimpath -o "$bin.tmp" .) >&2
mv "$bin.tmp" "$bin"
echo "$bin"
