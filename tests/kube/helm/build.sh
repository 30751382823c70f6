#!/usr/bin/env bash
# Builds helm (helm.sh/helm/v3, pinned in go.mod beside this script) from its
# Go module, or reuses the cached build. The deploy tests render and lint
# deploy/helm/drasync with it.
#
# stdout: the binary's path, one line. Progress goes to stderr.
#
# build.sh --path prints the path the binary has (or will have) and builds
# nothing.
#
# Environment:
#   DS_HELM_BIN     a prebuilt helm to use instead (nothing is built)
#   DS_HELM_CACHE   cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/drasync/helm)
#   DS_KUBE_GO_P    go build -p (default 2)
# The cache key is a hash of go.mod, go.sum and this script: a change to any
# builds a new binary beside the old one.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

if [ -n "${DS_HELM_BIN:-}" ]; then
  if [ "${1:-}" = --path ]; then
    echo "$DS_HELM_BIN"
    exit 0
  fi
  [ -x "$DS_HELM_BIN" ] || { echo "helm: DS_HELM_BIN=$DS_HELM_BIN is not an executable file" >&2; exit 1; }
  echo "$DS_HELM_BIN"
  exit 0
fi

key=$(cd "$here" && cat go.mod go.sum build.sh | sha256sum | cut -c1-16)
root=${DS_HELM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/drasync/helm}
dir=$root/$key
bin=$dir/helm

if [ "${1:-}" = --path ]; then
  echo "$bin"
  exit 0
fi
if [ -x "$bin" ]; then
  echo "helm: reusing $bin" >&2
  echo "$bin"
  exit 0
fi

GO=$(command -v go || true)
[ -n "$GO" ] || { [ -x /usr/local/go/bin/go ] && GO=/usr/local/go/bin/go; } || true
[ -n "$GO" ] || { echo "helm: no Go toolchain found; Go >= 1.26 is needed" >&2; exit 1; }

mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
if [ -x "$bin" ]; then # another build finished while we waited
  echo "helm: reusing $bin" >&2
  echo "$bin"
  exit 0
fi
export GOFLAGS="-mod=readonly -buildvcs=false"
ver=$(cd "$here" && "$GO" list -m -f '{{.Version}}' helm.sh/helm/v3)
kver=$(cd "$here" && "$GO" list -m -f '{{.Version}}' k8s.io/client-go) # v0.37.0: Kubernetes 1.37
echo "helm: building helm $ver into $bin (-p ${DS_KUBE_GO_P:-2})" >&2
start=$(date +%s)
# As helm's Makefile stamps them: its version, and the Kubernetes version
# `helm template` and `helm lint` assume (.Capabilities.KubeVersion, a
# chart's kubeVersion) from the client-go it is built with.
kminor=$(echo "$kver" | cut -d. -f2)
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$ver"
for p in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  ldflags="$ldflags -X $p.k8sVersionMajor=1 -X $p.k8sVersionMinor=$kminor"
done
(cd "$here" && "$GO" build -p "${DS_KUBE_GO_P:-2}" -trimpath -ldflags "$ldflags" \
  -o "$bin.tmp" helm.sh/helm/v3/cmd/helm) >&2
mv "$bin.tmp" "$bin"
echo "helm: built in $(($(date +%s) - start))s" >&2
echo "$bin"
