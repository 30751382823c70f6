#!/usr/bin/env bash
# The image's pending security updates: every package of a dpkg status file
# (the image's /var/lib/dpkg/status) that has a newer version in a
# -security or -updates suite of this machine's apt indexes (those `apt-get
# update` fetched: /etc/apt/sources.list.d/debian.sources names
# bookworm-security and bookworm-updates), as TSV:
#
#   package  installed  fixed  suite  cves
#
# fixed being the newest such version and suite where it is. cves: the CVE
# ids the Debian changelog names in the entries after the installed
# version, read from the fixed version's .deb (apt-get download from the
# mirror; `apt-get changelog` asks metadata.ftp-master.debian.org, which
# this machine does not reach); "-" when it names none, "?" when the .deb or
# its changelog could not be had.
#
#   scripts/image_vulns.sh STATUS OUT.tsv     prints the number of lines
#
# Environment: DS_VULNS_NO_CHANGELOG=1 leaves the cves column "?" (no
# download).
set -euo pipefail
[ $# -eq 2 ] || {
  echo "usage: $0 STATUS OUT.tsv" >&2
  exit 2
}
status=$1
out=$2
command -v apt-cache >/dev/null || {
  echo "image_vulns: no apt-cache on this machine" >&2
  exit 1
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# package, installed version
awk -F': ' '/^Package:/ { p = $2 } /^Version:/ { v = $2 }
  /^$/ && p != "" { print p "\t" v; p = "" } END { if (p != "") print p "\t" v }' "$status" |
  sort -u >"$tmp/installed"
[ -s "$tmp/installed" ] || {
  echo "image_vulns: $status names no package" >&2
  exit 1
}
# package, version, suite of every -security/-updates index entry
cut -f1 "$tmp/installed" | xargs apt-cache madison 2>/dev/null |
  awk -F' *[|] *' '{ gsub(/^ +| +$/, "", $1); split($3, w, " "); split(w[2], s, "/");
    if (s[1] ~ /-(security|updates)$/) print $1 "\t" $2 "\t" s[1] }' >"$tmp/candidates" || true

# cves PACKAGE INSTALLED FIXED: the CVE ids of the changelog entries newer
# than INSTALLED, from the FIXED .deb.
cves() {
  local p=$1 inst=$2 fixed=$3 deb log
  [ "${DS_VULNS_NO_CHANGELOG:-0}" != 1 ] || {
    echo "?"
    return
  }
  mkdir -p "$tmp/deb"
  (cd "$tmp/deb" && apt-get download -q=2 "$p=$fixed" >/dev/null 2>&1) || {
    echo "?"
    return
  }
  deb=$(ls "$tmp/deb/${p}_"*.deb 2>/dev/null | head -n 1)
  log=$(dpkg-deb --fsys-tarfile "$deb" | tar -t 2>/dev/null |
    grep -E "^\./usr/share/doc/[^/]+/changelog\.Debian(\.[a-z0-9]+)?\.gz$" | head -n 1) || true
  if [ -z "$log" ]; then
    rm -f "$deb"
    echo "?"
    return
  fi
  dpkg-deb --fsys-tarfile "$deb" | tar -xOf - "$log" | zcat >"$tmp/changelog"
  rm -f "$deb"
  # entries from the top down to the installed version
  awk -v inst="$inst" '
    /^[a-z0-9][a-z0-9.+-]* \([^)]*\) / {
      v = $2; gsub(/[()]/, "", v)
      cmd = "dpkg --compare-versions \"" v "\" gt \"" inst "\""
      if (system(cmd) != 0) exit
      keep = 1
    }
    keep { while (match($0, /CVE-[0-9]+-[0-9]+/)) { print substr($0, RSTART, RLENGTH); $0 = substr($0, RSTART + RLENGTH) } }
  ' "$tmp/changelog" | sort -u | paste -sd, - | sed 's/^$/-/'
}

printf 'package\tinstalled\tfixed\tsuite\tcves\n' >"$tmp/out"
n=0
while IFS=$'\t' read -r p inst; do
  best=
  best_suite=
  while IFS=$'\t' read -r cp cv cs; do
    [ "$cp" = "$p" ] || continue
    dpkg --compare-versions "$cv" gt "$inst" || continue
    if [ -z "$best" ] || dpkg --compare-versions "$cv" gt "$best"; then
      best=$cv
      best_suite=$cs
    fi
  done <"$tmp/candidates"
  [ -n "$best" ] || continue
  printf '%s\t%s\t%s\t%s\t%s\n' "$p" "$inst" "$best" "$best_suite" "$(cves "$p" "$inst" "$best")" >>"$tmp/out"
  n=$((n + 1))
done <"$tmp/installed"
mv "$tmp/out" "$out"
echo "$n"
