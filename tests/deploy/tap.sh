# Sourced by the tests of tests/deploy: one line per check, TAP-style, and
# `fail` set when any failed (each script ends with `exit "$fail"` or its own
# summary of it).
fail=0
ok() { echo "ok - $*"; }
notok() {
  echo "not ok - $*"
  fail=1
}
