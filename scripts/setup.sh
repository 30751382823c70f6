#!/usr/bin/env bash
# Installs everything the build, the tests and the demo need on a fresh Debian
# machine. Idempotent: a second run installs nothing and returns quickly.
set -euo pipefail
cd "$(dirname "$0")/.."

# The package list is scripts/debian-packages.txt (comments and blank lines ignored).
mapfile -t DEBIAN_PACKAGES < <(sed 's/#.*//' scripts/debian-packages.txt | tr -s ' \t' '\n' | sed '/^$/d')

missing=()
for p in "${DEBIAN_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The real Kubernetes control plane the tests and the demo run against,
# built from Go modules and cached outside the repository.
if [ -x tests/kube/build.sh ]; then
  tests/kube/build.sh
fi
# helm, from its Go module, for the tests of deploy/helm (cached likewise).
if [ -x tests/kube/helm/build.sh ]; then
  tests/kube/helm/build.sh
fi
# faultproxy (standard library only), for the reliability tests and the e2e benchmark.
if [ -x tests/kube/faultproxy/build.sh ]; then
  tests/kube/faultproxy/build.sh
fi
echo "setup: ok"
