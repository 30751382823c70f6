#!/usr/bin/env bash
# scripts/image_vulns.sh over this machine's real apt indexes (ctest
# deploy_image_vulns, label image): a dpkg status naming a package of the
# -security suite at a version older than the suite's lists it, with that
# version as fixed, the suite, and the CVE ids of the Debian changelog of the
# fixed .deb (downloaded from the mirror); the same package at the suite's
# version, and a package at a version newer than every index, are not
# listed. Skipped (77) without apt indexes holding a -security suite, or
# when the mirror does not serve the .deb.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=tap.sh
. "$here/tap.sh"

# A package the -security suite updates: openssl's libssl3 if it is there.
pick=
for p in libssl3 libcurl4 libgnutls30 libc6 tzdata; do
  line=$(apt-cache madison "$p" 2>/dev/null | awk -F' *[|] *' '$3 ~ /-security\// { print; exit }') || true
  if [ -n "$line" ]; then
    pick=$p
    break
  fi
done
[ -n "$pick" ] || {
  echo "image_vulns: no -security suite in this machine's apt indexes (apt-get update): skipped" >&2
  exit 77
}
fixed=$(awk -F' *[|] *' '{ print $2 }' <<<"$line")
suite=$(awk -F' *[|] *' '{ split($3, w, " "); split(w[2], s, "/"); print s[1] }' <<<"$line")
# What a stale image holds: an older version another suite has (the point
# release's), else a very old one.
old=0.0.1-1
for v in $(apt-cache madison "$pick" | awk -F' *[|] *' '{ print $2 }'); do
  if dpkg --compare-versions "$v" lt "$fixed" && dpkg --compare-versions "$v" gt "$old"; then
    old=$v
  fi
done
status() {
  printf 'Package: %s\nVersion: %s\nArchitecture: amd64\n\n' "$pick" "$1"
  printf 'Package: libjansson4\nVersion: 99:9.9-9\nArchitecture: amd64\n'
}
status "$old" >"$tmp/stale"
status "$fixed" >"$tmp/current"

n=$("$repo/scripts/image_vulns.sh" "$tmp/stale" "$tmp/stale.tsv")
row=$(awk -F'\t' -v p="$pick" '$1 == p' "$tmp/stale.tsv")
if [ "$n" = 1 ] && [ "$(cut -f2-4 <<<"$row")" = "$old"$'\t'"$fixed"$'\t'"$suite" ]; then
  ok "$pick $old is listed: fixed in $fixed ($suite)"
else
  notok "$pick $old: expected one line '$pick $old $fixed $suite', got $n: $(cat "$tmp/stale.tsv")"
fi
[ "$(head -n 1 "$tmp/stale.tsv")" = $'package\tinstalled\tfixed\tsuite\tcves' ] ||
  notok "the listing's header: $(head -n 1 "$tmp/stale.tsv")"
cves=$(cut -f5 <<<"$row")
case $cves in
"?")
  echo "image_vulns: the mirror did not serve ${pick}_$fixed.deb (or it has no changelog): CVE ids not checked" >&2
  exit 77
  ;;
-) ok "$pick's changelog since $old names no CVE" ;;
*)
  if grep -Eq '^CVE-[0-9]{4}-[0-9]+(,CVE-[0-9]{4}-[0-9]+)*$' <<<"$cves"; then
    ok "$pick: the CVE ids of the changelog since $old: $(tr ',' '\n' <<<"$cves" | wc -l) ($(cut -d, -f1 <<<"$cves"), ...)"
  else
    notok "$pick: the cves column is not a list of CVE ids: $cves"
  fi
  ;;
esac

n=$(DS_VULNS_NO_CHANGELOG=1 "$repo/scripts/image_vulns.sh" "$tmp/current" "$tmp/current.tsv")
if [ "$n" = 0 ] && [ "$(wc -l <"$tmp/current.tsv")" = 1 ]; then
  ok "$pick $fixed and a libjansson4 newer than every index: nothing pending"
else
  notok "nothing should be pending: $(cat "$tmp/current.tsv")"
fi
exit "$fail"
