#!/usr/bin/env bash
# Builds the Velero benchmark's tools from Go modules, or reuses the cached
# build: velero (CLI and server, one binary), velero-plugin-for-aws (the
# object-store plugin the server loads from its --plugin-dir) and versitygw
# (an S3-compatible object store, Apache-2.0, POSIX backend). Versions are
# pinned in go.mod beside this script (velero, the plugin) and store/go.mod
# (versitygw); nothing of them is in the repository.
#
# stdout: the cache directory, one line, holding
#   DIR/velero                          the velero CLI and server
#   DIR/plugins/velero-plugin-for-aws   the AWS plugin (--plugin-dir DIR/plugins)
#   DIR/versitygw                       the object store
# Progress and timings go to stderr.
#
# build.sh --path prints the directory (built or not) and builds nothing.
#
# Environment:
#   DS_VELERO_DIR     a prebuilt directory of that layout (nothing is built)
#   DS_VELERO_CACHE   cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/drasync/velero)
#   DS_KUBE_GO_P      go build -p (default 2)
# The cache key is a hash of both go.mod/go.sum pairs and this script: a
# change to any builds a new directory beside the old one.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

complete() { [ -x "$1/velero" ] && [ -x "$1/plugins/velero-plugin-for-aws" ] && [ -x "$1/versitygw" ]; }

if [ -n "${DS_VELERO_DIR:-}" ]; then
  if [ "${1:-}" = --path ]; then
    echo "$DS_VELERO_DIR"
    exit 0
  fi
  complete "$DS_VELERO_DIR" || {
    echo "velero: DS_VELERO_DIR=$DS_VELERO_DIR lacks velero, plugins/velero-plugin-for-aws or versitygw" >&2
    exit 1
  }
  echo "$DS_VELERO_DIR"
  exit 0
fi

key=$(cd "$here" && cat go.mod go.sum store/go.mod store/go.sum build.sh | sha256sum | cut -c1-16)
root=${DS_VELERO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/drasync/velero}
dir=$root/$key

if [ "${1:-}" = --path ]; then
  echo "$dir"
  exit 0
fi
if complete "$dir"; then
  echo "velero: reusing $dir" >&2
  echo "$dir"
  exit 0
fi

GO=$(command -v go || true)
[ -n "$GO" ] || { [ -x /usr/local/go/bin/go ] && GO=/usr/local/go/bin/go; } || true
[ -n "$GO" ] || { echo "velero: no Go toolchain found; Go >= 1.26 is needed" >&2; exit 1; }

mkdir -p "$dir/plugins"
exec 9>"$dir/.lock"
flock 9
if complete "$dir"; then # another build finished while we waited
  echo "velero: reusing $dir" >&2
  echo "$dir"
  exit 0
fi
export GOFLAGS="-mod=readonly -buildvcs=false"
p=${DS_KUBE_GO_P:-2}
vver=$(cd "$here" && "$GO" list -m -f '{{.Version}}' github.com/vmware-tanzu/velero)
pver=$(cd "$here" && "$GO" list -m -f '{{.Version}}' github.com/vmware-tanzu/velero-plugin-for-aws)
sver=$(cd "$here/store" && "$GO" list -m -f '{{.Version}}' github.com/versity/versitygw)
start=$(date +%s)
# Velero's hack/build.sh stamps its version into pkg/buildinfo; `velero
# version` and the server's log print it. The server's controller-runtime
# manager would also bind its own metrics listener on :8080 (no flag sets
# it): "0" turns that listener off, so two servers (source and target) run
# side by side on one machine; Velero's metrics stay on --metrics-address.
echo "velero: building velero $vver into $dir (-p $p)" >&2
(cd "$here" && "$GO" build -p "$p" -trimpath \
  -ldflags "-s -w -X github.com/vmware-tanzu/velero/pkg/buildinfo.Version=$vver \
    -X sigs.k8s.io/controller-runtime/pkg/metrics/server.DefaultBindAddress=0" \
  -o "$dir/velero.tmp" github.com/vmware-tanzu/velero/cmd/velero) >&2
mv "$dir/velero.tmp" "$dir/velero"
echo "velero: building velero-plugin-for-aws $pver" >&2
(cd "$here" && "$GO" build -p "$p" -trimpath -ldflags "-s -w" \
  -o "$dir/plugins/velero-plugin-for-aws.tmp" \
  github.com/vmware-tanzu/velero-plugin-for-aws/velero-plugin-for-aws) >&2
mv "$dir/plugins/velero-plugin-for-aws.tmp" "$dir/plugins/velero-plugin-for-aws"
echo "velero: building versitygw $sver" >&2
(cd "$here/store" && "$GO" build -p "$p" -trimpath \
  -ldflags "-s -w -X main.Version=$sver" \
  -o "$dir/versitygw.tmp" github.com/versity/versitygw/cmd/versitygw) >&2
mv "$dir/versitygw.tmp" "$dir/versitygw"
echo "velero: built in $(($(date +%s) - start))s" >&2
echo "$dir"
