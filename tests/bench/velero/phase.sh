#!/usr/bin/env bash
# bench_e2e's velero phase (scripts/bench.sh e2e, DS_BENCH_E2E_PHASES=velero):
# the benchmark's objects moved by Velero from the source cluster to the
# target, as its migration case does it, between the same clusters as
# drasync, in the same run.
#
#   phase.sh --kube-bin BIN --loadgen BIN --source-admin KC --target-admin KC
#            --work DIR --objects N --namespaces K [--src-prefix bench-src]
#            [--dst-prefix velero] [--change NS/NAME]
#
# velero.sh up starts versitygw and a Velero server for each cluster. Then:
#   full: `velero backup create` of the source's K namespaces, the
#       benchmark's nine kinds (those of the kubectl phase), its label
#       (app.kubernetes.io/managed-by=drasync-loadgen); Completed; the
#       target's server sees it in the bucket (its backup sync); `velero
#       restore create --namespace-mappings SRC-i:DST-i`; Completed; every
#       one of the N objects present in the target's DST-* namespaces.
#       Seconds from the backup's creation to all of that: N / s.
#   one change: ConfigMap NS/NAME changed on the source (loadgen -patch);
#       the next backup (the same spec), and a restore of it with
#       --existing-resource-policy=update (without it Velero leaves an
#       object that exists alone, change or not); until the target's copy
#       has the change: seconds, the backup's bytes in the bucket, and the
#       target API server's write requests (apiserver_request_total, every
#       verb but GET, LIST and WATCH) outside velero.io and in it.
#   rss: VmHWM of each Velero server (its own process; the plugins are
#       processes of their own, forked per backup and restore).
# Each step prints a line; the last line:
#   velero per_s=N seconds=X backup_s=X sync_s=X restore_s=X restored=N
#     warnings=N errors=N one_change_s=X one_change_bytes=N one_change_writes=N
#     one_change_velero_writes=N rss_mb_source=N rss_mb_target=N
# The servers are stopped and the DST-* namespaces deleted at the end.
# Environment: DS_VELERO_KEEP=1 keeps the servers and namespaces.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

kbin="" loadgen="" src_kc="" dst_kc="" work="" objects="" nns=""
src_prefix=bench-src dst_prefix=velero change=""
while [ $# -gt 0 ]; do
  case $1 in
  --kube-bin) kbin=$2 ;;
  --loadgen) loadgen=$2 ;;
  --source-admin) src_kc=$2 ;;
  --target-admin) dst_kc=$2 ;;
  --work) work=$2 ;;
  --objects) objects=$2 ;;
  --namespaces) nns=$2 ;;
  --src-prefix) src_prefix=$2 ;;
  --dst-prefix) dst_prefix=$2 ;;
  --change) change=$2 ;;
  *) echo "velero phase: unknown option $1" >&2; exit 2 ;;
  esac
  shift 2
done
[ -n "$kbin" ] && [ -n "$loadgen" ] && [ -n "$src_kc" ] && [ -n "$dst_kc" ] && [ -n "$work" ] &&
  [ -n "$objects" ] && [ -n "$nns" ] || { sed -n '5,8p' "$0" >&2; exit 2; }
[ -n "$change" ] || change=$src_prefix-0/mixed-configmap-4
vw=$work/velero
mkdir -p "$vw"
export DS_KUBE_BIN=$kbin

die() {
  echo "velero phase: $*" >&2
  exit 1
}
now() { echo "$EPOCHREALTIME"; }
sub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
ksrc() { "$kbin" kubectl --kubeconfig "$src_kc" "$@"; }
kdst() { "$kbin" kubectl --kubeconfig "$dst_kc" "$@"; }
vsrc() { "$here/velero.sh" cli "$vw" source "$@"; }
vdst() { "$here/velero.sh" cli "$vw" target "$@"; }
cleanup() {
  [ -z "${DS_VELERO_KEEP:-}" ] || return 0
  "$here/velero.sh" down "$vw" || true
}
trap cleanup EXIT

