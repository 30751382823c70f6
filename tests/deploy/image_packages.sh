#!/usr/bin/env bash
# The runtime stage of deploy/Containerfile installs exactly the Debian
# packages that own the shared libraries `ldd` reports for the built
# drasync-source and drasync-target: a library added to the build (or one
# dropped) fails this test until the list between the runtime-libraries
# markers says the same. The Containerfile itself cannot be built here (no
# image registry); this keeps its package list true.
#
#   image_packages.sh [--print]   (--print: the list the binaries need, in
#                                  the Containerfile's form)
# Environment: DS_SOURCE_BIN, DS_TARGET_BIN (the built agents), DS_CONTAINERFILE.
#
# A build with DS_SANITIZE=ON also loads gcc's ASan and UBSan runtimes; the
# image is built with DS_SANITIZE=OFF, so their packages are left out.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
containerfile=${DS_CONTAINERFILE:-$here/../../deploy/Containerfile}
fail() {
  echo "image_packages: $*" >&2
  exit 1
}
[ -x "${DS_SOURCE_BIN:-}" ] || fail "DS_SOURCE_BIN is not an executable (${DS_SOURCE_BIN:-unset})"
[ -x "${DS_TARGET_BIN:-}" ] || fail "DS_TARGET_BIN is not an executable (${DS_TARGET_BIN:-unset})"

libs=$(mktemp)
trap 'rm -f "$libs"' EXIT
for bin in "$DS_SOURCE_BIN" "$DS_TARGET_BIN"; do
  # "libx.so.1 => /path (0x...)", "/lib64/ld-linux-x86-64.so.2 (0x...)";
  # linux-vdso has no file.
  ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'
  if ldd "$bin" | grep -q 'not found'; then
    fail "$bin: ldd finds no file for: $(ldd "$bin" | grep 'not found')"
  fi
done | sort -u >"$libs"
[ -s "$libs" ] || fail "ldd reported no library for the agents"

# The package dpkg records for each library, in one dpkg-query: merged /usr
# means dpkg may know /usr/lib/x/libz.so.1 as /lib/x/libz.so.1, or only the
# path before symlinks are resolved.
cands=$(mktemp)
trap 'rm -f "$libs" "$cands"' EXIT
while read -r lib; do
  case $(basename "$lib") in
  libasan.so* | libubsan.so* | liblsan.so*) continue ;; # DS_SANITIZE builds only
  esac
  real=$(realpath "$lib")
  printf '%s\t%s\n' "$lib" "$real" "$lib" "${real#/usr}" "$lib" "$lib" "$lib" "${lib#/usr}" "$lib" "/usr$lib"
done <"$libs" >"$cands"
owners=$(cut -f2 "$cands" | sort -u | xargs dpkg-query -S 2>/dev/null || true)
need=$(
  cut -f1 "$cands" | sort -u | while read -r lib; do
    pkg=$(awk -F'\t' -v l="$lib" '$1 == l { print $2 }' "$cands" | while read -r cand; do
      printf '%s\n' "$owners" | awk -v c="$cand" '{ p = $0; sub(/: .*/, "", p); f = $0; sub(/^.*: /, "", f) } f == c { print p; exit }'
    done | head -n1 | sed 's/, .*//; s/:[a-z0-9]*$//')
    [ -n "$pkg" ] || fail "$lib (loaded by an agent) belongs to no Debian package"
    echo "$pkg"
  done | sort -u
)

if [ "${1:-}" = --print ]; then
  printf '%s \\\n' $need | sed '$ s/ \\$/"/'
  exit 0
fi

# The ARG between the markers: one package a line, backslash-continued.
have=$(sed -n '/^# runtime-libraries:begin/,/^# runtime-libraries:end/p' "$containerfile" |
  sed '1d;$d' | sed 's/^ARG RUNTIME_LIBRARIES="//; s/["\\]//g' | tr -s ' \t' '\n' | sed '/^$/d')
[ -n "$have" ] || fail "$containerfile has no runtime-libraries block"
[ "$have" = "$(printf '%s\n' "$have" | sort -u)" ] ||
  fail "$containerfile: the runtime-libraries list is not sorted or has duplicates"
grep -q 'apt-get install .*--no-install-recommends' "$containerfile" ||
  fail "$containerfile: apt-get install without --no-install-recommends"
grep -q '\$RUNTIME_LIBRARIES' "$containerfile" || fail "$containerfile never installs \$RUNTIME_LIBRARIES"

missing=$(comm -23 <(printf '%s\n' $need) <(printf '%s\n' $have))
extra=$(comm -13 <(printf '%s\n' $need) <(printf '%s\n' $have))
if [ -n "$missing" ] || [ -n "$extra" ]; then
  [ -z "$missing" ] || echo "image_packages: the agents load libraries of packages the image lacks: $(echo $missing)" >&2
  [ -z "$extra" ] || echo "image_packages: the image installs packages no agent library comes from: $(echo $extra)" >&2
  echo "image_packages: the list the binaries need ($0 --print):" >&2
  "$0" --print >&2
  exit 1
fi

# The runtime user is numeric (Kubernetes' runAsNonRoot can only check a
# numeric USER) and not root.
user=$(sed -n 's/^USER \([^ ]*\).*/\1/p' "$containerfile" | tail -n1)
[[ "$user" =~ ^[0-9]+(:[0-9]+)?$ ]] || fail "$containerfile: the last USER ($user) is not numeric"
[ "${user%%:*}" != 0 ] || fail "$containerfile: the runtime stage runs as root"
echo "image_packages: the image's $(echo $have | wc -w) runtime packages are exactly those owning the $(wc -l <"$libs") libraries the agents load"
