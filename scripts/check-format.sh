#!/usr/bin/env bash
# Fails when a C file in the repository is not as clang-format (the
# repository's .clang-format) would write it. Fix with:
#   git ls-files '*.c' '*.h' | xargs clang-format -i
set -euo pipefail
cd "$(dirname "$0")/.."
if ! git ls-files -z '*.c' '*.h' | xargs -0 clang-format --dry-run --Werror 2>/tmp/ds-format.$$; then
  grep -E '^[^ ].*: (error|warning):' /tmp/ds-format.$$ | sed 's/: error: .*//; s/: warning: .*//' |
    sort -u | sed 's/^/check-format: not formatted: /' >&2
  rm -f /tmp/ds-format.$$
  echo "check-format: run: git ls-files '*.c' '*.h' | xargs clang-format -i" >&2
  exit 1
fi
rm -f /tmp/ds-format.$$
echo "check-format: $(git ls-files '*.c' '*.h' | wc -l) files formatted"
