#!/usr/bin/env bash
# Builds the kubelet (this directory's module: the upstream kubelet command
# from the k8s.io/kubernetes release ../go.mod pins), or reuses the cached
# build, the way ../build.sh builds the control plane.
#
# stdout: the binary's path, one line. Progress and timings go to stderr.
# build.sh --path prints the path the binary has (or will have) and builds
# nothing.
#
# Environment:
#   DS_KUBELET_BIN  a prebuilt kubelet to use instead (nothing is built)
#   DS_KUBE_CACHE   cache root as in ../build.sh (default
#                   ${XDG_CACHE_HOME:-$HOME/.cache}/drasync/kube); the kubelet
#                   goes in its sibling directory .../drasync/kubelet/KEY
#   DS_KUBE_GO_P    go build -p (default 2)
# The key is a hash of this module's go.mod, go.sum and sources. A build
# takes about 5 minutes on 2 cores with a warm Go build cache (the
# control plane's build shares most packages), 110 MB.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

if [ -n "${DS_KUBELET_BIN:-}" ]; then
  [ "${1:-}" = --path ] && { echo "$DS_KUBELET_BIN"; exit 0; }
  if [ ! -x "$DS_KUBELET_BIN" ]; then
    echo "kubelet: DS_KUBELET_BIN=$DS_KUBELET_BIN is not an executable file" >&2
    exit 1
  fi
  echo "$DS_KUBELET_BIN"
  exit 0
fi

key=$(cd "$here" && cat go.mod go.sum ./*.go | sha256sum | cut -c1-16)
kroot=${DS_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/drasync/kube}
dir=$(dirname "$kroot")/kubelet/$key
bin=$dir/kubelet
[ "${1:-}" = --path ] && { echo "$bin"; exit 0; }
if [ -x "$bin" ]; then
  touch "$dir/.used" 2>/dev/null || true
  echo "kubelet: reusing $bin" >&2
  echo "$bin"
  exit 0
fi

GO=$(command -v go || true)
[ -n "$GO" ] || { [ -x /usr/local/go/bin/go ] && GO=/usr/local/go/bin/go; } || true
if [ -z "$GO" ]; then
  echo "kubelet: no Go toolchain found; Go >= 1.21 is needed" >&2
  exit 1
fi
mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
if [ -x "$bin" ]; then
  echo "kubelet: reusing $bin" >&2
  echo "$bin"
  exit 0
fi
export GOTOOLCHAIN=${DS_KUBE_GOTOOLCHAIN:-auto}
export GOFLAGS="-mod=readonly -buildvcs=false"
kver=$(cd "$here" && "$GO" list -m -f '{{.Version}}' k8s.io/kubernetes)
kminor=$(echo "$kver" | cut -d. -f2)
ldflags="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags="$ldflags -X $p.gitVersion=$kver -X $p.gitMajor=1 -X $p.gitMinor=$kminor"
  ldflags="$ldflags -X $p.gitTreeState=clean -X $p.gitCommit=drasync-$key"
done
start=$(date +%s)
echo "kubelet: building Kubernetes $kver kubelet into $bin (-p ${DS_KUBE_GO_P:-2})" >&2
(cd "$here" && "$GO" build -p "${DS_KUBE_GO_P:-2}" -trimpath -ldflags "$ldflags" -o "$bin.tmp" .) >&2
mv "$bin.tmp" "$bin"
touch "$dir/.used"
echo "kubelet: built in $(($(date +%s) - start))s" >&2
echo "$bin"
