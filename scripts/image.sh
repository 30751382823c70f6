#!/usr/bin/env bash
# Builds the drasync image from the repository with no image registry:
#
#   1. a base made by mmdebstrap from Debian's packages: the runtime libraries
#      read from deploy/Containerfile's runtime-libraries block plus tzdata and
#      coreutils, extracted (no shell, no dpkg, no apt in the image), the state directory
#      /var/lib/drasync (65532:0, 0770) and a dpkg status naming every package
#      extracted; cached under ~/.cache/drasync/image/ by the hash of its inputs;
#   2. the agents built on this host in Release (DS_SANITIZE=OFF), stripped;
#   3. deploy/Containerfile with --build-arg BASE=<the base> and
#      --build-arg AGENTS=<the agents>, so its docker.io stages are skipped.
#
# Output (in $DS_IMAGE_OUT, default build/image): drasync-<version>.oci.tar
# (an OCI archive), drasync-<version>.sbom.tsv (package, version,
# architecture, source from the image's dpkg status),
# drasync-<version>.vulns.tsv (scripts/image_vulns.sh: the packages with a
# newer version in the -security/-updates suites of this machine's apt
# indexes, their CVE ids from the Debian changelog) and the image
# localhost/drasync:<version> in the local container store. Its size and the
# build time are printed.
#
#   scripts/image.sh [--check]   --check: build the image a second time with
#                                no cache and fail unless the layer digests
#                                are the same, and fail when a security
#                                update is pending for the image's packages
#
# A cached base that lacks an update the apt indexes have is built again.
#
# Environment: SOURCE_DATE_EPOCH (default: the last commit's time),
# DS_IMAGE_OUT, DS_IMAGE_CACHE (default ~/.cache/drasync/image),
# DS_APT_SOURCES (default: /etc/apt/sources.list.d/debian.sources or
# /etc/apt/sources.list, the mirror mmdebstrap downloads from).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
start=$(date +%s)
fail() {
  echo "image: $*" >&2
  exit 1
}
for tool in mmdebstrap buildah podman skopeo dpkg-deb cmake; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (scripts/setup.sh installs it)"
done
check=0
[ "${1:-}" != --check ] || check=1

version=$(sed -n 's/^project(drasync VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
[ -n "$version" ] || fail "no project VERSION in CMakeLists.txt"
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}
out=${DS_IMAGE_OUT:-$root/build/image}
cache=${DS_IMAGE_CACHE:-$HOME/.cache/drasync/image}
sources=${DS_APT_SOURCES:-}
if [ -z "$sources" ]; then
  for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
    if [ -s "$f" ]; then
      sources=$f
      break
    fi
  done
fi
[ -s "$sources" ] || fail "no apt sources to give mmdebstrap (set DS_APT_SOURCES)"
mkdir -p "$out" "$cache"

# ---- 1. the base
pkgs=$(sed -n '/^# runtime-libraries:begin/,/^# runtime-libraries:end/p' deploy/Containerfile |
  sed '1d;$d' | sed 's/^ARG RUNTIME_LIBRARIES="//; s/["\\]//g' | tr -s ' \t' '\n' | sed '/^$/d')
[ -n "$pkgs" ] || fail "deploy/Containerfile has no runtime-libraries block"
# tzdata: the zones of cron schedules; coreutils: the chart's init
# containers copy the secret key with `install -m 0400` (still no shell).
pkgs="$pkgs tzdata coreutils"
# What the base is made of: the packages, the mirror, this recipe.
recipe=$(sed -n '/^ *# ---- recipe:begin/,/^ *# ---- recipe:end/p' "$0")
hash=$( (
  echo "$pkgs"
  cat "$sources"
  echo "$recipe"
) | sha256sum | cut -c1-16)
base_tar=$cache/base-$hash.tar
base_ref=localhost/drasync-base:$hash
# A cached base older than the apt indexes (a security or point update came
# since) is built again, so that the image gets the update.
reimport=0
if [ -s "$base_tar" ]; then
  stale=$(mktemp -d)
  tar -xOf "$base_tar" ./var/lib/dpkg/status >"$stale/status"
  n_stale=$(DS_VULNS_NO_CHANGELOG=1 "$root/scripts/image_vulns.sh" "$stale/status" "$stale/updates.tsv")
  if [ "$n_stale" -gt 0 ]; then
    echo "image: the cached base $hash lacks $n_stale updates of the apt indexes ($(tail -n +2 "$stale/updates.tsv" | cut -f1 | paste -sd' ' -)): building it again"
    rm -f "$base_tar"
    reimport=1
  fi
  rm -rf "$stale"