kinds=deployments.apps,statefulsets.apps,services,secrets,configmaps,serviceaccounts
kinds=$kinds,resourceclaimtemplates.resource.k8s.io,resourceclaims.resource.k8s.io,pods
label=app.kubernetes.io/managed-by=drasync-loadgen
src_ns="" map=""
for i in $(seq 0 $((nns - 1))); do
  src_ns=$src_ns${src_ns:+,}$src_prefix-$i
  map=$map${map:+,}$src_prefix-$i:$dst_prefix-$i
done

# wait_phase SIDE KIND NAME SECONDS: until .status.phase is final; prints it.
wait_phase() {
  local k=ksrc p end=$(($(date +%s) + $4))
  [ "$1" = target ] && k=kdst
  while :; do
    p=$($k -n velero get "$2" "$3" -o jsonpath='{.status.phase}' 2>/dev/null || true)
    case $p in Completed | PartiallyFailed | Failed | FailedValidation) echo "$p"; return 0 ;; esac
    [ "$(date +%s)" -lt "$end" ] || die "$2 $3 on the $1: phase '$p' after $4 s"
    sleep 0.1
  done
}

# present: how many of the benchmark's objects the target's DST-* namespaces hold.
present() {
  kdst get "$kinds" -A -l "$label" -o custom-columns=NS:.metadata.namespace --no-headers 2>/dev/null |
    grep -c "^$dst_prefix-" || true
}

