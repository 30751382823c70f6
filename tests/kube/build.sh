#!/usr/bin/env bash
# Builds the control-plane multicall binary (etcd, kube-apiserver,
# kube-scheduler, kube-controller-manager, kubectl, nodeagent) from Go
# modules, or reuses the cached build.
#
# stdout: the binary's path, one line. Progress and timings go to stderr.
#
# build.sh --path prints the path the binary has (or will have) and builds
# nothing.
#
# Environment:
#   DS_KUBE_BIN     a prebuilt binary to use instead (nothing is built)
#   DS_KUBE_CACHE   cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/drasync/kube)
#   DS_KUBE_GO_P    go build -p (default 2)
#   DS_KUBE_CACHE_KEEP_DAYS
#                   cached builds not used for this many days are removed
#                   (default 14; 0 keeps everything)
# The cache key is a hash of go.mod, go.sum and the Go sources, so any
# change to them builds a new binary beside the old one. Each use touches
# DIR/.used; entries (180-270 MB each) left unused longer than the
# keep period are pruned whenever this script runs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

if [ -n "${DS_KUBE_BIN:-}" ]; then
  if [ "${1:-}" = --path ]; then
    echo "$DS_KUBE_BIN"
    exit 0
  fi
  if [ ! -x "$DS_KUBE_BIN" ]; then
    echo "kube: DS_KUBE_BIN=$DS_KUBE_BIN is not an executable file" >&2
    exit 1
  fi
  echo "kube: using prebuilt DS_KUBE_BIN=$DS_KUBE_BIN" >&2
  echo "$DS_KUBE_BIN"
  exit 0
fi

key=$(cd "$here" && cat go.mod go.sum ./*.go compat/go.mod compat/go.sum compat/*.go | sha256sum | cut -c1-16)
root=${DS_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/drasync/kube}
dir=$root/$key
bin=$dir/kube

if [ "${1:-}" = --path ]; then
  echo "$bin"
  exit 0
fi
# prune_cache: remove the other cached builds nobody has used for
# DS_KUBE_CACHE_KEEP_DAYS days. An entry being built holds its lock.
prune_cache() {
  local days=${DS_KUBE_CACHE_KEEP_DAYS:-14} d
  [ "$days" -gt 0 ] 2>/dev/null || return 0
  for d in "$root"/*/; do
    d=${d%/}
    [ "$d" != "$dir" ] && [ -f "$d/.used" ] || continue
    [ -n "$(find "$d/.used" -maxdepth 0 -mtime +"$days" 2>/dev/null)" ] || continue
    if (exec 8>"$d/.lock" && flock -n 8); then
      rm -rf "$d" && echo "kube: removed $d (unused for over $days days)" >&2
    fi
  done
}

if [ -x "$bin" ]; then
  touch "$dir/.used" 2>/dev/null || true
  prune_cache
  echo "kube: reusing $bin" >&2
  echo "$bin"
  exit 0
fi

GO=$(command -v go || true)
[ -n "$GO" ] || { [ -x /usr/local/go/bin/go ] && GO=/usr/local/go/bin/go; } || true
if [ -z "$GO" ]; then
  echo "kube: no Go toolchain found; Go >= 1.21 is needed (it fetches the toolchain go.mod asks for)" >&2
  exit 1
fi
gominor=$("$GO" env GOVERSION | sed -n 's/^go1\.\([0-9]*\).*/\1/p')
if [ -z "$gominor" ] || [ "$gominor" -lt 21 ]; then
  echo "kube: $("$GO" env GOVERSION) is too old; Go >= 1.21 is needed (it fetches the toolchain go.mod asks for)" >&2
  exit 1
fi

mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
if [ -x "$bin" ]; then # another build finished while we waited
  echo "kube: reusing $bin" >&2
  echo "$bin"
  exit 0
fi

# An older local Go fetches the toolchain go.mod asks for through the
# module proxy.
export GOTOOLCHAIN=${DS_KUBE_GOTOOLCHAIN:-auto}
export GOFLAGS="-mod=readonly -buildvcs=false"
# build_one MODULE-DIR OUTPUT: go build of one module, stamped with the
# Kubernetes version it pins.
build_one() {
  local mod=$1 out=$2 kver kminor ldflags p
  kver=$(cd "$mod" && "$GO" list -m -f '{{.Version}}' k8s.io/kubernetes)
  kminor=$(echo "$kver" | cut -d. -f2)
  ldflags="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags="$ldflags -X $p.gitVersion=$kver -X $p.gitMajor=1 -X $p.gitMinor=$kminor"
    ldflags="$ldflags -X $p.gitTreeState=clean -X $p.gitCommit=drasync-$key"
  done
  echo "kube: building Kubernetes $kver ($mod) into $out (-p ${DS_KUBE_GO_P:-2})" >&2
  (cd "$mod" && "$GO" build -p "${DS_KUBE_GO_P:-2}" -trimpath -ldflags "$ldflags" -o "$out.tmp" .) >&2
  mv "$out.tmp" "$out"
}

start=$(date +%s)
build_one "$here" "$dir/kube.new"
# Kubernetes 1.33's scheduler and claim controller, for --dra-api v1beta1.
build_one "$here/compat" "$dir/kube-compat"
mv "$dir/kube.new" "$bin"
ln -sf kube "$dir/kubectl"
touch "$dir/.used"
prune_cache
end=$(date +%s)
echo "kube: built in $((end - start))s" >&2
echo "$bin"
