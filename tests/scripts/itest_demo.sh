#!/usr/bin/env bash
# scripts/demo.sh end to end, non-interactively, with this build's agents
# (ctest: label demo; DS_SOURCE_BIN, DS_TARGET_BIN, DS_KUBE_BIN, DS_DEMO_STATE).
# It starts two clusters of its own under DS_DEMO_STATE, so it takes the
# cluster lock (/tmp/ds-cluster.lock) unless a process it runs under already
# holds it (`flock /tmp/ds-cluster.lock scripts/test.sh`), and checks the
# demo's exit status, the lines that say what it showed, its time after
# setup, and that nothing of it is left running.
set -euo pipefail
lock=/tmp/ds-cluster.lock

# held_by_ancestor: the cluster lock is held by this process or one it runs under.
held_by_ancestor() {
  local ino holders h p
  [ -e "$lock" ] || return 1
  ino=$(stat -c %i "$lock")
  # /proc/locks: "N: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE 0 EOF" (waiters have "->" first).
  holders=$(awk -v ino="$ino" '$2 == "FLOCK" { split($6, f, ":"); if (f[3] == ino) print $5 }' /proc/locks)
  for h in $holders; do
    p=$$
    while [ -n "$p" ] && [ "$p" -gt 1 ]; do
      [ "$p" = "$h" ] && return 0
      p=$(awk '/^PPid:/ { print $2 }' "/proc/$p/status" 2>/dev/null)
    done
  done
  return 1
}
if ! held_by_ancestor; then
  exec flock "$lock" "$0" "$@"
fi

: "${DS_SOURCE_BIN:?}" "${DS_TARGET_BIN:?}" "${DS_DEMO_STATE:?}"
repo=$(cd "$(dirname "$0")/../.." && pwd)
name=demo
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# What a failed run kept (its logs) would read as left over by this one.
rm -rf "$DS_DEMO_STATE/$name-work-"*
rc=0
DS_KUBE_STATE=$DS_DEMO_STATE DS_DEMO_NAME=$name "$repo/scripts/demo.sh" --no-setup >"$out" 2>&1 || rc=$?
cat "$out"
echo "----"
fail=0
no() { echo "itest_demo: FAIL: $*" >&2; fail=1; }
[ "$rc" = 0 ] || no "scripts/demo.sh exited $rc"
want() { # REGEX WHAT
  grep -Eq -- "$1" "$out" || no "no line for $2 (/$1/)"
}
want '^demo: [4-9] pods Running on the target, [3-9] claims allocated on gpu\.example\.com devices$' \
  "the pods Running on the target"
want '^  trainer-0 +1/1 +Running ' "trainer-0 Running on the target"
want '^  Deployment ml-team-dr/gpu-app \(active\): verified in .*: 2/2 pods Running, 2 claims allocated$' \
  "gpu-app verified on the target"
want '^  shared-gpu +gpu\.example\.com +gpu-[0-9]+ ' "the shared claim allocated from a target device"
want 'rewrite +Deployment ml-team-dr/gpu-app container=inference entry=gpu: resourceClaimTemplateName=gpu-template -> resourceClaimTemplateName=dr-gpu-template' \
  "the mapping report's rewrite"
want 'deviceclass ResourceClaim ml-team-dr/shared-gpu entry=gpu: deviceClassName=gpu\.nvidia\.com -> gpu\.example\.com' \
  "the device class mapping"
want '^    ResourceClaim +shared-gpu +resource\.k8s\.io/v1beta1 +gpu\.nvidia\.com' "the claim on the source (v1beta1)"
want '^    ResourceClaim +shared-gpu +resource\.k8s\.io/v1 +gpu\.example\.com' "the claim on the target (v1)"
want '^demo: live change: Deployment ml-team/gpu-app replicas 2 -> 3 on the source reached the target in [0-9]+\.[0-9]+ s$' \
  "the measured delay"
want '3/3 pods Running, 3 claims allocated' "the third replica Running on the target"
want 'refused: source prod-east is still connected' "the split-brain guard"
want '^  namespace ml-serving-dr: standby -> active$' "the failover"
want '^  Deployment ml-serving-dr/frontend: replicas 0 -> 1$' "the failover's change"
want '^  Deployment ml-serving-dr/frontend \(active\): verified .*1/1 pods Running, 1 claim allocated$' \
  "the failed-over workload Running"
want '^  namespace ml-serving-dr: active -> standby$' "the failback"
want '^  Deployment ml-serving-dr/frontend \(standby\): verified .*parked' "the failback's standby form"
want '^  ml-serving-dr +standby .* failback ' "status after the failback"
want '^demo: drasync-source run stopped \(exit 0\)$' "the source agent's clean stop"
want '^demo: drasync-target run stopped \(exit 0\)$' "the target agent's clean stop"
want '^demo: OK$' "the demo's end"

# Under a minute after setup.
after=$(sed -n 's/^demo: setup .* s (packages, builds, two clusters); the demo \([0-9.]*\) s after setup$/\1/p' "$out")
if [ -z "$after" ]; then
  no "no line with the time after setup"
elif ! awk -v s="$after" 'BEGIN { exit !(s < 60) }'; then
  no "the demo took $after s after setup (more than a minute)"
fi

# Cleaned up: no cluster, no agent, no work directory left.
left=$(DS_KUBE_STATE=$DS_DEMO_STATE "$repo/tests/kube/cluster.sh" list)
[ -z "$left" ] || no "clusters left running: $left"
for f in /proc/[0-9]*/cmdline; do
  if tr '\0' ' ' <"$f" 2>/dev/null | grep -q -- "$DS_DEMO_STATE/"; then
    no "a process of the demo still runs: $(tr '\0' ' ' <"$f")"
  fi
done
ls -d "$DS_DEMO_STATE/$name-work-"* >/dev/null 2>&1 && no "the work directory was left: $(ls -d "$DS_DEMO_STATE/$name-work-"*)"

[ "$fail" = 0 ] && echo "itest_demo: ok (the demo ${after} s after setup)"
exit "$fail"