fi
if [ ! -s "$base_tar" ]; then
  echo "image: building the base $hash with mmdebstrap (${sources})"
  tmp=$cache/base-$hash.partial.tar
  # ---- recipe:begin
  # extract: the packages (and what they depend on) unpacked, no maintainer
  # script run, nothing Essential added (mmdebstrap runs no customize hook
  # for this variant, so the rest is done here). A dpkg status is written
  # from the control files of the downloaded .debs (the SBOM's source); apt's
  # state, the .debs and dpkg's other files are dropped; the tar is sorted,
  # numeric-owned and clamped to SOURCE_DATE_EPOCH.
  rootfs=$cache/base-$hash.partial
  rm -rf "$rootfs"
  mmdebstrap --quiet --variant=extract --include="$(echo $pkgs | tr ' ' ',')" \
    --skip=cleanup/apt/cache bookworm "$rootfs" "$sources"
  status=$rootfs/var/lib/dpkg/status
  install -d "$rootfs/var/lib/dpkg"
  find "$rootfs/var/lib/dpkg" -mindepth 1 -delete
  for deb in "$rootfs"/var/cache/apt/archives/*.deb; do
    dpkg-deb -f "$deb" Package Version Architecture Multi-Arch Source Installed-Size Depends \
      Pre-Depends | sed 's/^\(Package: .*\)/\1\nStatus: install ok unpacked/'
    echo
  done >"$status"
  touch -d "@$SOURCE_DATE_EPOCH" "$status"
  rm -rf "$rootfs/var/cache/apt" "$rootfs/var/lib/apt" "$rootfs/etc/apt" "$rootfs/var/log"/* \
    "$rootfs/var/cache/ldconfig" "$rootfs/var/cache/debconf"
  install -d -o 65532 -g 0 -m 0770 "$rootfs/var/lib/drasync"
  tar -C "$rootfs" --sort=name --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" --clamp-mtime \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime -cf "$tmp" .
  rm -rf "$rootfs"
  # ---- recipe:end
  mv "$tmp" "$base_tar"
fi
if [ "$reimport" = 1 ] || ! podman image exists "$base_ref"; then
  # A layer made from the tar as it is: its digest is the tar's.
  podman import --quiet "$base_tar" "$base_ref" >/dev/null
fi

# ---- 2. the agents, built here
bld=$root/build/image-agents
cmake -S . -B "$bld" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDS_WERROR=ON -DDS_SANITIZE=OFF \
  -DDS_BUILD_TESTS=OFF >/dev/null
cmake --build "$bld" -j2 >/dev/null
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
cmake --install "$bld" --prefix "$ctx/out" --strip >/dev/null
printf 'FROM scratch\nCOPY out/bin/drasync-source out/bin/drasync-target /out/bin/\n' >"$ctx/Containerfile"
agents_ref=localhost/drasync-agents:$version
buildah bud --quiet --timestamp "$SOURCE_DATE_EPOCH" -f "$ctx/Containerfile" -t "$agents_ref" "$ctx" >/dev/null

# ---- 3. the image
ref=localhost/drasync:$version
build_image() {
  mkdir -p "$ctx/empty"
  buildah bud --quiet "$@" --timestamp "$SOURCE_DATE_EPOCH" --pull=never \
    --build-arg BASE="$base_ref" --build-arg AGENTS="$agents_ref" \
    -f "$root/deploy/Containerfile" -t "$ref" "$ctx/empty" >/dev/null
  podman image inspect --format '{{range .RootFS.Layers}}{{.}} {{end}}' "$ref"
}
layers=$(build_image)
if [ "$check" = 1 ]; then
  again=$(build_image --no-cache)
  if [ "$layers" != "$again" ]; then
    fail "two builds of the same commit differ: [$layers] then [$again]"
  fi
  echo "image: reproducible: a second build without cache has the same layers"
fi
archive=$out/drasync-$version.oci.tar
rm -f "$archive"
skopeo copy --quiet "containers-storage:$ref" "oci-archive:$archive:$ref"

# ---- 4. the bill of materials: the image's dpkg status
sbom=$out/drasync-$version.sbom.tsv
mnt=$(podman image mount "$ref")
{
  printf 'package\tversion\tarchitecture\tsource\n'
  awk -F': ' '/^Package:/ { p = $2; s = $2 } /^Version:/ { v = $2 } /^Architecture:/ { a = $2 }
    /^Source:/ { s = $2 } /^$/ && p != "" { print p "\t" v "\t" a "\t" s; p = "" }
    END { if (p != "") print p "\t" v "\t" a "\t" s }' "$mnt/var/lib/dpkg/status" | sort
} >"$sbom"
cp "$mnt/var/lib/dpkg/status" "$ctx/status"
podman image unmount "$ref" >/dev/null
n=$(($(wc -l <"$sbom") - 1))
[ "$n" -gt 0 ] || fail "the image's dpkg status names no package"

# ---- 5. the updates pending: packages with a newer version in the
# -security/-updates suites of this machine's apt indexes, with the CVE ids
# of their Debian changelogs
vulns=$out/drasync-$version.vulns.tsv
"$root/scripts/image_vulns.sh" "$ctx/status" "$vulns" >/dev/null
n_security=$(awk -F'\t' 'NR > 1 && $4 ~ /-security$/' "$vulns" | wc -l)
n_updates=$(($(wc -l <"$vulns") - 1 - n_security))

size=$(podman image inspect --format '{{.Size}}' "$ref")
echo "image: $ref: $((size / 1024 / 1024)) MiB ($size bytes) in the store, $(($(stat -c %s "$archive") / 1024 / 1024)) MiB archive"
echo "image: layers: $layers"
echo "image: $archive"
echo "image: $sbom ($n Debian packages)"
echo "image: $vulns ($n_security security updates pending, $n_updates other updates)"
if [ "$check" = 1 ] && [ "$n_security" -gt 0 ]; then
  fail "$n_security security updates pending ($(awk -F'\t' 'NR > 1 && $4 ~ /-security$/ { printf "%s%s %s", sep, $1, $3; sep = ", " }' "$vulns")): build again"
fi
echo "image: built in $(($(date +%s) - start)) s"
