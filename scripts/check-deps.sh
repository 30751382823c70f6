#!/usr/bin/env bash
# Fails when the suite uses a tool or a library that a fresh Debian machine
# would not have after scripts/setup.sh: every file below must belong to a
# package named in scripts/debian-packages.txt, to what those packages Depend
# on (Recommends do not count: apt-get runs with --no-install-recommends), or
# to Debian's essential/required base. This catches the class of miss where a
# machine that had a package installed by hand hides it (clang without
# libclang-rt-14-dev linked nothing with -fsanitize=fuzzer on a fresh machine).
#
# Usage: scripts/check-deps.sh [BUILD_DIR]   (BUILD_DIR: read its CMakeCache for
#        the compilers; default build/test)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build/test}

mapfile -t named < <(sed 's/#.*//' scripts/debian-packages.txt | tr -s ' \t' '\n' | sed '/^$/d')

# What a fresh machine has: the named packages and their Depends/Pre-Depends,
# recursively, plus the essential and required packages of every Debian.
allowed=$(mktemp)
trap 'rm -f "$allowed"' EXIT
{
  printf '%s\n' "${named[@]}"
  apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
    --no-breaks --no-replaces --no-enhances "${named[@]}" 2>/dev/null |
    sed -n 's/^ *\(Pre\)\{0,1\}Depends: *//p; s/^ \{2,\}\([a-z0-9][^ <>]*\)$/\1/p; /^[a-z0-9]/p' |
    sed 's/:any$//; s/^<\(.*\)>$/\1/'
  dpkg-query -W -f='${Package} ${Essential} ${Priority}\n' |
    awk '$2 == "yes" || $3 == "required" { print $1 }'
} | sed 's/:[a-z0-9]*$//' | sort -u >"$allowed"

fail=0
check_file() { # what file
  local what=$1 file=$2 owners pkg ok=0
  if [ -z "$file" ] || [ ! -e "$file" ]; then
    echo "check-deps: $what: not found (${file:-no path}); add its package to scripts/debian-packages.txt" >&2
    fail=1
    return
  fi
  file=$(realpath "$file")
  # Merged /usr: dpkg may know /usr/bin/sed as /bin/sed.
  if ! owners=$(dpkg-query -S "$file" 2>/dev/null) &&
    ! owners=$(dpkg-query -S "${file#/usr}" 2>/dev/null); then
    echo "check-deps: $what: $file belongs to no Debian package; install it from a package named in scripts/debian-packages.txt" >&2
    fail=1
    return
  fi
  for pkg in $(printf '%s\n' "$owners" | sed 's/: .*//; s/, /\n/g' | sed 's/:[a-z0-9]*$//'); do
    grep -qx "$pkg" "$allowed" && ok=1
  done
  if [ "$ok" -ne 1 ]; then
    echo "check-deps: $what: $file comes from $(printf '%s' "$owners" | sed 's/: .*//'), which scripts/debian-packages.txt neither names nor pulls in by Depends" >&2
    fail=1
  fi
}

# Tools the build, the scripts and the tests run (Go is the exception: the
# control plane needs Go >= 1.21, newer than Debian 12's, see README).
for tool in cmake ninja pkg-config cc gcc clang clang-format protoc-c git sqlite3 openssl \
  curl flock script timeout setsid sha256sum base64 awk sed promtool chromium ldd dpkg-query \
  systemd-analyze mmdebstrap buildah podman skopeo runc dpkg-deb microsocks containerd ctr; do
  check_file "tool $tool" "$(command -v "$tool" || true)"
done

# The scripts run python3; a machine may put another one first on PATH (pyenv),
# a fresh Debian has Debian's.
check_file "tool python3" /usr/bin/python3

# Every pkg-config module CMake asks for.
for mod in $(grep -ho 'pkg_check_modules([A-Z]* REQUIRED IMPORTED_TARGET [a-z0-9.-]*' \
  CMakeLists.txt */CMakeLists.txt | awk '{print $NF}'); do
  check_file "library $mod" "$(pkg-config --variable=pcfiledir "$mod" 2>/dev/null)/$mod.pc"
done

# The sanitizer and fuzzer runtimes the suite links.
cc_bin=gcc
if [ -f "$BUILD/CMakeCache.txt" ]; then
  cc_bin=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$BUILD/CMakeCache.txt")
fi
for lib in libasan.so libubsan.so; do
  check_file "$cc_bin runtime $lib" "$("$cc_bin" -print-file-name="$lib")"
done
for lib in libclang_rt.fuzzer-x86_64.a libclang_rt.asan-x86_64.a libclang_rt.ubsan_standalone-x86_64.a; do
  check_file "clang runtime $lib" "$(clang -print-file-name="$lib")"
done

if [ "$fail" -ne 0 ]; then
  exit 1
fi
echo "check-deps: every tool and library the suite uses comes from scripts/debian-packages.txt"