# writes: the target API server's write requests so far: "OTHER VELERO"
# (outside the velero.io group, in it).
writes() {
  kdst get --raw /metrics | awk '
    /^apiserver_request_total\{/ && /verb="(APPLY|PATCH|POST|PUT|DELETE|CREATE|UPDATE|DELETECOLLECTION)"/ {
      if ($0 ~ /group="velero.io"/) v += $NF; else o += $NF
    }
    END { printf "%d %d\n", o, v }'
}

# backup_restore NAME RESTORE_FLAGS...: backup, sync, restore; sets
# backup_s sync_s restore_s t_start t_done.
backup_restore() {
  local b=$1 p t1 t2
  shift
  t_start=$(now)
  vsrc backup create "$b" --include-namespaces "$src_ns" --include-resources "$kinds" \
    --selector "$label" --snapshot-volumes=false >>"$vw/cli.log" 2>&1 || die "velero backup create $b failed (see $vw/cli.log)"
  p=$(wait_phase source backups.velero.io "$b" 1800)
  t1=$(now)
  [ "$p" = Completed ] || { vsrc backup describe "$b" --details --colorized=false >&2 || true; die "backup $b: $p"; }
  # The target's server lists the bucket every --backup-sync-period.
  until kdst -n velero get backups.velero.io "$b" >/dev/null 2>&1; do
    awk -v a="$t1" -v b="$(now)" 'BEGIN { exit !(b - a > 300) }' && die "backup $b not on the target after 300 s"
    sleep 0.1
  done
  t2=$(now)
  vdst restore create "$b" --from-backup "$b" --namespace-mappings "$map" "$@" \
    >>"$vw/cli.log" 2>&1 || die "velero restore create $b failed (see $vw/cli.log)"
  restore_phase=$(wait_phase target restores.velero.io "$b" 1800)
  t_done=$(now)
  backup_s=$(sub "$t_start" "$t1")
  sync_s=$(sub "$t1" "$t2")
  restore_s=$(sub "$t2" "$t_done")
}

echo "velero: machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$here/velero.sh" up "$vw" "$src_kc" "$dst_kc" 2>>"$vw/up.log" || { cat "$vw/up.log" >&2; die "velero.sh up failed"; }
. "$vw/velero.env"
echo "velero: velero $("$velero" version --client-only 2>/dev/null | sed -n 's/^[[:space:]]*Version: //p'), its AWS plugin and versitygw from $(dirname "$velero") (tests/bench/velero/build.sh)"

# ---- full: N objects --------------------------------------------------------
backup_restore full
[ "$restore_phase" = Completed ] || [ "$restore_phase" = PartiallyFailed ] ||
  { vdst restore describe full --details --colorized=false >&2 || true; die "restore full: $restore_phase"; }
have=$(present)
while [ "$have" -lt "$objects" ]; do
  awk -v a="$t_done" -v b="$(now)" 'BEGIN { exit !(b - a > 120) }' &&
    die "restore full $restore_phase: $have of $objects objects in $dst_prefix-* after 120 s"
  sleep 0.5
  t_done=$(now)
  have=$(present)
done
secs=$(sub "$t_start" "$t_done")
full="backup_s=$backup_s sync_s=$sync_s restore_s=$restore_s"
per_s=$(awk -v n="$objects" -v s="$secs" 'BEGIN { printf "%.1f", n / s }')
bstat=$(ksrc -n velero get backups.velero.io full -o jsonpath='{.status.progress.itemsBackedUp} {.status.warnings} {.status.errors}')
rstat=$(kdst -n velero get restores.velero.io full -o jsonpath='{.status.progress.itemsRestored} {.status.warnings} {.status.errors}')
read -r restored rwarn rerr <<<"$rstat"
echo "velero: full: backup of $objects objects Completed in $backup_s s (items, warnings, errors: $bstat), on the target after $sync_s s, restore $restore_phase in $restore_s s (items restored, warnings, errors: $rstat); $have objects in $dst_prefix-*: $secs s, $per_s objects/s"
if [ "$restore_phase" != Completed ]; then
  vdst restore describe full --details --colorized=false 2>&1 | sed -n '1,60p' | sed 's/^/velero:   /'
fi
full_bytes=$(du -sb "$s3_root/backups/full" | cut -f1)
echo "velero: full: the backup in the bucket: $full_bytes bytes ($(ls "$s3_root/backups/full" | tr '\n' ' '))"

# ---- one change ---------------------------------------------------------------
cm_ns=${change%%/*}
cm=${change#*/}
dst_cm_ns=$dst_prefix-${cm_ns##*-}
sleep 2 # what the restore left in flight
read -r w0 v0 <<<"$(writes)"
"$loadgen" -kubeconfig "$src_kc" -patch "$change" >/dev/null
want=$(ksrc -n "$cm_ns" get configmap "$cm" -o jsonpath='{.data.drasync-bench-change}')
backup_restore one --existing-resource-policy=update
[ "$restore_phase" = Completed ] || [ "$restore_phase" = PartiallyFailed ] || die "restore one: $restore_phase"
got=$(kdst -n "$dst_cm_ns" get configmap "$cm" -o jsonpath='{.data.drasync-bench-change}')
[ "$got" = "$want" ] || die "one change: $dst_cm_ns/$cm has '$got' after the restore, not '$want'"
one_s=$(sub "$t_start" "$t_done")
read -r w1 v1 <<<"$(writes)"
one_bytes=$(du -sb "$s3_root/backups/one" | cut -f1)
ow=$((w1 - w0))
ov=$((v1 - v0))
echo "velero: one change: $change patched; the next backup Completed in $backup_s s, on the target after $sync_s s, restore (--existing-resource-policy=update) $restore_phase in $restore_s s: the change on the target $one_s s after the backup's start; the backup in the bucket $one_bytes bytes; writes on the target API server: $ow to the objects, $ov to Velero's own (velero.io)"

read -r rss_src rss_dst <<<"$("$here/velero.sh" rss "$vw" | sed 's/[a-z]*=//g')"
echo "velero: rss: peak RSS (VmHWM) of the velero server for the source $rss_src MB, for the target $rss_dst MB"
if [ -z "${DS_VELERO_KEEP:-}" ]; then
  "$here/velero.sh" down "$vw"
  t0=$(now)
  kdst get namespaces -o name | grep "^namespace/$dst_prefix-" | xargs -r "$kbin" kubectl --kubeconfig "$dst_kc" delete --wait=true --timeout=900s >/dev/null
  echo "velero: settle: the target's namespaces $dst_prefix-* deleted in $(sub "$t0" "$(now)") s"
fi
echo "velero per_s=$per_s seconds=$secs $full restored=${restored:-0} warnings=${rwarn:-0} errors=${rerr:-0} one_change_s=$one_s one_change_bytes=$one_bytes one_change_writes=$ow one_change_velero_writes=$ov rss_mb_source=$rss_src rss_mb_target=$rss_dst"
